/* Fuzz target: what the HTTP server decides from a request line and its
 * headers, before any handler runs (server/route_match.c, against the
 * daemon's real route table).
 *
 * Input lines: METHOD, URL (raw, percent-encoded, with any query),
 * Authorization, X-API-Key, Content-Length; a missing line is a missing
 * header. The URL's path goes through the unescaper MHD calls (with the
 * %00 check), the splitter and the route lookup; each step is checked
 * against a plain reference written here:
 *   - a decoded NUL is always reported;
 *   - the segments routed on are exactly the decoded path's '/'-separated
 *     parts: nothing decoded (%3F, %00) may cut the path short and route
 *     the request somewhere else;
 *   - the route found has the request's method and a pattern matching the
 *     segments; a 405 lists exactly the methods of the matching patterns,
 *     a 404 none;
 *   - the API key comes from "Bearer " or X-API-Key, without leading spaces;
 *   - the port proxy's raw-URI split gives back exactly the URL it was
 *     given ("/v1/sandboxes/" ID "/ports/" PORT target), with non-empty
 *     segments free of '/' and '?', and a target that is empty or starts
 *     with '/' or '?'; its table entry (method "*") is never found by the
 *     table walk.
 */
#include <strings.h>

#include "fuzz.h"
#include "server/route_match.h"

#define LINE_MAX_ 8192

static char method[LINE_MAX_], url[LINE_MAX_], auth[LINE_MAX_], xkey[LINE_MAX_], cl[LINE_MAX_];

/* Reference: the decoded path's non-empty '/'-separated parts. */
static int
ref_parts (const char *s, size_t n, char parts[][LINE_MAX_], int max)
{
  int k = 0;
  size_t i = 0;

  while (i < n)
    {
      size_t j = i;
      while (j < n && s[j] != '/')
        j++;
      if (j > i)
        {
          if (k == max)
            return -1;
          memcpy (parts[k], s + i, j - i);
          parts[k][j - i] = '\0';
          k++;
        }
      i = j + 1;
    }
  return k;
}

static int
ref_matches (const char *pattern, char *const *segs, int nsegs)
{
  char buf[128], *save = NULL, *p;
  int i = 0;

  snprintf (buf, sizeof buf, "%s", pattern);
  for (p = strtok_r (buf, "/", &save); p; p = strtok_r (NULL, "/", &save))
    {
      if (i >= nsegs || (strcmp (p, "*") != 0 && strcmp (p, segs[i]) != 0))
        return 0;
      i++;
    }
  return i == nsegs;
}

