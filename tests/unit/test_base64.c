/* Unit tests for src/util/base64.c: RFC 4648 section 10 vectors, every
 * padding case, the alphabet's edges, and malformed input, which must
 * leave the output buffer exactly as it was.
 */
#include "util/base64.h"

#include <stdint.h>

#include "tap.h"
#include "util/buf.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

struct vector
{
  const char *raw;
  size_t raw_len;
  const char *enc;
};

#define V(raw, enc) {raw, sizeof raw - 1, enc}

/* RFC 4648, section 10, plus the bytes that reach the top of the alphabet. */
static const struct vector vectors[] = {
  V ("", ""),
  V ("f", "Zg=="),
  V ("fo", "Zm8="),
  V ("foo", "Zm9v"),
  V ("foob", "Zm9vYg=="),
  V ("fooba", "Zm9vYmE="),
  V ("foobar", "Zm9vYmFy"),
  V ("\0", "AA=="),
  V ("\0\0", "AAA="),
  V ("\0\0\0", "AAAA"),
  V ("\xff", "/w=="),
  V ("\xff\xff", "//8="),
  V ("\xff\xff\xff", "////"),
  V ("\xfb\xff", "+/8="),
  V ("\xfb\xef\xbe", "++++"),
  V ("\x14\xfb\x9c\x03\xd9\x7e", "FPucA9l+"),
  V ("\x14\xfb\x9c\x03\xd9", "FPucA9k="),
  V ("\x14\xfb\x9c\x03", "FPucAw=="),
  V ("Man", "TWFu"),
  V ("hello, world\n", "aGVsbG8sIHdvcmxkCg=="),
};

/*============================ Helpers ================================== */

/* Decode s into a buffer that already holds "prefix": on failure the
   buffer must still be exactly "prefix". */
static int
decode_fails_cleanly (const char *s, size_t n)
{
  struct sbx_buf b = SBX_BUF_INIT;
  int ok;

  sbx_buf_append (&b, "prefix", 6);
  ok = sbx_base64_decode (&b, s, n) == -1 && b.len == 6 && memcmp (b.data, "prefix", 7) == 0;
  if (!ok)
    fprintf (stderr, "#   `%.*s` (%zu bytes): not rejected cleanly (len %zu)\n", (int) n, s, n,
             b.len);
  sbx_buf_free (&b);
  return ok ? 0 : -1;
}

/*============================ Tests ==================================== */

static int
test_encode_vectors (void)
{
  for (size_t i = 0; i < ARRAY_SIZE (vectors); i++)
    {
      struct sbx_buf b = SBX_BUF_INIT;

      sbx_base64_encode (&b, vectors[i].raw, vectors[i].raw_len);
      CHECK (b.len == strlen (vectors[i].enc));
      CHECK (sbx_base64_encoded_len (vectors[i].raw_len) == b.len);
      if (b.len > 0)
        CHECK_STR (b.data, vectors[i].enc);
      sbx_buf_free (&b);
    }
  return 0;
}

static int
test_decode_vectors (void)
{
  for (size_t i = 0; i < ARRAY_SIZE (vectors); i++)
    {
      struct sbx_buf b = SBX_BUF_INIT;

      CHECK (sbx_base64_decode (&b, vectors[i].enc, strlen (vectors[i].enc)) == 0);
      CHECK (b.len == vectors[i].raw_len);
      CHECK (b.len == 0 || memcmp (b.data, vectors[i].raw, b.len) == 0);
      CHECK (b.data == NULL || b.data[b.len] == '\0');
      sbx_buf_free (&b);
    }
  return 0;
}

static int
test_encoded_len (void)
{
  CHECK (sbx_base64_encoded_len (0) == 0);
  CHECK (sbx_base64_encoded_len (1) == 4);
  CHECK (sbx_base64_encoded_len (2) == 4);
  CHECK (sbx_base64_encoded_len (3) == 4);
  CHECK (sbx_base64_encoded_len (4) == 8);
  CHECK (sbx_base64_encoded_len (65536) == 87384);
  return 0;
}

/* Encoding and decoding append: earlier content stays. */
static int
test_appends (void)
{
  struct sbx_buf b = SBX_BUF_INIT;

  sbx_buf_append (&b, "x:", 2);
  sbx_base64_encode (&b, "fo", 2);
  sbx_base64_encode (&b, "o", 1);
  CHECK_STR (b.data, "x:Zm8=bw==");
  sbx_buf_reset (&b);
  sbx_buf_append (&b, "y:", 2);
  CHECK (sbx_base64_decode (&b, "Zm8=", 4) == 0);
  CHECK (sbx_base64_decode (&b, "bw==", 4) == 0);
  CHECK (b.len == 5);
  CHECK_STR (b.data, "y:foo");
  sbx_buf_free (&b);
  return 0;
}

/* Every byte value in every position of a quantum, and every length from
   0 to 300, survives the round trip. */
