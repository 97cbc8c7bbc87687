/* sbx: size, duration and CPU parsers (see parse.h). */
#include "util/parse.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Parse "<digits>[.<digits>]" into an integer part and a fraction scaled to
   1e9, without floating point so that results are exact and overflow is
   caught. Returns the number of characters consumed, 0 on no digits. */
static size_t
parse_decimal (const char *s, uint64_t *whole, uint64_t *frac_nano, int *overflow)
{
  size_t i = 0;
  uint64_t w = 0, f = 0, scale = 100000000;
  int any = 0;

  *overflow = 0;
  while (isdigit ((unsigned char) s[i]))
    {
      unsigned d = (unsigned) (s[i] - '0');
      if (w > (UINT64_MAX - d) / 10)
        *overflow = 1;
      else
        w = w * 10 + d;
      i++;
      any = 1;
    }
  if (s[i] == '.')
    {
      size_t j = i + 1;
      int fany = 0;
      while (isdigit ((unsigned char) s[j]))
        {
          if (scale > 0)
            {
              f += (uint64_t) (s[j] - '0') * scale;
              scale /= 10;
            }
          j++;
          fany = 1;
        }
      if (!fany)
        return any ? i : 0; /* "5." is not a number we accept */
      if (!any && !fany)
        return 0;
      i = j;
      any = 1;
    }
  *whole = w;
  *frac_nano = f;
  return any ? i : 0;
}

/* whole.frac * mult, checking for overflow. */
static int
scale_checked (uint64_t whole, uint64_t frac_nano, uint64_t mult, uint64_t *out)
{
  uint64_t a, b;

  if (mult != 0 && whole > UINT64_MAX / mult)
    return -1;
  a = whole * mult;
  /* frac_nano < 1e9, so frac_nano * mult can overflow for large mult:
     divide first when mult is a multiple of 1e9's factors. */
  if (mult >= 1000000000ULL)
    b = frac_nano * (mult / 1000000000ULL)
        + (frac_nano * (mult % 1000000000ULL)) / 1000000000ULL;
  else
    b = (frac_nano * mult) / 1000000000ULL;
  if (a > UINT64_MAX - b)
    return -1;
  *out = a + b;
  return 0;
}

int
sbx_parse_uint64 (const char *s, uint64_t *out, sbx_error_t **err)
{
  uint64_t v = 0;
  size_t i;

  if (s == NULL || *s == '\0')
    return sbx_err (err, SBX_E_INVALID, "empty number");
  for (i = 0; s[i]; i++)
    {
      unsigned d;
      if (!isdigit ((unsigned char) s[i]))
        return sbx_err (err, SBX_E_INVALID, "`%s` is not a non-negative integer", s);
      d = (unsigned) (s[i] - '0');
      if (v > (UINT64_MAX - d) / 10)
        return sbx_err (err, SBX_E_INVALID, "`%s` is too large", s);
      v = v * 10 + d;
    }
  *out = v;
  return 0;
}

int
sbx_parse_size (const char *s, uint64_t *out, sbx_error_t **err)
{
  uint64_t whole, frac, mult = 1, v;
  int overflow;
  size_t n;
  const char *p;

  if (s == NULL || *s == '\0')
    return sbx_err (err, SBX_E_INVALID, "empty size");
  n = parse_decimal (s, &whole, &frac, &overflow);
  if (n == 0)
    return sbx_err (err, SBX_E_INVALID, "`%s` is not a size (try 512M or 1G)", s);
  if (overflow)
    return sbx_err (err, SBX_E_INVALID, "size `%s` is too large", s);
  p = s + n;
  switch (tolower ((unsigned char) *p))
    {
    case '\0':
      break;
    case 'b':
      p++;
      break;
    case 'k':
      mult = 1ULL << 10;
      p++;
      break;
    case 'm':
      mult = 1ULL << 20;
      p++;
      break;
    case 'g':
      mult = 1ULL << 30;
      p++;
      break;
    case 't':
      mult = 1ULL << 40;
      p++;
      break;
    default:
      return sbx_err (err, SBX_E_INVALID, "`%s` has an unknown size unit (use K, M, G or T)", s);
    }
  if (mult > 1)
    {
      if (*p == 'i' || *p == 'I')
        p++;
      if (*p == 'b' || *p == 'B')
        p++;
    }
  if (*p != '\0')
    return sbx_err (err, SBX_E_INVALID, "`%s` is not a size (try 512M or 1G)", s);
  if (mult == 1 && frac != 0)
    return sbx_err (err, SBX_E_INVALID, "size `%s` has a fraction of a byte", s);
  if (scale_checked (whole, frac, mult, &v) < 0)
    return sbx_err (err, SBX_E_INVALID, "size `%s` is too large", s);
  *out = v;
  return 0;
}

