/* Unit tests for src/util/id.c: random sandbox ids and hex strings, and
 * the validity check the API applies to ids it is given.
 */
#include "util/id.h"

#include <stdint.h>

#include "tap.h"

#define ALPHABET "abcdefghijklmnopqrstuvwxyz0123456789"

static int
only_from (const char *s, size_t n, const char *set)
{
  for (size_t i = 0; i < n; i++)
    if (s[i] == '\0' || strchr (set, s[i]) == NULL)
      return 0;
  return 1;
}

static int
test_random_id_shape (void)
{
  for (int i = 0; i < 2000; i++)
    {
      char id[SBX_ID_LEN + 2];

      memset (id, 'X', sizeof id);
      sbx_random_id (id, SBX_ID_LEN);
      CHECK (strlen (id) == SBX_ID_LEN);
      CHECK (id[SBX_ID_LEN + 1] == 'X'); /* nothing past the NUL */
      CHECK (only_from (id, SBX_ID_LEN, ALPHABET));
      CHECK (sbx_id_valid (id));
    }
  return 0;
}

/* Other lengths, including more than one internal batch of random bytes. */
static int
test_random_id_lengths (void)
{
  static const size_t lengths[] = {0, 1, 9, 63, 64, 65, 200, 1000};

  for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++)
    {
      size_t n = lengths[k];
      char *id = malloc (n + 2);

      CHECK (id != NULL);
      memset (id, 'X', n + 2);
      sbx_random_id (id, n);
      CHECK (strlen (id) == n);
      CHECK (id[n + 1] == 'X');
      CHECK (only_from (id, n, ALPHABET));
      free (id);
    }
  return 0;
}

/* Every character of the alphabet shows up, none much more often than
   the others (the generator rejects bytes >= 252 to avoid modulo bias;
   a biased one would favour the first 4 characters by 1/63). */
static int
test_random_id_distribution (void)
{
  enum { N = 36 * 5000 };
  static char buf[N + 1];
  unsigned counts[36] = {0};

  sbx_random_id (buf, N);
  for (size_t i = 0; i < N; i++)
    {
      const char *p = strchr (ALPHABET, buf[i]);
      CHECK (p != NULL && buf[i] != '\0');
      counts[p - ALPHABET]++;
    }
  for (int c = 0; c < 36; c++)
    {
      /* Expected 5000 each, sd ~70: 4600..5400 is > 5 sd. */
      if (counts[c] < 4600 || counts[c] > 5400)
        {
          fprintf (stderr, "#   `%c` appeared %u times of %d\n", ALPHABET[c], counts[c], N);
          return -1;
        }
    }
  return 0;
}

static int
test_random_ids_differ (void)
{
  char a[SBX_ID_LEN + 1], b[SBX_ID_LEN + 1];

  sbx_random_id (a, SBX_ID_LEN);
  for (int i = 0; i < 100; i++)
    {
      sbx_random_id (b, SBX_ID_LEN);
      CHECK (strcmp (a, b) != 0);
    }
  return 0;
}

static int
test_random_hex (void)
{
  static const size_t sizes[] = {0, 1, 20, 32, 63, 64, 65, 129};

  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    {
      size_t n = sizes[k];
      char *hex = malloc (2 * n + 2);

      CHECK (hex != NULL);
      memset (hex, 'X', 2 * n + 2);
      sbx_random_hex (hex, n);
      CHECK (strlen (hex) == 2 * n);
      CHECK (hex[2 * n + 1] == 'X');
      CHECK (only_from (hex, 2 * n, "0123456789abcdef"));
      free (hex);
    }
  {
    /* 4096 nibbles: every digit appears. */
    char hex[4097];
    sbx_random_hex (hex, 2048);
    for (const char *d = "0123456789abcdef"; *d; d++)
      CHECK (strchr (hex, *d) != NULL);
  }
  return 0;
}

static int
test_random_bytes (void)
{
  unsigned char a[1000], b[1000];

  memset (a, 0, sizeof a);
  memset (b, 0, sizeof b);
  sbx_random_bytes (a, sizeof a);
  sbx_random_bytes (b, sizeof b);
  CHECK (memcmp (a, b, sizeof a) != 0);
  sbx_random_bytes (a, 0);
  return 0;
}

static int
test_id_valid (void)
{
  static const char *const good[] = {
    "abcdefghijklmnopqrst",
    "01234567890123456789",
    "a1b2c3d4e5f6g7h8i9j0",
    "zzzzzzzzzzzzzzzzzzzz",
    "00000000000000000000",
  };
  static const char *const bad[] = {
    NULL,
    "",
    "abcdefghijklmnopqrs",   /* 19 */
    "abcdefghijklmnopqrstu", /* 21 */
    "Abcdefghijklmnopqrst",  /* upper case */
    "abcdefghijklmnopqrsT",
    "abcdefghij-lmnopqrst",
    "abcdefghij_lmnopqrst",
    "abcdefghij.lmnopqrst",
    "abcdefghij/lmnopqrst",
    "abcdefghij lmnopqrst",
    "../../../../../etc/x",
    "abcdefghij\xc3\xa9mnopqrs", /* 20 bytes, not ASCII */
    "abcdefghijklmnopqrs\n",
  };

  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    CHECK (sbx_id_valid (good[i]) == 1);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (sbx_id_valid (bad[i]) != 0)
      {
        fprintf (stderr, "#   `%s` accepted\n", bad[i]);
        return -1;
      }
  /* A NUL inside makes it short. */
  CHECK (sbx_id_valid ("abcdefghij\0lmnopqrst") == 0);
  return 0;
}

int
main (void)
{
  RUN (test_random_id_shape);
  RUN (test_random_id_lengths);
  RUN (test_random_id_distribution);
  RUN (test_random_ids_differ);
  RUN (test_random_hex);
  RUN (test_random_bytes);
  RUN (test_id_valid);
  return tap_done ();
}
