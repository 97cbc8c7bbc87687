/* Unit tests for src/util/parse.c: the sizes, durations and CPU counts that
 * users type on the command line and in API bodies.
 *
 * Every accepted spelling is checked against its exact value, and every
 * rejected one against the error kind (SBX_E_INVALID) and an untouched
 * output, so that the CLI and the API, which share these parsers, accept
 * exactly the same language.
 */
#include "util/parse.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))
#define KIB (UINT64_C (1) << 10)
#define MIB (UINT64_C (1) << 20)
#define GIB (UINT64_C (1) << 30)
#define TIB (UINT64_C (1) << 40)
#define SENTINEL UINT64_C (0x5a5a5a5a5a5a5a5a)

struct u64_case
{
  const char *in;
  uint64_t want;
};

typedef int (*u64_parser) (const char *s, uint64_t *out, sbx_error_t **err);

/*============================ Helpers ================================== */

/* Parse every case; report each mismatch, fail if any. */
static int
check_accepts (const char *what, u64_parser parse, const struct u64_case *cases, size_t n)
{
  int failed = 0;

  for (size_t i = 0; i < n; i++)
    {
      sbx_error_t *err = NULL;
      uint64_t got = SENTINEL;

      if (parse (cases[i].in, &got, &err) != 0)
        {
          fprintf (stderr, "#   %s `%s`: rejected (%s)\n", what, cases[i].in,
                   err ? err->msg : "no error set");
          failed = 1;
        }
      else if (got != cases[i].want)
        {
          fprintf (stderr, "#   %s `%s`: got %" PRIu64 ", want %" PRIu64 "\n", what,
                   cases[i].in, got, cases[i].want);
          failed = 1;
        }
      else if (err != NULL)
        {
          fprintf (stderr, "#   %s `%s`: error set on success\n", what, cases[i].in);
          failed = 1;
        }
      sbx_error_free (err);
    }
  return failed ? -1 : 0;
}

/* Every input must fail with SBX_E_INVALID, a message, and *out left alone. */
static int
check_rejects (const char *what, u64_parser parse, const char *const *inputs, size_t n)
{
  int failed = 0;

  for (size_t i = 0; i < n; i++)
    {
      sbx_error_t *err = NULL;
      uint64_t got = SENTINEL;
      int rc = parse (inputs[i], &got, &err);

      if (rc != -1 || err == NULL)
        {
          fprintf (stderr, "#   %s `%s`: accepted as %" PRIu64 "\n", what,
                   inputs[i] ? inputs[i] : "(null)", got);
          failed = 1;
        }
      else if (err->kind != SBX_E_INVALID || err->msg == NULL || err->msg[0] == '\0'
               || err->sys_errno != 0)
        {
          fprintf (stderr, "#   %s `%s`: wrong error (kind %d, `%s`)\n", what, inputs[i],
                   (int) err->kind, err->msg ? err->msg : "(null)");
          failed = 1;
        }
      else if (got != SENTINEL)
        {
          fprintf (stderr, "#   %s `%s`: output written on failure\n", what, inputs[i]);
          failed = 1;
        }
      sbx_error_free (err);
    }
  return failed ? -1 : 0;
}

/* sbx_parse_cpus has a uint32_t output: adapt it to the table helpers. */
static int
parse_cpus64 (const char *s, uint64_t *out, sbx_error_t **err)
{
  uint32_t milli = 0x5a5a5a5a;
  int rc = sbx_parse_cpus (s, &milli, err);

  if (rc == 0)
    *out = milli;
  else if (milli != 0x5a5a5a5a)
    *out = 0; /* written on failure: the helper reports it */
  return rc;
}

/*============================ Sizes ==================================== */

