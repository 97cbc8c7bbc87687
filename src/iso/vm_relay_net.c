/* sbx: the VM relay's egress streams (docs/vm.md "Egress").
 *
 * The guest has no network device. Its agent listens on the guest's
 * 127.0.0.1:3128 (the commands' HTTP_PROXY, as in a namespace sandbox) and
 * turns every connection it accepts into a stream of frames on the port
 * (vm/wire.h, SBX_VMF_CONN_*). For each stream the relay makes a
 * socketpair, hands one end to the daemon exactly as a namespace init hands
 * an accepted connection (SBX_MSG_EGRESS over the control socket), and
 * copies bytes between the other end and the frames. The daemon gives it,
 * with the sandbox's policy, to the egress process: decisions, logging,
 * audit and limits are the namespace engine's, unchanged.
 *
 * Every frame from the guest is hostile input:
 * - framing (a DATA of 0 or more than SBX_VM_CHUNK bytes, a CLOSE, RESET or
 *   OPEN with a payload, an ACK not of 4 bytes or of more than is in
 *   flight, a type of the range that is not known), an OPEN whose id is not
 *   above every earlier one, a frame for an id never opened, DATA past the
 *   window or after the guest's own CLOSE: the guest is broken, the relay
 *   ends the VM;
 * - a frame for a stream that was opened and has ended (the relay reset it,
 *   or both sides closed it): dropped, it crossed the end on the wire;
 * - an OPEN beyond SBX_VM_CONN_MAX streams, or one the daemon's socket has
 *   no room for right now: that stream is reset, nothing else happens.
 * ACKs for the guest's bytes go back in steps of 16 KiB (the guest's
 * window never waits on them), so what we queue for a guest that does not
 * read the port grows by 28 bytes per 16 KiB it sends, not per frame.
 * Memory: per stream at most SBX_VM_CONN_WINDOW bytes from the guest wait
 * for the daemon's side to read them (the window), so 64 streams hold at
 * most 16 MiB, charged to the sandbox's cgroup.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "iso/proto.h"
#include "iso/wire.h"
#include "iso/vm_relay_net.h"

/* The relay stops reading the streams' sockets while this much waits for
   the port (as it does for commands' stdin). */
#define SERIAL_HIGH (1u << 20)
/* ACKs go back in steps of this much: a guest that sends its bytes one by
   one (and never reads the port) must not make us queue a 28-byte ACK per
   byte for it. It is well under the window, so the guest never waits for
   an ACK we hold back. */
#define ACK_STEP (16u * 1024)

struct stream
{
  uint64_t id;     /* 0: slot free */
  int fd;          /* our end of the socketpair (the daemon has the other) */
  struct sbx_buf out; /* from the guest, not yet written to fd */
  size_t out_off;
  uint32_t in_flight; /* DATA sent to the guest and not yet ACKed */
  uint32_t ack_owed;  /* guest bytes written to fd and not yet ACKed */
  int guest_closed;   /* the guest sent CLOSE: no more DATA from it */
  int host_closed;    /* we read EOF on fd and sent CLOSE */
  int shut;           /* fd's write side is shut (after guest_closed, drained) */
  /* A host-opened stream (the port proxy) until the guest answers its
     CONNECT: the daemon's end waits in peer, nothing is polled. */
  int connecting;
  int peer;
  uint64_t req_id;
  int64_t deadline_ms;
};

static struct stream streams[SBX_VM_CONN_MAX];
static struct stream *polled[SBX_VM_CONN_MAX];
static uint64_t last_id, last_host_id;
static int ctl_fd = -1;
static struct sbx_buf *queue;

void
sbx_vm_net_init (int ctl, struct sbx_buf *to_guest)
{
  ctl_fd = ctl;
  queue = to_guest;
}

int
sbx_vm_net_is_frame (uint32_t type)
{
  return type >= 32 && type <= 47;
}

int
sbx_vm_net_open_count (void)
{
  int n = 0;
  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    n += streams[i].id != 0;
  return n;
}

