/* sbx: commands in a sandbox: starting them through init, moving their
 * output into bounded buffers, feeding stdin, timeouts, results, and the
 * readers that stream output to HTTP clients. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "egress/tls.h"
#include "core/template.h"
#include "util/cleanup.h"
#include "util/log.h"

#define READ_CHUNK 65536
#define STDIN_PENDING_MAX (1 << 20)
#define SPAWN_WAIT_MS 30000
#define MAX_FINISHED_KEPT 64
/* After a terminal command exited: read at most this much more (a process
   it left behind may write on forever). What the command itself wrote is
   in the master's buffers by then, which hold far less (64 KiB + 4 KiB). */
#define TTY_DRAIN_MAX (256 * 1024)
#define RESIZE_WAIT_MS 10000


/* ---- lifetime ---------------------------------------------------------- */

static void
process_free (struct sbx_process *p)
{
  int i;

  for (i = 0; i < 2; i++)
    {
      sbx__outbuf_close (&p->out[i]);
      free (p->out[i].data);
    }
  sbx__watch_del (&p->stdin_watch);
  close_and_reset (&p->stdin_fd);
  sbx_buf_free (&p->stdin_pending);
  json_decref (p->argv);
  json_decref (p->env);
  free (p->cwd);
  pthread_cond_destroy (&p->cond);
  sbx__sandbox_unref_locked (p->sb);
  free (p);
}

void
sbx__process_unref_locked (struct sbx_process *p)
{
  if (--p->refs == 0)
    process_free (p);
}

void
sbx_process_unref (struct sbx_process *p)
{
  if (p == NULL)
    return;
  pthread_mutex_lock (&sbx_core.lock);
  sbx__process_unref_locked (p);
  pthread_mutex_unlock (&sbx_core.lock);
}

static void
unlink_process (struct sbx_process *p)
{
  struct sbx_process **pp;

  for (pp = &p->sb->procs; *pp; pp = &(*pp)->next)
    if (*pp == p)
      {
        *pp = p->next;
        p->next = NULL;
        /* init may let go of it too (its exit status, our pipe ends). */
        if (p->sb->state == SBX_SB_RUNNING && p->pid > 0)
          sbx_iso_release (&p->sb->box, p->req_id, 0, NULL);
        sbx__process_unref_locked (p); /* the list's reference */
        return;
      }
}

/* Keep at most MAX_FINISHED_KEPT finished background processes. */
static void
trim_finished (struct sbx_sandbox *sb)
{
  struct sbx_process *p, *oldest;
  int finished;

  for (;;)
    {
      finished = 0;
      oldest = NULL;
      for (p = sb->procs; p; p = p->next)
        if (p->state == SBX_PROC_DONE && p->background)
          {
            finished++;
            oldest = p; /* the list is newest first */
          }
      if (finished <= MAX_FINISHED_KEPT || oldest == NULL)
        return;
      unlink_process (oldest);
    }
}

void
sbx__process_maybe_done (struct sbx_process *p)
{
  if (p->state == SBX_PROC_DONE)
    return;
  if (p->state == SBX_PROC_STARTING && !p->spawn_errno && !p->exited)
    return;
  if (!p->exited && !p->spawn_errno)
    return;
  if (p->out[0].fd >= 0 || p->out[1].fd >= 0)
    return;
  p->state = SBX_PROC_DONE;
  if (p->end_mono == 0) /* an adopted one may know when it ended */
    p->end_mono = sbx_mono_ms ();
  sbx__process_audit_locked (p);
  p->stdin_open = 0;
  sbx__watch_del (&p->stdin_watch);
  close_and_reset (&p->stdin_fd);
  sbx_buf_free (&p->stdin_pending);
  pthread_cond_broadcast (&p->cond);
  if (p->collected || !p->background)
    {
      if (p->collected)
        unlink_process (p);
    }
  else
    trim_finished (p->sb);
}

/* ---- events from init (loop thread, lock held) ------------------------- */

static struct sbx_process *
by_req (struct sbx_sandbox *sb, uint64_t req_id)
{
  struct sbx_process *p;

  for (p = sb->procs; p; p = p->next)
    if (p->req_id == req_id)
      return p;
  return NULL;
}

void
sbx__outbuf_start_drain (struct sbx_outbuf *o)
{
  int pending = 0;

  if (o->fd < 0)
    return;
  if (o->tty)
    {
      /* A terminal has no FIONREAD that counts what is on its way: the
         kernel moves output to the master in a worker. A read that finds
         nothing waits for that worker first, so the drain reads until a
         read finds nothing (EAGAIN; EIO once every slave is closed), with
         a bound for a process left behind that keeps writing. */
      o->drain_left = TTY_DRAIN_MAX;
      return;
    }
  /* What the command wrote is in the pipe by now; read exactly that much
     more and stop, so a grandchild holding the pipe cannot keep the
     command "running" forever. */
  if (ioctl (o->fd, FIONREAD, &pending) < 0 || pending <= 0)
    {
      sbx__outbuf_close (o);
      return;
    }
  o->drain_left = pending;
}

/* After an OOM kill in the sandbox: 1 when its own memory limit was
   reached, 0 when memory ran out above it (a parent's limit, the host).
   v2 counts hits of memory.max; v1 has no count that works (memory.failcnt
   stays 0 on recent kernels), so a peak at the limit tells (charges come
   in batches: within 1 MiB). */
