/* sbx: routes for health, info, sandboxes and API keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/audit.h"
#include "core/keys.h"
#include "core/template.h"
#include "iso/kernel.h"
#include "priv/host.h"
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

/* The host's kernel settings (iso/kernel_settings.h): each with its
   value (null: this kernel has none), the recommended value, which way is
   stronger, and whether it is weak. */
static json_t *
settings_json (const struct sbx_host_info *h)
{
  json_t *list = json_array ();
  size_t i;

  for (i = 0; list && i < sbx_kernel_settings_count; i++)
    {
      const struct sbx_kernel_setting *s = &sbx_kernel_settings[i];
      int32_t v = h->kernel_settings[i];

      json_array_append_new (
          list, json_pack ("{s:s, s:o, s:i, s:s, s:b}", "name", s->name, "value",
                           v == SBX_SETTING_ABSENT ? json_null () : json_integer (v),
                           "recommended", (int) s->recommended, "stronger",
                           s->higher_is_stronger ? "higher" : "lower", "weak",
                           sbx_kernel_setting_weak (i, v)));
    }
  return list;
}

/* The kernel's paths (iso/kernel.h), as GET /v1/info names them. */
static json_t *
kernel_json (const struct sbx_host_info *h)
{
  char why[200];
  const char *copied = sbx_core_snapshot_copy_reason (why, sizeof why);
  json_t *paths = json_pack (
      "{s:s, s:s, s:s, s:s, s:s}", "overlay_layers",
      sbx_kernel_describe (h->kernel_paths, SBX_KERNEL_OVERLAY_LAYER_FDS), "template_layers",
      sbx_kernel_describe (h->kernel_paths, SBX_KERNEL_OVERLAY_APPEND), "snapshots",
      copied[0] ? "copy" : "layer", "cgroup_kill",
      h->cgroup_mode == SBX_CGROUP_V2
          ? sbx_kernel_describe (h->kernel_paths, SBX_KERNEL_CGROUP_KILL)
          : "freezer and signals (v1)",
      "landlock_network", h->landlock_abi >= 4 ? "tcp rules" : "none (ABI < 4): the network namespace alone");

  if (paths && copied[0])
    json_object_set_new (paths, "snapshots_why", json_string (copied));
  return json_pack ("{s:s, s:s, s:o*, s:o*}", "release", h->kernel_release, "floor",
                    SBX_KERNEL_FLOOR, "paths", paths, "settings", settings_json (h));
}

/* What tenant has of its quotas (sbx serve --tenant-*). */
static json_t *
usage_json (const char *tenant)
{
  const struct sbx_config *c = sbx_core_config ();
  unsigned tcount = 0, scount = 0;
  uint64_t tbytes = 0, sbytes = 0;
  sbx_error_t *err = NULL;

  sbx_template_usage (tenant, &tcount, &tbytes);
  if (sbx_snapshot_usage (tenant, &scount, &sbytes, &err) < 0)
    sbx_error_free (err);
  return json_pack ("{s:{s:i, s:I, s:i, s:I}, s:{s:i, s:I, s:i, s:I}}", "templates", "count",
                    (int) tcount, "bytes", (json_int_t) tbytes, "max_count",
                    (int) c->tenant_max_templates, "max_bytes",
                    (json_int_t) c->tenant_template_bytes, "snapshots", "count", (int) scount,
                    "bytes", (json_int_t) sbytes, "max_count", SBX_SNAPSHOTS_PER_TENANT,
                    "max_bytes", (json_int_t) c->tenant_snapshot_bytes);
}

void
sbx_route_info (struct sbx_req *r)
{
  unsigned running = 0, pooled = 0;
  const struct sbx_host_info *h = sbx_core_host_info ();

  sbx_core_counts (sbx_req_tenant (r), &running, &pooled);
  json_t *o, *audit = sbx_audit_info_json ();

  o = json_pack ("{s:s, s:s, s:i, s:i, s:i}", "version", SBX_VERSION, "cgroup",
                 h->cgroup_mode == SBX_CGROUP_V2 ? "v2" : "v1", "landlock_abi",
                 (int) h->landlock_abi, "pool", (int) pooled, "sandboxes", (int) running);
  /* A tenant learns whether changes are accepted, and what it uses of its
     quotas; the administrator why, and where things are on the host. */
  if (!r->admin)
    {
      json_t *healthy = json_incref (json_object_get (audit, "healthy"));
      json_decref (audit);
      audit = json_pack ("{s:o}", "healthy", healthy ? healthy : json_true ());
      json_object_set_new (o, "usage", usage_json (sbx_req_tenant (r)));
    }
  else
    {
      json_object_set_new (o, "cgroup_parent", json_string (h->cgroup_parent));
      if (h->cgroup_daemon[0])
        json_object_set_new (o, "cgroup_daemon", json_string (h->cgroup_daemon));
      json_object_set_new (o, "kernel", kernel_json (h));
    }
  json_object_set_new (o, "audit", audit);
  sbx_reply_json (r, 200, o);
}

