/* sbx: the directory watch helper's own work (iso/proto.h SBX_MSG_WATCH):
 * inotify on a directory (and its tree), records (struct sbx_watch_rec) to
 * stdout. Shared by the namespace engine's helper, which init forks
 * (iso/init/watch.c), and a VM's, which the guest agent runs as a file
 * operation (vm/agent_watch.c): both engines' watches walk, name, limit
 * and fail alike. The caller has put up the walls (user, no capabilities,
 * limits) and fd 1 is the stream; nothing here trusts the caller beyond
 * that.
 */
#include "iso/init/watch_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WATCH_MASK                                                                                 \
  (IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF    \
   | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

/* The watched directories, sorted by watch descriptor; path is relative to
   the watched directory ("" for itself). */
struct dir
{
  int wd;
  size_t len;
  char *path; /* owned */
};

static struct dir *dirs;
static size_t ndirs;
static int ino = -1, recursive;
/* The watched directory: where it was, and which it is. No descriptor of
   it (nor a working directory in the tree) is kept: the kernel reports a
   directory's deletion (IN_DELETE_SELF, IN_IGNORED) only once nothing
   holds it, so a helper holding it would never see its end. */
static char top_path[SBX_WATCH_PATH_MAX];
static dev_t top_dev;
static ino_t top_ino;

static unsigned char out[65536];
static size_t out_len;

/* ---- records ------------------------------------------------------------ */

static void
flush_out (void)
{
  size_t off = 0;

  while (off < out_len)
    {
      ssize_t n = write (OUT_FD, out + off, out_len - off);
      if (n < 0 && errno == EINTR)
        continue;
      /* The reader is gone (the daemon stopped the watch, or went away):
         nobody wants what follows. */
      if (n <= 0)
        _exit (0);
      off += (size_t) n;
    }
  out_len = 0;
}

static void
emit_raw (uint16_t type, const void *data, size_t len)
{
  struct sbx_watch_rec rec;

  if (out_len + sizeof rec + len > sizeof out)
    flush_out ();
  rec.type = type;
  rec.len = (uint16_t) len;
  memcpy (out + out_len, &rec, sizeof rec);
  if (len)
    memcpy (out + out_len + sizeof rec, data, len);
  out_len += sizeof rec + len;
}

static void
emit (uint16_t type, const char *name, size_t len)
{
  /* A name that does not fit a record cannot be told: say events were
     lost rather than report a cut name. */
  if (len > SBX_WATCH_NAME_MAX)
    {
      type = SBX_WREC_OVERFLOW;
      len = 0;
    }
  emit_raw (type, name, len);
}

void
sbx_watch_run_fail (int sys_errno)
{
  int32_t e = sys_errno;

  out_len = 0;
  emit_raw (SBX_WREC_FAILED, &e, sizeof e);
  flush_out ();
  _exit (1);
}

/* ---- the table of watched directories ------------------------------------ */

static ssize_t
find_wd (int wd)
{
  size_t lo = 0, hi = ndirs;

  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (dirs[mid].wd == wd)
        return (ssize_t) mid;
      if (dirs[mid].wd < wd)
        lo = mid + 1;
      else
        hi = mid;
    }
  return -1;
}

/* 0 added (or already known: one inode reached twice), -ENOSPC over the
   limit, -ENOMEM. */
static int
add_entry (int wd, const char *path, size_t len)
{
  size_t pos;
  char *copy;

  if (find_wd (wd) >= 0)
    return 0;
  if (ndirs >= SBX_WATCH_MAX_DIRS)
    return -ENOSPC;
  if (dirs == NULL && (dirs = calloc (SBX_WATCH_MAX_DIRS, sizeof *dirs)) == NULL)
    return -ENOMEM;
  copy = malloc (len + 1);
  if (copy == NULL)
    return -ENOMEM;
  memcpy (copy, path, len);
  copy[len] = '\0';
  /* Descriptors grow, so this is nearly always the end. */
  for (pos = ndirs; pos > 0 && dirs[pos - 1].wd > wd; pos--)
    ;
  memmove (&dirs[pos + 1], &dirs[pos], (ndirs - pos) * sizeof *dirs);
  dirs[pos].wd = wd;
  dirs[pos].len = len;
  dirs[pos].path = copy;
  ndirs++;
  return 0;
}

static void
drop_entry (size_t i)
{
  free (dirs[i].path);
  memmove (&dirs[i], &dirs[i + 1], (ndirs - i - 1) * sizeof *dirs);
  ndirs--;
}

/* A directory moved out of the tree (or elsewhere in it, where it will be
   added again under its new name): stop watching it and what is below. */
