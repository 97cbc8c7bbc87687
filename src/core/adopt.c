/* sbx: a new daemon takes over the sandboxes the previous one left.
 *
 * A sandbox handed out to a tenant is kept by its init (SBX_MSG_KEEP), so
 * a daemon that is killed, crashes or is upgraded leaves it running. At
 * start, every record still "running" is matched with the kernel's state
 * (iso/attach.c: the init in the sandbox's cgroup, through a pidfd) and
 * rebuilt, commands included; a sandbox that died meanwhile is recorded
 * as lost (or expired), and every other cgroup under ours (pool sandboxes,
 * half-built ones) is killed and removed.
 *
 * A hibernated VM (core/vm_hibernate.c) has nothing running to match: its
 * record says so, and it is taken back as it was, paused to disk, its
 * memory's file (which the parent's start keeps) waiting for a resume.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/template.h"
#include "util/cleanup.h"
#include "util/log.h"

#define ADOPTED_CAP_MIN (64 * 1024)
#define ADOPTED_CAP_MAX (16 * 1024 * 1024)

struct record
{
  struct sbx_sandbox_record r;
  char *strings[12]; /* owned copies behind r's pointers */
};

struct records
{
  struct record *v;
  size_t n, cap;
};

static void
collect (const struct sbx_sandbox_record *r, void *arg)
{
  struct records *rs = arg;
  struct record *c;

  if (rs->n == rs->cap)
    {
      rs->cap = rs->cap ? rs->cap * 2 : 16;
      rs->v = realloc (rs->v, rs->cap * sizeof *rs->v);
      if (rs->v == NULL)
        sbx_oom ();
    }
  c = &rs->v[rs->n++];
  c->r = *r;
  c->strings[0] = strdup (r->id);
  c->strings[1] = strdup (r->tenant);
  c->strings[2] = strdup (r->template_name);
  c->strings[3] = strdup (r->user);
  c->strings[4] = strdup (r->env_json);
  c->strings[5] = strdup (r->metadata_json);
  c->strings[6] = strdup (r->access_token);
  c->strings[7] = strdup (r->traffic_token);
  c->strings[8] = strdup (r->network_json);
  c->strings[9] = strdup (r->snapshot ? r->snapshot : "");
  c->strings[10] = strdup (r->pending ? r->pending : "");
  c->strings[11] = strdup (r->mask_host ? r->mask_host : "");
  for (size_t i = 0; i < sizeof c->strings / sizeof *c->strings; i++)
    if (c->strings[i] == NULL)
      sbx_oom ();
  c->r.id = c->strings[0];
  c->r.tenant = c->strings[1];
  c->r.template_name = c->strings[2];
  c->r.user = c->strings[3];
  c->r.env_json = c->strings[4];
  c->r.metadata_json = c->strings[5];
  c->r.access_token = c->strings[6];
  c->r.traffic_token = c->strings[7];
  c->r.network_json = c->strings[8];
  c->r.snapshot = c->strings[9];
  c->r.pending = c->strings[10];
  c->r.mask_host = c->strings[11];
}

/* The egress policy of a record, checked again (a record is ours, but a
   policy we cannot read must mean none, never "anything"). */
static json_t *
network_policy (const char *id, const char *text)
{
  json_t *in, *out = NULL;
  sbx_error_t *err = NULL;

  if (text == NULL || text[0] == '\0')
    return NULL;
  in = json_loads (text, JSON_REJECT_DUPLICATES, NULL);
  if (in == NULL || sbx_network_canon (in, &out, &err) < 0)
    {
      sbx_warn ("sandbox %s: its stored egress policy is unreadable; it has none now%s%s", id,
                err ? ": " : "", err ? err->msg : "");
      sbx_error_free (err);
      out = NULL;
    }
  json_decref (in);
  return out;
}