static int
reached_limit (const struct sbx_sandbox *sb, const struct sbx_cgroup_stats *st, uint64_t before)
{
  if (sbx_core.host.cgroup_mode == SBX_CGROUP_V2)
    return st->limit_hits > before;
  return st->memory_peak_bytes + (1 << 20) >= sb->limits.memory_bytes;
}

void
sbx__process_drain_tty (struct sbx_process *p)
{
  /* Both may finish p and drop the list's reference. */
  p->refs++;
  if (p->out[0].tty && p->out[0].fd >= 0 && p->out[0].drain_left >= 0)
    sbx__process_on_output (p, 0);
  sbx__process_maybe_done (p);
  sbx__process_unref_locked (p);
}

void
sbx__outbuf_resume (struct sbx_process *p, int idx)
{
  struct sbx_outbuf *o = &p->out[idx];

  if (!o->paused || o->fd < 0)
    return;
  o->paused = 0;
  sbx__watch_mod (o->watch, EPOLLIN);
  /* A terminal's drain ends with a read that finds nothing, which no
     event announces: read now. */
  if (o->tty && o->drain_left >= 0)
    sbx__process_drain_tty (p);
}

/* SPAWNED of a command on a terminal: take its master (ev->fd) as output
   and, through a second descriptor (epoll watches each once), as stdin. */
static void
attach_tty (struct sbx_process *p, struct sbx_iso_event *ev)
{
  int fd = ev->fd;
  sbx_error_t *err = NULL;

  ev->fd = -1;
  if (fd >= 0 && fcntl (fd, F_SETFL, O_NONBLOCK) == 0
      && (p->stdin_fd = fcntl (fd, F_DUPFD_CLOEXEC, 3)) >= 0)
    {
      p->out[0].fd = fd;
      p->out[0].watch = sbx__watch_add (fd, EPOLLIN, SBX_W_OUT, p, 0);
      p->stdin_watch = sbx__watch_add (p->stdin_fd, p->stdin_pending.len ? EPOLLOUT : 0,
                                       SBX_W_IN, p, 0);
      if (p->out[0].watch && p->stdin_watch)
        return;
      fd = -1; /* p owns it now; closed below */
    }
  /* No descriptor for it (ours are all in use), or no watch: the command
     runs cut off from us. It must not run on unseen. */
  if (fd >= 0)
    close (fd);
  sbx__outbuf_close (&p->out[0]);
  sbx__watch_del (&p->stdin_watch);
  close_and_reset (&p->stdin_fd);
  p->stdin_open = 0;
  snprintf (p->reason, sizeof p->reason,
            "killed: the daemon could not take its terminal (out of descriptors or memory)");
  if (sbx_iso_signal (&p->sb->box, p->req_id, SIGKILL, SBX_SIGNAL_GROUP, &err) < 0)
    {
      sbx_warn ("sandbox %s: kill of a command cut off: %s", p->sb->id, err->msg);
      sbx_error_free (err);
    }
}

void
sbx__process_on_event (struct sbx_sandbox *sb, struct sbx_iso_event *ev)
{
  struct sbx_process *p = by_req (sb, ev->req_id);
  int i, drain_tty = 0;

  if (ev->type == SBX_ISO_CONNECTED || ev->type == SBX_ISO_CONNECT_FAILED)
    {
      sbx__connect_on_event (sb, ev);
      return;
    }
  if (ev->type == SBX_ISO_EGRESS)
    {
      sbx__egress_on_event (sb, ev);
      return;
    }
  if (p == NULL)
    {
      /* A files-API copy, a directory watch, or a collected process
         nothing waits for. */
      if (!sbx__pump_on_event (sb, ev))
        sbx__dirwatch_on_event (sb, ev);
      return;
    }
  switch (ev->type)
    {
    case SBX_ISO_SPAWNED:
      if (p->state != SBX_PROC_STARTING)
        break;
      /* A master for a command we did not put on a terminal (or none for
         one we did) is init lying: the protocol is broken. */
      if (ev->pty != p->pty)
        {
          sbx__queue_kill (sb, "sandbox init broke the protocol");
          break;
        }
      p->state = SBX_PROC_RUNNING;
      p->pid = ev->pid;
      if (!p->daemons_own)
        sbx_counters_exec_started (sbx_mono_ms () - p->start_mono);
      if (p->pty)
        attach_tty (p, ev);
      break;
    case SBX_ISO_RESIZED:
      p->resize_acked++;
      p->resize_errno = ev->sys_errno;
      break;
    case SBX_ISO_SPAWN_FAILED:
      if (p->state != SBX_PROC_STARTING)
        break;
      p->spawn_errno = ev->sys_errno ? ev->sys_errno : EIO;
      p->spawn_stage = ev->stage;
      for (i = 0; i < 2; i++)
        sbx__outbuf_close (&p->out[i]);
      break;
    case SBX_ISO_EXITED:
      if (p->exited)
        break;
      p->exited = 1;
      p->wait_status = ev->wait_status;
      p->deadline_mono = 0;
      /* Only a SIGKILL can be the OOM killer's: ask the parent then (one
         request), not for every command. */
      if (WIFSIGNALED (ev->wait_status) && WTERMSIG (ev->wait_status) == SIGKILL && !p->timed_out
          && !p->killed_by_api)
        {
          struct sbx_iso_stats st;
          if (sbx_host_stats (sb->slot, &st, NULL) == 0)
            {
              if (st.cg.oom_kills > p->oom_before)
                {
                  p->oom_killed = 1;
                  /* Its sandbox never reached its own limit: the memory of
                     the sandboxes' parent (or of the host) ran out. */
                  p->oom_outside = !reached_limit (sb, &st.cg, p->limit_hits_before);
                }
              if (st.cg.oom_kills > sb->oom_seen)
                sb->oom_seen = st.cg.oom_kills;
              if (st.cg.limit_hits > sb->limit_hits_seen)
                sb->limit_hits_seen = st.cg.limit_hits;
            }
        }
      sbx__watch_del (&p->stdin_watch);
      close_and_reset (&p->stdin_fd);
      p->stdin_open = 0;
      for (i = 0; i < 2; i++)
        sbx__outbuf_start_drain (&p->out[i]);
      drain_tty = p->pty;
      break;
    case SBX_ISO_CONNECTED:
    case SBX_ISO_CONNECT_FAILED: /* taken above */
    case SBX_ISO_EGRESS:
    default:
      break;
    }
  pthread_cond_broadcast (&p->cond);
  if (drain_tty)
    sbx__process_drain_tty (p); /* ends with maybe_done */
  else
    sbx__process_maybe_done (p);
}

