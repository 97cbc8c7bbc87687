/* sbx-init: the control socket (see iso/proto.h for the rules). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iso/init/init.h"

/* Events waiting for room in the socket: fixed-size messages, in order.
   Bounded: 2 per tracked command at most while a daemon listens; a daemon
   that does not read gets the state from ATTACH instead. An event may
   carry one descriptor (SPAWNED of a command on a terminal: its master),
   which the queue owns as a duplicate until it is sent or dropped. */
#define EVENT_QUEUE 16384
#define EVENT_MAX 32

static struct
{
  unsigned char msg[EVENT_QUEUE][EVENT_MAX];
  uint32_t len[EVENT_QUEUE];
  int fd[EVENT_QUEUE]; /* owned, -1 when none */
  uint32_t head, count;
} events;

size_t
init_recv (void *buf, size_t cap, int *fds, int max_fds, int *nfds)
{
  union
  {
    char space[CMSG_SPACE (sizeof (int) * SBX_INIT_MAX_FDS)];
    struct cmsghdr align;
  } control;
  struct iovec iov = {buf, cap};
  struct msghdr msg = {0};
  struct cmsghdr *c;
  ssize_t n;
  int got = 0, i;

  memset (&control, 0, sizeof control);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.space;
  msg.msg_controllen = sizeof control.space;
  do
    n = recvmsg (SBX_CTL_FD, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    init_protocol_violation ();
  /* Truncated data or descriptors means the daemon and we disagree about
     the protocol: never act on half a message. */
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
    init_protocol_violation ();
  for (c = CMSG_FIRSTHDR (&msg); c != NULL; c = CMSG_NXTHDR (&msg, c))
    {
      int count;
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        init_protocol_violation ();
      count = (int) ((c->cmsg_len - CMSG_LEN (0)) / sizeof (int));
      for (i = 0; i < count; i++)
        {
          int fd;
          memcpy (&fd, CMSG_DATA (c) + (size_t) i * sizeof (int), sizeof fd);
          if (got >= max_fds)
            {
              close (fd);
              init_protocol_violation ();
            }
          fds[got++] = fd;
        }
    }
  *nfds = got;
  if (n == 0)
    return 0;
  return (size_t) n;
}

static int send_packet (const void *buf, size_t len, const int *fds, int nfds, int flags);

int
init_send (const void *buf, size_t len, const int *fds, int nfds)
{
  return send_packet (buf, len, fds, nfds, 0);
}

int
init_try_send (const void *buf, size_t len, const int *fds, int nfds)
{
  return send_packet (buf, len, fds, nfds, MSG_DONTWAIT);
}

static int
send_packet (const void *buf, size_t len, const int *fds, int nfds, int flags)
{
  union
  {
    char space[CMSG_SPACE (sizeof (int) * SBX_INIT_MAX_FDS)];
    struct cmsghdr align;
  } control;
  struct iovec iov = {(void *) (uintptr_t) buf, len};
  struct msghdr msg = {0};
  ssize_t n;

  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0)
    {
      struct cmsghdr *c;
      if (nfds > SBX_INIT_MAX_FDS)
        return -EINVAL;
      memset (&control, 0, sizeof control);
      msg.msg_control = control.space;
      msg.msg_controllen = CMSG_SPACE (sizeof (int) * (size_t) nfds);
      c = CMSG_FIRSTHDR (&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN (sizeof (int) * (size_t) nfds);
      memcpy (CMSG_DATA (c), fds, sizeof (int) * (size_t) nfds);
    }
  do
    n = sendmsg (SBX_CTL_FD, &msg, MSG_NOSIGNAL | flags);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return -errno;
  return 0;
}

static int
try_send (const void *msg, size_t len, int fd)
{
  union
  {
    char space[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control;
  struct iovec iov = {(void *) (uintptr_t) msg, len};
  struct msghdr m = {0};
  ssize_t n;

  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  if (fd >= 0)
    {
      struct cmsghdr *c;
      memset (&control, 0, sizeof control);
      m.msg_control = control.space;
      m.msg_controllen = sizeof control.space;
      c = CMSG_FIRSTHDR (&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN (sizeof (int));
      memcpy (CMSG_DATA (c), &fd, sizeof fd);
    }
  do
    n = sendmsg (SBX_CTL_FD, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : 0;
}

void
init_send_event (const void *msg, size_t len)
{
  init_send_event_fd (msg, len, -1);
}

void
init_send_event_fd (const void *msg, size_t len, int fd)
{
  uint32_t tail;
  int copy = -1;

  if (len > EVENT_MAX)
    init_protocol_violation ();
  if (events.count == 0)
    {
      int r = try_send (msg, len, fd);
      if (r == 0)
        return;
      /* The daemon's end is closed (EPIPE/ECONNRESET with no daemon and
         no KEEP): the main loop sees EOF and ends the sandbox. */
      if (r != -EAGAIN)
        return;
    }
  if (events.count == EVENT_QUEUE)
    return; /* nobody is reading; ATTACH will tell the state */
  /* The queue's own copy: the caller's fd may be closed (RELEASE) before
     the event leaves, and its number reused. An event whose descriptor
     cannot be copied is not sent at all: half of it would break the
     protocol, and ATTACH tells the state anyway. */
  if (fd >= 0 && (copy = fcntl (fd, F_DUPFD_CLOEXEC, 0)) < 0)
    return;
  tail = (events.head + events.count) % EVENT_QUEUE;
  memcpy (events.msg[tail], msg, len);
  events.len[tail] = (uint32_t) len;
  events.fd[tail] = copy;
  events.count++;
}

int
init_events_pending (void)
{
  return events.count > 0;
}

void
init_flush_events (void)
{
  while (events.count > 0)
    {
      int r = try_send (events.msg[events.head], events.len[events.head], events.fd[events.head]);
      if (r == -EAGAIN)
        return;
      if (events.fd[events.head] >= 0)
        close (events.fd[events.head]);
      events.head = (events.head + 1) % EVENT_QUEUE;
      events.count--;
    }
}

void
init_drop_events (void)
{
  while (events.count > 0)
    {
      if (events.fd[events.head] >= 0)
        close (events.fd[events.head]);
      events.head = (events.head + 1) % EVENT_QUEUE;
      events.count--;
    }
  events.head = 0;
}
