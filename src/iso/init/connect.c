/* sbx-init: TCP connects for the daemon's port proxy (SBX_MSG_CONNECT,
 * see iso/proto.h).
 *
 * Init is the one process of the sandbox the daemon trusts to act for it,
 * and it sits in the sandbox's network namespace: a socket it connects to
 * 127.0.0.1:PORT reaches the sandbox's own loopback and nothing else (the
 * namespace has no other interface and no route). The daemon's front end
 * gets only that connected socket, never the right to connect anywhere.
 *
 * Init is single-threaded and must never block (it reaps every process of
 * the sandbox and serves every command): connects are non-blocking, their
 * sockets are watched in the main poll loop, and each has a deadline.
 *
 * Landlock: init's domain (harden.c) handles no network access right, so
 * TCP connect is not restricted by it, for init as for the sandbox's own
 * code; the network namespace is what confines TCP. Should a later change
 * handle LANDLOCK_ACCESS_NET_CONNECT_TCP there, it would have to allow the
 * ports proxied to, for everything in the sandbox alike (a Landlock domain
 * cannot be left, and a helper forked by init would inherit it): this file
 * would then fail with EACCES, which the daemon reports as a 502.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "iso/init/init.h"

struct pending
{
  int fd; /* -1: free slot */
  int v6; /* trying [::1] (after 127.0.0.1 refused) */
  uint64_t req_id;
  uint32_t port;
  int64_t deadline_ms; /* CLOCK_MONOTONIC */
};

static struct pending table[SBX_CONNECT_MAX];
static int table_ready;

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
table_init (void)
{
  int i;

  if (table_ready)
    return;
  for (i = 0; i < SBX_CONNECT_MAX; i++)
    table[i].fd = -1;
  table_ready = 1;
}

static void
send_failed (uint64_t req_id, int sys_errno)
{
  struct sbx_msg_connect_result m;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_CONNECT_FAILED;
  m.hdr.len = sizeof m;
  m.req_id = req_id;
  m.sys_errno = sys_errno ? sys_errno : EIO;
  init_send_event (&m, sizeof m);
}

/* The answer, and the slot freed. */
static void
finish (struct pending *c, int sys_errno)
{
  struct sbx_msg_connect_result m;

  if (sys_errno == 0)
    {
      memset (&m, 0, sizeof m);
      m.hdr.type = SBX_MSG_CONNECTED;
      m.hdr.len = sizeof m;
      m.req_id = c->req_id;
      /* Never wait for room: a daemon that does not read gets "try again"
         through the event queue, and the socket is closed here. */
      if (init_try_send (&m, sizeof m, &c->fd, 1) < 0)
        send_failed (c->req_id, EAGAIN);
    }
  else
    send_failed (c->req_id, sys_errno);
  close (c->fd);
  c->fd = -1;
}

/* Start connecting c to 127.0.0.1 (or [::1] when c->v6). 0: connected,
   EINPROGRESS: watch it, another errno: failed. */
static int
start (struct pending *c)
{
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  int fd, r;

  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
  fd = socket (c->v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno;
  c->fd = fd;
  if (c->v6)
    {
      memset (&a6, 0, sizeof a6);
      a6.sin6_family = AF_INET6;
      a6.sin6_port = htons ((uint16_t) c->port);
      a6.sin6_addr = in6addr_loopback;
      r = connect (fd, (struct sockaddr *) &a6, sizeof a6);
    }
  else
    {
      memset (&a4, 0, sizeof a4);
      a4.sin_family = AF_INET;
      a4.sin_port = htons ((uint16_t) c->port);
      a4.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
      r = connect (fd, (struct sockaddr *) &a4, sizeof a4);
    }
  if (r == 0)
    return 0;
  return errno == EINTR ? EINPROGRESS : errno;
}

/* What a connect attempt said: done, go on watching, or try [::1]. A
   server listening only on [::1] (Node's default for "localhost") is found
   there; when neither answers, the answer is 127.0.0.1's refusal, unless
   [::1] ran out of time. */
static void
progress (struct pending *c, int result)
{
  for (;;)
    {
      if (result == EINPROGRESS)
        return;
      if (result == 0)
        {
          finish (c, 0);
          return;
        }
      if (!c->v6 && result == ECONNREFUSED)
        {
          c->v6 = 1;
          result = start (c);
          continue;
        }
      if (c->v6 && result != ETIMEDOUT)
        result = ECONNREFUSED;
      finish (c, result);
      return;
    }
}

void
init_handle_connect (const struct sbx_msg_connect *msg, size_t len, int nfds)
{
  struct pending *c = NULL;
  int i;

  if (len != sizeof *msg || nfds != 0 || msg->port == 0 || msg->port > 65535
      || msg->reserved != 0)
    init_protocol_violation ();
  table_init ();
  for (i = 0; i < SBX_CONNECT_MAX && c == NULL; i++)
    if (table[i].fd < 0)
      c = &table[i];
  if (c == NULL)
    {
      send_failed (msg->req_id, EAGAIN);
      return;
    }
  c->req_id = msg->req_id;
  c->port = msg->port;
  c->v6 = 0;
  c->deadline_ms = now_ms () + SBX_CONNECT_TIMEOUT_MS;
  progress (c, start (c));
}

int
init_connect_pollfds (struct pollfd *pfd)
{
  int i, n = 0;

  table_init ();
  for (i = 0; i < SBX_CONNECT_MAX; i++)
    if (table[i].fd >= 0)
      {
        pfd[n].fd = table[i].fd;
        pfd[n].events = POLLOUT;
        pfd[n].revents = 0;
        n++;
      }
  return n;
}

void
init_connect_after_poll (const struct pollfd *pfd, int n)
{
  int64_t now;
  int i, j;

  /* By fd, not by position: a CONNECT handled since the poll may have
     taken a slot. Every fd in pfd that is still a slot's is that slot's
     (an fd closed here cannot be reused while the others stay open). */
  for (j = 0; j < n; j++)
    {
      struct pending *c = NULL;
      if (!(pfd[j].revents & (POLLOUT | POLLERR | POLLHUP)))
        continue;
      for (i = 0; i < SBX_CONNECT_MAX && c == NULL; i++)
        if (table[i].fd >= 0 && table[i].fd == pfd[j].fd)
          c = &table[i];
      if (c != NULL)
        {
          int soerr = 0;
          socklen_t sl = sizeof soerr;
          if (getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            soerr = errno;
          progress (c, soerr);
        }
    }
  now = now_ms ();
  for (i = 0; i < SBX_CONNECT_MAX; i++)
    if (table[i].fd >= 0 && now >= table[i].deadline_ms)
      finish (&table[i], ETIMEDOUT);
}

int
init_connect_timeout_ms (void)
{
  int64_t now, next = -1;
  int i;

  table_init ();
  for (i = 0; i < SBX_CONNECT_MAX; i++)
    if (table[i].fd >= 0 && (next < 0 || table[i].deadline_ms < next))
      next = table[i].deadline_ms;
  if (next < 0)
    return -1;
  now = now_ms ();
  return next <= now ? 0 : (int) (next - now);
}

void
init_connect_drop_all (void)
{
  int i;

  table_init ();
  for (i = 0; i < SBX_CONNECT_MAX; i++)
    if (table[i].fd >= 0)
      {
        close (table[i].fd);
        table[i].fd = -1;
      }
}
