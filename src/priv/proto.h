/* sbx: the messages between the unprivileged front end and the
 * privileged parent (privilege separation, OpenSMTPD's model).
 *
 * The front end (HTTP, JSON, keys, the registry, commands) runs as its own
 * user without capabilities under its own seccomp filter and Landlock
 * domain; it cannot create a namespace, write a cgroup or open a sandbox's
 * files. It asks the parent, which keeps root, over SOCK_SEQPACKET
 * channels: one request, then zero or more callbacks the parent makes
 * (PUMP_START/PUMP_FINISH: copies must run in the sandbox, and only the
 * front end talks to inits), then one reply (or several LIST_ENTRY and a
 * reply). Every message is a fixed-layout struct whose `len` equals the
 * packet size, with exactly the descriptors its type says; variable
 * strings are fixed arrays that must hold a NUL. The parent re-validates
 * every field (slot in range and its own, ids, limits within the
 * configured bounds, user ids, paths) and drops a channel on the first
 * malformed message: what the front end sends is the output of the part
 * that parses hostile input.
 */
#ifndef SBX_PRIV_PROTO_H
#define SBX_PRIV_PROTO_H

#include <stdint.h>

#include "iso/fs.h"
#include "util/id.h"

#define SBX_PRIV_VERSION 3
#define SBX_PRIV_MAX_FDS 2

enum sbx_priv_op
{
  /* front end -> parent, on the first channel only */
  SBX_PRIV_HELLO = 1,   /* sbx_priv_hello -> sbx_priv_reply + sbx_priv_info */
  SBX_PRIV_CHANNEL = 2, /* sbx_priv_hdr; SCM_RIGHTS: a new channel's parent end -> reply */
  SBX_PRIV_READY = 3,   /* sbx_priv_hdr: serving; from now on a death is a crash */
  /* front end -> parent, on any channel */
  SBX_PRIV_CREATE = 10,     /* sbx_priv_create -> reply + box; SCM_RIGHTS: control socket, pidfd */
  SBX_PRIV_DESTROY = 11,    /* sbx_priv_slot */
  SBX_PRIV_LIMITS = 12,     /* sbx_priv_limits */
  SBX_PRIV_DISK = 13,       /* sbx_priv_disk */
  SBX_PRIV_FOREGROUND = 14, /* sbx_priv_slot */
  SBX_PRIV_STATS = 15,      /* sbx_priv_slot -> reply + sbx_iso_stats */
  SBX_PRIV_ADOPT = 16,      /* sbx_priv_adopt -> reply + box; SCM_RIGHTS: control socket, pidfd */
  SBX_PRIV_ADOPT_DONE = 17, /* sbx_priv_hdr: kill whatever was not adopted */
  SBX_PRIV_INIT_STATUS = 18, /* sbx_priv_slot -> reply (value: 1 << 32 | wait status, 0) */
  SBX_PRIV_FREEZE = 19,     /* sbx_priv_slot: pause every process of the sandbox */
  SBX_PRIV_FS = 20,         /* sbx_priv_fs -> reply [+ fd], LIST: entries then reply */
  SBX_PRIV_UPLOAD_END = 21, /* sbx_priv_upload_end */
  SBX_PRIV_TEMPLATE = 22,   /* sbx_priv_template [+ SCM_RIGHTS: the archive, BUILD only] */
  SBX_PRIV_COPY_DISK = 23,  /* sbx_priv_copy -> reply + sbx_copy_result: fork's copy */
  SBX_PRIV_SNAPSHOT = 24,   /* sbx_priv_snapshot -> reply [+ sbx_copy_result] */
  SBX_PRIV_THAW = 25,       /* sbx_priv_slot: resume them (after FREEZE) */
  SBX_PRIV_AUDIT_HEAD = 26, /* sbx_priv_audit_head, on the first channel, no reply */
  /* parent -> front end: the answer, and callbacks during a request */
  SBX_PRIV_REPLY = 40,       /* sbx_priv_reply [+ payload] [+ fds] */
  SBX_PRIV_LIST_ENTRY = 41,  /* sbx_priv_entry */
  SBX_PRIV_PUMP_START = 42,  /* sbx_priv_pump; SCM_RIGHTS: source, destination */
  SBX_PRIV_PUMP_FINISH = 43, /* sbx_priv_pump (job) */
  /* front end -> parent: the answer to a callback */
  SBX_PRIV_PUMP_DONE = 44, /* sbx_priv_pump_done */
};

