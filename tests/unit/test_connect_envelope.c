/* Unit tests for src/server/connect_envelope.c: the Connect protocol's
 * 5-byte envelopes, read incrementally and written back.
 *
 * Every framing rule is checked with whole bodies and with the same bytes
 * fed one at a time (an HTTP body arrives in arbitrary chunks): unknown and
 * compression flags refused, the size limit enforced from the header alone,
 * bytes after the end-stream envelope refused, a body cut inside a header
 * or a payload reported by finish.
 */
#include "server/connect_envelope.h"

#include <stdint.h>

#include "tap.h"

#define MAX_MSGS 16

struct collected
{
  int n;
  uint8_t flags[MAX_MSGS];
  char data[MAX_MSGS][64];
  size_t len[MAX_MSGS];
};

/* Feed body in chunks of `chunk` bytes (0: all at once). Returns what
   read/finish returned last: 0 when the body was accepted to its end, -1
   on the first error, whose kind goes to *kind. */
static int
feed (const void *body, size_t body_len, size_t chunk, size_t max, struct collected *c,
      enum sbx_error_kind *kind, int *ended)
{
  struct sbx_connect_reader rd;
  struct sbx_connect_message m;
  sbx_error_t *err = NULL;
  const unsigned char *b = body;
  size_t off = 0;
  int rc = 0;

  memset (c, 0, sizeof *c);
  sbx_connect_reader_init (&rd, max);
  while (off < body_len && rc >= 0)
    {
      size_t n = chunk && chunk < body_len - off ? chunk : body_len - off;
      const void *p = b + off;
      size_t left = n;
      while ((rc = sbx_connect_read (&rd, &p, &left, &m, &err)) == 1)
        {
          if (c->n < MAX_MSGS && m.len < sizeof c->data[0])
            {
              c->flags[c->n] = m.flags;
              memcpy (c->data[c->n], m.data, m.len + 1); /* with its NUL */
              c->len[c->n] = m.len;
            }
          c->n++;
        }
      if (rc == 0 && left != 0)
        rc = -2; /* 0 must mean "all consumed" */
      off += n;
    }
  if (rc == 0)
    rc = sbx_connect_reader_finish (&rd, &err);
  *ended = sbx_connect_reader_ended (&rd);
  if (rc == -1)
    {
      *kind = err ? err->kind : 0;
      if (err == NULL)
        rc = -3; /* a failure must come with an error */
    }
  else if (err != NULL)
    rc = -4; /* and success without one */
  sbx_error_free (err);
  sbx_connect_reader_free (&rd);
  return rc;
}

/* The same body must give the same answer whole and byte by byte. */
#define FEED_BOTH(body, len, max, c, rc_want, kind_want)                       \
  do                                                                           \
    {                                                                          \
      size_t chunks_[] = {0, 1, 2, 3, 7};                                      \
      for (size_t i_ = 0; i_ < sizeof chunks_ / sizeof chunks_[0]; i_++)       \
        {                                                                      \
          enum sbx_error_kind k_ = 0;                                          \
          int e_;                                                              \
          int rc_ = feed ((body), (len), chunks_[i_], (max), (c), &k_, &e_);   \
          if (rc_ != (rc_want) || (rc_ < 0 && k_ != (kind_want)))              \
            {                                                                  \
              fprintf (stderr, "#   chunk %zu: rc %d kind %d\n", chunks_[i_],  \
                       rc_, (int) k_);                                         \
              return -1;                                                       \
            }                                                                  \
        }                                                                      \
    }                                                                          \
  while (0)

static int
test_one_request_envelope (void)
{
  static const unsigned char body[] = "\x00\x00\x00\x00\x0a{\"pid\":42}";
  struct collected c;
  enum sbx_error_kind k;
  int ended;

  FEED_BOTH (body, sizeof body - 1, 1024, &c, 0, 0);
  CHECK (feed (body, sizeof body - 1, 1, 1024, &c, &k, &ended) == 0);
  CHECK (c.n == 1);
  CHECK (c.flags[0] == 0);
  CHECK (c.len[0] == 10);
  CHECK_STR (c.data[0], "{\"pid\":42}");
  CHECK (!ended); /* a request body has no end-stream envelope */
  return 0;
}

static int
test_stream_with_end (void)
{
  static const unsigned char body[] = "\x00\x00\x00\x00\x02{}"
                                      "\x00\x00\x00\x00\x00"
                                      "\x02\x00\x00\x00\x02{}";
  struct collected c;
  enum sbx_error_kind k;
  int ended;

  FEED_BOTH (body, sizeof body - 1, 16, &c, 0, 0);
  CHECK (feed (body, sizeof body - 1, 3, 16, &c, &k, &ended) == 0);
  CHECK (c.n == 3);
  CHECK (c.len[1] == 0 && c.data[1][0] == '\0'); /* empty payloads are messages */
  CHECK (c.flags[2] == SBX_CONNECT_FLAG_END_STREAM);
  CHECK (ended);
  return 0;
}

static int
test_compressed_refused (void)
{
  static const unsigned char body[] = "\x01\x00\x00\x00\x02{}";
  struct collected c;

  FEED_BOTH (body, sizeof body - 1, 16, &c, -1, SBX_E_INVALID);
  CHECK (c.n == 0);
  return 0;
}

