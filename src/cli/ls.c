/* sbx CLI: `sbx ls`, `sbx inspect` and `sbx kill` (`stop`, `rm`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "cli/format.h"
#include "util/cleanup.h"
#include "util/parse.h"

#define LS_COLS 10
#define LS_FILTERS_MAX 16

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
  static const char *const header[LS_COLS] = {"ID",   "STATE", "ISOLATION", "TEMPLATE", "MEMORY",
                                              "CPUS", "PIDS",  "DISK",      "AGE",      "EXPIRES IN"};
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

      const char *state = json_string_value (json_object_get (sb, "state"));

      cells[n++] = xstrdup (json_string_value (json_object_get (sb, "id")));
      cells[n++] = xstrdup (state);
      cells[n++] = xstrdup (json_string_value (json_object_get (sb, "isolation")));
      cells[n++] = xstrdup (json_string_value (json_object_get (sb, "template")));
      cells[n++] = cell_size (json_object_get (limits, "memory"));
      cells[n++] = cell_number (json_object_get (limits, "cpus"));
      cells[n++] = cell_number (json_object_get (limits, "pids"));
      cells[n++] = cell_size (json_object_get (limits, "disk"));
      cells[n++] = cell_age (json_string_value (json_object_get (sb, "created_at")), now, 1);
      /* a paused sandbox's clock stands still */
      cells[n++] = state && strcmp (state, "paused") == 0
                       ? xstrdup ("paused")
                       : cell_age (json_string_value (json_object_get (sb, "expires_at")), now, 0);
    }
  sbx_cli_print_table (LS_COLS, cells, n);
  free_cells (cells, n);
}

/* --filter KEY=VALUE: state, isolation, template, user, id (a prefix),
   metadata.K or label=K=V (docker's spelling). */
struct ls_filter
{
  const char *key;   /* a top-level field, or "metadata" */
  const char *mkey;  /* the metadata key (metadata.K, label=K=V) */
  size_t mkey_len;
  const char *value;
};

