/* sbx: the front end's privilege drop (priv/drop.c). */
#ifndef SBX_PRIV_DROP_H
#define SBX_PRIV_DROP_H

#include <sys/types.h>

#include "util/error.h"

/* Become uid:gid for good, without capabilities, under a Landlock domain
   limited to state_dir and /dev/null and a seccomp allowlist. */
int sbx_priv_drop (uid_t uid, gid_t gid, const char *state_dir, sbx_error_t **err);

#endif
