/* sbx CLI: `sbx code ID [options] (CODE | -f FILE | -)`: run Python in a
 * code-interpreter sandbox's context (docs/api.md "Code"). stdout and
 * stderr stream as the code prints; then each result's text; an error's
 * traceback goes to stderr and the exit status is 1. --json prints the
 * events as the daemon sends them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "cli/events.h"
#include "util/buf.h"
#include "util/cleanup.h"

#define CODE_MAX (1024 * 1024 - 4096) /* the daemon's JSON bodies are <= 1 MiB */

struct code_out
{
  struct sbx_ndjson nd;
  int json;
  int failed; /* an error event came */
  int ended;  /* end_of_execution came */
};

static void
put (int fd, const char *s)
{
  size_t n = strlen (s);

  if (n && sbx_write_all (fd, s, n) == 0 && fd == 1 && s[n - 1] != '\n')
    sbx_write_all (fd, "\n", 1);
}

static int
on_line (void *ctx, const char *line, size_t len, sbx_error_t **err)
{
  struct code_out *o = ctx;
  json_error_t jerr;
  json_t *ev = json_loadb (line, len, 0, &jerr);
  const char *type = json_string_value (json_object_get (ev, "type"));

  if (type == NULL)
    {
      json_decref (ev);
      return sbx_err (err, SBX_E_UNAVAILABLE, "the daemon sent an event that is not one");
    }
  if (strcmp (type, "error") == 0)
    o->failed = 1;
  else if (strcmp (type, "end_of_execution") == 0)
    o->ended = 1;
  if (o->json)
    {
      if (strcmp (type, "keepalive") != 0)
        {
          sbx_write_all (1, line, len);
          sbx_write_all (1, "\n", 1);
        }
    }
  else if (strcmp (type, "stdout") == 0 || strcmp (type, "stderr") == 0)
    {
      const char *text = json_string_value (json_object_get (ev, "text"));
      if (text)
        sbx_write_all (type[3] == 'o' ? 1 : 2, text, strlen (text));
    }
  else if (strcmp (type, "result") == 0)
    {
      const char *text = json_string_value (json_object_get (ev, "text"));
      if (text)
        put (1, text);
      else if (json_object_get (ev, "png") || json_object_get (ev, "jpeg"))
        put (1, "[image]");
    }
  else if (strcmp (type, "error") == 0)
    {
      const char *tb = json_string_value (json_object_get (ev, "traceback"));
      const char *name = json_string_value (json_object_get (ev, "name"));
      const char *value = json_string_value (json_object_get (ev, "value"));
      if (tb && tb[0])
        {
          put (2, tb);
          if (tb[strlen (tb) - 1] != '\n')
            put (2, "\n");
        }
      else
        dprintf (2, "%s: %s\n", name ? name : "Error", value ? value : "");
    }
  json_decref (ev);
  return 0;
}

static int
on_data (void *ctx, const char *data, size_t len, sbx_error_t **err)
{
  struct code_out *o = ctx;

  return sbx_ndjson_feed (&o->nd, data, len, on_line, o, err);
}

/* All of fd (a file or stdin), at most CODE_MAX bytes. */
static int
read_code (int fd, const char *what, struct sbx_buf *b, sbx_error_t **err)
{
  char chunk[65536];
  ssize_t n;

  while ((n = read (fd, chunk, sizeof chunk)) != 0)
    {
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          return sbx_err_sys (err, errno, "reading %s", what);
        }
      sbx_buf_append (b, chunk, (size_t) n);
      if (b->len > CODE_MAX)
        return sbx_err (err, SBX_E_TOO_LARGE, "%s: code larger than %d bytes", what, CODE_MAX);
    }
  if (b->failed)
    sbx_oom ();
  return 0;
}

