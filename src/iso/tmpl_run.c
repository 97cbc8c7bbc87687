/* sbx: the build sandbox (docs/templates.md, "Build commands"; security.md
 * 2.19), where everything of a recipe runs that Debian's packages or the
 * recipe's author wrote: debootstrap's second stage (the packages'
 * maintainer scripts) over the unpacked tree, then the recipe's commands
 * over its layer, idmapped so that its host-root files are root's inside,
 * under a writable overlay upper in the build directory. Either way: as
 * root of a user namespace whose ids are SBX_TMPL_BUILD_ID_BASE + k on the
 * host, with the sandboxes' seccomp filter and no_new_privs, in mount,
 * PID, network, IPC and UTS namespaces of their own, a read-only /proc of
 * that PID namespace, a cgroup of the build's own (memory, processes, CPU)
 * and a lifetime; the network only the mirror's host, through the egress
 * process. The upper then becomes a layer (root's, no setuid, whiteouts
 * kept).
 */
#include "iso/tmpl.h"
#include "iso/helper.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "egress/wire.h"
#include "iso/cgroup.h"
#include "iso/idmap.h"
#include "iso/seccomp.h"
#include "util/id.h"
#include "util/log.h"


#define RUN_TIMEOUT_S 1800
/* what the commands may write: each file (RLIMIT_FSIZE) and their layer */
#define RUN_MAX_BYTES (2ULL << 30)
/* The build's cgroup: dpkg and apt fit in far less; a fork bomb or a
   runaway compiler in a maintainer script stops here, not at the host's. */
#define RUN_MEMORY_BYTES (2ULL << 30)
#define RUN_PIDS 1024

#define RUN_ID_BASE SBX_TMPL_BUILD_ID_BASE

/* "0 RUN_ID_BASE 65536" as pid's uid and gid maps: root inside. */
static int
write_maps (pid_t pid)
{
  return sbx_idmap_write (pid, 0, RUN_ID_BASE, 65536);
}

/* A user namespace with write_maps' mapping, for the idmapped lower layer
   (host 0 -> RUN_ID_BASE: root inside). -1 on failure. */
static int
idmap_ns (void)
{
  return sbx_idmap_userns (0, RUN_ID_BASE, 65536, NULL);
}

static void __attribute__ ((noreturn))
fail (int log_fd, const char *what)
{
  dprintf (log_fd, "sbx: the build sandbox could not start (%s): %s\n", what, strerror (errno));
  _exit (126);
}

static void
bind_dev (const char *root, const char *name)
{
  char path[1400], host[64];
  int fd;

  snprintf (path, sizeof path, "%s/dev/%s", root, name);
  snprintf (host, sizeof host, "/dev/%s", name);
  fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd >= 0)
    close (fd);
  mount (host, path, NULL, MS_BIND, NULL);
}

/* In the build sandbox, as root of its user namespace: each command by
   /bin/sh -c, output to log_fd. Exit status: 0, or the failing command's
   index + 1 (its status written to status_fd first). */