static int
test_round_trip (void)
{
  unsigned char raw[300];

  for (size_t i = 0; i < sizeof raw; i++)
    raw[i] = (unsigned char) (i * 167 + 13);
  for (size_t n = 0; n <= sizeof raw; n++)
    {
      struct sbx_buf enc = SBX_BUF_INIT, dec = SBX_BUF_INIT;

      sbx_base64_encode (&enc, raw, n);
      CHECK (enc.len == sbx_base64_encoded_len (n));
      CHECK (sbx_base64_decode (&dec, enc.data, enc.len) == 0);
      CHECK (dec.len == n);
      CHECK (n == 0 || memcmp (dec.data, raw, n) == 0);
      sbx_buf_free (&enc);
      sbx_buf_free (&dec);
    }
  for (unsigned v = 0; v < 256; v++)
    for (int pos = 0; pos < 3; pos++)
      {
        unsigned char q[3] = {0x55, 0xaa, 0x0f};
        struct sbx_buf enc = SBX_BUF_INIT, dec = SBX_BUF_INIT;

        q[pos] = (unsigned char) v;
        sbx_base64_encode (&enc, q, 3);
        CHECK (sbx_base64_decode (&dec, enc.data, enc.len) == 0);
        CHECK (dec.len == 3 && memcmp (dec.data, q, 3) == 0);
        sbx_buf_free (&enc);
        sbx_buf_free (&dec);
      }
  return 0;
}

/* Only the 64 alphabet characters (and '=' as padding) decode. */
static int
test_alphabet (void)
{
  static const char alphabet[]
      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

  for (int c = 0; c < 256; c++)
    {
      char quad[4] = {'Q', 'U', 'J', 'D'}; /* "QUJD" = "ABC" */
      struct sbx_buf b = SBX_BUF_INIT;
      int in_alphabet = c != 0 && strchr (alphabet, c) != NULL;
      int rc;

      quad[1] = (char) c;
      rc = sbx_base64_decode (&b, quad, 4);
      if (in_alphabet)
        {
          CHECK (rc == 0);
          CHECK (b.len == 3);
          /* The second sextet lands in bits 12..17 of the 24. */
          CHECK ((((unsigned char) b.data[0] & 3) << 4 | (unsigned char) b.data[1] >> 4)
                 == strchr (alphabet, c) - alphabet);
        }
      else
        CHECK (rc == -1 && b.len == 0);
      sbx_buf_free (&b);
    }
  return 0;
}

static int
test_rejects_malformed (void)
{
  static const char *const bad[] = {
    "Zg",       /* padding is required */
    "Zg=",      /* length not a multiple of 4 */
    "Zm9",      "Z",        "Zm9vY",     "Zm9vYmFy=",
    "====",     "A===",     "=AAA",      "AA=A",      "A=AA",   "Z=g=",
    "Zg==Zm8=", /* padding before the end */
    "Zm8=Zm9v", "Zg==AAAA", "AAA=AAAA",
    "Zm9v\n",   "Zm 9",     " Zm9",      "Zm9v ",     "Zm9v\r\nYmFy",
    "Zm-v",     "Zm_v",     /* base64url is another alphabet */
    "Zm9v!!!!", "Zm9vYmF\x80", "\xff\xff\xff\xff", "Zm.v",
  };

  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    if (decode_fails_cleanly (bad[i], strlen (bad[i])) < 0)
      return -1;
  /* A NUL inside is not an alphabet character either. */
  CHECK (decode_fails_cleanly ("Zm\0v", 4) == 0);
  CHECK (decode_fails_cleanly ("Zm9vZm\0=", 8) == 0);
  return 0;
}

/* A failure late in a long input undoes what the earlier quanta appended,
   even when that made the buffer grow. */
static int
test_failure_rolls_back (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  char enc[4004];
  size_t n = 0;

  for (int i = 0; i < 1000; i++)
    {
      memcpy (enc + n, "Zm9v", 4);
      n += 4;
    }
  memcpy (enc + n, "Zm9!", 4);
  n += 4;
  CHECK (decode_fails_cleanly (enc, n) == 0);

  /* Starting from an unallocated buffer: empty again afterwards. */
  CHECK (sbx_base64_decode (&b, enc, n) == -1);
  CHECK (b.len == 0);
  CHECK (b.data == NULL || b.data[0] == '\0');
  sbx_buf_free (&b);
  return 0;
}

/* Non-zero bits below the padding ("Zh==" instead of "Zg==") are
   tolerated: the decoder drops them (RFC 4648 3.5 allows either). */
static int
test_noncanonical_tail_bits (void)
{
  struct sbx_buf b = SBX_BUF_INIT;

  CHECK (sbx_base64_decode (&b, "Zh==", 4) == 0);
  CHECK (b.len == 1 && b.data[0] == 'f');
  sbx_buf_reset (&b);
  CHECK (sbx_base64_decode (&b, "Zm9=", 4) == 0);
  CHECK (b.len == 2 && memcmp (b.data, "fo", 2) == 0);
  sbx_buf_free (&b);
  return 0;
}

int
main (void)
{
  RUN (test_encode_vectors);
  RUN (test_decode_vectors);
  RUN (test_encoded_len);
  RUN (test_appends);
  RUN (test_round_trip);
  RUN (test_alphabet);
  RUN (test_rejects_malformed);
  RUN (test_failure_rolls_back);
  RUN (test_noncanonical_tail_bits);
  return tap_done ();
}
