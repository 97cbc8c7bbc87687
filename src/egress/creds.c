/* sbx: credential rules in the egress process (see egress/creds.h). */
#include "egress/creds.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"

static void
wipe_free (void *p, size_t n)
{
  if (p != NULL)
    explicit_bzero (p, n);
  free (p);
}

void
sbx_egress_creds_free (struct sbx_egress_creds *c)
{
  free (c->headers);
  free (c->swaps);
  free (c->broken);
  wipe_free (c->strings, c->strings_len);
  memset (c, 0, sizeof *c);
}

/* The next NUL-terminated string at *p (before end), or NULL. */
static const char *
next (const char **p, const char *end, size_t *len)
{
  const char *s = *p, *z;

  if (s >= end)
    return NULL;
  z = memchr (s, '\0', (size_t) (end - s));
  if (z == NULL)
    return NULL;
  *p = z + 1;
  if (len)
    *len = (size_t) (z - s);
  return s;
}

static int
fill (struct sbx_egress_cred *v, unsigned n, int pair, const char **p, const char *end)
{
  unsigned i;

  for (i = 0; i < n; i++)
    {
      sbx_error_t *err = NULL;
      v[i].pattern_text = next (p, end, NULL);
      v[i].a = v[i].pattern_text ? next (p, end, NULL) : NULL;
      v[i].b = v[i].a && !pair ? next (p, end, &v[i].blen) : NULL;
      if (v[i].a == NULL || (!pair && v[i].b == NULL) || v[i].a[0] == '\0')
        return -1;
      if (sbx_net_entry_parse (v[i].pattern_text, &v[i].pattern, &err) < 0)
        {
          sbx_error_free (err);
          return -1;
        }
      if (v[i].pattern.kind != SBX_NET_NAME && v[i].pattern.kind != SBX_NET_SUFFIX)
        return -1;
    }
  return 0;
}

int
sbx_egress_creds_parse (const char *s, size_t n, uint32_t nheaders, uint32_t nswaps,
                        uint32_t nbroken, struct sbx_egress_creds *c)
{
  const char *p, *end;

  memset (c, 0, sizeof *c);
  if (nheaders > 4096 || nswaps > 4096 || nbroken > 4096)
    return -1;
  if (nheaders + nswaps + nbroken == 0)
    return n == 0 ? 0 : -1;
  c->strings = malloc (n ? n : 1);
  c->headers = calloc (nheaders ? nheaders : 1, sizeof *c->headers);
  c->swaps = calloc (nswaps ? nswaps : 1, sizeof *c->swaps);
  c->broken = calloc (nbroken ? nbroken : 1, sizeof *c->broken);
  if (c->strings == NULL || c->headers == NULL || c->swaps == NULL || c->broken == NULL)
    goto bad;
  memcpy (c->strings, s, n);
  c->strings_len = n;
  c->nheaders = nheaders;
  c->nswaps = nswaps;
  c->nbroken = nbroken;
  p = c->strings;
  end = c->strings + n;
  if (fill (c->headers, nheaders, 0, &p, end) < 0 || fill (c->swaps, nswaps, 0, &p, end) < 0
      || fill (c->broken, nbroken, 1, &p, end) < 0 || p != end)
    goto bad;
  return 0;
bad:
  sbx_egress_creds_free (c);
  return -1;
}

static int
score (const struct sbx_net_entry *e)
{
  return (e->kind == SBX_NET_NAME ? 1000 : (int) strlen (e->name)) * 2 + (e->port ? 1 : 0);
}

static void
best_of (const struct sbx_egress_cred *v, unsigned n, const char *host, uint16_t port,
         const char **best, int *best_score)
{
  unsigned i;

  for (i = 0; i < n; i++)
    if (sbx_net_entry_matches (&v[i].pattern, host, port, NULL) && score (&v[i].pattern) > *best_score)
      {
        *best = v[i].pattern_text;
        *best_score = score (&v[i].pattern);
      }
}

const char *
sbx_egress_creds_match (const struct sbx_egress_creds *c, const char *host, uint16_t port)
{
  const char *best = NULL;
  int s = -1;

  if (host == NULL)
    return NULL;
  best_of (c->headers, c->nheaders, host, port, &best, &s);
  best_of (c->swaps, c->nswaps, host, port, &best, &s);
  best_of (c->broken, c->nbroken, host, port, &best, &s);
  return best;
}

const char *
sbx_egress_creds_broken (const struct sbx_egress_creds *c, const char *pattern)
{
  unsigned i;

  for (i = 0; pattern && i < c->nbroken; i++)
    if (strcmp (c->broken[i].pattern_text, pattern) == 0)
      return c->broken[i].a;
  return NULL;
}

