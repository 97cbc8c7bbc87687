/* sbx: the sandbox registry: create (from the pool or fresh), find, list,
 * extend, kill; the pool filler and the janitor that kills expired or
 * broken sandboxes off the event loop. */
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/template.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/parse.h"

/* ---- slots: each sandbox's own host id range --------------------------- */

static int
slot_take (uint32_t *slot)
{
  unsigned i;

  for (i = 0; i < sbx_core.nslots; i++)
    if (!sbx_core.slots[i])
      {
        sbx_core.slots[i] = 1;
        *slot = i;
        return 0;
      }
  return -1;
}

static void
slot_release (uint32_t slot)
{
  if (slot < sbx_core.nslots)
    sbx_core.slots[slot] = 0;
}

static uid_t
slot_uid_base (uint32_t slot)
{
  return sbx_core.cfg.uid_base + (uid_t) slot * SBX_IDS_PER_SANDBOX;
}

/* ---- refcounting -------------------------------------------------------- */

void
sbx_sandbox_ref (struct sbx_sandbox *sb)
{
  pthread_mutex_lock (&sbx_core.lock);
  sb->refs++;
  pthread_mutex_unlock (&sbx_core.lock);
}

void
sbx__sandbox_unref_locked (struct sbx_sandbox *sb)
{
  if (--sb->refs > 0)
    return;
  json_decref (sb->env);
  json_decref (sb->metadata);
  pthread_cond_destroy (&sb->cond);
  free (sb);
}

void
sbx_sandbox_unref (struct sbx_sandbox *sb)
{
  if (sb == NULL)
    return;
  pthread_mutex_lock (&sbx_core.lock);
  sbx__sandbox_unref_locked (sb);
  pthread_mutex_unlock (&sbx_core.lock);
}

static void
list_remove (struct sbx_sandbox **head, struct sbx_sandbox *sb)
{
  struct sbx_sandbox **pp;

  for (pp = head; *pp; pp = &(*pp)->next)
    if (*pp == sb)
      {
        *pp = sb->next;
        sb->next = NULL;
        return;
      }
}

/* ---- building ---------------------------------------------------------- */

/* The disk is a tmpfs: its pages are memory, charged to the sandbox. Were
   it allowed to fill the whole memory limit, a full disk would leave no
   room to run anything (not even `rm`), and the OOM killer, finding only
   small processes, would take PID 1 and the whole sandbox. So it holds at
   most the memory limit minus this much, whatever `disk` asks. */
#define DISK_HEADROOM (16ULL << 20)

uint64_t
sbx_sandbox_disk_limit (struct sbx_sandbox *sb)
{
  uint64_t v;

  pthread_mutex_lock (&sbx_core.lock);
  v = sbx__effective_disk (&sb->limits);
  pthread_mutex_unlock (&sbx_core.lock);
  return v;
}

uint64_t
sbx__effective_disk (const struct sbx_limits *limits)
{
  uint64_t cap = limits->memory_bytes > 2 * DISK_HEADROOM ? limits->memory_bytes - DISK_HEADROOM
                                                           : limits->memory_bytes / 2;
  return limits->disk_bytes < cap ? limits->disk_bytes : cap;
}

/* Build a sandbox with the default limits (pool) or the given ones. The
   result is not in any list yet; it holds one reference (the caller's). */
