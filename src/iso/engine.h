/* sbx: the isolation engine's narrow interface.
 *
 * Everything that touches namespaces, mounts, cgroups or a sandbox's
 * processes goes through these calls; server/ and core/ never do. The
 * shape (create / spawn / signal / files / limits / destroy) is what a
 * microVM engine would implement too.
 */
#ifndef SBX_ISO_ENGINE_H
#define SBX_ISO_ENGINE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "iso/cgroup.h"
#include "iso/proto.h"
#include "util/buf.h"
#include "util/error.h"

#define SBX_IDS_PER_SANDBOX 65536 /* uids and gids 0..65535 inside */

struct sbx_engine_opts
{
  const char *cgroup_mount;  /* default /sys/fs/cgroup */
  const char *cgroup_parent; /* default "sbx" */
  /* Where the daemon and its sandboxes' cgroups go (sbx_cgroup_place);
     NULL: PARENT at the root, the daemon where it is (tests). */
  const struct sbx_cgroup_place *cgroup_place;
  enum sbx_cgroup_mode cgroup_mode; /* 0: detect */
  uint32_t landlock_max_abi; /* 0: highest the kernel has */
  const char *vm_dir; /* the microVM engine's kernel and guest files; NULL: default */
  int read_only_root; /* keep "/" read-only for root inside (SBX_CONFIG_READ_ONLY_ROOT) */
};

struct sbx_engine
{
  int init_memfd; /* sealed copy of sbx-init */
  int devnull;
  int zygote;         /* SEQPACKET to the zygote, -1 when not running */
  int zygote_pidfd;
  pthread_mutex_t zygote_lock; /* one CLONE exchange at a time */
  void *seccomp_prog; /* owned */
  size_t seccomp_len;
  uint32_t landlock_abi; /* what the kernel offers, capped by the options */
  struct sbx_cgroup_root cgroups;
  char cgroup_daemon[256]; /* v2: the daemon's cgroup ("/..."), "" on v1 */
  char cgroup_why[256];    /* how the sandboxes' parent was chosen (iso/cgroup.h) */
  /* Sandbox cgroups that could not be removed (a read-only or failing
     cgroupfs): removal is retried by every create and destroy, and at
     close, so they do not outlive the fault. Fixed size: no allocation. */
  pthread_mutex_t stale_lock;
  char stale[64][64];
  unsigned nstale;
  char vm_dir[256]; /* "" : SBX_VM_DIR_DEFAULT (iso/vm.h) */
  int read_only_root; /* from the options */
};

int sbx_engine_open (struct sbx_engine *eng, const struct sbx_engine_opts *opts, sbx_error_t **err);
void sbx_engine_close (struct sbx_engine *eng);

/* The read-only root plan of a template (see proto.h SBX_PLAN_*). */
struct sbx_plan
{
  struct sbx_buf bytes;
  uint32_t count;
};
int sbx_plan_add (struct sbx_plan *plan, enum sbx_plan_kind kind, uint16_t flags, uint32_t mode,
                  const char *src, const char *dst, const void *data, size_t data_len,
                  sbx_error_t **err);
void sbx_plan_free (struct sbx_plan *plan);

enum sbx_isolation
{
  SBX_ISOLATION_NS = 0, /* the namespace engine (the default) */
  SBX_ISOLATION_VM = 1, /* a QEMU microVM (iso/vm.c, docs/vm.md) */
};

struct sbx_iso_spec
{
  const char *name;        /* cgroup name, the sandbox id */
  uid_t uid_base;          /* host id of uid/gid 0 inside */
  struct sbx_cgroup_limits limits;
  uint64_t disk_bytes;
  const char *hostname;
  const struct sbx_plan *plan;
  /* A detached mount (a stored template's overlay) that init makes its
     root instead of a tmpfs skeleton, or -1. Borrowed. */
  int root_mnt;
  uint32_t user_uid, user_gid; /* owner of /home/user */
  int background;              /* a pool build: low CPU priority until handed out */
  /* Start from a snapshot, as the lower layer of the disk: the store, and
     the tenant's snapshot name (NULL: none). */
  int snapshot_store;
  const char *snapshot_tenant, *snapshot;
  enum sbx_isolation isolation;
};

