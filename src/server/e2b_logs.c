/* sbx: a sandbox's logs in E2B's shapes (the SDK's and `e2b sandbox logs`'):
 * GET /sandboxes/{id}/logs (v1: {logs: [{timestamp, line}], logEntries}, each
 * line a JSON object as E2B's)
 * and GET /v2/sandboxes/{id}/logs (v2: {logs: [entries]}, with cursor,
 * direction, level and search). What sbx knows of a sandbox's life is its
 * audit records (docs/audit.md): its lifecycle, commands, file writes,
 * egress connections and API calls on it. A sandbox is the caller's when
 * a lifecycle record names the caller's tenant, so an ended one's logs
 * stay readable for as long as the audit log keeps them; records another
 * tenant's calls left under its id are not in them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/audit.h"
#include "server/e2b.h"
#include "util/parse.h"

#define LOGS_LIMIT_DEFAULT 1000
#define LOGS_LIMIT_MAX 1000
/* Records of one sandbox read from the audit log for one answer. */
#define LOGS_SCAN_MAX 10000

enum level
{
  LEVEL_DEBUG,
  LEVEL_INFO,
  LEVEL_WARN,
  LEVEL_ERROR,
};

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static const char *
tenant_of (struct sbx_req *r)
{
  return sbx_req_tenant (r) ? sbx_req_tenant (r) : "default";
}

static const char *
str (json_t *rec, const char *key)
{
  const char *s = json_string_value (json_object_get (rec, key));
  return s ? s : "";
}

/* One audit record as a line and a level. */
static enum level
describe (json_t *rec, char *line, size_t cap)
{
  const char *kind = str (rec, "kind");
  json_t *code = json_object_get (rec, "exit_code");

  if (strcmp (kind, "sandbox") == 0)
    {
      const char *reason = str (rec, "reason");
      snprintf (line, cap, "sandbox %s%s%s", str (rec, "event"), reason[0] ? ": " : "", reason);
      return strcmp (str (rec, "event"), "died") == 0 || strcmp (str (rec, "event"), "lost") == 0
                 ? LEVEL_ERROR
                 : LEVEL_INFO;
    }
  if (strcmp (kind, "command") == 0)
    {
      json_t *argv = json_object_get (rec, "argv");
      char cmd[512] = "";
      size_t i, used = 0;
      for (i = 0; i < json_array_size (argv) && used < sizeof cmd - 1; i++)
        used += (size_t) snprintf (cmd + used, sizeof cmd - used, "%s%s", i ? " " : "",
                                   json_string_value (json_array_get (argv, i))
                                       ? json_string_value (json_array_get (argv, i))
                                       : "");
      if (used >= sizeof cmd)
        used = sizeof cmd - 1;
      if (json_is_integer (code))
        snprintf (line, cap, "command `%s` exited with %lld", cmd,
                  (long long) json_integer_value (code));
      else
        snprintf (line, cap, "command `%s` ended: %s", cmd,
                  str (rec, "reason")[0] ? str (rec, "reason") : str (rec, "signal"));
      return json_is_integer (code) && json_integer_value (code) == 0 ? LEVEL_INFO : LEVEL_WARN;
    }
  if (strcmp (kind, "file_write") == 0)
    {
      snprintf (line, cap, "file written: %s (%lld bytes, %s)", str (rec, "path"),
                (long long) json_integer_value (json_object_get (rec, "size")), str (rec, "via"));
      return LEVEL_INFO;
    }
  if (strcmp (kind, "egress") == 0)
    {
      const char *reason = str (rec, "reason");
      snprintf (line, cap, "egress %s %s:%lld%s%s", str (rec, "decision"), str (rec, "host"),
                (long long) json_integer_value (json_object_get (rec, "port")),
                reason[0] ? ": " : "", reason);
      return strcmp (str (rec, "decision"), "allow") == 0 ? LEVEL_INFO : LEVEL_WARN;
    }
  if (strcmp (kind, "api") == 0)
    {
      json_int_t status = json_integer_value (json_object_get (rec, "status"));
      snprintf (line, cap, "api %s: %lld", str (rec, "action"), (long long) status);
      return status >= 500 ? LEVEL_ERROR : status >= 400 ? LEVEL_WARN : LEVEL_DEBUG;
    }
  snprintf (line, cap, "%s", kind);
  return LEVEL_INFO;
}

