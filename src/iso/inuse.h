/* sbx: another daemon's sandboxes on our uid range or cgroup parent
 * (iso/inuse.c). */
#ifndef SBX_ISO_INUSE_H
#define SBX_ISO_INUSE_H

#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

/* 0 when every live process with a uid in [lo, hi) is in a cgroup under
   `parent` and every process under `parent` has such a uid; otherwise -1
   with a message naming what another daemon holds. */
int sbx_iso_check_unshared (const char *cgroup_mount, const char *parent, uid_t lo, uint64_t hi,
                            sbx_error_t **err);

#endif
