/* sbx: the wire protocol between the daemon and a sandbox's init (PID 1).
 *
 * One SOCK_SEQPACKET socketpair per sandbox; every message is one packet
 * that starts with struct sbx_msg_hdr, whose `len` must equal the packet
 * length. Fixed-size messages must be exactly their size; variable ones
 * carry counted payloads that the receiver checks against `len` before
 * reading. File descriptors travel as SCM_RIGHTS on the messages that say
 * so, in exactly the number stated. A receiver that finds anything else
 * treats the peer as broken: init exits (which ends the sandbox), the
 * daemon kills the sandbox. Nothing is "best effort" here (OpenSMTPD's
 * imsg discipline).
 *
 * Both sides are built from this header: the daemon (dynamic, threaded)
 * and init (static, single-threaded). Keep it free of libc beyond types.
 */
#ifndef SBX_ISO_PROTO_H
#define SBX_ISO_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* 2: terminals (SPAWN's flags and size, SPAWNED's master, RESIZE, RESIZED,
   SBX_KEEP_PTY) and WATCH. 3: CONNECT (the port proxy). 4: EGRESS (init's
   proxy listener hands each connection out). An init of another
   version is not adopted (security.md section 4): an old init would die on
   a message it does not know. */
#define SBX_PROTO_VERSION 4
#define SBX_INIT_CTL_FD 3 /* where init finds its control socket */
/* Where init keeps the daemon's end of its control socket once the sandbox
   is handed out (SBX_MSG_KEEP): the socket then never reads EOF when the
   daemon dies, and a new daemon takes the end back with pidfd_getfd(2). */
#define SBX_INIT_KEEP_FD 4
#define SBX_PROTO_MAX_MSG (1024 * 1024) /* largest packet either side accepts */

enum sbx_msg_type
{
  /* daemon -> new sandbox child: one byte, "the id maps and cgroup are set" */
  SBX_MSG_GO = 0x47,
  /* daemon -> zygote */
  SBX_MSG_CLONE = 32,  /* sbx_msg_clone; SCM_RIGHTS: control socket [, cgroup dir] */
  /* zygote -> daemon */
  SBX_MSG_CLONED = 33, /* sbx_msg_cloned; SCM_RIGHTS: pidfd on success */
  /* daemon -> init */
  SBX_MSG_CONFIG = 1,   /* sbx_msg_config + plan entries + seccomp program */
  SBX_MSG_SPAWN = 2,    /* sbx_msg_spawn + strings; SCM_RIGHTS: stdin, stdout, stderr,
                           kept ends; none with SBX_SPAWN_PTY */
  SBX_MSG_SIGNAL = 3,   /* sbx_msg_signal */
  SBX_MSG_PUMP = 4,     /* sbx_msg_pump; SCM_RIGHTS: source, destination */
  SBX_MSG_KEEP = 5,     /* sbx_msg_keep; SCM_RIGHTS: the daemon's end of this socket */
  SBX_MSG_DEADLINE = 6, /* sbx_msg_deadline */
  SBX_MSG_RELEASE = 7,  /* sbx_msg_release */
  SBX_MSG_ATTACH = 8,   /* sbx_msg_hdr only: "a new daemon; tell me everything" */
  SBX_MSG_WATCH = 9,    /* sbx_msg_watch + path; SCM_RIGHTS: the event pipe's write end */
  SBX_MSG_RESIZE = 10,  /* sbx_msg_resize */
  SBX_MSG_CONNECT = 11, /* sbx_msg_connect */
  /* init -> daemon */
  SBX_MSG_READY = 16,        /* sbx_msg_ready; SCM_RIGHTS: root dir, disk dir (O_PATH) */
  SBX_MSG_SETUP_FAILED = 17, /* sbx_msg_failure */
  SBX_MSG_SPAWNED = 18,      /* sbx_msg_spawned; SCM_RIGHTS: the pty master if SBX_SPAWNED_PTY */
  SBX_MSG_SPAWN_FAILED = 19, /* sbx_msg_spawn_failed */
  SBX_MSG_EXITED = 20,       /* sbx_msg_exited */
  /* init -> daemon, the answer to ATTACH, in this order: */
  SBX_MSG_ROOTS = 21,      /* sbx_msg_roots; SCM_RIGHTS: root dir, disk dir (O_PATH) */
  SBX_MSG_PROC = 22,       /* sbx_msg_proc + tag; SCM_RIGHTS: the kept ends it names */
  SBX_MSG_ATTACH_END = 23, /* sbx_msg_attach_end */
  /* init -> daemon, an event like SPAWNED: */
  SBX_MSG_RESIZED = 24, /* sbx_msg_resized, the answer to each RESIZE, in order */
  /* init -> daemon, the answer to CONNECT: */
  SBX_MSG_CONNECTED = 25,      /* sbx_msg_connect_result, sys_errno 0; SCM_RIGHTS: the socket */
  SBX_MSG_CONNECT_FAILED = 26, /* sbx_msg_connect_result, sys_errno != 0; no descriptor */
  /* init -> daemon, unasked: */
  SBX_MSG_EGRESS = 27, /* sbx_msg_egress; SCM_RIGHTS: one accepted TCP socket */
};

