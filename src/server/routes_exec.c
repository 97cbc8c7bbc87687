/* sbx: routes that run commands: exec (one result or a stream) and
 * background processes (start, list, stdin, signal, wait, attach). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "util/base64.h"
#include "util/cleanup.h"

#define STREAM_CAP (256 * 1024)        /* lossless exec streams */
#define BACKGROUND_CAP (1024 * 1024)   /* kept per stream of a background process */
#define DEFAULT_MAX_OUTPUT (1024 * 1024)
#define MAX_MAX_OUTPUT (64ULL * 1024 * 1024)
#define KEEPALIVE_MS 10000
#define POLL_SLICE_MS 1000


void
sbx_exec_request_free (struct sbx_exec_request *e)
{
  free (e->argv);
  sbx_buf_free (&e->stdin_bytes);
  json_decref (e->body);
}

int
sbx_exec_request_parse (const char *data, size_t len, int background,
                        struct sbx_exec_request *e, sbx_error_t **err)
{
  static const char *const exec_fields[]
      = {"argv",   "cmd",  "env",     "cwd",     "user",   "stdin",     "stdin_b64",
         "stdin_open", "timeout", "stream", "encoding", "max_output", "pty", NULL};
  static const char *const bg_fields[]
      = {"argv",       "cmd",     "env", "cwd", "user", "stdin", "stdin_b64",
         "stdin_open", "timeout", "pty", NULL};
  const char *cmd = NULL, *encoding = NULL, *stdin_text = NULL, *stdin_b64 = NULL;
  json_t *argv;
  uint64_t max_output = DEFAULT_MAX_OUTPUT;
  size_t i, n;

  memset (e, 0, sizeof *e);
  if (sbx_json_body (data, len, &e->body, err) < 0
      || sbx_params_only (e->body, background ? bg_fields : exec_fields, err) < 0
      || sbx_param_string (e->body, "cmd", &cmd, err) < 0
      || sbx_param_string_map (e->body, "env", 256, 256, 128 * 1024, 128 * 1024, 1, &e->opts.env,
                               err)
             < 0
      || sbx_param_string (e->body, "cwd", &e->opts.cwd, err) < 0
      || sbx_param_string (e->body, "user", &e->opts.user, err) < 0
      || sbx_param_string (e->body, "stdin", &stdin_text, err) < 0
      || sbx_param_string (e->body, "stdin_b64", &stdin_b64, err) < 0
      || sbx_param_bool (e->body, "stdin_open", &e->opts.stdin_open, err) < 0
      || sbx_param_duration (e->body, "timeout", &e->opts.timeout_ms, err) < 0
      || sbx_param_bool (e->body, "stream", &e->stream, err) < 0
      || sbx_param_string (e->body, "encoding", &encoding, err) < 0
      || sbx_param_size (e->body, "max_output", &max_output, err) < 0
      || sbx_param_pty (e->body, "pty", &e->opts.pty, &e->opts.pty_cols, &e->opts.pty_rows, err)
             < 0)
    return -1;