struct sbx_priv_hdr
{
  uint32_t op;
  uint32_t len; /* the whole packet */
};

struct sbx_priv_hello
{
  struct sbx_priv_hdr hdr;
  uint32_t version;
  uint32_t reserved;
};

struct sbx_priv_info
{
  uint32_t version;
  uint32_t cgroup_mode;  /* enum sbx_cgroup_mode */
  uint32_t landlock_abi; /* what inits are asked to enforce */
  uint32_t kernel_paths; /* SBX_KERNEL_* (iso/kernel.h): the paths chosen */
  char kernel_release[65];
  char snapshot_copy_reason[160];  /* "" when snapshots are layers */
  char cgroup_parent[256];         /* where sandboxes' cgroups are (v2: from the root) */
  char cgroup_daemon[256];         /* v2: the daemon's own cgroup; "" on v1 */
  char cgroup_why[256];            /* how the parent was chosen (iso/cgroup.h) */
  int32_t kernel_settings[16];     /* iso/kernel_settings.h, in its order */
  uint8_t seal_key[32];            /* priv/seal_key.h: the front end seals with it */
  uint64_t anchor_remade;          /* priv/audit_anchor.h: 0, or the seq it was remade at + 1 */
};

/* A reply's payload, at most (the largest is HELLO's info). */
#define SBX_PRIV_REPLY_PAYLOAD_MAX 2048
_Static_assert (sizeof (struct sbx_priv_info) <= SBX_PRIV_REPLY_PAYLOAD_MAX,
                "HELLO's info fits a reply");

struct sbx_priv_slot
{
  struct sbx_priv_hdr hdr;
  uint32_t slot;
  uint32_t reserved;
};

/* The audit log's last synced record (priv/audit_anchor.h). */
struct sbx_priv_audit_head
{
  struct sbx_priv_hdr hdr;
  uint64_t seq;
  uint8_t hash[32];
};

struct sbx_priv_create
{
  struct sbx_priv_hdr hdr;
  uint32_t slot;
  uint32_t background;
  char id[SBX_ID_LEN + 1]; /* the cgroup's name */
  char template_name[32];
  uint64_t memory_bytes;
  uint32_t cpu_milli;
  uint32_t pids;
  uint64_t disk_bytes; /* the tmpfs size (already the effective one) */
  char snapshot_tenant[81]; /* "" or: start from this tenant's snapshot (a layer) */
  char snapshot[65];
  char reserved2[6];
  uint32_t isolation;  /* enum sbx_isolation: 0 namespaces, 1 a microVM */
  uint32_t reserved;   /* 0 */
};

/* What the front end keeps of a sandbox the parent built or adopted. */
struct sbx_priv_box
{
  int32_t pid;
  uint32_t uid_base;
  uint32_t landlock_abi;
  uint32_t reserved;
};

struct sbx_priv_limits
{
  struct sbx_priv_hdr hdr;
  uint32_t slot;
  uint32_t cpu_milli;
  uint64_t memory_bytes;
  uint32_t pids;
  uint32_t reserved;
};

struct sbx_priv_disk
{
  struct sbx_priv_hdr hdr;
  uint32_t slot;
  uint32_t reserved;
  uint64_t bytes;
};

/* Copy the disk of the (frozen) sandbox in src_slot into the fresh one in
   dst_slot. */
struct sbx_priv_copy
{
  struct sbx_priv_hdr hdr;
  uint32_t src_slot;
  uint32_t dst_slot;
};

enum sbx_priv_snapshot_op
{
  SBX_PRIV_SNAP_SAVE = 1,   /* slot (frozen) -> the store */
  SBX_PRIV_SNAP_LOAD = 2,   /* the store -> slot (just made) */
  SBX_PRIV_SNAP_REMOVE = 3, /* slot unused */
  SBX_PRIV_SNAP_HIBERNATE = 4, /* a VM's slot -> the store; its vCPUs stay stopped */
};

