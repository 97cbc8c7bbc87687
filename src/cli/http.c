/* sbx CLI: HTTP/1.1 client (see http.h). */
#include "cli/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/cleanup.h"

/* Reads and body uploads go through one buffer of this size per connection;
   64 KiB matches the daemon's output chunks. */
#define RBUF_SIZE (64 * 1024)
/* Error bodies are small JSON objects; past this much, the rest is dropped. */
#define MAX_ERROR_BODY (1024 * 1024)

struct sbx_http_conn
{
  const struct sbx_http_endpoint *ep; /* borrowed */
  int fd;                             /* owned; -1 when not connected */
  int intr_fd;                        /* borrowed; -1 when disarmed */
  int unreachable;                    /* the last connect attempt failed */
  unsigned requests;                  /* answered on the current connection */
  struct sbx_buf head;                /* owned; request head, reused */
  char *rbuf;                         /* owned; RBUF_SIZE bytes */
};

/* Per-request parser state, reached from http_parser callbacks. */
struct resp_state
{
  struct sbx_http_response *resp; /* borrowed */
  sbx_http_data_cb on_data;
  void *ctx;
  size_t max_collect;
  int deliver;  /* hand the body to on_data (2xx) instead of collecting it */
  int interim;  /* inside a 1xx response, which has no body and is skipped */
  int complete; /* the final response has been read entirely */
  int keep_alive;
  sbx_error_t *cb_err; /* owned; why a callback stopped the parser */
};

static char *
xstrdup (const char *s)
{
  char *p = strdup (s);
  if (p == NULL)
    sbx_oom ();
  return p;
}

static char *
xstrndup (const char *s, size_t n)
{
  char *p = strndup (s, n);
  if (p == NULL)
    sbx_oom ();
  return p;
}

static char *
xasprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static char *
xasprintf (const char *fmt, ...)
{
  va_list ap;
  char *s = NULL;

  va_start (ap, fmt);
  if (vasprintf (&s, fmt, ap) < 0)
    sbx_oom ();
  va_end (ap);
  return s;
}

/* ------------------------------------------------------------------------ */
/* Endpoints */

void
sbx_http_endpoint_clear (struct sbx_http_endpoint *ep)
{
  free (ep->unix_path);
  free (ep->host);
  free (ep->port);
  free (ep->host_header);
  free (ep->base_path);
  free (ep->auth);
  free (ep->display);
  memset (ep, 0, sizeof *ep);
}

void
sbx_http_endpoint_from_unix (struct sbx_http_endpoint *ep, const char *path)
{
  memset (ep, 0, sizeof *ep);
  ep->is_unix = 1;
  ep->unix_path = xstrdup (path);
  ep->host_header = xstrdup ("localhost");
  ep->base_path = xstrdup ("");
  ep->display = xasprintf ("unix:%s", path);
}

static int
valid_port (const char *s, size_t n)
{
  unsigned long v = 0;
  size_t i;

  if (n == 0 || n > 5)
    return 0;
  for (i = 0; i < n; i++)
    {
      if (s[i] < '0' || s[i] > '9')
        return 0;
      v = v * 10 + (unsigned long) (s[i] - '0');
    }
  return v >= 1 && v <= 65535;
}

