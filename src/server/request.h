/* sbx: one HTTP request as the route handlers see it. */
#ifndef SBX_SERVER_REQUEST_H
#define SBX_SERVER_REQUEST_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdint.h>

#include "core/core.h"
#include "iso/fs.h"
#include "server/e2b_route.h"
#include "util/buf.h"
#include "util/error.h"

#define SBX_MAX_SEGS 8
#define SBX_JSON_BODY_MAX (1024 * 1024)

enum sbx_body_kind
{
  SBX_BODY_NONE,   /* a body is ignored (and bounded) */
  SBX_BODY_JSON,   /* buffered, <= SBX_JSON_BODY_MAX, parsed by the handler */
  SBX_BODY_SECRET, /* the same, holding a secret: every copy is wiped (routes_secrets.c) */
  SBX_BODY_RAW,    /* buffered raw bytes, <= SBX_JSON_BODY_MAX */
  SBX_BODY_UPLOAD, /* streamed into a file in the sandbox */
  SBX_BODY_E2B_FILES, /* E2B's POST /files: multipart or raw, streamed (e2b_files.c) */
  SBX_BODY_PROXY,  /* streamed to a server in the sandbox (server/proxy.c) */
  SBX_BODY_TEMPLATE, /* spooled to an unnamed file in the state dir (routes_templates.c) */
};

/* How a data-plane (envd) route is authorized; API routes ignore it. */
enum sbx_route_auth
{
  SBX_AUTH_TOKEN = 0,      /* X-Access-Token: the sandbox's access token */
  SBX_AUTH_NONE,           /* GET /health, as envd */
  SBX_AUTH_TOKEN_OR_SIGNED, /* /files: the token, or a URL signed with it (handler checks) */
};

struct sbx_req;
typedef void (*sbx_handler) (struct sbx_req *r);

struct sbx_route
{
  /* "*": any method, and the entry is routed from the raw URI by
     begin_request (the port proxy), never by sbx_route_find. */
  const char *method;
  const char *pattern; /* segments; "*" matches one */
  enum sbx_body_kind body;
  int admin_only;
  sbx_handler handler;
  enum sbx_route_auth auth;
};

struct sbx_proxy;

struct sbx_req
{
  struct MHD_Connection *conn;
  int begun;          /* begin_request ran */
  const char *method; /* the request's (libmicrohttpd's, valid for the request) */
  const char *http_version; /* "HTTP/1.1" (libmicrohttpd's, valid for the request) */
  char *raw_uri;      /* owned: the URI as sent (path and query, not unescaped); may be NULL */
  int admin;          /* came through the unix socket */
  char tenant[80];    /* the key's tenant (TCP) */
  const struct sbx_route *route;
  char path[1024];
  char *segs[SBX_MAX_SEGS];
  int nsegs;
  uint64_t content_length; /* UINT64_MAX when not given */
  struct sbx_buf body;
  int body_too_large;
  int responded;
  int queue_failed; /* MHD could not queue the answer (out of memory) */
  int deferred_tries; /* queueing the deferred answer was refused this often */
  int refused;      /* begin_request turned it away: the handler never runs */
  int out_of_memory; /* an answer could not be made for want of memory */
  /* An answer made before a small body was read is held back until the
     body is in: a client still sending would otherwise see a reset. */
  int defer_replies;
  char allow[64]; /* for a 405: the methods the path takes */
  struct MHD_Response *deferred;
  unsigned deferred_status;
  /* E2B's data plane: which sandbox and port the request is for, and the
     acting user; sb then holds that sandbox. */
  struct sbx_e2b_target e2b;
  char e2b_user[16];
  void *e2b_files; /* POST /files in progress (e2b_files.c) */
  /* uploads */
  struct sbx_sandbox *sb;
  struct sbx_fs_ctx fs;
  struct sbx_fs_upload up;
  int upload_open;
  sbx_error_t *upload_err;
  /* the port proxy (server/proxy.c) */
  const char *proxy_target; /* native route: what follows PORT in raw_uri */
  struct sbx_proxy *proxy;  /* owned until its response takes it */
  int raw_response;         /* a proxied answer: none of our own headers */
  /* the audit record (core/audit.h), made at completion */
  unsigned status;          /* of the answer queued; 0: none */
  char audit_sandbox[SBX_ID_LEN + 1]; /* a sandbox the handler made (create) */
  void *audit_sha;          /* EVP_MD_CTX of an upload's content (routes_files.c) */
  uint64_t audit_size;      /* bytes of it */
  /* a template upload (routes_templates.c): its spool file + 1 (0: none) */
  int tmpl_spool;
  uint64_t tmpl_bytes;
  int tmpl_too_large;
};