/* A running sandbox as the engine sees it. All fds owned, O_CLOEXEC. */
struct sbx_iso_box
{
  pid_t pid;   /* init, in the host's pid namespace */
  int pidfd;   /* readable when init has exited */
  int ctl;     /* SOCK_SEQPACKET to init, non-blocking */
  int root;    /* O_PATH of the sandbox's "/" (for the files API) */
  int disk;    /* O_PATH of the writable tmpfs */
  int qmp;     /* isolation vm: QEMU's QMP socket (the parent's only), else -1 */
  char vm_image[132]; /* isolation vm: "KEY SUM" of its root image (iso/vm_image.h), or "" */
  uid_t uid_base;
  uint32_t landlock_abi;
  struct sbx_cgroup cg;
};

/* An empty box: every fd -1. */
void sbx_iso_box_init (struct sbx_iso_box *box);
int sbx_iso_create (struct sbx_engine *eng, const struct sbx_iso_spec *spec,
                    struct sbx_iso_box *box, sbx_error_t **err);
/* Kill everything in the sandbox, wait for it, remove its cgroup and close
   its fds. Safe to call on a box whose init already died. */
int sbx_iso_destroy (struct sbx_engine *eng, struct sbx_iso_box *box, sbx_error_t **err);
/* Pause (frozen 1) or resume every process of the sandbox (cgroup
   freezer); memory stays resident. sbx_iso_destroy ends a frozen sandbox
   too. */
int sbx_iso_freeze (struct sbx_engine *eng, struct sbx_iso_box *box, int frozen,
                    sbx_error_t **err);
/* Fork (iso/copy.c): copy the disk (/home/user, /tmp, /dev/shm) of src,
   which must be frozen, into dst's, which was just made; owners move to
   dst's id range; the copier is charged to dst's cgroup. */
struct sbx_copy_result;
int sbx_iso_copy_disk (struct sbx_engine *eng, const struct sbx_iso_box *src,
                       const struct sbx_iso_box *dst, struct sbx_copy_result *res,
                       sbx_error_t **err);
/* Snapshots (iso/snapstore.c): save a frozen sandbox's disk into the
   store, or copy a snapshot into a new sandbox's disk. */
/* max_bytes: the tenant's quota left (0: none); the copy stops past it. */
int sbx_iso_snapshot_save (struct sbx_engine *eng, int store, const struct sbx_iso_box *src,
                           const char *tenant, const char *name, uint64_t max_bytes,
                           struct sbx_copy_result *res, sbx_error_t **err);
/* An O_RDONLY directory fd of what the sandbox sees at /home/user (0),
   /tmp (1), /dev/shm (2), or -1 with errno. */
int sbx_iso_open_part (const struct sbx_iso_box *box, int part);
int sbx_iso_snapshot_load (struct sbx_engine *eng, int store, const struct sbx_iso_box *dst,
                           const char *tenant, const char *name, struct sbx_copy_result *res,
                           sbx_error_t **err);
/* How init ended, when it ended on its own (killed from outside, crashed):
   waits up to wait_ms for it, then 1 with *wstatus as waitpid(2) gives it,
   or 0 while it still runs. Does not reap it (sbx_iso_destroy does). */
int sbx_iso_init_status (const struct sbx_iso_box *box, int wait_ms, int *wstatus);
int sbx_iso_set_limits (struct sbx_engine *eng, struct sbx_iso_box *box,
                        const struct sbx_cgroup_limits *limits, sbx_error_t **err);
int sbx_iso_set_disk (struct sbx_iso_box *box, uint64_t bytes, sbx_error_t **err);
/* Give a sandbox built in the background (its init, and every thread that
   runs in it already) normal CPU priority. */
int sbx_iso_set_foreground (struct sbx_engine *eng, struct sbx_iso_box *box, sbx_error_t **err);

