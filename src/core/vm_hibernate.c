/* sbx: hibernation of a VM: a pause to disk (docs/vm.md "Fork and
 * hibernate").
 *
 * A frozen pause keeps a VM's memory on the host (QEMU's RSS: the guest's
 * touched RAM, its disk included). Hibernating saves that memory through
 * QEMU's migration into a file of the daemon's own in the store
 * (".sbx-hib-<id>", iso/snapstore.h: only the privileged parent writes
 * it, no client can name it), ends QEMU and its relay (the cgroup goes
 * too: the host memory is freed), and keeps the sandbox in the registry,
 * paused, with its lifetime clock standing. The resume is a restore of
 * that file into a new box for the same sandbox id, slot and uid: the box
 * (relay pidfd, control socket) is replaced under the core's lock, while
 * the sandbox is held in a transition (no other request uses it). The
 * file goes once QEMU has read it.
 *
 * The commands that ran keep running in the guest, but their API streams
 * end at the hibernation (as for a restore, the relay's command ids are
 * xor'ed with a new key, so the old ones match nothing). A hibernated VM
 * survives a restart of the daemon: its record says so (the store's
 * `hibernated`), the parent's start keeps its file, and the next daemon
 * takes the record back as hibernated (core/adopt.c); its resume is the
 * same restore.
 */
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/internal.h"
#include "core/template.h"
#include "iso/copy.h"
#include "iso/snapstore.h"
#include "priv/proto.h"
#include "util/log.h"

#define HIBERNATED_REASON                                                                      \
  "the sandbox hibernated: the command runs on in the guest, but its output and exit are "     \
  "no longer followed"

static void
image_name (const char *id, char *out, size_t cap)
{
  snprintf (out, cap, SBX_SNAPSHOT_HIBERNATE_PREFIX "%s", id);
}

int
sbx_sandbox_hibernate (struct sbx_sandbox *sb, sbx_error_t **err)
{
  struct sbx_iso_box old;
  struct sbx_copy_result res;
  char name[SBX_SNAPSHOT_NAME_MAX + 1];
  sbx_error_t *local = NULL;
  int64_t remaining, expires_ms;
  int was_paused = 0;

  if (sb->isolation != SBX_ISOLATION_VM)
    return sbx_err (err, SBX_E_NOT_IMPLEMENTED,
                    "not supported for isolation namespace: a pause to disk needs a VM's memory "
                    "image (a plain pause freezes the sandbox in memory)");
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
  remaining = sb->expires_mono - sbx_mono_ms ();
  if (remaining < 0)
    remaining = 0;
  expires_ms = sb->expires_ms;
  pthread_mutex_unlock (&sbx_core.lock);
  image_name (sb->id, name, sizeof name);

  /* The vCPUs stop and stay stopped when the save worked; on failure the
     guest runs on and nothing changed. */
  if (sbx_host_snapshot (SBX_PRIV_SNAP_HIBERNATE, sb->slot, sb->tenant, name, &res, err) < 0)
    {
      sbx__transition_end (sb);
      return sbx_err_wrap (err, "hibernating sandbox `%s`", sb->id);
    }

  /* Its box is taken out under the lock: from here on nothing reaches the
     old relay, and its death (which follows) is not the sandbox's. */
  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      /* Killed during the save: the kill ended its VM; the file goes. */
      pthread_mutex_unlock (&sbx_core.lock);
      sbx__vm_forget_hibernated (sb->tenant, sb->id);
      sbx__transition_end (sb);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  sbx__watch_del (&sb->ctl_watch);
  sbx__watch_del (&sb->pidfd_watch);
  sbx__process_kill_all (sb, HIBERNATED_REASON);
  old = sb->box;
  sbx_iso_box_init (&sb->box);
  sb->box.uid_base = old.uid_base;
  sb->hibernated = SBX_HIBERNATED_MEMORY;
  pthread_mutex_unlock (&sbx_core.lock);
  /* QEMU, the relay and the cgroup end; the parent frees its slot (ours
     stays taken: the resume restores into it). */
  if (sbx_host_destroy (sb->slot, &old, &local) < 0)
    {
      sbx_warn ("sandbox %s: ending its VM for a hibernation: %s", sb->id, local->msg);
      sbx_error_free (local);
      local = NULL;
    }
  if (sbx_store_sandbox_set_hibernated (sbx_core.store, sb->id, SBX_HIBERNATED_MEMORY, remaining, expires_ms, &local)
      < 0)
    {
      /* Only a restart reads it: the record then says running, its relay
         is gone, and the next daemon ends it (and removes the file). */
      sbx_warn ("sandbox %s: recording its hibernation: %s", sb->id, local->msg);
      sbx_error_free (local);
    }

  pthread_mutex_lock (&sbx_core.lock);
  sb->paused = 1;
  sb->remaining_ms = remaining;
  sb->paused_mono = sbx_mono_ms ();
  pthread_mutex_unlock (&sbx_core.lock);
  sbx__transition_end (sb);
  sbx_audit_lifecycle ("hibernated", sb->id, sb->tenant, NULL);
  sbx_info ("sandbox %s hibernated: %llu bytes of memory saved, its VM ended", sb->id,
            (unsigned long long) res.bytes);
  return 0;
}

