/* sbx: directory watches (see core.h). The watching happens inside the
 * sandbox, in a helper that init forks (iso/init/watch.c): the front end
 * cannot use inotify on sandbox paths (it is confined to its state
 * directory), and a path resolved on the host side could be led out of
 * the sandbox by a symlink. The helper writes records into a pipe whose
 * read end the event loop watches; this file turns them into a bounded
 * queue per watch that HTTP threads take events from.
 *
 * A VM's watch is the same helper run by its guest agent (core/vm_watch.c);
 * its records reach the same pipe and are checked the same way.
 *
 * A watch is listed in its sandbox (and counts against the limit) from
 * start until its helper is known to be gone: init reported its end, or
 * the sandbox died. Whoever started it holds a reference until
 * sbx_watch_stop; a thread waiting in sbx_watch_next holds one too, so a
 * stop from another thread cannot free it under the waiter.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/internal.h"
#include "util/cleanup.h"
#include "util/log.h"

/* The queue of one watch: events beyond either bound are dropped, and one
   OVERFLOW takes their place. */
#define QUEUE_MAX_EVENTS 4096
#define QUEUE_MAX_BYTES (512 * 1024)
#define EVENT_OVERHEAD 32 /* bytes counted per event besides its name */
/* Read per wakeup of the loop, so one busy watch cannot hold it. */
#define READ_CHUNK 65536
/* How long start waits for the helper's first record: a sandbox with a
   small CPU quota walks a big tree slowly. */
#define START_WAIT_MS 30000

struct wev
{
  struct wev *next;
  int type;
  size_t len;
  char name[]; /* len bytes, NUL-terminated */
};

struct sbx_watch
{
  struct sbx_watch *next;  /* in sb->watches while listed */
  struct sbx_sandbox *sb;  /* holds a reference */
  int refs;                /* the list's, the caller's, waiters' */
  int listed;
  uint64_t req_id;
  int fd;                  /* the pipe's read end; -1 once closed */
  uint64_t loop;           /* its watch in the event loop */
  struct sbx_iso_watch_parser parser;
  int ready;               /* READY came: the watches are in place */
  int start_errno;         /* FAILED came, or init could not fork */
  int ended;               /* no more records will come */
  int exited;              /* the helper is gone (init said, or the sandbox died) */
  int stopped;
  struct wev *head, *tail; /* owned */
  size_t count, bytes;
  int overflow;            /* events were dropped: OVERFLOW is owed once the queue drains */
  pthread_cond_t cond;     /* any change */
};

/* ---- lifetime (lock held) --------------------------------------------- */

static void
clear_queue (struct sbx_watch *w)
{
  while (w->head)
    {
      struct wev *e = w->head;
      w->head = e->next;
      free (e);
    }
  w->tail = NULL;
  w->count = w->bytes = 0;
}

static void
unref_locked (struct sbx_watch *w)
{
  if (--w->refs > 0)
    return;
  clear_queue (w);
  pthread_cond_destroy (&w->cond);
  sbx__sandbox_unref_locked (w->sb);
  free (w);
}

/* Out of its sandbox's list once its helper is gone and the pipe closed:
   only then is its place under the limit free. */
static void
maybe_unlist (struct sbx_watch *w)
{
  struct sbx_watch **pp;

  if (!w->listed || !w->exited || w->fd >= 0)
    return;
  for (pp = &w->sb->watches; *pp; pp = &(*pp)->next)
    if (*pp == w)
      {
        *pp = w->next;
        w->next = NULL;
        w->listed = 0;
        w->sb->nwatches--;
        unref_locked (w); /* the list's reference */
        return;
      }
}

/* No more records: close the pipe (a helper still writing gets EPIPE, a
   quiet one sees POLLERR on its end and exits). */
static void
end_stream (struct sbx_watch *w)
{
  sbx__watch_del (&w->loop);
  close_and_reset (&w->fd);
  w->ended = 1;
  pthread_cond_broadcast (&w->cond);
  maybe_unlist (w);
}