struct sbx_msg_hdr
{
  uint32_t type;
  uint32_t len; /* whole packet, header included */
};

/* ---- the zygote ---------------------------------------------------------
 *
 * Sandboxes are not forked from the daemon (a large, multi-threaded
 * process whose copy would then have to exec): a small static "zygote"
 * (sbx-init started in zygote mode from the sealed memfd) clones each
 * sandbox's PID 1 from its own clean address space, with CLONE_PARENT so
 * that the daemon is the parent that reaps it. The clone needs no exec:
 * it runs init's code, which the zygote already is. */

#define SBX_CLONE_INTO_CGROUP 0x1 /* a cgroup v2 dir fd follows the socket */
#define SBX_CLONE_BACKGROUND 0x2  /* build at low CPU priority (the pool) */

struct sbx_msg_clone
{
  struct sbx_msg_hdr hdr;
  uint32_t flags;
  uint32_t reserved;
};

struct sbx_msg_cloned
{
  struct sbx_msg_hdr hdr;
  int32_t pid;       /* > 0 on success */
  int32_t sys_errno; /* when pid <= 0 */
};

/* ---- CONFIG ------------------------------------------------------------ */

enum sbx_plan_kind
{
  SBX_PLAN_DIR = 1,     /* mkdir dst (mode) in the read-only skeleton */
  SBX_PLAN_FILE = 2,    /* write dst (mode) with data as its content */
  SBX_PLAN_SYMLINK = 3, /* symlink dst -> data */
  SBX_PLAN_BIND_RO = 4, /* bind host src (dir or file) at dst, read-only, nosuid, nodev */
};

#define SBX_PLAN_OPTIONAL 0x1 /* skip a BIND_RO whose source does not exist */
/* A BIND_RO of a directory with sbx's sudo client at bin/sudo above it
   (the sandbox's /usr: /usr/bin/sudo is sbx's, iso/init/sudo.c). */
#define SBX_PLAN_SUDO 0x2

struct sbx_plan_entry
{
  uint16_t kind;  /* enum sbx_plan_kind */
  uint16_t flags; /* SBX_PLAN_* */
  uint32_t mode;  /* permission bits for DIR and FILE */
  uint32_t src_len, dst_len, data_len; /* byte counts of what follows, no NULs */
};

#define SBX_PLAN_MAX_ENTRIES 64
#define SBX_PATH_MAX 512
#define SBX_HOSTNAME_MAX 63

/* The sandbox starts from a snapshot: the daemon has attached it (read-only,
   idmapped to the sandbox's ids) at /tmp in the sandbox's mount namespace
   before GO, with home/, tmp/ and shm/ in it; init makes each the lower
   layer of an overlay whose upper is the disk's part (core/snapshot.c). */
#define SBX_CONFIG_SNAPSHOT_LAYER 0x1
/* This kernel's overlayfs takes no layer by descriptor (FSCONFIG_SET_FD,
   Linux 6.13): name each by its /proc/self/fd path (iso/kprobe.c). */
#define SBX_CONFIG_OVERLAY_PATHS 0x2
/* "/" stays read-only for root inside too (sbxd --read-only-root): the
   skeleton as it was built. Without it root inside may change it (E2B's
   writable root); it lives on the disk, in the sandbox's own limit. */
#define SBX_CONFIG_READ_ONLY_ROOT 0x4

