/* sbx: copying a sandbox's disk as root (fork, snapshots).
 *
 * The tree was written by the sandbox: hostile. The source sandbox is
 * frozen while we copy (no process of it runs, so nothing in the tree
 * changes under us but through the API, which waits), and the copy never
 * trusts a name: every step is relative to a directory fd, every open is
 * O_NOFOLLOW of one name read from that directory, and what is opened
 * must be the inode fstatat saw. Symbolic links are copied as links (their
 * target text, never followed: inside the new sandbox they resolve in its
 * own root); FIFOs, sockets and device nodes are skipped and counted;
 * owners are moved from the source's id range to the target's (an owner
 * outside the source's 65536 ids stops the copy); depth is bounded. Hard
 * links become separate files, extended attributes are not copied, holes
 * are kept, a name the target has already is the source's after the copy
 * (clear_name), and the data copied is capped (the caller's bound: what the
 * source's disk holds), as is each file's size (RLIMIT_FSIZE).
 *
 * The copy runs in a child of the privileged parent that first joins the
 * target sandbox's cgroup: the pages it writes into the target's tmpfs are
 * charged to that sandbox's memory limit, as if it had written them.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iso/copy.h"
#include "iso/helper.h"
#include "util/cleanup.h"

#define COPY_MAX_DEPTH 128
#define IDS 65536u

struct copy_ctx
{
  uid_t src_base, dst_base;
  struct sbx_copy_result *res;
  uint64_t max_bytes; /* of data in all, 0: no cap */
  unsigned depth;
  /* Off the stack: the copier runs on a server thread's (small) stack,
     and copy_entry recurses once per directory level. */
  char buf[65536];
  char target[PATH_MAX];
};

