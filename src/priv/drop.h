/* sbx: the front end's privilege drop (priv/drop.c). */
#ifndef SBX_PRIV_DROP_H
#define SBX_PRIV_DROP_H

#include <sys/types.h>

#include "util/error.h"

/* The part every unprivileged daemon process shares (the front end, the
   egress proxy): uid:gid for good (callers refuse root), no capabilities in any set
   nor the bounding set, no way back to root, killed with the parent,
   no_new_privs, not dumpable. */
int sbx_drop_credentials (uid_t uid, gid_t gid, sbx_error_t **err);

/* Become uid:gid for good, without capabilities, under a Landlock domain
   limited to state_dir and /dev/null and a seccomp allowlist. */
int sbx_priv_drop (uid_t uid, gid_t gid, const char *state_dir, sbx_error_t **err);

#endif
