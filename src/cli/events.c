/* sbx CLI: exec stream events (see events.h). */
#include "cli/events.h"

#include <string.h>

#include "cli/cli.h"
#include "util/base64.h"

static int
emit_line (const char *line, size_t len, sbx_ndjson_line_cb cb, void *ctx,
           sbx_error_t **err)
{
  if (len > 0 && line[len - 1] == '\r')
    len--;
  if (len == 0)
    return 0;
  return cb (ctx, line, len, err);
}

static int
fail_too_long (size_t max, sbx_error_t **err)
{
  return sbx_err (err, SBX_E_TOO_LARGE,
                  "the daemon sent an event line longer than %zu bytes", max);
}

int
sbx_ndjson_feed (struct sbx_ndjson *nd, const char *data, size_t len,
                 sbx_ndjson_line_cb cb, void *ctx, sbx_error_t **err)
{
  size_t max = nd->max_line ? nd->max_line : SBX_NDJSON_MAX_LINE;

  while (len > 0)
    {
      const char *nl = memchr (data, '\n', len);
      size_t n;
      int rc;

      if (nl == NULL)
        {
          if (len > max - nd->partial.len)
            return fail_too_long (max, err);
          sbx_buf_append (&nd->partial, data, len);
          return 0;
        }
      n = (size_t) (nl - data);
      if (nd->partial.len > 0)
        {
          if (n > max - nd->partial.len)
            return fail_too_long (max, err);
          sbx_buf_append (&nd->partial, data, n);
          rc = emit_line (nd->partial.data, nd->partial.len, cb, ctx, err);
          sbx_buf_reset (&nd->partial);
        }
      else
        {
          if (n > max)
            return fail_too_long (max, err);
          rc = emit_line (data, n, cb, ctx, err);
        }
      if (rc < 0)
        return -1;
      data = nl + 1;
      len -= n + 1;
    }
  return 0;
}

int
sbx_ndjson_finish (struct sbx_ndjson *nd, sbx_ndjson_line_cb cb, void *ctx,
                   sbx_error_t **err)
{
  int rc = 0;

  if (nd->partial.len > 0)
    rc = emit_line (nd->partial.data, nd->partial.len, cb, ctx, err);
  sbx_buf_reset (&nd->partial);
  return rc;
}

void
sbx_ndjson_clear (struct sbx_ndjson *nd)
{
  sbx_buf_free (&nd->partial);
}

static enum sbx_event_type
event_type (const char *name)
{
  if (name == NULL)
    return SBX_EVENT_UNKNOWN;
  if (strcmp (name, "stdout") == 0)
    return SBX_EVENT_STDOUT;
  if (strcmp (name, "stderr") == 0)
    return SBX_EVENT_STDERR;
  if (strcmp (name, "start") == 0)
    return SBX_EVENT_START;
  if (strcmp (name, "exit") == 0)
    return SBX_EVENT_EXIT;
  if (strcmp (name, "keepalive") == 0)
    return SBX_EVENT_KEEPALIVE;
  if (strcmp (name, "dropped") == 0)
    return SBX_EVENT_DROPPED;
  return SBX_EVENT_UNKNOWN;
}

/* Output lines are most of the traffic: when one has exactly the shape the
   daemon writes, decode its data in place without building a JSON tree.
   Anything else (other key order, spaces, escapes) takes the JSON path. */
static int
parse_output_fast (const char *line, size_t len, enum sbx_event_type *type,
                   struct sbx_buf *data)
{
  static const char out_prefix[] = "{\"type\":\"stdout\",\"data\":\"";
  static const char err_prefix[] = "{\"type\":\"stderr\",\"data\":\"";
  const size_t plen = sizeof out_prefix - 1;

  if (len < plen + 2 || line[len - 1] != '}' || line[len - 2] != '"')
    return -1;
  if (memcmp (line, out_prefix, plen) == 0)
    *type = SBX_EVENT_STDOUT;
  else if (memcmp (line, err_prefix, plen) == 0)
    *type = SBX_EVENT_STDERR;
  else
    return -1;
  sbx_buf_reset (data);
  /* A '"' or '\\' inside makes this invalid base64, hence the JSON path. */
  return sbx_base64_decode (data, line + plen, len - plen - 2);
}

int
sbx_event_parse (const char *line, size_t len, enum sbx_event_type *type,
                 struct sbx_buf *data, json_t **obj, sbx_error_t **err)
{
  json_error_t jerr;
  json_t *j, *d;

  *obj = NULL;
  if (parse_output_fast (line, len, type, data) == 0)
    return 0;
  j = json_loadb (line, len, 0, &jerr);
  if (j == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "malformed event from the daemon: %s", jerr.text);
  if (!json_is_object (j))
    {
      json_decref (j);
      return sbx_err (err, SBX_E_SYSTEM, "malformed event from the daemon: not an object");
    }
  *type = event_type (json_string_value (json_object_get (j, "type")));
  if (*type == SBX_EVENT_STDOUT || *type == SBX_EVENT_STDERR)
    {
      d = json_object_get (j, "data");
      sbx_buf_reset (data);
      if (!json_is_string (d)
          || sbx_base64_decode (data, json_string_value (d), json_string_length (d)) < 0)
        {
          json_decref (j);
          return sbx_err (err, SBX_E_SYSTEM,
                          "malformed output event from the daemon (data is not base64)");
        }
      json_decref (j);
      return 0;
    }
  *obj = j;
  return 0;
}

int
sbx_exit_status (const json_t *ev, const char *cmd, struct sbx_buf *msg)
{
  const json_t *code = json_object_get (ev, "exit_code");
  const char *sig = json_string_value (json_object_get (ev, "signal"));
  const char *reason = json_string_value (json_object_get (ev, "reason"));

  sbx_buf_reset (msg);
  if (reason != NULL && reason[0] == '\0')
    reason = NULL;
  if (json_is_true (json_object_get (ev, "timed_out")))
    {
      sbx_buf_printf (msg, "%s", reason ? reason : "timed out");
      return SBX_EXIT_TIMEOUT;
    }
  if (json_is_true (json_object_get (ev, "oom_killed")))
    {
      sbx_buf_printf (msg, "%s", reason ? reason : "killed: out of memory");
      return SBX_EXIT_KILLED;
    }
  if (json_is_integer (code))
    {
      json_int_t c = json_integer_value (code);
      /* A normal exit has no reason; one with a reason could not start
         (127: not found, 126: not runnable), like a shell says. */
      if (reason != NULL)
        {
          if (c == 126 || c == 127)
            sbx_buf_printf (msg, "%s: %s", cmd, reason);
          else
            sbx_buf_printf (msg, "%s", reason);
        }
      return (int) (c & 0xff);
    }
  /* Killed by a signal, or the sandbox died under it. */
  if (reason != NULL)
    sbx_buf_printf (msg, "%s", reason);
  else if (sig != NULL)
    sbx_buf_printf (msg, "killed by %s", sig);
  else
    sbx_buf_printf (msg, "killed");
  return SBX_EXIT_KILLED;
}
