/* sbx: the core: sandbox registry and lifecycle, commands and their
 * output, the event loop, the pool of pre-built sandboxes, the reaper.
 *
 * Concurrency: one mutex (core lock) guards every sandbox and process;
 * HTTP threads take it briefly and wait on per-object condition variables.
 * One event-loop thread owns the epoll set: init control sockets, init
 * pidfds, command pipes and the deadline timer. Output is copied into
 * bounded per-process buffers; nothing waits on a slow reader but that
 * reader. Slow work (killing a sandbox, building one for the pool) runs on
 * worker threads, never in the loop.
 */
#ifndef SBX_CORE_CORE_H
#define SBX_CORE_CORE_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "core/config.h"
#include "core/store.h"
#include "iso/engine.h"
#include "iso/fs.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/id.h"
#include "util/parse.h"

/* ---- output buffers ---------------------------------------------------- */

enum sbx_out_mode
{
  SBX_OUT_HEAD,  /* keep the first `cap` bytes, count the rest as dropped */
  SBX_OUT_TAIL,  /* keep the last `cap` bytes (a ring) */
  SBX_OUT_BLOCK, /* lossless: stop reading the pipe while `cap` bytes are unread */
};

struct sbx_outbuf
{
  char *data;        /* owned: a ring of cap bytes (HEAD: linear, grown to cap) */
  size_t cap;
  size_t alloc;      /* bytes allocated at data */
  uint64_t start;    /* absolute offset of the oldest byte kept */
  uint64_t end;      /* absolute offset after the newest byte */
  uint64_t dropped;  /* HEAD: bytes not kept */
  int fd;            /* pipe read end, -1 once closed */
  uint64_t watch;    /* loop handle, 0 when not watched */
  int paused;        /* BLOCK: not reading until the reader catches up */
  int64_t drain_left; /* after exit: bytes still to read, -1 before exit */
  /* A terminal's master, not a pipe: EIO is its end of file (the slave
     side is closed everywhere), and a drain after the exit reads until
     the master has nothing more (see sbx__outbuf_start_drain). */
  int tty;
};

/* ---- processes --------------------------------------------------------- */

enum sbx_proc_state
{
  SBX_PROC_STARTING,
  SBX_PROC_RUNNING,
  SBX_PROC_DONE, /* exited (or never started) and all output read */
};

struct sbx_sandbox;
struct sbx_watch; /* a directory watch (watch.c) */

/* A connect that init makes for the port proxy (core/ports.c). */
struct sbx_connect
{
  struct sbx_connect *next;
  uint64_t req_id;
  int done;
  int fd;        /* the connected socket once done, -1 on failure */
  int sys_errno; /* why it failed */
};

/* A copy that a helper in the sandbox makes for the files API. */
struct sbx_pump
{
  struct sbx_pump *next;
  uint64_t req_id;
  int done;
  int status; /* 0, or the errno that stopped it */
};

struct sbx_process
{
  struct sbx_process *next; /* in the sandbox's list */
  struct sbx_sandbox *sb;   /* holds a reference */
  int refs;
  uint64_t req_id;
  int pid; /* inside; 0 until started */
  enum sbx_proc_state state;
  enum sbx_out_mode mode;
  int background;      /* listed until collected by wait */
  int collected;
  json_t *argv;        /* owned, for listing */
  json_t *env;         /* owned: the request's own variables, for listing */
  char user_tag[64];   /* the client's name for it (E2B's tag), "" when none */
  int daemons_own;     /* a VM's file operation or the code server: not a client's command */
  char *cwd;
  char user[16];
  int64_t started_ms;  /* wall clock */
  int64_t start_mono, end_mono;
  /* stdin */
  int stdin_fd;
  uint64_t stdin_watch;
  int stdin_open;      /* the API may still write */
  int stdin_eof;       /* close once pending is written */
  struct sbx_buf stdin_pending;
  uint64_t stdin_queued, stdin_written; /* bytes taken from the API, bytes in the pipe */
  /* output */
  struct sbx_outbuf out[2];
  /* result */
  int exited;
  int wait_status;
  int spawn_errno;
  uint32_t spawn_stage;
  int timed_out;
  int oom_killed;
  int killed_by_api; /* a signal came through the API */
  int sandbox_ended; /* killed because its sandbox ended (a kill, its lifetime) */
  /* BLOCK: every attached reader paces it (the buffer keeps what the
     slowest has not read). With none attached (the last went away) it
     runs unpaced: the newest `cap` bytes stay for the next reader, who
     starts where the last one stopped and is told what was dropped. */
  struct sbx_reader *readers;
  int unpaced;
  uint64_t resume_off[2];
  char reason[160];
  uint64_t oom_before;
  uint64_t limit_hits_before;
  int oom_outside;       /* the OOM kill came from outside its limit (the host) */
  int64_t deadline_mono; /* 0: none */
  uint64_t timeout_ms;   /* as asked, for the reason */
  /* On a terminal (sbx_exec_opts.pty): out[0] and stdin_fd are its master
     (stdout and stderr are one stream there; out[1] stays empty). */
  int pty;
  uint64_t resize_sent, resize_acked; /* RESIZE requests and init's answers */
  int resize_errno;                   /* of the last answer */
  pthread_cond_t cond;   /* any change: output, state, stdin space */
};