/* Is the header name (n bytes) one the pattern sets? */
static int
set_by_rule (const struct sbx_egress_creds *c, const char *pattern, const char *name, size_t n)
{
  unsigned i;

  for (i = 0; i < c->nheaders; i++)
    if (strcmp (c->headers[i].pattern_text, pattern) == 0 && strlen (c->headers[i].a) == n
        && strncasecmp (c->headers[i].a, name, n) == 0)
      return 1;
  return 0;
}

/* value (n bytes) with the pattern's placeholders swapped, into b. */
static void
swap_value (struct sbx_buf *b, const struct sbx_egress_creds *c, const char *pattern,
            const char *v, size_t n)
{
  size_t i = 0;

  while (i < n)
    {
      unsigned k;
      int hit = 0;
      for (k = 0; k < c->nswaps && !hit; k++)
        {
          const struct sbx_egress_cred *s = &c->swaps[k];
          size_t pl = strlen (s->a);
          if (strcmp (s->pattern_text, pattern) == 0 && n - i >= pl
              && memcmp (v + i, s->a, pl) == 0)
            {
              sbx_buf_append (b, s->b, s->blen);
              i += pl;
              hit = 1;
            }
        }
      if (!hit)
        sbx_buf_append (b, v + i++, 1);
    }
}

/* Hop-by-hop headers of the client's connection: the upstream
   connection is the proxy's, closed after one request. */
static int
hop (const char *name, size_t n)
{
  static const char *const names[]
      = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", NULL};
  size_t i;

  for (i = 0; names[i]; i++)
    if (strlen (names[i]) == n && strncasecmp (names[i], name, n) == 0)
      return 1;
  return 0;
}

static int
tchar (unsigned char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
         || (c != '\0' && strchr ("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A header line (without CRLF) is `token ":" value` with no control byte
   but tab in the value; a request line has no control byte at all. */
static const char *
header_colon (const char *p, size_t n)
{
  const char *colon = memchr (p, ':', n);
  size_t i;

  if (colon == NULL || colon == p)
    return NULL;
  for (i = 0; p + i < colon; i++)
    if (!tchar ((unsigned char) p[i]))
      return NULL;
  for (i = (size_t) (colon - p) + 1; i < n; i++)
    if (((unsigned char) p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
      return NULL;
  return colon;
}

/* `METHOD SP target SP HTTP/1.x`: a token, a target of visible ASCII. */
static int
request_line (const char *p, size_t n)
{
  size_t i = 0, m;

  while (i < n && tchar ((unsigned char) p[i]))
    i++;
  if (i == 0 || i > 32 || i >= n || p[i] != ' ')
    return 0;
  m = ++i;
  while (i < n && (unsigned char) p[i] > 0x20 && (unsigned char) p[i] < 0x7f)
    i++;
  if (i == m || n - i != 9 || memcmp (p + i, " HTTP/1.", 8) != 0
      || (p[n - 1] != '0' && p[n - 1] != '1'))
    return 0;
  return 1;
}

int
sbx_egress_rewrite (const char *head, size_t len, const struct sbx_egress_creds *c,
                    const char *pattern, char **out, size_t *out_len)
{
  struct sbx_buf b = SBX_BUF_INIT;
  const char *p = head, *end = head + len, *eol;
  unsigned i;

  *out = NULL;
  *out_len = 0;
  if (len < 4 || memcmp (end - 4, "\r\n\r\n", 4) != 0 || memchr (head, '\0', len) != NULL)
    return -1;
  eol = memmem (p, (size_t) (end - p), "\r\n", 2);
  if (!request_line (p, (size_t) (eol - p)))
    return -1;
  sbx_buf_append (&b, p, (size_t) (eol + 2 - p));
  p = eol + 2;
  while (p < end - 2)
    {
      const char *colon;
      eol = memmem (p, (size_t) (end - p), "\r\n", 2);
      colon = header_colon (p, (size_t) (eol - p));
      if (colon == NULL)
        goto bad;
      if (!set_by_rule (c, pattern, p, (size_t) (colon - p)) && !hop (p, (size_t) (colon - p)))
        {
          sbx_buf_append (&b, p, (size_t) (colon + 1 - p));
          swap_value (&b, c, pattern, colon + 1, (size_t) (eol - colon - 1));
          sbx_buf_append (&b, "\r\n", 2);
        }
      p = eol + 2;
    }
  for (i = 0; i < c->nheaders; i++)
    if (strcmp (c->headers[i].pattern_text, pattern) == 0)
      {
        sbx_buf_append (&b, c->headers[i].a, strlen (c->headers[i].a));
        sbx_buf_append (&b, ": ", 2);
        sbx_buf_append (&b, c->headers[i].b, c->headers[i].blen);
        sbx_buf_append (&b, "\r\n", 2);
      }
  sbx_buf_append (&b, "Connection: close\r\n\r\n", 21);
  if (b.failed)
    goto bad;
  *out_len = b.len;
  *out = sbx_buf_steal (&b);
  return 0;
bad:
  if (b.data)
    explicit_bzero (b.data, b.cap);
  sbx_buf_free (&b);
  return -1;
}
