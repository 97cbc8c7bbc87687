/* sbx-init: entry point and request loop (see init.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "iso/init/init.h"

/* Packets are large (CONFIG carries the plan and the filter); keep them off
   the stack. */
static unsigned char packet[SBX_PROTO_MAX_MSG];

void
init_die (int sys_errno, const char *what)
{
  struct sbx_msg_failure m;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_SETUP_FAILED;
  m.hdr.len = sizeof m;
  m.sys_errno = sys_errno;
  strncpy (m.what, what, sizeof m.what - 1);
  init_send (&m, sizeof m, NULL, 0);
  _exit (1);
}

void
init_protocol_violation (void)
{
  /* PID 1 exiting takes every process of the sandbox with it. */
  _exit (2);
}

static const struct sbx_msg_config *
receive_config (const unsigned char **plan, const void **filter, size_t *filter_len, int *dev_mnt,
                int *root_mnt)
{
  const struct sbx_msg_config *cfg = (const struct sbx_msg_config *) packet;
  int fds[SBX_INIT_MAX_FDS], nfds;
  size_t n, need;

  n = init_recv (packet, sizeof packet, fds, SBX_INIT_MAX_FDS, &nfds);
  if (n < sizeof *cfg || nfds > 2)
    init_protocol_violation ();
  /* Its /dev (a detached mount), then a stored template's root. */
  if (cfg->root_from_fd > 1 || nfds != 1 + (int) cfg->root_from_fd)
    init_protocol_violation ();
  *dev_mnt = fds[0];
  *root_mnt = nfds == 2 ? fds[1] : -1;
  if (cfg->hdr.type != SBX_MSG_CONFIG || cfg->hdr.len != n || cfg->version != SBX_PROTO_VERSION)
    init_protocol_violation ();
  need = sizeof *cfg + (size_t) cfg->plan_bytes + (size_t) cfg->seccomp_len;
  if (cfg->plan_bytes > SBX_PROTO_MAX_MSG || cfg->seccomp_len > SBX_PROTO_MAX_MSG || need != n)
    init_protocol_violation ();
  if (memchr (cfg->hostname, '\0', sizeof cfg->hostname) == NULL || cfg->hostname[0] == '\0')
    init_protocol_violation ();
  if (cfg->disk_bytes == 0 || cfg->disk_inodes == 0)
    init_protocol_violation ();
  *plan = packet + sizeof *cfg;
  *filter = packet + sizeof *cfg + cfg->plan_bytes;
  *filter_len = cfg->seccomp_len;
  return cfg;
}

static int kept_root = -1, kept_disk = -1, deadline_fd = -1, have_keep;

void
init_roots (int *root_fd, int *disk_fd)
{
  *root_fd = kept_root;
  *disk_fd = kept_disk;
}