  argv = json_object_get (e->body, "argv");
  if ((argv != NULL) == (cmd != NULL))
    return sbx_err (err, SBX_E_INVALID, "give exactly one of `argv` (a list) and `cmd` (a string)");
  if (argv)
    {
      if (!json_is_array (argv) || json_array_size (argv) == 0 || json_array_size (argv) > 4096)
        return sbx_err (err, SBX_E_INVALID, "`argv` must be a list of 1 to 4096 strings");
      n = json_array_size (argv);
      e->argv = calloc (n + 1, sizeof *e->argv);
      if (e->argv == NULL)
        return sbx_err_oom (err);
      for (i = 0; i < n; i++)
        {
          json_t *s = json_array_get (argv, i);
          if (!json_is_string (s) || strlen (json_string_value (s)) != json_string_length (s))
            return sbx_err (err, SBX_E_INVALID, "`argv[%zu]` must be a string without NUL", i);
          e->argv[i] = (char *) (uintptr_t) json_string_value (s);
        }
      if (e->argv[0][0] == '\0')
        return sbx_err (err, SBX_E_INVALID, "`argv[0]` must not be empty");
    }
  else
    {
      e->argv = calloc (4, sizeof *e->argv);
      if (e->argv == NULL)
        return sbx_err_oom (err);
      static char bash[] = "/bin/bash", dash_c[] = "-c";
      e->argv[0] = bash;
      e->argv[1] = dash_c;
      e->argv[2] = (char *) (uintptr_t) cmd;
    }
  if (e->opts.cwd && (e->opts.cwd[0] != '/' || strlen (e->opts.cwd) >= 4096))
    return sbx_err (err, SBX_E_INVALID, "`cwd` must be an absolute path");
  if (stdin_text && stdin_b64)
    return sbx_err (err, SBX_E_INVALID, "give at most one of `stdin` and `stdin_b64`");
  if (stdin_text)
    sbx_buf_append (&e->stdin_bytes, stdin_text, strlen (stdin_text));
  if (stdin_b64 && sbx_base64_decode (&e->stdin_bytes, stdin_b64, strlen (stdin_b64)) < 0)
    return sbx_err (err, SBX_E_INVALID, "`stdin_b64` is not valid base64");
  if (e->stdin_bytes.failed)
    return sbx_err_oom (err);
  if (encoding && strcmp (encoding, "utf8") != 0 && strcmp (encoding, "base64") != 0)
    return sbx_err (err, SBX_E_INVALID, "`encoding` must be \"utf8\" or \"base64\"");
  e->base64 = encoding && strcmp (encoding, "base64") == 0;
  if (max_output > MAX_MAX_OUTPUT)
    return sbx_err (err, SBX_E_INVALID, "`max_output` is larger than 64M");

  e->opts.argv = e->argv;
  e->opts.stdin_data = e->stdin_bytes.data;
  e->opts.stdin_len = e->stdin_bytes.len;
  e->opts.background = background;
  if (background)
    {
      e->opts.mode = SBX_OUT_TAIL;
      e->opts.out_cap = BACKGROUND_CAP;
    }
  else if (e->stream)
    {
      e->opts.mode = SBX_OUT_BLOCK;
      e->opts.out_cap = STREAM_CAP;
    }
  else
    {
      e->opts.mode = SBX_OUT_HEAD;
      e->opts.out_cap = (size_t) max_output;
    }
  return 0;
}

/* ---- streams ----------------------------------------------------------- */

struct stream
{
  struct sbx_reader reader;
  struct sbx_buf pending;
  struct sbx_req *req; /* valid while MHD calls us: the request outlives the response */
  struct MHD_Connection *conn;
  int done;
  int kill_on_disconnect;
  int collect;
  int no_follow; /* attach?follow=0: what is there now, then the end */
  int64_t idle_ms;
};

static ssize_t
stream_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct stream *s = cls;
  size_t n;

  (void) pos;
  while (s->pending.len == 0)
    {
      int rc, news;
      if (s->done)
        return MHD_CONTENT_READER_END_OF_STREAM;
      news = sbx_reader_wait (&s->reader, s->no_follow ? 0 : POLL_SLICE_MS);
      /* Take nothing for a client that is gone: a lossless stream's
         output stays for the next reader (a reconnect). */
      if (sbx_req_client_gone (s->req))
        return MHD_CONTENT_READER_END_WITH_ERROR;
      if (news)
        {
          rc = sbx_reader_next (&s->reader, &s->pending, 0);
          /* Out of memory for the next lines: a stream cannot skip
             output, so it ends here, cut short (the command is then
             killed). */
          if (rc < 0 || s->pending.failed)
            return MHD_CONTENT_READER_END_WITH_ERROR;
          if (rc > 0)
            s->done = 1;
          s->idle_ms = 0;
          continue;
        }
      if (s->no_follow)
        {
          /* all that was there is sent; the process runs on */
          s->done = 1;
          continue;
        }
      s->idle_ms += POLL_SLICE_MS;
      if (s->idle_ms >= KEEPALIVE_MS)
        {
          static const char keepalive[] = "{\"type\":\"keepalive\"}\n";
          sbx_buf_append (&s->pending, keepalive, sizeof keepalive - 1);
          if (s->pending.failed)
            return MHD_CONTENT_READER_END_WITH_ERROR;
          s->idle_ms = 0;
        }
    }
  n = s->pending.len < max ? s->pending.len : max;
  memcpy (buf, s->pending.data, n);
  sbx_buf_consume (&s->pending, n);
  return (ssize_t) n;
}