/* ---- sandboxes --------------------------------------------------------- */

enum sbx_sb_state
{
  SBX_SB_POOLED,  /* built, idle, not yet anyone's */
  SBX_SB_RUNNING,
  SBX_SB_DYING,
  SBX_SB_DEAD,
};

struct sbx_sandbox
{
  struct sbx_sandbox *next; /* registry or pool list */
  int refs;
  enum sbx_sb_state state;
  char id[SBX_ID_LEN + 1];
  char tenant[80];
  char template_name[32];
  char user[16];
  /* Secrets of the E2B data plane (server/e2b_*.c): the access token every
     envd call carries, and the token that lets a request through to the
     sandbox's ports. 40 hex digits each; fixed once the sandbox is handed
     out. */
  char access_token[41];
  char traffic_token[41];
  int64_t created_ms, expires_ms; /* wall clock */
  int64_t expires_mono;
  uint64_t timeout_ms;
  struct sbx_limits limits;
  json_t *env;      /* owned object of strings */
  json_t *metadata; /* owned object of strings */
  /* The egress policy: owned, canonical {"allow": [...], "deny": [...]}
     (sbx_network_canon), or NULL for none. Replaced whole, under the lock;
     a connection takes a snapshot (core/egress.c). */
  json_t *network;
  uint32_t slot;
  uint64_t oom_seen;        /* the cgroup's OOM kills when last asked (see process.c) */
  uint64_t limit_hits_seen; /* and the times it reached its memory limit (v2) */
  struct sbx_iso_box box;
  uint64_t ctl_watch, pidfd_watch;
  uint64_t next_req_id;
  struct sbx_process *procs;
  struct sbx_pump *pumps; /* copies in flight (core/pump.c) */
  struct sbx_watch *watches; /* directory watches whose helper may run (core/watch.c) */
  unsigned nwatches;
  struct sbx_connect *connects; /* port-proxy connects in flight (core/ports.c) */
  unsigned proxies;             /* proxied HTTP requests open (core/ports.c) */
  int kill_queued;
  int in_pool;
  enum sbx_isolation isolation; /* fixed at build; the pool holds only namespace ones */
  /* Pause and resume (core/lifecycle.c). lifecycle: SBX_LIFECYCLE_*
     (store.h). While paused every process is frozen and the lifetime
     clock stands: remaining_ms is what is left of it. `transition` is set
     while a pause or resume runs (others wait on cond); pause_queued while
     the janitor is to pause it (its lifetime ended, on_timeout "pause"). */
  /* The snapshot it was made from, "" when none: under its disk as a
     layer, or (snapshot_copied) copied into it where the kernel cannot
     layer it (iso/kernel.h). Either way the snapshot is in use while it
     runs: its delete is a 409 on every kernel. */
  char snapshot[65];
  int snapshot_copied;
  /* Its metrics over time (core/metrics_history.c): a ring of
     history_cap samples (grown up to SBX_METRICS_HISTORY), history_len of
     them from history_start on; under the core's lock. */
  struct sbx_metrics_sample *history;
  unsigned history_cap, history_start, history_len;
  /* Its tenant's usage counted up to then (counters.h): usage_ms 0 until
     the first sample after it (re)booted or was adopted, which only sets
     the baseline, so a restart or a boot never charges twice. */
  int64_t usage_ms;
  double usage_cpu;
  /* The Host the port proxy sends its servers, "" for the client's
     (E2B's maskRequestHost; set at create, never changed). */
  char mask_host[SBX_MASK_HOST_MAX + 1];
  uint32_t lifecycle;
  int paused;
  /* Paused to disk, its box empty (no init or relay, no control socket):
     SBX_HIBERNATED_MEMORY, a VM whose QEMU ended, its memory in the store
     (core/vm_hibernate.c); SBX_HIBERNATED_FILESYSTEM, a namespace sandbox
     whose processes ended, its files in the store (core/pause_files.c). */
  int hibernated;
  /* A pause without memory's file may still be in the store although the
     sandbox runs (its removal at the boot failed): its kill removes it. */
  int image_left;
  int transition;
  int pause_queued;
  int64_t remaining_ms;
  int64_t paused_mono;
  char end_reason[64];
  pthread_cond_t cond; /* state changes */
};

