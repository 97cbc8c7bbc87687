/* sbx: E2B's process.Process service (spec/envd/process/process.proto):
 * Start and Connect stream a command's events (start, data, end) as
 * Connect envelopes; List, SendInput, CloseStdin, SendSignal and Update
 * are unary. Commands are the core's background processes: they outlive
 * the stream that started them (E2B's commands.run({background: true})
 * and handle.disconnect()), are listed until they end, and keep their
 * result for a later Connect. Output is lossless while the Start stream
 * reads it (the command waits for a slow reader, and only it); once that
 * stream is gone, output nobody reads is discarded. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/e2b.h"
#include "util/base64.h"

#define STREAM_CAP (256 * 1024)
#define MAX_ARGS 4096
#define MAX_TAG 63

/* ---- requests ----------------------------------------------------------- */

/* ProcessSelector {"pid": N} or {"tag": "name"}: the process, running or
   just ended. */
static struct sbx_process *
select_process (struct sbx_req *r, json_t *req, int running_only, sbx_error_t **err)
{
  json_t *sel = json_object_get (req, "process"), *pid, *tag;
  struct sbx_process *p;
  json_int_t n = 0;

  if (!json_is_object (sel))
    return sbx_err (err, SBX_E_INVALID, "`process` must be a selector {\"pid\": N}"), NULL;
  pid = json_object_get (sel, "pid");
  tag = json_object_get (sel, "tag");
  if ((pid != NULL) == (tag != NULL))
    return sbx_err (err, SBX_E_INVALID, "the selector names exactly one of `pid` and `tag`"),
           NULL;
  if (tag != NULL)
    {
      if (!json_is_string (tag) || json_string_length (tag) > MAX_TAG
          || strlen (json_string_value (tag)) != json_string_length (tag))
        return sbx_err (err, SBX_E_INVALID, "`tag` must be a string of at most 63 bytes"), NULL;
      return sbx_process_find_tag (r->sb, json_string_value (tag), err);
    }
  /* uint32: a number, or a string of digits in proto3 JSON. */
  if (json_is_integer (pid))
    n = json_integer_value (pid);
  else if (json_is_string (pid))
    {
      char *end;
      n = strtoll (json_string_value (pid), &end, 10);
      if (*end != '\0' || json_string_length (pid) == 0 || json_string_length (pid) > 10)
        n = -1;
    }
  else
    n = -1;
  if (n <= 0 || n > 4194304)
    return sbx_err (err, SBX_E_INVALID, "`pid` must be a process id"), NULL;
  p = sbx_process_find (r->sb, (int) n, err);
  if (p != NULL && running_only)
    {
      json_t *info = sbx_process_info_json (p);
      int running = json_is_true (json_object_get (info, "running"));
      json_decref (info);
      if (!running)
        {
          sbx_process_unref (p);
          return sbx_err (err, SBX_E_NOT_FOUND, "process with pid %d not found", (int) n), NULL;
        }
    }
  if (p == NULL && *err != NULL)
    {
      /* envd's words, which the SDK shows. */
      sbx_error_free (*err);
      *err = NULL;
      sbx_err (err, SBX_E_NOT_FOUND, "process with pid %d not found", (int) n);
    }
  return p;
}

/* Go's names for the signals (syscall.Signal.String), which envd puts in
   an end event's status and the SDK shows. */
static const char *
go_signal_name (const char *sig)
{
  static const char *const map[][2] = {
      {"SIGKILL", "killed"},           {"SIGTERM", "terminated"},
      {"SIGINT", "interrupt"},         {"SIGHUP", "hangup"},
      {"SIGSEGV", "segmentation fault"}, {"SIGABRT", "aborted"},
      {"SIGPIPE", "broken pipe"},      {"SIGQUIT", "quit"},
      {"SIGBUS", "bus error"},         {"SIGFPE", "floating point exception"},
      {"SIGILL", "illegal instruction"}, {"SIGUSR1", "user defined signal 1"},
      {"SIGUSR2", "user defined signal 2"}, {"SIGALRM", "alarm clock"},
      {"SIGXCPU", "CPU time limit exceeded"}, {"SIGXFSZ", "file size limit exceeded"},
      {"SIGSYS", "bad system call"},   {"SIGTRAP", "trace/breakpoint trap"},
  };
  size_t i;

  for (i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp (map[i][0], sig) == 0)
      return map[i][1];
  return sig;
}