static void
stream_free (void *cls)
{
  struct stream *s = cls;

  if (!s->done && s->kill_on_disconnect)
    sbx_process_signal (s->reader.p, SIGKILL, NULL);
  if (s->collect)
    sbx_process_collect (s->reader.p);
  sbx_reader_release (&s->reader);
  sbx_buf_free (&s->pending);
  free (s);
}

/* -1 with *err when there is no memory for the stream: then nothing was
   answered and the caller still owns what p is. */
static int
reply_stream (struct sbx_req *r, struct sbx_process *p, int base64, int own, int no_follow,
              sbx_error_t **err)
{
  struct stream *s = calloc (1, sizeof *s);
  struct MHD_Response *resp;

  if (s == NULL)
    return sbx_err_oom (err);
  sbx_reader_init (&s->reader, p, base64);
  s->req = r;
  s->conn = r->conn;
  s->kill_on_disconnect = own;
  s->collect = own;
  s->no_follow = no_follow;
  resp = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, s,
                                            stream_free);
  if (resp == NULL)
    {
      sbx_reader_release (&s->reader);
      free (s);
      return sbx_err_oom (err);
    }
  MHD_add_response_header (resp, "Content-Type", "application/x-ndjson");
  sbx_reply_response (r, 200, resp);
  return 0;
}

/* Wait for p, checking every second whether the client is still there.
   Returns 1 done, 0 timed out, -1 client gone. */
static int
wait_watching_client (struct sbx_req *r, struct sbx_process *p, int64_t timeout_ms)
{
  int64_t waited = 0;

  for (;;)
    {
      int64_t slice = POLL_SLICE_MS;
      if (timeout_ms >= 0 && timeout_ms - waited < slice)
        slice = timeout_ms - waited;
      if (sbx_process_wait (p, slice))
        return 1;
      waited += slice;
      if (sbx_req_client_gone (r))
        return -1;
      if (timeout_ms >= 0 && waited >= timeout_ms)
        return 0;
    }
}

/* ---- routes ------------------------------------------------------------ */

