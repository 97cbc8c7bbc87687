/* sbx: the guest agent's egress streams (docs/vm.md "Egress").
 *
 * The guest has no network device, only lo, which this brings up. The
 * agent listens on 127.0.0.1:3128, the commands' HTTP_PROXY as in a
 * namespace sandbox, and turns each connection it accepts into a stream of
 * frames (vm/wire.h, SBX_VMF_CONN_*) that the relay on the host hands to
 * the daemon's egress proxy, which decides, by the sandbox's policy, what
 * it may reach. It listens always, as a namespace init does: with no
 * policy the proxy answers 403.
 *
 * Flow control: at most SBX_VM_CONN_WINDOW bytes of a stream are in flight
 * each way; a connection whose reader stalls stops being read from, and
 * never holds up the port (the commands' output, other streams). At most
 * SBX_VM_CONN_MAX streams at once; past that the listener is not polled and
 * connections wait in its backlog.
 *
 * The port proxy (docs/vm.md "Port proxy"): the host opens a stream with
 * SBX_VMF_CONN_CONNECT {port}; the agent connects to 127.0.0.1:port, then
 * [::1]:port when refused (as a namespace init), non-blocking, and answers
 * CONNECTED or CONNECT_FAILED {errno} once. Its bound is the relay's: a
 * connect that hangs is ended by the relay's RESET. Those streams count in
 * the same SBX_VM_CONN_MAX.
 */
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iso/proto.h"
#include "vm/agent.h"

struct conn
{
  uint64_t id; /* 0: slot free */
  int fd;
  char *pend; /* from the host, not yet written to fd */
  size_t pend_len;
  uint32_t in_flight; /* DATA sent to the host and not yet ACKed */
  int host_closed;    /* the host sent CLOSE */
  int guest_closed;   /* fd said EOF; we sent CLOSE */
  int shut;           /* fd's write side shut (after host_closed, drained) */
  int connecting;     /* a host-opened stream whose connect is in progress */
  int v6;             /* that connect is to [::1] */
  uint32_t port;
};

static struct conn conns[SBX_VM_CONN_MAX];
static struct conn *polled[AGENT_NET_MAX_POLLFDS];
static int listener = -1;
static uint64_t next_id = 1;

static void
broken (const char *what)
{
  errno = EPROTO;
  agent_die (what);
}