static int
test_unknown_flags_refused (void)
{
  static const unsigned char bits[] = {0x04, 0x08, 0x80, 0x06, 0xff};
  struct collected c;

  for (size_t i = 0; i < sizeof bits; i++)
    {
      unsigned char body[7] = {bits[i], 0, 0, 0, 2, '{', '}'};
      FEED_BOTH (body, sizeof body, 16, &c, -1, SBX_E_INVALID);
      CHECK (c.n == 0);
    }
  return 0;
}

static int
test_limit_from_header (void)
{
  /* 4 GiB - 1 announced, 2 bytes sent: refused at the header, no
     allocation of the announced size is tried (ASan would report it). */
  static const unsigned char huge[] = "\x00\xff\xff\xff\xff{}";
  static const unsigned char at_limit[] = "\x00\x00\x00\x00\x04" "abcd";
  static const unsigned char over[] = "\x00\x00\x00\x00\x05" "abcde";
  struct collected c;

  FEED_BOTH (huge, sizeof huge - 1, 1 << 20, &c, -1, SBX_E_TOO_LARGE);
  FEED_BOTH (at_limit, sizeof at_limit - 1, 4, &c, 0, 0);
  CHECK (c.n == 1);
  FEED_BOTH (over, sizeof over - 1, 4, &c, -1, SBX_E_TOO_LARGE);
  CHECK (c.n == 0);
  return 0;
}

static int
test_truncated (void)
{
  static const unsigned char in_header[] = "\x00\x00\x00\x00\x02{}\x00\x00";
  static const unsigned char in_payload[] = "\x00\x00\x00\x00\x0a{\"a\":";
  struct collected c;

  FEED_BOTH (in_header, sizeof in_header - 1, 16, &c, -1, SBX_E_INVALID);
  CHECK (c.n == 1); /* the whole first message was still delivered */
  FEED_BOTH (in_payload, sizeof in_payload - 1, 16, &c, -1, SBX_E_INVALID);
  CHECK (c.n == 0);
  FEED_BOTH ("", 0, 16, &c, 0, 0); /* an empty body is not cut short */
  CHECK (c.n == 0);
  return 0;
}

static int
test_data_after_end_refused (void)
{
  static const unsigned char body[] = "\x02\x00\x00\x00\x00"
                                      "\x00";
  struct collected c;

  FEED_BOTH (body, sizeof body - 1, 16, &c, -1, SBX_E_INVALID);
  CHECK (c.n == 1);
  return 0;
}

static int
test_failed_reader_stays_failed (void)
{
  static const unsigned char bad[] = "\x80\x00\x00\x00\x00";
  static const unsigned char good[] = "\x00\x00\x00\x00\x00";
  struct sbx_connect_reader rd;
  struct sbx_connect_message m;
  sbx_error_t *err = NULL;
  const void *p = bad;
  size_t n = 5;

  sbx_connect_reader_init (&rd, 16);
  CHECK (sbx_connect_read (&rd, &p, &n, &m, &err) == -1 && err != NULL);
  sbx_error_free (err);
  err = NULL;
  p = good;
  n = 5;
  CHECK (sbx_connect_read (&rd, &p, &n, &m, &err) == -1 && err != NULL);
  sbx_error_free (err);
  err = NULL;
  CHECK (sbx_connect_reader_finish (&rd, &err) == -1 && err != NULL);
  sbx_error_free (err);
  sbx_connect_reader_free (&rd);
  return 0;
}

static int
test_encode_round_trip (void)
{
  struct sbx_buf out = SBX_BUF_INIT;
  struct collected c;
  sbx_error_t *err = NULL;
  unsigned char h[5];
  enum sbx_error_kind k;
  int ended;

  sbx_connect_header (h, 0, 0x01020304u);
  CHECK (memcmp (h, "\x00\x01\x02\x03\x04", 5) == 0);
  CHECK (sbx_connect_encode (&out, 0, "{\"event\":{}}", 12, &err) == 0);
  CHECK (sbx_connect_encode (&out, 0, NULL, 0, &err) == 0);
  CHECK (sbx_connect_encode (&out, SBX_CONNECT_FLAG_END_STREAM, "{}", 2, &err) == 0);
  CHECK (out.len == 5 + 12 + 5 + 0 + 5 + 2);
  CHECK (feed (out.data, out.len, 1, 64, &c, &k, &ended) == 0);
  CHECK (c.n == 3 && ended);
  CHECK_STR (c.data[0], "{\"event\":{}}");
  CHECK (c.len[1] == 0);
  CHECK_STR (c.data[2], "{}");
  /* We never send compressed or unknown flags. */
  CHECK (sbx_connect_encode (&out, SBX_CONNECT_FLAG_COMPRESSED, "x", 1, &err) == -1);
  CHECK (err != NULL && err->kind == SBX_E_INVALID);
  sbx_error_free (err);
  err = NULL;
  CHECK (sbx_connect_encode (&out, 0x40, "x", 1, &err) == -1);
  sbx_error_free (err);
  sbx_buf_free (&out);
  return 0;
}

int
main (void)
{
  RUN (test_one_request_envelope);
  RUN (test_stream_with_end);
  RUN (test_compressed_refused);
  RUN (test_unknown_flags_refused);
  RUN (test_limit_from_header);
  RUN (test_truncated);
  RUN (test_data_after_end_refused);
  RUN (test_failed_reader_stays_failed);
  RUN (test_encode_round_trip);
  return tap_done ();
}
