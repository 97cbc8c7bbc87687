/* sbx: the HTTP proxy to a port inside a sandbox (preview URLs).
 *
 * One client request is one connection to the server in the sandbox: the
 * sandbox's init connects it (core/ports.c; the front end has no right to
 * connect anywhere), we send the request head as soon as the client's head
 * is in, stream the body through as libmicrohttpd hands it to us, then
 * parse the answer's status line and headers with http-parser and stream
 * its body back (chunked when the server gave no length). A WebSocket
 * handshake the server accepts (101) turns the connection into a byte
 * relay in both directions, in the connection's own thread, until either
 * side closes or stays silent for the idle timeout.
 *
 * Everything from the sandbox is hostile: its head is bounded (64 KiB,
 * within the idle timeout), every wait is bounded (--proxy-timeout, 60 s by
 * default, without a byte), a malformed answer, an early close or silence
 * is a 502 or 504 for this request only. A slow client or server stalls
 * only its own connection's thread. Each sandbox has at most
 * SBX_PROXY_MAX_PER_SANDBOX proxied requests open.
 *
 * Nothing of the client's credentials reaches the sandbox: X-API-Key,
 * X-Access-Token, every E2b-* header and any header carrying something
 * shaped like an sbx API key ("e2b_" and 40 hex digits; the Authorization
 * header of the native API) are dropped, with the hop-by-hop headers (RFC
 * 9110 7.6.1) and those the Connection header names. Host is kept, as E2B
 * does; X-Forwarded-For gets the client's address.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "server/request.h"
#include "server/route_match.h"
#include "util/log.h"
#include "util/parse.h"

#define HEAD_MAX (64 * 1024) /* the server's status line and headers */
#define READ_CHUNK 16384
#define CONN_TOKENS_MAX 1024 /* bytes of header names listed in Connection */
#define RELAY_PENDING_MAX (64 * 1024) /* bytes read ahead of the other side, per direction */

const struct sbx_route sbx_port_proxy_route
    = {"*", "v1/sandboxes/*/ports/*", SBX_BODY_PROXY, 0, sbx_route_port_proxy};

struct sbx_proxy
{
  struct sbx_sandbox *sb; /* a reference, and one of its proxy places */
  char id[SBX_ID_LEN + 1];
  char mask_host[SBX_MASK_HOST_MAX + 1]; /* the sandbox's (E2B's maskRequestHost), or "" */
  unsigned port;
  int up;        /* the connection to the server, -1 once closed */
  int client_fd; /* borrowed: the client's connection (a hang-up ends every wait) */
  int idle_ms;
  int chunked_out;  /* the request body goes on chunked */
  int head_request; /* HEAD: the answer has no body */
  int ws;           /* a WebSocket handshake was sent on */
  int upgraded;     /* and the server accepted it (101) */
  sbx_error_t *send_err; /* sending the request failed; the rest of the body is dropped */
  /* the answer */
  http_parser parser;
  struct sbx_buf hdrs; /* name\0value\0 ... */
  int hdr_state;       /* 0: none, 1: in a name, 2: in a value */
  size_t head_bytes;
  int interim;         /* parsing a 1xx answer, which is skipped */
  int switched;        /* a 101 nobody asked for */
  int headers_done, message_done, failed;
  uint64_t length;     /* of the body, MHD_SIZE_UNKNOWN when not given */
  struct sbx_buf body; /* decoded body bytes not yet handed to libmicrohttpd
                          (after a 101: the server's first WebSocket bytes) */
  size_t body_off;
  size_t parsed;       /* what the last http_parser_execute consumed */
  char rbuf[READ_CHUNK];
};

/* ---- stopping --------------------------------------------------------------

   A stop must not wait for idle timeouts, nor let libmicrohttpd close a
   WebSocket's socket under its relay: sbx_proxy_stop_all wakes every wait
   (an eventfd that stays readable) and waits for the relays to end. */

static pthread_once_t stop_once = PTHREAD_ONCE_INIT;
static int stop_fd = -1;
static pthread_mutex_t relay_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t relay_cond = PTHREAD_COND_INITIALIZER;
static unsigned relays;

static void
make_stop_fd (void)
{
  /* Without it (no memory), waits end at their timeouts instead. */
  stop_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
}

static int
get_stop_fd (void)
{
  pthread_once (&stop_once, make_stop_fd);
  return stop_fd;
}

void
sbx_proxy_stop_all (void)
{
  uint64_t one = 1;
  struct timespec ts;
  int fd = get_stop_fd ();

  if (fd >= 0 && write (fd, &one, sizeof one) < 0)
    sbx_debug ("proxy: cannot signal the stop: %s", strerror (errno));
  clock_gettime (CLOCK_REALTIME, &ts);
  ts.tv_sec += 10;
  pthread_mutex_lock (&relay_lock);
  while (relays > 0)
    if (pthread_cond_timedwait (&relay_cond, &relay_lock, &ts) == ETIMEDOUT)
      break;
  pthread_mutex_unlock (&relay_lock);
}

