/* sbx: file operations inside a sandbox's root (see fs.h). */
#include "iso/fs.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "iso/engine.h"
#include "util/cleanup.h"
#include "util/id.h"

#define MAX_TREE_DEPTH 256
#define NOBODY 65534

/* ---- acting as the sandbox user ---------------------------------------- */

/* fsuid/fsgid are per thread (raw syscalls: glibc does not broadcast these
   two), and a non-zero fsuid drops the filesystem capabilities, so the
   kernel checks every access as the sandbox user would see it. Scopes nest:
   leaving one restores the ids it found (setfsuid returns the previous
   one), so a helper with its own AS_USER cannot hand its caller back the
   daemon's root in the middle of an operation. */
struct identity
{
  int active;
  uid_t prev_uid;
  gid_t prev_gid;
};

static struct identity
as_user (const struct sbx_fs_ctx *ctx)
{
  struct identity id = {1, 0, 0};
  id.prev_gid = (gid_t) syscall (SYS_setfsgid, (gid_t) (ctx->uid_base + ctx->gid));
  id.prev_uid = (uid_t) syscall (SYS_setfsuid, (uid_t) (ctx->uid_base + ctx->uid));
  return id;
}

static void
as_daemon (struct identity *id)
{
  if (id->active)
    {
      int saved = errno;
      syscall (SYS_setfsuid, id->prev_uid);
      syscall (SYS_setfsgid, id->prev_gid);
      errno = saved;
      id->active = 0;
    }
}
/* `unused`: clang counts a variable only its cleanup reads as unused. */
#define AS_USER(ctx)                                                           \
  __attribute__ ((cleanup (as_daemon), unused)) struct identity id_ = as_user (ctx)

/* ---- errors ------------------------------------------------------------ */

static int
fs_err (sbx_error_t **err, int e, const char *op, const char *path)
{
  enum sbx_error_kind kind;

  switch (e)
    {
    case ENOENT:
      kind = SBX_E_NOT_FOUND;
      break;
    case EACCES:
    case EPERM:
    case EROFS:
    case EXDEV:
      kind = SBX_E_FORBIDDEN;
      break;
    case EEXIST:
    case ENOTEMPTY:
    case EBUSY:
      kind = SBX_E_CONFLICT;
      break;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      kind = SBX_E_TOO_LARGE;
      break;
    case ENOTDIR:
    case EISDIR:
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP:
      kind = SBX_E_INVALID;
      break;
    default:
      return sbx_err_sys (err, e, "%s `%s`", op, path);
    }
  return sbx_err_errno (err, kind, e, "%s `%s`", op, path);
}

/* ---- resolution -------------------------------------------------------- */

const char *
sbx_fs_type_name (enum sbx_fs_type t)
{
  switch (t)
    {
    case SBX_FS_FILE:
      return "file";
    case SBX_FS_DIR:
      return "dir";
    case SBX_FS_SYMLINK:
      return "symlink";
    case SBX_FS_OTHER:
      return "other";
    default:
      return "other";
    }
}

int
sbx_fs_normalize (const char *in, char *out, size_t cap, sbx_error_t **err)
{
  size_t n;

  if (in == NULL || in[0] == '\0')
    return sbx_err (err, SBX_E_INVALID, "empty path");
  n = strlen (in);
  if (n >= SBX_FS_PATH_MAX)
    return sbx_err (err, SBX_E_INVALID, "path longer than %d bytes", SBX_FS_PATH_MAX - 1);
  if (in[0] == '/')
    {
      if (n + 1 > cap)
        return sbx_err (err, SBX_E_INVALID, "path too long");
      memcpy (out, in, n + 1);
    }
  else if ((size_t) snprintf (out, cap, "/home/user/%s", in) >= cap)
    return sbx_err (err, SBX_E_INVALID, "path too long");
  return 0;
}

/* "/a/b//" names "/a/b"; "/" stays "/". */
static void
strip_trailing_slashes (char *abs)
{
  size_t n = strlen (abs);

  while (n > 1 && abs[n - 1] == '/')
    abs[--n] = '\0';
}

/* Filesystems the daemon must never open files on: procfs holds init's
   memory and host-wide knobs; sysfs and devpts are devices. */
static int
forbidden_fs (int fd)
{
  struct statfs sfs;

  if (fstatfs (fd, &sfs) < 0)
    return 1;
  return sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC
         || sfs.f_type == DEVPTS_SUPER_MAGIC || sfs.f_type == CGROUP_SUPER_MAGIC
         || sfs.f_type == CGROUP2_SUPER_MAGIC;
}

/* openat2 inside the sandbox root. EAGAIN means a concurrent rename raced
   the in-root resolution: the kernel asks us to retry. */
static int
resolve (const struct sbx_fs_ctx *ctx, const char *abs, uint64_t flags)
{
  struct open_how how;
  int fd, tries = 0;

  memset (&how, 0, sizeof how);
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  do
    fd = (int) syscall (SYS_openat2, ctx->root, abs, &how, sizeof how);
  while (fd < 0 && (errno == EAGAIN || errno == EINTR) && ++tries < 64);
  return fd;
}

/* Split "/a/b/c" (or "/a/b/c/") into "/a/b" and "c". The leaf must be a
   plain name: the root, "." and ".." do not name a file to act on. */