int
sbx_create_opts_parse (json_t *body, struct sbx_create_opts *opts, sbx_error_t **err)
{
  static const char *const allowed[] = {"template", "timeout", "memory", "cpus", "pids", "disk",
                                        "env",      "metadata", "user", "network", "on_timeout",
                                        "auto_resume", "keep_memory", "snapshot", "isolation",
                                        "mask_request_host", NULL};
  uint64_t pids = 0;
  const char *on_timeout = NULL;
  int auto_resume = 0, keep_memory = 1;

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
      || sbx_param_bool (body, "keep_memory", &keep_memory, err) < 0
      || sbx_param_string (body, "mask_request_host", &opts->mask_host, err) < 0
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
  if (opts->mask_host && !sbx_mask_host_ok (opts->mask_host))
    return sbx_err (err, SBX_E_INVALID,
                    "mask_request_host must be a host[:port] of at most %d letters, digits, `.`, "
                    "`-`, `:` and `${PORT}` (the port asked for)",
                    SBX_MASK_HOST_MAX);
  if (!keep_memory)
    {
      /* E2B's rule: a sandbox that boots again on resume is resumed by
         its owner, not by whatever request reaches it. */
      if (!(opts->lifecycle & SBX_LIFECYCLE_PAUSE_ON_TIMEOUT) || auto_resume)
        return sbx_err (err, SBX_E_INVALID,
                        "keep_memory false needs on_timeout `pause` and no auto_resume");
      opts->lifecycle |= SBX_LIFECYCLE_PAUSE_DROPS_MEMORY;
    }
  if (json_object_get (body, "pids") && !json_is_null (json_object_get (body, "pids"))
      && (pids == 0 || pids > UINT32_MAX))
    {
      const struct sbx_config *cfg = sbx_core_config ();
      return sbx_err (err, SBX_E_INVALID, "pids %llu is too %s: at %s %llu (%llu .. %llu)",
                      (unsigned long long) pids, pids == 0 ? "few" : "many",
                      pids == 0 ? "least" : "most",
                      (unsigned long long) (pids == 0 ? cfg->min.pids : cfg->max.pids),
                      (unsigned long long) cfg->min.pids, (unsigned long long) cfg->max.pids);
    }
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

/* GET /v1/sandboxes/ID/metrics/history[?start=S&end=S] (Unix seconds):
   {"interval": 5, "max_samples": N, "samples": [...]}, the samples kept
   in the range, oldest first (core/metrics_history.c). */
void
sbx_route_sandbox_metrics_history (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  struct sbx_metrics_sample *v = NULL;
  const char *q_start = sbx_req_query (r, "start"), *q_end = sbx_req_query (r, "end");
  uint64_t start_s = 0, end_s = (uint64_t) INT64_MAX / 1000;
  json_t *samples, *o;
  size_t n = 0, i;

  if ((q_start && sbx_parse_uint64 (q_start, &start_s, &err) < 0)
      || (q_end && sbx_parse_uint64 (q_end, &end_s, &err) < 0)
      || end_s > (uint64_t) INT64_MAX / 1000 || start_s > end_s)
    {
      sbx_error_free (err);
      sbx_reply_errorf (r, SBX_E_INVALID,
                        "`start` and `end` must be Unix times in seconds, start <= end");
      return;
    }
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL
      || sbx_sandbox_metrics_history (sb, (int64_t) start_s * 1000,
                                      end_s >= (uint64_t) INT64_MAX / 1000
                                          ? INT64_MAX
                                          : (int64_t) end_s * 1000 + 999,
                                      &v, &n, &err)
             < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  samples = json_array ();
  for (i = 0; i < n; i++)
    json_array_append_new (
        samples,
        json_pack ("{s:o, s:f, s:f, s:f, s:I, s:I, s:I, s:I}", "time", sbx_json_time (v[i].ms),
                   "cpu_seconds", v[i].cpu_seconds, "cpu_used_pct", v[i].cpu_used_pct, "cpus",
                   v[i].cpus, "memory_bytes", (json_int_t) v[i].mem_used, "memory_limit",
                   (json_int_t) v[i].mem_total, "disk_bytes", (json_int_t) v[i].disk_used,
                   "disk_limit", (json_int_t) v[i].disk_total));
  free (v);
  o = json_pack ("{s:f, s:i, s:o}", "interval",
                 (double) sbx_core_config ()->metrics_interval_ms / 1000.0, "max_samples",
                 SBX_METRICS_HISTORY, "samples", samples);
  if (o == NULL)
    sbx_reply_error (r, NULL); /* out of memory */
  else
    sbx_reply_json (r, 200, o);
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
