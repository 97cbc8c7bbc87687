/* sbx: egress policy entries, matching and the address classifier (see
 * egress/policy.h). Pure functions: unit-tested in tests/unit/test_egress.c. */
#include "egress/policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static int
is_label_char (unsigned char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* A DNS name: labels of letters, digits, '-' and '_' (1..63 bytes, not
   starting or ending with '-'), at most SBX_NET_NAME_MAX bytes, not all
   digits and dots (that would be an address). Lowercased into out. */
static int
name_parse (const char *s, size_t len, char *out)
{
  size_t i, label = 0;
  int alpha = 0;

  if (len > 0 && s[len - 1] == '.')
    len--;
  if (len == 0 || len > SBX_NET_NAME_MAX)
    return -1;
  for (i = 0; i < len; i++)
    {
      unsigned char c = (unsigned char) tolower ((unsigned char) s[i]);
      if (c == '.')
        {
          if (label == 0 || out[i - 1] == '-')
            return -1;
          label = 0;
        }
      else
        {
          if (!is_label_char (c) || (label == 0 && c == '-') || ++label > 63)
            return -1;
          if (!(c >= '0' && c <= '9'))
            alpha = 1;
        }
      out[i] = (char) c;
    }
  /* label 0: an empty last label ("a.." less its one trailing dot). */
  if (label == 0 || out[len - 1] == '-' || !alpha)
    return -1;
  out[len] = '\0';
  return 0;
}

static int
addr_parse (const char *s, size_t len, struct sbx_net_addr *a)
{
  char buf[64];

  if (len == 0 || len >= sizeof buf)
    return -1;
  memcpy (buf, s, len);
  buf[len] = '\0';
  memset (a, 0, sizeof *a);
  if (inet_pton (AF_INET, buf, a->bytes) == 1)
    {
      a->family = AF_INET;
      return 0;
    }
  if (inet_pton (AF_INET6, buf, a->bytes) == 1)
    {
      a->family = AF_INET6;
      return 0;
    }
  return -1;
}

int
sbx_net_host_parse (const char *host, size_t len, char *name, struct sbx_net_addr *addr)
{
  if (addr_parse (host, len, addr) == 0)
    return 1;
  if (name_parse (host, len, name) == 0)
    return 0;
  return -1;
}

static int
port_parse (const char *s, size_t len, uint16_t *port)
{
  unsigned long v = 0;
  size_t i;

  if (len == 0 || len > 5)
    return -1;
  for (i = 0; i < len; i++)
    {
      if (s[i] < '0' || s[i] > '9')
        return -1;
      v = v * 10 + (unsigned long) (s[i] - '0');
    }
  if (v == 0 || v > 65535 || (s[0] == '0'))
    return -1;
  *port = (uint16_t) v;
  return 0;
}

int
sbx_net_entry_parse (const char *s, struct sbx_net_entry *e, sbx_error_t **err)
{
  size_t len = strlen (s), hostlen;
  const char *colon, *slash, *host = s;
  char *end;
  unsigned long bits;

  memset (e, 0, sizeof *e);
  if (len == 0)
    return sbx_err (err, SBX_E_INVALID, "an empty network entry");
  if (len > SBX_NET_ENTRY_MAX)
    return sbx_err (err, SBX_E_INVALID, "network entry is longer than %d bytes",
                    SBX_NET_ENTRY_MAX);
  if (strcmp (s, "*") == 0)
    {
      e->kind = SBX_NET_ANY;
      return 0;
    }
  /* A range. */
  slash = strchr (s, '/');
  if (slash != NULL)
    {
      if (addr_parse (s, (size_t) (slash - s), &e->addr) < 0 || slash[1] < '0' || slash[1] > '9'
          || (slash[1] == '0' && slash[2] != '\0'))
        goto bad;
      bits = strtoul (slash + 1, &end, 10);
      if (*end != '\0' || bits > (e->addr.family == AF_INET ? 32u : 128u))
        goto bad;
      e->kind = SBX_NET_ADDR;
      e->prefix = (unsigned) bits;
      /* Bits past the prefix must be zero: 10.1.2.3/8 is most likely a
         mistake, and the canonical form would not show it. */
      for (unsigned i = e->prefix; i < (e->addr.family == AF_INET ? 32u : 128u); i++)
        if (e->addr.bytes[i / 8] & (0x80 >> (i % 8)))
          return sbx_err (err, SBX_E_INVALID,
                          "network entry `%s` has bits set past its prefix length", s);
      return 0;
    }
  /* [v6] or [v6]:port */
  if (s[0] == '[')
    {
      const char *close = strchr (s, ']');
      if (close == NULL || addr_parse (s + 1, (size_t) (close - s - 1), &e->addr) < 0
          || e->addr.family != AF_INET6)
        goto bad;
      if (close[1] == ':')
        {
          if (port_parse (close + 2, strlen (close + 2), &e->port) < 0)
            goto bad;
        }
      else if (close[1] != '\0')
        goto bad;
      e->kind = SBX_NET_ADDR;
      e->prefix = 128;
      return 0;
    }
  /* A bare v6 address (two colons or more). */
  colon = strchr (s, ':');
  if (colon != NULL && strchr (colon + 1, ':') != NULL)
    {
      if (addr_parse (s, len, &e->addr) < 0 || e->addr.family != AF_INET6)
        goto bad;
      e->kind = SBX_NET_ADDR;
      e->prefix = 128;
      return 0;
    }
  hostlen = colon ? (size_t) (colon - s) : len;
  if (colon != NULL && port_parse (colon + 1, strlen (colon + 1), &e->port) < 0)
    goto bad;
  if (hostlen > 2 && host[0] == '*' && host[1] == '.')
    {
      if (name_parse (host + 2, hostlen - 2, e->name) < 0)
        goto bad;
      e->kind = SBX_NET_SUFFIX;
      return 0;
    }
  if (addr_parse (host, hostlen, &e->addr) == 0)
    {
      if (e->addr.family != AF_INET)
        goto bad;
      e->kind = SBX_NET_ADDR;
      e->prefix = 32;
      return 0;
    }
  if (name_parse (host, hostlen, e->name) == 0)
    {
      e->kind = SBX_NET_NAME;
      return 0;
    }
bad:
  return sbx_err (err, SBX_E_INVALID,
                  "network entry `%.*s` is not `*`, a host name, `*.domain`, an IP address or"
                  " a CIDR range (each optionally with `:PORT`, but ranges)",
                  (int) (len > 80 ? 80 : len), s);
}

void
sbx_net_addr_format (const struct sbx_net_addr *addr, char *out, size_t cap)
{
  if (inet_ntop (addr->family, addr->bytes, out, (socklen_t) cap) == NULL && cap > 0)
    out[0] = '\0';
}

size_t
sbx_net_entry_format (const struct sbx_net_entry *e, char *out, size_t cap)
{
  char a[INET6_ADDRSTRLEN], port[8] = "";
  int n = 0;

  if (e->port)
    snprintf (port, sizeof port, ":%u", (unsigned) e->port);
  switch (e->kind)
    {
    case SBX_NET_ANY:
      n = snprintf (out, cap, "*");
      break;
    case SBX_NET_NAME:
      n = snprintf (out, cap, "%s%s", e->name, port);
      break;
    case SBX_NET_SUFFIX:
      n = snprintf (out, cap, "*.%s%s", e->name, port);
      break;
    case SBX_NET_ADDR:
      sbx_net_addr_format (&e->addr, a, sizeof a);
      if (e->prefix != (e->addr.family == AF_INET ? 32u : 128u))
        n = snprintf (out, cap, "%s/%u", a, e->prefix);
      else if (e->addr.family == AF_INET6 && e->port)
        n = snprintf (out, cap, "[%s]%s", a, port);
      else
        n = snprintf (out, cap, "%s%s", a, port);
      break;
    default:
      n = snprintf (out, cap, "?");
      break;
    }
  return n < 0 ? 0 : (size_t) n;
}

static int
build_list (struct sbx_net_entry **out, unsigned *count, const char *const *items, size_t n,
            const char *what, sbx_error_t **err)
{
  size_t i;

  *out = NULL;
  *count = 0;
  if (n > SBX_NET_MAX_ENTRIES)
    return sbx_err (err, SBX_E_INVALID, "network.%s has %zu entries; at most %d are allowed",
                    what, n, SBX_NET_MAX_ENTRIES);
  if (n == 0)
    return 0;
  *out = calloc (n, sizeof **out);
  if (*out == NULL)
    return sbx_err_oom (err);
  for (i = 0; i < n; i++)
    if (sbx_net_entry_parse (items[i], &(*out)[i], err) < 0)
      {
        free (*out);
        *out = NULL;
        return sbx_err_wrap (err, "network.%s[%zu]", what, i);
      }
  *count = (unsigned) n;
  return 0;
}

int
sbx_net_policy_build (struct sbx_net_policy *p, const char *const *allow, size_t nallow,
                      const char *const *deny, size_t ndeny, sbx_error_t **err)
{
  memset (p, 0, sizeof *p);
  if (build_list (&p->allow, &p->nallow, allow, nallow, "allow", err) < 0)
    return -1;
  if (build_list (&p->deny, &p->ndeny, deny, ndeny, "deny", err) < 0)
    {
      sbx_net_policy_free (p);
      return -1;
    }
  return 0;
}

void
sbx_net_policy_free (struct sbx_net_policy *p)
{
  free (p->allow);
  free (p->deny);
  memset (p, 0, sizeof *p);
}

static int
name_matches (const struct sbx_net_entry *e, const char *host)
{
  size_t hl, nl;

  if (host == NULL)
    return 0;
  if (e->kind == SBX_NET_NAME)
    return strcmp (e->name, host) == 0;
  if (e->kind != SBX_NET_SUFFIX)
    return 0;
  hl = strlen (host);
  nl = strlen (e->name);
  return hl > nl + 1 && host[hl - nl - 1] == '.' && strcmp (host + hl - nl, e->name) == 0;
}

static int
addr_matches (const struct sbx_net_entry *e, const struct sbx_net_addr *a)
{
  unsigned i, full;

  if (e->kind != SBX_NET_ADDR || a == NULL || a->family != e->addr.family)
    return 0;
  full = e->prefix / 8;
  if (memcmp (a->bytes, e->addr.bytes, full) != 0)
    return 0;
  i = e->prefix % 8;
  if (i == 0)
    return 1;
  return ((a->bytes[full] ^ e->addr.bytes[full]) & (0xff00 >> i) & 0xff) == 0;
}

static int
entry_matches (const struct sbx_net_entry *e, const char *host, uint16_t port,
               const struct sbx_net_addr *a)
{
  if (e->port != 0 && e->port != port)
    return 0;
  return e->kind == SBX_NET_ANY || name_matches (e, host) || addr_matches (e, a);
}

int
sbx_net_entry_matches (const struct sbx_net_entry *e, const char *host, uint16_t port,
                       const struct sbx_net_addr *addr)
{
  return entry_matches (e, host, port, addr);
}

enum sbx_net_verdict
sbx_net_precheck (const struct sbx_net_policy *p, const char *host, uint16_t port)
{
  int maybe = 0, name_allowed = 0, addr_denies = 0;
  unsigned i;

  for (i = 0; i < p->ndeny; i++)
    {
      if (p->deny[i].kind == SBX_NET_ADDR)
        addr_denies = 1;
      else if (entry_matches (&p->deny[i], host, port, NULL))
        return SBX_NET_DENY;
    }
  for (i = 0; i < p->nallow; i++)
    {
      if (p->allow[i].kind == SBX_NET_ADDR)
        {
          if (p->allow[i].port == 0 || p->allow[i].port == port)
            maybe = 1;
        }
      else if (entry_matches (&p->allow[i], host, port, NULL))
        name_allowed = 1;
    }
  if (name_allowed)
    return addr_denies ? SBX_NET_UNDECIDED : SBX_NET_ALLOW;
  return maybe ? SBX_NET_UNDECIDED : SBX_NET_DENY;
}

enum sbx_net_verdict
sbx_net_decide (const struct sbx_net_policy *p, const char *host, uint16_t port,
                const struct sbx_net_addr *addr)
{
  unsigned i;

  for (i = 0; i < p->ndeny; i++)
    if (entry_matches (&p->deny[i], host, port, addr))
      return SBX_NET_DENY;
  for (i = 0; i < p->nallow; i++)
    if (entry_matches (&p->allow[i], host, port, addr))
      return SBX_NET_ALLOW;
  return SBX_NET_DENY;
}

static const char *
v4_special (const uint8_t *b)
{
  uint32_t a = ((uint32_t) b[0] << 24) | ((uint32_t) b[1] << 16) | ((uint32_t) b[2] << 8) | b[3];
  static const struct
  {
    uint32_t net, mask;
    const char *why;
  } table[] = {
      {0xA9FEA9FE, 0xFFFFFFFF, "metadata"},   /* 169.254.169.254 */
      {0x00000000, 0xFF000000, "unspecified"}, /* 0.0.0.0/8 */
      {0x0A000000, 0xFF000000, "private"},     /* 10/8 */
      {0x64400000, 0xFFC00000, "shared (CGNAT)"}, /* 100.64/10 */
      {0x7F000000, 0xFF000000, "loopback"},    /* 127/8 */
      {0xA9FE0000, 0xFFFF0000, "link-local"},  /* 169.254/16 */
      {0xAC100000, 0xFFF00000, "private"},     /* 172.16/12 */
      {0xC0000000, 0xFFFFFF00, "reserved"},    /* 192.0.0.0/24 */
      {0xC0000200, 0xFFFFFF00, "documentation"}, /* 192.0.2.0/24 */
      {0xC0A80000, 0xFFFF0000, "private"},     /* 192.168/16 */
      {0xC6120000, 0xFFFE0000, "benchmarking"}, /* 198.18/15 */
      {0xC6336400, 0xFFFFFF00, "documentation"}, /* 198.51.100/24 */
      {0xCB007100, 0xFFFFFF00, "documentation"}, /* 203.0.113/24 */
      {0xE0000000, 0xF0000000, "multicast"},   /* 224/4 */
      {0xF0000000, 0xF0000000, "reserved"},    /* 240/4, broadcast */
  };
  size_t i;

  for (i = 0; i < sizeof table / sizeof *table; i++)
    if ((a & table[i].mask) == table[i].net)
      return table[i].why;
  return NULL;
}

const char *
sbx_net_addr_special (const struct sbx_net_addr *addr)
{
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  /* SIIT's IPv4-translated ::ffff:0:0:0/96 (RFC 7915), and the local-use
     NAT64 prefix 64:ff9b:1::/48 (RFC 8215, any /96 in it): each carries
     an IPv4 address a translator on the path would reach. */
  static const uint8_t siit[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
  static const uint8_t nat64_local[6] = {0, 0x64, 0xff, 0x9b, 0, 0x01};
  static const uint8_t zero[16] = {0};
  static const uint8_t metadata6[16] = {0xfd, 0, 0x0e, 0xc2, 0, 0, 0, 0,
                                        0, 0, 0, 0, 0, 0, 0x02, 0x54};
  const uint8_t *b = addr->bytes;

  if (addr->family == AF_INET)
    return v4_special (b);
  if (addr->family != AF_INET6)
    return "unknown";
  if (memcmp (b, mapped, 12) == 0 || memcmp (b, nat64, 12) == 0 || memcmp (b, siit, 12) == 0)
    return v4_special (b + 12);
  if (memcmp (b, nat64_local, 6) == 0)
    return v4_special (b + 12) ? v4_special (b + 12) : "local NAT64";
  if (memcmp (b, zero, 15) == 0)
    return b[15] == 1 ? "loopback" : "unspecified"; /* ::1, :: (and ::N) */
  if (memcmp (b, zero, 12) == 0)
    return "IPv4-compatible"; /* ::a.b.c.d, deprecated */
  if (memcmp (b, metadata6, 16) == 0)
    return "metadata";
  if ((b[0] & 0xfe) == 0xfc)
    return "private (ULA)";
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
    return "link-local";
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
    return "site-local";
  if (b[0] == 0xff)
    return "multicast";
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
    return "documentation";
  if (b[0] == 0x20 && b[1] == 0x02)
    return "6to4"; /* embeds an IPv4 address we would have to judge */
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0)
    return "Teredo";
  return NULL;
}

int
sbx_net_mirror_parse (const char *url, struct sbx_net_mirror *m)
{
  const char *h, *end, *at, *colon;
  size_t len;
  unsigned long port;

  memset (m, 0, sizeof *m);
  if (strncmp (url, "http://", 7) == 0)
    h = url + 7, port = 80;
  else if (strncmp (url, "https://", 8) == 0)
    h = url + 8, port = 443;
  else
    return -1;
  end = h + strcspn (h, "/?#");
  while ((at = memchr (h, '@', (size_t) (end - h))) != NULL) /* userinfo ends at the last '@' */
    h = at + 1;
  if (*h == '[')
    {
      const char *close = memchr (h, ']', (size_t) (end - h));
      if (close == NULL)
        return -1;
      colon = close + 1 < end ? close + 1 : NULL;
      if (colon != NULL && *colon != ':')
        return -1;
      h++;
      len = (size_t) (close - h);
    }
  else
    {
      colon = memchr (h, ':', (size_t) (end - h));
      len = (size_t) ((colon ? colon : end) - h);
    }
  if (colon != NULL)
    {
      char *e;
      if (colon + 1 == end)
        return -1;
      port = strtoul (colon + 1, &e, 10);
      if (e != end || port == 0 || port > 65535)
        return -1;
    }
  if (len == 0 || len >= sizeof m->host)
    return -1;
  memcpy (m->host, h, len);
  m->host[len] = '\0';
  m->port = (uint16_t) port;
  return 0;
}

int
sbx_net_mirror_allows (const struct sbx_net_mirror *m, const char *host, uint16_t port,
                       const char *special)
{
  return m->host[0] != '\0' && port == m->port && strcasecmp (host, m->host) == 0
         && strcmp (special, "metadata") != 0 && strcmp (special, "link-local") != 0;
}