static void
kill_helper (struct sbx_watch *w)
{
  if (w->exited || w->sb->state != SBX_SB_RUNNING)
    return;
  /* Closing the pipe ends it too; the signal does not wait for it to
     notice. An unknown req_id (already reaped) is nothing to init. */
  sbx_iso_signal (&w->sb->box, w->req_id, SIGKILL, 0, NULL);
}

/* ---- records from the helper (loop thread, lock held) ------------------- */

static void
enqueue (struct sbx_watch *w, int type, const char *name, size_t len)
{
  struct wev *e;

  if (w->stopped)
    return;
  /* After a drop, nothing is queued until the queue has drained and the
     OVERFLOW is taken: it stands exactly where events went missing. */
  if (w->overflow || w->count >= QUEUE_MAX_EVENTS
      || w->bytes + EVENT_OVERHEAD + len > QUEUE_MAX_BYTES)
    {
      w->overflow = 1;
      return;
    }
  /* One OVERFLOW in a row says it all. */
  if (type == SBX_WATCH_OVERFLOW && w->tail && w->tail->type == SBX_WATCH_OVERFLOW)
    return;
  e = malloc (sizeof *e + len + 1);
  if (e == NULL)
    {
      /* The daemon is short of memory: lose events, and say so. */
      w->overflow = 1;
      return;
    }
  e->next = NULL;
  e->type = type;
  e->len = len;
  memcpy (e->name, name, len);
  e->name[len] = '\0';
  if (w->tail)
    w->tail->next = e;
  else
    w->head = e;
  w->tail = e;
  w->count++;
  w->bytes += EVENT_OVERHEAD + len;
}

static void
on_record (void *arg, const struct sbx_iso_watch_rec *rec)
{
  struct sbx_watch *w = arg;

  switch (rec->type)
    {
    case SBX_WREC_READY:
      w->ready = 1;
      break;
    case SBX_WREC_FAILED:
      w->start_errno = rec->sys_errno;
      break;
    case SBX_WREC_CREATE:
    case SBX_WREC_WRITE:
    case SBX_WREC_REMOVE:
    case SBX_WREC_RENAME:
    case SBX_WREC_CHMOD:
    case SBX_WREC_OVERFLOW:
      /* The record types are the event types (proto.h, core.h). */
      enqueue (w, rec->type, rec->name ? rec->name : "", rec->len);
      break;
    default:
      break;
    }
}

void
sbx__dirwatch_on_readable (struct sbx_watch *w)
{
  char buf[READ_CHUNK];
  ssize_t n;

  if (w->fd < 0)
    return;
  n = read (w->fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0)
    {
      /* The helper is gone: the watched directory was removed, or it was
         killed. A cut record at the end is as good as none. */
      end_stream (w);
      return;
    }
  if (sbx_iso_watch_feed (&w->parser, buf, (size_t) n, on_record, w) < 0)
    {
      sbx_warn ("sandbox %s: a directory watcher broke its stream; ending it", w->sb->id);
      kill_helper (w);
      end_stream (w);
      return;
    }
  pthread_cond_broadcast (&w->cond);
}

int
sbx__dirwatch_on_event (struct sbx_sandbox *sb, const struct sbx_iso_event *ev)
{
  struct sbx_watch *w;

  for (w = sb->watches; w; w = w->next)
    if (w->req_id == ev->req_id)
      {
        if (ev->type == SBX_ISO_SPAWN_FAILED)
          {
            if (!w->ready && !w->start_errno)
              w->start_errno = ev->sys_errno > 0 ? ev->sys_errno : EAGAIN;
          }
        else if (ev->type != SBX_ISO_EXITED)
          return 1; /* a helper never reports SPAWNED */
        w->exited = 1;
        pthread_cond_broadcast (&w->cond);
        maybe_unlist (w);
        return 1;
      }
  return 0;
}

void
sbx__dirwatch_end_all (struct sbx_sandbox *sb)
{
  while (sb->watches)
    {
      struct sbx_watch *w = sb->watches;
      /* Its helper dies with the sandbox. */
      w->exited = 1;
      end_stream (w); /* unlists it */
    }
}

