/* sbx CLI: `sbx cp -r`, a directory tree into or out of a sandbox, as
 * docker cp copies one: the source directory becomes DST, or goes into
 * DST when DST is a directory already (SRC/. : what it holds goes into
 * DST itself); directories that exist are merged into, files replaced. Regular files and directories travel (with their
 * permission bits); links and special files are left out and counted.
 *
 * What a sandbox sends is hostile: a name from its listing must be one
 * path component (no '/', not "." or ".."), and on our side nothing is
 * ever opened through a link (every step is openat(O_NOFOLLOW) from the
 * directory above), so a tree cannot write outside the local target.
 */
#include "cli/cp_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/cleanup.h"
#include "util/parse.h"

#define TREE_MAX_DEPTH 64

struct tally
{
  unsigned long long files, dirs, skipped;
  uint64_t bytes;
  int progress; /* stderr is a terminal: a line that counts */
};

static void
show_progress (const struct tally *t)
{
  if (t->progress)
    fprintf (stderr, "\rsbx: cp: %llu files, %.1f MB", t->files, (double) t->bytes / 1e6);
}

static void
finish_progress (const struct tally *t, const char *where)
{
  if (t->progress)
    fputc ('\r', stderr);
  fprintf (stderr, "sbx: cp: copied %llu file%s (%.1f MB) in %llu director%s to %s", t->files,
           t->files == 1 ? "" : "s", (double) t->bytes / 1e6, t->dirs, t->dirs == 1 ? "y" : "ies",
           where);
  if (t->skipped)
    fprintf (stderr, "; left out %llu link%s or special file%s", t->skipped,
             t->skipped == 1 ? "" : "s", t->skipped == 1 ? "" : "s");
  fputc ('\n', stderr);
}

/* ---- into the sandbox --------------------------------------------------- */

static int
remote_mkdir (struct sbx_api *api, const char *id, const char *path, mode_t mode,
              sbx_error_t **err)
{
  struct sbx_buf target = SBX_BUF_INIT;
  char octal[8];
  json_t *body;
  int rc;

  /* owner-writable while the copy fills it (as cp -r makes them) */
  snprintf (octal, sizeof octal, "%04o", (unsigned) ((mode | 0700) & 0777));
  body = json_pack ("{s:s,s:b,s:s}", "path", path, "parents", 1, "mode", octal);
  if (body == NULL)
    return sbx_err (err, SBX_E_INVALID, "cp: `%s` is not valid UTF-8", path);
  sbx_api_sandbox_path (&target, id, "/files/mkdir");
  rc = sbx_api_json (api, "POST", target.data, body, NULL, err);
  json_decref (body);
  sbx_buf_free (&target);
  return rc < 0 ? -1 : 0;
}

static int
up (struct sbx_api *api, int dir, const char *id, const char *rpath, int depth,
    struct tally *t, sbx_error_t **err)
{
  DIR *d;
  struct dirent *de;
  int rc = 0;

