/* sbx: each sandbox's metrics over time (E2B's getMetrics({start, end});
 * docs/api.md "Metrics").
 *
 * A thread of its own samples every running sandbox every
 * SBX_METRICS_INTERVAL_MS (E2B's 5 s buckets; sbxd --metrics-interval): what GET .../metrics says
 * now (CPU time, memory, disk; a VM's from its guest), typed, into a ring
 * on the sandbox of at most SBX_METRICS_HISTORY samples (an hour), which
 * grows as it fills, so that a short-lived sandbox costs a few hundred
 * bytes. Not the janitor: a slow guest must not hold up a kill. A paused
 * sandbox is not sampled (it runs nothing), and the history lives as long
 * as the sandbox does in this daemon (a restart starts it afresh).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "util/log.h"

/* One sample from the JSON of sbx_sandbox_metrics (the one place that
   knows a VM's figures are its guest's). */
static void
sample_of (const json_t *m, int64_t ms, struct sbx_metrics_sample *s)
{
  json_int_t mem_used, mem_total;
  double cpu_seconds;

  sbx_metrics_inside (m, &mem_used, &mem_total, &cpu_seconds);
  memset (s, 0, sizeof *s);
  s->ms = ms;
  s->cpu_seconds = cpu_seconds;
  s->cpus = json_real_value (json_object_get (m, "cpus"));
  s->mem_used = (int64_t) mem_used;
  s->mem_total = (int64_t) mem_total;
  s->disk_used = (int64_t) json_integer_value (json_object_get (m, "disk_bytes"));
  s->disk_total = (int64_t) json_integer_value (json_object_get (m, "disk_limit"));
}

/* The share of its CPUs it used since the sample before (or since it
   started, for the first: a boot after a pause without memory restarts
   the count). */
static double
used_pct (const struct sbx_metrics_sample *prev, const struct sbx_metrics_sample *s,
          int64_t since_ms)
{
  double cpu = s->cpu_seconds, secs = (double) (s->ms - since_ms) / 1000.0;

  if (prev && prev->cpu_seconds <= s->cpu_seconds)
    {
      cpu = s->cpu_seconds - prev->cpu_seconds;
      secs = (double) (s->ms - prev->ms) / 1000.0;
    }
  if (secs <= 0 || s->cpus <= 0)
    return 0.0;
  cpu = 100.0 * cpu / (secs * s->cpus);
  return cpu > 100.0 ? 100.0 : cpu;
}

static const struct sbx_metrics_sample *
newest_locked (const struct sbx_sandbox *sb)
{
  if (sb->history_len == 0)
    return NULL;
  return &sb->history[(sb->history_start + sb->history_len - 1) % sb->history_cap];
}

/* Lock held. Oldest out once it is full; no allocation past the bound. */
static void
append_locked (struct sbx_sandbox *sb, struct sbx_metrics_sample *s)
{
  s->cpu_used_pct = used_pct (newest_locked (sb), s, sb->created_ms);
  if (sb->history_len == sb->history_cap && sb->history_cap < SBX_METRICS_HISTORY)
    {
      unsigned cap = sb->history_cap ? sb->history_cap * 2 : 16;
      struct sbx_metrics_sample *v;
      if (cap > SBX_METRICS_HISTORY)
        cap = SBX_METRICS_HISTORY;
      v = malloc (cap * sizeof *v);
      if (v == NULL)
        return; /* this one is lost; the history stays as it was */
      for (unsigned i = 0; i < sb->history_len; i++)
        v[i] = sb->history[(sb->history_start + i) % sb->history_cap];
      free (sb->history);
      sb->history = v;
      sb->history_cap = cap;
      sb->history_start = 0;
    }
  if (sb->history_len < sb->history_cap)
    sb->history[(sb->history_start + sb->history_len++) % sb->history_cap] = *s;
  else
    {
      sb->history[sb->history_start] = *s;
      sb->history_start = (sb->history_start + 1) % sb->history_cap;
    }
  assert (sb->history_len <= sb->history_cap && sb->history_cap <= SBX_METRICS_HISTORY);
}

