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

int
main (void)
{
  RUN (test_routes_found);
  RUN (test_404_and_405);
  RUN (test_decoded_nul_and_question_mark);
  RUN (test_header_values);
  return tap_done ();
}
