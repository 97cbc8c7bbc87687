/* sbx: the tamper-evident audit log (docs/audit.md).
 *
 * JSON lines in STATE/audit/audit.log, one record per line, each with
 * "seq" (1, 2, ...), "time" (RFC 3339, ms, UTC), "kind", the kind's fields
 * and "prev": the hex SHA-256 of the previous record's line (its exact
 * bytes, without the newline; 64 zeros before the first record). Lines
 * are canonical: compact, keys sorted. Full files are renamed
 * audit.log.1, audit.log.2, ... (the higher, the newer) and the chain
 * goes on in the new audit.log.
 *
 * Callers (any thread, the event loop included, with or without the
 * core lock) only build a JSON object and queue it: a writer thread
 * numbers, chains, writes and syncs. Every function here is a no-op
 * until sbx_audit_open and after sbx_audit_close.
 */
#ifndef SBX_CORE_AUDIT_H
#define SBX_CORE_AUDIT_H

#include <jansson.h>
#include <stdint.h>

#include "util/error.h"

#define SBX_AUDIT_DIR "audit"
#define SBX_AUDIT_FILE "audit.log"
#define SBX_AUDIT_DEFAULT_MAX_SIZE (64ULL * 1024 * 1024)
/* Records waiting for the writer, at most; more are counted, not kept. */
#define SBX_AUDIT_QUEUE_MAX 4096
/* argv of a command record: at most this many bytes of strings. */
#define SBX_AUDIT_ARGV_MAX 4096

/* Open (creating it) STATE/audit/audit.log, continue the chain from the
   last complete record found there (or in the newest rotated file), and
   start the writer. max_size: rotate before a line would take the file
   past it (at least 4 KiB). The directory must exist (the parent makes
   it) or be creatable. */
int sbx_audit_open (const char *state_dir, uint64_t max_size, sbx_error_t **err);
/* Called by the writer after each sync of the log with the last record's
   seq and hash (the parent's anchor: priv/audit_anchor.h). Before open. */
void sbx_audit_set_anchor (void (*fn) (uint64_t seq, const unsigned char hash[32]));
/* Write what is queued, sync, stop the writer, close. */
void sbx_audit_close (void);

/* Queue a record of `kind`; fields (stolen, may be NULL) must not hold
   "seq", "time", "prev" or "kind". */
void sbx_audit_record (const char *kind, json_t *fields);

/* One API call, at its completion. tenant: the key's tenant, "admin" for
   the unix socket, NULL when unauthenticated; action: "METHOD /pattern";
   sandbox: NULL when none. */
void sbx_audit_api (const char *tenant, const char *action, const char *sandbox,
                    unsigned status, int completed);
/* A command that ended. exit_code < 0: none (signal or never started);
   signal: its name ("SIGKILL") or NULL; reason: NULL when none. */
void sbx_audit_command (const char *sandbox, int pid, json_t *argv, const char *user,
                        const char *cwd, int exit_code, const char *signal, int64_t duration_ms,
                        const char *reason);
/* A file written through a files API (path as written, size in bytes,
   sha256: 64 hex digits of the content). via: "native" or "e2b". */
void sbx_audit_file_write (const char *sandbox, const char *path, uint64_t size,
                           const char *sha256, const char *via);
/* A sandbox's life: event "created", "killed", "expired", "died",
   "lost", "adopted". tenant and reason may be NULL. */
void sbx_audit_lifecycle (const char *event, const char *sandbox, const char *tenant,
                          const char *reason);
/* For the egress proxy: one connection attempt or request. decision:
   "allow" or "deny"; reason: NULL or why (the rule, "private address");
   bytes: sent + received through it (0 for a denial). */
void sbx_audit_egress (const char *sandbox, const char *host, unsigned port,
                       const char *decision, const char *reason, uint64_t bytes_out,
                       uint64_t bytes_in);

/* 0 while the log cannot be written (state-changing requests are then
   refused, docs/audit.md); 1 when it can, or when there is no log. */
int sbx_audit_healthy (void);
/* For /v1/info: {"enabled", "healthy", "seq", "queued", "dropped",
   "error", "file"}. */
json_t *sbx_audit_info_json (void);
/* For GET /metrics: records written (the chain's length), waiting, dropped
   (a full queue, no memory), and whether writes work. */
struct sbx_audit_stats
{
  int enabled, healthy;
  uint64_t written, queued, dropped;
};
void sbx_audit_stats (struct sbx_audit_stats *out);

/* Records with seq > after_seq (of `sandbox` when not NULL), oldest
   first, at most limit: {"records": [...], "more": bool}. Files whose last
   record is not after after_seq are skipped unread. NULL with err when
   the log is not open or cannot be read. */
json_t *sbx_audit_query (const char *sandbox, uint64_t after_seq, size_t limit,
                         sbx_error_t **err);

/* Hex of SHA-256 of p[0..n) into hex[65]. */
void sbx_audit_sha256_hex (const void *p, size_t n, char hex[65]);
/* RFC 3339 UTC with milliseconds ("2026-11-29T21:40:00.123Z") into out[32]. */
void sbx_audit_format_time (int64_t ms, char out[32]);

#endif