static int
test_size_units (void)
{
  static const struct u64_case cases[] = {
    {"0", 0},
    {"1", 1},
    {"1048576", MIB},
    {"512M", 512 * MIB},
    {"512m", 512 * MIB},
    {"1G", GIB},
    {"1g", GIB},
    {"64k", 64 * KIB},
    {"64K", 64 * KIB},
    {"1T", TIB},
    {"1t", TIB},
    {"1b", 1},
    {"1B", 1},
    {"4096B", 4096},
    {"0K", 0},
    {"0B", 0},
    {"007M", 7 * MIB},
  };

  return check_accepts ("size", sbx_parse_size, cases, ARRAY_SIZE (cases));
}

/* "i" and "B" after a unit, in any case, are decoration: all powers of 1024. */
static int
test_size_suffix_spellings (void)
{
  static const struct u64_case cases[] = {
    {"1KiB", KIB}, {"1kib", KIB}, {"1KIB", KIB}, {"1Ki", KIB}, {"1KB", KIB},
    {"1kB", KIB},  {"1Kb", KIB},  {"1MB", MIB},  {"1MiB", MIB}, {"1mib", MIB},
    {"1Mi", MIB},  {"1GiB", GIB}, {"1GB", GIB},  {"1gi", GIB},  {"1TiB", TIB},
    {"1TB", TIB},  {"2kI", 2 * KIB},
  };

  return check_accepts ("size", sbx_parse_size, cases, ARRAY_SIZE (cases));
}

/* Fractions scale exactly (no floating point); what is left below one byte
   is dropped. */
static int
test_size_fractions (void)
{
  static const struct u64_case cases[] = {
    {"1.5G", GIB + GIB / 2},
    {"1.5K", 1536},
    {"0.5K", 512},
    {".5K", 512},
    {"0.25M", 256 * KIB},
    {"2.0G", 2 * GIB},
    {"1.0", 1},
    {"0.0", 0},
    {"1.000", 1},
    {"0.1K", 102},      /* 102.4 */
    {"0.001K", 1},      /* 1.024 */
    {"0.0001K", 0},     /* 0.1024 */
    {"1.999999999K", 2047}, /* 2047.999998976 */
    /* Digits past the ninth are ignored. */
    {"1.0000000001K", KIB},
    {"1.5T", TIB + TIB / 2},
    {"0.000000001T", 1099}, /* 1099.511627776 */
    {"1.1G", 1181116006},   /* 1181116006.4 */
    {"3.75M", 3 * MIB + 768 * KIB},
  };

  return check_accepts ("size", sbx_parse_size, cases, ARRAY_SIZE (cases));
}

static int
test_size_limits (void)
{
  static const struct u64_case cases[] = {
    {"18446744073709551615", UINT64_MAX},
    {"18446744073709551615B", UINT64_MAX},
    {"16777215T", UINT64_MAX - TIB + 1},
    {"17179869183G", UINT64_MAX - GIB + 1},
    {"17592186044415M", UINT64_MAX - MIB + 1},
    {"18014398509481983K", UINT64_MAX - KIB + 1},
    {"16777215.999999999T", UINT64_MAX - 1099}, /* the fraction, exactly */
  };
  static const char *const too_large[] = {
    "18446744073709551616",  "99999999999999999999",  "99999999999999999999999999",
    "16777216T",             "17179869184G",          "17592186044416M",
    "18014398509481984K",    "18446744073709551616B", "99999999999999999999.5G",
    "18446744073709551615K",
  };

  if (check_accepts ("size", sbx_parse_size, cases, ARRAY_SIZE (cases)) < 0)
    return -1;
  return check_rejects ("size", sbx_parse_size, too_large, ARRAY_SIZE (too_large));
}