static void
run_exec (struct sbx_req *r, int background)
{
  struct sbx_exec_request e;
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  struct sbx_process *p = NULL;

  memset (&e, 0, sizeof e);
  if (r->body.failed)
    {
      /* Part of the body found no memory: what is left is no request. */
      sbx_err_oom (&err);
      goto fail;
    }
  if (sbx_exec_request_parse (r->body.data, r->body.len, background, &e, &err) < 0)
    goto fail;
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL)
    goto fail;
  p = sbx_process_start (sb, &e.opts, &err);
  if (p == NULL)
    goto fail;
  if (background)
    {
      json_t *info = sbx_process_info_json (p);
      /* A command that could not start has no pid to look it up by: its
         result is in this answer, and it is not kept. */
      if (json_is_null (json_object_get (info, "pid")))
        sbx_process_collect (p);
      sbx_reply_json (r, 201, info);
      if (r->out_of_memory || r->queue_failed)
        {
          /* No memory to say it started: then it must not run unseen. */
          sbx_process_signal (p, SIGKILL, NULL);
          sbx_process_collect (p);
        }
    }
  else if (e.stream)
    {
      if (reply_stream (r, p, e.base64, 1, 0, &err) < 0)
        {
          /* Nobody will read it: as for a client that hung up. */
          sbx_process_signal (p, SIGKILL, NULL);
          sbx_process_collect (p);
          sbx_process_unref (p);
          goto fail;
        }
    }
  else
    {
      if (wait_watching_client (r, p, -1) < 0)
        {
          /* Nobody will read the result: stop the command, as a hung-up
             terminal would. */
          sbx_process_signal (p, SIGKILL, NULL);
          sbx_process_wait (p, 5000);
          sbx_reply_empty (r, 499);
        }
      else
        sbx_reply_json (r, 200, sbx_process_result_json (p, 1, e.base64));
      sbx_process_collect (p);
    }
  sbx_process_unref (p);
  sbx_sandbox_unref (sb);
  sbx_exec_request_free (&e);
  return;
fail:
  if (sb)
    sbx_sandbox_unref (sb);
  sbx_exec_request_free (&e);
  sbx_reply_error (r, err);
}

void
sbx_route_exec (struct sbx_req *r)
{
  run_exec (r, 0);
}

void
sbx_route_process_start (struct sbx_req *r)
{
  run_exec (r, 1);
}