struct sbx_iso_stats
{
  struct sbx_cgroup_stats cg;
  uint64_t disk_used_bytes;
  uint64_t disk_total_bytes;
};
int sbx_iso_stats (struct sbx_engine *eng, const struct sbx_iso_box *box,
                   struct sbx_iso_stats *out, sbx_error_t **err);

/* Commands. */
struct sbx_iso_spawn
{
  uint64_t req_id;
  uint32_t uid, gid; /* inside */
  const char *cwd;
  char *const *argv; /* NULL-terminated */
  char *const *envp; /* NULL-terminated */
  uint64_t rlimit_nofile, rlimit_fsize;
  int stdio[3]; /* borrowed: the sandbox ends of the pipes */
  int keep[3];  /* borrowed: our ends, for init to hold across restarts; -1: none */
  const void *tag; /* what a new daemon needs to know of it (opaque to init) */
  size_t tag_len;  /* <= SBX_TAG_MAX */
  /* On a terminal of pty_cols x pty_rows (1..SBX_PTY_MAX) that init makes:
     stdio and keep are then unused, and SPAWNED brings the master. */
  int pty;
  uint16_t pty_cols, pty_rows;
  int file_op; /* a VM's file operation (SBX_SPAWN_FILE_OP), set by core/vm_fs.c only */
};
int sbx_iso_spawn (struct sbx_iso_box *box, const struct sbx_iso_spawn *req, sbx_error_t **err);
/* Set the window size of a terminal command (SBX_MSG_RESIZE); init answers
   with an SBX_ISO_RESIZED event for req_id. */
int sbx_iso_resize (struct sbx_iso_box *box, uint64_t req_id, unsigned cols, unsigned rows,
                    sbx_error_t **err);
/* flags: SBX_SIGNAL_* (the process group; why, which init keeps). */
int sbx_iso_signal (struct sbx_iso_box *box, uint64_t req_id, int signo, uint32_t flags,
                    sbx_error_t **err);
/* Ask init to copy in_fd to out_fd in a helper (see SBX_MSG_PUMP); the fds
   are borrowed. Ends with an EXITED (or SPAWN_FAILED) event for req_id. */
int sbx_iso_pump (struct sbx_iso_box *box, uint64_t req_id, uint32_t uid, uint32_t gid, int in_fd,
                  int out_fd, sbx_error_t **err);

/* Directory watches (watch.c; see SBX_MSG_WATCH in proto.h). Ask init to
   watch `path` (absolute, resolved inside the sandbox as uid/gid) in a
   helper that writes records into write_fd (borrowed: send, then close
   ours). Ends with an EXITED (or SPAWN_FAILED) event for req_id. */
int sbx_iso_watch (struct sbx_iso_box *box, uint64_t req_id, uint32_t uid, uint32_t gid,
                   int recursive, const char *path, int write_fd, sbx_error_t **err);

/* The helper's records, checked as hostile input: READY or FAILED first,
   then only events with well-formed relative names, nothing after FAILED.
   A record may arrive split across reads; the parser holds the part. */
struct sbx_iso_watch_parser
{
  unsigned char hold[sizeof (struct sbx_watch_rec) + SBX_WATCH_NAME_MAX];
  size_t hold_len;
  int state; /* 0 before the first record, 1 after READY, 2 after FAILED */
};
struct sbx_iso_watch_rec
{
  int type;        /* enum sbx_watch_rec_type */
  int sys_errno;   /* FAILED: why (> 0) */
  const char *name; /* events: the name's bytes, not NUL-terminated */
  size_t len;
};
/* Feed n bytes: calls cb for every complete record, in order. Returns 0,
   or -1 when the bytes break the format (the watch must end then). */
int sbx_iso_watch_feed (struct sbx_iso_watch_parser *p, const void *data, size_t n,
                        void (*cb) (void *arg, const struct sbx_iso_watch_rec *rec), void *arg);

