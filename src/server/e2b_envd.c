/* sbx: E2B's envd, the data plane of each sandbox: its route table, the
 * small REST routes (/health, /envs, /metrics) and what the RPC handlers
 * share (user, paths, EntryInfo). Reached on the daemon's own port with
 * E2b-Sandbox-Id/E2b-Sandbox-Port 49983 (or Host 49983-ID.DOMAIN); the
 * credential is the sandbox's access token (X-Access-Token). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "iso/fs.h"
#include "server/e2b.h"

#define R_UNARY(name, fn) {"POST", name, SBX_BODY_RAW, 0, fn, SBX_AUTH_TOKEN}

const struct sbx_route sbx_envd_routes[] = {
    {"GET", "health", SBX_BODY_NONE, 0, sbx_route_envd_health, SBX_AUTH_NONE},
    {"GET", "envs", SBX_BODY_NONE, 0, sbx_route_envd_envs, SBX_AUTH_TOKEN},
    {"GET", "metrics", SBX_BODY_NONE, 0, sbx_route_envd_metrics, SBX_AUTH_TOKEN},
    {"GET", "files", SBX_BODY_NONE, 0, sbx_route_envd_files_get, SBX_AUTH_TOKEN_OR_SIGNED},
    {"POST", "files", SBX_BODY_E2B_FILES, 0, sbx_route_envd_files_post, SBX_AUTH_TOKEN_OR_SIGNED},
    R_UNARY ("process.Process/Start", sbx_route_process_rpc_start),
    R_UNARY ("process.Process/Connect", sbx_route_process_rpc_connect),
    R_UNARY ("process.Process/List", sbx_route_process_rpc_list),
    R_UNARY ("process.Process/SendInput", sbx_route_process_rpc_send_input),
    R_UNARY ("process.Process/CloseStdin", sbx_route_process_rpc_close_stdin),
    R_UNARY ("process.Process/SendSignal", sbx_route_process_rpc_send_signal),
    R_UNARY ("process.Process/Update", sbx_route_process_rpc_update),
    R_UNARY ("process.Process/StreamInput", sbx_route_envd_unimplemented),
    R_UNARY ("filesystem.Filesystem/Stat", sbx_route_fs_rpc_stat),
    R_UNARY ("filesystem.Filesystem/MakeDir", sbx_route_fs_rpc_make_dir),
    R_UNARY ("filesystem.Filesystem/Move", sbx_route_fs_rpc_move),
    R_UNARY ("filesystem.Filesystem/ListDir", sbx_route_fs_rpc_list_dir),
    R_UNARY ("filesystem.Filesystem/Remove", sbx_route_fs_rpc_remove),
    R_UNARY ("filesystem.Filesystem/WatchDir", sbx_route_fs_rpc_watch_dir),
    R_UNARY ("filesystem.Filesystem/CreateWatcher", sbx_route_fs_rpc_create_watcher),
    R_UNARY ("filesystem.Filesystem/GetWatcherEvents", sbx_route_fs_rpc_get_watcher_events),
    R_UNARY ("filesystem.Filesystem/RemoveWatcher", sbx_route_fs_rpc_remove_watcher),
    {NULL, NULL, SBX_BODY_NONE, 0, NULL, SBX_AUTH_TOKEN},
};

void
sbx_route_envd_health (struct sbx_req *r)
{
  /* E2B's answer for a paused sandbox (its envd is not running): 502,
     which the SDK's isRunning() reads as false. A probe, so it does not
     resume an auto_resume sandbox either. */
  if (sbx_sandbox_is_paused (r->sb))
    sbx_reply_json (r, 502,
                    json_pack ("{s:s, s:s, s:i}", "sandboxId", r->sb->id, "message",
                               "The sandbox is paused", "code", 502));
  else
    sbx_reply_empty (r, 204);
}

void
sbx_route_envd_envs (struct sbx_req *r)
{
  json_t *native = sbx_sandbox_json (r->sb);
  json_t *env = json_object_get (native, "env");

  sbx_reply_json (r, 200, env ? json_incref (env) : json_object ());
  json_decref (native);
}