/* EndEvent from the core's result of a finished command. */
static json_t *
end_event (json_t *result)
{
  json_t *code = json_object_get (result, "exit_code"), *end = json_object ();
  const char *sig = json_string_value (json_object_get (result, "signal"));
  const char *reason = json_string_value (json_object_get (result, "reason"));
  char status[96];
  int exited = json_is_integer (code);
  json_int_t rc = exited ? json_integer_value (code) : -1;

  if (exited)
    snprintf (status, sizeof status, "exit status %lld", (long long) rc);
  else
    snprintf (status, sizeof status, "signal: %s", go_signal_name (sig ? sig : "unknown"));
  json_object_set_new (end, "exitCode", json_integer (rc));
  json_object_set_new (end, "exited", json_boolean (exited));
  json_object_set_new (end, "status", json_string (status));
  /* envd's error is the status; sbx's reason says more (a timeout, an OOM
     kill), and the SDK puts it in CommandExitError. */
  if (!exited || rc != 0)
    json_object_set_new (end, "error", json_string (reason ? reason : status));
  return json_pack ("{s:{s:o}}", "event", "end", end);
}

/* ---- streams ------------------------------------------------------------ */

struct proc_stream
{
  struct sbx_reader reader;
  struct sbx_buf lines; /* NDJSON from the reader, not yet converted */
  int pty;
  /* The command was killed with its sandbox: after the output before it,
     the stream ends with E2B's `unavailable` (the SDK's TimeoutError)
     saying this, not with an end event. */
  char sandbox_ended[200];
  /* This stream's Connect-Timeout-Ms is the command's lifetime (Start, as
     envd's procCtx): when that ends the command, the stream ends with
     `deadline_exceeded` after its output, as envd's handler does once its
     context is done, never with an end event. Another reader (Connect) gets
     the end event, as from envd. */
  int deadline_is_lifetime;
  int deadline_passed;
};

/* One line of the core's stream as an E2B event; 0 when it has none. */
static int
convert_line (struct proc_stream *ps, const char *line, size_t len, struct sbx_buf *out, int *done)
{
  json_t *o = json_loadb (line, len, 0, NULL), *ev = NULL;
  const char *type = json_string_value (json_object_get (o, "type"));

  if (o == NULL || type == NULL)
    {
      json_decref (o);
      return -1;
    }
  if (strcmp (type, "start") == 0)
    ev = json_pack ("{s:{s:{s:O}}}", "event", "start", "pid", json_object_get (o, "pid"));
  else if (strcmp (type, "stdout") == 0 || strcmp (type, "stderr") == 0)
    ev = json_pack ("{s:{s:{s:O}}}", "event", "data",
                    ps->pty ? "pty" : type, json_object_get (o, "data"));
  else if (strcmp (type, "exit") == 0 && json_is_true (json_object_get (o, "sandbox_ended")))
    {
      /* The reason, then what the SDK says when its health check finds
         the sandbox gone (agents match on it). */
      const char *why = json_string_value (json_object_get (o, "reason"));
      snprintf (ps->sandbox_ended, sizeof ps->sandbox_ended,
                "%s: the sandbox was killed or reached its end of life", why ? why : "sandbox ended");
    }
  else if (strcmp (type, "exit") == 0 && ps->deadline_is_lifetime
           && json_is_true (json_object_get (o, "timed_out")))
    ps->deadline_passed = 1;
  else if (strcmp (type, "exit") == 0)
    {
      ev = end_event (o);
      *done = 1;
    }
  json_decref (o);
  if (ev == NULL)
    return 0; /* "dropped": E2B has no such event */
  return sbx_connect_append (out, ev);
}

