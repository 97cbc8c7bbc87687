/* Fuzz target: the records of a directory watcher (iso/watch.c), which a
 * helper inside a sandbox writes into a pipe the daemon reads.
 *
 * Input: [chunking seed u8][stream...]. The stream is fed whole and in
 * chunks of pseudo-random sizes (as pipe reads cut it), and both must
 * match a plain reference parser written here from proto.h: the same
 * records and the same verdict. Every record reported keeps the promises
 * the core relies on: READY or FAILED first and once, FAILED last with an
 * errno in 1..4095, events only after READY, names at most
 * SBX_WATCH_NAME_MAX bytes, relative, without NUL or "."/".."/empty
 * components, and present exactly for the types that have one.
 */
#include "fuzz.h"
#include "iso/engine.h"

#define MAX_RECS 8192

struct result
{
  int failed; /* the stream was refused */
  size_t n;
  int type[MAX_RECS];
  size_t off[MAX_RECS]; /* where the record's body starts in the input */
  size_t len[MAX_RECS];
};

static struct result ref, whole, chunked;
static const uint8_t *input;

static int
ref_name_ok (const uint8_t *s, size_t n)
{
  size_t i, start = 0;

  if (n == 0)
    return 1;
  for (i = 0; i <= n; i++)
    if (i == n || s[i] == '/')
      {
        size_t c = i - start;
        if (c == 0 || (c == 1 && s[start] == '.') || (c == 2 && s[start] == '.' && s[start + 1] == '.'))
          return 0;
        start = i + 1;
      }
    else if (s[i] == 0)
      return 0;
  return 1;
}

static void
reference (const uint8_t *b, size_t n, struct result *r)
{
  size_t pos = 0;
  int state = 0;

  r->n = 0;
  r->failed = 0;
  while (n - pos >= 4)
    {
      unsigned type = b[pos] | (unsigned) b[pos + 1] << 8;
      size_t len = b[pos + 2] | (size_t) b[pos + 3] << 8;
      const uint8_t *body = b + pos + 4;
      int ok;

      if (len > SBX_WATCH_NAME_MAX)
        {
          r->failed = 1;
          return;
        }
      if (n - pos - 4 < len)
        return; /* cut: waits for more */
      if (state == 0)
        {
          int32_t e = 0;
          if (type == SBX_WREC_FAILED && len == 4)
            memcpy (&e, body, 4);
          ok = (type == SBX_WREC_READY && len == 0)
               || (type == SBX_WREC_FAILED && len == 4 && e > 0 && e < 4096);
          state = type == SBX_WREC_READY ? 1 : 2;
        }
      else if (state == 1)
        ok = type >= SBX_WREC_CREATE && type <= SBX_WREC_OVERFLOW
             && !(type == SBX_WREC_OVERFLOW && len != 0)
             && !((type == SBX_WREC_CREATE || type == SBX_WREC_WRITE) && len == 0)
             && ref_name_ok (body, len);
      else
        ok = 0;
      if (!ok)
        {
          r->failed = 1;
          return;
        }
      FUZZ_ASSERT (r->n < MAX_RECS);
      r->type[r->n] = (int) type;
      r->off[r->n] = pos + 4;
      /* Only an event's name is reported; FAILED's errno is its own field. */
      r->len[r->n] = state == 1 ? len : 0;
      r->n++;
      pos += 4 + len;
    }
}


static void
collect (void *arg, const struct sbx_iso_watch_rec *rec)
{
  struct result *r = arg;
  size_t i = r->n;

  FUZZ_ASSERT (i < MAX_RECS);
  FUZZ_ASSERT (rec->len <= SBX_WATCH_NAME_MAX);
  if (rec->type == SBX_WREC_FAILED)
    FUZZ_ASSERT (rec->sys_errno > 0 && rec->sys_errno < 4096);
  if (rec->type >= SBX_WREC_CREATE && rec->type <= SBX_WREC_OVERFLOW)
    FUZZ_ASSERT (rec->len == 0 || (rec->name != NULL && memchr (rec->name, 0, rec->len) == NULL
                                   && rec->name[0] != '/'));
  r->type[i] = rec->type;
  r->len[i] = rec->len;
  /* Names come from the input's bytes (maybe held across a cut): compare
     them with where the reference found them. */
  r->off[i] = 0;
  if (rec->len && i < ref.n)
    FUZZ_ASSERT (memcmp (rec->name, input + ref.off[i], rec->len) == 0);
  r->n++;
}

static void
run (const uint8_t *b, size_t n, unsigned seed, struct result *r)
{
  struct sbx_iso_watch_parser p;
  size_t pos = 0;

  memset (&p, 0, sizeof p);
  r->n = 0;
  r->failed = 0;
  while (pos < n)
    {
      size_t take = n - pos;
      if (seed)
        {
          seed = seed * 1103515245u + 12345u;
          take = (seed >> 16) % 4099;
          if (take > n - pos)
            take = n - pos;
        }
      if (sbx_iso_watch_feed (&p, b + pos, take, collect, r) < 0)
        {
          r->failed = 1;
          return;
        }
      pos += take;
    }
}

static void
same (const struct result *a, const struct result *b, const char *what)
{
  size_t i;

  if (a->failed != b->failed || a->n != b->n)
    {
      fprintf (stderr, "%s: failed %d/%d, records %zu/%zu\n", what, a->failed, b->failed, a->n,
               b->n);
      abort ();
    }
  for (i = 0; i < a->n; i++)
    FUZZ_ASSERT (a->type[i] == b->type[i] && a->len[i] == b->len[i]);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  input = data + 1;
  reference (input, size - 1, &ref);
  run (input, size - 1, 0, &whole);
  same (&ref, &whole, "whole");
  run (input, size - 1, data[0] | 1u, &chunked);
  same (&ref, &chunked, "chunked");
  return 0;
}
