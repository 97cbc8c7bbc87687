/* Unit tests for src/server/route_match.c: what the server decides from the
 * request line and headers before any handler runs, on the real route
 * table. (tests/fuzz/fuzz_http.c checks the same functions on arbitrary
 * input; these are the cases worth naming.)
 */
#include "server/route_match.h"

#include "tap.h"

/* Decode url's path the way MHD hands it to us, split and look it up:
   the status (0, 404, 405, or -1 for a refused URL), the route, the Allow
   list. */
static int
route (const char *method, const char *url, const struct sbx_route **found, char *allow)
{
  char decoded[2048], path[1024], *segs[SBX_MAX_SEGS];
  int had_nul = 0, nsegs;

  snprintf (decoded, sizeof decoded, "%s", url);
  sbx_route_unescape (decoded, &had_nul);
  if (had_nul || sbx_route_split (decoded, path, sizeof path, segs, SBX_MAX_SEGS, &nsegs) < 0)
    return -1;
  allow[0] = '\0';
  *found = NULL;
  return sbx_route_find (sbx_server_routes, segs, nsegs, method, found, allow, 64);
}

static int
test_routes_found (void)
{
  const struct sbx_route *r;
  char allow[64];

  CHECK (route ("GET", "/healthz", &r, allow) == 0 && r->handler == sbx_route_healthz);
  CHECK (route ("DELETE", "/v1/sandboxes/abc", &r, allow) == 0
         && r->handler == sbx_route_sandbox_kill);
  CHECK (route ("DELETE", "//v1//sandboxes/abc/files/", &r, allow) == 0
         && r->handler == sbx_route_file_delete);
  CHECK (route ("POST", "/v1/sandboxes/a%62c/exec", &r, allow) == 0
         && r->handler == sbx_route_exec);
  return 0;
}

static int
test_404_and_405 (void)
{
  const struct sbx_route *r;
  char allow[64];

  CHECK (route ("GET", "/v1/nothing", &r, allow) == 404 && allow[0] == '\0' && r == NULL);
  CHECK (route ("GET", "/v1/sandboxes/a/b/c/d/e/f/g/h/i", &r, allow) == -1); /* 9 segments */
  CHECK (route ("PUT", "/v1/sandboxes/abc", &r, allow) == 405);
  CHECK_STR (allow, "GET, DELETE");
  CHECK (route ("GET", "/v1/sandboxes/abc/files/move", &r, allow) == 405);
  CHECK_STR (allow, "POST");
  return 0;
}

/* A decoded %00 is refused; a decoded %3F is part of its segment: cutting
   there routed DELETE /v1/sandboxes/ID%3F/files as a kill. */
static int
test_decoded_nul_and_question_mark (void)
{
  const struct sbx_route *r;
  char allow[64];

  CHECK (route ("DELETE", "/v1/sandboxes/abc%00/files", &r, allow) == -1);
  CHECK (route ("DELETE", "/v1/sandboxes/abc%3F/files", &r, allow) == 0
         && r->handler == sbx_route_file_delete);
  CHECK (route ("GET", "/healthz%3F", &r, allow) == 404);
  return 0;
}

static int
test_header_values (void)
{
  const char *a = "Bearer  sbx_key", *x = "other";

  CHECK_STR (sbx_route_api_key (a, x), "sbx_key");
  CHECK_STR (sbx_route_api_key ("bEaReR k", NULL), "k");
  CHECK_STR (sbx_route_api_key ("Basic dXNlcg==", "  xk"), "xk");
  CHECK (sbx_route_api_key ("Bearer", NULL) == NULL);
  CHECK (sbx_route_api_key (NULL, NULL) == NULL);
  CHECK (sbx_route_content_length (NULL) == UINT64_MAX);
  CHECK (sbx_route_content_length ("42") == 42);
  return 0;
}

