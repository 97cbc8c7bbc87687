/* Unit tests for src/egress/limits.c: who may hold how many egress
 * connections. The bounds in all, per tenant and per sandbox; the fair
 * share past three quarters of a pool; pending connections (no request
 * yet) counted apart from open ones; bytes; entries that stay put while
 * held when the tables are full.
 */
#include "egress/limits.h"

#include <stdio.h>

#include "tap.h"

#define MAX_SLOTS 64

static struct sbx_egress_limits *
make (unsigned total, unsigned tenant, unsigned sandbox, uint64_t max_bytes)
{
  struct sbx_egress_bounds open = {total, tenant, sandbox};
  struct sbx_egress_bounds pending;

  sbx_egress_pending_bounds (&open, &pending);
  return sbx_egress_limits_new (&pending, &open, max_bytes);
}

/* Open n connections of sandbox (of tenant), each admitted and promoted
   at once; the number that got through. Those are kept in slots. */
static unsigned
open_n (struct sbx_egress_limits *l, const char *tenant, const char *sandbox, unsigned n,
        struct sbx_egress_slot *slots, const char **last_why)
{
  unsigned got = 0, i;

  *last_why = NULL;
  for (i = 0; i < n; i++)
    {
      struct sbx_egress_slot s;
      if (sbx_egress_admit (l, tenant, sandbox, &s, last_why) < 0)
        continue;
      if (sbx_egress_promote (l, &s, last_why) < 0)
        {
          sbx_egress_release (l, &s);
          continue;
        }
      slots[got++] = s;
    }
  return got;
}

static void
release_all (struct sbx_egress_limits *l, struct sbx_egress_slot *slots, unsigned n)
{
  unsigned i;

  for (i = 0; i < n; i++)
    sbx_egress_release (l, &slots[i]);
}

/*============================ Tests ==================================== */

/* One tenant cannot take it all; the next ones share what is left. */
static int
test_fair_share (void)
{
  struct sbx_egress_limits *l = make (16, 8, 6, 0);
  struct sbx_egress_slot a[MAX_SLOTS], a2[MAX_SLOTS], b[MAX_SLOTS], c[MAX_SLOTS],
      d[MAX_SLOTS];
  const char *why;
  unsigned na, na2, nb, nc, nd;

  CHECK (l != NULL);
  na = open_n (l, "a", "a1", 10, a, &why);
  CHECK (na == 6);
  CHECK_STR (why, "this sandbox has too many egress connections open");
  /* Its other sandboxes: the tenant's bound. */
  na2 = open_n (l, "a", "a2", 3, a2, &why);
  CHECK (na2 == 2);
  CHECK_STR (why, "this tenant's sandboxes have too many egress connections open");
  /* Another tenant: freely up to three quarters (12), then up to its share
     (16 over a, b and one to come: 5). */
  nb = open_n (l, "b", "b1", 8, b, &why);
  CHECK (nb == 5);
  CHECK_STR (why, "the egress proxy is busy, and this tenant's sandboxes hold their fair share"
                  " of its connections");
  /* A third: its share is 4 (16 over a, b, c and one to come), and what
     is left is 3. */
  nc = open_n (l, "c", "c1", 8, c, &why);
  CHECK (nc == 3);
  CHECK_STR (why, "the egress proxy has too many connections open");
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, NULL, NULL) == 16);
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, "a", NULL) == 8);
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, NULL, "b1") == 5);
  /* Ended connections give their room back, to whoever asks. */
  release_all (l, a, na);
  release_all (l, a2, na2);
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, "a", NULL) == 0);
  nd = open_n (l, "d", "d1", 8, d, &why);
  /* 8 free; b and c hold 8 (2 tenants, d the third): share 16/4 = 4, and
     d may grow to 4 past the 12. */
  CHECK (nd == 4);
  release_all (l, b, nb);
  release_all (l, c, nc);
  release_all (l, d, nd);
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, NULL, NULL) == 0);
  CHECK (sbx_egress_held (l, SBX_EGRESS_PENDING, NULL, NULL) == 0);
  sbx_egress_limits_free (l);
  return 0;
}

