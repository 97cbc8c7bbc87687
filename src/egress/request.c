/* sbx: the egress proxy's request parser.
 *
 * Strict and bounded rather than general: the head is at most
 * SBX_EGRESS_HEAD_MAX bytes (the caller reads no more), the request line
 * is `METHOD SP target SP HTTP/1.x`, header lines are `name: value` with
 * no folding and no control bytes. Two forms only: `CONNECT host:port`
 * (the port is required) and an absolute `http://` URI for any other
 * method. Anything else is a 400 with its reason. A forwarded request
 * gets an origin-form target, the Host of its URI, no hop-by-hop headers
 * (nor those its Connection header names), no Proxy-Authorization, and
 * `Connection: close`: one request per upstream connection, so every
 * request's destination is one the policy was asked about.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress.h"
#include "util/buf.h"

#define MAX_HEADERS 100

static int
is_tchar (unsigned char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
         || strchr ("!#$%&'*+-.^_`|~", c) != NULL;
}

static int __attribute__ ((format (printf, 3, 4)))
bad (char *why, size_t cap, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (why, cap, fmt, ap);
  va_end (ap);
  return -1;
}

/* host[:port] or [v6][:port] into r; port required unless def_port. */
static int
authority (const char *s, size_t n, uint16_t def_port, struct sbx_egress_req *r, char *why,
           size_t cap)
{
  const char *host = s, *p = NULL;
  size_t hlen;
  unsigned long port = 0;
  size_t i;

  if (n == 0)
    return bad (why, cap, "no host");
  if (memchr (s, '@', n) != NULL)
    return bad (why, cap, "credentials in the URL are not supported");
  if (s[0] == '[')
    {
      const char *close = memchr (s, ']', n);
      if (close == NULL)
        return bad (why, cap, "unterminated `[` in the host");
      host = s + 1;
      hlen = (size_t) (close - host);
      if ((size_t) (close + 1 - s) < n)
        {
          if (close[1] != ':')
            return bad (why, cap, "junk after `]` in the host");
          p = close + 2;
        }
    }
  else
    {
      const char *colon = memchr (s, ':', n);
      hlen = colon ? (size_t) (colon - s) : n;
      if (colon)
        p = colon + 1;
    }
  if (hlen == 0 || hlen >= sizeof r->host)
    return bad (why, cap, "the host is empty or too long");
  if (p != NULL)
    {
      size_t plen = (size_t) (s + n - p);
      if (plen == 0 || plen > 5)
        return bad (why, cap, "a bad port");
      for (i = 0; i < plen; i++)
        {
          if (p[i] < '0' || p[i] > '9')
            return bad (why, cap, "a bad port");
          port = port * 10 + (unsigned long) (p[i] - '0');
        }
      if (port == 0 || port > 65535)
        return bad (why, cap, "port out of range");
    }
  else if (def_port == 0)
    return bad (why, cap, "CONNECT needs host:port");
  else
    port = def_port;
  memcpy (r->host, host, hlen);
  r->host[hlen] = '\0';
  if (strlen (r->host) != hlen)
    return bad (why, cap, "a NUL in the host");
  r->port = (uint16_t) port;
  return 0;
}

/* Is name (len) among the comma-separated tokens of list? */
static int
listed (const char *list, size_t llen, const char *name, size_t nlen)
{
  size_t i = 0;

  while (i < llen)
    {
      size_t start, end;
      while (i < llen && (list[i] == ' ' || list[i] == '\t' || list[i] == ','))
        i++;
      start = i;
      while (i < llen && list[i] != ',')
        i++;
      end = i;
      while (end > start && (list[end - 1] == ' ' || list[end - 1] == '\t'))
        end--;
      if (end - start == nlen && strncasecmp (list + start, name, nlen) == 0)
        return 1;
    }
  return 0;
}

static int
hop_by_hop (const char *name, size_t n)
{
  static const char *const names[]
      = {"connection", "keep-alive", "proxy-connection", "proxy-authorization",
         "proxy-authenticate", "te", "trailer", "upgrade", "host"};
  size_t i;

  for (i = 0; i < sizeof names / sizeof *names; i++)
    if (strlen (names[i]) == n && strncasecmp (names[i], name, n) == 0)
      return 1;
  return 0;
}

struct line
{
  const char *name, *value;
  size_t nlen, vlen;
};

