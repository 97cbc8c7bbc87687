/* sbx-init: the sandbox's sudo (iso/proto.h, "sudo").
 *
 * E2B's sandboxes give `user` a passwordless sudo; sbx gives the same
 * without a setuid binary (every mount is nosuid, and no_new_privs is set)
 * and without any privilege outside: init listens on an abstract unix
 * socket of the sandbox's own network namespace, and the sandbox's
 * /usr/bin/sudo (a client, iso/init/sudo_client.h) asks it to run a
 * command as root inside. Root inside is uid 0 of the sandbox's user
 * namespace with every capability dropped, exactly what an API client
 * gets with "user": "root" (docs/security.md, adversaries): sudo gives the
 * sandbox's own code nothing the threat model did not already grant it.
 *
 * Init never reads a request itself (a slow or hostile client must not
 * stall it): it accepts and forks a session helper, which reads the
 * request (bounded, with a deadline), starts the command the one way
 * commands start (init_start_command), forwards the client's signals to
 * the command's process group, kills that group when the client goes,
 * and answers the command's wait status. At most SBX_SUDO_MAX_SESSIONS
 * helpers run at once; past that the listener is not polled. The socket
 * is made after Landlock (ABI 6 scopes abstract sockets to the domain of
 * their maker) and before any command runs, so nothing can take the name
 * first.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iso/init/init.h"

#define REQUEST_DEADLINE_S 10

static int listener = -1;
static pid_t sessions[SBX_SUDO_MAX_SESSIONS];
static uint64_t disk_bytes;

void
init_sudo_listen (uint64_t fsize_limit)
{
  struct sockaddr_un a;
  socklen_t len;

  disk_bytes = fsize_limit;
  listener = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0)
    init_die (errno, "sudo socket");
  memset (&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  /* Abstract: a leading NUL, no file anywhere. */
  memcpy (a.sun_path + 1, SBX_SUDO_SOCKET, strlen (SBX_SUDO_SOCKET));
  len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + 1 + strlen (SBX_SUDO_SOCKET));
  if (bind (listener, (struct sockaddr *) &a, len) < 0)
    init_die (errno, "sudo bind");
  if (listen (listener, SBX_SUDO_MAX_SESSIONS) < 0)
    init_die (errno, "sudo listen");
}

static int
free_slot (void)
{
  for (int i = 0; i < SBX_SUDO_MAX_SESSIONS; i++)
    if (sessions[i] == 0)
      return i;
  return -1;
}

int
init_sudo_pollfds (struct pollfd *pfd)
{
  if (listener < 0 || free_slot () < 0)
    return 0;
  pfd[0].fd = listener;
  pfd[0].events = POLLIN;
  pfd[0].revents = 0;
  return 1;
}

int
init_sudo_reaped (pid_t pid)
{
  for (int i = 0; i < SBX_SUDO_MAX_SESSIONS; i++)
    if (sessions[i] == pid)
      {
        sessions[i] = 0;
        return 1;
      }
  return 0;
}

static void
answer (int conn, int32_t outcome, int32_t value, uint32_t stage)
{
  struct sbx_sudo_reply r = {outcome, value, stage};

  (void) send (conn, &r, sizeof r, MSG_NOSIGNAL);
}

/* The signals a client may pass on: what a terminal, a timeout or a job
   control would send it. Anything else (SIGKILL included: the client's own
   end does that) is dropped. */
static int
forwardable (int32_t sig)
{
  switch (sig)
    {
    case SIGHUP:
    case SIGINT:
    case SIGQUIT:
    case SIGTERM:
    case SIGUSR1:
    case SIGUSR2:
    case SIGWINCH:
    case SIGCONT:
    case SIGTSTP:
    case SIGALRM:
      return 1;
    default:
      return 0;
    }
}

/* Wait for the command while relaying the client's signals; returns its
   wait status. The client gone (end of file, an error): the command's
   whole process group is killed, as a terminal's hangup would end it. */
