/* sbx CLI: `sbx run`, `sbx exec` and `sbx create`.
 *
 * run = create a sandbox, copy --files in, exec the command with its output
 * streamed to ours, delete the sandbox; the sandbox is deleted on every
 * path out, including SIGINT/SIGTERM/SIGHUP. One keep-alive connection
 * carries create, uploads, exec and delete.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "cli/events.h"
#include "cli/opts.h"
#include "cli/progress.h"
#include "cli/tty.h"
#include "util/cleanup.h"

#define RUN_OPTS                                                               \
  (SBX_OPT_TIMEOUT | SBX_OPT_MEMORY | SBX_OPT_CPUS | SBX_OPT_PIDS | SBX_OPT_DISK \
   | SBX_OPT_ENV | SBX_OPT_WORKDIR | SBX_OPT_USER | SBX_OPT_TEMPLATE | SBX_OPT_ISOLATION           \
   | SBX_OPT_FILE | SBX_OPT_INTERACTIVE | SBX_OPT_TTY | SBX_OPT_NET)
#define CREATE_OPTS                                                            \
  (SBX_OPT_TIMEOUT | SBX_OPT_MEMORY | SBX_OPT_CPUS | SBX_OPT_PIDS | SBX_OPT_DISK \
   | SBX_OPT_ENV | SBX_OPT_USER | SBX_OPT_TEMPLATE | SBX_OPT_ISOLATION | SBX_OPT_FILE | SBX_OPT_NET                \
   | SBX_OPT_SNAPSHOT | SBX_OPT_ON_TIMEOUT)
#define EXEC_OPTS                                                              \
  (SBX_OPT_TIMEOUT | SBX_OPT_ENV | SBX_OPT_WORKDIR | SBX_OPT_USER | SBX_OPT_FILE \
   | SBX_OPT_INTERACTIVE | SBX_OPT_TTY)

/* With --timeout, run's sandbox outlives the command by this much, so that
   the command's timeout (124) fires before the sandbox expires (137). */
#define RUN_LIFETIME_SLACK_MS 10000

/* Stdin is forwarded in chunks of at most this much, as they are read. */
#define STDIN_CHUNK (64 * 1024)

/* ------------------------------------------------------------------------ */
/* Signals */

static volatile sig_atomic_t got_signal;
static int signal_pipe[2] = {-1, -1};

/* First signal: remember it and wake whatever waits on the daemon (through
   the self-pipe), so that the sandbox is removed before we exit. A second
   signal while cleaning up means "now": exit without waiting. */
static void
on_signal (int sig)
{
  int saved = errno;
  ssize_t r;

  if (got_signal != 0)
    {
      sbx_cli_tty_restore (); /* tcsetattr: async-signal-safe; _exit runs no atexit */
      _exit (128 + sig);
    }
  got_signal = sig;
  r = write (signal_pipe[1], "", 1);
  (void) r;
  errno = saved;
}

