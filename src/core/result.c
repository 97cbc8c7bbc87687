/* sbx: what a command came to, as JSON: exit code or signal, timeout,
 * out-of-memory, a reason for people, and the output kept. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/parse.h"
#include "util/utf8.h"


const char *
sbx__signal_name (int sig)
{
  static const struct
  {
    int sig;
    const char *name;
  } names[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
      {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},   {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},
      {SIGURG, "SIGURG"},   {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"},
      {SIGIO, "SIGIO"},     {SIGPWR, "SIGPWR"},   {SIGSTKFLT, "SIGSTKFLT"}, {0, NULL},
  };
  int i;

  for (i = 0; names[i].name; i++)
    if (names[i].sig == sig)
      return names[i].name;
  return NULL;
}

int
sbx_signal_from_name (const char *name)
{
  int i;
  char buf[16];

  if (strncmp (name, "SIG", 3) != 0)
    {
      snprintf (buf, sizeof buf, "SIG%s", name);
      name = buf;
    }
  for (i = 1; i < 32; i++)
    {
      const char *n = sbx__signal_name (i);
      if (n && strcmp (n, name) == 0)
        return i;
    }
  return -1;
}

static void
describe (struct sbx_process *p, char *reason, size_t cap)
{
  char limit[32];

  reason[0] = '\0';
  if (p->spawn_errno)
    {
      if (p->reason[0])
        snprintf (reason, cap, "%s", p->reason);
      else if (p->spawn_stage == SBX_STAGE_CHDIR)
        snprintf (reason, cap, "cwd `%s`: %s", p->cwd, strerror (p->spawn_errno));
      else if (p->spawn_stage == SBX_STAGE_PTY)
        snprintf (reason, cap, "cannot open a terminal: %s", strerror (p->spawn_errno));
      else if (p->spawn_stage == SBX_STAGE_FORK)
        snprintf (reason, cap, "cannot start: %s (the sandbox's process limit?)",
                  strerror (p->spawn_errno));
      else
        snprintf (reason, cap, "%s", strerror (p->spawn_errno));
      return;
    }
  if (p->timed_out)
    {
      snprintf (reason, cap, "timed out after %gs", (double) p->timeout_ms / 1000.0);
      return;
    }
  if (p->oom_killed)
    {
      sbx_format_size (p->sb->limits.memory_bytes, limit, sizeof limit);
      if (p->oom_outside)
        snprintf (reason, cap, "killed: out of memory on the host (below the limit of %s)",
                  limit);
      else
        snprintf (reason, cap, "killed: out of memory (limit %s)", limit);
      return;
    }
  if (p->reason[0])
    {
      snprintf (reason, cap, "%s", p->reason);
      return;
    }
  if (WIFSIGNALED (p->wait_status))
    {
      const char *n = sbx__signal_name (WTERMSIG (p->wait_status));
      if (n)
        snprintf (reason, cap, "killed by %s", n);
      else
        snprintf (reason, cap, "killed by signal %d", WTERMSIG (p->wait_status));
    }
}

static void
add_output (json_t *o, const char *key, struct sbx_outbuf *b, enum sbx_out_mode mode, int base64)
{
  struct sbx_buf s = SBX_BUF_INIT;
  cleanup_free char *linear = NULL;
  const char *kept = b->data ? b->data : "";
  size_t n = (size_t) (b->end - b->start);
  char tkey[32];

  /* TAIL and BLOCK buffers are rings: [start, end) are absolute offsets,
     not positions in data. */
  if (mode != SBX_OUT_HEAD && n > 0)
    {
      linear = malloc (n);
      if (linear == NULL)
        {
          sbx_json_alloc_mark_failed (); /* the answer becomes a 503 */
          return;
        }
      sbx__outbuf_copy (b, mode, b->start, linear, n);
      kept = linear;
    }
  if (base64)
    sbx_base64_encode (&s, kept, n);
  else
    sbx_utf8_sanitize (&s, kept, n, 1);
  if (s.failed)
    sbx_json_alloc_mark_failed ();
  json_object_set_new (o, key, json_stringn (s.data ? s.data : "", s.len));
  snprintf (tkey, sizeof tkey, "%s_truncated", key);
  json_object_set_new (o, tkey, json_boolean (b->dropped > 0 || b->start > 0));
  sbx_buf_free (&s);
}

