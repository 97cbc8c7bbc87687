/* sbx: size, duration and CPU parsers (see parse.h). */
#include "util/parse.h"

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

int
sbx_parse_duration_ms (const char *s, uint64_t *out, sbx_error_t **err)
{
  uint64_t whole, frac, mult, v;
  int overflow;
  size_t n;
  const char *unit;

  if (s == NULL || *s == '\0')
    return sbx_err (err, SBX_E_INVALID, "empty duration");
  n = parse_decimal (s, &whole, &frac, &overflow);
  if (n == 0)
    return sbx_err (err, SBX_E_INVALID, "`%s` is not a duration (try 30, 500ms, 10s or 5m)", s);
  if (overflow)
    return sbx_err (err, SBX_E_INVALID, "duration `%s` is too large", s);
  unit = s + n;
  if (strcmp (unit, "") == 0 || strcmp (unit, "s") == 0)
    mult = 1000;
  else if (strcmp (unit, "ms") == 0)
    mult = 1;
  else if (strcmp (unit, "m") == 0)
    mult = 60 * 1000;
  else if (strcmp (unit, "h") == 0)
    mult = 3600 * 1000;
  else
    return sbx_err (err, SBX_E_INVALID, "`%s` has an unknown duration unit (use ms, s, m or h)", s);
  if (scale_checked (whole, frac, mult, &v) < 0)
    return sbx_err (err, SBX_E_INVALID, "duration `%s` is too large", s);
  *out = v;
  return 0;
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