static struct sbx_sandbox *
build (const struct sbx_limits *limits, sbx_error_t **err)
{
  const struct sbx_template *tmpl = sbx_template_find ("base");
  struct sbx_iso_spec spec;
  struct sbx_sandbox *sb;
  uint32_t slot;

  sb = calloc (1, sizeof *sb);
  if (sb == NULL)
    sbx_oom ();
  sb->refs = 1;
  sb->state = SBX_SB_POOLED;
  pthread_cond_init (&sb->cond, NULL);
  sbx_random_id (sb->id, SBX_ID_LEN);
  snprintf (sb->template_name, sizeof sb->template_name, "base");
  sb->limits = *limits;

  pthread_mutex_lock (&sbx_core.lock);
  if (slot_take (&slot) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      pthread_cond_destroy (&sb->cond);
      free (sb);
      return sbx_err (err, SBX_E_LIMIT, "no free sandbox id range"), NULL;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  sb->slot = slot;

  memset (&spec, 0, sizeof spec);
  spec.name = sb->id;
  spec.uid_base = slot_uid_base (slot);
  spec.limits.memory_bytes = limits->memory_bytes;
  spec.limits.cpu_milli = limits->cpu_milli;
  spec.limits.pids = limits->pids;
  spec.disk_bytes = sbx__effective_disk (limits);
  spec.hostname = SBX_HOSTNAME;
  spec.plan = &tmpl->plan;
  spec.user_uid = 1000;
  spec.user_gid = 1000;
  if (sbx_iso_create (&sbx_core.engine, &spec, &sb->box, err) < 0)
    {
      pthread_mutex_lock (&sbx_core.lock);
      slot_release (slot);
      pthread_mutex_unlock (&sbx_core.lock);
      pthread_cond_destroy (&sb->cond);
      free (sb);
      return NULL;
    }
  pthread_mutex_lock (&sbx_core.lock);
  sb->refs++; /* the loop's watches and whichever list holds it */
  sb->ctl_watch = sbx__watch_add (sb->box.ctl, EPOLLIN, SBX_W_CTL, sb, 0);
  sb->pidfd_watch = sbx__watch_add (sb->box.pidfd, EPOLLIN, SBX_W_PIDFD, sb, 0);
  pthread_mutex_unlock (&sbx_core.lock);
  return sb;
}

static int
limits_equal (const struct sbx_limits *a, const struct sbx_limits *b)
{
  return a->memory_bytes == b->memory_bytes && a->cpu_milli == b->cpu_milli && a->pids == b->pids;
}

static int
check_range (const char *what, uint64_t v, uint64_t min, uint64_t max, int is_size,
             sbx_error_t **err)
{
  char a[32], b[32], c[32];

  if (v >= min && v <= max)
    return 0;
  if (is_size)
    {
      sbx_format_size (v, a, sizeof a);
      sbx_format_size (min, b, sizeof b);
      sbx_format_size (max, c, sizeof c);
    }
  else
    {
      snprintf (a, sizeof a, "%llu", (unsigned long long) v);
      snprintf (b, sizeof b, "%llu", (unsigned long long) min);
      snprintf (c, sizeof c, "%llu", (unsigned long long) max);
    }
  return sbx_err (err, SBX_E_INVALID, "%s %s is out of range (%s .. %s)", what, a, b, c);
}

/* Fill defaults and check every value against the configured range. */
static int
resolve_limits (const struct sbx_limits *in, struct sbx_limits *out, sbx_error_t **err)
{
  const struct sbx_config *c = &sbx_core.cfg;

  *out = *in;
  if (!out->memory_bytes)
    out->memory_bytes = c->defaults.memory_bytes;
  if (!out->cpu_milli)
    out->cpu_milli = c->defaults.cpu_milli;
  if (!out->pids)
    out->pids = c->defaults.pids;
  if (!out->disk_bytes)
    out->disk_bytes = c->defaults.disk_bytes;
  if (check_range ("memory", out->memory_bytes, c->min.memory_bytes, c->max.memory_bytes, 1, err)
          < 0
      || check_range ("pids", out->pids, c->min.pids, c->max.pids, 0, err) < 0
      || check_range ("disk", out->disk_bytes, c->min.disk_bytes, c->max.disk_bytes, 1, err) < 0)
    return -1;
  if (out->cpu_milli < c->min.cpu_milli || out->cpu_milli > c->max.cpu_milli)
    return sbx_err (err, SBX_E_INVALID, "cpus %g is out of range (%g .. %g)",
                    out->cpu_milli / 1000.0, c->min.cpu_milli / 1000.0, c->max.cpu_milli / 1000.0);
  return 0;
}

int
sbx__check_timeout (uint64_t ms, sbx_error_t **err);
int
sbx__check_timeout (uint64_t ms, sbx_error_t **err)
{
  if (ms < 1000 || ms > sbx_core.cfg.max_timeout_ms)
    return sbx_err (err, SBX_E_INVALID, "timeout %.3gs is out of range (1s .. %llus)", ms / 1000.0,
                    (unsigned long long) (sbx_core.cfg.max_timeout_ms / 1000));
  return 0;
}

/* Kill a sandbox that never became visible. */
static void
discard (struct sbx_sandbox *sb)
{
  sbx_error_t *err = NULL;

  pthread_mutex_lock (&sbx_core.lock);
  sb->state = SBX_SB_DYING;
  sbx__watch_del (&sb->ctl_watch);
  sbx__watch_del (&sb->pidfd_watch);
  pthread_mutex_unlock (&sbx_core.lock);
  if (sbx_iso_destroy (&sbx_core.engine, &sb->box, &err) < 0)
    {
      sbx_warn ("discard sandbox %s: %s", sb->id, err->msg);
      sbx_error_free (err);
    }
  pthread_mutex_lock (&sbx_core.lock);
  slot_release (sb->slot);
  sb->state = SBX_SB_DEAD;
  sbx__sandbox_unref_locked (sb); /* the list/watch reference */
  sbx__sandbox_unref_locked (sb); /* ours */
  pthread_mutex_unlock (&sbx_core.lock);
}

struct sbx_sandbox *
sbx_sandbox_create (const char *tenant, const struct sbx_create_opts *opts, sbx_error_t **err)
{
  struct sbx_sandbox *sb = NULL;
  struct sbx_sandbox_record rec;
  struct sbx_limits limits;
  uint64_t timeout = opts->timeout_ms ? opts->timeout_ms : sbx_core.cfg.default_timeout_ms;
  const char *user = opts->user ? opts->user : "user";
  cleanup_free char *env_json = NULL, *meta_json = NULL;

  if (sbx_template_find (opts->template_name) == NULL)
    return sbx_err (err, SBX_E_INVALID, "unknown template `%s` (available: base)",
                    opts->template_name),
           NULL;
  if (strcmp (user, "user") != 0 && strcmp (user, "root") != 0)
    return sbx_err (err, SBX_E_INVALID, "user must be `user` or `root`, not `%s`", user), NULL;
  if (sbx__check_timeout (timeout, err) < 0 || resolve_limits (&opts->limits, &limits, err) < 0)
    return NULL;

  pthread_mutex_lock (&sbx_core.lock);
  if (sbx_core.stopping)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_UNAVAILABLE, "the daemon is shutting down"), NULL;
    }
  if (sbx_core.running >= sbx_core.cfg.max_sandboxes)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_LIMIT, "the daemon's limit of %u running sandboxes is reached",
                      sbx_core.cfg.max_sandboxes),
             NULL;
    }
  sbx_core.running++; /* reserved now, so parallel creates respect the cap */
  sbx_core.creating++;
  if (sbx_core.pool)
    {
      sb = sbx_core.pool;
      sbx_core.pool = sb->next;
      sb->next = NULL;
      sb->in_pool = 0;
      sb->refs++; /* the caller's; the pool's becomes the registry's */
      sbx_core.pool_count--;
      pthread_cond_signal (&sbx_core.pool_cond);
    }
  pthread_mutex_unlock (&sbx_core.lock);

  if (sb == NULL)
    {
      sb = build (&limits, err);
      if (sb == NULL)
        goto fail_unreserve;
    }
  else
    {
      if (!limits_equal (&limits, &sb->limits))
        {
          struct sbx_cgroup_limits cl = {limits.memory_bytes, limits.cpu_milli, limits.pids};
          if (sbx_iso_set_limits (&sbx_core.engine, &sb->box, &cl, err) < 0)
            goto fail_discard;
        }
      if (sbx__effective_disk (&limits) != sbx__effective_disk (&sb->limits)
          && sbx_iso_set_disk (&sb->box, sbx__effective_disk (&limits), err) < 0)
        goto fail_discard;
      sb->limits = limits;
    }

  snprintf (sb->tenant, sizeof sb->tenant, "%s", tenant ? tenant : "default");
  snprintf (sb->user, sizeof sb->user, "%s", user);
  sb->env = opts->env ? json_deep_copy (opts->env) : json_object ();
  sb->metadata = opts->metadata ? json_deep_copy (opts->metadata) : json_object ();
  if (sb->env == NULL || sb->metadata == NULL)
    sbx_oom ();
  sb->created_ms = sbx_now_ms ();
  sb->timeout_ms = timeout;
  sb->expires_ms = sb->created_ms + (int64_t) timeout;
  sb->expires_mono = sbx_mono_ms () + (int64_t) timeout;
  env_json = json_dumps (sb->env, JSON_COMPACT | JSON_SORT_KEYS);
  meta_json = json_dumps (sb->metadata, JSON_COMPACT | JSON_SORT_KEYS);
  if (env_json == NULL || meta_json == NULL)
    sbx_oom ();

  memset (&rec, 0, sizeof rec);
  rec.id = sb->id;
  rec.tenant = sb->tenant;
  rec.template_name = sb->template_name;
  rec.user = sb->user;
  rec.created_ms = sb->created_ms;
  rec.expires_ms = sb->expires_ms;
  rec.memory = limits.memory_bytes;
  rec.cpu_milli = limits.cpu_milli;
  rec.pids = limits.pids;
  rec.disk = limits.disk_bytes;
  rec.env_json = env_json;
  rec.metadata_json = meta_json;
  rec.slot = sb->slot;
  rec.uid_base = (int64_t) sb->box.uid_base;
  rec.init_pid = sb->box.pid;
  if (sbx_store_sandbox_insert (sbx_core.store, &rec, err) < 0)
    goto fail_discard;

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_POOLED || sb->kill_queued)
    {
      /* Its init died between the pool and here. */
      pthread_mutex_unlock (&sbx_core.lock);
      sbx_store_sandbox_end (sbx_core.store, sb->id, "failed", "init died during start",
                             sbx_now_ms (), NULL);
      sbx_err (err, SBX_E_UNAVAILABLE, "the sandbox died while starting");
      goto fail_discard;
    }
  sb->state = SBX_SB_RUNNING;
  sb->next = sbx_core.sandboxes;
  sbx_core.sandboxes = sb;
  /* Registered: a stop from now on finds it in the list. */
  if (--sbx_core.creating == 0)
    pthread_cond_broadcast (&sbx_core.creating_cond);
  pthread_mutex_unlock (&sbx_core.lock);
  sbx__wake_loop (); /* a new deadline */
  return sb;