struct sbx_msg_config
{
  struct sbx_msg_hdr hdr;
  uint32_t version;        /* SBX_PROTO_VERSION */
  uint32_t plan_count;     /* entries that follow, each header + bytes */
  uint32_t plan_bytes;     /* total size of the plan section */
  uint32_t seccomp_len;    /* bytes of struct sock_filter[] after the plan */
  uint64_t disk_bytes;     /* size of the writable tmpfs (/home/user, /tmp, /dev/shm) */
  uint64_t disk_inodes;    /* inode limit of that tmpfs */
  uint32_t user_uid;       /* in-sandbox ids of the owner of /home/user */
  uint32_t user_gid;
  uint32_t landlock_abi;   /* highest Landlock ABI to use; 0 disables (tests only) */
  /* Descriptors ride along (SCM_RIGHTS): first the sandbox's own /dev (a
     detached tmpfs with its device nodes, iso/devnodes.c), always; then,
     when root_from_fd is 1, a detached read-only mount that becomes "/"
     in place of the tmpfs skeleton (stored templates). */
  uint32_t root_from_fd;
  uint32_t flags;          /* SBX_CONFIG_* */
  char hostname[SBX_HOSTNAME_MAX + 1];
};

/* ---- SPAWN ------------------------------------------------------------- */

#define SBX_SPAWN_MAX_ARGS 4096
#define SBX_SPAWN_MAX_ENV 4096
#define SBX_SPAWN_MAX_STRINGS (1000 * 1024) /* cwd, argv and env together */

struct sbx_msg_spawn
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;     /* daemon's handle; echoed in SPAWNED/FAILED/EXITED */
  uint32_t uid, gid;   /* in-sandbox ids to run as */
  uint32_t argc, envc; /* counts of NUL-terminated strings after cwd */
  uint32_t strings_len;
  uint32_t keep_mask;  /* SBX_KEEP_*: which daemon-side ends follow the stdio fds */
  uint64_t rlimit_nofile; /* soft = hard */
  uint64_t rlimit_fsize;  /* soft = hard, bytes */
  uint32_t tag_len;       /* bytes of the daemon's opaque tag after the strings */
  uint32_t flags;         /* SBX_SPAWN_* */
  uint16_t pty_cols, pty_rows; /* with SBX_SPAWN_PTY: 1..SBX_PTY_MAX; else 0 */
  uint32_t reserved;
  /* followed by: cwd\0 argv[0]\0 ... argv[argc-1]\0 env[0]\0 ... env[envc-1]\0 tag */
};

/* Run the command on a terminal: init allocates a pseudo-terminal from the
   sandbox's own devpts instance, makes its slave the command's stdin,
   stdout, stderr and controlling terminal, and keeps the master (for
   RESIZE, and for a new daemon: SBX_KEEP_PTY). SPAWN then carries no
   descriptors at all (keep_mask 0), and SPAWNED carries a duplicate of the
   master, which the daemon reads the output from and writes input to. */
#define SBX_SPAWN_PTY 0x1
#define SBX_PTY_MAX 1000 /* columns and rows, each 1..SBX_PTY_MAX */
/* A VM's file operation (core/vm_fs.c): the relay sends it to the agent as
   SBX_VMF_FILE_OP, not SPAWN (vm/wire.h). Set by the core only, never from
   a request; a namespace sandbox's init never sees it. */
#define SBX_SPAWN_FILE_OP 0x2

/* The daemon's ends of a command's pipes, which init keeps (never reads or
   writes) so that a daemon that dies takes neither stdin (EOF) nor stdout
   (SIGPIPE) from the command; a new daemon gets them back on ATTACH. The
   SCM_RIGHTS of SPAWN carry stdin, stdout, stderr, then these in bit order. */
#define SBX_KEEP_STDIN 0x1  /* the write end of the command's stdin */
#define SBX_KEEP_STDOUT 0x2 /* the read end of its stdout */
#define SBX_KEEP_STDERR 0x4 /* the read end of its stderr */
#define SBX_KEEP_ALL 0x7
/* In PROC only: the master of a command run on a terminal (init's own,
   see SBX_SPAWN_PTY), never with the other bits. */
#define SBX_KEEP_PTY 0x8
#define SBX_TAG_MAX 2048     /* what the daemon says about a command, opaque to init */

/* ---- SIGNAL ------------------------------------------------------------ */

#define SBX_SIGNAL_GROUP 0x1   /* deliver to the process group the spawn leads */
#define SBX_SIGNAL_TIMEOUT 0x2 /* why: the command's timeout (kept for ATTACH) */
#define SBX_SIGNAL_API 0x4     /* why: a client asked (kept for ATTACH) */
#define SBX_SIGNAL_FLAGS 0x7

