/* Fuzz target: the number parsers of the CLI and the API (util/parse.c),
 * differentially: each input goes through sbx_parse_size, _duration_ms,
 * _cpus and _uint64 (durations with Go-style components, 1m30s) and
 * through an independent reference written here with
 * 128-bit arithmetic, and both must agree exactly on acceptance and value
 * (overflow rejected, never wrapped). Failures must leave the output alone
 * and follow the error contract; accepted sizes must survive a round trip
 * through sbx_format_size.
 */
#include <ctype.h>
#include <inttypes.h>

#include "fuzz.h"
#include "util/parse.h"

#define SENTINEL UINT64_C (0x5a5a5a5a5a5a5a5a)

typedef unsigned __int128 u128;

/* <digits>[.<digits>] | .<digits>: the integer part (saturated above
   UINT64_MAX, which sets *big) and the first nine fraction digits as
   billionths. Returns the length consumed, 0 for no number. */
static size_t
ref_decimal (const char *s, u128 *whole, uint64_t *frac, int *big)
{
  size_t i = 0, ndig = 0, fdig = 0;
  u128 w = 0;
  uint64_t f = 0, scale = 100000000;

  *big = 0;
  for (; s[i] >= '0' && s[i] <= '9'; i++, ndig++)
    {
      w = w * 10 + (unsigned) (s[i] - '0');
      if (w > UINT64_MAX)
        {
          *big = 1;
          w = (u128) UINT64_MAX + 1; /* saturate: stays "too big" */
        }
    }
  if (s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9')
    {
      i++;
      for (; s[i] >= '0' && s[i] <= '9'; i++, fdig++)
        if (fdig < 9)
          {
            f += (uint64_t) (s[i] - '0') * scale;
            scale /= 10;
          }
    }
  *whole = w;
  *frac = f;
  return ndig || fdig ? i : 0;
}

/* whole.frac * mult (floor), or -1 past UINT64_MAX. */
static int
ref_scale (u128 whole, uint64_t frac, uint64_t mult, uint64_t *out)
{
  u128 v = whole * mult + ((u128) frac * mult) / 1000000000u;

  if (v > UINT64_MAX)
    return -1;
  *out = (uint64_t) v;
  return 0;
}

static int
ref_size (const char *s, uint64_t *out)
{
  u128 whole;
  uint64_t frac, mult = 1;
  int big;
  size_t n = ref_decimal (s, &whole, &frac, &big);
  const char *p = s + n;

  if (n == 0 || big)
    return -1;
  switch (*p)
    {
    case '\0':
      break;
    case 'b': case 'B':
      p++;
      break;
    case 'k': case 'K':
      mult = UINT64_C (1) << 10;
      break;
    case 'm': case 'M':
      mult = UINT64_C (1) << 20;
      break;
    case 'g': case 'G':
      mult = UINT64_C (1) << 30;
      break;
    case 't': case 'T':
      mult = UINT64_C (1) << 40;
      break;
    default:
      return -1;
    }
  if (mult > 1)
    {
      p++;
      if (*p == 'i' || *p == 'I')
        p++;
      if (*p == 'b' || *p == 'B')
        p++;
    }
  if (*p != '\0' || (mult == 1 && frac != 0))
    return -1;
  return ref_scale (whole, frac, mult, out);
}

/* Components <number><unit>, units h > m > s > ms strictly decreasing;
   a bare number only as the whole input (seconds). */
static int
ref_duration (const char *s, uint64_t *out)
{
  static const uint64_t ms_of[] = {3600000, 60000, 1000, 1};
  u128 total = 0;
  int last = -1;
  const char *p = s;

  while (*p)
    {
      u128 whole;
      uint64_t frac, v;
      int big, rank;
      size_t n = ref_decimal (p, &whole, &frac, &big), len;
      const char *u = p + n;

      if (n == 0 || big)
        return -1;
      if (*u == '\0')
        {
          if (p != s)
            return -1;
          rank = 2; /* seconds */
          len = 0;
        }
      else if (u[0] == 'm' && u[1] == 's')
        rank = 3, len = 2;
      else if (u[0] == 'h')
        rank = 0, len = 1;
      else if (u[0] == 'm')
        rank = 1, len = 1;
      else if (u[0] == 's')
        rank = 2, len = 1;
      else
        return -1;
      if (rank <= last || ref_scale (whole, frac, ms_of[rank], &v) < 0)
        return -1;
      last = rank;
      total += v;
      if (total > UINT64_MAX)
        return -1;
      p = u + len;
    }
  if (p == s)
    return -1;
  *out = (uint64_t) total;
  return 0;
}

static int
ref_cpus (const char *s, uint32_t *out)
{
  u128 whole;
  uint64_t frac, v;
  int big;
  size_t n = ref_decimal (s, &whole, &frac, &big);

  if (n == 0 || s[n] != '\0' || big || ref_scale (whole, frac, 1000, &v) < 0 || v > UINT32_MAX)
    return -1;
  *out = (uint32_t) v;
  return 0;
}

static int
ref_uint64 (const char *s, uint64_t *out)
{
  u128 v = 0;
  size_t i;

  if (*s == '\0')
    return -1;
  for (i = 0; s[i]; i++)
    {
      if (s[i] < '0' || s[i] > '9')
        return -1;
      v = v * 10 + (unsigned) (s[i] - '0');
      if (v > UINT64_MAX)
        return -1;
    }
  *out = (uint64_t) v;
  return 0;
}

static void
compare_u64 (const char *what, const char *s, int rc, uint64_t got, int ref_rc, uint64_t want)
{
  if (rc != ref_rc || (rc == 0 && got != want) || (rc < 0 && got != SENTINEL))
    {
      fprintf (stderr, "%s(\"%s\"): rc %d value %" PRIu64 ", reference rc %d value %" PRIu64 "\n",
               what, s, rc, got, ref_rc, want);
      abort ();
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *s = fuzz_cstr (data, size);
  sbx_error_t *err = NULL;
  uint64_t got, want = 0;
  uint32_t got32, want32 = 0;
  int rc, ref;

  got = SENTINEL;
  rc = FUZZ_CONTRACT (sbx_parse_size (s, &got, &err), &err);
  ref = ref_size (s, &want);
  compare_u64 ("sbx_parse_size", s, rc, got, ref, want);
  if (rc == 0)
    {
      char text[32];
      uint64_t back = SENTINEL;
      sbx_format_size (got, text, sizeof text);
      FUZZ_ASSERT (FUZZ_CONTRACT (sbx_parse_size (text, &back, &err), &err) == 0);
      FUZZ_ASSERT (back == got);
    }

  got = SENTINEL;
  rc = FUZZ_CONTRACT (sbx_parse_duration_ms (s, &got, &err), &err);
  ref = ref_duration (s, &want);
  compare_u64 ("sbx_parse_duration_ms", s, rc, got, ref, want);

  got32 = 0x5a5a5a5a;
  rc = FUZZ_CONTRACT (sbx_parse_cpus (s, &got32, &err), &err);
  ref = ref_cpus (s, &want32);
  if (rc != ref || (rc == 0 && got32 != want32) || (rc < 0 && got32 != 0x5a5a5a5a))
    {
      fprintf (stderr, "sbx_parse_cpus(\"%s\"): rc %d value %u, reference rc %d value %u\n", s, rc,
               got32, ref, want32);
      abort ();
    }

  got = SENTINEL;
  rc = FUZZ_CONTRACT (sbx_parse_uint64 (s, &got, &err), &err);
  ref = ref_uint64 (s, &want);
  compare_u64 ("sbx_parse_uint64", s, rc, got, ref, want);
  if (rc == 0)
    {
      char text[32];
      uint64_t back = SENTINEL;
      snprintf (text, sizeof text, "%" PRIu64, got);
      FUZZ_ASSERT (FUZZ_CONTRACT (sbx_parse_uint64 (text, &back, &err), &err) == 0 && back == got);
    }
  free (s);
  return 0;
}
