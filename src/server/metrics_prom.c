/* sbx: GET /metrics, the daemon's counters in Prometheus' text exposition
 * format 0.0.4 (docs/metrics.md names each one).
 *
 * The numbers are the core's, typed (core/counters.h); this file only
 * writes them out: every family with its HELP and TYPE, counters ending in
 * _total, units in the name (_seconds, _bytes), label values from fixed
 * sets or the operator's tenants (escaped as the format says), never a
 * sandbox id. The administrator's (the unix socket) only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/audit.h"
#include "core/counters.h"
#include "server/request.h"
#include "util/buf.h"
#include "util/self_stats.h"

static const char *const isolation_names[2] = {"namespace", "vm"};
static const char *const template_names[3] = {"base", "code-interpreter-v1", "stored"};
static const char *const failure_names[SBX_CREATE_FAILURES]
    = {"limit", "invalid", "not_found", "setup"};
static const char *const end_names[SBX_END_REASONS]
    = {"api", "timeout", "died", "daemon", "other"};

static void
family (struct sbx_buf *b, const char *name, const char *type, const char *help)
{
  sbx_buf_printf (b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the format wants it: \\, \" and \n escaped. */
static void
label_value (struct sbx_buf *b, const char *v)
{
  for (; *v; v++)
    if (*v == '\\' || *v == '"')
      sbx_buf_printf (b, "\\%c", *v);
    else if (*v == '\n')
      sbx_buf_printf (b, "\\n");
    else
      sbx_buf_printf (b, "%c", *v);
}

static void
histogram (struct sbx_buf *b, const char *name, const char *help, const struct sbx_histogram *h)
{
  uint64_t cumulative = 0;

  family (b, name, "histogram", help);
  for (unsigned i = 0; i < SBX_LATENCY_BUCKETS; i++)
    {
      cumulative += h->bucket[i];
      if (i < SBX_LATENCY_BUCKETS - 1)
        sbx_buf_printf (b, "%s_bucket{le=\"%g\"} %llu\n", name, sbx_latency_bounds[i],
                        (unsigned long long) cumulative);
      else
        sbx_buf_printf (b, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                        (unsigned long long) cumulative);
    }
  sbx_buf_printf (b, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name,
                  (unsigned long long) h->count);
}

/* The front end's own process: what the operator watches for leaks. */
static void
process_metrics (struct sbx_buf *b)
{
  struct sbx_self_stats st;

  sbx_self_stats_read (&st);
  if (st.rss_bytes >= 0)
    {
      family (b, "process_resident_memory_bytes", "gauge",
              "Resident memory of the daemon's front end.");
      sbx_buf_printf (b, "process_resident_memory_bytes %lld\n", (long long) st.rss_bytes);
    }
  if (st.open_fds >= 0)
    {
      family (b, "process_open_fds", "gauge", "Open file descriptors of the daemon's front end.");
      sbx_buf_printf (b, "process_open_fds %lld\n", (long long) st.open_fds);
    }
  if (st.threads >= 0)
    {
      family (b, "process_threads", "gauge", "Threads of the daemon's front end.");
      sbx_buf_printf (b, "process_threads %lld\n", (long long) st.threads);
    }
}

