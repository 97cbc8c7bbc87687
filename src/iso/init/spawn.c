/* sbx-init: run the daemon's commands and reap every process.
 *
 * A command is forked from init, so it inherits init's namespaces, cgroup,
 * Landlock domain and seccomp filter; the child then leads a new session
 * (no controlling terminal: CVE-2017-5226's TIOCSTI needs one), takes its
 * stdio from the fds the daemon sent, drops to the requested user, and
 * execs. A command asked to run on a terminal gets one that init makes
 * from the sandbox's own devpts instance: its controlling terminal is
 * then that and only that. It is started with vfork, and a failure before exec is left in
 * memory we share until then, so "command not found" is an answer, not a
 * mystery exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iso/init/init.h"

/* Where a child started with vfork says why it could not exec: it shares
   our memory until exec, and we run again only once it has exec'd (then
   stage is still 0) or exited. Static: nothing of it lives on a stack the
   child could be using. */
static volatile struct
{
  int32_t sys_errno;
  uint32_t stage;
} child_failure;

void
init_send_spawn_failed (uint64_t req_id, int sys_errno, uint32_t stage)
{
  struct sbx_msg_spawn_failed m;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_SPAWN_FAILED;
  m.hdr.len = sizeof m;
  m.req_id = req_id;
  m.sys_errno = sys_errno;
  m.stage = stage;
  init_send_event (&m, sizeof m);
}

static __attribute__ ((noreturn)) void
child_fail (int sys_errno, uint32_t stage)
{
  child_failure.sys_errno = sys_errno;
  child_failure.stage = stage;
  _exit (127);
}

/* execvpe() searches the PATH of the *calling* process; ours is empty, so
   search the command's own PATH by hand. */
static void
exec_with_path (const char *file, char *const argv[], char *const envp[], int *err)
{
  const char *path = "/usr/local/bin:/usr/bin:/bin";
  char buf[4096];
  int i, saw_eacces = 0;

  if (strchr (file, '/') != NULL)
    {
      execve (file, argv, envp);
      *err = errno;
      return;
    }
  for (i = 0; envp[i] != NULL; i++)
    if (strncmp (envp[i], "PATH=", 5) == 0)
      path = envp[i] + 5;
  *err = ENOENT;
  while (*path)
    {
      const char *end = strchrnul (path, ':');
      size_t dlen = (size_t) (end - path), flen = strlen (file);
      if (dlen == 0)
        dlen = 1, path = "."; /* an empty PATH entry means the cwd */
      if (dlen + 1 + flen + 1 <= sizeof buf)
        {
          memcpy (buf, path, dlen);
          buf[dlen] = '/';
          memcpy (buf + dlen + 1, file, flen + 1);
          execve (buf, argv, envp);
          if (errno == EACCES)
            saw_eacces = 1;
          else if (errno != ENOENT && errno != ENOTDIR)
            {
              *err = errno;
              return;
            }
        }
      if (*end == '\0')
        break;
      path = end + 1;
    }
  *err = saw_eacces ? EACCES : ENOENT;
}

/* A pseudo-terminal of cols x rows for a command of user uid, from the
   sandbox's private devpts instance (rootfs.c mounts it with newinstance):
   the host's terminals are out of reach whatever the command does. Returns
   0 with both ends (close-on-exec), or -errno. */
