/* Unit tests for src/iso/watch.c: the records a directory watcher writes
 * from inside a sandbox. The helper shares a uid with hostile code, so its
 * stream is checked like anything else from a sandbox: READY or FAILED
 * first, then events only, exact lengths, known types, names that are
 * relative paths. Records may arrive cut anywhere (a pipe read), so every
 * good stream is also fed byte by byte and in every two-piece split.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "iso/engine.h"
#include "tap.h"
#include "util/buf.h"

struct seen
{
  int n;
  int types[64];
  char names[64][SBX_WATCH_NAME_MAX + 1];
  int sys_errno;
};

static void
collect (void *arg, const struct sbx_iso_watch_rec *rec)
{
  struct seen *s = arg;

  if (s->n >= 64)
    return;
  s->types[s->n] = rec->type;
  memcpy (s->names[s->n], rec->name ? rec->name : "", rec->len);
  s->names[s->n][rec->len] = '\0';
  if (rec->type == SBX_WREC_FAILED)
    s->sys_errno = rec->sys_errno;
  s->n++;
}

static void
rec (struct sbx_buf *b, int type, const void *data, size_t len)
{
  struct sbx_watch_rec h;

  h.type = (uint16_t) type;
  h.len = (uint16_t) len;
  sbx_buf_append (b, &h, sizeof h);
  if (len)
    sbx_buf_append (b, data, len);
}

static void
ev (struct sbx_buf *b, int type, const char *name)
{
  rec (b, type, name, strlen (name));
}

/* Feed the whole of b in one piece, byte by byte, and in every split in
   two; each must give the same verdict and records. */
static int
feed_all_ways (const struct sbx_buf *b, struct seen *out)
{
  struct sbx_iso_watch_parser p;
  struct seen s;
  size_t i, cut;
  int rc;

  memset (&p, 0, sizeof p);
  memset (out, 0, sizeof *out);
  rc = sbx_iso_watch_feed (&p, b->data, b->len, collect, out);
  memset (&p, 0, sizeof p);
  memset (&s, 0, sizeof s);
  for (i = 0; i < b->len; i++)
    if (sbx_iso_watch_feed (&p, b->data + i, 1, collect, &s) < 0)
      break;
  if ((i < b->len ? -1 : 0) != rc || s.n != out->n)
    return -2;
  for (cut = 0; cut <= b->len; cut += b->len > 64 ? 97 : 1)
    {
      int r2;
      memset (&p, 0, sizeof p);
      memset (&s, 0, sizeof s);
      r2 = sbx_iso_watch_feed (&p, b->data, cut, collect, &s);
      if (r2 == 0)
        r2 = sbx_iso_watch_feed (&p, b->data + cut, b->len - cut, collect, &s);
      if (r2 != rc || s.n != out->n || memcmp (s.types, out->types, sizeof s.types) != 0)
        return -2;
    }
  return rc;
}

static int
test_good_stream (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  struct seen s;

  rec (&b, SBX_WREC_READY, NULL, 0);
  ev (&b, SBX_WREC_CREATE, "a.txt");
  ev (&b, SBX_WREC_WRITE, "sub/dir/a.txt");
  ev (&b, SBX_WREC_CHMOD, "");
  ev (&b, SBX_WREC_RENAME, "..x/.y/z..");
  ev (&b, SBX_WREC_REMOVE, "");
  rec (&b, SBX_WREC_OVERFLOW, NULL, 0);
  ev (&b, SBX_WREC_CREATE, "sp ace\n\"\\\xff");
  CHECK (feed_all_ways (&b, &s) == 0);
  CHECK (s.n == 8);
  CHECK (s.types[0] == SBX_WREC_READY);
  CHECK (s.types[1] == SBX_WREC_CREATE);
  CHECK_STR (s.names[1], "a.txt");
  CHECK_STR (s.names[2], "sub/dir/a.txt");
  CHECK_STR (s.names[3], "");
  CHECK_STR (s.names[4], "..x/.y/z..");
  CHECK (s.types[6] == SBX_WREC_OVERFLOW);
  CHECK_STR (s.names[7], "sp ace\n\"\\\xff");
  sbx_buf_free (&b);
  return 0;
}

static int
test_longest_name (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  static char name[SBX_WATCH_NAME_MAX + 2];
  struct sbx_watch_rec h;
  struct seen s;

  memset (name, 'n', SBX_WATCH_NAME_MAX);
  name[100] = '/';
  rec (&b, SBX_WREC_READY, NULL, 0);
  rec (&b, SBX_WREC_CREATE, name, SBX_WATCH_NAME_MAX);
  CHECK (feed_all_ways (&b, &s) == 0);
  CHECK (s.n == 2 && strlen (s.names[1]) == SBX_WATCH_NAME_MAX);
  /* One byte more: refused from the header alone, before any body. */
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_READY, NULL, 0);
  h.type = SBX_WREC_CREATE;
  h.len = SBX_WATCH_NAME_MAX + 1;
  sbx_buf_append (&b, &h, sizeof h);
  CHECK (feed_all_ways (&b, &s) == -1);
  CHECK (s.n == 1);
  h.len = UINT16_MAX;
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_READY, NULL, 0);
  sbx_buf_append (&b, &h, sizeof h);
  CHECK (feed_all_ways (&b, &s) == -1);
  sbx_buf_free (&b);
  return 0;
}

