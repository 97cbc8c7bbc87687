/* sbx: templates from a recipe: a Debian release and packages, installed
 * by debootstrap from the configured mirror (docs/templates.md).
 *
 * debootstrap runs Debian's maintainer scripts as root in a chroot, so a
 * recipe build is for the administrator only (the front end refuses it
 * over TCP), names nothing but a release and package names (checked
 * here again), and fetches only from the daemon's mirror, with the
 * archive's signatures checked against debian-archive-keyring. The tree is
 * then made a layer like any other: every file root's, setuid/setgid
 * dropped, device nodes, FIFOs and sockets removed. Built layers are kept
 * in a cache keyed by the SHA-256 of the canonical recipe and the mirror
 * (--template-cache, shared by daemons), so the second build of a recipe
 * is a copy.
 */
#include "iso/tmpl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "egress/wire.h"
#include "iso/seccomp.h"
#include "util/cleanup.h"
#include "util/log.h"

#define RECIPE_MAX 8192
#define MAX_PACKAGES 128
#define BUILD_TIMEOUT_S 1800

static int
name_ok (const char *s, size_t n, int pkg)
{
  size_t i;

  if (n == 0 || n > 64)
    return 0;
  for (i = 0; i < n; i++)
    {
      char ch = s[i];
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')
            || (pkg && i > 0 && (ch == '.' || ch == '+' || ch == '-'))))
        return 0;
    }
  return 1;
}

/* "release NAME\n" then "package NAME\n" lines (the front end's canonical
   form of the client's JSON): checked, and the --include list made. */
int
sbx_tmpl_recipe_parse (const char *text, char *release, size_t rlen, char *include, size_t ilen)
{
  const char *p = text;
  size_t io = 0;
  int npkg = 0, have_release = 0, nrun = 0;

  include[0] = '\0';
  while (*p)
    {
      const char *nl = strchr (p, '\n'), *v;
      size_t n;
      if (nl == NULL)
        return -1;
      if (strncmp (p, "release ", 8) == 0 && !have_release)
        {
          v = p + 8;
          n = (size_t) (nl - v);
          if (!name_ok (v, n, 0) || n >= rlen)
            return -1;
          memcpy (release, v, n);
          release[n] = '\0';
          have_release = 1;
        }
      else if (strncmp (p, "package ", 8) == 0 && npkg < MAX_PACKAGES)
        {
          v = p + 8;
          n = (size_t) (nl - v);
          if (!name_ok (v, n, 1) || io + n + 2 >= ilen)
            return -1;
          if (io)
            include[io++] = ',';
          memcpy (include + io, v, n);
          io += n;
          include[io] = '\0';
          npkg++;
        }
      else if (strncmp (p, "run ", 4) == 0 && have_release && nrun < SBX_TMPL_RUN_MAX)
        {
          /* build commands come last; printable ASCII (and tab) only */
          v = p + 4;
          n = (size_t) (nl - v);
          if (n == 0 || n > SBX_TMPL_RUN_LEN)
            return -1;
          for (size_t k = 0; k < n; k++)
            if (((unsigned char) v[k] < 0x20 && v[k] != '\t') || (unsigned char) v[k] > 0x7e)
              return -1;
          nrun++;
        }
      else
        return -1;
      if (nrun && strncmp (p, "run ", 4) != 0)
        return -1;
      p = nl + 1;
    }
  return have_release ? 0 : -1;
}

/* ---- making the tree a layer ------------------------------------------- */

/* upper: an overlay's upper (the build commands' changes): its 0/0
   character devices are whiteouts and stay, any other device node sets
   *bad; otherwise every device node goes. */