static int
open_pty (uint32_t uid, uint16_t cols, uint16_t rows, int *master, int *slave)
{
  struct winsize ws;
  int unlock = 0, m, s, e;

  /* devpts gives a new terminal the fsuid of whoever opens ptmx: the
     command's user owns its terminal, as after a login (screen, write and
     others refuse a terminal that is not theirs). The group is devpts's
     gid=5 (tty). CAP_SETUID allows this; init holds no file capability
     that an fsuid change would clear. */
  setfsuid (uid);
  if ((uint32_t) setfsuid ((uid_t) -1) != uid)
    {
      setfsuid (0);
      return -EPERM;
    }
  m = open ("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  e = errno;
  setfsuid (0);
  if (m < 0)
    return -e;
  memset (&ws, 0, sizeof ws);
  ws.ws_col = cols;
  ws.ws_row = rows;
  if (ioctl (m, TIOCSPTLCK, &unlock) < 0 || ioctl (m, TIOCSWINSZ, &ws) < 0)
    goto fail;
  /* The slave through the master, never by its path: nothing in the
     sandbox can put another file at /dev/pts/N between the two steps (the
     race TIOCGPTPEER was made for). */
  s = ioctl (m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0)
    goto fail;
  *master = m;
  *slave = s;
  return 0;
fail:
  e = errno;
  close (m);
  return -e;
}

static __attribute__ ((noreturn)) void
run_child (const struct sbx_msg_spawn *msg, const char *cwd, char **argv, char **envp,
           const int *fds)
{
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct caps[2];
  struct rlimit rl;
  sigset_t none;
  int i, sys_errno;

  /* Default dispositions and an empty mask: init blocks SIGCHLD for its
     signalfd and ignores SIGPIPE, and whatever the daemon was started
     with (nohup's SIGHUP, a shell's background job's SIGINT and SIGQUIT)
     is ignored here too, as exec keeps ignored signals: none of it may
     reach user code, or a terminal's ^C and a SIGHUP do nothing. */
  init_default_signals ();
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);

  if (setsid () < 0)
    child_fail (errno, SBX_STAGE_SETUP);
  /* A terminal's slave (fds are all three that) becomes the controlling
     terminal of the new session: the only one the command can reach. */
  if ((msg->flags & SBX_SPAWN_PTY) && ioctl (fds[0], TIOCSCTTY, 0) < 0)
    child_fail (errno, SBX_STAGE_PTY);
  for (i = 0; i < 3; i++)
    if (dup2 (fds[i], i) < 0)
      child_fail (errno, SBX_STAGE_SETUP);
  /* Exactly 0, 1 and 2 survive. */
  if (close_range (3, ~0U, 0) < 0)
    child_fail (errno, SBX_STAGE_SETUP);

  /* No core dumps (they would fill the disk and could carry secrets), and
     no real-time scheduling: seccomp allows sched_setscheduler, so an RT
     priority limit of 0 is what keeps a busy loop from starving the host. */
  rl.rlim_cur = rl.rlim_max = 0;
  if (setrlimit (RLIMIT_CORE, &rl) < 0 || setrlimit (RLIMIT_RTPRIO, &rl) < 0)
    child_fail (errno, SBX_STAGE_SETUP);
  rl.rlim_cur = rl.rlim_max = msg->rlimit_nofile;
  if (setrlimit (RLIMIT_NOFILE, &rl) < 0)
    child_fail (errno, SBX_STAGE_SETUP);
  rl.rlim_cur = rl.rlim_max = msg->rlimit_fsize;
  if (setrlimit (RLIMIT_FSIZE, &rl) < 0)
    child_fail (errno, SBX_STAGE_SETUP);

  /* setgroups is denied in our user namespace (CVE-2014-8989), and the
     group list is already empty. */
  if (setresgid (msg->gid, msg->gid, msg->gid) < 0)
    child_fail (errno, SBX_STAGE_SETUP);
  if (setresuid (msg->uid, msg->uid, msg->uid) < 0)
    child_fail (errno, SBX_STAGE_SETUP);
  /* A uid change away from 0 already cleared every capability; root inside
     clears them by hand, and NOROOT keeps exec from handing them back. */
  memset (caps, 0, sizeof caps);
  if (syscall (SYS_capset, &hdr, caps) < 0)
    child_fail (errno, SBX_STAGE_SETUP);
  umask (022);

  if (chdir (cwd) < 0)
    child_fail (errno, SBX_STAGE_CHDIR);

  exec_with_path (argv[0], argv, envp, &sys_errno);
  child_fail (sys_errno, SBX_STAGE_EXEC);
}

pid_t
init_start_command (const struct sbx_msg_spawn *msg, const char *cwd, char **argv, char **envp,
                    const int *fds, int *sys_errno, uint32_t *stage)
{
  pid_t pid;

  /* vfork: no copy of our address space to make and tear down (the child
     execs at once); we are suspended until it has exec'd or exited. */
  child_failure.stage = 0;
  child_failure.sys_errno = 0;
  pid = vfork ();
  if (pid == 0)
    run_child (msg, cwd, argv, envp, fds);
  if (pid < 0)
    {
      *sys_errno = errno;
      *stage = SBX_STAGE_FORK;
      return -1;
    }
  if (child_failure.stage != 0)
    {
      /* It never ran user code; reap it now so it is not reported twice. */
      while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
      *sys_errno = child_failure.sys_errno;
      *stage = child_failure.stage;
      return -1;
    }
  return pid;
}

