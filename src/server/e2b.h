/* sbx: E2B compatibility: the control plane (REST, e2b_control.c) and
 * each sandbox's data plane, "envd" (Connect RPC in JSON plus a few REST
 * routes: e2b_connect.c, e2b_process.c, e2b_filesystem.c, e2b_files.c).
 * The wire format is E2B's, captured from the real SDK
 * (docs/e2b.md, ../shared/docs/e2b-protocol.md). */
#ifndef SBX_SERVER_E2B_H
#define SBX_SERVER_E2B_H

#include <jansson.h>

#include "server/request.h"
#include "util/buf.h"
#include "util/error.h"

/* What sbx tells the SDK its envd is: the SDK switches features on this
   (src/envd/versions.ts); 0.6.4 turns on every one sbx implements. */
#define SBX_E2B_ENVD_VERSION "0.6.4"

/* The envd route table, ended by a NULL method (e2b_envd.c). */
extern const struct sbx_route sbx_envd_routes[];

/* ---- Connect protocol (e2b_connect.c) ---------------------------------- */

/* A JSON string of text that need not be UTF-8 (a client's bytes in a
   message, a file name): invalid sequences become U+FFFD. */
json_t *sbx_e2b_text_json (const char *text);
/* Connect's name for an sbx error kind ("not_found", ...). */
const char *sbx_connect_code (enum sbx_error_kind kind);
/* The HTTP status of a unary error with that code. */
unsigned sbx_connect_status (const char *code);
/* A unary error answer {"code","message"}; frees err. */
void sbx_connect_reply_err (struct sbx_req *r, sbx_error_t *err);
void sbx_connect_reply_code (struct sbx_req *r, const char *code, const char *message);
/* A unary success: 200 application/json; steals body. */
void sbx_connect_reply_ok (struct sbx_req *r, json_t *body);
/* The request message of a unary call (Content-Type application/json) or
   of a server-streaming one (application/connect+json, one envelope).
   *out is a new reference to a JSON object. */
int sbx_connect_unary_request (struct sbx_req *r, json_t **out, sbx_error_t **err);
int sbx_connect_stream_request (struct sbx_req *r, json_t **out, sbx_error_t **err);
/* Append msg (stolen) as one message envelope; -1 when out of memory. */
int sbx_connect_append (struct sbx_buf *out, json_t *msg);

struct sbx_connect_stream_ops
{
  /* Append the next messages (whole envelopes, sbx_connect_append) to
     out, waiting at most wait_ms for something to happen. 1: the last
     message is in out; 0: more to come; -1: failed (err set, or NULL for
     want of memory): the stream ends with that error. */
  int (*next) (void *ctx, struct sbx_buf *out, int64_t wait_ms, sbx_error_t **err);
  /* The stream is over (completed or not): free ctx. */
  void (*release) (void *ctx, int completed);
  /* The keepalive message, sent after Keepalive-Ping-Interval seconds
     of silence. */
  const char *keepalive_json;
  /* Optional: wait at most wait_ms until next has something to give; 1
     then, 0 otherwise. With it, the stream makes sure its client is still
     there before next takes what it gives (a shared buffer's output must
     stay for the next reader, not go into a dead connection). */
  int (*wait) (void *ctx, int64_t wait_ms);
};
/* Answer a server-streaming call: 200, application/connect+json, the
   messages as they come, keepalives, then the end-stream envelope (with
   deadline_exceeded once Connect-Timeout-Ms has passed). On failure to
   even start, ops->release is called and an error is answered. */
void sbx_connect_reply_stream (struct sbx_req *r, const struct sbx_connect_stream_ops *ops,
                               void *ctx);
/* A streaming call that fails before its first message: 200 and an
   end-stream envelope carrying the error, as Connect wants; frees err. */
void sbx_connect_reply_stream_err (struct sbx_req *r, sbx_error_t *err);
/* Connect-Timeout-Ms in ms, 0 when absent; -1 when malformed. */
int64_t sbx_connect_timeout_ms (struct sbx_req *r);

/* ---- envd helpers (e2b_envd.c) ------------------------------------------ */

