/* sbx CLI: option parsing for run, create and exec (see opts.h). */
#include "cli/opts.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "util/parse.h"

struct opt_def
{
  const char *name;
  char short_name; /* 0: long form only */
  unsigned flag;
  int takes_value;
};

static const struct opt_def opt_defs[] = {
  {"timeout", 0, SBX_OPT_TIMEOUT, 1},
  {"memory", 0, SBX_OPT_MEMORY, 1},
  {"cpus", 0, SBX_OPT_CPUS, 1},
  {"pids", 0, SBX_OPT_PIDS, 1},
  {"disk", 0, SBX_OPT_DISK, 1},
  {"env", 'e', SBX_OPT_ENV, 1},
  {"workdir", 'w', SBX_OPT_WORKDIR, 1},
  {"user", 'u', SBX_OPT_USER, 1},
  {"template", 0, SBX_OPT_TEMPLATE, 1},
  {"isolation", 0, SBX_OPT_ISOLATION, 1},
  {"file", 0, SBX_OPT_FILE, 1},
  {"interactive", 'i', SBX_OPT_INTERACTIVE, 0},
  {"tty", 't', SBX_OPT_TTY, 0},
  {"net", 0, SBX_OPT_NET, 1},
  {"snapshot", 0, SBX_OPT_SNAPSHOT, 1},
  {"on-timeout", 0, SBX_OPT_ON_TIMEOUT, 1},
};

#define N_OPT_DEFS (sizeof opt_defs / sizeof opt_defs[0])

static int
add_env (struct sbx_cli_opts *o, const char *value, sbx_error_t **err)
{
  const char *eq = strchr (value, '=');
  char *name;
  const char *v;

  if (eq == value || value[0] == '\0')
    return sbx_err (err, SBX_E_INVALID, "--env: `%s` has an empty variable name", value);
  if (o->env == NULL)
    {
      o->env = json_object ();
      if (o->env == NULL)
        sbx_oom ();
    }
  if (eq == NULL)
    {
      /* -e NAME: pass our own value through; unset means not set there
         either (like docker run -e). */
      v = getenv (value);
      if (v == NULL)
        return 0;
      name = strdup (value);
    }
  else
    {
      name = strndup (value, (size_t) (eq - value));
      v = eq + 1;
    }
  if (name == NULL)
    sbx_oom ();
  if (json_object_set_new (o->env, name, json_string (v)) < 0)
    {
      free (name);
      return sbx_err (err, SBX_E_INVALID, "--env: `%s` is not valid UTF-8", value);
    }
  free (name);
  return 0;
}

int
sbx_cli_net_spec (json_t **network, const char *spec, sbx_error_t **err)
{
  const char *list = NULL, *key = NULL, *p;
  json_t *arr;

  if (*network == NULL)
    {
      *network = json_pack ("{s:[], s:[]}", "allow", "deny");
      if (*network == NULL)
        sbx_oom ();
    }
  if (strcmp (spec, "none") == 0)
    {
      json_array_clear (json_object_get (*network, "allow"));
      json_array_clear (json_object_get (*network, "deny"));
      return 0;
    }
  if (strcmp (spec, "all") == 0)
    {
      json_array_append_new (json_object_get (*network, "allow"), json_string ("*"));
      return 0;
    }
  if (strncmp (spec, "allow:", 6) == 0)
    key = "allow", list = spec + 6;
  else if (strncmp (spec, "deny:", 5) == 0)
    key = "deny", list = spec + 5;
  else
    return sbx_err (err, SBX_E_INVALID,
                    "--net: `%s` is not all, none, allow:HOST[,HOST...] or deny:HOST[,HOST...]",
                    spec);
  arr = json_object_get (*network, key);
  for (p = list;;)
    {
      size_t n = strcspn (p, ",");
      json_t *s = json_stringn (p, n);
      if (n == 0 || s == NULL)
        {
          json_decref (s);
          return sbx_err (err, SBX_E_INVALID, "--net: `%s` has an empty or non-UTF-8 entry",
                          spec);
        }
      json_array_append_new (arr, s);
      if (p[n] == '\0')
        break;
      p += n + 1;
    }
  return 0;
}

static int
add_file (struct sbx_cli_opts *o, const char *value, sbx_error_t **err)
{
  const char *colon = strchr (value, ':');
  struct sbx_cli_file *f;

  if (value[0] == '\0' || colon == value)
    return sbx_err (err, SBX_E_INVALID, "--file: `%s` has no local file (use LOCAL:REMOTE)", value);
  f = realloc (o->files, (o->n_files + 1) * sizeof *o->files);
  if (f == NULL)
    sbx_oom ();
  o->files = f;
  f = &o->files[o->n_files++];
  /* LOCAL ends at the first ':' (remote paths are more likely to contain
     one than local names are). */
  f->local = colon ? strndup (value, (size_t) (colon - value)) : strdup (value);
  if (f->local == NULL)
    sbx_oom ();
  f->remote = colon ? colon + 1 : "";
  return 0;
}