static void
sanitize_tree (int dir, int depth, uint64_t *bytes, int upper, int *bad)
{
  struct dirent *de;
  int fd = openat (dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;

  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  while ((de = readdir (d)) != NULL)
    {
      struct stat st;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (upper && S_ISCHR (st.st_mode) && st.st_rdev == 0)
        {
          if (fchownat (dirfd (d), de->d_name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0)
            *bad = 1;
          continue;
        }
      if (upper && (S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode)))
        {
          *bad = 1;
          continue;
        }
      if (S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode) || S_ISFIFO (st.st_mode)
          || S_ISSOCK (st.st_mode))
        {
          unlinkat (dirfd (d), de->d_name, 0);
          continue;
        }
      /* root's, without setuid/setgid; an entry that will not be made so
         is not kept */
      if (fchownat (dirfd (d), de->d_name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0
          || (!S_ISLNK (st.st_mode) && fchmodat (dirfd (d), de->d_name, st.st_mode & 01777, 0) < 0))
        {
          sbx_warn ("templates: recipe: dropping `%s` (%s)", de->d_name, strerror (errno));
          if (unlinkat (dirfd (d), de->d_name, S_ISDIR (st.st_mode) ? AT_REMOVEDIR : 0) < 0)
            sbx_warn ("templates: recipe: cannot drop `%s`", de->d_name);
          continue;
        }
      if (S_ISREG (st.st_mode))
        *bytes += (uint64_t) st.st_size;
      if (S_ISDIR (st.st_mode) && depth < 256)
        {
          int sub = openat (dirfd (d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0)
            {
              sanitize_tree (sub, depth + 1, bytes, upper, bad);
              close (sub);
            }
        }
    }
  closedir (d);
}

static void
sanitize (int dir, int depth, uint64_t *bytes)
{
  int bad = 0;
  sanitize_tree (dir, depth, bytes, 0, &bad);
}

static void
sanitize_upper (int dir, int depth, uint64_t *bytes, int *bad)
{
  sanitize_tree (dir, depth, bytes, 1, bad);
}

/* Bytes of the regular files under dir (a layer already stored). */
static uint64_t
tree_bytes (int dir, int depth)
{
  struct dirent *de;
  uint64_t total = 0;
  int fd = openat (dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;

  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return 0;
    }
  while ((de = readdir (d)) != NULL)
    {
      struct stat st;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
          || fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (S_ISREG (st.st_mode))
        total += (uint64_t) st.st_size;
      else if (S_ISDIR (st.st_mode) && depth < 256)
        {
          int sub = openat (dirfd (d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0)
            {
              total += tree_bytes (sub, depth + 1);
              close (sub);
            }
        }
    }
  closedir (d);
  return total;
}

/* Run argv (absolute) with output to log_fd; its exit status, or -1. */
static int
run (char *const argv[], int log_fd, int timeout_s)
{
  pid_t pid = fork ();
  int status;
  time_t end = time (NULL) + timeout_s;

  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      static char *const env[] = {(char *) (uintptr_t) "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                  (char *) (uintptr_t) "LANG=C.UTF-8",
                                  (char *) (uintptr_t) "DEBIAN_FRONTEND=noninteractive", NULL};
      int null = open ("/dev/null", O_RDONLY | O_CLOEXEC);
      if (null < 0 || dup2 (null, 0) < 0 || dup2 (log_fd, 1) < 0 || dup2 (log_fd, 2) < 0)
        _exit (127);
      syscall (SYS_close_range, 3, ~0U, 0);
      setsid ();
      /* debootstrap mounts /proc and /sys in its target: in a mount
         namespace of its own, they go with it, whatever happens. */
      if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        _exit (126);
      execve (argv[0], argv, env);
      _exit (127);
    }
  for (;;)
    {
      pid_t r = waitpid (pid, &status, WNOHANG);
      if (r == pid)
        return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
      if (r < 0 && errno != EINTR)
        return -1;
      if (time (NULL) > end)
        {
          kill (-pid, SIGKILL);
          kill (pid, SIGKILL);
        }
      usleep (100 * 1000);
    }
}

/* The last line of the log starting with "E:" (debootstrap's errors), or
   its last line. */
static void
log_reason (int log_fd, char *out, size_t len)
{
  char buf[8192], *line, *save = NULL, *best = NULL, *last = NULL;
  off_t size = lseek (log_fd, 0, SEEK_END), from = size > (off_t) sizeof buf - 1 ? size - (off_t) sizeof buf + 1 : 0;
  ssize_t n = pread (log_fd, buf, sizeof buf - 1, from);

  snprintf (out, len, "debootstrap failed");
  if (n <= 0)
    return;
  buf[n] = '\0';
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      last = line;
      if (strncmp (line, "E:", 2) == 0)
        best = line;
    }
  if (best || last)
    snprintf (out, len, "debootstrap failed: %.300s", best ? best : last);
  for (char *p = out; *p; p++)
    if ((unsigned char) *p < 0x20 || (unsigned char) *p > 0x7e)
      *p = '?';
}

/* ---- build commands (docs/templates.md, "Build commands") -------------- */

#define RUN_TIMEOUT_S 1800
/* what the commands may write: each file (RLIMIT_FSIZE) and their layer */
#define RUN_MAX_BYTES (2ULL << 30)

/* The build sandbox's ids: 0..65535 inside are SBX_SNAPSHOT_ID_BASE + k on
   the host, a range no host account and no running sandbox has. */
#define RUN_ID_BASE 0xFFFE0000u

/* Write "0 RUN_ID_BASE 65536" as pid's uid and gid maps. */
static int
write_maps (pid_t pid)
{
  char path[64], map[64];

  snprintf (map, sizeof map, "0 %u 65536", RUN_ID_BASE);
  for (int i = 0; i < 2; i++)
    {
      int m;
      snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, i ? "gid_map" : "uid_map");
      m = open (path, O_WRONLY | O_CLOEXEC);
      if (m < 0 || write (m, map, strlen (map)) != (ssize_t) strlen (map))
        {
          if (m >= 0)
            close (m);
          return -1;
        }
      close (m);
    }
  return 0;
}