static void
run_in_sandbox (char *cmds[], int ncmds, int log_fd, int status_fd, const void *filter,
                size_t filter_len)
{
  static char *const env[]
      = {(char *) (uintptr_t) "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
         (char *) (uintptr_t) "HOME=/root", (char *) (uintptr_t) "LANG=C.UTF-8",
         (char *) (uintptr_t) "DEBIAN_FRONTEND=noninteractive",
         /* the one way out: the build sandbox's proxy (apt reads http_proxy) */
         (char *) (uintptr_t) "http_proxy=http://127.0.0.1:3128",
         (char *) (uintptr_t) "HTTP_PROXY=http://127.0.0.1:3128",
         (char *) (uintptr_t) "https_proxy=http://127.0.0.1:3128",
         (char *) (uintptr_t) "HTTPS_PROXY=http://127.0.0.1:3128", NULL};
  struct sock_fprog prog = {(unsigned short) (filter_len / sizeof (struct sock_filter)),
                            (struct sock_filter *) (uintptr_t) filter};
  int i;

  /* the daemon's inherited ignored signals are not the commands' */
  for (i = 1; i < NSIG; i++)
    signal (i, SIG_DFL);
  if (setresgid (0, 0, 0) < 0 || setgroups (0, NULL) < 0 || setresuid (0, 0, 0) < 0
      || prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0
      || (filter_len && syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0))
    {
      dprintf (log_fd, "sbx: the build sandbox could not start: %s\n", strerror (errno));
      _exit (125);
    }
  for (i = 0; i < ncmds; i++)
    {
      int st = 0;
      pid_t pid;
      dprintf (log_fd, "$ %s\n", cmds[i]);
      pid = fork ();
      if (pid == 0)
        {
          char *argv[] = {(char *) (uintptr_t) "/bin/sh", (char *) (uintptr_t) "-c", cmds[i],
                          NULL};
          int null = open ("/dev/null", O_RDONLY | O_CLOEXEC);
          if (null < 0 || dup2 (null, 0) < 0 || dup2 (log_fd, 1) < 0 || dup2 (log_fd, 2) < 0
              || chdir ("/") < 0)
            _exit (127);
          syscall (SYS_close_range, 3, ~0U, 0);
          execve (argv[0], argv, env);
          _exit (127);
        }
      while (pid > 0 && waitpid (pid, &st, 0) < 0 && errno == EINTR)
        ;
      st = pid < 0 ? 127 : WIFEXITED (st) ? WEXITSTATUS (st) : 128 + WTERMSIG (st);
      if (st != 0)
        {
          dprintf (status_fd, "%d\n", st);
          _exit (i + 1 > 120 ? 120 : i + 1);
        }
    }
  _exit (0);
}

/* The egress channel (the front end's end, egress/wire.h), set at start;
   -1: build commands have no way out. */
static int egress_fd = -1;

void
sbx_tmpl_recipe_set_egress (int fd)
{
  egress_fd = fd;
}

/* Where builds' cgroups go (the engine's, beside the sandboxes': a
   daemon's start removes what a dead one left there), set at start. */
static const struct sbx_cgroup_root *build_cgroups;

void
sbx_tmpl_recipe_set_cgroups (const struct sbx_cgroup_root *root)
{
  build_cgroups = root;
}

/* Loopback up and the proxy address 127.0.0.1:3128 listening, in the
   build sandbox's network namespace. The listener, or -1. */