static void
drop_subtree (const char *path, size_t len)
{
  size_t i = 0;

  while (i < ndirs)
    if (dirs[i].len >= len && memcmp (dirs[i].path, path, len) == 0
        && (dirs[i].len == len || dirs[i].path[len] == '/'))
      {
        inotify_rm_watch (ino, dirs[i].wd);
        drop_entry (i);
      }
    else
      i++;
}

/* ---- adding directories -------------------------------------------------- */

/* Open a directory of the tree by its relative path, beneath the watched
   directory only: no symlink, no other mount (a recursive watch of / does
   not descend into /proc or /usr), no "..". The watched directory is
   opened again by the path it had, and must be the same directory. */
static int
open_rel (const char *rel)
{
  struct open_how how;
  struct stat st;
  int fd, t;

  t = open (top_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (t < 0)
    return -1;
  if (fstat (t, &st) < 0 || st.st_dev != top_dev || st.st_ino != top_ino)
    {
      /* Moved away, and something else has its name now. */
      close (t);
      errno = ESTALE;
      return -1;
    }
  memset (&how, 0, sizeof how);
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  do
    fd = (int) syscall (SYS_openat2, t, rel[0] ? rel : ".", &how, sizeof how);
  while (fd < 0 && (errno == EINTR || errno == EAGAIN));
  close (t);
  return fd;
}

/* Watch the directory fd is open on, through our working directory, which
   is left at / again (see top_path). */
static int
add_watch_fd (int fd)
{
  int wd, e;

  if (fchdir (fd) < 0)
    return -1;
  wd = inotify_add_watch (ino, ".", WATCH_MASK);
  e = errno;
  if (chdir ("/") < 0)
    _exit (EIO);
  errno = e;
  return wd;
}

struct queue
{
  char **items;
  size_t head, len, cap;
};

static int
queue_push (struct queue *q, const char *path, size_t len)
{
  char *copy;

  if (q->len == q->cap)
    {
      size_t cap = q->cap ? q->cap * 2 : 64;
      char **grown = realloc (q->items, cap * sizeof *grown);
      if (grown == NULL)
        return -ENOMEM;
      q->items = grown;
      q->cap = cap;
    }
  copy = malloc (len + 1);
  if (copy == NULL)
    return -ENOMEM;
  memcpy (copy, path, len);
  copy[len] = '\0';
  q->items[q->len++] = copy;
  return 0;
}

static void
queue_free (struct queue *q)
{
  size_t i;

  for (i = q->head; i < q->len; i++)
    free (q->items[i]);
  free (q->items);
  memset (q, 0, sizeof *q);
}

/* Watch the directory at rel (relative to the watched one), and with a
   recursive watch every directory below it, breadth first. The watch is in
   place before the directory is listed, so an entry made meanwhile is seen
   by one or the other (perhaps both). With `announce`, every entry found is
   reported as created: a directory made after the watch started may have
   filled before its watch was in place (mkdir -p a/b/c, mv of a tree).
   Returns 0; 1 when a directory was too deep to name its events (left
   unwatched); -errno when the limit of directories or of the kernel's
   watches was reached or memory ran out (the walk stops there). */
static int
watch_tree (const char *rel, int announce)
{
  static char child[SBX_WATCH_PATH_MAX + NAME_MAX + 2];
  struct queue q = {0};
  int rc, too_deep = 0;

  if ((rc = queue_push (&q, rel, strlen (rel))) < 0)
    return rc;
  while (q.head < q.len)
    {
      char *path = q.items[q.head++];
      size_t plen = strlen (path);
      struct dirent *de;
      DIR *d;
      int fd, wd;

      fd = open_rel (path);
      if (fd < 0)
        {
          /* Gone meanwhile, unreadable for this user, a mount point, or
             replaced by a symlink: not ours to watch. */
          free (path);
          continue;
        }
      if ((wd = add_watch_fd (fd)) < 0)
        {
          int e = errno;
          close (fd);
          free (path);
          /* ENOSPC: the kernel's watches for this user are used up. */
          if (e == ENOSPC || e == ENOMEM)
            {
              rc = -e;
              break;
            }
          continue;
        }
      rc = add_entry (wd, path, plen);
      if (rc < 0)
        {
          inotify_rm_watch (ino, wd);
          close (fd);
          free (path);
          break;
        }
      if (!recursive)
        {
          close (fd);
          free (path);
          break;
        }
      d = fdopendir (fd);
      if (d == NULL)
        {
          close (fd);
          free (path);
          continue;
        }
      while ((de = readdir (d)) != NULL)
        {
          size_t nlen = strlen (de->d_name), clen;
          int is_dir = de->d_type == DT_DIR;
          struct stat st;

          if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
          if (plen)
            {
              memcpy (child, path, plen);
              child[plen] = '/';
              memcpy (child + plen + 1, de->d_name, nlen + 1);
              clen = plen + 1 + nlen;
            }
          else
            {
              memcpy (child, de->d_name, nlen + 1);
              clen = nlen;
            }
          if (announce)
            emit (SBX_WREC_CREATE, child, clen);
          if (de->d_type == DT_UNKNOWN && fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            is_dir = S_ISDIR (st.st_mode);
          if (!is_dir)
            continue;
          if (clen > SBX_WATCH_NAME_MAX)
            {
              /* Too deep to name its events: they would be lost. */
              too_deep = 1;
              continue;
            }
          /* Bounded before it is queued: a directory with a million
             subdirectories must not make a million-entry queue. */
          if (ndirs + (q.len - q.head) >= SBX_WATCH_MAX_DIRS)
            {
              rc = -ENOSPC;
              break;
            }
          if ((rc = queue_push (&q, child, clen)) < 0)
            break;
        }
      closedir (d);
      free (path);
      if (rc < 0)
        break;
    }
  queue_free (&q);
  return rc < 0 ? rc : too_deep;
}

/* ---- events --------------------------------------------------------------- */

static void
handle_event (const struct inotify_event *ev)
{
  static char full[SBX_WATCH_PATH_MAX + NAME_MAX + 2];
  ssize_t i;
  size_t nlen, flen;
  uint16_t type;
  int is_top;

  if (ev->mask & IN_Q_OVERFLOW)
    {
      emit (SBX_WREC_OVERFLOW, "", 0);
      return;
    }
  i = find_wd (ev->wd);
  if (i < 0)
    return; /* a watch dropped meanwhile */
  is_top = dirs[i].len == 0;
  if (ev->mask & (IN_IGNORED | IN_UNMOUNT))
    {
      /* The watched directory is gone (removed, or its file system
         unmounted): the stream ends. A subdirectory's watch just ends. */
      if (is_top)
        {
          flush_out ();
          _exit (0);
        }
      if (ev->mask & IN_IGNORED)
        drop_entry ((size_t) i);
      return;
    }
  nlen = ev->len ? strnlen (ev->name, ev->len) : 0;
  if (nlen == 0)
    {
      /* About a watched directory itself: for a subdirectory its parent's
         watch already told (with its name), for the top it is news. */
      if (!is_top)
        return;
      if (ev->mask & IN_DELETE_SELF)
        emit (SBX_WREC_REMOVE, "", 0);
      else if (ev->mask & IN_MOVE_SELF)
        emit (SBX_WREC_RENAME, "", 0);
      else if (ev->mask & IN_ATTRIB)
        emit (SBX_WREC_CHMOD, "", 0);
      return;
    }
  if (ev->mask & (IN_CREATE | IN_MOVED_TO))
    type = SBX_WREC_CREATE;
  else if (ev->mask & IN_MOVED_FROM)
    type = SBX_WREC_RENAME;
  else if (ev->mask & IN_DELETE)
    type = SBX_WREC_REMOVE;
  else if (ev->mask & IN_MODIFY)
    type = SBX_WREC_WRITE;
  else if (ev->mask & IN_ATTRIB)
    type = SBX_WREC_CHMOD;
  else
    return;
  if (dirs[i].len)
    {
      memcpy (full, dirs[i].path, dirs[i].len);
      full[dirs[i].len] = '/';
      memcpy (full + dirs[i].len + 1, ev->name, nlen);
      flen = dirs[i].len + 1 + nlen;
    }
  else
    {
      memcpy (full, ev->name, nlen);
      flen = nlen;
    }
  full[flen] = '\0';
  emit (type, full, flen);
  if (!recursive || !(ev->mask & IN_ISDIR))
    return;
  if (type == SBX_WREC_RENAME)
    drop_subtree (full, flen);
  else if (type == SBX_WREC_CREATE && flen <= SBX_WATCH_NAME_MAX)
    {
      /* A directory that cannot be watched (too many, too deep) loses
         its events: say so once, where it happened. */
      if (watch_tree (full, 1) != 0)
        emit (SBX_WREC_OVERFLOW, "", 0);
    }
  else if (type == SBX_WREC_CREATE)
    emit (SBX_WREC_OVERFLOW, "", 0);
}

static __attribute__ ((noreturn)) void
serve (void)
{
  static char buf[65536] __attribute__ ((aligned (__alignof__ (struct inotify_event))));

  for (;;)
    {
      /* No events asked of the pipe: a pipe's write end reports POLLERR
         when its reader is gone, so a stopped watch ends even while its
         directory is quiet. */
      struct pollfd pfd[2] = {{ino, POLLIN, 0}, {OUT_FD, 0, 0}};
      ssize_t n, off;

      if (poll (pfd, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          _exit (EIO);
        }
      if (pfd[1].revents & (POLLERR | POLLHUP | POLLNVAL))
        _exit (0);
      if (!(pfd[0].revents & POLLIN))
        continue;
      n = read (ino, buf, sizeof buf);
      if (n < 0)
        {
          if (errno == EINTR || errno == EAGAIN)
            continue;
          _exit (EIO);
        }
      for (off = 0; off + (ssize_t) sizeof (struct inotify_event) <= n;)
        {
          const struct inotify_event *ev = (const struct inotify_event *) (buf + off);
          if (off + (ssize_t) sizeof *ev + (ssize_t) ev->len > n)
            break;
          handle_event (ev);
          off += (ssize_t) (sizeof *ev + ev->len);
        }
      flush_out ();
    }
}

/* ---- the helper ------------------------------------------------------------ */

void
sbx_watch_run (const char *path, int is_recursive)
{
  struct stat st;
  int rc, top;

  /* From here on, as the user: the kernel resolves the path in the
     sandbox's root (symlinks included) and checks that user's rights. */
  top = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top < 0)
    {
      int e = errno;
      /* "Not a directory" is for an existing non-directory; a component
         on the way that is a file means there is no such directory. */
      if (e == ENOTDIR)
        e = stat (path, &st) == 0 && !S_ISDIR (st.st_mode) ? ENOTDIR : ENOENT;
      sbx_watch_run_fail (e);
    }
  /* Its path without symlinks, as seen from the sandbox's root: to open
     it again for subdirectories found later. */
  errno = 0;
  if (fstat (top, &st) < 0 || fchdir (top) < 0 || getcwd (top_path, sizeof top_path) == NULL
      || top_path[0] != '/' || chdir ("/") < 0)
    sbx_watch_run_fail (errno ? errno : ENAMETOOLONG);
  top_dev = st.st_dev;
  top_ino = st.st_ino;
  ino = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK);
  if (ino < 0)
    sbx_watch_run_fail (errno);
  recursive = is_recursive;
  /* The top itself, through the descriptor just checked (a swap of the
     path meanwhile changes nothing), then the tree below. */
  {
    int wd = add_watch_fd (top);
    if (wd < 0)
      sbx_watch_run_fail (errno);
    if ((rc = add_entry (wd, "", 0)) < 0)
      sbx_watch_run_fail (-rc);
  }
  if (recursive)
    {
      /* Every subdirectory: the top is known, so watch_tree starts at its
         children. */
      struct dirent *de;
      int dfd = dup (top);
      DIR *d = dfd >= 0 ? fdopendir (dfd) : NULL;
      if (d == NULL)
        sbx_watch_run_fail (errno);
      rc = 0;
      while (rc >= 0 && (de = readdir (d)) != NULL)
        {
          struct stat cst;
          int is_dir = de->d_type == DT_DIR;
          if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
          if (de->d_type == DT_UNKNOWN && fstatat (dirfd (d), de->d_name, &cst, AT_SYMLINK_NOFOLLOW) == 0)
            is_dir = S_ISDIR (cst.st_mode);
          /* A directory too deep to name its events is left unwatched. */
          if (is_dir)
            rc = watch_tree (de->d_name, 0);
        }
      closedir (d);
      if (rc < 0)
        sbx_watch_run_fail (-rc);
    }
  close (top);
  emit_raw (SBX_WREC_READY, NULL, 0);
  flush_out ();
  serve ();
}

/* What the helper itself needs: the stream, inotify, a directory or two
   while it walks; more is not for it to have. */
#define HELPER_NOFILE 32

void
sbx_watch_run_limits (void)
{
  struct rlimit rl;

  rl.rlim_cur = rl.rlim_max = 0;
  if (setrlimit (RLIMIT_CORE, &rl) < 0 || setrlimit (RLIMIT_RTPRIO, &rl) < 0
      || setrlimit (RLIMIT_FSIZE, &rl) < 0)
    sbx_watch_run_fail (errno);
  rl.rlim_cur = rl.rlim_max = HELPER_NOFILE;
  if (setrlimit (RLIMIT_NOFILE, &rl) < 0)
    sbx_watch_run_fail (errno);
}
