/* sbx CLI: `sbx pause [--to-disk|--no-memory] ID...`, `sbx resume [--timeout D] ID...` and
 * `sbx fork ID [--count N]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "cli/http.h"
#include "cli/opts.h"
#include "util/cleanup.h"
#include "util/parse.h"

/* POST /v1/sandboxes/ID/<action> for every ID; exit 1 if any failed. */
static int
each_sandbox (const char *action, int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  struct sbx_buf target = SBX_BUF_INIT;
  json_t *body = json_object ();
  uint64_t timeout_ms = 0;
  int i, opts_done = 0, status = 0, nids = 0;
  char suffix[16];

  if (body == NULL)
    sbx_oom ();
  for (i = 1; i < argc; i++)
    {
      if (!opts_done && strcmp (argv[i], "--") == 0)
        opts_done = 1;
      else if (!opts_done && sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help (action);
          json_decref (body);
          return 0;
        }
      else if (!opts_done && strcmp (action, "resume") == 0 && strcmp (argv[i], "--timeout") == 0
               && i + 1 < argc)
        {
          if (sbx_parse_duration_ms (argv[++i], &timeout_ms, &e) < 0)
            {
              sbx_cli_usage ("resume: --timeout: %s", e->msg);
              json_decref (body);
              return SBX_EXIT_USAGE;
            }
          json_object_set_new (body, "timeout", sbx_cli_json_duration (timeout_ms));
          argv[i - 1] = argv[i] = NULL;
        }
      else if (!opts_done && strcmp (action, "pause") == 0 && strcmp (argv[i], "--to-disk") == 0)
        {
          /* A VM's memory to the store, its QEMU ended (docs/vm.md). */
          json_object_set_new (body, "to_disk", json_true ());
          argv[i] = NULL;
        }
      else if (!opts_done && strcmp (action, "pause") == 0 && strcmp (argv[i], "--no-memory") == 0)
        {
          /* Its files kept, its processes ended: resume boots it again. */
          json_object_set_new (body, "keep_memory", json_false ());
          argv[i] = NULL;
        }
      else if (!opts_done && argv[i][0] == '-')
        {
          sbx_cli_usage ("%s: unknown option %s", action, argv[i]);
          json_decref (body);
          return SBX_EXIT_USAGE;
        }
      else if (sbx_cli_check_id (action, argv[i]) != 0)
        {
          json_decref (body);
          return SBX_EXIT_USAGE;
        }
      else
        nids++;
    }
  if (nids == 0)
    {
      sbx_cli_usage ("%s: expected at least one sandbox ID", action);
      json_decref (body);
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_init (&api, &e) < 0)
    {
      json_decref (body);
      return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
    }
  snprintf (suffix, sizeof suffix, "/%s", action);
  opts_done = 0;
  for (i = 1; i < argc; i++)
    {
      if (argv[i] == NULL)
        continue;
      if (!opts_done && strcmp (argv[i], "--") == 0)
        {
          opts_done = 1;
          continue;
        }
      sbx_buf_reset (&target);
      sbx_api_sandbox_path (&target, argv[i], suffix);
      if (sbx_api_json (&api, "POST", target.data, body, NULL, &e) < 0)
        {
          status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
          if (status == SBX_EXIT_SBX)
            break; /* no daemon: the other ids would fail the same way */
        }
    }
  sbx_buf_free (&target);
  sbx_api_clear (&api);
  json_decref (body);
  return status;
}

int
sbx_cmd_pause (int argc, char **argv)
{
  return each_sandbox ("pause", argc, argv);
}

int
sbx_cmd_resume (int argc, char **argv)
{
  return each_sandbox ("resume", argc, argv);
}

/* `sbx fork ID [--count N] [--timeout D]`: print the new sandboxes' ids,
   one a line. */