/* The port proxy: routed from the raw URI only, never by the table walk. */
static int
test_port_proxy_split (void)
{
  char path[64], *segs[SBX_MAX_SEGS];
  const char *target = NULL;
  const struct sbx_route *r;
  char allow[64];
  int nsegs = 0;

  CHECK (sbx_route_port_split ("/v1/sandboxes/abc/ports/8000/a%2Fb//c?x=%00", path, sizeof path,
                               segs, SBX_MAX_SEGS, &nsegs, &target)
         == 1);
  CHECK (nsegs == 5);
  CHECK_STR (segs[0], "v1");
  CHECK_STR (segs[1], "sandboxes");
  CHECK_STR (segs[2], "abc");
  CHECK_STR (segs[3], "ports");
  CHECK_STR (segs[4], "8000");
  CHECK_STR (target, "/a%2Fb//c?x=%00");
  CHECK (sbx_route_port_split ("/v1/sandboxes/abc/ports/8000", path, sizeof path, segs,
                               SBX_MAX_SEGS, &nsegs, &target)
         == 1);
  CHECK_STR (target, "");
  CHECK (sbx_route_port_split ("/v1/sandboxes/abc/ports/80?q", path, sizeof path, segs,
                               SBX_MAX_SEGS, &nsegs, &target)
         == 1);
  CHECK_STR (segs[4], "80");
  CHECK_STR (target, "?q");
  /* Deep paths are fine: only the first five segments are ours. */
  CHECK (sbx_route_port_split ("/v1/sandboxes/a/ports/1/b/c/d/e/f/g/h/i/j/k", path, sizeof path,
                               segs, SBX_MAX_SEGS, &nsegs, &target)
         == 1);
  /* Not the form: no port, empty id, another spelling, escapes where the
     route's own words are, a doubled slash, a path that does not fit. */
  CHECK (sbx_route_port_split ("/v1/sandboxes/abc/ports/", path, sizeof path, segs, SBX_MAX_SEGS,
                               &nsegs, &target)
         == 0);
  CHECK (sbx_route_port_split ("/v1/sandboxes/abc/ports", path, sizeof path, segs, SBX_MAX_SEGS,
                               &nsegs, &target)
         == 0);
  CHECK (sbx_route_port_split ("/v1/sandboxes//ports/80", path, sizeof path, segs, SBX_MAX_SEGS,
                               &nsegs, &target)
         == 0);
  CHECK (sbx_route_port_split ("/v1/sandboxes/abc/p%6Frts/80", path, sizeof path, segs,
                               SBX_MAX_SEGS, &nsegs, &target)
         == 0);
  CHECK (sbx_route_port_split ("//v1/sandboxes/abc/ports/80", path, sizeof path, segs,
                               SBX_MAX_SEGS, &nsegs, &target)
         == 0);
  CHECK (sbx_route_port_split ("/v1/sandboxes/abc/ports//80", path, sizeof path, segs,
                               SBX_MAX_SEGS, &nsegs, &target)
         == 0);
  CHECK (sbx_route_port_split ("/v1/sandboxes/abc?/ports/80", path, sizeof path, segs,
                               SBX_MAX_SEGS, &nsegs, &target)
         == 0);
  CHECK (sbx_route_port_split ("/v1/sandboxes/012345678901234567890123456789"
                               "012345678901234567890123/ports/80",
                               path, sizeof path, segs, SBX_MAX_SEGS, &nsegs, &target)
         == 0);
  /* The decoded path never reaches the proxy's entry through the table. */
  CHECK (route ("GET", "/v1/sandboxes/abc/ports/8000", &r, allow) == 404);
  CHECK (route ("*", "/v1/sandboxes/abc/ports/8000", &r, allow) == 404);
  return 0;
}

static int
test_port_proxy_values (void)
{
  unsigned port = 0;

  CHECK (sbx_route_port_number ("1", &port) == 1 && port == 1);
  CHECK (sbx_route_port_number ("8000", &port) == 1 && port == 8000);
  CHECK (sbx_route_port_number ("65535", &port) == 1 && port == 65535);
  CHECK (sbx_route_port_number ("08000", &port) == 0);
  CHECK (sbx_route_port_number ("0", &port) == 0);
  CHECK (sbx_route_port_number ("65536", &port) == 0);
  CHECK (sbx_route_port_number ("99999", &port) == 0);
  CHECK (sbx_route_port_number ("080000", &port) == 0);
  CHECK (sbx_route_port_number ("", &port) == 0);
  CHECK (sbx_route_port_number ("-1", &port) == 0);
  CHECK (sbx_route_port_number ("+80", &port) == 0);
  CHECK (sbx_route_port_number (" 80", &port) == 0);
  CHECK (sbx_route_port_number ("80a", &port) == 0);
  CHECK (sbx_route_port_number ("%38", &port) == 0);

  CHECK (sbx_route_is_token ("GET") == 1);
  CHECK (sbx_route_is_token ("X-Custom_Header.v2~!#$%&'*+^`|") == 1);
  CHECK (sbx_route_is_token ("") == 0);
  CHECK (sbx_route_is_token ("G@T") == 0);
  CHECK (sbx_route_is_token ("A B") == 0);
  CHECK (sbx_route_is_token ("A:B") == 0);
  CHECK (sbx_route_is_token ("\xc3\xa9") == 0);

  CHECK (sbx_route_target_ok ("/") == 1);
  CHECK (sbx_route_target_ok ("/a%20b?x=1&y=%00#frag") == 1);
  CHECK (sbx_route_target_ok ("") == 0);
  CHECK (sbx_route_target_ok ("?x") == 0);
  CHECK (sbx_route_target_ok ("a") == 0);
  CHECK (sbx_route_target_ok ("/a b") == 0);
  CHECK (sbx_route_target_ok ("/a\tb") == 0);
  CHECK (sbx_route_target_ok ("/a\r\nX: y") == 0);
  CHECK (sbx_route_target_ok ("/\x7f") == 0);
  CHECK (sbx_route_target_ok ("/\xc3\xa9") == 0);
  return 0;
}

int
main (void)
{
  RUN (test_routes_found);
  RUN (test_404_and_405);
  RUN (test_decoded_nul_and_question_mark);
  RUN (test_header_values);
  RUN (test_port_proxy_split);
  RUN (test_port_proxy_values);
  return tap_done ();
}
