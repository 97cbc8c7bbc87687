/* sbx: turn an uploaded archive (a tar of a directory, or an OCI image
 * archive) into template layers. Runs in a confined child of the parent
 * (tmpl_store.c: uid 0 without capabilities, no_new_privs, a Landlock
 * domain that reaches only its build directory): everything here parses
 * hostile bytes.
 *
 * Every name is cleaned (no "..", no absolute path) and every directory is
 * opened one component at a time with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) from the layer's root: a
 * symlink in an archive is created, never written through. Files lose
 * setuid/setgid; device nodes are refused; FIFOs are skipped; hard links
 * must name a regular file of the same layer. OCI whiteouts become
 * overlayfs ones: ".wh.NAME" a 0/0 character device (which mknod allows
 * without CAP_MKNOD), ".wh..wh..opq" the xattr user.overlay.opaque on its
 * directory (the overlay is mounted with userxattr).
 *
 * Output, in the build directory: layers/HEX/ (bottom first in `result`),
 * `result` ("layer HEX BYTES\n" lines) and `meta.json` (env, workdir,
 * user, source) for the front end.
 */
#include "iso/tmpl.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/cleanup.h"

#define MAX_LAYERS 64
#define MAX_JSON (4u << 20)
#define MAX_DIRS 100000

struct ctx
{
  const struct sbx_tmpl_limits *lim;
  uint64_t bytes, inodes;
  char *msg;
  size_t msg_len;
  int too_large;
  /* directories whose mode is applied once their layer is complete (root
     without capabilities could not write into a 0555 one meanwhile) */
  struct dirmode
  {
    char *path;
    mode_t mode;
  } *dirs;
  size_t ndirs;
};