/* ---- requests ---------------------------------------------------------- */

struct sbx_create_opts
{
  const char *template_name; /* NULL: base */
  uint64_t timeout_ms;       /* 0: default */
  struct sbx_limits limits;  /* zero fields: defaults */
  json_t *env;               /* borrowed, may be NULL */
  json_t *metadata;          /* borrowed, may be NULL */
  const char *user;          /* NULL: "user" */
  json_t *network;           /* borrowed, from sbx_network_canon; NULL: none */
  const char *isolation;     /* "namespace" or "vm"; NULL: the daemon's default */
  uint32_t lifecycle;        /* SBX_LIFECYCLE_* (store.h) */
  const char *snapshot;      /* NULL, or the tenant's snapshot to start from */
  /* E2B's maskRequestHost: the Host its port proxy sends (sbx_mask_host_ok;
     "${PORT}" the port); NULL: the client's own. */
  const char *mask_host;
  /* The daemon's own VM memory image to start from (a fork's, core/fork.c;
     its name is not in the catalog, so this record stands in for it):
     NULL for every request from a client. */
  const struct sbx_snapshot_record *internal_snapshot;
  /* The tag of the operation that makes it (a fork's): its record stays
     pending, and a restart ends it, until sbx_store_sandbox_complete;
     NULL: it counts once made. */
  const char *pending;
};

struct sbx_exec_opts
{
  char **argv;       /* borrowed, NULL-terminated */
  json_t *env;       /* borrowed, may be NULL */
  const char *cwd;   /* NULL: the user's home */
  const char *user;  /* NULL: the sandbox's */
  const void *stdin_data;
  size_t stdin_len;
  int stdin_open;
  uint64_t timeout_ms;
  enum sbx_out_mode mode;
  size_t out_cap;    /* per stream */
  int background;
  /* Run on a pseudo-terminal of pty_cols x pty_rows (each 1..1000) from
     the sandbox's own devpts: the command's stdin, stdout, stderr and
     controlling terminal. Its output (stdout and stderr together, as a
     terminal shows them) goes to the stdout buffer; stdin is open. */
  int pty;
  unsigned pty_cols, pty_rows;
  const char *user_tag; /* NULL or a name (<= 63 bytes) to find it by */
  int file_op; /* isolation vm: a file operation of the agent's (core/vm_fs.c), not an exec;
                  never set from a request */
};

/* ---- egress policies (core/egress.c, docs/egress.md) -------------------- */

/* Check a policy as a client sent it ({"allow": [...], "deny": [...]},
   both optional, nothing else; strings as egress/policy.h says) and return
   its canonical form (entries rewritten as the proxy understands them,
   duplicates dropped), or NULL for "none" when allow is empty and deny
   too. *out is NULL or new. */
int sbx_network_canon (json_t *in, json_t **out, sbx_error_t **err);
/* Replace a sandbox's policy (canon borrowed, NULL: none): stored, then in
   force for the next connection. */
