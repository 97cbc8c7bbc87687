/* sbx: a pause that keeps a namespace sandbox's files and not its memory
 * (E2B's pause({keepMemory: false}) and autoPauseMemory false; docs/api.md
 * "Pause and resume").
 *
 * A frozen pause keeps every process and its memory resident. This one
 * frees it: the sandbox is frozen, its disk (/home/user, /tmp, /dev/shm:
 * what a snapshot carries) is saved into the store under the daemon's own
 * name ".sbx-hib-<id>" (iso/snapstore.h: no client can name it), and then
 * its processes, namespaces and cgroup end. The sandbox stays in the
 * registry, paused, its lifetime clock standing, its slot (uid range),
 * tokens, limits and egress policy its own. The resume boots it again: a
 * new init in the same slot, from the template, with the saved files
 * copied into its disk; a new boot id (security.md 2.2), no process of
 * before, and the code interpreter started again. What root wrote outside
 * those three directories (the writable "/") is not kept, as a snapshot
 * does not keep it.
 *
 * Crash safety: the record says hibernated (SBX_HIBERNATED_FILESYSTEM)
 * once the save is complete, before the old box goes; a daemon that stops
 * before that finds a running or frozen sandbox, as before the pause, and
 * removes the unfinished file at its next pause (or the kill does); one
 * that stops after finds it paused with its files, and the old box's
 * cgroup, which no record names, is ended at the next start. The boot
 * records the new init (set_init) before the file goes, so a restart in
 * between adopts a paused sandbox whose files are in it.
 */
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/code.h"
#include "core/internal.h"
#include "core/template.h"
#include "iso/copy.h"
#include "iso/snapstore.h"
#include "priv/proto.h"
#include "util/log.h"

#define ENDED_REASON "the sandbox was paused without its memory: its processes ended"

static void
image_name (const char *id, char *out, size_t cap)
{
  snprintf (out, cap, SBX_SNAPSHOT_HIBERNATE_PREFIX "%s", id);
}

static void
remove_image (const char *tenant, const char *name, int quiet_if_missing)
{
  sbx_error_t *local = NULL;

  if (sbx_host_snapshot (SBX_PRIV_SNAP_REMOVE, 0, tenant, name, NULL, &local) == 0)
    return;
  if (!(quiet_if_missing && local->kind == SBX_E_NOT_FOUND))
    sbx_warn ("removing %s: %s", name, local->msg);
  sbx_error_free (local);
}