void
sbx__process_on_output (struct sbx_process *p, int idx)
{
  struct sbx_outbuf *o = &p->out[idx];
  char buf[READ_CHUNK];
  size_t want;
  ssize_t n;

  if (o->fd < 0)
    return;
again:
  want = sizeof buf;
  if (p->mode == SBX_OUT_BLOCK)
    {
      size_t room = o->cap - (size_t) (o->end - o->start);
      if (p->unpaced && room < want && room < o->cap)
        {
          /* Nobody paces it any more: the newest output stays (for a
             reader that attaches later), the oldest makes room. */
          size_t make = want < o->cap ? want - room : o->cap - room;
          o->start += make;
          room += make;
        }
      if (room == 0)
        {
          /* Lossless mode: let the pipe fill, so the writer in the
             sandbox blocks, until the reader catches up. One-shot: epoll
             reports a hangup (the writer exited) even with no events
             asked for, and would report it in a loop until then. */
          if (!o->paused)
            {
              o->paused = 1;
              sbx__watch_mod (o->watch, EPOLLONESHOT);
            }
          return;
        }
      if (room < want)
        want = room;
    }
  if (o->drain_left >= 0 && (uint64_t) o->drain_left < want)
    want = (size_t) o->drain_left;
  if (p->mode == SBX_OUT_HEAD && o->end >= o->cap && want > 0 && !o->tty)
    {
      /* Past max_output: discard in the kernel (splice to /dev/null), so a
         command printing gigabytes costs the daemon no copies. */
      size_t chunk = o->drain_left >= 0 ? want : (1u << 20);
      n = splice (o->fd, NULL, sbx_core.devnull, NULL, chunk, SPLICE_F_NONBLOCK);
      if (n > 0)
        {
          o->dropped += (uint64_t) n;
          if (o->drain_left >= 0 && (o->drain_left -= n) == 0)
            sbx__outbuf_close (o);
          sbx__process_maybe_done (p);
          return;
        }
      if (n < 0 && errno != EINVAL)
        goto after_read; /* EAGAIN or a closed pipe: handled as for read */
      /* splice refused (EINVAL): fall back to reading. */
    }
  n = want ? read (o->fd, buf, want) : 0;
after_read:
  if (n < 0)
    {
      /* A terminal's drain ends at the first read that finds nothing. */
      if (errno == EINTR || (errno == EAGAIN && !(o->tty && o->drain_left >= 0)))
        return;
      /* A pipe's error, or a terminal's EIO: no slave is open any more
         and everything written was read (the kernel returns EIO only
         then), its end of file. */
      sbx__outbuf_close (o);
    }
  else if (n == 0)
    sbx__outbuf_close (o);
  else
    {
      sbx__outbuf_append (o, p->mode, buf, (size_t) n);
      if (o->drain_left >= 0)
        {
          o->drain_left -= n;
          if (o->drain_left == 0)
            sbx__outbuf_close (o);
          else if (o->tty)
            goto again; /* no event says when it has nothing more */
        }
    }
  pthread_cond_broadcast (&p->cond);
  sbx__process_maybe_done (p);
}

void
sbx__process_on_stdin (struct sbx_process *p)
{
  ssize_t n;

  if (p->stdin_fd < 0)
    return;
  if (p->stdin_pending.len > 0)
    {
      n = write (p->stdin_fd, p->stdin_pending.data, p->stdin_pending.len);
      if (n < 0)
        {
          if (errno == EAGAIN || errno == EINTR)
            return;
          /* EPIPE: the command closed its stdin. */
          sbx_buf_reset (&p->stdin_pending);
          p->stdin_eof = 1;
          p->stdin_open = 0;
        }
      else
        {
          sbx_buf_consume (&p->stdin_pending, (size_t) n);
          p->stdin_written += (uint64_t) n;
        }
      pthread_cond_broadcast (&p->cond);
    }
  if (p->stdin_pending.len == 0)
    {
      if (p->stdin_eof)
        {
          sbx__watch_del (&p->stdin_watch);
          close_and_reset (&p->stdin_fd);
          /* init holds our end too: without this the command never sees
             EOF. (A terminal has no end of input but ^D: its master stays,
             it is the output too.) */
          if (!p->pty)
            sbx_iso_release (&p->sb->box, p->req_id, 1, NULL);
        }
      else
        sbx__watch_mod (p->stdin_watch, 0);
    }
}

