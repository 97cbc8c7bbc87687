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
    if (strcmp (table[i].method, "*") != 0
        && sbx_route_pattern_matches (table[i].pattern, segs, nsegs))
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

/* Length of the segment at s: up to '/', '?' or the end. */
static size_t
raw_segment (const char *s)
{
  return strcspn (s, "/?");
}

int
sbx_route_port_split (const char *raw, char *path, size_t cap, char **segs, int max_segs,
                      int *nsegs, const char **target)
{
  static const char prefix[] = "/v1/sandboxes/";
  const char *id, *port;
  size_t id_len, port_len, need;

  if (max_segs < 5 || strncmp (raw, prefix, sizeof prefix - 1) != 0)
    return 0;
  id = raw + sizeof prefix - 1;
  id_len = raw_segment (id);
  if (id_len == 0 || strncmp (id + id_len, "/ports/", 7) != 0)
    return 0;
  port = id + id_len + 7;
  port_len = raw_segment (port);
  if (port_len == 0)
    return 0;
  need = sizeof "v1" + sizeof "sandboxes" + id_len + 1 + sizeof "ports" + port_len + 1;
  if (need > cap)
    return 0;
  segs[0] = path;
  memcpy (segs[0], "v1", sizeof "v1");
  segs[1] = segs[0] + sizeof "v1";
  memcpy (segs[1], "sandboxes", sizeof "sandboxes");
  segs[2] = segs[1] + sizeof "sandboxes";
  memcpy (segs[2], id, id_len);
  segs[2][id_len] = '\0';
  segs[3] = segs[2] + id_len + 1;
  memcpy (segs[3], "ports", sizeof "ports");
  segs[4] = segs[3] + sizeof "ports";
  memcpy (segs[4], port, port_len);
  segs[4][port_len] = '\0';
  *nsegs = 5;
  *target = port + port_len;
  return 1;
}

int
sbx_route_port_number (const char *s, unsigned *port)
{
  unsigned v = 0;
  size_t i, n = strlen (s);

  /* No leading zero: one port, one spelling (as the E2B router wants). */
  if (n == 0 || n > 5 || s[0] == '0')
    return 0;
  for (i = 0; i < n; i++)
    {
      if (s[i] < '0' || s[i] > '9')
        return 0;
      v = v * 10 + (unsigned) (s[i] - '0');
    }
  if (v == 0 || v > 65535)
    return 0;
  *port = v;
  return 1;
}

int
sbx_route_is_token (const char *s)
{
  static const char special[] = "!#$%&'*+-.^_`|~";

  if (*s == '\0')
    return 0;
  for (; *s; s++)
    {
      unsigned char c = (unsigned char) *s;
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
            || (c != '\0' && strchr (special, c) != NULL)))
        return 0;
    }
  return 1;
}

int
sbx_route_target_ok (const char *s)
{
  if (s[0] != '/')
    return 0;
  for (; *s; s++)
    if ((unsigned char) *s <= 0x20 || (unsigned char) *s >= 0x7f)
      return 0;
  return 1;
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