/* A JSON object of strings from the record, or an empty one. */
static json_t *
string_object (const char *text)
{
  json_t *o = json_loads (text, JSON_REJECT_DUPLICATES, NULL), *v;
  const char *k;

  if (!json_is_object (o))
    {
      json_decref (o);
      return json_object ();
    }
  json_object_foreach (o, k, v)
  {
    if (!json_is_string (v))
      {
        json_decref (o);
        return json_object ();
      }
  }
  return o;
}

void
sbx__process_adopt (struct sbx_sandbox *sb, const struct sbx_iso_attached *a)
{
  json_t *tag = json_loadb (a->tag, a->tag_len, JSON_REJECT_DUPLICATES, NULL), *argv;
  struct sbx_process *p;
  const char *s;
  json_int_t cap, started, timeout;
  int64_t now = sbx_now_ms (), now_mono = sbx_mono_ms ();
  int i;

  p = calloc (1, sizeof *p);
  if (p == NULL)
    sbx_oom ();
  pthread_cond_init (&p->cond, NULL);
  p->refs = 1; /* the list's */
  p->sb = sb;
  sb->refs++;
  p->req_id = a->req_id;
  p->pid = a->pid;
  p->state = SBX_PROC_RUNNING;
  /* Whoever waited for it is gone: it is listed, and collected by a wait,
     like a background command; its output keeps flowing into a ring. */
  p->background = 1;
  p->mode = SBX_OUT_TAIL;
  argv = json_object_get (tag, "argv");
  p->argv = json_is_array (argv) ? json_incref (argv) : json_array ();
  s = json_string_value (json_object_get (tag, "cwd"));
  p->cwd = strdup (s && s[0] == '/' ? s : "/");
  s = json_string_value (json_object_get (tag, "user_tag"));
  if (s != NULL && strlen (s) < sizeof p->user_tag)
    snprintf (p->user_tag, sizeof p->user_tag, "%s", s);
  p->env = json_object ();
  s = json_string_value (json_object_get (tag, "user"));
  snprintf (p->user, sizeof p->user, "%s", s && strcmp (s, "root") == 0 ? "root" : "user");
  started = json_integer_value (json_object_get (tag, "started_ms"));
  p->started_ms = started > 0 && started <= now ? started : now;
  p->start_mono = now_mono - (now - p->started_ms);
  cap = json_integer_value (json_object_get (tag, "cap"));
  cap = cap < ADOPTED_CAP_MIN ? ADOPTED_CAP_MIN : cap > ADOPTED_CAP_MAX ? ADOPTED_CAP_MAX : cap;
  timeout = json_integer_value (json_object_get (tag, "timeout_ms"));
  if (timeout > 0)
    p->timeout_ms = (uint64_t) timeout;
  if (timeout > 0 && !a->exited)
    p->deadline_mono = p->start_mono + timeout;
  json_decref (tag);
  if (p->cwd == NULL || p->env == NULL)
    sbx_oom ();
  p->oom_before = sb->oom_seen;

  p->stdin_fd = a->fds[0];
  p->stdin_open = p->stdin_fd >= 0;
  if (a->pty_fd >= 0)
    {
      /* On a terminal: its master is the output, and a second descriptor
         of it the input (epoll watches each descriptor once). Without
         one, the output still flows; the input is closed. */
      p->pty = 1;
      p->stdin_fd = fcntl (a->pty_fd, F_DUPFD_CLOEXEC, 3);
      p->stdin_open = p->stdin_fd >= 0;
    }
  for (i = 0; i < 2; i++)
    {
      int fd = p->pty ? (i == 0 ? a->pty_fd : -1) : a->fds[1 + i];
      sbx__outbuf_init (&p->out[i], (size_t) cap, fd);
      p->out[i].tty = p->pty && i == 0;
      if (p->out[i].fd >= 0)
        {
          fcntl (p->out[i].fd, F_SETFL, O_NONBLOCK);
          p->out[i].watch = sbx__watch_add (p->out[i].fd, EPOLLIN, SBX_W_OUT, p, i);
        }
    }
  if (p->stdin_fd >= 0)
    {
      fcntl (p->stdin_fd, F_SETFL, O_NONBLOCK);
      p->stdin_watch = sbx__watch_add (p->stdin_fd, 0, SBX_W_IN, p, 0);
    }
  if (a->req_id >= sb->next_req_id)
    sb->next_req_id = a->req_id;
  p->next = sb->procs;
  sb->procs = p;
  /* What we did to it before the restart (the reason a result gives). */
  p->timed_out = (a->causes & SBX_SIGNAL_TIMEOUT) != 0;
  p->killed_by_api = (a->causes & SBX_SIGNAL_API) != 0;
  if (a->exited)
    {
      p->exited = 1;
      p->wait_status = a->wait_status;
      /* Its duration ends when init reaped it, not now. */
      if (a->exited_ms >= p->started_ms && a->exited_ms <= now)
        p->end_mono = now_mono - (now - a->exited_ms);
      p->stdin_open = 0;
      sbx__watch_del (&p->stdin_watch);
      close_and_reset (&p->stdin_fd);
      for (i = 0; i < 2; i++)
        sbx__outbuf_start_drain (&p->out[i]);
      if (p->pty)
        sbx__process_drain_tty (p); /* ends with maybe_done */
      else
        sbx__process_maybe_done (p);
    }
}