int sbx_sandbox_set_network (struct sbx_sandbox *sb, json_t *canon, sbx_error_t **err);

/* ---- the core's API ---------------------------------------------------- */

int sbx_core_start (const struct sbx_config *cfg, sbx_error_t **err);
/* Stop accepting work, kill every sandbox, stop the threads. */
void sbx_core_stop (void);
/* Release what the core holds; after sbx_core_stop and once no request
   handler can run any more. */
void sbx_core_free (void);
const struct sbx_config *sbx_core_config (void);
struct sbx_store *sbx_core_store (void);
/* The cgroup version and Landlock ABI of the host (for /v1/info). */
/* What the privileged parent said of the host at HELLO (priv/host.h). */
const struct sbx_host_info *sbx_core_host_info (void);
/* Why snapshots are copied into new sandboxes instead of layered under
   their disks, into buf; "" when they are layers. */
const char *sbx_core_snapshot_copy_reason (char *buf, size_t cap);
int64_t sbx_now_ms (void);
/* A wall-clock time in ms as an RFC 3339 UTC string, with milliseconds
   ("2026-12-02T05:51:30.123Z"). */
json_t *sbx_json_time (int64_t ms);
/* jansson reports a failed allocation only as a NULL from the call that
   made it, which most JSON building passes on silently (json_object_set_new
   drops it): an answer could lose a field. With the checked allocator
   (installed once at start, before any JSON exists) a failure is noted for
   the calling thread; code that sends JSON resets the note first and
   checks it last. */
void sbx_json_checked_alloc (void);
int sbx_json_alloc_failed (void);
void sbx_json_alloc_reset (void);
/* Note a failure of an allocation made for JSON outside jansson. */
void sbx_json_alloc_mark_failed (void);
int64_t sbx_mono_ms (void);

/* Sandboxes. `tenant` NULL means the administrator (sees all). */
struct sbx_sandbox *sbx_sandbox_create (const char *tenant, const struct sbx_create_opts *opts,
                                        sbx_error_t **err);
struct sbx_sandbox *sbx_sandbox_get (const char *tenant, const char *id, sbx_error_t **err);
/* When the sandbox's lifetime ends (wall clock, ms). */
int64_t sbx_sandbox_expires_ms (struct sbx_sandbox *sb);
void sbx_sandbox_ref (struct sbx_sandbox *sb);
void sbx_sandbox_unref (struct sbx_sandbox *sb);
json_t *sbx_sandbox_json (struct sbx_sandbox *sb);
/* JSON array of the sandboxes visible to tenant whose metadata contains
   every pair of `filter` (may be NULL). */
json_t *sbx_sandbox_list (const char *tenant, json_t *filter);
int sbx_sandbox_set_timeout (struct sbx_sandbox *sb, uint64_t timeout_ms, sbx_error_t **err);
int sbx_sandbox_kill (struct sbx_sandbox *sb, const char *reason, sbx_error_t **err);
/* Pause (freeze every process, keep memory, stop the lifetime clock) and
   resume (timeout_ms 0: the lifetime left when paused; else a new one).
   SBX_E_CONFLICT when it is already paused / not paused, SBX_E_NOT_FOUND
   when it is gone, SBX_E_UNAVAILABLE when the host has no freezer. */
int sbx_sandbox_pause (struct sbx_sandbox *sb, sbx_error_t **err);
int sbx_sandbox_resume (struct sbx_sandbox *sb, uint64_t timeout_ms, sbx_error_t **err);
int sbx_sandbox_is_paused (struct sbx_sandbox *sb);
/* Pause to disk (core/vm_hibernate.c): a VM's memory saved in the store,
   its QEMU ended; resumed as any paused sandbox. NOT_IMPLEMENTED for a
   namespace sandbox, CONFLICT when it is paused already. */
int sbx_sandbox_hibernate (struct sbx_sandbox *sb, sbx_error_t **err);
/* A pause without memory (core/pause_files.c, E2B's keepMemory false): a
   namespace sandbox's files are kept, its processes end, and its resume
   boots it again. remaining_ms < 0: the lifetime it has left now.
   NOT_IMPLEMENTED for a VM, CONFLICT when it is paused already. */
