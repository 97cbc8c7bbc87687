/* sbx: the HTTP server (libmicrohttpd): listeners, auth, routing. */
#ifndef SBX_SERVER_SERVER_H
#define SBX_SERVER_SERVER_H

#include "util/error.h"

/* Listen on STATE/sbx.sock and, when listen is non-empty, on HOST:PORT. */
int sbx_server_start (const char *state_dir, const char *listen, sbx_error_t **err);
/* Stop taking new connections. */
void sbx_server_quiesce (void);
/* Close every connection (after the core stopped, so none waits forever). */
void sbx_server_stop (void);

#endif