static int
test_size_rejects (void)
{
  static const char *const bad[] = {
    NULL,    "",       " ",      " 1",    "1 ",     "1\t",    "\t1",  "-1",    "+1",
    "-0",    "1X",     "1E",     "16E",   "1P",     "1Z",     "K",    "M",     "B",
    "KiB",   ".",      "5.",     "5.K",   ".K",     "1..5K",  "1.5",  "1.5B",  "0.5b",
    "1Bi",   "1iB",    "1i",     "1KK",   "1KiBB",  "1KBi",   "1KiX", "1K ",   "1 K",
    "0x10",  "1e3",    "1,5G",   "1_000", "1K\n",   "one",    "1.5.5G", "1.-5G", "1M1",
    "1Gb2",  "\xef\xbc\x91", /* fullwidth digit one */
  };

  return check_rejects ("size", sbx_parse_size, bad, ARRAY_SIZE (bad));
}

/*============================ Durations ================================ */

static int
test_duration_units (void)
{
  static const struct u64_case cases[] = {
    {"300", 300000},
    {"0", 0},
    {"1", 1000},
    {"500ms", 500},
    {"0ms", 0},
    {"10s", 10000},
    {"1.5s", 1500},
    {"5m", 300000},
    {"2h", 7200000},
    {"0.5", 500},
    {"0.5m", 30000},
    {"1.5h", 5400000},
    {".5s", 500},
    {"007s", 7000},
    {"0.001s", 1},
    /* Less than a millisecond is dropped. */
    {"0.0001s", 0},
    {"0.0009s", 0},
    {"1.9999ms", 1},
    {"0.5ms", 0},
    {"1.0000000009s", 1000},
    {"86400", 86400000},
    {"24h", 86400000},
    {"1440m", 86400000},
    /* Components, largest unit first, each once (Go's and docker's spelling). */
    {"1m30s", 90000},
    {"1h30m", 5400000},
    {"2h15m10s", 8110000},
    {"1h0m0s", 3600000},
    {"1s500ms", 1500},
    {"2m0.5s", 120500},
    {"1.5h30m", 7200000},
    {"1h1ms", 3600001},
    {"0h0m0s0ms", 0},
  };

  return check_accepts ("duration", sbx_parse_duration_ms, cases, ARRAY_SIZE (cases));
}

static int
test_duration_limits (void)
{
  static const struct u64_case cases[] = {
    {"18446744073709551615ms", UINT64_MAX},
    {"18446744073709551s", UINT64_C (18446744073709551000)},
    {"18446744073709551", UINT64_C (18446744073709551000)},
    {"18446744073709551.615s", UINT64_MAX},
    {"307445734561825m", UINT64_C (307445734561825) * 60000},
    {"5124095576030h", UINT64_C (5124095576030) * 3600000},
  };
  static const char *const too_large[] = {
    "18446744073709551616ms", "99999999999999999999",   "18446744073709552s",
    "18446744073709551.616s", "307445734561826m",       "5124095576031h",
    "99999999999999999999ms", "18446744073709552",
  };

  if (check_accepts ("duration", sbx_parse_duration_ms, cases, ARRAY_SIZE (cases)) < 0)
    return -1;
  return check_rejects ("duration", sbx_parse_duration_ms, too_large, ARRAY_SIZE (too_large));
}

/* Units are exact and case-sensitive ("5M" is not five minutes); no days,
   no spaces; in a compound, every component has its unit, the units go
   from large to small, each once. */
static int
test_duration_rejects (void)
{
  static const char *const bad[] = {
    NULL,  "",     " ",     "1d",    "7d",   "1w",    "1S",    "1MS",  "1Ms",   "5M",
    "2H",  "1 s",  " 1s",   "1s ",   "ms",   "s",     "m",     "h",    "-1s",   "+1s",
    "-1",  "1sec", "1secs", "1mss",  "1hm",  "1.s",  "1.",    ".",
    ".s",  "1e3",  "0x10",  "1,5s",  "1.5.5s", "1us", "1ns",   "1µs",  "1\n",   "5min",
    "30s1m", "1m1m", "1s1h", "1ms1s", "1m30", "30 1m", "1h 30m", "1m30s ", "1m-30s", "1m+30s",
    "1m30s5", "1m30S", "1hh", "m30s",
  };

  return check_rejects ("duration", sbx_parse_duration_ms, bad, ARRAY_SIZE (bad));
}