json_t *
sbx__process_result_locked (struct sbx_process *p, int with_output, int base64)
{
  json_t *o = json_object ();
  char reason[200];

  json_object_set_new (o, "pid", p->pid > 0 ? json_integer (p->pid) : json_null ());
  if (p->spawn_errno)
    {
      json_object_set_new (o, "exit_code",
                           json_integer (p->spawn_errno == ENOENT
                                                 && p->spawn_stage == SBX_STAGE_EXEC
                                             ? 127
                                             : 126));
      json_object_set_new (o, "signal", json_null ());
    }
  else if (WIFEXITED (p->wait_status))
    {
      json_object_set_new (o, "exit_code", json_integer (WEXITSTATUS (p->wait_status)));
      json_object_set_new (o, "signal", json_null ());
    }
  else
    {
      const char *n = sbx__signal_name (WTERMSIG (p->wait_status));
      json_object_set_new (o, "exit_code", json_null ());
      json_object_set_new (o, "signal", n ? json_string (n) : json_integer (WTERMSIG (p->wait_status)));
    }
  json_object_set_new (o, "timed_out", json_boolean (p->timed_out));
  json_object_set_new (o, "oom_killed", json_boolean (p->oom_killed));
  json_object_set_new (o, "sandbox_ended", json_boolean (p->sandbox_ended));
  json_object_set_new (o, "duration",
                       json_real ((double) ((p->end_mono ? p->end_mono : sbx_mono_ms ())
                                            - p->start_mono)
                                  / 1000.0));
  describe (p, reason, sizeof reason);
  json_object_set_new (o, "reason", reason[0] ? json_string (reason) : json_null ());
  if (with_output)
    {
      add_output (o, "stdout", &p->out[0], p->mode, base64);
      add_output (o, "stderr", &p->out[1], p->mode, base64);
    }
  return o;
}

void
sbx__process_audit_locked (struct sbx_process *p)
{
  char reason[200];
  int code = -1;
  const char *sig = NULL;
  char signum[16];

  if (p->spawn_errno)
    code = p->spawn_errno == ENOENT && p->spawn_stage == SBX_STAGE_EXEC ? 127 : 126;
  else if (WIFEXITED (p->wait_status))
    code = WEXITSTATUS (p->wait_status);
  else
    {
      sig = sbx__signal_name (WTERMSIG (p->wait_status));
      if (sig == NULL)
        {
          snprintf (signum, sizeof signum, "%d", WTERMSIG (p->wait_status));
          sig = signum;
        }
    }
  describe (p, reason, sizeof reason);
  sbx_audit_command (p->sb->id, p->pid, p->argv, p->user, p->cwd, code, sig,
                     (p->end_mono ? p->end_mono : sbx_mono_ms ()) - p->start_mono,
                     reason[0] ? reason : NULL);
}

json_t *
sbx_process_result_json (struct sbx_process *p, int with_output, int base64)
{
  json_t *o;

  pthread_mutex_lock (&sbx_core.lock);
  o = sbx__process_result_locked (p, with_output, base64);
  pthread_mutex_unlock (&sbx_core.lock);
  return o;
}

static json_t *
info_locked (struct sbx_process *p)
{
  json_t *o = json_object ();

  json_object_set_new (o, "pid", p->pid > 0 ? json_integer (p->pid) : json_null ());
  json_object_set (o, "argv", p->argv);
  json_object_set_new (o, "cwd", json_string (p->cwd));
  json_object_set_new (o, "user", json_string (p->user));
  json_object_set_new (o, "running", json_boolean (p->state != SBX_PROC_DONE));
  json_object_set_new (o, "started_at", sbx_json_time (p->started_ms));
  json_object_set_new (o, "stdin_open", json_boolean (p->stdin_open));
  json_object_set_new (o, "background", json_boolean (p->background));
  json_object_set_new (o, "pty", json_boolean (p->pty));
  json_object_set_new (o, "tag", p->user_tag[0] ? json_string (p->user_tag) : json_null ());
  json_object_set (o, "env", p->env ? p->env : json_object ());
  if (p->state == SBX_PROC_DONE)
    {
      json_t *r = sbx__process_result_locked (p, 0, 0);
      json_object_update (o, r);
      json_decref (r);
    }
  return o;
}

json_t *
sbx_process_info_json (struct sbx_process *p)
{
  json_t *o;

  pthread_mutex_lock (&sbx_core.lock);
  o = info_locked (p);
  pthread_mutex_unlock (&sbx_core.lock);
  return o;
}

json_t *
sbx_process_list_json (struct sbx_sandbox *sb)
{
  json_t *arr = json_array ();
  struct sbx_process *p;

  pthread_mutex_lock (&sbx_core.lock);
  for (p = sb->procs; p; p = p->next)
    if (p->pid > 0)
      json_array_insert_new (arr, 0, info_locked (p));
  pthread_mutex_unlock (&sbx_core.lock);
  return arr;
}