void
agent_net_setup (void)
{
  struct ifreq ifr;
  struct sockaddr_in a;
  int one = 1;
  int s = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  if (s < 0)
    agent_die ("socket");
  memset (&ifr, 0, sizeof ifr);
  snprintf (ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (ioctl (s, SIOCGIFFLAGS, &ifr) < 0)
    agent_die ("lo's flags");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING; /* the kernel gives it 127.0.0.1/8 */
  if (ioctl (s, SIOCSIFFLAGS, &ifr) < 0)
    agent_die ("bring lo up");
  close (s);

  listener = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0)
    agent_die ("egress socket");
  setsockopt (listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset (&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons (SBX_EGRESS_PORT);
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (bind (listener, (struct sockaddr *) &a, sizeof a) < 0)
    agent_die ("egress bind 127.0.0.1:3128");
  if (listen (listener, SBX_EGRESS_BACKLOG) < 0)
    agent_die ("egress listen");
}

static struct conn *
find (uint64_t id)
{
  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    if (conns[i].id == id && id != 0)
      return &conns[i];
  return NULL;
}

static void
forget (struct conn *c)
{
  if (c->fd >= 0)
    close (c->fd);
  free (c->pend);
  memset (c, 0, sizeof *c);
  c->fd = -1;
}

static void
reset (struct conn *c)
{
  agent_send_frame (SBX_VMF_CONN_RESET, c->id, NULL, 0, NULL, 0);
  forget (c);
}

static void
maybe_done (struct conn *c)
{
  if (c->host_closed && c->guest_closed && c->shut)
    forget (c);
}

void
agent_net_reset_all (void)
{
  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    if (conns[i].id != 0)
      forget (&conns[i]);
}

/* The host's bytes into the connection; ACK what was written. */
static void
drain (struct conn *c)
{
  size_t done = 0;

  while (done < c->pend_len)
    {
      ssize_t w = send (c->fd, c->pend + done, c->pend_len - done, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        break;
      if (w <= 0) /* the client is gone */
        {
          reset (c);
          return;
        }
      done += (size_t) w;
    }
  if (done > 0)
    {
      uint32_t n = (uint32_t) done;
      memmove (c->pend, c->pend + done, c->pend_len - done);
      c->pend_len -= done;
      agent_send_frame (SBX_VMF_CONN_ACK, c->id, &n, sizeof n, NULL, 0);
    }
  if (c->pend_len == 0 && c->host_closed && !c->shut)
    {
      shutdown (c->fd, SHUT_WR);
      c->shut = 1;
      maybe_done (c);
    }
}

/* Start c's connect (127.0.0.1, or [::1] when c->v6): 0, EINPROGRESS or
   the errno. */
static int
start_connect (struct conn *c)
{
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  int r;

  if (c->fd >= 0)
    close (c->fd);
  c->fd = socket (c->v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    return errno;
  if (c->v6)
    {
      memset (&a6, 0, sizeof a6);
      a6.sin6_family = AF_INET6;
      a6.sin6_port = htons ((uint16_t) c->port);
      a6.sin6_addr = in6addr_loopback;
      r = connect (c->fd, (struct sockaddr *) &a6, sizeof a6);
    }
  else
    {
      memset (&a4, 0, sizeof a4);
      a4.sin_family = AF_INET;
      a4.sin_port = htons ((uint16_t) c->port);
      a4.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
      r = connect (c->fd, (struct sockaddr *) &a4, sizeof a4);
    }
  if (r == 0)
    return 0;
  return errno == EINTR ? EINPROGRESS : errno;
}

/* Where c's connect is: answered, or still in progress. */
static void
connect_progress (struct conn *c, int result)
{
  int32_t e;

  if (result == ECONNREFUSED && !c->v6)
    {
      c->v6 = 1;
      result = start_connect (c);
    }
  /* No [::1] either: 127.0.0.1's answer. */
  if (c->v6 && result != 0 && result != EINPROGRESS)
    result = ECONNREFUSED;
  if (result == EINPROGRESS)
    return;
  if (result == 0)
    {
      c->connecting = 0;
      agent_send_frame (SBX_VMF_CONN_CONNECTED, c->id, NULL, 0, NULL, 0);
      return;
    }
  e = result;
  agent_send_frame (SBX_VMF_CONN_CONNECT_FAILED, c->id, &e, sizeof e, NULL, 0);
  forget (c);
}

static void
host_connect (const struct sbx_vm_frame *f, const char *payload)
{
  struct conn *c = NULL;
  uint32_t port;
  int32_t e = EAGAIN;

  if (f->len != sizeof port || !(f->id & SBX_VM_CONN_HOST_BIT) || find (f->id) != NULL)
    broken ("a malformed CONN_CONNECT");
  memcpy (&port, payload, sizeof port);
  if (port == 0 || port > 65535)
    broken ("a CONN_CONNECT to no port");
  for (int i = 0; i < SBX_VM_CONN_MAX && c == NULL; i++)
    if (conns[i].id == 0)
      c = &conns[i];
  if (c == NULL)
    {
      agent_send_frame (SBX_VMF_CONN_CONNECT_FAILED, f->id, &e, sizeof e, NULL, 0);
      return;
    }
  memset (c, 0, sizeof *c);
  c->id = f->id;
  c->fd = -1;
  c->port = port;
  c->connecting = 1;
  connect_progress (c, start_connect (c));
}

void
agent_net_frame (const struct sbx_vm_frame *f, const char *payload)
{
  struct conn *c = find (f->id);
  uint32_t n;

  if (c != NULL && c->connecting && f->type != SBX_VMF_CONN_RESET)
    broken ("a frame for a stream not connected yet");
  switch (f->type)
    {
    case SBX_VMF_CONN_CONNECT:
      host_connect (f, payload);
      return;
    case SBX_VMF_CONN_DATA:
      if (f->len == 0 || f->len > SBX_VM_CHUNK)
        broken ("a malformed CONN_DATA");
      if (c == NULL)
        return; /* we ended it; this crossed the end */
      if (c->host_closed || c->pend_len + f->len > SBX_VM_CONN_WINDOW)
        broken ("CONN_DATA past the window or the close");
      {
        char *m = realloc (c->pend, c->pend_len + f->len);
        if (m == NULL)
          agent_die ("realloc");
        c->pend = m;
      }
      memcpy (c->pend + c->pend_len, payload, f->len);
      c->pend_len += f->len;
      drain (c);
      return;
    case SBX_VMF_CONN_CLOSE:
      if (f->len != 0)
        broken ("a malformed CONN_CLOSE");
      if (c == NULL)
        return;
      if (c->host_closed)
        broken ("a second CONN_CLOSE");
      c->host_closed = 1;
      drain (c);
      return;
    case SBX_VMF_CONN_RESET:
      if (f->len != 0)
        broken ("a malformed CONN_RESET");
      if (c != NULL)
        forget (c);
      return;
    case SBX_VMF_CONN_ACK:
      if (f->len != sizeof n)
        broken ("a malformed CONN_ACK");
      if (c == NULL)
        return;
      memcpy (&n, payload, sizeof n);
      if (n == 0 || n > c->in_flight)
        broken ("a CONN_ACK of more than was sent");
      c->in_flight -= n;
      return;
    default:
      broken ("a frame the agent does not know");
    }
}

int
agent_net_pollfds (struct pollfd *pf)
{
  int n = 0, open = 0;

  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    {
      struct conn *c = &conns[i];
      short ev = 0;
      if (c->id == 0)
        continue;
      open++;
      if (c->connecting)
        {
          polled[n] = c;
          pf[n++] = (struct pollfd){c->fd, POLLOUT, 0};
          continue;
        }
      if (!c->guest_closed && c->in_flight < SBX_VM_CONN_WINDOW)
        ev |= POLLIN;
      if (c->pend_len > 0)
        ev |= POLLOUT;
      if (ev == 0)
        continue;
      polled[n] = c;
      pf[n++] = (struct pollfd){c->fd, ev, 0};
    }
  if (listener >= 0 && open < SBX_VM_CONN_MAX)
    {
      polled[n] = NULL;
      pf[n++] = (struct pollfd){listener, POLLIN, 0};
    }
  return n;
}

static void
accept_one (void)
{
  struct conn *c = NULL;
  int fd;

  for (int i = 0; i < SBX_VM_CONN_MAX && c == NULL; i++)
    if (conns[i].id == 0)
      c = &conns[i];
  if (c == NULL)
    return;
  fd = accept4 (listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return; /* EAGAIN, or that connection's error */
  memset (c, 0, sizeof *c);
  c->id = next_id++;
  c->fd = fd;
  agent_send_frame (SBX_VMF_CONN_OPEN, c->id, NULL, 0, NULL, 0);
}

/* The client's bytes to the host, within the window. */
static void
pump (struct conn *c)
{
  static char chunk[SBX_VM_CHUNK];
  size_t room = SBX_VM_CONN_WINDOW - c->in_flight;
  ssize_t r = recv (c->fd, chunk, room < sizeof chunk ? room : sizeof chunk, MSG_DONTWAIT);

  if (r < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (r < 0)
    {
      reset (c);
      return;
    }
  if (r == 0)
    {
      c->guest_closed = 1;
      agent_send_frame (SBX_VMF_CONN_CLOSE, c->id, NULL, 0, NULL, 0);
      maybe_done (c);
      return;
    }
  c->in_flight += (uint32_t) r;
  agent_send_frame (SBX_VMF_CONN_DATA, c->id, chunk, (size_t) r, NULL, 0);
}

void
agent_net_after_poll (const struct pollfd *pf, int n)
{
  for (int k = 0; k < n; k++)
    {
      struct conn *c = polled[k];
      if (pf[k].revents == 0)
        continue;
      if (c == NULL)
        {
          for (int i = 0; i < 16; i++)
            accept_one ();
          continue;
        }
      /* A frame handled since the poll may have ended it. */
      if (c->id == 0 || c->fd != pf[k].fd)
        continue;
      if (c->connecting)
        {
          int soerr = 0;
          socklen_t sl = sizeof soerr;
          if (getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            soerr = errno;
          connect_progress (c, soerr);
          continue;
        }
      if (pf[k].revents & POLLOUT)
        drain (c);
      if (c->id != 0 && (pf[k].events & POLLIN) && (pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
        pump (c);
    }
}
