/* sbx CLI: the NDJSON event stream of exec's stream mode (docs/api.md,
 * "Stream mode"): line splitting, event decoding and the exit status an
 * exit event maps to. Pure functions, no I/O. */
#ifndef SBX_CLI_EVENTS_H
#define SBX_CLI_EVENTS_H

#include <jansson.h>
#include <stddef.h>

#include "util/buf.h"
#include "util/error.h"

/* A 64 KiB output chunk is ~88 KiB of base64; a line past this is not one
   of ours. */
#define SBX_NDJSON_MAX_LINE (16u * 1024 * 1024)

typedef int (*sbx_ndjson_line_cb) (void *ctx, const char *line, size_t len,
                                   sbx_error_t **err);

/* Splits a byte stream into lines. Complete lines inside one chunk are
   handed over in place; only a line split across chunks is copied. */
struct sbx_ndjson
{
  struct sbx_buf partial; /* owned; the unfinished last line */
  size_t max_line;        /* 0: SBX_NDJSON_MAX_LINE */
};

#define SBX_NDJSON_INIT {SBX_BUF_INIT, 0}

/* Feed bytes; calls `cb` for each complete line (without "\n" or "\r\n";
   empty lines skipped). Fails when a line exceeds the limit or cb fails. */
int sbx_ndjson_feed (struct sbx_ndjson *nd, const char *data, size_t len,
                     sbx_ndjson_line_cb cb, void *ctx, sbx_error_t **err);
/* End of stream: a last line without "\n" is still a line. */
int sbx_ndjson_finish (struct sbx_ndjson *nd, sbx_ndjson_line_cb cb, void *ctx,
                       sbx_error_t **err);
void sbx_ndjson_clear (struct sbx_ndjson *nd);

enum sbx_event_type
{
  SBX_EVENT_UNKNOWN,
  SBX_EVENT_START,
  SBX_EVENT_STDOUT,
  SBX_EVENT_STDERR,
  SBX_EVENT_KEEPALIVE,
  SBX_EVENT_EXIT,
  SBX_EVENT_DROPPED,
};

/* Decode one line. For stdout/stderr the base64 data is decoded into
   `data` (reset first; a buffer reused across events) and *obj is NULL when
   the fast path needed no JSON parse; for other events *obj is the parsed
   object (owned by the caller). */
int sbx_event_parse (const char *line, size_t len, enum sbx_event_type *type,
                     struct sbx_buf *data, json_t **obj, sbx_error_t **err);

/* The exit status `sbx run`/`sbx exec` report for an exit event: the
   command's exit code; 124 when it timed out; 137 when it was killed (out
   of memory, a signal, the sandbox died); 126/127 when it could not start.
   `msg` receives the line to print after "sbx: " (empty when none); `cmd`
   is argv[0] of the command, for "CMD: reason". */
int sbx_exit_status (const json_t *exit_event, const char *cmd, struct sbx_buf *msg);

#endif