static int
split (const char *abs, char *parent, size_t pcap, char *leaf, size_t lcap, sbx_error_t **err)
{
  size_t n = strlen (abs), start, plen;

  while (n > 1 && abs[n - 1] == '/')
    n--;
  start = n;
  while (start > 0 && abs[start - 1] != '/')
    start--;
  if (start == 0 || start == n || n - start >= lcap)
    return sbx_err (err, SBX_E_INVALID, "`%s` does not name a file", abs);
  memcpy (leaf, abs + start, n - start);
  leaf[n - start] = '\0';
  if (strcmp (leaf, ".") == 0 || strcmp (leaf, "..") == 0)
    return sbx_err (err, SBX_E_INVALID, "`%s` does not name a file", abs);
  plen = start - 1;
  while (plen > 1 && abs[plen - 1] == '/')
    plen--;
  if (plen == 0)
    plen = 1; /* the root */
  if (plen >= pcap)
    return sbx_err (err, SBX_E_INVALID, "path too long");
  memcpy (parent, abs, plen);
  parent[plen] = '\0';
  return 0;
}

static int
open_dir (const struct sbx_fs_ctx *ctx, const char *abs, sbx_error_t **err)
{
  int fd = resolve (ctx, abs, O_PATH | O_DIRECTORY);

  if (fd < 0)
    return fs_err (err, errno, "open directory", abs);
  if (forbidden_fs (fd))
    {
      close (fd);
      return sbx_err (err, SBX_E_FORBIDDEN, "`%s` is not accessible through the files API", abs);
    }
  return fd;
}

static uint32_t
inside_id (const struct sbx_fs_ctx *ctx, uint32_t host)
{
  if (host >= ctx->uid_base && host - ctx->uid_base < SBX_IDS_PER_SANDBOX)
    return host - ctx->uid_base;
  return NOBODY;
}

static void
fill_entry (const struct sbx_fs_ctx *ctx, const struct stat *st, const char *name,
            const char *path, struct sbx_fs_entry *e)
{
  memset (e, 0, sizeof *e);
  snprintf (e->name, sizeof e->name, "%s", name);
  snprintf (e->path, sizeof e->path, "%s", path);
  if (S_ISREG (st->st_mode))
    e->type = SBX_FS_FILE;
  else if (S_ISDIR (st->st_mode))
    e->type = SBX_FS_DIR;
  else if (S_ISLNK (st->st_mode))
    e->type = SBX_FS_SYMLINK;
  else
    e->type = SBX_FS_OTHER;
  e->size = (uint64_t) st->st_size;
  e->mode = st->st_mode & 07777;
  e->uid = inside_id (ctx, st->st_uid);
  e->gid = inside_id (ctx, st->st_gid);
  e->mtime_sec = st->st_mtim.tv_sec;
}

/* ---- metadata (user.e2b.* extended attributes) ------------------------- */

/* RFC 9110's tchar. */
static int
token_char (unsigned char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
         || (c != '\0' && strchr ("!#$%&'*+-.^_`|~", c) != NULL);
}

static int
meta_key_ok (const char *k, size_t n)
{
  if (n == 0 || n > SBX_FS_META_KEY_MAX)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!token_char ((unsigned char) k[i]))
      return 0;
  return 1;
}

static int
meta_value_ok (const char *v, size_t n)
{
  if (n > SBX_FS_META_VALUE_MAX)
    return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char) v[i] < 0x20 || (unsigned char) v[i] > 0x7e)
      return 0;
  return 1;
}

int
sbx_fs_meta_add (struct sbx_fs_meta *m, const char *key, size_t key_len, const char *value,
                 size_t value_len, sbx_error_t **err)
{
  const char *k, *v;
  uint32_t off = 0;

  /* The key is echoed only once it is known to be printable: a hostile
     byte must not reach a JSON answer or a log line. */
  if (!meta_key_ok (key, key_len))
    return sbx_err (err, SBX_E_INVALID,
                    "a metadata key must be 1..%d HTTP token characters (letters, digits and "
                    "!#$%%&'*+-.^_`|~)",
                    SBX_FS_META_KEY_MAX);
  if (!meta_value_ok (value, value_len))
    return sbx_err (err, SBX_E_INVALID,
                    "the value of metadata key `%.*s` must be at most %d printable US-ASCII "
                    "characters",
                    (int) key_len, key, SBX_FS_META_VALUE_MAX);
  while ((k = sbx_fs_meta_next (m, &off, &v)) != NULL)
    if (strlen (k) == key_len && memcmp (k, key, key_len) == 0)
      return 0;
  if (m->count >= SBX_FS_META_KEYS)
    return sbx_err (err, SBX_E_INVALID, "at most %d metadata keys per file", SBX_FS_META_KEYS);
  /* Packed, each pair takes 7 bytes fewer than it counts (9-byte prefix
     against two NULs), so what counts fits the buffer. */
  if ((size_t) m->len + 7 * (size_t) m->count + 9 + key_len + value_len > SBX_FS_META_TOTAL)
    return sbx_err (err, SBX_E_INVALID,
                    "a file's metadata is at most %d bytes (%d per key for the `%s` prefix, "
                    "plus keys and values)",
                    SBX_FS_META_TOTAL, (int) strlen (SBX_FS_META_PREFIX), SBX_FS_META_PREFIX);
  memcpy (m->data + m->len, key, key_len);
  m->data[m->len + key_len] = '\0';
  memcpy (m->data + m->len + key_len + 1, value, value_len);
  m->data[m->len + key_len + 1 + value_len] = '\0';
  m->len += (uint32_t) (key_len + value_len + 2);
  m->count++;
  return 0;
}

