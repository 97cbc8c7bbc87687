/* sbx: the files API. Every path goes to the privileged parent
 * (priv/host.h), whose iso/fs.c resolves it inside the sandbox's root as
 * the sandbox's user; copies into the sandbox run in its own helper. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/audit.h"
#include "priv/host.h"
#include "server/request.h"
#include "util/base64.h"
#include "util/utf8.h"
#include "util/cleanup.h"

#define LIST_MAX_ENTRIES 10000

/* Resolve sandbox (segment 2) and the acting user. */
static struct sbx_sandbox *
open_ctx (struct sbx_req *r, struct sbx_fs_ctx *ctx, sbx_error_t **err)
{
  struct sbx_sandbox *sb = sbx_req_sandbox (r, 2, err);

  ctx->root = -1;
  if (sb == NULL)
    return NULL;
  if (sbx_sandbox_fs_open (sb, sbx_req_query (r, "user"), ctx, err) < 0)
    {
      sbx_sandbox_unref (sb);
      return NULL;
    }
  return sb;
}

static void
close_ctx (struct sbx_sandbox *sb, struct sbx_fs_ctx *ctx)
{
  sbx_sandbox_fs_close (ctx);
  if (sb)
    sbx_sandbox_unref (sb);
}

static int
query_path (struct sbx_req *r, const char *name, const char **out, sbx_error_t **err)
{
  const char *p = sbx_req_query (r, name);

  if (p == NULL || p[0] == '\0')
    return sbx_err (err, SBX_E_INVALID, "the `%s` query parameter is required", name);
  *out = p;
  return 0;
}

static int
parse_mode (const char *s, uint32_t *mode, sbx_error_t **err)
{
  char *end;
  unsigned long v;

  if (s == NULL)
    return 0;
  v = strtoul (s, &end, 8);
  if (*s == '\0' || *end != '\0' || v > 0777)
    return sbx_err (err, SBX_E_INVALID, "mode must be octal permission bits like 0644 (no setuid)");
  *mode = (uint32_t) v;
  return 0;
}

/* A file name, path or link target: bytes, which JSON strings are not.
   Valid UTF-8 as it is; otherwise each invalid byte as U+FFFD (to show)
   and the exact bytes in KEY_base64 (to use: a path of them, %-escaped,
   names the file), so that no entry is lost or mistaken for another. */
static int
set_name (json_t *o, const char *key, const char *s)
{
  size_t n = strlen (s);
  json_t *j = json_stringn (s, n);
  struct sbx_buf b = SBX_BUF_INIT;
  char key64[32];
  int rc;

  if (j != NULL)
    return json_object_set_new (o, key, j);
  sbx_utf8_sanitize (&b, s, n, 1);
  rc = json_object_set_new (o, key, json_stringn (b.data ? b.data : "", b.len));
  sbx_buf_free (&b);
  sbx_base64_encode (&b, s, n);
  snprintf (key64, sizeof key64, "%s_base64", key);
  if (rc == 0)
    rc = json_object_set_new (o, key64, json_stringn (b.data ? b.data : "", b.len));
  rc = rc == 0 && !b.failed ? 0 : -1;
  sbx_buf_free (&b);
  return rc;
}

static json_t *
entry_json (const struct sbx_fs_entry *e)
{
  char mode[8];
  json_t *o;

  snprintf (mode, sizeof mode, "%04o", e->mode);
  o = json_pack ("{s:s, s:I, s:s, s:i, s:i, s:o}", "type", sbx_fs_type_name (e->type), "size",
                 (json_int_t) e->size, "mode", mode, "uid", (int) e->uid, "gid", (int) e->gid,
                 "mtime", sbx_json_time (e->mtime_sec * 1000));
  if (o == NULL || set_name (o, "name", e->name) < 0 || set_name (o, "path", e->path) < 0
      || (e->type == SBX_FS_SYMLINK && set_name (o, "target", e->target) < 0))
    {
      json_decref (o);
      return NULL; /* out of memory: the answer is a 503, never a list without it */
    }
  /* The file's user.e2b.* attributes (E2B's file metadata, docs/e2b.md):
     checked pairs of printable ASCII, so no _base64 twin is needed. */
  if (e->meta.count > 0)
    {
      json_t *m = json_object ();
      const char *key, *value;
      uint32_t off = 0;
      while (m != NULL && (key = sbx_fs_meta_next (&e->meta, &off, &value)) != NULL)
        json_object_set_new (m, key, json_string (value));
      if (m == NULL || json_object_set_new (o, "metadata", m) < 0)
        {
          json_decref (o);
          return NULL;
        }
    }
  return o;
}

