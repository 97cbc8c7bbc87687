/* sbx CLI: `sbx logs [-f] ID [PID]`, as docker logs: what the sandbox's
 * processes printed, stdout to ours and stderr to ours. The daemon keeps
 * the output of the processes started through the API (background ones,
 * and commands while they run; the last 1 MiB per stream, docs/api.md):
 * each is read with GET .../processes/PID/attach?follow=0, which sends
 * what is kept and ends. With more than one, a line on stderr names each
 * before its output. -f then follows one process, PID or the newest, as
 * it prints, until it ends (its exit status is not ours: logs succeeded).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "cli/events.h"
#include "util/cleanup.h"

struct logs_stream
{
  struct sbx_ndjson nd;
  struct sbx_buf data;
};

static int
on_line (void *ctx, const char *line, size_t len, sbx_error_t **err)
{
  struct logs_stream *s = ctx;
  enum sbx_event_type type;
  json_t *obj = NULL;
  int rc = 0;

  if (sbx_event_parse (line, len, &type, &s->data, &obj, err) < 0)
    return -1;
  if ((type == SBX_EVENT_STDOUT || type == SBX_EVENT_STDERR) && s->data.len > 0
      && sbx_write_all (type == SBX_EVENT_STDOUT ? STDOUT_FILENO : STDERR_FILENO, s->data.data,
                        s->data.len)
             < 0)
    rc = sbx_err_sys (err, errno, "writing the output");
  else if (type == SBX_EVENT_DROPPED)
    sbx_cli_message ("%lld bytes of stdout and %lld bytes of stderr are no longer kept",
                     (long long) json_integer_value (json_object_get (obj, "stdout")),
                     (long long) json_integer_value (json_object_get (obj, "stderr")));
  json_decref (obj);
  return rc;
}

static int
on_data (void *ctx, const char *data, size_t len, sbx_error_t **err)
{
  struct logs_stream *s = ctx;
  return sbx_ndjson_feed (&s->nd, data, len, on_line, s, err);
}

static int
print_process (struct sbx_api *api, const char *id, long long pid, int follow, sbx_error_t **err)
{
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_buf target = SBX_BUF_INIT;
  struct logs_stream s = {SBX_NDJSON_INIT, SBX_BUF_INIT};
  int rc;

  sbx_api_sandbox_path (&target, id, NULL);
  sbx_buf_printf (&target, "/processes/%lld/attach?encoding=base64&follow=%d", pid, follow);
  req.method = "GET";
  req.target = target.data;
  rc = sbx_api_request (api, NULL, &req, on_data, &s, NULL, err) < 0
               || sbx_ndjson_finish (&s.nd, on_line, &s, err) < 0
           ? -1
           : 0;
  sbx_ndjson_clear (&s.nd);
  sbx_buf_free (&s.data);
  sbx_buf_free (&target);
  return rc;
}

int
sbx_cmd_logs (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  struct sbx_buf target = SBX_BUF_INIT;
  json_t *answer = NULL, *list, *p;
  const char *id = NULL;
  long long only = -1;
  int i, follow = 0, status = 0;
  size_t k, n;

  for (i = 1; i < argc; i++)
    {
      char *end;
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("logs");
          return 0;
        }
      if (strcmp (argv[i], "-f") == 0 || strcmp (argv[i], "--follow") == 0)
        follow = 1;
      else if (argv[i][0] == '-')
        {
          sbx_cli_usage ("logs: unknown option %s", argv[i]);
          return SBX_EXIT_USAGE;
        }
      else if (id == NULL)
        id = argv[i];
      else if (only < 0 && (only = strtoll (argv[i], &end, 10)) > 0 && *end == '\0')
        ;
      else
        {
          sbx_cli_usage ("logs: `%s` is not a process id (sbx logs [-f] ID [PID])", argv[i]);
          return SBX_EXIT_USAGE;
        }
    }
  if (id == NULL)
    {
      sbx_cli_usage ("logs: expected a sandbox ID");
      return SBX_EXIT_USAGE;
    }
  if (sbx_cli_check_id ("logs", id) != 0)
    return SBX_EXIT_USAGE;
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  sbx_api_sandbox_path (&target, id, "/processes");
  if (sbx_api_json (&api, "GET", target.data, NULL, &answer, &e) < 0)
    {
      status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
      goto out;
    }
  list = json_object_get (answer, "processes");
  n = json_array_size (list);
  if (only > 0)
    {
      /* one process, listed or not (the attach says if it is unknown) */
      if (print_process (&api, id, only, follow, &e) < 0)
        status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
      goto out;
    }
  if (n == 0)
    sbx_cli_message ("logs: %s has no process whose output is kept (background processes, and "
                     "commands while they run)",
                     id);
  json_array_foreach (list, k, p)
    {
      long long pid = (long long) json_integer_value (json_object_get (p, "pid"));
      if (n > 1)
        {
          /* the command as it was started, its first 72 bytes */
          struct sbx_buf cmd = SBX_BUF_INIT;
          size_t a;
          json_t *arg;
          json_array_foreach (json_object_get (p, "argv"), a, arg)
            if (json_is_string (arg))
              sbx_buf_printf (&cmd, "%s%s", a ? " " : "", json_string_value (arg));
          fflush (stdout);
          fprintf (stderr, "==> pid %lld: %.72s%s <==\n", pid, cmd.data ? cmd.data : "?",
                   cmd.len > 72 ? "..." : "");
          sbx_buf_free (&cmd);
        }
      /* -f follows the newest, after what the others kept */
      if (print_process (&api, id, pid, follow && k + 1 == n, &e) < 0)
        {
          status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
          if (status == SBX_EXIT_SBX)
            break;
        }
    }
out:
  json_decref (answer);
  sbx_buf_free (&target);
  sbx_api_clear (&api);
  return status;
}
