/* sbx CLI: JSON requests to the daemon's API (docs/api.md). */
#ifndef SBX_CLI_API_H
#define SBX_CLI_API_H

#include <jansson.h>
#include <stdint.h>

#include "cli/http.h"
#include "util/buf.h"
#include "util/error.h"

/* JSON responses and file downloads collected in memory stop here. */
#define SBX_API_MAX_JSON (64u * 1024 * 1024)

struct sbx_api
{
  struct sbx_http_endpoint ep; /* owned */
  struct sbx_http_conn *conn;  /* owned; the one keep-alive connection */
};

/* Find the daemon from the environment (see sbx_http_endpoint_from_env);
   nothing is connected yet. */
int sbx_api_init (struct sbx_api *api, sbx_error_t **err);
void sbx_api_clear (struct sbx_api *api);
/* 1 if the last failure was not reaching the daemon at all. */
int sbx_api_unreachable (const struct sbx_api *api);

/* A request on `conn` (NULL: the API's own connection). 2xx bodies go to
   `on_data` when given, else are collected into `out` when non-NULL. A
   non-2xx answer becomes an error built from the daemon's JSON error body.
   Returns the HTTP status (2xx) or -1. */
int sbx_api_request (struct sbx_api *api, struct sbx_http_conn *conn,
                     const struct sbx_http_request *req, sbx_http_data_cb on_data,
                     void *ctx, struct sbx_buf *out, sbx_error_t **err);

/* A JSON request: `body` (borrowed, may be NULL) is sent as JSON; *out
   (when out is non-NULL) receives the parsed answer, or NULL for an empty
   one (204). Returns the HTTP status (2xx) or -1. */
int sbx_api_json (struct sbx_api *api, const char *method, const char *target,
                  const json_t *body, json_t **out, sbx_error_t **err);

/* Turn a non-2xx answer into an error: the kind from the `error` field (or
   the status), the text from `message`. `auth_hint` appends advice to set
   SBX_API_KEY to a 401. Pure; always returns -1. */
int sbx_api_error_from_body (int status, const char *body, size_t len,
                             int auth_hint, sbx_error_t **err);

/* PUT `size` bytes read from `fd` to `path` in sandbox `id` (creating or
   replacing it). `mode` >= 0 is sent as the file's permission bits;
   `parents` creates missing directories. */
int sbx_api_put_file (struct sbx_api *api, const char *id, const char *path, int fd,
                      uint64_t size, int mode, int parents, sbx_error_t **err);

/* Append "/v1/sandboxes/<id, escaped><suffix>" to b. */
void sbx_api_sandbox_path (struct sbx_buf *b, const char *id, const char *suffix);

#endif
