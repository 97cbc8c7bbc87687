/* sbx: the daemon's counters (core/counters.h). Atomics for the counts,
 * one small lock for the histograms and the tenants' usage, taken last:
 * nothing here but sbx_counters_read takes the core's lock (the callers
 * may hold it: the event loop does), so a scrape never holds up a
 * sandbox and no caller can deadlock on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/counters.h"
#include "core/internal.h"

const double sbx_latency_bounds[SBX_LATENCY_BUCKETS - 1]
    = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};

static struct
{
  uint64_t created[2], create_failed[SBX_CREATE_FAILURES], ended[SBX_END_REASONS];
  uint64_t pool_built, pool_build_failed;
  uint64_t egress_allowed, egress_denied, egress_bytes_out, egress_bytes_in;
  pthread_mutex_t lock; /* the rest */
  struct sbx_histogram create_seconds, exec_start_seconds;
  struct sbx_tenant_usage tenants[SBX_COUNTERS_TENANTS];
  unsigned ntenants;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void
bump (uint64_t *c, uint64_t by)
{
  __atomic_fetch_add (c, by, __ATOMIC_RELAXED);
}

static uint64_t
load (const uint64_t *c)
{
  return __atomic_load_n (c, __ATOMIC_RELAXED);
}

static void
observe (struct sbx_histogram *h, int64_t ms)
{
  double s = ms > 0 ? (double) ms / 1000.0 : 0.0;
  unsigned i = 0;

  while (i < SBX_LATENCY_BUCKETS - 1 && s > sbx_latency_bounds[i])
    i++;
  pthread_mutex_lock (&C.lock);
  h->bucket[i]++;
  h->count++;
  h->sum += s;
  pthread_mutex_unlock (&C.lock);
}

void
sbx_counters_created (int isolation, int64_t took_ms)
{
  bump (&C.created[isolation == SBX_ISOLATION_VM], 1);
  observe (&C.create_seconds, took_ms);
}

void
sbx_counters_create_failed (enum sbx_error_kind kind)
{
  enum sbx_create_failure f = kind == SBX_E_LIMIT       ? SBX_CREATE_FAIL_LIMIT
                              : kind == SBX_E_INVALID   ? SBX_CREATE_FAIL_INVALID
                              : kind == SBX_E_NOT_FOUND ? SBX_CREATE_FAIL_NOT_FOUND
                                                        : SBX_CREATE_FAIL_SETUP;
  bump (&C.create_failed[f], 1);
}

void
sbx_counters_ended (const char *reason)
{
  enum sbx_end_reason r = SBX_END_OTHER;

  if (reason == NULL || strcmp (reason, "sandbox killed") == 0)
    r = SBX_END_API;
  else if (strcmp (reason, "sandbox expired") == 0)
    r = SBX_END_TIMEOUT;
  else if (strncmp (reason, "sandbox init", 12) == 0)
    r = SBX_END_DIED;
  else if (strcmp (reason, "daemon stopped") == 0)
    r = SBX_END_DAEMON;
  bump (&C.ended[r], 1);
}

void
sbx_counters_pool_built (int ok)
{
  bump (ok ? &C.pool_built : &C.pool_build_failed, 1);
}

void
sbx_counters_exec_started (int64_t took_ms)
{
  observe (&C.exec_start_seconds, took_ms);
}

/* Lock held. The tenant's entry, or the last one ("(other)") once full. */
static struct sbx_tenant_usage *
tenant_locked (const char *tenant)
{
  unsigned i;

  for (i = 0; i < C.ntenants; i++)
    if (strcmp (C.tenants[i].tenant, tenant) == 0)
      return &C.tenants[i];
  if (C.ntenants == SBX_COUNTERS_TENANTS - 1)
    {
      /* Bounded labels: the rest share one. */
      /* A name no tenant can have (they are [A-Za-z0-9_.-]). */
      snprintf (C.tenants[C.ntenants].tenant, sizeof C.tenants[0].tenant, "%s", "(other)");
      C.ntenants++;
    }
  if (C.ntenants == SBX_COUNTERS_TENANTS)
    return &C.tenants[SBX_COUNTERS_TENANTS - 1];
  snprintf (C.tenants[C.ntenants].tenant, sizeof C.tenants[0].tenant, "%s", tenant);
  return &C.tenants[C.ntenants++];
}