static void
sample_all (void)
{
  struct sbx_sandbox **v = NULL, *sb;
  size_t n = 0, cap = 0, i;

  pthread_mutex_lock (&sbx_core.lock);
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    {
      if (sb->state != SBX_SB_RUNNING || sb->paused || sb->transition || sb->hibernated)
        continue;
      if (n == cap)
        {
          struct sbx_sandbox **nv;
          cap = cap ? cap * 2 : 64;
          nv = realloc (v, cap * sizeof *v);
          if (nv == NULL)
            break;
          v = nv;
        }
      sb->refs++;
      v[n++] = sb;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  for (i = 0; i < n; i++)
    {
      struct sbx_metrics_sample s;
      sbx_error_t *err = NULL;
      json_t *m = sbx_sandbox_metrics (v[i], &err);

      if (m == NULL)
        /* Ended or paused meanwhile: nothing to say. */
        sbx_error_free (err);
      else
        {
          double cpu = 0, byte_seconds = 0;
          char tenant[sizeof v[i]->tenant];
          int kept = 0;

          sample_of (m, sbx_now_ms (), &s);
          json_decref (m);
          pthread_mutex_lock (&sbx_core.lock);
          if (v[i]->state == SBX_SB_RUNNING)
            {
              /* Its tenant's usage since it was last counted; a first
                 sample after a boot or an adoption only sets where the
                 count starts (usage_ms 0), so nothing is counted twice
                 and a pause without memory holds none. */
              if (v[i]->usage_ms > 0 && s.ms > v[i]->usage_ms)
                {
                  cpu = s.cpu_seconds >= v[i]->usage_cpu ? s.cpu_seconds - v[i]->usage_cpu
                                                         : s.cpu_seconds;
                  byte_seconds = (double) s.mem_used * (double) (s.ms - v[i]->usage_ms) / 1000.0;
                  kept = 1;
                }
              v[i]->usage_ms = s.ms;
              v[i]->usage_cpu = s.cpu_seconds;
              snprintf (tenant, sizeof tenant, "%s", v[i]->tenant);
              append_locked (v[i], &s);
            }
          pthread_mutex_unlock (&sbx_core.lock);
          if (kept)
            sbx_counters_usage (tenant, cpu, byte_seconds);
        }
      sbx_sandbox_unref (v[i]);
    }
  free (v);
}

void *
sbx__history_main (void *arg)
{
  struct timespec ts;

  (void) arg;
  pthread_mutex_lock (&sbx_core.lock);
  while (sbx_core.stopping < 2)
    {
      sbx__abstime (&ts, (int64_t) sbx_core.cfg.metrics_interval_ms);
      while (sbx_core.stopping < 2
             && pthread_cond_timedwait (&sbx_core.history_cond, &sbx_core.lock, &ts) == 0)
        ;
      if (sbx_core.stopping >= 2)
        break;
      pthread_mutex_unlock (&sbx_core.lock);
      sample_all ();
      pthread_mutex_lock (&sbx_core.lock);
    }
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;
}

int
sbx_sandbox_metrics_history (struct sbx_sandbox *sb, int64_t from_ms, int64_t to_ms,
                             struct sbx_metrics_sample **out, size_t *n, sbx_error_t **err)
{
  struct sbx_metrics_sample *v = NULL;
  size_t k = 0;

  *out = NULL;
  *n = 0;
  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  if (sb->history_len > 0)
    {
      v = malloc (sb->history_len * sizeof *v);
      if (v == NULL)
        {
          pthread_mutex_unlock (&sbx_core.lock);
          return sbx_err_oom (err);
        }
      for (unsigned i = 0; i < sb->history_len; i++)
        {
          const struct sbx_metrics_sample *s
              = &sb->history[(sb->history_start + i) % sb->history_cap];
          if (s->ms >= from_ms && s->ms <= to_ms)
            v[k++] = *s;
        }
    }
  pthread_mutex_unlock (&sbx_core.lock);
  *out = v;
  *n = k;
  return 0;
}

int
sbx_sandbox_metrics_now (struct sbx_sandbox *sb, struct sbx_metrics_sample *out,
                         sbx_error_t **err)
{
  json_t *m = sbx_sandbox_metrics (sb, err);

  if (m == NULL)
    return -1;
  sample_of (m, sbx_now_ms (), out);
  json_decref (m);
  pthread_mutex_lock (&sbx_core.lock);
  out->cpu_used_pct = used_pct (newest_locked (sb), out, sb->created_ms);
  pthread_mutex_unlock (&sbx_core.lock);
  return 0;
}