static int
proc_next (void *ctx, struct sbx_buf *out, int64_t wait_ms, sbx_error_t **err)
{
  struct proc_stream *ps = ctx;
  int rc, done = 0;
  char *nl;

  if (ps->sandbox_ended[0])
    return sbx_err (err, SBX_E_UNAVAILABLE, "%s", ps->sandbox_ended);
  if (ps->deadline_passed)
    return sbx_err (err, SBX_E_GATEWAY_TIMEOUT, "the call's Connect-Timeout-Ms passed");
  rc = sbx_reader_next (&ps->reader, &ps->lines, wait_ms);
  if (rc < 0 || ps->lines.failed)
    return -1;
  while (ps->lines.len && (nl = memchr (ps->lines.data, '\n', ps->lines.len)) != NULL)
    {
      size_t n = (size_t) (nl - ps->lines.data);
      if (convert_line (ps, ps->lines.data, n, out, &done) < 0)
        return -1;
      sbx_buf_consume (&ps->lines, n + 1);
    }
  return done ? 1 : 0;
}

static void
proc_release (void *ctx, int completed)
{
  struct proc_stream *ps = ctx;

  (void) completed;
  /* The command goes on: E2B ends commands on their timeout or a signal,
     never because a stream went away. */
  sbx_reader_release (&ps->reader);
  sbx_buf_free (&ps->lines);
  free (ps);
}

static int
proc_wait (void *ctx, int64_t wait_ms)
{
  struct proc_stream *ps = ctx;

  return ps->sandbox_ended[0] || ps->deadline_passed || sbx_reader_wait (&ps->reader, wait_ms);
}

static const struct sbx_connect_stream_ops proc_ops = {
    .next = proc_next,
    .release = proc_release,
    .keepalive_json = "{\"event\":{\"keepalive\":{}}}",
    .wait = proc_wait,
};

static void
reply_process_stream (struct sbx_req *r, struct sbx_process *p, int deadline_is_lifetime)
{
  struct proc_stream *ps = calloc (1, sizeof *ps);
  json_t *info;

  if (ps == NULL)
    {
      sbx_connect_reply_stream_err (r, NULL);
      return;
    }
  info = sbx_process_info_json (p);
  ps->pty = json_is_true (json_object_get (info, "pty"));
  ps->deadline_is_lifetime = deadline_is_lifetime;
  json_decref (info);
  sbx_reader_init (&ps->reader, p, 1);
  sbx_connect_reply_stream (r, &proc_ops, ps);
}

/* PTY {"size": {"cols": C, "rows": R}}, each 1..1000. */
static int
parse_pty_size (json_t *pty, unsigned *cols, unsigned *rows, sbx_error_t **err)
{
  json_t *size = json_is_object (pty) ? json_object_get (pty, "size") : NULL;
  json_t *c = json_object_get (size, "cols"), *r = json_object_get (size, "rows");

  if (!json_is_object (size) || !json_is_integer (c) || !json_is_integer (r)
      || json_integer_value (c) < 1 || json_integer_value (c) > 1000 || json_integer_value (r) < 1
      || json_integer_value (r) > 1000)
    return sbx_err (err, SBX_E_INVALID,
                    "`pty` must be {\"size\": {\"cols\": 1..1000, \"rows\": 1..1000}}");
  *cols = (unsigned) json_integer_value (c);
  *rows = (unsigned) json_integer_value (r);
  return 0;
}

/* ---- Start -------------------------------------------------------------- */

struct start_request
{
  json_t *msg;
  char **argv;
  char cwd[SBX_FS_PATH_MAX];
  struct sbx_exec_opts opts;
};

