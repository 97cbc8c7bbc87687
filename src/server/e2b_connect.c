/* sbx: Connect protocol v1 in JSON, as E2B's envd speaks it to the SDK
 * (connect-web with useBinaryFormat: false): unary calls are a JSON body
 * in and out; server-streaming calls take one envelope and answer a
 * sequence of envelopes ending with an end-stream one (connect_envelope.h).
 * Errors of unary calls are {"code","message"} with the HTTP status the
 * Connect spec gives the code; errors of streams travel in the end-stream
 * envelope of a 200 answer, where the client reads them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/connect_envelope.h"
#include "server/e2b.h"
#include "util/utf8.h"

#define STREAM_REQUEST_MAX (1024 * 1024)
#define POLL_SLICE_MS 1000
#define KEEPALIVE_DEFAULT_S 90
#define KEEPALIVE_MAX_S 3600

const char *
sbx_connect_code (enum sbx_error_kind kind)
{
  switch (kind)
    {
    case SBX_E_INVALID:
      return "invalid_argument";
    case SBX_E_UNAUTHORIZED:
      return "unauthenticated";
    case SBX_E_FORBIDDEN:
      return "permission_denied";
    case SBX_E_NOT_FOUND:
      return "not_found";
    case SBX_E_CONFLICT:
      return "failed_precondition";
    case SBX_E_TOO_LARGE:
    case SBX_E_LIMIT:
      return "resource_exhausted";
    case SBX_E_UNAVAILABLE:
    case SBX_E_BAD_GATEWAY:
      return "unavailable";
    case SBX_E_GATEWAY_TIMEOUT:
      return "deadline_exceeded";
    case SBX_E_NOT_IMPLEMENTED:
      return "unimplemented";
    case SBX_E_SYSTEM:
    default:
      return "internal";
    }
}

unsigned
sbx_connect_status (const char *code)
{
  /* connectrpc.com/docs/protocol#error-codes */
  static const struct
  {
    const char *code;
    unsigned status;
  } map[] = {
      {"canceled", 499},          {"unknown", 500},           {"invalid_argument", 400},
      {"deadline_exceeded", 504}, {"not_found", 404},         {"already_exists", 409},
      {"permission_denied", 403}, {"resource_exhausted", 429}, {"failed_precondition", 400},
      {"aborted", 409},           {"out_of_range", 400},      {"unimplemented", 501},
      {"internal", 500},          {"unavailable", 503},       {"data_loss", 500},
      {"unauthenticated", 401},
  };
  size_t i;

  for (i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp (map[i].code, code) == 0)
      return map[i].status;
  return 500;
}

json_t *
sbx_e2b_text_json (const char *msg)
{
  json_t *m = json_string (msg);
  struct sbx_buf b = SBX_BUF_INIT;

  if (m != NULL)
    return m;
  sbx_utf8_sanitize (&b, msg, strlen (msg), 1);
  m = json_stringn (b.data ? b.data : "", b.len);
  sbx_buf_free (&b);
  return m;
}

void
sbx_connect_reply_code (struct sbx_req *r, const char *code, const char *message)
{
  json_t *o = json_object ();

  json_object_set_new (o, "code", json_string (code));
  json_object_set_new (o, "message", sbx_e2b_text_json (message));
  sbx_reply_json (r, sbx_connect_status (code), o);
}

void
sbx_connect_reply_err (struct sbx_req *r, sbx_error_t *err)
{
  if (err == NULL)
    {
      sbx_reply_error (r, NULL); /* out of memory: the server's 503 */
      return;
    }
  sbx_connect_reply_code (r, sbx_connect_code (err->kind), err->msg);
  sbx_error_free (err);
}

void
sbx_connect_reply_ok (struct sbx_req *r, json_t *body)
{
  sbx_reply_json (r, 200, body);
}

/* "application/json" or "application/json; charset=utf-8". */
static int
content_type_is (struct sbx_req *r, const char *want)
{
  const char *ct = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Content-Type");
  size_t n = strlen (want);

  if (ct == NULL || strncasecmp (ct, want, n) != 0)
    return 0;
  ct += n;
  while (*ct == ' ')
    ct++;
  return *ct == '\0' || (*ct == ';' && strcasestr (ct, "charset=utf-8") != NULL);
}

static int
check_protocol_version (struct sbx_req *r, sbx_error_t **err)
{
  const char *v
      = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Connect-Protocol-Version");

  if (v != NULL && strcmp (v, "1") != 0)
    return sbx_err (err, SBX_E_INVALID, "Connect-Protocol-Version must be 1");
  return 0;
}

