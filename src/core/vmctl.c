/* sbx: pause and resume of a microVM sandbox (docs/vm.md): the relay stops
 * or continues the guest's vCPUs (QMP stop / cont) and answers VM_CTL_DONE,
 * which the loop hands to the waiting request here. One at a time per
 * sandbox; a request that gives up leaves the answer to nobody. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/internal.h"

#define VM_CTL_WAIT_MS 10000

int
sbx_sandbox_vm_pause (struct sbx_sandbox *sb, int pause, sbx_error_t **err)
{
  struct timespec ts;
  uint64_t req;
  int rc = 0;

  if (sb->isolation != SBX_ISOLATION_VM)
    return sbx_err (err, SBX_E_NOT_IMPLEMENTED,
                    "pause and resume are supported for isolation vm only");
  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  if (sb->vm_ctl_req != 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_CONFLICT, "a pause or resume of %s is in progress", sb->id);
    }
  if (sb->vm_paused == pause)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return 0; /* already so */
    }
  req = ++sb->next_req_id;
  if (sbx_iso_vm_ctl (&sb->box, req, pause ? SBX_VM_PAUSE : SBX_VM_RESUME, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  sb->vm_ctl_req = req;
  sb->vm_ctl_done = 0;
  sbx__abstime (&ts, VM_CTL_WAIT_MS);
  while (!sb->vm_ctl_done && sb->state == SBX_SB_RUNNING)
    if (pthread_cond_timedwait (&sb->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
      break;
  if (!sb->vm_ctl_done)
    rc = sbx_err (err, SBX_E_UNAVAILABLE, "the VM %s did not answer the %s", sb->id,
                  pause ? "pause" : "resume");
  else if (sb->vm_ctl_errno != 0)
    rc = sbx_err (err, SBX_E_SYSTEM, "the VM %s could not %s: %s", sb->id,
                  pause ? "pause" : "resume", strerror (sb->vm_ctl_errno));
  else
    sb->vm_paused = pause;
  sb->vm_ctl_req = 0;
  pthread_mutex_unlock (&sbx_core.lock);
  return rc;
}

/* From the loop, with the core lock held. */
void
sbx__vmctl_on_event (struct sbx_sandbox *sb, const struct sbx_iso_event *ev)
{
  if (sb->vm_ctl_req == 0 || ev->req_id != sb->vm_ctl_req)
    return; /* nobody waits any more */
  sb->vm_ctl_done = 1;
  sb->vm_ctl_errno = ev->sys_errno;
  pthread_cond_broadcast (&sb->cond);
}