/* Ask init to connect a TCP socket to port on the sandbox's own loopback
   (SBX_MSG_CONNECT): answered by a CONNECTED event for req_id carrying the
   socket, or CONNECT_FAILED with the errno. */
int sbx_iso_connect (struct sbx_iso_box *box, uint64_t req_id, uint32_t port, sbx_error_t **err);

/* Restart survival (attach.c). A sandbox handed out to a tenant is kept:
   init holds our end of its control socket and our ends of its commands'
   pipes, and ends the sandbox itself at deadline_ms (wall clock, 0: never)
   if no daemon does. */
int sbx_iso_keep (struct sbx_iso_box *box, int64_t deadline_ms, sbx_error_t **err);
int sbx_iso_set_deadline (struct sbx_iso_box *box, int64_t deadline_ms, sbx_error_t **err);
/* We are done with a command (only_stdin: the API closed its stdin). */
int sbx_iso_release (struct sbx_iso_box *box, uint64_t req_id, int only_stdin, sbx_error_t **err);
/* Take over a kept sandbox a previous daemon left: `pid` must be the init
   of the cgroup `name`, running with uid_base; fills box (pidfd, control
   socket from init by pidfd_getfd, root and disk from init, cgroup). Then
   read its commands with sbx_iso_next_attached until it returns 0. */
int sbx_iso_adopt (struct sbx_engine *eng, const char *name, uid_t uid_base, pid_t pid,
                   struct sbx_iso_box *box, sbx_error_t **err);
struct sbx_iso_attached
{
  uint64_t req_id;
  int pid;
  int exited, wait_status;
  int64_t exited_ms; /* wall clock, when exited */
  uint32_t causes;   /* SBX_SIGNAL_TIMEOUT | SBX_SIGNAL_API we sent it */
  int fds[3]; /* owned: our ends of stdin, stdout, stderr, -1 when none */
  int pty_fd; /* owned: the master of a command on a terminal (fds all -1), or -1 */
  size_t tag_len;
  char tag[SBX_TAG_MAX + 1]; /* NUL-terminated */
};
/* 1 with *a filled, 0 after the last, -1 on error (then adopt failed). */
int sbx_iso_next_attached (struct sbx_iso_box *box, struct sbx_iso_attached *a, sbx_error_t **err);

enum sbx_iso_event_type
{
  SBX_ISO_SPAWNED = 1,
  SBX_ISO_SPAWN_FAILED,
  SBX_ISO_EXITED,
  SBX_ISO_RESIZED, /* sys_errno: 0, or why the size did not change */
  SBX_ISO_CONNECTED,      /* fd: the connected socket */
  SBX_ISO_CONNECT_FAILED, /* sys_errno */
  SBX_ISO_EGRESS,         /* fd: a connection to the sandbox's proxy address, or -1 (EMFILE) */
};
struct sbx_iso_event
{
  enum sbx_iso_event_type type;
  uint64_t req_id;
  int pid;
  int wait_status;
  int sys_errno;
  uint32_t stage;
  /* SPAWNED of a command on a terminal: its master (checked to be one), or
     -1 when our descriptor table was full (the command then has no way
     to us; the caller ends it). CONNECTED and EGRESS: the connected
     socket (a TCP stream socket, close-on-exec; EGRESS: -1 when our
     descriptor table was full). Owned by the event: whoever handles it
     takes it (sets -1) or closes it. */
  int fd;
  int pty; /* SPAWNED: the command is on a terminal */
};
/* Read one event from init without blocking: 1 with *ev filled, 0 when
   none is waiting, -1 when init broke the protocol or went away (the
   caller then destroys the sandbox). A CONNECTED whose socket we could not
   take (our fd table is full) comes as CONNECT_FAILED EMFILE. vm: the
   box is a microVM's, whose relay's CONNECTED brings a unix stream socket
   (iso/vm_relay_net.c) where a namespace init's brings a TCP one. */
int sbx_iso_next_event (struct sbx_iso_box *box, int vm, struct sbx_iso_event *ev, sbx_error_t **err);

#endif
