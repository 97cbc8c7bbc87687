/* sbx CLI: a small HTTP/1.1 client for talking to the daemon.
 *
 * Deliberately not libcurl: loading libcurl and its dependencies costs more
 * per process start than a whole bubblewrap sandbox run, and `sbx run` has
 * to beat that. This client speaks just what the sbx API needs: plain http
 * over a unix socket or TCP, Content-Length request bodies, keep-alive, and
 * Content-Length, chunked or close-delimited response bodies parsed with
 * http_parser.
 */
#ifndef SBX_CLI_HTTP_H
#define SBX_CLI_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/error.h"

/* Where the daemon listens, and how to present ourselves to it. */
struct sbx_http_endpoint
{
  int is_unix;
  char *unix_path;   /* owned; unix socket path, or NULL */
  char *host;        /* owned; TCP host without brackets, or NULL */
  char *port;        /* owned; TCP port, or NULL */
  char *host_header; /* owned; value of the Host header */
  char *base_path;   /* owned; "" or a path prefix without trailing '/' */
  char *auth;        /* owned; value of the Authorization header, or NULL */
  char *display;     /* owned; "unix:/path" or "http://host:port" for messages */
};

/* Parse an http:// URL ("http://HOST[:PORT][/PREFIX]"; HOST may be an IPv6
   literal in brackets). `api_key`, when non-NULL and non-empty, is sent as
   a bearer token. https:// is refused with a message saying so. */
int sbx_http_endpoint_from_url (struct sbx_http_endpoint *ep, const char *url,
                                const char *api_key, sbx_error_t **err);
/* A unix socket endpoint. */
void sbx_http_endpoint_from_unix (struct sbx_http_endpoint *ep, const char *path);
/* $SBX_URL (+ $SBX_API_KEY), else $SBX_STATE/sbx.sock, else
   /var/lib/sbx/sbx.sock. */
int sbx_http_endpoint_from_env (struct sbx_http_endpoint *ep, sbx_error_t **err);
void sbx_http_endpoint_clear (struct sbx_http_endpoint *ep);

struct sbx_http_conn;

/* A connection to `ep` (borrowed: it must outlive the connection). Nothing
   is connected until the first request. */
struct sbx_http_conn *sbx_http_conn_new (const struct sbx_http_endpoint *ep);
void sbx_http_conn_free (struct sbx_http_conn *c);
/* Drop the underlying connection (the next request opens a new one). Used to
   abandon a response midway: the daemon sees the disconnect. */
void sbx_http_conn_reset (struct sbx_http_conn *c);
/* Use `fd`, a connected stream socket, as the connection (takes ownership
   of fd; closes any previous one). For tests over a socketpair. */
void sbx_http_conn_adopt_fd (struct sbx_http_conn *c, int fd);
/* Connect now if not connected yet. */
int sbx_http_conn_connect (struct sbx_http_conn *c, sbx_error_t **err);
/* While `fd` >= 0, every wait on the socket also watches `fd` (the read end
   of a self-pipe written by signal handlers): when it becomes readable the
   request fails with sys_errno EINTR and the connection is dropped. -1
   disarms. The fd is borrowed. */
void sbx_http_conn_set_interrupt_fd (struct sbx_http_conn *c, int fd);
/* 1 if the last failure was failing to connect to the daemon at all. */
int sbx_http_conn_unreachable (const struct sbx_http_conn *c);

struct sbx_http_request
{
  const char *method;       /* "GET", "POST", ... */
  const char *target;       /* path and query, percent-encoded, without the
                               endpoint's base path */
  const char *content_type; /* or NULL */
  const void *body;         /* body bytes (borrowed), or NULL */
  size_t body_len;
  int body_fd;              /* >= 0: send body_len bytes read from this fd
                               (from its current offset) instead of `body` */
  int has_body;             /* send Content-Length even when body_len is 0 */
  /* body_fd: called after each chunk sent (sent of body_len), or NULL */
  void (*on_sent) (void *ctx, uint64_t sent, uint64_t total);
  void *sent_ctx;
};

#define SBX_HTTP_REQUEST_INIT {NULL, NULL, NULL, NULL, 0, -1, 0, NULL, NULL}

/* Receives body bytes of a 2xx response as they arrive. Return -1 with *err
   set to abort the request (the connection is dropped). */
typedef int (*sbx_http_data_cb) (void *ctx, const char *data, size_t len,
                                 sbx_error_t **err);

struct sbx_http_response
{
  int status;
  struct sbx_buf body; /* owned; the collected body (see sbx_http_do) */
};

#define SBX_HTTP_RESPONSE_INIT {0, SBX_BUF_INIT}

/* Send `req` and read the whole response. With `on_data`, the body of a 2xx
   response goes to the callback and nothing is collected; otherwise (and
   always for non-2xx responses, whose bodies are error objects) the body is
   collected into resp->body, failing when it would exceed `max_collect`.
   Returns 0 once a complete response has arrived, whatever its status;
   -1 on connection, protocol or callback errors. A reused keep-alive
   connection that the server had closed is transparently reopened. */
int sbx_http_do (struct sbx_http_conn *c, const struct sbx_http_request *req,
                 sbx_http_data_cb on_data, void *ctx, size_t max_collect,
                 struct sbx_http_response *resp, sbx_error_t **err);

void sbx_http_response_clear (struct sbx_http_response *resp);

/* Append `s` percent-encoded: everything except A-Z a-z 0-9 - . _ ~ (and
   '/', when keep_slash) becomes %XX. For query values and path segments. */
void sbx_url_escape (struct sbx_buf *out, const char *s, int keep_slash);

#endif