static int
supervise (int conn, pid_t pid)
{
  sigset_t chld;
  int sigfd, status;

  sigemptyset (&chld);
  sigaddset (&chld, SIGCHLD);
  sigfd = signalfd (-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0)
    {
      kill (-pid, SIGKILL);
      while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
      return status;
    }
  for (;;)
    {
      /* The signalfd first: it is watched whether or not the client is. */
      struct pollfd pfd[2] = {{sigfd, POLLIN, 0}, {conn, POLLIN, 0}};
      pid_t w = waitpid (pid, &status, WNOHANG);
      if (w == pid)
        return status;
      if (poll (pfd, conn >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
        break;
      if (pfd[0].revents & POLLIN)
        {
          struct signalfd_siginfo si;
          while (read (sigfd, &si, sizeof si) == (ssize_t) sizeof si)
            ;
        }
      if (conn >= 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
        {
          int32_t sig;
          ssize_t n = recv (conn, &sig, sizeof sig, MSG_DONTWAIT);
          if (n == (ssize_t) sizeof sig && forwardable (sig))
            kill (-pid, sig);
          else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            {
              /* the client is gone: so is its command, and we stop
                 watching its end (still readable at end of file) */
              kill (-pid, SIGKILL);
              conn = -1;
            }
        }
    }
  kill (-pid, SIGKILL);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  return status;
}

/* One request: cwd, argv, env as proto.h lays them out, checked whole
   before anything is acted on. Returns 0, or an errno for a refusal. */
static int
parse_request (unsigned char *buf, size_t n, char **cwd, char **argv, char **envp)
{
  struct sbx_sudo_request req;
  char *p, *end;
  uint32_t i;

  if (n < sizeof req + 1 || buf[n - 1] != '\0')
    return EINVAL;
  memcpy (&req, buf, sizeof req);
  if (req.argc == 0 || req.argc > SBX_SUDO_MAX_ARGS || req.envc > SBX_SUDO_MAX_ENV)
    return E2BIG;
  p = (char *) buf + sizeof req;
  end = (char *) buf + n;
  *cwd = p;
  p += strlen (p) + 1;
  for (i = 0; i < req.argc + req.envc; i++)
    {
      if (p >= end)
        return EINVAL;
      if (i < req.argc)
        argv[i] = p;
      else if (strchr (p, '=') == NULL || p[0] == '=')
        return EINVAL;
      else
        envp[i - req.argc] = p;
      p += strlen (p) + 1;
    }
  if (p != end || (*cwd)[0] != '/' || argv[0][0] == '\0')
    return EINVAL;
  argv[req.argc] = NULL;
  envp[req.envc] = NULL;
  return 0;
}

static __attribute__ ((noreturn)) void
session (int conn)
{
  static unsigned char buf[SBX_SUDO_MAX_BYTES + 1];
  static char *argv[SBX_SUDO_MAX_ARGS + 1], *envp[SBX_SUDO_MAX_ENV + 1];
  char control[CMSG_SPACE (3 * sizeof (int))];
  struct iovec iov = {buf, sizeof buf};
  struct msghdr mh;
  struct cmsghdr *c;
  struct timeval deadline = {REQUEST_DEADLINE_S, 0};
  struct sbx_msg_spawn spawn;
  int fds[3] = {-1, -1, -1}, nfds = 0, rc, sys_errno, status;
  uint32_t stage;
  char *cwd;
  ssize_t n;
  pid_t pid;

  /* Nothing of init's but the connection: its control socket, the
     daemon's end, listeners and the sandbox's root fds stay with init. */
  if (dup2 (conn, 3) < 0 || close_range (4, ~0U, 0) < 0)
    _exit (1);
  conn = 3;
  if (setsockopt (conn, SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof deadline) < 0)
    _exit (1);
  memset (&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof control;
  n = recvmsg (conn, &mh, MSG_CMSG_CLOEXEC);
  for (c = CMSG_FIRSTHDR (&mh); c != NULL; c = CMSG_NXTHDR (&mh, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      {
        size_t k = (c->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        for (size_t j = 0; j < k; j++)
          {
            int fd;
            memcpy (&fd, CMSG_DATA (c) + j * sizeof (int), sizeof fd);
            if (nfds < 3)
              fds[nfds++] = fd;
            else
              close (fd);
          }
      }
  if (n <= 0)
    _exit (1);
  /* A cut message, a cut descriptor list, or not the three stdio ends. */
  if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || nfds != 3 || (size_t) n > SBX_SUDO_MAX_BYTES)
    {
      answer (conn, SBX_SUDO_REFUSED, EINVAL, 0);
      _exit (1);
    }
  rc = parse_request (buf, (size_t) n, &cwd, argv, envp);
  if (rc != 0)
    {
      answer (conn, SBX_SUDO_REFUSED, rc, 0);
      _exit (1);
    }

  /* As a command the daemon starts as root: the same limits. */
  memset (&spawn, 0, sizeof spawn);
  spawn.uid = 0;
  spawn.gid = 0;
  spawn.rlimit_nofile = SBX_COMMAND_NOFILE;
  spawn.rlimit_fsize = disk_bytes;
  pid = init_start_command (&spawn, cwd, argv, envp, fds, &sys_errno, &stage);
  for (int i = 0; i < 3; i++)
    close (fds[i]);
  if (pid < 0)
    {
      answer (conn, SBX_SUDO_NOT_STARTED, sys_errno, stage);
      _exit (1);
    }
  status = supervise (conn, pid);
  answer (conn, SBX_SUDO_EXITED, status, 0);
  _exit (0);
}

void
init_sudo_after_poll (const struct pollfd *pfd, int n)
{
  int conn, slot;
  pid_t pid;

  if (n != 1 || !(pfd[0].revents & POLLIN))
    return;
  slot = free_slot ();
  if (slot < 0)
    return;
  conn = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
  if (conn < 0)
    return;
  pid = fork ();
  if (pid == 0)
    {
      sigset_t none;
      init_default_signals ();
      sigemptyset (&none);
      sigaddset (&none, SIGCHLD); /* for supervise's signalfd */
      sigprocmask (SIG_SETMASK, &none, NULL);
      session (conn);
    }
  /* Could not fork (the pids limit): the client reads end of file. */
  if (pid > 0)
    sessions[slot] = pid;
  close (conn);
}
