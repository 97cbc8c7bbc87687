/* sbx: user namespaces made only to carry an id mapping (idmapped mounts
 * of snapshot and template layers, the recipe build's own namespace). */
#ifndef SBX_ISO_IDMAP_H
#define SBX_ISO_IDMAP_H

#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

/* Write "INSIDE OUTSIDE COUNT" as PID's uid_map and gid_map (root in the
   parent namespace may write any mapping). 0, or -1 with errno. */
int sbx_idmap_write (pid_t pid, uint32_t inside, uint32_t outside, uint32_t count);

/* An fd of a new user namespace with that mapping in both maps (for
   mount_setattr's MOUNT_ATTR_IDMAP), or -1 with *err set (err may be
   NULL). Made by a child that unshares and waits; the child is reaped
   before this returns, the namespace lives on through the fd. */
int sbx_idmap_userns (uint32_t inside, uint32_t outside, uint32_t count, sbx_error_t **err);

#endif