int
sbx_cmd_code (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_buf code = SBX_BUF_INIT, target = SBX_BUF_INIT;
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct code_out out = {SBX_NDJSON_INIT, 0, 0, 0};
  const char *id = NULL, *inline_code = NULL, *file = NULL, *context = NULL, *timeout = NULL;
  json_t *body = NULL, *env = NULL;
  cleanup_free char *text = NULL;
  struct sbx_api api;
  int i, status = 0;

  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      if (sbx_cli_is_help (a))
        {
          sbx_cli_help ("code");
          return 0;
        }
      if (strcmp (a, "--json") == 0)
        out.json = 1;
      else if ((strcmp (a, "--context") == 0 || strcmp (a, "-f") == 0
                || strcmp (a, "--file") == 0 || strcmp (a, "--timeout") == 0
                || strcmp (a, "-e") == 0 || strcmp (a, "--env") == 0)
               && i + 1 < argc)
        {
          const char *v = argv[++i];
          if (strcmp (a, "--context") == 0)
            context = v;
          else if (strcmp (a, "--timeout") == 0)
            timeout = v;
          else if (a[1] == 'e' || strcmp (a, "--env") == 0)
            {
              const char *eq = strchr (v, '=');
              if (eq == NULL || eq == v)
                {
                  json_decref (env);
                  sbx_cli_usage ("code: -e wants NAME=VALUE, not `%s`", v);
                  return SBX_EXIT_USAGE;
                }
              if (env == NULL)
                env = json_object ();
              {
                struct sbx_buf k = SBX_BUF_INIT;
                sbx_buf_append (&k, v, (size_t) (eq - v));
                sbx_buf_append (&k, "", 1);
                if (k.failed)
                  sbx_oom ();
                json_object_set_new (env, k.data, json_string (eq + 1));
                sbx_buf_free (&k);
              }
            }
          else
            file = v;
        }
      else if (a[0] == '-' && strcmp (a, "-") != 0)
        {
          json_decref (env);
          sbx_cli_usage ("code: unknown option `%s`", a);
          return SBX_EXIT_USAGE;
        }
      else if (id == NULL)
        id = a;
      else if (inline_code == NULL)
        inline_code = a;
      else
        {
          json_decref (env);
          sbx_cli_usage ("code: give the code as one argument (quote it), -f FILE or -");
          return SBX_EXIT_USAGE;
        }
    }
  if (id == NULL || (inline_code == NULL) == (file == NULL))
    {
      json_decref (env);
      sbx_cli_usage ("code: expected a sandbox ID and the code: 'CODE', -f FILE or - (stdin)");
      return SBX_EXIT_USAGE;
    }
  if (sbx_cli_check_id ("code", id) != 0)
    {
      json_decref (env);
      return SBX_EXIT_USAGE;
    }
  if (file != NULL || strcmp (inline_code, "-") == 0)
    {
      const char *what = file && strcmp (file, "-") != 0 ? file : "stdin";
      int fd = what == file ? open (file, O_RDONLY | O_CLOEXEC) : 0;
      if (fd < 0)
        {
          json_decref (env);
          sbx_cli_message ("%s: %s", file, strerror (errno));
          return SBX_EXIT_FAILURE;
        }
      if (read_code (fd, what, &code, &e) < 0)
        {
          if (fd > 0)
            close (fd);
          json_decref (env);
          sbx_buf_free (&code);
          return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_FAILURE);
        }
      if (fd > 0)
        close (fd);
    }
  else
    sbx_buf_append (&code, inline_code, strlen (inline_code));
  if (code.failed)
    sbx_oom ();
  body = json_object ();
  json_object_set_new (body, "code", json_stringn (code.data ? code.data : "", code.len));
  if (json_object_get (body, "code") == NULL)
    {
      json_decref (body);
      json_decref (env);
      sbx_buf_free (&code);
      sbx_cli_message ("code: the code is not valid UTF-8");
      return SBX_EXIT_FAILURE;
    }
  if (context)
    json_object_set_new (body, "context", json_string (context));
  if (timeout)
    json_object_set_new (body, "timeout", json_string (timeout));
  if (env)
    json_object_set_new (body, "env", env);
  text = json_dumps (body, JSON_COMPACT);
  json_decref (body);
  sbx_buf_free (&code);
  if (text == NULL)
    sbx_oom ();
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  sbx_api_sandbox_path (&target, id, "/code");
  req.method = "POST";
  req.target = target.data;
  req.content_type = "application/json";
  req.body = text;
  req.body_len = strlen (text);
  req.has_body = 1;
  if (sbx_api_request (&api, NULL, &req, on_data, &out, NULL, &e) < 0
      || sbx_ndjson_finish (&out.nd, on_line, &out, &e) < 0)
    status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
  else if (!out.ended)
    {
      sbx_cli_message ("the daemon ended the stream before the end of the execution");
      status = SBX_EXIT_FAILURE;
    }
  else if (out.failed)
    status = SBX_EXIT_FAILURE;
  sbx_ndjson_clear (&out.nd);
  sbx_buf_free (&target);
  sbx_api_clear (&api);
  return status;
}
