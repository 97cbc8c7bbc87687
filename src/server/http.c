/* sbx: HTTP plumbing on libmicrohttpd: the two listeners, per-request
 * state, authentication, body limits, routing, and replies.
 *
 * MHD runs one thread per connection (with poll(), not select(): the
 * daemon holds thousands of fds), so a handler may block on a command or a
 * stream without holding anyone else up.
 */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/audit.h"
#include "core/keys.h"
#include "priv/host.h"
#include "server/e2b.h"
#include "server/request.h"
#include "server/route_match.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/utf8.h"

#define CONNECTION_LIMIT 2048
#define PER_IP_CONNECTION_LIMIT 256
#define IDLE_TIMEOUT_S 300

struct listener
{
  struct MHD_Daemon *mhd;
  int fd;
  int admin;
  const struct sbx_route *routes;
};

static struct listener unix_listener = {NULL, -1, 1, sbx_server_routes},
                       tcp_listener = {NULL, -1, 0, sbx_server_routes};
static char socket_path[600];

const struct sbx_route sbx_server_routes[] = {
    {"GET", "healthz", SBX_BODY_NONE, 0, sbx_route_healthz},
    {"GET", "metrics", SBX_BODY_NONE, 1, sbx_route_metrics},
    {"GET", "v1/info", SBX_BODY_NONE, 0, sbx_route_info},
    {"POST", "v1/sandboxes", SBX_BODY_JSON, 0, sbx_route_sandbox_create},
    {"GET", "v1/sandboxes", SBX_BODY_NONE, 0, sbx_route_sandbox_list},
    {"GET", "v1/sandboxes/*", SBX_BODY_NONE, 0, sbx_route_sandbox_get},
    {"DELETE", "v1/sandboxes/*", SBX_BODY_NONE, 0, sbx_route_sandbox_kill},
    {"POST", "v1/sandboxes/*/timeout", SBX_BODY_JSON, 0, sbx_route_sandbox_timeout},
    {"PUT", "v1/sandboxes/*/network", SBX_BODY_JSON, 0, sbx_route_sandbox_network},
    {"GET", "v1/sandboxes/*/metrics", SBX_BODY_NONE, 0, sbx_route_sandbox_metrics},
    {"GET", "v1/sandboxes/*/metrics/history", SBX_BODY_NONE, 0, sbx_route_sandbox_metrics_history},
    {"POST", "v1/sandboxes/*/pause", SBX_BODY_JSON, 0, sbx_route_sandbox_pause},
    {"POST", "v1/sandboxes/*/resume", SBX_BODY_JSON, 0, sbx_route_sandbox_resume},
    {"POST", "v1/sandboxes/*/fork", SBX_BODY_JSON, 0, sbx_route_sandbox_fork},
    {"POST", "v1/sandboxes/*/snapshots", SBX_BODY_JSON, 0, sbx_route_snapshot_create},
    {"GET", "v1/snapshots", SBX_BODY_NONE, 0, sbx_route_snapshot_list},
    {"DELETE", "v1/snapshots/*", SBX_BODY_NONE, 0, sbx_route_snapshot_delete},
    {"POST", "v1/sandboxes/*/exec", SBX_BODY_JSON, 0, sbx_route_exec},
    {"POST", "v1/sandboxes/*/code", SBX_BODY_JSON, 0, sbx_route_code},
    {"GET", "v1/sandboxes/*/contexts", SBX_BODY_NONE, 0, sbx_route_context_list},
    {"POST", "v1/sandboxes/*/contexts", SBX_BODY_JSON, 0, sbx_route_context_create},
    {"DELETE", "v1/sandboxes/*/contexts/*", SBX_BODY_NONE, 0, sbx_route_context_delete},
    {"POST", "v1/sandboxes/*/contexts/*/restart", SBX_BODY_NONE, 0, sbx_route_context_restart},
    {"POST", "v1/sandboxes/*/contexts/*/fork", SBX_BODY_NONE, 0, sbx_route_context_fork},
    {"POST", "v1/sandboxes/*/processes", SBX_BODY_JSON, 0, sbx_route_process_start},
    {"GET", "v1/sandboxes/*/processes", SBX_BODY_NONE, 0, sbx_route_process_list},
    {"GET", "v1/sandboxes/*/processes/*", SBX_BODY_NONE, 0, sbx_route_process_get},
    {"POST", "v1/sandboxes/*/processes/*/stdin", SBX_BODY_RAW, 0, sbx_route_process_stdin},
    {"POST", "v1/sandboxes/*/processes/*/signal", SBX_BODY_JSON, 0, sbx_route_process_signal},
    {"POST", "v1/sandboxes/*/processes/*/resize", SBX_BODY_JSON, 0, sbx_route_process_resize},
    {"GET", "v1/sandboxes/*/processes/*/wait", SBX_BODY_NONE, 0, sbx_route_process_wait},
    {"GET", "v1/sandboxes/*/processes/*/attach", SBX_BODY_NONE, 0, sbx_route_process_attach},
    {"GET", "v1/sandboxes/*/files", SBX_BODY_NONE, 0, sbx_route_file_get},
    {"PUT", "v1/sandboxes/*/files", SBX_BODY_UPLOAD, 0, sbx_route_file_put},
    {"DELETE", "v1/sandboxes/*/files", SBX_BODY_NONE, 0, sbx_route_file_delete},
    {"GET", "v1/sandboxes/*/files/stat", SBX_BODY_NONE, 0, sbx_route_file_stat},
    {"GET", "v1/sandboxes/*/files/list", SBX_BODY_NONE, 0, sbx_route_file_list},
    {"POST", "v1/sandboxes/*/files/mkdir", SBX_BODY_JSON, 0, sbx_route_file_mkdir},
    {"POST", "v1/sandboxes/*/files/move", SBX_BODY_JSON, 0, sbx_route_file_move},
    {"GET", "v1/sandboxes/*/files/watch", SBX_BODY_NONE, 0, sbx_route_file_watch},
    {"POST", "v1/keys", SBX_BODY_JSON, 1, sbx_route_key_create},
    {"GET", "v1/keys", SBX_BODY_NONE, 1, sbx_route_key_list},
    {"DELETE", "v1/keys/*", SBX_BODY_NONE, 1, sbx_route_key_delete},
    {"POST", "v1/templates", SBX_BODY_TEMPLATE, 0, sbx_route_template_build},
    {"GET", "v1/templates", SBX_BODY_NONE, 0, sbx_route_template_list},
    {"GET", "v1/templates/*", SBX_BODY_NONE, 0, sbx_route_template_get},
    {"DELETE", "v1/templates/*", SBX_BODY_NONE, 0, sbx_route_template_delete},
    {"GET", "v1/templates/*/progress", SBX_BODY_NONE, 0, sbx_route_template_progress},
    {"GET", "v1/template-cache", SBX_BODY_NONE, 0, sbx_route_template_cache_get},
    {"DELETE", "v1/template-cache", SBX_BODY_NONE, 0, sbx_route_template_cache_prune},
    {"GET", "v1/audit", SBX_BODY_NONE, 1, sbx_route_audit},
    {"POST", "v1/secrets", SBX_BODY_SECRET, 0, sbx_route_secret_create},
    {"GET", "v1/secrets", SBX_BODY_NONE, 0, sbx_route_secret_list},
    {"DELETE", "v1/secrets/*", SBX_BODY_NONE, 0, sbx_route_secret_delete},
    /* E2B's control plane (e2b_control.c): E2B_API_URL points here. */
    {"GET", "health", SBX_BODY_NONE, 0, sbx_route_e2b_health},
    {"POST", "sandboxes", SBX_BODY_JSON, 0, sbx_route_e2b_create},
    {"POST", "v2/sandboxes", SBX_BODY_JSON, 0, sbx_route_e2b_create},
    {"GET", "sandboxes", SBX_BODY_NONE, 0, sbx_route_e2b_list},
    {"GET", "v2/sandboxes", SBX_BODY_NONE, 0, sbx_route_e2b_list},
    {"GET", "sandboxes/*", SBX_BODY_NONE, 0, sbx_route_e2b_get},
    {"DELETE", "sandboxes/*", SBX_BODY_NONE, 0, sbx_route_e2b_kill},
    {"POST", "sandboxes/*/timeout", SBX_BODY_JSON, 0, sbx_route_e2b_timeout},
    {"POST", "sandboxes/*/refreshes", SBX_BODY_JSON, 0, sbx_route_e2b_refresh},
    {"POST", "sandboxes/*/connect", SBX_BODY_JSON, 0, sbx_route_e2b_connect},
    {"POST", "v2/sandboxes/*/connect", SBX_BODY_JSON, 0, sbx_route_e2b_connect},
    {"GET", "sandboxes/*/metrics", SBX_BODY_NONE, 0, sbx_route_e2b_metrics},
    {"GET", "sandboxes/*/logs", SBX_BODY_NONE, 0, sbx_route_e2b_logs},
    {"GET", "v2/sandboxes/*/logs", SBX_BODY_NONE, 0, sbx_route_e2b_logs},
    {"POST", "sandboxes/*/pause", SBX_BODY_JSON, 0, sbx_route_e2b_pause},
    {"POST", "sandboxes/*/resume", SBX_BODY_JSON, 0, sbx_route_e2b_resume},
    {"POST", "sandboxes/*/fork", SBX_BODY_JSON, 0, sbx_route_e2b_fork},
    {"POST", "sandboxes/*/snapshots", SBX_BODY_JSON, 0, sbx_route_e2b_snapshot_create},
    {"PUT", "sandboxes/*/network", SBX_BODY_JSON, 0, sbx_route_e2b_network},
    {"GET", "snapshots", SBX_BODY_NONE, 0, sbx_route_e2b_snapshot_list},
    {"DELETE", "templates/*", SBX_BODY_NONE, 0, sbx_route_e2b_template_delete},
    {"GET", "templates/aliases/*", SBX_BODY_NONE, 0, sbx_route_e2b_template_alias},
    /* Any method; routed from the raw URI in begin_request (proxy.c). */
    {"*", "v1/sandboxes/*/ports/*", SBX_BODY_PROXY, 0, sbx_route_port_proxy},
    {NULL, NULL, SBX_BODY_NONE, 0, NULL},
};