/* The sandbox is going away (lock held): every command ends now. */
void
sbx__process_kill_all (struct sbx_sandbox *sb, const char *reason)
{
  sbx__pump_cancel_all (sb);
  sbx__connect_cancel_all (sb);
  sbx__dirwatch_end_all (sb);
  while (sb->procs)
    {
      struct sbx_process *p = sb->procs;
      int i;

      /* Out of the list first: we now hold the list's reference, and
         maybe_done below cannot drop it a second time. */
      sb->procs = p->next;
      p->next = NULL;
      p->collected = 1;
      if (p->state != SBX_PROC_DONE)
        {
          if (p->state == SBX_PROC_STARTING && !p->spawn_errno)
            p->spawn_errno = ECANCELED;
          if (!p->exited && !p->spawn_errno)
            {
              p->exited = 1;
              p->wait_status = SIGKILL; /* as waitpid reports a SIGKILL death */
            }
          snprintf (p->reason, sizeof p->reason, "%s", reason);
          p->sandbox_ended = 1;
          for (i = 0; i < 2; i++)
            sbx__outbuf_close (&p->out[i]);
          sbx__process_maybe_done (p);
        }
      pthread_cond_broadcast (&p->cond);
      sbx__process_unref_locked (p);
    }
}

int64_t
sbx__next_process_deadline (struct sbx_sandbox *sb, int64_t now)
{
  struct sbx_process *p;
  int64_t next = 0;

  (void) now;
  if (sb->paused || sb->transition)
    return 0; /* their clocks stand too (shifted on resume) */
  for (p = sb->procs; p; p = p->next)
    if (p->deadline_mono && p->state == SBX_PROC_RUNNING && (next == 0 || p->deadline_mono < next))
      next = p->deadline_mono;
  return next;
}

void
sbx__expire_processes (struct sbx_sandbox *sb, int64_t now)
{
  struct sbx_process *p;

  if (sb->paused || sb->transition)
    return;
  for (p = sb->procs; p; p = p->next)
    if (p->deadline_mono && p->state == SBX_PROC_RUNNING && p->deadline_mono <= now)
      {
        sbx_error_t *err = NULL;
        p->deadline_mono = 0;
        p->timed_out = 1;
        /* The whole process group: a shell and what it started. */
        if (sbx_iso_signal (&sb->box, p->req_id, SIGKILL, SBX_SIGNAL_GROUP | SBX_SIGNAL_TIMEOUT,
                            &err)
            < 0)
          {
            sbx_warn ("sandbox %s: timeout kill: %s", sb->id, err->msg);
            sbx_error_free (err);
          }
      }
}

/* ---- starting ---------------------------------------------------------- */

static int
user_ids (const char *user, uint32_t *uid, const char **home)
{
  if (strcmp (user, "user") == 0)
    {
      *uid = 1000;
      *home = "/home/user";
      return 0;
    }
  if (strcmp (user, "root") == 0)
    {
      *uid = 0;
      *home = "/root";
      return 0;
    }
  return -1;
}

static void
free_strv (char **v)
{
  size_t i;

  if (v == NULL)
    return;
  for (i = 0; v[i]; i++)
    free (v[i]);
  free (v);
}

/* NAME=VALUE strings: defaults, then the sandbox's env, then the exec's;
   a later NAME replaces an earlier one. NULL when memory ran out (a
   command must never run with part of its environment missing). */
