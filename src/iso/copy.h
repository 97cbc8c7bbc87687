/* sbx: copying a sandbox's disk tree as root (iso/copy.c): fork and
 * snapshots. The source is hostile (written by a sandbox): fd-relative,
 * O_NOFOLLOW, links copied as links, special files skipped, owners moved
 * between id ranges, depth bounded. */
#ifndef SBX_ISO_COPY_H
#define SBX_ISO_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

struct sbx_copy_result
{
  uint64_t files, dirs, symlinks, bytes;
  uint64_t skipped; /* FIFOs, sockets, device nodes: not copied */
  int32_t sys_errno; /* 0, or why it stopped */
  int32_t reserved;
  char what[160];
};

/* Copy the contents of the directory src (an O_RDONLY directory fd) into
   the directory dst, then src's own owner, mode and times onto dst. Owners
   are moved: src_base + k becomes dst_base + k (k < 65536). */
struct sbx_copy_job
{
  int src, dst;
};

/* Run the jobs in a child (which first calls enter(arg), e.g. to join the
   target's cgroup); fills res. Errors: TOO_LARGE (the target is full),
   INVALID (too deep, a foreign owner), SYSTEM. */
int sbx_copy_run (const struct sbx_copy_job *jobs, size_t njobs, uid_t src_base, uid_t dst_base,
                  int (*enter) (void *arg), void *enter_arg, struct sbx_copy_result *res,
                  sbx_error_t **err);
/* The copy itself, in the calling process (the child's work; tests). */
void sbx_copy_tree_now (int src_dir, int dst_dir, uid_t src_base, uid_t dst_base,
                        struct sbx_copy_result *res);

#endif