int
sbx_http_endpoint_from_url (struct sbx_http_endpoint *ep, const char *url,
                            const char *api_key, sbx_error_t **err)
{
  const char *auth, *host, *port = NULL, *path, *p;
  size_t auth_len, host_len, port_len = 0, path_len;

  memset (ep, 0, sizeof *ep);
  if (strncasecmp (url, "https://", 8) == 0)
    return sbx_err (err, SBX_E_INVALID,
                    "SBX_URL `%s`: https is not supported, sbx speaks plain "
                    "http:// only (put a TLS-terminating proxy or an ssh "
                    "tunnel in front of the daemon)",
                    url);
  if (strncasecmp (url, "http://", 7) != 0)
    return sbx_err (err, SBX_E_INVALID,
                    "SBX_URL `%s` is not an http:// URL (expected http://HOST:PORT)", url);
  /* The host goes into the Host header and the path into the request
     line: no spaces or line breaks anywhere. */
  for (p = url; *p; p++)
    if ((unsigned char) *p <= ' ' || *p == 0x7f)
      return sbx_err (err, SBX_E_INVALID, "SBX_URL `%s` contains spaces or control characters",
                      url);
  auth = url + 7;
  auth_len = strcspn (auth, "/?#");
  if (auth[auth_len] == '?' || auth[auth_len] == '#')
    return sbx_err (err, SBX_E_INVALID, "SBX_URL `%s` must not have a query or fragment", url);
  if (auth_len == 0)
    return sbx_err (err, SBX_E_INVALID, "SBX_URL `%s` has no host", url);
  if (memchr (auth, '@', auth_len) != NULL)
    return sbx_err (err, SBX_E_INVALID,
                    "SBX_URL `%s` must not contain credentials (use SBX_API_KEY)", url);
  if (auth[0] == '[')
    {
      const char *close = memchr (auth, ']', auth_len);
      if (close == NULL || close == auth + 1)
        return sbx_err (err, SBX_E_INVALID, "SBX_URL `%s` has a malformed IPv6 address", url);
      host = auth + 1;
      host_len = (size_t) (close - host);
      p = close + 1;
      if (p < auth + auth_len)
        {
          if (*p != ':')
            return sbx_err (err, SBX_E_INVALID, "SBX_URL `%s` has a malformed host", url);
          port = p + 1;
          port_len = (size_t) (auth + auth_len - port);
        }
    }
  else
    {
      const char *colon = memchr (auth, ':', auth_len);
      host = auth;
      host_len = colon ? (size_t) (colon - auth) : auth_len;
      if (colon)
        {
          port = colon + 1;
          port_len = (size_t) (auth + auth_len - port);
        }
      if (host_len == 0)
        return sbx_err (err, SBX_E_INVALID, "SBX_URL `%s` has no host", url);
    }
  if (port != NULL && !valid_port (port, port_len))
    return sbx_err (err, SBX_E_INVALID, "SBX_URL `%s` has an invalid port", url);

  path = auth + auth_len;
  path_len = strlen (path);
  if (strpbrk (path, "?#") != NULL)
    return sbx_err (err, SBX_E_INVALID, "SBX_URL `%s` must not have a query or fragment", url);
  while (path_len > 0 && path[path_len - 1] == '/')
    path_len--;

  if (api_key != NULL && api_key[0] != '\0')
    {
      for (p = api_key; *p; p++)
        if ((unsigned char) *p <= ' ' || *p == 0x7f)
          return sbx_err (err, SBX_E_INVALID, "SBX_API_KEY contains spaces or control characters");
      ep->auth = xasprintf ("Bearer %s", api_key);
    }
  ep->is_unix = 0;
  ep->host = xstrndup (host, host_len);
  ep->port = port ? xstrndup (port, port_len) : xstrdup ("80");
  ep->host_header = xstrndup (auth, auth_len);
  ep->base_path = xstrndup (path, path_len);
  ep->display = xasprintf ("http://%.*s", (int) auth_len, auth);
  return 0;
}

int
sbx_http_endpoint_from_env (struct sbx_http_endpoint *ep, sbx_error_t **err)
{
  const char *url = getenv ("SBX_URL");
  const char *state;
  cleanup_free char *path = NULL;

  if (url != NULL && url[0] != '\0')
    return sbx_http_endpoint_from_url (ep, url, getenv ("SBX_API_KEY"), err);
  state = getenv ("SBX_STATE");
  if (state == NULL || state[0] == '\0')
    state = "/var/lib/sbx";
  path = xasprintf ("%s/sbx.sock", state);
  sbx_http_endpoint_from_unix (ep, path);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Connections */

struct sbx_http_conn *
sbx_http_conn_new (const struct sbx_http_endpoint *ep)
{
  struct sbx_http_conn *c = calloc (1, sizeof *c);

  if (c == NULL)
    sbx_oom ();
  c->ep = ep;
  c->fd = -1;
  c->intr_fd = -1;
  return c;
}

void
sbx_http_conn_reset (struct sbx_http_conn *c)
{
  close_and_reset (&c->fd);
  c->requests = 0;
}

void
sbx_http_conn_free (struct sbx_http_conn *c)
{
  if (c == NULL)
    return;
  sbx_http_conn_reset (c);
  sbx_buf_free (&c->head);
  free (c->rbuf);
  free (c);
}

void
sbx_http_conn_set_interrupt_fd (struct sbx_http_conn *c, int fd)
{
  c->intr_fd = fd;
}

int
sbx_http_conn_unreachable (const struct sbx_http_conn *c)
{
  return c->unreachable;
}

static int
fail_unreachable (struct sbx_http_conn *c, sbx_error_t **err, int e, const char *detail)
{
  const char *hint = "(is `sbx serve` running?)";

  if (e == EACCES || e == EPERM)
    hint = "(the socket is only open to the user running the daemon)";
  c->unreachable = 1;
  sbx_err (err, SBX_E_UNAVAILABLE, "cannot reach the daemon at %s: %s %s",
           c->ep->display, detail ? detail : strerror (e), hint);
  if (err != NULL && *err != NULL)
    (*err)->sys_errno = e;
  return -1;
}

/* connect(2), also when a signal interrupts it: the attempt then continues
   in the background and we wait for its outcome. */
static int
connect_fd (int fd, const struct sockaddr *sa, socklen_t len)
{
  struct pollfd p = {fd, POLLOUT, 0};
  int soerr = 0;
  socklen_t soerr_len = sizeof soerr;

  if (connect (fd, sa, len) == 0)
    return 0;
  if (errno != EINTR && errno != EINPROGRESS)
    return -1;
  while (poll (&p, 1, -1) < 0)
    if (errno != EINTR)
      return -1;
  if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &soerr, &soerr_len) < 0)
    return -1;
  if (soerr != 0)
    {
      errno = soerr;
      return -1;
    }
  return 0;
}

