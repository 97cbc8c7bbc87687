/* sbx CLI: `sbx cp SRC DST`, a file (or, as docker cp, a directory
 * tree: cp_tree.c) into or out of a sandbox.
 *
 * Exactly one side is `ID:PATH`; `-` on the local side is stdin or stdout.
 * Bytes travel raw (GET/PUT /v1/sandboxes/{id}/files), never through JSON.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "cli/cp_tree.h"
#include "util/cleanup.h"

#define COPY_CHUNK (64 * 1024)

/* "ID:PATH" -> id (owned) and path (into arg). A local path containing ':'
   can be written "./a:b": the part before ':' must look like an id. */
static int
split_remote (const char *arg, char **id, const char **path)
{
  const char *colon = strchr (arg, ':'), *p;

  if (colon == NULL || colon == arg)
    return 0;
  for (p = arg; p < colon; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')
          || *p == '-' || *p == '_'))
      return 0;
  *id = strndup (arg, (size_t) (colon - arg));
  if (*id == NULL)
    sbx_oom ();
  *path = colon + 1;
  return 1;
}

/* Copy a stream of unknown size (a pipe) into an unlinked temporary file,
   so that it can be sent with a Content-Length. */
static int
spool (int in, int *out, uint64_t *size, sbx_error_t **err)
{
  const char *dir = getenv ("TMPDIR");
  cleanup_close int fd = -1;
  cleanup_free char *buf = NULL;
  uint64_t total = 0;

  if (dir == NULL || dir[0] == '\0')
    dir = "/tmp";
  fd = open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    {
      cleanup_free char *tmpl = NULL;
      if (asprintf (&tmpl, "%s/sbx-cp-XXXXXX", dir) < 0)
        sbx_oom ();
      fd = mkostemp (tmpl, O_CLOEXEC);
      if (fd < 0)
        return sbx_err_sys (err, errno, "creating a temporary file in %s", dir);
      unlink (tmpl);
    }
  buf = malloc (COPY_CHUNK);
  if (buf == NULL)
    sbx_oom ();
  for (;;)
    {
      ssize_t n = read (in, buf, COPY_CHUNK);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          return sbx_err_sys (err, errno, "reading the input");
        }
      if (n == 0)
        break;
      if (sbx_write_all (fd, buf, (size_t) n) < 0)
        return sbx_err_sys (err, errno, "writing a temporary file in %s", dir);
      total += (uint64_t) n;
    }
  if (lseek (fd, 0, SEEK_SET) < 0)
    return sbx_err_sys (err, errno, "lseek");
  *out = sbx_steal_fd (&fd);
  *size = total;
  return 0;
}

/* 1 if `path` in the sandbox is a directory. */
static int
remote_is_dir (struct sbx_api *api, const char *id, const char *path)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_buf target = SBX_BUF_INIT;
  json_t *st = NULL;
  int dir = 0;

  sbx_api_sandbox_path (&target, id, "/files/stat?path=");
  sbx_url_escape (&target, path, 1);
  if (sbx_api_json (api, "GET", target.data, NULL, &st, &e) >= 0)
    {
      const char *type = json_string_value (json_object_get (st, "type"));
      dir = type != NULL && strcmp (type, "dir") == 0;
    }
  json_decref (st);
  sbx_buf_free (&target);
  return dir;
}

