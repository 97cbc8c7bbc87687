/* sbx: the pool of pre-built sandboxes. A create takes one instead of
 * building (the build then happens here, off the request's path). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/code.h"
#include "core/internal.h"
#include "core/template.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/parse.h"

/* ---- the pool ---------------------------------------------------------- */

/* Pooled VM boots that may fail in a row before the VM pool waits for the
   next VM create. */
#define SBX_VM_POOL_TRIES 3

enum pool_kind
{
  POOL_NONE,
  POOL_BASE,
  POOL_CODE,
  POOL_VM,
};

/* What to build next, under the lock. Base first: most creates want it.
   A code-interpreter sandbox once one was asked for (its server costs
   ~100 MB and seconds of CPU), a VM once one was (a boot costs seconds of
   CPU, and an idle VM ~240 MiB and a few % of a CPU under TCG). `--pool 0`
   keeps none of them. */
static enum pool_kind
pool_next (void)
{
  unsigned base = sbx_core.pool_count - sbx_core.code_pooled - sbx_core.vm_pooled;

  if (sbx_core.cfg.pool_size == 0
      || sbx_core.running + sbx_core.pool_count >= sbx_core.cfg.max_sandboxes)
    return POOL_NONE;
  if (base < sbx_core.cfg.pool_size)
    return POOL_BASE;
  if (sbx_core.code_wanted && sbx_core.code_pooled < SBX_CODE_POOL)
    return POOL_CODE;
  if (sbx_core.vm_wanted && sbx_core.vm_pooled < SBX_VM_POOL)
    return POOL_VM;
  return POOL_NONE;
}

void
sbx__pool_uncount (const struct sbx_sandbox *sb)
{
  sbx_core.pool_count--;
  if (sb->isolation == SBX_ISOLATION_VM)
    sbx_core.vm_pooled--;
  else if (sbx__is_code (sb))
    sbx_core.code_pooled--;
}

void *
sbx__pool_main (void *arg)
{
  (void) arg;
  /* Building ahead is background work: the daemon's side of it, on this
     thread, yields to requests like the sandbox's side does (the zygote
     starts pool builds at low priority). */
  setpriority (PRIO_PROCESS, (id_t) gettid (), 10);
  pthread_mutex_lock (&sbx_core.lock);
  while (!sbx_core.stopping)
    {
      struct sbx_sandbox *sb;
      sbx_error_t *err = NULL;
      enum pool_kind kind = pool_next ();

      if (kind == POOL_NONE)
        {
          pthread_cond_wait (&sbx_core.pool_cond, &sbx_core.lock);
          continue;
        }
      sbx_core.pool_building++;
      pthread_mutex_unlock (&sbx_core.lock);
      if (kind == POOL_VM)
        sb = sbx__build_vm (&sbx_core.cfg.defaults, 1, &err);
      else
        sb = sbx__build (&sbx_core.cfg.defaults, 1, kind == POOL_CODE ? SBX_CODE_TEMPLATE : "base",
                         &err);
      if (sb != NULL && kind == POOL_CODE && sbx__code_start (sb, &err) < 0)
        {
          sbx__discard (sb);
          sb = NULL;
        }
      sbx_counters_pool_built (sb != NULL);
      pthread_mutex_lock (&sbx_core.lock);
      sbx_core.pool_building--;
      if (sb == NULL)
        {
          struct timespec ts;
          long delay_ms = 1000;
          sbx_warn ("building a pooled sandbox: %s", err->msg);
          sbx_error_free (err);
          /* A boot that fails once (QEMU too slow to start on a loaded
             host) is tried again, 1, then 2 s later; after the third
             failure in a row there is no retry loop on a host that cannot
             boot one: the next VM create asks again. */
          if (kind == POOL_VM)
            {
              delay_ms <<= sbx_core.vm_failures;
              if (++sbx_core.vm_failures >= SBX_VM_POOL_TRIES)
                {
                  sbx_core.vm_wanted = 0;
                  sbx_core.vm_failures = 0;
                }
            }
          sbx__abstime (&ts, delay_ms);
          pthread_cond_timedwait (&sbx_core.pool_cond, &sbx_core.lock, &ts);
          continue;
        }
      sb->refs--; /* build's caller reference; the list keeps the other */
      if (sbx_core.stopping || sb->kill_queued)
        {
          sb->refs++;
          pthread_mutex_unlock (&sbx_core.lock);
          sbx__discard (sb);
          pthread_mutex_lock (&sbx_core.lock);
          continue;
        }
      sb->next = sbx_core.pool;
      sbx_core.pool = sb;
      sb->in_pool = 1;
      sbx_core.pool_count++;
      if (kind == POOL_CODE)
        sbx_core.code_pooled++;
      if (kind == POOL_VM)
        {
          sbx_core.vm_pooled++;
          sbx_core.vm_failures = 0;
        }
    }
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;
}