static int
parse_filter (const char *spec, struct ls_filter *f)
{
  static const char *const fields[] = {"state", "isolation", "template", "user", "id"};
  const char *eq = strchr (spec, '=');
  size_t i;

  memset (f, 0, sizeof *f);
  if (eq == NULL)
    return -1;
  if (strncmp (spec, "metadata.", 9) == 0 && eq > spec + 9)
    {
      f->key = "metadata";
      f->mkey = spec + 9;
      f->mkey_len = (size_t) (eq - f->mkey);
      f->value = eq + 1;
      return 0;
    }
  if (strncmp (spec, "label=", 6) == 0)
    {
      const char *eq2 = strchr (spec + 6, '=');
      f->key = "metadata";
      f->mkey = spec + 6;
      f->mkey_len = eq2 ? (size_t) (eq2 - f->mkey) : strlen (f->mkey);
      f->value = eq2 ? eq2 + 1 : NULL; /* label=K: any value */
      return f->mkey_len > 0 ? 0 : -1;
    }
  for (i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if ((size_t) (eq - spec) == strlen (fields[i]) && strncmp (spec, fields[i], strlen (fields[i])) == 0)
      {
        f->key = fields[i];
        f->value = eq + 1;
        return 0;
      }
  return -1;
}

static int
filter_match (const struct ls_filter *f, const json_t *sb)
{
  const char *v;

  if (strcmp (f->key, "metadata") == 0)
    {
      const char *key;
      json_t *val;
      json_object_foreach (json_object_get (sb, "metadata"), key, val)
        if (strlen (key) == f->mkey_len && strncmp (key, f->mkey, f->mkey_len) == 0)
          return f->value == NULL
                 || (json_is_string (val) && strcmp (json_string_value (val), f->value) == 0);
      return 0;
    }
  v = json_string_value (json_object_get (sb, f->key));
  if (v == NULL)
    return 0;
  if (strcmp (f->key, "id") == 0)
    return strncmp (v, f->value, strlen (f->value)) == 0;
  return strcmp (v, f->value) == 0;
}

static void
print_json_value (const json_t *v)
{
  char *text = json_dumps (v, JSON_INDENT (2) | JSON_ENCODE_ANY);

  if (text == NULL)
    sbx_oom ();
  printf ("%s\n", text);
  free (text);
}

int
sbx_cmd_ls (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  struct ls_filter filters[LS_FILTERS_MAX];
  json_t *answer = NULL, *list, *shown = NULL;
  const char *format = NULL;
  int i, as_json = 0, quiet = 0, status = 0;
  size_t nfilters = 0, k;

  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      if (sbx_cli_is_help (a))
        {
          sbx_cli_help ("ls");
          return 0;
        }
      if (strcmp (a, "--json") == 0)
        as_json = 1;
      else if (strcmp (a, "-q") == 0 || strcmp (a, "--quiet") == 0)
        quiet = 1;
      else if ((strcmp (a, "--format") == 0 || strcmp (a, "--filter") == 0 || strcmp (a, "-f") == 0)
               && i + 1 < argc)
        {
          const char *v = argv[++i];
          if (strcmp (a, "--format") == 0)
            {
              if (strcmp (v, "json") == 0)
                as_json = 1;
              else if (sbx_cli_format_check (v, &e) < 0)
                {
                  sbx_cli_usage ("ls: %s", e->msg);
                  return SBX_EXIT_USAGE;
                }
              else
                format = v;
            }
          else if (nfilters == LS_FILTERS_MAX || parse_filter (v, &filters[nfilters]) < 0)
            {
              sbx_cli_usage ("ls: --filter `%s`: expected state=, isolation=, template=, user=, "
                             "id=, metadata.KEY= or label=KEY[=VALUE] (at most %d)",
                             v, LS_FILTERS_MAX);
              return SBX_EXIT_USAGE;
            }
          else
            nfilters++;
        }
      else if (a[0] == '-')
        {
          sbx_cli_usage ("ls: unknown option %s, or its value is missing", a);
          return SBX_EXIT_USAGE;
        }
      else
        {
          sbx_cli_usage ("ls: unexpected argument `%s`", a);
          return SBX_EXIT_USAGE;
        }
    }
  if (quiet + as_json + (format != NULL) > 1)
    {
      sbx_cli_usage ("ls: -q, --json and --format are one or another");
      return SBX_EXIT_USAGE;
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
  /* Every filter must match (docker's filters of different keys). */
  shown = json_array ();
  if (shown == NULL)
    sbx_oom ();
  {
    size_t idx;
    json_t *sb;
    json_array_foreach (list, idx, sb)
      {
        for (k = 0; k < nfilters && filter_match (&filters[k], sb); k++)
          ;
        if (k == nfilters)
          json_array_append (shown, sb);
      }
  }
  if (as_json)
    print_json_value (shown);
  else if (quiet || format)
    {
      size_t idx;
      json_t *sb;
      json_array_foreach (shown, idx, sb)
        if (quiet)
          printf ("%s\n", json_string_value (json_object_get (sb, "id")));
        else
          sbx_cli_format_print (format, sb);
    }
  else
    print_sandboxes (shown);
  if (fflush (stdout) != 0)
    status = SBX_EXIT_FAILURE;
out:
  json_decref (shown);
  json_decref (answer);
  sbx_api_clear (&api);
  return status;
}

/* `sbx inspect [--format T] ID...`: what GET returns, as docker inspect
   prints it (a JSON list), or T for each. Exits 1 if any is unknown (the
   others are still shown). */
int
sbx_cmd_inspect (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  struct sbx_buf target = SBX_BUF_INIT;
  const char *format = NULL;
  json_t *all;
  int i, status = 0, any = 0;

  for (i = 1; i < argc; i++)
    {
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("inspect");
          return 0;
        }
      if (strcmp (argv[i], "--json") == 0)
        continue;
      if (strcmp (argv[i], "--format") == 0 || strcmp (argv[i], "-f") == 0)
        {
          if (i + 1 >= argc)
            {
              sbx_cli_usage ("inspect: %s needs a TEMPLATE", argv[i]);
              return SBX_EXIT_USAGE;
            }
          format = argv[++i];
          if (strcmp (format, "json") == 0)
            format = NULL;
          else if (sbx_cli_format_check (format, &e) < 0)
            {
              sbx_cli_usage ("inspect: %s", e->msg);
              return SBX_EXIT_USAGE;
            }
          continue;
        }
      if (argv[i][0] == '-')
        {
          sbx_cli_usage ("inspect: unknown option %s", argv[i]);
          return SBX_EXIT_USAGE;
        }
      if (sbx_cli_check_id ("inspect", argv[i]) != 0)
        return SBX_EXIT_USAGE;
      any = 1;
    }
  if (!any)
    {
      sbx_cli_usage ("inspect: expected at least one sandbox ID");
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  all = json_array ();
  if (all == NULL)
    sbx_oom ();
  for (i = 1; i < argc; i++)
    {
      json_t *answer = NULL;
      if (argv[i][0] == '-')
        {
          if (strcmp (argv[i], "--format") == 0 || strcmp (argv[i], "-f") == 0)
            i++;
          continue;
        }
      sbx_buf_reset (&target);
      sbx_api_sandbox_path (&target, argv[i], "");
      if (sbx_api_json (&api, "GET", target.data, NULL, &answer, &e) < 0)
        {
          status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
          if (status == SBX_EXIT_SBX)
            break;
          continue;
        }
      if (format)
        sbx_cli_format_print (format, answer);
      json_array_append_new (all, answer);
    }
  if (format == NULL && status != SBX_EXIT_SBX)
    print_json_value (all);
  if (fflush (stdout) != 0)
    status = SBX_EXIT_FAILURE;
  json_decref (all);
  sbx_buf_free (&target);
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