/* The acting user of an envd request (E2B's Basic auth). */
const char *sbx_e2b_user (struct sbx_req *r);
/* A path of a request made absolute: relative ones against the user's
   home, as envd does; out is SBX_FS_PATH_MAX. */
int sbx_e2b_path (struct sbx_req *r, const char *user, const char *in, char *out,
                  sbx_error_t **err);
/* E2B's EntryInfo of a file. */
struct sbx_fs_entry;
json_t *sbx_e2b_entry_json (const struct sbx_fs_entry *e);
/* {key: value} of a file's metadata; NULL when it has none. */
json_t *sbx_e2b_meta_json (const struct sbx_fs_meta *m);
/* A request field: a string (NULL when absent), -1 when of another type. */
int sbx_e2b_string (json_t *o, const char *key, const char **out, sbx_error_t **err);

/* ---- control plane (e2b_control.c) ------------------------------------- */

void sbx_route_e2b_create (struct sbx_req *r);
void sbx_route_e2b_list (struct sbx_req *r);
void sbx_route_e2b_get (struct sbx_req *r);
void sbx_route_e2b_kill (struct sbx_req *r);
void sbx_route_e2b_timeout (struct sbx_req *r);
void sbx_route_e2b_connect (struct sbx_req *r);
void sbx_route_e2b_pause (struct sbx_req *r);
void sbx_route_e2b_resume (struct sbx_req *r);
void sbx_route_e2b_fork (struct sbx_req *r);
void sbx_route_e2b_snapshot_create (struct sbx_req *r);
void sbx_route_e2b_snapshot_list (struct sbx_req *r);
void sbx_route_e2b_template_delete (struct sbx_req *r);
void sbx_route_e2b_template_alias (struct sbx_req *r);
/* e2b_logs.c */
void sbx_route_e2b_logs (struct sbx_req *r);
void sbx_route_e2b_refresh (struct sbx_req *r);
void sbx_route_e2b_metrics (struct sbx_req *r);
void sbx_route_e2b_health (struct sbx_req *r);
/* Pause, resume, fork, snapshots, network updates: not in this engine
   yet; a clear answer instead of a hang. */
void sbx_route_e2b_network (struct sbx_req *r);

/* ---- data plane --------------------------------------------------------- */

void sbx_route_envd_health (struct sbx_req *r);
void sbx_route_envd_envs (struct sbx_req *r);
void sbx_route_envd_metrics (struct sbx_req *r);
void sbx_route_envd_unimplemented (struct sbx_req *r);
void sbx_route_envd_files_get (struct sbx_req *r);
void sbx_route_envd_files_post (struct sbx_req *r);
/* The body of POST /files (multipart or octet-stream), chunk by chunk. */
int sbx_e2b_files_begin (struct sbx_req *r, sbx_error_t **err);
void sbx_e2b_files_body (struct sbx_req *r, const char *data, size_t len);
void sbx_e2b_files_free (struct sbx_req *r);

void sbx_route_process_rpc_start (struct sbx_req *r);
void sbx_route_process_rpc_connect (struct sbx_req *r);
void sbx_route_process_rpc_list (struct sbx_req *r);
void sbx_route_process_rpc_send_input (struct sbx_req *r);
void sbx_route_process_rpc_close_stdin (struct sbx_req *r);
void sbx_route_process_rpc_send_signal (struct sbx_req *r);
void sbx_route_process_rpc_update (struct sbx_req *r);

void sbx_route_fs_rpc_stat (struct sbx_req *r);
void sbx_route_fs_rpc_make_dir (struct sbx_req *r);
void sbx_route_fs_rpc_move (struct sbx_req *r);
void sbx_route_fs_rpc_list_dir (struct sbx_req *r);
void sbx_route_fs_rpc_remove (struct sbx_req *r);
void sbx_route_fs_rpc_watch_dir (struct sbx_req *r);
void sbx_route_fs_rpc_create_watcher (struct sbx_req *r);
void sbx_route_fs_rpc_get_watcher_events (struct sbx_req *r);
void sbx_route_fs_rpc_remove_watcher (struct sbx_req *r);
/* Stop every polled watcher (server shutdown, before the core is freed). */
void sbx_e2b_watchers_free (void);

#endif
