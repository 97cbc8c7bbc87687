/* sbx: who may hold how many egress connections at once (egress/limits.h).
 *
 * Entries live in fixed tables and never move while a connection holds
 * them (a slot names them by index): an entry is reused only once nothing
 * holds it, a sandbox's byte count going with it.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "egress/limits.h"
#include "egress/wire.h"

#define MAX_SANDBOXES 4096
#define MAX_TENANTS 4096

struct sandbox_entry
{
  char id[SBX_EGRESS_ID_MAX];
  unsigned held[SBX_EGRESS_POOLS];
  uint64_t bytes;
  int over_logged;
};

struct tenant_entry
{
  char name[SBX_EGRESS_TENANT_MAX];
  unsigned held[SBX_EGRESS_POOLS];
};

struct sbx_egress_limits
{
  pthread_mutex_t lock;
  struct sbx_egress_bounds bounds[SBX_EGRESS_POOLS];
  uint64_t max_bytes;
  unsigned total[SBX_EGRESS_POOLS];
  unsigned holding[SBX_EGRESS_POOLS]; /* tenants holding any of the pool */
  struct sandbox_entry *sandboxes;
  struct tenant_entry *tenants;
};

/* The 429's sentence, by pool: [pool][0 all, 1 tenant, 2 sandbox, 3 share]. */
static const char *const refusals[SBX_EGRESS_POOLS][4] = {
  {
      "the egress proxy has too many connections waiting for their request",
      "this tenant's sandboxes have too many egress connections waiting for their request",
      "this sandbox has too many egress connections waiting for their request",
      "the egress proxy is busy, and this tenant's sandboxes hold their fair share of the"
      " connections waiting for their request",
  },
  {
      "the egress proxy has too many connections open",
      "this tenant's sandboxes have too many egress connections open",
      "this sandbox has too many egress connections open",
      "the egress proxy is busy, and this tenant's sandboxes hold their fair share of its"
      " connections",
  },
};

void
sbx_egress_pending_bounds (const struct sbx_egress_bounds *open, struct sbx_egress_bounds *pending)
{
  pending->total = open->total / 4 ? open->total / 4 : 1;
  pending->tenant = open->tenant / 4 ? open->tenant / 4 : 1;
  pending->sandbox = open->sandbox ? open->sandbox : 1;
}

struct sbx_egress_limits *
sbx_egress_limits_new (const struct sbx_egress_bounds *pending,
                       const struct sbx_egress_bounds *open, uint64_t max_bytes)
{
  struct sbx_egress_limits *l = calloc (1, sizeof *l);

  if (l == NULL)
    return NULL;
  l->sandboxes = calloc (MAX_SANDBOXES, sizeof *l->sandboxes);
  l->tenants = calloc (MAX_TENANTS, sizeof *l->tenants);
  if (l->sandboxes == NULL || l->tenants == NULL)
    {
      sbx_egress_limits_free (l);
      return NULL;
    }
  pthread_mutex_init (&l->lock, NULL);
  l->bounds[SBX_EGRESS_PENDING] = *pending;
  l->bounds[SBX_EGRESS_OPEN] = *open;
  l->max_bytes = max_bytes;
  return l;
}

void
sbx_egress_limits_free (struct sbx_egress_limits *l)
{
  if (l == NULL)
    return;
  free (l->sandboxes);
  free (l->tenants);
  free (l);
}

static int
idle (const unsigned held[SBX_EGRESS_POOLS])
{
  return held[SBX_EGRESS_PENDING] == 0 && held[SBX_EGRESS_OPEN] == 0;
}

/* The entry named name, else a new one (an unused entry, or one nothing
   holds); -1 when every entry is held. */
static int
sandbox_entry (struct sbx_egress_limits *l, const char *id, int create)
{
  int i, spare = -1;

  for (i = 0; i < MAX_SANDBOXES; i++)
    {
      struct sandbox_entry *e = &l->sandboxes[i];
      if (e->id[0] != '\0' && strncmp (e->id, id, sizeof e->id) == 0)
        return i;
      if (spare < 0 && e->id[0] == '\0')
        spare = i;
    }
  if (!create)
    return -1;
  /* Full: forget a sandbox that holds nothing (its byte count goes). */
  for (i = 0; spare < 0 && i < MAX_SANDBOXES; i++)
    if (idle (l->sandboxes[i].held))
      spare = i;
  if (spare >= 0)
    {
      memset (&l->sandboxes[spare], 0, sizeof l->sandboxes[spare]);
      strncpy (l->sandboxes[spare].id, id, sizeof l->sandboxes[spare].id - 1);
    }
  return spare;
}

static int
tenant_entry (struct sbx_egress_limits *l, const char *name, int create)
{
  int i, spare = -1;

  for (i = 0; i < MAX_TENANTS; i++)
    {
      struct tenant_entry *e = &l->tenants[i];
      if (e->name[0] != '\0' && strncmp (e->name, name, sizeof e->name) == 0)
        return i;
      if (spare < 0 && idle (e->held))
        spare = i;
    }
  if (!create)
    return -1;
  if (spare >= 0)
    {
      memset (&l->tenants[spare], 0, sizeof l->tenants[spare]);
      strncpy (l->tenants[spare].name, name, sizeof l->tenants[spare].name - 1);
    }
  return spare;
}

