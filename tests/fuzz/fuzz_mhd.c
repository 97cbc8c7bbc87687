/* Fuzz target: raw HTTP bytes through a real libmicrohttpd daemon and the
 * daemon's real request path (server/http.c: the %00 unescaper, routing,
 * 404/405 with Allow, body limits and deferred refusals, replies), on the
 * real route table; only the handlers are replaced, because the real ones
 * need the core. Each stand-in reads the query values and parses the body
 * exactly as its route's handler does (params.c, the routes_*.c parsers)
 * and answers 200 or the parser's error. Uploads and port-proxy bodies are
 * buffered like raw bodies (the real paths open a file or a connection in
 * a sandbox); the port proxy's routing from the raw URI, its port and its
 * target checks are the real ones.
 *
 * Per input: a socketpair; the bytes are written to one end, which is then
 * shut for writing, the other end goes to MHD_add_connection, and MHD_run
 * drives the daemon (no threads) until the connection is gone
 * (FUZZ_MHD_SHOW=1 prints what came back). Checked:
 * no crash or leak, every handler call sees a matched route and a bounded
 * body, whatever comes back is HTTP, and the connection always ends.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "server/request.h"
#include "server/route_match.h"
#include "server/server.h"
#include "util/parse.h"

#define MAX_ROUTES 256

static struct sbx_route table[MAX_ROUTES];
static struct MHD_Daemon *mhd;

static int
is (const struct sbx_req *r, const char *method, const char *pattern)
{
  return strcmp (r->route->method, method) == 0 && strcmp (r->route->pattern, pattern) == 0;
}

/* What the real handler would have checked before calling the core. */
static int
parse_like_handler (struct sbx_req *r, sbx_error_t **err)
{
  json_t *body = NULL;
  int64_t ms = -1;
  int flag = 0, rc = 0;
  const char *enc = sbx_req_query (r, "encoding");

  if (r->route->body == SBX_BODY_JSON && !is (r, "POST", "v1/sandboxes/*/exec")
      && !is (r, "POST", "v1/sandboxes/*/processes") && sbx_req_json (r, &body, err) < 0)
    return -1;
  if (is (r, "POST", "v1/sandboxes"))
    {
      struct sbx_create_opts o;
      rc = sbx_create_opts_parse (body, &o, err);
    }
  else if (is (r, "POST", "v1/sandboxes/*/exec") || is (r, "POST", "v1/sandboxes/*/processes"))
    {
      struct sbx_exec_request e;
      rc = sbx_exec_request_parse (r->body.data, r->body.len, r->route->pattern[18] == 'p', &e,
                                   err);
      sbx_exec_request_free (&e);
    }
  else if (is (r, "POST", "v1/sandboxes/*/files/mkdir"))
    {
      char abs[SBX_FS_PATH_MAX];
      uint32_t mode;
      rc = sbx_mkdir_request_parse (body, abs, &mode, &flag, err);
    }
  else if (is (r, "POST", "v1/sandboxes/*/files/move"))
    {
      char abs[SBX_FS_PATH_MAX];
      const char *from, *to;
      rc = sbx_move_request_parse (body, &from, &to, abs, &flag, err);
    }
  else if (is (r, "POST", "v1/sandboxes/*/processes/*/signal"))
    rc = sbx_signal_request_parse (body, &flag, err);
  else if (is (r, "POST", "v1/sandboxes/*/processes/*/resize"))
    {
      unsigned cols, rows;
      rc = sbx_resize_request_parse (body, &cols, &rows, err);
    }
  else if (is (r, "POST", "v1/sandboxes/*/timeout"))
    {
      static const char *const allowed[] = {"timeout", NULL};
      uint64_t t = 0;
      rc = sbx_params_only (body, allowed, err) < 0 || sbx_param_duration (body, "timeout", &t, err)
           ? -1
           : 0;
    }
  else if (is (r, "POST", "v1/sandboxes/*/processes/*/stdin"))
    rc = sbx_query_bool (r, "eof", &flag, err);
  else if (is (r, "GET", "v1/sandboxes/*/processes/*/wait"))
    rc = sbx_query_duration (r, "timeout", &ms, err);
  else if (strncmp (r->route->pattern, "v1/sandboxes/*/files", 20) == 0)
    {
      const char *path = sbx_req_query (r, "path");
      char abs[SBX_FS_PATH_MAX];
      if (path && path[0])
        rc = sbx_fs_normalize (path, abs, sizeof abs, err);
      if (rc == 0)
        rc = sbx_query_bool (r, "recursive", &flag, err) < 0
                     || sbx_query_bool (r, "parents", &flag, err) < 0
                 ? -1
                 : 0;
      (void) sbx_req_query (r, "user");
      (void) sbx_req_query (r, "mode");
      (void) sbx_req_query (r, "depth");
    }
  else if (strcmp (r->route->method, "*") == 0)
    {
      /* The port proxy: routed from the raw URI (sbx_route_port_split),
         then what sbx_route_port_begin and sbx_proxy_begin check first. */
      unsigned port = 0;
      FUZZ_ASSERT (r->raw_uri != NULL && r->proxy_target != NULL && r->nsegs == 5);
      FUZZ_ASSERT (r->proxy_target >= r->raw_uri
                   && r->proxy_target <= r->raw_uri + strlen (r->raw_uri));
      FUZZ_ASSERT (r->proxy_target[0] == '\0' || r->proxy_target[0] == '/'
                   || r->proxy_target[0] == '?');
      if (!sbx_route_port_number (r->segs[4], &port))
        rc = sbx_err (err, SBX_E_INVALID, "bad port");
      else if (r->method == NULL || !sbx_route_is_token (r->method))
        rc = sbx_err (err, SBX_E_INVALID, "bad method");
      else if (r->proxy_target[0] == '/' && !sbx_route_target_ok (r->proxy_target))
        rc = sbx_err (err, SBX_E_INVALID, "bad target");
      else
        FUZZ_ASSERT (port >= 1 && port <= 65535);
    }
  if (rc == 0 && enc && strcmp (enc, "utf8") != 0 && strcmp (enc, "base64") != 0)
    rc = sbx_err (err, SBX_E_INVALID, "`encoding` must be utf8 or base64");
  json_decref (body);
  return rc;
}

