/* sbx CLI: `sbx stats [-f] [--json] [ID...]`, as docker stats: each
 * sandbox's CPU use, memory, processes and disk (GET .../metrics), of the
 * IDs given or of every sandbox. CPU % is the CPU time used between two
 * looks (half a second apart for one table; a second apart with -f,
 * which redraws until interrupted) over the wall time between them: 100
 * is one CPU busy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "util/cleanup.h"
#include "util/parse.h"

#define STATS_COLS 7
#define STATS_MAX 1024

struct sample
{
  char id[32];
  json_t *m;          /* owned; the metrics, NULL when it could not be read */
  double cpu_seconds; /* from m */
  double cpu_percent; /* NAN until two looks */
};

static double
now_seconds (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* The IDs to show: those given, or every sandbox's. */
static size_t
pick_ids (struct sbx_api *api, int argc, char **argv, struct sample *s, sbx_error_t **err)
{
  json_t *answer = NULL, *sb;
  size_t n = 0, i;
  int k;

  for (k = 0; k < argc && n < STATS_MAX; k++)
    snprintf (s[n++].id, sizeof s[0].id, "%s", argv[k]);
  if (n > 0)
    return n;
  if (sbx_api_json (api, "GET", "/v1/sandboxes", NULL, &answer, err) < 0)
    return (size_t) -1;
  json_array_foreach (json_object_get (answer, "sandboxes"), i, sb)
    if (n < STATS_MAX)
      snprintf (s[n++].id, sizeof s[0].id, "%s", json_string_value (json_object_get (sb, "id")));
  json_decref (answer);
  return n;
}

/* One look at every sample; the CPU % against the previous look. */
static int
look (struct sbx_api *api, struct sample *s, size_t n, double elapsed, int quiet_missing)
{
  struct sbx_buf target = SBX_BUF_INIT;
  int status = 0;
  size_t i;

  for (i = 0; i < n; i++)
    {
      cleanup_error sbx_error_t *e = NULL;
      json_t *m = NULL;
      double before = s[i].cpu_seconds;
      int had = s[i].m != NULL;
      sbx_buf_reset (&target);
      sbx_api_sandbox_path (&target, s[i].id, "/metrics");
      json_decref (s[i].m);
      s[i].m = NULL;
      if (sbx_api_json (api, "GET", target.data, NULL, &m, &e) < 0)
        {
          if (!quiet_missing)
            sbx_cli_message ("%s", e->msg);
          status = sbx_api_unreachable (api) ? SBX_EXIT_SBX : SBX_EXIT_FAILURE;
          if (status == SBX_EXIT_SBX)
            break;
          continue;
        }
      s[i].m = m;
      s[i].cpu_seconds = json_number_value (json_object_get (m, "cpu_seconds"));
      s[i].cpu_percent = had && elapsed > 0 ? (s[i].cpu_seconds - before) / elapsed * 100.0 : NAN;
    }
  sbx_buf_free (&target);
  return status;
}

static char *
size_cell (const json_t *used, const json_t *limit)
{
  char a[32], b[32], *out;

  sbx_format_size_bound ((uint64_t) json_integer_value (used), 0, a, sizeof a);
  if (json_is_integer (limit) && json_integer_value (limit) > 0)
    sbx_format_size_bound ((uint64_t) json_integer_value (limit), 0, b, sizeof b);
  else
    snprintf (b, sizeof b, "-");
  if (asprintf (&out, "%s / %s", a, b) < 0)
    sbx_oom ();
  return out;
}

/* "12.3%", or "-" before two looks */
static char *
percent_cell (double v)
{
  char *out;

  if (isnan (v))
    out = strdup ("-");
  else if (asprintf (&out, "%.1f%%", v) < 0)
    out = NULL;
  if (out == NULL)
    sbx_oom ();
  return out;
}

static void
print_table (const struct sample *s, size_t n)
{
  static const char *const header[STATS_COLS] = {"ID", "CPU %", "MEM USAGE / LIMIT", "MEM %",
                                                 "PIDS", "DISK / LIMIT", "OOM KILLS"};
  char **cells = calloc ((n + 1) * STATS_COLS, sizeof *cells);
  size_t i, c = 0;

  if (cells == NULL)
    sbx_oom ();
  for (i = 0; i < STATS_COLS; i++)
    if ((cells[c++] = strdup (header[i])) == NULL)
      sbx_oom ();
  for (i = 0; i < n; i++)
    {
      const json_t *m = s[i].m;
      double mem, lim;
      char buf[32];
      if (m == NULL)
        continue;
      mem = (double) json_integer_value (json_object_get (m, "memory_bytes"));
      lim = (double) json_integer_value (json_object_get (m, "memory_limit"));
      if ((cells[c++] = strdup (s[i].id)) == NULL)
        sbx_oom ();
      cells[c++] = percent_cell (s[i].cpu_percent);
      cells[c++] = size_cell (json_object_get (m, "memory_bytes"), json_object_get (m, "memory_limit"));
      cells[c++] = percent_cell (lim > 0 ? mem / lim * 100.0 : NAN);
      snprintf (buf, sizeof buf, "%lld / %lld", (long long) json_integer_value (json_object_get (m, "pids")),
                (long long) json_integer_value (json_object_get (m, "pids_limit")));
      if ((cells[c++] = strdup (buf)) == NULL)
        sbx_oom ();
      cells[c++] = size_cell (json_object_get (m, "disk_bytes"), json_object_get (m, "disk_limit"));
      snprintf (buf, sizeof buf, "%lld", (long long) json_integer_value (json_object_get (m, "oom_kills")));
      if ((cells[c++] = strdup (buf)) == NULL)
        sbx_oom ();
    }
  sbx_cli_print_table (STATS_COLS, cells, c);
  for (i = 0; i < c; i++)
    free (cells[i]);
  free (cells);
}

static void
print_json (const struct sample *s, size_t n)
{
  json_t *list = json_array ();
  char *text;
  size_t i;

  if (list == NULL)
    sbx_oom ();
  for (i = 0; i < n; i++)
    if (s[i].m != NULL)
      {
        json_t *o = json_copy (s[i].m);
        if (o == NULL)
          sbx_oom ();
        json_object_set_new (o, "id", json_string (s[i].id));
        json_object_set_new (o, "cpu_percent",
                             isnan (s[i].cpu_percent) ? json_null () : json_real (s[i].cpu_percent));
        json_array_append_new (list, o);
      }
  text = json_dumps (list, JSON_INDENT (2));
  if (text == NULL)
    sbx_oom ();
  printf ("%s\n", text);
  free (text);
  json_decref (list);
}

int
sbx_cmd_stats (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  struct sample *s;
  int i, follow = 0, as_json = 0, nids = 0, status = 0, redraw = isatty (STDOUT_FILENO);
  char **ids = calloc ((size_t) argc + 1, sizeof *ids);
  size_t n, k;
  double t0;

  if (ids == NULL)
    sbx_oom ();
  for (i = 1; i < argc; i++)
    {
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("stats");
          free (ids);
          return 0;
        }
      if (strcmp (argv[i], "-f") == 0 || strcmp (argv[i], "--follow") == 0)
        follow = 1;
      else if (strcmp (argv[i], "--no-stream") == 0)
        follow = 0;
      else if (strcmp (argv[i], "--json") == 0)
        as_json = 1;
      else if (argv[i][0] == '-' || sbx_cli_check_id ("stats", argv[i]) != 0)
        {
          if (argv[i][0] == '-')
            sbx_cli_usage ("stats: unknown option %s", argv[i]);
          free (ids);
          return SBX_EXIT_USAGE;
        }
      else
        ids[nids++] = argv[i];
    }
  if (sbx_api_init (&api, &e) < 0)
    {
      free (ids);
      return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
    }
  s = calloc (STATS_MAX, sizeof *s);
  if (s == NULL)
    sbx_oom ();
  n = pick_ids (&api, nids, ids, s, &e);
  if (n == (size_t) -1)
    {
      status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
      goto out;
    }
  for (k = 0; k < n; k++)
    s[k].cpu_percent = NAN;
  /* the first look gives CPU time, the next one its rate */
  t0 = now_seconds ();
  status = look (&api, s, n, 0, 0);
  for (;;)
    {
      double t1;
      if (status == SBX_EXIT_SBX)
        break;
      usleep (follow ? 1000000 : 500000);
      t1 = now_seconds ();
      /* a sandbox gone since the first look is left out quietly */
      status = look (&api, s, n, t1 - t0, 1) == SBX_EXIT_SBX ? SBX_EXIT_SBX : status;
      t0 = t1;
      if (follow && redraw && !as_json)
        fputs ("\033[H\033[J", stdout); /* docker stats redraws in place */
      if (as_json)
        print_json (s, n);
      else
        print_table (s, n);
      if (fflush (stdout) != 0)
        {
          status = SBX_EXIT_FAILURE;
          break;
        }
      if (!follow)
        break;
    }
out:
  for (k = 0; k < n && n != (size_t) -1; k++)
    json_decref (s[k].m);
  free (s);
  free (ids);
  sbx_api_clear (&api);
  return status;
}
