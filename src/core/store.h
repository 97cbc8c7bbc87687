/* sbx: the daemon's persistent state in SQLite (STATE/sbx.db): sandbox
 * records and API keys. One connection, serialized by a mutex; WAL mode. */
#ifndef SBX_CORE_STORE_H
#define SBX_CORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

struct sbx_store;

struct sbx_sandbox_record
{
  const char *id, *tenant, *template_name, *user;
  int64_t created_ms, expires_ms;
  uint64_t memory, disk;
  uint32_t cpu_milli, pids;
  const char *env_json, *metadata_json;
  uint32_t slot;
  int64_t uid_base;
  int64_t init_pid;
  int64_t timeout_ms; /* the lifetime as last set (0 in old records) */
  /* The data plane's secrets (E2B's envdAccessToken and
     trafficAccessToken): "" in records from before them. */
  const char *access_token, *traffic_token;
  /* The egress policy as JSON ({"allow": [...], "deny": [...]}); "" for
     none (the default, and records from before it). */
  const char *network_json;
  /* Pause and resume: SBX_LIFECYCLE_* flags; whether it is paused, and
     then the lifetime it has left (the clock stops while paused). */
  uint32_t lifecycle;
  int paused;
  int64_t remaining_ms;
  const char *snapshot; /* the snapshot it was made from, "" */
  int snapshot_copied;  /* ... copied into its disk, not its disk's lower layer */
  /* Paused to disk, no process of it running (init_pid is long gone):
     SBX_HIBERNATED_MEMORY, a VM whose memory is in the store
     (core/vm_hibernate.c); SBX_HIBERNATED_FILESYSTEM, a namespace
     sandbox whose files are (core/pause_files.c); 0: neither. */
  int hibernated;
  /* Made by an operation not complete yet (a fork's tag, see
     sbx_store_sandbox_complete); "" or NULL: complete. A daemon that
     finds such a record at its start ends the sandbox: the client never
     got it (core/adopt.c). */
  const char *pending;
  /* E2B's maskRequestHost ("" or NULL: none): the Host header the port
     proxy sends its servers, "${PORT}" in it the port asked for. */
  const char *mask_host;
};

#define SBX_LIFECYCLE_PAUSE_ON_TIMEOUT 0x1 /* its lifetime ends in a pause, not a kill */
#define SBX_LIFECYCLE_AUTO_RESUME 0x2      /* a request to it while paused resumes it */
/* Not lifecycle, kept in the same persisted word: who may reach its ports
   (E2B's network.allowPublicTraffic; docs/e2b.md, Ports). PUBLIC: anyone
   with its host name, no token (asked for explicitly: sbx's default is the
   token); PRIVATE_EXPLICIT: allowPublicTraffic false, a missing token is
   then E2B's 403, not sbx's 401. */
#define SBX_LIFECYCLE_PUBLIC_PORTS 0x4
#define SBX_LIFECYCLE_PRIVATE_EXPLICIT 0x8
/* Its pause at the end of its lifetime keeps only its files (E2B's
   autoPauseMemory false, core/pause_files.c): the resume boots it again. */
#define SBX_LIFECYCLE_PAUSE_DROPS_MEMORY 0x10
#define SBX_LIFECYCLE_MASK 0x1f

#define SBX_HIBERNATED_MEMORY 1
#define SBX_HIBERNATED_FILESYSTEM 2

/* key: what secrets' values and sandboxes' data-plane tokens are sealed
   with in the file (core/seal.h); values an older daemon kept in the
   clear are sealed at open. */
int sbx_store_open (const char *path, const uint8_t key[32], struct sbx_store **out,
                    sbx_error_t **err);
void sbx_store_close (struct sbx_store *st);

int sbx_store_sandbox_insert (struct sbx_store *st, const struct sbx_sandbox_record *r,
                              sbx_error_t **err);
int sbx_store_sandbox_set_expiry (struct sbx_store *st, const char *id, int64_t expires_ms,
                                  int64_t timeout_ms, sbx_error_t **err);
int sbx_store_sandbox_set_tokens (struct sbx_store *st, const char *id, const char *access_token,
                                  const char *traffic_token, sbx_error_t **err);
int sbx_store_sandbox_set_network (struct sbx_store *st, const char *id, const char *network_json,
                                   sbx_error_t **err);
/* The record says paused (with the lifetime left) or running again (with
   its new expiry). */
int sbx_store_sandbox_set_paused (struct sbx_store *st, const char *id, int paused,
                                  int64_t remaining_ms, int64_t expires_ms, sbx_error_t **err);
/* The record says paused and hibernated, of kind SBX_HIBERNATED_* (a
   resume, set_paused 0, says neither). */