/* Give up on a record: the sandbox is gone (or cannot be trusted). */
static void
end_record (const struct sbx_sandbox_record *r, const char *why)
{
  int expired = sbx_now_ms () >= r->expires_ms;
  char reason[200];
  sbx_error_t *err = NULL;

  snprintf (reason, sizeof reason, "%s", expired ? "sandbox expired" : why);
  sbx_warn ("sandbox %s was not re-adopted: %s", r->id, why);
  /* A hibernation's file whatever the record says: the previous daemon
     can have ended between the save and the record (none: nothing said). */
  sbx__vm_forget_hibernated (r->tenant, r->id);
  sbx_audit_lifecycle (expired ? "expired" : "lost", r->id, r->tenant, reason);
  if (sbx_store_sandbox_end (sbx_core.store, r->id, expired ? "expired" : "lost", reason,
                             sbx_now_ms (), &err)
      < 0)
    {
      sbx_warn ("recording the end of sandbox %s: %s", r->id, err->msg);
      sbx_error_free (err);
    }
}

/* The sandbox a record describes, its box left to the caller. */
static struct sbx_sandbox *
from_record (const struct sbx_sandbox_record *r)
{
  struct sbx_sandbox *sb = calloc (1, sizeof *sb);
  sbx_error_t *err = NULL;
  int64_t now = sbx_now_ms ();

  if (sb == NULL)
    sbx_oom ();
  sb->refs = 1; /* the registry's (and the loop's watches) */
  sb->state = SBX_SB_RUNNING;
  pthread_cond_init (&sb->cond, NULL);
  snprintf (sb->id, sizeof sb->id, "%s", r->id);
  snprintf (sb->tenant, sizeof sb->tenant, "%s", r->tenant);
  snprintf (sb->template_name, sizeof sb->template_name, "%s", r->template_name);
  snprintf (sb->user, sizeof sb->user, "%s", strcmp (r->user, "root") == 0 ? "root" : "user");
  sb->created_ms = r->created_ms;
  sb->expires_ms = r->expires_ms;
  sb->timeout_ms = r->timeout_ms > 0                ? (uint64_t) r->timeout_ms
                   : r->expires_ms > r->created_ms ? (uint64_t) (r->expires_ms - r->created_ms)
                                                   : 0;
  /* Already past: the loop expires it at once. */
  sb->expires_mono = sbx_mono_ms () + (r->expires_ms - now);
  sb->lifecycle = r->lifecycle & SBX_LIFECYCLE_MASK;
  snprintf (sb->snapshot, sizeof sb->snapshot, "%s", r->snapshot ? r->snapshot : "");
  sb->snapshot_copied = r->snapshot_copied;
  /* Checked again: it goes into a request head. */
  if (r->mask_host[0] && sbx_mask_host_ok (r->mask_host))
    snprintf (sb->mask_host, sizeof sb->mask_host, "%s", r->mask_host);
  else if (r->mask_host[0])
    sbx_warn ("sandbox %s: its stored Host mask is unreadable; its proxy keeps the client's",
              sb->id);
  sb->limits.memory_bytes = r->memory;
  sb->limits.cpu_milli = r->cpu_milli;
  sb->limits.pids = r->pids;
  sb->limits.disk_bytes = r->disk;
  sb->env = string_object (r->env_json);
  sb->metadata = string_object (r->metadata_json);
  sb->network = network_policy (sb->id, r->network_json);
  if (strlen (r->access_token) == 40 && strlen (r->traffic_token) == 40)
    {
      snprintf (sb->access_token, sizeof sb->access_token, "%s", r->access_token);
      snprintf (sb->traffic_token, sizeof sb->traffic_token, "%s", r->traffic_token);
    }
  else
    {
      /* A record from before the tokens (an empty one would let anyone
         in): new ones, kept for the next restart. */
      sbx_random_hex (sb->access_token, 20);
      sbx_random_hex (sb->traffic_token, 20);
      if (sbx_store_sandbox_set_tokens (sbx_core.store, sb->id, sb->access_token,
                                        sb->traffic_token, &err)
          < 0)
        {
          sbx_warn ("sandbox %s: %s", sb->id, err->msg);
          sbx_error_free (err);
        }
    }
  sb->slot = r->slot;
  /* Request ids are init's key for commands and files helpers, and the
     helpers in flight are not in init's answer: one of the old daemon's
     could end after we have handed its id to a new command. Start above
     anything a predecessor can have used: each daemon starts its sandboxes
     at 0 or at its own start time in ms << 16, and does not make 65536
     requests to one sandbox per millisecond it runs. */
  sb->next_req_id = (uint64_t) now << 16;
  return sb;
}

