/* sbx: E2B's filesystem.Filesystem service (spec/envd/filesystem/
 * filesystem.proto), unary calls: Stat, MakeDir, Move, ListDir, Remove.
 * Every path goes to the privileged parent's resolver (iso/fs.c), which
 * walks it inside the sandbox's root as the acting user, exactly as the
 * native files API does; E2B's codes: not_found, invalid_argument,
 * already_exists, permission_denied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "priv/host.h"
#include "server/e2b.h"

#define LIST_MAX_ENTRIES 10000
#define LIST_MAX_DEPTH 32

/* The request message and the acting user's view of the sandbox. */
struct fs_call
{
  json_t *msg;
  struct sbx_fs_ctx ctx;
  const char *user;
};

static int
fs_call_begin (struct sbx_req *r, struct fs_call *c, const char *const *fields, sbx_error_t **err)
{
  memset (c, 0, sizeof *c);
  c->ctx.root = -1;
  c->user = sbx_e2b_user (r);
  if (sbx_connect_unary_request (r, &c->msg, err) < 0 || sbx_params_only (c->msg, fields, err) < 0)
    return -1;
  return sbx_sandbox_fs_open (r->sb, c->user, &c->ctx, err);
}

static void
fs_call_end (struct fs_call *c)
{
  sbx_sandbox_fs_close (&c->ctx);
  json_decref (c->msg);
}

/* The absolute path of field key. */
static int
path_field (struct sbx_req *r, struct fs_call *c, const char *key, char *out, sbx_error_t **err)
{
  const char *p = NULL;

  if (sbx_param_string (c->msg, key, &p, err) < 0)
    return -1;
  if (p == NULL || p[0] == '\0')
    return sbx_err (err, SBX_E_INVALID, "`%s` is required", key);
  return sbx_e2b_path (r, c->user, p, out, err);
}

/* {"entry": EntryInfo} of path. */
static json_t *
entry_reply (const struct sbx_fs_ctx *ctx, const char *path, sbx_error_t **err)
{
  struct sbx_fs_entry *e = malloc (sizeof *e);
  json_t *o = NULL;

  if (e == NULL)
    return sbx_err_oom (err), NULL;
  if (sbx_host_fs_stat (ctx, path, e, err) == 0)
    o = json_pack ("{s:o}", "entry", sbx_e2b_entry_json (e));
  free (e);
  return o;
}

void
sbx_route_fs_rpc_stat (struct sbx_req *r)
{
  static const char *const fields[] = {"path", NULL};
  char path[SBX_FS_PATH_MAX];
  struct fs_call c;
  sbx_error_t *err = NULL;
  json_t *o = NULL;

  if (fs_call_begin (r, &c, fields, &err) < 0 || path_field (r, &c, "path", path, &err) < 0
      || (o = entry_reply (&c.ctx, path, &err)) == NULL)
    sbx_connect_reply_err (r, err);
  else
    sbx_connect_reply_ok (r, o);
  fs_call_end (&c);
}

void
sbx_route_fs_rpc_make_dir (struct sbx_req *r)
{
  static const char *const fields[] = {"path", NULL};
  char path[SBX_FS_PATH_MAX];
  struct fs_call c;
  sbx_error_t *err = NULL;
  struct sbx_fs_entry *e = NULL;
  json_t *o = NULL;

  if (fs_call_begin (r, &c, fields, &err) < 0 || path_field (r, &c, "path", path, &err) < 0)
    goto fail;
  e = malloc (sizeof *e);
  if (e == NULL)
    {
      sbx_err_oom (&err);
      goto fail;
    }
  /* envd: a directory that exists is already_exists (the SDK's makeDir
     then answers false); anything else in the way is the mkdir's error. */
  if (sbx_host_fs_stat (&c.ctx, path, e, NULL) == 0 && e->type == SBX_FS_DIR)
    {
      sbx_connect_reply_code (r, "already_exists", "the directory already exists");
      goto out;
    }
  if (sbx_host_fs_mkdir (&c.ctx, path, 0755, 1, &err) < 0
      || (o = entry_reply (&c.ctx, path, &err)) == NULL)
    goto fail;
  sbx_connect_reply_ok (r, o);
  goto out;
fail:
  sbx_connect_reply_err (r, err);
out:
  free (e);
  fs_call_end (&c);
}

void
sbx_route_fs_rpc_move (struct sbx_req *r)
{
  static const char *const fields[] = {"source", "destination", NULL};
  char from[SBX_FS_PATH_MAX], to[SBX_FS_PATH_MAX];
  struct fs_call c;
  sbx_error_t *err = NULL;
  json_t *o = NULL;

  if (fs_call_begin (r, &c, fields, &err) < 0 || path_field (r, &c, "source", from, &err) < 0
      || path_field (r, &c, "destination", to, &err) < 0
      || sbx_host_fs_move (&c.ctx, from, to, 1, &err) < 0
      || (o = entry_reply (&c.ctx, to, &err)) == NULL)
    sbx_connect_reply_err (r, err);
  else
    sbx_connect_reply_ok (r, o); /* the SDK wants the moved entry */
  fs_call_end (&c);
}