static int
test_failed (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  int32_t e = EACCES;
  struct seen s;

  rec (&b, SBX_WREC_FAILED, &e, sizeof e);
  CHECK (feed_all_ways (&b, &s) == 0);
  CHECK (s.n == 1 && s.types[0] == SBX_WREC_FAILED && s.sys_errno == EACCES);
  /* Nothing may follow it. */
  ev (&b, SBX_WREC_CREATE, "late");
  CHECK (feed_all_ways (&b, &s) == -1);
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_FAILED, &e, sizeof e);
  rec (&b, SBX_WREC_READY, NULL, 0);
  CHECK (feed_all_ways (&b, &s) == -1);
  /* errno out of range, or the wrong size. */
  {
    int32_t bad[] = {0, -1, 4096, INT32_MAX};
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
      {
        sbx_buf_reset (&b);
        rec (&b, SBX_WREC_FAILED, &bad[i], sizeof bad[i]);
        CHECK (feed_all_ways (&b, &s) == -1);
      }
  }
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_FAILED, "\x0d\0\0\0\0", 5);
  CHECK (feed_all_ways (&b, &s) == -1);
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_FAILED, "\x0d\0", 2);
  CHECK (feed_all_ways (&b, &s) == -1);
  sbx_buf_free (&b);
  return 0;
}

static int
test_order_and_types (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  struct seen s;
  int t;

  /* An event before READY. */
  ev (&b, SBX_WREC_CREATE, "a");
  CHECK (feed_all_ways (&b, &s) == -1 && s.n == 0);
  /* READY with a body; twice. */
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_READY, "x", 1);
  CHECK (feed_all_ways (&b, &s) == -1);
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_READY, NULL, 0);
  rec (&b, SBX_WREC_READY, NULL, 0);
  CHECK (feed_all_ways (&b, &s) == -1 && s.n == 1);
  /* Every type that is not an event, after READY. */
  for (t = 0; t < 300; t++)
    {
      if (t >= SBX_WREC_CREATE && t <= SBX_WREC_OVERFLOW)
        continue;
      sbx_buf_reset (&b);
      rec (&b, SBX_WREC_READY, NULL, 0);
      ev (&b, t, "a");
      CHECK (feed_all_ways (&b, &s) == -1);
    }
  /* Events about an entry need its name; OVERFLOW has none. */
  for (t = SBX_WREC_CREATE; t <= SBX_WREC_WRITE; t++)
    {
      sbx_buf_reset (&b);
      rec (&b, SBX_WREC_READY, NULL, 0);
      ev (&b, t, "");
      CHECK (feed_all_ways (&b, &s) == -1);
    }
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_READY, NULL, 0);
  ev (&b, SBX_WREC_OVERFLOW, "x");
  CHECK (feed_all_ways (&b, &s) == -1);
  sbx_buf_free (&b);
  return 0;
}

static int
test_bad_names (void)
{
  static const char *const bad[] = {"/abs", "a//b", "a/", "/", "..", ".", "a/../b", "a/./b",
                                    "../x", "x/..", "//"};
  struct sbx_buf b = SBX_BUF_INIT;
  struct seen s;
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      sbx_buf_reset (&b);
      rec (&b, SBX_WREC_READY, NULL, 0);
      ev (&b, SBX_WREC_CREATE, bad[i]);
      CHECK (feed_all_ways (&b, &s) == -1);
      CHECK (s.n == 1);
    }
  /* A NUL inside. */
  sbx_buf_reset (&b);
  rec (&b, SBX_WREC_READY, NULL, 0);
  rec (&b, SBX_WREC_CREATE, "a\0b", 3);
  CHECK (feed_all_ways (&b, &s) == -1);
  sbx_buf_free (&b);
  return 0;
}

static int
test_request_checks_path (void)
{
  struct sbx_iso_box box;
  sbx_error_t *err = NULL;
  static char longp[SBX_WATCH_PATH_MAX + 1];

  sbx_iso_box_init (&box);
  /* Refused before anything is sent (the box has no socket). */
  CHECK (sbx_iso_watch (&box, 1, 1000, 1000, 0, "relative", -1, &err) < 0);
  CHECK (err && err->kind == SBX_E_INVALID);
  sbx_error_free (err);
  err = NULL;
  CHECK (sbx_iso_watch (&box, 1, 1000, 1000, 0, "", -1, &err) < 0);
  sbx_error_free (err);
  err = NULL;
  memset (longp, 'a', SBX_WATCH_PATH_MAX);
  longp[0] = '/';
  CHECK (sbx_iso_watch (&box, 1, 1000, 1000, 0, longp, -1, &err) < 0);
  CHECK (err && err->kind == SBX_E_INVALID);
  sbx_error_free (err);
  return 0;
}

int
main (void)
{
  RUN (test_good_stream);
  RUN (test_longest_name);
  RUN (test_failed);
  RUN (test_order_and_types);
  RUN (test_bad_names);
  RUN (test_request_checks_path);
  return tap_done ();
}
