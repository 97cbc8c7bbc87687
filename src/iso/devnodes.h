/* sbx: each sandbox's own /dev (the parent's side; init attaches it). */
#ifndef SBX_ISO_DEVNODES_H
#define SBX_ISO_DEVNODES_H

#include "util/error.h"

/* A detached mount of a fresh small tmpfs holding the harmless devices
   (null zero full random urandom tty, 0666), the mount points pts and
   shm, and the links ptmx fd stdin stdout stderr: made by the parent,
   root of the initial user namespace, since device nodes open only on a
   filesystem mounted there. Its inodes are this sandbox's alone. The
   caller owns the descriptor; -1 with *err on failure. */
int sbx_dev_mount (sbx_error_t **err);

#endif