struct sbx_priv_snapshot
{
  struct sbx_priv_hdr hdr;
  uint32_t snap_op; /* enum sbx_priv_snapshot_op */
  uint32_t slot;
  char tenant[81];
  char name[65];
  char reserved[6];
  uint64_t max_bytes; /* save: what the tenant's quota leaves (0: no quota) */
};

struct sbx_priv_adopt
{
  struct sbx_priv_hdr hdr;
  uint32_t slot;
  int32_t init_pid;
  char id[SBX_ID_LEN + 1];
  char reserved[3];
};

enum sbx_priv_fs_op
{
  SBX_PRIV_FS_OPEN_READ = 1, /* -> reply (size) + fd */
  SBX_PRIV_FS_STAT,          /* -> reply + sbx_priv_entry body */
  SBX_PRIV_FS_LIST,          /* -> LIST_ENTRY... then reply (truncated) */
  SBX_PRIV_FS_MKDIR,
  SBX_PRIV_FS_MOVE,          /* path -> path2; copies call back PUMP_* */
  SBX_PRIV_FS_REMOVE,
  SBX_PRIV_FS_UPLOAD,        /* -> reply (token) + the pipe to write the body into */
};

#define SBX_PRIV_FS_PARENTS 0x1
#define SBX_PRIV_FS_RECURSIVE 0x2
#define SBX_PRIV_FS_OVERWRITE 0x4

struct sbx_priv_fs
{
  struct sbx_priv_hdr hdr;
  uint32_t fs_op; /* enum sbx_priv_fs_op */
  uint32_t slot;
  uint32_t uid, gid; /* inside the sandbox: 0 (root) or 1000 (user) */
  uint32_t mode;
  uint32_t flags; /* SBX_PRIV_FS_* */
  uint32_t depth;
  uint32_t max_entries;
  char path[SBX_FS_PATH_MAX];
  char path2[SBX_FS_PATH_MAX];
  struct sbx_fs_meta meta; /* UPLOAD: the file's metadata; empty otherwise */
};

struct sbx_priv_upload_end
{
  struct sbx_priv_hdr hdr;
  uint64_t token;
  uint32_t commit; /* 0: abort */
  uint32_t reserved;
};

enum sbx_priv_template_op
{
  SBX_PRIV_TEMPLATE_BUILD = 1, /* the archive (a regular file) rides along */
  SBX_PRIV_TEMPLATE_REMOVE = 2,
  SBX_PRIV_TEMPLATE_CACHE = 3,       /* the recipe cache's usage (name ""): struct sbx_priv_cache */
  SBX_PRIV_TEMPLATE_CACHE_PRUNE = 4, /* empty it (name ""): what it removed */
};

/* The payload of a CACHE or CACHE_PRUNE reply. */
struct sbx_priv_cache
{
  uint64_t entries;
  uint64_t bytes;
};

struct sbx_priv_template
{
  struct sbx_priv_hdr hdr;
  uint32_t tmpl_op; /* enum sbx_priv_template_op */
  uint32_t format;  /* enum sbx_tmpl_format */
  char name[32];
  char owner[64];   /* the tenant; printable */
  uint64_t max_bytes; /* build: what the owner's quota leaves (0: the daemon's bound only) */
};

struct sbx_priv_reply
{
  struct sbx_priv_hdr hdr;
  int32_t status;   /* 0, or -1 with the error below */
  uint32_t kind;    /* enum sbx_error_kind */
  int32_t sys_errno;
  uint32_t payload; /* bytes after this struct */
  uint64_t value;   /* OPEN_READ: size; UPLOAD: token; LIST: truncated */
  char msg[512];
};

struct sbx_priv_entry
{
  struct sbx_priv_hdr hdr;
  struct sbx_fs_entry entry;
};

struct sbx_priv_pump
{
  struct sbx_priv_hdr hdr;
  uint64_t job;       /* PUMP_FINISH: what PUMP_DONE answered to PUMP_START */
  uint32_t uid, gid;  /* PUMP_START: the helper's ids inside */
};

struct sbx_priv_pump_done
{
  struct sbx_priv_hdr hdr;
  int32_t status; /* 0, or -1 with the error */
  uint32_t kind;
  uint64_t job;   /* PUMP_START's */
  char msg[512];
};

#endif
