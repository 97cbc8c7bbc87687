/* sbx: routes for health, info, sandboxes and API keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/audit.h"
#include "core/keys.h"
#include "server/request.h"
#include "util/cleanup.h"

#ifndef SBX_VERSION
#define SBX_VERSION "0.1.0"
#endif


void
sbx_route_healthz (struct sbx_req *r)
{
  sbx_reply_json (r, 200, json_pack ("{s:s}", "status", "ok"));
}

void
sbx_route_info (struct sbx_req *r)
{
  unsigned running = 0, pooled = 0, cgroup_mode = 0, landlock_abi = 0;

  sbx_core_counts (sbx_req_tenant (r), &running, &pooled);
  json_t *o, *audit = sbx_audit_info_json ();

  sbx_core_host_info (&cgroup_mode, &landlock_abi);
  o = json_pack ("{s:s, s:s, s:i, s:i, s:i}", "version", SBX_VERSION, "cgroup",
                 cgroup_mode == SBX_CGROUP_V2 ? "v2" : "v1", "landlock_abi", (int) landlock_abi,
                 "pool", (int) pooled, "sandboxes", (int) running);
  /* A tenant learns whether changes are accepted; the administrator why. */
  if (!r->admin)
    {
      json_t *h = json_incref (json_object_get (audit, "healthy"));
      json_decref (audit);
      audit = json_pack ("{s:o}", "healthy", h ? h : json_true ());
    }
  json_object_set_new (o, "audit", audit);
  sbx_reply_json (r, 200, o);
}

int
sbx_create_opts_parse (json_t *body, struct sbx_create_opts *opts, sbx_error_t **err)
{
  static const char *const allowed[] = {"template", "timeout", "memory", "cpus", "pids", "disk",
                                        "env",      "metadata", "user", "network", "on_timeout",
                                        "auto_resume", "snapshot", "isolation", NULL};
  uint64_t pids = 0;
  const char *on_timeout = NULL;
  int auto_resume = 0;

  memset (opts, 0, sizeof *opts);
  if (sbx_params_only (body, allowed, err) < 0
      || sbx_param_string (body, "template", &opts->template_name, err) < 0
      || sbx_param_duration (body, "timeout", &opts->timeout_ms, err) < 0
      || sbx_param_size (body, "memory", &opts->limits.memory_bytes, err) < 0
      || sbx_param_cpus (body, "cpus", &opts->limits.cpu_milli, err) < 0
      || sbx_param_uint (body, "pids", &pids, err) < 0
      || sbx_param_size (body, "disk", &opts->limits.disk_bytes, err) < 0
      || sbx_param_string_map (body, "env", 256, 256, 128 * 1024, 128 * 1024, 1, &opts->env, err)
             < 0
      || sbx_param_string_map (body, "metadata", 64, 128, 1024, 64 * 1024, 0, &opts->metadata,
                               err)
             < 0
      || sbx_param_string (body, "user", &opts->user, err) < 0
      || sbx_param_string (body, "on_timeout", &on_timeout, err) < 0
      || sbx_param_bool (body, "auto_resume", &auto_resume, err) < 0
      || sbx_param_string (body, "snapshot", &opts->snapshot, err) < 0
      || sbx_param_string (body, "isolation", &opts->isolation, err) < 0)
    return -1;
  /* A well-formed name that names nothing is a 404 (core); an empty one is
     not a name. */
  if (opts->template_name && opts->template_name[0] == '\0')
    return sbx_err (err, SBX_E_INVALID, "template must be a template's name, not empty");
  if (on_timeout && strcmp (on_timeout, "pause") != 0 && strcmp (on_timeout, "kill") != 0)
    return sbx_err (err, SBX_E_INVALID, "on_timeout must be `kill` or `pause`, not `%.32s`",
                    on_timeout);
  if (on_timeout && strcmp (on_timeout, "pause") == 0)
    opts->lifecycle |= SBX_LIFECYCLE_PAUSE_ON_TIMEOUT;
  if (auto_resume)
    opts->lifecycle |= SBX_LIFECYCLE_AUTO_RESUME;
  if (json_object_get (body, "pids") && !json_is_null (json_object_get (body, "pids"))
      && (pids == 0 || pids > UINT32_MAX))
    return sbx_err (err, SBX_E_INVALID, "pids %llu is out of range", (unsigned long long) pids);
  opts->limits.pids = (uint32_t) pids;
  /* Last: the one field that allocates (the caller releases it). */
  return sbx_network_canon (json_object_get (body, "network"), &opts->network, err);
}

void
sbx_route_sandbox_create (struct sbx_req *r)
{
  struct sbx_create_opts opts;
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb;
  json_t *body = NULL;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_create_opts_parse (body, &opts, &err) < 0)
    goto fail;
  sb = sbx_sandbox_create (sbx_req_tenant (r) ? sbx_req_tenant (r) : "default", &opts, &err);
  json_decref (opts.network);
  if (sb == NULL)
    goto fail;
  snprintf (r->audit_sandbox, sizeof r->audit_sandbox, "%s", sb->id);
  sbx_reply_json (r, 201, sbx_sandbox_json (sb));
  if (r->out_of_memory || r->queue_failed)
    {
      /* Nobody will learn its id from this answer: a request that fails
         leaves nothing behind. */
      sbx_sandbox_kill (sb, "sandbox killed", NULL);
    }
  sbx_sandbox_unref (sb);
  json_decref (body);
  return;
fail:
  json_decref (body);
  sbx_reply_error (r, err);
}

struct filter_ctx
{
  json_t *filter;
  int bad;
};