static int
parse_start (struct sbx_req *r, struct start_request *s, sbx_error_t **err)
{
  static const char *const fields[] = {"process", "pty", "tag", "stdin", NULL};
  static const char *const proc_fields[] = {"cmd", "args", "envs", "cwd", NULL};
  json_t *proc, *args, *pty, *stdin_v;
  const char *cmd = NULL, *cwd = NULL, *tag = NULL;
  size_t i, n;

  if (sbx_connect_stream_request (r, &s->msg, err) < 0
      || sbx_params_only (s->msg, fields, err) < 0)
    return -1;
  proc = json_object_get (s->msg, "process");
  if (!json_is_object (proc))
    return sbx_err (err, SBX_E_INVALID, "`process` must be an object with `cmd`");
  if (sbx_params_only (proc, proc_fields, err) < 0
      || sbx_param_string (proc, "cmd", &cmd, err) < 0
      || sbx_param_string (proc, "cwd", &cwd, err) < 0
      || sbx_param_string_map (proc, "envs", 256, 256, 128 * 1024, 128 * 1024, 1, &s->opts.env,
                               err)
             < 0
      || sbx_param_string (s->msg, "tag", &tag, err) < 0)
    return -1;
  if (cmd == NULL || cmd[0] == '\0')
    return sbx_err (err, SBX_E_INVALID, "`process.cmd` is required");
  if (tag != NULL && strlen (tag) > MAX_TAG)
    return sbx_err (err, SBX_E_INVALID, "`tag` is longer than 63 bytes");
  args = json_object_get (proc, "args");
  if (args != NULL && !json_is_null (args)
      && (!json_is_array (args) || json_array_size (args) >= MAX_ARGS))
    return sbx_err (err, SBX_E_INVALID, "`process.args` must be a list of strings");
  n = json_is_array (args) ? json_array_size (args) : 0;
  s->argv = calloc (n + 2, sizeof *s->argv);
  if (s->argv == NULL)
    return sbx_err_oom (err);
  s->argv[0] = (char *) (uintptr_t) cmd;
  for (i = 0; i < n; i++)
    {
      json_t *a = json_array_get (args, i);
      if (!json_is_string (a) || strlen (json_string_value (a)) != json_string_length (a))
        return sbx_err (err, SBX_E_INVALID, "`process.args[%zu]` must be a string without NUL", i);
      s->argv[i + 1] = (char *) (uintptr_t) json_string_value (a);
    }
  s->opts.argv = s->argv;
  s->opts.user = sbx_e2b_user (r);
  if (cwd != NULL && cwd[0] != '\0')
    {
      if (sbx_e2b_path (r, s->opts.user, cwd, s->cwd, err) < 0)
        return -1;
      s->opts.cwd = s->cwd;
    }
  /* Absent means true (envd's legacy default); the SDK sends false unless
     the caller wants stdin. */
  stdin_v = json_object_get (s->msg, "stdin");
  if (stdin_v != NULL && !json_is_boolean (stdin_v))
    return sbx_err (err, SBX_E_INVALID, "`stdin` must be true or false");
  s->opts.stdin_open = stdin_v == NULL || json_is_true (stdin_v);
  pty = json_object_get (s->msg, "pty");
  if (pty != NULL && !json_is_null (pty))
    {
      if (parse_pty_size (pty, &s->opts.pty_cols, &s->opts.pty_rows, err) < 0)
        return -1;
      /* A terminal: output comes as data.pty, input goes to it. */
      s->opts.pty = 1;
      s->opts.stdin_open = 1;
    }
  s->opts.user_tag = tag;
  s->opts.background = 1;
  s->opts.mode = SBX_OUT_BLOCK;
  s->opts.out_cap = STREAM_CAP;
  return 0;
}

