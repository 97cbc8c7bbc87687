/* sbx: the unprivileged front end's main (priv/frontend.c). */
#ifndef SBX_PRIV_FRONTEND_H
#define SBX_PRIV_FRONTEND_H

#include <sys/types.h>

#include "core/config.h"

/* Runs until SIGTERM; returns the exit status. `master` is the first
   channel to the parent, listen_fds the HTTP listeners (unix, TCP or -1). */
int sbx_frontend_main (const struct sbx_config *cfg, int master, const int listen_fds[2],
                       uid_t uid, gid_t gid);

#endif
