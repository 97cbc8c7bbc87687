/* sbx CLI: `--format TEMPLATE` over the API's JSON objects, as docker's
 * `--format '{{.ID}}\t{{.State}}'`: `{{.key}}` is the object's field
 * (case-insensitive, so {{.ID}} is "id"), `{{.limits.memory}}` a nested
 * one, `{{json .}}` the whole object and `{{json .limits}}` a part as JSON.
 * A field the object lacks prints "<no value>", as Go's templates do.
 * `\t`, `\n` and `\\` are a tab, a newline and a backslash. Nothing else
 * of Go's template language (no pipelines, no functions but json). */
#include "cli/format.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"

#define FIELD_MAX 256

/* The value at PATH (".a.b", or "." for the object) in o, or NULL. */
static const json_t *
lookup (const json_t *o, const char *path, size_t len)
{
  char part[FIELD_MAX];
  size_t i = 1;

  if (len == 1)
    return o;
  while (i < len)
    {
      size_t j = i, n;
      const char *key;
      json_t *v;
      const json_t *found = NULL;
      while (j < len && path[j] != '.')
        j++;
      n = j - i;
      if (n == 0 || n >= sizeof part || !json_is_object (o))
        return NULL;
      memcpy (part, path + i, n);
      part[n] = '\0';
      /* jansson iterates non-const objects only; nothing is changed */
      json_object_foreach ((json_t *) (uintptr_t) o, key, v)
        if (strcasecmp (key, part) == 0)
          {
            found = v;
            break;
          }
      if (found == NULL)
        return NULL;
      o = found;
      i = j + 1;
    }
  return o;
}

static void
put_value (struct sbx_buf *out, const json_t *v, int as_json)
{
  char num[64];

  if (v == NULL)
    {
      sbx_buf_append (out, "<no value>", 10);
      return;
    }
  if (as_json || json_is_object (v) || json_is_array (v))
    {
      char *text = json_dumps (v, JSON_COMPACT | JSON_ENCODE_ANY);
      if (text == NULL)
        sbx_oom ();
      sbx_buf_append (out, text, strlen (text));
      free (text);
      return;
    }
  if (json_is_string (v))
    sbx_buf_append (out, json_string_value (v), json_string_length (v));
  else if (json_is_integer (v))
    {
      snprintf (num, sizeof num, "%lld", (long long) json_integer_value (v));
      sbx_buf_append (out, num, strlen (num));
    }
  else if (json_is_real (v))
    {
      snprintf (num, sizeof num, "%g", json_real_value (v));
      sbx_buf_append (out, num, strlen (num));
    }
  else if (json_is_boolean (v))
    sbx_buf_append (out, json_is_true (v) ? "true" : "false", json_is_true (v) ? 4 : 5);
  /* null: nothing, as Go prints a nil value in a text template */
}

int
sbx_cli_format_render (const char *tmpl, const json_t *o, struct sbx_buf *out, sbx_error_t **err)
{
  const char *p = tmpl;

  while (*p)
    {
      if (p[0] == '\\' && (p[1] == 't' || p[1] == 'n' || p[1] == '\\'))
        {
          sbx_buf_append (out, p[1] == 't' ? "\t" : p[1] == 'n' ? "\n" : "\\", 1);
          p += 2;
        }
      else if (p[0] == '{' && p[1] == '{')
        {
          const char *end = strstr (p + 2, "}}"), *a, *b;
          int as_json = 0;
          if (end == NULL)
            return sbx_err (err, SBX_E_INVALID, "--format: `{{` without its `}}`");
          a = p + 2;
          b = end;
          while (a < b && *a == ' ')
            a++;
          while (b > a && b[-1] == ' ')
            b--;
          if (b - a > 5 && strncmp (a, "json ", 5) == 0)
            {
              as_json = 1;
              a += 5;
              while (a < b && *a == ' ')
                a++;
            }
          if (a == b || *a != '.' || (size_t) (b - a) >= FIELD_MAX
              || memchr (a, ' ', (size_t) (b - a)) != NULL)
            return sbx_err (err, SBX_E_INVALID,
                            "--format: `%.*s` is not a field (write {{.id}}, {{.limits.memory}} "
                            "or {{json .}})",
                            (int) (end + 2 - p), p);
          if (o != NULL)
            put_value (out, lookup (o, a, (size_t) (b - a)), as_json);
          p = end + 2;
        }
      else
        sbx_buf_append (out, p++, 1);
    }
  return 0;
}

int
sbx_cli_format_check (const char *tmpl, sbx_error_t **err)
{
  struct sbx_buf out = SBX_BUF_INIT;
  int rc = sbx_cli_format_render (tmpl, NULL, &out, err);

  sbx_buf_free (&out);
  return rc;
}

int
sbx_cli_format_print (const char *tmpl, const json_t *o)
{
  struct sbx_buf out = SBX_BUF_INIT;
  int rc = sbx_cli_format_render (tmpl, o, &out, NULL);

  if (rc == 0)
    {
      fwrite (out.data ? out.data : "", 1, out.len, stdout);
      fputc ('\n', stdout);
    }
  sbx_buf_free (&out);
  return rc;
}