static int
install_signals (sbx_error_t **err)
{
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa;
  size_t i;

  if (pipe2 (signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
    return sbx_err_sys (err, errno, "pipe2");
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigfillset (&sa.sa_mask);
  /* No SA_RESTART: a write to a stdout nobody reads must give way to the
     signal (see write_output); waits on the daemon watch the self-pipe. */
  sa.sa_flags = 0;
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    if (sigaction (sigs[i], &sa, NULL) < 0)
      return sbx_err_sys (err, errno, "sigaction");
  /* A closed stdout (`sbx run ... | head -1`) must not kill us before the
     sandbox is removed: take EPIPE instead. */
  sa.sa_handler = SIG_IGN;
  sa.sa_flags = 0;
  if (sigaction (SIGPIPE, &sa, NULL) < 0)
    return sbx_err_sys (err, errno, "sigaction");
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Request bodies */

static int
set_string (json_t *obj, const char *key, const char *value, const char *what,
            sbx_error_t **err)
{
  json_t *s = json_string (value);

  if (s == NULL)
    return sbx_err (err, SBX_E_INVALID, "%s `%s` is not valid UTF-8 (the API takes UTF-8 text)",
                    what, value);
  json_object_set_new (obj, key, s);
  return 0;
}

static json_t *
create_body (const struct sbx_cli_opts *o, int for_run, sbx_error_t **err)
{
  json_t *b = json_object ();

  if (b == NULL)
    sbx_oom ();
  if (o->template_name != NULL
      && set_string (b, "template", o->template_name, "--template", err) < 0)
    goto fail;
  if (o->isolation != NULL
      && set_string (b, "isolation", o->isolation, "--isolation", err) < 0)
    goto fail;
  if (o->snapshot != NULL && set_string (b, "snapshot", o->snapshot, "--snapshot", err) < 0)
    goto fail;
  if (o->on_timeout != NULL
      && set_string (b, "on_timeout", o->on_timeout, "--on-timeout", err) < 0)
    goto fail;
  if (o->timeout != NULL)
    json_object_set_new (b, "timeout",
                         sbx_cli_json_duration (for_run ? o->timeout_ms + RUN_LIFETIME_SLACK_MS
                                                        : o->timeout_ms));
  if (o->memory != NULL)
    json_object_set_new (b, "memory", sbx_cli_json_size (o->memory_bytes));
  if (o->cpus != NULL)
    json_object_set_new (b, "cpus", sbx_cli_json_cpus (o->cpus_milli));
  if (o->pids != NULL)
    json_object_set_new (b, "pids", sbx_cli_json_size (o->pids_n));
  if (o->disk != NULL)
    json_object_set_new (b, "disk", sbx_cli_json_size (o->disk_bytes));
  if (o->env != NULL)
    json_object_set (b, "env", o->env);
  if (o->network != NULL)
    json_object_set (b, "network", o->network);
  if (!for_run && o->user != NULL && set_string (b, "user", o->user, "--user", err) < 0)
    goto fail;
  return b;
fail:
  json_decref (b);
  return NULL;
}

static json_t *
exec_body (const struct sbx_cli_opts *o, char **cmd, int n, int with_env, sbx_error_t **err)
{
  json_t *b = json_object (), *argv = json_array ();
  int i;

  if (b == NULL || argv == NULL)
    sbx_oom ();
  json_object_set_new (b, "argv", argv);
  for (i = 0; i < n; i++)
    {
      json_t *s = json_string (cmd[i]);
      if (s == NULL)
        {
          sbx_err (err, SBX_E_INVALID,
                   "argument `%s` is not valid UTF-8 (the API takes UTF-8 text)", cmd[i]);
          goto fail;
        }
      json_array_append_new (argv, s);
    }
  json_object_set_new (b, "stream", json_true ());
  json_object_set_new (b, "encoding", json_string ("base64"));
  if (o->workdir != NULL && set_string (b, "cwd", o->workdir, "--workdir", err) < 0)
    goto fail;
  if (o->user != NULL && set_string (b, "user", o->user, "--user", err) < 0)
    goto fail;
  if (o->timeout != NULL)
    json_object_set_new (b, "timeout", sbx_cli_json_duration (o->timeout_ms));
  if (with_env && o->env != NULL)
    json_object_set (b, "env", o->env);
  if (o->tty)
    {
      /* a terminal the size of ours, and our TERM unless -e set one, as
         docker run -t does; stdin is then open (the API implies it) */
      unsigned cols, rows;
      const char *term = getenv ("TERM");
      sbx_cli_tty_size (&cols, &rows);
      json_object_set_new (b, "pty", json_pack ("{s:I,s:I}", "cols", (json_int_t) cols, "rows",
                                                (json_int_t) rows));
      if (term != NULL && term[0] != '\0'
          && (o->env == NULL || json_object_get (o->env, "TERM") == NULL))
        {
          /* a copy: -e's object is shared with the create body */
          json_t *env = json_object_get (b, "env");
          env = env ? json_copy (env) : json_object ();
          if (env == NULL)
            sbx_oom ();
          json_object_set_new (b, "env", env);
          if (set_string (env, "TERM", term, "TERM", err) < 0)
            goto fail;
        }
    }
  else if (o->interactive)
    json_object_set_new (b, "stdin_open", json_true ());
  return b;
fail:
  json_decref (b);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* --file */

struct upload
{
  const char *local; /* borrowed */
  char *remote;      /* owned */
  int fd;            /* owned */
  uint64_t size;
  int mode;
};

static void
free_uploads (struct upload *u, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++)
    {
      free (u[i].remote);
      close_and_reset (&u[i].fd);
    }
  free (u);
}

/* Open every --file before anything is created, so that a typo fails fast
   and changes nothing. */
static struct upload *
prepare_uploads (const struct sbx_cli_opts *o, sbx_error_t **err)
{
  struct upload *u = calloc (o->n_files + 1, sizeof *u);
  size_t i;

  if (u == NULL)
    sbx_oom ();
  for (i = 0; i < o->n_files; i++)
    u[i].fd = -1;
  for (i = 0; i < o->n_files; i++)
    {
      const struct sbx_cli_file *f = &o->files[i];
      const char *remote = f->remote;
      size_t rlen = strlen (remote);
      struct stat st;
      char scratch[256];

      u[i].local = f->local;
      u[i].fd = open (f->local, O_RDONLY | O_CLOEXEC);
      if (u[i].fd < 0)
        {
          sbx_err_sys (err, errno, "--file: %s", f->local);
          goto fail;
        }
      if (fstat (u[i].fd, &st) < 0)
        {
          sbx_err_sys (err, errno, "--file: %s", f->local);
          goto fail;
        }
      if (!S_ISREG (st.st_mode))
        {
          sbx_err (err, SBX_E_INVALID, "--file: %s is not a regular file", f->local);
          goto fail;
        }
      u[i].size = (uint64_t) st.st_size;
      u[i].mode = (int) (st.st_mode & 07777);
      if (rlen == 0 || remote[rlen - 1] == '/')
        {
          /* REMOTE names a directory: keep the local name. */
          const char *base = sbx_cli_basename (f->local, scratch, sizeof scratch);
          if (asprintf (&u[i].remote, "%s%s", remote, base) < 0)
            sbx_oom ();
        }
      else if ((u[i].remote = strdup (remote)) == NULL)
        sbx_oom ();
    }
  return u;
fail:
  free_uploads (u, o->n_files);
  return NULL;
}

static int
do_uploads (struct sbx_api *api, const char *id, struct upload *u, size_t n,
            sbx_error_t **err)
{
  size_t i;

  for (i = 0; i < n; i++)
    if (sbx_api_put_file (api, id, u[i].remote, u[i].fd, u[i].size, u[i].mode, 1, err) < 0)
      return sbx_err_wrap (err, "--file %s", u[i].local);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* -i: stdin forwarding */

/* The thread has its own endpoint and connection: the main thread may exit
   (and free its own) while this one still waits for input. */
struct stdin_fwd
{
  struct sbx_api api; /* owned */
  char *target;       /* owned; ".../processes/PID/stdin" */
};

static void
stdin_fwd_fail (sbx_error_t *e)
{
  /* The process finished or closed its stdin: nothing left to feed. */
  if (e->kind != SBX_E_CONFLICT && e->kind != SBX_E_NOT_FOUND)
    sbx_cli_message ("stdin: %s", e->msg);
  sbx_error_free (e);
}

static void *
stdin_main (void *arg)
{
  struct stdin_fwd *f = arg;
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  char *buf = malloc (STDIN_CHUNK);
  cleanup_free char *eof_target = NULL;
  sbx_error_t *e = NULL;

  if (buf == NULL)
    sbx_oom ();
  req.method = "POST";
  req.content_type = "application/octet-stream";
  req.has_body = 1;
  for (;;)
    {
      ssize_t n = read (STDIN_FILENO, buf, STDIN_CHUNK);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          sbx_cli_message ("reading stdin: %s", strerror (errno));
          break;
        }
      if (n == 0)
        break;
      req.target = f->target;
      req.body = buf;
      req.body_len = (size_t) n;
      if (sbx_api_request (&f->api, NULL, &req, NULL, NULL, NULL, &e) < 0)
        {
          stdin_fwd_fail (e);
          goto out;
        }
    }
  if (asprintf (&eof_target, "%s?eof=1", f->target) < 0)
    sbx_oom ();
  req.target = eof_target;
  req.body = NULL;
  req.body_len = 0;
  if (sbx_api_request (&f->api, NULL, &req, NULL, NULL, NULL, &e) < 0)
    stdin_fwd_fail (e);
out:
  free (buf);
  sbx_api_clear (&f->api);
  free (f->target);
  free (f);
  return NULL;
}

static int
start_stdin_forwarder (const char *id, json_int_t pid, sbx_error_t **err)
{
  struct stdin_fwd *f = calloc (1, sizeof *f);
  struct sbx_buf target = SBX_BUF_INIT;
  int rc;

  if (f == NULL)
    sbx_oom ();
  sbx_api_sandbox_path (&target, id, NULL);
  sbx_buf_printf (&target, "/processes/%lld/stdin", (long long) pid);
  if (sbx_api_init (&f->api, err) < 0)
    {
      sbx_buf_free (&target);
      free (f);
      return -1;
    }
  f->target = sbx_buf_steal (&target);
  rc = sbx_cli_thread_detached (stdin_main, f);
  if (rc != 0)
    {
      sbx_api_clear (&f->api);
      free (f->target);
      free (f);
      return sbx_err_sys (err, rc, "starting the stdin thread");
    }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The output stream */

struct stream
{
  const char *id; /* borrowed */
  int interactive;
  int tty;
  struct sbx_ndjson nd;
  struct sbx_buf data;  /* owned; decoded output, reused for every event */
  json_t *exit_event;   /* owned */
  int output_errno;     /* writing our stdout or stderr failed */
};

/* Write the command's output to ours. Like sbx_write_all, except that a
   signal gets us out of a write blocked on a stdout nobody reads. */
static int
write_output (int fd, const char *p, size_t n)
{
  while (n > 0)
    {
      ssize_t w;

      if (got_signal)
        {
          errno = EINTR;
          return -1;
        }
      w = write (fd, p, n);
      if (w < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN)
            return sbx_write_all (fd, p, n);
          return -1;
        }
      p += w;
      n -= (size_t) w;
    }
  return 0;
}

static int
on_event_line (void *ctx, const char *line, size_t len, sbx_error_t **err)
{
  struct stream *s = ctx;
  enum sbx_event_type type;
  json_t *obj = NULL, *pid;
  int fd, rc = 0;

  if (sbx_event_parse (line, len, &type, &s->data, &obj, err) < 0)
    return -1;
  switch (type)
    {
    case SBX_EVENT_STDOUT:
    case SBX_EVENT_STDERR:
      fd = type == SBX_EVENT_STDOUT ? STDOUT_FILENO : STDERR_FILENO;
      if (s->data.len > 0 && write_output (fd, s->data.data, s->data.len) < 0)
        {
          s->output_errno = errno;
          rc = sbx_err_sys (err, errno, "writing to %s", fd == STDOUT_FILENO ? "stdout" : "stderr");
        }
      break;
    case SBX_EVENT_START:
      pid = json_object_get (obj, "pid");
      if (s->interactive && json_is_integer (pid))
        rc = start_stdin_forwarder (s->id, json_integer_value (pid), err);
      if (rc == 0 && s->tty && json_is_integer (pid))
        rc = sbx_cli_tty_forward_resizes (s->id, json_integer_value (pid), err);
      break;
    case SBX_EVENT_EXIT:
      json_decref (s->exit_event);
      s->exit_event = steal_pointer (&obj);
      break;
    case SBX_EVENT_DROPPED:
      sbx_cli_message ("%lld bytes of stdout and %lld bytes of stderr were dropped",
                       (long long) json_integer_value (json_object_get (obj, "stdout")),
                       (long long) json_integer_value (json_object_get (obj, "stderr")));
      break;
    case SBX_EVENT_KEEPALIVE:
    case SBX_EVENT_UNKNOWN:
      break;
    default:
      break;
    }
  json_decref (obj);
  return rc;
}

static int
on_stream_data (void *ctx, const char *data, size_t len, sbx_error_t **err)
{
  struct stream *s = ctx;
  return sbx_ndjson_feed (&s->nd, data, len, on_event_line, s, err);
}

/* POST exec in stream mode and copy the command's output to ours as it
   comes. On success s->exit_event holds the exit event. */
static int
exec_stream (struct sbx_api *api, const char *id, const json_t *body, struct stream *s,
             sbx_error_t **err)
{
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_buf target = SBX_BUF_INIT;
  cleanup_free char *text = json_dumps (body, JSON_COMPACT);
  int status;

  if (text == NULL)
    sbx_oom ();
  sbx_api_sandbox_path (&target, id, "/exec");
  req.method = "POST";
  req.target = target.data;
  req.content_type = "application/json";
  req.body = text;
  req.body_len = strlen (text);
  req.has_body = 1;
  status = sbx_api_request (api, NULL, &req, on_stream_data, s, NULL, err);
  sbx_buf_free (&target);
  if (status < 0)
    return -1;
  if (sbx_ndjson_finish (&s->nd, on_event_line, s, err) < 0)
    return -1;
  if (s->exit_event == NULL)
    return sbx_err (err, SBX_E_UNAVAILABLE,
                    "the daemon ended the command's output without an exit status");
  return 0;
}

static void
stream_clear (struct stream *s)
{
  sbx_ndjson_clear (&s->nd);
  sbx_buf_free (&s->data);
  json_decref (s->exit_event);
  s->exit_event = NULL;
}

/* Run `body` in sandbox `id`, return the exit status to report. */
static int
run_in_sandbox (struct sbx_api *api, const char *id, struct upload *uploads,
                size_t n_uploads, const json_t *body, const char *cmd, int interactive, int tty)
{
  cleanup_error sbx_error_t *e = NULL;
  struct stream s;
  struct sbx_buf msg = SBX_BUF_INIT;
  int status, raw = 0, failed;

  memset (&s, 0, sizeof s);
  s.id = id;
  s.interactive = interactive;
  s.tty = tty;

  sbx_http_conn_set_interrupt_fd (api->conn, signal_pipe[0]);
  failed = do_uploads (api, id, uploads, n_uploads, &e) < 0;
  /* -it: every key to the sandbox's terminal while the command runs */
  if (!failed && tty && interactive)
    {
      failed = sbx_cli_tty_raw (&e) < 0;
      raw = !failed;
    }
  failed = failed || exec_stream (api, id, body, &s, &e) < 0;
  if (raw)
    sbx_cli_tty_restore (); /* before any message of ours */
  if (failed)
    {
      if (got_signal)
        status = 128 + got_signal;
      else if (s.output_errno == EPIPE)
        status = 128 + SIGPIPE; /* what a local command gets from `| head` */
      else
        status = sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_SBX);
      /* A stream abandoned midway (signal, closed stdout) was dropped by
         sbx_http_do, and the daemon kills the command when it sees that. */
    }
  else
    {
      status = sbx_exit_status (s.exit_event, cmd, &msg);
      if (msg.len > 0)
        sbx_cli_message ("%s", msg.data);
    }
  sbx_http_conn_set_interrupt_fd (api->conn, -1);
  sbx_buf_free (&msg);
  stream_clear (&s);
  return status;
}

static void
delete_sandbox (struct sbx_api *api, const char *id)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_buf target = SBX_BUF_INIT;

  sbx_api_sandbox_path (&target, id, NULL);
  if (sbx_api_json (api, "DELETE", target.data, NULL, NULL, &e) < 0
      && e->kind != SBX_E_NOT_FOUND)
    sbx_cli_message ("removing sandbox %s: %s", id, e->msg);
  sbx_buf_free (&target);
}

/* POST /v1/sandboxes; returns the new id (owned) or NULL. */
static char *
create_sandbox (struct sbx_api *api, const json_t *body, sbx_error_t **err)
{
  json_t *sandbox = NULL;
  const char *id;
  char *copy;
  /* a line on a terminal if this takes more than a second */
  int progress = sbx_cli_progress_start (body), rc;

  rc = sbx_api_json (api, "POST", "/v1/sandboxes", body, &sandbox, err);
  sbx_cli_progress_stop (progress);
  if (rc < 0)
    return NULL;
  id = json_string_value (json_object_get (sandbox, "id"));
  if (id == NULL || id[0] == '\0')
    {
      json_decref (sandbox);
      sbx_err (err, SBX_E_SYSTEM, "the daemon created a sandbox but sent no id");
      return NULL;
    }
  copy = strdup (id);
  if (copy == NULL)
    sbx_oom ();
  json_decref (sandbox);
  return copy;
}

/* Parse options; on failure or --help return the exit status to use
   (>= 0), else -1 and *idx is the first operand. */
static int
parse_or_exit (int argc, char **argv, unsigned allowed, struct sbx_cli_opts *o,
               int usage_status, int *idx)
{
  cleanup_error sbx_error_t *e = NULL;
  int usage;

  *idx = sbx_cli_parse_opts (argc, argv, allowed, o, &usage, &e);
  if (*idx < 0)
    {
      if (usage)
        {
          sbx_cli_usage ("%s", e->msg);
          return usage_status;
        }
      sbx_cli_message ("%s", e->msg);
      return SBX_EXIT_SBX;
    }
  if (o->help)
    {
      sbx_cli_help (argv[0]);
      return 0;
    }
  return -1;
}

int
sbx_cmd_run (int argc, char **argv)
{
  struct sbx_cli_opts o;
  struct sbx_api api;
  struct upload *uploads = NULL;
  json_t *create = NULL, *exec = NULL;
  cleanup_error sbx_error_t *e = NULL;
  cleanup_free char *id = NULL;
  int idx, status;

  status = parse_or_exit (argc, argv, RUN_OPTS, &o, SBX_EXIT_SBX, &idx);
  if (status >= 0)
    goto out_opts;
  if (idx >= argc)
    {
      sbx_cli_usage ("run: missing command");
      status = SBX_EXIT_SBX;
      goto out_opts;
    }
  if (o.tty && o.interactive && !isatty (STDIN_FILENO))
    {
      sbx_cli_message ("run: -it: the input is not a terminal (drop -t, or -i)");
      status = SBX_EXIT_SBX;
      goto out_opts;
    }
  if ((uploads = prepare_uploads (&o, &e)) == NULL
      || (create = create_body (&o, 1, &e)) == NULL
      || (exec = exec_body (&o, argv + idx, argc - idx, 0, &e)) == NULL
      || install_signals (&e) < 0 || sbx_api_init (&api, &e) < 0)
    {
      status = sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
      goto out_bodies;
    }

  /* Not interruptible: a sandbox created while we were not looking would
     outlive us. A signal now is handled as soon as the id is known. */
  id = create_sandbox (&api, create, &e);
  if (id == NULL)
    {
      status = got_signal ? 128 + got_signal
                          : sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_SBX);
      goto out_api;
    }
  if (got_signal)
    status = 128 + got_signal;
  else
    status = run_in_sandbox (&api, id, uploads, o.n_files, exec, argv[idx], o.interactive, o.tty);
  delete_sandbox (&api, id);
  if (got_signal)
    status = 128 + got_signal;

out_api:
  sbx_api_clear (&api);
out_bodies:
  json_decref (create);
  json_decref (exec);
  if (uploads != NULL)
    free_uploads (uploads, o.n_files);
out_opts:
  sbx_cli_opts_clear (&o);
  return status;
}