/* ---- replies ----------------------------------------------------------- */

void
sbx_reply_response (struct sbx_req *r, unsigned status, struct MHD_Response *resp)
{
  if (r->responded)
    {
      MHD_destroy_response (resp);
      return;
    }
  r->status = status;
  /* A proxied answer is the server's own: its caching, its types. */
  if (!r->raw_response)
    {
      MHD_add_response_header (resp, "Cache-Control", "no-store");
      MHD_add_response_header (resp, "X-Content-Type-Options", "nosniff");
      /* RFC 9110 15.5.6: a 405 says which methods the resource takes. */
      if (status == 405 && r->allow[0])
        MHD_add_response_header (resp, "Allow", r->allow);
    }
  if (r->defer_replies)
    {
      r->deferred = resp;
      r->deferred_status = status;
      r->responded = 1;
      return;
    }
  if (MHD_queue_response (r->conn, status, resp) != MHD_YES)
    {
      /* libmicrohttpd 0.9.75 sends "100 Continue" to a body-less request
         with "Expect: 100-continue" and, when bytes of a next request are
         already buffered, calls us with no data before the request is
         complete; it then refuses to queue. Dropping the answer left the
         connection hanging until the idle timeout, the handler's action
         done (found by fuzz_mhd). Hold it for the final call instead. */
      sbx_debug ("queue response %u refused: deferred", status);
      r->deferred = resp;
      r->deferred_status = status;
      r->responded = 1;
      return;
    }
  MHD_destroy_response (resp);
  r->responded = 1;
}

