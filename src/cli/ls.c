/* sbx CLI: `sbx ls` and `sbx kill`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "util/cleanup.h"
#include "util/parse.h"

#define LS_COLS 7

static char *
xstrdup (const char *s)
{
  char *p = strdup (s ? s : "");
  if (p == NULL)
    sbx_oom ();
  return p;
}

static char *
cell_age (const char *rfc3339, time_t now, int past)
{
  long long t = sbx_cli_parse_time (rfc3339);
  char buf[48], dur[32];

  if (t < 0)
    return xstrdup ("-");
  if (past)
    {
      sbx_cli_format_duration ((long long) now - t, dur, sizeof dur);
      snprintf (buf, sizeof buf, "%s ago", dur);
    }
  else if (t <= (long long) now)
    snprintf (buf, sizeof buf, "expired");
  else
    sbx_cli_format_duration (t - (long long) now, buf, sizeof buf);
  return xstrdup (buf);
}

static char *
cell_size (const json_t *v)
{
  char buf[32];

  if (!json_is_integer (v) || json_integer_value (v) < 0)
    return xstrdup ("-");
  sbx_format_size ((uint64_t) json_integer_value (v), buf, sizeof buf);
  return xstrdup (buf);
}

static char *
cell_number (const json_t *v)
{
  char buf[32];

  if (json_is_integer (v))
    snprintf (buf, sizeof buf, "%lld", (long long) json_integer_value (v));
  else if (json_is_real (v))
    snprintf (buf, sizeof buf, "%g", json_real_value (v));
  else
    return xstrdup ("-");
  return xstrdup (buf);
}

static void
free_cells (char **cells, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++)
    free (cells[i]);
  free (cells);
}

static void
print_sandboxes (const json_t *list)
{
  static const char *const header[LS_COLS] = {"ID",   "TEMPLATE", "USER",      "MEMORY",
                                              "CPUS", "CREATED",  "EXPIRES IN"};
  size_t rows = json_array_size (list), i, n = 0;
  char **cells = calloc ((rows + 1) * LS_COLS, sizeof *cells);
  time_t now = time (NULL);

  if (cells == NULL)
    sbx_oom ();
  for (i = 0; i < LS_COLS; i++)
    cells[n++] = xstrdup (header[i]);
  for (i = 0; i < rows; i++)
    {
      const json_t *sb = json_array_get (list, i);
      const json_t *limits = json_object_get (sb, "limits");

      cells[n++] = xstrdup (json_string_value (json_object_get (sb, "id")));
      cells[n++] = xstrdup (json_string_value (json_object_get (sb, "template")));
      cells[n++] = xstrdup (json_string_value (json_object_get (sb, "user")));
      cells[n++] = cell_size (json_object_get (limits, "memory"));
      cells[n++] = cell_number (json_object_get (limits, "cpus"));
      cells[n++] = cell_age (json_string_value (json_object_get (sb, "created_at")), now, 1);
      cells[n++] = cell_age (json_string_value (json_object_get (sb, "expires_at")), now, 0);
    }
  sbx_cli_print_table (LS_COLS, cells, n);
  free_cells (cells, n);
}

int
sbx_cmd_ls (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  json_t *answer = NULL, *list;
  int i, as_json = 0, status = 0;

  for (i = 1; i < argc; i++)
    {
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("ls");
          return 0;
        }
      if (strcmp (argv[i], "--json") == 0)
        as_json = 1;
      else if (argv[i][0] == '-')
        {
          sbx_cli_usage ("ls: unknown option %s", argv[i]);
          return SBX_EXIT_USAGE;
        }
      else
        {
          sbx_cli_usage ("ls: unexpected argument `%s`", argv[i]);
          return SBX_EXIT_USAGE;
        }
    }
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  if (sbx_api_json (&api, "GET", "/v1/sandboxes", NULL, &answer, &e) < 0)
    {
      status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
      goto out;
    }
  list = json_object_get (answer, "sandboxes");
  if (!json_is_array (list))
    {
      sbx_cli_message ("the daemon's sandbox list has no `sandboxes` array");
      status = SBX_EXIT_FAILURE;
      goto out;
    }
  if (as_json)
    {
      char *text = json_dumps (list, JSON_INDENT (2));
      if (text == NULL)
        sbx_oom ();
      printf ("%s\n", text);
      free (text);
    }
  else
    print_sandboxes (list);
  if (fflush (stdout) != 0)
    status = SBX_EXIT_FAILURE;
out:
  json_decref (answer);
  sbx_api_clear (&api);
  return status;
}

int
sbx_cmd_kill (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  struct sbx_buf target = SBX_BUF_INIT;
  int i, first = 1, opts_done = 0, status = 0, any = 0;

  for (i = 1; i < argc; i++)
    {
      if (!opts_done && strcmp (argv[i], "--") == 0)
        opts_done = 1;
      else if (!opts_done && sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("kill");
          return 0;
        }
      else if (!opts_done && argv[i][0] == '-')
        {
          sbx_cli_usage ("kill: unknown option %s", argv[i]);
          return SBX_EXIT_USAGE;
        }
      else if (sbx_cli_check_id ("kill", argv[i]) != 0)
        return SBX_EXIT_USAGE;
      else
        any = 1;
    }
  if (!any)
    {
      sbx_cli_usage ("kill: expected at least one sandbox ID");
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  for (i = 1; i < argc; i++)
    {
      if (first && strcmp (argv[i], "--") == 0)
        {
          first = 0;
          continue;
        }
      sbx_buf_reset (&target);
      sbx_api_sandbox_path (&target, argv[i], NULL);
      if (sbx_api_json (&api, "DELETE", target.data, NULL, NULL, &e) < 0)
        {
          status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
          if (status == SBX_EXIT_SBX)
            break; /* no daemon: the other ids would fail the same way */
        }
    }
  sbx_buf_free (&target);
  sbx_api_clear (&api);
  return status;
}