struct sbx_msg_signal
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  uint32_t signo;
  uint32_t flags;
};

/* ---- PUMP --------------------------------------------------------------
 *
 * Copy everything from the source fd to the destination fd in a helper
 * forked by init, so that the pages written (an upload into the sandbox's
 * tmpfs) are charged to the sandbox's memory cgroup, not the daemon's. The
 * daemon resolved and opened both ends itself (openat2 in the sandbox's
 * root); the helper only copies. It ends with EXITED: status 0 when all
 * was copied, else exit code = errno. A failed fork is SPAWN_FAILED. */

struct sbx_msg_pump
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  uint32_t uid, gid; /* in-sandbox ids the helper runs as */
};

/* ---- WATCH -------------------------------------------------------------
 *
 * Watch a directory (inotify) in a helper forked by init, as the given
 * user, with no capabilities, under the sandbox's filter and limits: the
 * path is resolved by the kernel inside the sandbox's root with that
 * user's permissions, never by the daemon (a path resolved on the host side
 * could be led out of the sandbox by a symlink). The helper writes records
 * (struct sbx_watch_rec + name bytes) into the pipe: first READY once
 * every watch is in place, or FAILED (an int32 errno) and exit; then
 * events until the watched directory is gone (exit status 0), the pipe's
 * reader goes away, or the daemon SIGNALs it by req_id. Like a PUMP it
 * ends with EXITED (or SPAWN_FAILED when init could not fork); init
 * forgets it once reaped, and kills every watcher on ATTACH (its reader
 * was the daemon that went away). */

#define SBX_WATCH_RECURSIVE 0x1 /* every subdirectory too, also those made later */
#define SBX_WATCH_FLAGS 0x1
#define SBX_WATCH_PATH_MAX 4096 /* a path's bytes, NUL included */
#define SBX_WATCH_NAME_MAX 4095 /* bytes of the name in one record */
#define SBX_WATCH_MAX_DIRS 4096 /* directories one recursive watch covers */

struct sbx_msg_watch
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  uint32_t uid, gid;  /* in-sandbox ids the helper runs as */
  uint32_t flags;     /* SBX_WATCH_* */
  uint32_t path_len;  /* bytes after this struct: an absolute path, no NUL */
};

enum sbx_watch_rec_type
{
  /* events; the name is relative to the watched directory ("sub/a.txt"),
     empty for the directory itself and for OVERFLOW */
  SBX_WREC_CREATE = 1,   /* IN_CREATE, IN_MOVED_TO */
  SBX_WREC_WRITE = 2,    /* IN_MODIFY */
  SBX_WREC_REMOVE = 3,   /* IN_DELETE, IN_DELETE_SELF */
  SBX_WREC_RENAME = 4,   /* IN_MOVED_FROM, IN_MOVE_SELF */
  SBX_WREC_CHMOD = 5,    /* IN_ATTRIB */
  SBX_WREC_OVERFLOW = 6, /* events were lost (IN_Q_OVERFLOW, limits) */
  /* the first record, exactly one of: */
  SBX_WREC_READY = 16,   /* len 0 */
  SBX_WREC_FAILED = 17,  /* len 4: int32 errno; the helper then exits */
};

struct sbx_watch_rec
{
  uint16_t type; /* enum sbx_watch_rec_type */
  uint16_t len;  /* bytes that follow, at most SBX_WATCH_NAME_MAX, no NUL */
};

/* ---- CONNECT -----------------------------------------------------------
 *
 * The daemon's HTTP proxy to a port inside the sandbox (preview URLs). The
 * daemon's front end may not connect TCP sockets at all (its seccomp
 * filter has no connect, its Landlock domain handles TCP connect with no
 * rule), and it lives in the host's network namespace anyway: init, which
 * is in the sandbox's, connects to 127.0.0.1:port (then [::1]:port when
 * that is refused) and hands back the connected socket. The socket's
 * network namespace is the sandbox's, so it reaches nothing the sandbox's
 * own code could not; the daemon can only read and write it.
 *
 * Init never blocks on it: the connect is non-blocking and watched in its
 * poll loop, at most SBX_CONNECT_MAX at once (more: CONNECT_FAILED EAGAIN),
 * each given up after SBX_CONNECT_TIMEOUT_MS (ETIMEDOUT). Exactly one
 * answer per CONNECT, with its req_id, unless an ATTACH comes first (a new
 * daemon: connects in flight are dropped, their sockets closed). A result
 * that does not fit in the socket right now is CONNECT_FAILED EAGAIN. */

