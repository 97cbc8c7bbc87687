/* sbx CLI: JSON requests to the daemon (see api.h). */
#include "cli/api.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

int
sbx_api_init (struct sbx_api *api, sbx_error_t **err)
{
  memset (api, 0, sizeof *api);
  if (sbx_http_endpoint_from_env (&api->ep, err) < 0)
    return -1;
  api->conn = sbx_http_conn_new (&api->ep);
  return 0;
}

void
sbx_api_clear (struct sbx_api *api)
{
  sbx_http_conn_free (api->conn);
  api->conn = NULL;
  sbx_http_endpoint_clear (&api->ep);
}

int
sbx_api_unreachable (const struct sbx_api *api)
{
  return api->conn != NULL && sbx_http_conn_unreachable (api->conn);
}

static enum sbx_error_kind
kind_from_name (const char *name, int status)
{
  enum sbx_error_kind k;

  /* The daemon's own names (util/error.c), else what the status says. */
  if (name != NULL)
    for (k = SBX_E_INVALID; k <= SBX_E_LAST; k++)
      if (strcmp (sbx_error_kind_name (k), name) == 0)
        return k;
  for (k = SBX_E_INVALID; k <= SBX_E_LAST; k++)
    if (sbx_error_kind_http_status (k) == status)
      return k;
  return status >= 400 && status < 500 ? SBX_E_INVALID : SBX_E_SYSTEM;
}

int
sbx_api_error_from_body (int status, const char *body, size_t len, int auth_hint,
                         sbx_error_t **err)
{
  json_t *j = len > 0 ? json_loadb (body, len, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
  const char *name = NULL, *message = NULL;
  const char *hint = status == 401 && auth_hint ? " (set SBX_API_KEY to a key from `sbx key create`)" : "";
  enum sbx_error_kind kind;

  if (json_is_object (j))
    {
      name = json_string_value (json_object_get (j, "error"));
      message = json_string_value (json_object_get (j, "message"));
    }
  kind = kind_from_name (name, status);
  if (message != NULL && message[0] != '\0')
    sbx_err (err, kind, "%s%s", message, hint);
  else if (name != NULL)
    sbx_err (err, kind, "the daemon answered %d %s%s", status, name, hint);
  else
    {
      /* Not one of our error objects (a proxy in between?): quote the start
         of the body, on one line. */
      char snippet[121];
      size_t i, n = 0;
      for (i = 0; i < len && n < sizeof snippet - 1; i++)
        {
          unsigned char ch = (unsigned char) body[i];
          if (ch == '\n' || ch == '\r')
            break;
          snippet[n++] = ch < ' ' || ch == 0x7f ? '?' : (char) ch;
        }
      snippet[n] = '\0';
      if (n > 0)
        sbx_err (err, kind, "the daemon answered HTTP %d: %s%s", status, snippet, hint);
      else
        sbx_err (err, kind, "the daemon answered HTTP %d%s", status, hint);
    }
  json_decref (j);
  return -1;
}

int
sbx_api_request (struct sbx_api *api, struct sbx_http_conn *conn,
                 const struct sbx_http_request *req, sbx_http_data_cb on_data,
                 void *ctx, struct sbx_buf *out, sbx_error_t **err)
{
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  int status;

  if (conn == NULL)
    conn = api->conn;
  if (sbx_http_do (conn, req, on_data, ctx, SBX_API_MAX_JSON, &resp, err) < 0)
    {
      sbx_http_response_clear (&resp);
      return -1;
    }
  status = resp.status;
  if (status < 200 || status > 299)
    {
      sbx_api_error_from_body (status, resp.body.data, resp.body.len,
                               api->ep.auth == NULL && !api->ep.is_unix, err);
      sbx_http_response_clear (&resp);
      return -1;
    }
  if (out != NULL)
    {
      sbx_buf_free (out);
      *out = resp.body;
    }
  else
    sbx_http_response_clear (&resp);
  return status;
}

int
sbx_api_json (struct sbx_api *api, const char *method, const char *target,
              const json_t *body, json_t **out, sbx_error_t **err)
{
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_buf answer = SBX_BUF_INIT;
  cleanup_free char *text = NULL;
  json_error_t jerr;
  int status;

  req.method = method;
  req.target = target;
  if (body != NULL)
    {
      text = json_dumps (body, JSON_COMPACT | JSON_REAL_PRECISION (6));
      if (text == NULL)
        sbx_oom ();
      req.content_type = "application/json";
      req.body = text;
      req.body_len = strlen (text);
      req.has_body = 1;
    }
  status = sbx_api_request (api, NULL, &req, NULL, NULL, out ? &answer : NULL, err);
  if (status < 0)
    return -1;
  if (out != NULL)
    {
      *out = NULL;
      if (answer.len > 0)
        {
          *out = json_loadb (answer.data, answer.len, 0, &jerr);
          if (*out == NULL)
            {
              sbx_buf_free (&answer);
              return sbx_err (err, SBX_E_SYSTEM, "the daemon answered malformed JSON: %s",
                              jerr.text);
            }
        }
      sbx_buf_free (&answer);
    }
  return status;
}

void
sbx_api_sandbox_path (struct sbx_buf *b, const char *id, const char *suffix)
{
  sbx_buf_append (b, "/v1/sandboxes/", 14);
  sbx_url_escape (b, id, 0);
  if (suffix != NULL)
    sbx_buf_append (b, suffix, strlen (suffix));
}

int
sbx_api_put_file (struct sbx_api *api, const char *id, const char *path, int fd,
                  uint64_t size, int mode, int parents, sbx_error_t **err)
{
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_buf target = SBX_BUF_INIT;
  int status;

  sbx_api_sandbox_path (&target, id, "/files?path=");
  sbx_url_escape (&target, path, 1);
  if (mode >= 0)
    sbx_buf_printf (&target, "&mode=%04o", (unsigned) mode & 07777);
  if (parents)
    sbx_buf_printf (&target, "&parents=1");
  req.method = "PUT";
  req.target = target.data;
  req.content_type = "application/octet-stream";
  req.body_fd = fd;
  req.body_len = (size_t) size;
  req.has_body = 1;
  status = sbx_api_request (api, NULL, &req, NULL, NULL, NULL, err);
  sbx_buf_free (&target);
  return status < 0 ? -1 : 0;
}