void
init_handle_spawn (const struct sbx_msg_spawn *msg, size_t len, int *fds, int nfds)
{
  /* Pointers into msg's string section; sized by the protocol limits. */
  static char *argv[SBX_SPAWN_MAX_ARGS + 1];
  static char *envp[SBX_SPAWN_MAX_ENV + 1];
  char *strings, *p, *end, *cwd;
  struct sbx_msg_spawned ok;
  struct init_proc *proc;
  uint32_t i, k, stage;
  pid_t pid;
  int pty, r, pty_stdio[3], sys_errno;
  /* Live across vfork's second return: never kept in a register. */
  volatile int master = -1, slave = -1;

  if (len < sizeof *msg || msg->argc == 0 || msg->argc > SBX_SPAWN_MAX_ARGS
      || msg->envc > SBX_SPAWN_MAX_ENV || msg->strings_len > SBX_SPAWN_MAX_STRINGS
      || msg->tag_len > SBX_TAG_MAX || (msg->keep_mask & ~(uint32_t) SBX_KEEP_ALL) != 0
      || len != sizeof *msg + msg->strings_len + msg->tag_len || msg->strings_len == 0
      || (msg->flags & ~(uint32_t) SBX_SPAWN_PTY) != 0)
    init_protocol_violation ();
  pty = (msg->flags & SBX_SPAWN_PTY) != 0;
  /* On a terminal: no descriptors (init makes them), a size in range.
     Otherwise: the three stdio ends and the kept ones, no size. */
  if (pty ? (nfds != 0 || msg->keep_mask != 0 || msg->pty_cols == 0
             || msg->pty_cols > SBX_PTY_MAX || msg->pty_rows == 0 || msg->pty_rows > SBX_PTY_MAX)
          : (nfds != 3 + __builtin_popcount (msg->keep_mask) || msg->pty_cols != 0
             || msg->pty_rows != 0))
    init_protocol_violation ();
  strings = (char *) (uintptr_t) (msg + 1);
  end = strings + msg->strings_len;
  if (end[-1] != '\0')
    init_protocol_violation ();
  /* cwd, then argc + envc strings, each NUL-terminated, nothing after. */
  p = strings;
  cwd = p;
  p += strlen (p) + 1;
  for (i = 0; i < msg->argc + msg->envc; i++)
    {
      if (p >= end)
        init_protocol_violation ();
      if (i < msg->argc)
        argv[i] = p;
      else
        envp[i - msg->argc] = p;
      p += strlen (p) + 1;
    }
  if (p != end || cwd[0] != '/')
    init_protocol_violation ();
  argv[msg->argc] = NULL;
  envp[msg->envc] = NULL;

  if (pty)
    {
      int m = -1, s = -1;
      r = open_pty (msg->uid, msg->pty_cols, msg->pty_rows, &m, &s);
      if (r < 0)
        {
          init_send_spawn_failed (msg->req_id, -r, SBX_STAGE_PTY);
          return;
        }
      master = m;
      slave = s;
      pty_stdio[0] = pty_stdio[1] = pty_stdio[2] = s;
    }

  pid = init_start_command (msg, cwd, argv, envp, pty ? pty_stdio : fds, &sys_errno, &stage);
  if (pid < 0)
    {
      init_send_spawn_failed (msg->req_id, sys_errno, stage);
      goto out;
    }
  proc = init_proc_add (pid, msg->req_id, 0);
  if (proc == NULL || (msg->tag_len && (proc->tag = malloc (msg->tag_len)) == NULL))
    {
      /* Not tracked, so never reported: it must not run on unseen. */
      kill (pid, SIGKILL);
      while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
      if (proc)
        init_proc_forget (proc);
      init_send_spawn_failed (msg->req_id, EAGAIN, SBX_STAGE_FORK);
      goto out;
    }
  if (msg->tag_len)
    memcpy (proc->tag, end, msg->tag_len);
  proc->tag_len = msg->tag_len;
  /* The daemon's ends, in bit order after the three stdio fds. */
  for (i = 0, k = 3; i < 3; i++)
    if (msg->keep_mask & (1u << i))
      {
        proc->keep[i] = fds[k];
        fds[k++] = -1;
      }
  memset (&ok, 0, sizeof ok);
  ok.hdr.type = SBX_MSG_SPAWNED;
  ok.hdr.len = sizeof ok;
  ok.req_id = msg->req_id;
  ok.pid = pid;
  if (pty)
    {
      /* Ours for the command's life (RESIZE, ATTACH); the daemon gets a
         copy with the event. */
      proc->pty = master;
      master = -1;
      ok.flags = SBX_SPAWNED_PTY;
      init_send_event_fd (&ok, sizeof ok, proc->pty);
    }
  else
    init_send_event (&ok, sizeof ok);
out:
  /* Only the command holds its terminal's slave: when it and what it
     started are gone, the master reads EIO, its end of output. */
  if (slave >= 0)
    close (slave);
  if (master >= 0)
    close (master);
  for (i = 0; i < (uint32_t) nfds; i++)
    if (fds[i] >= 0)
      close (fds[i]);
}

