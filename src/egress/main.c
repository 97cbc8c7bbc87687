/* sbx: the egress process: one thread per sandbox connection.
 *
 * Reads packets from the front end (egress/wire.h), each a connection a
 * sandbox opened to its proxy address plus the policy to judge it by. The
 * thread reads the request head (bounded in bytes and time), decides by
 * the policy, resolves the name itself, refuses special addresses after
 * resolution (so a name that resolves to 127.0.0.1 or the metadata
 * service is caught, and the address checked is the one connected to:
 * no second lookup a rebinding DNS server could answer differently),
 * connects, and relays bytes both ways until either side closes or the
 * connection is idle too long. Connections at once are bounded in all,
 * per tenant (with a fair share when the proxy is busy) and per sandbox,
 * those yet to send their request apart and fewer (egress/limits.h);
 * bytes per sandbox over the process's life.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egress/creds.h"
#include "egress/egress.h"
#include "egress/limits.h"
#include "egress/tls.h"
#include "egress/wire.h"
#include "util/log.h"

/* A connection's request head must come within this: until then it is
   pending (egress/limits.h), and pending ones are few. */
#define REQUEST_HEAD_MS 10000
/* The request inside a TLS connection to a host with rules (an open one). */
#define HEAD_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 10000
#define RELAY_CHUNK 65536 /* per connection: 1024 of them hold 64 MiB */

static struct sbx_egress_opts opts;

static struct sbx_egress_limits *limits;

static int channel_fd = -1;
static uint64_t reports_dropped;

struct conn
{
  int client, upstream;
  char sandbox[SBX_EGRESS_ID_MAX];
  struct sbx_egress_slot slot; /* what it holds of the limits (egress/limits.h) */
  /* For the report (wire.h). */
  char host[256];
  uint16_t port;
  int status, allowed;
  char reason[192];
  uint64_t bytes_out, bytes_in;
  int build; /* a recipe build's (tenant SBX_EGRESS_BUILD_TENANT) */
  struct sbx_net_policy policy;
  struct sbx_egress_creds creds; /* this connection's only: wiped at its end */
  char *head;      /* what was read from the client */
  size_t head_len; /* bytes in head, the request and maybe more */
};

/* opts.build_mirror's host and port; host "" when none. */
static struct sbx_net_mirror mirror;


void
sbx_egress_opts_defaults (struct sbx_egress_opts *o)
{
  memset (o, 0, sizeof *o);
  o->max_conns = 64;
  o->max_total = 1024;
  o->max_tenant = 256;
  o->idle_ms = 300 * 1000;
  o->max_bytes = 0;
}

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Count n more bytes; 0 when the sandbox is now over its allowance. */
static int
count_bytes (struct conn *c, size_t n)
{
  int first_over, ok = sbx_egress_count_bytes (limits, &c->slot, n, &first_over);

  if (first_over)
    sbx_warn ("sandbox %s: egress byte allowance (%llu bytes) used up; its connections are"
              " closed", c->sandbox, (unsigned long long) opts.max_bytes);
  return ok;
}

/* The audit record of one connection, to the front end (wire.h). */
static void
report (const char *sandbox, const char *host, unsigned port, int status, int allowed,
        const char *reason, uint64_t out, uint64_t in)
{
  struct sbx_egress_report r;
  uint64_t dropped;

  memset (&r, 0, sizeof r);
  r.type = SBX_EGRESS_MSG_REPORT;
  r.len = sizeof r;
  snprintf (r.sandbox, sizeof r.sandbox, "%s", sandbox);
  snprintf (r.host, sizeof r.host, "%s", host);
  snprintf (r.reason, sizeof r.reason, "%s", reason);
  r.port = port;
  r.status = (uint32_t) status;
  r.allowed = allowed ? 1 : 0;
  r.bytes_out = out;
  r.bytes_in = in;
  if (send (channel_fd, &r, sizeof r, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t) sizeof r)
    return;
  dropped = __atomic_add_fetch (&reports_dropped, 1, __ATOMIC_RELAXED);
  if ((dropped & (dropped - 1)) == 0)
    sbx_warn ("egress: %llu audit reports dropped (the front end does not read them)",
              (unsigned long long) dropped);
}

