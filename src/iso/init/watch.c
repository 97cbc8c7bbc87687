/* sbx-init: directory watches (SBX_MSG_WATCH, see iso/proto.h).
 *
 * The watch runs in a helper that init forks, never in the daemon: the
 * helper is inside the sandbox (its mount namespace and root, so a path and
 * every symlink on it resolve to the sandbox's own files, whatever they
 * point at), runs as the requested user with no capabilities (the kernel
 * checks that user's permissions on every directory it watches), under the
 * sandbox's seccomp filter and Landlock domain, counted in its pids and
 * memory cgroup. inotify instances and watches are charged to the
 * sandbox's host uid too.
 *
 * The helper writes length-prefixed records (struct sbx_watch_rec) into the
 * pipe the daemon sent; the daemon reads them in its event loop and checks
 * every byte, since the helper shares a uid with the sandbox's code. Its
 * walls are put up here; the watching is watch_run.c's, which a VM's guest
 * agent runs too.
 */
#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iso/init/init.h"
#include "iso/init/watch_run.h"

/* ---- the helper ------------------------------------------------------------ */

static __attribute__ ((noreturn)) void
run_watch (const struct sbx_msg_watch *msg, const char *path, int pipe_fd)
{
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct caps[2];
  sigset_t none;
  int i;

  /* Default dispositions (SIGPIPE kills it when the reader is gone) and
     an empty mask, as for a command. */
  for (i = 1; i < NSIG; i++)
    signal (i, SIG_DFL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  /* Its own session, apart from init's process group. */
  setsid ();
  prctl (PR_SET_NAME, "sbx-watch", 0, 0, 0);
  /* The pipe at 1, init's /dev/null at 0; nothing else of init's (not the
     control socket, its signalfd or the kept root and disk fds). */
  if (dup2 (pipe_fd, OUT_FD) < 0 || close_range (2, ~0U, 0) < 0)
    _exit (EBADF);
  sbx_watch_run_limits ();
  memset (caps, 0, sizeof caps);
  if (setresgid (msg->gid, msg->gid, msg->gid) < 0 || setresuid (msg->uid, msg->uid, msg->uid) < 0
      || syscall (SYS_capset, &hdr, caps) < 0)
    sbx_watch_run_fail (EPERM);

  sbx_watch_run (path, (msg->flags & SBX_WATCH_RECURSIVE) != 0);
}

void
init_handle_watch (const struct sbx_msg_watch *msg, size_t len, const int *fds, int nfds)
{
  static char path[SBX_WATCH_PATH_MAX];
  struct init_proc *p;
  const char *raw;
  pid_t pid;

  if (len < sizeof *msg || nfds != 1 || (msg->flags & ~(uint32_t) SBX_WATCH_FLAGS) != 0
      || msg->path_len == 0 || msg->path_len >= SBX_WATCH_PATH_MAX
      || len != sizeof *msg + msg->path_len || msg->uid >= 65536 || msg->gid >= 65536)
    {
      if (nfds > 0)
        close (fds[0]);
      init_protocol_violation ();
    }
  raw = (const char *) (msg + 1);
  if (raw[0] != '/' || memchr (raw, '\0', msg->path_len) != NULL)
    init_protocol_violation ();
  memcpy (path, raw, msg->path_len);
  path[msg->path_len] = '\0';
  /* fork, not vfork: the helper lives on. */
  pid = fork ();
  if (pid == 0)
    run_watch (msg, path, fds[0]);
  if (pid < 0)
    init_send_spawn_failed (msg->req_id, errno, SBX_STAGE_FORK);
  else if ((p = init_proc_add (pid, msg->req_id, 1)) == NULL)
    {
      kill (pid, SIGKILL);
      init_send_spawn_failed (msg->req_id, EAGAIN, SBX_STAGE_FORK);
    }
  else
    p->is_watch = 1;
  close (fds[0]);
}