void
sbx_route_process_rpc_start (struct sbx_req *r)
{
  struct start_request s;
  sbx_error_t *err = NULL;
  struct sbx_process *p;
  int64_t timeout = sbx_connect_timeout_ms (r);
  json_t *info;

  memset (&s, 0, sizeof s);
  if (timeout < 0)
    sbx_err (&err, SBX_E_INVALID, "Connect-Timeout-Ms must be a number of milliseconds");
  if (err != NULL || parse_start (r, &s, &err) < 0)
    goto fail;
  /* envd makes the call's deadline the command's lifetime (E2B kills a
     command when its timeout passes, stream or no stream). */
  s.opts.timeout_ms = (uint64_t) timeout;
  p = sbx_process_start (r->sb, &s.opts, &err);
  if (p == NULL)
    goto fail;
  info = sbx_process_info_json (p);
  if (json_is_null (json_object_get (info, "pid")))
    {
      /* It never ran (a missing cwd, no such program). */
      const char *why = json_string_value (json_object_get (info, "reason"));
      sbx_err (&err, SBX_E_INVALID, "%s", why ? why : "the command could not start");
      json_decref (info);
      sbx_process_collect (p);
      sbx_process_unref (p);
      goto fail;
    }
  json_decref (info);
  reply_process_stream (r, p, 1);
  sbx_process_unref (p);
  free (s.argv);
  json_decref (s.msg);
  return;
fail:
  free (s.argv);
  json_decref (s.msg);
  sbx_connect_reply_stream_err (r, err);
}

void
sbx_route_process_rpc_connect (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *msg = NULL;
  struct sbx_process *p;

  if (sbx_connect_stream_request (r, &msg, &err) < 0
      || (p = select_process (r, msg, 0, &err)) == NULL)
    {
      json_decref (msg);
      sbx_connect_reply_stream_err (r, err);
      return;
    }
  reply_process_stream (r, p, 0);
  sbx_process_unref (p);
  json_decref (msg);
}

/* ---- unary -------------------------------------------------------------- */

void
sbx_route_process_rpc_list (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *msg = NULL, *all, *out, *info;
  size_t i;

  if (sbx_connect_unary_request (r, &msg, &err) < 0)
    {
      sbx_connect_reply_err (r, err);
      return;
    }
  json_decref (msg);
  all = sbx_process_list_json (r->sb);
  out = json_array ();
  json_array_foreach (all, i, info)
  {
    json_t *argv = json_object_get (info, "argv"), *args, *cfg, *pi;
    size_t k;
    if (!json_is_true (json_object_get (info, "running")))
      continue; /* envd lists running commands only */
    args = json_array ();
    for (k = 1; k < json_array_size (argv); k++)
      json_array_append (args, json_array_get (argv, k));
    cfg = json_pack ("{s:O, s:o, s:O, s:O}", "cmd", json_array_get (argv, 0), "args", args,
                     "envs", json_object_get (info, "env"), "cwd", json_object_get (info, "cwd"));
    pi = json_pack ("{s:o, s:O}", "config", cfg, "pid", json_object_get (info, "pid"));
    if (json_is_string (json_object_get (info, "tag")))
      json_object_set (pi, "tag", json_object_get (info, "tag"));
    json_array_append_new (out, pi);
  }
  json_decref (all);
  sbx_connect_reply_ok (r, json_pack ("{s:o}", "processes", out));
}

static int
client_gone (void *arg)
{
  return sbx_req_client_gone (arg);
}