static int
parse_message (const char *data, size_t len, json_t **out, sbx_error_t **err)
{
  json_error_t jerr;

  if (len == 0)
    {
      *out = json_object ();
      return *out ? 0 : sbx_err_oom (err);
    }
  *out = json_loadb (data, len, JSON_REJECT_DUPLICATES, &jerr);
  if (*out == NULL)
    return sbx_err (err, SBX_E_INVALID, "the request is not JSON: %s", jerr.text);
  if (!json_is_object (*out))
    {
      json_decref (*out);
      *out = NULL;
      return sbx_err (err, SBX_E_INVALID, "the request message must be a JSON object");
    }
  return 0;
}

int
sbx_connect_unary_request (struct sbx_req *r, json_t **out, sbx_error_t **err)
{
  *out = NULL;
  if (r->body.failed)
    return sbx_err_oom (err);
  if (check_protocol_version (r, err) < 0)
    return -1;
  if (!content_type_is (r, "application/json"))
    return sbx_err (err, SBX_E_INVALID,
                    "a unary call wants Content-Type application/json (sbx speaks Connect in JSON)");
  return parse_message (r->body.data, r->body.len, out, err);
}

int
sbx_connect_stream_request (struct sbx_req *r, json_t **out, sbx_error_t **err)
{
  struct sbx_connect_reader rd;
  struct sbx_connect_message m;
  const void *p = r->body.data ? r->body.data : "";
  size_t n = r->body.len;
  int rc, got = 0;

  *out = NULL;
  if (r->body.failed)
    return sbx_err_oom (err);
  if (check_protocol_version (r, err) < 0)
    return -1;
  if (!content_type_is (r, "application/connect+json"))
    return sbx_err (err, SBX_E_INVALID,
                    "a streaming call wants Content-Type application/connect+json");
  sbx_connect_reader_init (&rd, STREAM_REQUEST_MAX);
  while ((rc = sbx_connect_read (&rd, &p, &n, &m, err)) == 1)
    {
      if (m.end_stream || got)
        {
          rc = sbx_err (err, SBX_E_INVALID,
                        "a server-streaming call takes exactly one message envelope");
          break;
        }
      if (parse_message (m.data, m.len, out, err) < 0)
        {
          rc = -1;
          break;
        }
      got = 1;
    }
  if (rc == 0 && sbx_connect_reader_finish (&rd, err) < 0)
    rc = -1;
  else if (rc == 0 && !got)
    rc = sbx_err (err, SBX_E_INVALID, "the request has no message envelope");
  sbx_connect_reader_free (&rd);
  if (rc < 0)
    {
      json_decref (*out);
      *out = NULL;
      return -1;
    }
  return 0;
}

int
sbx_connect_append (struct sbx_buf *out, json_t *msg)
{
  char *text = msg ? json_dumps (msg, JSON_COMPACT) : NULL;
  int rc;

  json_decref (msg);
  if (text == NULL)
    return -1;
  rc = sbx_connect_encode (out, 0, text, strlen (text), NULL);
  free (text);
  return rc < 0 || out->failed ? -1 : 0;
}

/* The end-stream envelope: {} or {"error":{...}}. */
static int
append_end (struct sbx_buf *out, const char *code, const char *message)
{
  json_t *o = json_object ();
  char *text;
  int rc;

  if (code != NULL)
    json_object_set_new (o, "error",
                         json_pack ("{s:s, s:o}", "code", code, "message", sbx_e2b_text_json (message)));
  text = json_dumps (o, JSON_COMPACT);
  json_decref (o);
  if (text == NULL)
    return -1;
  rc = sbx_connect_encode (out, SBX_CONNECT_FLAG_END_STREAM, text, strlen (text), NULL);
  free (text);
  return rc < 0 || out->failed ? -1 : 0;
}

int64_t
sbx_connect_timeout_ms (struct sbx_req *r)
{
  const char *v = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
  int64_t ms = 0;
  size_t i;

  if (v == NULL)
    return 0;
  /* The spec: at most 10 digits. */
  if (v[0] == '\0' || strlen (v) > 10)
    return -1;
  for (i = 0; v[i]; i++)
    {
      if (v[i] < '0' || v[i] > '9')
        return -1;
      ms = ms * 10 + (v[i] - '0');
    }
  return ms;
}

static int64_t
keepalive_ms (struct sbx_req *r)
{
  const char *v
      = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
  char *end;
  long s;

  if (v == NULL)
    return KEEPALIVE_DEFAULT_S * 1000;
  s = strtol (v, &end, 10);
  if (*v == '\0' || *end != '\0' || s < 1)
    return KEEPALIVE_DEFAULT_S * 1000;
  return (s > KEEPALIVE_MAX_S ? KEEPALIVE_MAX_S : s) * 1000;
}

/* ---- streams ------------------------------------------------------------ */

