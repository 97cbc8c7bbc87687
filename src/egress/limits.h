/* sbx: who may hold how many egress connections at once (egress/main.c).
 *
 * A connection is in one of two pools at a time:
 *   pending  accepted, its request head not yet read (HEAD_TIMEOUT_MS at
 *            most): a client that connects and says nothing;
 *   open     the head read and parsed: being decided, connected, relayed.
 * Each pool is bounded in all, per tenant and per sandbox. Past three
 * quarters of a pool, a tenant holding its fair share or more (the pool's
 * bound over the tenants holding any of it, plus one for a tenant yet to
 * come) gets no more of it: the last quarter is for the others, so one
 * tenant's sandboxes, however many, cannot take everyone's egress
 * (issue 16: 17 sandboxes of one tenant gave another 429). Bytes each
 * sandbox moved over the process's life are counted here too.
 *
 * Thread-safe (one mutex); a slot is owned by one connection's thread.
 */
#ifndef SBX_EGRESS_LIMITS_H
#define SBX_EGRESS_LIMITS_H

#include <stddef.h>
#include <stdint.h>

enum sbx_egress_pool
{
  SBX_EGRESS_PENDING,
  SBX_EGRESS_OPEN,
  SBX_EGRESS_POOLS
};

struct sbx_egress_bounds
{
  unsigned total;   /* all tenants */
  unsigned tenant;  /* one tenant's sandboxes together */
  unsigned sandbox; /* one sandbox */
};

struct sbx_egress_limits;

/* What one connection holds: its sandbox's and tenant's entries, and the
   pool it counts in (-1: none, after a release). */
struct sbx_egress_slot
{
  int sandbox, tenant;
  int pool;
};

/* The pending pool's bounds for an open pool's: a quarter of it in all
   and per tenant (a pending connection costs a thread and says nothing
   for up to the proxy's request timeout), a sandbox's bound whole (a
   client that opens many connections at once, parallel downloads, has
   them all pending for a moment). Each at least 1. */
void sbx_egress_pending_bounds (const struct sbx_egress_bounds *open,
                                struct sbx_egress_bounds *pending);

/* NULL when out of memory. max_bytes: per sandbox, 0 for no bound. */
struct sbx_egress_limits *sbx_egress_limits_new (const struct sbx_egress_bounds *pending,
                                                 const struct sbx_egress_bounds *open,
                                                 uint64_t max_bytes);
void sbx_egress_limits_free (struct sbx_egress_limits *l);

/* A new connection of sandbox (of tenant), counted as pending. 0, or -1
   with why (a sentence for the client's 429) and the slot holding nothing. */
int sbx_egress_admit (struct sbx_egress_limits *l, const char *tenant, const char *sandbox,
                      struct sbx_egress_slot *slot, const char **why);

/* Its head is parsed: from pending to open. 0, or -1 with why, the slot
   still pending (release it). */
int sbx_egress_promote (struct sbx_egress_limits *l, struct sbx_egress_slot *slot,
                        const char **why);

/* The connection is over. */
void sbx_egress_release (struct sbx_egress_limits *l, struct sbx_egress_slot *slot);

/* n more bytes moved; 0 when the sandbox is now over its allowance (the
   first time, *first_over is set, for one line in the log). */
int sbx_egress_count_bytes (struct sbx_egress_limits *l, const struct sbx_egress_slot *slot,
                            size_t n, int *first_over);

/* For tests and the log: what pool p holds in all, for tenant, for sandbox
   (0 for names it does not know). */
unsigned sbx_egress_held (struct sbx_egress_limits *l, enum sbx_egress_pool p,
                          const char *tenant, const char *sandbox);

#endif