static void
reply_stat (struct sbx_req *r, const struct sbx_fs_ctx *ctx, const char *path, unsigned status)
{
  struct sbx_fs_entry *e = malloc (sizeof *e);
  sbx_error_t *err = NULL;

  if (e == NULL)
    sbx_err_oom (&err);
  if (e == NULL || sbx_host_fs_stat (ctx, path, e, &err) < 0)
    sbx_reply_error (r, err);
  else
    sbx_reply_json (r, status, entry_json (e));
  free (e);
}

void
sbx_route_file_get (struct sbx_req *r)
{
  struct sbx_fs_ctx ctx;
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  struct MHD_Response *resp;
  const char *path = NULL;

  if (query_path (r, "path", &path, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  if ((sb = open_ctx (r, &ctx, &err)) == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  resp = sbx_files_response (&ctx, path, &err);
  close_ctx (sb, &ctx);
  if (resp == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  MHD_add_response_header (resp, "Content-Type", "application/octet-stream");
  sbx_reply_response (r, 200, resp);
}

int
sbx_files_upload_begin (struct sbx_req *r, sbx_error_t **err)
{
  const char *path = NULL;
  uint32_t mode = 0644;
  int parents = 0;

  if (query_path (r, "path", &path, err) < 0 || parse_mode (sbx_req_query (r, "mode"), &mode, err) < 0
      || sbx_query_bool (r, "parents", &parents, err) < 0)
    return -1;
  r->sb = open_ctx (r, &r->fs, err);
  if (r->sb == NULL)
    return -1;
  {
    if (r->content_length != UINT64_MAX && r->content_length > sbx_sandbox_disk_limit (r->sb))
      return sbx_err (err, SBX_E_TOO_LARGE, "the file is larger than the sandbox's disk");
  }
  /* The audit record's hash, computed as the content streams through. */
  r->audit_sha = EVP_MD_CTX_new ();
  if (r->audit_sha == NULL || EVP_DigestInit_ex (r->audit_sha, EVP_sha256 (), NULL) != 1)
    return sbx_err_oom (err);
  if (sbx_host_fs_upload_begin (&r->fs, path, mode, parents, &r->up, err) < 0)
    return -1;
  r->upload_open = 1;
  return 0;
}

static void
audit_upload (struct sbx_req *r, const char *abs)
{
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned dn = 0, i;
  char hexd[65];
  EVP_DigestFinal_ex (r->audit_sha, d, &dn);
  for (i = 0; i < dn && i < 32; i++)
    snprintf (hexd + 2 * i, 3, "%02x", d[i]);
  hexd[64] = '\0';
  sbx_audit_file_write (r->sb->id, abs, r->audit_size, hexd, "native");
}

void
sbx_route_file_put (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  char abs[SBX_FS_PATH_MAX];

  if (r->upload_err)
    {
      sbx_reply_error (r, r->upload_err);
      r->upload_err = NULL;
      return;
    }
  if (!r->upload_open)
    {
      sbx_reply_errorf (r, SBX_E_SYSTEM, "upload was not started");
      return;
    }
  r->upload_open = 0;
  if (sbx_host_fs_upload_commit (&r->up, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  if (sbx_fs_normalize (sbx_req_query (r, "path"), abs, sizeof abs, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  audit_upload (r, abs);
  reply_stat (r, &r->fs, abs, 201);
}

void
sbx_route_file_delete (struct sbx_req *r)
{
  struct sbx_fs_ctx ctx;
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  const char *path = NULL;
  int recursive = 0;

  if (query_path (r, "path", &path, &err) < 0 || sbx_query_bool (r, "recursive", &recursive, &err) < 0
      || (sb = open_ctx (r, &ctx, &err)) == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  if (sbx_host_fs_remove (&ctx, path, recursive, &err) < 0)
    sbx_reply_error (r, err);
  else
    sbx_reply_empty (r, 204);
  close_ctx (sb, &ctx);
}

void
sbx_route_file_stat (struct sbx_req *r)
{
  struct sbx_fs_ctx ctx;
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb;
  const char *path = NULL;

  if (query_path (r, "path", &path, &err) < 0 || (sb = open_ctx (r, &ctx, &err)) == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  reply_stat (r, &ctx, path, 200);
  close_ctx (sb, &ctx);
}

/* An entry that cannot be rendered (out of memory) ends the listing: a
   list is never answered with one missing. */
static int
add_entry (const struct sbx_fs_entry *e, void *arg)
{
  return json_array_append_new (arg, entry_json (e));
}

void
sbx_route_file_list (struct sbx_req *r)
{
  struct sbx_fs_ctx ctx;
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb;
  const char *path = NULL, *depth_s = sbx_req_query (r, "depth");
  json_t *arr;
  long depth = 1;
  int truncated = 0;

  if (depth_s)
    {
      char *end;
      depth = strtol (depth_s, &end, 10);
      if (*depth_s == '\0' || *end != '\0' || depth < 1 || depth > 16)
        {
          sbx_reply_errorf (r, SBX_E_INVALID, "depth must be 1 to 16");
          return;
        }
    }
  if (query_path (r, "path", &path, &err) < 0 || (sb = open_ctx (r, &ctx, &err)) == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  arr = json_array ();
  if (arr == NULL
      || sbx_host_fs_list (&ctx, path, (int) depth, LIST_MAX_ENTRIES, add_entry, arr, &truncated,
                           &err)
             < 0)
    {
      json_decref (arr);
      if (err == NULL)
        sbx_err_oom (&err);
      sbx_reply_error (r, err);
    }
  else
    sbx_reply_json (r, 200,
                    json_pack ("{s:o, s:b}", "entries", arr, "truncated", truncated));
  close_ctx (sb, &ctx);
}

int
sbx_mkdir_request_parse (json_t *body, char *abs, uint32_t *mode, int *parents, sbx_error_t **err)
{
  static const char *const allowed[] = {"path", "parents", "mode", NULL};
  const char *path = NULL, *mode_s = NULL;

  *mode = 0755;
  *parents = 0;
  if (sbx_params_only (body, allowed, err) < 0 || sbx_param_string (body, "path", &path, err) < 0
      || sbx_param_bool (body, "parents", parents, err) < 0
      || sbx_param_string (body, "mode", &mode_s, err) < 0 || parse_mode (mode_s, mode, err) < 0)
    return -1;
  if (path == NULL)
    return sbx_err (err, SBX_E_INVALID, "`path` is required");
  return sbx_fs_normalize (path, abs, SBX_FS_PATH_MAX, err);
}

void
sbx_route_file_mkdir (struct sbx_req *r)
{
  struct sbx_fs_ctx ctx = {.root = -1};
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  char abs[SBX_FS_PATH_MAX];
  uint32_t mode;
  int parents;
  json_t *body = NULL;

  if (sbx_req_json (r, &body, &err) < 0
      || sbx_mkdir_request_parse (body, abs, &mode, &parents, &err) < 0
      || (sb = open_ctx (r, &ctx, &err)) == NULL || sbx_host_fs_mkdir (&ctx, abs, mode, parents, &err) < 0)
    goto fail;
  reply_stat (r, &ctx, abs, 201);
  close_ctx (sb, &ctx);
  json_decref (body);
  return;
fail:
  close_ctx (sb, &ctx);
  json_decref (body);
  sbx_reply_error (r, err);
}

int
sbx_move_request_parse (json_t *body, const char **from, const char **to, char *abs,
                        int *overwrite, sbx_error_t **err)
{
  static const char *const allowed[] = {"from", "to", "overwrite", NULL};

  *from = *to = NULL;
  *overwrite = 0;
  if (sbx_params_only (body, allowed, err) < 0 || sbx_param_string (body, "from", from, err) < 0
      || sbx_param_string (body, "to", to, err) < 0
      || sbx_param_bool (body, "overwrite", overwrite, err) < 0)
    return -1;
  if (*from == NULL || *to == NULL)
    return sbx_err (err, SBX_E_INVALID, "`from` and `to` are required");
  return sbx_fs_normalize (*to, abs, SBX_FS_PATH_MAX, err);
}

void
sbx_route_file_move (struct sbx_req *r)
{
  struct sbx_fs_ctx ctx = {.root = -1};
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  const char *from, *to;
  char abs[SBX_FS_PATH_MAX];
  int overwrite;
  json_t *body = NULL;

  if (sbx_req_json (r, &body, &err) < 0
      || sbx_move_request_parse (body, &from, &to, abs, &overwrite, &err) < 0
      || (sb = open_ctx (r, &ctx, &err)) == NULL || sbx_host_fs_move (&ctx, from, to, overwrite, &err) < 0)
    goto fail;
  reply_stat (r, &ctx, abs, 200);
  close_ctx (sb, &ctx);
  json_decref (body);
  return;
fail:
  close_ctx (sb, &ctx);
  json_decref (body);
  sbx_reply_error (r, err);
}