static int
emit (uint32_t type, uint64_t id, const void *p, size_t len)
{
  struct sbx_vm_frame f = {type, (uint32_t) len, id};
  sbx_buf_append (queue, &f, sizeof f);
  if (len)
    sbx_buf_append (queue, p, len);
  return queue->failed ? -1 : 0;
}

static struct stream *
find (uint64_t id)
{
  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    if (streams[i].id == id && id != 0)
      return &streams[i];
  return NULL;
}

static void
forget (struct stream *s)
{
  if (s->fd >= 0)
    close (s->fd);
  if (s->connecting && s->peer >= 0)
    close (s->peer);
  sbx_buf_free (&s->out);
  memset (s, 0, sizeof *s);
  s->fd = -1;
}

void
sbx_vm_net_forget_all (void)
{
  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    if (streams[i].id != 0)
      forget (&streams[i]);
  last_id = last_host_id = 0;
}

/* Ends a stream both ways: the guest's client sees its connection end. */
static int
reset (struct stream *s)
{
  uint64_t id = s->id;
  forget (s);
  return emit (SBX_VMF_CONN_RESET, id, NULL, 0);
}

static void
maybe_done (struct stream *s)
{
  if (s->guest_closed && s->host_closed && s->shut)
    forget (s);
}

/* The guest's bytes into our end; each write is ACKed (the guest's window
   opens by that much). */