int sbx_store_sandbox_set_hibernated (struct sbx_store *st, const char *id, int kind,
                                      int64_t remaining_ms, int64_t expires_ms, sbx_error_t **err);
/* A filesystem-only hibernation was booted again (core/pause_files.c): its
   new init, and no longer hibernated (it stays paused until the resume
   says running: a restart in between adopts a paused sandbox). */
int sbx_store_sandbox_set_init (struct sbx_store *st, const char *id, int64_t init_pid,
                                sbx_error_t **err);
/* The operation tagged `pending` completed: every sandbox it made counts,
   all at once (one statement). */
int sbx_store_sandbox_complete (struct sbx_store *st, const char *pending, sbx_error_t **err);
int sbx_store_sandbox_end (struct sbx_store *st, const char *id, const char *state,
                           const char *reason, int64_t ended_ms, sbx_error_t **err);
/* Call fn for every record still "running" (what a restarted daemon
   re-adopts); the record's strings live only during the call. */
int sbx_store_sandbox_running (struct sbx_store *st,
                               void (*fn) (const struct sbx_sandbox_record *r, void *arg),
                               void *arg, sbx_error_t **err);
/* Drop records of sandboxes that ended before `before_ms`. */
int sbx_store_sandbox_prune (struct sbx_store *st, int64_t before_ms, sbx_error_t **err);

/* Snapshots (core/snapshot.c): the catalog; the files are the privileged
   parent's (iso/snapstore.c). */
struct sbx_snapshot_record
{
  char tenant[81];
  char name[65];
  char template_name[32];
  char source[32]; /* the sandbox it was taken from */
  int64_t created_ms;
  uint64_t bytes, files, disk; /* disk: the source's disk limit */
  /* isolation vm (1): its memory and CPU, which a restore must match
     (the snapshot is the guest's RAM, disk included); 0 for namespace */
  uint32_t isolation;
  uint64_t memory, cpu_milli;
  /* Being saved: the name is taken, nothing may use it yet, and a daemon
     that finds it so at its start removes it (the save was cut short, or
     its record was never completed). */
  int pending;
};
int sbx_store_snapshot_insert (struct sbx_store *st, const struct sbx_snapshot_record *r,
                               sbx_error_t **err);
/* A pending snapshot's save is done: it counts, with what it holds. */
int sbx_store_snapshot_complete (struct sbx_store *st, const struct sbx_snapshot_record *r,
                                 sbx_error_t **err);
/* Delete a complete record (pending 0) or a pending one (1); SBX_E_NOT_FOUND
   when there is no such record. */
int sbx_store_snapshot_delete (struct sbx_store *st, const char *tenant, const char *name,
                               int pending, sbx_error_t **err);
/* tenant and name NULL: any. Pending records too (r->pending says). */
int sbx_store_snapshot_list (struct sbx_store *st, const char *tenant, const char *name,
                             void (*fn) (const struct sbx_snapshot_record *r, void *arg),
                             void *arg, sbx_error_t **err);

struct sbx_key_record
{
  char id[16];
  char tenant[80];
  char prefix[16];
  int64_t created_ms;
};

int sbx_store_key_insert (struct sbx_store *st, const char *id, const char *tenant,
                          const unsigned char hash[32], const char *prefix, int64_t created_ms,
                          sbx_error_t **err);
/* Tenant of the key whose hash is given; 0 found, -1 with SBX_E_UNAUTHORIZED. */
int sbx_store_key_lookup (struct sbx_store *st, const unsigned char hash[32], char *tenant,
                          size_t cap, sbx_error_t **err);
int sbx_store_key_list (struct sbx_store *st, struct sbx_key_record **out, size_t *n,
                        sbx_error_t **err);
int sbx_store_key_delete (struct sbx_store *st, const char *id, sbx_error_t **err);

/* Secrets (core/secrets.c validates): a duplicate name is SBX_E_CONFLICT,
   an unknown one SBX_E_NOT_FOUND. get returns a NUL-terminated copy the
   caller wipes (explicit_bzero) and frees. list never reads a value. */
int sbx_store_secret_insert (struct sbx_store *st, const char *tenant, const char *name,
                             const void *value, size_t value_len, const char *description,
                             int64_t created_ms, sbx_error_t **err);
int sbx_store_secret_delete (struct sbx_store *st, const char *tenant, const char *name,
                             sbx_error_t **err);
int sbx_store_secret_get (struct sbx_store *st, const char *tenant, const char *name,
                          char **value, size_t *len, sbx_error_t **err);
int sbx_store_secret_list (struct sbx_store *st, const char *tenant,
                           void (*fn) (const char *name, const char *description,
                                       int64_t created_ms, void *arg),
                           void *arg, sbx_error_t **err);

#endif