static int fail (struct ctx *c, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static int too_large (struct ctx *c, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static int
fail (struct ctx *c, const char *fmt, ...)
{
  va_list ap;

  if (c->msg[0] == '\0')
    {
      va_start (ap, fmt);
      vsnprintf (c->msg, c->msg_len, fmt, ap);
      va_end (ap);
    }
  return -1;
}

static int
too_large (struct ctx *c, const char *fmt, ...)
{
  va_list ap;

  c->too_large = 1;
  if (c->msg[0] == '\0')
    {
      va_start (ap, fmt);
      vsnprintf (c->msg, c->msg_len, fmt, ap);
      va_end (ap);
    }
  return -1;
}

/* ---- paths ------------------------------------------------------------- */

/* "./a//b/" -> "a/b"; "" for the root. Refuses absolute paths, "..", and
   names no file system takes. */
static int
clean_path (struct ctx *c, const char *in, char *out, size_t outlen)
{
  size_t o = 0;
  const char *p = in;

  if (in == NULL)
    return fail (c, "an archive entry has no name");
  if (in[0] == '/')
    return fail (c, "archive entry `%.200s` has an absolute path", in);
  while (*p)
    {
      const char *s = p;
      size_t n;
      while (*p && *p != '/')
        p++;
      n = (size_t) (p - s);
      while (*p == '/')
        p++;
      if (n == 0 || (n == 1 && s[0] == '.'))
        continue;
      if (n == 2 && s[0] == '.' && s[1] == '.')
        return fail (c, "archive entry `%.200s` leaves the tree (`..`)", in);
      if (n > 255)
        return fail (c, "archive entry `%.200s` has a name over 255 bytes", in);
      if (o + n + 2 > outlen)
        return fail (c, "archive entry `%.200s` has a path over %zu bytes", in, outlen - 1);
      if (o)
        out[o++] = '/';
      memcpy (out + o, s, n);
      o += n;
    }
  out[o] = '\0';
  return 0;
}

static int
open_beneath (int dir, const char *path, int flags)
{
  struct open_how how;

  memset (&how, 0, sizeof how);
  how.flags = (uint64_t) (flags | O_CLOEXEC | O_NOFOLLOW);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return (int) syscall (SYS_openat2, dir, path, &how, sizeof how);
}

/* The directory holding `path` (made as needed, 0755), and its last name. */
static int
open_parent (struct ctx *c, int root, const char *path, const char **leaf)
{
  char buf[SBX_TMPL_PATH_MAX];
  char *slash, *comp, *save = NULL;
  int dir;

  snprintf (buf, sizeof buf, "%s", path);
  slash = strrchr (buf, '/');
  *leaf = slash ? path + (slash - buf) + 1 : path;
  dir = fcntl (root, F_DUPFD_CLOEXEC, 3);
  if (dir < 0 || slash == NULL)
    return dir < 0 ? fail (c, "dup: %s", strerror (errno)) : dir;
  *slash = '\0';
  for (comp = strtok_r (buf, "/", &save); comp; comp = strtok_r (NULL, "/", &save))
    {
      int next = open_beneath (dir, comp, O_PATH | O_DIRECTORY);
      if (next < 0 && errno == ENOENT)
        {
          if (mkdirat (dir, comp, 0755) < 0 && errno != EEXIST)
            {
              close (dir);
              return fail (c, "mkdir `%.200s`: %s", path, strerror (errno));
            }
          c->inodes++;
          next = open_beneath (dir, comp, O_PATH | O_DIRECTORY);
        }
      if (next < 0)
        {
          int e = errno;
          close (dir);
          if (e == ELOOP || e == ENOTDIR || e == EXDEV)
            return fail (c, "archive entry `%.200s` goes through a symlink or a file", path);
          return fail (c, "open `%.200s`: %s", path, strerror (e));
        }
      close (dir);
      dir = next;
    }
  return dir;
}

/* Clear the way for a new entry: a later entry of a layer replaces an
   earlier one (tar semantics), but never a directory with content. */
static int
clear_leaf (struct ctx *c, int dir, const char *leaf, const char *path, int keep_dir)
{
  struct stat st;

  if (fstatat (dir, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : fail (c, "stat `%.200s`: %s", path, strerror (errno));
  if (S_ISDIR (st.st_mode))
    {
      if (keep_dir)
        return 1;
      if (unlinkat (dir, leaf, AT_REMOVEDIR) < 0)
        return fail (c, "archive entry `%.200s` replaces a directory", path);
      return 0;
    }
  if (unlinkat (dir, leaf, 0) < 0)
    return fail (c, "replace `%.200s`: %s", path, strerror (errno));
  return 0;
}

/* ---- one layer --------------------------------------------------------- */

static struct archive *
open_archive (struct ctx *c, int fd)
{
  struct archive *a = archive_read_new ();

  if (a == NULL)
    return fail (c, "out of memory"), NULL;
  /* Named filters only: _all would include ones that run external programs. */
  archive_read_support_filter_gzip (a);
  archive_read_support_filter_zstd (a);
  archive_read_support_filter_bzip2 (a);
  archive_read_support_filter_xz (a);
  archive_read_support_format_tar (a);
  if (lseek (fd, 0, SEEK_SET) < 0 || archive_read_open_fd (a, fd, 65536) != ARCHIVE_OK)
    {
      fail (c, "not a tar archive: %s", archive_error_string (a) ? archive_error_string (a) : "?");
      archive_read_free (a);
      return NULL;
    }
  return a;
}

static int
write_data (struct ctx *c, struct archive *a, int fd, const char *path)
{
  for (;;)
    {
      const void *buf;
      size_t len;
      la_int64_t off;
      int r = archive_read_data_block (a, &buf, &len, &off);
      if (r == ARCHIVE_EOF)
        return 0;
      if (r != ARCHIVE_OK)
        return fail (c, "archive data of `%.200s`: %s", path,
                     archive_error_string (a) ? archive_error_string (a) : "truncated");
      if (off < 0)
        return fail (c, "archive data of `%.200s` has a negative offset", path);
      c->bytes += len;
      if (c->bytes > c->lim->max_bytes)
        return too_large (c, "the template is larger than %llu bytes",
                          (unsigned long long) c->lim->max_bytes);
      if ((uint64_t) off + len > c->lim->max_bytes)
        return too_large (c, "`%.200s` is larger than %llu bytes", path,
                          (unsigned long long) c->lim->max_bytes);
      while (len > 0)
        {
          ssize_t w = pwrite (fd, buf, len, off);
          if (w < 0)
            {
              if (errno == EINTR)
                continue;
              if (errno == EFBIG || errno == ENOSPC)
                return too_large (c, "writing `%.200s`: %s", path, strerror (errno));
              return fail (c, "write `%.200s`: %s", path, strerror (errno));
            }
          buf = (const char *) buf + w;
          len -= (size_t) w;
          off += w;
        }
    }
}

static int
remember_dir (struct ctx *c, const char *path, mode_t mode)
{
  struct dirmode *d;

  if (c->ndirs >= MAX_DIRS)
    return too_large (c, "more than %d directories", MAX_DIRS);
  d = realloc (c->dirs, (c->ndirs + 1) * sizeof *d);
  if (d == NULL)
    return fail (c, "out of memory");
  c->dirs = d;
  c->dirs[c->ndirs].path = strdup (path);
  if (c->dirs[c->ndirs].path == NULL)
    return fail (c, "out of memory");
  c->dirs[c->ndirs++].mode = mode;
  return 0;
}

static int
apply_dir_modes (struct ctx *c, int root)
{
  int rc = 0;

  /* Deepest last-seen first, so a parent turned read-only does not matter. */
  while (c->ndirs > 0)
    {
      struct dirmode *d = &c->dirs[--c->ndirs];
      int fd = d->path[0] ? open_beneath (root, d->path, O_PATH | O_DIRECTORY)
                          : fcntl (root, F_DUPFD_CLOEXEC, 3);
      if (fd >= 0)
        {
          char p[64];
          snprintf (p, sizeof p, "/proc/self/fd/%d", fd);
          /* fchmod needs a real fd; O_PATH + chmod on the magic link does not
             re-resolve anything the archive controls. */
          if (chmod (p, d->mode) < 0 && rc == 0)
            rc = fail (c, "chmod `%.200s`: %s", d->path, strerror (errno));
          close (fd);
        }
      free (d->path);
    }
  return rc;
}

static int
extract_entry (struct ctx *c, struct archive *a, struct archive_entry *e, int root)
{
  char path[SBX_TMPL_PATH_MAX];
  const char *leaf;
  mode_t type = archive_entry_filetype (e);
  mode_t perm = archive_entry_perm (e) & 01777; /* setuid and setgid dropped */
  const char *hl = archive_entry_hardlink (e);
  int dir, fd, rc = 0;

  if (clean_path (c, archive_entry_pathname (e), path, sizeof path) < 0)
    return -1;
  if (++c->inodes > c->lim->max_inodes)
    return too_large (c, "the template has more than %llu files",
                      (unsigned long long) c->lim->max_inodes);
  if (path[0] == '\0')
    return 0; /* the layer root: always 0755 */
  if (hl == NULL && (type == AE_IFCHR || type == AE_IFBLK))
    return fail (c, "archive entry `%.200s` is a device node (not allowed in templates)", path);
  if (hl == NULL && type == AE_IFIFO)
    return 0;
  dir = open_parent (c, root, path, &leaf);
  if (dir < 0)
    return -1;

  if (strcmp (leaf, ".wh..wh..opq") == 0)
    {
      char parent[SBX_TMPL_PATH_MAX];
      int d;
      snprintf (parent, sizeof parent, "%.*s", (int) (leaf - path), path);
      d = openat (dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (d < 0 || fsetxattr (d, "user.overlay.opaque", "y", 1, 0) < 0)
        rc = fail (c, "mark `%.200s` opaque: %s", parent[0] ? parent : "/", strerror (errno));
      if (d >= 0)
        close (d);
      close (dir);
      return rc;
    }
  if (strncmp (leaf, ".wh.", 4) == 0)
    {
      const char *victim = leaf + 4;
      if (victim[0] == '\0' || strcmp (victim, ".") == 0 || strcmp (victim, "..") == 0)
        rc = fail (c, "whiteout `%.200s` names nothing", path);
      else if (clear_leaf (c, dir, victim, path, 0) < 0)
        rc = -1;
      else if (mknodat (dir, victim, S_IFCHR | 0, makedev (0, 0)) < 0)
        rc = fail (c, "whiteout `%.200s`: %s", path, strerror (errno));
      close (dir);
      return rc;
    }

  if (hl != NULL)
    {
      char target[SBX_TMPL_PATH_MAX];
      const char *tleaf;
      struct stat st;
      int tdir;
      if (clean_path (c, hl, target, sizeof target) < 0 || target[0] == '\0')
        {
          close (dir);
          return fail (c, "hard link `%.200s` -> `%.200s` leaves the tree", path, hl);
        }
      tdir = open_parent (c, root, target, &tleaf);
      if (tdir < 0)
        {
          close (dir);
          return -1;
        }
      if (fstatat (tdir, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG (st.st_mode))
        rc = fail (c, "hard link `%.200s` -> `%.200s`: not a file of this layer", path, hl);
      else if (clear_leaf (c, dir, leaf, path, 0) < 0)
        rc = -1;
      else if (linkat (tdir, tleaf, dir, leaf, 0) < 0)
        rc = fail (c, "hard link `%.200s`: %s", path, strerror (errno));
      close (tdir);
      close (dir);
      return rc;
    }

  switch (type)
    {
    case AE_IFDIR:
      rc = clear_leaf (c, dir, leaf, path, 1);
      if (rc == 0 && mkdirat (dir, leaf, 0755) < 0)
        rc = fail (c, "mkdir `%.200s`: %s", path, strerror (errno));
      if (rc >= 0)
        rc = remember_dir (c, path, perm);
      break;
    case AE_IFREG:
      if (clear_leaf (c, dir, leaf, path, 0) < 0)
        {
          rc = -1;
          break;
        }
      fd = openat (dir, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0)
        {
          rc = fail (c, "create `%.200s`: %s", path, strerror (errno));
          break;
        }
      rc = write_data (c, a, fd, path);
      if (rc == 0 && fchmod (fd, perm) < 0)
        rc = fail (c, "chmod `%.200s`: %s", path, strerror (errno));
      close (fd);
      break;
    case AE_IFLNK:
      {
        const char *t = archive_entry_symlink (e);
        if (t == NULL || t[0] == '\0' || strlen (t) >= SBX_TMPL_PATH_MAX)
          rc = fail (c, "symlink `%.200s` has no usable target", path);
        else if (clear_leaf (c, dir, leaf, path, 0) < 0)
          rc = -1;
        else if (symlinkat (t, dir, leaf) < 0)
          rc = fail (c, "symlink `%.200s`: %s", path, strerror (errno));
        break;
      }
    default:
      rc = fail (c, "archive entry `%.200s` has an unsupported type", path);
      break;
    }
  close (dir);
  return rc < 0 ? -1 : 0;
}

static int
extract_layer (struct ctx *c, int blob, int layers, const char *hex)
{
  struct archive *a;
  struct archive_entry *e;
  int root, r, rc = 0;

  if (mkdirat (layers, hex, 0700) < 0)
    {
      if (errno == EEXIST) /* the same layer twice in one image */
        return 0;
      return fail (c, "mkdir layer: %s", strerror (errno));
    }
  root = open_beneath (layers, hex, O_PATH | O_DIRECTORY);
  if (root < 0)
    return fail (c, "open layer: %s", strerror (errno));
  a = open_archive (c, blob);
  if (a == NULL)
    {
      close (root);
      return -1;
    }
  if (remember_dir (c, "", 0755) < 0)
    rc = -1;
  while (rc == 0 && (r = archive_read_next_header (a, &e)) != ARCHIVE_EOF)
    {
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        {
          rc = fail (c, "layer %.12s: %s", hex,
                     archive_error_string (a) ? archive_error_string (a) : "truncated archive");
          break;
        }
      rc = extract_entry (c, a, e, root);
    }
  if (apply_dir_modes (c, root) < 0)
    rc = -1;
  archive_read_free (a);
  close (root);
  return rc;
}

/* ---- hashing ----------------------------------------------------------- */

static int
sha256_fd (struct ctx *c, int fd, char hex[65])
{
  static const char digits[] = "0123456789abcdef";
  unsigned char md[32], buf[65536];
  unsigned mdlen = 0;
  EVP_MD_CTX *h = EVP_MD_CTX_new ();
  ssize_t n;
  off_t off = 0;

  if (h == NULL || EVP_DigestInit_ex (h, EVP_sha256 (), NULL) != 1)
    {
      EVP_MD_CTX_free (h);
      return fail (c, "sha256 unavailable");
    }
  while ((n = pread (fd, buf, sizeof buf, off)) > 0)
    {
      EVP_DigestUpdate (h, buf, (size_t) n);
      off += n;
    }
  EVP_DigestFinal_ex (h, md, &mdlen);
  EVP_MD_CTX_free (h);
  if (n < 0)
    return fail (c, "read: %s", strerror (errno));
  for (unsigned i = 0; i < 32; i++)
    {
      hex[2 * i] = digits[md[i] >> 4];
      hex[2 * i + 1] = digits[md[i] & 15];
    }
  hex[64] = '\0';
  return 0;
}

static int
is_hex64 (const char *s)
{
  size_t i;

  for (i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return s[64] == '\0';
}

/* ---- OCI --------------------------------------------------------------- */

/* Unpack the outer archive's regular files into in/ (names cleaned, the
   same limits). */
static int
unpack_outer (struct ctx *c, int in_fd, int indir)
{
  struct archive *a = open_archive (c, in_fd);
  struct archive_entry *e;
  int r, rc = 0;

  if (a == NULL)
    return -1;
  while (rc == 0 && (r = archive_read_next_header (a, &e)) != ARCHIVE_EOF)
    {
      char path[SBX_TMPL_PATH_MAX];
      const char *leaf;
      int dir, fd;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        {
          rc = fail (c, "image archive: %s",
                     archive_error_string (a) ? archive_error_string (a) : "truncated archive");
          break;
        }
      if (clean_path (c, archive_entry_pathname (e), path, sizeof path) < 0)
        {
          rc = -1;
          break;
        }
      if (archive_entry_filetype (e) != AE_IFREG || archive_entry_hardlink (e) != NULL
          || path[0] == '\0')
        continue;
      if (++c->inodes > c->lim->max_inodes)
        {
          rc = too_large (c, "the image archive has more than %llu files",
                          (unsigned long long) c->lim->max_inodes);
          break;
        }
      dir = open_parent (c, indir, path, &leaf);
      if (dir < 0)
        {
          rc = -1;
          break;
        }
      if (clear_leaf (c, dir, leaf, path, 0) < 0)
        rc = -1;
      else if ((fd = openat (dir, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                             0600))
               < 0)
        rc = fail (c, "create `%.200s`: %s", path, strerror (errno));
      else
        {
          rc = write_data (c, a, fd, path);
          close (fd);
        }
      close (dir);
    }
  archive_read_free (a);
  /* The unpacked archive counts once, not again as layers. */
  c->bytes = 0;
  c->inodes = 0;
  return rc;
}

static int
open_in (struct ctx *c, int indir, const char *path)
{
  char clean[SBX_TMPL_PATH_MAX];
  int fd;

  if (clean_path (c, path, clean, sizeof clean) < 0)
    return -1;
  fd = clean[0] ? open_beneath (indir, clean, O_RDONLY) : -1;
  if (fd < 0)
    return fail (c, "the image archive has no `%.200s`", path);
  return fd;
}

/* A blob by digest "sha256:HEX", its content checked against the digest. */
static int
open_blob (struct ctx *c, int indir, const char *digest, char hex[65])
{
  char path[100], got[65];
  int fd;

  if (digest == NULL || strncmp (digest, "sha256:", 7) != 0 || !is_hex64 (digest + 7))
    return fail (c, "digest `%.100s` is not sha256:<64 hex digits>", digest ? digest : "");
  snprintf (hex, 65, "%s", digest + 7);
  snprintf (path, sizeof path, "blobs/sha256/%s", hex);
  fd = open_in (c, indir, path);
  if (fd < 0)
    return -1;
  if (sha256_fd (c, fd, got) < 0)
    {
      close (fd);
      return -1;
    }
  if (strcmp (got, hex) != 0)
    {
      close (fd);
      return fail (c, "blob sha256:%.12s... does not match its digest (content is sha256:%.12s...)",
                   hex, got);
    }
  return fd;
}

static json_t *
load_json (struct ctx *c, int fd, const char *what)
{
  json_error_t je;
  struct stat st;
  json_t *j;
  char *buf;
  ssize_t n;

  if (fstat (fd, &st) < 0 || st.st_size > (off_t) MAX_JSON)
    return fail (c, "%s is missing or larger than %u bytes", what, MAX_JSON), NULL;
  buf = malloc ((size_t) st.st_size + 1);
  if (buf == NULL)
    return fail (c, "out of memory"), NULL;
  n = pread (fd, buf, (size_t) st.st_size, 0);
  if (n != st.st_size)
    {
      free (buf);
      return fail (c, "read %s", what), NULL;
    }
  j = json_loadb (buf, (size_t) n, JSON_REJECT_DUPLICATES, &je);
  free (buf);
  if (j == NULL)
    return fail (c, "malformed %s: %s (line %d)", what, je.text, je.line), NULL;
  if (!json_is_object (j) && !json_is_array (j))
    {
      json_decref (j);
      return fail (c, "malformed %s: not a JSON object", what), NULL;
    }
  return j;
}

struct layer_ref
{
  char hex[65];
  int fd;
};

/* index.json -> manifest -> config + layers (OCI layout). */
static int
read_oci_index (struct ctx *c, int indir, json_t **config, struct layer_ref *layers, int *nlayers)
{
  int fd = open_in (c, indir, "index.json"), depth;
  char hex[65];
  json_t *idx, *man = NULL, *desc, *arr, *l;
  size_t i;

  if (fd < 0)
    return -1;
  idx = load_json (c, fd, "index.json");
  close (fd);
  if (idx == NULL)
    return -1;
  for (depth = 0; depth < 3; depth++)
    {
      const char *mt;
      int nested;
      arr = json_object_get (idx, "manifests");
      desc = json_array_get (arr, 0);
      if (!json_is_object (desc) || !json_is_string (json_object_get (desc, "digest")))
        {
          json_decref (idx);
          return fail (c, "malformed index: `manifests` needs a descriptor with a digest");
        }
      fd = open_blob (c, indir, json_string_value (json_object_get (desc, "digest")), hex);
      if (fd < 0)
        {
          json_decref (idx);
          return -1;
        }
      /* desc is idx's: read what we need of it before idx goes */
      mt = json_string_value (json_object_get (desc, "mediaType"));
      nested = mt != NULL && strstr (mt, "index") != NULL;
      man = load_json (c, fd, "image manifest");
      close (fd);
      json_decref (idx);
      if (man == NULL)
        return -1;
      if (nested)
        {
          idx = man;
          man = NULL;
          continue;
        }
      break;
    }
  if (man == NULL)
    return fail (c, "image indexes nest too deep");
  desc = json_object_get (man, "config");
  arr = json_object_get (man, "layers");
  if (!json_is_object (desc) || !json_is_array (arr))
    {
      json_decref (man);
      return fail (c, "malformed image manifest: needs `config` and `layers`");
    }
  if (json_array_size (arr) > MAX_LAYERS)
    {
      json_decref (man);
      return too_large (c, "the image has more than %d layers", MAX_LAYERS);
    }
  fd = open_blob (c, indir, json_string_value (json_object_get (desc, "digest")), hex);
  if (fd < 0 || (*config = load_json (c, fd, "image config")) == NULL)
    {
      if (fd >= 0)
        close (fd);
      json_decref (man);
      return -1;
    }
  close (fd);
  json_array_foreach (arr, i, l)
  {
    layers[*nlayers].fd
        = open_blob (c, indir, json_string_value (json_object_get (l, "digest")),
                     layers[*nlayers].hex);
    if (layers[*nlayers].fd < 0)
      {
        json_decref (man);
        return -1;
      }
    (*nlayers)++;
  }
  json_decref (man);
  return 0;
}

/* A file named in docker save's manifest.json, its digest checked when
   its name carries one (blobs/sha256/HEX), else computed. */
static int
open_docker_path (struct ctx *c, int indir, const char *path, char hex[65])
{
  const char *p = path ? strstr (path, "sha256/") : NULL;
  int fd;

  if (path == NULL)
    return fail (c, "malformed manifest.json: a path is not a string");
  if (p && strlen (p + 7) == 64 && is_hex64 (p + 7))
    {
      char digest[72];
      snprintf (digest, sizeof digest, "sha256:%s", p + 7);
      return open_blob (c, indir, digest, hex);
    }
  fd = open_in (c, indir, path);
  if (fd >= 0 && sha256_fd (c, fd, hex) < 0)
    {
      close (fd);
      return -1;
    }
  return fd;
}

static int
read_docker_manifest (struct ctx *c, int indir, json_t **config, struct layer_ref *layers,
                      int *nlayers)
{
  char hex[65];
  json_t *m, *first, *arr, *l;
  size_t i;
  int fd;

  if (faccessat (indir, "manifest.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    return fail (c, "not an image archive: no index.json (OCI) and no manifest.json (docker save)");
  fd = open_in (c, indir, "manifest.json");
  if (fd < 0)
    return -1;
  m = load_json (c, fd, "manifest.json");
  close (fd);
  if (m == NULL)
    return -1;
  first = json_array_get (m, 0);
  arr = json_object_get (first, "Layers");
  if (!json_is_object (first) || !json_is_string (json_object_get (first, "Config"))
      || !json_is_array (arr))
    {
      json_decref (m);
      return fail (c, "malformed manifest.json: needs [{\"Config\": ..., \"Layers\": [...]}]");
    }
  if (json_array_size (arr) > MAX_LAYERS)
    {
      json_decref (m);
      return too_large (c, "the image has more than %d layers", MAX_LAYERS);
    }
  fd = open_docker_path (c, indir, json_string_value (json_object_get (first, "Config")), hex);
  if (fd < 0 || (*config = load_json (c, fd, "image config")) == NULL)
    {
      if (fd >= 0)
        close (fd);
      json_decref (m);
      return -1;
    }
  close (fd);
  json_array_foreach (arr, i, l)
  {
    layers[*nlayers].fd = open_docker_path (c, indir, json_string_value (l), layers[*nlayers].hex);
    if (layers[*nlayers].fd < 0)
      {
        json_decref (m);
        return -1;
      }
    (*nlayers)++;
  }
  json_decref (m);
  return 0;
}

/* ---- output ------------------------------------------------------------ */

static int
write_file (struct ctx *c, int dir, const char *name, const char *data, size_t len)
{
  int fd = openat (dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  ssize_t w;

  if (fd < 0)
    return fail (c, "create %s: %s", name, strerror (errno));
  w = write (fd, data, len);
  close (fd);
  if (w != (ssize_t) len)
    return fail (c, "write %s", name);
  return 0;
}

static int
write_meta (struct ctx *c, int build, json_t *config, const char *source)
{
  json_t *cfg = json_object_get (config, "config"), *meta, *env = json_array (), *v;
  const char *s;
  char *text;
  size_t i;
  int rc;

  json_array_foreach (json_object_get (cfg, "Env"), i, v)
  {
    if (json_is_string (v) && strchr (json_string_value (v), '=') != NULL)
      json_array_append (env, v);
  }
  meta = json_pack ("{s:s, s:o}", "source", source, "env", env);
  s = json_string_value (json_object_get (cfg, "WorkingDir"));
  if (s && s[0] == '/')
    json_object_set_new (meta, "workdir", json_string (s));
  s = json_string_value (json_object_get (cfg, "User"));
  if (s && s[0])
    json_object_set_new (meta, "user", json_string (s));
  text = json_dumps (meta, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref (meta);
  if (text == NULL)
    return fail (c, "image config: cannot encode its settings");
  if (strlen (text) > SBX_TMPL_META_MAX)
    {
      free (text);
      return too_large (c, "the image config's env, workdir and user exceed %d bytes",
                        SBX_TMPL_META_MAX);
    }
  rc = write_file (c, build, "meta.json", text, strlen (text));
  free (text);
  return rc;
}

int
sbx_tmpl_extract (int in_fd, int build, enum sbx_tmpl_format format,
                  const struct sbx_tmpl_limits *lim, char *msg, size_t msg_len)
{
  struct ctx c = {lim, 0, 0, msg, msg_len, 0, NULL, 0};
  struct layer_ref layers[MAX_LAYERS];
  json_t *config = NULL;
  char result[MAX_LAYERS * 100];
  size_t rlen = 0;
  int nlayers = 0, layers_dir, rc = -1, i;

  msg[0] = '\0';
  if (mkdirat (build, "layers", 0700) < 0
      || (layers_dir = open_beneath (build, "layers", O_PATH | O_DIRECTORY)) < 0)
    return fail (&c, "mkdir layers: %s", strerror (errno));
  if (format == SBX_TMPL_DIR)
    {
      layers[0].fd = fcntl (in_fd, F_DUPFD_CLOEXEC, 3);
      if (layers[0].fd < 0 || sha256_fd (&c, in_fd, layers[0].hex) < 0)
        goto out;
      nlayers = 1;
      config = json_object ();
    }
  else
    {
      int indir;
      if (mkdirat (build, "in", 0700) < 0
          || (indir = open_beneath (build, "in", O_PATH | O_DIRECTORY)) < 0)
        {
          fail (&c, "mkdir in: %s", strerror (errno));
          goto out;
        }
      rc = unpack_outer (&c, in_fd, indir);
      if (rc == 0)
        rc = faccessat (indir, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0
                 ? read_oci_index (&c, indir, &config, layers, &nlayers)
                 : read_docker_manifest (&c, indir, &config, layers, &nlayers);
      close (indir);
      if (rc < 0)
        goto out;
      rc = -1;
      if (nlayers == 0)
        {
          fail (&c, "the image has no layers");
          goto out;
        }
    }
  for (i = 0; i < nlayers; i++)
    {
      uint64_t before = c.bytes;
      if (extract_layer (&c, layers[i].fd, layers_dir, layers[i].hex) < 0)
        goto out;
      rlen += (size_t) snprintf (result + rlen, sizeof result - rlen, "layer %s %llu\n",
                                 layers[i].hex, (unsigned long long) (c.bytes - before));
    }
  if (write_meta (&c, build, config, format == SBX_TMPL_DIR ? "dir" : "oci") < 0
      || write_file (&c, build, "result", result, rlen) < 0)
    goto out;
  rc = 0;
out:
  for (i = 0; i < nlayers; i++)
    close (layers[i].fd);
  for (size_t d = 0; d < c.ndirs; d++)
    free (c.dirs[d].path);
  free (c.dirs);
  json_decref (config);
  close (layers_dir);
  if (rc < 0 && msg[0] == '\0')
    snprintf (msg, msg_len, "template build failed");
  return rc < 0 ? (c.too_large ? -2 : -1) : 0;
}
