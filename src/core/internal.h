/* sbx: state shared by the core's files (registry.c, process.c, loop.c,
 * core.c). Everything here is guarded by sbx_core.lock unless noted. */
#ifndef SBX_CORE_INTERNAL_H
#define SBX_CORE_INTERNAL_H

#include "core/audit.h"
#include "core/core.h"
#include "core/counters.h"
#include "priv/host.h"

enum sbx_watch_kind
{
  SBX_W_FREE,
  SBX_W_WAKE,
  SBX_W_CTL,   /* obj: sandbox */
  SBX_W_PIDFD, /* obj: sandbox */
  SBX_W_OUT,   /* obj: process, idx: stream */
  SBX_W_IN,    /* obj: process */
  SBX_W_DIRWATCH, /* obj: a directory watch (watch.c) */
  SBX_W_EGRESS,   /* the channel to the egress process: its reports (egress.c) */
};

struct sbx_loop_watch
{
  enum sbx_watch_kind kind;
  uint32_t gen;
  void *obj;
  int idx;
  int fd;
  uint32_t next_free;
};

struct sbx_core_state
{
  pthread_mutex_t lock;
  struct sbx_config cfg;
  struct sbx_host_info host; /* what the privileged parent said at HELLO */
  int devnull;               /* for commands without stdin, and for discarding output */
  struct sbx_store *store; /* has its own lock */
  struct sbx_sandbox *sandboxes; /* running and dying */
  unsigned running;
  struct sbx_sandbox *pool; /* both templates; pool_count counts all */
  unsigned pool_count, pool_building;
  /* Of them, code-interpreter-v1 sandboxes with their server warm: kept
     (SBX_CODE_POOL) once one was asked for, so that the next is ready. */
  unsigned code_pooled;
  int code_wanted;
  /* And VMs (isolation vm) with the default limits, booted ahead
     (SBX_VM_POOL) once one was asked for: a boot takes seconds. */
  unsigned vm_pooled;
  int vm_wanted;
  unsigned vm_failures; /* pooled boots failed in a row (pool.c) */
  unsigned char *slots;
  unsigned nslots;
  int epfd, wakefd;
  struct sbx_loop_watch *watches;
  uint32_t nwatches, free_watch; /* free list head is index+1, 0 = none */
  pthread_t loop_thread, pool_thread, janitor_thread, history_thread;
  int threads_started;
  pthread_cond_t pool_cond, janitor_cond;
  pthread_cond_t history_cond; /* signalled at stop (metrics_history.c waits on it) */
  struct sbx_sandbox **janitor_q;
  size_t janitor_len, janitor_cap;
  int stopping;
  unsigned creating;            /* creates in flight (stop waits for them) */
  unsigned pausers;             /* expiry pauses without memory in their threads (lifecycle.c), too */
  pthread_cond_t creating_cond;
};

extern struct sbx_core_state sbx_core;

/* core.c: the CLOCK_REALTIME time ms from now, for pthread_cond_timedwait. */
void sbx__abstime (struct timespec *ts, int64_t ms);

/* loop.c */
uint64_t sbx__watch_add (int fd, uint32_t events, enum sbx_watch_kind kind, void *obj, int idx);
void sbx__watch_mod (uint64_t handle, uint32_t events);
void sbx__watch_del (uint64_t *handle);
void sbx__wake_loop (void);
void *sbx__loop_main (void *arg);

/* registry.c */
int sbx__slot_take (uint32_t *slot);
void sbx__slot_release (uint32_t slot);
uid_t sbx__slot_uid_base (uint32_t slot);
void sbx__sandbox_unref_locked (struct sbx_sandbox *sb);

/* create.c */
uint64_t sbx__effective_disk (const struct sbx_limits *limits);
int sbx__check_timeout (uint64_t ms, sbx_error_t **err);
/* Build a sandbox (not in any list yet; two references: the list's to be
   and the caller's). */
struct sbx_sandbox *sbx__build (const struct sbx_limits *limits, int background,
                                const char *template_name /* NULL: base */,
                                sbx_error_t **err);
/* A microVM sandbox (docs/vm.md; never pooled). */
struct sbx_sandbox *sbx__build_vm (const struct sbx_limits *limits, int background,
                                   sbx_error_t **err);
/* A VM restored from tenant's snapshot (its memory: QEMU -incoming). */
struct sbx_sandbox *sbx__build_vm_restore (const struct sbx_limits *limits, const char *tenant,
                                           const char *snapshot, sbx_error_t **err);
/* The same, its disk layered on the tenant's snapshot (never pooled). */
struct sbx_sandbox *sbx__build_layered (const struct sbx_limits *limits,
                                        const char *template_name /* NULL: base */,
                                        const char *tenant, const char *snapshot,
                                        sbx_error_t **err);