static int
upload (struct sbx_api *api, const char *local, const char *id, const char *rpath)
{
  cleanup_error sbx_error_t *e = NULL;
  cleanup_close int fd = -1;
  cleanup_free char *path = NULL;
  char scratch[256];
  const char *base = NULL;
  struct stat st;
  uint64_t size = 0;
  off_t start;
  int in = STDIN_FILENO, mode = -1;
  size_t rlen = strlen (rpath);

  if (strcmp (local, "-") != 0)
    {
      fd = open (local, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        {
          sbx_cli_message ("cp: %s: %s", local, strerror (errno));
          return SBX_EXIT_FAILURE;
        }
      in = fd;
      base = sbx_cli_basename (local, scratch, sizeof scratch);
    }
  if (fstat (in, &st) < 0)
    {
      sbx_cli_message ("cp: %s: %s", local, strerror (errno));
      return SBX_EXIT_FAILURE;
    }
  if (S_ISDIR (st.st_mode))
    return sbx_cli_cp_tree_up (api, local, id, rlen ? rpath : "/home/user",
                               rlen == 0 || remote_is_dir (api, id, rpath));
  if (base != NULL)
    mode = (int) (st.st_mode & 07777);
  start = S_ISREG (st.st_mode) ? lseek (in, 0, SEEK_CUR) : -1;
  if (start >= 0 && start <= st.st_size)
    size = (uint64_t) (st.st_size - start);
  else
    {
      int spooled = -1;
      if (spool (in, &spooled, &size, &e) < 0)
        return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_FAILURE);
      close_and_reset (&fd);
      fd = spooled;
      in = fd;
      start = 0;
    }

  if (rlen == 0 || rpath[rlen - 1] == '/')
    {
      if (base == NULL || base[0] == '\0')
        {
          sbx_cli_message ("cp: %s:%s names a directory; give the file a name", id, rpath);
          return SBX_EXIT_FAILURE;
        }
      if (asprintf (&path, "%s%s", rpath, base) < 0)
        sbx_oom ();
    }
  else if ((path = strdup (rpath)) == NULL)
    sbx_oom ();

  if (sbx_api_put_file (api, id, path, in, size, mode, 0, &e) == 0)
    return 0;
  /* `sbx cp a.txt ID:/tmp`: the target is a directory, so put the file in
     it, like cp(1). Only checked on failure, to keep the common case one
     request. */
  if (base != NULL && base[0] != '\0' && rlen > 0 && rpath[rlen - 1] != '/'
      && !sbx_api_unreachable (api) && e->kind != SBX_E_UNAVAILABLE
      && remote_is_dir (api, id, rpath) && lseek (in, start, SEEK_SET) == start)
    {
      sbx_error_free (steal_pointer (&e));
      free (path);
      if (asprintf (&path, "%s/%s", rpath, base) < 0)
        sbx_oom ();
      if (sbx_api_put_file (api, id, path, in, size, mode, 0, &e) == 0)
        return 0;
    }
  return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
}

struct sink
{
  int fd;
  const char *name;
};

static int
write_sink (void *ctx, const char *data, size_t len, sbx_error_t **err)
{
  struct sink *s = ctx;

  if (sbx_write_all (s->fd, data, len) < 0)
    return sbx_err_sys (err, errno, "cp: writing %s", s->name);
  return 0;
}