/* Duration units, largest first. */
static const struct
{
  const char *name;
  uint64_t ms;
} duration_units[] = {{"h", 3600 * 1000}, {"m", 60 * 1000}, {"s", 1000}, {"ms", 1}};
#define N_UNITS (sizeof duration_units / sizeof duration_units[0])

int
sbx_parse_duration_ms (const char *s, uint64_t *out, sbx_error_t **err)
{
  uint64_t whole, frac, mult, v;
  int overflow;
  size_t n;
  const char *unit;

  /* Components, each a number and its unit, the units in decreasing
     order, each at most once ("1h30m", "1m30s", "2m0.5s"); a bare number
     alone is seconds. */
  const char *p = s;
  uint64_t total = 0;
  size_t next = 0; /* the first unit still allowed */

  if (s == NULL || *s == '\0')
    return sbx_err (err, SBX_E_INVALID, "empty duration");
  while (*p != '\0')
    {
      size_t i, len = 0;
      n = parse_decimal (p, &whole, &frac, &overflow);
      if (n == 0)
        return sbx_err (err, SBX_E_INVALID,
                        "`%s` is not a duration (try 30, 500ms, 10s, 5m or 1m30s)", s);
      if (overflow)
        return sbx_err (err, SBX_E_INVALID, "duration `%s` is too large", s);
      unit = p + n;
      mult = 0;
      if (*unit == '\0' && p == s)
        {
          mult = 1000;
          next = N_UNITS;
        }
      for (i = next; i < N_UNITS && mult == 0; i++)
        {
          size_t ul = strlen (duration_units[i].name);
          /* "ms" before "m" would be wrong: "m" is only minutes when no
             "s" follows */
          if (strncmp (unit, duration_units[i].name, ul) == 0
              && !(ul == 1 && unit[0] == 'm' && unit[1] == 's'))
            {
              mult = duration_units[i].ms;
              len = ul;
              next = i + 1;
            }
        }
      if (mult == 0)
        return sbx_err (err, SBX_E_INVALID,
                        "`%s` has an unknown or repeated duration unit (use h, m, s and ms, "
                        "largest first: 1m30s)",
                        s);
      if (scale_checked (whole, frac, mult, &v) < 0 || total > UINT64_MAX - v)
        return sbx_err (err, SBX_E_INVALID, "duration `%s` is too large", s);
      total += v;
      p = unit + len;
    }
  *out = total;
  return 0;
}

void
sbx_format_duration_ms (uint64_t ms, char *buf, unsigned len)
{
  size_t i, used = 0;

  if (len == 0)
    return;
  buf[0] = '\0';
  if (ms == 0)
    {
      snprintf (buf, len, "0s");
      return;
    }
  for (i = 0; i < N_UNITS && used < len; i++)
    if (ms >= duration_units[i].ms)
      {
        int w = snprintf (buf + used, len - used, "%llu%s",
                          (unsigned long long) (ms / duration_units[i].ms), duration_units[i].name);
        if (w < 0)
          return;
        used += (size_t) w;
        ms %= duration_units[i].ms;
      }
}