#define SBX_CONNECT_TIMEOUT_MS 2000
#define SBX_CONNECT_MAX 64

struct sbx_msg_connect
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  uint32_t port; /* 1..65535 */
  uint32_t reserved; /* 0 */
};

struct sbx_msg_connect_result
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  int32_t sys_errno; /* 0 with CONNECTED; ECONNREFUSED, ETIMEDOUT, EAGAIN... */
  uint32_t reserved;
};

/* ---- EGRESS ------------------------------------------------------------
 *
 * The sandbox's only way out (docs/egress.md). Init listens on
 * SBX_EGRESS_PORT of 127.0.0.1 in the sandbox's network namespace (the
 * commands' HTTP_PROXY) and passes every connection it accepts to the
 * daemon, which hands it, with the sandbox's policy, to the egress proxy
 * outside. Init never reads a byte of it and keeps none: a connection that
 * does not fit in the control socket right now is closed (the client sees
 * a reset), and while events wait to be sent the listener is not polled
 * (connections wait in its backlog of SBX_EGRESS_BACKLOG). */

#define SBX_EGRESS_PORT 3128

/* ---- sudo (inside the sandbox; src/iso/init/sudo.c) -----------------------
 *
 * Not a message between the daemon and init: the wire of the sandbox's own
 * `sudo` (share/sbx's client, /usr/bin/sudo in the sandbox) to init, on
 * the abstract unix socket SBX_SUDO_SOCKET of the sandbox's network
 * namespace, SOCK_SEQPACKET. Everything on it comes from the sandbox and
 * is hostile. The request: one packet, struct sbx_sudo_request, then cwd,
 * argc arguments and envc "K=V" strings, each NUL-terminated, nothing
 * after; the caller's fds 0, 1 and 2 with it (SCM_RIGHTS). Then any
 * number of int32 signal numbers to forward. The answer: one struct
 * sbx_sudo_reply. */
#define SBX_SUDO_SOCKET "sbx-sudo"
#define SBX_SUDO_MAX_BYTES (128 * 1024) /* one request, strings included */
#define SBX_SUDO_MAX_ARGS 1024
#define SBX_SUDO_MAX_ENV 1024
#define SBX_SUDO_MAX_SESSIONS 16 /* at once, per sandbox */

struct sbx_sudo_request
{
  uint32_t argc, envc;
};

enum sbx_sudo_outcome
{
  SBX_SUDO_EXITED = 0,      /* value: the command's wait status */
  SBX_SUDO_NOT_STARTED = 1, /* value: errno; stage: SBX_STAGE_* */
  SBX_SUDO_REFUSED = 2,     /* value: errno (a malformed request, too many at once) */
};

struct sbx_sudo_reply
{
  int32_t outcome; /* enum sbx_sudo_outcome */
  int32_t value;
  uint32_t stage;
};

/* What a command gets as RLIMIT_NOFILE (soft = hard): the daemon's
   commands (core/process.c) and sudo's. */
#define SBX_COMMAND_NOFILE 4096
#define SBX_EGRESS_BACKLOG 64

struct sbx_msg_egress
{
  struct sbx_msg_hdr hdr;
  uint32_t reserved[2]; /* 0 */
};

/* ---- KEEP, DEADLINE, RELEASE, ATTACH -------------------------------------
 *
 * A sandbox handed out to a tenant outlives its daemon: KEEP gives init
 * the daemon's end of the control socket (kept at SBX_INIT_KEEP_FD) and
 * the sandbox's deadline. Pool sandboxes get no KEEP and end with the
 * daemon. If no daemon ends the sandbox by its deadline, init exits (the
 * lifetime holds even while no daemon runs); DEADLINE moves it. */

struct sbx_msg_keep
{
  struct sbx_msg_hdr hdr;
  int64_t deadline_ms; /* CLOCK_REALTIME, ms since the epoch; 0: none */
};

struct sbx_msg_deadline
{
  struct sbx_msg_hdr hdr;
  int64_t deadline_ms;
};

/* The daemon is done with a command: init forgets it and closes the kept
   ends (SBX_RELEASE_STDIN: only the stdin end, when the API closed it). */