static int
connect_unix (struct sbx_http_conn *c, sbx_error_t **err)
{
  struct sockaddr_un sa;
  size_t n = strlen (c->ep->unix_path);
  cleanup_close int fd = -1;

  memset (&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (n >= sizeof sa.sun_path)
    return fail_unreachable (c, err, ENAMETOOLONG, "socket path too long");
  memcpy (sa.sun_path, c->ep->unix_path, n + 1);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return sbx_err_sys (err, errno, "socket");
  if (connect_fd (fd, (struct sockaddr *) &sa, (socklen_t) sizeof sa) < 0)
    return fail_unreachable (c, err, errno, NULL);
  c->fd = sbx_steal_fd (&fd);
  return 0;
}

static int
connect_addr (const struct sockaddr *sa, socklen_t len, int *out_errno)
{
  int one = 1;
  int fd = socket (sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0)
    {
      *out_errno = errno;
      return -1;
    }
  if (connect_fd (fd, sa, len) < 0)
    {
      *out_errno = errno;
      close (fd);
      return -1;
    }
  /* Requests are written in one go; never let Nagle hold back a small
     request (or the last segment of one) waiting for an ACK. */
  (void) setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static int
connect_tcp (struct sbx_http_conn *c, sbx_error_t **err)
{
  struct addrinfo hints, *res = NULL, *ai;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
  int e = 0, rc, fd = -1;
  unsigned port = (unsigned) strtoul (c->ep->port, NULL, 10);

  /* Numeric addresses are parsed here so that the common case never loads
     the NSS modules getaddrinfo() would pull in. */
  memset (&sin, 0, sizeof sin);
  memset (&sin6, 0, sizeof sin6);
  if (inet_pton (AF_INET, c->ep->host, &sin.sin_addr) == 1)
    {
      sin.sin_family = AF_INET;
      sin.sin_port = htons ((uint16_t) port);
      fd = connect_addr ((struct sockaddr *) &sin, sizeof sin, &e);
    }
  else if (inet_pton (AF_INET6, c->ep->host, &sin6.sin6_addr) == 1)
    {
      sin6.sin6_family = AF_INET6;
      sin6.sin6_port = htons ((uint16_t) port);
      fd = connect_addr ((struct sockaddr *) &sin6, sizeof sin6, &e);
    }
  else
    {
      memset (&hints, 0, sizeof hints);
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_NUMERICSERV;
      rc = getaddrinfo (c->ep->host, c->ep->port, &hints, &res);
      if (rc != 0)
        return fail_unreachable (c, err, rc == EAI_SYSTEM ? errno : EHOSTUNREACH,
                                 rc == EAI_SYSTEM ? NULL : gai_strerror (rc));
      for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
        fd = connect_addr (ai->ai_addr, ai->ai_addrlen, &e);
      freeaddrinfo (res);
    }
  if (fd < 0)
    return fail_unreachable (c, err, e ? e : ECONNREFUSED, NULL);
  c->fd = fd;
  return 0;
}

int
sbx_http_conn_connect (struct sbx_http_conn *c, sbx_error_t **err)
{
  int rc;

  if (c->fd >= 0)
    return 0;
  c->unreachable = 0;
  c->requests = 0;
  rc = c->ep->is_unix ? connect_unix (c, err) : connect_tcp (c, err);
  if (rc == 0 && c->rbuf == NULL)
    {
      c->rbuf = malloc (RBUF_SIZE);
      if (c->rbuf == NULL)
        sbx_oom ();
    }
  return rc;
}

void
sbx_http_conn_adopt_fd (struct sbx_http_conn *c, int fd)
{
  sbx_http_conn_reset (c);
  c->fd = fd;
  c->unreachable = 0;
  if (c->rbuf == NULL)
    {
      c->rbuf = malloc (RBUF_SIZE);
      if (c->rbuf == NULL)
        sbx_oom ();
    }
}

/* 1 when a kept-alive connection can no longer carry a request: the server
   closed it (readable with EOF) or sent something unsolicited. */
static int
peer_gone (int fd)
{
  struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
  return poll (&p, 1, 0) != 0;
}

static int
fail_interrupted (sbx_error_t **err)
{
  sbx_err (err, SBX_E_UNAVAILABLE, "interrupted");
  if (err != NULL && *err != NULL)
    (*err)->sys_errno = EINTR;
  return -1;
}

/* Wait until the socket is ready for `events`, unless the interrupt fd fires
   first. Without an interrupt fd the blocking call that follows waits. */
static int
wait_fd (struct sbx_http_conn *c, short events, sbx_error_t **err)
{
  struct pollfd p[2];

  if (c->intr_fd < 0)
    return 0;
  for (;;)
    {
      p[0].fd = c->fd;
      p[0].events = events;
      p[0].revents = 0;
      p[1].fd = c->intr_fd;
      p[1].events = POLLIN;
      p[1].revents = 0;
      if (poll (p, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          return sbx_err_sys (err, errno, "poll");
        }
      if (p[1].revents)
        return fail_interrupted (err);
      if (p[0].revents)
        return 0;
    }
}

/* Send all of iov[0..n), whatever the partial writes. */
static int
send_iov (struct sbx_http_conn *c, struct iovec *iov, int n, sbx_error_t **err)
{
  while (n > 0)
    {
      struct msghdr m;
      ssize_t w;

      if (iov->iov_len == 0)
        {
          iov++;
          n--;
          continue;
        }
      if (wait_fd (c, POLLOUT, err) < 0)
        return -1;
      memset (&m, 0, sizeof m);
      m.msg_iov = iov;
      m.msg_iovlen = (size_t) n;
      /* MSG_NOSIGNAL: a daemon that went away is an error, not SIGPIPE. */
      w = sendmsg (c->fd, &m, MSG_NOSIGNAL);
      if (w < 0)
        {
          if (errno == EINTR)
            continue;
          return sbx_err_sys (err, errno, "sending to the daemon at %s", c->ep->display);
        }
      while (n > 0 && (size_t) w >= iov->iov_len)
        {
          w -= (ssize_t) iov->iov_len;
          iov++;
          n--;
        }
      if (n > 0)
        {
          iov->iov_base = (char *) iov->iov_base + w;
          iov->iov_len -= (size_t) w;
        }
    }
  return 0;
}

/* Stream `len` bytes from `fd` to the socket through the read buffer. */
static int
send_from_fd (struct sbx_http_conn *c, const struct sbx_http_request *req, sbx_error_t **err)
{
  int fd = req->body_fd;
  size_t len = req->body_len;

  while (len > 0)
    {
      size_t want = len < RBUF_SIZE ? len : RBUF_SIZE;
      ssize_t r = read (fd, c->rbuf, want);
      struct iovec iov;

      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return sbx_err_sys (err, errno, "reading the file to upload");
        }
      if (r == 0)
        return sbx_err (err, SBX_E_CONFLICT, "the file to upload shrank while it was being sent");
      iov.iov_base = c->rbuf;
      iov.iov_len = (size_t) r;
      if (send_iov (c, &iov, 1, err) < 0)
        return -1;
      len -= (size_t) r;
      if (req->on_sent)
        req->on_sent (req->sent_ctx, (uint64_t) (req->body_len - len), (uint64_t) req->body_len);
    }
  return 0;
}

static int
send_request (struct sbx_http_conn *c, const struct sbx_http_request *req,
              sbx_error_t **err)
{
  const struct sbx_http_endpoint *ep = c->ep;
  struct iovec iov[2];
  int with_length = req->has_body || req->body != NULL || req->body_fd >= 0;

  sbx_buf_reset (&c->head);
  sbx_buf_printf (&c->head, "%s %s%s HTTP/1.1\r\nHost: %s\r\n", req->method,
                  ep->base_path, req->target, ep->host_header);
  if (ep->auth != NULL)
    sbx_buf_printf (&c->head, "Authorization: %s\r\n", ep->auth);
  if (req->content_type != NULL)
    sbx_buf_printf (&c->head, "Content-Type: %s\r\n", req->content_type);
  if (with_length)
    sbx_buf_printf (&c->head, "Content-Length: %zu\r\n", req->body_len);
  sbx_buf_append (&c->head, "\r\n", 2);

  iov[0].iov_base = c->head.data;
  iov[0].iov_len = c->head.len;
  iov[1].iov_base = (void *) (uintptr_t) req->body;
  iov[1].iov_len = req->body_fd < 0 && req->body != NULL ? req->body_len : 0;
  if (send_iov (c, iov, 2, err) < 0)
    return -1;
  if (req->body_fd >= 0)
    return send_from_fd (c, req, err);
  return 0;
}

/* http_parser callbacks */

static int
on_headers_complete (http_parser *p)
{
  struct resp_state *st = p->data;

  st->resp->status = (int) p->status_code;
  st->interim = p->status_code / 100 == 1;
  st->deliver = st->on_data != NULL && p->status_code / 100 == 2;
  return 0;
}

static int
on_body (http_parser *p, const char *at, size_t len)
{
  struct resp_state *st = p->data;
  size_t limit;

  if (st->interim)
    return 0;
  if (st->deliver)
    return st->on_data (st->ctx, at, len, &st->cb_err) < 0 ? -1 : 0;
  if (st->resp->status < 200 || st->resp->status > 299)
    {
      /* An error body: its start says what went wrong; the rest is read
         (to keep the connection in step) and dropped. */
      if (st->resp->body.len < MAX_ERROR_BODY)
        sbx_buf_append (&st->resp->body, at,
                        len < MAX_ERROR_BODY - st->resp->body.len
                            ? len
                            : MAX_ERROR_BODY - st->resp->body.len);
      return 0;
    }
  limit = st->max_collect;
  if (len > limit - st->resp->body.len || st->resp->body.len > limit)
    {
      sbx_err (&st->cb_err, SBX_E_TOO_LARGE,
               "the daemon's response is larger than %zu bytes", limit);
      return -1;
    }
  sbx_buf_append (&st->resp->body, at, len);
  return 0;
}

static int
on_message_complete (http_parser *p)
{
  struct resp_state *st = p->data;

  if (st->interim)
    {
      /* A 1xx response (100 Continue): the real one follows. */
      st->interim = 0;
      st->resp->status = 0;
      return 0;
    }
  st->complete = 1;
  st->keep_alive = http_should_keep_alive (p);
  /* Stop right here: bytes after the response are not ours to parse. */
  http_parser_pause (p, 1);
  return 0;
}

static const http_parser_settings parser_settings = {
  .on_headers_complete = on_headers_complete,
  .on_body = on_body,
  .on_message_complete = on_message_complete,
};

static int
is_disconnect (int e)
{
  return e == ECONNRESET || e == EPIPE || e == ECONNABORTED || e == ENOTCONN;
}

/* Read until the response is complete. *received counts bytes read, and
   *closed is set when the server closed the connection before answering
   anything (then a request on a reused connection can be retried). */
static int
read_response (struct sbx_http_conn *c, http_parser *p, struct resp_state *st,
               size_t *received, int *closed, sbx_error_t **err)
{
  while (!st->complete)
    {
      ssize_t n;
      size_t done;
      enum http_errno he;

      if (wait_fd (c, POLLIN, err) < 0)
        return -1;
      n = recv (c->fd, c->rbuf, RBUF_SIZE, 0);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (is_disconnect (errno) && *received == 0)
            *closed = 1;
          return sbx_err_sys (err, errno, "reading from the daemon at %s", c->ep->display);
        }
      if (n == 0)
        {
          /* Tell the parser: a body delimited by the connection's end is
             complete now; anything else is cut short. */
          http_parser_execute (p, &parser_settings, NULL, 0);
          if (st->complete)
            {
              st->keep_alive = 0;
              break;
            }
          if (st->cb_err != NULL)
            {
              sbx_error_move (err, &st->cb_err);
              return -1;
            }
          if (*received == 0)
            {
              *closed = 1;
              return sbx_err (err, SBX_E_UNAVAILABLE,
                              "the daemon at %s closed the connection without answering",
                              c->ep->display);
            }
          return sbx_err (err, SBX_E_UNAVAILABLE,
                          "the daemon at %s closed the connection in the middle of a response",
                          c->ep->display);
        }
      *received += (size_t) n;
      done = http_parser_execute (p, &parser_settings, c->rbuf, (size_t) n);
      if (st->complete)
        {
          if (done != (size_t) n)
            st->keep_alive = 0; /* unsolicited bytes: do not trust the connection */
          break;
        }
      he = HTTP_PARSER_ERRNO (p);
      if (he != HPE_OK || done != (size_t) n)
        {
          if (st->cb_err != NULL)
            {
              sbx_error_move (err, &st->cb_err);
              return -1;
            }
          return sbx_err (err, SBX_E_SYSTEM, "malformed response from the daemon at %s: %s",
                          c->ep->display, http_errno_description (he));
        }
    }
  return 0;
}

void
sbx_http_response_clear (struct sbx_http_response *resp)
{
  sbx_buf_free (&resp->body);
  resp->status = 0;
}

int
sbx_http_do (struct sbx_http_conn *c, const struct sbx_http_request *req,
             sbx_http_data_cb on_data, void *ctx, size_t max_collect,
             struct sbx_http_response *resp, sbx_error_t **err)
{
  off_t body_offset = -1;
  int attempt;

  if (req->body_fd >= 0)
    body_offset = lseek (req->body_fd, 0, SEEK_CUR);
  for (attempt = 0;; attempt++)
    {
      cleanup_error sbx_error_t *e = NULL;
      struct resp_state st;
      http_parser parser;
      size_t received = 0;
      int reused = 0, closed = 0, rc;

      if (c->fd >= 0 && c->requests > 0)
        {
          if (peer_gone (c->fd))
            sbx_http_conn_reset (c);
          else
            reused = 1;
        }
      if (sbx_http_conn_connect (c, err) < 0)
        return -1;

      resp->status = 0;
      sbx_buf_reset (&resp->body);
      memset (&st, 0, sizeof st);
      st.resp = resp;
      st.on_data = on_data;
      st.ctx = ctx;
      st.max_collect = max_collect;
      http_parser_init (&parser, HTTP_RESPONSE);
      parser.data = &st;

      rc = send_request (c, req, &e);
      if (rc < 0 && e->sys_errno != EINTR && is_disconnect (e->sys_errno))
        {
          /* The daemon may have answered (say, 413) and closed before
             reading the whole body: its answer is more useful than
             EPIPE. */
          cleanup_error sbx_error_t *read_err = NULL;
          if (read_response (c, &parser, &st, &received, &closed, &read_err) == 0)
            rc = 0;
          else if (received == 0)
            closed = 1;
        }
      else if (rc == 0)
        rc = read_response (c, &parser, &st, &received, &closed, &e);
      sbx_error_free (st.cb_err);

      if (rc == 0)
        {
          c->requests++;
          if (!st.keep_alive)
            sbx_http_conn_reset (c);
          return 0;
        }
      sbx_http_conn_reset (c);
      /* A kept-alive connection the server closed just as we reused it:
         nothing was answered, so nothing was done; try once more on a
         fresh connection. */
      if (attempt == 0 && reused && closed && received == 0
          && (req->body_fd < 0 || body_offset >= 0))
        {
          if (req->body_fd < 0 || lseek (req->body_fd, body_offset, SEEK_SET) >= 0)
            continue;
        }
      if (err != NULL)
        sbx_error_move (err, &e);
      return -1;
    }
}

void
sbx_url_escape (struct sbx_buf *out, const char *s, int keep_slash)
{
  static const char hex[] = "0123456789ABCDEF";

  while (*s)
    {
      size_t run = 0;
      char esc[3];

      while (s[run] != '\0'
             && ((s[run] >= 'a' && s[run] <= 'z') || (s[run] >= 'A' && s[run] <= 'Z')
                 || (s[run] >= '0' && s[run] <= '9') || s[run] == '-' || s[run] == '.'
                 || s[run] == '_' || s[run] == '~' || (keep_slash && s[run] == '/')))
        run++;
      if (run > 0)
        {
          sbx_buf_append (out, s, run);
          s += run;
          continue;
        }
      esc[0] = '%';
      esc[1] = hex[(unsigned char) *s >> 4];
      esc[2] = hex[(unsigned char) *s & 15];
      sbx_buf_append (out, esc, 3);
      s++;
    }
}
