/* Fuzz target: the Connect envelope reader (server/connect_envelope.c).
 *
 * Input: [limit selector u8][chunking seed u8][body...]. The body is read
 * twice, whole and in chunks of pseudo-random sizes (zero-length feeds
 * included), and both readings must match a plain reference parser
 * written here: the same messages, the same outcome (accepted, refused
 * with the same kind of error, or cut short). The messages accepted must
 * re-encode, with sbx_connect_encode, to exactly the bytes they came from.
 */
#include "fuzz.h"
#include "server/connect_envelope.h"

#define MAX_MSGS 4096

enum outcome
{
  OK,        /* every byte read, no envelope open */
  CUT,       /* the body ended inside an envelope */
  REFUSED,   /* SBX_E_INVALID */
  TOO_LARGE, /* SBX_E_TOO_LARGE */
};

struct result
{
  enum outcome outcome;
  size_t n;
  size_t off[MAX_MSGS]; /* where each envelope started */
  uint8_t flags[MAX_MSGS];
  uint32_t len[MAX_MSGS];
  int ended;
};

static struct result ref, whole, chunked;

static void
reference (const uint8_t *b, size_t n, size_t max, struct result *r)
{
  size_t pos = 0;

  r->n = 0;
  r->ended = 0;
  for (;;)
    {
      uint32_t len;
      if (r->ended && pos < n)
        {
          r->outcome = REFUSED;
          return;
        }
      if (n - pos < 5)
        {
          r->outcome = pos == n ? OK : CUT;
          return;
        }
      len = (uint32_t) b[pos + 1] << 24 | (uint32_t) b[pos + 2] << 16 | (uint32_t) b[pos + 3] << 8
            | b[pos + 4];
      if (b[pos] & ~0x02u)
        {
          r->outcome = REFUSED;
          return;
        }
      if (len > max)
        {
          r->outcome = TOO_LARGE;
          return;
        }
      if (n - pos - 5 < len)
        {
          r->outcome = CUT;
          return;
        }
      if (r->n == MAX_MSGS)
        abort (); /* cannot happen with -max_len below 5 * MAX_MSGS */
      r->off[r->n] = pos;
      r->flags[r->n] = b[pos];
      r->len[r->n] = len;
      r->n++;
      r->ended = (b[pos] & 0x02) != 0;
      pos += 5 + len;
    }
}

/* Read b in chunks from next_chunk (NULL: one chunk). */
static void
read_body (const uint8_t *b, size_t n, size_t max, unsigned seed, struct result *r)
{
  struct sbx_connect_reader rd;
  struct sbx_connect_message m;
  sbx_error_t *err = NULL;
  size_t pos = 0;
  int rc = 0;

  /* Not memset: the arrays are large and only [0, n) is read. */
  r->n = 0;
  r->outcome = OK;
  r->ended = 0;
  sbx_connect_reader_init (&rd, max);
  while (rc >= 0 && (pos < n || (seed && pos == n)))
    {
      /* A small LCG: chunks of 0..16 bytes, or everything at once. */
      size_t take = n - pos;
      const void *p = b + pos;
      size_t left;
      if (seed)
        {
          seed = seed * 1103515245u + 12345u;
          take = (seed >> 16) % 17;
          if (take > n - pos)
            take = n - pos;
        }
      left = take;
      while ((rc = sbx_connect_read (&rd, &p, &left, &m, &err)) == 1)
        {
          size_t i = r->n;
          FUZZ_ASSERT (i < MAX_MSGS);
          FUZZ_ASSERT (m.data != NULL && m.data[m.len] == '\0');
          FUZZ_ASSERT (m.len <= max);
          FUZZ_ASSERT (m.end_stream == ((m.flags & SBX_CONNECT_FLAG_END_STREAM) != 0));
          r->flags[i] = m.flags;
          r->len[i] = (uint32_t) m.len;
          /* The payload is the input's bytes; its envelope ends where the
             reader stopped consuming. */
          r->off[i] = (size_t) ((const uint8_t *) p - b) - 5 - m.len;
          FUZZ_ASSERT (memcmp (m.data, b + r->off[i] + 5, m.len) == 0);
          r->n++;
        }
      FUZZ_ASSERT (rc != 0 || left == 0); /* 0 means every byte was taken */
      if (rc < 0)
        {
          FUZZ_ASSERT (err != NULL);
          r->outcome = err->kind == SBX_E_TOO_LARGE ? TOO_LARGE : REFUSED;
          FUZZ_ASSERT (err->kind == SBX_E_TOO_LARGE || err->kind == SBX_E_INVALID);
          sbx_error_free (err);
          err = NULL;
        }
      pos += take;
      if (seed && pos == n)
        break;
    }
  if (rc >= 0)
    {
      FUZZ_ASSERT (err == NULL);
      if (sbx_connect_reader_finish (&rd, &err) < 0)
        {
          FUZZ_ASSERT (err != NULL && err->kind == SBX_E_INVALID);
          r->outcome = CUT;
          sbx_error_free (err);
        }
      else
        FUZZ_ASSERT (err == NULL);
    }
  else
    {
      /* A failed reader stays failed. */
      FUZZ_ASSERT (sbx_connect_reader_finish (&rd, &err) == -1 && err != NULL);
      sbx_error_free (err);
    }
  r->ended = sbx_connect_reader_ended (&rd);
  sbx_connect_reader_free (&rd);
}

static void
same (const struct result *a, const struct result *b, const char *what)
{
  if (a->outcome != b->outcome || a->n != b->n
      || (a->outcome != REFUSED && a->outcome != TOO_LARGE && a->ended != b->ended))
    {
      fprintf (stderr, "%s: outcome %d/%d, messages %zu/%zu, ended %d/%d\n", what, a->outcome,
               b->outcome, a->n, b->n, a->ended, b->ended);
      abort ();
    }
  for (size_t i = 0; i < a->n; i++)
    FUZZ_ASSERT (a->off[i] == b->off[i] && a->flags[i] == b->flags[i] && a->len[i] == b->len[i]);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const size_t limits[] = {0, 1, 4, 16, 255, 4096, 1 << 20, SIZE_MAX};
  struct sbx_buf again = SBX_BUF_INIT;
  sbx_error_t *err = NULL;
  const uint8_t *b;
  size_t n, max, i;
  unsigned seed;

  if (size < 2)
    return 0;
  max = limits[data[0] & 7];
  seed = data[1] | 1u;
  b = data + 2;
  n = size - 2;
  reference (b, n, max, &ref);
  read_body (b, n, max, 0, &whole);
  same (&ref, &whole, "whole");
  read_body (b, n, max, seed, &chunked);
  same (&ref, &chunked, "chunked");

  /* Writing the messages back gives the bytes they were read from. */
  for (i = 0; i < ref.n; i++)
    FUZZ_ASSERT (FUZZ_CONTRACT (sbx_connect_encode (&again, ref.flags[i], b + ref.off[i] + 5,
                                                    ref.len[i], &err),
                                &err)
                 == 0);
  if (ref.n)
    FUZZ_ASSERT (again.len == ref.off[ref.n - 1] + 5 + ref.len[ref.n - 1]
                 && memcmp (again.data, b, again.len) == 0);
  sbx_buf_free (&again);
  return 0;
}
