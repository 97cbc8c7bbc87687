/* Unit tests for src/util/buf.c: the growable byte buffer everything else
 * builds strings and bodies in. The invariants: data is NUL-terminated
 * whenever it is allocated, len never counts the NUL, and cap > len.
 */
#include "util/buf.h"

#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>

#include "util/error.h"

#include "tap.h"

/* The invariants that hold after every operation. */
static int
well_formed (const struct sbx_buf *b)
{
  if (b->data == NULL)
    return b->len == 0 && b->cap == 0;
  return b->cap > b->len && b->data[b->len] == '\0';
}

static int
test_empty (void)
{
  struct sbx_buf b = SBX_BUF_INIT;

  CHECK (well_formed (&b));
  sbx_buf_reset (&b);
  CHECK (b.data == NULL && well_formed (&b));
  sbx_buf_consume (&b, 0);
  sbx_buf_consume (&b, 10);
  CHECK (b.data == NULL && well_formed (&b));
  sbx_buf_free (&b);
  sbx_buf_free (&b); /* twice is fine: it resets */
  CHECK (b.data == NULL && b.len == 0 && b.cap == 0);
  return 0;
}

static int
test_append (void)
{
  struct sbx_buf b = SBX_BUF_INIT;

  sbx_buf_append (&b, "abc", 3);
  CHECK (b.len == 3 && well_formed (&b));
  CHECK_STR (b.data, "abc");
  sbx_buf_append (&b, "", 0);
  CHECK (b.len == 3 && well_formed (&b));
  sbx_buf_append (&b, "d\0e", 3); /* binary: NULs are data */
  CHECK (b.len == 6 && memcmp (b.data, "abcd\0e", 7) == 0);
  sbx_buf_free (&b);

  /* Appending nothing to an empty buffer still gives a terminated string. */
  sbx_buf_append (&b, NULL, 0);
  CHECK (b.data != NULL && b.len == 0 && b.data[0] == '\0' && well_formed (&b));
  sbx_buf_free (&b);
  return 0;
}

/* Growth keeps every byte, in order, through many reallocations. */
static int
test_growth (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  char chunk[97];

  for (int i = 0; i < 5000; i++)
    {
      memset (chunk, 'a' + i % 26, sizeof chunk);
      sbx_buf_append (&b, chunk, (size_t) (i % 97) + 1);
      CHECK (well_formed (&b));
    }
  {
    size_t off = 0;
    for (int i = 0; i < 5000; i++)
      for (int k = 0; k <= i % 97; k++)
        CHECK (b.data[off++] == 'a' + i % 26);
    CHECK (off == b.len);
  }
  /* One large append. */
  {
    static char big[1 << 20];
    size_t before = b.len;
    memset (big, 'z', sizeof big);
    sbx_buf_append (&b, big, sizeof big);
    CHECK (b.len == before + sizeof big && well_formed (&b));
    CHECK (b.data[before] == 'z' && b.data[b.len - 1] == 'z');
  }
  sbx_buf_free (&b);
  return 0;
}