int
sbx_cmd_fork (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  struct sbx_buf target = SBX_BUF_INIT;
  json_t *body = json_object (), *answer = NULL, *v;
  const char *id = NULL;
  uint64_t timeout_ms = 0;
  int i, status = 0;
  size_t k;

  if (body == NULL)
    sbx_oom ();
  for (i = 1; i < argc; i++)
    {
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("fork");
          json_decref (body);
          return 0;
        }
      if (strcmp (argv[i], "--count") == 0 && i + 1 < argc)
        {
          char *end;
          unsigned long n = strtoul (argv[++i], &end, 10);
          if (*argv[i] == '\0' || *end != '\0' || n < 1 || n > 1000)
            {
              sbx_cli_usage ("fork: --count must be a positive number, not %s", argv[i]);
              json_decref (body);
              return SBX_EXIT_USAGE;
            }
          json_object_set_new (body, "count", json_integer ((json_int_t) n));
        }
      else if (strcmp (argv[i], "--timeout") == 0 && i + 1 < argc)
        {
          if (sbx_parse_duration_ms (argv[++i], &timeout_ms, &e) < 0)
            {
              sbx_cli_usage ("fork: --timeout: %s", e->msg);
              json_decref (body);
              return SBX_EXIT_USAGE;
            }
          json_object_set_new (body, "timeout", sbx_cli_json_duration (timeout_ms));
        }
      else if (argv[i][0] == '-' || id != NULL)
        {
          sbx_cli_usage ("fork: unexpected argument %s", argv[i]);
          json_decref (body);
          return SBX_EXIT_USAGE;
        }
      else
        id = argv[i];
    }
  if (id == NULL)
    {
      sbx_cli_usage ("fork: expected a sandbox ID");
      json_decref (body);
      return SBX_EXIT_USAGE;
    }
  if (sbx_cli_check_id ("fork", id) != 0)
    {
      json_decref (body);
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_init (&api, &e) < 0)
    {
      json_decref (body);
      return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
    }
  sbx_api_sandbox_path (&target, id, "/fork");
  if (sbx_api_json (&api, "POST", target.data, body, &answer, &e) < 0)
    status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
  else
    {
      json_array_foreach (json_object_get (answer, "sandboxes"), k, v)
        printf ("%s\n", json_string_value (json_object_get (v, "id")));
      if (fflush (stdout) != 0)
        status = SBX_EXIT_FAILURE;
    }
  json_decref (answer);
  json_decref (body);
  sbx_buf_free (&target);
  sbx_api_clear (&api);
  return status;
}

/* `sbx snapshot create ID NAME`, `sbx snapshot ls [--json]`,
   `sbx snapshot rm NAME...`. */
int
sbx_cmd_snapshot (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  struct sbx_buf target = SBX_BUF_INIT;
  json_t *answer = NULL, *body = NULL, *v;
  const char *sub = argc > 1 ? argv[1] : NULL;
  int i, status = 0, json_out = 0;
  size_t k;

  if (sub == NULL || sbx_cli_is_help (sub))
    {
      sbx_cli_help ("snapshot");
      return sub ? 0 : SBX_EXIT_USAGE;
    }
  if (strcmp (sub, "create") == 0 && argc != 4)
    {
      sbx_cli_usage ("snapshot create: expected ID NAME");
      return SBX_EXIT_USAGE;
    }
  if (strcmp (sub, "ls") == 0 && !(argc == 2 || (argc == 3 && strcmp (argv[2], "--json") == 0)))
    {
      sbx_cli_usage ("snapshot ls: unexpected argument");
      return SBX_EXIT_USAGE;
    }
  if (strcmp (sub, "create") == 0 && sbx_cli_check_id ("snapshot create", argv[2]) != 0)
    return SBX_EXIT_USAGE;
  if (strcmp (sub, "rm") == 0 && argc < 3)
    {
      sbx_cli_usage ("snapshot rm: expected at least one NAME");
      return SBX_EXIT_USAGE;
    }
  if (strcmp (sub, "create") != 0 && strcmp (sub, "ls") != 0 && strcmp (sub, "rm") != 0)
    {
      sbx_cli_usage ("snapshot: unknown command %s (create, ls, rm)", sub);
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  if (strcmp (sub, "create") == 0)
    {
      body = json_pack ("{s:s}", "name", argv[3]);
      if (body == NULL)
        sbx_oom ();
      sbx_api_sandbox_path (&target, argv[2], "/snapshots");
      if (sbx_api_json (&api, "POST", target.data, body, &answer, &e) < 0)
        status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
      else
        printf ("%s\n", json_string_value (json_object_get (answer, "name")));
    }
  else if (strcmp (sub, "ls") == 0)
    {
      json_out = argc == 3;
      if (sbx_api_json (&api, "GET", "/v1/snapshots", NULL, &answer, &e) < 0)
        status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
      else if (json_out)
        {
          /* a list, as every other `ls --json` prints it */
          char *text = json_dumps (json_object_get (answer, "snapshots"), JSON_INDENT (2));
          printf ("%s\n", text ? text : "");
          free (text);
        }
      else
        {
          printf ("%-32s %-16s %-20s %12s\n", "NAME", "TEMPLATE", "SOURCE", "BYTES");
          json_array_foreach (json_object_get (answer, "snapshots"), k, v)
            printf ("%-32s %-16s %-20s %12lld\n", json_string_value (json_object_get (v, "name")),
                    json_string_value (json_object_get (v, "template")),
                    json_string_value (json_object_get (v, "source")),
                    (long long) json_integer_value (json_object_get (v, "bytes")));
        }
    }
  else
    for (i = 2; i < argc && status != SBX_EXIT_SBX; i++)
      {
        int rc = sbx_cli_delete_named (&api, "/v1/snapshots/", argv[i]);
        if (rc != 0)
          status = rc;
      }
  if (fflush (stdout) != 0 && status == 0)
    status = SBX_EXIT_FAILURE;
  json_decref (answer);
  json_decref (body);
  sbx_buf_free (&target);
  sbx_api_clear (&api);
  return status;
}
