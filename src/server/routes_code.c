/* sbx: the code interpreter's native routes (docs/api.md "Code"):
 *   POST   /v1/sandboxes/ID/code                   run code: NDJSON stream
 *   GET    /v1/sandboxes/ID/contexts               list contexts
 *   POST   /v1/sandboxes/ID/contexts               create one
 *   DELETE /v1/sandboxes/ID/contexts/CTX           delete one
 *   POST   /v1/sandboxes/ID/contexts/CTX/restart   a fresh interpreter
 *   POST   /v1/sandboxes/ID/contexts/CTX/fork      a copy of its state
 * Each is one request to the server inside the sandbox (core/code.c).
 * That server is the sandbox's, so hostile: every line it sends is parsed,
 * checked against the shapes below and rebuilt from the fields we know
 * before the client sees it; lines and answers are bounded. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/code.h"
#include "server/request.h"

#define LINE_MAX_BYTES (16 * 1024 * 1024) /* a big PNG, base64 */
#define ANSWER_MAX (1024 * 1024)
#define IDLE_MS 30000      /* the server says keepalive every 5 s */
#define SLICE_MS 1000      /* how often a stream checks for a client gone */
#define CONTEXT_ID_MAX 64

/* ---- checking what the server says ---------------------------------------- */

static int
copy_string (json_t *from, json_t *to, const char *key, int required)
{
  json_t *v = json_object_get (from, key);

  if (v == NULL)
    return required ? -1 : 0;
  if (!json_is_string (v))
    return -1;
  return json_object_set (to, key, v);
}

/* A line of an execution, rebuilt from what we know; NULL when it is not
   one. */