static int
download (struct sbx_api *api, const char *id, const char *rpath, const char *local)
{
  cleanup_error sbx_error_t *e = NULL;
  cleanup_free char *dest = NULL;
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_buf target = SBX_BUF_INIT;
  struct sink sink = {STDOUT_FILENO, "stdout"};
  json_t *st = NULL;
  mode_t mode = 0666;
  int created = 0, status = 0;
  struct stat lst;
  char scratch[256];

  if (rpath[0] == '\0')
    {
      sbx_cli_message ("cp: %s: give a path after the colon", id);
      return SBX_EXIT_FAILURE;
    }
  if (strcmp (local, "-") != 0)
    {
      const char *type, *mode_text;
      size_t llen = strlen (local);

      /* Stat first: a directory fails before anything local is touched, and
         the file keeps its mode bits (less our umask, like cp). */
      sbx_api_sandbox_path (&target, id, "/files/stat?path=");
      sbx_url_escape (&target, rpath, 1);
      if (sbx_api_json (api, "GET", target.data, NULL, &st, &e) < 0)
        {
          sbx_buf_free (&target);
          return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
        }
      sbx_buf_reset (&target);
      type = json_string_value (json_object_get (st, "type"));
      if (type != NULL && strcmp (type, "dir") == 0)
        {
          json_decref (st);
          sbx_buf_free (&target);
          return sbx_cli_cp_tree_down (api, id, rpath, local);
        }
      mode_text = json_string_value (json_object_get (st, "mode"));
      if (mode_text != NULL)
        mode = (mode_t) (strtoul (mode_text, NULL, 8) & 0777);
      json_decref (st);

      if (stat (local, &lst) == 0 && S_ISDIR (lst.st_mode))
        {
          const char *base = sbx_cli_basename (rpath, scratch, sizeof scratch);
          if (asprintf (&dest, "%s%s%s", local, local[llen - 1] == '/' ? "" : "/", base) < 0)
            sbx_oom ();
        }
      else if (local[llen - 1] == '/')
        {
          sbx_cli_message ("cp: %s: No such directory", local);
          sbx_buf_free (&target);
          return SBX_EXIT_FAILURE;
        }
      else if ((dest = strdup (local)) == NULL)
        sbx_oom ();

      sink.fd = open (dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
      if (sink.fd >= 0)
        created = 1;
      else if (errno == EEXIST)
        sink.fd = open (dest, O_WRONLY | O_TRUNC | O_CLOEXEC);
      if (sink.fd < 0)
        {
          sbx_cli_message ("cp: %s: %s", dest, strerror (errno));
          sbx_buf_free (&target);
          return SBX_EXIT_FAILURE;
        }
      sink.name = dest;
    }

  sbx_api_sandbox_path (&target, id, "/files?path=");
  sbx_url_escape (&target, rpath, 1);
  req.method = "GET";
  req.target = target.data;
  if (sbx_api_request (api, NULL, &req, write_sink, &sink, NULL, &e) < 0)
    {
      status = sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
      if (created)
        unlink (dest);
    }
  sbx_buf_free (&target);
  if (sink.fd != STDOUT_FILENO && close (sink.fd) < 0 && status == 0)
    {
      sbx_cli_message ("cp: %s: %s", dest, strerror (errno));
      status = SBX_EXIT_FAILURE;
    }
  return status;
}

int
sbx_cmd_cp (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  cleanup_free char *src_id = NULL;
  cleanup_free char *dst_id = NULL;
  const char *pos[2], *src_path = NULL, *dst_path = NULL;
  struct sbx_api api;
  int i, n = 0, opts_done = 0, src_remote, dst_remote, status;

  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      if (!opts_done && strcmp (a, "--") == 0)
        {
          opts_done = 1;
          continue;
        }
      if (!opts_done && sbx_cli_is_help (a))
        {
          sbx_cli_help ("cp");
          return 0;
        }
      /* cp(1)'s words for what sbx cp does with a directory anyway */
      if (!opts_done
          && (strcmp (a, "-r") == 0 || strcmp (a, "-R") == 0 || strcmp (a, "-a") == 0
              || strcmp (a, "--recursive") == 0))
        continue;
      if (!opts_done && a[0] == '-' && a[1] != '\0')
        {
          sbx_cli_usage ("cp: unknown option %s", a);
          return SBX_EXIT_USAGE;
        }
      if (n == 2)
        {
          sbx_cli_usage ("cp: too many arguments (one SRC, one DST)");
          return SBX_EXIT_USAGE;
        }
      pos[n++] = a;
    }
  if (n != 2)
    {
      sbx_cli_usage ("cp: expected SRC and DST");
      return SBX_EXIT_USAGE;
    }
  src_remote = split_remote (pos[0], &src_id, &src_path);
  dst_remote = split_remote (pos[1], &dst_id, &dst_path);
  if (src_remote == dst_remote)
    {
      sbx_cli_usage ("cp: exactly one of SRC and DST must be ID:PATH");
      return SBX_EXIT_USAGE;
    }
  if (sbx_cli_check_id ("cp", src_remote ? src_id : dst_id) != 0)
    return SBX_EXIT_USAGE;
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  if (dst_remote)
    status = upload (&api, pos[0], dst_id, dst_path);
  else
    status = download (&api, src_id, src_path, pos[1]);
  sbx_api_clear (&api);
  return status;
}