/* A user namespace with write_maps' mapping, for the idmapped lower layer
   (host 0 -> RUN_ID_BASE: root inside). -1 on failure. */
static int
idmap_ns (void)
{
  int sync[2], fd = -1;
  char c, path[64];
  pid_t pid;

  if (pipe2 (sync, O_CLOEXEC) < 0)
    return -1;
  pid = fork ();
  if (pid == 0)
    {
      close (sync[0]);
      if (unshare (CLONE_NEWUSER) < 0 || write (sync[1], "u", 1) != 1)
        _exit (1);
      for (;;)
        pause ();
    }
  close (sync[1]);
  if (pid > 0 && read (sync[0], &c, 1) == 1 && write_maps (pid) == 0)
    {
      snprintf (path, sizeof path, "/proc/%d/ns/user", (int) pid);
      fd = open (path, O_RDONLY | O_CLOEXEC);
    }
  close (sync[0]);
  if (pid > 0)
    {
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
    }
  return fd;
}

/* Close every descriptor from 3 up but the n in keep (the daemon parent's
   sockets and store descriptors have no business in a build sandbox). */
static void
close_except (int *keep, int n)
{
  int lo = 3;

  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--)
      {
        int t = keep[j];
        keep[j] = keep[j - 1];
        keep[j - 1] = t;
      }
  for (int i = 0; i < n; i++)
    {
      if (keep[i] > lo)
        syscall (SYS_close_range, (unsigned) lo, (unsigned) keep[i] - 1, 0);
      if (keep[i] >= lo)
        lo = keep[i] + 1;
    }
  syscall (SYS_close_range, (unsigned) lo, ~0U, 0);
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

/* The build sandbox's keeper: a mount namespace of its own with the
   recipe's layer idmapped under an overlay whose upper is run/upper, no
   network (a network namespace with nothing in it), and the commands in a
   user namespace whose root is RUN_ID_BASE. Returns like run_in_sandbox. */
