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
      unsigned base = sbx_core.pool_count - sbx_core.code_pooled;
      /* Base first: most creates want it. A code-interpreter sandbox once
         one was asked for (its server costs ~100 MB and seconds of CPU). */
      int code = base >= sbx_core.cfg.pool_size;

      if ((code
           && (!sbx_core.code_wanted || sbx_core.cfg.pool_size == 0
               || sbx_core.code_pooled >= SBX_CODE_POOL))
          || sbx_core.running + sbx_core.pool_count >= sbx_core.cfg.max_sandboxes)
        {
          pthread_cond_wait (&sbx_core.pool_cond, &sbx_core.lock);
          continue;
        }
      sbx_core.pool_building++;
      pthread_mutex_unlock (&sbx_core.lock);
      sb = sbx__build (&sbx_core.cfg.defaults, 1, code ? SBX_CODE_TEMPLATE : "base", &err);
      if (sb != NULL && code && sbx__code_start (sb, &err) < 0)
        {
          sbx__discard (sb);
          sb = NULL;
        }
      pthread_mutex_lock (&sbx_core.lock);
      sbx_core.pool_building--;
      if (sb == NULL)
        {
          struct timespec ts;
          sbx_warn ("building a pooled sandbox: %s", err->msg);
          sbx_error_free (err);
          sbx__abstime (&ts, 1000);
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
      if (code)
        sbx_core.code_pooled++;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;
}