void
sbx_route_process_list (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = sbx_req_sandbox (r, 2, &err);

  if (sb == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  sbx_reply_json (r, 200, json_pack ("{s:o}", "processes", sbx_process_list_json (sb)));
  sbx_sandbox_unref (sb);
}

/* The sandbox (segment 2) and the process (segment 4) of this request. */
static struct sbx_process *
find_process (struct sbx_req *r, struct sbx_sandbox **sbp, sbx_error_t **err)
{
  struct sbx_sandbox *sb;
  struct sbx_process *p;
  char *end;
  long pid;

  *sbp = NULL;
  pid = strtol (r->segs[4], &end, 10);
  if (*end != '\0' || pid <= 0 || pid > 4194304)
    return sbx_err (err, SBX_E_INVALID, "`%.16s` is not a process id", r->segs[4]), NULL;
  sb = sbx_req_sandbox (r, 2, err);
  if (sb == NULL)
    return NULL;
  p = sbx_process_find (sb, (int) pid, err);
  if (p == NULL)
    {
      sbx_sandbox_unref (sb);
      return NULL;
    }
  *sbp = sb;
  return p;
}

#define WITH_PROCESS(r, sb, p)                                                                     \
  sbx_error_t *err = NULL;                                                                         \
  struct sbx_sandbox *sb;                                                                          \
  struct sbx_process *p = find_process (r, &sb, &err);                                             \
  if (p == NULL)                                                                                   \
    {                                                                                              \
      sbx_reply_error (r, err);                                                                    \
      return;                                                                                      \
    }

void
sbx_route_process_get (struct sbx_req *r)
{
  WITH_PROCESS (r, sb, p);
  sbx_reply_json (r, 200, sbx_process_info_json (p));
  sbx_process_unref (p);
  sbx_sandbox_unref (sb);
}

static int
client_gone (void *arg)
{
  return sbx_req_client_gone (arg);
}

void
sbx_route_process_stdin (struct sbx_req *r)
{
  int eof = 0;
  WITH_PROCESS (r, sb, p);
  if (r->body.failed)
    sbx_err_oom (&err);
  if (err || sbx_query_bool (r, "eof", &eof, &err) < 0
      || sbx_process_write_stdin (p, r->body.data, r->body.len, eof, client_gone, r, &err) < 0)
    sbx_reply_error (r, err);
  else
    sbx_reply_empty (r, 204);
  sbx_process_unref (p);
  sbx_sandbox_unref (sb);
}

int
sbx_signal_request_parse (json_t *body, int *signo, sbx_error_t **err)
{
  static const char *const allowed[] = {"signal", NULL};
  json_t *sig;

  *signo = SIGTERM;
  if (sbx_params_only (body, allowed, err) < 0)
    return -1;
  sig = json_object_get (body, "signal");
  /* Range-checked before the cast: 4294967297 is not SIGHUP. */
  if (json_is_integer (sig))
    *signo = json_integer_value (sig) >= 1 && json_integer_value (sig) <= 31
                 ? (int) json_integer_value (sig)
                 : -1;
  else if (json_is_string (sig))
    *signo = sbx_signal_from_name (json_string_value (sig));
  else if (sig != NULL)
    *signo = -1;
  if (*signo <= 0 || *signo >= 32)
    return sbx_err (err, SBX_E_INVALID, "`signal` must be a signal name like \"SIGTERM\" or 1..31");
  return 0;
}

void
sbx_route_process_signal (struct sbx_req *r)
{
  json_t *body = NULL;
  int signo;
  WITH_PROCESS (r, sb, p);

  if (sbx_req_json (r, &body, &err) < 0 || sbx_signal_request_parse (body, &signo, &err) < 0)
    goto fail;
  if (sbx_process_signal (p, signo, &err) < 0)
    goto fail;
  sbx_reply_empty (r, 204);
  goto out;
fail:
  sbx_reply_error (r, err);
out:
  json_decref (body);
  sbx_process_unref (p);
  sbx_sandbox_unref (sb);
}

void
sbx_route_process_resize (struct sbx_req *r)
{
  json_t *body = NULL;
  unsigned cols, rows;
  WITH_PROCESS (r, sb, p);

  if (sbx_req_json (r, &body, &err) < 0 || sbx_resize_request_parse (body, &cols, &rows, &err) < 0
      || sbx_process_resize (p, cols, rows, &err) < 0)
    sbx_reply_error (r, err);
  else
    sbx_reply_empty (r, 204);
  json_decref (body);
  sbx_process_unref (p);
  sbx_sandbox_unref (sb);
}

void
sbx_route_process_wait (struct sbx_req *r)
{
  int64_t timeout = -1;
  const char *enc;
  int rc;
  WITH_PROCESS (r, sb, p);

  enc = sbx_req_query (r, "encoding");
  if (enc && strcmp (enc, "utf8") != 0 && strcmp (enc, "base64") != 0)
    sbx_err (&err, SBX_E_INVALID, "`encoding` must be utf8 or base64");
  if (err || sbx_query_duration (r, "timeout", &timeout, &err) < 0)
    {
      sbx_reply_error (r, err);
      goto out;
    }
  rc = wait_watching_client (r, p, timeout);
  if (rc == 1)
    {
      sbx_reply_json (r, 200, sbx_process_result_json (p, 1, enc && strcmp (enc, "base64") == 0));
      sbx_process_collect (p);
    }
  else if (rc == 0)
    sbx_reply_json (r, 200, sbx_process_info_json (p));
  else
    sbx_reply_empty (r, 499);
out:
  sbx_process_unref (p);
  sbx_sandbox_unref (sb);
}

void
sbx_route_process_attach (struct sbx_req *r)
{
  const char *enc = sbx_req_query (r, "encoding");
  int follow = 1;
  WITH_PROCESS (r, sb, p);

  if (enc && strcmp (enc, "utf8") != 0 && strcmp (enc, "base64") != 0)
    sbx_reply_errorf (r, SBX_E_INVALID, "`encoding` must be utf8 or base64");
  else if (sbx_query_bool (r, "follow", &follow, &err) < 0
           || reply_stream (r, p, enc && strcmp (enc, "base64") == 0, 0, !follow, &err) < 0)
    sbx_reply_error (r, err);
  sbx_process_unref (p);
  sbx_sandbox_unref (sb);
}