int
sbx_cmd_exec (int argc, char **argv)
{
  struct sbx_cli_opts o;
  struct sbx_api api;
  struct upload *uploads = NULL;
  json_t *exec = NULL;
  cleanup_error sbx_error_t *e = NULL;
  const char *id;
  int idx, status;

  status = parse_or_exit (argc, argv, EXEC_OPTS, &o, SBX_EXIT_SBX, &idx);
  if (status >= 0)
    goto out_opts;
  if (idx >= argc)
    {
      sbx_cli_usage ("exec: missing sandbox ID");
      status = SBX_EXIT_SBX;
      goto out_opts;
    }
  id = argv[idx++];
  if (sbx_cli_check_id ("exec", id) != 0)
    {
      status = SBX_EXIT_SBX; /* as docker exec's usage errors: 125 */
      goto out_opts;
    }
  if (idx < argc && strcmp (argv[idx], "--") == 0)
    idx++;
  if (idx >= argc)
    {
      sbx_cli_usage ("exec: missing command");
      status = SBX_EXIT_SBX;
      goto out_opts;
    }
  if (o.tty && o.interactive && !isatty (STDIN_FILENO))
    {
      sbx_cli_message ("exec: -it: the input is not a terminal (drop -t, or -i)");
      status = SBX_EXIT_SBX;
      goto out_opts;
    }
  if ((uploads = prepare_uploads (&o, &e)) == NULL
      || (exec = exec_body (&o, argv + idx, argc - idx, 1, &e)) == NULL
      || install_signals (&e) < 0 || sbx_api_init (&api, &e) < 0)
    {
      status = sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
      goto out_bodies;
    }
  status = run_in_sandbox (&api, id, uploads, o.n_files, exec, argv[idx], o.interactive, o.tty);
  if (got_signal)
    status = 128 + got_signal;
  sbx_api_clear (&api);
out_bodies:
  json_decref (exec);
  if (uploads != NULL)
    free_uploads (uploads, o.n_files);
out_opts:
  sbx_cli_opts_clear (&o);
  return status;
}

