/* sbx: the process's own resident memory, threads and open descriptors,
 * for GET /metrics.
 *
 * The front end loses /proc to Landlock once it drops its privileges, so
 * /proc/self/status and /proc/self/fd are opened before (sbx_self_stats_open)
 * and read again through those descriptors at each scrape: an open procfs
 * file answers with the state of the moment it is read. */
#ifndef SBX_UTIL_SELF_STATS_H
#define SBX_UTIL_SELF_STATS_H

#include <stdint.h>

struct sbx_self_stats
{
  int64_t rss_bytes; /* -1: unknown */
  int64_t threads;   /* -1: unknown */
  int64_t open_fds;  /* -1: unknown (the two kept here not counted) */
};

/* Before the privilege drop; idempotent. 0, or -1 with errno. */
int sbx_self_stats_open (void);
void sbx_self_stats_read (struct sbx_self_stats *out);

#endif
