/* sbx: what ends sandboxes off the HTTP path: lifetimes that expire and
 * inits that die or break the protocol are noticed by the event loop and
 * handed to the janitor thread, which kills them (killing waits for the
 * kernel, which the loop must never do). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/template.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/parse.h"

/* Room in the janitor's queue for one more; lock held. */
static int
janitor_push (struct sbx_sandbox *sb)
{
  if (sbx_core.janitor_len == sbx_core.janitor_cap)
    {
      size_t cap = sbx_core.janitor_cap ? sbx_core.janitor_cap * 2 : 16;
      struct sbx_sandbox **q = realloc (sbx_core.janitor_q, cap * sizeof *q);
      if (q == NULL)
        return -1;
      sbx_core.janitor_q = q;
      sbx_core.janitor_cap = cap;
    }
  sb->refs++;
  sbx_core.janitor_q[sbx_core.janitor_len++] = sb;
  pthread_cond_signal (&sbx_core.janitor_cond);
  return 0;
}

/* Called by the loop (lock held): its lifetime ended and it is to pause
   (on_timeout "pause"); the janitor pauses it (a freeze waits for the
   kernel). */
void
sbx__queue_pause (struct sbx_sandbox *sb)
{
  if (sb->pause_queued || sb->paused || sb->transition || sb->kill_queued
      || sb->state != SBX_SB_RUNNING)
    return;
  sb->pause_queued = 1;
  if (janitor_push (sb) < 0)
    {
      sb->pause_queued = 0;
      sbx__queue_kill (sb, "sandbox expired");
    }
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
        {
          /* Not expected: the queue has room for every sandbox from the
             start. Its lifetime still ends it (and queues it again). */
          sbx_error ("cannot queue the kill of sandbox %s: out of memory", sb->id);
          sb->kill_queued = 0;
          return;
        }
      sbx_core.janitor_q = q;
      sbx_core.janitor_cap = cap;
    }
  sb->refs++;
  sbx_core.janitor_q[sbx_core.janitor_len++] = sb;
  pthread_cond_signal (&sbx_core.janitor_cond);
}

#define INIT_DIED "sandbox init died"

/* A sandbox whose init died on its own: say how in its end reason
   ("sandbox init died (killed by SIGKILL)"), which its commands' results
   and its record carry. Called by the janitor, which may wait. */
static void
describe_init_death (struct sbx_sandbox *sb, char *reason, size_t cap)
{
  const char *name;
  int wstatus = 0;

  /* Init is the privileged parent's child: it knows (waitid WNOWAIT). */
  if (sbx_host_init_status (sb->slot, &wstatus) == 1)
    {
      if (WIFEXITED (wstatus))
        snprintf (reason, cap, INIT_DIED " (exit status %d)", WEXITSTATUS (wstatus));
      else if ((name = sbx__signal_name (WTERMSIG (wstatus))) != NULL)
        snprintf (reason, cap, INIT_DIED " (killed by %s)", name);
      else
        snprintf (reason, cap, INIT_DIED " (killed by signal %d)", WTERMSIG (wstatus));
    }
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
      if (sb->pause_queued)
        {
          /* Its lifetime ended and it is to pause (core/lifecycle.c). */
          pthread_mutex_unlock (&sbx_core.lock);
          sbx__sandbox_pause_expired (sb);
          pthread_mutex_lock (&sbx_core.lock);
          sbx__sandbox_unref_locked (sb);
          continue;
        }
      snprintf (reason, sizeof reason, "%s", sb->end_reason);
      pthread_mutex_unlock (&sbx_core.lock);
      if (strcmp (reason, INIT_DIED) == 0)
        describe_init_death (sb, reason, sizeof reason);
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
  /* A paused sandbox's clock stands (and one in a pause or resume has
     its expiry set when that ends). */
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (sb->state == SBX_SB_RUNNING && !sb->kill_queued && !sb->paused && !sb->transition
        && !sb->pause_queued && (next == 0 || sb->expires_mono < next))
      next = sb->expires_mono;
  return next;
}

void
sbx__expire_sandboxes (int64_t now)
{
  struct sbx_sandbox *sb;

  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (sb->state == SBX_SB_RUNNING && !sb->kill_queued && !sb->paused && !sb->transition
        && !sb->pause_queued && sb->expires_mono <= now)
      {
        if (sb->lifecycle & SBX_LIFECYCLE_PAUSE_ON_TIMEOUT)
          sbx__queue_pause (sb);
        else
          sbx__queue_kill (sb, "sandbox expired");
      }
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
      int r = sbx_iso_next_event (&sb->box, sb->isolation == SBX_ISOLATION_VM, &ev, &err);
      if (r == 0)
        return;
      if (r < 0)
        {
          /* The socket closing is init exiting (or being killed): the
             same death its pidfd reports, under the same reason. */
          int died = err->kind == SBX_E_UNAVAILABLE;
          sbx_warn ("sandbox %s: %s", sb->id, err->msg);
          sbx_error_free (err);
          sbx__watch_del (&sb->ctl_watch);
          sbx__queue_kill (sb, died ? INIT_DIED : "sandbox init failed");
          return;
        }
      sbx__process_on_event (sb, &ev);
      /* A master or a connected socket nobody took (its process is gone,
         its connect given up). */
      if (ev.fd >= 0)
        close (ev.fd);
    }
}

void
sbx__handle_init_death (struct sbx_sandbox *sb)
{
  sbx__watch_del (&sb->pidfd_watch);
  sbx__queue_kill (sb, INIT_DIED);
}