static int
apply (struct sbx_cli_opts *o, const struct opt_def *d, const char *value, sbx_error_t **err)
{
  int rc = 0;

  switch (d->flag)
    {
    case SBX_OPT_TIMEOUT:
      o->timeout = value;
      rc = sbx_parse_duration_ms (value, &o->timeout_ms, err);
      break;
    case SBX_OPT_MEMORY:
      o->memory = value;
      rc = sbx_parse_size (value, &o->memory_bytes, err);
      break;
    case SBX_OPT_CPUS:
      o->cpus = value;
      rc = sbx_parse_cpus (value, &o->cpus_milli, err);
      break;
    case SBX_OPT_PIDS:
      o->pids = value;
      rc = sbx_parse_uint64 (value, &o->pids_n, err);
      break;
    case SBX_OPT_DISK:
      o->disk = value;
      rc = sbx_parse_size (value, &o->disk_bytes, err);
      break;
    case SBX_OPT_ENV:
      return add_env (o, value, err);
    case SBX_OPT_WORKDIR:
      o->workdir = value;
      break;
    case SBX_OPT_USER:
      o->user = value;
      break;
    case SBX_OPT_TEMPLATE:
      o->template_name = value;
      break;
    case SBX_OPT_ISOLATION:
      o->isolation = value;
      break;
    case SBX_OPT_SNAPSHOT:
      o->snapshot = value;
      break;
    case SBX_OPT_ON_TIMEOUT:
      o->on_timeout = value;
      break;
    case SBX_OPT_FILE:
      return add_file (o, value, err);
    case SBX_OPT_INTERACTIVE:
      o->interactive = 1;
      break;
    case SBX_OPT_TTY:
      o->tty = 1;
      break;
    case SBX_OPT_NET:
      return sbx_cli_net_spec (&o->network, value, err);
    default:
      break;
    }
  if (rc < 0)
    return sbx_err_wrap (err, "--%s", d->name);
  return 0;
}

static const struct opt_def *
find_long (const char *name, size_t len)
{
  size_t i;

  for (i = 0; i < N_OPT_DEFS; i++)
    if (strlen (opt_defs[i].name) == len && memcmp (opt_defs[i].name, name, len) == 0)
      return &opt_defs[i];
  return NULL;
}

static const struct opt_def *
find_short (char c)
{
  size_t i;

  for (i = 0; i < N_OPT_DEFS; i++)
    if (opt_defs[i].short_name == c)
      return &opt_defs[i];
  return NULL;
}

static int usage_error (int *usage, sbx_error_t **err, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
usage_error (int *usage, sbx_error_t **err, const char *fmt, ...)
{
  va_list ap;

  *usage = 1;
  va_start (ap, fmt);
  sbx_errv (err, SBX_E_INVALID, 0, fmt, ap);
  va_end (ap);
  return -1;
}

int
sbx_cli_parse_opts (int argc, char **argv, unsigned allowed, struct sbx_cli_opts *o,
                    int *usage, sbx_error_t **err)
{
  const char *cmd = argv[0];
  int i;

  memset (o, 0, sizeof *o);
  *usage = 0;
  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      const struct opt_def *d;

      if (strcmp (a, "--") == 0)
        return i + 1;
      if (a[0] != '-' || a[1] == '\0')
        return i;
      if (sbx_cli_is_help (a))
        {
          o->help = 1;
          return i + 1;
        }
      if (a[1] == '-')
        {
          const char *name = a + 2, *eq = strchr (name, '=');
          size_t len = eq ? (size_t) (eq - name) : strlen (name);
          const char *value = NULL;

          d = find_long (name, len);
          if (d == NULL || !(d->flag & allowed))
            return usage_error (usage, err, "%s: unknown option --%.*s", cmd, (int) len, name);
          if (d->takes_value)
            {
              if (eq != NULL)
                value = eq + 1;
              else if (i + 1 < argc)
                value = argv[++i];
              else
                return usage_error (usage, err, "%s: option --%.*s needs a value", cmd, (int) len, name);
            }
          else if (eq != NULL)
            return usage_error (usage, err, "%s: option --%.*s takes no value", cmd, (int) len, name);
          if (apply (o, d, value, err) < 0)
            return -1;
          continue;
        }
      /* A cluster of short options ("-i", "-ie K=V", "-eK=V"). */
      for (a++; *a; a++)
        {
          const char *value = NULL;

          d = find_short (*a);
          if (d == NULL || !(d->flag & allowed))
            return usage_error (usage, err, "%s: unknown option -%.*s", cmd, 1, a);
          if (!d->takes_value)
            {
              if (apply (o, d, NULL, err) < 0)
                return -1;
              continue;
            }
          if (a[1] != '\0')
            value = a + 1;
          else if (i + 1 < argc)
            value = argv[++i];
          else
            return usage_error (usage, err, "%s: option -%.*s needs a value", cmd, 1, a);
          if (apply (o, d, value, err) < 0)
            return -1;
          break;
        }
    }
  return i;
}

void
sbx_cli_opts_clear (struct sbx_cli_opts *o)
{
  size_t i;

  json_decref (o->env);
  json_decref (o->network);
  for (i = 0; i < o->n_files; i++)
    free (o->files[i].local);
  free (o->files);
  memset (o, 0, sizeof *o);
}

json_t *
sbx_cli_json_size (uint64_t bytes)
{
  char digits[32];

  if (bytes <= (uint64_t) INT64_MAX)
    return json_integer ((json_int_t) bytes);
  /* Out of any range: let the daemon say so. */
  snprintf (digits, sizeof digits, "%llu", (unsigned long long) bytes);
  return json_string (digits);
}

json_t *
sbx_cli_json_cpus (uint32_t milli)
{
  if (milli % 1000 == 0)
    return json_integer (milli / 1000);
  return json_real (milli / 1000.0);
}

json_t *
sbx_cli_json_duration (uint64_t ms)
{
  char text[32];

  if (ms % 1000 == 0 && ms / 1000 <= (uint64_t) INT64_MAX)
    return json_integer ((json_int_t) (ms / 1000));
  snprintf (text, sizeof text, "%llums", (unsigned long long) ms);
  return json_string (text);
}
