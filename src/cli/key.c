/* sbx CLI: `sbx key create|ls|rm` (API keys; unix socket only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "util/cleanup.h"

static int
key_create (struct sbx_api *api, int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  const char *tenant = NULL;
  json_t *body, *key = NULL;
  const char *id, *secret, *key_tenant;
  int i, status = 0;

  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      if (sbx_cli_is_help (a))
        {
          sbx_cli_help ("key create");
          return 0;
        }
      if (strncmp (a, "--tenant=", 9) == 0)
        tenant = a + 9;
      else if (strcmp (a, "--tenant") == 0 && i + 1 < argc)
        tenant = argv[++i];
      else if (strcmp (a, "--tenant") == 0)
        {
          sbx_cli_usage ("key create: option --tenant needs a value");
          return SBX_EXIT_USAGE;
        }
      else
        {
          sbx_cli_usage ("key create: unexpected argument `%s`", a);
          return SBX_EXIT_USAGE;
        }
    }
  body = json_object ();
  if (body == NULL)
    sbx_oom ();
  if (tenant != NULL && json_object_set_new (body, "tenant", json_string (tenant)) < 0)
    {
      json_decref (body);
      sbx_cli_message ("key create: --tenant `%s` is not valid UTF-8", tenant);
      return SBX_EXIT_FAILURE;
    }
  if (sbx_api_json (api, "POST", "/v1/keys", body, &key, &e) < 0)
    status = sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
  json_decref (body);
  if (status != 0)
    return status;
  id = json_string_value (json_object_get (key, "id"));
  key_tenant = json_string_value (json_object_get (key, "tenant"));
  secret = json_string_value (json_object_get (key, "key"));
  if (secret == NULL)
    {
      sbx_cli_message ("the daemon created a key but did not send it");
      json_decref (key);
      return SBX_EXIT_FAILURE;
    }
  /* The key alone on the last line, for `| tail -n1`; it is shown once. */
  printf ("id: %s\ntenant: %s\n%s\n", id ? id : "-", key_tenant ? key_tenant : "-", secret);
  json_decref (key);
  return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
}

static int
key_ls (struct sbx_api *api, int argc, char **argv)
{
  static const char *const header[4] = {"ID", "TENANT", "PREFIX", "CREATED"};
  cleanup_error sbx_error_t *e = NULL;
  json_t *answer = NULL, *keys;
  char **cells;
  size_t rows, i, n = 0;
  int as_json = 0, status = 0;
  time_t now = time (NULL);

  for (i = 1; i < (size_t) argc; i++)
    {
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("key ls");
          return 0;
        }
      if (strcmp (argv[i], "--json") == 0)
        as_json = 1;
      else
        {
          sbx_cli_usage ("key ls: unexpected argument `%s`", argv[i]);
          return SBX_EXIT_USAGE;
        }
    }
  if (sbx_api_json (api, "GET", "/v1/keys", NULL, &answer, &e) < 0)
    return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
  keys = json_object_get (answer, "keys");
  if (!json_is_array (keys))
    {
      sbx_cli_message ("the daemon's key list has no `keys` array");
      json_decref (answer);
      return SBX_EXIT_FAILURE;
    }
  if (as_json)
    {
      char *text = json_dumps (keys, JSON_INDENT (2));
      if (text == NULL)
        sbx_oom ();
      printf ("%s\n", text);
      free (text);
      json_decref (answer);
      return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
    }
  rows = json_array_size (keys);
  cells = calloc ((rows + 1) * 4, sizeof *cells);
  if (cells == NULL)
    sbx_oom ();
  for (i = 0; i < 4; i++)
    cells[n++] = strdup (header[i]);
  for (i = 0; i < rows; i++)
    {
      const json_t *k = json_array_get (keys, i);
      const char *created = json_string_value (json_object_get (k, "created_at"));
      long long t = sbx_cli_parse_time (created);
      char age[48], dur[32];
      const char *v;

      v = json_string_value (json_object_get (k, "id"));
      cells[n++] = strdup (v ? v : "-");
      v = json_string_value (json_object_get (k, "tenant"));
      cells[n++] = strdup (v ? v : "-");
      v = json_string_value (json_object_get (k, "prefix"));
      cells[n++] = strdup (v ? v : "-");
      if (t >= 0)
        {
          sbx_cli_format_duration ((long long) now - t, dur, sizeof dur);
          snprintf (age, sizeof age, "%s ago", dur);
        }
      else
        snprintf (age, sizeof age, "%s", created ? created : "-");
      cells[n++] = strdup (age);
    }
  for (i = 0; i < n; i++)
    if (cells[i] == NULL)
      sbx_oom ();
  sbx_cli_print_table (4, cells, n);
  for (i = 0; i < n; i++)
    free (cells[i]);
  free (cells);
  json_decref (answer);
  if (fflush (stdout) != 0)
    status = SBX_EXIT_FAILURE;
  return status;
}

static int
key_rm (struct sbx_api *api, int argc, char **argv)
{
  int i, status = 0, any = 0;

  for (i = 1; i < argc; i++)
    {
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("key rm");
          return 0;
        }
      if (argv[i][0] == '-')
        {
          sbx_cli_usage ("key rm: unknown option %s", argv[i]);
          return SBX_EXIT_USAGE;
        }
      any = 1;
    }
  if (!any)
    {
      sbx_cli_usage ("key rm: expected a key ID");
      return SBX_EXIT_USAGE;
    }
  for (i = 1; i < argc && status != SBX_EXIT_SBX; i++)
    {
      int rc = sbx_cli_delete_named (api, "/v1/keys/", argv[i]);
      if (rc != 0)
        status = rc;
    }
  return status;
}

int
sbx_cmd_key (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  const char *sub;
  int (*fn) (struct sbx_api *, int, char **);
  int status;

  if (argc < 2)
    {
      sbx_cli_usage ("key: expected create, ls or rm");
      return SBX_EXIT_USAGE;
    }
  sub = argv[1];
  if (sbx_cli_is_help (sub))
    {
      sbx_cli_help ("key");
      return 0;
    }
  if (strcmp (sub, "create") == 0)
    fn = key_create;
  else if (strcmp (sub, "ls") == 0 || strcmp (sub, "list") == 0)
    fn = key_ls;
  else if (strcmp (sub, "rm") == 0 || strcmp (sub, "delete") == 0)
    fn = key_rm;
  else
    {
      sbx_cli_usage ("key: unknown subcommand `%s` (expected create, ls or rm)", sub);
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  status = fn (&api, argc - 1, argv + 1);
  sbx_api_clear (&api);
  return status;
}
