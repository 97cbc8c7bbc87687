/* Unit tests for src/util/utf8.c: making process output valid UTF-8 for
 * JSON. Valid sequences pass through untouched; every byte that does not
 * start a complete, shortest-form, non-surrogate sequence <= U+10FFFF
 * becomes U+FFFD; an incomplete sequence at the end of a chunk is held
 * back unless the chunk is the last.
 *
 * Besides fixed cases, the output is compared with an independent
 * reference built from Table 3-7 of the Unicode standard ("Well-Formed
 * UTF-8 Byte Sequences") over random input, whole and cut into chunks at
 * every position.
 */
#include "util/utf8.h"

#include <stdint.h>

#include "tap.h"
#include "util/buf.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))
#define FFFD "\xef\xbf\xbd"

struct utf8_case
{
  const char *in;
  size_t in_len;
  const char *out;
  size_t out_len;
};

#define U(in, out) {in, sizeof in - 1, out, sizeof out - 1}

/*============================ Helpers ================================== */

/* Table 3-7: the length of the well-formed sequence at s, or 0. */
static size_t
reference_sequence (const unsigned char *s, size_t left)
{
  static const struct
  {
    unsigned char lead_lo, lead_hi, second_lo, second_hi;
    size_t len;
  } rows[] = {
    {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3}, {0xE1, 0xEC, 0x80, 0xBF, 3},
    {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3}, {0xF0, 0xF0, 0x90, 0xBF, 4},
    {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4},
  };

  if (s[0] < 0x80)
    return 1;
  for (size_t r = 0; r < ARRAY_SIZE (rows); r++)
    {
      if (s[0] < rows[r].lead_lo || s[0] > rows[r].lead_hi)
        continue;
      if (left < rows[r].len || s[1] < rows[r].second_lo || s[1] > rows[r].second_hi)
        return 0;
      for (size_t k = 2; k < rows[r].len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
          return 0;
      return rows[r].len;
    }
  return 0;
}

/* The whole-input (final) result, per byte. */
static void
reference_sanitize (struct sbx_buf *out, const unsigned char *s, size_t len)
{
  size_t i = 0;

  while (i < len)
    {
      size_t n = reference_sequence (s + i, len - i);
      if (n > 0)
        {
          sbx_buf_append (out, s + i, n);
          i += n;
        }
      else
        {
          sbx_buf_append (out, FFFD, 3);
          i++;
        }
    }
}

/* One call; compares output and consumed count. */
static int
check_one (const char *in, size_t in_len, int final, const char *want, size_t want_len,
           size_t want_consumed)
{
  struct sbx_buf b = SBX_BUF_INIT;
  size_t consumed = sbx_utf8_sanitize (&b, in, in_len, final);
  int ok = consumed == want_consumed && b.len == want_len
           && (want_len == 0 || memcmp (b.data, want, want_len) == 0);

  if (!ok)
    {
      fprintf (stderr, "#   input (%zu bytes, final=%d):", in_len, final);
      for (size_t i = 0; i < in_len; i++)
        fprintf (stderr, " %02x", (unsigned char) in[i]);
      fprintf (stderr, "\n#   consumed %zu (want %zu), output:", consumed, want_consumed);
      for (size_t i = 0; i < b.len; i++)
        fprintf (stderr, " %02x", (unsigned char) b.data[i]);
      fprintf (stderr, "\n");
    }
  sbx_buf_free (&b);
  return ok ? 0 : -1;
}

static int
check_cases (const struct utf8_case *cases, size_t n, int final)
{
  for (size_t i = 0; i < n; i++)
    if (check_one (cases[i].in, cases[i].in_len, final, cases[i].out, cases[i].out_len,
                   cases[i].in_len)
        < 0)
      return -1;
  return 0;
}

/* Feed `in` cut at `cut` the way the daemon feeds pipe reads: the
   unconsumed tail of a chunk is prepended to the next one. */
static void
sanitize_in_two (struct sbx_buf *out, const unsigned char *in, size_t len, size_t cut)
{
  struct sbx_buf carry = SBX_BUF_INIT;
  size_t used = sbx_utf8_sanitize (out, in, cut, 0);

  sbx_buf_append (&carry, in + used, len - used);
  sbx_utf8_sanitize (out, carry.data, carry.len, 1);
  sbx_buf_free (&carry);
}

static uint64_t
next_random (uint64_t *state)
{
  uint64_t z = (*state += UINT64_C (0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Random bytes that are mostly near the interesting boundaries. */
static void
random_bytes (uint64_t *state, unsigned char *p, size_t n)
{
  static const unsigned char interesting[] = {
    0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
    0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
  };

  for (size_t i = 0; i < n; i++)
    {
      uint64_t r = next_random (state);
      p[i] = r % 3 == 0 ? (unsigned char) (r >> 8) : interesting[(r >> 8) % sizeof interesting];
    }
}

/*============================ Tests ==================================== */

static int
test_valid_passes_through (void)
{
  static const struct utf8_case cases[] = {
    U ("", ""),
    U ("hello, world\n", "hello, world\n"),
    U ("a\0b", "a\0b"), /* NUL is valid UTF-8 */
    U ("\x7f", "\x7f"),
    U ("\xc2\x80", "\xc2\x80"),         /* U+0080 */
    U ("\xc3\xa9", "\xc3\xa9"),         /* é */
    U ("\xdf\xbf", "\xdf\xbf"),         /* U+07FF */
    U ("\xe0\xa0\x80", "\xe0\xa0\x80"), /* U+0800 */
    U ("\xe2\x82\xac", "\xe2\x82\xac"), /* € */
    U ("\xed\x9f\xbf", "\xed\x9f\xbf"), /* U+D7FF, just below the surrogates */
    U ("\xee\x80\x80", "\xee\x80\x80"), /* U+E000, just above */
    U ("\xef\xbf\xbd", "\xef\xbf\xbd"), /* U+FFFD itself */
    U ("\xef\xbf\xbf", "\xef\xbf\xbf"), /* U+FFFF */
    U ("\xf0\x90\x80\x80", "\xf0\x90\x80\x80"), /* U+10000 */
    U ("\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"), /* 😀 */
    U ("\xf3\xbf\xbf\xbf", "\xf3\xbf\xbf\xbf"), /* U+FFFFF */
    U ("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"), /* U+10FFFF, the last */
    U ("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z", "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z"),
  };

  if (check_cases (cases, ARRAY_SIZE (cases), 1) < 0)
    return -1;
  return check_cases (cases, ARRAY_SIZE (cases), 0);
}

static int
test_overlongs (void)
{
  static const struct utf8_case cases[] = {
    U ("\xc0\x80", FFFD FFFD),                 /* NUL in two bytes */
    U ("\xc0\xaf", FFFD FFFD),                 /* '/' in two bytes */
    U ("\xc1\xbf", FFFD FFFD),                 /* U+007F in two bytes */
    U ("\xe0\x80\x80", FFFD FFFD FFFD),        /* NUL in three */
    U ("\xe0\x80\xaf", FFFD FFFD FFFD),
    U ("\xe0\x9f\xbf", FFFD FFFD FFFD),        /* U+07FF in three */
    U ("\xf0\x80\x80\x80", FFFD FFFD FFFD FFFD),
    U ("\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD),
    U ("\xf0\x8f\xbf\xbf", FFFD FFFD FFFD FFFD), /* U+FFFF in four */
    U ("\xf8\x88\x80\x80\x80", FFFD FFFD FFFD FFFD FFFD),   /* old 5-byte form */
    U ("\xfc\x84\x80\x80\x80\x80", FFFD FFFD FFFD FFFD FFFD FFFD),
  };

  return check_cases (cases, ARRAY_SIZE (cases), 1);
}

static int
test_surrogates_and_range (void)
{
  static const struct utf8_case cases[] = {
    U ("\xed\xa0\x80", FFFD FFFD FFFD), /* U+D800 */
    U ("\xed\xad\xbf", FFFD FFFD FFFD), /* U+DB7F */
    U ("\xed\xb0\x80", FFFD FFFD FFFD), /* U+DC00 */
    U ("\xed\xbf\xbf", FFFD FFFD FFFD), /* U+DFFF */
    /* A CESU-8 pair for U+10000. */
    U ("\xed\xa0\x80\xed\xb0\x80", FFFD FFFD FFFD FFFD FFFD FFFD),
    U ("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD), /* U+110000 */
    U ("\xf4\xbf\xbf\xbf", FFFD FFFD FFFD FFFD),
    U ("\xf5\x80\x80\x80", FFFD FFFD FFFD FFFD),
    U ("\xf7\xbf\xbf\xbf", FFFD FFFD FFFD FFFD), /* U+1FFFFF */
    U ("\xfe", FFFD),
    U ("\xff", FFFD),
    U ("\xff\xfe\x41", FFFD FFFD "A"),
  };

  return check_cases (cases, ARRAY_SIZE (cases), 1);
}

/* Stray continuation bytes and sequences cut off by another character:
   every byte that is not part of a whole sequence is replaced on its own,
   and what follows is decoded normally. */
static int
test_broken_sequences (void)
{
  static const struct utf8_case cases[] = {
    U ("\x80", FFFD),
    U ("\xbf", FFFD),
    U ("\x80\x80\x80", FFFD FFFD FFFD),
    U ("a\x80z", "a" FFFD "z"),
    U ("\xc3", FFFD),
    U ("\xc3" "A", FFFD "A"),
    U ("\xc3\xc3\xa9", FFFD "\xc3\xa9"),
    U ("\xe2\x82" "A", FFFD FFFD "A"),
    U ("\xe2\x82\xe2\x82\xac", FFFD FFFD "\xe2\x82\xac"),
    U ("\xf0\x9f\x98" "A", FFFD FFFD FFFD "A"),
    U ("\xf0\x9f\x98\xf0\x9f\x98\x80", FFFD FFFD FFFD "\xf0\x9f\x98\x80"),
    U ("\xe2\x82\xac\x80", "\xe2\x82\xac" FFFD), /* one continuation too many */
    U ("\xc3\xa9\xa9", "\xc3\xa9" FFFD),
    U ("\xe2\x28\xa1", FFFD "(" FFFD),
  };

  return check_cases (cases, ARRAY_SIZE (cases), 1);
}

/* Not final: an incomplete sequence at the very end is left unconsumed and
   nothing is written for it; one that can no longer become valid is
   replaced right away. */
static int
test_incomplete_tail (void)
{
  /* Held back. */
  CHECK (check_one ("\xc3", 1, 0, "", 0, 0) == 0);
  CHECK (check_one ("ab\xc3", 3, 0, "ab", 2, 2) == 0);
  CHECK (check_one ("ab\xe2", 3, 0, "ab", 2, 2) == 0);
  CHECK (check_one ("ab\xe2\x82", 4, 0, "ab", 2, 2) == 0);
  CHECK (check_one ("ab\xf0", 3, 0, "ab", 2, 2) == 0);
  CHECK (check_one ("ab\xf0\x9f", 4, 0, "ab", 2, 2) == 0);
  CHECK (check_one ("ab\xf0\x9f\x98", 5, 0, "ab", 2, 2) == 0);
  CHECK (check_one ("\xe0\xa0", 2, 0, "", 0, 0) == 0);
  CHECK (check_one ("\xf4\x8f\xbf", 3, 0, "", 0, 0) == 0);
  CHECK (check_one ("\x80\xc3", 2, 0, FFFD, 3, 1) == 0);
  /* Already invalid: replaced and consumed. */
  CHECK (check_one ("ab\xe0\x80", 4, 0, "ab" FFFD FFFD, 8, 4) == 0);
  CHECK (check_one ("ab\xed\xa0", 4, 0, "ab" FFFD FFFD, 8, 4) == 0);
  CHECK (check_one ("ab\xf0\x80", 4, 0, "ab" FFFD FFFD, 8, 4) == 0);
  CHECK (check_one ("ab\xf4\x90", 4, 0, "ab" FFFD FFFD, 8, 4) == 0);
  CHECK (check_one ("ab\xf5", 3, 0, "ab" FFFD, 5, 3) == 0);
  CHECK (check_one ("ab\xc0", 3, 0, "ab" FFFD, 5, 3) == 0);
  CHECK (check_one ("ab\x80", 3, 0, "ab" FFFD, 5, 3) == 0);
  CHECK (check_one ("ab\xe2\x41", 4, 0, "ab" FFFD "A", 6, 4) == 0);
  /* Only the end counts: an incomplete sequence in the middle is invalid. */
  CHECK (check_one ("\xe2\x82" "ab", 4, 0, FFFD FFFD "ab", 8, 4) == 0);
  return 0;
}

/* Final: the incomplete tail is replaced, byte by byte. */
static int
test_incomplete_tail_final (void)
{
  CHECK (check_one ("\xc3", 1, 1, FFFD, 3, 1) == 0);
  CHECK (check_one ("ab\xe2\x82", 4, 1, "ab" FFFD FFFD, 8, 4) == 0);
  CHECK (check_one ("ab\xf0\x9f\x98", 5, 1, "ab" FFFD FFFD FFFD, 11, 5) == 0);
  return 0;
}

/* The output is appended to what the buffer holds. */
static int
test_appends (void)
{
  struct sbx_buf b = SBX_BUF_INIT;

  sbx_buf_append (&b, "x", 1);
  CHECK (sbx_utf8_sanitize (&b, "\xc3\xa9\xff", 3, 1) == 3);
  CHECK (b.len == 6 && memcmp (b.data, "x\xc3\xa9" FFFD, 6) == 0);
  CHECK (b.data[b.len] == '\0');
  sbx_buf_free (&b);
  CHECK (sbx_utf8_sanitize (&b, "", 0, 1) == 0);
  CHECK (b.len == 0);
  sbx_buf_free (&b);
  return 0;
}

/* A text with one- to four-byte characters, cut at every position: the
   same output as in one piece, and nothing replaced. */
static int
test_chunk_boundaries (void)
{
  static const char text[] = "a\xc3\xa9z\xe2\x82\xac\xf0\x9f\x98\x80\xc2\x80\xf4\x8f\xbf\xbf"
                             "\xed\x9f\xbf" "end";
  const size_t len = sizeof text - 1;

  for (size_t cut = 0; cut <= len; cut++)
    {
      struct sbx_buf b = SBX_BUF_INIT;

      sanitize_in_two (&b, (const unsigned char *) text, len, cut);
      if (b.len != len || memcmp (b.data, text, len) != 0)
        {
          fprintf (stderr, "#   cut at %zu: output differs\n", cut);
          sbx_buf_free (&b);
          return -1;
        }
      sbx_buf_free (&b);
    }
  return 0;
}

/* One byte at a time, as a slow pipe might deliver it. */
static int
test_byte_by_byte (void)
{
  static const char text[] = "\xf0\x9f\x98\x80\xe2\x82\xac\xc3\xa9\xff\xe2\x82" "A";
  static const char want[] = "\xf0\x9f\x98\x80\xe2\x82\xac\xc3\xa9" FFFD FFFD FFFD "A";
  struct sbx_buf out = SBX_BUF_INIT, carry = SBX_BUF_INIT;

  for (size_t i = 0; i < sizeof text - 1; i++)
    {
      size_t used;

      sbx_buf_append (&carry, text + i, 1);
      used = sbx_utf8_sanitize (&out, carry.data, carry.len, 0);
      sbx_buf_consume (&carry, used);
      CHECK (carry.len < 4);
    }
  sbx_utf8_sanitize (&out, carry.data, carry.len, 1);
  CHECK (out.len == sizeof want - 1);
  CHECK (memcmp (out.data, want, out.len) == 0);
  sbx_buf_free (&out);
  sbx_buf_free (&carry);
  return 0;
}

/* Random input: the result equals the reference, whole or in two chunks
   cut anywhere, and never holds back more than three bytes. */
static int
test_against_reference (void)
{
  uint64_t state = 42;
  unsigned char in[64];

  for (int round = 0; round < 3000; round++)
    {
      struct sbx_buf want = SBX_BUF_INIT, got = SBX_BUF_INIT;
      size_t len = (size_t) (next_random (&state) % sizeof in);

      random_bytes (&state, in, len);
      reference_sanitize (&want, in, len);
      CHECK (sbx_utf8_sanitize (&got, in, len, 1) == len);
      if (got.len != want.len || (got.len && memcmp (got.data, want.data, got.len) != 0))
        {
          fprintf (stderr, "#   round %d: whole input differs from the reference\n", round);
          return -1;
        }
      for (size_t cut = 0; cut <= len; cut++)
        {
          struct sbx_buf part = SBX_BUF_INIT;
          size_t used = sbx_utf8_sanitize (&part, in, cut, 0);

          CHECK (used <= cut && cut - used <= 3);
          sbx_buf_reset (&part);
          sanitize_in_two (&part, in, len, cut);
          if (part.len != want.len || (part.len && memcmp (part.data, want.data, part.len) != 0))
            {
              fprintf (stderr, "#   round %d, cut %zu: chunked output differs\n", round, cut);
              return -1;
            }
          sbx_buf_free (&part);
        }
      sbx_buf_free (&want);
      sbx_buf_free (&got);
    }
  return 0;
}

int
main (void)
{
  RUN (test_valid_passes_through);
  RUN (test_overlongs);
  RUN (test_surrogates_and_range);
  RUN (test_broken_sequences);
  RUN (test_incomplete_tail);
  RUN (test_incomplete_tail_final);
  RUN (test_appends);
  RUN (test_chunk_boundaries);
  RUN (test_byte_by_byte);
  RUN (test_against_reference);
  return tap_done ();
}