/* The resume of a hibernated VM (core/lifecycle.c, in its transition):
   a new box for the same slot, restored from the file. */
int
sbx__vm_wake (struct sbx_sandbox *sb, sbx_error_t **err)
{
  const struct sbx_template *t = sbx_template_find (sb->template_name);
  struct sbx_host_create req;
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
  req.isolation = SBX_ISOLATION_VM;
  req.snapshot_tenant = sb->tenant;
  req.snapshot = name;
  /* A restore that fails leaves it hibernated, its file kept. */
  if (sbx_host_create (&req, &box, &local) < 0)
    {
      /* Its file is gone (or the root image it names): the sandbox is
         there but cannot wake, which a 404 would not say. */
      if (local->kind == SBX_E_NOT_FOUND)
        {
          sbx_error_free (local);
          return sbx_err (err, SBX_E_CONFLICT,
                          "resuming hibernated sandbox `%s`: its saved memory is gone (it can "
                          "only be killed)",
                          sb->id);
        }
      sbx_error_move (err, &local);
      return sbx_err_wrap (err, "resuming hibernated sandbox `%s`", sb->id);
    }

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      /* Killed meanwhile (the kill removed the file): this VM goes too. */
      pthread_mutex_unlock (&sbx_core.lock);
      sbx_host_destroy (sb->slot, &box, NULL);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  sb->box = box;
  sb->hibernated = 0;
  sb->ctl_watch = sbx__watch_add (sb->box.ctl, EPOLLIN, SBX_W_CTL, sb, 0);
  sb->pidfd_watch = sbx__watch_add (sb->box.pidfd, EPOLLIN, SBX_W_PIDFD, sb, 0);
  if (!sb->ctl_watch || !sb->pidfd_watch)
    /* Unwatched, its death would go unnoticed: it ends now. */
    sbx__queue_kill (sb, "sandbox init failed");
  pthread_mutex_unlock (&sbx_core.lock);
  if (sbx_host_snapshot (SBX_PRIV_SNAP_REMOVE, 0, sb->tenant, name, NULL, &local) < 0)
    {
      sbx_warn ("sandbox %s: removing its hibernation file: %s", sb->id, local->msg);
      sbx_error_free (local);
    }
  sbx_audit_lifecycle ("woken", sb->id, sb->tenant, NULL);
  return 0;
}

/* The kill of a hibernated VM: no VM to end, its file to remove (none:
   nothing to say). */
void
sbx__vm_forget_hibernated (const char *tenant, const char *id)
{
  char name[SBX_SNAPSHOT_NAME_MAX + 1];
  sbx_error_t *local = NULL;

  image_name (id, name, sizeof name);
  if (sbx_host_snapshot (SBX_PRIV_SNAP_REMOVE, 0, tenant, name, NULL, &local) < 0
      && local->kind == SBX_E_NOT_FOUND)
    sbx_error_free (local);
  else if (local)
    {
      sbx_warn ("sandbox %s: removing its hibernation file: %s", id, local->msg);
      sbx_error_free (local);
    }
}