void
sbx_route_process_rpc_send_input (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *msg = NULL, *input;
  struct sbx_process *p = NULL;
  struct sbx_buf bytes = SBX_BUF_INIT;
  const char *b64 = NULL;

  if (sbx_connect_unary_request (r, &msg, &err) < 0
      || (p = select_process (r, msg, 1, &err)) == NULL)
    goto out;
  input = json_object_get (msg, "input");
  if (!json_is_object (input) || json_object_size (input) != 1
      || (sbx_param_string (input, "stdin", &b64, &err) < 0
          || sbx_param_string (input, "pty", &b64, &err) < 0)
      || b64 == NULL)
    {
      if (err == NULL)
        sbx_err (&err, SBX_E_INVALID, "`input` must be {\"stdin\": BASE64} or {\"pty\": BASE64}");
      goto out;
    }
  if (sbx_base64_decode (&bytes, b64, strlen (b64)) < 0)
    {
      sbx_err (&err, SBX_E_INVALID, "the input is not valid base64");
      goto out;
    }
  if (bytes.failed)
    {
      sbx_err_oom (&err);
      goto out;
    }
  if (bytes.len > 0
      && sbx_process_write_stdin (p, bytes.data, bytes.len, 0, client_gone, r, &err) < 0)
    goto out;
  sbx_connect_reply_ok (r, json_object ());
out:
  if (err)
    sbx_connect_reply_err (r, err);
  sbx_buf_free (&bytes);
  sbx_process_unref (p);
  json_decref (msg);
}

void
sbx_route_process_rpc_close_stdin (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *msg = NULL;
  struct sbx_process *p = NULL;

  if (sbx_connect_unary_request (r, &msg, &err) < 0
      || (p = select_process (r, msg, 1, &err)) == NULL
      || sbx_process_write_stdin (p, NULL, 0, 1, client_gone, r, &err) < 0)
    sbx_connect_reply_err (r, err);
  else
    sbx_connect_reply_ok (r, json_object ());
  sbx_process_unref (p);
  json_decref (msg);
}

void
sbx_route_process_rpc_send_signal (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *msg = NULL, *sig;
  struct sbx_process *p = NULL;
  int signo = -1;

  if (sbx_connect_unary_request (r, &msg, &err) < 0)
    goto fail;
  sig = json_object_get (msg, "signal");
  /* The enum by name or number; envd knows SIGTERM and SIGKILL. */
  if (json_is_string (sig))
    signo = strcmp (json_string_value (sig), "SIGNAL_SIGKILL") == 0   ? SIGKILL
            : strcmp (json_string_value (sig), "SIGNAL_SIGTERM") == 0 ? SIGTERM
                                                                      : -1;
  else if (json_is_integer (sig))
    signo = json_integer_value (sig) == SIGKILL   ? SIGKILL
            : json_integer_value (sig) == SIGTERM ? SIGTERM
                                                  : -1;
  if (signo < 0)
    {
      sbx_err (&err, SBX_E_INVALID, "`signal` must be SIGNAL_SIGTERM or SIGNAL_SIGKILL");
      goto fail;
    }
  if ((p = select_process (r, msg, 1, &err)) == NULL || sbx_process_signal (p, signo, &err) < 0)
    goto fail;
  sbx_connect_reply_ok (r, json_object ());
  sbx_process_unref (p);
  json_decref (msg);
  return;
fail:
  sbx_process_unref (p);
  json_decref (msg);
  sbx_connect_reply_err (r, err);
}

void
sbx_route_process_rpc_update (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *msg = NULL;
  struct sbx_process *p = NULL;

  json_t *pty;
  unsigned cols = 0, rows = 0;

  if (sbx_connect_unary_request (r, &msg, &err) < 0
      || (p = select_process (r, msg, 1, &err)) == NULL)
    goto fail;
  pty = json_object_get (msg, "pty");
  if (pty == NULL || json_is_null (pty))
    {
      /* Nothing to change. */
      sbx_connect_reply_ok (r, json_object ());
      goto out;
    }
  if (parse_pty_size (pty, &cols, &rows, &err) < 0 || sbx_process_resize (p, cols, rows, &err) < 0)
    goto fail;
  sbx_connect_reply_ok (r, json_object ());
  goto out;
fail:
  sbx_connect_reply_err (r, err);
out:
  sbx_process_unref (p);
  json_decref (msg);
}