/* Why pool p has no room for one more of sandbox s of tenant t; NULL when
   it has. */
static const char *
refused (const struct sbx_egress_limits *l, enum sbx_egress_pool p, const struct tenant_entry *t,
         const struct sandbox_entry *s)
{
  const struct sbx_egress_bounds *b = &l->bounds[p];
  unsigned share;

  if (l->total[p] >= b->total)
    return refusals[p][0];
  if (t->held[p] >= b->tenant)
    return refusals[p][1];
  if (s->held[p] >= b->sandbox)
    return refusals[p][2];
  /* The last quarter: for tenants under their fair share, a tenant yet to
     come counted among those that hold some. */
  share = b->total / (l->holding[p] + (t->held[p] == 0) + 1);
  if (l->total[p] >= b->total - b->total / 4 && t->held[p] >= (share ? share : 1))
    return refusals[p][3];
  return NULL;
}

static void
hold (struct sbx_egress_limits *l, enum sbx_egress_pool p, int tenant, int sandbox, int delta)
{
  struct tenant_entry *t = &l->tenants[tenant];

  assert (delta == 1 || (t->held[p] > 0 && l->sandboxes[sandbox].held[p] > 0));
  if (delta > 0 && t->held[p]++ == 0)
    l->holding[p]++;
  if (delta < 0 && --t->held[p] == 0)
    l->holding[p]--;
  l->sandboxes[sandbox].held[p] += (unsigned) delta;
  l->total[p] += (unsigned) delta;
}

int
sbx_egress_admit (struct sbx_egress_limits *l, const char *tenant, const char *sandbox,
                  struct sbx_egress_slot *slot, const char **why)
{
  int s, t;

  slot->sandbox = slot->tenant = slot->pool = -1;
  *why = NULL;
  pthread_mutex_lock (&l->lock);
  s = sandbox_entry (l, sandbox, 1);
  t = tenant_entry (l, tenant, 1);
  if (s < 0 || t < 0)
    *why = refusals[SBX_EGRESS_PENDING][0];
  else if (l->max_bytes && l->sandboxes[s].bytes >= l->max_bytes)
    *why = "this sandbox has used up its egress byte allowance";
  else
    *why = refused (l, SBX_EGRESS_PENDING, &l->tenants[t], &l->sandboxes[s]);
  if (*why == NULL)
    {
      hold (l, SBX_EGRESS_PENDING, t, s, 1);
      slot->sandbox = s;
      slot->tenant = t;
      slot->pool = SBX_EGRESS_PENDING;
    }
  pthread_mutex_unlock (&l->lock);
  return *why ? -1 : 0;
}

int
sbx_egress_promote (struct sbx_egress_limits *l, struct sbx_egress_slot *slot, const char **why)
{
  assert (slot->pool == SBX_EGRESS_PENDING);
  pthread_mutex_lock (&l->lock);
  *why = refused (l, SBX_EGRESS_OPEN, &l->tenants[slot->tenant], &l->sandboxes[slot->sandbox]);
  if (*why == NULL)
    {
      hold (l, SBX_EGRESS_PENDING, slot->tenant, slot->sandbox, -1);
      hold (l, SBX_EGRESS_OPEN, slot->tenant, slot->sandbox, 1);
      slot->pool = SBX_EGRESS_OPEN;
    }
  pthread_mutex_unlock (&l->lock);
  return *why ? -1 : 0;
}

void
sbx_egress_release (struct sbx_egress_limits *l, struct sbx_egress_slot *slot)
{
  if (slot->pool < 0)
    return;
  pthread_mutex_lock (&l->lock);
  hold (l, (enum sbx_egress_pool) slot->pool, slot->tenant, slot->sandbox, -1);
  pthread_mutex_unlock (&l->lock);
  slot->pool = -1;
}

int
sbx_egress_count_bytes (struct sbx_egress_limits *l, const struct sbx_egress_slot *slot,
                        size_t n, int *first_over)
{
  struct sandbox_entry *s = &l->sandboxes[slot->sandbox];
  int ok;

  assert (slot->pool >= 0);
  *first_over = 0;
  pthread_mutex_lock (&l->lock);
  s->bytes += n;
  ok = l->max_bytes == 0 || s->bytes <= l->max_bytes;
  if (!ok && !s->over_logged)
    s->over_logged = *first_over = 1;
  pthread_mutex_unlock (&l->lock);
  return ok;
}

unsigned
sbx_egress_held (struct sbx_egress_limits *l, enum sbx_egress_pool p, const char *tenant,
                 const char *sandbox)
{
  unsigned n;
  int i;

  pthread_mutex_lock (&l->lock);
  if (sandbox != NULL)
    n = (i = sandbox_entry (l, sandbox, 0)) >= 0 ? l->sandboxes[i].held[p] : 0;
  else if (tenant != NULL)
    n = (i = tenant_entry (l, tenant, 0)) >= 0 ? l->tenants[i].held[p] : 0;
  else
    n = l->total[p];
  pthread_mutex_unlock (&l->lock);
  return n;
}