static void
keeper (const char *lower, const char *run_path, char *cmds[], int ncmds, int log_fd,
        int status_fd, const void *filter, size_t filter_len, const char *allow)
{
  char opts[4096], merged[1300], path[1400];
  struct mount_attr attr;
  int tree, userns, sync[2], go[2], st = 0, root, lsn;
  pid_t pid;
  char c;

  setsid ();
  /* The layer idmapped as a detached mount first: a stored layer is named
     through the store's descriptor, whose mount is in this (the host's)
     mount namespace, and only a mount of the caller's namespace may be
     cloned. Attached in the new namespace below. */
  userns = idmap_ns ();
  tree = (int) syscall (SYS_open_tree, AT_FDCWD, lower, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  memset (&attr, 0, sizeof attr);
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  attr.userns_fd = (uint64_t) userns;
  if (userns < 0 || tree < 0
      || syscall (SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
    {
      dprintf (log_fd, "sbx: idmapping the recipe's layer failed: %s\n", strerror (errno));
      _exit (126);
    }
  close (userns);
  if (unshare (CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0
      || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    fail (log_fd, "namespaces");
  lsn = proxy_listen ();
  if (lsn < 0)
    fail (log_fd, "the proxy address");
  snprintf (path, sizeof path, "%s/lower", run_path);
  snprintf (merged, sizeof merged, "%s/merged", run_path);
  if (syscall (SYS_move_mount, tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    {
      dprintf (log_fd, "sbx: idmapping the recipe's layer failed: %s\n", strerror (errno));
      _exit (126);
    }
  snprintf (opts, sizeof opts, "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work,userxattr",
            run_path, run_path, run_path);
  if (mount ("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
    {
      dprintf (log_fd, "sbx: the build overlay failed: %s\n", strerror (errno));
      _exit (126);
    }
  /* a private /dev of a few devices (not kept: the upper never sees it) */
  snprintf (path, sizeof path, "%s/dev", merged);
  mkdir (path, 0755);
  if (mount ("tmpfs", path, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755") < 0)
    fail (log_fd, "/dev");
  bind_dev (merged, "null");
  bind_dev (merged, "zero");
  bind_dev (merged, "urandom");
  bind_dev (merged, "random");
  if (pipe2 (sync, O_CLOEXEC) < 0 || pipe2 (go, O_CLOEXEC) < 0)
    fail (log_fd, "pipe");
  /* A chrooted process may not make a user namespace: the commands' process
     makes it first, then enters the overlay by this descriptor (the path
     to it crosses root's 0700 directories its ids may not search). */
  root = open (merged, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    fail (log_fd, "the overlay");
  /* the commands' process is the init of a PID namespace: whatever they
     leave running dies with it */
  if (unshare (CLONE_NEWPID) < 0)
    fail (log_fd, "the PID namespace");
  pid = fork ();
  if (pid == 0)
    {
      int keep[] = {log_fd, status_fd, root, sync[1], go[0]};
      close_except (keep, 5);
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

/* Run the recipe's commands over the layer at `lower`; their changes are
   left as a layer at build/layers/KEY. 0, or -1 with err (the failing
   command for SBX_E_INVALID). */
static int
run_commands (int build, const char *build_path, const char *lower, const char *key,
              char *cmds[], int ncmds, const char *mirror, int log_fd, sbx_error_t **err)
{
  char allow[256];
  const char *h = strstr (mirror, "://");
  char run_path[1200], upper[1300], tail[600];
  static const char *const dirs[] = {"run", "run/upper", "run/work", "run/lower", "run/merged"};
  void *filter = NULL;
  size_t filter_len = 0;
  sbx_error_t *ferr = NULL;
  int status[2], st = 0, bad = 0, code = 0;
  uint64_t bytes = 0;
  pid_t pid;
  time_t end = time (NULL) + RUN_TIMEOUT_S;

  /* the mirror's host[:port], the one entry of the commands' policy */
  h = h ? h + 3 : mirror;
  snprintf (allow, sizeof allow, "%.*s", (int) strcspn (h, "/"), h);
  snprintf (run_path, sizeof run_path, "%s/run", build_path);
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (mkdirat (build, dirs[i], 0755) < 0)
      return sbx_err_sys (err, errno, "recipe: mkdir %s", dirs[i]);
  /* the upper's root is the image's /: root's inside */
  if (fchownat (build, "run/upper", RUN_ID_BASE, RUN_ID_BASE, 0) < 0)
    return sbx_err_sys (err, errno, "recipe: chown the upper");
  /* compiled here: the child of a threaded process must not allocate */
  if (sbx_seccomp_build (&filter, &filter_len, &ferr) < 0)
    {
      sbx_error_free (ferr);
      return sbx_err (err, SBX_E_SYSTEM, "recipe: the build sandbox's seccomp filter");
    }
  if (pipe2 (status, O_CLOEXEC) < 0)
    {
      free (filter);
      return sbx_err_sys (err, errno, "pipe");
    }
  dprintf (log_fd, "sbx: running %d build command%s in a build sandbox (network: %s only)\n",
           ncmds, ncmds == 1 ? "" : "s", allow);
  pid = fork ();
  if (pid == 0)
    {
      struct rlimit fsz = {RUN_MAX_BYTES, RUN_MAX_BYTES};
      close (status[0]);
      setrlimit (RLIMIT_FSIZE, &fsz);
      keeper (lower, run_path, cmds, ncmds, log_fd, status[1], filter, filter_len, allow);
      _exit (126);
    }
  free (filter);
  close (status[1]);
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
          kill (-pid, SIGKILL);
          kill (pid, SIGKILL);
        }
      usleep (100 * 1000);
    }
  code = WIFEXITED (st) ? WEXITSTATUS (st) : 126;
  if (code >= 1 && code <= ncmds)
    {
      char buf[32] = "";
      ssize_t n = read (status[0], buf, sizeof buf - 1);
      close (status[0]);
      buf[n > 0 ? n : 0] = '\0';
      /* 512 bytes reach the client: the command's start, the output's end */
      log_tail (log_fd, 5, tail, 300);
      return sbx_err (err, SBX_E_INVALID, "recipe: run[%d] `%.100s%s` exited with status %d: %s",
                      code - 1, cmds[code - 1], strlen (cmds[code - 1]) > 100 ? "..." : "",
                      atoi (buf), tail[0] ? tail : "(no output)");
    }
  close (status[0]);
  if (code != 0)
    {
      log_tail (log_fd, 3, tail, sizeof tail);
      return sbx_err (err, SBX_E_SYSTEM, "recipe: the build sandbox failed (%d): %s", code, tail);
    }
  /* the upper as a layer: root's, no setuid, whiteouts kept, no devices */
  {
    int fd = openat (build, "run/upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return sbx_err_sys (err, errno, "recipe: the upper");
    sanitize_upper (fd, 0, &bytes, &bad);
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

static void
hex_sha256 (const char *prefix, const char *a, const char *b, char out[65])
{
  static const char digits[] = "0123456789abcdef";
  unsigned char md[32];
  unsigned mdlen = 0;
  EVP_MD_CTX *h = EVP_MD_CTX_new ();

  EVP_DigestInit_ex (h, EVP_sha256 (), NULL);
  EVP_DigestUpdate (h, prefix, strlen (prefix));
  EVP_DigestUpdate (h, a, strlen (a));
  EVP_DigestUpdate (h, "\n", 1);
  EVP_DigestUpdate (h, b, strlen (b));
  EVP_DigestFinal_ex (h, md, &mdlen);
  EVP_MD_CTX_free (h);
  for (int i = 0; i < 32; i++)
    {
      out[2 * i] = digits[md[i] >> 4];
      out[2 * i + 1] = digits[md[i] & 15];
    }
  out[64] = '\0';
}

/* In the build directory `build` (path `build_path`): layers/KEY (from the
   cache or debootstrap), result and meta.json, as the extractor leaves
   them. 0, or -1 with err. */
int
sbx_tmpl_recipe_build (int in_fd, int build, const char *build_path, const char *mirror,
                       const char *cache_dir, int progress_fd, int store_layers,
                       sbx_error_t **err)
{
  char text[RECIPE_MAX + 1], release[72], include[RECIPE_MAX], key[65], reason[400];
  char target[1200], cached[1200], result[300], meta[] = "{\"source\":\"recipe\",\"env\":[]}";
  char run_key[65] = "", *cmds[SBX_TMPL_RUN_MAX], lower[1300];
  char run_text[RECIPE_MAX + 1];
  uint64_t run_bytes = 0;
  int ncmds = 0, stored = 0;
  cleanup_close int log_fd = -1, layers = -1;
  uint64_t bytes = 0;
  ssize_t n = pread (in_fd, text, RECIPE_MAX, 0);
  struct stat st;
  int rc, fd;

  if (n <= 0 || n >= RECIPE_MAX)
    return sbx_err (err, SBX_E_INVALID, "the recipe is empty or larger than %d bytes", RECIPE_MAX);
  text[n] = '\0';
  if (memchr (text, '\0', (size_t) n) != NULL
      || sbx_tmpl_recipe_parse (text, release, sizeof release, include, sizeof include) < 0)
    return sbx_err (err, SBX_E_INVALID, "malformed recipe");
  /* The debootstrap layer is keyed by the release and packages alone (a
     recipe that adds commands reuses it); the commands' layer by the
     whole recipe. */
  {
    char *r = strstr (text, "\nrun ");
    if (r != NULL)
      {
        char *c = r + 1;
        r[1] = '\0';
        hex_sha256 ("sbx-recipe-v1\n", text, mirror, key);
        r[1] = 'r';
        while (*c && ncmds < SBX_TMPL_RUN_MAX)
          {
            char *nl = strchr (c, '\n');
            /* parsed above: "run CMD\n" lines to the end */
            cmds[ncmds++] = c + 4;
            c = nl + 1;
          }
        hex_sha256 ("sbx-recipe-run-v1\n", text, mirror, run_key);
      }
    else
      hex_sha256 ("sbx-recipe-v1\n", text, mirror, key);
  }
  if (mkdirat (build, "layers", 0700) < 0
      || (layers = openat (build, "layers", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    return sbx_err_sys (err, errno, "recipe: mkdir");
  snprintf (target, sizeof target, "%s/layers/%s", build_path, key);
  snprintf (cached, sizeof cached, "%s/%s", cache_dir, key);
  /* debootstrap's output: the progress file clients may read, or a log of
     the build's own */
  log_fd = progress_fd >= 0 ? fcntl (progress_fd, F_DUPFD_CLOEXEC, 3)
                            : openat (build, "log", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (log_fd < 0)
    return sbx_err_sys (err, errno, "recipe: log");
  if ((fd = openat (store_layers, key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
    {
      /* built before by this daemon: the stored layer is the result (the
         commit keeps it and takes nothing from this build) */
      dprintf (log_fd, "sbx: the layer %.12s is stored already\n", key);
      bytes = tree_bytes (fd, 0);
      close (fd);
      stored = 1;
      goto commands;
    }
  if (cache_dir[0] && stat (cached, &st) == 0 && S_ISDIR (st.st_mode) && st.st_uid == 0)
    {
      char *const cp[] = {(char *) (uintptr_t) "/bin/cp", (char *) (uintptr_t) "-a",
                          (char *) (uintptr_t) "--reflink=auto", cached, target, NULL};
      sbx_info ("templates: recipe %.12s from the cache", key);
      dprintf (log_fd, "sbx: copying the cached build %.12s\n", key);
      if (run (cp, log_fd, BUILD_TIMEOUT_S) != 0)
        return sbx_err (err, SBX_E_SYSTEM, "recipe: copying the cached build failed");
    }
  else
    {
      char inc[RECIPE_MAX + 16], mir[600];
      char *argv[8];
      int i = 0;
      snprintf (inc, sizeof inc, "--include=%s", include);
      snprintf (mir, sizeof mir, "%s", mirror);
      argv[i++] = (char *) (uintptr_t) "/usr/sbin/debootstrap";
      argv[i++] = (char *) (uintptr_t) "--variant=minbase";
      if (include[0])
        argv[i++] = inc;
      argv[i++] = release;
      argv[i++] = target;
      argv[i++] = mir;
      argv[i] = NULL;
      sbx_info ("templates: debootstrap %s (%s) from %s", release, include[0] ? include : "-",
                mirror);
      dprintf (log_fd, "sbx: debootstrap %s (%s) from %s\n", release,
               include[0] ? include : "no extra packages", mirror);
      rc = run (argv, log_fd, BUILD_TIMEOUT_S);
      if (rc != 0)
        {
          log_reason (log_fd, reason, sizeof reason);
          return sbx_err (err, rc == 1 ? SBX_E_INVALID : SBX_E_SYSTEM, "%s", reason);
        }
      /* debootstrap's own apt lists and .debs are not part of the image */
      {
        char pat[1300];
        char *rm[7];
        snprintf (pat, sizeof pat, "%s/var/cache/apt/archives/*.deb", target);
        rm[0] = (char *) (uintptr_t) "/usr/bin/find";
        rm[1] = target;
        rm[2] = (char *) (uintptr_t) "-xdev";
        rm[3] = (char *) (uintptr_t) "-path";
        rm[4] = pat;
        rm[5] = (char *) (uintptr_t) "-delete";
        rm[6] = NULL;
        run (rm, log_fd, 600);
      }
    }
  fd = openat (layers, key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys (err, errno, "recipe: the built tree");
  dprintf (log_fd, "sbx: making the layer (root's files, no setuid, no device nodes)\n");
  sanitize (fd, 0, &bytes);
  close (fd);
  if (fchmodat (layers, key, 0755, 0) < 0)
    return sbx_err_sys (err, errno, "recipe: the built tree");
  if (cache_dir[0] && stat (cached, &st) < 0)
    {
      /* cp into a temporary name, then rename: a half copy is never used */
      char tmp[1300];
      char *const cp[] = {(char *) (uintptr_t) "/bin/cp", (char *) (uintptr_t) "-a",
                          (char *) (uintptr_t) "--reflink=auto", target, tmp, NULL};
      snprintf (tmp, sizeof tmp, "%s/.tmp-%s-%d", cache_dir, key, (int) getpid ());
      dprintf (log_fd, "sbx: keeping a copy in the recipe cache\n");
      mkdir (cache_dir, 0700);
      if (run (cp, log_fd, BUILD_TIMEOUT_S) != 0 || rename (tmp, cached) < 0)
        sbx_warn ("templates: could not cache recipe %.12s in `%s`", key, cache_dir);
    }
commands:
  if (ncmds > 0)
    {
      char cached_run[1200];
      snprintf (cached_run, sizeof cached_run, "%s/%s", cache_dir, run_key);
      if ((fd = openat (store_layers, run_key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
          >= 0)
        {
          dprintf (log_fd, "sbx: the commands' layer %.12s is stored already\n", run_key);
          run_bytes = tree_bytes (fd, 0);
          close (fd);
        }
      else if (cache_dir[0] && stat (cached_run, &st) == 0 && S_ISDIR (st.st_mode)
               && st.st_uid == 0)
        {
          char run_target[1300];
          char *const cp[] = {(char *) (uintptr_t) "/bin/cp", (char *) (uintptr_t) "-a",
                              (char *) (uintptr_t) "--reflink=auto", cached_run, run_target, NULL};
          snprintf (run_target, sizeof run_target, "%s/layers/%s", build_path, run_key);
          dprintf (log_fd, "sbx: copying the cached commands' layer %.12s\n", run_key);
          if (run (cp, log_fd, BUILD_TIMEOUT_S) != 0)
            return sbx_err (err, SBX_E_SYSTEM, "recipe: copying the cached build failed");
          fd = openat (layers, run_key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          run_bytes = fd >= 0 ? tree_bytes (fd, 0) : 0;
          if (fd >= 0)
            close (fd);
        }
      else
        {
          if (stored)
            snprintf (lower, sizeof lower, "/proc/self/fd/%d/%s", store_layers, key);
          else
            snprintf (lower, sizeof lower, "%s", target);
          memcpy (run_text, text, sizeof run_text);
          for (char *c = run_text; (c = strchr (c, '\n')) != NULL; c++)
            *c = '\0';
          /* cmds point into text: terminate them at their newlines */
          for (int i = 0; i < ncmds; i++)
            cmds[i] = run_text + (cmds[i] - text);
          if (run_commands (build, build_path, lower, run_key, cmds, ncmds, mirror, log_fd, err) < 0)
            return -1;
          fd = openat (layers, run_key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          run_bytes = fd >= 0 ? tree_bytes (fd, 0) : 0;
          if (fd >= 0)
            close (fd);
          if (cache_dir[0] && stat (cached_run, &st) < 0)
            {
              char tmp[1300], src[1300];
              char *const cp[] = {(char *) (uintptr_t) "/bin/cp", (char *) (uintptr_t) "-a",
                                  (char *) (uintptr_t) "--reflink=auto", src, tmp, NULL};
              snprintf (src, sizeof src, "%s/layers/%s", build_path, run_key);
              snprintf (tmp, sizeof tmp, "%s/.tmp-%s-%d", cache_dir, run_key, (int) getpid ());
              mkdir (cache_dir, 0700);
              if (run (cp, log_fd, BUILD_TIMEOUT_S) != 0 || rename (tmp, cached_run) < 0)
                sbx_warn ("templates: could not cache recipe %.12s in `%s`", run_key, cache_dir);
            }
        }
    }
  snprintf (result, sizeof result, "layer %s %llu\n", key, (unsigned long long) bytes);
  if (ncmds > 0)
    snprintf (result + strlen (result), sizeof result - strlen (result), "layer %s %llu\n",
              run_key, (unsigned long long) run_bytes);
  fd = openat (build, "result", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write (fd, result, strlen (result)) != (ssize_t) strlen (result))
    {
      if (fd >= 0)
        close (fd);
      return sbx_err_sys (err, errno, "recipe: result");
    }
  close (fd);
  fd = openat (build, "meta.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write (fd, meta, strlen (meta)) != (ssize_t) strlen (meta))
    {
      if (fd >= 0)
        close (fd);
      return sbx_err_sys (err, errno, "recipe: meta");
    }
  close (fd);
  return 0;
}