/* ---- waiting on the server ---------------------------------------------- */

/* Wait up to ms for `events` on the server's socket. 0: ready (or an error
   the next call reports), -ETIMEDOUT, -ECONNABORTED when the client hung up
   (also what libmicrohttpd's stop does to every connection). */
static int
wait_up (struct sbx_proxy *p, short events, int ms)
{
  for (;;)
    {
      /* poll skips negative fds: no client fd, no stop fd. */
      struct pollfd pfd[3] = {
          {p->up, events, 0}, {p->client_fd, POLLRDHUP, 0}, {get_stop_fd (), POLLIN, 0}};
      int n = poll (pfd, 3, ms);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -errno;
      if (n == 0)
        return -ETIMEDOUT;
      /* Only a hang-up counts: POLLIN may be the client's next request. */
      if (p->client_fd >= 0 && (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return -ECONNABORTED;
      if (pfd[2].revents)
        return -ECONNABORTED; /* the daemon stops */
      if (pfd[0].revents)
        return 0;
    }
}

static int
send_all (struct sbx_proxy *p, struct iovec *iov, int iovcnt, sbx_error_t **err)
{
  while (iovcnt > 0)
    {
      struct msghdr mh = {0};
      ssize_t n;
      mh.msg_iov = iov;
      mh.msg_iovlen = (size_t) iovcnt;
      n = sendmsg (p->up, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0)
        {
          int r;
          if (errno == EINTR)
            continue;
          if (errno != EAGAIN)
            return sbx_err_errno (err, SBX_E_BAD_GATEWAY, errno,
                                  "the server on port %u in sandbox %s closed the connection "
                                  "before reading the whole request",
                                  p->port, p->id);
          r = wait_up (p, POLLOUT, p->idle_ms);
          if (r == -ETIMEDOUT)
            return sbx_err (err, SBX_E_GATEWAY_TIMEOUT,
                            "the server on port %u in sandbox %s read nothing for %d s", p->port,
                            p->id, p->idle_ms / 1000);
          if (r < 0)
            return sbx_err_errno (err, SBX_E_UNAVAILABLE, -r, "the client went away");
          continue;
        }
      while (iovcnt > 0 && (size_t) n >= iov->iov_len)
        {
          n -= (ssize_t) iov->iov_len;
          iov++;
          iovcnt--;
        }
      if (iovcnt > 0)
        {
          iov->iov_base = (char *) iov->iov_base + n;
          iov->iov_len -= (size_t) n;
        }
    }
  return 0;
}

/* Read what the server sent: > 0 bytes, 0 at its end, < 0 -errno
   (-ETIMEDOUT after ms of silence, -ECONNABORTED when the client left). */
static ssize_t
recv_some (struct sbx_proxy *p, int ms)
{
  for (;;)
    {
      ssize_t n = recv (p->up, p->rbuf, sizeof p->rbuf, MSG_DONTWAIT);
      int r;
      if (n >= 0)
        return n;
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN)
        return -errno;
      r = wait_up (p, POLLIN, ms);
      if (r < 0)
        return r;
    }
}

/* ---- parsing the answer -------------------------------------------------- */

static int
on_message_begin (http_parser *hp)
{
  struct sbx_proxy *p = hp->data;

  sbx_buf_reset (&p->hdrs);
  p->hdr_state = 0;
  return 0;
}

static int
on_header_field (http_parser *hp, const char *at, size_t len)
{
  struct sbx_proxy *p = hp->data;

  if (p->hdr_state == 2)
    sbx_buf_append (&p->hdrs, "", 1); /* the previous value ends */
  sbx_buf_append (&p->hdrs, at, len);
  p->hdr_state = 1;
  return p->hdrs.failed ? -1 : 0;
}

static int
on_header_value (http_parser *hp, const char *at, size_t len)
{
  struct sbx_proxy *p = hp->data;

  if (p->hdr_state == 1)
    sbx_buf_append (&p->hdrs, "", 1); /* the name ends */
  sbx_buf_append (&p->hdrs, at, len);
  p->hdr_state = 2;
  return p->hdrs.failed ? -1 : 0;
}

static int
on_headers_complete (http_parser *hp)
{
  struct sbx_proxy *p = hp->data;

  if (p->hdr_state == 2)
    sbx_buf_append (&p->hdrs, "", 1);
  p->hdr_state = 0;
  if (p->hdrs.failed)
    return -1;
  if (hp->status_code == 101)
    {
      /* Only the WebSocket handshake we sent on may be accepted, and
         properly (Upgrade and Connection: upgrade, which set hp->upgrade):
         http-parser then stops at the end of the head. */
      if (!p->ws || !hp->upgrade)
        {
          p->switched = 1;
          return -1;
        }
      p->headers_done = 1;
      p->upgraded = 1;
      p->length = 0;
      return 0;
    }
  if (hp->status_code >= 100 && hp->status_code < 200)
    {
      /* 100 Continue, 103 Early Hints: the real answer follows. */
      p->interim = 1;
      return 0;
    }
  p->headers_done = 1;
  p->length = (hp->flags & F_CHUNKED) || hp->content_length == ULLONG_MAX
                  ? MHD_SIZE_UNKNOWN
                  : hp->content_length;
  /* These have no body whatever their Content-Length says (RFC 9110
     6.4.1); libmicrohttpd must not wait for one. */
  if (hp->status_code == 204 || hp->status_code == 304)
    p->length = 0;
  /* 1: no body follows (the answer to a HEAD says the length of one). */
  return p->head_request ? 1 : 0;
}

static int
on_body (http_parser *hp, const char *at, size_t len)
{
  struct sbx_proxy *p = hp->data;

  if (p->interim)
    return 0;
  sbx_buf_append (&p->body, at, len);
  return p->body.failed ? -1 : 0;
}

static int
on_message_complete (http_parser *hp)
{
  struct sbx_proxy *p = hp->data;

  if (p->interim)
    {
      p->interim = 0;
      return 0;
    }
  p->message_done = 1;
  /* Nothing after the answer is ours to read (we asked to close). */
  http_parser_pause (hp, 1);
  return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* Feed n bytes (0: the server closed) to the parser. -1 on a malformed
   answer (described in err when err is given). */
static int
parse (struct sbx_proxy *p, size_t n, sbx_error_t **err)
{
  enum http_errno e;

  p->parsed = http_parser_execute (&p->parser, &parser_settings, n ? p->rbuf : NULL, n);
  e = HTTP_PARSER_ERRNO (&p->parser);
  if (e == HPE_OK || (e == HPE_PAUSED && p->message_done))
    return 0;
  if (p->hdrs.failed || p->body.failed)
    return sbx_err_oom (err);
  if (p->switched)
    return sbx_err (err, SBX_E_BAD_GATEWAY,
                    "the server on port %u in sandbox %s switched protocols unasked", p->port,
                    p->id);
  if (e == HPE_HEADER_OVERFLOW)
    return sbx_err (err, SBX_E_BAD_GATEWAY,
                    "the server on port %u in sandbox %s sent headers larger than %d KiB",
                    p->port, p->id, HEAD_MAX / 1024);
  return sbx_err (err, SBX_E_BAD_GATEWAY,
                  "the server on port %u in sandbox %s sent a malformed answer (%s)", p->port,
                  p->id, http_errno_description (e));
}

/* Read until the answer's head is in. */
static int
read_head (struct sbx_proxy *p, sbx_error_t **err)
{
  int64_t deadline = sbx_mono_ms () + p->idle_ms;

  while (!p->headers_done)
    {
      int64_t left = deadline - sbx_mono_ms ();
      ssize_t n;

      /* The whole head within one idle period: a server that trickles a
         byte at a time cannot hold the thread for HEAD_MAX periods. */
      n = left > 0 ? recv_some (p, (int) left) : -ETIMEDOUT;
      if (n == -ETIMEDOUT)
        return sbx_err (err, SBX_E_GATEWAY_TIMEOUT,
                        "the server on port %u in sandbox %s did not answer within %d s", p->port,
                        p->id, p->idle_ms / 1000);
      if (n == -ECONNABORTED)
        return sbx_err (err, SBX_E_UNAVAILABLE, "the client went away");
      /* A server that closes with our request unread resets the
         connection: to the client, that is a close too. */
      if (n == -ECONNRESET || n == -EPIPE)
        n = 0;
      if (n < 0)
        return sbx_err_errno (err, SBX_E_BAD_GATEWAY, (int) -n,
                              "the server on port %u in sandbox %s broke the connection", p->port,
                              p->id);
      if (n == 0)
        return sbx_err (err, SBX_E_BAD_GATEWAY,
                        p->head_bytes == 0
                            ? "the server on port %u in sandbox %s closed the connection without "
                              "answering"
                            : "the server on port %u in sandbox %s closed the connection in the "
                              "middle of its answer",
                        p->port, p->id);
      p->head_bytes += (size_t) n;
      if (parse (p, (size_t) n, err) < 0)
        return -1;
      if (p->upgraded && p->parsed < (size_t) n)
        {
          /* The server's first WebSocket bytes came with its head. */
          sbx_buf_append (&p->body, p->rbuf + p->parsed, (size_t) n - p->parsed);
          if (p->body.failed)
            return sbx_err_oom (err);
        }
      if (p->headers_done)
        break;
      if (p->head_bytes > HEAD_MAX)
        return sbx_err (err, SBX_E_BAD_GATEWAY,
                        "the server on port %u in sandbox %s sent headers larger than %d KiB",
                        p->port, p->id, HEAD_MAX / 1024);
    }
  return 0;
}

/* libmicrohttpd's content reader: the body, as the server sends it. */
static ssize_t
read_body (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct sbx_proxy *p = cls;

  (void) pos;
  for (;;)
    {
      ssize_t n;
      if (p->body_off < p->body.len)
        {
          size_t k = p->body.len - p->body_off;
          if (k > max)
            k = max;
          memcpy (buf, p->body.data + p->body_off, k);
          p->body_off += k;
          if (p->body_off == p->body.len)
            {
              sbx_buf_reset (&p->body);
              p->body_off = 0;
            }
          return (ssize_t) k;
        }
      if (p->message_done)
        return MHD_CONTENT_READER_END_OF_STREAM;
      if (p->failed || p->up < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
      n = recv_some (p, p->idle_ms);
      if (n < 0)
        {
          /* The client sees the connection close before the end (no
             last chunk, or fewer bytes than Content-Length). */
          sbx_debug ("proxy to port %u in sandbox %s: %s", p->port, p->id,
                     n == -ETIMEDOUT ? "the server went silent" : strerror ((int) -n));
          p->failed = 1;
          continue;
        }
      if (parse (p, (size_t) n, NULL) < 0 || (n == 0 && !p->message_done))
        {
          sbx_debug ("proxy to port %u in sandbox %s: the body ended badly", p->port, p->id);
          p->failed = 1;
        }
    }
}

static void
free_cb (void *cls)
{
  sbx_proxy_free (cls);
}

void
sbx_proxy_free (struct sbx_proxy *p)
{
  if (p == NULL)
    return;
  if (p->up >= 0)
    close (p->up);
  if (p->sb)
    {
      sbx_sandbox_proxy_release (p->sb);
      sbx_sandbox_unref (p->sb);
    }
  sbx_error_free (p->send_err);
  sbx_buf_free (&p->hdrs);
  sbx_buf_free (&p->body);
  free (p);
}

/* ---- the request head ------------------------------------------------------ */

/* 1 when the comma-separated list has name (case-insensitive). */
static int
listed (const char *list, const char *name)
{
  size_t n = strlen (name);

  while (*list)
    {
      size_t k;
      list += strspn (list, " \t,");
      k = strcspn (list, ",");
      while (k > 0 && (list[k - 1] == ' ' || list[k - 1] == '\t'))
        k--;
      if (k == n && strncasecmp (list, name, n) == 0)
        return 1;
      list += strcspn (list, ",");
    }
  return 0;
}

/* Something shaped like an sbx API key: "e2b_" and 40 hex digits. */
static int
has_api_key (const char *v)
{
  const char *s;

  for (s = v; (s = strstr (s, "e2b_")) != NULL; s++)
    if (strspn (s + 4, "0123456789abcdefABCDEF") >= 40)
      return 1;
  return 0;
}

static int
header_value_ok (const char *v)
{
  for (; *v; v++)
    if (((unsigned char) *v < 0x20 && *v != '\t') || *v == 0x7f)
      return 0;
  return 1;
}

/* Never sent on, whatever the client says. */
static int
dropped (const char *name)
{
  static const char *const names[] = {
      /* hop-by-hop (RFC 9110 7.6.1) and the body framing, which we redo */
      "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
      "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
      /* libmicrohttpd answered it already */
      "Expect",
      /* credentials for sbx, never for the code in the sandbox */
      "X-API-Key", "X-Access-Token",
      /* set below */
      "Host", "X-Forwarded-For", NULL};
  size_t i;

  for (i = 0; names[i]; i++)
    if (strcasecmp (name, names[i]) == 0)
      return 1;
  return strncasecmp (name, "E2b-", 4) == 0;
}

struct head_ctx
{
  struct sbx_buf *out;
  char conn[CONN_TOKENS_MAX]; /* what the client's Connection headers name */
  size_t conn_len;
  const char *bad;            /* the first header that cannot go on */
  const char *host;
  const char *upgrade;        /* the client's Upgrade, if any */
  int chunked, proto;
  struct sbx_buf xff;
};

static enum MHD_Result
scan_header (void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
  struct head_ctx *h = cls;

  (void) kind;
  if (value == NULL)
    value = "";
  if (h->bad == NULL && (!sbx_route_is_token (name) || !header_value_ok (value)))
    h->bad = name;
  if (strcasecmp (name, "Connection") == 0)
    {
      size_t n = strlen (value);
      if (h->conn_len + n + 2 > sizeof h->conn)
        h->bad = name;
      else
        {
          memcpy (h->conn + h->conn_len, value, n);
          h->conn_len += n;
          h->conn[h->conn_len++] = ',';
          h->conn[h->conn_len] = '\0';
        }
    }
  else if (strcasecmp (name, "Upgrade") == 0 && h->upgrade == NULL)
    h->upgrade = value;
  else if (strcasecmp (name, "Transfer-Encoding") == 0)
    h->chunked = 1; /* libmicrohttpd took the body out of its chunks */
  else if (strcasecmp (name, "Host") == 0 && h->host == NULL)
    h->host = value;
  return MHD_YES;
}

static enum MHD_Result
emit_header (void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
  struct head_ctx *h = cls;

  (void) kind;
  if (value == NULL)
    value = "";
  if (strcasecmp (name, "X-Forwarded-For") == 0 && !has_api_key (value))
    {
      sbx_buf_printf (&h->xff, "%s%s", h->xff.len ? ", " : "", value);
      return MHD_YES;
    }
  if (dropped (name) || listed (h->conn, name) || has_api_key (value))
    return MHD_YES;
  if (strcasecmp (name, "X-Forwarded-Proto") == 0)
    h->proto = 1;
  sbx_buf_printf (h->out, "%s: %s\r\n", name, value);
  return MHD_YES;
}

static void
client_address (struct MHD_Connection *c, char *out, size_t cap)
{
  const union MHD_ConnectionInfo *ci
      = MHD_get_connection_info (c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *sa = ci ? ci->client_addr : NULL;

  out[0] = '\0';
  if (sa == NULL)
    return;
  if (sa->sa_family == AF_INET)
    inet_ntop (AF_INET, &((const struct sockaddr_in *) (const void *) sa)->sin_addr, out,
               (socklen_t) cap);
  else if (sa->sa_family == AF_INET6)
    inet_ntop (AF_INET6, &((const struct sockaddr_in6 *) (const void *) sa)->sin6_addr, out,
               (socklen_t) cap);
}

static int
build_head (struct sbx_req *r, struct sbx_proxy *p, const char *method, const char *target,
            struct sbx_buf *out, sbx_error_t **err)
{
  struct head_ctx *h = calloc (1, sizeof *h);
  char addr[INET6_ADDRSTRLEN];
  int rc = 0;

  if (h == NULL)
    return sbx_err_oom (err);
  h->out = out;
  MHD_get_connection_values (r->conn, MHD_HEADER_KIND, scan_header, h);
  if (h->bad)
    {
      rc = sbx_err (err, SBX_E_INVALID, "the header `%.64s` cannot be sent on", h->bad);
      goto out;
    }
  /* A WebSocket handshake (RFC 6455 4.1) goes on as one; any other
     upgrade (h2c...) is an offer a server may ignore (RFC 9110 7.8): it is
     dropped with the hop-by-hop headers and the request goes on as plain
     HTTP. */
  if (h->upgrade != NULL && listed (h->upgrade, "websocket") && listed (h->conn, "upgrade")
      && strcmp (method, "GET") == 0 && r->http_version != NULL
      && strcmp (r->http_version, "HTTP/1.1") == 0)
    {
      if (h->chunked || (r->content_length != UINT64_MAX && r->content_length > 0))
        {
          rc = sbx_err (err, SBX_E_INVALID, "a WebSocket handshake has no body");
          goto out;
        }
      p->ws = 1;
    }
  sbx_buf_printf (out, "%s %s HTTP/1.1\r\n", method, target);
  /* E2B keeps the client's Host, or sends the sandbox's mask of it
     (maskRequestHost); without either, say which port was asked. */
  if (p->mask_host[0])
    {
      char host[SBX_MASK_HOST_MAX + 16 * 8];
      sbx_mask_host_render (p->mask_host, p->port, host, sizeof host);
      sbx_buf_printf (out, "Host: %s\r\n", host);
    }
  else if (h->host && h->host[0] && !has_api_key (h->host))
    sbx_buf_printf (out, "Host: %s\r\n", h->host);
  else
    sbx_buf_printf (out, "Host: 127.0.0.1:%u\r\n", p->port);
  MHD_get_connection_values (r->conn, MHD_HEADER_KIND, emit_header, h);
  client_address (r->conn, addr, sizeof addr);
  if (addr[0])
    sbx_buf_printf (&h->xff, "%s%s", h->xff.len ? ", " : "", addr);
  if (h->xff.len)
    sbx_buf_printf (out, "X-Forwarded-For: %s\r\n", h->xff.data);
  if (!h->proto)
    sbx_buf_printf (out, "X-Forwarded-Proto: http\r\n");
  if (p->ws)
    /* The connection is the WebSocket's if the server says 101. */
    sbx_buf_printf (out, "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
  else
    {
      if (h->chunked)
        {
          p->chunked_out = 1;
          sbx_buf_printf (out, "Transfer-Encoding: chunked\r\n");
        }
      else if (r->content_length != UINT64_MAX)
        sbx_buf_printf (out, "Content-Length: %llu\r\n",
                        (unsigned long long) r->content_length);
      /* One request per connection: the answer ends at the latest when
         the server closes. */
      sbx_buf_printf (out, "Connection: close\r\n\r\n");
    }
  if (out->failed || h->xff.failed)
    rc = sbx_err_oom (err);
out:
  sbx_buf_free (&h->xff);
  free (h);
  return rc;
}

/* ---- the three steps ----------------------------------------------------- */

int
sbx_proxy_begin (struct sbx_req *r, struct sbx_sandbox *sb, unsigned port, const char *target,
                 sbx_error_t **err)
{
  const union MHD_ConnectionInfo *ci;
  const char *method = r->method;
  struct sbx_buf head = SBX_BUF_INIT;
  struct sbx_proxy *p;
  struct iovec iov;
  int one = 1;

  if (r->route == NULL || r->route->body != SBX_BODY_PROXY)
    r->route = &sbx_port_proxy_route;
  if (method == NULL || strlen (method) > 32 || !sbx_route_is_token (method))
    return sbx_err (err, SBX_E_INVALID, "the method cannot be sent on");
  if (target == NULL || !sbx_route_target_ok (target))
    return sbx_err (err, SBX_E_INVALID,
                    "the path must start with `/` and have no spaces or control characters");
  if (port == 0 || port > 65535)
    return sbx_err (err, SBX_E_INVALID, "port must be 1 to 65535, not %u", port);
  p = calloc (1, sizeof *p);
  if (p == NULL)
    return sbx_err_oom (err);
  p->up = -1;
  p->port = port;
  snprintf (p->id, sizeof p->id, "%s", sb->id);
  /* Set at create, never changed: read without the lock. */
  snprintf (p->mask_host, sizeof p->mask_host, "%s", sb->mask_host);
  p->idle_ms = (int) sbx_core_config ()->proxy_idle_ms;
  p->head_request = strcmp (method, "HEAD") == 0;
  ci = MHD_get_connection_info (r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  p->client_fd = ci ? ci->connect_fd : -1;
  http_parser_init (&p->parser, HTTP_RESPONSE);
  p->parser.data = p;
  if (build_head (r, p, method, target, &head, err) < 0)
    goto fail;
  if (sbx_sandbox_proxy_acquire (sb, err) < 0)
    goto fail;
  sbx_sandbox_ref (sb);
  p->sb = sb;
  p->up = sbx_sandbox_connect_port (sb, port, err);
  if (p->up < 0)
    goto fail;
  /* Head and body go out in separate writes: no Nagle delay between. */
  setsockopt (p->up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  iov.iov_base = head.data;
  iov.iov_len = head.len;
  if (send_all (p, &iov, 1, err) < 0)
    goto fail;
  sbx_buf_free (&head);
  sbx_proxy_free (r->proxy);
  r->proxy = p;
  return 0;
fail:
  sbx_buf_free (&head);
  sbx_proxy_free (p);
  return -1;
}

int
sbx_route_port_begin (struct sbx_req *r, sbx_error_t **err)
{
  struct sbx_sandbox *sb;
  unsigned port = 0;
  const char *t = r->proxy_target;
  char *target = NULL;
  int rc;

  if (r->nsegs < 5 || !sbx_route_port_number (r->segs[4], &port))
    return sbx_err (err, SBX_E_INVALID, "the port must be a number from 1 to 65535, not `%.16s`",
                    r->nsegs >= 5 ? r->segs[4] : "");
  sb = sbx_req_sandbox (r, 2, err);
  if (sb == NULL)
    return -1;
  /* "/v1/sandboxes/ID/ports/8000" and "...8000?x" ask for "/" and "/?x". */
  if (t == NULL || t[0] != '/')
    {
      if (asprintf (&target, "/%s", t ? t : "") < 0)
        {
          sbx_sandbox_unref (sb);
          return sbx_err_oom (err);
        }
      t = target;
    }
  rc = sbx_proxy_begin (r, sb, port, t, err);
  free (target);
  sbx_sandbox_unref (sb);
  return rc;
}

void
sbx_proxy_body (struct sbx_req *r, const char *data, size_t len)
{
  struct sbx_proxy *p = r->proxy;
  char frame[24];
  struct iovec iov[3];
  int n = 0;

  if (p == NULL || p->send_err != NULL || len == 0)
    return;
  if (p->chunked_out)
    {
      iov[n].iov_base = frame;
      iov[n++].iov_len = (size_t) snprintf (frame, sizeof frame, "%zx\r\n", len);
    }
  iov[n].iov_base = (void *) (uintptr_t) data;
  iov[n++].iov_len = len;
  if (p->chunked_out)
    {
      iov[n].iov_base = (void *) (uintptr_t) "\r\n";
      iov[n++].iov_len = 2;
    }
  /* On failure the rest of the body is dropped; the handler still reads
     what the server answered (it may have refused the body early). */
  send_all (p, iov, n, &p->send_err);
}

/* Add the server's headers to resp: all but the hop-by-hop ones, those
   its Connection header names, and Content-Length (libmicrohttpd writes
   the length it sends). */
static void
copy_headers (struct sbx_proxy *p, struct MHD_Response *resp)
{
  static const char *const hop[] = {"Connection", "Keep-Alive", "Proxy-Authenticate",
                                    "Proxy-Authorization", "Proxy-Connection", "TE", "Trailer",
                                    "Transfer-Encoding", "Upgrade", "Content-Length", NULL};
  char conn[CONN_TOKENS_MAX] = "";
  size_t conn_len = 0, off;
  int i;

  for (off = 0; off < p->hdrs.len;)
    {
      const char *name = p->hdrs.data + off, *value = name + strlen (name) + 1;
      off = (size_t) (value - p->hdrs.data) + strlen (value) + 1;
      if (strcasecmp (name, "Connection") == 0 && conn_len + strlen (value) + 2 <= sizeof conn)
        conn_len += (size_t) snprintf (conn + conn_len, sizeof conn - conn_len, "%s,", value);
    }
  for (off = 0; off < p->hdrs.len;)
    {
      const char *name = p->hdrs.data + off, *value = name + strlen (name) + 1;
      int skip = listed (conn, name);
      off = (size_t) (value - p->hdrs.data) + strlen (value) + 1;
      for (i = 0; hop[i] && !skip; i++)
        skip = strcasecmp (name, hop[i]) == 0;
      if (!skip && MHD_add_response_header (resp, name, value) != MHD_YES)
        sbx_debug ("proxy: header `%.64s` of port %u in sandbox %s not passed on", name, p->port,
                   p->id);
    }
}

/* ---- WebSockets ------------------------------------------------------------ */

/* Send what pending holds without blocking; -1 when the socket broke. */
static int
flush_some (int fd, struct sbx_buf *pending)
{
  while (pending->len > 0)
    {
      ssize_t n = send (fd, pending->data, pending->len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return errno == EAGAIN ? 0 : -1;
      sbx_buf_consume (pending, (size_t) n);
    }
  return 0;
}

/* Read what fd has into pending: 0, 1 at its end, -1 when it broke. */
static int
fill_some (int fd, struct sbx_buf *pending, char *buf, size_t cap)
{
  ssize_t n;

  do
    n = recv (fd, buf, cap, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n == 0)
    return 1;
  if (n < 0)
    return errno == EAGAIN ? 0 : -1;
  sbx_buf_append (pending, buf, (size_t) n);
  return pending->failed ? -1 : 0;
}

/* Bytes both ways between the client and the server until both have
   ended (each end passed on as a shutdown), either breaks, both stay
   silent for the idle timeout, or the daemon stops. At most
   RELAY_PENDING_MAX bytes wait per direction: a side that does not read
   stops the other from being read. */
static void
relay (struct sbx_proxy *p, int client, const char *extra, size_t extra_len)
{
  struct sbx_buf to_up = SBX_BUF_INIT, to_client = SBX_BUF_INIT;
  int client_eof = 0, up_eof = 0, up_shut = 0, client_shut = 0;

  if (extra_len > 0)
    sbx_buf_append (&to_up, extra, extra_len);
  if (p->body.len > p->body_off)
    sbx_buf_append (&to_client, p->body.data + p->body_off, p->body.len - p->body_off);
  for (;;)
    {
      struct pollfd pfd[3];
      int n, r;

      if (to_up.failed || to_client.failed)
        break;
      if (flush_some (p->up, &to_up) < 0 || flush_some (client, &to_client) < 0)
        break;
      /* One side ended: pass the end on once its last bytes are through. */
      if (client_eof && to_up.len == 0 && !up_shut)
        {
          shutdown (p->up, SHUT_WR);
          up_shut = 1;
        }
      if (up_eof && to_client.len == 0 && !client_shut)
        {
          shutdown (client, SHUT_WR);
          client_shut = 1;
        }
      if (up_shut && client_shut)
        break;
      pfd[0].events = (short) ((!client_eof && to_up.len < RELAY_PENDING_MAX ? POLLIN : 0)
                               | (to_client.len ? POLLOUT : 0));
      pfd[1].events = (short) ((!up_eof && to_client.len < RELAY_PENDING_MAX ? POLLIN : 0)
                               | (to_up.len ? POLLOUT : 0));
      /* A side with nothing to wait for is left out (poll skips negative
         fds): its hang-up would otherwise wake every poll. */
      pfd[0].fd = pfd[0].events ? client : -1;
      pfd[1].fd = pfd[1].events ? p->up : -1;
      pfd[2].fd = get_stop_fd ();
      pfd[2].events = POLLIN;
      pfd[0].revents = pfd[1].revents = pfd[2].revents = 0;
      n = poll (pfd, 3, p->idle_ms);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0 || pfd[2].revents)
        break; /* silence, or the daemon stops */
      if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
        {
          r = fill_some (client, &to_up, p->rbuf, sizeof p->rbuf);
          if (r < 0)
            break;
          client_eof |= r;
        }
      if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))
        {
          r = fill_some (p->up, &to_client, p->rbuf, sizeof p->rbuf);
          if (r < 0)
            break;
          up_eof |= r;
        }
    }
  sbx_buf_free (&to_up);
  sbx_buf_free (&to_client);
}

/* libmicrohttpd's call once the 101 is sent: the client's socket is ours
   until MHD_UPGRADE_ACTION_CLOSE. In thread-per-connection mode the call
   runs in the connection's own thread and may block (microhttpd.h); the
   request (and so p, which it owns) is released only after it returns. */
static void
upgraded (void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
          size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
  struct sbx_proxy *p = cls;

  (void) c;
  (void) con_cls;
  pthread_mutex_lock (&relay_lock);
  relays++;
  pthread_mutex_unlock (&relay_lock);
  relay (p, sock, extra_in, extra_in_size);
  MHD_upgrade_action (urh, MHD_UPGRADE_ACTION_CLOSE);
  pthread_mutex_lock (&relay_lock);
  relays--;
  pthread_cond_broadcast (&relay_cond);
  pthread_mutex_unlock (&relay_lock);
}

/* The first value of the server's header `name`, or NULL. */
static const char *
server_header (struct sbx_proxy *p, const char *name)
{
  size_t off;

  for (off = 0; off < p->hdrs.len;)
    {
      const char *n = p->hdrs.data + off, *v = n + strlen (n) + 1;
      if (strcasecmp (n, name) == 0)
        return v;
      off = (size_t) (v - p->hdrs.data) + strlen (v) + 1;
    }
  return NULL;
}

void
sbx_route_port_proxy (struct sbx_req *r)
{
  struct sbx_proxy *p = r->proxy;
  struct MHD_Response *resp;
  sbx_error_t *err = NULL;
  unsigned status;

  if (p == NULL)
    {
      sbx_reply_errorf (r, SBX_E_SYSTEM, "the proxied request was not set up");
      return;
    }
  if (p->send_err == NULL && p->chunked_out)
    {
      struct iovec iov = {(void *) (uintptr_t) "0\r\n\r\n", 5};
      send_all (p, &iov, 1, &p->send_err);
    }
  /* Even when sending failed: a server that refused the body early may
     have said why; only when it said nothing is the send error the answer. */
  if (read_head (p, &err) < 0)
    {
      if (p->send_err != NULL && err->kind != SBX_E_UNAVAILABLE)
        sbx_error_move (&err, &p->send_err);
      sbx_reply_error (r, err);
      return;
    }
  status = p->parser.status_code;
  if (p->upgraded)
    {
      /* The server took the WebSocket: pass its 101 on, then relay. The
         request keeps owning p (upgraded() runs before it is released). */
      resp = MHD_create_response_for_upgrade (upgraded, p);
      if (resp == NULL)
        {
          sbx_reply_errorf (r, SBX_E_UNAVAILABLE, "out of memory");
          return;
        }
      copy_headers (p, resp);
      /* hp->upgrade needed the server's Upgrade header: it is there. */
      MHD_add_response_header (resp, "Upgrade",
                               server_header (p, "Upgrade") ? server_header (p, "Upgrade")
                                                            : "websocket");
      r->raw_response = 1;
      sbx_reply_response (r, 101, resp);
      return;
    }
  resp = MHD_create_response_from_callback (p->length, 32 * 1024, read_body, p, free_cb);
  if (resp == NULL)
    {
      sbx_reply_errorf (r, SBX_E_UNAVAILABLE, "out of memory");
      return;
    }
  /* The response owns the proxy from now on (free_cb). */
  r->proxy = NULL;
  copy_headers (p, resp);
  r->raw_response = 1;
  sbx_reply_response (r, status, resp);
}