static void
check_routing (void)
{
  static char parts[SBX_MAX_SEGS + 1][LINE_MAX_];
  char decoded[LINE_MAX_], path[1024], allow[64], want_allow[256];
  char *segs[SBX_MAX_SEGS], *q;
  const struct sbx_route *found = NULL;
  int had_nul = 0, nsegs = -1, k, rc, i;
  size_t n;

  /* MHD cuts the query off at the first '?' on the wire, then unescapes
     the path alone. */
  snprintf (decoded, sizeof decoded, "%s", url);
  q = strchr (decoded, '?');
  if (q)
    *q = '\0';
  n = sbx_route_unescape (decoded, &had_nul);
  FUZZ_ASSERT (n <= strlen (url));
  FUZZ_ASSERT (had_nul == (memchr (decoded, '\0', n) != NULL));
  if (had_nul)
    return; /* refused with a 400 */
  if (sbx_route_split (decoded, path, sizeof path, segs, SBX_MAX_SEGS, &nsegs) < 0)
    {
      /* Only for a path too long or with too many segments. */
      FUZZ_ASSERT (n >= sizeof path || ref_parts (decoded, n, parts, SBX_MAX_SEGS) < 0);
      return;
    }
  k = ref_parts (decoded, n, parts, SBX_MAX_SEGS);
  if (k != nsegs)
    {
      fprintf (stderr, "path `%s` routed as %d segments, has %d\n", decoded, nsegs, k);
      abort ();
    }
  for (i = 0; i < nsegs; i++)
    {
      FUZZ_ASSERT (segs[i] >= path && segs[i] < path + sizeof path);
      if (strcmp (segs[i], parts[i]) != 0)
        {
          fprintf (stderr, "path `%s`: segment %d is `%s`, not `%s`\n", decoded, i, segs[i],
                   parts[i]);
          abort ();
        }
    }

  memset (allow, 0, sizeof allow);
  rc = sbx_route_find (sbx_server_routes, segs, nsegs, method, &found, allow, sizeof allow);
  want_allow[0] = '\0';
  for (i = 0; sbx_server_routes[i].method; i++)
    if (strcmp (sbx_server_routes[i].method, "*") != 0
        && ref_matches (sbx_server_routes[i].pattern, segs, nsegs))
      {
        if (strcmp (sbx_server_routes[i].method, method) == 0)
          break;
        snprintf (want_allow + strlen (want_allow), sizeof want_allow - strlen (want_allow),
                  "%s%s", want_allow[0] ? ", " : "", sbx_server_routes[i].method);
      }
  if (sbx_server_routes[i].method)
    FUZZ_ASSERT (rc == 0 && found == &sbx_server_routes[i]);
  else if (want_allow[0])
    FUZZ_ASSERT (rc == 405 && strcmp (allow, want_allow) == 0);
  else
    FUZZ_ASSERT (rc == 404 && allow[0] == '\0');
}

static void
check_port_split (void)
{
  static char path[1024], again[LINE_MAX_ + 64];
  char *segs[SBX_MAX_SEGS];
  const char *target = NULL;
  int nsegs = 0, i;

  if (sbx_route_port_split (url, path, sizeof path, segs, SBX_MAX_SEGS, &nsegs, &target) != 1)
    return;
  FUZZ_ASSERT (nsegs == 5);
  for (i = 0; i < 5; i++)
    FUZZ_ASSERT (segs[i][0] != '\0' && strpbrk (segs[i], "/?") == NULL
                 && segs[i] >= path && segs[i] < path + sizeof path);
  FUZZ_ASSERT (strcmp (segs[0], "v1") == 0 && strcmp (segs[1], "sandboxes") == 0
               && strcmp (segs[3], "ports") == 0);
  FUZZ_ASSERT (target >= url && target <= url + strlen (url));
  FUZZ_ASSERT (target[0] == '\0' || target[0] == '/' || target[0] == '?');
  snprintf (again, sizeof again, "/v1/sandboxes/%s/ports/%s%s", segs[2], segs[4], target);
  FUZZ_ASSERT (strcmp (again, url) == 0);
}

static void
check_headers (int have_auth, int have_xkey, int have_cl)
{
  const char *a = have_auth ? auth : NULL, *x = have_xkey ? xkey : NULL;
  const char *key = sbx_route_api_key (a, x), *want;
  uint64_t len = sbx_route_content_length (have_cl ? cl : NULL);

  if (a && strncasecmp (a, "Bearer ", 7) == 0)
    want = a + 7;
  else
    want = x;
  if (want)
    while (*want == ' ')
      want++;
  FUZZ_ASSERT (key == want);
  FUZZ_ASSERT (have_cl ? len == strtoull (cl, NULL, 10) : len == UINT64_MAX);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct fuzz_lines in = {data, size};
  int have_auth, have_xkey, have_cl;

  if (!fuzz_line (&in, method, sizeof method) || !fuzz_line (&in, url, sizeof url))
    return 0;
  have_auth = fuzz_line (&in, auth, sizeof auth);
  have_xkey = fuzz_line (&in, xkey, sizeof xkey);
  have_cl = fuzz_line (&in, cl, sizeof cl);
  check_routing ();
  check_port_split ();
  check_headers (have_auth, have_xkey, have_cl);
  return 0;
}