struct stream
{
  const struct sbx_connect_stream_ops *ops;
  void *ctx;
  struct sbx_req *req; /* valid while MHD calls us */
  struct sbx_buf pending;
  int ended;     /* the end-stream envelope is in pending */
  int completed; /* ops->next said the last message was given */
  int64_t deadline_mono; /* 0: none */
  int64_t keepalive_ms, idle_ms;
};

static int
end_with_error (struct stream *s, const char *code, const char *message)
{
  s->ended = 1;
  return append_end (&s->pending, code, message);
}

static ssize_t
stream_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct stream *s = cls;
  size_t n;

  (void) pos;
  while (s->pending.len == 0)
    {
      sbx_error_t *err = NULL;
      int64_t slice = POLL_SLICE_MS;
      int rc;

      if (s->ended)
        return MHD_CONTENT_READER_END_OF_STREAM;
      if (s->deadline_mono)
        {
          int64_t left = s->deadline_mono - sbx_mono_ms ();
          if (left <= 0)
            {
              if (end_with_error (s, "deadline_exceeded", "the call's Connect-Timeout-Ms passed")
                  < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
              break;
            }
          if (left < slice)
            slice = left;
        }
      if (s->ops->wait != NULL)
        {
          /* Take nothing for a client that is gone: it stays for the next
             reader. */
          int news = s->ops->wait (s->ctx, slice);
          if (sbx_req_client_gone (s->req))
            return MHD_CONTENT_READER_END_WITH_ERROR;
          if (!news)
            goto idle;
        }
      rc = s->ops->next (s->ctx, &s->pending, s->ops->wait != NULL ? 0 : slice, &err);
      if (rc < 0 || s->pending.failed)
        {
          int bad;
          sbx_buf_reset (&s->pending);
          bad = end_with_error (s, err ? sbx_connect_code (err->kind) : "resource_exhausted",
                                err ? err->msg : "out of memory");
          sbx_error_free (err);
          if (bad < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
          break;
        }
      if (rc > 0)
        {
          s->completed = 1;
          if (end_with_error (s, NULL, NULL) < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
          break;
        }
      if (s->pending.len)
        {
          s->idle_ms = 0;
          break;
        }
      if (sbx_req_client_gone (s->req))
        return MHD_CONTENT_READER_END_WITH_ERROR;
    idle:
      s->idle_ms += slice;
      if (s->idle_ms >= s->keepalive_ms)
        {
          s->idle_ms = 0;
          if (sbx_connect_append (&s->pending, json_loads (s->ops->keepalive_json, 0, NULL)) < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
  n = s->pending.len < max ? s->pending.len : max;
  memcpy (buf, s->pending.data, n);
  sbx_buf_consume (&s->pending, n);
  return (ssize_t) n;
}

static void
stream_free (void *cls)
{
  struct stream *s = cls;

  s->ops->release (s->ctx, s->completed);
  sbx_buf_free (&s->pending);
  free (s);
}

void
sbx_connect_reply_stream (struct sbx_req *r, const struct sbx_connect_stream_ops *ops, void *ctx)
{
  struct stream *s = calloc (1, sizeof *s);
  struct MHD_Response *resp;
  int64_t timeout = sbx_connect_timeout_ms (r);

  if (s == NULL)
    {
      ops->release (ctx, 0);
      sbx_reply_error (r, NULL);
      return;
    }
  s->ops = ops;
  s->ctx = ctx;
  s->req = r;
  s->keepalive_ms = keepalive_ms (r);
  if (timeout > 0)
    s->deadline_mono = sbx_mono_ms () + timeout;
  resp = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, s,
                                            stream_free);
  if (resp == NULL)
    {
      stream_free (s);
      sbx_reply_error (r, NULL);
      return;
    }
  MHD_add_response_header (resp, "Content-Type", "application/connect+json");
  sbx_reply_response (r, 200, resp);
}

void
sbx_connect_reply_stream_err (struct sbx_req *r, sbx_error_t *err)
{
  struct sbx_buf b = SBX_BUF_INIT;
  struct MHD_Response *resp;

  if (append_end (&b, err ? sbx_connect_code (err->kind) : "resource_exhausted",
                  err ? err->msg : "out of memory")
      < 0)
    {
      sbx_buf_free (&b);
      sbx_error_free (err);
      sbx_reply_error (r, NULL);
      return;
    }
  sbx_error_free (err);
  resp = MHD_create_response_from_buffer (b.len, b.data, MHD_RESPMEM_MUST_COPY);
  sbx_buf_free (&b);
  if (resp == NULL)
    {
      sbx_reply_error (r, NULL);
      return;
    }
  MHD_add_response_header (resp, "Content-Type", "application/connect+json");
  sbx_reply_response (r, 200, resp);
}