/* 1 for a sandbox of the code interpreter's template. */
int sbx__is_code (const struct sbx_sandbox *sb);
#define SBX_CODE_POOL 1
#define SBX_VM_POOL 1
/* Which of the pool's counters a pooled sandbox is in. */
void sbx__pool_uncount (const struct sbx_sandbox *sb);
/* Kill a sandbox that never became visible; drops both references. */
void sbx__discard (struct sbx_sandbox *sb);

/* pool.c */
void *sbx__pool_main (void *arg);
/* metrics_history.c */
void *sbx__history_main (void *arg);

/* reaper.c */
void sbx__queue_kill (struct sbx_sandbox *sb, const char *reason);
void sbx__queue_pause (struct sbx_sandbox *sb);

/* lifecycle.c: the janitor pauses a sandbox whose lifetime ended. */
void sbx__sandbox_pause_expired (struct sbx_sandbox *sb);
/* Hold the sandbox still (no pause, resume or work in it starts; its
   clocks wait) while fork copies it; *was_paused says whether it is
   frozen already. */
/* snapshot.c: tenant's snapshot `name` (NOT_FOUND when it has none), and
   its copy into a just-made sandbox. */
int sbx__snapshot_lookup (const char *tenant, const char *name, struct sbx_snapshot_record *out,
                          sbx_error_t **err);
/* At the start, before adoption: remove every snapshot whose save did not
   complete under the previous daemon (its pending record, its files). */
void sbx__snapshot_roll_back_pending (void);
int sbx__snapshot_load (struct sbx_sandbox *sb, const char *name, sbx_error_t **err);
int sbx__transition_begin (struct sbx_sandbox *sb, int *was_paused, sbx_error_t **err);
void sbx__transition_end (struct sbx_sandbox *sb);
/* vm_fork.c: count restores of one save of the VM src's memory, with the
   settings fork.c took from it; out holds what was made (fork.c undoes it
   on failure). */
int sbx__vm_fork (struct sbx_sandbox *src, const char *tenant,
                  const struct sbx_create_opts *settings, unsigned count,
                  struct sbx_fork_result *out, sbx_error_t **err);
/* vm_hibernate.c: the resume of a hibernated VM (a restore into its
   slot, in the resume's transition), and its kill (its file goes). */
int sbx__vm_wake (struct sbx_sandbox *sb, sbx_error_t **err);
void sbx__vm_forget_hibernated (const char *tenant, const char *id);
/* pause_files.c: the resume of a sandbox paused without its memory (a
   boot into its slot, in the resume's transition; its files back), and
   what follows once the transition ended (its code interpreter). */
int sbx__files_wake (struct sbx_sandbox *sb, int64_t remaining_ms, sbx_error_t **err);
int sbx__files_woken (struct sbx_sandbox *sb, sbx_error_t **err);
void *sbx__janitor_main (void *arg);
int64_t sbx__next_sandbox_deadline (int64_t now);
void sbx__expire_sandboxes (int64_t now);
void sbx__handle_init_event (struct sbx_sandbox *sb);
void sbx__handle_init_death (struct sbx_sandbox *sb);

/* pump.c */
int sbx__pump_on_event (struct sbx_sandbox *sb, const struct sbx_iso_event *ev);
void sbx__pump_cancel_all (struct sbx_sandbox *sb);
/* isolation vm: the files API's context runs in the guest (core/vm_fs.c). */
int sbx__vm_fs_open (struct sbx_sandbox *sb, const char *user, struct sbx_fs_ctx *ctx,
                     sbx_error_t **err);
void sbx__vm_fs_close (struct sbx_fs_ctx *ctx);
/* A file operation's answer from a guest (core/vm_fs_parse.c): its stdout
   and exit code; a read's bytes end up at the start of data (data_len). */
struct sbx_vm_fs_answer
{
  char *data;
  size_t len;
  int exit_code; /* 0: END expected, 1: ERROR expected */
  size_t data_len;
};
/* Check every record: ENTRYs (at most max) to fn, DATA when data_ok, then
   END (exit 0, *truncated) or the guest's ERROR as *err (exit 1); anything
   else is SBX_E_UNAVAILABLE "out of format". -1 without *err: fn refused. */
int sbx__vm_fs_parse (struct sbx_vm_fs_answer *a, size_t max,
                      int (*fn) (struct sbx_fs_entry *e, void *arg), void *arg, int *truncated,
                      int data_ok, sbx_error_t **err);
/* A listed entry: a plain name, its path under root at most depth deep. */
int sbx__vm_fs_listed_ok (const struct sbx_fs_entry *e, const char *root, int depth);
int sbx__vm_fs_broken (const char *what, sbx_error_t **err);
/* Run argv as a file operation in sb's guest as user and take its stdout
   (at most out_cap bytes) and exit code; the caller parses it. */