static void
stand_in (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  int i;

  FUZZ_ASSERT (r->route != NULL && r->route >= table && r->route < table + MAX_ROUTES);
  FUZZ_ASSERT (sbx_route_pattern_matches (r->route->pattern, r->segs, r->nsegs));
  for (i = 0; i < r->nsegs; i++)
    FUZZ_ASSERT (r->segs[i][0] != '\0' && strchr (r->segs[i], '/') == NULL);
  FUZZ_ASSERT (!r->body_too_large && r->body.len <= SBX_JSON_BODY_MAX);
  if (r->route->body == SBX_BODY_NONE)
    FUZZ_ASSERT (r->body.len == 0);
  if (parse_like_handler (r, &err) < 0)
    {
      FUZZ_ASSERT (err != NULL);
      sbx_reply_error (r, err);
      return;
    }
  FUZZ_ASSERT (err == NULL);
  sbx_reply_json (r, 200, json_pack ("{s:i, s:I}", "segments", r->nsegs, "body",
                                     (json_int_t) r->body.len));
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  sbx_error_t *err = NULL;
  int i;

  (void) argc;
  (void) argv;
  for (i = 0; sbx_server_routes[i].method; i++)
    {
      FUZZ_ASSERT (i < MAX_ROUTES - 1);
      table[i] = sbx_server_routes[i];
      table[i].handler = stand_in;
      if (table[i].body == SBX_BODY_UPLOAD || table[i].body == SBX_BODY_PROXY
          || table[i].body == SBX_BODY_TEMPLATE)
        table[i].body = SBX_BODY_RAW;
    }
  mhd = sbx__server_start_detached (table, &err);
  if (mhd == NULL)
    {
      fprintf (stderr, "fuzz_mhd: %s\n", err->msg);
      abort ();
    }
  return 0;
}

static unsigned
connections (void)
{
  const union MHD_DaemonInfo *info = MHD_get_daemon_info (mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

  FUZZ_ASSERT (info != NULL);
  return info->num_connections;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons (40000),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK)};
  static char out[1 << 16];
  size_t got = 0, sent = 0;
  int sv[2], i, client_open = 1;

  FUZZ_ASSERT (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  FUZZ_ASSERT (fcntl (sv[0], F_SETFL, O_NONBLOCK) == 0);
  if (MHD_add_connection (mhd, sv[1], (const struct sockaddr *) &peer, sizeof peer) != MHD_YES)
    abort ();
  for (i = 0; i < 20000 && connections () > 0; i++)
    {
      ssize_t n;
      if (sent < size)
        {
          n = write (sv[0], data + sent, size - sent);
          if (n > 0)
            sent += (size_t) n;
          if (sent == size)
            shutdown (sv[0], SHUT_WR); /* the request ends here */
        }
      else if (size == 0 && i == 0)
        shutdown (sv[0], SHUT_WR);
      MHD_run (mhd);
      while ((n = read (sv[0], out + (got < sizeof out ? got : 0),
                        got < sizeof out ? sizeof out - got : sizeof out))
             > 0)
        got += (size_t) n;
      /* A reply MHD cannot finish (the client never reads it all) must
         still end: give up on the client after a while. */
      if (i == 10000 && client_open)
        {
          close (sv[0]);
          client_open = 0;
        }
    }
  if (connections () > 0)
    {
      fprintf (stderr, "the connection never ended\n");
      abort ();
    }
  if (client_open)
    close (sv[0]);
  if (getenv ("FUZZ_MHD_SHOW"))
    fprintf (stderr, "---- %zu bytes back:\n%.*s\n", got, (int) (got < sizeof out ? got : sizeof out),
             out);
  if (got >= 8)
    FUZZ_ASSERT (memcmp (out, "HTTP/1.", 7) == 0);
  return 0;
}