void
sbx_route_envd_metrics (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *m = sbx_sandbox_metrics (r->sb, &err), *o;
  json_int_t mem_used, mem_total;
  double cpus, cpu_seconds;

  if (m == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  cpus = json_real_value (json_object_get (m, "cpus"));
  sbx_metrics_inside (m, &mem_used, &mem_total, &cpu_seconds);
  o = json_object ();
  json_object_set_new (o, "ts", json_integer (sbx_now_ms () / 1000));
  json_object_set_new (o, "cpu_count", json_integer (cpus < 1 ? 1 : (json_int_t) (cpus + 0.999)));
  json_object_set_new (o, "mem_used", json_integer (mem_used));
  json_object_set_new (o, "mem_total", json_integer (mem_total));
  json_object_set_new (o, "mem_used_mib", json_integer (mem_used / (1024 * 1024)));
  json_object_set_new (o, "mem_total_mib", json_integer (mem_total / (1024 * 1024)));
  json_object_set (o, "disk_used", json_object_get (m, "disk_bytes"));
  json_object_set (o, "disk_total", json_object_get (m, "disk_limit"));
  json_decref (m);
  sbx_reply_json (r, 200, o);
}

void
sbx_route_envd_unimplemented (struct sbx_req *r)
{
  /* StreamInput is client-streaming, which the SDKs cannot send (fetch
     has no streaming request bodies): SendInput does the same. */
  sbx_connect_reply_code (r, "unimplemented",
                          "client-streaming RPCs are not supported; use SendInput");
}

const char *
sbx_e2b_user (struct sbx_req *r)
{
  return r->e2b_user[0] ? r->e2b_user : "user";
}

/* Collapse "//", "." and ".." of an absolute path in place, ".." stopping
   at "/" (as the in-root resolver would): the path an answer reports is
   the one written. Resolution itself stays the parent's, inside the
   sandbox's root. */
static void
lexical_clean (char *path)
{
  char *out = path, *p = path;

  while (*p)
    {
      char *seg, *end;
      size_t n;
      while (*p == '/')
        p++;
      if (*p == '\0')
        break;
      seg = p;
      end = strchr (seg, '/');
      n = end ? (size_t) (end - seg) : strlen (seg);
      p = seg + n;
      if (n == 1 && seg[0] == '.')
        continue;
      if (n == 2 && seg[0] == '.' && seg[1] == '.')
        {
          while (out > path && *--out != '/')
            ;
          continue;
        }
      *out++ = '/';
      memmove (out, seg, n);
      out += n;
    }
  if (out == path)
    *out++ = '/';
  *out = '\0';
}

int
sbx_e2b_path (struct sbx_req *r, const char *user, const char *in, char *out, sbx_error_t **err)
{
  char joined[SBX_FS_PATH_MAX + 8];

  (void) r;
  if (in == NULL || in[0] == '\0')
    return sbx_err (err, SBX_E_INVALID, "a path is required");
  if (in[0] != '/')
    {
      /* envd resolves relative paths against the user's home. */
      if ((size_t) snprintf (joined, sizeof joined, "%s/%s",
                             strcmp (user, "root") == 0 ? "/root" : "/home/user", in)
          >= sizeof joined)
        return sbx_err (err, SBX_E_INVALID, "the path is too long");
      in = joined;
    }
  if (sbx_fs_normalize (in, out, SBX_FS_PATH_MAX, err) < 0)
    return -1;
  lexical_clean (out);
  return 0;
}

static void
permissions_string (uint32_t mode, enum sbx_fs_type type, char out[11])
{
  static const char rwx[] = "rwxrwxrwx";
  int i;

  out[0] = type == SBX_FS_DIR ? 'd' : type == SBX_FS_SYMLINK ? 'L' : '-';
  for (i = 0; i < 9; i++)
    out[1 + i] = (mode & (1u << (8 - i))) ? rwx[i] : '-';
  out[10] = '\0';
}

static json_t *
id_name (uint32_t id)
{
  char buf[16];

  if (id == 0)
    return json_string ("root");
  if (id == 1000)
    return json_string ("user");
  snprintf (buf, sizeof buf, "%u", id);
  return json_string (buf);
}

/* A link's target as an absolute, clean path: a relative one is taken from
   the link's directory, `.` and `..` resolved lexically (envd's
   filepath.EvalSymlinks also follows links on the way; this does not,
   since that walk would be the sandbox's to make). */
static void
absolute_target (const char *link, const char *target, char *out, size_t cap)
{
  char joined[2 * SBX_FS_PATH_MAX + 2], *save = NULL, *part;
  /* where each component started in out (< SBX_FS_PATH_MAX) */
  unsigned short stack[SBX_FS_PATH_MAX / 2 + 1];
  size_t len = 0;
  unsigned depth = 0;

  if (target[0] == '/')
    snprintf (joined, sizeof joined, "%s", target);
  else
    {
      const char *slash = strrchr (link, '/');
      snprintf (joined, sizeof joined, "%.*s/%s", slash ? (int) (slash - link) : 0, link, target);
    }
  out[0] = '\0';
  for (part = strtok_r (joined, "/", &save); part; part = strtok_r (NULL, "/", &save))
    {
      if (strcmp (part, ".") == 0)
        continue;
      if (strcmp (part, "..") == 0)
        {
          if (depth > 0)
            len = stack[--depth];
          out[len] = '\0';
          continue;
        }
      if (depth < sizeof stack / sizeof stack[0])
        stack[depth++] = (unsigned short) len;
      len += (size_t) snprintf (out + len, len < cap ? cap - len : 0, "/%s", part);
      if (len >= cap)
        {
          /* too long to be a path: the link's own text */
          snprintf (out, cap, "%s", target);
          return;
        }
    }
  if (len == 0)
    snprintf (out, cap, "/");
}

json_t *
sbx_e2b_meta_json (const struct sbx_fs_meta *m)
{
  json_t *o;
  const char *key, *value;
  uint32_t off = 0;

  if (m->count == 0)
    return NULL;
  o = json_object ();
  /* Checked sets only (printable ASCII): json_string cannot fail on them
     but for memory. */
  while (o != NULL && (key = sbx_fs_meta_next (m, &off, &value)) != NULL)
    json_object_set_new (o, key, json_string (value));
  return o;
}

json_t *
sbx_e2b_entry_json (const struct sbx_fs_entry *e)
{
  json_t *o = json_object ();
  char perms[11], size[24];

  permissions_string (e->mode, e->type, perms);
  snprintf (size, sizeof size, "%llu", (unsigned long long) e->size);
  json_object_set_new (o, "name", sbx_e2b_text_json (e->name));
  json_object_set_new (o, "type", json_string (e->type == SBX_FS_DIR       ? "FILE_TYPE_DIRECTORY"
                                               : e->type == SBX_FS_SYMLINK ? "FILE_TYPE_SYMLINK"
                                               : e->type == SBX_FS_FILE    ? "FILE_TYPE_FILE"
                                                                           : "FILE_TYPE_UNSPECIFIED"));
  json_object_set_new (o, "path", sbx_e2b_text_json (e->path));
  json_object_set_new (o, "size", json_string (size)); /* int64: a string in proto3 JSON */
  json_object_set_new (o, "mode", json_integer (e->mode));
  json_object_set_new (o, "permissions", json_string (perms));
  json_object_set_new (o, "owner", id_name (e->uid));
  json_object_set_new (o, "group", id_name (e->gid));
  json_object_set_new (o, "modifiedTime", sbx_json_time (e->mtime_sec * 1000));
  if (e->type == SBX_FS_SYMLINK)
    {
      char target[SBX_FS_PATH_MAX];
      absolute_target (e->path, e->target, target, sizeof target);
      json_object_set_new (o, "symlinkTarget", sbx_e2b_text_json (target));
    }
  /* EntryInfo's map<string, string> metadata = 11: absent when empty, as
     proto3 JSON leaves an empty map out. */
  if (e->meta.count > 0)
    json_object_set_new (o, "metadata", sbx_e2b_meta_json (&e->meta));
  return o;
}

int
sbx_e2b_string (json_t *o, const char *key, const char **out, sbx_error_t **err)
{
  return sbx_param_string (o, key, out, err);
}