void
sbx_counters_usage (const char *tenant, double cpu_seconds, double memory_byte_seconds)
{
  struct sbx_tenant_usage *t;

  pthread_mutex_lock (&C.lock);
  t = tenant_locked (tenant);
  t->cpu_seconds += cpu_seconds;
  t->memory_byte_seconds += memory_byte_seconds;
  pthread_mutex_unlock (&C.lock);
}

void
sbx_counters_egress (const char *tenant, int allowed, uint64_t bytes_out, uint64_t bytes_in)
{
  bump (allowed ? &C.egress_allowed : &C.egress_denied, 1);
  bump (&C.egress_bytes_out, bytes_out);
  bump (&C.egress_bytes_in, bytes_in);
  if (tenant == NULL || bytes_out + bytes_in == 0)
    return; /* it ended meanwhile: counted in the totals only */
  pthread_mutex_lock (&C.lock);
  tenant_locked (tenant)->egress_bytes += bytes_out + bytes_in;
  pthread_mutex_unlock (&C.lock);
}

static unsigned
template_class (const struct sbx_sandbox *sb)
{
  if (sbx__is_code (sb))
    return 1;
  return strcmp (sb->template_name, "base") == 0 ? 0 : 2;
}

int
sbx_counters_read (struct sbx_counters_snapshot *out, sbx_error_t **err)
{
  struct sbx_sandbox *sb;

  memset (out, 0, sizeof *out);
  pthread_mutex_lock (&sbx_core.lock);
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (sb->state == SBX_SB_RUNNING)
      {
        unsigned iso = sb->isolation == SBX_ISOLATION_VM, t = template_class (sb);
        if (sb->paused)
          out->paused[iso][t]++;
        else
          out->running[iso][t]++;
      }
  out->pool_ready = sbx_core.pool_count;
  out->pool_building = sbx_core.pool_building;
  out->max_sandboxes = sbx_core.cfg.max_sandboxes;
  pthread_mutex_unlock (&sbx_core.lock);

  for (unsigned i = 0; i < 2; i++)
    out->created[i] = load (&C.created[i]);
  for (unsigned i = 0; i < SBX_CREATE_FAILURES; i++)
    out->create_failed[i] = load (&C.create_failed[i]);
  for (unsigned i = 0; i < SBX_END_REASONS; i++)
    out->ended[i] = load (&C.ended[i]);
  out->pool_built = load (&C.pool_built);
  out->pool_build_failed = load (&C.pool_build_failed);
  out->egress_allowed = load (&C.egress_allowed);
  out->egress_denied = load (&C.egress_denied);
  out->egress_bytes_out = load (&C.egress_bytes_out);
  out->egress_bytes_in = load (&C.egress_bytes_in);

  pthread_mutex_lock (&C.lock);
  out->create_seconds = C.create_seconds;
  out->exec_start_seconds = C.exec_start_seconds;
  if (C.ntenants > 0)
    {
      out->tenants = malloc (C.ntenants * sizeof *out->tenants);
      if (out->tenants == NULL)
        {
          pthread_mutex_unlock (&C.lock);
          return sbx_err_oom (err);
        }
      memcpy (out->tenants, C.tenants, C.ntenants * sizeof *out->tenants);
      out->ntenants = C.ntenants;
    }
  pthread_mutex_unlock (&C.lock);
  return 0;
}

void
sbx_counters_snapshot_free (struct sbx_counters_snapshot *s)
{
  free (s->tenants);
  s->tenants = NULL;
  s->ntenants = 0;
}