/* The answer when memory ran out building the real one: a constant body,
   so that answering needs as little memory as possible. */
static void
reply_out_of_memory (struct sbx_req *r)
{
  static const char body[] = "{\"code\":503,\"error\":\"unavailable\",\"message\":\"out of memory\"}";
  struct MHD_Response *resp = MHD_create_response_from_buffer (
      sizeof body - 1, (void *) (uintptr_t) body, MHD_RESPMEM_PERSISTENT);

  sbx_warn ("%s: out of memory", r->route ? r->route->pattern : "request");
  r->out_of_memory = 1;
  if (resp == NULL)
    return; /* not even that: on_request drops the connection */
  MHD_add_response_header (resp, "Content-Type", "application/json");
  sbx_reply_response (r, 503, resp);
}

void
sbx_reply_json (struct sbx_req *r, unsigned status, json_t *body)
{
  char *text = NULL;
  struct MHD_Response *resp;
  size_t len;

  /* A part of body that could not be allocated is missing from it. */
  if (body != NULL && !sbx_json_alloc_failed ())
    text = json_dumps (body, JSON_COMPACT | JSON_REAL_PRECISION (10));
  json_decref (body);
  if (text == NULL || sbx_json_alloc_failed ())
    {
      free (text);
      sbx_json_alloc_reset ();
      reply_out_of_memory (r);
      return;
    }
  len = strlen (text);
  text[len] = '\0';
  resp = MHD_create_response_from_buffer (len, text, MHD_RESPMEM_MUST_FREE);
  if (resp == NULL)
    {
      free (text);
      reply_out_of_memory (r);
      return;
    }
  MHD_add_response_header (resp, "Content-Type", "application/json");
  sbx_reply_response (r, status, resp);
}

static void
reply_error_kind (struct sbx_req *r, unsigned status, const char *kind, const char *msg)
{
  json_t *o = json_object (), *m;

  json_object_set_new (o, "code", json_integer (status));
  json_object_set_new (o, "error", json_string (kind));
  m = json_string (msg);
  if (m == NULL)
    {
      /* The message quotes the client's bytes, which need not be UTF-8. */
      struct sbx_buf b = SBX_BUF_INIT;
      sbx_utf8_sanitize (&b, msg, strlen (msg), 1);
      m = json_stringn (b.data ? b.data : "", b.len);
      sbx_buf_free (&b);
    }
  json_object_set_new (o, "message", m);
  sbx_reply_json (r, status, o);
}

void
sbx_reply_error (struct sbx_req *r, sbx_error_t *err)
{
  unsigned status;

  if (err == NULL)
    {
      /* A call that failed for want of memory without saying so (a
         library's NULL). */
      reply_out_of_memory (r);
      return;
    }
  status = (unsigned) sbx_error_kind_http_status (err->kind);

  /* A server in a sandbox that is down or broken is its tenant's
     business, not the daemon's: not worth a warning. */
  if (status >= 500 && err->kind != SBX_E_BAD_GATEWAY && err->kind != SBX_E_GATEWAY_TIMEOUT)
    {
      /* r->path was cut into segments: join them again for the log. */
      char path[sizeof r->path];
      size_t n = 0;
      int i;
      path[0] = '\0';
      for (i = 0; i < r->nsegs && n < sizeof path; i++)
        n += (size_t) snprintf (path + n, sizeof path - n, "/%s", r->segs[i]);
      sbx_warn ("%s %s: %s", r->route ? r->route->method : "?", path, err->msg);
    }
  reply_error_kind (r, status, sbx_error_kind_name (err->kind), err->msg);
  sbx_error_free (err);
}

void
sbx_reply_errorf (struct sbx_req *r, enum sbx_error_kind kind, const char *fmt, ...)
{
  sbx_error_t *err = NULL;
  va_list ap;

  va_start (ap, fmt);
  sbx_errv (&err, kind, 0, fmt, ap);
  va_end (ap);
  sbx_reply_error (r, err);
}

void
sbx_reply_empty (struct sbx_req *r, unsigned status)
{
  struct MHD_Response *resp = NULL;
  int tries;

  /* Whatever the handler did is done (a kill, a delete): worth a second
     try at the few bytes that say so, before a 503 or a closed connection. */
  for (tries = 0; tries < 3 && resp == NULL; tries++)
    resp = MHD_create_response_from_buffer (0, NULL, MHD_RESPMEM_PERSISTENT);
  if (resp == NULL)
    {
      r->out_of_memory = 1; /* on_request answers 503 or drops the connection */
      return;
    }
  sbx_reply_response (r, status, resp);
}