#define SBX_RELEASE_STDIN 0x1
#define SBX_RELEASE_ALL 0x2

struct sbx_msg_release
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  uint32_t what;
  uint32_t reserved;
};

/* ---- RESIZE --------------------------------------------------------------
 *
 * Set the window size of a command's terminal (TIOCSWINSZ on the master
 * init keeps; the kernel sends SIGWINCH to the terminal's foreground
 * process group). Init does it, so the daemon, which parses client bytes,
 * needs no terminal ioctl. Every RESIZE is answered by one RESIZED, in
 * order: 0, or ESRCH when the command has exited or has no terminal. */

struct sbx_msg_resize
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  uint16_t cols, rows; /* 1..SBX_PTY_MAX */
  uint32_t reserved;
};

struct sbx_msg_resized
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  int32_t sys_errno;
  uint32_t reserved;
};

#define SBX_ATTACHED_RUNNING 0
#define SBX_ATTACHED_EXITED 1

struct sbx_msg_proc
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  int32_t pid;
  uint32_t state;      /* SBX_ATTACHED_* */
  int32_t wait_status; /* when exited */
  uint32_t keep_mask;  /* which kept ends follow, in bit order */
  uint32_t tag_len;    /* tag bytes after this struct */
  uint32_t causes;     /* SBX_SIGNAL_TIMEOUT | SBX_SIGNAL_API: signals the daemon sent */
  int64_t exited_ms;   /* CLOCK_REALTIME when reaped, 0 while running */
};

/* The first answer to ATTACH. An init of another protocol version (a
   daemon upgraded under running sandboxes) is not adopted. */
struct sbx_msg_roots
{
  struct sbx_msg_hdr hdr;
  uint32_t version; /* SBX_PROTO_VERSION of the init */
  uint32_t reserved;
};

struct sbx_msg_attach_end
{
  struct sbx_msg_hdr hdr;
  uint32_t count; /* PROC messages sent */
  uint32_t reserved;
};

/* ---- init -> daemon ---------------------------------------------------- */

struct sbx_msg_ready
{
  struct sbx_msg_hdr hdr;
  uint32_t version;
  uint32_t landlock_abi; /* the ABI actually enforced */
};

struct sbx_msg_failure
{
  struct sbx_msg_hdr hdr;
  int32_t sys_errno;
  uint32_t reserved;
  char what[240]; /* NUL-terminated step that failed, e.g. "pivot_root" */
};

enum sbx_spawn_stage
{
  SBX_STAGE_SETUP = 1, /* fds, ids, limits before exec */
  SBX_STAGE_CHDIR = 2, /* the working directory */
  SBX_STAGE_EXEC = 3,  /* execve itself (ENOENT: no such command) */
  SBX_STAGE_FORK = 4,  /* init could not fork (pids limit) */
  SBX_STAGE_PTY = 5,   /* init could not allocate the terminal */
};

#define SBX_SPAWNED_PTY 0x1 /* one descriptor follows: the pty master */

struct sbx_msg_spawned
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  int32_t pid;    /* in the sandbox's pid namespace */
  uint32_t flags; /* SBX_SPAWNED_PTY exactly when the spawn asked for a terminal */
};

struct sbx_msg_spawn_failed
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  int32_t sys_errno;
  uint32_t stage; /* enum sbx_spawn_stage */
};

struct sbx_msg_exited
{
  struct sbx_msg_hdr hdr;
  uint64_t req_id;
  int32_t pid;
  int32_t wait_status; /* as from waitpid(2) */
};

/* A plan path is relative, made of non-empty components other than "." and
   "..", without NULs, and shorter than SBX_PATH_MAX. Both sides check it:
   the daemon before sending, init before acting. */
static inline int
sbx_plan_path_ok (const char *p, size_t n)
{
  size_t i, start = 0;

  if (n == 0 || n >= SBX_PATH_MAX || p[0] == '/')
    return 0;
  for (i = 0; i <= n; i++)
    {
      if (i < n && p[i] == '\0')
        return 0;
      if (i == n || p[i] == '/')
        {
          size_t len = i - start;
          if (len == 0)
            return 0;
          if (len == 1 && p[start] == '.')
            return 0;
          if (len == 2 && p[start] == '.' && p[start + 1] == '.')
            return 0;
          start = i + 1;
        }
    }
  return 1;
}

#endif