fail_discard:
  discard (sb);
fail_unreserve:
  pthread_mutex_lock (&sbx_core.lock);
  sbx_core.running--;
  if (--sbx_core.creating == 0)
    pthread_cond_broadcast (&sbx_core.creating_cond);
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;
}

/* ---- lookup and JSON --------------------------------------------------- */

static int
visible (const struct sbx_sandbox *sb, const char *tenant)
{
  return sb->state == SBX_SB_RUNNING && (tenant == NULL || strcmp (sb->tenant, tenant) == 0);
}

struct sbx_sandbox *
sbx_sandbox_get (const char *tenant, const char *id, sbx_error_t **err)
{
  struct sbx_sandbox *sb;

  if (sbx_id_valid (id))
    {
      pthread_mutex_lock (&sbx_core.lock);
      for (sb = sbx_core.sandboxes; sb; sb = sb->next)
        if (strcmp (sb->id, id) == 0 && visible (sb, tenant))
          {
            sb->refs++;
            pthread_mutex_unlock (&sbx_core.lock);
            return sb;
          }
      pthread_mutex_unlock (&sbx_core.lock);
    }
  /* Another tenant's sandbox and a missing one look exactly alike. */
  return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%.64s` not found", id), NULL;
}

static json_t *
time_json (int64_t ms)
{
  char buf[40];
  time_t t = (time_t) (ms / 1000);
  struct tm tm;

  gmtime_r (&t, &tm);
  strftime (buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return json_string (buf);
}

json_t *sbx__time_json (int64_t ms);
json_t *
sbx__time_json (int64_t ms)
{
  return time_json (ms);
}

static json_t *
sandbox_json_locked (struct sbx_sandbox *sb)
{
  json_t *o = json_object (), *limits = json_object ();

  json_object_set_new (limits, "memory", json_integer ((json_int_t) sb->limits.memory_bytes));
  json_object_set_new (limits, "cpus", json_real (sb->limits.cpu_milli / 1000.0));
  json_object_set_new (limits, "pids", json_integer (sb->limits.pids));
  json_object_set_new (limits, "disk", json_integer ((json_int_t) sb->limits.disk_bytes));
  json_object_set_new (o, "id", json_string (sb->id));
  json_object_set_new (o, "tenant", json_string (sb->tenant));
  json_object_set_new (o, "template", json_string (sb->template_name));
  json_object_set_new (o, "state", json_string (sb->state == SBX_SB_RUNNING ? "running" : "killed"));
  json_object_set_new (o, "user", json_string (sb->user));
  json_object_set_new (o, "created_at", time_json (sb->created_ms));
  json_object_set_new (o, "expires_at", time_json (sb->expires_ms));
  json_object_set_new (o, "timeout", json_real ((double) sb->timeout_ms / 1000.0));
  json_object_set_new (o, "limits", limits);
  json_object_set (o, "env", sb->env);
  json_object_set (o, "metadata", sb->metadata);
  return o;
}

json_t *
sbx_sandbox_json (struct sbx_sandbox *sb)
{
  json_t *o;

  pthread_mutex_lock (&sbx_core.lock);
  o = sandbox_json_locked (sb);
  pthread_mutex_unlock (&sbx_core.lock);
  return o;
}

static int
metadata_matches (json_t *md, json_t *filter)
{
  const char *k;
  json_t *v;

  if (filter == NULL)
    return 1;
  json_object_foreach (filter, k, v)
  {
    json_t *have = json_object_get (md, k);
    if (have == NULL || !json_equal (have, v))
      return 0;
  }
  return 1;
}

json_t *
sbx_sandbox_list (const char *tenant, json_t *filter)
{
  json_t *arr = json_array ();
  struct sbx_sandbox *sb;

  pthread_mutex_lock (&sbx_core.lock);
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (visible (sb, tenant) && metadata_matches (sb->metadata, filter))
      json_array_append_new (arr, sandbox_json_locked (sb));
  pthread_mutex_unlock (&sbx_core.lock);
  /* The registry is newest first; list oldest first. */
  {
    size_t i, n = json_array_size (arr);
    json_t *sorted = json_array ();
    for (i = n; i > 0; i--)
      json_array_append (sorted, json_array_get (arr, i - 1));
    json_decref (arr);
    arr = sorted;
  }
  return arr;
}

int
sbx_core_counts (const char *tenant, unsigned *running, unsigned *pooled)
{
  struct sbx_sandbox *sb;
  unsigned n = 0;

  pthread_mutex_lock (&sbx_core.lock);
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (visible (sb, tenant))
      n++;
  *running = n;
  *pooled = sbx_core.pool_count;
  pthread_mutex_unlock (&sbx_core.lock);
  return 0;
}

int
sbx_sandbox_set_timeout (struct sbx_sandbox *sb, uint64_t timeout_ms, sbx_error_t **err)
{
  int64_t now_mono = sbx_mono_ms (), expires = sbx_now_ms () + (int64_t) timeout_ms;

  if (sbx__check_timeout (timeout_ms, err) < 0)
    return -1;
  /* The record first: a request that fails must change nothing. */
  if (sbx_store_sandbox_set_expiry (sbx_core.store, sb->id, expires, err) < 0)
    return -1;
  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  sb->timeout_ms = timeout_ms;
  sb->expires_ms = expires;
  sb->expires_mono = now_mono + (int64_t) timeout_ms;
  pthread_mutex_unlock (&sbx_core.lock);
  sbx__wake_loop ();
  return 0;
}

json_t *
sbx_sandbox_metrics (struct sbx_sandbox *sb, sbx_error_t **err)
{
  struct sbx_iso_stats st;
  json_t *o;

  pthread_mutex_lock (&sbx_core.lock);
  /* Under the lock: a concurrent kill closes the cgroup fds only after
     it has moved the sandbox out of RUNNING, which it does under the lock. */
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id), NULL;
    }
  if (sbx_iso_stats (&sbx_core.engine, &sb->box, &st, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return NULL;
    }
  o = json_object ();
  json_object_set_new (o, "cpu_seconds", json_real ((double) st.cg.cpu_usec / 1e6));
  json_object_set_new (o, "memory_bytes", json_integer ((json_int_t) st.cg.memory_bytes));
  json_object_set_new (o, "memory_peak_bytes", json_integer ((json_int_t) st.cg.memory_peak_bytes));
  json_object_set_new (o, "memory_limit", json_integer ((json_int_t) sb->limits.memory_bytes));
  json_object_set_new (o, "oom_kills", json_integer ((json_int_t) st.cg.oom_kills));
  json_object_set_new (o, "pids", json_integer ((json_int_t) st.cg.pids));
  json_object_set_new (o, "pids_limit", json_integer (sb->limits.pids));
  json_object_set_new (o, "disk_bytes", json_integer ((json_int_t) st.disk_used_bytes));
  json_object_set_new (o, "disk_limit", json_integer ((json_int_t) sbx__effective_disk (&sb->limits)));
  json_object_set_new (o, "cpus", json_real (sb->limits.cpu_milli / 1000.0));
  pthread_mutex_unlock (&sbx_core.lock);
  return o;
}

/* ---- killing ----------------------------------------------------------- */

int
sbx_sandbox_kill (struct sbx_sandbox *sb, const char *reason, sbx_error_t **err)
{
  sbx_error_t *local = NULL;
  int was_running, expired = reason && strcmp (reason, "sandbox expired") == 0;

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state == SBX_SB_DYING || sb->state == SBX_SB_DEAD)
    {
      while (sb->state != SBX_SB_DEAD)
        pthread_cond_wait (&sb->cond, &sbx_core.lock);
      pthread_mutex_unlock (&sbx_core.lock);
      return 0;
    }
  was_running = sb->state == SBX_SB_RUNNING;
  if (was_running)
    list_remove (&sbx_core.sandboxes, sb);
  else
    {
      struct sbx_sandbox *p;
      for (p = sbx_core.pool; p && p != sb; p = p->next)
        ;
      if (p)
        {
          list_remove (&sbx_core.pool, sb);
          sb->in_pool = 0;
          sbx_core.pool_count--;
          pthread_cond_signal (&sbx_core.pool_cond);
        }
    }
  sb->state = SBX_SB_DYING;
  snprintf (sb->end_reason, sizeof sb->end_reason, "%s", reason ? reason : "sandbox killed");
  sbx__watch_del (&sb->ctl_watch);
  sbx__watch_del (&sb->pidfd_watch);
  sbx__process_kill_all (sb, sb->end_reason);
  pthread_cond_broadcast (&sb->cond);
  pthread_mutex_unlock (&sbx_core.lock);

  if (sbx_iso_destroy (&sbx_core.engine, &sb->box, &local) < 0)
    {
      sbx_error ("destroying sandbox %s: %s", sb->id, local->msg);
      sbx_error_free (local);
      local = NULL;
    }
  if (was_running
      && sbx_store_sandbox_end (sbx_core.store, sb->id, expired ? "expired" : "killed",
                                sb->end_reason, sbx_now_ms (), &local)
             < 0)
    {
      sbx_warn ("recording the end of sandbox %s: %s", sb->id, local->msg);
      sbx_error_free (local);
    }

  pthread_mutex_lock (&sbx_core.lock);
  slot_release (sb->slot);
  if (was_running)
    sbx_core.running--;
  sb->state = SBX_SB_DEAD;
  pthread_cond_broadcast (&sb->cond);
  sbx__sandbox_unref_locked (sb); /* the registry's reference */
  pthread_mutex_unlock (&sbx_core.lock);
  (void) err;
  return 0;
}

/* Called by the loop (lock held): hand the kill to the janitor. */
void
sbx__queue_kill (struct sbx_sandbox *sb, const char *reason)
{
  if (sb->kill_queued || sb->state == SBX_SB_DYING || sb->state == SBX_SB_DEAD)
    return;
  sb->kill_queued = 1;
  /* Taken from the pool but not yet registered: its creator sees the flag
     and discards it. */
  if (sb->state == SBX_SB_POOLED && !sb->in_pool)
    return;
  snprintf (sb->end_reason, sizeof sb->end_reason, "%s", reason);
  if (sbx_core.janitor_len == sbx_core.janitor_cap)
    {
      size_t cap = sbx_core.janitor_cap ? sbx_core.janitor_cap * 2 : 16;
      struct sbx_sandbox **q = realloc (sbx_core.janitor_q, cap * sizeof *q);
      if (q == NULL)
        sbx_oom ();
      sbx_core.janitor_q = q;
      sbx_core.janitor_cap = cap;
    }
  sb->refs++;
  sbx_core.janitor_q[sbx_core.janitor_len++] = sb;
  pthread_cond_signal (&sbx_core.janitor_cond);
}

void *
sbx__janitor_main (void *arg)
{
  (void) arg;
  pthread_mutex_lock (&sbx_core.lock);
  for (;;)
    {
      struct sbx_sandbox *sb;
      char reason[64];
      while (sbx_core.janitor_len == 0 && sbx_core.stopping < 2)
        pthread_cond_wait (&sbx_core.janitor_cond, &sbx_core.lock);
      if (sbx_core.janitor_len == 0)
        break;
      sb = sbx_core.janitor_q[0];
      memmove (sbx_core.janitor_q, sbx_core.janitor_q + 1,
               (sbx_core.janitor_len - 1) * sizeof *sbx_core.janitor_q);
      sbx_core.janitor_len--;
      snprintf (reason, sizeof reason, "%s", sb->end_reason);
      pthread_mutex_unlock (&sbx_core.lock);
      sbx_info ("killing sandbox %s: %s", sb->id, reason);
      sbx_sandbox_kill (sb, reason, NULL);
      pthread_mutex_lock (&sbx_core.lock);
      sbx__sandbox_unref_locked (sb);
    }
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;
}

/* ---- loop hooks -------------------------------------------------------- */

int64_t
sbx__next_sandbox_deadline (int64_t now)
{
  struct sbx_sandbox *sb;
  int64_t next = 0;

  (void) now;
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (sb->state == SBX_SB_RUNNING && !sb->kill_queued
        && (next == 0 || sb->expires_mono < next))
      next = sb->expires_mono;
  return next;
}

void
sbx__expire_sandboxes (int64_t now)
{
  struct sbx_sandbox *sb;

  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (sb->state == SBX_SB_RUNNING && !sb->kill_queued && sb->expires_mono <= now)
      sbx__queue_kill (sb, "sandbox expired");
}

void
sbx__handle_init_event (struct sbx_sandbox *sb)
{
  struct sbx_iso_event ev;
  sbx_error_t *err = NULL;
  int n;

  /* Bounded per wakeup, so one chatty sandbox cannot starve the others. */
  for (n = 0; n < 64; n++)
    {
      int r = sbx_iso_next_event (&sb->box, &ev, &err);
      if (r == 0)
        return;
      if (r < 0)
        {
          sbx_warn ("sandbox %s: %s", sb->id, err->msg);
          sbx_error_free (err);
          sbx__watch_del (&sb->ctl_watch);
          sbx__queue_kill (sb, "sandbox init failed");
          return;
        }
      sbx__process_on_event (sb, &ev);
    }
}

void
sbx__handle_init_death (struct sbx_sandbox *sb)
{
  sbx__watch_del (&sb->pidfd_watch);
  sbx__queue_kill (sb, "sandbox init died");
}

/* ---- the pool ---------------------------------------------------------- */

void *
sbx__pool_main (void *arg)
{
  (void) arg;
  pthread_mutex_lock (&sbx_core.lock);
  while (!sbx_core.stopping)
    {
      struct sbx_sandbox *sb;
      sbx_error_t *err = NULL;

      if (sbx_core.pool_count >= sbx_core.cfg.pool_size
          || sbx_core.running + sbx_core.pool_count >= sbx_core.cfg.max_sandboxes)
        {
          pthread_cond_wait (&sbx_core.pool_cond, &sbx_core.lock);
          continue;
        }
      sbx_core.pool_building++;
      pthread_mutex_unlock (&sbx_core.lock);
      sb = build (&sbx_core.cfg.defaults, &err);
      pthread_mutex_lock (&sbx_core.lock);
      sbx_core.pool_building--;
      if (sb == NULL)
        {
          struct timespec ts;
          sbx_warn ("building a pooled sandbox: %s", err->msg);
          sbx_error_free (err);
          clock_gettime (CLOCK_REALTIME, &ts);
          ts.tv_sec += 1;
          pthread_cond_timedwait (&sbx_core.pool_cond, &sbx_core.lock, &ts);
          continue;
        }
      sb->refs--; /* build's caller reference; the list keeps the other */
      if (sbx_core.stopping || sb->kill_queued)
        {
          sb->refs++;
          pthread_mutex_unlock (&sbx_core.lock);
          discard (sb);
          pthread_mutex_lock (&sbx_core.lock);
          continue;
        }
      sb->next = sbx_core.pool;
      sbx_core.pool = sb;
      sb->in_pool = 1;
      sbx_core.pool_count++;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;
}