static int
proxy_listen (void)
{
  struct ifreq ifr;
  struct sockaddr_in sa;
  int s = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1;

  if (s < 0)
    return -1;
  memset (&ifr, 0, sizeof ifr);
  snprintf (ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (ioctl (s, SIOCGIFFLAGS, &ifr) < 0 || (ifr.ifr_flags |= IFF_UP, ioctl (s, SIOCSIFFLAGS, &ifr)) < 0)
    {
      close (s);
      return -1;
    }
  close (s);
  s = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  memset (&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons (3128);
  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (s < 0 || setsockopt (s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0
      || bind (s, (struct sockaddr *) &sa, sizeof sa) < 0 || listen (s, 64) < 0)
    {
      if (s >= 0)
        close (s);
      return -1;
    }
  return s;
}

/* One connection to the proxy address, handed to the egress process with
   a policy that allows the mirror's host only (as the front end does for
   a sandbox's, core/egress.c). */
static void
proxy_pass (int conn, const char *allow)
{
  struct sbx_egress_conn m;
  struct msghdr mh;
  struct iovec iov[2];
  char cbuf[CMSG_SPACE (sizeof (int))];
  struct cmsghdr *cm;
  size_t n = strlen (allow) + 1;

  memset (&m, 0, sizeof m);
  m.type = SBX_EGRESS_MSG_CONN;
  /* the audit log's name for it (a-z0-9, as the front end checks ids) */
  snprintf (m.sandbox, sizeof m.sandbox, "recipebuild");
  /* Its connections count apart from every tenant's. */
  snprintf (m.tenant, sizeof m.tenant, "%s", SBX_EGRESS_BUILD_TENANT);
  m.nallow = 1;
  m.strings_len = (uint32_t) n;
  m.len = (uint32_t) (sizeof m + n);
  iov[0].iov_base = &m;
  iov[0].iov_len = sizeof m;
  iov[1].iov_base = (void *) (uintptr_t) allow;
  iov[1].iov_len = n;
  memset (&mh, 0, sizeof mh);
  mh.msg_iov = iov;
  mh.msg_iovlen = 2;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  cm = CMSG_FIRSTHDR (&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN (sizeof (int));
  memcpy (CMSG_DATA (cm), &conn, sizeof conn);
  if (egress_fd >= 0)
    (void) sendmsg (egress_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
  close (conn);
}

/* What the build sandbox's root is. */
struct build_root
{
  /* The recipe's commands: a detached clone of the layer they build on
     (the lower), and build_path/run, where the overlay's upper, work,
     lower and merged directories are. */
  int tree;
  const char *run_path;
  /* debootstrap's second stage (tree -1): the unpacked tree itself,
     written in place; its owners moved to RUN_ID_BASE + k beforehand. */
  const char *dir;
};

/* A mount of `type` on root/name, a directory, by descriptor: no symlink
   in a tree the build wrote is followed out of it (debootstrap's first
   stage leaves /proc a symlink to the host's: it becomes a directory, as
   its second stage would make it). -1 with errno. */
static int
mount_in (int root, const char *name, const char *type, unsigned long flags, const char *data)
{
  char path[64];
  struct stat st;
  int fd, rc;

  if (fstatat (root, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode)
      && unlinkat (root, name, 0) < 0)
    return -1;
  if (mkdirat (root, name, 0755) < 0 && errno != EEXIST)
    return -1;
  fd = openat (root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  rc = mount (type, path, type, flags, data);
  close (fd);
  return rc;
}

/* The build sandbox's keeper: mount, network, IPC and UTS namespaces of
   its own with the root of `br`, no network but the proxy address, and
   the commands in a user namespace whose root is RUN_ID_BASE, init of a
   PID namespace. It starts once `go` is readable: its parent puts it into
   the build's cgroup first. Returns like run_in_sandbox. */
static void
keeper (const struct build_root *br, int go_fd, char *cmds[], int ncmds, int log_fd,
        int status_fd, const void *filter, size_t filter_len, const char *allow)
{
  char opts[4096], merged[1300], path[1400];
  struct mount_attr attr;
  int userns, sync[2], go[2], st = 0, root, lsn, tree = br->tree;
  pid_t pid;
  char c;

  setsid ();
  if (read (go_fd, &c, 1) != 1)
    _exit (126);
  close (go_fd);
  if (tree >= 0)
    {
      /* The layer (a detached clone our parent made: helper.h leaves us
         none of its descriptors to name it by) idmapped first, attached in
         the new namespace below. */
      userns = idmap_ns ();
      memset (&attr, 0, sizeof attr);
      attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
      attr.userns_fd = (uint64_t) userns;
      if (userns < 0 || syscall (SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
        {
          dprintf (log_fd, "sbx: idmapping the recipe's layer failed: %s\n", strerror (errno));
          _exit (126);
        }
      close (userns);
    }
  if (unshare (CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0
      || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    fail (log_fd, "namespaces");
  lsn = proxy_listen ();
  if (lsn < 0)
    fail (log_fd, "the proxy address");
  if (tree >= 0)
    {
      snprintf (path, sizeof path, "%s/lower", br->run_path);
      snprintf (merged, sizeof merged, "%s/merged", br->run_path);
      if (syscall (SYS_move_mount, tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        {
          dprintf (log_fd, "sbx: idmapping the recipe's layer failed: %s\n", strerror (errno));
          _exit (126);
        }
      snprintf (opts, sizeof opts, "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work,userxattr",
                br->run_path, br->run_path, br->run_path);
      if (mount ("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
        {
          dprintf (log_fd, "sbx: the build overlay failed: %s\n", strerror (errno));
          _exit (126);
        }
    }
  else
    {
      /* the tree itself, a mount of its own: nothing setuid and no device
         node in it works (the first stage made some) */
      snprintf (merged, sizeof merged, "%s", br->dir);
      if (mount (merged, merged, NULL, MS_BIND, NULL) < 0
          || mount (NULL, merged, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL) < 0)
        fail (log_fd, "the tree");
    }
  root = open (merged, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    fail (log_fd, "the root");
  /* a private /dev of a few devices (not kept: the upper never sees it) */
  if (mount_in (root, "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755") < 0)
    fail (log_fd, "/dev");
  bind_dev (merged, "null");
  bind_dev (merged, "zero");
  bind_dev (merged, "urandom");
  bind_dev (merged, "random");
  if (pipe2 (sync, O_CLOEXEC) < 0 || pipe2 (go, O_CLOEXEC) < 0)
    fail (log_fd, "pipe");
  /* A chrooted process may not make a user namespace: the commands' process
     makes it first, then enters the root by this descriptor (the path to
     it crosses root's 0700 directories its ids may not search). */
  /* the commands' process is the init of a PID namespace: whatever they
     leave running dies with it */
  if (unshare (CLONE_NEWPID) < 0)
    fail (log_fd, "the PID namespace");
  pid = fork ();
  if (pid == 0)
    {
      int keep[] = {log_fd, status_fd, root, sync[1], go[0]};
      /* The keeper's end is this namespace's (its init's) end: set before
         the go below, which the keeper sends only while alive. */
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      /* The daemon parent's sockets and store descriptors have no
         business in a build sandbox. */
      sbx_helper_close_all_but (keep, 5);
      /* /proc of the build's PID namespace, made by its init while it is
         still root of the host's user namespace (a proc mount needs that),
         read-only: dpkg and apt read it, nothing in it is the host's.
         Mounts made here are locked below the user namespace, and seccomp
         refuses mount and umount: the commands keep it as it is. */
      if (mount_in (root, "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) < 0)
        {
          dprintf (log_fd, "sbx: the build sandbox could not start (/proc): %s\n",
                   strerror (errno));
          _exit (125);
        }
      if (unshare (CLONE_NEWUSER) < 0 || write (sync[1], "u", 1) != 1 || read (go[0], &c, 1) != 1)
        _exit (125);
      if (fchdir (root) < 0 || chroot (".") < 0 || chdir ("/") < 0)
        {
          dprintf (log_fd, "sbx: the build sandbox could not start (chroot): %s\n",
                   strerror (errno));
          _exit (125);
        }
      close (root);
      run_in_sandbox (cmds, ncmds, log_fd, status_fd, filter, filter_len);
    }
  close (sync[1]);
  close (go[0]);
  if (pid < 0 || read (sync[0], &c, 1) != 1 || write_maps (pid) < 0 || write (go[1], "g", 1) != 1)
    {
      if (pid > 0)
        kill (pid, SIGKILL);
      fail (log_fd, "user namespace");
    }
  close (go[1]);
  /* Until the commands end: each connection to the proxy address goes to
     the egress process with the mirror-only policy. */
  for (;;)
    {
      struct pollfd pfd = {lsn, POLLIN, 0};
      pid_t r = waitpid (pid, &st, WNOHANG);
      if (r == pid || (r < 0 && errno != EINTR))
        break;
      if (poll (&pfd, 1, 200) > 0)
        {
          int conn = accept4 (lsn, NULL, NULL, SOCK_CLOEXEC);
          if (conn >= 0)
            proxy_pass (conn, allow);
        }
    }
  _exit (WIFEXITED (st) ? WEXITSTATUS (st) : 126);
}

/* The last `lines` lines of the log, '; '-joined, printable. */
static void
log_tail (int log_fd, int lines, char *out, size_t len)
{
  char buf[2048];
  off_t size = lseek (log_fd, 0, SEEK_END);
  off_t from = size > (off_t) sizeof buf - 1 ? size - (off_t) sizeof buf + 1 : 0;
  ssize_t n = pread (log_fd, buf, sizeof buf - 1, from);
  char *p;
  int seen = 0;

  out[0] = '\0';
  if (n <= 0)
    return;
  buf[n] = '\0';
  while (n > 0 && buf[n - 1] == '\n')
    buf[--n] = '\0';
  /* only what the failing command wrote: after its "$ CMD" line */
  {
    char *cmd = NULL, *q = buf;
    while ((q = strstr (q, "\n$ ")) != NULL)
      cmd = ++q;
    if (cmd && (q = strchr (cmd, '\n')) != NULL)
      {
        memmove (buf, q + 1, strlen (q + 1) + 1);
        n = (ssize_t) strlen (buf);
      }
    else if (cmd)
      buf[n = 0] = '\0';
  }
  for (p = buf + n; p > buf; p--)
    if (p[-1] == '\n' && ++seen == lines)
      break;
  {
    /* the end is what matters: keep it when it does not fit */
    size_t l = strlen (p);
    if (l >= len)
      p += l - (len - 1), l = len - 1;
    memcpy (out, p, l);
    out[l] = '\0';
  }
  for (p = out; *p; p++)
    if (*p == '\n')
      *p = '|';
    else if ((unsigned char) *p < 0x20 || (unsigned char) *p > 0x7e)
      *p = '?';
}

/* The build's cgroup, named recipe-HEX: at most half of the machine's
   CPUs (one at least), RUN_MEMORY_BYTES and RUN_PIDS. */
static int
build_cgroup (struct sbx_cgroup *cg, sbx_error_t **err)
{
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);
  struct sbx_cgroup_limits lim = {RUN_MEMORY_BYTES, 0, RUN_PIDS};
  char name[32] = "recipe-";

  lim.cpu_milli = (uint32_t) (cpus >= 2 ? cpus / 2 * 1000 : 1000);
  sbx_random_hex (name + 7, 8);
  if (build_cgroups == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "recipe: builds have no cgroup parent");
  if (sbx_cgroup_create (build_cgroups, name, &lim, cg, err) < 0)
    {
      if (cg->name[0])
        {
          sbx_error_t *e = NULL;
          if (sbx_cgroup_remove (build_cgroups, cg->name, &e) < 0)
            sbx_error_free (e);
        }
      return -1;
    }
  return 0;
}

static void
build_cgroup_end (struct sbx_cgroup *cg)
{
  sbx_error_t *e = NULL;

  if (sbx_cgroup_kill (build_cgroups, cg, &e) < 0 || sbx_cgroup_destroy (build_cgroups, cg, &e) < 0)
    {
      sbx_warn ("templates: the build's cgroup %s: %s", cg->name, e ? e->msg : "?");
      sbx_error_free (e);
    }
}

/* Run cmds in the build sandbox rooted as br says, output to log_fd; what
   for the errors ("run" for the recipe's commands). 0, or -1 with err
   (SBX_E_INVALID naming the failing command). */
static int
run_build (const struct build_root *br, char *cmds[], int ncmds, const char *what,
           const char *mirror, int log_fd, sbx_error_t **err)
{
  char allow[256], tail[600];
  const char *h = strstr (mirror, "://");
  void *filter = NULL;
  size_t filter_len = 0;
  sbx_error_t *ferr = NULL;
  struct sbx_cgroup cg;
  int status[2] = {-1, -1}, go[2] = {-1, -1}, st = 0, code;
  pid_t pid;
  time_t end = time (NULL) + RUN_TIMEOUT_S;

  /* the mirror's host[:port], the one entry of the commands' policy */
  h = h ? h + 3 : mirror;
  snprintf (allow, sizeof allow, "%.*s", (int) strcspn (h, "/"), h);
  /* compiled here: the child of a threaded process must not allocate */
  if (sbx_seccomp_build (&filter, &filter_len, &ferr) < 0)
    {
      sbx_error_free (ferr);
      return sbx_err (err, SBX_E_SYSTEM, "recipe: the build sandbox's seccomp filter");
    }
  if (pipe2 (status, O_CLOEXEC) < 0 || pipe2 (go, O_CLOEXEC) < 0)
    {
      int e = errno;
      free (filter);
      for (int i = 0; i < 2; i++)
        if (status[i] >= 0)
          close (status[i]);
      return sbx_err_sys (err, e, "pipe");
    }
  if (build_cgroup (&cg, err) < 0)
    {
      free (filter);
      close (status[0]);
      close (status[1]);
      close (go[0]);
      close (go[1]);
      return -1;
    }
  {
    /* The keeper: its log, its status pipe, its go, the layer and the
       egress channel its proxy hands connections to; it dies with us. */
    int keep[5];
    size_t n = 0;
    keep[n++] = log_fd;
    keep[n++] = status[1];
    keep[n++] = go[0];
    if (br->tree >= 0)
      keep[n++] = br->tree;
    if (egress_fd >= 0)
      keep[n++] = egress_fd;
    pid = sbx_helper_fork (keep, n);
  }
  if (pid == 0)
    {
      struct rlimit fsz = {RUN_MAX_BYTES, RUN_MAX_BYTES};
      setrlimit (RLIMIT_FSIZE, &fsz);
      keeper (br, go[0], cmds, ncmds, log_fd, status[1], filter, filter_len, allow);
      _exit (126);
    }
  free (filter);
  close (status[1]);
  close (go[0]);
  /* Into the build's cgroup before it does anything: all it starts is
     there, and the end kills all of it. */
  if (pid > 0 && sbx_cgroup_attach (build_cgroups, &cg, pid, err) < 0)
    {
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
      close (go[1]);
      close (status[0]);
      build_cgroup_end (&cg);
      return -1;
    }
  if (pid > 0 && write (go[1], "g", 1) != 1)
    kill (pid, SIGKILL);
  close (go[1]);
  for (;;)
    {
      pid_t r = pid > 0 ? waitpid (pid, &st, WNOHANG) : -1;
      if (r == pid)
        break;
      if (r < 0 && errno != EINTR)
        {
          st = 126 << 8;
          break;
        }
      if (time (NULL) > end)
        {
          dprintf (log_fd, "sbx: the build took longer than %d s\n", RUN_TIMEOUT_S);
          kill (pid, SIGKILL);
        }
      usleep (100 * 1000);
    }
  /* what the commands left running, setsid or not */
  build_cgroup_end (&cg);
  code = WIFEXITED (st) ? WEXITSTATUS (st) : 126;
  if (code >= 1 && code <= ncmds)
    {
      char buf[32] = "";
      ssize_t n = read (status[0], buf, sizeof buf - 1);
      close (status[0]);
      buf[n > 0 ? n : 0] = '\0';
      /* 512 bytes reach the client: the command's start, the output's end */
      log_tail (log_fd, 5, tail, 300);
      return sbx_err (err, SBX_E_INVALID, "recipe: %s[%d] `%.100s%s` exited with status %d: %s",
                      what, code - 1, cmds[code - 1], strlen (cmds[code - 1]) > 100 ? "..." : "",
                      atoi (buf), tail[0] ? tail : "(no output)");
    }
  close (status[0]);
  if (code != 0)
    {
      log_tail (log_fd, 3, tail, sizeof tail);
      return sbx_err (err, SBX_E_SYSTEM, "recipe: the build sandbox failed (%d): %s", code, tail);
    }
  return 0;
}

int
sbx_tmpl_run_second_stage (const char *target, const char *mirror, int log_fd, sbx_error_t **err)
{
  /* container=lxc: debootstrap's check that it may make device nodes
     (mknod, which no user namespace may) is skipped, as in an LXC
     container; the /dev it gets is the build sandbox's. It keeps the .debs
     it installed: they are not the image's. */
  static char second[] = "container=lxc /debootstrap/debootstrap --second-stage";
  static char clean[] = "rm -f /var/cache/apt/archives/*.deb";
  char *cmds[] = {second, clean};
  struct build_root br = {-1, NULL, target};

  dprintf (log_fd, "sbx: debootstrap's second stage (the packages' scripts) in a build sandbox\n");
  return run_build (&br, cmds, 2, "debootstrap", mirror, log_fd, err);
}

/* Run the recipe's commands over the layer at `lower`; their changes are
   left as a layer at build/layers/KEY. 0, or -1 with err (the failing
   command for SBX_E_INVALID). */
int
sbx_tmpl_run_commands (int build, const char *build_path, const char *lower, const char *key,
              char *cmds[], int ncmds, const char *mirror, int log_fd, sbx_error_t **err)
{
  char run_path[1200], upper[1300];
  static const char *const dirs[] = {"run", "run/upper", "run/work", "run/lower", "run/merged"};
  struct build_root br;
  const char *h = strstr (mirror, "://");
  int bad = 0, rc;
  uint64_t bytes = 0;

  h = h ? h + 3 : mirror;
  snprintf (run_path, sizeof run_path, "%s/run", build_path);
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (mkdirat (build, dirs[i], 0755) < 0)
      return sbx_err_sys (err, errno, "recipe: mkdir %s", dirs[i]);
  /* the upper's root is the image's /: root's inside */
  if (fchownat (build, "run/upper", RUN_ID_BASE, RUN_ID_BASE, 0) < 0)
    return sbx_err_sys (err, errno, "recipe: chown the upper");
  dprintf (log_fd, "sbx: running %d build command%s in a build sandbox (network: %.*s only)\n",
           ncmds, ncmds == 1 ? "" : "s", (int) strcspn (h, "/"), h);
  /* The layer as a detached clone, here in the host's mount namespace,
     where the store's descriptor (in `lower`) is ours: only a mount of the
     caller's namespace may be cloned. */
  br.tree = (int) syscall (SYS_open_tree, AT_FDCWD, lower, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  br.run_path = run_path;
  br.dir = NULL;
  if (br.tree < 0)
    return sbx_err_sys (err, errno, "recipe: the layer to build on");
  rc = run_build (&br, cmds, ncmds, "run", mirror, log_fd, err);
  close (br.tree);
  if (rc < 0)
    return -1;
  /* the upper as a layer: root's, no setuid, whiteouts kept, no devices */
  {
    int fd = openat (build, "run/upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return sbx_err_sys (err, errno, "recipe: the upper");
    sbx_tmpl_sanitize (fd, 0, &bytes, 1, &bad);
    close (fd);
  }
  if (bytes > RUN_MAX_BYTES)
    return sbx_err (err, SBX_E_TOO_LARGE,
                    "recipe: the build commands wrote %llu bytes, over the limit of %llu",
                    (unsigned long long) bytes, (unsigned long long) RUN_MAX_BYTES);
  if (bad)
    return sbx_err (err, SBX_E_INVALID,
                    "recipe: the build commands made a device node (only overlay whiteouts, 0/0 "
                    "character devices, may be in a layer)");
  if (fchownat (build, "run/upper", 0, 0, 0) < 0 || fchmodat (build, "run/upper", 0755, 0) < 0)
    return sbx_err_sys (err, errno, "recipe: the upper");
  snprintf (upper, sizeof upper, "layers/%s", key);
  if (renameat (build, "run/upper", build, upper) < 0)
    return sbx_err_sys (err, errno, "recipe: the commands' layer");
  dprintf (log_fd, "sbx: the commands' changes are a layer (%llu bytes)\n",
           (unsigned long long) bytes);
  return 0;
}
