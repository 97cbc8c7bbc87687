/* sbx: the sandbox registry: ids and their host uid ranges, references,
 * lookup by tenant, JSON, list, lifetime changes, metrics, and killing. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/internal.h"
#include "core/template.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/parse.h"
#include "vm/fs_wire.h"

/* ---- slots: each sandbox's own host id range --------------------------- */

int
sbx__slot_take (uint32_t *slot)
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

void
sbx__slot_release (uint32_t slot)
{
  if (slot < sbx_core.nslots)
    sbx_core.slots[slot] = 0;
}

uid_t
sbx__slot_uid_base (uint32_t slot)
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
  json_decref (sb->network);
  free (sb->history);
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

int64_t
sbx_sandbox_expires_ms (struct sbx_sandbox *sb)
{
  int64_t ms;

  pthread_mutex_lock (&sbx_core.lock);
  ms = sb->expires_ms;
  pthread_mutex_unlock (&sbx_core.lock);
  return ms;
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
  json_object_set_new (o, "isolation",
                       json_string (sb->isolation == SBX_ISOLATION_VM ? "vm" : "namespace"));
  json_object_set_new (o, "state", json_string (sb->state != SBX_SB_RUNNING ? "killed"
                                                : sb->paused ? "paused"
                                                             : "running"));
  json_object_set_new (o, "user", json_string (sb->user));
  json_object_set_new (o, "created_at", sbx_json_time (sb->created_ms));
  json_object_set_new (o, "expires_at", sbx_json_time (sb->expires_ms));
  json_object_set_new (o, "timeout", json_real ((double) sb->timeout_ms / 1000.0));
  /* Paused: its clock stands; expires_at is when it would end if resumed now. */
  if (sb->paused)
    {
      /* Paused to disk: no QEMU runs (docs/vm.md); or its files only: no
         process runs, its resume boots it (core/pause_files.c). */
      if (sb->hibernated)
        json_object_set_new (o, "hibernated", json_true ());
      if (sb->hibernated == SBX_HIBERNATED_FILESYSTEM)
        json_object_set_new (o, "memory_kept", json_false ());
      json_object_set_new (o, "expires_at", sbx_json_time (sbx_now_ms () + sb->remaining_ms));
      json_object_set_new (o, "remaining", json_real ((double) sb->remaining_ms / 1000.0));
    }
  json_object_set_new (o, "lifecycle",
                       json_pack ("{s:s,s:b,s:b}", "on_timeout",
                                  (sb->lifecycle & SBX_LIFECYCLE_PAUSE_ON_TIMEOUT) ? "pause" : "kill",
                                  "auto_resume", (sb->lifecycle & SBX_LIFECYCLE_AUTO_RESUME) != 0,
                                  "keep_memory",
                                  (sb->lifecycle & SBX_LIFECYCLE_PAUSE_DROPS_MEMORY) == 0));
  /* Its ports open to anyone (E2B's allowPublicTraffic: true), not only to
     holders of the traffic token. */
  if (sb->lifecycle & SBX_LIFECYCLE_PUBLIC_PORTS)
    json_object_set_new (o, "public_ports", json_true ());
  if (sb->mask_host[0])
    json_object_set_new (o, "mask_request_host", json_string (sb->mask_host));
  json_object_set_new (o, "limits", limits);
  /* Made from a snapshot: as a layer under its disk, or a copy in it. */
  if (sb->snapshot[0] && sb->isolation != SBX_ISOLATION_VM)
    json_object_set_new (o, "snapshot", json_pack ("{s:s, s:s}", "name", sb->snapshot, "as",
                                                   sb->snapshot_copied ? "copy" : "layer"));
  json_object_set (o, "env", sb->env);
  json_object_set (o, "metadata", sb->metadata);
  /* The egress policy: empty lists for none. A copy: it is replaced (not
     changed) under the lock, and this object outlives the lock. */
  json_object_set_new (o, "network", sb->network ? json_deep_copy (sb->network)
                                                 : json_pack ("{s:[],s:[]}", "allow", "deny"));
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
  int64_t now_mono = sbx_mono_ms (), expires = sbx_now_ms () + (int64_t) timeout_ms, old;

  if (sbx__check_timeout (timeout_ms, err) < 0)
    return -1;
  /* init's own backstop first (see SBX_MSG_DEADLINE), then the record; a
     request that fails changes nothing. */
  pthread_mutex_lock (&sbx_core.lock);
  while (sb->transition && sb->state == SBX_SB_RUNNING)
    pthread_cond_wait (&sb->cond, &sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  if (sb->paused)
    {
      /* Its clock stands: the new lifetime starts at the resume. */
      pthread_mutex_unlock (&sbx_core.lock);
      if (sbx_store_sandbox_set_paused (sbx_core.store, sb->id, 1, (int64_t) timeout_ms,
                                        expires, err)
              < 0
          || sbx_store_sandbox_set_expiry (sbx_core.store, sb->id, expires, (int64_t) timeout_ms,
                                           err)
                 < 0)
        return -1;
      pthread_mutex_lock (&sbx_core.lock);
      sb->remaining_ms = (int64_t) timeout_ms;
      sb->timeout_ms = timeout_ms;
      pthread_mutex_unlock (&sbx_core.lock);
      return 0;
    }
  old = sb->expires_ms;
  if (sbx_iso_set_deadline (&sb->box, expires + SBX_KEEP_GRACE_MS, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  if (sbx_store_sandbox_set_expiry (sbx_core.store, sb->id, expires, (int64_t) timeout_ms, err)
      < 0)
    {
      pthread_mutex_lock (&sbx_core.lock);
      if (sb->state == SBX_SB_RUNNING)
        sbx_iso_set_deadline (&sb->box, old + SBX_KEEP_GRACE_MS, NULL);
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
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

/* A VM's own view, asked of its agent before the lock (it runs a file
   operation in the guest); NULL when it is paused (its vCPUs stop) or the
   guest does not answer: the host's figures stand alone then. */
static json_t *
guest_metrics (struct sbx_sandbox *sb)
{
  struct sbx_vm_fs_metrics m;
  sbx_error_t *err = NULL;
  int paused;

  if (sb->isolation != SBX_ISOLATION_VM)
    return NULL;
  pthread_mutex_lock (&sbx_core.lock);
  paused = sb->paused || sb->hibernated;
  pthread_mutex_unlock (&sbx_core.lock);
  if (paused)
    return NULL;
  if (sbx__vm_guest_metrics (sb, &m, &err) < 0)
    {
      sbx_warn ("sandbox %s: the guest's metrics: %s", sb->id, err->msg);
      sbx_error_free (err);
      return NULL;
    }
  return json_pack ("{s:I, s:I, s:I, s:I, s:f, s:i, s:i}", "memory_total",
                    (json_int_t) m.mem_total, "memory_used",
                    (json_int_t) (m.mem_total - m.mem_available), "disk_total",
                    (json_int_t) m.disk_total, "disk_used",
                    (json_int_t) (m.disk_total - m.disk_free), "cpu_seconds",
                    (double) m.cpu_busy_ticks / 100.0 /* USER_HZ */, "cpus", (int) m.cpus,
                    "processes", (int) m.processes);
}

json_t *
sbx_sandbox_metrics (struct sbx_sandbox *sb, sbx_error_t **err)
{
  struct sbx_iso_stats st;
  json_t *o, *guest = guest_metrics (sb);

  pthread_mutex_lock (&sbx_core.lock);
  /* Under the lock: a concurrent kill closes the cgroup fds only after
     it has moved the sandbox out of RUNNING, which it does under the lock. */
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      json_decref (guest);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id), NULL;
    }
  if (sb->hibernated)
    {
      /* No VM, no cgroup: it holds no host memory nor CPU. */
      pthread_mutex_unlock (&sbx_core.lock);
      json_decref (guest);
      return sbx_err (err, SBX_E_CONFLICT, "sandbox `%s` is hibernated: it has no metrics until"
                                           " it resumes", sb->id), NULL;
    }
  if (sbx_host_stats (sb->slot, &st, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      json_decref (guest);
      return NULL;
    }
  o = json_object ();
  if (o == NULL)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      json_decref (guest);
      return sbx_err_oom (err), NULL;
    }
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
  if (guest)
    {
      /* A VM's disk is in its guest: the host has no figure for it. */
      json_object_set (o, "disk_bytes", json_object_get (guest, "disk_used"));
      json_object_set (o, "disk_limit", json_object_get (guest, "disk_total"));
      json_object_set_new (o, "guest", guest);
    }
  return o;
}

void
sbx_metrics_inside (const json_t *m, json_int_t *mem_used, json_int_t *mem_total,
                    double *cpu_seconds)
{
  const json_t *g = json_object_get (m, "guest");

  *mem_used = json_integer_value (json_object_get (g ? g : m, g ? "memory_used" : "memory_bytes"));
  *mem_total
      = json_integer_value (json_object_get (g ? g : m, g ? "memory_total" : "memory_limit"));
  *cpu_seconds = json_real_value (json_object_get (g ? g : m, "cpu_seconds"));
}

/* ---- killing ----------------------------------------------------------- */

int
sbx_sandbox_kill (struct sbx_sandbox *sb, const char *reason, sbx_error_t **err)
{
  sbx_error_t *local = NULL;
  int was_running, hibernated, image, expired = reason && strcmp (reason, "sandbox expired") == 0;
  /* Its init died on its own (reaper.c): recorded as such, not as a kill. */
  int died = reason && strncmp (reason, "sandbox init", 12) == 0;

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
          sbx__pool_uncount (sb);
          pthread_cond_signal (&sbx_core.pool_cond);
        }
    }
  sb->state = SBX_SB_DYING;
  snprintf (sb->end_reason, sizeof sb->end_reason, "%s", reason ? reason : "sandbox killed");
  sbx__watch_del (&sb->ctl_watch);
  sbx__watch_del (&sb->pidfd_watch);
  sbx__process_kill_all (sb, sb->end_reason);
  hibernated = sb->hibernated;
  image = sb->hibernated || sb->image_left;
  pthread_cond_broadcast (&sb->cond);
  pthread_mutex_unlock (&sbx_core.lock);

  /* Hibernated: nothing runs (the parent holds nothing in its slot); its
     memory's or its files' file goes (also one a boot could not remove). */
  if (image)
    sbx__vm_forget_hibernated (sb->tenant, sb->id);
  if (!hibernated && sbx_host_destroy (sb->slot, &sb->box, &local) < 0)
    {
      sbx_error ("destroying sandbox %s: %s", sb->id, local->msg);
      sbx_error_free (local);
      local = NULL;
    }
  if (was_running)
    {
      sbx_audit_lifecycle (expired ? "expired" : died ? "died" : "killed", sb->id, sb->tenant,
                           sb->end_reason);
      sbx_counters_ended (sb->end_reason);
    }
  if (was_running
      && sbx_store_sandbox_end (sbx_core.store, sb->id,
                                expired ? "expired" : died ? "died" : "killed",
                                sb->end_reason, sbx_now_ms (), &local)
             < 0)
    {
      sbx_warn ("recording the end of sandbox %s: %s", sb->id, local->msg);
      sbx_error_free (local);
    }

  pthread_mutex_lock (&sbx_core.lock);
  sbx__slot_release (sb->slot);
  if (was_running)
    {
      sbx_core.running--;
      /* Below the cap again: the pool may refill. */
      pthread_cond_signal (&sbx_core.pool_cond);
    }
  sb->state = SBX_SB_DEAD;
  pthread_cond_broadcast (&sb->cond);
  sbx__sandbox_unref_locked (sb); /* the registry's reference */
  pthread_mutex_unlock (&sbx_core.lock);
  (void) err;
  return 0;
}