int sbx_sandbox_pause_files (struct sbx_sandbox *sb, int64_t remaining_ms, sbx_error_t **err);
/* Fork (core/fork.c): `count` (1..SBX_FORK_MAX) new sandboxes of the same
   tenant with the source's settings (template, limits, env, metadata,
   user, network policy, lifecycle; timeout_ms 0: the source's lifetime)
   and a copy of its disk (/home/user, /tmp, /dev/shm), taken while it is
   frozen. Its running processes are not carried, but for a VM, whose
   whole memory is (core/vm_fork.c). All or nothing: on
   success out->sb holds count new sandboxes (a reference each, released by
   sbx_fork_result_release). */
#define SBX_FORK_MAX 256
struct sbx_fork_result
{
  struct sbx_sandbox *sb[SBX_FORK_MAX];
  unsigned n;
  uint64_t files, dirs, symlinks, bytes, skipped; /* per copy */
  /* A VM's fork: its memory was carried (processes included); the size of
     the one memory image all copies were restored from. */
  int vm;
  uint64_t memory_image_bytes;
};
int sbx_sandbox_fork (struct sbx_sandbox *src, unsigned count, uint64_t timeout_ms,
                      struct sbx_fork_result *out, sbx_error_t **err);
void sbx_fork_result_release (struct sbx_fork_result *out);
/* Snapshots (core/snapshot.c). Save the sandbox's disk as its tenant's
   snapshot `name` (CONFLICT when it exists; LIMIT past 64 per tenant);
   returns its JSON. List (name NULL: all) and delete a tenant's. */
json_t *sbx_snapshot_create (struct sbx_sandbox *sb, const char *name, sbx_error_t **err);
json_t *sbx_snapshot_list (const char *tenant, const char *name, sbx_error_t **err);
/* A tenant's snapshots, at most. */
#define SBX_SNAPSHOTS_PER_TENANT 64
/* The snapshots tenant has: how many, and their bytes (GET /v1/info). */
int sbx_snapshot_usage (const char *tenant, unsigned *count, uint64_t *bytes, sbx_error_t **err);
int sbx_snapshot_delete (const char *tenant, const char *name, sbx_error_t **err);
/* {"sandboxes": [native JSON...], "processes_not_carried": true,
   "copied": {"files", "directories", "symlinks", "bytes", "skipped_special"}} */
json_t *sbx_fork_result_json (const struct sbx_fork_result *out);
/* Before work in the sandbox (commands, files, watches, ports): 0 when it
   runs; a paused one is resumed when it was created with auto_resume,
   else SBX_E_CONFLICT "sandbox `ID` is paused". */
int sbx_sandbox_awake (struct sbx_sandbox *sb, sbx_error_t **err);
json_t *sbx_sandbox_metrics (struct sbx_sandbox *sb, sbx_error_t **err);
/* What a user inside sees, from metrics m: a VM's guest memory and CPU
   time (its "guest" object) when it has one, else the cgroup's figures. */
void sbx_metrics_inside (const json_t *m, json_int_t *mem_used, json_int_t *mem_total,
                         double *cpu_seconds);

/* Metrics over time (core/metrics_history.c): every running sandbox is
   sampled every SBX_METRICS_INTERVAL_MS, and the last SBX_METRICS_HISTORY
   samples (an hour) are kept while it lives in this daemon. */
#define SBX_METRICS_INTERVAL_MS 5000
#define SBX_METRICS_HISTORY 720
struct sbx_metrics_sample
{
  int64_t ms;          /* when (wall clock) */
  double cpu_seconds;  /* CPU time since it (last) booted */
  double cpu_used_pct; /* of its CPUs, since the sample before (the first: its start) */
  double cpus;         /* its CPU limit */
  int64_t mem_used, mem_total, disk_used, disk_total; /* a VM's: its guest's */
};
/* Copies of the samples taken in [from_ms, to_ms], oldest first (*out
   NULL when none; the caller frees it). */
int sbx_sandbox_metrics_history (struct sbx_sandbox *sb, int64_t from_ms, int64_t to_ms,
                                 struct sbx_metrics_sample **out, size_t *n, sbx_error_t **err);