/* ---- the API ------------------------------------------------------------ */

static int
start_error (int e, const char *path, sbx_error_t **err)
{
  switch (e)
    {
    case ENOENT:
      return sbx_err (err, SBX_E_NOT_FOUND, "no such directory `%.1024s`", path);
    case ENOTDIR:
      return sbx_err (err, SBX_E_INVALID, "`%.1024s` is not a directory", path);
    case ELOOP:
    case ENAMETOOLONG:
    case EINVAL:
      return sbx_err_errno (err, SBX_E_INVALID, e, "cannot watch `%.1024s`", path);
    case EACCES:
    case EPERM:
      return sbx_err_errno (err, SBX_E_FORBIDDEN, e, "cannot watch `%.1024s`: permission denied",
                            path);
    case ENOSPC:
      return sbx_err (err, SBX_E_LIMIT,
                      "cannot watch `%.1024s`: more than %d directories, or the kernel's "
                      "inotify watches for the sandbox are used up",
                      path, SBX_WATCH_MAX_DIRS);
    case EMFILE:
    case ENFILE:
      return sbx_err (err, SBX_E_LIMIT,
                      "cannot watch `%.1024s`: the kernel's inotify instances for the sandbox "
                      "are used up",
                      path);
    case EAGAIN:
      return sbx_err (err, SBX_E_LIMIT, "the sandbox's process limit is reached");
    case ENOMEM:
      return sbx_err (err, SBX_E_LIMIT, "the sandbox is out of memory");
    default:
      return sbx_err_errno (err, SBX_E_SYSTEM, e, "cannot watch `%.1024s`", path);
    }
}

static void
stop_locked (struct sbx_watch *w)
{
  if (!w->stopped)
    {
      w->stopped = 1;
      kill_helper (w);
      clear_queue (w);
      w->overflow = 0;
      end_stream (w);
    }
}

