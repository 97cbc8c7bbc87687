/* sbx-init in zygote mode: clone each sandbox's PID 1.
 *
 * The zygote is started once by the daemon from the sealed memfd, as root,
 * with its control socket on fd 3 and nothing else. For every CLONE
 * request it calls clone3 with all the namespaces and CLONE_PARENT (the
 * daemon becomes the child's parent and reaps it), sends the child's pidfd
 * back, and forgets it. The child never execs: it is already sbx-init. It
 * takes the control socket the daemon sent as its fd 3, drops every other
 * fd, waits for GO (the daemon has written its id maps and cgroup), takes
 * uid and gid 0 of its new user namespace, and continues as init.
 *
 * Cloning this small static process costs a fraction of forking the
 * daemon and exec'ing: no large page tables to copy and tear down.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iso/init/init.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* Our argv strings: a sandbox's PID 1 blanks "zygote" so that ps inside
   shows plain "sbx-init". */
static char *mode_arg;

static void
recv_request (struct sbx_msg_clone *m, int *fds, int *nfds)
{
  size_t n = init_recv (m, sizeof *m, fds, 2, nfds);

  if (n == 0)
    _exit (0); /* the daemon went away */
  /* Only the daemon holds the other end; anything malformed means it and
     we disagree, and the zygote ends (the daemon starts a new one). */
  if (n != sizeof *m || m->hdr.type != SBX_MSG_CLONE || m->hdr.len != sizeof *m
      || *nfds != ((m->flags & SBX_CLONE_INTO_CGROUP) ? 2 : 1))
    init_protocol_violation ();
}

static void
reply (int pid, int sys_errno, int pidfd)
{
  struct sbx_msg_cloned m;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_CLONED;
  m.hdr.len = sizeof m;
  m.pid = pid;
  m.sys_errno = sys_errno;
  if (init_send (&m, sizeof m, &pidfd, pidfd >= 0 ? 1 : 0) < 0)
    _exit (0);
}

/* In the new child: become a sandbox init whose control socket is ctl. */
static __attribute__ ((noreturn)) void
become_init (int ctl, int background)
{
  char go = 0;
  int high = fcntl (ctl, F_DUPFD_CLOEXEC, 10);

  if (high < 0 || dup2 (high, SBX_INIT_CTL_FD) < 0)
    _exit (126);
  if (mode_arg)
    memset (mode_arg, 0, strlen (mode_arg));
  /* Exactly stdio (/dev/null, from the daemon) and the control socket: the
     zygote's own socket and everything received are gone. */
  if (close_range (SBX_INIT_CTL_FD + 1, ~0U, 0) < 0)
    _exit (126);
  /* A pool build yields the CPU to sandboxes in use; the daemon restores
     the priority when the sandbox is handed out. */
  if (background)
    setpriority (PRIO_PROCESS, 0, 10);
  /* sync 1: wait until the daemon wrote our id maps and cgroup. */
  if (read (SBX_INIT_CTL_FD, &go, 1) != 1 || go != SBX_MSG_GO)
    _exit (126);
  /* Our ids are still the host's root, which the new map does not cover;
     take the namespace's root (host uid BASE). The capabilities a new user
     namespace grants its first process are kept through this change. */
  if (setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0)
    _exit (126);
  init_sandbox_main ();
}

void
init_zygote_main (char *arg)
{
  mode_arg = arg;
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    _exit (1);
  signal (SIGPIPE, SIG_IGN);
  for (;;)
    {
      struct sbx_msg_clone m;
      struct clone_args args;
      int fds[2] = {-1, -1}, nfds = 0, pidfd = -1;
      long pid;

      recv_request (&m, fds, &nfds);
      memset (&args, 0, sizeof args);
      /* The cgroup namespace is unshared by init once it is in its cgroup. */
      args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
                   | CLONE_NEWUTS | CLONE_PIDFD | CLONE_PARENT;
      args.pidfd = (uint64_t) (uintptr_t) &pidfd;
      /* With CLONE_PARENT the child inherits our own exit signal (SIGCHLD,
         to the daemon); clone3 insists that none is given here. */
      args.exit_signal = 0;
      if (nfds == 2)
        {
          /* cgroup v2: born inside its cgroup, no window outside limits. */
          args.flags |= CLONE_INTO_CGROUP;
          args.cgroup = (uint64_t) fds[1];
        }
      pid = syscall (SYS_clone3, &args, sizeof args);
      if (pid == 0)
        become_init (fds[0], m.flags & SBX_CLONE_BACKGROUND);
      if (pid < 0)
        reply (-1, errno, -1);
      else
        reply ((int) pid, 0, pidfd);
      if (pidfd >= 0)
        close (pidfd);
      close (fds[0]);
      if (fds[1] >= 0)
        close (fds[1]);
    }
}