int
sbx_req_client_gone (struct sbx_req *r)
{
  const union MHD_ConnectionInfo *ci
      = MHD_get_connection_info (r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  struct pollfd pfd;

  if (ci == NULL)
    return 0;
  pfd.fd = ci->connect_fd;
  pfd.events = POLLRDHUP;
  pfd.revents = 0;
  /* Only a hang-up counts: POLLIN may just be the next pipelined request. */
  return poll (&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

const char *
sbx_req_tenant (const struct sbx_req *r)
{
  return r->admin ? NULL : r->tenant;
}

const char *
sbx_req_query (struct sbx_req *r, const char *name)
{
  return MHD_lookup_connection_value (r->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct sbx_sandbox *
sbx_req_sandbox (struct sbx_req *r, int seg, sbx_error_t **err)
{
  return sbx_sandbox_get (sbx_req_tenant (r), r->segs[seg], err);
}

/* ---- authentication ---------------------------------------------------- */

static int
authenticate (struct sbx_req *r, sbx_error_t **err)
{
  const char *key = sbx_route_api_key (
      MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Authorization"),
      MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "X-API-Key"));

  if (key == NULL)
    return sbx_err (err, SBX_E_UNAUTHORIZED,
                    "an API key is required (Authorization: Bearer KEY or X-API-Key: KEY)");
  return sbx_key_check (sbx_core_store (), key, r->tenant, sizeof r->tenant, err);
}

/* ---- NULs in the URL --------------------------------------------------- */

/* MHD decodes %00 into a NUL, and the path and every query value are then
   C strings cut there: "/v1/sandboxes/ID%00/files" would route as
   "/v1/sandboxes/ID", "path=/tmp/a%00b" act on /tmp/a. Such requests are
   refused. Each connection has its own thread, which parses the request
   line (calling the unescaper) and then runs the handler. */
static __thread int url_had_nul;

static size_t
unescape (void *cls, struct MHD_Connection *c, char *s)
{
  (void) cls;
  (void) c;
  return sbx_route_unescape (s, &url_had_nul);
}

/* ---- the MHD callbacks ------------------------------------------------- */

static void
free_request (struct sbx_req *r)
{
  if (r->audit_sha)
    EVP_MD_CTX_free (r->audit_sha);
  if (r->deferred)
    MHD_destroy_response (r->deferred);
  sbx_proxy_free (r->proxy);
  free (r->raw_uri);
  if (r->e2b_files)
    sbx_e2b_files_free (r);
  if (r->upload_open)
    sbx_host_fs_upload_abort (&r->up);
  if (r->tmpl_spool)
    close (r->tmpl_spool - 1);
  sbx_sandbox_fs_close (&r->fs);
  if (r->sb)
    sbx_sandbox_unref (r->sb);
  sbx_error_free (r->upload_err);
  sbx_buf_free (&r->body);
  free (r);
}

/* The sandbox a request acted on: the data plane's, the one a create
   made, or the segment after "sandboxes" in the route's pattern (as the
   client wrote it: a 404's may be no sandbox's id). NULL when none. */
static const char *
audit_sandbox (const struct sbx_req *r)
{
  const char *p;
  int i;

  if (r->audit_sandbox[0])
    return r->audit_sandbox;
  if (r->e2b.plane != SBX_PLANE_API && r->e2b.sandbox_id[0])
    return r->e2b.sandbox_id;
  if (r->route == NULL)
    return NULL;
  for (p = r->route->pattern, i = 0; *p && i + 1 < r->nsegs; i++)
    {
      size_t n = strcspn (p, "/");
      if (n == 9 && strncmp (p, "sandboxes", 9) == 0 && strncmp (p + n, "/*", 2) == 0)
        return strnlen (r->segs[i + 1], SBX_ID_LEN + 1) <= SBX_ID_LEN ? r->segs[i + 1] : "?";
      p += n;
      if (*p == '/')
        p++;
    }
  return NULL;
}

/* One record per request: who, which route (its pattern: never the
   query, a body or a credential), which sandbox, what it was answered. */
static void
audit_request (struct sbx_req *r, enum MHD_RequestTerminationCode toe)
{
  char action[160];
  const char *tenant;

  if (!r->begun)
    return;
  tenant = r->admin ? "admin" : r->tenant[0] ? r->tenant : NULL;
  if (tenant == NULL && r->sb && r->e2b.plane != SBX_PLANE_API)
    tenant = r->sb->tenant; /* its access token spoke for it */
  if (r->route)
    snprintf (action, sizeof action, "%.16s /%s", r->method ? r->method : "?",
              r->route->pattern);
  else
    snprintf (action, sizeof action, "%.16s (no route)", r->method ? r->method : "?");
  sbx_audit_api (tenant, action, audit_sandbox (r), r->status,
                 toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
}

/* Refused while the audit log cannot be written: anything but a read
   (docs/audit.md), and but the two safety actions: killing a sandbox and
   revoking a key must work when the disk is full (they are recorded as
   soon as the log can take them). 1 when it answered. */
static int
audit_refuses (struct sbx_req *r, const char *method)
{
  if (sbx_audit_healthy () || strcmp (method, "GET") == 0 || strcmp (method, "HEAD") == 0)
    return 0;
  if (r->route != NULL
      && (r->route->handler == sbx_route_sandbox_kill || r->route->handler == sbx_route_e2b_kill
          || r->route->handler == sbx_route_key_delete))
    return 0;
  reply_error_kind (r, 503, "unavailable",
                    "the audit log cannot be written: changes are refused until it can"
                    " (see GET /v1/info)");
  return 1;
}

static void
on_completed (void *cls, struct MHD_Connection *c, void **con_cls,
              enum MHD_RequestTerminationCode toe)
{
  (void) cls;
  (void) c;
  if (*con_cls)
    audit_request (*con_cls, toe);
  if (*con_cls)
    free_request (*con_cls);
  *con_cls = NULL;
}

/* E2B's answer for a sandbox that does not exist (or no longer): the SDK
   reads a 502 as "gone" (isRunning() false, TimeoutError). */
static void
reply_sandbox_gone (struct sbx_req *r)
{
  json_t *o = json_object ();

  json_object_set_new (o, "sandboxId", json_string (r->e2b.sandbox_id));
  json_object_set_new (o, "message", json_string ("The sandbox was not found"));
  json_object_set_new (o, "code", json_integer (502));
  sbx_reply_json (r, 502, o);
}

/* 1 when the request carries this sandbox's access token. The compare
   takes the same time wherever the first wrong byte is. */
static int
has_access_token (struct sbx_req *r)
{
  const char *t = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "X-Access-Token");

  return t != NULL && strlen (t) == strlen (r->sb->access_token)
         && CRYPTO_memcmp (t, r->sb->access_token, strlen (t)) == 0;
}

/* The traffic token, or an API key of the sandbox's own tenant. */
static int
may_reach_ports (struct sbx_req *r)
{
  const char *t
      = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "E2b-Traffic-Access-Token");
  sbx_error_t *err = NULL;

  if (t != NULL && strlen (t) == strlen (r->sb->traffic_token)
      && CRYPTO_memcmp (t, r->sb->traffic_token, strlen (t)) == 0)
    return 1;
  if (authenticate (r, &err) < 0)
    {
      sbx_error_free (err);
      return 0;
    }
  return strcmp (r->tenant, r->sb->tenant) == 0;
}

/* A request for a sandbox's data plane: envd's routes, the code
   interpreter, or one of the sandbox's own ports. Its credential is the
   sandbox's access token, not an API key (as in E2B). */
static void
begin_data_plane (struct sbx_req *r, struct listener *l, const char *url, const char *method)
{
  sbx_error_t *err = NULL;
  int rc;

  (void) l;
  r->sb = sbx_sandbox_get (NULL, r->e2b.sandbox_id, NULL);
  if (r->sb == NULL)
    {
      reply_sandbox_gone (r);
      return;
    }
  if (r->e2b.plane == SBX_PLANE_CODE && !r->admin && !has_access_token (r)
      && !may_reach_ports (r))
    {
      /* @e2b/code-interpreter sends the sandbox's access token
         (X-Access-Token) with runCode, and the traffic token
         (E2b-Traffic-Access-Token, which sbx always hands out) with its
         context calls; the tenant's API key does too. Port 49999 is a
         port: what opens ports opens it. */
      reply_error_kind (r, 401, "unauthenticated",
                        "unauthorized access, please provide a valid access token"
                        " (X-Access-Token)");
      return;
    }
  if (r->e2b.plane == SBX_PLANE_CODE || r->e2b.plane == SBX_PLANE_PORT)
    {
      /* A sandbox's own port (E2B's getHost(port) URLs): proxied with the
         URI as the client sent it (server/proxy.c). Only the sandbox's
         tenant (its API key) or a holder of its traffic token
         (E2b-Traffic-Access-Token, E2B's header for private traffic) gets
         through: a sandbox id alone is no capability. The request's
         credentials never reach the sandbox (the proxy drops them). */
      if (r->e2b.plane == SBX_PLANE_PORT && !r->admin
          && !(r->sb->lifecycle & SBX_LIFECYCLE_PUBLIC_PORTS) && !may_reach_ports (r))
        {
          /* allowPublicTraffic: false given: E2B's 403; sbx's default: 401 */
          int explicit_private = (r->sb->lifecycle & SBX_LIFECYCLE_PRIVATE_EXPLICIT) != 0;
          reply_error_kind (r, explicit_private ? 403 : 401,
                            explicit_private ? "forbidden" : "unauthorized",
                            "a sandbox's ports need its traffic token"
                            " (E2b-Traffic-Access-Token) or its tenant's API key");
          return;
        }
      if (r->raw_uri == NULL)
        {
          reply_out_of_memory (r);
          return;
        }
      if (sbx_proxy_begin (r, r->sb, r->e2b.port, r->raw_uri, &err) < 0)
        {
          sbx_reply_error (r, err);
          return;
        }
      r->refused = 0;
      return;
    }
  if (sbx_route_split (url, r->path, sizeof r->path, r->segs, SBX_MAX_SEGS, &r->nsegs) < 0)
    {
      sbx_connect_reply_code (r, "unimplemented", "no such envd route");
      return;
    }
  rc = sbx_route_find (sbx_envd_routes, r->segs, r->nsegs, method, &r->route, r->allow,
                       sizeof r->allow);
  if (rc != 0)
    {
      char msg[200];
      snprintf (msg, sizeof msg, "envd has no %s %.100s", method, url);
      if (rc == 405)
        reply_error_kind (r, 405, "method_not_allowed", msg);
      else
        sbx_connect_reply_code (r, "unimplemented", msg);
      return;
    }
  if (r->route->auth == SBX_AUTH_TOKEN && !r->admin && !has_access_token (r))
    {
      reply_error_kind (r, 401, "unauthenticated",
                        "unauthorized access, please provide a valid access token"
                        " (X-Access-Token)");
      return;
    }
  if (sbx_e2b_basic_user (MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND,
                                                       "Authorization"),
                          r->e2b_user)
      < 0)
    {
      sbx_connect_reply_code (r, "unauthenticated",
                              "the user must be `user` or `root` (Authorization: Basic)");
      return;
    }
  if ((r->route->body == SBX_BODY_JSON || r->route->body == SBX_BODY_SECRET
       || r->route->body == SBX_BODY_RAW)
      && r->content_length != UINT64_MAX && r->content_length > SBX_JSON_BODY_MAX)
    {
      sbx_connect_reply_code (r, "resource_exhausted", "request body larger than 1 MiB");
      return;
    }
  if (audit_refuses (r, method))
    return;
  if (r->route->body == SBX_BODY_E2B_FILES && sbx_e2b_files_begin (r, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  r->refused = 0;
}

/* First call for a request: everything that can be decided from the
   request line and headers, before any body arrives. */
/* The table's port-proxy entry (method "*"), or NULL. */
static const struct sbx_route *
proxy_route (const struct sbx_route *table)
{
  int i;

  for (i = 0; table[i].method; i++)
    if (strcmp (table[i].method, "*") == 0)
      return &table[i];
  return NULL;
}

static void
begin_request (struct sbx_req *r, struct listener *l, const char *url, const char *method)
{
  const struct sbx_route *proxy = proxy_route (l->routes);
  const char *cl;
  sbx_error_t *err = NULL;
  int rc, had_nul = url_had_nul;

  r->admin = l->admin;
  r->fs.root = -1;
  /* Until every check below has passed: a refusal whose answer could not
     be made (out of memory) must still never reach the handler. */
  r->refused = 1;
  r->content_length = UINT64_MAX;
  cl = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Content-Length");
  r->content_length = sbx_route_content_length (cl);
  /* A refusal is answered once a small body is in (an HTTP client still
     sending it would see a reset connection instead of the answer); a
     large or chunked one is not read for nothing. */
  r->defer_replies = r->content_length > 0 && r->content_length <= SBX_JSON_BODY_MAX;
  url_had_nul = 0;
  {
    const char *why = NULL;
    if (sbx_e2b_route (MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Host"),
                       MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Id"),
                       MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "E2b-Sandbox-Port"),
                       sbx_core_config () ? sbx_core_config ()->domain : NULL, &r->e2b, &why)
        < 0)
      {
        reply_error_kind (r, 400, "invalid_argument", why);
        return;
      }
    /* A sandbox's own port gets the URI as sent, %00 and all (proxy.c);
       envd's routes are decoded, and must not be cut by a NUL. */
    if (had_nul && r->e2b.plane != SBX_PLANE_API && r->e2b.plane != SBX_PLANE_PORT)
      {
        reply_error_kind (r, 400, "invalid_argument", "the URL contains a NUL character (%00)");
        return;
      }
    if (r->e2b.plane != SBX_PLANE_API)
      {
        begin_data_plane (r, l, url, method);
        return;
      }
  }
  /* The port proxy is routed from the URI as sent: what follows the port
     goes to the server in the sandbox exactly as the client wrote it
     (a %00 there is just three characters, never a cut C string). */
  if (proxy != NULL && r->raw_uri != NULL
      && sbx_route_port_split (r->raw_uri, r->path, sizeof r->path, r->segs, SBX_MAX_SEGS,
                               &r->nsegs, &r->proxy_target))
    {
      r->route = proxy;
      rc = 0;
    }
  else if (had_nul)
    {
      reply_error_kind (r, 400, "invalid_argument", "the URL contains a NUL character (%00)");
      return;
    }
  else if (sbx_route_split (url, r->path, sizeof r->path, r->segs, SBX_MAX_SEGS, &r->nsegs) < 0)
    {
      reply_error_kind (r, 404, "not_found", "no such route");
      return;
    }
  else
    rc = sbx_route_find (l->routes, r->segs, r->nsegs, method, &r->route, r->allow,
                         sizeof r->allow);
  if (rc == 404)
    {
      char msg[200];
      snprintf (msg, sizeof msg, "no route for %s %.100s", method, url);
      reply_error_kind (r, 404, "not_found", msg);
      return;
    }
  if (rc == 405)
    {
      char msg[200];
      snprintf (msg, sizeof msg, "%s is not allowed on %.100s", method, url);
      reply_error_kind (r, 405, "method_not_allowed", msg);
      return;
    }
  if (!r->admin && strcmp (r->route->pattern, "healthz") != 0
      && strcmp (r->route->pattern, "health") != 0 && authenticate (r, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  if (r->route->admin_only && !r->admin)
    {
      reply_error_kind (r, 403, "forbidden",
                        strncmp (r->route->pattern, "v1/keys", 7) == 0
                            ? "API keys are managed through the unix socket only"
                            : "this route is for the administrator (the unix socket) only");
      return;
    }
  if ((r->route->body == SBX_BODY_JSON || r->route->body == SBX_BODY_SECRET
       || r->route->body == SBX_BODY_RAW)
      && r->content_length != UINT64_MAX && r->content_length > SBX_JSON_BODY_MAX)
    {
      reply_error_kind (r, 413, "too_large", "request body larger than 1 MiB");
      return;
    }
  if (r->route->body != SBX_BODY_PROXY && audit_refuses (r, method))
    return;
  if (r->route->body == SBX_BODY_UPLOAD && sbx_files_upload_begin (r, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  if (r->route->body == SBX_BODY_TEMPLATE && sbx_templates_upload_begin (r, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  if (r->route->body == SBX_BODY_PROXY && sbx_route_port_begin (r, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  r->refused = 0;
}

static void
take_body (struct sbx_req *r, const char *data, size_t len)
{
  sbx_error_t *err = NULL;

  if (r->responded || r->refused)
    return; /* an early answer was queued; the rest is discarded */
  switch (r->route->body)
    {
    case SBX_BODY_E2B_FILES:
      sbx_e2b_files_body (r, data, len);
      break;
    case SBX_BODY_UPLOAD:
      if (r->upload_open && r->upload_err == NULL
          && sbx_host_fs_upload_write (&r->up, data, len, &err) < 0)
        {
          r->upload_err = err;
          sbx_host_fs_upload_abort (&r->up);
          r->upload_open = 0;
        }
      else if (r->upload_open && r->upload_err == NULL)
        {
          EVP_DigestUpdate (r->audit_sha, data, len);
          r->audit_size += len;
        }
      break;
    case SBX_BODY_PROXY:
      sbx_proxy_body (r, data, len);
      break;
    case SBX_BODY_TEMPLATE:
      sbx_templates_upload_body (r, data, len);
      break;
    case SBX_BODY_SECRET:
      /* Our copy is wiped whenever it moves or goes (util/buf.h), and so
         is libmicrohttpd's, once consumed: nothing of the value stays in
         its connection's read buffer for the next request to overwrite
         some day. */
      r->body.wipe = 1;
      if (r->body.len + len > SBX_JSON_BODY_MAX)
        r->body_too_large = 1;
      else
        sbx_buf_append (&r->body, data, len);
      explicit_bzero ((char *) (uintptr_t) data, len);
      break;
    case SBX_BODY_JSON:
    case SBX_BODY_RAW:
    case SBX_BODY_NONE:
      if (r->body.len + len > SBX_JSON_BODY_MAX)
        r->body_too_large = 1;
      else if (r->route->body != SBX_BODY_NONE)
        sbx_buf_append (&r->body, data, len);
      break;
    default:
      break;
    }
}

static enum MHD_Result
on_request (void *cls, struct MHD_Connection *c, const char *url, const char *method,
            const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
  struct listener *l = cls;
  struct sbx_req *r = *con_cls;

  (void) version;
  if (r == NULL || !r->begun)
    {
      if (r == NULL)
        {
          /* uri_log found no memory for it */
          r = calloc (1, sizeof *r);
          if (r == NULL)
            return MHD_NO;
          r->conn = c;
          *con_cls = r;
        }
      r->begun = 1;
      r->method = method;
      r->http_version = version;
      sbx_json_alloc_reset (); /* a note left by this thread's last request */
      begin_request (r, l, url, method);
      r->defer_replies = 0;
      return MHD_YES;
    }
  if (*upload_data_size > 0)
    {
      take_body (r, upload_data, *upload_data_size);
      *upload_data_size = 0;
      return MHD_YES;
    }
  if (r->deferred)
    {
      /* Refused while the request was not complete yet (see
         sbx_reply_response): still ours, for the next call; a few times,
         not forever (no memory to queue it is refused the same way). */
      enum MHD_Result ok = MHD_queue_response (r->conn, r->deferred_status, r->deferred);
      if (ok != MHD_YES && ++r->deferred_tries < 8)
        return MHD_YES;
      if (ok != MHD_YES)
        sbx_debug ("queue response %u failed", r->deferred_status);
      MHD_destroy_response (r->deferred);
      r->deferred = NULL;
      return ok;
    }
  if (r->responded)
    return r->queue_failed ? MHD_NO : MHD_YES;
  if (r->refused)
    return MHD_NO; /* refused, and no memory to say so */
  sbx_json_alloc_reset ();
  if (r->body_too_large)
    reply_error_kind (r, 413, "too_large", "request body larger than 1 MiB");
  else
    {
      r->route->handler (r);
      if (!r->responded && r->out_of_memory)
        reply_out_of_memory (r); /* once more: some memory may be back */
      else if (!r->responded)
        reply_error_kind (r, 500, "internal", "the handler gave no answer");
    }
  /* No answer could be made or queued (out of memory): close the
     connection, the one thing left to tell the client. */
  return r->responded && !r->queue_failed ? MHD_YES : MHD_NO;
}

/* libmicrohttpd's first call for a request, with the URI as the client
   sent it (before unescaping, with the query): the request's state starts
   here, so that the port proxy can send that URI on unchanged. */
static void *
uri_log (void *cls, const char *uri, struct MHD_Connection *c)
{
  struct sbx_req *r = calloc (1, sizeof *r);

  (void) cls;
  if (r == NULL)
    return NULL;
  r->conn = c;
  r->raw_uri = strdup (uri); /* NULL: no proxying (begin_request routes as usual) */
  return r;
}

static void __attribute__ ((format (printf, 2, 0)))
mhd_log (void *cls, const char *fmt, va_list ap)
{
  char line[512];

  (void) cls;
  vsnprintf (line, sizeof line, fmt, ap);
  line[strcspn (line, "\n")] = '\0';
  sbx_debug ("http: %s", line);
}

/* ---- listeners --------------------------------------------------------- */

static int
listen_unix (const char *state_dir, long socket_gid, sbx_error_t **err)
{
  struct sockaddr_un sa;
  int fd;
  mode_t old;

  if ((size_t) snprintf (socket_path, sizeof socket_path, "%s/sbx.sock", state_dir)
      >= sizeof sa.sun_path)
    return sbx_err (err, SBX_E_INVALID, "state directory path too long for a unix socket");
  memset (&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy (sa.sun_path, socket_path, strlen (socket_path) + 1);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return sbx_err_sys (err, errno, "socket");
  unlink (socket_path);
  /* 0600 from birth: whoever can connect is the administrator. */
  old = umask (0177);
  if (bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
    {
      int e = errno;
      umask (old);
      close (fd);
      return sbx_err_sys (err, e, "bind `%s`", socket_path);
    }
  umask (old);
  /* --socket-group: its members connect as the administrator does; the
     group is set before the mode opens it, so nobody else ever can. */
  if ((socket_gid >= 0
       && (chown (socket_path, (uid_t) -1, (gid_t) socket_gid) < 0 || chmod (socket_path, 0660) < 0))
      || (socket_gid < 0 && chmod (socket_path, 0600) < 0) || listen (fd, 512) < 0)
    {
      int e = errno;
      close (fd);
      return sbx_err_sys (err, e, "listen `%s`", socket_path);
    }
  return fd;
}

static int
listen_tcp (const char *spec, sbx_error_t **err)
{
  char host[256], *colon;
  struct addrinfo hints, *res = NULL;
  int fd, one = 1, rc;

  if (strlen (spec) >= sizeof host)
    return sbx_err (err, SBX_E_INVALID, "--listen `%s` is too long", spec);
  snprintf (host, sizeof host, "%s", spec);
  colon = strrchr (host, ':');
  if (colon == NULL || colon[1] == '\0')
    return sbx_err (err, SBX_E_INVALID, "--listen wants HOST:PORT, not `%s`", spec);
  *colon = '\0';
  if (host[0] == '[' && colon > host + 1 && colon[-1] == ']')
    {
      colon[-1] = '\0';
      memmove (host, host + 1, strlen (host));
    }
  memset (&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  rc = getaddrinfo (host[0] ? host : NULL, colon + 1, &hints, &res);
  if (rc != 0)
    return sbx_err (err, SBX_E_INVALID, "--listen `%s`: %s", spec, gai_strerror (rc));
  fd = socket (res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    {
      freeaddrinfo (res);
      return sbx_err_sys (err, errno, "socket");
    }
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind (fd, res->ai_addr, res->ai_addrlen) < 0 || listen (fd, 512) < 0)
    {
      int e = errno;
      freeaddrinfo (res);
      close (fd);
      return sbx_err_sys (err, e, "listen on `%s`", spec);
    }
  freeaddrinfo (res);
  return fd;
}

static int
start_mhd (struct listener *l, sbx_error_t **err)
{
  /* MHD_ALLOW_UPGRADE: WebSockets through the port proxy (proxy.c). */
  l->mhd = MHD_start_daemon (MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD
                                 | MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE,
                             0, NULL, NULL, on_request, l, MHD_OPTION_LISTEN_SOCKET, l->fd,
                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                             MHD_OPTION_CONNECTION_LIMIT, (unsigned) CONNECTION_LIMIT,
                             /* One address cannot take every connection
                                (and thread) before a key is even checked;
                                meaningless on the unix socket. */
                             MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                             (unsigned) (l->admin ? 0 : PER_IP_CONNECTION_LIMIT),
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) IDLE_TIMEOUT_S,
                             MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                             MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                             MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL,
                             MHD_OPTION_THREAD_STACK_SIZE, (size_t) (512 * 1024),
                             MHD_OPTION_END);
  if (l->mhd == NULL)
    {
      /* MHD closes the socket on some of its failure paths (a thread it
         cannot start) and not on others: ours no longer, whichever it
         was, so that no later close can hit a number reused since. */
      l->fd = -1;
      return sbx_err (err, SBX_E_SYSTEM, "cannot start the HTTP server");
    }
  return 0;
}

int
sbx_server_listen (const char *state_dir, const char *listen, long socket_gid, int fds[2],
                   sbx_error_t **err)
{
  fds[0] = listen_unix (state_dir, socket_gid, err);
  fds[1] = -1;
  if (fds[0] < 0)
    return -1;
  if (listen && listen[0])
    {
      fds[1] = listen_tcp (listen, err);
      if (fds[1] < 0)
        {
          close (fds[0]);
          fds[0] = -1;
          return -1;
        }
    }
  return 0;
}

int
sbx_server_start (const char *state_dir, const char *listen, const int fds[2], sbx_error_t **err)
{
  snprintf (socket_path, sizeof socket_path, "%s/sbx.sock", state_dir);
  unix_listener.fd = fds[0];
  if (start_mhd (&unix_listener, err) < 0)
    return -1;
  sbx_info ("listening on unix:%s", socket_path);
  if (fds[1] >= 0)
    {
      tcp_listener.fd = fds[1];
      if (start_mhd (&tcp_listener, err) < 0)
        {
          sbx_server_stop ();
          return -1;
        }
      sbx_info ("listening on http://%s (API keys required)", listen);
    }
  return 0;
}

void
sbx_server_quiesce (void)
{
  struct listener *ls[] = {&tcp_listener, &unix_listener};
  size_t i;

  /* Stop accepting; connections already open go on until stop. */
  for (i = 0; i < 2; i++)
    if (ls[i]->mhd)
      MHD_quiesce_daemon (ls[i]->mhd);
}

void
sbx_server_stop (void)
{
  struct listener *ls[] = {&tcp_listener, &unix_listener};
  size_t i;

  sbx_proxy_stop_all ();
  for (i = 0; i < 2; i++)
    {
      if (ls[i]->mhd)
        {
          /* Quiesced, MHD leaves the listening socket to us (closed
             below); not quiesced, MHD_stop_daemon would close it too. */
          MHD_quiesce_daemon (ls[i]->mhd);
          MHD_stop_daemon (ls[i]->mhd);
          ls[i]->mhd = NULL;
        }
      if (ls[i]->fd >= 0)
        {
          close (ls[i]->fd);
          ls[i]->fd = -1;
        }
    }
  sbx_e2b_watchers_free (); /* no request can use one now */
  if (socket_path[0])
    unlink (socket_path);
}

/* ---- a server without sockets, for fuzzing ----------------------------- */

static struct listener detached_listener = {NULL, -1, 1, NULL};

struct MHD_Daemon *
sbx__server_start_detached (const struct sbx_route *table, sbx_error_t **err)
{
  /* The same callbacks as the real listeners, but no thread: the caller
     drives every step with MHD_run, so a run is one deterministic thread. */
  detached_listener.routes = table;
  detached_listener.mhd = MHD_start_daemon (
      MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, &detached_listener,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
      MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL,
      MHD_OPTION_END);
  if (detached_listener.mhd == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "cannot start the HTTP server"), NULL;
  return detached_listener.mhd;
}
