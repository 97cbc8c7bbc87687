/* sbx: the daemon's counters and gauges, typed, for GET /metrics
 * (server/metrics_prom.c renders them; docs/metrics.md names each).
 *
 * Counters are atomics bumped where the thing happens (a create, an end,
 * an egress connection); gauges are read at the scrape from the core's
 * state. No sbx_counters_* call but sbx_counters_read takes the core's
 * lock, so any of them may be called with it held. Labels are bounded by construction: enums, the engine, the
 * template's class (built-in or stored), and the tenant (the operator's
 * keys; past SBX_COUNTERS_TENANTS tenants the rest count as "(other)").
 * Never a sandbox id.
 */
#ifndef SBX_CORE_COUNTERS_H
#define SBX_CORE_COUNTERS_H

#include <stdint.h>

#include "util/error.h"

enum sbx_end_reason
{
  SBX_END_API = 0,  /* a client's kill */
  SBX_END_TIMEOUT,  /* its lifetime ended */
  SBX_END_DIED,     /* its init ended on its own (killed, out of memory...) */
  SBX_END_DAEMON,   /* the daemon stopped with --kill-on-exit */
  SBX_END_OTHER,    /* setup failures, a failed adoption... */
  SBX_END_REASONS
};

/* Create failures by the error's kind: limit (429), invalid (400), not
   found (404), and setup (everything else: the sandbox could not be made). */
enum sbx_create_failure
{
  SBX_CREATE_FAIL_LIMIT = 0,
  SBX_CREATE_FAIL_INVALID,
  SBX_CREATE_FAIL_NOT_FOUND,
  SBX_CREATE_FAIL_SETUP,
  SBX_CREATE_FAILURES
};

/* Seconds; the last bucket is +Inf. */
#define SBX_LATENCY_BUCKETS 12
extern const double sbx_latency_bounds[SBX_LATENCY_BUCKETS - 1];

struct sbx_histogram
{
  uint64_t bucket[SBX_LATENCY_BUCKETS]; /* not cumulative: bucket[i] counts (b[i-1], b[i]] */
  uint64_t count;
  double sum; /* seconds */
};

#define SBX_COUNTERS_TENANTS 256
struct sbx_tenant_usage
{
  char tenant[81];
  double cpu_seconds;          /* of its sandboxes, sampled (metrics_history.c) */
  double memory_byte_seconds;  /* memory in use, times the sampling interval */
  uint64_t egress_bytes;       /* both ways, of connections its sandboxes ended */
};

struct sbx_counters_snapshot
{
  /* Gauges. [isolation 0 namespace, 1 vm][template 0 base, 1 code, 2 stored] */
  unsigned running[2][3], paused[2][3];
  unsigned pool_ready, pool_building, max_sandboxes;
  /* Counters. */
  uint64_t created[2]; /* by isolation */
  uint64_t create_failed[SBX_CREATE_FAILURES];
  uint64_t ended[SBX_END_REASONS];
  uint64_t pool_built, pool_build_failed;
  uint64_t egress_allowed, egress_denied, egress_bytes_out, egress_bytes_in;
  struct sbx_histogram create_seconds, exec_start_seconds;
  struct sbx_tenant_usage *tenants; /* owned: free it */
  unsigned ntenants;
};

void sbx_counters_created (int isolation, int64_t took_ms);
void sbx_counters_create_failed (enum sbx_error_kind kind);
void sbx_counters_ended (const char *reason);
void sbx_counters_pool_built (int ok);
void sbx_counters_exec_started (int64_t took_ms);
/* tenant: of the sandbox that made the connection, NULL once it ended. */
void sbx_counters_egress (const char *tenant, int allowed, uint64_t bytes_out, uint64_t bytes_in);
/* A sample's share of a tenant's usage (metrics_history.c). */
void sbx_counters_usage (const char *tenant, double cpu_seconds, double memory_byte_seconds);
/* Everything at once; 0, or -1 (out of memory). */
int sbx_counters_read (struct sbx_counters_snapshot *out, sbx_error_t **err);
void sbx_counters_snapshot_free (struct sbx_counters_snapshot *s);

#endif