static int
drain (struct stream *s)
{
  while (s->out_off < s->out.len)
    {
      ssize_t w = send (s->fd, s->out.data + s->out_off, s->out.len - s->out_off,
                        MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        return 0;
      if (w <= 0) /* the egress side is gone */
        return reset (s);
      s->out_off += (size_t) w;
      s->ack_owed += (uint32_t) w;
      if (s->ack_owed >= ACK_STEP)
        {
          if (emit (SBX_VMF_CONN_ACK, s->id, &s->ack_owed, sizeof s->ack_owed) < 0)
            return -1;
          s->ack_owed = 0;
        }
    }
  s->out.len = s->out_off = 0;
  if (s->guest_closed && !s->shut)
    {
      shutdown (s->fd, SHUT_WR);
      s->shut = 1;
      maybe_done (s);
    }
  return 0;
}

/* A new stream: a socketpair, one end to the daemon as an accepted egress
   connection. No room (streams, descriptors, the control socket): reset. */
static int
open_stream (uint64_t id)
{
  struct stream *s = NULL;
  struct sbx_msg_egress m;
  int sv[2];

  for (int i = 0; i < SBX_VM_CONN_MAX && s == NULL; i++)
    if (streams[i].id == 0)
      s = &streams[i];
  if (s == NULL || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return emit (SBX_VMF_CONN_RESET, id, NULL, 0);
  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_EGRESS;
  m.hdr.len = sizeof m;
  /* Never wait for the daemon: as a namespace init, a connection that does
     not fit now is refused. */
  if (sbx__sendmsg (ctl_fd, &m, sizeof m, &sv[1], 1, MSG_DONTWAIT) < 0)
    {
      close (sv[0]);
      close (sv[1]);
      return emit (SBX_VMF_CONN_RESET, id, NULL, 0);
    }
  close (sv[1]);
  memset (s, 0, sizeof *s);
  s->id = id;
  s->fd = sv[0];
  return 0;
}

static int64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The daemon's answer to a CONNECT, as a namespace init's: CONNECTED with
   the socket, or CONNECT_FAILED with an errno. Never waits for room: an
   answer that does not fit now is CONNECT_FAILED EAGAIN if that fits, and
   otherwise the front end's own wait ends it. */
static void
answer (uint64_t req_id, int sys_errno, int fd)
{
  struct sbx_msg_connect_result m;

  memset (&m, 0, sizeof m);
  m.hdr.type = sys_errno ? SBX_MSG_CONNECT_FAILED : SBX_MSG_CONNECTED;
  m.hdr.len = sizeof m;
  m.req_id = req_id;
  m.sys_errno = sys_errno;
  if (sbx__sendmsg (ctl_fd, &m, sizeof m, &fd, fd >= 0 ? 1 : 0, MSG_DONTWAIT) == 0)
    return;
  if (fd >= 0)
    answer (req_id, EAGAIN, -1);
}

int
sbx_vm_net_connect (uint64_t req_id, uint32_t port)
{
  struct stream *s = NULL;
  int sv[2];

  for (int i = 0; i < SBX_VM_CONN_MAX && s == NULL; i++)
    if (streams[i].id == 0)
      s = &streams[i];
  /* As a namespace init with SBX_CONNECT_MAX connects in flight. */
  if (s == NULL || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    {
      answer (req_id, s == NULL ? EAGAIN : errno, -1);
      return 0;
    }
  memset (s, 0, sizeof *s);
  s->id = SBX_VM_CONN_HOST_BIT | ++last_host_id;
  s->fd = sv[0];
  s->peer = sv[1];
  s->connecting = 1;
  s->req_id = req_id;
  s->deadline_ms = now_ms () + SBX_VM_CONNECT_TIMEOUT_MS;
  return emit (SBX_VMF_CONN_CONNECT, s->id, &port, sizeof port);
}

/* The guest answered s's CONNECT (sys_errno 0: connected). */
static int
connect_answered (struct stream *s, int sys_errno)
{
  s->connecting = 0;
  if (sys_errno == 0)
    {
      answer (s->req_id, 0, s->peer);
      close (s->peer);
      s->peer = -1;
      return 0;
    }
  answer (s->req_id, sys_errno, -1);
  close (s->peer);
  s->peer = -1;
  forget (s); /* the guest's side is gone already */
  return 0;
}

int
sbx_vm_net_tick (void)
{
  int64_t now = now_ms ();

  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    {
      struct stream *s = &streams[i];
      if (s->id == 0 || !s->connecting || now < s->deadline_ms)
        continue;
      answer (s->req_id, ETIMEDOUT, -1);
      /* An answer that comes later finds no stream and is dropped. */
      if (reset (s) < 0)
        return -1;
    }
  return 0;
}

int
sbx_vm_net_frame (const struct sbx_vm_frame *f, const char *payload, const char **why)
{
  struct stream *s;
  uint32_t n;

  /* The shape of each type first: it holds for ended streams too. */
  switch (f->type)
    {
    case SBX_VMF_CONN_OPEN:
    case SBX_VMF_CONN_CLOSE:
    case SBX_VMF_CONN_RESET:
      if (f->len != 0)
        goto broken;
      break;
    case SBX_VMF_CONN_DATA:
      if (f->len == 0 || f->len > SBX_VM_CHUNK)
        goto broken;
      break;
    case SBX_VMF_CONN_ACK:
    case SBX_VMF_CONN_CONNECT_FAILED:
      if (f->len != sizeof n)
        goto broken;
      break;
    case SBX_VMF_CONN_CONNECTED:
      if (f->len != 0)
        goto broken;
      break;
    default:
      goto broken;
    }
  if (f->type == SBX_VMF_CONN_OPEN)
    {
      if (f->id <= last_id || (f->id & SBX_VM_CONN_HOST_BIT))
        goto broken;
      last_id = f->id;
      if (open_stream (f->id) < 0)
        goto oom;
      return 0;
    }
  s = find (f->id);
  if (s == NULL)
    {
      uint64_t n_id = f->id & ~SBX_VM_CONN_HOST_BIT; /* either space's number */
      if (n_id == 0 || n_id > (f->id & SBX_VM_CONN_HOST_BIT ? last_host_id : last_id))
        goto broken;
      /* It ended (a CONNECT answered late, after the timeout, lands here:
         the relay reset it then); this crossed the end on the wire. */
      return 0;
    }
  if (f->type == SBX_VMF_CONN_CONNECTED || f->type == SBX_VMF_CONN_CONNECT_FAILED)
    {
      int32_t e = 0;
      if (!s->connecting) /* the guest's own stream, or a second answer */
        goto broken;
      if (f->type == SBX_VMF_CONN_CONNECT_FAILED)
        {
          memcpy (&e, payload, sizeof e);
          /* The guest's errno is a number to report, no more. */
          if (e <= 0 || e > 4095)
            e = EIO;
        }
      return connect_answered (s, e) < 0 ? (*why = "out of memory", -1) : 0;
    }
  if (s->connecting) /* no DATA, CLOSE or ACK before the answer */
    {
      if (f->type != SBX_VMF_CONN_RESET)
        goto broken;
      answer (s->req_id, ECONNRESET, -1);
      forget (s);
      return 0;
    }
  switch (f->type)
    {
    case SBX_VMF_CONN_DATA:
      if (s->guest_closed || s->out.len - s->out_off + f->len > SBX_VM_CONN_WINDOW)
        goto broken;
      sbx_buf_append (&s->out, payload, f->len);
      if (s->out.failed)
        goto oom;
      return drain (s) < 0 ? (*why = "out of memory", -1) : 0;
    case SBX_VMF_CONN_CLOSE:
      if (s->guest_closed)
        goto broken;
      s->guest_closed = 1;
      return drain (s) < 0 ? (*why = "out of memory", -1) : 0;
    case SBX_VMF_CONN_RESET:
      forget (s);
      return 0;
    case SBX_VMF_CONN_ACK:
      memcpy (&n, payload, sizeof n);
      if (n == 0 || n > s->in_flight)
        goto broken;
      s->in_flight -= n;
      return 0;
    default:
      goto broken;
    }
broken:
  *why = "the guest broke the egress stream protocol";
  return -1;
oom:
  *why = "out of memory";
  return -1;
}

int
sbx_vm_net_pollfds (struct pollfd *pf, size_t serial_pending)
{
  int n = 0;

  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    {
      struct stream *s = &streams[i];
      short ev = 0;
      if (s->id == 0 || s->connecting)
        continue;
      if (!s->host_closed && s->in_flight < SBX_VM_CONN_WINDOW && serial_pending < SERIAL_HIGH)
        ev |= POLLIN;
      if (s->out_off < s->out.len)
        ev |= POLLOUT;
      if (ev == 0)
        continue;
      polled[n] = s;
      pf[n++] = (struct pollfd){s->fd, ev, 0};
    }
  return n;
}

/* The daemon's side into DATA frames, within the guest's window. */
static int
pump (struct stream *s)
{
  static char chunk[SBX_VM_CHUNK];
  size_t room = SBX_VM_CONN_WINDOW - s->in_flight;
  ssize_t r = recv (s->fd, chunk, room < sizeof chunk ? room : sizeof chunk, MSG_DONTWAIT);

  if (r < 0 && (errno == EINTR || errno == EAGAIN))
    return 0;
  if (r < 0)
    return reset (s);
  if (r == 0)
    {
      s->host_closed = 1;
      if (emit (SBX_VMF_CONN_CLOSE, s->id, NULL, 0) < 0)
        return -1;
      maybe_done (s);
      return 0;
    }
  s->in_flight += (uint32_t) r;
  return emit (SBX_VMF_CONN_DATA, s->id, chunk, (size_t) r);
}

int
sbx_vm_net_after_poll (const struct pollfd *pf, int n, const char **why)
{
  for (int k = 0; k < n; k++)
    {
      struct stream *s = polled[k];
      int rc = 0;
      /* A frame handled since the poll may have ended it. */
      if (pf[k].revents == 0 || s->id == 0 || s->fd != pf[k].fd)
        continue;
      if (pf[k].revents & POLLOUT)
        rc = drain (s);
      if (rc == 0 && s->id != 0 && (pf[k].events & POLLIN)
          && (pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
        rc = pump (s);
      if (rc < 0)
        {
          *why = "out of memory";
          return -1;
        }
    }
  return 0;
}