/*============================ CPUs ===================================== */

static int
test_cpus (void)
{
  static const struct u64_case cases[] = {
    {"0.5", 500},
    {"2", 2000},
    {"1", 1000},
    {"0", 0},
    {"0.001", 1},
    {"2.25", 2250},
    {"1.2345", 1234}, /* truncated to thousandths, not rounded */
    {"1.9999", 1999},
    {"0.0001", 0},
    {".5", 500},
    {"0.5000", 500},
    {"64", 64000},
    {"00.25", 250},
    {"4294967", UINT64_C (4294967000)},
    {"4294967.295", UINT32_MAX},
  };

  return check_accepts ("cpus", parse_cpus64, cases, ARRAY_SIZE (cases));
}

static int
test_cpus_rejects (void)
{
  static const char *const bad[] = {
    NULL,   "",        "abc",     " ",      " 1",     "1 ",     "-1",     "+1",   "1.",
    ".",    "1c",      "1cpu",    "1m",     "500m",   "1e3",    "0x1",    "1,5",  "1.2.3",
    "4294967.296",     "4294968", "99999999999999999999", "18446744073709551615",
    "1K",   "1\n",
  };

  return check_rejects ("cpus", parse_cpus64, bad, ARRAY_SIZE (bad));
}

/*============================ Integers ================================= */

static int
test_uint64 (void)
{
  static const struct u64_case cases[] = {
    {"0", 0},
    {"42", 42},
    {"007", 7},
    {"4294967296", UINT64_C (4294967296)},
    {"18446744073709551615", UINT64_MAX},
    {"00000000000000000000000018446744073709551615", UINT64_MAX},
  };
  static const char *const bad[] = {
    NULL,  "",      " ",    "-1",    "+1",   " 1",   "1 ",   "1.0",   "1k",    "1K",
    "abc", "0x10",  "1e3",  "1_000", "1,000", "18446744073709551616",
    "99999999999999999999", "184467440737095516150", "\n",
  };

  if (check_accepts ("uint64", sbx_parse_uint64, cases, ARRAY_SIZE (cases)) < 0)
    return -1;
  return check_rejects ("uint64", sbx_parse_uint64, bad, ARRAY_SIZE (bad));
}

/* A NULL err is allowed: failures are still reported by the return value. */
static int
test_null_err (void)
{
  uint64_t v = SENTINEL;
  uint32_t m = 7;

  CHECK (sbx_parse_size ("1X", &v, NULL) == -1);
  CHECK (sbx_parse_duration_ms ("1d", &v, NULL) == -1);
  CHECK (sbx_parse_uint64 ("-1", &v, NULL) == -1);
  CHECK (sbx_parse_cpus ("abc", &m, NULL) == -1);
  CHECK (v == SENTINEL && m == 7);
  CHECK (sbx_parse_size ("2K", &v, NULL) == 0 && v == 2048);
  return 0;
}

/* Error messages quote what the user typed. */
static int
test_error_messages (void)
{
  sbx_error_t *err = NULL;
  uint64_t v;
  uint32_t m;

  CHECK (sbx_parse_size ("1X", &v, &err) == -1);
  CHECK (strstr (err->msg, "`1X`") != NULL);
  CHECK (sbx_parse_duration_ms ("1d", &v, &err) == -1); /* replaces the error */
  CHECK (strstr (err->msg, "`1d`") != NULL);
  CHECK (sbx_parse_cpus ("4294967.296", &m, &err) == -1);
  CHECK (strstr (err->msg, "too large") != NULL);
  CHECK (sbx_parse_size ("99999999999999999999", &v, &err) == -1);
  CHECK (strstr (err->msg, "too large") != NULL);
  CHECK (sbx_parse_size ("", &v, &err) == -1);
  CHECK_STR (err->msg, "empty size");
  CHECK (sbx_parse_duration_ms ("", &v, &err) == -1);
  CHECK_STR (err->msg, "empty duration");
  CHECK (sbx_parse_duration_ms ("30s1m", &v, &err) == -1);
  CHECK (strstr (err->msg, "`30s1m`") != NULL && strstr (err->msg, "largest first") != NULL);
  CHECK (sbx_parse_cpus (NULL, &m, &err) == -1);
  CHECK_STR (err->msg, "empty CPU count");
  CHECK (sbx_parse_uint64 ("", &v, &err) == -1);
  CHECK_STR (err->msg, "empty number");
  sbx_error_free (err);
  return 0;
}

