/* sbx: URL splitting, route matching and header values (see route_match.h).
 * Moved out of http.c so tests and fuzzers can call them; http.c's callbacks
 * call these. */
#include "server/route_match.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

size_t
sbx_route_unescape (char *s, int *had_nul)
{
  size_t n = MHD_http_unescape (s);

  if (strlen (s) != n)
    *had_nul = 1;
  return n;
}

int
sbx_route_split (const char *url, char *path, size_t cap, char **segs, int max_segs, int *nsegs)
{
  char *p, *save = NULL;

  if (strlen (url) >= cap)
    return -1;
  /* MHD hands us the path alone, already decoded: a '?' here came from a
     %3F and is part of a segment. Cutting there routed
     "DELETE /v1/sandboxes/ID%3F/files" as "DELETE /v1/sandboxes/ID". */
  snprintf (path, cap, "%s", url);
  *nsegs = 0;
  for (p = strtok_r (path, "/", &save); p; p = strtok_r (NULL, "/", &save))
    {
      if (*nsegs == max_segs)
        return -1;
      segs[(*nsegs)++] = p;
    }
  return 0;
}

int
sbx_route_pattern_matches (const char *pattern, char *const *segs, int nsegs)
{
  char buf[128], *p, *save = NULL;
  int i = 0;

  snprintf (buf, sizeof buf, "%s", pattern);
  for (p = strtok_r (buf, "/", &save); p; p = strtok_r (NULL, "/", &save), i++)
    {
      if (i >= nsegs)
        return 0;
      if (strcmp (p, "*") != 0 && strcmp (p, segs[i]) != 0)
        return 0;
    }
  return i == nsegs;
}

int
sbx_route_find (const struct sbx_route *table, char *const *segs, int nsegs, const char *method,
                const struct sbx_route **found, char *allow, size_t allow_cap)
{
  int i, path_known = 0;

  for (i = 0; table[i].method; i++)
    if (sbx_route_pattern_matches (table[i].pattern, segs, nsegs))
      {
        size_t n = strlen (allow);
        path_known = 1;
        if (strcmp (table[i].method, method) == 0)
          {
            *found = &table[i];
            return 0;
          }
        snprintf (allow + n, allow_cap - n, "%s%s", n ? ", " : "", table[i].method);
      }
  return path_known ? 405 : 404;
}

uint64_t
sbx_route_content_length (const char *value)
{
  if (value == NULL)
    return UINT64_MAX;
  return strtoull (value, NULL, 10);
}

const char *
sbx_route_api_key (const char *authorization, const char *x_api_key)
{
  const char *key = NULL;

  if (authorization && strncasecmp (authorization, "Bearer ", 7) == 0)
    key = authorization + 7;
  if (key == NULL)
    key = x_api_key;
  if (key == NULL)
    return NULL;
  while (*key == ' ')
    key++;
  return key;
}