void
sbx_format_size_bound (uint64_t bytes, int round_up, char *buf, unsigned len)
{
  static const char units_size[] = "KMGT";
  int u = -1;
  uint64_t scale = 1;

  while (u < 3 && bytes / scale >= 1024)
    {
      scale *= 1024;
      u++;
    }
  if (u < 0 || bytes % scale == 0)
    {
      sbx_format_size (bytes, buf, len);
      return;
    }
  {
    /* tenths of the unit, rounded the way that keeps the bound true */
    uint64_t rest = bytes % scale, tenths = bytes / scale * 10 + rest * 10 / scale;
    if (round_up && rest * 10 % scale != 0)
      tenths++;
    if (tenths % 10 == 0)
      snprintf (buf, len, "%llu%c", (unsigned long long) (tenths / 10), units_size[u]);
    else
      snprintf (buf, len, "%llu.%llu%c", (unsigned long long) (tenths / 10),
                (unsigned long long) (tenths % 10), units_size[u]);
  }
}

int
sbx_parse_cpus (const char *s, uint32_t *out_milli, sbx_error_t **err)
{
  uint64_t whole, frac, v;
  int overflow;
  size_t n;

  if (s == NULL || *s == '\0')
    return sbx_err (err, SBX_E_INVALID, "empty CPU count");
  n = parse_decimal (s, &whole, &frac, &overflow);
  if (n == 0 || s[n] != '\0')
    return sbx_err (err, SBX_E_INVALID, "`%s` is not a CPU count (try 1 or 0.5)", s);
  if (overflow || scale_checked (whole, frac, 1000, &v) < 0 || v > UINT32_MAX)
    return sbx_err (err, SBX_E_INVALID, "CPU count `%s` is too large", s);
  *out_milli = (uint32_t) v;
  return 0;
}

void
sbx_format_size (uint64_t bytes, char *buf, unsigned len)
{
  static const char units[] = "KMGT";
  int u = -1;
  uint64_t v = bytes;

  while (u < 3 && v >= 1024 && v % 1024 == 0)
    {
      v /= 1024;
      u++;
    }
  if (u < 0)
    snprintf (buf, len, "%llu", (unsigned long long) v);
  else
    snprintf (buf, len, "%llu%c", (unsigned long long) v, units[u]);
}

int
sbx_template_name_spelled_ok (const char *name)
{
  size_t i, n = name ? strlen (name) : 0;

  if (n == 0 || n > 31)
    return 0;
  for (i = 0; i < n; i++)
    {
      char ch = name[i];
      int alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
      if (!alnum && (i == 0 || (ch != '.' && ch != '_' && ch != '-')))
        return 0;
    }
  return 1;
}

#define PORT_PLACEHOLDER "${PORT}"

int
sbx_mask_host_ok (const char *s)
{
  size_t n = s ? strlen (s) : 0, i = 0;

  if (n == 0 || n > SBX_MASK_HOST_MAX)
    return 0;
  while (i < n)
    {
      unsigned char c = (unsigned char) s[i];
      if (strncmp (s + i, PORT_PLACEHOLDER, strlen (PORT_PLACEHOLDER)) == 0)
        i += strlen (PORT_PLACEHOLDER);
      else if (isalnum (c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']')
        i++;
      else
        return 0;
    }
  return 1;
}

void
sbx_mask_host_render (const char *s, unsigned port, char *buf, unsigned len)
{
  size_t used = 0;

  assert (len > 0 && sbx_mask_host_ok (s));
  buf[0] = '\0';
  while (*s && used + 1 < len)
    {
      if (strncmp (s, PORT_PLACEHOLDER, strlen (PORT_PLACEHOLDER)) == 0)
        {
          int k = snprintf (buf + used, len - used, "%u", port);
          if (k < 0 || (size_t) k >= len - used)
            break;
          used += (size_t) k;
          s += strlen (PORT_PLACEHOLDER);
        }
      else
        {
          buf[used++] = *s++;
          buf[used] = '\0';
        }
    }
}