/* Write all of buf, waiting at most timeout_ms for room each time. */
static int
write_all (int fd, const void *buf, size_t n, int timeout_ms)
{
  const char *p = buf;

  while (n > 0)
    {
      ssize_t w = send (fd, p, n, MSG_NOSIGNAL);
      if (w > 0)
        {
          p += w;
          n -= (size_t) w;
          continue;
        }
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        {
          struct pollfd pfd = {fd, POLLOUT, 0};
          if (poll (&pfd, 1, timeout_ms) <= 0)
            return -1;
          continue;
        }
      return -1;
    }
  return 0;
}

/* After an error answer: stop writing and read what the client still
   sends (a bounded amount, briefly), so closing does not reset the
   connection before the client has read the answer. */
static void
linger (int fd)
{
  char buf[4096];
  size_t total = 0;
  int64_t deadline = now_ms () + 1000;

  shutdown (fd, SHUT_WR);
  while (total < 256 * 1024)
    {
      struct pollfd pfd = {fd, POLLIN, 0};
      int64_t left = deadline - now_ms ();
      ssize_t n;
      if (left <= 0 || poll (&pfd, 1, (int) left) <= 0)
        return;
      n = recv (fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0)
        return;
      total += (size_t) n;
    }
}

static void
answer (int fd, int status, const char *reason, const char *text)
{
  char buf[1024];
  int body, n;

  body = (int) strlen (text) + 1;
  n = snprintf (buf, sizeof buf,
                "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                "Content-Length: %d\r\nConnection: close\r\n\r\n%s\n",
                status, reason, body, text);
  if (n > 0 && (size_t) n < sizeof buf)
    write_all (fd, buf, (size_t) n, 1000);
  linger (fd);
}

/* answer, remembered for the report. */
static void
respond (struct conn *c, int status, const char *phrase, const char *text)
{
  /* Every such answer is the connection's last: its place is free before
     the client reads it, so a client that tries again at once is not
     refused for a connection that is over. */
  sbx_egress_release (limits, &c->slot);
  c->status = status;
  snprintf (c->reason, sizeof c->reason, "%s", strncmp (text, "sbx: ", 5) == 0 ? text + 5 : text);
  answer (c->client, status, phrase, text);
}

/* The same from the thread that reads the channel, which must not wait
   on a sandbox: what the client sent so far is read (so that closing does
   not reset the connection under the answer), the answer goes into the
   fresh socket's buffer without waiting, and the connection is closed. */
