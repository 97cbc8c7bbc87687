/* sbx CLI: `sbx pause ID...` and `sbx resume [--timeout D] ID...`. */
#include <stdio.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"
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
      else if (!opts_done && argv[i][0] == '-')
        {
          sbx_cli_usage ("%s: unknown option %s", action, argv[i]);
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
