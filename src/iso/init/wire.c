/* sbx-init: the control socket (see iso/proto.h for the rules). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iso/init/init.h"

size_t
init_recv (void *buf, size_t cap, int *fds, int max_fds, int *nfds)
{
  union
  {
    char space[CMSG_SPACE (sizeof (int) * 4)];
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

int
init_send (const void *buf, size_t len, const int *fds, int nfds)
{
  union
  {
    char space[CMSG_SPACE (sizeof (int) * 4)];
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
      if (nfds > 4)
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
    n = sendmsg (SBX_CTL_FD, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return -errno;
  return 0;
}