/* A sample of now, its cpu_used_pct since the newest kept one. */
int sbx_sandbox_metrics_now (struct sbx_sandbox *sb, struct sbx_metrics_sample *out,
                             sbx_error_t **err);
/* What the sandbox's disk can hold (see DISK_HEADROOM in registry.c). */
uint64_t sbx_sandbox_disk_limit (struct sbx_sandbox *sb);
/* Files API context for `user` ("user", "root" or NULL for the sandbox's):
   a root fd of our own and a copier that writes through the sandbox's own
   helper. Release with sbx_sandbox_fs_close. */
int sbx_sandbox_fs_open (struct sbx_sandbox *sb, const char *user, struct sbx_fs_ctx *ctx,
                         sbx_error_t **err);
void sbx_sandbox_fs_close (struct sbx_fs_ctx *ctx);
int sbx_core_counts (const char *tenant, unsigned *running, unsigned *pooled);

/* Ports (core/ports.c): the HTTP proxy to servers inside a sandbox. */
#define SBX_PROXY_MAX_PER_SANDBOX 64
/* Take one of the sandbox's SBX_PROXY_MAX_PER_SANDBOX places for proxied
   requests (SBX_E_LIMIT when all are taken, SBX_E_NOT_FOUND when it is no
   longer running); give it back with sbx_sandbox_proxy_release. */
int sbx_sandbox_proxy_acquire (struct sbx_sandbox *sb, sbx_error_t **err);
void sbx_sandbox_proxy_release (struct sbx_sandbox *sb);
/* A TCP socket connected to `port` on the sandbox's own loopback
   (127.0.0.1, else [::1]), made by its init: close-on-exec, non-blocking;
   the caller owns it. -1 with SBX_E_INVALID (port not 1..65535),
   SBX_E_NOT_FOUND (the sandbox is gone), SBX_E_BAD_GATEWAY (nothing
   listens there: "nothing listens on port 8000 in sandbox ID"),
   SBX_E_GATEWAY_TIMEOUT (it did not accept in time), SBX_E_LIMIT or
   SBX_E_UNAVAILABLE (init or the daemon is out of room). */
int sbx_sandbox_connect_port (struct sbx_sandbox *sb, unsigned port, sbx_error_t **err);

/* Processes. */
struct sbx_process *sbx_process_start (struct sbx_sandbox *sb, const struct sbx_exec_opts *opts,
                                       sbx_error_t **err);
struct sbx_process *sbx_process_find (struct sbx_sandbox *sb, int pid, sbx_error_t **err);
/* The running process with this user tag (the newest when several). */
struct sbx_process *sbx_process_find_tag (struct sbx_sandbox *sb, const char *tag,
                                          sbx_error_t **err);
void sbx_process_unref (struct sbx_process *p);
/* Block until done or timeout_ms passes (-1: forever); 1 done, 0 timeout. */
int sbx_process_wait (struct sbx_process *p, int64_t timeout_ms);
int sbx_process_signal (struct sbx_process *p, int signo, sbx_error_t **err);
/* Write bytes to the command's stdin: returns once they are in its pipe
   (where they survive a daemon restart), waiting while the pipe is full,
   checking `gone` (may be NULL) every second so that a client that left
   does not hold a thread forever. */
int sbx_process_write_stdin (struct sbx_process *p, const void *data, size_t len, int eof,
                             int (*gone) (void *arg), void *arg, sbx_error_t **err);
/* Set the window size of a process's terminal (each 1..1000); returns
   once init has applied it (the command gets SIGWINCH). SBX_E_INVALID when
   the process has no terminal or the size is out of range, SBX_E_CONFLICT
   when it has finished. */
int sbx_process_resize (struct sbx_process *p, unsigned cols, unsigned rows, sbx_error_t **err);
/* Mark a finished process as collected so it leaves the list. */
void sbx_process_collect (struct sbx_process *p);
/* The result object (exit_code, signal, timed_out, ...); with output when
   with_output (HEAD-mode buffers, utf8 or base64). */
json_t *sbx_process_result_json (struct sbx_process *p, int with_output, int base64);
json_t *sbx_process_info_json (struct sbx_process *p);
json_t *sbx_process_list_json (struct sbx_sandbox *sb);
/* "SIGTERM" or "TERM" -> 15; -1 when unknown. */
int sbx_signal_from_name (const char *name);