/* Connections that never send a request take pending room only, which
   is smaller and apart: the open room stays for requests. */
static int
test_pending_apart (void)
{
  struct sbx_egress_limits *l = make (16, 8, 8, 0);
  struct sbx_egress_slot silent[8], b[MAX_SLOTS];
  const char *why;
  unsigned n = 0, i, nb;

  CHECK (l != NULL);
  for (i = 0; i < 8; i++)
    if (sbx_egress_admit (l, "a", "a1", &silent[n], &why) == 0)
      n++;
  /* Pending: 4 in all, 2 per tenant, 8 per sandbox. */
  CHECK (n == 2);
  CHECK_STR (why, "this tenant's sandboxes have too many egress connections waiting for their"
                  " request");
  CHECK (sbx_egress_held (l, SBX_EGRESS_PENDING, "a", NULL) == 2);
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, NULL, NULL) == 0);
  nb = open_n (l, "b", "b1", 8, b, &why);
  CHECK (nb == 8);
  /* A pending slot refused promotion stays pending until released. */
  release_all (l, b, nb);
  release_all (l, silent, n);
  CHECK (sbx_egress_held (l, SBX_EGRESS_PENDING, NULL, NULL) == 0);
  sbx_egress_limits_free (l);
  return 0;
}

static int
test_byte_allowance (void)
{
  struct sbx_egress_limits *l = make (16, 8, 8, 1000);
  struct sbx_egress_slot s;
  const char *why;
  int first;

  CHECK (l != NULL);
  CHECK (sbx_egress_admit (l, "a", "a1", &s, &why) == 0);
  CHECK (sbx_egress_count_bytes (l, &s, 600, &first) == 1 && !first);
  CHECK (sbx_egress_count_bytes (l, &s, 600, &first) == 0 && first);
  CHECK (sbx_egress_count_bytes (l, &s, 1, &first) == 0 && !first);
  sbx_egress_release (l, &s);
  /* Its next connection is refused at once; another sandbox's is not. */
  CHECK (sbx_egress_admit (l, "a", "a1", &s, &why) < 0);
  CHECK_STR (why, "this sandbox has used up its egress byte allowance");
  CHECK (sbx_egress_admit (l, "a", "a2", &s, &why) == 0);
  sbx_egress_release (l, &s);
  /* A released slot holds nothing: a second release changes nothing. */
  sbx_egress_release (l, &s);
  CHECK (sbx_egress_held (l, SBX_EGRESS_PENDING, NULL, NULL) == 0);
  sbx_egress_limits_free (l);
  return 0;
}

/* More sandboxes than the table holds: one holding a connection keeps its
   entry (and count); an idle one is forgotten for the newcomer. */
static int
test_full_tables_keep_held_entries (void)
{
  struct sbx_egress_limits *l = make (65536, 65536, 8, 0);
  struct sbx_egress_slot held, s;
  const char *why;
  char id[32];
  int i;

  CHECK (l != NULL);
  CHECK (sbx_egress_admit (l, "t", "kept", &held, &why) == 0);
  CHECK (sbx_egress_promote (l, &held, &why) == 0);
  for (i = 0; i < 5000; i++)
    {
      snprintf (id, sizeof id, "s%d", i);
      CHECK (sbx_egress_admit (l, "t", id, &s, &why) == 0);
      sbx_egress_release (l, &s);
    }
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, NULL, "kept") == 1);
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, "t", NULL) == 1);
  sbx_egress_release (l, &held);
  CHECK (sbx_egress_held (l, SBX_EGRESS_OPEN, NULL, NULL) == 0);
  sbx_egress_limits_free (l);
  return 0;
}

int
main (void)
{
  RUN (test_fair_share);
  RUN (test_pending_apart);
  RUN (test_byte_allowance);
  RUN (test_full_tables_keep_held_entries);
  return tap_done ();
}