static int fail (struct copy_ctx *c, int e, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
fail (struct copy_ctx *c, int e, const char *fmt, ...)
{
  va_list ap;

  if (c->res->sys_errno == 0)
    {
      c->res->sys_errno = e ? e : EIO;
      va_start (ap, fmt);
      vsnprintf (c->res->what, sizeof c->res->what, fmt, ap);
      va_end (ap);
    }
  return -1;
}

static int
map_ids (struct copy_ctx *c, const struct stat *st, uid_t *uid, gid_t *gid, const char *name)
{
  if (st->st_uid < c->src_base || st->st_uid - c->src_base >= IDS || st->st_gid < c->src_base
      || st->st_gid - c->src_base >= IDS)
    return fail (c, EPERM, "`%.200s` has an owner outside the sandbox's ids", name);
  *uid = c->dst_base + (st->st_uid - c->src_base);
  *gid = c->dst_base + (st->st_gid - c->src_base);
  return 0;
}

/* Owner, mode and times of an open file or directory. */
static int
set_attrs (struct copy_ctx *c, int fd, const struct stat *st, const char *name)
{
  uid_t uid;
  gid_t gid;
  struct timespec times[2] = {st->st_atim, st->st_mtim};

  if (map_ids (c, st, &uid, &gid, name) < 0)
    return -1;
  if (fchown (fd, uid, gid) < 0)
    return fail (c, errno, "set the owner of `%.200s`", name);
  /* After chown, which clears set-id bits. */
  if (fchmod (fd, st->st_mode & 07777) < 0)
    return fail (c, errno, "set the mode of `%.200s`", name);
  if (futimens (fd, times) < 0)
    return fail (c, errno, "set the times of `%.200s`", name);
  return 0;
}

static int
same_inode (int fd, const struct stat *seen)
{
  struct stat st;

  return fstat (fd, &st) == 0 && st.st_ino == seen->st_ino && st.st_dev == seen->st_dev
         && (st.st_mode & S_IFMT) == (seen->st_mode & S_IFMT);
}

/* Bytes [from, from + len) of in, to the same offsets of out. */
static int
copy_range (struct copy_ctx *c, int in, int out, off_t from, off_t len, const char *name)
{
  off_t at = from;

  if (lseek (out, from, SEEK_SET) < 0)
    return fail (c, errno, "seek in `%.200s`", name);
  while (at < from + len)
    {
      size_t want = (size_t) (from + len - at < (1 << 20) ? from + len - at : (1 << 20));
      ssize_t n;

      if (c->max_bytes && c->res->bytes + want > c->max_bytes)
        return fail (c, EFBIG, "`%.200s`: more data than the source's disk holds", name);
      n = sendfile (out, in, &at, want);
      if (n > 0)
        {
          c->res->bytes += (uint64_t) n;
          continue;
        }
      if (n == 0)
        return 0; /* the file shrank under us: what is there is copied */
      if (errno == EINTR)
        continue;
      if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
        return fail (c, errno, "the target's disk is full (copying `%.200s`)", name);
      return fail (c, errno, "copy `%.200s`", name);
    }
  return 0;
}

/* The data of in into out, holes kept (SEEK_DATA, SEEK_HOLE): a sparse
   file a sandbox made with one ftruncate is not written out as zeros
   (which made a snapshot of a sandbox using 4 KiB write gigabytes to the
   host's disk). Its size is set last, so that a hole at the end stays
   one; a size past RLIMIT_FSIZE (the target's disk) is refused. */
static int
copy_data (struct copy_ctx *c, int in, int out, const struct stat *st, const char *name)
{
  off_t pos = 0;

  while (pos < st->st_size)
    {
      off_t data = lseek (in, pos, SEEK_DATA), hole;

      if (data < 0 && errno == ENXIO)
        break; /* nothing but a hole from pos on */
      if (data < 0)
        {
          /* A file system without SEEK_DATA: the whole file is data. */
          if (errno != EINVAL || pos != 0)
            return fail (c, errno, "seek in `%.200s`", name);
          data = 0;
          hole = st->st_size;
        }
      else if ((hole = lseek (in, data, SEEK_HOLE)) < 0)
        return fail (c, errno, "seek in `%.200s`", name);
      if (hole > st->st_size)
        hole = st->st_size;
      if (hole > data && copy_range (c, in, out, data, hole - data, name) < 0)
        return -1;
      pos = hole > data ? hole : data + 1;
    }
  if (ftruncate (out, st->st_size) < 0)
    return fail (c, errno == EFBIG ? EFBIG : errno,
                 errno == EFBIG ? "`%.200s` is larger than the target's disk"
                                : "set the size of `%.200s`",
                 name);
  return 0;
}

static int copy_dir (struct copy_ctx *c, int sfd, int dfd);

/* The target is a sandbox just made, whose own processes may have written
   some of these names already (a code interpreter's server its ~/.cache,
   before a fork's or a snapshot's copy arrives): the source's entry wins.
   A directory there is copied into; anything else of that name is
   removed first (unlinkat never follows a link, and every step stays
   relative to dfd). A directory where the source has a file or a link is
   not emptied for it: the copy stops and names it. */
static int
clear_name (struct copy_ctx *c, int dfd, const char *name)
{
  if (unlinkat (dfd, name, 0) == 0 || errno == ENOENT)
    return 0;
  return fail (c, errno, errno == EISDIR ? "`%.200s` is a directory in the target"
                                         : "replace `%.200s` in the target",
               name);
}

static int
copy_entry (struct copy_ctx *c, int sfd, int dfd, const char *name)
{
  struct stat st;
  uid_t uid;
  gid_t gid;

  if (fstatat (sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : fail (c, errno, "stat `%.200s`", name);
  if (S_ISDIR (st.st_mode))
    {
      cleanup_close int s = -1, d = -1;
      if (c->depth >= COPY_MAX_DEPTH)
        return fail (c, ELOOP, "`%.200s`: directories nested deeper than 128 levels", name);
      s = openat (sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (s < 0 || !same_inode (s, &st))
        return fail (c, s < 0 ? errno : ESTALE, "open directory `%.200s`", name);
      if (mkdirat (dfd, name, 0700) < 0 && errno != EEXIST)
        return fail (c, errno, errno == ENOSPC ? "the target's disk is full (at `%.200s`)"
                                               : "make directory `%.200s`",
                     name);
      d = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (d < 0 && (errno == ENOTDIR || errno == ELOOP))
        {
          /* A file or a link of that name (O_NOFOLLOW: never entered). */
          if (clear_name (c, dfd, name) < 0)
            return -1;
          if (mkdirat (dfd, name, 0700) < 0)
            return fail (c, errno, "make directory `%.200s`", name);
          d = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
      if (d < 0)
        return fail (c, errno, "open new directory `%.200s`", name);
      c->depth++;
      if (copy_dir (c, s, d) < 0)
        return -1;
      c->depth--;
      c->res->dirs++;
      return set_attrs (c, d, &st, name);
    }
  if (S_ISREG (st.st_mode))
    {
      cleanup_close int in = -1, out = -1;
      /* O_NONBLOCK: were it swapped for a FIFO, the open must not wait. */
      in = openat (sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (in < 0 || !same_inode (in, &st))
        return fail (c, in < 0 ? errno : ESTALE, "open `%.200s`", name);
      out = openat (dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (out < 0 && errno == EEXIST)
        {
          if (clear_name (c, dfd, name) < 0)
            return -1;
          out = openat (dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        }
      if (out < 0)
        return fail (c, errno, errno == ENOSPC ? "the target's disk is full (at `%.200s`)"
                                               : "create `%.200s`",
                     name);
      if (copy_data (c, in, out, &st, name) < 0)
        return -1;
      c->res->files++;
      return set_attrs (c, out, &st, name);
    }
  if (S_ISLNK (st.st_mode))
    {
      char *target = c->target;
      struct timespec times[2] = {st.st_atim, st.st_mtim};
      ssize_t n = readlinkat (sfd, name, target, sizeof c->target - 1);
      if (n < 0)
        return fail (c, errno, "read link `%.200s`", name);
      target[n] = '\0';
      int made = symlinkat (target, dfd, name);
      if (made < 0 && errno == EEXIST)
        {
          if (clear_name (c, dfd, name) < 0)
            return -1;
          made = symlinkat (target, dfd, name);
        }
      if (made < 0)
        return fail (c, errno, errno == ENOSPC ? "the target's disk is full (at `%.200s`)"
                                               : "make link `%.200s`",
                     name);
      if (map_ids (c, &st, &uid, &gid, name) < 0)
        return -1;
      if (fchownat (dfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0
          || utimensat (dfd, name, times, AT_SYMLINK_NOFOLLOW) < 0)
        return fail (c, errno, "set the owner of link `%.200s`", name);
      c->res->symlinks++;
      return 0;
    }
  /* FIFOs, sockets, device nodes: not copied. */
  c->res->skipped++;
  return 0;
}

static int
copy_dir (struct copy_ctx *c, int sfd, int dfd)
{
  int fd = fcntl (sfd, F_DUPFD_CLOEXEC, 3);
  DIR *dir;
  struct dirent *de;
  int rc = 0;

  if (fd < 0)
    return fail (c, errno, "%s", "dup");
  dir = fdopendir (fd);
  if (dir == NULL)
    {
      close (fd);
      return fail (c, errno, "%s", "read directory");
    }
  /* A dup shares the caller's offset: from the first entry, whatever an
     earlier listing of the same descriptor left it at. */
  rewinddir (dir);
  for (;;)
    {
      errno = 0;
      de = readdir (dir);
      if (de == NULL)
        {
          if (errno)
            rc = fail (c, errno, "%s", "read directory");
          break;
        }
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (copy_entry (c, sfd, dfd, de->d_name) < 0)
        {
          rc = -1;
          break;
        }
    }
  closedir (dir);
  return rc;
}

void
sbx_copy_tree_now (int src_dir, int dst_dir, uid_t src_base, uid_t dst_base,
                   const struct sbx_copy_limits *lim, struct sbx_copy_result *res)
{
  struct copy_ctx *c = malloc (sizeof *c);
  struct stat st;

  if (c == NULL)
    {
      res->sys_errno = ENOMEM;
      snprintf (res->what, sizeof res->what, "out of memory");
      return;
    }
  c->src_base = src_base;
  c->dst_base = dst_base;
  c->res = res;
  c->max_bytes = lim ? lim->max_bytes : 0;
  c->depth = 0;
  if (fstat (src_dir, &st) < 0)
    fail (c, errno, "%s", "stat the source");
  else if (copy_dir (c, src_dir, dst_dir) == 0)
    set_attrs (c, dst_dir, &st, "/");
  free (c);
}

/* The copier creates files in a tmpfs that belongs to the target's user
   namespace: the kernel refuses (EOVERFLOW) a creator whose fs ids it
   cannot map there, as host root's are not. So the fs ids become the
   target's root (dst_base), and the capabilities that change drops from
   the effective set (capabilities(7)) are raised again from the permitted
   one: reading the source's 0600 files and setting owners still needs
   them. */
static int
become_writer (uid_t id)
{
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];

  setfsgid (id);
  setfsuid (id);
  if ((uid_t) setfsuid ((uid_t) -1) != id || (gid_t) setfsgid ((gid_t) -1) != id)
    return -1;
  if (syscall (SYS_capget, &hdr, data) < 0)
    return -1;
  data[0].effective = data[0].permitted;
  data[1].effective = data[1].permitted;
  return (int) syscall (SYS_capset, &hdr, data);
}

int
sbx_copy_run (const struct sbx_copy_job *jobs, size_t njobs, uid_t src_base, uid_t dst_base,
              const struct sbx_copy_limits *lim,
              int (*enter) (void *arg, pid_t pid), void *enter_arg,
              struct sbx_copy_result *res, sbx_error_t **err)
{
  int pipefd[2], go[2], status = 0, joined;
  pid_t pid;
  ssize_t n;
  size_t i;

  memset (res, 0, sizeof *res);
  if (pipe2 (pipefd, O_CLOEXEC) < 0)
    return sbx_err_sys (err, errno, "pipe");
  if (pipe2 (go, O_CLOEXEC) < 0)
    {
      int e = errno;
      close (pipefd[0]);
      close (pipefd[1]);
      return sbx_err_sys (err, e, "pipe");
    }
  pid = sbx_helper_fork_all ();
  if (pid < 0)
    {
      int e = errno;
      close (pipefd[0]);
      close (pipefd[1]);
      close (go[0]);
      close (go[1]);
      return sbx_err_sys (err, e, "fork the copier");
    }
  if (pid == 0)
    {
      struct sbx_copy_result r;
      sigset_t none;
      memset (&r, 0, sizeof r);
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      close (pipefd[0]);
      close (go[1]);
      /* No file larger than the target's disk: write and ftruncate say
         EFBIG (not the signal) past it. */
      if (lim && lim->max_file)
        {
          struct rlimit fsize = {lim->max_file, lim->max_file};
          signal (SIGXFSZ, SIG_IGN);
          setrlimit (RLIMIT_FSIZE, &fsize);
        }
      int keep[16], nkeep = 0;

      /* First nothing of ours but its pipes and the jobs' directories:
         the daemon's locks least of all (issue 16: a copier that kept
         them blocked the next start). It dies with us (helper.h). Then
         it waits for us to put it in its cgroup: no page is written
         before it is charged there. */
      keep[nkeep++] = pipefd[1];
      keep[nkeep++] = go[0];
      for (i = 0; i < njobs && nkeep + 2 <= 16; i++)
        {
          keep[nkeep++] = jobs[i].src;
          keep[nkeep++] = jobs[i].dst;
        }
      assert (i == njobs);
      sbx_helper_close_all_but (keep, (size_t) nkeep);
      do
        n = read (go[0], &joined, sizeof joined);
      while (n < 0 && errno == EINTR);
      close (go[0]);
      if (n != (ssize_t) sizeof joined)
        _exit (2);
      if (joined != 0)
        {
          r.sys_errno = joined;
          snprintf (r.what, sizeof r.what, "join the target's cgroup");
        }
      if (r.sys_errno)
        ;
      else if (become_writer (dst_base) < 0)
        {
          r.sys_errno = errno ? errno : EPERM;
          snprintf (r.what, sizeof r.what, "take the target's ids");
        }
      for (i = 0; i < njobs && r.sys_errno == 0; i++)
        sbx_copy_tree_now (jobs[i].src, jobs[i].dst, src_base, dst_base, lim, &r);
      if (write (pipefd[1], &r, sizeof r) != (ssize_t) sizeof r)
        _exit (2);
      _exit (0);
    }
  close (pipefd[1]);
  close (go[0]);
  joined = 0;
  if (enter && enter (enter_arg, pid) < 0)
    joined = errno ? errno : EIO;
  if (write (go[1], &joined, sizeof joined) != (ssize_t) sizeof joined)
    kill (pid, SIGKILL); /* it then ends without an answer: "the copier died" */
  close (go[1]);
  do
    n = read (pipefd[0], res, sizeof *res);
  while (n < 0 && errno == EINTR);
  close (pipefd[0]);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (n != (ssize_t) sizeof *res || !WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      memset (res, 0, sizeof *res);
      return sbx_err (err, SBX_E_SYSTEM, "the copier died");
    }
  res->what[sizeof res->what - 1] = '\0';
  if (res->sys_errno)
    {
      int full = res->sys_errno == ENOSPC || res->sys_errno == EDQUOT || res->sys_errno == EFBIG;
      return sbx_err_errno (err,
                            full ? SBX_E_TOO_LARGE
                            : (res->sys_errno == ELOOP || res->sys_errno == EPERM)
                                ? SBX_E_INVALID
                                : SBX_E_SYSTEM,
                            res->sys_errno, "copy: %s", res->what);
    }
  return 0;
}
