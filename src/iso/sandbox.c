/* sbx: creating and destroying sandboxes (the daemon's half of the setup
 * sequence in docs/architecture.md's step table; init.c-side steps are in
 * iso/init/).
 *
 *   daemon                                   zygote / new sandbox init
 *   cgroup dir + limits
 *   socketpair (SEQPACKET)
 *   CLONE (ctl end [, cgroup fd]) ---------> clone3(NEWUSER|NEWNS|NEWPID|NEWNET|
 *                                              NEWIPC|NEWUTS|PARENT [|INTO_CGROUP])
 *   <------------------------------------- CLONED (pidfd)
 *                                            child: ctl -> fd 3, close the rest,
 *                                            wait for GO          (sync 1)
 *   uid_map, setgroups=deny, gid_map
 *   cgroup.procs (v1)
 *   GO ------------------------------------> setresuid(0): root of its userns
 *   CONFIG (plan, limits, seccomp BPF) ----> build root, pivot, lock down
 *   <------------------------------------- READY (root fd, disk fd)
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iso/copy.h"
#include "iso/devnodes.h"
#include "iso/snapstore.h"
#include "iso/engine.h"
#include "iso/kernel.h"
#include "iso/vm.h"
#include "iso/seccomp.h"
#include "iso/wire.h"
#include "util/cleanup.h"
#include "util/file.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
/* A snapshot copier's cgroup: its dirty pages on the way to the host's
   disk, at most. */
#define SBX_COPIER_MEMORY (256ULL << 20)
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLONE_CLEAR_SIGHAND
#define CLONE_CLEAR_SIGHAND 0x100000000ULL
#endif

extern const unsigned char sbx_init_blob[];
extern const unsigned char sbx_init_blob_end[];

#define SETUP_TIMEOUT_MS 10000
#define CTL_SNDBUF (2 * 1024 * 1024)

static int start_zygote (struct sbx_engine *eng, sbx_error_t **err);
static void stop_zygote (struct sbx_engine *eng);

/* ---- engine ------------------------------------------------------------ */