/*============================ format_size ============================== */

static int
test_format_size (void)
{
  static const struct
  {
    uint64_t in;
    const char *want;
  } cases[] = {
    {0, "0"},
    {1, "1"},
    {1023, "1023"},
    {1024, "1K"},
    {1025, "1025"},
    {1536, "1536"},
    {2048, "2K"},
    {1536 * KIB, "1536K"},
    {512 * MIB, "512M"},
    {GIB, "1G"},
    {3 * GIB, "3G"},
    {GIB + GIB / 2, "1536M"},
    {TIB, "1T"},
    {1024 * TIB, "1024T"}, /* no unit above T */
    {UINT64_MAX - TIB + 1, "16777215T"},
    {UINT64_MAX, "18446744073709551615"},
    {UINT64_C (1) << 63, "8388608T"},
  };
  char buf[32];

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      memset (buf, 'x', sizeof buf);
      sbx_format_size (cases[i].in, buf, sizeof buf);
      if (strcmp (buf, cases[i].want) != 0)
        {
          fprintf (stderr, "#   format %" PRIu64 ": got `%s`, want `%s`\n", cases[i].in, buf,
                   cases[i].want);
          return -1;
        }
    }
  return 0;
}

/* The buffer length is respected: truncated, NUL-terminated, nothing past. */
static int
test_format_size_truncates (void)
{
  char buf[8];

  memset (buf, 'x', sizeof buf);
  sbx_format_size (1024 * TIB, buf, 3);
  CHECK_STR (buf, "10");
  CHECK (buf[3] == 'x');
  memset (buf, 'x', sizeof buf);
  sbx_format_size (512 * MIB, buf, 1);
  CHECK (buf[0] == '\0' && buf[1] == 'x');
  memset (buf, 'x', sizeof buf);
  sbx_format_size (512 * MIB, buf, 0);
  CHECK (buf[0] == 'x');
  return 0;
}

/* Bounds in messages: exact when whole, else a tenth of the unit rounded
   so the value shown stays within the bound. */