int
sbx_fs_meta_check (const struct sbx_fs_meta *m, sbx_error_t **err)
{
  struct sbx_fs_meta again;
  uint32_t off = 0;

  if (m->len > sizeof m->data || m->count > SBX_FS_META_KEYS)
    return sbx_err (err, SBX_E_INVALID, "malformed metadata");
  memset (&again, 0, sizeof again);
  while (off < m->len)
    {
      const char *key = m->data + off, *value, *end = m->data + m->len;
      const char *knul = memchr (key, '\0', (size_t) (end - key)), *vnul;
      if (knul == NULL)
        return sbx_err (err, SBX_E_INVALID, "malformed metadata");
      value = knul + 1;
      vnul = value < end ? memchr (value, '\0', (size_t) (end - value)) : NULL;
      if (vnul == NULL)
        return sbx_err (err, SBX_E_INVALID, "malformed metadata");
      if (sbx_fs_meta_add (&again, key, (size_t) (knul - key), value, (size_t) (vnul - value),
                           err)
          < 0)
        return -1;
      off = (uint32_t) (vnul + 1 - m->data);
    }
  /* A repeated key would have been dropped by the add. */
  if (again.len != m->len || again.count != m->count)
    return sbx_err (err, SBX_E_INVALID, "malformed metadata");
  return 0;
}

const char *
sbx_fs_meta_next (const struct sbx_fs_meta *m, uint32_t *off, const char **value)
{
  const char *key;

  if (*off >= m->len)
    return NULL;
  key = m->data + *off;
  *value = key + strlen (key) + 1;
  *off += (uint32_t) (strlen (key) + strlen (*value) + 2);
  return key;
}

/* The user.e2b.* attributes of the inode that fd (O_PATH, borrowed, not a
   symlink's: user xattrs exist only on regular files and directories)
   holds. Through /proc/thread-self/fd, as sbx_fs_open_read re-opens: the
   *xattr calls on that magic link reach the very inode resolved in the
   root, with no second walk and no open of the file itself; fgetxattr
   refuses O_PATH descriptors. Called as the user, so the kernel's read
   check on user.* applies. Whatever does not fit the bounds (set inside
   the sandbox, bypassing ours) is left out; a filesystem without xattrs
   simply has none. */
static void
read_meta (int fd, const struct stat *st, struct sbx_fs_meta *m)
{
  char proc[64], value[SBX_FS_META_VALUE_MAX];
  cleanup_free char *names = NULL;
  ssize_t n;

  memset (m, 0, offsetof (struct sbx_fs_meta, data));
  if (!S_ISREG (st->st_mode) && !S_ISDIR (st->st_mode))
    return;
  snprintf (proc, sizeof proc, "/proc/thread-self/fd/%d", fd);
  names = malloc (XATTR_LIST_MAX);
  if (names == NULL)
    return;
  n = listxattr (proc, names, XATTR_LIST_MAX);
  if (n <= 0 || names[n - 1] != '\0')
    return;
  for (const char *p = names; p < names + n; p += strlen (p) + 1)
    {
      size_t plen = strlen (SBX_FS_META_PREFIX);
      ssize_t v;
      if (strncmp (p, SBX_FS_META_PREFIX, plen) != 0)
        continue;
      v = getxattr (proc, p, value, sizeof value); /* ERANGE: over the bound */
      if (v >= 0)
        sbx_fs_meta_add (m, p + plen, strlen (p + plen), value, (size_t) v, NULL);
    }
}

/* meta as the user.e2b.* attributes of the upload's temporary (fd, a
   regular file just created; nothing else has it yet). */
static int
write_meta (int fd, const struct sbx_fs_meta *meta, const char *abs, sbx_error_t **err)
{
  char name[sizeof SBX_FS_META_PREFIX + SBX_FS_META_KEY_MAX];
  const char *key, *value;
  uint32_t off = 0;

  while ((key = sbx_fs_meta_next (meta, &off, &value)) != NULL)
    {
      snprintf (name, sizeof name, "%s%s", SBX_FS_META_PREFIX, key);
      if (fsetxattr (fd, name, value, strlen (value), XATTR_CREATE) == 0)
        continue;
      if (errno == EOPNOTSUPP)
        return sbx_err_errno (err, SBX_E_INVALID, errno,
                              "file metadata needs user extended attributes, which the "
                              "filesystem of `%s` does not support",
                              abs);
      if (errno == E2BIG)
        return sbx_err_errno (err, SBX_E_INVALID, errno,
                              "the filesystem of `%s` cannot hold this much metadata", abs);
      return fs_err (err, errno, "set metadata on", abs);
    }
  return 0;
}

/* rename(2) keeps a file's extended attributes; a copy standing in for it
   must too, or a move between /tmp and /home/user would drop the file's
   metadata. user.* only: security.* and system.* belong to the kernel and
   to privileges the user lacks. Best effort, as cp --preserve=xattr. */