/* Directory watches (inotify), run inside the sandbox by a helper that
   init forks as `user` ("user", "root", NULL: the sandbox's), so the path
   resolves in the sandbox's root with that user's permissions. Names are
   relative to the watched directory ("sub/a.txt"); "" is the directory
   itself (REMOVE when it is deleted, RENAME when moved, CHMOD) and the
   name of OVERFLOW. At most SBX_WATCHES_PER_SANDBOX per sandbox; events
   wait in a bounded queue per watch, and what does not fit is dropped and
   reported as one OVERFLOW where it happened (as is the kernel's own
   IN_Q_OVERFLOW, and a directory a recursive watch could not add). */
#define SBX_WATCHES_PER_SANDBOX 64
enum sbx_watch_event_type
{
  SBX_WATCH_CREATE = 1, /* created, or moved in */
  SBX_WATCH_WRITE = 2,
  SBX_WATCH_REMOVE = 3,
  SBX_WATCH_RENAME = 4, /* moved away (its new name comes as a CREATE if inside) */
  SBX_WATCH_CHMOD = 5,  /* attributes: mode, owner, times */
  SBX_WATCH_OVERFLOW = 6,
};
struct sbx_watch_event
{
  int type; /* enum sbx_watch_event_type */
  char name[4096]; /* NUL-terminated; bytes as the file system has them */
};
/* Start watching the directory `path` (absolute). Returns once every watch
   is in place (a recursive watch covers every subdirectory, at most 4096,
   without crossing mount points, and those made later). Errors: NOT_FOUND
   (no such directory, or no such sandbox), INVALID (not a directory, bad
   path or user), FORBIDDEN (permission), LIMIT (watches per sandbox,
   directories, the sandbox's pids or the kernel's inotify limits). */
struct sbx_watch *sbx_watch_start (struct sbx_sandbox *sb, const char *path, int recursive,
                                   const char *user, sbx_error_t **err);
/* Thread-safe. The next event: 1 with *ev filled, 0 when none came within
   wait_ms (-1: wait as long as it takes), -1 when the watch has ended (the
   directory is gone, the helper died, the sandbox is gone, or it was
   stopped) and every event before that was taken. */
int sbx_watch_next (struct sbx_watch *w, struct sbx_watch_event *ev, int64_t wait_ms);
/* End the watch (its helper is killed) and release the caller's hold on
   it; a thread inside sbx_watch_next returns -1. w is invalid afterwards. */
void sbx_watch_stop (struct sbx_watch *w);

/* Streaming readers (one per HTTP stream). */
struct sbx_reader
{
  struct sbx_process *p; /* holds a reference */
  struct sbx_reader *next_reader; /* BLOCK: in p->readers */
  uint64_t off[2];       /* next absolute offset per stream */
  int sent_start, sent_exit;
  int base64;
  unsigned char utf8_hold[2][4]; /* partial UTF-8 sequences between chunks */
  int utf8_hold_len[2];
};
/* Start reading p. HEAD and TAIL: from its first byte (what the buffer
   no longer holds is reported as dropped). BLOCK (lossless): from the
   oldest byte an attached reader has not read yet, or, when none is
   attached, from where the last one stopped; every attached reader paces
   the command, so each gets every byte from there on. */
void sbx_reader_init (struct sbx_reader *r, struct sbx_process *p, int base64);
void sbx_reader_release (struct sbx_reader *r);
/* Wait up to wait_ms until sbx_reader_next has something to give without
   waiting: 1 then, 0 after the wait. A stream checks that its client is
   still there in between, so a reader whose client hung up takes nothing
   the next reader (a reconnect) would miss. */
int sbx_reader_wait (struct sbx_reader *r, int64_t wait_ms);
/* Append the next NDJSON lines to out, waiting up to wait_ms for something
   to happen. Returns 1 when the stream is complete (the exit line is in
   out), 0 otherwise (out may be empty after a timeout), -1 when memory ran
   out (lines may be missing: the stream cannot go on). */
int sbx_reader_next (struct sbx_reader *r, struct sbx_buf *out, int64_t wait_ms);

#endif