static int
make_init_memfd (sbx_error_t **err)
{
  const unsigned char *p = sbx_init_blob;
  size_t left = (size_t) (sbx_init_blob_end - sbx_init_blob);
  int fd;

  fd = memfd_create ("sbx-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL)
    fd = memfd_create ("sbx-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return sbx_err_sys (err, errno, "memfd_create");
  while (left > 0)
    {
      ssize_t w = write (fd, p, left);
      if (w < 0)
        {
          if (errno == EINTR)
            continue;
          close (fd);
          return sbx_err_sys (err, errno, "write init memfd");
        }
      p += w;
      left -= (size_t) w;
    }
  /* Sealed: nothing, not even root inside a sandbox reaching /proc/1/exe,
     can change what every sandbox's PID 1 runs (CVE-2019-5736). */
  if (fchmod (fd, 0555) < 0
      || sbx_seal_memfd (fd, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    {
      int e = errno;
      close (fd);
      return sbx_err_sys (err, e, "seal init memfd");
    }
  return fd;
}

int
sbx_engine_open (struct sbx_engine *eng, const struct sbx_engine_opts *opts, sbx_error_t **err)
{
  memset (eng, 0, sizeof *eng);
  eng->init_memfd = eng->devnull = eng->zygote = eng->zygote_pidfd = -1;
  pthread_mutex_init (&eng->zygote_lock, NULL);
  pthread_mutex_init (&eng->stale_lock, NULL);
  for (int c = 0; c < SBX_CG_NCTRL; c++)
    eng->cgroups.parent[c] = -1;

  /* The kernel was probed at start (iso/kernel.c): a daemon on a kernel
     without Landlock or openat2 never gets here. */
  assert (sbx_kernel.landlock_abi >= 1);
  eng->landlock_abi = sbx_kernel.landlock_abi;
  if (opts->landlock_max_abi && eng->landlock_abi > opts->landlock_max_abi)
    eng->landlock_abi = opts->landlock_max_abi;
  if (opts->vm_dir != NULL)
    snprintf (eng->vm_dir, sizeof eng->vm_dir, "%s", opts->vm_dir);
  eng->read_only_root = opts->read_only_root;

  if (sbx_seccomp_build (&eng->seccomp_prog, &eng->seccomp_len, err) < 0)
    return sbx_err_wrap (err, "seccomp policy");
  eng->init_memfd = make_init_memfd (err);
  if (eng->init_memfd < 0)
    goto fail;
  eng->devnull = open ("/dev/null", O_RDWR | O_CLOEXEC);
  if (eng->devnull < 0)
    {
      sbx_err_sys (err, errno, "open /dev/null");
      goto fail;
    }
  /* Cgroups first: the daemon moves into its leaf while it is the only
     process of its cgroup, before the zygote exists (iso/cgroup.h). */
  {
    const char *mount = opts->cgroup_mount ? opts->cgroup_mount : "/sys/fs/cgroup";
    const struct sbx_cgroup_place *place = opts->cgroup_place;

    if (place && sbx_cgroup_enter (mount, place, err) < 0)
      goto fail;
    if (sbx_cgroup_root_open_at (&eng->cgroups, mount, place ? place->base : "",
                                 place ? place->parent
                                       : (opts->cgroup_parent ? opts->cgroup_parent : "sbx"),
                                 opts->cgroup_mode, err)
        < 0)
      goto fail;
    if (place)
      snprintf (eng->cgroup_why, sizeof eng->cgroup_why, "%.*s",
                (int) sizeof eng->cgroup_why - 1, place->why);
    if (eng->cgroups.mode == SBX_CGROUP_V2)
      {
        snprintf (eng->cgroup_daemon, sizeof eng->cgroup_daemon, "/%.*s",
                  (int) sizeof eng->cgroup_daemon - 2, place ? place->daemon : "");
        if (faccessat (eng->cgroups.parent[0], "cgroup.kill", F_OK, 0) == 0)
          sbx_kernel.paths |= SBX_KERNEL_CGROUP_KILL;
      }
  }
  if (start_zygote (eng, err) < 0)
    goto fail;
  return 0;
fail:
  sbx_engine_close (eng);
  return -1;
}

static void retry_stale (struct sbx_engine *eng);

void
sbx_engine_close (struct sbx_engine *eng)
{
  retry_stale (eng);
  stop_zygote (eng);
  close_and_reset (&eng->init_memfd);
  close_and_reset (&eng->devnull);
  free (eng->seccomp_prog);
  eng->seccomp_prog = NULL;
  sbx_cgroup_root_remove (&eng->cgroups);
}

/* ---- cgroups that would not go ----------------------------------------- */

static void
add_stale (struct sbx_engine *eng, const char *name)
{
  pthread_mutex_lock (&eng->stale_lock);
  if (eng->nstale < sizeof eng->stale / sizeof eng->stale[0])
    snprintf (eng->stale[eng->nstale++], sizeof eng->stale[0], "%s", name);
  pthread_mutex_unlock (&eng->stale_lock);
}

/* Try again to remove the cgroups a fault kept us from removing. */
static void
retry_stale (struct sbx_engine *eng)
{
  unsigned i = 0;

  if (eng->cgroups.parent[0] < 0)
    return; /* never opened */
  pthread_mutex_lock (&eng->stale_lock);
  while (i < eng->nstale)
    {
      if (sbx_cgroup_remove (&eng->cgroups, eng->stale[i], NULL) == 0)
        memcpy (eng->stale[i], eng->stale[--eng->nstale], sizeof eng->stale[0]);
      else
        i++;
    }
  pthread_mutex_unlock (&eng->stale_lock);
}

/* ---- create ------------------------------------------------------------ */

static int
write_proc_file (pid_t pid, const char *name, const char *value, sbx_error_t **err)
{
  char path[64];
  cleanup_close int fd = -1;
  size_t len = strlen (value);

  snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, name);
  fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys (err, errno, "open `%s`", path);
  if (write (fd, value, len) != (ssize_t) len)
    return sbx_err_sys (err, errno, "write `%s`", path);
  return 0;
}

/* One range, 65536 ids, starting at the sandbox's own unprivileged base:
   root inside is a nobody outside, and two sandboxes never share an id, so
   they cannot signal or ptrace each other even if something leaks. */
static int
write_id_maps (pid_t pid, uid_t base, sbx_error_t **err)
{
  char map[64];

  snprintf (map, sizeof map, "0 %u %u\n", (unsigned) base, SBX_IDS_PER_SANDBOX);
  if (write_proc_file (pid, "uid_map", map, err) < 0)
    return -1;
  /* setgroups must be denied before gid_map is written (CVE-2014-8989:
     dropping supplementary groups could defeat negative group permissions). */
  if (write_proc_file (pid, "setgroups", "deny", err) < 0)
    return -1;
  return write_proc_file (pid, "gid_map", map, err);
}

/* The child between clone and exec of the zygote. The daemon may be
   multi-threaded by then (a zygote is restarted on demand), so only
   async-signal-safe calls: no malloc, no stdio, no locks. */
static __attribute__ ((noreturn)) void
child_exec_zygote (int sock, int memfd, int devnull)
{
  static char arg0[] = "sbx-init", arg1[] = "zygote";
  static char *const argv[] = {arg0, arg1, NULL};
  static char *const envp[] = {NULL};
  int m, c, n;

  /* Lift every fd we need above the stdio and control slots first, so that
     placing them cannot clobber one another. */
  m = fcntl (memfd, F_DUPFD_CLOEXEC, 10);
  c = fcntl (sock, F_DUPFD_CLOEXEC, 10);
  n = fcntl (devnull, F_DUPFD_CLOEXEC, 10);
  if (m < 0 || c < 0 || n < 0)
    _exit (126);
  /* Sandboxes must never share the daemon's stdio: a terminal would allow
     TIOCSTI injection (CVE-2017-5226), a log file would leak. */
  if (dup2 (n, 0) < 0 || dup2 (n, 1) < 0 || dup2 (n, 2) < 0 || dup2 (c, SBX_INIT_CTL_FD) < 0)
    _exit (126);
  /* Nor its session: a daemon started from a shell has that terminal as
     its controlling terminal, which every sandbox's init would inherit
     (and a ^C there would reach them all). A session of our own has none;
     the inits cloned from us start in it, their commands in their own. */
  if (setsid () < 0)
    _exit (126);
  /* Every other fd the daemon holds is close-on-exec; make sure of it
     (CVE-2024-21626 leaked one that was not). */
  if (syscall (SYS_close_range, SBX_INIT_CTL_FD + 1, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */) < 0)
    _exit (126);
  syscall (SYS_execveat, m, "", argv, envp, AT_EMPTY_PATH);
  _exit (127);
}

static void
stop_zygote (struct sbx_engine *eng)
{
  close_and_reset (&eng->zygote);
  if (eng->zygote_pidfd >= 0)
    {
      siginfo_t info;
      /* It exits when its socket closes; make sure, and reap it. */
      syscall (SYS_pidfd_send_signal, eng->zygote_pidfd, SIGKILL, NULL, 0);
      while (waitid ((idtype_t) P_PIDFD, (id_t) eng->zygote_pidfd, &info, WEXITED) < 0
             && errno == EINTR)
        ;
      close_and_reset (&eng->zygote_pidfd);
    }
}

static int
start_zygote (struct sbx_engine *eng, sbx_error_t **err)
{
  struct clone_args args;
  int sv[2];
  long pid;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return sbx_err_sys (err, errno, "socketpair");
  memset (&args, 0, sizeof args);
  args.flags = CLONE_PIDFD | CLONE_CLEAR_SIGHAND;
  args.pidfd = (uint64_t) (uintptr_t) &eng->zygote_pidfd;
  args.exit_signal = SIGCHLD;
  pid = syscall (SYS_clone3, &args, sizeof args);
  if (pid < 0)
    {
      int e = errno;
      close (sv[0]);
      close (sv[1]);
      return sbx_err_sys (err, e, "start the zygote");
    }
  if (pid == 0)
    child_exec_zygote (sv[1], eng->init_memfd, eng->devnull);
  close (sv[1]);
  fcntl (eng->zygote_pidfd, F_SETFD, FD_CLOEXEC);
  eng->zygote = sv[0];
  return 0;
}

static int
send_config (struct sbx_engine *eng, int ctl, const struct sbx_iso_spec *spec, sbx_error_t **err)
{
  struct sbx_msg_config cfg;
  struct sbx_buf packet = SBX_BUF_INIT;
  cleanup_close int dev = -1;
  int rc, fds[2], nfds = 0;

  memset (&cfg, 0, sizeof cfg);
  cfg.hdr.type = SBX_MSG_CONFIG;
  cfg.hdr.len = (uint32_t) (sizeof cfg + spec->plan->bytes.len + eng->seccomp_len);
  cfg.version = SBX_PROTO_VERSION;
  cfg.plan_count = spec->plan->count;
  cfg.plan_bytes = (uint32_t) spec->plan->bytes.len;
  cfg.seccomp_len = (uint32_t) eng->seccomp_len;
  cfg.disk_bytes = spec->disk_bytes;
  /* Small files are the common case; one inode per 4 KiB of disk, bounded,
     keeps an inode bomb inside the same budget. */
  cfg.disk_inodes = spec->disk_bytes / 4096;
  if (cfg.disk_inodes < 1024)
    cfg.disk_inodes = 1024;
  if (cfg.disk_inodes > (1U << 22))
    cfg.disk_inodes = 1U << 22;
  cfg.user_uid = spec->user_uid;
  cfg.user_gid = spec->user_gid;
  cfg.landlock_abi = eng->landlock_abi;
  cfg.root_from_fd = spec->root_mnt >= 0;
  if (spec->snapshot)
    cfg.flags |= SBX_CONFIG_SNAPSHOT_LAYER;
  if (!(sbx_kernel.paths & SBX_KERNEL_OVERLAY_LAYER_FDS))
    cfg.flags |= SBX_CONFIG_OVERLAY_PATHS;
  if (eng->read_only_root)
    cfg.flags |= SBX_CONFIG_READ_ONLY_ROOT;
  snprintf (cfg.hostname, sizeof cfg.hostname, "%s", spec->hostname);
  if (cfg.hdr.len > SBX_PROTO_MAX_MSG)
    return sbx_err (err, SBX_E_INVALID, "sandbox configuration too large");
  /* Its /dev, of its own (iso/devnodes.c), then a stored template's root. */
  dev = sbx_dev_mount (err);
  if (dev < 0)
    return -1;
  fds[nfds++] = dev;
  if (spec->root_mnt >= 0)
    fds[nfds++] = spec->root_mnt;
  sbx_buf_append (&packet, &cfg, sizeof cfg);
  sbx_buf_append (&packet, spec->plan->bytes.data, spec->plan->bytes.len);
  sbx_buf_append (&packet, eng->seccomp_prog, eng->seccomp_len);
  rc = packet.failed ? sbx_err_oom (err)
                     : sbx__iso_send (ctl, packet.data, packet.len, fds, nfds, err);
  sbx_buf_free (&packet);
  return rc;
}

/* sync 2: wait for READY (or the reason setup failed). */
static int
wait_ready (struct sbx_iso_box *box, sbx_error_t **err)
{
  union
  {
    struct sbx_msg_ready ready;
    struct sbx_msg_failure failure;
    char raw[512];
  } m;
  struct pollfd pfd[2] = {{box->ctl, POLLIN, 0}, {box->pidfd, POLLIN, 0}};
  int fds[4], nfds = 0, r;
  ssize_t n;

  r = poll (pfd, 2, SETUP_TIMEOUT_MS);
  if (r < 0)
    return sbx_err_sys (err, errno, "poll sandbox setup");
  if (r == 0)
    return sbx_err (err, SBX_E_SYSTEM, "sandbox setup timed out");
  if (!(pfd[0].revents & (POLLIN | POLLHUP)))
    return sbx_err (err, SBX_E_SYSTEM, "sandbox init exited during setup");
  n = sbx__iso_recv (box->ctl, &m, sizeof m, fds, 4, &nfds, MSG_DONTWAIT);
  if (n < 0)
    return sbx_err_sys (err, errno, "receive from sandbox init");
  if (n == 0)
    return sbx_err (err, SBX_E_SYSTEM, "sandbox init exited during setup");
  if ((size_t) n == sizeof m.failure && m.failure.hdr.type == SBX_MSG_SETUP_FAILED
      && m.failure.hdr.len == sizeof m.failure && nfds == 0)
    {
      m.failure.what[sizeof m.failure.what - 1] = '\0';
      return sbx_err (err, SBX_E_SYSTEM, "sandbox setup failed at %s: %s", m.failure.what,
                      strerror (m.failure.sys_errno));
    }
  if ((size_t) n != sizeof m.ready || m.ready.hdr.type != SBX_MSG_READY
      || m.ready.hdr.len != sizeof m.ready || m.ready.version != SBX_PROTO_VERSION || nfds != 2)
    {
      while (nfds > 0)
        close (fds[--nfds]);
      return sbx_err (err, SBX_E_SYSTEM, "sandbox init sent a malformed READY");
    }
  box->root = fds[0];
  box->disk = fds[1];
  box->landlock_abi = m.ready.landlock_abi;
  return 0;
}

void
sbx_iso_box_init (struct sbx_iso_box *box)
{
  memset (box, 0, sizeof *box);
  box->pidfd = box->ctl = box->root = box->disk = box->qmp = -1;
  for (int c = 0; c < SBX_CG_NCTRL; c++)
    box->cg.dir[c] = -1;
}

/* A sandbox init the zygote made but whose pidfd never reached us: it is
   our child (CLONE_PARENT), so kill and reap it by pid. Only while it is
   an unreaped child of ours can its pid not have been reused. */
static void
reap_lost_child (pid_t pid)
{
  siginfo_t info;

  memset (&info, 0, sizeof info);
  if (waitid (P_PID, (id_t) pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
    return; /* not a child of ours */
  kill (pid, SIGKILL);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
}

/* Ask the zygote for a new sandbox PID 1 holding `child_ctl` as its
   control socket. One exchange at a time; a zygote that broke is replaced
   (a request it never received is retried once). */
static int
zygote_clone (struct sbx_engine *eng, int child_ctl, int cg_fd, int background, pid_t *pid,
              int *pidfd, sbx_error_t **err)
{
  struct sbx_msg_clone m;
  struct sbx_msg_cloned r;
  int fds[2] = {child_ctl, cg_fd}, rfds[4], rn = 0, attempt, rc = -1;
  ssize_t n;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_CLONE;
  m.hdr.len = sizeof m;
  m.flags = (cg_fd >= 0 ? SBX_CLONE_INTO_CGROUP : 0) | (background ? SBX_CLONE_BACKGROUND : 0);
  pthread_mutex_lock (&eng->zygote_lock);
  for (attempt = 0; attempt < 2 && rc < 0; attempt++)
    {
      struct pollfd pfd;
      if (eng->zygote < 0 && start_zygote (eng, err) < 0)
        break;
      if (sbx__iso_send (eng->zygote, &m, sizeof m, fds, cg_fd >= 0 ? 2 : 1, err) < 0)
        {
          stop_zygote (eng);
          continue;
        }
      pfd.fd = eng->zygote;
      pfd.events = POLLIN;
      if (poll (&pfd, 1, SETUP_TIMEOUT_MS) <= 0)
        {
          stop_zygote (eng);
          sbx_err (err, SBX_E_SYSTEM, "the zygote did not answer");
          break;
        }
      memset (&r, 0, sizeof r);
      n = sbx__iso_recv (eng->zygote, &r, sizeof r, rfds, 4, &rn, MSG_DONTWAIT);
      if (n < 0 && errno == EMFILE)
        {
          /* Our fd table is full; the zygote is fine and keeps running. */
          if (r.hdr.type == SBX_MSG_CLONED && r.pid > 0)
            reap_lost_child (r.pid);
          sbx_err_sys (err, EMFILE, "receive the new sandbox from the zygote");
          break;
        }
      if (n != (ssize_t) sizeof r || r.hdr.type != SBX_MSG_CLONED || r.hdr.len != sizeof r
          || (r.pid > 0) != (rn == 1))
        {
          while (n > 0 && rn > 0)
            close (rfds[--rn]);
          stop_zygote (eng);
          sbx_err (err, SBX_E_SYSTEM, "the zygote broke the protocol");
          break;
        }
      if (r.pid <= 0)
        {
          sbx_err_sys (err, r.sys_errno, "clone a sandbox");
          break;
        }
      *pid = r.pid;
      *pidfd = rfds[0];
      rc = 0;
    }
  pthread_mutex_unlock (&eng->zygote_lock);
  return rc;
}

int
sbx_iso_create (struct sbx_engine *eng, const struct sbx_iso_spec *spec, struct sbx_iso_box *box,
                sbx_error_t **err)
{
  cleanup_close int child_end = -1;
  int sv[2], sndbuf = CTL_SNDBUF;
  char go = SBX_MSG_GO;

  if (spec->isolation == SBX_ISOLATION_VM)
    return sbx_vm_create (eng, spec, box, err);
  sbx_iso_box_init (box);
  box->uid_base = spec->uid_base;
  retry_stale (eng);
  if (sbx_cgroup_create (&eng->cgroups, spec->name, &spec->limits, &box->cg, err) < 0)
    {
      if (box->cg.name[0] != '\0')
        add_stale (eng, box->cg.name);
      return -1;
    }
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    {
      sbx_err_sys (err, errno, "socketpair");
      goto fail;
    }
  box->ctl = sv[0];
  child_end = sv[1];
  /* A spawn request can be large (argv and env up to ~1 MiB). */
  if (setsockopt (box->ctl, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
    setsockopt (box->ctl, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);

  if (zygote_clone (eng, child_end, sbx_cgroup_clone_fd (&eng->cgroups, &box->cg),
                    spec->background, &box->pid, &box->pidfd, err)
      < 0)
    goto fail;
  close_and_reset (&child_end);

  if (write_id_maps (box->pid, spec->uid_base, err) < 0)
    goto fail;
  if (spec->snapshot
      && sbx_snapstore_stage (spec->snapshot_store, spec->snapshot_tenant, spec->snapshot,
                              box->pidfd, spec->uid_base, err)
             < 0)
    goto fail;
  if (sbx_cgroup_clone_fd (&eng->cgroups, &box->cg) < 0
      && sbx_cgroup_attach (&eng->cgroups, &box->cg, box->pid, err) < 0)
    goto fail;
  if (send (box->ctl, &go, 1, MSG_NOSIGNAL) != 1)
    {
      sbx_err_sys (err, errno, "release sandbox child");
      goto fail;
    }
  if (send_config (eng, box->ctl, spec, err) < 0)
    goto fail;
  if (wait_ready (box, err) < 0)
    goto fail;
  if (fcntl (box->ctl, F_SETFL, O_NONBLOCK) < 0)
    {
      sbx_err_sys (err, errno, "fcntl");
      goto fail;
    }
  return 0;
fail:
  sbx_iso_destroy (eng, box, NULL);
  return -1;
}

/* ---- destroy ----------------------------------------------------------- */

int
sbx_iso_freeze (struct sbx_engine *eng, struct sbx_iso_box *box, int frozen, sbx_error_t **err)
{
  if (box->cg.name[0] == '\0')
    return sbx_err (err, SBX_E_CONFLICT, "the sandbox has no cgroup");
  return sbx_cgroup_freeze (&eng->cgroups, &box->cg, frozen, err);
}

int
sbx_iso_destroy (struct sbx_engine *eng, struct sbx_iso_box *box, sbx_error_t **err)
{
  int rc = 0;

  if (box->pidfd >= 0)
    {
      siginfo_t info;
      int waited;
      /* PID 1 of a pid namespace dying takes every process in it along;
         the kernel does not let init's exit complete before they are gone. */
      syscall (SYS_pidfd_send_signal, box->pidfd, SIGKILL, NULL, 0);
      /* A paused sandbox: on v1 a frozen task keeps SIGKILL pending until
         it is thawed, and init's exit would never complete. */
      if (box->cg.name[0] != '\0' && sbx_cgroup_is_frozen (&eng->cgroups, &box->cg))
        sbx_cgroup_freeze (&eng->cgroups, &box->cg, 0, NULL);
      do
        waited = waitid ((idtype_t) P_PIDFD, (id_t) box->pidfd, &info, WEXITED);
      while (waited < 0 && errno == EINTR);
      /* An init we re-adopted is not our child (ECHILD): its pidfd turns
         readable when it has exited. */
      if (waited < 0 && errno == ECHILD)
        {
          struct pollfd pfd = {box->pidfd, POLLIN, 0};
          while (poll (&pfd, 1, SETUP_TIMEOUT_MS) < 0 && errno == EINTR)
            ;
        }
      close_and_reset (&box->pidfd);
    }
  close_and_reset (&box->ctl);
  close_and_reset (&box->root);
  close_and_reset (&box->disk);
  close_and_reset (&box->qmp);
  if (box->cg.name[0] != '\0')
    {
      /* Belt and braces: anything still in the cgroup is killed too. */
      if (sbx_cgroup_kill (&eng->cgroups, &box->cg, err) < 0)
        {
          rc = -1;
          err = NULL;
        }
      if (sbx_cgroup_destroy (&eng->cgroups, &box->cg, err) < 0)
        {
          rc = -1;
          add_stale (eng, box->cg.name);
        }
      box->cg.name[0] = '\0';
      retry_stale (eng);
    }
  return rc;
}

int
sbx_iso_init_status (const struct sbx_iso_box *box, int wait_ms, int *wstatus)
{
  struct pollfd pfd = {box->pidfd, POLLIN, 0};
  siginfo_t info;

  /* Its control socket closes before its exit completes (PID 1 waits for
     the rest of its pid namespace): give the exit a moment to land. */
  if (box->pidfd < 0 || poll (&pfd, 1, wait_ms) <= 0)
    return 0;
  memset (&info, 0, sizeof info);
  if (waitid ((idtype_t) P_PIDFD, (id_t) box->pidfd, &info, WEXITED | WNOHANG | WNOWAIT) < 0
      || info.si_pid == 0)
    return 0;
  if (info.si_code == CLD_EXITED)
    *wstatus = W_EXITCODE (info.si_status, 0);
  else
    *wstatus = info.si_status & 0x7f; /* killed or dumped: the signal, as waitpid reports it */
  return 1;
}

/* ---- limits, stats ----------------------------------------------------- */

int
sbx_iso_set_limits (struct sbx_engine *eng, struct sbx_iso_box *box,
                    const struct sbx_cgroup_limits *limits, sbx_error_t **err)
{
  return sbx_cgroup_set_limits (&eng->cgroups, &box->cg, limits, err);
}

int
sbx_iso_set_disk (struct sbx_iso_box *box, uint64_t bytes, sbx_error_t **err)
{
  cleanup_close int fs = -1;
  char v[32], inodes[32];
  uint64_t n = bytes / 4096;

  if (n < 1024)
    n = 1024;
  if (n > (1U << 22))
    n = 1U << 22;
  snprintf (v, sizeof v, "%llu", (unsigned long long) bytes);
  snprintf (inodes, sizeof inodes, "%llu", (unsigned long long) n);
  fs = fspick (box->disk, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);
  if (fs < 0)
    return sbx_err_sys (err, errno, "fspick sandbox disk");
  if (fsconfig (fs, FSCONFIG_SET_STRING, "size", v, 0) < 0
      || fsconfig (fs, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0
      || fsconfig (fs, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) < 0)
    {
      if (errno == EINVAL)
        return sbx_err (err, SBX_E_CONFLICT, "the sandbox already uses more disk than %s", v);
      return sbx_err_sys (err, errno, "resize sandbox disk");
    }
  return 0;
}

int
sbx_iso_set_foreground (struct sbx_engine *eng, struct sbx_iso_box *box, sbx_error_t **err)
{
  /* init's own priority: the commands it starts from now on inherit it. */
  if (setpriority (PRIO_PROCESS, (id_t) box->pid, 0) < 0)
    return sbx_err_sys (err, errno, "set the priority of sandbox init");
  /* And what runs already: a template's server started in the pool (the
     code interpreter's, core/code.c). Nothing else runs in a pooled one. */
  sbx_cgroup_renice (&eng->cgroups, &box->cg, 0);
  return 0;
}

int
sbx_iso_stats (struct sbx_engine *eng, const struct sbx_iso_box *box, struct sbx_iso_stats *out,
               sbx_error_t **err)
{
  struct statfs sfs;

  memset (out, 0, sizeof *out);
  if (sbx_cgroup_stats (&eng->cgroups, &box->cg, &out->cg, err) < 0)
    return -1;
  if (fstatfs (box->disk, &sfs) == 0)
    {
      out->disk_total_bytes = (uint64_t) sfs.f_blocks * (uint64_t) sfs.f_bsize;
      out->disk_used_bytes = (uint64_t) (sfs.f_blocks - sfs.f_bfree) * (uint64_t) sfs.f_bsize;
    }
  return 0;
}

/* ---- commands ---------------------------------------------------------- */

int
sbx_iso_spawn (struct sbx_iso_box *box, const struct sbx_iso_spawn *req, sbx_error_t **err)
{
  struct sbx_msg_spawn m;
  struct sbx_buf packet = SBX_BUF_INIT;
  uint32_t argc = 0, envc = 0;
  size_t strings = strlen (req->cwd) + 1;
  int rc, fds[6], nfds = 3;

  for (; req->argv[argc]; argc++)
    strings += strlen (req->argv[argc]) + 1;
  for (; req->envp[envc]; envc++)
    strings += strlen (req->envp[envc]) + 1;
  if (argc == 0 || argc > SBX_SPAWN_MAX_ARGS || envc > SBX_SPAWN_MAX_ENV
      || strings > SBX_SPAWN_MAX_STRINGS)
    return sbx_err (err, SBX_E_TOO_LARGE,
                    "command too large (at most %d arguments, %d variables, %d KiB in all)",
                    SBX_SPAWN_MAX_ARGS, SBX_SPAWN_MAX_ENV, SBX_SPAWN_MAX_STRINGS / 1024);
  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_SPAWN;
  m.hdr.len = (uint32_t) (sizeof m + strings);
  m.req_id = req->req_id;
  m.uid = req->uid;
  m.gid = req->gid;
  m.argc = argc;
  m.envc = envc;
  m.strings_len = (uint32_t) strings;
  m.rlimit_nofile = req->rlimit_nofile;
  m.rlimit_fsize = req->rlimit_fsize;
  if (req->tag_len > SBX_TAG_MAX)
    return sbx_err (err, SBX_E_INVALID, "command tag too large");
  m.tag_len = (uint32_t) req->tag_len;
  m.hdr.len += m.tag_len;
  if (req->pty)
    {
      /* init makes the terminal: no descriptors go with the request. */
      if (req->pty_cols == 0 || req->pty_cols > SBX_PTY_MAX || req->pty_rows == 0
          || req->pty_rows > SBX_PTY_MAX)
        return sbx_err (err, SBX_E_INVALID, "terminal size must be 1..%d columns and rows",
                        SBX_PTY_MAX);
      m.flags = SBX_SPAWN_PTY;
      m.pty_cols = req->pty_cols;
      m.pty_rows = req->pty_rows;
      nfds = 0;
    }
  else
    {
      fds[0] = req->stdio[0];
      fds[1] = req->stdio[1];
      fds[2] = req->stdio[2];
      for (int i = 0; i < 3; i++)
        if (req->keep[i] >= 0)
          {
            m.keep_mask |= 1u << i;
            fds[nfds++] = req->keep[i];
          }
    }
  if (req->file_op)
    m.flags |= SBX_SPAWN_FILE_OP;
  sbx_buf_append (&packet, &m, sizeof m);
  sbx_buf_append (&packet, req->cwd, strlen (req->cwd) + 1);
  for (uint32_t i = 0; i < argc; i++)
    sbx_buf_append (&packet, req->argv[i], strlen (req->argv[i]) + 1);
  for (uint32_t i = 0; i < envc; i++)
    sbx_buf_append (&packet, req->envp[i], strlen (req->envp[i]) + 1);
  if (req->tag_len)
    sbx_buf_append (&packet, req->tag, req->tag_len);
  rc = packet.failed ? sbx_err_oom (err)
                     : sbx__iso_send (box->ctl, packet.data, packet.len, fds, nfds, err);
  sbx_buf_free (&packet);
  return rc;
}

int
sbx_iso_signal (struct sbx_iso_box *box, uint64_t req_id, int signo, uint32_t flags,
                sbx_error_t **err)
{
  struct sbx_msg_signal m;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_SIGNAL;
  m.hdr.len = sizeof m;
  m.req_id = req_id;
  m.signo = (uint32_t) signo;
  m.flags = flags & SBX_SIGNAL_FLAGS;
  return sbx__iso_send (box->ctl, &m, sizeof m, NULL, 0, err);
}

int
sbx_iso_resize (struct sbx_iso_box *box, uint64_t req_id, unsigned cols, unsigned rows,
                sbx_error_t **err)
{
  struct sbx_msg_resize m;

  if (cols == 0 || cols > SBX_PTY_MAX || rows == 0 || rows > SBX_PTY_MAX)
    return sbx_err (err, SBX_E_INVALID, "terminal size must be 1..%d columns and rows",
                    SBX_PTY_MAX);
  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_RESIZE;
  m.hdr.len = sizeof m;
  m.req_id = req_id;
  m.cols = (uint16_t) cols;
  m.rows = (uint16_t) rows;
  return sbx__iso_send (box->ctl, &m, sizeof m, NULL, 0, err);
}

int
sbx_iso_pump (struct sbx_iso_box *box, uint64_t req_id, uint32_t uid, uint32_t gid, int in_fd,
              int out_fd, sbx_error_t **err)
{
  struct sbx_msg_pump m;
  int fds[2] = {in_fd, out_fd};

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_PUMP;
  m.hdr.len = sizeof m;
  m.req_id = req_id;
  m.uid = uid;
  m.gid = gid;
  return sbx__iso_send (box->ctl, &m, sizeof m, fds, 2, err);
}

int
sbx_iso_connect (struct sbx_iso_box *box, uint64_t req_id, uint32_t port, sbx_error_t **err)
{
  struct sbx_msg_connect m;

  if (port == 0 || port > 65535)
    return sbx_err (err, SBX_E_INVALID, "port %u is not 1 to 65535", (unsigned) port);
  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_CONNECT;
  m.hdr.len = sizeof m;
  m.req_id = req_id;
  m.port = port;
  return sbx__iso_send (box->ctl, &m, sizeof m, NULL, 0, err);
}

/* What init hands back for a CONNECT must be what it says: a TCP stream
   socket. Anything else (a pipe, a unix socket, a listening socket) is a
   broken or hostile init. */
static int
is_connected_tcp (int fd)
{
  int v = 0;
  socklen_t len = sizeof v;

  if (getsockopt (fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0 || v != SOCK_STREAM)
    return 0;
  len = sizeof v;
  if (getsockopt (fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || (v != AF_INET && v != AF_INET6))
    return 0;
  len = sizeof v;
  if (getsockopt (fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) < 0 || v != IPPROTO_TCP)
    return 0;
  len = sizeof v;
  if (getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || v != 0)
    return 0;
  return 1;
}

/* One end of a connected unix stream socketpair: a VM relay's egress or
   port stream, or a VM terminal's bytes (iso/vm_relay_pty.c). Its readers
   use plain read/recv, which drop any SCM_RIGHTS the peer sends. */
static int
is_unix_stream (int fd)
{
  int v = 0;
  socklen_t len = sizeof v;

  if (getsockopt (fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0 || v != SOCK_STREAM)
    return 0;
  len = sizeof v;
  if (getsockopt (fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_UNIX)
    return 0;
  len = sizeof v;
  if (getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || v != 0)
    return 0;
  return 1;
}

/* An egress connection: a connected TCP socket (a namespace init's
   accept), or one end of a unix stream socketpair (a VM relay's stream,
   iso/vm_relay_net.c). The egress process only reads, writes and shuts
   it down, and a peer's SCM_RIGHTS are dropped by its plain recv: a unix
   stream from the sandbox gives it no more than a TCP one would. */
static int
is_egress_stream (int fd)
{
  return is_connected_tcp (fd) || is_unix_stream (fd);
}

int
sbx_iso_next_event (struct sbx_iso_box *box, int vm, struct sbx_iso_event *ev, sbx_error_t **err)
{
  union
  {
    struct sbx_msg_hdr hdr;
    struct sbx_msg_spawned spawned;
    struct sbx_msg_spawn_failed failed;
    struct sbx_msg_exited exited;
    struct sbx_msg_connect_result connect;
    struct sbx_msg_resized resized;
    struct sbx_msg_egress egress;
    char raw[256];
  } m;
  int fds[4], nfds = 0;
  ssize_t n;

  memset (&m, 0, sizeof m);
  n = sbx__iso_recv (box->ctl, &m, sizeof m, fds, 4, &nfds, MSG_DONTWAIT);
  if (n < 0)
    {
      if (errno == EAGAIN)
        return 0;
      /* Our descriptor table is full, so the master a SPAWNED brought was
         dropped (the message itself is intact): the command it names is
         cut off from us, which the caller deals with; the sandbox and its
         other commands are fine. */
      if (errno == EMFILE && m.hdr.type == SBX_MSG_SPAWNED && m.hdr.len == sizeof m.spawned
          && m.spawned.flags == SBX_SPAWNED_PTY && m.spawned.pid > 0)
        {
          memset (ev, 0, sizeof *ev);
          ev->type = SBX_ISO_SPAWNED;
          ev->req_id = m.spawned.req_id;
          ev->pid = m.spawned.pid;
          ev->pty = 1;
          ev->fd = -1;
          return 1;
        }
      /* Likewise a CONNECTED's socket: the connect failed, not the
         sandbox. */
      if (errno == EMFILE && m.hdr.type == SBX_MSG_CONNECTED && m.hdr.len == sizeof m.connect)
        {
          memset (ev, 0, sizeof *ev);
          ev->type = SBX_ISO_CONNECT_FAILED;
          ev->req_id = m.connect.req_id;
          ev->sys_errno = EMFILE;
          ev->fd = -1;
          return 1;
        }
      /* And an egress connection's: that connection is lost. */
      if (errno == EMFILE && m.hdr.type == SBX_MSG_EGRESS && m.hdr.len == sizeof m.egress)
        {
          memset (ev, 0, sizeof *ev);
          ev->type = SBX_ISO_EGRESS;
          ev->fd = -1;
          return 1;
        }
      return sbx_err_sys (err, errno, "receive from sandbox init");
    }
  if (n == 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "sandbox init went away");
  /* Init runs inside the sandbox: treat what it says as hostile. Exact
     sizes, descriptors only where the message says so, known types;
     anything else ends the sandbox. */
  if ((size_t) n < sizeof m.hdr || m.hdr.len != (size_t) n)
    goto bad;
  if (nfds != 0 && m.hdr.type != SBX_MSG_SPAWNED && m.hdr.type != SBX_MSG_CONNECTED
      && m.hdr.type != SBX_MSG_EGRESS)
    goto bad;
  memset (ev, 0, sizeof *ev);
  ev->fd = -1;
  switch (m.hdr.type)
    {
    case SBX_MSG_CONNECTED:
      /* A VM relay's is one end of a unix stream socketpair, whose other
         end carries the guest's connection as frames (iso/vm_relay_net.c);
         the proxy only reads, writes and shuts it down, as a TCP one. */
      if ((size_t) n != sizeof m.connect || m.connect.sys_errno != 0 || nfds != 1
          || !(vm ? is_egress_stream (fds[0]) : is_connected_tcp (fds[0])))
        goto bad;
      ev->type = SBX_ISO_CONNECTED;
      ev->req_id = m.connect.req_id;
      ev->fd = fds[0];
      return 1;
    case SBX_MSG_EGRESS:
      if ((size_t) n != sizeof m.egress || m.egress.reserved[0] != 0
          || m.egress.reserved[1] != 0 || nfds != 1 || !is_egress_stream (fds[0]))
        goto bad;
      ev->type = SBX_ISO_EGRESS;
      ev->fd = fds[0];
      return 1;
    case SBX_MSG_CONNECT_FAILED:
      if ((size_t) n != sizeof m.connect || m.connect.sys_errno <= 0)
        goto bad;
      ev->type = SBX_ISO_CONNECT_FAILED;
      ev->req_id = m.connect.req_id;
      ev->sys_errno = m.connect.sys_errno;
      return 1;
    case SBX_MSG_SPAWNED:
      if ((size_t) n != sizeof m.spawned || m.spawned.pid <= 0
          || (m.spawned.flags & ~(uint32_t) SBX_SPAWNED_PTY) != 0
          || nfds != (m.spawned.flags & SBX_SPAWNED_PTY ? 1 : 0)
          /* A VM's terminal is the guest's: its relay passes a socket
             carrying the master's bytes (iso/vm_relay_pty.c). */
          || (nfds == 1 && !(vm ? is_unix_stream (fds[0]) : sbx__iso_is_pty_master (fds[0]))))
        goto bad;
      ev->type = SBX_ISO_SPAWNED;
      ev->req_id = m.spawned.req_id;
      ev->pid = m.spawned.pid;
      ev->pty = nfds == 1;
      ev->fd = nfds == 1 ? fds[0] : -1;
      return 1;
    case SBX_MSG_SPAWN_FAILED:
      if ((size_t) n != sizeof m.failed)
        goto bad;
      ev->type = SBX_ISO_SPAWN_FAILED;
      ev->req_id = m.failed.req_id;
      ev->sys_errno = m.failed.sys_errno;
      ev->stage = m.failed.stage;
      return 1;
    case SBX_MSG_EXITED:
      if ((size_t) n != sizeof m.exited || m.exited.pid <= 0)
        goto bad;
      ev->type = SBX_ISO_EXITED;
      ev->req_id = m.exited.req_id;
      ev->pid = m.exited.pid;
      ev->wait_status = m.exited.wait_status;
      return 1;
    case SBX_MSG_RESIZED:
      if ((size_t) n != sizeof m.resized)
        goto bad;
      ev->type = SBX_ISO_RESIZED;
      ev->req_id = m.resized.req_id;
      ev->sys_errno = m.resized.sys_errno;
      return 1;
    default:
      goto bad;
    }
bad:
  while (nfds > 0)
    close (fds[--nfds]);
  return sbx_err (err, SBX_E_SYSTEM, "sandbox init broke the protocol");
}

/* ---- fork: copy a frozen sandbox's disk into a new one (iso/copy.c) ---- */

/* What the sandbox sees at /home/user, /tmp, /dev/shm (part 0, 1, 2):
   its disk, or its disk layered on a snapshot. Resolved from its root,
   never through a link, and only where a mount's root is found: root
   inside may rewrite a writable skeleton (rename /home away, make a
   /home/user of its own), and a part must not be a directory it made.
   The skeleton's mount points keep their names (a mount point cannot be
   renamed), and none of the host's binds is named like a part. */
int
sbx_iso_open_part (const struct sbx_iso_box *box, int part)
{
  static const char *const paths[] = {"home/user", "tmp", "dev/shm"};
  struct open_how how;
  struct statx stx;
  int fd;

  if (part < 0 || part > 2 || box->root < 0)
    {
      errno = EINVAL;
      return -1;
    }
  memset (&how, 0, sizeof how);
  how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  fd = (int) syscall (SYS_openat2, box->root, paths[part], &how, sizeof how);
  if (fd < 0)
    return -1;
  if (statx (fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) < 0
      || !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
      || !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
    {
      close (fd);
      errno = EXDEV;
      return -1;
    }
  return fd;
}

struct join_arg
{
  struct sbx_engine *eng;
  const struct sbx_iso_box *box;
};

static int
join_cgroup (void *arg, pid_t pid)
{
  const struct join_arg *j = arg;
  return sbx_cgroup_attach (&j->eng->cgroups, &j->box->cg, pid, NULL);
}

/* What a disk holds (bytes used) and its size: the bounds of copies of it
   and into it. */
static void
disk_usage (int disk, uint64_t *used, uint64_t *size)
{
  struct statfs sfs;

  *used = *size = 0;
  if (fstatfs (disk, &sfs) == 0)
    {
      *used = (uint64_t) (sfs.f_blocks - sfs.f_bfree) * (uint64_t) sfs.f_bsize;
      *size = (uint64_t) sfs.f_blocks * (uint64_t) sfs.f_bsize;
    }
}

/* A copy's bounds: the data the source's disk holds (an honest copy,
   holes kept, stays below it; directories and slack 1 MiB), each file at
   most the target's disk. */
static void
copy_limits (int src_disk, int dst_disk, struct sbx_copy_limits *lim)
{
  uint64_t used, size, dst_used, dst_size;

  disk_usage (src_disk, &used, &size);
  lim->max_bytes = used ? used + (1 << 20) : 0;
  lim->max_file = size;
  if (dst_disk >= 0)
    {
      disk_usage (dst_disk, &dst_used, &dst_size);
      lim->max_file = dst_size;
    }
}

int
sbx_iso_copy_disk (struct sbx_engine *eng, const struct sbx_iso_box *src,
                   const struct sbx_iso_box *dst, struct sbx_copy_result *res, sbx_error_t **err)
{
  static const char *const parts[] = {"home", "tmp", "shm"};
  struct sbx_copy_job jobs[3];
  struct join_arg join = {eng, dst};
  int fds[6], i, rc;

  memset (res, 0, sizeof *res);
  if (src->disk < 0 || dst->disk < 0 || src->cg.name[0] == '\0' || dst->cg.name[0] == '\0')
    return sbx_err (err, SBX_E_CONFLICT, "the sandbox has no disk");
  /* Frozen: nothing in it changes the tree while we read it. */
  if (!sbx_cgroup_is_frozen (&eng->cgroups, &src->cg))
    return sbx_err (err, SBX_E_CONFLICT, "the source sandbox must be frozen for a copy");
  for (i = 0; i < 6; i++)
    fds[i] = -1;
  rc = 0;
  for (i = 0; i < 3 && rc == 0; i++)
    {
      fds[2 * i] = sbx_iso_open_part (src, i);
      fds[2 * i + 1]
          = openat (dst->disk, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fds[2 * i] < 0 || fds[2 * i + 1] < 0)
        rc = sbx_err_sys (err, errno, "open the disk's `%s`", parts[i]);
      jobs[i].src = fds[2 * i];
      jobs[i].dst = fds[2 * i + 1];
    }
  if (rc == 0)
    {
      struct sbx_copy_limits lim;
      copy_limits (src->disk, dst->disk, &lim);
      rc = sbx_copy_run (jobs, 3, src->uid_base, dst->uid_base, &lim, join_cgroup, &join, res,
                         err);
    }
  for (i = 0; i < 6; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  return rc;
}

int
sbx_iso_snapshot_save (struct sbx_engine *eng, int store, const struct sbx_iso_box *src,
                       const char *tenant, const char *name, uint64_t max_bytes,
                       struct sbx_copy_result *res, sbx_error_t **err)
{
  static const struct sbx_cgroup_limits copier = {SBX_COPIER_MEMORY, 1000, 16};
  struct sbx_cgroup cg;
  struct sbx_copy_limits lim;
  struct join_arg join;
  struct sbx_iso_box box;
  char cgname[64];
  int rc;

  memset (res, 0, sizeof *res);
  if (src->disk < 0 || src->cg.name[0] == '\0')
    return sbx_err (err, SBX_E_CONFLICT, "the sandbox has no disk");
  if (!sbx_cgroup_is_frozen (&eng->cgroups, &src->cg))
    return sbx_err (err, SBX_E_CONFLICT, "the source sandbox must be frozen for a copy");
  /* The copier writes the host's state disk: its page cache is charged to
     a cgroup of its own (memory bounded: writeback throttles it), never
     to the daemon's, and it writes at most what the source's disk holds. */
  snprintf (cgname, sizeof cgname, "copier-%.40s", src->cg.name);
  if (sbx_cgroup_create (&eng->cgroups, cgname, &copier, &cg, err) < 0)
    {
      if (cg.name[0])
        add_stale (eng, cg.name);
      return sbx_err_wrap (err, "the copier's cgroup");
    }
  sbx_iso_box_init (&box);
  box.cg = cg;
  join.eng = eng;
  join.box = &box;
  copy_limits (src->disk, -1, &lim);
  if (max_bytes && (lim.max_bytes == 0 || max_bytes < lim.max_bytes))
    lim.max_bytes = max_bytes;
  rc = sbx_snapstore_save (store, src, tenant, name, &lim, join_cgroup, &join, res, err);
  if (sbx_cgroup_destroy (&eng->cgroups, &cg, NULL) < 0)
    add_stale (eng, cgname);
  return rc;
}

int
sbx_iso_snapshot_load (struct sbx_engine *eng, int store, const struct sbx_iso_box *dst,
                       const char *tenant, const char *name, struct sbx_copy_result *res,
                       sbx_error_t **err)
{
  struct join_arg join = {eng, dst};

  memset (res, 0, sizeof *res);
  if (dst->disk < 0 || dst->cg.name[0] == '\0')
    return sbx_err (err, SBX_E_CONFLICT, "the sandbox has no disk");
  struct sbx_copy_limits lim;
  copy_limits (dst->disk, dst->disk, &lim);
  lim.max_bytes = 0; /* the target's disk bounds it (the copy fallback grew it to fit) */
  return sbx_snapstore_load (store, tenant, name, dst->disk, dst->uid_base, &lim, join_cgroup,
                             &join, res, err);
}
