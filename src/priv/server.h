/* sbx: the privileged parent (see priv/proto.h and priv/server.c). */
#ifndef SBX_PRIV_SERVER_H
#define SBX_PRIV_SERVER_H

#include "core/config.h"
#include "iso/engine.h"
#include "util/error.h"

/* Before the first front end: the slot table and the templates. */
int sbx_priv_server_init (const struct sbx_config *cfg, struct sbx_engine *eng, sbx_error_t **err);
/* Serve one front end's first channel until it goes away (0) or breaks
   the protocol (-1); the channels it opens are served by threads. */
int sbx_priv_serve_master (int fd);
void sbx_priv_server_stop (void);
/* The current front end said READY (it started; a death now is a crash). */
int sbx_priv_frontend_ready (void);

#endif