static enum MHD_Result
collect_metadata (void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
  struct filter_ctx *f = cls;

  (void) kind;
  if (key && strncmp (key, "metadata.", 9) == 0)
    {
      json_t *v = key[9] && value ? json_string (value) : NULL;
      /* Metadata is UTF-8: a filter that is not could never match, and
         one that is silently dropped would match everything. */
      if (v == NULL || json_object_set_new (f->filter, key + 9, v) < 0)
        f->bad = 1;
    }
  return MHD_YES;
}

void
sbx_route_sandbox_list (struct sbx_req *r)
{
  struct filter_ctx f = {json_object (), 0};
  json_t *list;

  MHD_get_connection_values (r->conn, MHD_GET_ARGUMENT_KIND, collect_metadata, &f);
  if (f.bad)
    {
      json_decref (f.filter);
      sbx_reply_errorf (r, SBX_E_INVALID,
                        "metadata filters look like metadata.KEY=VALUE, in UTF-8");
      return;
    }
  list = sbx_sandbox_list (sbx_req_tenant (r), f.filter);
  json_decref (f.filter);
  sbx_reply_json (r, 200, json_pack ("{s:o}", "sandboxes", list));
}

void
sbx_route_sandbox_get (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = sbx_req_sandbox (r, 2, &err);

  if (sb == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  sbx_reply_json (r, 200, sbx_sandbox_json (sb));
  sbx_sandbox_unref (sb);
}

void
sbx_route_sandbox_kill (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = sbx_req_sandbox (r, 2, &err);

  if (sb == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  sbx_sandbox_kill (sb, "sandbox killed", NULL);
  sbx_sandbox_unref (sb);
  sbx_reply_empty (r, 204);
}

/* PUT /v1/sandboxes/ID/network: the whole policy, replaced; the next
   connection the sandbox opens is judged by it (docs/egress.md). */
void
sbx_route_sandbox_network (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  json_t *body = NULL, *canon = NULL;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_network_canon (body, &canon, &err) < 0)
    goto fail;
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL || sbx_sandbox_set_network (sb, canon, &err) < 0)
    goto fail;
  sbx_reply_json (r, 200, sbx_sandbox_json (sb));
  sbx_sandbox_unref (sb);
  json_decref (canon);
  json_decref (body);
  return;
fail:
  if (sb)
    sbx_sandbox_unref (sb);
  json_decref (canon);
  json_decref (body);
  sbx_reply_error (r, err);
}

void
sbx_route_sandbox_timeout (struct sbx_req *r)
{
  static const char *const allowed[] = {"timeout", NULL};
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  json_t *body = NULL;
  uint64_t ms = 0;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_duration (body, "timeout", &ms, &err) < 0)
    goto fail;
  if (ms == 0)
    {
      sbx_err (&err, SBX_E_INVALID, "`timeout` is required");
      goto fail;
    }
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL || sbx_sandbox_set_timeout (sb, ms, &err) < 0)
    goto fail;
  sbx_reply_json (r, 200, sbx_sandbox_json (sb));
  sbx_sandbox_unref (sb);
  json_decref (body);
  return;
fail:
  if (sb)
    sbx_sandbox_unref (sb);
  json_decref (body);
  sbx_reply_error (r, err);
}

void
sbx_route_sandbox_metrics (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = sbx_req_sandbox (r, 2, &err);
  json_t *m;

  if (sb == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  m = sbx_sandbox_metrics (sb, &err);
  sbx_sandbox_unref (sb);
  if (m == NULL)
    sbx_reply_error (r, err);
  else
    sbx_reply_json (r, 200, m);
}

/* ---- keys -------------------------------------------------------------- */

void
sbx_route_key_create (struct sbx_req *r)
{
  static const char *const allowed[] = {"tenant", NULL};
  const char *tenant = "default";
  char key[SBX_KEY_LEN + 1], id[16];
  long long created;
  sbx_error_t *err = NULL;
  json_t *body = NULL;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_string (body, "tenant", &tenant, &err) < 0
      || sbx_key_create (sbx_core_store (), tenant, key, id, &created, &err) < 0)
    {
      json_decref (body);
      sbx_reply_error (r, err);
      return;
    }
  sbx_reply_json (r, 201,
                  json_pack ("{s:s, s:s, s:s, s:o}", "id", id, "tenant", tenant, "key", key,
                             "created_at", sbx_json_time (created)));
  /* A key whose secret could not be told is of no use to anyone. */
  if (r->out_of_memory || r->queue_failed)
    sbx_store_key_delete (sbx_core_store (), id, NULL);
  json_decref (body);
}

void
sbx_route_key_list (struct sbx_req *r)
{
  struct sbx_key_record *keys = NULL;
  sbx_error_t *err = NULL;
  json_t *arr;
  size_t n = 0, i;

  if (sbx_store_key_list (sbx_core_store (), &keys, &n, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  arr = json_array ();
  for (i = 0; i < n; i++)
    json_array_append_new (arr, json_pack ("{s:s, s:s, s:s, s:o}", "id", keys[i].id, "tenant",
                                           keys[i].tenant, "prefix", keys[i].prefix, "created_at",
                                           sbx_json_time (keys[i].created_ms)));
  free (keys);
  sbx_reply_json (r, 200, json_pack ("{s:o}", "keys", arr));
}

void
sbx_route_key_delete (struct sbx_req *r)
{
  sbx_error_t *err = NULL;

  if (strlen (r->segs[2]) > 15 || sbx_store_key_delete (sbx_core_store (), r->segs[2], &err) < 0)
    {
      if (err == NULL)
        sbx_err (&err, SBX_E_NOT_FOUND, "key `%.32s` not found", r->segs[2]);
      sbx_reply_error (r, err);
      return;
    }
  sbx_reply_empty (r, 204);
}