int
sbx_sandbox_pause_files (struct sbx_sandbox *sb, int64_t remaining_ms, sbx_error_t **err)
{
  struct sbx_iso_box old;
  struct sbx_copy_result res;
  char name[SBX_SNAPSHOT_NAME_MAX + 1];
  sbx_error_t *local = NULL;
  int64_t expires_ms, now_mono;
  int was_paused = 0;

  if (sb->isolation != SBX_ISOLATION_NS)
    return sbx_err (err, SBX_E_NOT_IMPLEMENTED,
                    "not supported for isolation vm: a VM's disk lives in its memory (a pause "
                    "to disk keeps both)");
  if (sbx__transition_begin (sb, &was_paused, err) < 0)
    return -1;
  if (was_paused)
    {
      sbx__transition_end (sb);
      return sbx_err (err, SBX_E_CONFLICT, "sandbox `%s` is already paused", sb->id);
    }
  pthread_mutex_lock (&sbx_core.lock);
  /* A pause the janitor was to make is this one. */
  sb->pause_queued = 0;
  now_mono = sbx_mono_ms ();
  if (remaining_ms < 0)
    remaining_ms = sb->expires_mono > now_mono ? sb->expires_mono - now_mono : 0;
  expires_ms = sb->expires_ms;
  pthread_mutex_unlock (&sbx_core.lock);
  image_name (sb->id, name, sizeof name);
  /* One a daemon left when it stopped during an earlier pause. */
  remove_image (sb->tenant, name, 1);

  /* Frozen, the files hold still while they are copied; on failure the
     sandbox is thawed and nothing changed. */
  if (sbx_host_freeze (sb->slot, 1, err) < 0)
    {
      sbx__transition_end (sb);
      return sbx_err_wrap (err, "pausing sandbox `%s`", sb->id);
    }
  if (sbx_host_snapshot (SBX_PRIV_SNAP_SAVE, sb->slot, sb->tenant, name, &res, err) < 0)
    {
      sbx_host_freeze (sb->slot, 0, NULL);
      remove_image (sb->tenant, name, 1);
      sbx__transition_end (sb);
      if (*err && (*err)->kind == SBX_E_TOO_LARGE)
        /* The copier stops at what its disk holds: a sandbox on a
           snapshot's layer sees the snapshot's files too. */
        return sbx_err_wrap (err,
                             "sandbox `%s` cannot be paused without its memory: its files "
                             "would not fit in its disk when it boots again (pause it with its "
                             "memory, or make it with a larger `disk`)",
                             sb->id);
      return sbx_err_wrap (err, "saving the files of sandbox `%s`", sb->id);
    }

  /* On a snapshot's layer, the save holds the layer's files too, which
     its own disk never had to: they must fit in it once copied back. */
  if (sb->snapshot[0] != '\0' && !sb->snapshot_copied
      && res.bytes > sbx__effective_disk (&sb->limits))
    {
      sbx_host_freeze (sb->slot, 0, NULL);
      remove_image (sb->tenant, name, 1);
      sbx__transition_end (sb);
      return sbx_err (err, SBX_E_CONFLICT,
                      "sandbox `%s` cannot be paused without its memory: its files with its "
                      "snapshot's (%llu bytes) would not fit in its disk when it boots again "
                      "(pause it with its memory, or make it with a larger `disk`)",
                      sb->id, (unsigned long long) res.bytes);
    }
  /* The record first: from here on a restart takes it back paused, its
     files in the store (the old box, if still there, is a cgroup no
     record names: the next daemon's start ends it). */
  if (sbx_store_sandbox_set_hibernated (sbx_core.store, sb->id, SBX_HIBERNATED_FILESYSTEM,
                                        remaining_ms, expires_ms, err)
      < 0)
    {
      sbx_host_freeze (sb->slot, 0, NULL);
      remove_image (sb->tenant, name, 1);
      sbx__transition_end (sb);
      return sbx_err_wrap (err, "recording the pause of sandbox `%s`", sb->id);
    }

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      /* Killed during the save (the kill ended its box and its record):
         the file goes. */
      pthread_mutex_unlock (&sbx_core.lock);
      remove_image (sb->tenant, name, 1);
      sbx__transition_end (sb);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  /* Out of the loop's sight first: the death that follows is the pause's,
     not the sandbox's. */
  sbx__watch_del (&sb->ctl_watch);
  sbx__watch_del (&sb->pidfd_watch);
  sbx__process_kill_all (sb, ENDED_REASON);
  old = sb->box;
  sbx_iso_box_init (&sb->box);
  sb->box.uid_base = old.uid_base;
  sb->hibernated = SBX_HIBERNATED_FILESYSTEM;
  pthread_mutex_unlock (&sbx_core.lock);
  /* Every process, the namespaces and the cgroup end: the memory is
     freed. The parent frees its slot; ours stays taken for the boot. */
  if (sbx_host_destroy (sb->slot, &old, &local) < 0)
    {
      sbx_warn ("sandbox %s: ending it for a pause without memory: %s", sb->id, local->msg);
      sbx_error_free (local);
      local = NULL;
    }

  pthread_mutex_lock (&sbx_core.lock);
  sb->paused = 1;
  sb->remaining_ms = remaining_ms;
  sb->paused_mono = sbx_mono_ms ();
  pthread_mutex_unlock (&sbx_core.lock);
  sbx__transition_end (sb);
  sbx_audit_lifecycle ("paused", sb->id, sb->tenant, "without its memory: its files kept");
  sbx_info ("sandbox %s paused without its memory: %llu bytes of files kept, its processes "
            "ended",
            sb->id, (unsigned long long) res.bytes);
  return 0;
}

/* The resume's boot (core/lifecycle.c, in its transition): a new box in
   the same slot from the template, the saved files copied into it. */