/* The record's fields as E2B's string map: strings as they are, numbers
   and booleans as text, arrays and objects (a command's argv) as JSON
   text. The time and sandbox are the entry's own. */
static json_t *
fields_of (json_t *rec)
{
  json_t *out = json_object (), *v;
  const char *k;

  json_object_foreach (rec, k, v)
    {
      char buf[64] = "", *text = NULL;
      if (strcmp (k, "time") == 0 || strcmp (k, "sandbox") == 0 || json_is_null (v))
        continue;
      if (json_is_string (v))
        json_object_set (out, k, v);
      else if (json_is_integer (v))
        snprintf (buf, sizeof buf, "%lld", (long long) json_integer_value (v));
      else if (json_is_boolean (v))
        snprintf (buf, sizeof buf, "%s", json_is_true (v) ? "true" : "false");
      else if (json_is_real (v))
        snprintf (buf, sizeof buf, "%g", json_real_value (v));
      else
        text = json_dumps (v, JSON_COMPACT);
      if (json_is_string (v))
        continue;
      json_object_set_new (out, k, json_string (text ? text : buf));
      free (text);
    }
  return out;
}

/* The caller's sandbox's records, oldest first (NULL with err: 404 when
   none is the caller's). */
static json_t *
records_of (struct sbx_req *r, const char *id, sbx_error_t **err)
{
  json_t *all, *recs, *mine, *rec;
  const char *tenant = tenant_of (r);
  size_t i;
  int owned = 0;

  if (id[0] == '\0' || strlen (id) > 64)
    return sbx_err (err, SBX_E_NOT_FOUND, "sandbox not found"), NULL;
  all = sbx_audit_query (id, 0, LOGS_SCAN_MAX, err);
  if (all == NULL)
    return NULL;
  recs = json_object_get (all, "records");
  json_array_foreach (recs, i, rec)
    if (strcmp (str (rec, "kind"), "sandbox") == 0 && strcmp (str (rec, "tenant"), tenant) == 0)
      owned = 1;
  if (!owned)
    {
      json_decref (all);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%.64s` not found", id), NULL;
    }
  mine = json_array ();
  json_array_foreach (recs, i, rec)
    {
      json_t *t = json_object_get (rec, "tenant");
      if (t == NULL || (json_is_string (t) && strcmp (json_string_value (t), tenant) == 0))
        json_array_append (mine, rec);
    }
  json_decref (all);
  return mine;
}

static int
parse_count (const char *s, const char *name, uint64_t max, uint64_t *out, sbx_error_t **err)
{
  sbx_error_t *e = NULL;

  if (s == NULL)
    return 0;
  if (sbx_parse_uint64 (s, out, &e) < 0 || *out > max)
    {
      sbx_error_free (e);
      return sbx_err (err, SBX_E_INVALID, "`%s` must be a whole number 0..%llu", name,
                      (unsigned long long) max);
    }
  return 0;
}

static json_t *
entry_json (json_t *rec, enum level *lv)
{
  char line[1024];
  json_t *fields;

  *lv = describe (rec, line, sizeof line);
  fields = fields_of (rec);
  return json_pack ("{s:O,s:s,s:s,s:o}", "timestamp", json_object_get (rec, "time"), "level",
                    level_names[*lv], "message", line, "fields", fields);
}

/* v1's {timestamp, line}: the line is a JSON object as E2B's log lines
   are (`e2b sandbox logs` parses it and reads `level` and `logger`): the
   entry's level, its record's kind as the logger, its message and its
   fields but for the audit chain's link (prev). */
static int
v1_line (json_t *lines, json_t *e)
{
  json_t *fields = json_object_get (e, "fields"), *obj, *v;
  const char *k;
  char *text;
  int rc;

  obj = json_pack ("{s:O,s:s,s:O}", "level", json_object_get (e, "level"), "logger",
                   json_string_value (json_object_get (fields, "kind"))
                       ? json_string_value (json_object_get (fields, "kind"))
                       : "",
                   "message", json_object_get (e, "message"));
  if (obj == NULL)
    return -1;
  json_object_foreach (fields, k, v)
    if (strcmp (k, "kind") != 0 && strcmp (k, "prev") != 0 && json_object_get (obj, k) == NULL)
      json_object_set (obj, k, v);
  text = json_dumps (obj, JSON_COMPACT);
  json_decref (obj);
  if (text == NULL)
    return -1;
  rc = json_array_append_new (lines, json_pack ("{s:O,s:s}", "timestamp",
                                                json_object_get (e, "timestamp"), "line", text));
  free (text);
  return rc;
}

void
sbx_route_e2b_logs (struct sbx_req *r)
{
  int v2 = strcmp (r->segs[0], "v2") == 0;
  const char *id = r->segs[v2 ? 2 : 1];
  const char *q_dir = sbx_req_query (r, "direction"), *q_level = sbx_req_query (r, "level");
  const char *q_search = sbx_req_query (r, "search");
  uint64_t from_ms = 0, limit = LOGS_LIMIT_DEFAULT;
  sbx_error_t *err = NULL;
  json_t *recs = NULL, *logs = json_array (), *lines = json_array (), *rec;
  enum level min_level = LEVEL_DEBUG;
  char from[32] = "";
  int backward = 0;
  size_t i, n;

  if (parse_count (sbx_req_query (r, v2 ? "cursor" : "start"), v2 ? "cursor" : "start",
                   UINT64_MAX / 2, &from_ms, &err)
          < 0
      || parse_count (sbx_req_query (r, "limit"), "limit", LOGS_LIMIT_MAX, &limit, &err) < 0)
    goto fail;
  if (q_dir && strcmp (q_dir, "forward") != 0 && strcmp (q_dir, "backward") != 0)
    {
      sbx_err (&err, SBX_E_INVALID, "`direction` must be forward or backward");
      goto fail;
    }
  backward = q_dir && strcmp (q_dir, "backward") == 0;
  if (q_level)
    {
      for (min_level = LEVEL_DEBUG; min_level <= LEVEL_ERROR; min_level++)
        if (strcmp (q_level, level_names[min_level]) == 0)
          break;
      if (min_level > LEVEL_ERROR)
        {
          sbx_err (&err, SBX_E_INVALID, "`level` must be debug, info, warn or error");
          goto fail;
        }
    }
  if (q_search && strlen (q_search) > 256)
    {
      sbx_err (&err, SBX_E_INVALID, "`search` is longer than 256 bytes");
      goto fail;
    }
  if (from_ms)
    sbx_audit_format_time ((int64_t) from_ms, from);
  recs = records_of (r, id, &err);
  if (recs == NULL)
    goto fail;
  n = json_array_size (recs);
  for (i = 0; i < n && json_array_size (logs) < limit; i++)
    {
      enum level lv;
      json_t *e;
      rec = json_array_get (recs, backward ? n - 1 - i : i);
      /* RFC 3339 with milliseconds in UTC, one format: they sort as text */
      if (from[0] && (backward ? strcmp (str (rec, "time"), from) > 0
                               : strcmp (str (rec, "time"), from) < 0))
        continue;
      e = entry_json (rec, &lv);
      if (e == NULL || lv < min_level
          || (q_search && strstr (json_string_value (json_object_get (e, "message")), q_search)
                              == NULL))
        {
          json_decref (e);
          continue;
        }
      if (!v2 && v1_line (lines, e) < 0)
        {
          json_decref (e);
          json_decref (recs);
          sbx_err (&err, SBX_E_SYSTEM, "cannot build a log line");
          goto fail;
        }
      json_array_append_new (logs, e);
    }
  json_decref (recs);
  if (v2)
    {
      json_decref (lines);
      sbx_reply_json (r, 200, json_pack ("{s:o}", "logs", logs));
    }
  else
    sbx_reply_json (r, 200, json_pack ("{s:o,s:o}", "logs", lines, "logEntries", logs));
  return;
fail:
  json_decref (logs);
  json_decref (lines);
  sbx_reply_error (r, err);
}