static void
refuse_now (int fd, const char *text)
{
  char buf[1024];
  int body = (int) strlen (text) + 1, n, i;

  for (i = 0; i < 16 && recv (fd, buf, sizeof buf, MSG_DONTWAIT) > 0; i++)
    ;
  n = snprintf (buf, sizeof buf,
                "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\n"
                "Content-Length: %d\r\nConnection: close\r\n\r\n%s\n",
                body, text);
  if (n > 0 && (size_t) n < sizeof buf && send (fd, buf, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
    shutdown (fd, SHUT_WR);
  for (i = 0; i < 16 && recv (fd, buf, sizeof buf, MSG_DONTWAIT) > 0; i++)
    ;
  close (fd);
}

/* Read until the end of the head (CRLF CRLF). Returns the head's length,
   0 when the client went away, -1 too large, -2 too slow. */
static ssize_t
read_head (struct conn *c)
{
  int64_t deadline = now_ms () + REQUEST_HEAD_MS;
  char *end;

  c->head = malloc (SBX_EGRESS_HEAD_MAX + 1);
  if (c->head == NULL)
    return 0;
  c->head_len = 0;
  for (;;)
    {
      struct pollfd pfd = {c->client, POLLIN, 0};
      int64_t left = deadline - now_ms ();
      ssize_t n;

      if (left <= 0)
        return -2;
      if (poll (&pfd, 1, (int) left) <= 0)
        continue;
      n = recv (c->client, c->head + c->head_len, SBX_EGRESS_HEAD_MAX - c->head_len, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (n <= 0)
        return 0;
      c->head_len += (size_t) n;
      c->head[c->head_len] = '\0';
      end = memmem (c->head, c->head_len, "\r\n\r\n", 4);
      if (end != NULL)
        return end + 4 - c->head;
      if (c->head_len == SBX_EGRESS_HEAD_MAX)
        return -1;
    }
}

/* Connect to a (non-blocking), within CONNECT_TIMEOUT_MS. fd or -errno. */
static int
dial (const struct addrinfo *a)
{
  struct pollfd pfd;
  int fd, soerr = 0;
  socklen_t sl = sizeof soerr;

  fd = socket (a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect (fd, a->ai_addr, a->ai_addrlen) == 0)
    return fd;
  if (errno != EINPROGRESS)
    {
      int e = errno;
      close (fd);
      return -e;
    }
  pfd.fd = fd;
  pfd.events = POLLOUT;
  pfd.revents = 0;
  if (poll (&pfd, 1, CONNECT_TIMEOUT_MS) <= 0)
    {
      close (fd);
      return -ETIMEDOUT;
    }
  if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
    soerr = errno;
  if (soerr != 0)
    {
      close (fd);
      return -soerr;
    }
  return fd;
}

static void
to_addr (const struct addrinfo *a, struct sbx_net_addr *out)
{
  memset (out, 0, sizeof *out);
  out->family = a->ai_family;
  if (a->ai_family == AF_INET)
    memcpy (out->bytes, &((const struct sockaddr_in *) a->ai_addr)->sin_addr, 4);
  else
    memcpy (out->bytes, &((const struct sockaddr_in6 *) a->ai_addr)->sin6_addr, 16);
}

/* Decide, resolve, check, connect: the upstream fd, or -1 after answering
   the client. */
/* 1 when the kernel routes a's address to this host itself (RTN_LOCAL):
   any address of any of its interfaces, a public one included, where a
   sandbox with open egress would reach every service bound to 0.0.0.0
   from inside, past firewall rules written for the outside. Asked of the
   kernel's own routing: a UDP socket connected to the address is given
   the address itself as its source exactly when the route is local. A
   check that cannot be made counts as local (refused). */
static int
routed_here (const struct addrinfo *a)
{
  struct sockaddr_storage src;
  socklen_t len = sizeof src;
  int fd = socket (a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), here = 1;

  if (fd < 0)
    return 1;
  if (connect (fd, a->ai_addr, a->ai_addrlen) < 0)
    here = errno == ENETUNREACH || errno == EHOSTUNREACH ? 0 : 1; /* unroutable: dial fails */
  else if (getsockname (fd, (struct sockaddr *) &src, &len) == 0)
    {
      if (a->ai_family == AF_INET)
        here = memcmp (&((struct sockaddr_in *) &src)->sin_addr,
                       &((const struct sockaddr_in *) a->ai_addr)->sin_addr, 4)
               == 0;
      else
        here = memcmp (&((struct sockaddr_in6 *) &src)->sin6_addr,
                       &((const struct sockaddr_in6 *) a->ai_addr)->sin6_addr, 16)
               == 0;
    }
  close (fd);
  return here;
}

static int
open_upstream (struct conn *c, const struct sbx_egress_req *r)
{
  char name[SBX_NET_NAME_MAX + 1], text[600], shown[300], a_text[INET6_ADDRSTRLEN];
  char special_seen[INET6_ADDRSTRLEN + 40] = "";
  struct sbx_net_addr lit;
  struct addrinfo hints, *res = NULL, *a;
  char port[8];
  int kind, fd = -1, last_err = 0, gai, tried = 0;
  const char *host_for_policy;

  kind = sbx_net_host_parse (r->host, strlen (r->host), name, &lit);
  if (kind < 0)
    {
      respond (c, 400, "Bad Request", "sbx: the host is not a valid name or address");
      return -1;
    }
  if (kind == 1 && lit.family == AF_INET6)
    snprintf (shown, sizeof shown, "[%s]:%u", r->host, (unsigned) r->port);
  else
    snprintf (shown, sizeof shown, "%s:%u", kind == 1 ? r->host : name, (unsigned) r->port);
  host_for_policy = kind == 0 ? name : NULL;
  snprintf (c->host, sizeof c->host, "%s", kind == 0 ? name : r->host);
  c->port = r->port;
  if (kind == 0 && sbx_net_precheck (&c->policy, name, r->port) == SBX_NET_DENY)
    goto denied;
  snprintf (port, sizeof port, "%u", (unsigned) r->port);
  memset (&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (kind == 1 ? AI_NUMERICHOST : 0);
  gai = getaddrinfo (kind == 1 ? r->host : name, port, &hints, &res);
  if (gai != 0)
    {
      /* A name no entry allows by itself (only address entries could have
         let it through) is refused as such, not reported as a DNS error. */
      if (kind == 0 && sbx_net_decide (&c->policy, name, r->port, NULL) != SBX_NET_ALLOW)
        goto denied;
      snprintf (text, sizeof text, "sbx: cannot resolve %s: %s", shown, gai_strerror (gai));
      respond (c, 502, "Bad Gateway", text);
      return -1;
    }
  for (a = res; a != NULL; a = a->ai_next)
    {
      struct sbx_net_addr addr;
      const char *special;

      if (a->ai_family != AF_INET && a->ai_family != AF_INET6)
        continue;
      to_addr (a, &addr);
      special = sbx_net_addr_special (&addr);
      if (special == NULL && !opts.allow_private && routed_here (a))
        special = "this host";
      /* A recipe build may reach the mirror the administrator named
         whatever its address range, but a metadata or link-local one. */
      if (special != NULL && !opts.allow_private
          && !(c->build && sbx_net_mirror_allows (&mirror, r->host, r->port, special)))
        {
          sbx_net_addr_format (&addr, a_text, sizeof a_text);
          snprintf (special_seen, sizeof special_seen, "%s (%s)", a_text, special);
          continue;
        }
      if (sbx_net_decide (&c->policy, host_for_policy, r->port, &addr) != SBX_NET_ALLOW)
        continue;
      tried = 1;
      fd = dial (a);
      if (fd >= 0)
        break;
      last_err = -fd;
    }
  freeaddrinfo (res);
  c->allowed = tried;
  if (fd >= 0)
    return fd;
  if (tried)
    {
      snprintf (text, sizeof text, "sbx: cannot connect to %s: %s", shown, strerror (last_err));
      if (last_err == ETIMEDOUT)
        respond (c, 504, "Gateway Timeout", text);
      else
        respond (c, 502, "Bad Gateway", text);
      return -1;
    }
  if (special_seen[0])
    {
      snprintf (text, sizeof text,
                "sbx: egress to %s is not allowed: it resolves to a non-public address %s",
                shown, special_seen);
      /* The reason phrase says why too: apt, pip and git show the status
         line and drop the body. */
      respond (c, 403, "Forbidden (sbx: a non-public address)", text);
      return -1;
    }
denied:
  snprintf (text, sizeof text, "sbx: egress to %s is not allowed by this sandbox's policy",
            shown);
  respond (c, 403, "Forbidden (sbx: not in the sandbox's allowlist)", text);
  return -1;
}

/* Bytes both ways until both are done, an error, the idle limit, or the
   byte allowance. */
static void
relay (struct conn *c)
{
  char *buf = malloc (RELAY_CHUNK);
  int open_in = 1, open_out = 1; /* client->upstream, upstream->client */

  if (buf == NULL)
    return;
  while (open_in || open_out)
    {
      struct pollfd pfd[2] = {{c->client, open_in ? POLLIN : 0, 0},
                              {c->upstream, open_out ? POLLIN : 0, 0}};
      int r = poll (pfd, 2, (int) opts.idle_ms), i;

      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break; /* idle */
      for (i = 0; i < 2; i++)
        {
          int from = i == 0 ? c->client : c->upstream, to = i == 0 ? c->upstream : c->client;
          ssize_t n;
          if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
          n = recv (from, buf, RELAY_CHUNK, MSG_DONTWAIT);
          if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
          if (n <= 0)
            {
              /* Half-close: the other side sees the end, may answer. */
              shutdown (to, SHUT_WR);
              if (i == 0)
                open_in = 0;
              else
                open_out = 0;
              if (n < 0)
                goto out;
              continue;
            }
          if (i == 0)
            c->bytes_out += (uint64_t) n;
          else
            c->bytes_in += (uint64_t) n;
          if (!count_bytes (c, (size_t) n)
              || write_all (to, buf, (size_t) n, (int) opts.idle_ms) < 0)
            goto out;
        }
    }
out:
  free (buf);
}

/* Bytes both ways between two TLS connections, as relay() does, until the
   upstream is done (it closes after the one request: Connection: close);
   a client that stops sending still gets the answer. */
static void
relay_tls (struct conn *c, SSL *cl, SSL *up)
{
  char *buf = malloc (RELAY_CHUNK);
  int open_in = 1, open_out = 1;

  if (buf == NULL)
    return;
  while (open_out)
    {
      struct pollfd pfd[2] = {{c->client, open_in ? POLLIN : 0, 0}, {c->upstream, POLLIN, 0}};
      int i, r = 0;

      if ((!open_in || SSL_pending (cl) == 0) && SSL_pending (up) == 0)
        {
          r = poll (pfd, 2, (int) opts.idle_ms);
          if (r < 0 && errno == EINTR)
            continue;
          if (r <= 0)
            break;
        }
      for (i = 0; i < 2; i++)
        {
          SSL *from = i == 0 ? cl : up, *to = i == 0 ? up : cl;
          int n;
          if (i == 0 && !open_in)
            continue;
          if (SSL_pending (from) == 0 && !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
          n = SSL_read (from, buf, RELAY_CHUNK);
          if (n <= 0)
            {
              int e = SSL_get_error (from, n);
              if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                continue;
              if (i == 0)
                open_in = 0;
              else
                open_out = 0;
              continue;
            }
          if (i == 0)
            c->bytes_out += (uint64_t) n;
          else
            c->bytes_in += (uint64_t) n;
          if (!count_bytes (c, (size_t) n) || SSL_write (to, buf, n) != n)
            goto out;
        }
    }
out:
  explicit_bzero (buf, RELAY_CHUNK);
  free (buf);
}

/* An answer of the proxy inside the client's TLS connection. */
static void
answer_tls (struct conn *c, SSL *s, int status, const char *phrase, const char *text)
{
  char buf[1024];
  int n;

  c->status = status;
  snprintf (c->reason, sizeof c->reason, "%s", text + 5);
  n = snprintf (buf, sizeof buf,
                "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                status, phrase, strlen (text) + 1, text);
  if (n > 0 && (size_t) n < sizeof buf)
    SSL_write (s, buf, n);
}

/* A CONNECT to a host with rules: TLS to the upstream first (its
   certificate verified for real: a failure is the CONNECT's 502), then
   the client's TLS ended here with a leaf for the host, its request head
   read, rewritten with the rules, sent on; then bytes both ways. One
   request per connection (Connection: close), as for plain HTTP. */
static void
intercept (struct conn *c, const struct sbx_egress_req *r, const char *pattern, ssize_t hl)
{
  static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  char why[240], text[600], *head = NULL, *out = NULL;
  SSL *up, *cl = NULL;
  size_t len = 0, out_len = 0;
  char *end = NULL;
  int64_t deadline;

  up = sbx_egress_tls_connect (c->upstream, c->host, why, sizeof why);
  if (up == NULL)
    {
      snprintf (text, sizeof text, "sbx: TLS to %s:%u failed: %s", c->host, (unsigned) r->port,
                why);
      respond (c, 502, "Bad Gateway", text);
      return;
    }
  c->status = 200;
  if (c->head_len > (size_t) hl)
    {
      /* Its TLS hello came before our 200: it cannot be ours. */
      snprintf (c->reason, sizeof c->reason,
                "the client sent data before the CONNECT to a host with rules was answered");
      goto out;
    }
  if (write_all (c->client, established, sizeof established - 1, 10000) < 0)
    goto out;
  cl = sbx_egress_tls_accept (c->client, c->host);
  if (cl == NULL)
    {
      snprintf (c->reason, sizeof c->reason,
                "the client's TLS handshake with the proxy failed (does it trust sbx's CA?)");
      goto out;
    }
  head = malloc (SBX_EGRESS_HEAD_MAX + 1);
  if (head == NULL)
    goto out;
  deadline = now_ms () + HEAD_TIMEOUT_MS;
  while (end == NULL && len < SBX_EGRESS_HEAD_MAX && now_ms () < deadline)
    {
      int n = SSL_read (cl, head + len, (int) (SBX_EGRESS_HEAD_MAX - len));
      if (n <= 0)
        goto out;
      len += (size_t) n;
      head[len] = '\0';
      end = memmem (head, len, "\r\n\r\n", 4);
    }
  if (end == NULL || memchr (head, '\0', (size_t) (end + 4 - head)) != NULL
      || sbx_egress_rewrite (head, (size_t) (end + 4 - head), &c->creds, pattern, &out, &out_len)
             < 0)
    {
      answer_tls (c, cl, 400, "Bad Request",
                  "sbx: bad request inside TLS: the head is malformed or too large");
      goto out;
    }
  c->bytes_out += len;
  if (!count_bytes (c, len) || SSL_write (up, out, (int) out_len) != (int) out_len)
    goto out;
  if ((size_t) (end + 4 - head) < len)
    {
      int rest = (int) (len - (size_t) (end + 4 - head));
      if (SSL_write (up, end + 4, rest) != rest)
        goto out;
    }
  relay_tls (c, cl, up);
out:
  if (out)
    {
      explicit_bzero (out, out_len);
      free (out);
    }
  if (head)
    {
      explicit_bzero (head, SBX_EGRESS_HEAD_MAX + 1);
      free (head);
    }
  sbx_egress_tls_close (cl);
  sbx_egress_tls_close (up);
}

/* The credential rules for this request's host, if any (egress/creds.h):
   a forwarded head gets them now; -1 after answering the client when
   they cannot be applied. */
static int
apply_rules (struct conn *c, struct sbx_egress_req *r, const char **ruled)
{
  char name[SBX_NET_NAME_MAX + 1], text[400];
  struct sbx_net_addr lit;
  const char *pattern, *missing;
  char *out = NULL;
  size_t out_len = 0;

  *ruled = NULL;
  if (c->creds.nheaders + c->creds.nswaps + c->creds.nbroken == 0
      || sbx_net_host_parse (r->host, strlen (r->host), name, &lit) != 0)
    return 0;
  pattern = sbx_egress_creds_match (&c->creds, name, r->port);
  if (pattern == NULL)
    return 0;
  missing = sbx_egress_creds_broken (&c->creds, pattern);
  if (missing != NULL)
    {
      snprintf (c->host, sizeof c->host, "%s", name);
      c->port = r->port;
      snprintf (text, sizeof text,
                "sbx: the credential rules for %s use secret `%s`, which does not exist any more",
                pattern, missing);
      respond (c, 502, "Bad Gateway", text);
      return -1;
    }
  if (r->method != SBX_EGRESS_FORWARD)
    {
      if (!sbx_egress_tls_ready ())
        {
          snprintf (c->host, sizeof c->host, "%s", name);
          c->port = r->port;
          respond (c, 502, "Bad Gateway",
                   "sbx: this host has credential rules, and the proxy cannot terminate TLS"
                   " (no CA)");
          return -1;
        }
      *ruled = pattern;
      return 0;
    }
  if (sbx_egress_rewrite (r->head, r->head_len, &c->creds, pattern, &out, &out_len) < 0)
    {
      respond (c, 502, "Bad Gateway", "sbx: the credential rules could not be applied");
      return -1;
    }
  explicit_bzero (r->head, r->head_len);
  free (r->head);
  r->head = out;
  r->head_len = out_len;
  return 0;
}

static void *
serve (void *arg)
{
  struct conn *c = arg;
  struct sbx_egress_req r;
  char why[200], text[300];
  const char *ruled = NULL, *refusal;
  ssize_t hl;

  memset (&r, 0, sizeof r);
  hl = read_head (c);
  if (hl == -1)
    respond (c, 400, "Bad Request", "sbx: the request head is too large");
  else if (hl == -2)
    respond (c, 408, "Request Timeout", "sbx: the request head did not come in time");
  if (hl <= 0)
    goto done;
  if (sbx_egress_parse (c->head, (size_t) hl, &r, why, sizeof why) < 0)
    {
      snprintf (text, sizeof text, "sbx: bad proxy request: %s", why);
      respond (c, 400, "Bad Request", text);
      goto done;
    }
  /* A request: from now on it counts as open. */
  if (sbx_egress_promote (limits, &c->slot, &refusal) < 0)
    {
      snprintf (c->host, sizeof c->host, "%s", r.host);
      c->port = r.port;
      snprintf (text, sizeof text, "sbx: %s", refusal);
      respond (c, 429, "Too Many Requests", text);
      goto done;
    }
  if (apply_rules (c, &r, &ruled) < 0)
    goto done;
  c->upstream = open_upstream (c, &r);
  if (c->upstream >= 0 && ruled != NULL)
    intercept (c, &r, ruled, hl);
  else if (c->upstream >= 0)
    {
      int ok;
      c->status = 200;
      if (r.method == SBX_EGRESS_CONNECT)
        {
          static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
          ok = write_all (c->client, established, sizeof established - 1, 10000) == 0;
        }
      else
        {
          c->bytes_out += r.head_len;
          ok = count_bytes (c, r.head_len)
               && write_all (c->upstream, r.head, r.head_len, (int) opts.idle_ms) == 0;
        }
      /* What the client sent after the head (a body, a TLS hello). */
      if (ok && c->head_len > (size_t) hl)
        {
          c->bytes_out += c->head_len - (size_t) hl;
          ok = count_bytes (c, c->head_len - (size_t) hl)
               && write_all (c->upstream, c->head + hl, c->head_len - (size_t) hl,
                             (int) opts.idle_ms) == 0;
        }
      if (ok)
        relay (c);
    }
done:
  if (r.head)
    explicit_bzero (r.head, r.head_len);
  free (r.head);
  if (c->upstream >= 0)
    close (c->upstream);
  /* The place is free before the client sees the end: a client (or a VM's
     agent, which opens its next stream only then) that connects again at
     once is not refused for a connection that is over. And before the
     report: a connection's audit record means its place is free. */
  sbx_egress_release (limits, &c->slot);
  /* A connection that never sent a request attempted nothing. */
  if (c->status != 0)
    report (c->sandbox, c->host, c->port, c->status, c->allowed, c->reason, c->bytes_out,
            c->bytes_in);
  close (c->client);
  sbx_net_policy_free (&c->policy);
  sbx_egress_creds_free (&c->creds);
  if (c->head)
    explicit_bzero (c->head, c->head_len);
  free (c->head);
  free (c);
  return NULL;
}

/* Rebuild the policy a packet carries; -1 when it is malformed. */
static int
policy_from (const struct sbx_egress_conn *m, size_t n, struct sbx_net_policy *p,
             struct sbx_egress_creds *creds)
{
  const char *s = (const char *) (m + 1), *end = s + m->strings_len;
  const char *items[2 * SBX_NET_MAX_ENTRIES];
  size_t count = (size_t) m->nallow + m->ndeny, i;
  sbx_error_t *err = NULL;

  if (m->nallow > SBX_NET_MAX_ENTRIES || m->ndeny > SBX_NET_MAX_ENTRIES
      || sizeof *m + (size_t) m->strings_len != n || m->reserved != 0 || m->reserved2 != 0)
    return -1;
  for (i = 0; i < count; i++)
    {
      const char *z = s < end ? memchr (s, '\0', (size_t) (end - s)) : NULL;
      if (z == NULL)
        return -1;
      items[i] = s;
      s = z + 1;
    }
  if (sbx_egress_creds_parse (s, (size_t) (end - s), m->nheaders, m->nswaps, m->nbroken, creds)
      < 0)
    return -1;
  if (sbx_net_policy_build (p, items, m->nallow, items + m->nallow, m->ndeny, &err) < 0)
    {
      sbx_error_free (err);
      sbx_egress_creds_free (creds);
      return -1;
    }
  return 0;
}

static void
accept_packet (const struct sbx_egress_conn *m, size_t n, int fd)
{
  struct conn *c;
  const char *why;
  pthread_attr_t attr;
  pthread_t t;

  if (n < sizeof *m || m->type != SBX_EGRESS_MSG_CONN || m->len != n
      || memchr (m->sandbox, '\0', sizeof m->sandbox) == NULL || m->sandbox[0] == '\0'
      || memchr (m->tenant, '\0', sizeof m->tenant) == NULL || m->tenant[0] == '\0')
    {
      sbx_warn ("egress: a malformed packet from the front end");
      close (fd);
      return;
    }
  c = calloc (1, sizeof *c);
  if (c == NULL)
    {
      close (fd);
      return;
    }
  c->client = fd;
  c->upstream = -1;
  memcpy (c->sandbox, m->sandbox, sizeof c->sandbox);
  c->build = strcmp (m->tenant, SBX_EGRESS_BUILD_TENANT) == 0;
  if (policy_from (m, n, &c->policy, &c->creds) < 0)
    {
      sbx_warn ("egress: a malformed policy for sandbox %s", m->sandbox);
      close (fd);
      free (c);
      return;
    }
  if (sbx_egress_admit (limits, m->tenant, m->sandbox, &c->slot, &why) < 0)
    {
      char text[200];
      snprintf (text, sizeof text, "sbx: %s", why);
      refuse_now (fd, text);
      report (m->sandbox, "", 0, 429, 0, why, 0, 0);
      sbx_net_policy_free (&c->policy);
      sbx_egress_creds_free (&c->creds);
      free (c);
      return;
    }
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize (&attr, 256 * 1024);
  if (pthread_create (&t, &attr, serve, c) != 0)
    {
      refuse_now (fd, "sbx: the egress proxy is out of threads");
      report (m->sandbox, "", 0, 429, 0, "the egress proxy is out of threads", 0, 0);
      sbx_egress_release (limits, &c->slot);
      sbx_net_policy_free (&c->policy);
      sbx_egress_creds_free (&c->creds);
      free (c);
    }
  pthread_attr_destroy (&attr);
}

int
sbx_egress_main (const struct sbx_egress_opts *o, int channel, uid_t uid, gid_t gid)
{
  static unsigned char packet[SBX_EGRESS_MSG_MAX] __attribute__ ((aligned (8)));
  sbx_error_t *err = NULL;
  sigset_t mask;

  opts = *o;
  if (opts.build_mirror != NULL && sbx_net_mirror_parse (opts.build_mirror, &mirror) < 0)
    sbx_warn ("egress: --template-mirror `%s` has no host to allow", opts.build_mirror);
  channel_fd = channel;
  signal (SIGPIPE, SIG_IGN);
  /* SIGTERM ends us at once (nothing to save); the parent's death too. */
  sigemptyset (&mask);
  pthread_sigmask (SIG_SETMASK, &mask, NULL);
  {
    struct sbx_egress_bounds open = {opts.max_total, opts.max_tenant, opts.max_conns};
    struct sbx_egress_bounds pending;

    sbx_egress_pending_bounds (&open, &pending);
    limits = sbx_egress_limits_new (&pending, &open, opts.max_bytes);
  }
  /* Before the drop: the CA key is root's and Landlock then opens nothing.
     Without it, hosts with rules are refused (502), the rest works. */
  if (opts.state_dir != NULL && sbx_egress_tls_init (opts.state_dir, opts.upstream_ca, &err) < 0)
    {
      sbx_warn ("egress: no TLS interception: %s", err->msg);
      sbx_error_free (err);
      err = NULL;
    }
  if (limits == NULL || sbx_egress_drop (uid, gid, &err) < 0)
    {
      fprintf (stderr, "sbx egress: %s\n", err ? err->msg : "out of memory");
      sbx_error_free (err);
      return 1;
    }
  if (opts.allow_private)
    sbx_warn ("egress proxy: private and loopback destinations are ALLOWED"
              " (--egress-allow-private: tests only)");
  else
    sbx_debug ("egress proxy ready");
  for (;;)
    {
      char cbuf[CMSG_SPACE (sizeof (int) * 4)];
      struct iovec iov = {packet, sizeof packet};
      struct msghdr mh;
      struct cmsghdr *cm;
      int fds[4], nfds = 0, i;
      ssize_t n;

      memset (&mh, 0, sizeof mh);
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = cbuf;
      mh.msg_controllen = sizeof cbuf;
      n = recvmsg (channel, &mh, MSG_CMSG_CLOEXEC);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      for (cm = CMSG_FIRSTHDR (&mh); cm != NULL; cm = CMSG_NXTHDR (&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
          {
            size_t k = (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int);
            for (i = 0; i < (int) k && nfds < 4; i++)
              memcpy (&fds[nfds++], CMSG_DATA (cm) + i * sizeof (int), sizeof (int));
          }
      if (nfds != 1 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
        {
          for (i = 0; i < nfds; i++)
            close (fds[i]);
          sbx_warn ("egress: a packet without exactly one descriptor");
          continue;
        }
      accept_packet ((const struct sbx_egress_conn *) packet, (size_t) n, fds[0]);
    }
  return 0;
}