int
sbx__files_wake (struct sbx_sandbox *sb, int64_t remaining_ms, sbx_error_t **err)
{
  const struct sbx_template *t = sbx_template_find (sb->template_name);
  struct sbx_host_create req;
  struct sbx_copy_result res;
  struct sbx_iso_box box;
  char name[SBX_SNAPSHOT_NAME_MAX + 1];
  sbx_error_t *local = NULL;

  image_name (sb->id, name, sizeof name);
  memset (&req, 0, sizeof req);
  req.slot = sb->slot;
  req.id = sb->id;
  req.template_name = t ? t->name : sb->template_name;
  req.limits.memory_bytes = sb->limits.memory_bytes;
  req.limits.cpu_milli = sb->limits.cpu_milli;
  req.limits.pids = sb->limits.pids;
  req.disk_bytes = sbx__effective_disk (&sb->limits);
  req.isolation = SBX_ISOLATION_NS;
  /* Whatever fails leaves it as it was: paused, its file kept. */
  if (sbx_host_create (&req, &box, err) < 0)
    return sbx_err_wrap (err, "booting sandbox `%s` again", sb->id);
  if (sbx_host_snapshot (SBX_PRIV_SNAP_LOAD, sb->slot, sb->tenant, name, &res, &local) < 0
      || sbx_iso_keep (&box, sbx_now_ms () + remaining_ms + SBX_KEEP_GRACE_MS, &local) < 0)
    {
      sbx_host_destroy (sb->slot, &box, NULL);
      if (local->kind == SBX_E_NOT_FOUND)
        {
          /* Its file is gone: the sandbox is there but cannot come back,
             which a 404 would not say. */
          sbx_error_free (local);
          return sbx_err (err, SBX_E_CONFLICT,
                          "resuming sandbox `%s`: the files its pause kept are gone (it can only "
                          "be killed)",
                          sb->id);
        }
      sbx_error_move (err, &local);
      return sbx_err_wrap (err, "resuming sandbox `%s`: copying its files back", sb->id);
    }

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      /* Killed meanwhile (the kill removed the file): this box goes too. */
      pthread_mutex_unlock (&sbx_core.lock);
      sbx_host_destroy (sb->slot, &box, NULL);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  sb->box = box;
  sb->hibernated = 0;
  /* A new cgroup: its counters start again. */
  sb->oom_seen = 0;
  sb->limit_hits_seen = 0;
  sb->usage_ms = 0;
  sb->ctl_watch = sbx__watch_add (sb->box.ctl, EPOLLIN, SBX_W_CTL, sb, 0);
  sb->pidfd_watch = sbx__watch_add (sb->box.pidfd, EPOLLIN, SBX_W_PIDFD, sb, 0);
  if (!sb->ctl_watch || !sb->pidfd_watch)
    /* Unwatched, its death would go unnoticed: it ends now. */
    sbx__queue_kill (sb, "sandbox init failed");
  pthread_mutex_unlock (&sbx_core.lock);
  /* The new init in the record before the file goes: a restart from here
     on adopts it (paused until the resume's record says running). */
  if (sbx_store_sandbox_set_init (sbx_core.store, sb->id, box.pid, &local) == 0)
    remove_image (sb->tenant, name, 0);
  else if (local->kind == SBX_E_NOT_FOUND)
    {
      /* Killed meanwhile (its record ended): nobody needs the file. */
      sbx_error_free (local);
      remove_image (sb->tenant, name, 1);
    }
  else
    {
      /* The record still says hibernated, which needs the file for a
         restart; the kill removes it (image_left). */
      sbx_warn ("sandbox %s: recording its new init: %s", sb->id, local->msg);
      sbx_error_free (local);
      pthread_mutex_lock (&sbx_core.lock);
      sb->image_left = 1;
      pthread_mutex_unlock (&sbx_core.lock);
    }
  sbx_audit_lifecycle ("booted", sb->id, sb->tenant, "its files copied back after a pause");
  sbx_info ("sandbox %s booted again: %llu bytes of files copied back", sb->id,
            (unsigned long long) res.bytes);
  return 0;
}

/* After the resume (out of its transition: the server's start connects
   through the sandbox, which waits for transitions to end). */
int
sbx__files_woken (struct sbx_sandbox *sb, sbx_error_t **err)
{
  int has_env;

  if (!sbx__is_code (sb))
    return 0;
  pthread_mutex_lock (&sbx_core.lock);
  has_env = json_object_size (sb->env) > 0;
  pthread_mutex_unlock (&sbx_core.lock);
  if (sbx__code_start (sb, err) < 0 || (has_env && sbx__code_set_env (sb, err) < 0))
    {
      sbx_err_wrap (err, "starting the code interpreter of sandbox `%s` again", sb->id);
      sbx_sandbox_kill (sb, "its code interpreter did not start again after its pause", NULL);
      return -1;
    }
  return 0;
}