int
sbx_cmd_create (int argc, char **argv)
{
  struct sbx_cli_opts o;
  struct sbx_api api;
  struct upload *uploads = NULL;
  json_t *create = NULL;
  cleanup_error sbx_error_t *e = NULL;
  cleanup_free char *id = NULL;
  int idx, status;

  /* as docker create: 125 for whatever keeps the sandbox from being made */
  status = parse_or_exit (argc, argv, CREATE_OPTS, &o, SBX_EXIT_SBX, &idx);
  if (status >= 0)
    goto out_opts;
  if (idx < argc)
    {
      sbx_cli_usage ("create: unexpected argument `%s`", argv[idx]);
      status = SBX_EXIT_SBX;
      goto out_opts;
    }
  if ((uploads = prepare_uploads (&o, &e)) == NULL)
    {
      status = sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
      goto out_opts;
    }
  if ((create = create_body (&o, 0, &e)) == NULL || install_signals (&e) < 0
      || sbx_api_init (&api, &e) < 0)
    {
      status = sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
      goto out_bodies;
    }
  id = create_sandbox (&api, create, &e);
  if (id == NULL)
    {
      status = got_signal ? 128 + got_signal
                          : sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_SBX);
      goto out_api;
    }
  sbx_http_conn_set_interrupt_fd (api.conn, signal_pipe[0]);
  if (!got_signal && do_uploads (&api, id, uploads, o.n_files, &e) < 0 && !got_signal)
    status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_SBX);
  sbx_http_conn_set_interrupt_fd (api.conn, -1);
  if (got_signal)
    status = 128 + got_signal;
  if (status >= 0)
    {
      /* A sandbox nobody knows the id of is of no use: remove it. */
      delete_sandbox (&api, id);
      goto out_api;
    }
  printf ("%s\n", id);
  status = fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;

out_api:
  sbx_api_clear (&api);
out_bodies:
  json_decref (create);
  if (uploads != NULL)
    free_uploads (uploads, o.n_files);
out_opts:
  sbx_cli_opts_clear (&o);
  return status;
}