/* A hibernated VM: no process, no cgroup, nothing the parent holds; its
   slot (uid range) is ours again, and its file waits in the store. A file
   that is gone or damaged is found by the resume's restore, which answers
   as it would have before the restart (and leaves it hibernated: a kill
   ends it). */
static struct sbx_sandbox *
adopt_hibernated (const struct sbx_sandbox_record *r)
{
  struct sbx_sandbox *sb = from_record (r);

  sbx_iso_box_init (&sb->box);
  sb->box.uid_base = (uid_t) r->uid_base;
  sb->isolation = r->hibernated == SBX_HIBERNATED_FILESYSTEM ? SBX_ISOLATION_NS : SBX_ISOLATION_VM;
  sb->hibernated = r->hibernated;
  sb->paused = 1;
  sb->remaining_ms = r->remaining_ms > 0 ? r->remaining_ms : 0;
  sb->paused_mono = sbx_mono_ms ();
  pthread_mutex_lock (&sbx_core.lock);
  sbx_core.slots[r->slot] = 1;
  sb->next = sbx_core.sandboxes;
  sbx_core.sandboxes = sb;
  sbx_core.running++;
  pthread_mutex_unlock (&sbx_core.lock);
  sbx_info ("re-adopted sandbox %s (%s)", sb->id,
            r->hibernated == SBX_HIBERNATED_FILESYSTEM ? "paused without its memory"
                                                       : "a hibernated VM");
  sbx_audit_lifecycle ("adopted", sb->id, sb->tenant, NULL);
  return sb;
}