static void
copy_user_xattrs (int src, int dst)
{
  cleanup_free char *names = malloc (XATTR_LIST_MAX);
  cleanup_free char *value = malloc (XATTR_SIZE_MAX);
  ssize_t n;

  if (names == NULL || value == NULL)
    return;
  n = flistxattr (src, names, XATTR_LIST_MAX);
  if (n <= 0 || names[n - 1] != '\0')
    return;
  for (const char *p = names; p < names + n; p += strlen (p) + 1)
    {
      ssize_t v;
      if (strncmp (p, "user.", 5) != 0)
        continue;
      v = fgetxattr (src, p, value, XATTR_SIZE_MAX);
      if (v >= 0)
        (void) fsetxattr (dst, p, value, (size_t) v, 0);
    }
}

/* ---- read -------------------------------------------------------------- */

int
sbx_fs_open_read (const struct sbx_fs_ctx *ctx, const char *path, uint64_t *size,
                  sbx_error_t **err)
{
  char abs[SBX_FS_PATH_MAX], proc[64];
  cleanup_close int pathfd = -1;
  struct stat st;
  int fd;
  AS_USER (ctx);

  if (sbx_fs_normalize (path, abs, sizeof abs, err) < 0)
    return -1;
  /* O_PATH first: no driver open, no FIFO block, before we know the type. */
  pathfd = resolve (ctx, abs, O_PATH);
  if (pathfd < 0)
    return fs_err (err, errno, "open", abs);
  if (fstat (pathfd, &st) < 0)
    return fs_err (err, errno, "stat", abs);
  if (S_ISDIR (st.st_mode))
    return sbx_err (err, SBX_E_INVALID, "`%s` is a directory", abs);
  if (!S_ISREG (st.st_mode) || forbidden_fs (pathfd))
    return sbx_err (err, SBX_E_FORBIDDEN, "`%s` is not a regular file", abs);
  /* Re-open the very inode we checked (no second path walk to race). */
  snprintf (proc, sizeof proc, "/proc/thread-self/fd/%d", pathfd);
  fd = open (proc, O_RDONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return fs_err (err, errno, "open", abs);
  *size = (uint64_t) st.st_size;
  return fd;
}

/* ---- upload ------------------------------------------------------------ */

static int
mkdir_parents (const struct sbx_fs_ctx *ctx, const char *abs, uint32_t mode, sbx_error_t **err)
{
  char prefix[SBX_FS_PATH_MAX];
  size_t i, n = strlen (abs);

  for (i = 1; i <= n; i++)
    {
      if (abs[i] != '/' && abs[i] != '\0')
        continue;
      memcpy (prefix, abs, i);
      prefix[i] = '\0';
      {
        cleanup_close int fd = resolve (ctx, prefix, O_PATH | O_DIRECTORY);
        char parent[SBX_FS_PATH_MAX], leaf[256];
        cleanup_close int pfd = -1;
        if (fd >= 0)
          continue;
        if (errno != ENOENT)
          return fs_err (err, errno, "open directory", prefix);
        if (split (prefix, parent, sizeof parent, leaf, sizeof leaf, err) < 0)
          return -1;
        pfd = open_dir (ctx, parent, err);
        if (pfd < 0)
          return -1;
        if (mkdirat (pfd, leaf, mode) < 0 && errno != EEXIST)
          return fs_err (err, errno, "mkdir", prefix);
      }
    }
  return 0;
}

/* prefix + 16 random hex digits: a name the sandbox cannot guess, so it
   cannot have planted a link there. */
static void
hidden_name (char *out, size_t cap, const char *prefix)
{
  size_t n = strlen (prefix);

  assert (n + 17 <= cap);
  memcpy (out, prefix, n);
  sbx_random_hex (out + n, 8);
}

/* The upload's temporary file, created as the user. Unnamed (O_TMPFILE)
   where the kernel and filesystem allow it: an upload cut short, even by
   the daemon's death, then leaves nothing in the sandbox's disk, since the
   inode goes with its last fd (the copier's helper drops its own when its
   input pipe ends). Elsewhere (EOPNOTSUPP from the filesystem, EISDIR from
   kernels that read O_TMPFILE as O_DIRECTORY) a hidden named temporary,
   which only an abort removes. */
static int
open_temporary (struct sbx_fs_upload *up)
{
  up->fd = openat (up->dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (up->fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
    return up->fd;
  hidden_name (up->tmp_name, sizeof up->tmp_name, ".sbx-upload-");
  up->fd = openat (up->dir, up->tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   0600);
  if (up->fd < 0)
    up->tmp_name[0] = '\0'; /* not ours to remove */
  return up->fd;
}

int
sbx_fs_upload_begin (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode, int parents,
                     struct sbx_fs_upload *up, sbx_error_t **err)
{
  return sbx_fs_upload_begin_meta (ctx, path, mode, parents, NULL, up, err);
}

int
sbx_fs_upload_begin_meta (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode,
                          int parents, const struct sbx_fs_meta *meta, struct sbx_fs_upload *up,
                          sbx_error_t **err)
{
  char abs[SBX_FS_PATH_MAX], parent[SBX_FS_PATH_MAX];
  struct stat st;
  AS_USER (ctx);

  memset (up, 0, sizeof *up);
  up->dir = up->fd = up->pipe = -1;
  up->ctx = *ctx;
  up->mode = mode & 07777;
  if (sbx_fs_normalize (path, abs, sizeof abs, err) < 0)
    return -1;
  /* "x/" names a directory: a file must not quietly land at "x". */
  if (abs[strlen (abs) - 1] == '/')
    return sbx_err (err, SBX_E_INVALID, "`%s` ends with `/`: give the file's name", abs);
  if (split (abs, parent, sizeof parent, up->leaf, sizeof up->leaf, err) < 0)
    return -1;
  if (parents && mkdir_parents (ctx, parent, 0755, err) < 0)
    return -1;
  up->dir = open_dir (ctx, parent, err);
  if (up->dir < 0)
    return -1;
  if (fstatat (up->dir, up->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode))
    {
      close_and_reset (&up->dir);
      return sbx_err (err, SBX_E_INVALID, "`%s` is a directory", abs);
    }
  if (open_temporary (up) < 0)
    {
      int e = errno;
      close_and_reset (&up->dir);
      return fs_err (err, e, "create", abs);
    }
  /* Before a byte of the body: a refusal here leaves no file at all. */
  if (meta != NULL && meta->count > 0 && write_meta (up->fd, meta, abs, err) < 0)
    {
      as_daemon (&id_);
      sbx_fs_upload_abort (up);
      return -1;
    }
  if (ctx->copier)
    {
      int p[2];
      if (pipe2 (p, O_CLOEXEC) < 0)
        {
          int e = errno;
          as_daemon (&id_);
          sbx_fs_upload_abort (up);
          return sbx_err_sys (err, e, "pipe");
        }
      if (ctx->copier->start (ctx->copier->arg, p[0], up->fd, &up->job, err) < 0)
        {
          close (p[0]);
          close (p[1]);
          as_daemon (&id_);
          sbx_fs_upload_abort (up);
          return -1;
        }
      close (p[0]);
      up->pipe = p[1];
    }
  return 0;
}

/* Close the copier's pipe and collect how the copy ended. */
static int
finish_copier (struct sbx_fs_upload *up, sbx_error_t **err)
{
  void *job = up->job;

  if (up->pipe < 0 && job == NULL)
    return 0;
  close_and_reset (&up->pipe);
  up->job = NULL;
  return up->ctx.copier->finish (up->ctx.copier->arg, job, err);
}

int
sbx_fs_upload_write (struct sbx_fs_upload *up, const void *data, size_t len, sbx_error_t **err)
{
  const char *p = data;
  int fd = up->pipe >= 0 ? up->pipe : up->fd;

  while (len > 0)
    {
      ssize_t w = write (fd, p, len);
      if (w < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
            return sbx_err (err, SBX_E_TOO_LARGE, "the sandbox disk is full");
          /* The copier's helper stopped reading: its end says why. */
          if (errno == EPIPE && up->pipe >= 0)
            return finish_copier (up, err) < 0 ? -1
                                                : sbx_err (err, SBX_E_SYSTEM, "upload interrupted");
          return sbx_err_sys (err, errno, "write upload");
        }
      p += w;
      len -= (size_t) w;
      up->written += (uint64_t) w;
    }
  return 0;
}

/* Give an unnamed temporary a hidden name beside the target: linkat cannot
   replace an existing name, rename can. Through /proc/thread-self/fd, not
   AT_EMPTY_PATH, which needs CAP_DAC_READ_SEARCH and the fsuid switch has
   dropped it. A crash between this link and the rename leaves the hidden
   name behind, but that window is microseconds, not the whole upload. */
static int
name_temporary (struct sbx_fs_upload *up)
{
  char proc[64];

  snprintf (proc, sizeof proc, "/proc/thread-self/fd/%d", up->fd);
  for (int tries = 0; tries < 8; tries++)
    {
      hidden_name (up->tmp_name, sizeof up->tmp_name, ".sbx-upload-");
      if (linkat (AT_FDCWD, proc, up->dir, up->tmp_name, AT_SYMLINK_FOLLOW) == 0)
        return 0;
      if (errno != EEXIST)
        break;
    }
  up->tmp_name[0] = '\0';
  return -1;
}

int
sbx_fs_upload_commit (struct sbx_fs_upload *up, sbx_error_t **err)
{
  AS_USER (&up->ctx);

  if (finish_copier (up, err) < 0)
    {
      as_daemon (&id_);
      sbx_fs_upload_abort (up);
      return -1;
    }
  if (fchmod (up->fd, up->mode) < 0)
    {
      int e = errno;
      sbx_fs_upload_abort (up);
      return fs_err (err, e, "chmod", up->leaf);
    }
  if (up->tmp_name[0] == '\0' && name_temporary (up) < 0)
    {
      int e = errno;
      sbx_fs_upload_abort (up);
      return fs_err (err, e, "create", up->leaf);
    }
  if (renameat (up->dir, up->tmp_name, up->dir, up->leaf) < 0)
    {
      int e = errno;
      sbx_fs_upload_abort (up);
      return fs_err (err, e, "replace", up->leaf);
    }
  /* The rename is a watcher's `create` (IN_MOVED_TO); a truncate to its
     own size is the `write` (IN_MODIFY) an in-place write gives, so a
     watch sees the content change, as with envd, which writes in place.
     The replacement itself stays atomic. */
  {
    /* By its new name: an O_TMPFILE descriptor's dentry is not that name,
       and the event would carry none. The same inode only (a name
       replaced since is not ours to touch), never a FIFO's open. */
    struct stat mine, named;
    int fd = openat (up->dir, up->leaf, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0)
      {
        int unnoticed = fstat (up->fd, &mine) < 0 || fstat (fd, &named) < 0
                        || mine.st_ino != named.st_ino || mine.st_dev != named.st_dev
                        || (named.st_size > 0 && ftruncate (fd, named.st_size) < 0);
        (void) unnoticed; /* only the event is lost: the file is in place */
        close (fd);
      }
  }
  close_and_reset (&up->fd);
  close_and_reset (&up->dir);
  return 0;
}

void
sbx_fs_upload_abort (struct sbx_fs_upload *up)
{
  AS_USER (&up->ctx);

  finish_copier (up, NULL);
  if (up->dir >= 0 && up->tmp_name[0])
    unlinkat (up->dir, up->tmp_name, 0);
  close_and_reset (&up->fd);
  close_and_reset (&up->dir);
}

/* ---- stat, list -------------------------------------------------------- */

int
sbx_fs_stat (const struct sbx_fs_ctx *ctx, const char *path, struct sbx_fs_entry *out,
             sbx_error_t **err)
{
  char abs[SBX_FS_PATH_MAX];
  cleanup_close int fd = -1;
  struct stat st;
  const char *name;
  AS_USER (ctx);

  if (sbx_fs_normalize (path, abs, sizeof abs, err) < 0)
    return -1;
  /* Do not follow a final symlink: report the link itself. */
  fd = resolve (ctx, abs, O_PATH | O_NOFOLLOW);
  if (fd < 0)
    return fs_err (err, errno, "stat", abs);
  /* Like every other route: readlink of /proc/1/exe, /proc/1/cwd... would
     run with the daemon's CAP_SYS_PTRACE and show what PID 1 hides from
     the sandbox itself (it is not dumpable). */
  if (forbidden_fs (fd))
    return sbx_err (err, SBX_E_FORBIDDEN, "`%s` is not accessible through the files API", abs);
  if (fstat (fd, &st) < 0)
    return fs_err (err, errno, "stat", abs);
  strip_trailing_slashes (abs);
  name = strrchr (abs, '/');
  name = (name && name[1]) ? name + 1 : abs;
  fill_entry (ctx, &st, name, abs, out);
  read_meta (fd, &st, &out->meta);
  if (S_ISLNK (st.st_mode))
    {
      ssize_t n = readlinkat (fd, "", out->target, sizeof out->target - 1);
      if (n >= 0)
        out->target[n] = '\0';
    }
  return 0;
}

struct list_state
{
  const struct sbx_fs_ctx *ctx;
  int (*fn) (const struct sbx_fs_entry *e, void *arg);
  void *arg;
  size_t count, max;
  int truncated;
  struct sbx_fs_entry entry; /* scratch, large: keep off the recursion's stack */
};

static int
list_dir (struct list_state *ls, int dir_fd, const char *dirpath, int depth, int top,
          sbx_error_t **err)
{
  cleanup_close int fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct dirent *de;
  DIR *d;
  int rc = 0;

  /* A subdirectory the user may not read (/root for `user`, /home/user for
     root inside) is listed but not entered: failing the whole walk would
     make every deep listing of "/" a 403. */
  if (fd < 0 && !top && (errno == EACCES || errno == EPERM))
    return 0;
  if (fd < 0)
    return fs_err (err, errno, "list", dirpath);
  d = fdopendir (fd);
  if (d == NULL)
    return sbx_err_sys (err, errno, "fdopendir");
  fd = -1; /* owned by d now */
  while ((de = readdir (d)) != NULL)
    {
      struct stat st;
      char child[SBX_FS_PATH_MAX];
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue; /* raced with a removal */
      if ((size_t) snprintf (child, sizeof child, "%s/%s", strcmp (dirpath, "/") ? dirpath : "",
                             de->d_name)
          >= sizeof child)
        continue;
      if (ls->count >= ls->max)
        {
          ls->truncated = 1;
          break;
        }
      fill_entry (ls->ctx, &st, de->d_name, child, &ls->entry);
      if (S_ISREG (st.st_mode) || S_ISDIR (st.st_mode))
        {
          /* The inode just stat'ed (a swap since leaves it out), never a
             link followed, never on procfs and the like (a mount point). */
          struct stat again;
          cleanup_close int ent
              = openat (dirfd (d), de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
          if (ent >= 0 && fstat (ent, &again) == 0 && again.st_ino == st.st_ino
              && again.st_dev == st.st_dev && !forbidden_fs (ent))
            read_meta (ent, &again, &ls->entry.meta);
        }
      if (S_ISLNK (st.st_mode))
        {
          ssize_t n = readlinkat (dirfd (d), de->d_name, ls->entry.target,
                                  sizeof ls->entry.target - 1);
          if (n >= 0)
            ls->entry.target[n] = '\0';
        }
      ls->count++;
      rc = ls->fn (&ls->entry, ls->arg);
      if (rc < 0)
        break;
      if (depth > 1 && S_ISDIR (st.st_mode))
        {
          /* A plain name under a directory we hold, without following
             links: the walk cannot leave the subtree. */
          cleanup_close int sub
              = openat (dirfd (d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0 && !forbidden_fs (sub))
            {
              rc = list_dir (ls, sub, child, depth - 1, 0, err);
              if (rc < 0)
                break;
            }
        }
    }
  closedir (d);
  return rc;
}

int
sbx_fs_list (const struct sbx_fs_ctx *ctx, const char *path, int depth, size_t max_entries,
             int (*fn) (const struct sbx_fs_entry *e, void *arg), void *arg, int *truncated,
             sbx_error_t **err)
{
  char abs[SBX_FS_PATH_MAX];
  cleanup_close int dir = -1;
  cleanup_free struct list_state *ls = NULL;
  int rc;
  AS_USER (ctx);

  if (sbx_fs_normalize (path, abs, sizeof abs, err) < 0)
    return -1;
  strip_trailing_slashes (abs);
  dir = open_dir (ctx, abs, err);
  if (dir < 0)
    return -1;
  ls = calloc (1, sizeof *ls);
  if (ls == NULL)
    return sbx_err_oom (err);
  ls->ctx = ctx;
  ls->fn = fn;
  ls->arg = arg;
  ls->max = max_entries;
  rc = list_dir (ls, dir, abs, depth, 1, err);
  *truncated = ls->truncated;
  return rc;
}

/* ---- mkdir, move, remove ----------------------------------------------- */

int
sbx_fs_mkdir (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode, int parents,
              sbx_error_t **err)
{
  char abs[SBX_FS_PATH_MAX], parent[SBX_FS_PATH_MAX], leaf[256];
  cleanup_close int dir = -1;
  AS_USER (ctx);

  if (sbx_fs_normalize (path, abs, sizeof abs, err) < 0)
    return -1;
  if (parents)
    return mkdir_parents (ctx, abs, mode & 07777, err);
  if (split (abs, parent, sizeof parent, leaf, sizeof leaf, err) < 0)
    return -1;
  dir = open_dir (ctx, parent, err);
  if (dir < 0)
    return -1;
  if (mkdirat (dir, leaf, mode & 07777) < 0)
    return fs_err (err, errno, "mkdir", abs);
  return 0;
}

/* rename(2) cannot cross mounts, and /tmp and /home/user are two binds of
   one tmpfs: copy regular files across instead. Called within the move's
   AS_USER: every step runs as the sandbox user, never as the daemon, whose
   root would read files the user may not and ignore /tmp's sticky bit.

   The daemon can die at any point (the sandbox outlives it), so the long
   copy runs while the source still has its name, into an upload whose
   temporary is unnamed: a copy cut short leaves nothing behind. Only then
   is the source renamed aside in its own directory, which needs the same
   rights as removing it (sticky bit included): a move the user could not
   complete fails there and changes nothing. The copy is committed over the
   target and the aside name unlinked right after, so a crash leaves the
   source under the aside name only in a window of microseconds. */
static int
copy_across (const struct sbx_fs_ctx *ctx, int from_dir, const char *from_leaf, const char *to,
             sbx_error_t **err)
{
  struct sbx_fs_upload up;
  cleanup_close int src = -1;
  char aside[48];
  struct stat st, moved;

  src = openat (from_dir, from_leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (src < 0 || fstat (src, &st) < 0 || !S_ISREG (st.st_mode))
    {
      int e = src < 0 ? errno : 0;
      if (e == ELOOP || e == 0)
        return sbx_err (err, SBX_E_INVALID,
                        "only regular files can move between /tmp and /home/user, not `%s`",
                        from_leaf);
      return fs_err (err, e, "open", from_leaf);
    }
  if (ctx->copier)
    {
      /* Through the sandbox's own helper: the copy is charged to it. */
      struct sbx_fs_ctx direct = *ctx;
      void *job = NULL;
      direct.copier = NULL;
      if (sbx_fs_upload_begin (&direct, to, st.st_mode & 0777, 0, &up, err) < 0)
        return -1;
      copy_user_xattrs (src, up.fd);
      if (ctx->copier->start (ctx->copier->arg, src, up.fd, &job, err) < 0
          || ctx->copier->finish (ctx->copier->arg, job, err) < 0)
        {
          sbx_fs_upload_abort (&up);
          return -1;
        }
      goto copied;
    }
  if (sbx_fs_upload_begin (ctx, to, st.st_mode & 0777, 0, &up, err) < 0)
    return -1;
  copy_user_xattrs (src, up.fd);
  for (;;)
    {
      ssize_t n = sendfile (up.fd, src, NULL, 1 << 20);
      if (n == 0)
        break;
      if (n < 0)
        {
          int e = errno;
          sbx_fs_upload_abort (&up);
          if (e == ENOSPC)
            sbx_err (err, SBX_E_TOO_LARGE, "the sandbox disk is full");
          else
            sbx_err_sys (err, e, "copy `%s`", from_leaf);
          return -1;
        }
    }
copied:
  hidden_name (aside, sizeof aside, ".sbx-move-");
  if (syscall (SYS_renameat2, from_dir, from_leaf, from_dir, aside, RENAME_NOREPLACE) < 0)
    {
      int e = errno;
      sbx_fs_upload_abort (&up);
      return fs_err (err, e, "move", from_leaf);
    }
  /* The name may have been given to another file during the copy: that
     one was not copied, so it must not be removed. */
  if (fstatat (from_dir, aside, &moved, AT_SYMLINK_NOFOLLOW) < 0 || moved.st_dev != st.st_dev
      || moved.st_ino != st.st_ino)
    {
      syscall (SYS_renameat2, from_dir, aside, from_dir, from_leaf, RENAME_NOREPLACE);
      sbx_fs_upload_abort (&up);
      return sbx_err (err, SBX_E_CONFLICT, "`%s` was replaced during the move", from_leaf);
    }
  if (sbx_fs_upload_commit (&up, err) < 0)
    {
      syscall (SYS_renameat2, from_dir, aside, from_dir, from_leaf, RENAME_NOREPLACE);
      return -1;
    }
  if (unlinkat (from_dir, aside, 0) < 0)
    return fs_err (err, errno, "remove", from_leaf);
  return 0;
}

int
sbx_fs_move (const struct sbx_fs_ctx *ctx, const char *from, const char *to, int overwrite,
             sbx_error_t **err)
{
  char a[SBX_FS_PATH_MAX], b[SBX_FS_PATH_MAX];
  char ap[SBX_FS_PATH_MAX], bp[SBX_FS_PATH_MAX], al[256], bl[256];
  cleanup_close int ad = -1, bd = -1;
  AS_USER (ctx);

  if (sbx_fs_normalize (from, a, sizeof a, err) < 0 || sbx_fs_normalize (to, b, sizeof b, err) < 0
      || split (a, ap, sizeof ap, al, sizeof al, err) < 0
      || split (b, bp, sizeof bp, bl, sizeof bl, err) < 0)
    return -1;
  ad = open_dir (ctx, ap, err);
  if (ad < 0)
    return -1;
  bd = open_dir (ctx, bp, err);
  if (bd < 0)
    return -1;
  if (syscall (SYS_renameat2, ad, al, bd, bl, overwrite ? 0 : RENAME_NOREPLACE) == 0)
    return 0;
  if (errno == EXDEV)
    {
      struct stat st;
      if (!overwrite && fstatat (bd, bl, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return fs_err (err, EEXIST, "move to", b);
      return copy_across (ctx, ad, al, b, err);
    }
  return fs_err (err, errno, "move", a);
}

static int
remove_tree (int parent, const char *name, uint64_t mnt_id, int depth, sbx_error_t **err)
{
  cleanup_close int fd = -1;
  struct statx stx;
  struct dirent *de;
  DIR *d;
  int rc = 0;

  if (depth > MAX_TREE_DEPTH)
    return sbx_err (err, SBX_E_INVALID, "directory tree deeper than %d levels", MAX_TREE_DEPTH);
  fd = openat (parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return fs_err (err, errno, "open", name);
  /* Like rm --one-file-system: never descend into another mount. */
  if (statx (fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
    return sbx_err_sys (err, errno, "statx");
  if (stx.stx_mnt_id != mnt_id)
    return sbx_err (err, SBX_E_FORBIDDEN, "`%s` is a mount point", name);
  d = fdopendir (fd);
  if (d == NULL)
    return sbx_err_sys (err, errno, "fdopendir");
  fd = -1;
  while ((de = readdir (d)) != NULL)
    {
      struct stat st;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (S_ISDIR (st.st_mode))
        rc = remove_tree (dirfd (d), de->d_name, mnt_id, depth + 1, err);
      else if (unlinkat (dirfd (d), de->d_name, 0) < 0)
        rc = fs_err (err, errno, "remove", de->d_name);
      if (rc < 0)
        break;
    }
  closedir (d);
  if (rc == 0 && unlinkat (parent, name, AT_REMOVEDIR) < 0)
    rc = fs_err (err, errno, "remove", name);
  return rc;
}

int
sbx_fs_remove (const struct sbx_fs_ctx *ctx, const char *path, int recursive, sbx_error_t **err)
{
  char abs[SBX_FS_PATH_MAX], parent[SBX_FS_PATH_MAX], leaf[256];
  cleanup_close int dir = -1;
  struct statx stx;
  struct stat st;
  AS_USER (ctx);

  if (sbx_fs_normalize (path, abs, sizeof abs, err) < 0
      || split (abs, parent, sizeof parent, leaf, sizeof leaf, err) < 0)
    return -1;
  dir = open_dir (ctx, parent, err);
  if (dir < 0)
    return -1;
  if (fstatat (dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return fs_err (err, errno, "remove", abs);
  if (!S_ISDIR (st.st_mode))
    {
      if (unlinkat (dir, leaf, 0) < 0)
        return fs_err (err, errno, "remove", abs);
      return 0;
    }
  if (!recursive)
    {
      if (unlinkat (dir, leaf, AT_REMOVEDIR) < 0)
        return fs_err (err, errno, "remove", abs);
      return 0;
    }
  {
    cleanup_close int sub = openat (dir, leaf, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
      return fs_err (err, errno, "remove", abs);
    if (forbidden_fs (sub))
      return sbx_err (err, SBX_E_FORBIDDEN, "`%s` is not accessible through the files API", abs);
    if (statx (sub, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
      return sbx_err_sys (err, errno, "statx");
  }
  return remove_tree (dir, leaf, stx.stx_mnt_id, 0, err);
}
