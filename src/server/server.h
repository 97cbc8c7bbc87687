/* sbx: the HTTP server (libmicrohttpd): listeners, auth, routing. */
#ifndef SBX_SERVER_SERVER_H
#define SBX_SERVER_SERVER_H

#include "util/error.h"

/* As root, before the front end drops it: open STATE/sbx.sock (0600:
   whoever can connect is the administrator) and, when listen is
   non-empty, HOST:PORT. fds[1] is -1 without TCP. */
/* socket_gid >= 0: the unix socket is root:socket_gid 0660, else 0600. */
int sbx_server_listen (const char *state_dir, const char *listen, long socket_gid, int fds[2],
                       sbx_error_t **err);
/* Serve HTTP on the listeners sbx_server_listen opened (the front end). */
int sbx_server_start (const char *state_dir, const char *listen, const int fds[2],
                      sbx_error_t **err);
/* Stop taking new connections. */
void sbx_server_quiesce (void);
/* Close every connection (after the core stopped, so none waits forever). */
void sbx_server_stop (void);

/* For fuzzing: an HTTP server with the real request path (unescaping,
   routing, body limits, replies) serving `table` as the administrator (no
   API keys, so no core is needed when its handlers need none). It has no
   listening socket and no thread: feed it with MHD_add_connection, drive it
   with MHD_run, stop it with MHD_stop_daemon. */
struct MHD_Daemon;
struct sbx_route;
struct MHD_Daemon *sbx__server_start_detached (const struct sbx_route *table, sbx_error_t **err);

#endif