static int
test_printf (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  char big[300];

  sbx_buf_printf (&b, "%s", "");
  CHECK (b.data != NULL && b.len == 0 && well_formed (&b));
  sbx_buf_printf (&b, "%d-%s", 42, "x");
  CHECK_STR (b.data, "42-x");
  CHECK (b.len == 4);
  sbx_buf_printf (&b, "|%05.1f|%c", 3.14159, 'q');
  CHECK_STR (b.data, "42-x|003.1|q");
  CHECK (b.len == 12 && well_formed (&b));
  /* Longer than the first allocation. */
  memset (big, 'k', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  sbx_buf_printf (&b, "<%s>", big);
  CHECK (b.len == 12 + 301 && well_formed (&b));
  CHECK (b.data[12] == '<' && b.data[13] == 'k' && b.data[b.len - 1] == '>');
  sbx_buf_free (&b);
  return 0;
}

static int
test_consume (void)
{
  struct sbx_buf b = SBX_BUF_INIT;

  sbx_buf_append (&b, "0123456789", 10);
  sbx_buf_consume (&b, 0);
  CHECK_STR (b.data, "0123456789");
  sbx_buf_consume (&b, 3);
  CHECK (b.len == 7 && well_formed (&b));
  CHECK_STR (b.data, "3456789");
  sbx_buf_consume (&b, 6);
  CHECK_STR (b.data, "9");
  sbx_buf_consume (&b, 1);
  CHECK (b.len == 0 && b.data != NULL && b.data[0] == '\0');
  sbx_buf_append (&b, "ab", 2);
  sbx_buf_consume (&b, 1000); /* more than there is: empties */
  CHECK (b.len == 0 && well_formed (&b));
  sbx_buf_append (&b, "xy", 2);
  CHECK_STR (b.data, "xy");
  sbx_buf_free (&b);
  return 0;
}

static int
test_reset_keeps_storage (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  char *data;
  size_t cap;

  sbx_buf_append (&b, "hello", 5);
  data = b.data;
  cap = b.cap;
  sbx_buf_reset (&b);
  CHECK (b.len == 0 && b.data == data && b.cap == cap && b.data[0] == '\0');
  sbx_buf_append (&b, "hi", 2);
  CHECK (b.data == data);
  CHECK_STR (b.data, "hi");
  sbx_buf_free (&b);
  return 0;
}

static int
test_steal (void)
{
  struct sbx_buf b = SBX_BUF_INIT;
  char *s;

  sbx_buf_append (&b, "owned", 5);
  s = sbx_buf_steal (&b);
  CHECK (b.data == NULL && b.len == 0 && b.cap == 0);
  CHECK_STR (s, "owned");
  free (s);
  /* Stealing an empty buffer gives an empty string, never NULL. */
  s = sbx_buf_steal (&b);
  CHECK (s != NULL && s[0] == '\0');
  CHECK (b.data == NULL);
  free (s);
  /* The buffer is usable again. */
  sbx_buf_append (&b, "again", 5);
  CHECK_STR (b.data, "again");
  sbx_buf_free (&b);
  return 0;
}

/* A length that cannot be represented aborts (sbx_oom) instead of
   wrapping around and writing past the allocation. */
static int
test_overflow_aborts (void)
{
  int status;
  pid_t pid;

  fflush (NULL);
  pid = fork ();
  CHECK (pid >= 0);
  if (pid == 0)
    {
      struct sbx_buf b = SBX_BUF_INIT;
      const struct rlimit zero = {0, 0};

      setrlimit (RLIMIT_CORE, &zero);
      signal (SIGABRT, SIG_DFL);
      close (STDERR_FILENO); /* the "out of memory" line is expected */
      sbx_buf_append (&b, "x", 1);
      sbx_buf_append (&b, "y", SIZE_MAX - 1);
      _exit (0);
    }
  CHECK (waitpid (pid, &status, 0) == pid);
  CHECK (WIFSIGNALED (status) && WTERMSIG (status) == SIGABRT);
  return 0;
}

/* The daemon's mode (sbx_oom_soft): an append that finds no memory is
   dropped whole, and the buffer says so until it is reset. */
static int
test_soft_failure_is_sticky (void)
{
  struct sbx_buf b = SBX_BUF_INIT;

  sbx_oom_soft = 1;
  sbx_buf_append (&b, "abc", 3);
  CHECK (!b.failed);
  sbx_buf_append (&b, "y", SIZE_MAX - 1);
  CHECK (b.failed && b.len == 3 && well_formed (&b));
  CHECK_STR (b.data, "abc");
  sbx_buf_append (&b, "d", 1); /* would leave a hole: dropped too */
  sbx_buf_printf (&b, "%s", "e");
  CHECK (b.failed && b.len == 3);
  CHECK_STR (b.data, "abc");
  sbx_buf_reset (&b);
  CHECK (!b.failed && b.len == 0);
  sbx_buf_append (&b, "ok", 2);
  CHECK (!b.failed);
  CHECK_STR (b.data, "ok");
  sbx_buf_free (&b);
  sbx_oom_soft = 0;
  return 0;
}

int
main (void)
{
  RUN (test_empty);
  RUN (test_append);
  RUN (test_growth);
  RUN (test_printf);
  RUN (test_consume);
  RUN (test_reset_keeps_storage);
  RUN (test_steal);
  RUN (test_overflow_aborts);
  RUN (test_soft_failure_is_sticky);
  return tap_done ();
}