static json_t *
checked_event (json_t *in)
{
  static const char *const result_strings[]
      = {"text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "javascript", NULL};
  static const char *const result_objects[] = {"data", "chart", "extra", NULL};
  const char *type;
  json_t *out, *v;
  int bad = 0, i;

  if (!json_is_object (in) || !json_is_string (json_object_get (in, "type")))
    return NULL;
  type = json_string_value (json_object_get (in, "type"));
  out = json_object ();
  if (out == NULL || json_object_set_new (out, "type", json_string (type)) < 0)
    goto fail;
  if (strcmp (type, "stdout") == 0 || strcmp (type, "stderr") == 0)
    bad = copy_string (in, out, "text", 1) < 0 || copy_string (in, out, "timestamp", 0) < 0;
  else if (strcmp (type, "result") == 0)
    {
      v = json_object_get (in, "is_main_result");
      bad = !json_is_boolean (v) || json_object_set (out, "is_main_result", v) < 0;
      for (i = 0; !bad && result_strings[i]; i++)
        bad = copy_string (in, out, result_strings[i], 0) < 0;
      for (i = 0; !bad && result_objects[i]; i++)
        if ((v = json_object_get (in, result_objects[i])) != NULL)
          bad = !json_is_object (v) || json_object_set (out, result_objects[i], v) < 0;
      if (!bad && (v = json_object_get (in, "json")) != NULL)
        bad = json_object_set (out, "json", v) < 0;
    }
  else if (strcmp (type, "error") == 0)
    bad = copy_string (in, out, "name", 1) < 0 || copy_string (in, out, "value", 1) < 0
          || copy_string (in, out, "traceback", 1) < 0;
  else if (strcmp (type, "number_of_executions") == 0)
    {
      v = json_object_get (in, "execution_count");
      bad = !json_is_integer (v) || json_integer_value (v) < 0
            || json_object_set (out, "execution_count", v) < 0;
    }
  else if (strcmp (type, "end_of_execution") != 0 && strcmp (type, "keepalive") != 0)
    bad = 1;
  if (!bad)
    return out;
fail:
  json_decref (out);
  return NULL;
}

/* A language's name as the code server takes it: which names it runs, and
   which of them the template has installed, are its to say (its 400 is
   relayed); here only the shape, so no odd byte reaches it. */
static int
language_ok (const char *language)
{
  static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  size_t n = strlen (language);

  return n > 0 && n <= 16 && strspn (language, alnum) == n;
}

/* A context as the server lists it: {"id","language","cwd"} strings. */
static json_t *
checked_context (json_t *in)
{
  json_t *out = json_object ();
  json_t *id = json_object_get (in, "id");

  if (out == NULL || !json_is_object (in) || !json_is_string (id)
      || json_string_length (id) > CONTEXT_ID_MAX || copy_string (in, out, "id", 1) < 0
      || copy_string (in, out, "language", 1) < 0 || copy_string (in, out, "cwd", 1) < 0)
    {
      json_decref (out);
      return NULL;
    }
  return out;
}

/* An error answer of the server, as ours: its text, printable ASCII only. */
static void
server_error (struct sbx_code_conn *c, sbx_error_t **err)
{
  char msg[201];
  size_t i, n = 0;
  enum sbx_error_kind kind;

  sbx_error_t *ignored = NULL;

  /* The start of the text is enough: more, or a server that never ends
     it, does not change the answer. */
  if (sbx_code_body (c, 4096, 5000, &ignored) < 0)
    sbx_error_free (ignored);
  for (i = 0; i < c->in.len && n < sizeof msg - 1; i++)
    if (isprint ((unsigned char) c->in.data[i]))
      msg[n++] = c->in.data[i];
  msg[n] = '\0';
  switch (c->status)
    {
    case 400:
      kind = SBX_E_INVALID;
      break;
    case 404:
      kind = SBX_E_NOT_FOUND;
      break;
    case 409:
      kind = SBX_E_CONFLICT;
      break;
    case 503:
      kind = SBX_E_UNAVAILABLE;
      break;
    default:
      sbx_err (err, SBX_E_BAD_GATEWAY, "the code interpreter answered %u: %s", c->status, msg);
      return;
    }
  sbx_err (err, kind, "%s", msg[0] ? msg : "the code interpreter refused the request");
}

static int
context_id_ok (const char *s)
{
  size_t n = strlen (s);

  return n > 0 && n <= CONTEXT_ID_MAX
         && strspn (s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == n;
}

/* ---- POST .../code ----------------------------------------------------------- */

struct code_stream
{
  struct sbx_sandbox *sb; /* holds a reference and a proxy place */
  struct sbx_code_conn c;
  struct sbx_req *req;
  struct sbx_buf pending;
  int64_t idle_ms;
  int done, ended;
};

static void
stream_fail (struct code_stream *s, const char *why)
{
  json_t *o = json_pack ("{s:s, s:s, s:s, s:s}", "type", "error", "name", "SandboxError", "value",
                         why, "traceback", "");
  char *line = o ? json_dumps (o, JSON_COMPACT) : NULL;

  if (line)
    {
      sbx_buf_printf (&s->pending, "%s\n{\"type\":\"end_of_execution\"}\n", line);
      free (line);
    }
  else
    s->pending.failed = 1;
  json_decref (o);
  s->done = 1;
}

static ssize_t
code_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct code_stream *s = cls;
  size_t n;

  (void) pos;
  while (s->pending.len == 0)
    {
      const char *line;
      size_t len;
      int rc;

      if (s->done)
        return MHD_CONTENT_READER_END_OF_STREAM;
      rc = sbx_code_line (&s->c, &line, &len, LINE_MAX_BYTES, SLICE_MS);
      if (rc == SBX_CODE_LINE)
        {
          json_error_t jerr;
          json_t *in = json_loadb (line, len, JSON_REJECT_DUPLICATES, &jerr);
          json_t *ev = in ? checked_event (in) : NULL;
          char *text = ev ? json_dumps (ev, JSON_COMPACT) : NULL;

          json_decref (in);
          if (text == NULL)
            {
              json_decref (ev);
              stream_fail (s, "the code interpreter sent a line that is not an event");
              continue;
            }
          if (strcmp (json_string_value (json_object_get (ev, "type")), "end_of_execution") == 0)
            s->done = s->ended = 1;
          sbx_buf_printf (&s->pending, "%s\n", text);
          free (text);
          json_decref (ev);
          s->idle_ms = 0;
          if (s->pending.failed)
            return MHD_CONTENT_READER_END_WITH_ERROR;
          continue;
        }
      if (rc == SBX_CODE_TIMEOUT)
        {
          if (sbx_req_client_gone (s->req))
            return MHD_CONTENT_READER_END_WITH_ERROR; /* the server interrupts the run */
          s->idle_ms += SLICE_MS;
          if (s->idle_ms >= IDLE_MS)
            stream_fail (s, "the code interpreter stopped answering");
          continue;
        }
      stream_fail (s, rc == SBX_CODE_TOO_LONG ? "the code interpreter sent a line over 16 MiB"
                      : rc == SBX_CODE_EOF    ? "the code interpreter ended the stream early"
                                              : "the code interpreter broke the stream");
    }
  n = s->pending.len < max ? s->pending.len : max;
  memcpy (buf, s->pending.data, n);
  sbx_buf_consume (&s->pending, n);
  return (ssize_t) n;
}

static void
code_free (void *cls)
{
  struct code_stream *s = cls;

  sbx_code_close (&s->c);
  sbx_buf_free (&s->pending);
  sbx_sandbox_proxy_release (s->sb);
  sbx_sandbox_unref (s->sb);
  free (s);
}

/* The sandbox (segment 2) with one of its proxy places taken. */
static struct sbx_sandbox *
code_sandbox (struct sbx_req *r, sbx_error_t **err)
{
  struct sbx_sandbox *sb = sbx_req_sandbox (r, 2, err);

  if (sb == NULL)
    return NULL;
  if (sbx_sandbox_proxy_acquire (sb, err) < 0)
    {
      sbx_sandbox_unref (sb);
      return NULL;
    }
  return sb;
}

static void
code_sandbox_release (struct sbx_sandbox *sb)
{
  sbx_sandbox_proxy_release (sb);
  sbx_sandbox_unref (sb);
}

/* The server's request for a run, from ours. */
static json_t *
execute_body (struct sbx_req *r, struct sbx_sandbox *sb, sbx_error_t **err)
{
  static const char *const fields[] = {"code", "context", "language", "env", "timeout", NULL};
  const char *code = NULL, *context = NULL, *language = NULL;
  json_t *body = NULL, *env = NULL, *out = NULL, *all_env;
  uint64_t timeout_ms = 0;

  if (sbx_req_json (r, &body, err) < 0 || sbx_params_only (body, fields, err) < 0
      || sbx_param_string (body, "code", &code, err) < 0
      || sbx_param_string (body, "context", &context, err) < 0
      || sbx_param_string (body, "language", &language, err) < 0
      || sbx_param_string_map (body, "env", 256, 256, 128 * 1024, 128 * 1024, 1, &env, err) < 0
      || sbx_param_duration (body, "timeout", &timeout_ms, err) < 0)
    goto out;
  if (code == NULL)
    {
      sbx_err (err, SBX_E_INVALID, "`code` (a string) is required");
      goto out;
    }
  if (context && language)
    {
      sbx_err (err, SBX_E_INVALID, "give at most one of `context` and `language`");
      goto out;
    }
  if (context && !context_id_ok (context))
    {
      sbx_err (err, SBX_E_INVALID, "`context` is not a context id");
      goto out;
    }
  if (language && !language_ok (language))
    {
      sbx_err (err, SBX_E_INVALID,
               "`language` must be a name of letters and digits (python, bash, javascript, "
               "typescript), not `%.32s`",
               language);
      goto out;
    }
  /* The sandbox's own variables (its server started before it had any),
     under the run's. */
  all_env = json_object ();
  if (all_env == NULL || json_object_update (all_env, sb->env) < 0
      || (env && json_object_update (all_env, env) < 0))
    {
      json_decref (all_env);
      sbx_err_oom (err);
      goto out;
    }
  out = json_pack ("{s:s, s:o}", "code", code, "env_vars", all_env);
  if (out != NULL && context)
    json_object_set_new (out, "context_id", json_string (context));
  if (out != NULL && language)
    json_object_set_new (out, "language", json_string (language));
  if (out != NULL && timeout_ms)
    json_object_set_new (out, "timeout", json_real ((double) timeout_ms / 1000.0));
  if (out == NULL)
    sbx_err_oom (err);
out:
  json_decref (env);
  json_decref (body);
  return out;
}

void
sbx_route_code (struct sbx_req *r)
{
  struct sbx_sandbox *sb;
  struct code_stream *s = NULL;
  struct MHD_Response *resp;
  sbx_error_t *err = NULL;
  json_t *body;
  char *text;

  sb = code_sandbox (r, &err);
  if (sb == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  body = execute_body (r, sb, &err);
  text = body ? json_dumps (body, JSON_COMPACT) : NULL;
  json_decref (body);
  if (text == NULL)
    {
      if (err == NULL)
        sbx_err_oom (&err);
      goto fail;
    }
  s = calloc (1, sizeof *s);
  if (s == NULL)
    {
      sbx_err_oom (&err);
      goto fail;
    }
  if (sbx_code_open (sb, "POST", "/execute", text, strlen (text), &s->c, &err) < 0)
    goto fail;
  if (s->c.status != 200)
    {
      server_error (&s->c, &err);
      goto fail;
    }
  free (text);
  text = NULL;
  s->sb = sb;
  s->req = r;
  resp = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, 64 * 1024, code_read, s, code_free);
  if (resp == NULL)
    {
      s->sb = NULL;
      sbx_err_oom (&err);
      goto fail;
    }
  MHD_add_response_header (resp, "Content-Type", "application/x-ndjson");
  sbx_reply_response (r, 200, resp);
  return;
fail:
  if (s)
    {
      sbx_code_close (&s->c);
      free (s);
    }
  free (text);
  code_sandbox_release (sb);
  sbx_reply_error (r, err);
}

/* ---- contexts ------------------------------------------------------------------ */

/* One request; the answer's JSON (NULL for an empty 200) in *out. */
static int
context_call (struct sbx_req *r, const char *method, const char *path, const char *body,
              json_t **out, sbx_error_t **err)
{
  struct sbx_sandbox *sb = code_sandbox (r, err);
  struct sbx_code_conn c;
  json_error_t jerr;
  int rc = -1;

  *out = NULL;
  if (sb == NULL)
    return -1;
  if (sbx_code_open (sb, method, path, body, body ? strlen (body) : 0, &c, err) < 0)
    goto done;
  if (c.status != 200)
    {
      server_error (&c, err);
      goto close;
    }
  /* A cold context imports everything: minutes on a starved host. */
  if (sbx_code_body (&c, ANSWER_MAX, 120000, err) < 0)
    goto close;
  *out = json_loadb (c.in.data ? c.in.data : "null", c.in.data ? c.in.len : 4,
                     JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
  if (*out == NULL)
    sbx_err (err, SBX_E_BAD_GATEWAY, "the code interpreter's answer is not JSON");
  else
    rc = 0;
close:
  sbx_code_close (&c);
done:
  code_sandbox_release (sb);
  return rc;
}

void
sbx_route_context_list (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *in, *out, *v;
  size_t i;

  if (context_call (r, "GET", "/contexts", NULL, &in, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  out = json_array ();
  if (!json_is_array (in) || json_array_size (in) > 4096 || out == NULL)
    goto bad;
  json_array_foreach (in, i, v)
  {
    json_t *ctx = checked_context (v);
    if (ctx == NULL || json_array_append_new (out, ctx) < 0)
      goto bad;
  }
  json_decref (in);
  sbx_reply_json (r, 200, out);
  return;
bad:
  json_decref (in);
  json_decref (out);
  sbx_reply_errorf (r, SBX_E_BAD_GATEWAY, "the code interpreter's list of contexts is malformed");
}

static void
reply_context (struct sbx_req *r, unsigned status, json_t *in)
{
  json_t *ctx = checked_context (in);

  json_decref (in);
  if (ctx == NULL)
    sbx_reply_errorf (r, SBX_E_BAD_GATEWAY, "the code interpreter's context is malformed");
  else
    sbx_reply_json (r, status, ctx);
}

void
sbx_route_context_create (struct sbx_req *r)
{
  static const char *const fields[] = {"language", "cwd", "warm", NULL};
  const char *language = NULL, *cwd = NULL;
  sbx_error_t *err = NULL;
  json_t *body = NULL, *req = NULL, *in;
  char *text = NULL;
  int warm = 1;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, fields, &err) < 0
      || sbx_param_string (body, "language", &language, &err) < 0
      || sbx_param_string (body, "cwd", &cwd, &err) < 0
      || sbx_param_bool (body, "warm", &warm, &err) < 0)
    goto fail;
  if (language && !language_ok (language))
    {
      sbx_err (&err, SBX_E_INVALID,
               "`language` must be a name of letters and digits (python, bash, javascript, "
               "typescript), not `%.32s`",
               language);
      goto fail;
    }
  if (cwd && (cwd[0] != '/' || strlen (cwd) >= 4096))
    {
      sbx_err (&err, SBX_E_INVALID, "`cwd` must be an absolute path");
      goto fail;
    }
  req = json_pack ("{s:s, s:s, s:b}", "language", language ? language : "python", "cwd",
                   cwd ? cwd : "/home/user",
                   "warm", warm);
  text = req ? json_dumps (req, JSON_COMPACT) : NULL;
  if (text == NULL)
    {
      sbx_err_oom (&err);
      goto fail;
    }
  if (context_call (r, "POST", "/contexts", text, &in, &err) < 0)
    goto fail;
  reply_context (r, 201, in);
  free (text);
  json_decref (req);
  json_decref (body);
  return;
fail:
  free (text);
  json_decref (req);
  json_decref (body);
  sbx_reply_error (r, err);
}

/* DELETE .../contexts/CTX, POST .../contexts/CTX/{restart,fork}. */
static void
context_action (struct sbx_req *r, const char *method, const char *action)
{
  const char *id = r->segs[4];
  sbx_error_t *err = NULL;
  char path[128];
  json_t *in;

  if (!context_id_ok (id))
    {
      sbx_reply_errorf (r, SBX_E_NOT_FOUND, "no context `%.64s`", id);
      return;
    }
  snprintf (path, sizeof path, "/contexts/%s%s%s", id, action ? "/" : "", action ? action : "");
  if (context_call (r, method, path, NULL, &in, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  if (action && strcmp (action, "fork") == 0)
    {
      reply_context (r, 201, in);
      return;
    }
  json_decref (in);
  sbx_reply_empty (r, 204);
}

void
sbx_route_context_delete (struct sbx_req *r)
{
  context_action (r, "DELETE", NULL);
}

void
sbx_route_context_restart (struct sbx_req *r)
{
  context_action (r, "POST", "restart");
}

void
sbx_route_context_fork (struct sbx_req *r)
{
  context_action (r, "POST", "fork");
}