int
sbx_egress_parse (const char *head, size_t len, struct sbx_egress_req *r, char *why, size_t cap)
{
  struct line hdr[MAX_HEADERS];
  const char *p = head, *end = head + len, *eol, *sp1, *sp2, *target;
  const char *conn_list = NULL;
  size_t nh = 0, i, tlen, conn_len = 0, mlen;
  int has_cl = 0, has_te = 0;
  struct sbx_buf b = SBX_BUF_INIT;

  memset (r, 0, sizeof *r);
  if (len < 4 || memcmp (end - 4, "\r\n\r\n", 4) != 0)
    return bad (why, cap, "the request head is incomplete");
  if (memchr (head, '\0', len) != NULL)
    return bad (why, cap, "a NUL byte in the request head");
  eol = memmem (p, (size_t) (end - p), "\r\n", 2);
  sp1 = memchr (p, ' ', (size_t) (eol - p));
  if (sp1 == NULL)
    return bad (why, cap, "the request line is not `METHOD TARGET HTTP/1.1`");
  sp2 = memchr (sp1 + 1, ' ', (size_t) (eol - sp1 - 1));
  if (sp2 == NULL || (size_t) (eol - sp2 - 1) != 8 || memcmp (sp2 + 1, "HTTP/1.", 7) != 0
      || (sp2[8] != '0' && sp2[8] != '1'))
    return bad (why, cap, "the request line is not `METHOD TARGET HTTP/1.1`");
  mlen = (size_t) (sp1 - p);
  if (mlen == 0 || mlen > 32)
    return bad (why, cap, "a bad method");
  for (i = 0; i < mlen; i++)
    if (!is_tchar ((unsigned char) p[i]))
      return bad (why, cap, "a bad method");
  target = sp1 + 1;
  tlen = (size_t) (sp2 - target);
  if (tlen == 0)
    return bad (why, cap, "an empty target");
  for (i = 0; i < tlen; i++)
    if ((unsigned char) target[i] <= 0x20 || (unsigned char) target[i] >= 0x7f)
      return bad (why, cap, "a control or non-ASCII byte in the target");
  /* Headers. */
  p = eol + 2;
  while (p < end - 2)
    {
      const char *colon, *v, *ve;
      eol = memmem (p, (size_t) (end - p), "\r\n", 2);
      if (p[0] == ' ' || p[0] == '\t')
        return bad (why, cap, "folded header lines are not accepted");
      if (nh == MAX_HEADERS)
        return bad (why, cap, "more than %d header lines", MAX_HEADERS);
      colon = memchr (p, ':', (size_t) (eol - p));
      if (colon == NULL || colon == p)
        return bad (why, cap, "a header line without a name");
      for (i = 0; i < (size_t) (colon - p); i++)
        if (!is_tchar ((unsigned char) p[i]))
          return bad (why, cap, "a bad header name");
      v = colon + 1;
      ve = eol;
      while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
      while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
      for (i = 0; i < (size_t) (ve - v); i++)
        if (((unsigned char) v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
          return bad (why, cap, "a control byte in a header value");
      hdr[nh].name = p;
      hdr[nh].nlen = (size_t) (colon - p);
      hdr[nh].value = v;
      hdr[nh].vlen = (size_t) (ve - v);
      if (hdr[nh].nlen == 10 && strncasecmp (p, "connection", 10) == 0)
        {
          if (conn_list != NULL)
            return bad (why, cap, "two Connection headers");
          conn_list = v;
          conn_len = hdr[nh].vlen;
        }
      if (hdr[nh].nlen == 14 && strncasecmp (p, "content-length", 14) == 0)
        has_cl = 1;
      if (hdr[nh].nlen == 17 && strncasecmp (p, "transfer-encoding", 17) == 0)
        has_te = 1;
      nh++;
      p = eol + 2;
    }
  if (mlen == 7 && memcmp (head, "CONNECT", 7) == 0)
    {
      r->method = SBX_EGRESS_CONNECT;
      return authority (target, tlen, 0, r, why, cap);
    }
  /* Absolute form, http only: https goes through CONNECT. */
  if (tlen < 7 || strncasecmp (target, "http://", 7) != 0)
    {
      if (tlen >= 8 && strncasecmp (target, "https://", 8) == 0)
        return bad (why, cap, "https:// URLs go through CONNECT");
      return bad (why, cap, "a proxy request needs an absolute http:// URL");
    }
  {
    const char *auth = target + 7, *path;
    size_t alen;

    path = auth;
    while (path < target + tlen && *path != '/' && *path != '?' && *path != '#')
      path++;
    alen = (size_t) (path - auth);
    if (authority (auth, alen, 80, r, why, cap) < 0)
      return -1;
    if (has_cl && has_te)
      return bad (why, cap, "both Content-Length and Transfer-Encoding");
    r->method = SBX_EGRESS_FORWARD;
    sbx_buf_append (&b, head, mlen);
    sbx_buf_append (&b, " ", 1);
    if (path == target + tlen || *path != '/')
      sbx_buf_append (&b, "/", 1);
    if (path < target + tlen)
      {
        const char *frag = memchr (path, '#', (size_t) (target + tlen - path));
        size_t plen = (size_t) ((frag ? frag : target + tlen) - path);
        sbx_buf_append (&b, path, plen);
      }
    sbx_buf_printf (&b, " HTTP/1.1\r\nHost: %.*s\r\n", (int) alen, auth);
    for (i = 0; i < nh; i++)
      {
        if (hop_by_hop (hdr[i].name, hdr[i].nlen)
            || (conn_list && listed (conn_list, conn_len, hdr[i].name, hdr[i].nlen)))
          continue;
        sbx_buf_append (&b, hdr[i].name, hdr[i].nlen);
        sbx_buf_append (&b, ": ", 2);
        sbx_buf_append (&b, hdr[i].value, hdr[i].vlen);
        sbx_buf_append (&b, "\r\n", 2);
      }
    sbx_buf_append (&b, "Connection: close\r\n\r\n", 21);
    if (b.failed)
      {
        sbx_buf_free (&b);
        return bad (why, cap, "out of memory");
      }
    r->head_len = b.len;
    r->head = sbx_buf_steal (&b);
  }
  return 0;
}
