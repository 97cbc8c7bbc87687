/* sbx: strict parsing of request bodies and query values. Every accepted
 * field has one type (sizes and durations may also be strings with units);
 * anything else is a 400 naming the field. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "server/request.h"
#include "util/parse.h"

int
sbx_req_json (struct sbx_req *r, json_t **out, sbx_error_t **err)
{
  if (r->body.failed)
    return sbx_err_oom (err); /* part of the body found no memory */
  return sbx_json_body (r->body.data, r->body.len, out, err);
}

int
sbx_json_body (const char *data, size_t len, json_t **out, sbx_error_t **err)
{
  json_error_t jerr;
  json_t *o;

  if (len == 0)
    {
      *out = json_object ();
      return *out ? 0 : sbx_err_oom (err);
    }
  /* Reject duplicate keys and NULs in strings: one meaning per body. */
  o = json_loadb (data, len, JSON_REJECT_DUPLICATES, &jerr);
  if (o == NULL && json_error_code (&jerr) == json_error_out_of_memory)
    return sbx_err_oom (err);
  if (o == NULL)
    return sbx_err (err, SBX_E_INVALID, "malformed JSON at line %d column %d: %s", jerr.line,
                    jerr.column, jerr.text);
  if (!json_is_object (o))
    {
      json_decref (o);
      return sbx_err (err, SBX_E_INVALID, "the request body must be a JSON object");
    }
  *out = o;
  return 0;
}

int
sbx_params_only (json_t *o, const char *const *allowed, sbx_error_t **err)
{
  void *it;

  for (it = json_object_iter (o); it; it = json_object_iter_next (o, it))
    {
      const char *k = json_object_iter_key (it);
      int i, ok = 0;
      for (i = 0; allowed[i]; i++)
        if (strcmp (k, allowed[i]) == 0 && strlen (k) == json_object_iter_key_len (it))
          ok = 1;
      if (!ok)
        return sbx_err (err, SBX_E_INVALID, "unknown field `%.64s`", k);
    }
  return 0;
}

static int
plain_string (json_t *v)
{
  /* jansson keeps "\u0000" inside strings; C strings would cut there. */
  return json_is_string (v) && strlen (json_string_value (v)) == json_string_length (v);
}

int
sbx_param_string (json_t *o, const char *key, const char **out, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);

  if (v == NULL || json_is_null (v))
    return 0;
  if (!plain_string (v))
    return sbx_err (err, SBX_E_INVALID, "`%s` must be a string without NUL characters", key);
  *out = json_string_value (v);
  return 0;
}

int
sbx_param_bool (json_t *o, const char *key, int *out, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);

  if (v == NULL || json_is_null (v))
    return 0;
  if (!json_is_boolean (v))
    return sbx_err (err, SBX_E_INVALID, "`%s` must be true or false", key);
  *out = json_is_true (v);
  return 0;
}

int
sbx_param_uint (json_t *o, const char *key, uint64_t *out, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);

  if (v == NULL || json_is_null (v))
    return 0;
  if (!json_is_integer (v) || json_integer_value (v) < 0)
    return sbx_err (err, SBX_E_INVALID, "`%s` must be a non-negative integer", key);
  *out = (uint64_t) json_integer_value (v);
  return 0;
}

int
sbx_param_size (json_t *o, const char *key, uint64_t *out, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);

  if (v == NULL || json_is_null (v))
    return 0;
  if (json_is_integer (v))
    {
      if (json_integer_value (v) <= 0)
        return sbx_err (err, SBX_E_INVALID, "`%s` must be positive", key);
      *out = (uint64_t) json_integer_value (v);
      return 0;
    }
  if (plain_string (v))
    {
      if (sbx_parse_size (json_string_value (v), out, err) < 0)
        return sbx_err_wrap (err, "`%s`", key);
      /* Zero would mean "not given": the default, not what was asked. */
      if (*out == 0)
        return sbx_err (err, SBX_E_INVALID, "`%s` must be positive", key);
      return 0;
    }
  return sbx_err (err, SBX_E_INVALID, "`%s` must be a size: bytes, or a string like \"512M\"", key);
}

int
sbx_param_duration (json_t *o, const char *key, uint64_t *out_ms, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);

  if (v == NULL || json_is_null (v))
    return 0;
  if (json_is_number (v))
    {
      double s = json_number_value (v);
      if (!isfinite (s) || s <= 0 || s > 1e9)
        return sbx_err (err, SBX_E_INVALID, "`%s` must be a positive number of seconds", key);
      *out_ms = (uint64_t) llround (s * 1000.0);
      if (*out_ms == 0)
        *out_ms = 1;
      return 0;
    }
  if (plain_string (v))
    {
      if (sbx_parse_duration_ms (json_string_value (v), out_ms, err) < 0)
        return sbx_err_wrap (err, "`%s`", key);
      if (*out_ms == 0)
        return sbx_err (err, SBX_E_INVALID, "`%s` must be longer than zero", key);
      return 0;
    }
  return sbx_err (err, SBX_E_INVALID,
                  "`%s` must be a duration: seconds, or a string like \"500ms\" or \"5m\"", key);
}

int
sbx_param_cpus (json_t *o, const char *key, uint32_t *milli, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);

  if (v == NULL || json_is_null (v))
    return 0;
  if (json_is_number (v))
    {
      double c = json_number_value (v);
      if (!isfinite (c) || c <= 0 || c > 4096)
        return sbx_err (err, SBX_E_INVALID, "`%s` must be a positive number of CPUs", key);
      *milli = (uint32_t) llround (c * 1000.0);
    }
  else if (plain_string (v))
    {
      if (sbx_parse_cpus (json_string_value (v), milli, err) < 0)
        return sbx_err_wrap (err, "`%s`", key);
    }
  else
    return sbx_err (err, SBX_E_INVALID, "`%s` must be a number of CPUs", key);
  /* Zero would mean "not given": the default, not what was asked. */
  if (*milli == 0)
    return sbx_err (err, SBX_E_INVALID, "`%s` must be at least 0.001", key);
  return 0;
}