/* Every signal at its default, by the system call: glibc's signal() refuses
   32 and 33 (its own), and an ignored one, inherited from whatever started
   the daemon, stays ignored across exec. SIGKILL and SIGSTOP fail, as they
   may. */
void
init_default_signals (void)
{
  struct
  {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
  } dfl = {SIG_DFL, 0, NULL, 0};

  for (int sig = 1; sig <= 64; sig++)
    (void) syscall (SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
}

/* The helper of a PUMP: copy source to destination until end of file. */
static __attribute__ ((noreturn)) void
run_pump (const struct sbx_msg_pump *msg, int in, int out)
{
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct caps[2];
  sigset_t none;

  init_default_signals ();
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  /* Nothing but the two ends: not the control socket, not init's signalfd. */
  if (dup2 (in, 0) < 0 || dup2 (out, 1) < 0 || close_range (2, ~0U, 0) < 0)
    _exit (EBADF);
  memset (caps, 0, sizeof caps);
  if (setresgid (msg->gid, msg->gid, msg->gid) < 0 || setresuid (msg->uid, msg->uid, msg->uid) < 0
      || syscall (SYS_capset, &hdr, caps) < 0)
    _exit (EPERM);
  for (;;)
    {
      /* splice when the source is the daemon's pipe (an upload), sendfile
         from a file (a move between /tmp and /home/user). */
      ssize_t n = splice (0, NULL, 1, NULL, 1 << 20, SPLICE_F_MOVE);
      if (n < 0 && errno == EINVAL)
        n = sendfile (1, 0, NULL, 1 << 20);
      if (n == 0)
        _exit (0);
      if (n < 0 && errno != EINTR)
        _exit (errno > 0 && errno < 256 ? errno : EIO);
    }
}

void
init_handle_pump (const struct sbx_msg_pump *msg, size_t len, const int *fds, int nfds)
{
  pid_t pid;

  if (len != sizeof *msg || nfds != 2)
    init_protocol_violation ();
  pid = fork ();
  if (pid == 0)
    run_pump (msg, fds[0], fds[1]);
  if (pid < 0)
    init_send_spawn_failed (msg->req_id, errno, SBX_STAGE_FORK);
  else if (init_proc_add (pid, msg->req_id, 1) == NULL)
    {
      kill (pid, SIGKILL);
      init_send_spawn_failed (msg->req_id, EAGAIN, SBX_STAGE_FORK);
    }
  close (fds[0]);
  close (fds[1]);
}

void
init_handle_resize (const struct sbx_msg_resize *msg, size_t len)
{
  struct sbx_msg_resized answer;
  struct init_proc *p;
  struct winsize ws;

  if (len != sizeof *msg || msg->cols == 0 || msg->cols > SBX_PTY_MAX || msg->rows == 0
      || msg->rows > SBX_PTY_MAX)
    init_protocol_violation ();
  memset (&answer, 0, sizeof answer);
  answer.hdr.type = SBX_MSG_RESIZED;
  answer.hdr.len = sizeof answer;
  answer.req_id = msg->req_id;
  p = init_proc_running (msg->req_id);
  if (p == NULL || p->pty < 0)
    answer.sys_errno = ESRCH; /* exited meanwhile, or never had a terminal */
  else
    {
      /* The kernel signals SIGWINCH to the terminal's foreground group. */
      memset (&ws, 0, sizeof ws);
      ws.ws_col = msg->cols;
      ws.ws_row = msg->rows;
      if (ioctl (p->pty, TIOCSWINSZ, &ws) < 0)
        answer.sys_errno = errno;
    }
  init_send_event (&answer, sizeof answer);
}

void
init_handle_signal (const struct sbx_msg_signal *msg, size_t len)
{
  struct init_proc *p;

  if (len != sizeof *msg || msg->signo == 0 || msg->signo >= NSIG
      || (msg->flags & ~(uint32_t) SBX_SIGNAL_FLAGS) != 0)
    init_protocol_violation ();
  p = init_proc_running (msg->req_id);
  /* Already exited: the daemon learns that from EXITED. */
  if (p == NULL)
    return;
  p->causes |= msg->flags & (SBX_SIGNAL_TIMEOUT | SBX_SIGNAL_API);
  /* The command leads its own session and process group (setsid). */
  if (msg->flags & SBX_SIGNAL_GROUP)
    kill (-p->pid, (int) msg->signo);
  else
    kill (p->pid, (int) msg->signo);
}