static char **
build_env (json_t *sandbox_env, json_t *exec_env, const char *user, const char *home,
           json_t *network)
{
  int proxy = sbx__network_allows_any (network);
  /* The sandbox's only way out is its proxy address (docs/egress.md):
     told to every command while the policy lets anything through. */
  static const char *const proxy_env[][2] = {
      {"HTTP_PROXY", "http://127.0.0.1:3128"},  {"HTTPS_PROXY", "http://127.0.0.1:3128"},
      {"http_proxy", "http://127.0.0.1:3128"},  {"https_proxy", "http://127.0.0.1:3128"},
      {"NO_PROXY", "localhost,127.0.0.1,::1"}, {"no_proxy", "localhost,127.0.0.1,::1"},
  };
  json_t *merged = json_object ();
  const char *k;
  json_t *v;
  char **envp;
  size_t i = 0;

  json_object_set_new (merged, "PATH",
                       json_string ("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
  json_object_set_new (merged, "HOME", json_string (home));
  json_object_set_new (merged, "USER", json_string (user));
  json_object_set_new (merged, "LOGNAME", json_string (user));
  json_object_set_new (merged, "SHELL", json_string ("/bin/bash"));
  json_object_set_new (merged, "LANG", json_string ("C.UTF-8"));
  json_object_set_new (merged, "HOSTNAME", json_string ("sandbox"));
  for (i = 0; proxy && i < sizeof proxy_env / sizeof *proxy_env; i++)
    json_object_set_new (merged, proxy_env[i][0], json_string (proxy_env[i][1]));
  /* Placeholders, never secrets (docs/egress.md, Credentials). */
  json_object_foreach (json_object_get (network, "secrets_env"), k, v)
  {
    json_t *ph = json_object_get (v, "placeholder");
    if (json_is_string (ph))
      json_object_set (merged, k, ph);
  }
  /* The sandbox's CA bundle (the host's and sbx's) while the proxy may
     terminate TLS for it: clients then trust the leaves it issues. */
  if (json_object_get (network, "rules") != NULL)
    {
      json_object_set_new (merged, "SSL_CERT_FILE", json_string (SBX_SANDBOX_CA_BUNDLE));
      json_object_set_new (merged, "REQUESTS_CA_BUNDLE", json_string (SBX_SANDBOX_CA_BUNDLE));
      json_object_set_new (merged, "CURL_CA_BUNDLE", json_string (SBX_SANDBOX_CA_BUNDLE));
      json_object_set_new (merged, "NODE_EXTRA_CA_CERTS", json_string (SBX_SANDBOX_CA_CERT));
    }
  i = 0;
  if (sandbox_env)
    json_object_update (merged, sandbox_env);
  if (exec_env)
    json_object_update (merged, exec_env);
  envp = merged && !sbx_json_alloc_failed ()
             ? calloc (json_object_size (merged) + 1, sizeof *envp)
             : NULL;
  if (envp == NULL)
    {
      json_decref (merged);
      return NULL;
    }
  json_object_foreach (merged, k, v)
  {
    if (asprintf (&envp[i], "%s=%s", k, json_string_value (v)) < 0)
      {
        envp[i] = NULL;
        free_strv (envp);
        json_decref (merged);
        return NULL;
      }
    i++;
  }
  json_decref (merged);
  return envp;
}

/* What a daemon started after us needs to know of the command (the
   opaque tag init keeps, see SBX_TAG_MAX): parsed by sbx__process_adopt. */
static char *
process_tag (const struct sbx_process *p)
{
  json_t *o = json_pack ("{s:O, s:s, s:s, s:I, s:i, s:I, s:I, s:s}", "argv", p->argv, "cwd",
                         p->cwd, "user", p->user, "started_ms", (json_int_t) p->started_ms,
                         "background", p->background, "cap", (json_int_t) p->out[0].cap,
                         "timeout_ms", (json_int_t) p->timeout_ms, "user_tag", p->user_tag);
  char *s;

  if (o == NULL)
    return NULL;
  s = json_dumps (o, JSON_COMPACT);
  if (s != NULL && strlen (s) > SBX_TAG_MAX)
    {
      /* A huge command line: keep the program's name only. */
      json_t *argv = json_pack ("[s%]", json_string_value (json_array_get (p->argv, 0)),
                                strnlen (json_string_value (json_array_get (p->argv, 0)), 256));
      free (s);
      json_object_set_new (o, "argv", argv);
      s = json_dumps (o, JSON_COMPACT);
      if (s != NULL && strlen (s) > SBX_TAG_MAX)
        {
          free (s);
          s = strdup ("{}");
        }
    }
  json_decref (o);
  return s; /* NULL: no memory */
}

struct sbx_process *
sbx_process_start (struct sbx_sandbox *sb, const struct sbx_exec_opts *opts, sbx_error_t **err)
{
  const char *user = opts->user ? opts->user : NULL, *home;
  struct sbx_iso_spawn spawn;
  struct sbx_process *p;
  uint32_t uid;
  int out_pipe[2][2] = {{-1, -1}, {-1, -1}}, in_pipe[2] = {-1, -1};
  /* On a terminal, init makes the descriptors and SPAWNED brings ours. */
  int pty = opts->pty != 0;
  int use_pipe_stdin = !pty && (opts->stdin_open || opts->stdin_len > 0);
  char **envp = NULL, *tag;
  int i, rc;

  if (sbx_sandbox_awake (sb, err) < 0)
    return NULL;

  pthread_mutex_lock (&sbx_core.lock);
  if (user == NULL)
    user = sb->user;
  pthread_mutex_unlock (&sbx_core.lock);
  if (user_ids (user, &uid, &home) < 0)
    return sbx_err (err, SBX_E_INVALID, "user must be `user` or `root`, not `%.32s`", user), NULL;
  if (opts->cwd && opts->cwd[0] != '/')
    return sbx_err (err, SBX_E_INVALID, "cwd must be an absolute path"), NULL;
  if (pty
      && (opts->pty_cols < 1 || opts->pty_cols > SBX_PTY_MAX || opts->pty_rows < 1
          || opts->pty_rows > SBX_PTY_MAX))
    return sbx_err (err, SBX_E_INVALID, "terminal size must be 1..%d columns and rows",
                    SBX_PTY_MAX),
           NULL;

  for (i = 0; i < 2 && !pty; i++)
    if (pipe2 (out_pipe[i], O_CLOEXEC) < 0)
      {
        sbx_err_sys (err, errno, "pipe");
        goto fail_fds;
      }
  if (use_pipe_stdin && pipe2 (in_pipe, O_CLOEXEC) < 0)
    {
      sbx_err_sys (err, errno, "pipe");
      goto fail_fds;
    }
  for (i = 0; i < 2 && !pty; i++)
    fcntl (out_pipe[i][0], F_SETFL, O_NONBLOCK);
  if (use_pipe_stdin)
    fcntl (in_pipe[1], F_SETFL, O_NONBLOCK);

  p = calloc (1, sizeof *p);
  if (p == NULL)
    {
      sbx_err_oom (err);
      goto fail_fds;
    }
  pthread_cond_init (&p->cond, NULL);
  p->refs = 2; /* the list's and the caller's */
  p->mode = opts->mode;
  p->background = opts->background;
  p->stdin_fd = use_pipe_stdin ? in_pipe[1] : -1;
  /* A terminal's input is open: it is how one types into it. */
  p->pty = pty;
  p->stdin_open = opts->stdin_open || pty;
  p->stdin_eof = !p->stdin_open;
  if (opts->stdin_len)
    sbx_buf_append (&p->stdin_pending, opts->stdin_data, opts->stdin_len);
  for (i = 0; i < 2; i++)
    {
      sbx__outbuf_init (&p->out[i], opts->out_cap, out_pipe[i][0]);
      out_pipe[i][0] = -1; /* p->out[i] owns it */
      p->out[i].tty = pty && i == 0;
      /* A lossless buffer is made now: the loop, which fills it, could
         neither drop bytes nor fail the request. */
      if (p->mode == SBX_OUT_BLOCK && (p->out[i].data = malloc (opts->out_cap)) != NULL)
        p->out[i].alloc = opts->out_cap;
    }
  p->argv = json_array ();
  for (i = 0; opts->argv[i] && p->argv; i++)
    if (json_array_append_new (p->argv, json_string (opts->argv[i])) < 0)
      {
        json_decref (p->argv);
        p->argv = NULL;
      }
  {
    /* A stored template's working directory (its image's WorkingDir). */
    json_t *tmeta = opts->cwd ? NULL : sbx_template_meta (sb->template_name);
    const char *wd = json_string_value (json_object_get (tmeta, "workdir"));
    p->cwd = strdup (opts->cwd ? opts->cwd : wd ? wd : home);
    json_decref (tmeta);
  }
  p->env = opts->env ? json_deep_copy (opts->env) : json_object ();
  if (opts->user_tag)
    snprintf (p->user_tag, sizeof p->user_tag, "%s", opts->user_tag);
  if (p->cwd == NULL || p->argv == NULL || p->env == NULL || p->stdin_pending.failed
      || (p->mode == SBX_OUT_BLOCK && (p->out[0].data == NULL || p->out[1].data == NULL)))
    {
      sbx_err_oom (err);
      p->sb = NULL;
      goto fail_proc;
    }
  snprintf (p->user, sizeof p->user, "%s", user);
  /* Not in the command-start figures of /metrics (core/counters.h). */
  p->daemons_own = opts->file_op || (opts->user_tag && strcmp (opts->user_tag, "sbx-code-interpreter") == 0);
  p->started_ms = sbx_now_ms ();
  p->start_mono = sbx_mono_ms ();

  pthread_mutex_lock (&sbx_core.lock);
  /* POOLED: the pool starts a template's server before handing it out
     (core/code.c); nobody else holds a pooled sandbox. */
  if (sb->state != SBX_SB_RUNNING && sb->state != SBX_SB_POOLED)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
      p->sb = NULL;
      goto fail_proc;
    }
  envp = build_env (sb->env, opts->env, user, home, sb->network);
  if (envp == NULL)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      sbx_err_oom (err);
      p->sb = NULL;
      goto fail_proc;
    }
  p->sb = sb;
  sb->refs++;
  p->req_id = ++sb->next_req_id;
  p->next = sb->procs;
  sb->procs = p;
  /* The counts when last asked: an OOM kill since then ended some process
     with SIGKILL, and our commands' SIGKILL deaths refresh them. */
  p->oom_before = sb->oom_seen;
  p->limit_hits_before = sb->limit_hits_seen;
  p->timeout_ms = opts->timeout_ms;
  if (opts->timeout_ms)
    p->deadline_mono = p->start_mono + (int64_t) opts->timeout_ms;
  for (i = 0; i < 2 && !pty; i++)
    p->out[i].watch = sbx__watch_add (p->out[i].fd, EPOLLIN, SBX_W_OUT, p, i);
  if (p->stdin_fd >= 0)
    p->stdin_watch = sbx__watch_add (p->stdin_fd, p->stdin_pending.len || p->stdin_eof ? EPOLLOUT : 0,
                                     SBX_W_IN, p, 0);

  memset (&spawn, 0, sizeof spawn);
  spawn.req_id = p->req_id;
  spawn.uid = spawn.gid = uid;
  spawn.cwd = p->cwd;
  spawn.argv = opts->argv;
  spawn.envp = envp;
  spawn.rlimit_nofile = SBX_COMMAND_NOFILE;
  spawn.rlimit_fsize = sbx__effective_disk (&sb->limits);
  spawn.stdio[0] = use_pipe_stdin ? in_pipe[0] : sbx_core.devnull;
  spawn.stdio[1] = out_pipe[0][1];
  spawn.stdio[2] = out_pipe[1][1];
  /* init keeps our ends as well, so the command outlives a daemon crash. */
  spawn.keep[0] = p->stdin_fd; /* -1 without a stdin pipe */
  spawn.keep[1] = p->out[0].fd;
  spawn.keep[2] = p->out[1].fd;
  spawn.pty = pty;
  spawn.pty_cols = (uint16_t) opts->pty_cols;
  spawn.pty_rows = (uint16_t) opts->pty_rows;
  spawn.file_op = opts->file_op && sb->isolation == SBX_ISOLATION_VM;
  tag = process_tag (p);
  spawn.tag = tag;
  spawn.tag_len = tag ? strlen (tag) : 0;
  /* Without its watches (no memory for them), its output would never be
     read and it would never finish. */
  if (tag == NULL || (!pty && (!p->out[0].watch || !p->out[1].watch))
      || (p->stdin_fd >= 0 && !p->stdin_watch))
    rc = sbx_err_oom (err);
  else
    rc = sbx_iso_spawn (&sb->box, &spawn, err);
  free (tag);
  /* init has its own copies now (or never will). */
  close_and_reset (&out_pipe[0][1]);
  close_and_reset (&out_pipe[1][1]);
  close_and_reset (&in_pipe[0]);
  free_strv (envp);
  if (rc < 0)
    {
      p->spawn_errno = EIO;
      p->collected = 1;
      for (i = 0; i < 2; i++)
        sbx__outbuf_close (&p->out[i]);
      sbx__process_maybe_done (p);
      sbx__process_unref_locked (p);
      pthread_mutex_unlock (&sbx_core.lock);
      return NULL;
    }
  sbx__wake_loop ();
  {
    struct timespec ts;
    sbx__abstime (&ts, SPAWN_WAIT_MS);
    while (p->state == SBX_PROC_STARTING && !p->spawn_errno && !p->exited
           && (sb->state == SBX_SB_RUNNING || sb->state == SBX_SB_POOLED))
      if (pthread_cond_timedwait (&p->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
        break;
  }
  if (p->state == SBX_PROC_STARTING && !p->spawn_errno && !p->exited)
    {
      /* init did not answer: it is stuck or gone. */
      sbx__queue_kill (sb, "sandbox init stopped answering");
      pthread_mutex_unlock (&sbx_core.lock);
      sbx_process_unref (p);
      return sbx_err (err, SBX_E_UNAVAILABLE, "the sandbox did not start the command"), NULL;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  return p;

fail_proc:
  for (i = 0; i < 2; i++)
    {
      close_and_reset (&p->out[i].fd);
      free (p->out[i].data);
      close_and_reset (&out_pipe[i][1]);
    }
  close_and_reset (&p->stdin_fd);
  close_and_reset (&in_pipe[0]);
  sbx_buf_free (&p->stdin_pending);
  json_decref (p->argv);
  free (p->cwd);
  pthread_cond_destroy (&p->cond);
  free (p);
  return NULL;
fail_fds:
  for (i = 0; i < 2; i++)
    {
      close_and_reset (&out_pipe[i][0]);
      close_and_reset (&out_pipe[i][1]);
    }
  close_and_reset (&in_pipe[0]);
  close_and_reset (&in_pipe[1]);
  return NULL;
}

/* ---- queries and control ---------------------------------------------- */

struct sbx_process *
sbx_process_find (struct sbx_sandbox *sb, int pid, sbx_error_t **err)
{
  struct sbx_process *p;

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state == SBX_SB_RUNNING)
    for (p = sb->procs; p; p = p->next)
      if (p->pid == pid && pid > 0)
        {
          p->refs++;
          pthread_mutex_unlock (&sbx_core.lock);
          return p;
        }
  pthread_mutex_unlock (&sbx_core.lock);
  return sbx_err (err, SBX_E_NOT_FOUND, "process %d not found", pid), NULL;
}

struct sbx_process *
sbx_process_find_tag (struct sbx_sandbox *sb, const char *tag, sbx_error_t **err)
{
  struct sbx_process *p;

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state == SBX_SB_RUNNING && tag[0] != '\0')
    for (p = sb->procs; p; p = p->next)
      if (p->pid > 0 && p->state != SBX_PROC_DONE && strcmp (p->user_tag, tag) == 0)
        {
          p->refs++;
          pthread_mutex_unlock (&sbx_core.lock);
          return p;
        }
  pthread_mutex_unlock (&sbx_core.lock);
  return sbx_err (err, SBX_E_NOT_FOUND, "process with tag `%.64s` not found", tag), NULL;
}

int
sbx_process_wait (struct sbx_process *p, int64_t timeout_ms)
{
  struct timespec ts;
  int done;

  sbx__abstime (&ts, timeout_ms >= 0 ? timeout_ms : 0);
  pthread_mutex_lock (&sbx_core.lock);
  while (p->state != SBX_PROC_DONE)
    {
      if (timeout_ms < 0)
        pthread_cond_wait (&p->cond, &sbx_core.lock);
      else if (pthread_cond_timedwait (&p->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
        break;
    }
  done = p->state == SBX_PROC_DONE;
  pthread_mutex_unlock (&sbx_core.lock);
  return done;
}

int
sbx_process_signal (struct sbx_process *p, int signo, sbx_error_t **err)
{
  int rc;

  pthread_mutex_lock (&sbx_core.lock);
  if (p->state != SBX_PROC_RUNNING || p->exited || p->sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_CONFLICT, "process %d has finished", p->pid);
    }
  p->killed_by_api = 1;
  rc = sbx_iso_signal (&p->sb->box, p->req_id, signo, SBX_SIGNAL_GROUP | SBX_SIGNAL_API, err);
  pthread_mutex_unlock (&sbx_core.lock);
  return rc;
}

int
sbx_process_write_stdin (struct sbx_process *p, const void *data, size_t len, int eof,
                         int (*gone) (void *arg), void *arg, sbx_error_t **err)
{
  uint64_t target;

  pthread_mutex_lock (&sbx_core.lock);
  for (;;)
    {
      struct timespec ts;
      if (!p->stdin_open || p->stdin_fd < 0)
        {
          pthread_mutex_unlock (&sbx_core.lock);
          return sbx_err (err, SBX_E_CONFLICT, "stdin of process %d is closed", p->pid);
        }
      if (p->stdin_pending.len + len <= STDIN_PENDING_MAX || p->stdin_pending.len == 0)
        break;
      /* Back-pressure: wait until the command has read some. */
      sbx__abstime (&ts, 1000);
      if (pthread_cond_timedwait (&p->cond, &sbx_core.lock, &ts) == ETIMEDOUT && gone
          && gone (arg))
        {
          pthread_mutex_unlock (&sbx_core.lock);
          return sbx_err (err, SBX_E_UNAVAILABLE, "the client went away");
        }
    }
  if (len)
    {
      sbx_buf_append (&p->stdin_pending, data, len);
      if (p->stdin_pending.failed)
        {
          /* Nothing of it was added (appends are whole or not at all):
             the buffer is as before, and usable for a retry. */
          p->stdin_pending.failed = 0;
          pthread_mutex_unlock (&sbx_core.lock);
          return sbx_err_oom (err);
        }
      p->stdin_queued += len;
    }
  target = p->stdin_queued;
  if (eof)
    {
      p->stdin_eof = 1;
      p->stdin_open = 0;
    }
  sbx__watch_mod (p->stdin_watch, EPOLLOUT);
  /* Answer once the bytes are in the pipe: acknowledged input must not be
     lost with the daemon (the pipe outlives it, our buffer does not). */
  while (p->stdin_written < target)
    {
      struct timespec ts;
      if (p->stdin_fd < 0 || p->exited)
        {
          pthread_mutex_unlock (&sbx_core.lock);
          return sbx_err (err, SBX_E_CONFLICT, "process %d closed its stdin before reading it all",
                          p->pid);
        }
      sbx__abstime (&ts, 1000);
      if (pthread_cond_timedwait (&p->cond, &sbx_core.lock, &ts) == ETIMEDOUT && gone
          && gone (arg))
        {
          pthread_mutex_unlock (&sbx_core.lock);
          return sbx_err (err, SBX_E_UNAVAILABLE, "the client went away");
        }
    }
  pthread_mutex_unlock (&sbx_core.lock);
  return 0;
}

int
sbx_process_resize (struct sbx_process *p, unsigned cols, unsigned rows, sbx_error_t **err)
{
  struct timespec ts;
  uint64_t ticket;
  int answer;

  if (cols < 1 || cols > SBX_PTY_MAX || rows < 1 || rows > SBX_PTY_MAX)
    return sbx_err (err, SBX_E_INVALID, "terminal size must be 1..%d columns and rows",
                    SBX_PTY_MAX);
  pthread_mutex_lock (&sbx_core.lock);
  if (!p->pty)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_INVALID,
                      "process %d has no terminal (it was started without `pty`)", p->pid);
    }
  if (p->state != SBX_PROC_RUNNING || p->exited || p->sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_CONFLICT, "process %d has finished", p->pid);
    }
  if (sbx_iso_resize (&p->sb->box, p->req_id, cols, rows, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return -1;
    }
  /* init answers every RESIZE, in order: ours is answered once as many
     answers came as requests were sent up to ours. Waiting for it makes
     the size certain before the caller's next input reaches the command. */
  ticket = ++p->resize_sent;
  sbx__abstime (&ts, RESIZE_WAIT_MS);
  while (p->resize_acked < ticket && !p->exited && p->sb->state == SBX_SB_RUNNING)
    if (pthread_cond_timedwait (&p->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
      break;
  if (p->resize_acked >= ticket)
    answer = p->resize_errno;
  else if (p->exited || p->sb->state != SBX_SB_RUNNING)
    answer = ESRCH;
  else
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_UNAVAILABLE, "the sandbox did not resize the terminal");
    }
  pthread_mutex_unlock (&sbx_core.lock);
  if (answer == ESRCH)
    return sbx_err (err, SBX_E_CONFLICT, "process %d has finished", p->pid);
  if (answer != 0)
    return sbx_err_sys (err, answer > 0 && answer < 4096 ? answer : EIO, "resize the terminal");
  return 0;
}

void
sbx_process_collect (struct sbx_process *p)
{
  pthread_mutex_lock (&sbx_core.lock);
  p->collected = 1;
  if (p->state == SBX_PROC_DONE)
    unlink_process (p);
  pthread_mutex_unlock (&sbx_core.lock);
}