void
sbx_route_fs_rpc_remove (struct sbx_req *r)
{
  static const char *const fields[] = {"path", NULL};
  char path[SBX_FS_PATH_MAX];
  struct fs_call c;
  sbx_error_t *err = NULL;

  if (fs_call_begin (r, &c, fields, &err) < 0 || path_field (r, &c, "path", path, &err) < 0)
    sbx_connect_reply_err (r, err);
  else if (sbx_host_fs_remove (&c.ctx, path, 1, &err) < 0 && err->kind != SBX_E_NOT_FOUND)
    sbx_connect_reply_err (r, err);
  else
    {
      /* envd removes as os.RemoveAll does: what is not there is removed
         (the native API answers 404). */
      sbx_error_free (err);
      sbx_connect_reply_ok (r, json_object ());
    }
  fs_call_end (&c);
}

/* Depth-first in name order, as envd's filepath.WalkDir lists: paths
   compared with '/' below every other byte, so a directory's entries come
   right after it ("a", "a/x", "a-b"). */
static int
compare_walk (const void *a, const void *b)
{
  const unsigned char *x = (const unsigned char *) json_string_value (
      json_object_get (*(json_t *const *) a, "path"));
  const unsigned char *y = (const unsigned char *) json_string_value (
      json_object_get (*(json_t *const *) b, "path"));

  if (x == NULL || y == NULL)
    return x == y ? 0 : x == NULL ? -1 : 1;
  for (; *x && *x == *y; x++, y++)
    ;
  if (*x == *y)
    return 0;
  if (*x == '/' || *y == '/')
    return *x == '/' ? (*y ? -1 : 1) : (*x ? 1 : -1);
  return *x < *y ? -1 : 1;
}

/* entries in walk order (in place); -1 when out of memory. */
static int
sort_walk (json_t *entries)
{
  size_t n = json_array_size (entries), i;
  json_t **v;

  if (n < 2)
    return 0;
  v = calloc (n, sizeof *v);
  if (v == NULL)
    return -1;
  for (i = 0; i < n; i++)
    v[i] = json_incref (json_array_get (entries, i));
  qsort (v, n, sizeof *v, compare_walk);
  json_array_clear (entries);
  for (i = 0; i < n; i++)
    if (json_array_append_new (entries, v[i]) < 0)
      {
        while (++i < n)
          json_decref (v[i]);
        free (v);
        return -1;
      }
  free (v);
  return 0;
}

static int
add_entry (const struct sbx_fs_entry *e, void *arg)
{
  return json_array_append_new (arg, sbx_e2b_entry_json (e)) < 0 ? -1 : 0;
}

void
sbx_route_fs_rpc_list_dir (struct sbx_req *r)
{
  static const char *const fields[] = {"path", "depth", NULL};
  char path[SBX_FS_PATH_MAX];
  struct fs_call c;
  sbx_error_t *err = NULL;
  json_t *entries = NULL, *depth_v;
  json_int_t depth = 1;
  int truncated = 0;

  if (fs_call_begin (r, &c, fields, &err) < 0 || path_field (r, &c, "path", path, &err) < 0)
    goto fail;
  depth_v = json_object_get (c.msg, "depth");
  if (json_is_integer (depth_v))
    depth = json_integer_value (depth_v);
  else if (depth_v != NULL && !json_is_null (depth_v))
    depth = -1;
  if (depth == 0)
    depth = 1; /* proto3's default, as envd reads it */
  if (depth < 1 || depth > LIST_MAX_DEPTH)
    {
      sbx_err (&err, SBX_E_INVALID, "`depth` must be 1..%d", LIST_MAX_DEPTH);
      goto fail;
    }
  entries = json_array ();
  if (sbx_host_fs_list (&c.ctx, path, (int) depth, LIST_MAX_ENTRIES, add_entry, entries,
                        &truncated, &err)
      < 0)
    goto fail;
  if (truncated)
    {
      sbx_err (&err, SBX_E_LIMIT, "the listing has more than %d entries; list less deep",
               LIST_MAX_ENTRIES);
      goto fail;
    }
  if (sort_walk (entries) < 0)
    {
      sbx_err_oom (&err);
      goto fail;
    }
  sbx_connect_reply_ok (r, json_pack ("{s:o}", "entries", entries));
  entries = NULL;
  goto out;
fail:
  sbx_connect_reply_err (r, err);
out:
  json_decref (entries);
  fs_call_end (&c);
}

