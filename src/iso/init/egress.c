/* sbx-init: the sandbox's proxy address, 127.0.0.1:SBX_EGRESS_PORT
 * (SBX_MSG_EGRESS, see iso/proto.h and docs/egress.md).
 *
 * The sandbox's network namespace has only loopback: the egress proxy
 * outside is reached through this listener. Init accepts (non-blocking,
 * in its poll loop) and passes each connection to the daemon at once; it
 * never reads from one and keeps none. Back-pressure: while the control
 * socket is full (events wait), the listener is not polled, so at most
 * SBX_EGRESS_BACKLOG connections wait in the kernel and init's own memory
 * and descriptors do not grow.
 *
 * Code in the sandbox can bind 3128 itself only before init does, which
 * it cannot (init listens before any command runs); root inside can close
 * nothing of init's. A command listening on another port is unaffected.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iso/init/init.h"

#define ACCEPTS_PER_WAKEUP 16

static int listener = -1;

void
init_egress_listen (void)
{
  struct sockaddr_in a;
  int one = 1;

  listener = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0)
    init_die (errno, "egress socket");
  setsockopt (listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset (&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons (SBX_EGRESS_PORT);
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (bind (listener, (struct sockaddr *) &a, sizeof a) < 0)
    init_die (errno, "egress bind 127.0.0.1:3128");
  if (listen (listener, SBX_EGRESS_BACKLOG) < 0)
    init_die (errno, "egress listen");
}

int
init_egress_pollfds (struct pollfd *pfd)
{
  if (listener < 0 || init_events_pending ())
    return 0;
  pfd[0].fd = listener;
  pfd[0].events = POLLIN;
  pfd[0].revents = 0;
  return 1;
}

void
init_egress_after_poll (const struct pollfd *pfd, int n)
{
  struct sbx_msg_egress m;
  int i;

  if (n != 1 || !(pfd[0].revents & POLLIN))
    return;
  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_EGRESS;
  m.hdr.len = sizeof m;
  for (i = 0; i < ACCEPTS_PER_WAKEUP; i++)
    {
      int fd = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0)
        return; /* EAGAIN, or an error of that one connection */
      /* Never wait for room: the daemon is slow or gone, the connection
         is refused (closed), init goes on. */
      if (init_try_send (&m, sizeof m, &fd, 1) < 0)
        {
          close (fd);
          return;
        }
      close (fd);
    }
}