static int
env_name_ok (const char *k)
{
  size_t i;

  if (k[0] == '\0')
    return 0;
  for (i = 0; k[i]; i++)
    if (k[i] == '=')
      return 0;
  return 1;
}

int
sbx_param_string_map (json_t *o, const char *key, size_t max_entries, size_t key_max,
                      size_t value_max, size_t total_max, int env, json_t **out, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);
  size_t total = 0;
  void *it;

  if (v == NULL || json_is_null (v))
    return 0;
  if (!json_is_object (v))
    return sbx_err (err, SBX_E_INVALID, "`%s` must be an object of strings", key);
  if (json_object_size (v) > max_entries)
    return sbx_err (err, SBX_E_INVALID, "`%s` has more than %zu entries", key, max_entries);
  for (it = json_object_iter (v); it; it = json_object_iter_next (v, it))
    {
      const char *k = json_object_iter_key (it);
      json_t *val = json_object_iter_value (it);
      size_t klen = json_object_iter_key_len (it);
      if (klen != strlen (k) || klen == 0 || klen > key_max)
        return sbx_err (err, SBX_E_INVALID, "`%s` has a key that is empty, too long or has NUL",
                        key);
      if (env && !env_name_ok (k))
        return sbx_err (err, SBX_E_INVALID, "`%s`: variable names cannot contain `=`", key);
      if (!plain_string (val))
        return sbx_err (err, SBX_E_INVALID, "`%s.%.64s` must be a string without NUL", key, k);
      if (json_string_length (val) > value_max)
        return sbx_err (err, SBX_E_INVALID, "`%s.%.64s` is longer than %zu bytes", key, k,
                        value_max);
      total += klen + json_string_length (val) + 2;
    }
  if (total > total_max)
    return sbx_err (err, SBX_E_INVALID, "`%s` is larger than %zu bytes in all", key, total_max);
  *out = v;
  return 0;
}

/* One dimension of a terminal: an integer 1..SBX_PTY_MAX (not a string,
   not 80.0: one type per field). */
static int
pty_dimension (json_t *o, const char *prefix, const char *key, unsigned *out, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);

  if (!json_is_integer (v) || json_integer_value (v) < 1
      || json_integer_value (v) > SBX_PTY_MAX)
    return sbx_err (err, SBX_E_INVALID, "`%s%s` must be an integer from 1 to %d", prefix, key,
                    SBX_PTY_MAX);
  *out = (unsigned) json_integer_value (v);
  return 0;
}

/* {"cols": .., "rows": ..}, both given, nothing else; prefix names the
   object in errors ("pty." or ""). */
static int
pty_size (json_t *o, const char *prefix, unsigned *cols, unsigned *rows, sbx_error_t **err)
{
  void *it;

  for (it = json_object_iter (o); it; it = json_object_iter_next (o, it))
    {
      const char *k = json_object_iter_key (it);
      if ((strcmp (k, "cols") != 0 && strcmp (k, "rows") != 0)
          || strlen (k) != json_object_iter_key_len (it))
        return sbx_err (err, SBX_E_INVALID, "unknown field `%s%.64s`", prefix, k);
    }
  if (pty_dimension (o, prefix, "cols", cols, err) < 0
      || pty_dimension (o, prefix, "rows", rows, err) < 0)
    return -1;
  return 0;
}

int
sbx_param_pty (json_t *o, const char *key, int *pty, unsigned *cols, unsigned *rows,
               sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);
  char prefix[32];

  if (v == NULL || json_is_null (v))
    return 0;
  if (!json_is_object (v))
    return sbx_err (err, SBX_E_INVALID,
                    "`%s` must be an object like {\"cols\": 80, \"rows\": 24}", key);
  snprintf (prefix, sizeof prefix, "%.24s.", key);
  if (pty_size (v, prefix, cols, rows, err) < 0)
    return -1;
  *pty = 1;
  return 0;
}

int
sbx_resize_request_parse (json_t *body, unsigned *cols, unsigned *rows, sbx_error_t **err)
{
  return pty_size (body, "", cols, rows, err);
}

int
sbx_query_bool (struct sbx_req *r, const char *name, int *out, sbx_error_t **err)
{
  const char *v = NULL;
  size_t vlen = 0;

  if (MHD_lookup_connection_value_n (r->conn, MHD_GET_ARGUMENT_KIND, name, strlen (name), &v,
                                     &vlen)
      != MHD_YES)
    return 0;
  /* A bare "?eof" (no "=") is a flag that is set. */
  if (v == NULL || strcmp (v, "1") == 0 || strcmp (v, "true") == 0 || strcmp (v, "") == 0)
    *out = 1;
  else if (strcmp (v, "0") == 0 || strcmp (v, "false") == 0)
    *out = 0;
  else
    return sbx_err (err, SBX_E_INVALID, "`%s` must be 1, 0, true or false", name);
  return 0;
}

int
sbx_query_duration (struct sbx_req *r, const char *name, int64_t *out_ms, sbx_error_t **err)
{
  const char *v = sbx_req_query (r, name);
  uint64_t ms;

  if (v == NULL)
    return 0;
  if (sbx_parse_duration_ms (v, &ms, err) < 0)
    return sbx_err_wrap (err, "`%s`", name);
  if (ms > 24ULL * 3600 * 1000)
    return sbx_err (err, SBX_E_INVALID, "`%s` is longer than 24h", name);
  *out_ms = (int64_t) ms;
  return 0;
}