static void
set_deadline (int64_t deadline_ms)
{
  struct itimerspec its;

  memset (&its, 0, sizeof its);
  if (deadline_ms > 0)
    {
      its.it_value.tv_sec = deadline_ms / 1000;
      its.it_value.tv_nsec = (deadline_ms % 1000) * 1000000L;
    }
  /* A deadline already past fires at once. */
  if (timerfd_settime (deadline_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
    init_protocol_violation ();
}

static void
handle_keep (const struct sbx_msg_keep *m, size_t len, int *fds, int nfds)
{
  struct stat st;

  if (len != sizeof *m || nfds != 1 || have_keep || m->deadline_ms < 0)
    init_protocol_violation ();
  if (fstat (fds[0], &st) < 0 || !S_ISSOCK (st.st_mode))
    init_protocol_violation ();
  if (dup3 (fds[0], SBX_INIT_KEEP_FD, O_CLOEXEC) < 0)
    init_protocol_violation ();
  close (fds[0]);
  have_keep = 1;
  set_deadline (m->deadline_ms);
}

/* One message from the daemon on the control socket. */
static void
handle_ctl (void)
{
  int fds[SBX_INIT_MAX_FDS], nfds, i;
  const struct sbx_msg_hdr *hdr = (const struct sbx_msg_hdr *) packet;
  size_t n = init_recv (packet, sizeof packet, fds, SBX_INIT_MAX_FDS, &nfds);

  /* The daemon went away and never handed the sandbox out (a pool
     sandbox): it ends, so nothing is left that nobody can reach.
     A kept sandbox never reads EOF: we hold the daemon's end. */
  if (n == 0)
    _exit (0);
  if (n < sizeof *hdr || hdr->len != n)
    init_protocol_violation ();
  switch (hdr->type)
    {
    case SBX_MSG_SPAWN:
      init_handle_spawn ((const struct sbx_msg_spawn *) packet, n, fds, nfds);
      break;
    case SBX_MSG_PUMP:
      init_handle_pump ((const struct sbx_msg_pump *) packet, n, fds, nfds);
      break;
    case SBX_MSG_WATCH:
      init_handle_watch ((const struct sbx_msg_watch *) packet, n, fds, nfds);
      break;
    case SBX_MSG_KEEP:
      handle_keep ((const struct sbx_msg_keep *) packet, n, fds, nfds);
      break;
    case SBX_MSG_CONNECT:
      init_handle_connect ((const struct sbx_msg_connect *) packet, n, nfds);
      break;
    case SBX_MSG_SIGNAL:
    case SBX_MSG_RESIZE:
    case SBX_MSG_DEADLINE:
    case SBX_MSG_RELEASE:
    case SBX_MSG_ATTACH:
      if (nfds != 0)
        init_protocol_violation ();
      if (hdr->type == SBX_MSG_SIGNAL)
        init_handle_signal ((const struct sbx_msg_signal *) packet, n);
      else if (hdr->type == SBX_MSG_RESIZE)
        init_handle_resize ((const struct sbx_msg_resize *) packet, n);
      else if (hdr->type == SBX_MSG_RELEASE)
        init_handle_release ((const struct sbx_msg_release *) packet, n);
      else if (hdr->type == SBX_MSG_ATTACH)
        init_handle_attach (n, nfds);
      else
        {
          const struct sbx_msg_deadline *d = (const struct sbx_msg_deadline *) packet;
          if (n != sizeof *d || d->deadline_ms < 0)
            init_protocol_violation ();
          set_deadline (d->deadline_ms);
        }
      break;
    default:
      for (i = 0; i < nfds; i++)
        close (fds[i]);
      init_protocol_violation ();
    }
}

/* 1 when a message from the daemon waits on the control socket. */
static int
ctl_pending (void)
{
  struct pollfd p = {SBX_CTL_FD, POLLIN, 0};

  return poll (&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

static void
serve (int sigfd)
{
  for (;;)
    {
      struct pollfd pfd[3 + SBX_CONNECT_MAX + 2] = {
          {SBX_CTL_FD, POLLIN, 0}, {sigfd, POLLIN, 0}, {deadline_fd, POLLIN, 0}};
      int nconn, negress, nsudo, drained = 0;

      if (init_events_pending ())
        pfd[0].events |= POLLOUT;
      /* Connects for the port proxy (connect.c), each with a deadline. */
      nconn = init_connect_pollfds (pfd + 3);
      /* The egress listener (egress.c), then sudo's (sudo.c), last. */
      negress = init_egress_pollfds (pfd + 3 + nconn);
      nsudo = init_sudo_pollfds (pfd + 3 + nconn + negress);
      if (poll (pfd, (nfds_t) (3 + nconn + negress + nsudo), init_connect_timeout_ms ()) < 0)
        {
          if (errno == EINTR)
            continue;
          init_protocol_violation ();
        }
      init_connect_after_poll (pfd + 3, nconn);
      init_egress_after_poll (pfd + 3 + nconn, negress);
      init_sudo_after_poll (pfd + 3 + nconn + negress, nsudo);
      if (pfd[2].revents & POLLIN)
        {
          uint64_t ticks;
          /* A daemon may have moved the deadline in a message we have not
             read yet (a sandbox resumed after a pause: it was frozen past
             its old deadline): read every waiting message first. A new
             deadline re-arms the timer, which clears its expiry. */
          while (ctl_pending ())
            handle_ctl ();
          drained = 1;
          /* The sandbox outlived its lifetime and no daemon ended it (none
             was running): end it ourselves. */
          if (read (deadline_fd, &ticks, sizeof ticks) == (ssize_t) sizeof ticks)
            _exit (0);
        }
      if (pfd[1].revents & POLLIN)
        {
          struct signalfd_siginfo si;
          while (read (sigfd, &si, sizeof si) == (ssize_t) sizeof si)
            ;
          init_reap ();
        }
      if (pfd[0].revents & POLLOUT)
        init_flush_events ();
      if ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) && !drained)
        handle_ctl ();
    }
}

void
init_sandbox_main (void)
{
  const struct sbx_msg_config *cfg;
  const unsigned char *plan;
  const void *filter;
  size_t filter_len;
  struct sbx_msg_ready ready;
  sigset_t mask;
  int root_fd, disk_fd, sigfd, fds[2], dev_mnt, root_mnt;

  /* Not dumpable: a root process inside cannot open /proc/1/mem, /proc/1/fd
     or /proc/1/exe without CAP_SYS_PTRACE (CVE-2016-9962, CVE-2019-5736). */
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    init_die (errno, "PR_SET_DUMPABLE");
  umask (022);

  /* Hold SBX_INIT_KEEP_FD (with /dev/null) so no other fd takes the
     number KEEP will put the daemon's end at. */
  if (fcntl (SBX_INIT_KEEP_FD, F_GETFD) >= 0 || errno != EBADF
      || dup3 (STDIN_FILENO, SBX_INIT_KEEP_FD, O_CLOEXEC) < 0)
    init_die (EBADF, "reserve the keep fd");

  sigemptyset (&mask);
  sigaddset (&mask, SIGCHLD);
  if (sigprocmask (SIG_SETMASK, &mask, NULL) < 0)
    init_die (errno, "sigprocmask");
  signal (SIGPIPE, SIG_IGN);
  sigfd = signalfd (-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0)
    init_die (errno, "signalfd");
  deadline_fd = timerfd_create (CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
  if (deadline_fd < 0)
    init_die (errno, "timerfd_create");

  cfg = receive_config (&plan, &filter, &filter_len, &dev_mnt, &root_mnt);
  init_build_root (cfg, plan, dev_mnt, root_mnt, &root_fd, &disk_fd);
  init_setup_network ();
  init_egress_listen ();
  init_set_hostname (cfg->hostname);
  /* The daemon put us in our cgroup before we ran; a cgroup namespace
     rooted there hides the host's cgroup paths from /proc/self/cgroup. */
  if (unshare (CLONE_NEWCGROUP) < 0)
    init_die (errno, "unshare cgroup namespace");
  init_drop_privileges ();
  memset (&ready, 0, sizeof ready);
  ready.landlock_abi = init_apply_landlock (cfg->landlock_abi, init_root_writable (cfg, root_mnt));
  /* In the Landlock domain its clients are in (sudo.c). */
  init_sudo_listen (cfg->disk_bytes);
  /* Only stdio (/dev/null), the control socket, the signalfd and timer,
     and what READY carries. */
  if (close_range (SBX_CTL_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    init_die (errno, "close_range");
  init_apply_seccomp (filter, filter_len);

  ready.hdr.type = SBX_MSG_READY;
  ready.hdr.len = sizeof ready;
  ready.version = SBX_PROTO_VERSION;
  fds[0] = root_fd;
  fds[1] = disk_fd;
  if (init_send (&ready, sizeof ready, fds, 2) < 0)
    init_protocol_violation ();
  /* Kept (O_PATH, close-on-exec, never in a command) for a daemon that
     ATTACHes after a restart. */
  kept_root = root_fd;
  kept_disk = disk_fd;

  serve (sigfd);
  _exit (0);
}

int
main (int argc, char **argv)
{
  /* The daemon starts us only in zygote mode; sandboxes are its clones. */
  if (argc == 2 && strcmp (argv[1], "zygote") == 0)
    init_zygote_main (argv[1]);
  return 2;
}
