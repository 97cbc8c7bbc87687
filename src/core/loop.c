/* sbx: the event loop. One thread, one epoll set; every event is handled
 * under the core lock, and handlers only do non-blocking work: read what a
 * pipe has, write what stdin can take, parse one message from init. Slow
 * things (killing a sandbox) are queued for the janitor thread.
 *
 * epoll carries a handle (generation << 32 | slot + 1), never a pointer:
 * an event already returned by epoll_wait for an object that another
 * thread has since released resolves to nothing instead of freed memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/internal.h"
#include "util/log.h"

#define MAX_EVENTS 64

static struct sbx_loop_watch *
resolve (uint64_t handle)
{
  uint32_t slot = (uint32_t) (handle & 0xffffffffu);
  uint32_t gen = (uint32_t) (handle >> 32);

  if (slot == 0 || slot > sbx_core.nwatches)
    return NULL;
  if (sbx_core.watches[slot - 1].gen != gen || sbx_core.watches[slot - 1].kind == SBX_W_FREE)
    return NULL;
  return &sbx_core.watches[slot - 1];
}

uint64_t
sbx__watch_add (int fd, uint32_t events, enum sbx_watch_kind kind, void *obj, int idx)
{
  struct epoll_event ev;
  struct sbx_loop_watch *w;
  uint32_t slot;
  uint64_t handle;

  if (sbx_core.free_watch)
    {
      slot = sbx_core.free_watch;
      sbx_core.free_watch = sbx_core.watches[slot - 1].next_free;
    }
  else
    {
      struct sbx_loop_watch *grown
          = realloc (sbx_core.watches, (sbx_core.nwatches + 1) * sizeof *sbx_core.watches);
      if (grown == NULL)
        {
          sbx_error ("watch fd %d: out of memory", fd);
          return 0; /* as when epoll refuses it: the caller gives up */
        }
      sbx_core.watches = grown;
      memset (&grown[sbx_core.nwatches], 0, sizeof *grown);
      slot = ++sbx_core.nwatches;
    }
  w = &sbx_core.watches[slot - 1];
  w->kind = kind;
  w->gen++;
  w->obj = obj;
  w->idx = idx;
  w->fd = fd;
  handle = (uint64_t) w->gen << 32 | slot;
  memset (&ev, 0, sizeof ev);
  ev.events = events;
  ev.data.u64 = handle;
  if (epoll_ctl (sbx_core.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
    {
      sbx_error ("epoll_ctl add fd %d: %s", fd, strerror (errno));
      w->kind = SBX_W_FREE;
      w->next_free = sbx_core.free_watch;
      sbx_core.free_watch = slot;
      return 0;
    }
  return handle;
}

void
sbx__watch_mod (uint64_t handle, uint32_t events)
{
  struct sbx_loop_watch *w = resolve (handle);
  struct epoll_event ev;

  if (w == NULL)
    return;
  memset (&ev, 0, sizeof ev);
  ev.events = events;
  ev.data.u64 = handle;
  if (epoll_ctl (sbx_core.epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
    sbx_error ("epoll_ctl mod fd %d: %s", w->fd, strerror (errno));
}

void
sbx__watch_del (uint64_t *handle)
{
  struct sbx_loop_watch *w = resolve (*handle);
  uint32_t slot = (uint32_t) (*handle & 0xffffffffu);

  *handle = 0;
  if (w == NULL)
    return;
  epoll_ctl (sbx_core.epfd, EPOLL_CTL_DEL, w->fd, NULL);
  w->kind = SBX_W_FREE;
  w->obj = NULL;
  w->gen++; /* stale handles in flight no longer resolve */
  w->next_free = sbx_core.free_watch;
  sbx_core.free_watch = slot;
}

void
sbx__wake_loop (void)
{
  uint64_t one = 1;
  ssize_t w = write (sbx_core.wakefd, &one, sizeof one);
  (void) w;
}

static int
compute_timeout (void)
{
  int64_t now = sbx_mono_ms (), next = sbx__next_sandbox_deadline (now);
  struct sbx_sandbox *sb;

  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    {
      int64_t d = sbx__next_process_deadline (sb, now);
      if (d > 0 && (next == 0 || d < next))
        next = d;
    }
  if (next == 0)
    return 60000;
  if (next <= now)
    return 0;
  return next - now > 60000 ? 60000 : (int) (next - now);
}

static void
dispatch (uint64_t handle, uint32_t events)
{
  struct sbx_loop_watch *w = resolve (handle);

  if (w == NULL)
    return;
  switch (w->kind)
    {
    case SBX_W_WAKE:
      {
        uint64_t v;
        ssize_t r = read (sbx_core.wakefd, &v, sizeof v);
        (void) r;
        break;
      }
    case SBX_W_CTL:
      sbx__handle_init_event (w->obj);
      break;
    case SBX_W_PIDFD:
      sbx__handle_init_death (w->obj);
      break;
    case SBX_W_OUT:
      sbx__process_on_output (w->obj, w->idx);
      break;
    case SBX_W_IN:
      sbx__process_on_stdin (w->obj);
      break;
    case SBX_W_DIRWATCH:
      sbx__dirwatch_on_readable (w->obj);
      break;
    case SBX_W_EGRESS:
      sbx__egress_on_reports ();
      break;
    case SBX_W_FREE:
    default:
      break;
    }
  (void) events;
}

void *
sbx__loop_main (void *arg)
{
  struct epoll_event evs[MAX_EVENTS];

  (void) arg;
  for (;;)
    {
      int timeout, n, i;
      int64_t now;

      pthread_mutex_lock (&sbx_core.lock);
      timeout = compute_timeout ();
      pthread_mutex_unlock (&sbx_core.lock);

      n = epoll_wait (sbx_core.epfd, evs, MAX_EVENTS, timeout);
      if (n < 0 && errno != EINTR)
        {
          sbx_error ("epoll_wait: %s", strerror (errno));
          n = 0;
        }
      pthread_mutex_lock (&sbx_core.lock);
      if (sbx_core.stopping == 2)
        {
          pthread_mutex_unlock (&sbx_core.lock);
          break;
        }
      for (i = 0; i < n; i++)
        dispatch (evs[i].data.u64, evs[i].events);
      now = sbx_mono_ms ();
      sbx__expire_sandboxes (now);
      {
        struct sbx_sandbox *sb;
        for (sb = sbx_core.sandboxes; sb; sb = sb->next)
          if (sb->state == SBX_SB_RUNNING)
            sbx__expire_processes (sb, now);
      }
      pthread_mutex_unlock (&sbx_core.lock);
    }
  return NULL;
}