int sbx__vm_fs_call (struct sbx_sandbox *sb, const char *user, char **argv, size_t out_cap,
                     struct sbx_vm_fs_answer *a, sbx_error_t **err);
/* core/vm_metrics.c: the guest's own view of its memory, disk and CPU
   (docs/vm.md, Metrics), and the check of the bytes it comes in. */
struct sbx_vm_fs_metrics;
int sbx__vm_guest_metrics (struct sbx_sandbox *sb, struct sbx_vm_fs_metrics *m,
                           sbx_error_t **err);
int sbx__vm_metrics_parse (struct sbx_vm_fs_answer *a, struct sbx_vm_fs_metrics *m,
                           sbx_error_t **err);

/* watch.c: a watch's pipe is readable; init reported on its helper (1 when
   req_id was a watch's); the sandbox is going away (every watch ends). */
void sbx__dirwatch_on_readable (struct sbx_watch *w);
int sbx__dirwatch_on_event (struct sbx_sandbox *sb, const struct sbx_iso_event *ev);
void sbx__dirwatch_end_all (struct sbx_sandbox *sb);
/* core/vm_watch.c: a VM's watch helper, as a file operation of its agent
   writing its records into write_fd (borrowed); ends as init's does. */
int sbx__vm_watch_start (struct sbx_sandbox *sb, uint64_t req_id, uint32_t uid, int recursive,
                         const char *path, int write_fd, sbx_error_t **err);

/* ports.c */
/* A connect's answer: its socket (ev->fd) goes to the waiter, which takes
   it (ev->fd = -1); with nobody waiting it is left for the caller to close. */
void sbx__connect_on_event (struct sbx_sandbox *sb, struct sbx_iso_event *ev);
/* core/egress.c: a connection to the sandbox's proxy address goes to the
   egress process with the sandbox's policy (the fd is taken). */
void sbx__egress_on_event (struct sbx_sandbox *sb, struct sbx_iso_event *ev);
/* The egress process's reports are readable: into the audit log. */
void sbx__egress_on_reports (void);
/* 1 when the policy (NULL: none) lets anything through. */
int sbx__network_allows_any (json_t *network);
void sbx__connect_cancel_all (struct sbx_sandbox *sb);

/* outbuf.c */
void sbx__outbuf_init (struct sbx_outbuf *o, size_t cap, int fd);
void sbx__outbuf_copy (const struct sbx_outbuf *o, enum sbx_out_mode mode, uint64_t from, char *dst,
                       size_t n);
void sbx__outbuf_append (struct sbx_outbuf *o, enum sbx_out_mode mode, const char *src, size_t n);
void sbx__outbuf_close (struct sbx_outbuf *o);

/* result.c */
const char *sbx__signal_name (int sig); /* "SIGKILL"; NULL when not in the table */
json_t *sbx__process_result_locked (struct sbx_process *p, int with_output, int base64);
/* Its audit record (core/audit.h), when it is done. */
void sbx__process_audit_locked (struct sbx_process *p);

/* process.c */
/* Takes ev->fd (sets it to -1) when it keeps it. */
void sbx__process_on_event (struct sbx_sandbox *sb, struct sbx_iso_event *ev);
void sbx__process_on_output (struct sbx_process *p, int idx);
void sbx__process_on_stdin (struct sbx_process *p);
void sbx__process_kill_all (struct sbx_sandbox *sb, const char *reason);
int64_t sbx__next_process_deadline (struct sbx_sandbox *sb, int64_t now);
void sbx__expire_processes (struct sbx_sandbox *sb, int64_t now);
void sbx__process_unref_locked (struct sbx_process *p);
/* A process whose exit and output are all in moves to DONE. */
void sbx__process_maybe_done (struct sbx_process *p);
/* After the command exited: read what is in the pipe now, then stop.
   A terminal's drain needs a first read from the caller (it ends at the
   first read that finds nothing): sbx__process_drain_tty, which ends
   with sbx__process_maybe_done. */
void sbx__outbuf_start_drain (struct sbx_outbuf *o);
void sbx__process_drain_tty (struct sbx_process *p);
/* Read a paused buffer again (its reader caught up). */
void sbx__outbuf_resume (struct sbx_process *p, int idx);

/* adopt.c: at start, take over the sandboxes a previous daemon left. */
void sbx__adopt_all (void);
/* Commands a new daemon learns of from init. */
void sbx__process_adopt (struct sbx_sandbox *sb, const struct sbx_iso_attached *a);
/* How long init lets a sandbox outlive its deadline before ending it
   itself: the daemon, when running, always acts first. */
#define SBX_KEEP_GRACE_MS 10000

#endif