/* Tenant filter for the core: NULL for the administrator. */
const char *sbx_req_tenant (const struct sbx_req *r);
const char *sbx_req_query (struct sbx_req *r, const char *name);
/* Responses; each queues exactly one. */
void sbx_reply_json (struct sbx_req *r, unsigned status, json_t *body); /* steals body */
void sbx_reply_error (struct sbx_req *r, sbx_error_t *err);             /* frees err */
void sbx_reply_errorf (struct sbx_req *r, enum sbx_error_kind kind, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
void sbx_reply_empty (struct sbx_req *r, unsigned status);
void sbx_reply_response (struct sbx_req *r, unsigned status, struct MHD_Response *resp);
/* 1 if the client has hung up (for long waits). */
int sbx_req_client_gone (struct sbx_req *r);

/* params.c: strict parsing of JSON bodies and query values. */
int sbx_req_json (struct sbx_req *r, json_t **out, sbx_error_t **err);
/* The same for any body: an empty one is {}; *out is a new reference. */
int sbx_json_body (const char *data, size_t len, json_t **out, sbx_error_t **err);
int sbx_params_only (json_t *o, const char *const *allowed, sbx_error_t **err);
int sbx_param_string (json_t *o, const char *key, const char **out, sbx_error_t **err);
int sbx_param_bool (json_t *o, const char *key, int *out, sbx_error_t **err);
int sbx_param_size (json_t *o, const char *key, uint64_t *out, sbx_error_t **err);
int sbx_param_duration (json_t *o, const char *key, uint64_t *out_ms, sbx_error_t **err);
int sbx_param_cpus (json_t *o, const char *key, uint32_t *milli, sbx_error_t **err);
int sbx_param_uint (json_t *o, const char *key, uint64_t *out, sbx_error_t **err);
/* An object of strings: at most max_entries, keys <= key_max bytes (and
   valid env names when env), values <= value_max, total <= total_max. */
int sbx_param_string_map (json_t *o, const char *key, size_t max_entries, size_t key_max,
                          size_t value_max, size_t total_max, int env, json_t **out,
                          sbx_error_t **err);
/* A terminal: `key` is absent or null (no terminal: *pty stays 0), or
   exactly {"cols": 1..1000, "rows": 1..1000} (*pty = 1 and the size). */
int sbx_param_pty (json_t *o, const char *key, int *pty, unsigned *cols, unsigned *rows,
                   sbx_error_t **err);
int sbx_query_bool (struct sbx_req *r, const char *name, int *out, sbx_error_t **err);
int sbx_query_duration (struct sbx_req *r, const char *name, int64_t *out_ms, sbx_error_t **err);

/* Route handlers. */
void sbx_route_healthz (struct sbx_req *r);
void sbx_route_info (struct sbx_req *r);
void sbx_route_sandbox_create (struct sbx_req *r);
void sbx_route_sandbox_list (struct sbx_req *r);
void sbx_route_sandbox_get (struct sbx_req *r);
void sbx_route_sandbox_kill (struct sbx_req *r);
void sbx_route_sandbox_timeout (struct sbx_req *r);
void sbx_route_sandbox_network (struct sbx_req *r);
void sbx_route_sandbox_metrics (struct sbx_req *r);
void sbx_route_metrics (struct sbx_req *r); /* Prometheus (metrics_prom.c) */
void sbx_route_sandbox_metrics_history (struct sbx_req *r);
void sbx_route_sandbox_pause (struct sbx_req *r);
void sbx_route_sandbox_resume (struct sbx_req *r);
void sbx_route_sandbox_fork (struct sbx_req *r);
void sbx_route_snapshot_create (struct sbx_req *r);
void sbx_route_snapshot_list (struct sbx_req *r);
void sbx_route_snapshot_delete (struct sbx_req *r);
void sbx_route_exec (struct sbx_req *r);
/* routes_code.c: the code interpreter. */
void sbx_route_code (struct sbx_req *r);
void sbx_route_context_list (struct sbx_req *r);
void sbx_route_context_create (struct sbx_req *r);
void sbx_route_context_delete (struct sbx_req *r);
void sbx_route_context_restart (struct sbx_req *r);
void sbx_route_context_fork (struct sbx_req *r);
void sbx_route_process_start (struct sbx_req *r);
void sbx_route_process_list (struct sbx_req *r);
void sbx_route_process_get (struct sbx_req *r);
void sbx_route_process_stdin (struct sbx_req *r);
void sbx_route_process_signal (struct sbx_req *r);
void sbx_route_process_resize (struct sbx_req *r);
void sbx_route_process_wait (struct sbx_req *r);
void sbx_route_process_attach (struct sbx_req *r);
void sbx_route_file_get (struct sbx_req *r);
void sbx_route_file_put (struct sbx_req *r);
void sbx_route_file_delete (struct sbx_req *r);
void sbx_route_file_stat (struct sbx_req *r);
void sbx_route_file_list (struct sbx_req *r);
void sbx_route_file_mkdir (struct sbx_req *r);
void sbx_route_file_move (struct sbx_req *r);
void sbx_route_file_watch (struct sbx_req *r);
void sbx_route_key_create (struct sbx_req *r);
void sbx_route_key_list (struct sbx_req *r);
void sbx_route_key_delete (struct sbx_req *r);
void sbx_route_secret_create (struct sbx_req *r);
void sbx_route_secret_list (struct sbx_req *r);
void sbx_route_secret_delete (struct sbx_req *r);
void sbx_route_audit (struct sbx_req *r);
void sbx_route_template_build (struct sbx_req *r);
void sbx_route_template_list (struct sbx_req *r);
void sbx_route_template_get (struct sbx_req *r);
void sbx_route_template_delete (struct sbx_req *r);
void sbx_route_template_progress (struct sbx_req *r);
void sbx_route_template_cache_get (struct sbx_req *r);
void sbx_route_template_cache_prune (struct sbx_req *r);
/* A template upload's body (routes_templates.c). */
int sbx_templates_upload_begin (struct sbx_req *r, sbx_error_t **err);
void sbx_templates_upload_body (struct sbx_req *r, const char *data, size_t len);

/* Request bodies as options, without a connection or the core (for the
   handlers, unit tests and fuzzers). Each takes the parsed body, returns 0
   or -1 with err set; pointers in the result borrow from body. */
int sbx_create_opts_parse (json_t *body, struct sbx_create_opts *opts, sbx_error_t **err);

struct sbx_exec_request
{
  json_t *body;
  char **argv; /* owned vector; strings borrowed from body or cmd_argv */
  char *cmd_argv[4];
  struct sbx_exec_opts opts;
  struct sbx_buf stdin_bytes;
  int stream;
  int base64;
};
/* Parses body bytes (exec, or a background process when background);
   free e with sbx_exec_request_free whatever the result. */
int sbx_exec_request_parse (const char *data, size_t len, int background,
                            struct sbx_exec_request *e, sbx_error_t **err);
void sbx_exec_request_free (struct sbx_exec_request *e);
/* The signal of a process signal body (SIGTERM when none is given). */
int sbx_signal_request_parse (json_t *body, int *signo, sbx_error_t **err);
/* The size of a process resize body: {"cols": 1..1000, "rows": 1..1000}. */
int sbx_resize_request_parse (json_t *body, unsigned *cols, unsigned *rows, sbx_error_t **err);

/* Files: `path` of a mkdir body normalized into abs (SBX_FS_PATH_MAX). */
int sbx_mkdir_request_parse (json_t *body, char *abs, uint32_t *mode, int *parents,
                             sbx_error_t **err);
/* `from` and `to` of a move body, `to` also normalized into abs. */
int sbx_move_request_parse (json_t *body, const char **from, const char **to, char *abs,
                            int *overwrite, sbx_error_t **err);

/* routes_files.c: open the upload on the first body chunk's call. */
int sbx_files_upload_begin (struct sbx_req *r, sbx_error_t **err);
/* A download's response (server/files_reply.c): the file, from the
   namespace engine's parent or a VM's guest. */
struct MHD_Response *sbx_files_response (const struct sbx_fs_ctx *ctx, const char *path,
                                         sbx_error_t **err);

/* routes_watch.c: one NDJSON line for a watch event (appended to out). */
void sbx_watch_event_line (struct sbx_buf *out, const struct sbx_watch_event *ev);

/* proxy.c: the HTTP proxy to a port inside a sandbox.

   A proxied request is set up before its body is read (the body is
   streamed to the server as it arrives) and answered by the route's
   handler once the body is in:

   1. begin_request, after authorization: sbx_proxy_begin (connect, send the
      request head). On failure, answer the error (sbx_reply_error).
   2. take_body: each chunk goes to sbx_proxy_body (SBX_BODY_PROXY).
   3. the handler, sbx_route_port_proxy: finish the request, read the
      answer's head, and stream its body back.

   The native route is "* /v1/sandboxes/ID/ports/PORT/REST" (begin_request
   calls sbx_route_port_begin). Another router (the E2B layer's Host
   "PORT-ID.DOMAIN" or its E2b-Sandbox-Id/-Port headers) calls
   sbx_proxy_begin itself from begin_request, with the sandbox it resolved
   under its own access rules, and clears r->refused on success. */
extern const struct sbx_route sbx_port_proxy_route;
/* Proxy this request to `port` in sb (borrowed: the proxy takes its own
   reference), as `target` ("/path?query", sent as is). Sets r->route to
   sbx_port_proxy_route unless it already is a SBX_BODY_PROXY route.
   Errors: SBX_E_INVALID (method, target, port, a header), SBX_E_LIMIT
   (the sandbox's proxy places), and those of sbx_sandbox_connect_port. */
int sbx_proxy_begin (struct sbx_req *r, struct sbx_sandbox *sb, unsigned port, const char *target,
                     sbx_error_t **err);
/* The native route's begin: sandbox from segment 2 (this request's
   tenant), port from segment 4, target from r->proxy_target. */
int sbx_route_port_begin (struct sbx_req *r, sbx_error_t **err);
void sbx_proxy_body (struct sbx_req *r, const char *data, size_t len);
void sbx_route_port_proxy (struct sbx_req *r);
void sbx_proxy_free (struct sbx_proxy *p);
/* Before libmicrohttpd stops: wake every proxied wait and wait (up to
   10 s) for the WebSocket relays to end, so none outlives its socket. */
void sbx_proxy_stop_all (void);

/* The sandbox named by segment i, for this request's tenant. */
struct sbx_sandbox *sbx_req_sandbox (struct sbx_req *r, int seg, sbx_error_t **err);

/* Ownership by scope for route handlers: the body a handler parsed and the
   sandbox it looked up are released on every way out of it. */
static inline void
sbx_json_decrefp (json_t **j)
{
  json_decref (*j);
}
static inline void
sbx_sandbox_unrefp (struct sbx_sandbox **sb)
{
  if (*sb)
    sbx_sandbox_unref (*sb);
}
#define cleanup_json __attribute__ ((cleanup (sbx_json_decrefp)))
#define cleanup_sandbox __attribute__ ((cleanup (sbx_sandbox_unrefp)))

#endif