static struct sbx_sandbox *
adopt_one (const struct sbx_sandbox_record *r)
{
  struct sbx_sandbox *sb;
  struct sbx_iso_attached *a;
  struct sbx_iso_box box;
  sbx_error_t *err = NULL;
  int rc;

  if (r->slot >= sbx_core.nslots || sbx_core.slots[r->slot]
      || r->uid_base != (int64_t) sbx__slot_uid_base (r->slot))
    {
      end_record (r, "its id range is not this daemon's (was --uid-base or --max-sandboxes changed?)");
      return NULL;
    }
  if (r->pending[0] != '\0')
    {
      /* Made by a fork the previous daemon did not finish: its client got
         an error or nothing, never this sandbox. Half a fork is no fork
         (the parent kills what is not adopted). */
      end_record (r, "its fork did not complete (the daemon stopped during it)");
      return NULL;
    }
  if (r->hibernated)
    return adopt_hibernated (r);
  /* Checked before the cast to pid_t: a stored value that names a
     process only once cut to 32 bits is a corrupt record, not a pid. */
  if (r->init_pid <= 1 || r->init_pid > INT32_MAX)
    {
      end_record (r, "no valid init pid recorded");
      return NULL;
    }
  if (sbx_host_adopt (r->slot, r->id, (pid_t) r->init_pid, &box, &err) < 0)
    {
      /* A VM's relay is gone (no running VM outlives its daemon). */
      end_record (r, err->msg);
      sbx_error_free (err);
      return NULL;
    }
  sb = from_record (r);
  a = malloc (sizeof *a);
  if (a == NULL)
    sbx_oom ();
  sb->box = box;
  sbx_core.slots[r->slot] = 1;
  sb->oom_seen = sbx_host_oom_kills (sb->slot);

  pthread_mutex_lock (&sbx_core.lock);
  while ((rc = sbx_iso_next_attached (&sb->box, a, &err)) == 1)
    sbx__process_adopt (sb, a);
  if (rc == 0 && r->paused)
    {
      /* It was paused: adopting it thawed it for init to answer (a few
         milliseconds); frozen again before anything can reach it, its
         clock still standing. */
      sbx_error_t *e = NULL;
      sb->paused = 1;
      sb->remaining_ms = r->remaining_ms > 0 ? r->remaining_ms : 0;
      sb->paused_mono = sbx_mono_ms ();
      if (sbx_iso_set_deadline (&sb->box, 0, &e) < 0 || sbx_host_freeze (sb->slot, 1, &e) < 0)
        {
          rc = -1;
          err = e;
        }
    }
  sb->ctl_watch = sbx__watch_add (sb->box.ctl, EPOLLIN, SBX_W_CTL, sb, 0);
  sb->pidfd_watch = sbx__watch_add (sb->box.pidfd, EPOLLIN, SBX_W_PIDFD, sb, 0);
  sb->next = sbx_core.sandboxes;
  sbx_core.sandboxes = sb;
  sbx_core.running++;
  pthread_mutex_unlock (&sbx_core.lock);
  free (a);
  if (rc < 0)
    {
      /* Half a picture of a sandbox is worse than none. */
      sbx_warn ("sandbox %s: %s", sb->id, err->msg);
      sbx_error_free (err);
      sbx_sandbox_kill (sb, "could not be re-adopted", NULL);
      return NULL;
    }
  sbx_info ("re-adopted sandbox %s (init pid %d)", sb->id, (int) sb->box.pid);
  sbx_audit_lifecycle ("adopted", sb->id, sb->tenant, NULL);
  return sb;
}

void
sbx__adopt_all (void)
{
  struct records rs = {0};
  sbx_error_t *err = NULL;
  size_t i, adopted = 0;

  sbx__snapshot_roll_back_pending ();
  if (sbx_store_sandbox_running (sbx_core.store, collect, &rs, &err) < 0)
    {
      sbx_warn ("reading running sandboxes: %s", err->msg);
      sbx_error_free (err);
    }
  for (i = 0; i < rs.n; i++)
    {
      if (adopt_one (&rs.v[i].r) != NULL)
        adopted++;
      for (size_t k = 0; k < sizeof rs.v[i].strings / sizeof *rs.v[i].strings; k++)
        free (rs.v[i].strings[k]);
    }
  free (rs.v);
  /* The parent kills every sandbox not adopted: pool sandboxes, half-built
     ones, and those whose init is gone. */
  if (sbx_host_adopt_done (&err) < 0)
    {
      sbx_warn ("removing leftover sandboxes: %s", err->msg);
      sbx_error_free (err);
    }
  if (rs.n > 0)
    sbx_info ("re-adopted %zu of %zu sandbox(es) left running", adopted, rs.n);
}