struct sbx_watch *
sbx_watch_start (struct sbx_sandbox *sb, const char *path, int recursive, const char *user,
                 sbx_error_t **err)
{
  struct sbx_watch *w;
  struct timespec ts;
  int pipefd[2] = {-1, -1}, rc;
  uint32_t uid;
  const char *u;

  if (path == NULL || path[0] != '/' || strlen (path) >= SBX_WATCH_PATH_MAX)
    return sbx_err (err, SBX_E_INVALID, "the path to watch must be absolute, shorter than %d bytes",
                    SBX_WATCH_PATH_MAX),
           NULL;
  if (sbx_sandbox_awake (sb, err) < 0)
    return NULL;
  w = calloc (1, sizeof *w);
  if (w == NULL)
    return sbx_err_oom (err), NULL;
  /* The read end is non-blocking: the loop never waits on a helper. */
  if (pipe2 (pipefd, O_CLOEXEC) < 0 || fcntl (pipefd[0], F_SETFL, O_NONBLOCK) < 0)
    {
      sbx_err_sys (err, errno, "pipe");
      close_and_reset (&pipefd[0]);
      close_and_reset (&pipefd[1]);
      free (w);
      return NULL;
    }
  pthread_cond_init (&w->cond, NULL);
  w->fd = pipefd[0];

  pthread_mutex_lock (&sbx_core.lock);
  u = user ? user : sb->user;
  if (strcmp (u, "user") == 0)
    uid = 1000;
  else if (strcmp (u, "root") == 0)
    uid = 0;
  else
    {
      rc = sbx_err (err, SBX_E_INVALID, "user must be `user` or `root`, not `%.32s`", u);
      goto fail_unlisted;
    }
  if (sb->state != SBX_SB_RUNNING)
    {
      rc = sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
      goto fail_unlisted;
    }
  if (sb->nwatches >= SBX_WATCHES_PER_SANDBOX)
    {
      rc = sbx_err (err, SBX_E_LIMIT, "at most %d directory watches per sandbox",
                    SBX_WATCHES_PER_SANDBOX);
      goto fail_unlisted;
    }
  w->sb = sb;
  sb->refs++;
  w->refs = 2; /* the list's and the caller's */
  w->req_id = ++sb->next_req_id;
  w->listed = 1;
  w->next = sb->watches;
  sb->watches = w;
  sb->nwatches++;
  w->loop = sbx__watch_add (w->fd, EPOLLIN, SBX_W_DIRWATCH, w, 0);
  if (w->loop == 0)
    rc = sbx_err_oom (err);
  else if (sb->isolation == SBX_ISOLATION_VM) /* the agent runs the same helper */
    rc = sbx__vm_watch_start (sb, w->req_id, uid, recursive, path, pipefd[1], err);
  else
    rc = sbx_iso_watch (&sb->box, w->req_id, uid, uid, recursive, path, pipefd[1], err);
  /* init has its copy of the write end now (or never will): with ours
     closed, the pipe ends when the helper does. */
  close_and_reset (&pipefd[1]);
  if (rc < 0)
    {
      /* No helper was asked for. */
      w->exited = 1;
      stop_locked (w);
      unref_locked (w);
      pthread_mutex_unlock (&sbx_core.lock);
      return NULL;
    }

  sbx__abstime (&ts, START_WAIT_MS);
  while (!w->ready && !w->start_errno && !(w->ended && w->exited) && sb->state == SBX_SB_RUNNING)
    if (pthread_cond_timedwait (&w->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
      break;
  if (w->ready && !w->ended)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return w;
    }
  if (w->start_errno)
    start_error (w->start_errno, path, err);
  else if (sb->state != SBX_SB_RUNNING)
    sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
  else if (w->ended)
    /* Killed before it said anything (by the sandbox's own code, or the
       OOM killer), or it broke its stream. */
    sbx_err (err, SBX_E_UNAVAILABLE, "the directory watcher in the sandbox ended unexpectedly");
  else
    sbx_err (err, SBX_E_UNAVAILABLE, "the sandbox did not start the directory watcher in time");
  stop_locked (w);
  unref_locked (w);
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;

fail_unlisted:
  pthread_mutex_unlock (&sbx_core.lock);
  close_and_reset (&pipefd[0]);
  close_and_reset (&pipefd[1]);
  pthread_cond_destroy (&w->cond);
  free (w);
  (void) rc;
  return NULL;
}

int
sbx_watch_next (struct sbx_watch *w, struct sbx_watch_event *ev, int64_t wait_ms)
{
  struct timespec ts = {0, 0};
  int rc, timed_out = 0;

  if (wait_ms > 0)
    sbx__abstime (&ts, wait_ms);
  pthread_mutex_lock (&sbx_core.lock);
  w->refs++;
  for (;;)
    {
      if (w->stopped)
        {
          rc = -1;
          break;
        }
      if (w->head)
        {
          struct wev *e = w->head;
          w->head = e->next;
          if (w->head == NULL)
            w->tail = NULL;
          w->count--;
          w->bytes -= EVENT_OVERHEAD + e->len;
          ev->type = e->type;
          memcpy (ev->name, e->name, e->len + 1);
          free (e);
          rc = 1;
          break;
        }
      if (w->overflow)
        {
          w->overflow = 0;
          ev->type = SBX_WATCH_OVERFLOW;
          ev->name[0] = '\0';
          rc = 1;
          break;
        }
      if (w->ended)
        {
          rc = -1;
          break;
        }
      if (wait_ms == 0 || timed_out)
        {
          rc = 0;
          break;
        }
      if (wait_ms < 0)
        pthread_cond_wait (&w->cond, &sbx_core.lock);
      else if (pthread_cond_timedwait (&w->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
        timed_out = 1; /* one more look, then 0 */
    }
  unref_locked (w);
  pthread_mutex_unlock (&sbx_core.lock);
  return rc;
}

void
sbx_watch_stop (struct sbx_watch *w)
{
  if (w == NULL)
    return;
  pthread_mutex_lock (&sbx_core.lock);
  stop_locked (w);
  unref_locked (w); /* the caller's */
  pthread_mutex_unlock (&sbx_core.lock);
}