static int
test_format_size_bound (void)
{
  static const struct
  {
    uint64_t in;
    int up;
    const char *want;
  } cases[] = {
    {16 * MIB, 1, "16M"},
    {16 * MIB, 0, "16M"},
    {24683664 * KIB, 0, "23.5G"},
    {24683664 * KIB, 1, "23.6G"},
    {256 * GIB, 0, "256G"},
    {1023, 0, "1023"},
    {1536, 0, "1.5K"},
    {1025, 0, "1K"},
    {1025, 1, "1.1K"},
    {2047, 1, "2K"},
    {2047, 0, "1.9K"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      char buf[32];
      uint64_t back = 0;
      sbx_format_size_bound (cases[i].in, cases[i].up, buf, sizeof buf);
      CHECK_STR (buf, cases[i].want);
      CHECK (sbx_parse_size (buf, &back, NULL) == 0);
      CHECK (cases[i].up ? back >= cases[i].in : back <= cases[i].in);
    }
  return 0;
}

/* Durations as messages show them, and the parser reads them back. */
static int
test_format_duration (void)
{
  static const struct
  {
    uint64_t in;
    const char *want;
  } cases[] = {
    {0, "0s"},
    {1, "1ms"},
    {1000, "1s"},
    {1500, "1s500ms"},
    {90000, "1m30s"},
    {86400000, "24h"},
    {3600000000ULL, "1000h"},
    {3661001, "1h1m1s1ms"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      char buf[48];
      uint64_t back = 0;
      sbx_format_duration_ms (cases[i].in, buf, sizeof buf);
      CHECK_STR (buf, cases[i].want);
      CHECK (sbx_parse_duration_ms (buf, &back, NULL) == 0 && back == cases[i].in);
    }
  return 0;
}

/* Whatever format_size writes, parse_size reads back exactly. */
static int
test_format_parse_round_trip (void)
{
  uint64_t state = 0x243f6a8885a308d3ULL;

  for (int i = 0; i < 20000; i++)
    {
      char buf[32];
      uint64_t v, back = 0;
      sbx_error_t *err = NULL;

      /* xorshift64, with a random number of low zero bits so that every
         unit shows up. */
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      v = state >> (state % 64);
      v <<= (state >> 58) % 44;
      sbx_format_size (v, buf, sizeof buf);
      if (sbx_parse_size (buf, &back, &err) < 0 || back != v)
        {
          fprintf (stderr, "#   %" PRIu64 " -> `%s` -> %" PRIu64 " (%s)\n", v, buf, back,
                   err ? err->msg : "ok");
          sbx_error_free (err);
          return -1;
        }
    }
  return 0;
}

/* E2B's maskRequestHost goes into a request head: only host[:port]
   characters and ${PORT}, nothing that ends a header line or starts
   another. */
static int
test_mask_host (void)
{
  static const char *const good[] = {"custom-host.example.com:${PORT}", "localhost", "${PORT}",
                                     "[::1]:8080", "a.b-c:${PORT}${PORT}"};
  static const char *const bad[]
      = {"", "a b", "host\r\nX-Evil: 1", "host\n", "h\tt", "h/p", "h@p", "${PORT", "$PORT",
         "${port}", "h%0d", "h\x7f", "h\xc3\xa9"};
  char buf[SBX_MASK_HOST_MAX + 64], big[SBX_MASK_HOST_MAX + 2];

  for (size_t i = 0; i < ARRAY_SIZE (good); i++)
    CHECK (sbx_mask_host_ok (good[i]));
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    CHECK (!sbx_mask_host_ok (bad[i]));
  CHECK (!sbx_mask_host_ok (NULL));
  memset (big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  CHECK (!sbx_mask_host_ok (big));
  big[SBX_MASK_HOST_MAX] = '\0';
  CHECK (sbx_mask_host_ok (big));
  sbx_mask_host_render ("custom-host.example.com:${PORT}", 8080, buf, sizeof buf);
  CHECK_STR (buf, "custom-host.example.com:8080");
  sbx_mask_host_render ("${PORT}-x.${PORT}", 65535, buf, sizeof buf);
  CHECK_STR (buf, "65535-x.65535");
  sbx_mask_host_render ("plain", 1, buf, sizeof buf);
  CHECK_STR (buf, "plain");
  /* Cut, never overrun, when the buffer is short. */
  sbx_mask_host_render ("abcdef", 1, buf, 4);
  CHECK_STR (buf, "abc");
  return 0;
}

int
main (void)
{
  RUN (test_size_units);
  RUN (test_size_suffix_spellings);
  RUN (test_size_fractions);
  RUN (test_size_limits);
  RUN (test_size_rejects);
  RUN (test_duration_units);
  RUN (test_duration_limits);
  RUN (test_duration_rejects);
  RUN (test_cpus);
  RUN (test_cpus_rejects);
  RUN (test_uint64);
  RUN (test_null_err);
  RUN (test_error_messages);
  RUN (test_format_size);
  RUN (test_format_size_truncates);
  RUN (test_format_parse_round_trip);
  RUN (test_format_size_bound);
  RUN (test_format_duration);
  RUN (test_mask_host);
  return tap_done ();
}
