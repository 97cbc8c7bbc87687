/* sbx: packets on the control sockets to inits and the zygote (see
 * iso/proto.h for the rules). */
#include "iso/wire.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int
sbx__sendmsg (int fd, const void *p, size_t len, const int *fds, int nfds, int flags)
{
  union
  {
    char space[CMSG_SPACE (sizeof (int) * SBX_ISO_MAX_FDS)];
    struct cmsghdr align;
  } control;
  struct iovec iov = {(void *) (uintptr_t) p, len};
  struct msghdr msg = {0};
  ssize_t n;

  if (nfds > SBX_ISO_MAX_FDS)
    return -EINVAL;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0)
    {
      struct cmsghdr *c;
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
    n = sendmsg (fd, &msg, MSG_NOSIGNAL | flags);
  while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : 0;
}

int
sbx__iso_send (int fd, const void *p, size_t len, const int *fds, int nfds, sbx_error_t **err)
{
  int r = sbx__sendmsg (fd, p, len, fds, nfds, MSG_DONTWAIT);

  if (r == -EAGAIN)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the sandbox's init is not keeping up");
  if (r < 0)
    return sbx_err_sys (err, -r, "send to sandbox init");
  return 0;
}

ssize_t
sbx__iso_recv (int fd, void *buf, size_t cap, int *fds, int max_fds, int *nfds, int flags)
{
  union
  {
    char space[CMSG_SPACE (sizeof (int) * SBX_ISO_MAX_FDS)];
    struct cmsghdr align;
  } control;
  struct iovec iov = {buf, cap};
  struct msghdr msg = {0};
  struct cmsghdr *c;
  ssize_t n;
  int got = 0, bad = 0;

  memset (&control, 0, sizeof control);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.space;
  msg.msg_controllen = sizeof control.space;
  do
    n = recvmsg (fd, &msg, MSG_CMSG_CLOEXEC | flags);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return -1;
  for (c = CMSG_FIRSTHDR (&msg); c != NULL; c = CMSG_NXTHDR (&msg, c))
    {
      int count, i;
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        {
          bad = 1;
          continue;
        }
      count = (int) ((c->cmsg_len - CMSG_LEN (0)) / sizeof (int));
      for (i = 0; i < count; i++)
        {
          int one;
          memcpy (&one, CMSG_DATA (c) + (size_t) i * sizeof (int), sizeof one);
          if (got < max_fds)
            fds[got++] = one;
          else
            {
              close (one);
              bad = 1;
            }
        }
    }
  if (bad || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    {
      /* Descriptors the kernel cannot install because our fd table is
         full are dropped with MSG_CTRUNC, as for a short control buffer.
         Ours holds more than any peer sends: fewer than that received is
         our own EMFILE, not a peer breaking the protocol. The data is in
         buf all the same. */
      int emfile = !bad && !(msg.msg_flags & MSG_TRUNC) && got < max_fds;
      while (got > 0)
        close (fds[--got]);
      errno = emfile ? EMFILE : EPROTO;
      return -1;
    }
  *nfds = got;
  return n;
}


int
sbx__iso_is_pty_master (int fd)
{
  struct stat st;

  /* ptmx is 5:2 (TTYAUX_MAJOR) on devtmpfs and in every devpts instance;
     an open of it is a new master. */
  return fstat (fd, &st) == 0 && S_ISCHR (st.st_mode) && major (st.st_rdev) == 5
         && minor (st.st_rdev) == 2;
}