static void
render (struct sbx_buf *b, const struct sbx_counters_snapshot *s,
        const struct sbx_audit_stats *a)
{
  family (b, "sbx_sandboxes", "gauge", "Sandboxes handed out, by state, engine and template.");
  for (unsigned i = 0; i < 2; i++)
    for (unsigned t = 0; t < 3; t++)
      {
        sbx_buf_printf (b, "sbx_sandboxes{state=\"running\",isolation=\"%s\",template=\"%s\"} %u\n",
                        isolation_names[i], template_names[t], s->running[i][t]);
        sbx_buf_printf (b, "sbx_sandboxes{state=\"paused\",isolation=\"%s\",template=\"%s\"} %u\n",
                        isolation_names[i], template_names[t], s->paused[i][t]);
      }
  family (b, "sbx_sandboxes_max", "gauge", "The daemon's cap on running sandboxes.");
  sbx_buf_printf (b, "sbx_sandboxes_max %u\n", s->max_sandboxes);
  family (b, "sbx_pool_sandboxes", "gauge", "Sandboxes built ahead, waiting to be handed out.");
  sbx_buf_printf (b, "sbx_pool_sandboxes %u\n", s->pool_ready);
  family (b, "sbx_pool_building", "gauge", "Pooled sandboxes being built now.");
  sbx_buf_printf (b, "sbx_pool_building %u\n", s->pool_building);
  family (b, "sbx_pool_builds_total", "counter", "Pooled sandboxes built, by outcome.");
  sbx_buf_printf (b, "sbx_pool_builds_total{result=\"ok\"} %llu\n",
                  (unsigned long long) s->pool_built);
  sbx_buf_printf (b, "sbx_pool_builds_total{result=\"failed\"} %llu\n",
                  (unsigned long long) s->pool_build_failed);

  family (b, "sbx_sandbox_creates_total", "counter", "Sandboxes created, by engine.");
  for (unsigned i = 0; i < 2; i++)
    sbx_buf_printf (b, "sbx_sandbox_creates_total{isolation=\"%s\"} %llu\n", isolation_names[i],
                    (unsigned long long) s->created[i]);
  family (b, "sbx_sandbox_create_failures_total", "counter",
          "Creates that failed, by reason (limit: 429; invalid: 400; not_found: 404; setup: "
          "the sandbox could not be made).");
  for (unsigned i = 0; i < SBX_CREATE_FAILURES; i++)
    sbx_buf_printf (b, "sbx_sandbox_create_failures_total{reason=\"%s\"} %llu\n",
                    failure_names[i], (unsigned long long) s->create_failed[i]);
  family (b, "sbx_sandbox_ends_total", "counter",
          "Sandboxes that ended, by reason (api: killed by a client; timeout: their lifetime "
          "ended; died: their init ended on its own, out of memory included; daemon: stopped "
          "with it).");
  for (unsigned i = 0; i < SBX_END_REASONS; i++)
    sbx_buf_printf (b, "sbx_sandbox_ends_total{reason=\"%s\"} %llu\n", end_names[i],
                    (unsigned long long) s->ended[i]);
  histogram (b, "sbx_sandbox_create_duration_seconds",
             "Time to create a sandbox, from the request to its record (pool hits included).",
             &s->create_seconds);
  histogram (b, "sbx_exec_start_duration_seconds",
             "Time from a command's start request to its process running in the sandbox.",
             &s->exec_start_seconds);

  family (b, "sbx_egress_connections_total", "counter",
          "Connections sandboxes opened through the egress proxy, by decision.");
  sbx_buf_printf (b, "sbx_egress_connections_total{decision=\"allow\"} %llu\n",
                  (unsigned long long) s->egress_allowed);
  sbx_buf_printf (b, "sbx_egress_connections_total{decision=\"deny\"} %llu\n",
                  (unsigned long long) s->egress_denied);
  family (b, "sbx_egress_bytes_total", "counter",
          "Bytes through the egress proxy, by direction (of ended connections).");
  sbx_buf_printf (b, "sbx_egress_bytes_total{direction=\"out\"} %llu\n",
                  (unsigned long long) s->egress_bytes_out);
  sbx_buf_printf (b, "sbx_egress_bytes_total{direction=\"in\"} %llu\n",
                  (unsigned long long) s->egress_bytes_in);

  family (b, "sbx_audit_records_total", "counter", "Audit records written (the chain's length).");
  sbx_buf_printf (b, "sbx_audit_records_total %llu\n", (unsigned long long) a->written);
  family (b, "sbx_audit_records_dropped_total", "counter",
          "Audit records dropped (a full queue or no memory).");
  sbx_buf_printf (b, "sbx_audit_records_dropped_total %llu\n", (unsigned long long) a->dropped);
  family (b, "sbx_audit_queue_records", "gauge", "Audit records waiting to be written.");
  sbx_buf_printf (b, "sbx_audit_queue_records %llu\n", (unsigned long long) a->queued);
  family (b, "sbx_audit_healthy", "gauge", "1 while audit writes succeed (or it is off).");
  sbx_buf_printf (b, "sbx_audit_healthy %d\n", a->healthy ? 1 : 0);

  family (b, "sbx_tenant_cpu_seconds_total", "counter",
          "CPU time of a tenant's sandboxes, as sampled for their metrics history.");
  for (unsigned i = 0; i < s->ntenants; i++)
    {
      sbx_buf_printf (b, "sbx_tenant_cpu_seconds_total{tenant=\"");
      label_value (b, s->tenants[i].tenant);
      sbx_buf_printf (b, "\"} %.6f\n", s->tenants[i].cpu_seconds);
    }
  family (b, "sbx_tenant_memory_byte_seconds_total", "counter",
          "Memory a tenant's sandboxes held, integrated over time.");
  for (unsigned i = 0; i < s->ntenants; i++)
    {
      sbx_buf_printf (b, "sbx_tenant_memory_byte_seconds_total{tenant=\"");
      label_value (b, s->tenants[i].tenant);
      sbx_buf_printf (b, "\"} %.0f\n", s->tenants[i].memory_byte_seconds);
    }
  family (b, "sbx_tenant_egress_bytes_total", "counter",
          "Bytes a tenant's sandboxes moved through the egress proxy, both ways.");
  for (unsigned i = 0; i < s->ntenants; i++)
    {
      sbx_buf_printf (b, "sbx_tenant_egress_bytes_total{tenant=\"");
      label_value (b, s->tenants[i].tenant);
      sbx_buf_printf (b, "\"} %llu\n", (unsigned long long) s->tenants[i].egress_bytes);
    }
  process_metrics (b);
}

void
sbx_route_metrics (struct sbx_req *r)
{
  struct sbx_counters_snapshot s;
  struct sbx_audit_stats a;
  struct sbx_buf b = SBX_BUF_INIT;
  struct MHD_Response *resp;
  sbx_error_t *err = NULL;

  if (sbx_counters_read (&s, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  sbx_audit_stats (&a);
  render (&b, &s, &a);
  sbx_counters_snapshot_free (&s);
  if (b.failed)
    {
      sbx_buf_free (&b);
      sbx_reply_error (r, NULL); /* out of memory */
      return;
    }
  resp = MHD_create_response_from_buffer (b.len, b.data, MHD_RESPMEM_MUST_COPY);
  sbx_buf_free (&b);
  if (resp == NULL)
    {
      sbx_reply_error (r, NULL);
      return;
    }
  MHD_add_response_header (resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  sbx_reply_response (r, 200, resp);
}
