/* sbx: pause and resume (docs/api.md "Pause and resume").
 *
 * A paused sandbox's processes are frozen by the cgroup freezer (v1
 * freezer.state, v2 cgroup.freeze; the privileged parent writes it), its
 * memory stays resident (no hibernation: CRIU does not work on the kernels
 * we target), and its lifetime clock stands: both the daemon's expiry and
 * init's own backstop (SBX_MSG_DEADLINE, set to "none" while paused, so a
 * sandbox paused while no daemon runs is not ended by init at its old
 * deadline). On resume the lifetime left at the pause continues, or a new
 * one starts (a sandbox paused because its lifetime ended, on_timeout
 * "pause", gets its whole lifetime again). The state is in the record
 * ("paused"), so a restarted daemon adopts the sandbox and freezes it
 * again (core/adopt.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "util/log.h"

/* Wait until no pause or resume runs; lock held. 0, or -1 with NOT_FOUND
   when the sandbox is gone. */
static int
settle_locked (struct sbx_sandbox *sb, sbx_error_t **err)
{
  while (sb->transition && sb->state == SBX_SB_RUNNING)
    pthread_cond_wait (&sb->cond, &sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
  return 0;
}

static void
end_transition_locked (struct sbx_sandbox *sb)
{
  sb->transition = 0;
  pthread_cond_broadcast (&sb->cond);
}

/* remaining_ms < 0: what is left of its lifetime now. */
static int
pause_sandbox (struct sbx_sandbox *sb, int64_t remaining_ms, sbx_error_t **err)
{
  int64_t now_mono;
  sbx_error_t *local = NULL;

  pthread_mutex_lock (&sbx_core.lock);
  if (settle_locked (sb, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  /* A pause the janitor was to make is this one (or made moot by it);
     the transition starts in the same step, so a waiter never sees the
     sandbox neither paused nor about to be. */
  sb->pause_queued = 0;
  pthread_cond_broadcast (&sb->cond);
  if (sb->paused)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_CONFLICT, "sandbox `%s` is already paused", sb->id);
    }
  sb->transition = 1;
  now_mono = sbx_mono_ms ();
  if (remaining_ms < 0)
    remaining_ms = sb->expires_mono > now_mono ? sb->expires_mono - now_mono : 0;
  /* Init's backstop off first: frozen, it cannot act on it, and thawed
     past its old deadline it must not end the sandbox (it reads every
     waiting message before it acts on its timer, see init/main.c). */
  if (sbx_iso_set_deadline (&sb->box, 0, err) < 0)
    {
      end_transition_locked (sb);
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  pthread_mutex_unlock (&sbx_core.lock);

  if (sbx_host_freeze (sb->slot, 1, err) < 0
      || sbx_store_sandbox_set_paused (sbx_core.store, sb->id, 1, remaining_ms, sb->expires_ms,
                                       err)
             < 0)
    {
      /* Nothing changed: thawed (a no-op when the freeze failed), and its
         backstop back. */
      sbx_host_freeze (sb->slot, 0, NULL);
      pthread_mutex_lock (&sbx_core.lock);
      if (sb->state == SBX_SB_RUNNING)
        sbx_iso_set_deadline (&sb->box, sb->expires_ms + SBX_KEEP_GRACE_MS, NULL);
      end_transition_locked (sb);
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }

  pthread_mutex_lock (&sbx_core.lock);
  sb->paused = 1;
  sb->remaining_ms = remaining_ms;
  sb->paused_mono = sbx_mono_ms ();
  end_transition_locked (sb);
  pthread_mutex_unlock (&sbx_core.lock);
  sbx__wake_loop ();
  sbx_audit_lifecycle ("paused", sb->id, sb->tenant, NULL);
  (void) local;
  return 0;
}

int
sbx_sandbox_pause (struct sbx_sandbox *sb, sbx_error_t **err)
{
  return pause_sandbox (sb, -1, err);
}

/* lifetime: what the next resume gives it again. */
static void
pause_at_expiry (struct sbx_sandbox *sb, int files_only, int64_t lifetime)
{
  sbx_error_t *err = NULL;

  if ((files_only ? sbx_sandbox_pause_files (sb, lifetime, &err)
                  : pause_sandbox (sb, lifetime, &err))
      == 0)
    {
      sbx_info ("sandbox %s paused: its lifetime ended", sb->id);
      return;
    }
  if (err->kind == SBX_E_CONFLICT || err->kind == SBX_E_NOT_FOUND)
    {
      sbx_error_free (err);
      return;
    }
  sbx_warn ("sandbox %s: pausing at the end of its lifetime: %s; it ends instead", sb->id,
            err->msg);
  sbx_error_free (err);
  sbx_sandbox_kill (sb, "sandbox expired", NULL);
}

static void *
pause_files_main (void *arg)
{
  struct sbx_sandbox *sb = arg;
  int64_t lifetime;

  pthread_mutex_lock (&sbx_core.lock);
  lifetime = (int64_t) sb->timeout_ms;
  pthread_mutex_unlock (&sbx_core.lock);
  pause_at_expiry (sb, 1, lifetime);
  pthread_mutex_lock (&sbx_core.lock);
  sbx__sandbox_unref_locked (sb);
  if (--sbx_core.pausers == 0)
    pthread_cond_broadcast (&sbx_core.creating_cond);
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;
}

/* Its lifetime ended and it was created to pause then (the janitor). The
   next resume gives it its whole lifetime again. If it cannot be paused,
   it ends as any sandbox whose lifetime ended. A pause without memory
   copies its files, which may take seconds: in a thread of its own, so
   that the janitor's other kills wait for nobody (pause_queued holds the
   sandbox still meanwhile, as it does for the janitor's own). */
void
sbx__sandbox_pause_expired (struct sbx_sandbox *sb)
{
  pthread_attr_t attr;
  pthread_t t;
  int64_t lifetime;
  int files_only, threaded, started = 0;

  pthread_mutex_lock (&sbx_core.lock);
  lifetime = (int64_t) sb->timeout_ms;
  files_only = (sb->lifecycle & SBX_LIFECYCLE_PAUSE_DROPS_MEMORY) && sb->isolation == SBX_ISOLATION_NS;
  /* Not once the core stops (its stop waits for the threads it knows). */
  threaded = files_only && !sbx_core.stopping;
  if (threaded)
    {
      sb->refs++; /* the thread's */
      sbx_core.pausers++; /* the core's stop waits for it */
    }
  pthread_mutex_unlock (&sbx_core.lock);
  if (threaded && pthread_attr_init (&attr) == 0)
    {
      pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
      started = pthread_create (&t, &attr, pause_files_main, sb) == 0;
      pthread_attr_destroy (&attr);
    }
  if (started)
    return;
  if (threaded)
    {
      pthread_mutex_lock (&sbx_core.lock);
      sbx__sandbox_unref_locked (sb);
      sbx_core.pausers--;
      pthread_mutex_unlock (&sbx_core.lock);
    }
  /* No thread (no memory for one): here, as a frozen pause is. */
  pause_at_expiry (sb, files_only, lifetime);
}

static int
resume_sandbox (struct sbx_sandbox *sb, uint64_t timeout_ms, int quiet_if_running,
                sbx_error_t **err)
{
  int64_t remaining, now, now_mono, shift;
  struct sbx_process *p;
  int hibernated;
  sbx_error_t *local = NULL;

  if (timeout_ms && sbx__check_timeout (timeout_ms, err) < 0)
    return -1;
  pthread_mutex_lock (&sbx_core.lock);
  /* A pause the janitor is about to make (its lifetime just ended) is
     made first: a resume must not be undone by it a moment later. */
  while ((sb->transition || sb->pause_queued) && sb->state == SBX_SB_RUNNING)
    pthread_cond_wait (&sb->cond, &sbx_core.lock);
  if (settle_locked (sb, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  if (!sb->paused)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      if (quiet_if_running)
        return 0;
      return sbx_err (err, SBX_E_CONFLICT, "sandbox `%s` is not paused", sb->id);
    }
  sb->transition = 1;
  remaining = timeout_ms ? (int64_t) timeout_ms : sb->remaining_ms;
  hibernated = sb->hibernated;
  pthread_mutex_unlock (&sbx_core.lock);

  /* Hibernated: its VM is made again from the file (core/vm_hibernate.c),
     or it boots again with its files (core/pause_files.c). */
  if ((hibernated == SBX_HIBERNATED_MEMORY       ? sbx__vm_wake (sb, err)
       : hibernated == SBX_HIBERNATED_FILESYSTEM ? sbx__files_wake (sb, remaining, err)
                                                 : sbx_host_freeze (sb->slot, 0, err))
      < 0)
    {
      pthread_mutex_lock (&sbx_core.lock);
      end_transition_locked (sb);
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  now = sbx_now_ms ();
  now_mono = sbx_mono_ms ();
  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state == SBX_SB_RUNNING
      && sbx_iso_set_deadline (&sb->box, now + remaining + SBX_KEEP_GRACE_MS, &local) < 0)
    {
      /* Its control socket is full or gone: init's death, if that is it,
         comes through its pidfd. The daemon's own expiry still holds. */
      sbx_warn ("sandbox %s: moving its deadline on resume: %s", sb->id, local->msg);
      sbx_error_free (local);
      local = NULL;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  if (sbx_store_sandbox_set_paused (sbx_core.store, sb->id, 0, 0, now + remaining, &local) < 0
      || (timeout_ms
          && sbx_store_sandbox_set_expiry (sbx_core.store, sb->id, now + remaining,
                                           (int64_t) timeout_ms, &local)
                 < 0))
    {
      /* It runs: the record catching up matters only for a restart. */
      sbx_warn ("sandbox %s: recording its resume: %s", sb->id, local->msg);
      sbx_error_free (local);
    }

  pthread_mutex_lock (&sbx_core.lock);
  shift = now_mono - sb->paused_mono;
  sb->paused = 0;
  sb->remaining_ms = 0;
  sb->expires_ms = now + remaining;
  sb->expires_mono = now_mono + remaining;
  if (timeout_ms)
    sb->timeout_ms = timeout_ms;
  /* Commands' own timeouts stood still too. */
  for (p = sb->procs; p; p = p->next)
    if (p->deadline_mono && shift > 0)
      p->deadline_mono += shift;
  end_transition_locked (sb);
  pthread_mutex_unlock (&sbx_core.lock);
  sbx__wake_loop ();
  sbx_audit_lifecycle ("resumed", sb->id, sb->tenant, NULL);
  if (hibernated == SBX_HIBERNATED_FILESYSTEM && sbx__files_woken (sb, err) < 0)
    return -1;
  return 0;
}

int
sbx_sandbox_resume (struct sbx_sandbox *sb, uint64_t timeout_ms, sbx_error_t **err)
{
  return resume_sandbox (sb, timeout_ms, 0, err);
}

int
sbx_sandbox_is_paused (struct sbx_sandbox *sb)
{
  int paused;

  pthread_mutex_lock (&sbx_core.lock);
  paused = sb->paused || sb->pause_queued;
  pthread_mutex_unlock (&sbx_core.lock);
  return paused;
}

int
sbx_sandbox_awake (struct sbx_sandbox *sb, sbx_error_t **err)
{
  int auto_resume, files_only;

  pthread_mutex_lock (&sbx_core.lock);
  /* A pooled sandbox is never paused: the pool starts a template's server
     in it (core/code.c). */
  if (sb->state == SBX_SB_POOLED)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return 0;
    }
  if (settle_locked (sb, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  if (!sb->paused && !sb->pause_queued)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return 0;
    }
  /* One paused without its memory boots on resume: its owner resumes it,
     not whatever request reaches it (E2B's rule, docs/api.md). */
  auto_resume = (sb->lifecycle & SBX_LIFECYCLE_AUTO_RESUME) != 0
                && sb->hibernated != SBX_HIBERNATED_FILESYSTEM;
  files_only = sb->hibernated == SBX_HIBERNATED_FILESYSTEM;
  pthread_mutex_unlock (&sbx_core.lock);
  if (!auto_resume)
    return sbx_err (err, SBX_E_CONFLICT,
                    files_only ? "sandbox `%s` is paused without its memory (resume it first)"
                               : "sandbox `%s` is paused (resume it first)",
                    sb->id);
  /* A pause the janitor has yet to make: let it happen first, then
     resume (a request must not race it). */
  pthread_mutex_lock (&sbx_core.lock);
  while (sb->pause_queued && sb->state == SBX_SB_RUNNING)
    pthread_cond_wait (&sb->cond, &sbx_core.lock);
  pthread_mutex_unlock (&sbx_core.lock);
  return resume_sandbox (sb, 0, 1, err);
}

/* ---- fork's hold on its source (core/fork.c) ----------------------------- */

int
sbx__transition_begin (struct sbx_sandbox *sb, int *was_paused, sbx_error_t **err)
{
  pthread_mutex_lock (&sbx_core.lock);
  if (settle_locked (sb, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  sb->transition = 1;
  *was_paused = sb->paused;
  pthread_mutex_unlock (&sbx_core.lock);
  return 0;
}

void
sbx__transition_end (struct sbx_sandbox *sb)
{
  pthread_mutex_lock (&sbx_core.lock);
  end_transition_locked (sb);
  pthread_mutex_unlock (&sbx_core.lock);
  sbx__wake_loop ();
}
