/* Privilege separation: the front end's drop (priv/drop.c) and the
 * privileged parent's protocol (priv/server.c), both for real: the drop
 * is applied in a forked child that then tries what a compromised front
 * end would; the parent serves a real engine (zygote, cgroups) to a
 * client that sends it malformed and hostile requests. Needs root. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/capability.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "iso/engine.h"
#include "iso/kernel.h"
#include "iso/wire.h"
#include "priv/drop.h"
#include "priv/proto.h"
#include "priv/server.h"
#include "tap.h"

static void
account (uid_t *uid, gid_t *gid)
{
  struct passwd *pw = getpwnam ("sbx");

  *uid = pw ? pw->pw_uid : 65534;
  *gid = pw ? pw->pw_gid : 65534;
}

static void *
nothing (void *arg)
{
  return arg;
}

/* In a child that drops for good: what a compromised front end tries. */
static int
drop_checks (const char *dir)
{
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct caps[2];
  static char true_name[] = "true";
  char *const true_argv[] = {true_name, NULL};
  char path[64];
  const char *cg_write = access ("/sys/fs/cgroup/memory/cgroup.procs", F_OK) == 0
                             ? "/sys/fs/cgroup/memory/cgroup.procs"
                             : "/sys/fs/cgroup/cgroup.procs";
  sbx_error_t *err = NULL;
  uid_t uid, r, e, s;
  gid_t gid;
  pthread_t t;
  int fd;

  account (&uid, &gid);
  CHECK (sbx_priv_drop (uid, gid, dir, &err) == 0);

  /* Who we are now: nobody special, for good. */
  CHECK (getresuid (&r, &e, &s) == 0 && r == uid && e == uid && s == uid);
  CHECK (syscall (SYS_capget, &hdr, caps) == 0);
  CHECK (caps[0].effective == 0 && caps[0].permitted == 0 && caps[0].inheritable == 0);
  CHECK (caps[1].effective == 0 && caps[1].permitted == 0);
  CHECK (prctl (PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) == 0);
  CHECK (prctl (PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
  CHECK (prctl (PR_GET_SECCOMP, 0, 0, 0, 0) == 2);
  CHECK (setuid (0) == -1 && errno == EPERM);

  /* The cgroup tree: neither written nor even read (Landlock). */
  CHECK (open (cg_write, O_WRONLY | O_CLOEXEC) == -1 && errno == EACCES);
  CHECK (open ("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY | O_CLOEXEC) == -1 && errno == EACCES);
  /* (mkdir is refused outright: the front end never makes directories.) */
  CHECK (mkdir ("/sys/fs/cgroup/sbx-escape", 0755) == -1 && errno == EPERM);
  CHECK (open ("/etc/passwd", O_RDONLY | O_CLOEXEC) == -1 && errno == EACCES);
  CHECK (open ("/proc/1/environ", O_RDONLY | O_CLOEXEC) == -1);

  /* No namespaces, mounts, new processes, ptrace, raw or IP sockets, bpf. */
  CHECK (unshare (CLONE_NEWUSER) == -1 && errno == EPERM);
  CHECK (unshare (CLONE_NEWNS) == -1 && errno == EPERM);
  CHECK (unshare (CLONE_NEWNET) == -1 && errno == EPERM);
  CHECK (mount ("none", "/mnt", "tmpfs", 0, NULL) == -1 && errno == EPERM);
  CHECK (socket (AF_INET, SOCK_STREAM, 0) == -1 && errno == EPERM);
  CHECK (socket (AF_NETLINK, SOCK_RAW, 0) == -1 && errno == EPERM);
  CHECK (socket (AF_PACKET, SOCK_RAW, 0) == -1 && errno == EPERM);
  CHECK (syscall (SYS_bpf, 0, NULL, 0) == -1 && errno == EPERM);
  CHECK (kill (1, 0) == -1 && errno == EPERM);
  CHECK (syscall (SYS_pidfd_open, 1, 0) == -1 && errno == EPERM);
  CHECK (execve ("/bin/true", true_argv, NULL) == -1 && errno == EPERM);
#ifndef __SANITIZE_ADDRESS__
  /* (Sanitizer builds let LeakSanitizer fork and ptrace.) */
  CHECK (fork () == -1 && errno == EPERM);
  CHECK (ptrace (PTRACE_TRACEME, 0, NULL, NULL) == -1 && errno == EPERM);
#endif

  /* What it is for still works: threads, unix sockets, its state dir. */
  CHECK (pthread_create (&t, NULL, nothing, NULL) == 0 && pthread_join (t, NULL) == 0);
  fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  CHECK (fd >= 0);
  close (fd);
  snprintf (path, sizeof path, "%s/db", dir);
  fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  CHECK (fd >= 0 && write (fd, "x", 1) == 1);
  close (fd);
  CHECK (unlink (path) == 0);
  return 0;
}

static int
test_drop (void)
{
  char dir[] = "/tmp/sbx-unit-drop-XXXXXX";
  uid_t uid;
  gid_t gid;
  int status = -1;
  pid_t pid;

  if (geteuid () != 0)
    return 77;
  account (&uid, &gid);
  CHECK (mkdtemp (dir) != NULL);
  CHECK (chown (dir, uid, gid) == 0);
  pid = fork ();
  if (pid == 0)
    _exit (drop_checks (dir) == 0 ? 0 : 1);
  CHECK (pid > 0 && waitpid (pid, &status, 0) == pid);
  /* The child cannot remove its own Landlock root; we can. */
  CHECK (rmdir (dir) == 0);
  CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  return 0;
}

static int
test_drop_refuses_root (void)
{
  sbx_error_t *err = NULL;

  CHECK (sbx_priv_drop (0, 0, "/tmp", &err) == -1);
  CHECK (err && err->kind == SBX_E_INVALID);
  sbx_error_free (err);
  return 0;
}

/* ---- the parent's protocol --------------------------------------------- */

static struct sbx_config cfg;
static struct sbx_engine eng;
static int master[2];

static void *
serve (void *arg)
{
  (void) arg;
  return (void *) (intptr_t) sbx_priv_serve_master (master[0]);
}

static int
open_channel (void)
{
  struct sbx_priv_hdr m = {SBX_PRIV_CHANNEL, sizeof m};
  int sv[2];

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return -1;
  struct sbx_priv_reply r;
  int fds[SBX_PRIV_MAX_FDS], nfds = 0;

  if (sbx__sendmsg (master[1], &m, sizeof m, &sv[1], 1, 0) < 0)
    return -1;
  close (sv[1]);
  /* The parent answers that it took it. */
  if (sbx__iso_recv (master[1], &r, sizeof r, fds, SBX_PRIV_MAX_FDS, &nfds, 0) != sizeof r
      || nfds != 0 || r.hdr.op != SBX_PRIV_REPLY || r.status != 0)
    return -1;
  return sv[0];
}

/* Receive on a channel with a timeout: the length, 0 on EOF, -1 if none. */
static ssize_t
recv_reply (int fd, void *buf, size_t cap, int *fds, int *nfds)
{
  struct timeval tv = {10, 0};

  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  *nfds = 0;
  return sbx__iso_recv (fd, buf, cap, fds, SBX_PRIV_MAX_FDS, nfds, 0);
}

/* Send a raw packet on a fresh channel: 1 if the parent closed it. */
static int
closes_channel (const void *p, size_t len, int with_fd)
{
  char buf[2048];
  int fd = open_channel (), fds[SBX_PRIV_MAX_FDS], nfds, dn = open ("/dev/null", O_RDONLY);
  ssize_t n;

  if (fd < 0 || sbx__sendmsg (fd, p, len, with_fd ? &dn : NULL, with_fd ? 1 : 0, 0) < 0)
    return 0;
  close (dn);
  n = recv_reply (fd, buf, sizeof buf, fds, &nfds);
  close (fd);
  return n == 0;
}

/* Send a request; the reply's status (0 or -1) and kind, -2 on EOF. */
static int
request (int fd, const void *p, size_t len, uint32_t *kind, int *fds, int *nfds)
{
  union
  {
    struct sbx_priv_reply r;
    struct sbx_priv_entry e;
  } a;
  int local[SBX_PRIV_MAX_FDS], n_local;
  ssize_t n;

  if (fds == NULL)
    fds = local, nfds = &n_local;
  if (sbx__sendmsg (fd, p, len, NULL, 0, 0) < 0)
    return -2;
  for (;;)
    {
      n = recv_reply (fd, &a, sizeof a, fds, nfds);
      if (n <= 0)
        return -2;
      if (a.r.hdr.op == SBX_PRIV_LIST_ENTRY)
        continue;
      break;
    }
  if (a.r.hdr.op != SBX_PRIV_REPLY)
    return -3;
  *kind = a.r.kind;
  if (fds == local)
    while (n_local > 0)
      close (local[--n_local]);
  return a.r.status;
}

static struct sbx_priv_create
create_req (uint32_t slot, const char *id)
{
  struct sbx_priv_create m;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_CREATE;
  m.hdr.len = sizeof m;
  m.slot = slot;
  snprintf (m.id, sizeof m.id, "%s", id);
  snprintf (m.template_name, sizeof m.template_name, "base");
  m.memory_bytes = 64 << 20;
  m.cpu_milli = 500;
  m.pids = 64;
  m.disk_bytes = 16 << 20;
  return m;
}

static struct sbx_priv_fs *
fs_req (uint32_t slot, uint32_t op, const char *path)
{
  static struct sbx_priv_fs m;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_FS;
  m.hdr.len = sizeof m;
  m.fs_op = op;
  m.slot = slot;
  m.uid = m.gid = 1000;
  snprintf (m.path, sizeof m.path, "%s", path);
  return &m;
}

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st;
  (void) flag;
  (void) ftw;
  remove (path);
  return 0;
}

static int
test_parent_protocol (void)
{
  struct sbx_engine_opts opts = {0};
  struct sbx_priv_hello hello = {{SBX_PRIV_HELLO, sizeof hello}, SBX_PRIV_VERSION, 0};
  struct sbx_priv_slot slot_msg;
  struct sbx_priv_create cr;
  struct sbx_priv_fs *fs;
  char cgname[64], buf[2048], id[SBX_ID_LEN + 1];
  sbx_error_t *err = NULL;
  pthread_t server;
  uint32_t kind = 0;
  int fd, fds[SBX_PRIV_MAX_FDS], nfds = 0;
  void *ret;

  if (geteuid () != 0)
    return 77;
  snprintf (cgname, sizeof cgname, "sbx-unit-privsep-%d", (int) getpid ());
  opts.cgroup_parent = cgname;
  sbx_config_defaults (&cfg);
  cfg.max_sandboxes = 4;
  cfg.pool_size = 0;
  cfg.uid_base = 0xA0000000u + (uid_t) (getpid () % 64) * (1u << 23);
  /* The parent opens its template store in the state directory. */
  snprintf (cfg.state_dir, sizeof cfg.state_dir, "/tmp/sbx-unit-privsep-XXXXXX");
  CHECK (mkdtemp (cfg.state_dir) != NULL);
  if (sbx_kernel_probe (&sbx_kernel, &err) < 0 || sbx_engine_open (&eng, &opts, &err) < 0)
    {
      fprintf (stderr, "# engine: %s\n", err->msg);
      return -1;
    }
  CHECK (sbx_priv_server_init (&cfg, &eng, &err) == 0);
  CHECK (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, master) == 0);
  CHECK (pthread_create (&server, NULL, serve, NULL) == 0);

  CHECK (sbx__sendmsg (master[1], &hello, sizeof hello, NULL, 0, 0) == 0);
  {
    ssize_t n = recv_reply (master[1], buf, sizeof buf, fds, &nfds);
    if (n != (ssize_t) (sizeof (struct sbx_priv_reply) + sizeof (struct sbx_priv_info)))
      fprintf (stderr, "# HELLO answer: %zd bytes (%s)\n", n, strerror (errno));
    CHECK (n == (ssize_t) (sizeof (struct sbx_priv_reply) + sizeof (struct sbx_priv_info)));
  }

  /* Malformed: each ends its channel, and only that one. */
  {
    struct sbx_priv_slot m = {{SBX_PRIV_STATS, sizeof m}, 0, 0};
    struct sbx_priv_slot bad_len = {{SBX_PRIV_STATS, sizeof m + 4}, 0, 0};
    struct sbx_priv_hdr unknown = {99, sizeof unknown};
    char longer[sizeof m + 8];
    memset (longer, 0, sizeof longer);
    memcpy (longer, &m, sizeof m);
    ((struct sbx_priv_hdr *) longer)->len = sizeof longer;
    CHECK (closes_channel (&bad_len, sizeof bad_len, 0));
    CHECK (closes_channel (&unknown, sizeof unknown, 0));
    CHECK (closes_channel (longer, sizeof longer, 0));
    CHECK (closes_channel (&m, 4, 0));
    CHECK (closes_channel (&m, sizeof m, 1)); /* a descriptor where none belongs */
    fs = fs_req (0, SBX_PRIV_FS_STAT, "/");
    memset (fs->path, 'a', sizeof fs->path); /* no NUL */
    CHECK (closes_channel (fs, sizeof *fs, 0));
    fs = fs_req (0, SBX_PRIV_FS_STAT, "/");
    fs->uid = fs->gid = 0x60000000; /* not a sandbox user */
    CHECK (closes_channel (fs, sizeof *fs, 0));
    fs = fs_req (0, SBX_PRIV_FS_MKDIR, "/x");
    fs->mode = 0170000;
    CHECK (closes_channel (fs, sizeof *fs, 0));
    fs = fs_req (0, SBX_PRIV_FS_LIST, "/");
    fs->depth = 0;
    CHECK (closes_channel (fs, sizeof *fs, 0));
    cr = create_req (0, "abc");
    memset (cr.id, 'a', sizeof cr.id);
    CHECK (closes_channel (&cr, sizeof cr, 0));
  }

  /* Well-formed but refused: a clear error, the channel lives on. */
  fd = open_channel ();
  CHECK (fd >= 0);
  slot_msg = (struct sbx_priv_slot){{SBX_PRIV_STATS, sizeof slot_msg}, 0, 0};
  CHECK (request (fd, &slot_msg, sizeof slot_msg, &kind, NULL, NULL) == -1 && kind == SBX_E_NOT_FOUND);
  slot_msg.hdr.op = SBX_PRIV_DESTROY;
  slot_msg.slot = 999999;
  CHECK (request (fd, &slot_msg, sizeof slot_msg, &kind, NULL, NULL) == -1 && kind == SBX_E_NOT_FOUND);
  cr = create_req (0, "../../../etc");
  CHECK (request (fd, &cr, sizeof cr, &kind, NULL, NULL) == -1 && kind == SBX_E_INVALID);
  sbx_random_id (id, SBX_ID_LEN);
  cr = create_req (0, id);
  cr.memory_bytes = 4096;
  CHECK (request (fd, &cr, sizeof cr, &kind, NULL, NULL) == -1 && kind == SBX_E_INVALID);
  cr = create_req (0, id);
  cr.pids = 1u << 30;
  CHECK (request (fd, &cr, sizeof cr, &kind, NULL, NULL) == -1 && kind == SBX_E_INVALID);
  cr = create_req (0, id);
  snprintf (cr.template_name, sizeof cr.template_name, "../base");
  CHECK (request (fd, &cr, sizeof cr, &kind, NULL, NULL) == -1 && kind == SBX_E_INVALID);
  cr = create_req (1000, id); /* beyond the table */
  CHECK (request (fd, &cr, sizeof cr, &kind, NULL, NULL) == -1 && kind == SBX_E_CONFLICT);
  {
    /* "Adopt" a process that is no sandbox's init: ourselves. */
    struct sbx_priv_adopt ad;
    memset (&ad, 0, sizeof ad);
    ad.hdr.op = SBX_PRIV_ADOPT;
    ad.hdr.len = sizeof ad;
    ad.slot = 0;
    ad.init_pid = getpid ();
    snprintf (ad.id, sizeof ad.id, "%s", id);
    CHECK (request (fd, &ad, sizeof ad, &kind, NULL, NULL) == -1);
    ad.init_pid = 1;
    CHECK (request (fd, &ad, sizeof ad, &kind, NULL, NULL) == -1 && kind == SBX_E_INVALID);
  }

  /* A real sandbox, then the same slot or id again. */
  cr = create_req (0, id);
  CHECK (request (fd, &cr, sizeof cr, &kind, fds, &nfds) == 0 && nfds == 2);
  close (fds[0]);
  close (fds[1]);
  CHECK (request (fd, &cr, sizeof cr, &kind, NULL, NULL) == -1 && kind == SBX_E_CONFLICT);
  cr.slot = 1;
  CHECK (request (fd, &cr, sizeof cr, &kind, NULL, NULL) == -1 && kind == SBX_E_CONFLICT);
  {
    struct sbx_priv_limits l;
    memset (&l, 0, sizeof l);
    l.hdr.op = SBX_PRIV_LIMITS;
    l.hdr.len = sizeof l;
    l.slot = 0;
    l.memory_bytes = 1ULL << 50;
    l.cpu_milli = 500;
    l.pids = 64;
    CHECK (request (fd, &l, sizeof l, &kind, NULL, NULL) == -1 && kind == SBX_E_INVALID);
  }
  fs = fs_req (0, SBX_PRIV_FS_STAT, "/etc/hostname");
  CHECK (request (fd, fs, sizeof *fs, &kind, NULL, NULL) == 0);
  fs = fs_req (0, SBX_PRIV_FS_OPEN_READ, "/../../../../etc/shadow");
  CHECK (request (fd, fs, sizeof *fs, &kind, NULL, NULL) == -1);
  slot_msg = (struct sbx_priv_slot){{SBX_PRIV_STATS, sizeof slot_msg}, 0, 0};
  CHECK (request (fd, &slot_msg, sizeof slot_msg, &kind, NULL, NULL) == 0);
  slot_msg.hdr.op = SBX_PRIV_DESTROY;
  CHECK (request (fd, &slot_msg, sizeof slot_msg, &kind, NULL, NULL) == 0);
  slot_msg.hdr.op = SBX_PRIV_STATS;
  CHECK (request (fd, &slot_msg, sizeof slot_msg, &kind, NULL, NULL) == -1 && kind == SBX_E_NOT_FOUND);
  close (fd);

  /* The first channel takes only HELLO, CHANNEL and READY: anything else
     ends the front end's session. */
  CHECK (sbx__sendmsg (master[1], &slot_msg, sizeof slot_msg, NULL, 0, 0) == 0);
  CHECK (pthread_join (server, &ret) == 0 && (intptr_t) ret == -1);
  close (master[1]);
  close (master[0]);
  sbx_engine_close (&eng);
  nftw (cfg.state_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

int
main (void)
{
  RUN (test_drop_refuses_root);
  RUN (test_drop);
  RUN (test_parent_protocol);
  return tap_done ();
}
