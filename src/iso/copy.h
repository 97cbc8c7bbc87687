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

/* Bounds of a copy (0: none): the data of all files together (what the
   source's disk holds: holes are kept, so an honest copy stays below it),
   and each file's size (the target's disk; RLIMIT_FSIZE in the copier). */
struct sbx_copy_limits
{
  uint64_t max_bytes;
  uint64_t max_file;
};

/* Run the jobs in a child, which first drops every descriptor but its
   jobs' and waits until we called enter(arg, its pid), e.g. to put it in
   the target's cgroup, so that the pages it writes are charged there; fills
   res. Errors: TOO_LARGE (the target is full, or a bound above was
   reached), INVALID (too deep, a foreign owner), SYSTEM. */
int sbx_copy_run (const struct sbx_copy_job *jobs, size_t njobs, uid_t src_base, uid_t dst_base,
                  const struct sbx_copy_limits *lim,
                  int (*enter) (void *arg, pid_t pid), void *enter_arg,
                  struct sbx_copy_result *res, sbx_error_t **err);
/* The copy itself, in the calling process (the child's work; tests). */
void sbx_copy_tree_now (int src_dir, int dst_dir, uid_t src_base, uid_t dst_base,
                        const struct sbx_copy_limits *lim, struct sbx_copy_result *res);

#endif