  if (depth > TREE_MAX_DEPTH)
    return sbx_err (err, SBX_E_INVALID, "cp: deeper than %d directories at %s", TREE_MAX_DEPTH,
                    rpath);
  d = fdopendir (dir);
  if (d == NULL)
    {
      close (dir);
      return sbx_err_sys (err, errno, "cp: reading a directory");
    }
  while (rc == 0 && (de = readdir (d)) != NULL)
    {
      struct stat st;
      cleanup_free char *child = NULL;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        {
          rc = sbx_err_sys (err, errno, "cp: %s", de->d_name);
          break;
        }
      if (asprintf (&child, "%s/%s", rpath, de->d_name) < 0)
        sbx_oom ();
      if (S_ISDIR (st.st_mode))
        {
          int sub = openat (dirfd (d), de->d_name,
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub < 0)
            rc = sbx_err_sys (err, errno, "cp: %s", de->d_name);
          else if ((rc = remote_mkdir (api, id, child, st.st_mode, err)) == 0)
            {
              t->dirs++;
              rc = up (api, sub, id, child, depth + 1, t, err);
            }
          else
            close (sub);
        }
      else if (S_ISREG (st.st_mode))
        {
          cleanup_close int fd
              = openat (dirfd (d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
          struct stat now;
          if (fd < 0 || fstat (fd, &now) < 0)
            rc = sbx_err_sys (err, errno, "cp: %s", de->d_name);
          else if ((rc = sbx_api_put_file (api, id, child, fd, (uint64_t) now.st_size,
                                           (int) (now.st_mode & 0777), 0, err))
                   == 0)
            {
              t->files++;
              t->bytes += (uint64_t) now.st_size;
              show_progress (t);
            }
        }
      else
        t->skipped++;
    }
  closedir (d);
  return rc;
}

int
sbx_cli_cp_tree_up (struct sbx_api *api, const char *local, const char *id, const char *rpath,
                    int dst_is_dir)
{
  cleanup_error sbx_error_t *e = NULL;
  cleanup_free char *top = NULL, *where = NULL;
  char scratch[256];
  struct tally t = {0, 0, 0, 0, isatty (STDERR_FILENO)};
  struct stat st;
  const char *base = sbx_cli_basename (local, scratch, sizeof scratch);
  int dir = open (local, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (dir < 0 || fstat (dir, &st) < 0)
    {
      sbx_cli_message ("cp: %s: %s", local, strerror (errno));
      if (dir >= 0)
        close (dir);
      return SBX_EXIT_FAILURE;
    }
  if (dst_is_dir && base[0] != '\0' && strcmp (base, ".") != 0)
    {
      if (asprintf (&top, "%s%s%s", rpath, rpath[strlen (rpath) - 1] == '/' ? "" : "/", base) < 0)
        sbx_oom ();
    }
  else if ((top = strdup (rpath)) == NULL)
    sbx_oom ();
  if (remote_mkdir (api, id, top, st.st_mode, &e) < 0)
    {
      close (dir);
      return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
    }
  t.dirs = 1;
  if (up (api, dir, id, top, 1, &t, &e) < 0)
    {
      if (t.progress)
        fputc ('\n', stderr);
      return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
    }
  if (asprintf (&where, "%s:%s", id, top) < 0)
    sbx_oom ();
  finish_progress (&t, where);
  return 0;
}

/* ---- out of the sandbox ------------------------------------------------- */

static int
write_to (void *ctx, const char *data, size_t len, sbx_error_t **err)
{
  const int *fd = ctx;

  if (sbx_write_all (*fd, data, len) < 0)
    return sbx_err_sys (err, errno, "cp: writing");
  return 0;
}

/* A name the sandbox listed: one path component of a sane length. */
static int
name_ok (const char *name)
{
  size_t n = name ? strlen (name) : 0;

  return n > 0 && n < 256 && strchr (name, '/') == NULL && strcmp (name, ".") != 0
         && strcmp (name, "..") != 0;
}

/* mkdirat dir/name (merged into when it is a directory already), opened
   without following a link. */
static int
local_dir (int dir, const char *name, mode_t mode, sbx_error_t **err)
{
  int fd;

  if (mkdirat (dir, name, (mode | 0700) & 0777) < 0 && errno != EEXIST)
    return sbx_err_sys (err, errno, "cp: %s", name);
  fd = openat (dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys (err, errno == ELOOP || errno == ENOTDIR ? EEXIST : errno, "cp: %s", name);
  return fd;
}

static int
down (struct sbx_api *api, const char *id, const char *rpath, int dir, int depth,
      struct tally *t, sbx_error_t **err)
{
  struct sbx_buf target = SBX_BUF_INIT;
  json_t *answer = NULL, *e;
  size_t i;
  int rc = 0;

  if (depth > TREE_MAX_DEPTH)
    return sbx_err (err, SBX_E_INVALID, "cp: deeper than %d directories at %s:%s",
                    TREE_MAX_DEPTH, id, rpath);
  sbx_api_sandbox_path (&target, id, "/files/list?depth=1&path=");
  sbx_url_escape (&target, rpath, 1);
  if (sbx_api_json (api, "GET", target.data, NULL, &answer, err) < 0)
    {
      sbx_buf_free (&target);
      return -1;
    }
  if (json_is_true (json_object_get (answer, "truncated")))
    rc = sbx_err (err, SBX_E_TOO_LARGE, "cp: %s:%s has more entries than the daemon lists",
                  id, rpath);
  json_array_foreach (json_object_get (answer, "entries"), i, e)
    {
      const char *name = json_string_value (json_object_get (e, "name"));
      const char *type = json_string_value (json_object_get (e, "type"));
      const char *mode_text = json_string_value (json_object_get (e, "mode"));
      mode_t mode = mode_text ? (mode_t) (strtoul (mode_text, NULL, 8) & 0777) : 0644;
      cleanup_free char *child = NULL;
      if (rc != 0)
        break;
      if (!name_ok (name) || type == NULL)
        {
          rc = sbx_err (err, SBX_E_INVALID, "cp: the sandbox listed a bad name in %s", rpath);
          break;
        }
      if (asprintf (&child, "%s%s%s", rpath, rpath[strlen (rpath) - 1] == '/' ? "" : "/", name)
          < 0)
        sbx_oom ();
      if (strcmp (type, "dir") == 0)
        {
          int sub = local_dir (dir, name, mode, err);
          if (sub < 0)
            rc = -1;
          else
            {
              t->dirs++;
              rc = down (api, id, child, sub, depth + 1, t, err);
              close (sub);
            }
        }
      else if (strcmp (type, "file") == 0)
        {
          struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
          cleanup_close int fd
              = openat (dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
          if (fd < 0)
            {
              rc = sbx_err_sys (err, errno, "cp: %s", name);
              break;
            }
          sbx_buf_reset (&target);
          sbx_api_sandbox_path (&target, id, "/files?path=");
          sbx_url_escape (&target, child, 1);
          req.method = "GET";
          req.target = target.data;
          if (sbx_api_request (api, NULL, &req, write_to, &fd, NULL, err) < 0)
            rc = -1;
          else
            {
              struct stat st;
              t->files++;
              if (fstat (fd, &st) == 0)
                t->bytes += (uint64_t) st.st_size;
              show_progress (t);
            }
        }
      else
        t->skipped++;
    }
  json_decref (answer);
  sbx_buf_free (&target);
  return rc;
}

int
sbx_cli_cp_tree_down (struct sbx_api *api, const char *id, const char *rpath, const char *local)
{
  cleanup_error sbx_error_t *e = NULL;
  cleanup_free char *parent = NULL, *name = NULL, *where = NULL, *trimmed = strdup (local);
  char scratch[256];
  struct tally t = {0, 0, 0, 0, isatty (STDERR_FILENO)};
  struct stat lst;
  size_t n;
  int pdir, top;

  if (trimmed == NULL)
    sbx_oom ();
  /* "out/" is "out" */
  for (n = strlen (trimmed); n > 1 && trimmed[n - 1] == '/'; n--)
    trimmed[n - 1] = '\0';
  local = trimmed;

  /* into LOCAL when it is a directory already (what is in RPATH/. goes
     into LOCAL itself, as with docker cp), else as LOCAL */
  if (stat (local, &lst) == 0 && S_ISDIR (lst.st_mode))
    {
      const char *base = sbx_cli_basename (rpath, scratch, sizeof scratch);
      int contents = strcmp (base, ".") == 0;
      const char *slash = strrchr (local, '/');
      if (contents && slash != NULL && slash[1] != '\0')
        {
          parent = strndup (local, (size_t) (slash - local + 1));
          name = strdup (slash + 1);
        }
      else if (contents)
        {
          parent = strdup (".");
          name = strdup (local);
        }
      else
        {
          parent = strdup (local);
          name = strdup (base[0] ? base : "root");
        }
    }
  else
    {
      const char *base = sbx_cli_basename (local, scratch, sizeof scratch);
      const char *slash = strrchr (local, '/');
      parent = slash ? strndup (local, (size_t) (slash - local + 1)) : strdup (".");
      name = strdup (base);
    }
  if (parent == NULL || name == NULL)
    sbx_oom ();
  if (!name_ok (name))
    {
      sbx_cli_message ("cp: %s: not a directory name to copy into", local);
      return SBX_EXIT_FAILURE;
    }
  pdir = open (parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pdir < 0)
    {
      sbx_cli_message ("cp: %s: %s", parent, strerror (errno));
      return SBX_EXIT_FAILURE;
    }
  top = local_dir (pdir, name, 0755, &e);
  close (pdir);
  if (top < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_FAILURE);
  t.dirs = 1;
  if (down (api, id, rpath, top, 1, &t, &e) < 0)
    {
      close (top);
      if (t.progress)
        fputc ('\n', stderr);
      return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
    }
  close (top);
  if (asprintf (&where, "%s%s%s", parent, parent[strlen (parent) - 1] == '/' ? "" : "/", name) < 0)
    sbx_oom ();
  finish_progress (&t, where);
  return 0;
}
