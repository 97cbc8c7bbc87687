/* sbx: the HTTP server (libmicrohttpd): listeners, auth, routing. */
#ifndef SBX_SERVER_SERVER_H
#define SBX_SERVER_SERVER_H

#include "util/error.h"

/* As root, before the front end drops it: open STATE/sbx.sock (0600:
   whoever can connect is the administrator) and, when listen is
   non-empty, HOST:PORT. fds[1] is -1 without TCP. */
int sbx_server_listen (const char *state_dir, const char *listen, int fds[2], sbx_error_t **err);
/* Serve HTTP on the listeners sbx_server_listen opened (the front end). */
int sbx_server_start (const char *state_dir, const char *listen, const int fds[2],
                      sbx_error_t **err);
/* Stop taking new connections. */
void sbx_server_quiesce (void);
/* Close every connection (after the core stopped, so none waits forever). */
void sbx_server_stop (void);

#endif
