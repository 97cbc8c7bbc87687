/* sbx: the sandbox's syscall policy (seccomp-bpf, compiled with libseccomp).
 *
 * Shape of the policy (docs/security.md 2.7, "The seccomp allowlist"):
 *
 *   - An allowlist. A syscall that is in no table below gets ENOSYS, which is
 *     what a kernel older than the syscall would say, so libc and runtimes
 *     take their fallback path (clone3 -> clone, statmount -> mountinfo...).
 *   - Known-dangerous syscalls get EPERM explicitly, each with the reason.
 *   - A few syscalls are allowed only for some argument values (clone
 *     without namespace flags, a handful of socket families, ioctl except
 *     terminal injection, a few personas).
 *   - Native architecture only. A foreign architecture (32-bit `int 0x80` on
 *     x86_64, AArch32 on arm64) kills the process: its syscall numbers mean
 *     different things and would walk around every rule here. libseccomp
 *     also sends x32 syscalls (nr | 0x40000000) to that same kill action
 *     when, as here, x32 is not in the filter; tests/unit/test_seccomp.c
 *     checks it.
 *
 * How argument rules are written, and why that way. libseccomp (2.5.x) has
 * three traps that decide the shape of the code below:
 *
 *   1. A rule without argument comparisons for a syscall silently absorbs
 *      every conditional rule of that syscall, whatever their actions (an
 *      unconditional "allow ioctl" drops "deny ioctl TIOCSTI" without an
 *      error). So a syscall is either in a name table or in arg_rules, never
 *      both; check_tables() enforces it at build time.
 *   2. Overlapping conditional rules with different actions have no
 *      documented winner, and a rule may compare each argument only once.
 *      So every conditional syscall is split into disjoint sets that
 *      together cover every value: a set of values gets one action and its
 *      exact complement (computed by add_complement()) gets the other.
 *   3. 64-bit comparisons are split into two 32-bit halves, and merging
 *      such halves for LT/LE/GT/GE/NE rules had a filter-weakening bug
 *      fixed only in 2.6.1 (GHSA-4q85-33p6-j5g6). We only ever emit
 *      MASKED_EQ on the low 32 bits, which never takes that path.
 *
 * Comparing the low 32 bits only is also the correct semantics: every
 * argument we inspect is an int or unsigned int in the kernel, which ignores
 * the upper half. Comparing all 64 bits is how CVE-2019-10063 got TIOCSTI
 * past Flatpak's filter (TIOCSTI | 1 << 32).
 *
 * The kernel (5.11+) caches, per syscall number, an "always allowed"
 * verdict of the filter, so the length of the allowlist costs nothing on
 * the hot path: the program only runs for denied syscalls and for those
 * whose verdict depends on an argument.
 */
#include "iso/seccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

/* Anything not listed: "this kernel has no such syscall". */
#define ACT_DEFAULT SCMP_ACT_ERRNO (ENOSYS)
/* Listed as dangerous, or a forbidden argument of an allowed syscall. */
#define ACT_DENY SCMP_ACT_ERRNO (EPERM)
#define ACT_ALLOW SCMP_ACT_ALLOW

/*============================ Name tables ================================ */

/* Ordinary syscalls of a Linux userland (glibc, Python, Node, bash,
   coreutils, gcc, git, pip). Names this libseccomp does not know, or that
   do not exist on the native architecture (open, fork, arch_prctl on arm64),
   are skipped. */
static const char *const sys_allow[] = {
  /* Process lifetime. fork/vfork carry no flags; clone is in arg_rules. */
  "exit", "exit_group", "fork", "vfork", "execve", "execveat", "wait4",
  "waitid", "set_tid_address", "restart_syscall",

  /* Signals. kill(-1) only reaches processes of the sandbox's pid
     namespace. */
  "kill", "tkill", "tgkill", "rt_sigaction", "rt_sigprocmask",
  "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo",
  "rt_tgsigqueueinfo", "rt_sigsuspend", "sigaltstack", "pause",
  "pidfd_open", "pidfd_send_signal",

  /* Threads and their runtime support. */
  "futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
  "set_robust_list", "get_robust_list", "rseq", "membarrier", "arch_prctl",
  "prctl",

  /* Credentials. The set* calls fail with EPERM unless the sandbox holds
     the capability (it holds none), and then stay inside its user
     namespace. */
  "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid",
  "getresuid", "getresgid", "getgroups", "setuid", "setgid", "setreuid",
  "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups",
  "capget", "capset", "getpgid", "setpgid", "getpgrp", "getsid", "setsid",

  /* Scheduling. Real-time and deadline policies need CAP_SYS_NICE in the
     initial user namespace or a non-zero RLIMIT_RTPRIO (the daemon sets it
     to 0), so the kernel refuses them for us; nice can only be raised. */
  "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
  "sched_setparam", "sched_getscheduler", "sched_setscheduler",
  "sched_getattr", "sched_setattr", "sched_get_priority_max",
  "sched_get_priority_min", "sched_rr_get_interval", "getpriority",
  "setpriority", "ioprio_get", "ioprio_set", "getcpu",

  /* Resource limits and accounting (raising a hard limit needs
     CAP_SYS_RESOURCE). */
  "getrlimit", "setrlimit", "prlimit64", "getrusage", "times",

  /* Clocks and timers (reading only; the setters are denied below). */
  "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
  "gettimeofday", "time", "alarm", "getitimer", "setitimer", "timer_create",
  "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
  "timerfd_create", "timerfd_settime", "timerfd_gettime",

  /* System information. */
  "uname", "sysinfo", "getrandom", "umask",

  /* Memory. mlock is bounded by RLIMIT_MEMLOCK; mseal only tightens;
     get_mempolicy reads the caller's own NUMA policy (the setters are
     denied). */
  "brk", "mmap", "munmap", "mprotect", "mremap", "msync", "mincore",
  "madvise", "mlock", "mlock2", "munlock", "mlockall", "munlockall",
  "memfd_create", "pkey_alloc", "pkey_free", "pkey_mprotect",
  "map_shadow_stack", "mseal", "get_mempolicy",

  /* File descriptors and data. */
  "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv",
  "pwritev", "preadv2", "pwritev2", "lseek", "close", "close_range", "dup",
  "dup2", "dup3", "fcntl", "flock", "pipe", "pipe2", "sendfile", "splice",
  "tee", "vmsplice", "copy_file_range", "readahead", "fadvise64", "fsync",
  "fdatasync", "sync", "syncfs", "sync_file_range", "fallocate", "ftruncate",
  "truncate",

  /* Paths. Where they lead is decided by the mount layout and Landlock, not
     here (seccomp cannot read pointers). mknod of devices needs CAP_MKNOD in
     the initial user namespace; FIFOs and sockets are fine. */
  "open", "openat", "openat2", "creat", "access", "faccessat", "faccessat2",
  "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
  "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat",
  "rmdir", "mknod", "mknodat", "link", "linkat", "unlink", "unlinkat",
  "symlink", "symlinkat", "readlink", "readlinkat", "rename", "renameat",
  "renameat2", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown",
  "lchown", "fchownat", "utime", "utimes", "utimensat", "futimesat",

  /* Extended attributes (trusted.* and security.* need capabilities). */
  "getxattr", "lgetxattr", "fgetxattr", "getxattrat", "setxattr",
  "lsetxattr", "fsetxattr", "setxattrat", "listxattr", "llistxattr",
  "flistxattr", "listxattrat", "removexattr", "lremovexattr",
  "fremovexattr", "removexattrat", "file_getattr", "file_setattr",

  /* Event loops and notification fds. */
  "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1",
  "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd",
  "eventfd2", "signalfd", "signalfd4", "inotify_init", "inotify_init1",
  "inotify_add_watch", "inotify_rm_watch",

  /* Sockets, once created (socket and socketpair are in arg_rules). Which
     addresses are reachable is the network namespace's business. */
  "connect", "bind", "listen", "accept", "accept4", "sendto", "recvfrom",
  "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "getsockopt",
  "setsockopt", "getsockname", "getpeername",

  /* System V IPC and POSIX message queues: both live in the sandbox's IPC
     namespace. */
  "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop",
  "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink",
  "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",

  /* A process may always restrict itself further. */
  "seccomp", "landlock_create_ruleset", "landlock_add_rule",
  "landlock_restrict_self",
};

/* Known-dangerous syscalls: EPERM. Most also need a capability the sandbox
   lacks; the filter keeps the kernel code behind them unreachable even if a
   capability leaks or a permission check has a bug. */
static const char *const sys_deny[] = {
  /* Filesystem view. It is built by the daemon and must not change. */
  "mount",          /* CVE-2022-0492: cgroup v1 release_agent via a new mount */
  "umount2",        /* would uncover what the daemon mounted over */
  "pivot_root",     /* root changes are the daemon's job */
  "chroot",         /* classic chroot escapes with a leaked directory fd */
  "fsopen",         /* CVE-2022-0185: fsconfig legacy_parse_param overflow */
  "fsconfig",       /* CVE-2022-0185 */
  "fsmount",        /* new mount API, same surface as mount */
  "fspick",         /* reconfigures an existing superblock */
  "move_mount",     /* attaches detached trees anywhere */
  "open_tree",      /* clones mount trees (OPEN_TREE_CLONE) */
  "open_tree_attr", /* open_tree with mount attributes (6.15) */
  "mount_setattr",  /* could drop ro/nosuid/noexec from our mounts */

  /* Namespaces. A new user namespace hands out CAP_SYS_ADMIN over kernel
     code otherwise reserved to root: nf_tables CVE-2022-1015, CVE-2023-32233,
     CVE-2024-1086; x_tables CVE-2021-22555; overlayfs CVE-2023-0386. */
  "unshare",
  "setns",          /* joining another namespace is never the sandbox's call */

  /* Kernel keyring: not namespaced (other tenants' secrets); CVE-2016-0728
     refcount overflow to root. */
  "keyctl", "add_key", "request_key",

  /* Large kernel attack surface, popular in exploits. */
  "bpf",             /* verifier bugs: CVE-2017-16995, CVE-2021-3490 */
  "perf_event_open", /* CVE-2013-2094 and a long tail; host info leaks */
  "userfaultfd",     /* stalls copy_from_user to win kernel races */
  /* io_uring: I/O that seccomp never sees; CVE-2022-29582, CVE-2023-2598,
     CVE-2024-0582. libuv and others fall back to epoll on any error (the
     kernel's own io_uring_disabled sysctl also answers EPERM). */
  "io_uring_setup", "io_uring_enter", "io_uring_register",

  /* Other processes' memory and files. */
  "ptrace",            /* CVE-2019-13272; before 4.8, a seccomp bypass */
  "process_vm_readv",  /* reads another process's memory */
  "process_vm_writev", /* writes another process's memory */
  "kcmp",              /* compares kernel pointers of other processes */
  "pidfd_getfd",       /* steals an fd from another process */
  "process_madvise",   /* advises on another process's memory */

  /* Kernel code and boot. */
  "kexec_load", "kexec_file_load", /* replace the running kernel */
  "init_module", "finit_module",   /* load kernel code */
  "delete_module",                 /* unload kernel code */
  "create_module", "get_kernel_syms", "query_module", /* pre-2.6 module API */
  "reboot",                        /* host-wide */

  /* Time is not namespaced (time namespaces only offset monotonic and
     boottime); adjtimex and clock_adjtime can also set it. */
  "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",

  /* Host-global state. */
  "swapon", "swapoff",      /* host memory */
  "acct",                   /* host process accounting file */
  "quotactl", "quotactl_fd", /* host filesystem quotas */
  "syslog",                 /* kernel log: addresses, other tenants' events */
  "vhangup",                /* hangs up the controlling terminal */
  "sethostname", "setdomainname", /* UTS is namespaced; the daemon names it */

  /* File handles: "Shocker" (2014) read host files by brute-forcing
     handles with open_by_handle_at; name_to_handle_at is its other half. */
  "open_by_handle_at", "name_to_handle_at",

  /* Hardware and x86 legacy. */
  "iopl", "ioperm",   /* raw I/O port access */
  "modify_ldt",       /* historic leaks; CVE-2017-17053 (LDT use-after-free) */
  "vm86", "vm86old",  /* 32-bit only, kept for clarity */

  /* Obsolete interfaces nobody should call: less code reachable. */
  "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl", "lookup_dcookie",

  /* NUMA placement: "scary VM/NUMA ops" (Flatpak); can pin memory on the
     host's nodes. get_mempolicy only reads and stays allowed. */
  "mbind", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages",
  "move_pages",

  /* fanotify can watch (and block) whole mounts. */
  "fanotify_init", "fanotify_mark",
};

/* Deliberately in no table, so they get the default ENOSYS. Listed only so
   that check_tables() refuses to see them in another table; libseccomp
   rejects a rule whose action equals the default (-EACCES), so they are not
   added as rules. */
static const char *const sys_enosys[] = {
  /* Its flags are behind a pointer seccomp cannot read, so namespace flags
     could not be filtered; on ENOSYS glibc falls back to clone. */
  "clone3",
  /* Legacy AIO: nothing in our userland needs it (glibc's POSIX AIO uses
     threads), its rings count against the host-global fs.aio-max-nr (one
     sandbox can starve the host's AIO users), and fs/aio.c has a UAF history
     (CVE-2019-10125). ENOSYS is what a CONFIG_AIO=n kernel says, so libaio
     users (InnoDB, fio) take their fallback. */
  "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
  "io_pgetevents",
  /* Pages removed from the kernel direct map fragment it host-wide; no
     target runtime uses it; ENOSYS is also what secretmem-disabled kernels
     return. */
  "memfd_secret",
  /* An OOM-killer helper that reaps the memory of a dying process; no use
     inside a sandbox, and ENOSYS reads as "older kernel". */
  "process_mrelease",
  /* Mount introspection: libmount falls back to /proc/self/mountinfo. */
  "statmount", "listmount",
  /* Rarely used; remap_file_pages is an obsolete emulation, the thread area
     calls are for 32-bit TLS. */
  "remap_file_pages", "set_thread_area", "get_thread_area", "cachestat",
};

/*========================= Argument rules =============================== */

/* A set of values of one argument: (low 32 bits of arg) & mask == value. */
struct arg_block
{
  uint32_t mask;
  uint32_t value;
};

#define EXACT(v) { UINT32_MAX, (uint32_t) (v) }

/* clone(2) flags (arg0 on x86_64 and arm64). CLONE_NEWTIME shares its bit
   with the exit-signal byte of clone(2) (only unshare and clone3 take it);
   masking it too only refuses exit signals >= 128, which are invalid. */
#define NEW_NS_FLAGS                                                           \
  (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC                 \
   | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME)
static const struct arg_block clone_no_new_ns[] = { { NEW_NS_FLAGS, 0 } };

/* socket(2) families usable with any protocol. */
static const struct arg_block socket_open_families[] = {
  EXACT (AF_UNIX),
  EXACT (AF_INET),
  EXACT (AF_INET6),
};

/* All families socket(2) accepts. Everything else is EPERM: AF_ALG
   (CVE-2026-31431 "Copy Fail": page-cache writes via algif_aead), AF_PACKET
   (CVE-2016-8655, CVE-2020-14386), AF_VSOCK (CVE-2021-26708), AF_KEY,
   AF_BLUETOOTH, AF_RDS, AF_TIPC, AF_CAN, AF_XDP... */
static const struct arg_block socket_families[] = {
  EXACT (AF_UNIX),
  EXACT (AF_INET),
  EXACT (AF_INET6),
  EXACT (AF_NETLINK),
};

/* AF_NETLINK only for NETLINK_ROUTE (glibc's getaddrinfo and getifaddrs
   use it; it is per network namespace). NETLINK_NETFILTER, NETLINK_XFRM,
   NETLINK_AUDIT... are EPERM. */
static const struct arg_block netlink_protocols[] = { EXACT (NETLINK_ROUTE) };

/* socketpair(2) is only meaningful for AF_UNIX. */
static const struct arg_block socketpair_families[] = { EXACT (AF_UNIX) };

/* ioctl(2) requests denied on any fd (arg1). */
static const struct arg_block ioctl_denied[] = {
  EXACT (TIOCSTI),   /* CVE-2017-5226: push input into the parent's tty */
  EXACT (TIOCLINUX), /* CVE-2023-28100: the same via TIOCL_PASTESEL */
  EXACT (TIOCSETD),  /* changes the line discipline: loads ldisc code,
                        CVE-2017-2636 (n_hdlc) */
};

/* personality(2) values allowed (arg0): Docker's list. Others (e.g.
   READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE) are EPERM. */
static const struct arg_block personas[] = {
  EXACT (PER_LINUX),
  EXACT (PER_LINUX32),
  EXACT (UNAME26),
  EXACT (PER_LINUX32 | UNAME26),
  EXACT (0xffffffff), /* query only */
};

/* One line of the argument policy: `action` applies when argument `arg` is
   in `set` (or, with `complement`, in no block of `set`), and, if `guard`,
   argument `guard_arg` equals `guard_value` too. Each syscall's lines are
   consecutive, disjoint, and together cover every value. */
struct arg_rule
{
  const char *name;
  bool guard;
  unsigned int guard_arg;
  uint32_t guard_value;
  unsigned int arg;
  const struct arg_block *set;
  size_t n_set;
  bool complement;
  uint32_t action;
};

#define SET(a) .set = (a), .n_set = ARRAY_SIZE (a)
#define NETLINK_GUARD .guard = true, .guard_arg = 0, .guard_value = AF_NETLINK

static const struct arg_rule arg_rules[] = {
  /* No new namespaces (see sys_deny "unshare"). */
  { .name = "clone", .arg = 0, SET (clone_no_new_ns), .action = ACT_ALLOW },
  { .name = "clone", .arg = 0, SET (clone_no_new_ns), .complement = true,
    .action = ACT_DENY },

  { .name = "socket", .arg = 0, SET (socket_open_families),
    .action = ACT_ALLOW },
  { .name = "socket", .arg = 0, SET (socket_families), .complement = true,
    .action = ACT_DENY },
  { .name = "socket", NETLINK_GUARD, .arg = 2, SET (netlink_protocols),
    .action = ACT_ALLOW },
  { .name = "socket", NETLINK_GUARD, .arg = 2, SET (netlink_protocols),
    .complement = true, .action = ACT_DENY },

  { .name = "socketpair", .arg = 0, SET (socketpair_families),
    .action = ACT_ALLOW },
  { .name = "socketpair", .arg = 0, SET (socketpair_families),
    .complement = true, .action = ACT_DENY },

  { .name = "ioctl", .arg = 1, SET (ioctl_denied), .action = ACT_DENY },
  { .name = "ioctl", .arg = 1, SET (ioctl_denied), .complement = true,
    .action = ACT_ALLOW },

  { .name = "personality", .arg = 0, SET (personas), .action = ACT_ALLOW },
  { .name = "personality", .arg = 0, SET (personas), .complement = true,
    .action = ACT_DENY },
};

/*============================ Building ================================== */

static void
release_filter (scmp_filter_ctx *ctx)
{
  if (*ctx != NULL)
    seccomp_release (*ctx);
}
#define cleanup_filter __attribute__ ((cleanup (release_filter)))

/* The native number of `name`, or -1 if this libseccomp does not know it or
   it does not exist on this architecture (libseccomp then returns
   __NR_SCMP_ERROR or a negative pseudo-syscall number). */
static int
resolve (const char *name)
{
  int nr = seccomp_syscall_resolve_name (name);
  return nr < 0 ? -1 : nr;
}

struct named_nr
{
  int nr;
  const char *name;
};

static int
compare_named_nr (const void *a, const void *b)
{
  const struct named_nr *x = a, *y = b;
  return (x->nr > y->nr) - (x->nr < y->nr);
}

static size_t
collect (struct named_nr *out, size_t n, const char *const *names,
         size_t count)
{
  for (size_t i = 0; i < count; i++)
    {
      int nr = resolve (names[i]);
      if (nr >= 0)
        out[n++] = (struct named_nr) { nr, names[i] };
    }
  return n;
}

/* Every syscall must be in exactly one table: a name-table entry for a
   syscall of arg_rules would silently cancel its argument checks (trap 1
   above), and a duplicate hides which policy was meant. */
static int
check_tables (sbx_error_t **err)
{
  struct named_nr all[ARRAY_SIZE (sys_allow) + ARRAY_SIZE (sys_deny)
                      + ARRAY_SIZE (sys_enosys) + ARRAY_SIZE (arg_rules)];
  size_t n = 0;

  n = collect (all, n, sys_allow, ARRAY_SIZE (sys_allow));
  n = collect (all, n, sys_deny, ARRAY_SIZE (sys_deny));
  n = collect (all, n, sys_enosys, ARRAY_SIZE (sys_enosys));
  for (size_t i = 0; i < ARRAY_SIZE (arg_rules); i++)
    if (i == 0 || strcmp (arg_rules[i].name, arg_rules[i - 1].name) != 0)
      n = collect (all, n, &arg_rules[i].name, 1);

  qsort (all, n, sizeof all[0], compare_named_nr);
  for (size_t i = 1; i < n; i++)
    if (all[i].nr == all[i - 1].nr)
      return sbx_err (err, SBX_E_SYSTEM,
                      "seccomp policy: syscall %d is listed twice (`%s`, "
                      "`%s`)",
                      all[i].nr, all[i - 1].name, all[i].name);
  return 0;
}

static int
add_names (scmp_filter_ctx ctx, uint32_t action, const char *const *names,
           size_t count, sbx_error_t **err)
{
  for (size_t i = 0; i < count; i++)
    {
      int nr = resolve (names[i]);
      int rc;

      if (nr < 0)
        continue;
      rc = seccomp_rule_add (ctx, action, nr, 0);
      if (rc < 0)
        return sbx_err_sys (err, -rc, "seccomp: add rule for `%s`", names[i]);
    }
  return 0;
}

/* Add `rule`'s action for (low 32 bits of its argument) & mask == value. */
static int
add_block (scmp_filter_ctx ctx, int nr, const struct arg_rule *rule,
           uint32_t mask, uint32_t value, sbx_error_t **err)
{
  struct scmp_arg_cmp cmp[2];
  unsigned int n = 0;
  int rc;

  /* A zero mask compares nothing: libseccomp would turn the rule into an
     unconditional one that swallows the others (trap 1). */
  if (mask == 0)
    return sbx_err (err, SBX_E_SYSTEM,
                    "seccomp policy: empty comparison for `%s`", rule->name);
  cmp[n++] = SCMP_CMP (rule->arg, SCMP_CMP_MASKED_EQ, mask, value & mask);
  if (rule->guard)
    cmp[n++] = SCMP_CMP (rule->guard_arg, SCMP_CMP_MASKED_EQ, UINT32_MAX,
                         rule->guard_value);
  rc = seccomp_rule_add_array (ctx, rule->action, nr, n, cmp);
  if (rc < 0)
    return sbx_err_sys (err, -rc,
                        "seccomp: add rule for `%s` arg%u & %#x == %#x",
                        rule->name, rule->arg, mask, value & mask);
  return 0;
}

/* Add `rule`'s action for every value of the region (region_mask,
   region_value) that is in no block of rule->set, as disjoint blocks.
   Splitting on one still-free bit that some intersecting block constrains
   always makes progress: a region that intersects a block and has all that
   block's bits fixed lies inside it. Depth is at most 32. */
static int
add_complement (scmp_filter_ctx ctx, int nr, const struct arg_rule *rule,
                uint32_t region_mask, uint32_t region_value,
                sbx_error_t **err)
{
  uint32_t split = 0, bit;
  bool intersects = false;

  for (size_t i = 0; i < rule->n_set; i++)
    {
      const struct arg_block *b = &rule->set[i];
      uint32_t unfixed = b->mask & ~region_mask;

      if ((b->value ^ region_value) & b->mask & region_mask)
        continue; /* disjoint from the region */
      if (unfixed == 0)
        return 0; /* the region lies inside the set */
      intersects = true;
      split |= unfixed;
    }
  if (!intersects)
    return add_block (ctx, nr, rule, region_mask, region_value, err);

  bit = UINT32_C (1) << (31 - __builtin_clz (split));
  if (add_complement (ctx, nr, rule, region_mask | bit, region_value, err) < 0)
    return -1;
  return add_complement (ctx, nr, rule, region_mask | bit, region_value | bit,
                         err);
}

static int
add_arg_rule (scmp_filter_ctx ctx, const struct arg_rule *rule,
              sbx_error_t **err)
{
  int nr = resolve (rule->name);

  if (nr < 0)
    return 0;
  if (rule->complement)
    return add_complement (ctx, nr, rule, 0, 0, err);
  for (size_t i = 0; i < rule->n_set; i++)
    if (add_block (ctx, nr, rule, rule->set[i].mask, rule->set[i].value, err)
        < 0)
      return -1;
  return 0;
}

static int
set_attributes (scmp_filter_ctx ctx, sbx_error_t **err)
{
  static const struct
  {
    enum scmp_filter_attr attr;
    uint32_t value;
    const char *what;
  } attrs[] = {
    /* Foreign architectures (int 0x80, AArch32) and x32 die. */
    { SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "ACT_BADARCH" },
    /* The sandbox init sets no_new_privs itself before loading. */
    { SCMP_FLTATR_CTL_NNP, 0, "CTL_NNP" },
    /* Report errno values, not libseccomp's own codes. */
    { SCMP_FLTATR_API_SYSRAWRC, 1, "API_SYSRAWRC" },
    /* A binary search over syscall numbers instead of a linear chain:
       every syscall a sandbox makes runs this filter, and with ~300 rules
       a linear one costs hundreds of instructions for the last ones. */
    { SCMP_FLTATR_CTL_OPTIMIZE, 2, "CTL_OPTIMIZE" },
    /* SCMP_FLTATR_CTL_SSB is deliberately left alone: hostile code keeps
       the kernel's speculative store bypass mitigation. */
  };

  for (size_t i = 0; i < ARRAY_SIZE (attrs); i++)
    {
      int rc = seccomp_attr_set (ctx, attrs[i].attr, attrs[i].value);
      if (rc < 0)
        return sbx_err_sys (err, -rc, "seccomp: set attribute %s",
                            attrs[i].what);
    }
  return 0;
}

/* libseccomp 2.5 can only export to an fd: go through a memfd. */
static int
export_program (scmp_filter_ctx ctx, void **prog, size_t *len,
                sbx_error_t **err)
{
  cleanup_close int fd = -1;
  cleanup_free unsigned char *buf = NULL;
  struct stat st;
  size_t size, done = 0;
  int rc;

  fd = memfd_create ("sbx-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys (err, errno, "seccomp: memfd_create");
  rc = seccomp_export_bpf (ctx, fd);
  if (rc < 0)
    return sbx_err_sys (err, -rc, "seccomp: export the filter");
  if (fstat (fd, &st) < 0)
    return sbx_err_sys (err, errno, "seccomp: fstat the exported filter");

  size = (size_t) st.st_size;
  if (size == 0 || size % sizeof (struct sock_filter) != 0
      || size / sizeof (struct sock_filter) > BPF_MAXINSNS)
    return sbx_err (err, SBX_E_SYSTEM,
                    "seccomp: exported filter has %zu bytes, not 1 to %d "
                    "instructions",
                    size, BPF_MAXINSNS);

  buf = malloc (size);
  if (buf == NULL)
    sbx_oom ();
  while (done < size)
    {
      ssize_t r = pread (fd, buf + done, size - done, (off_t) done);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return sbx_err_sys (err, errno, "seccomp: read the exported filter");
      if (r == 0)
        return sbx_err (err, SBX_E_SYSTEM,
                        "seccomp: exported filter shrank to %zu bytes", done);
      done += (size_t) r;
    }

  *prog = steal_pointer (&buf);
  *len = size;
  return 0;
}

int
sbx_seccomp_build (void **prog, size_t *len, sbx_error_t **err)
{
  cleanup_filter scmp_filter_ctx ctx = NULL;
  uint32_t arch = seccomp_arch_native ();

  /* The tables assume a 64-bit native ABI without socketcall/ipc
     multiplexers (32-bit x86 would let socket() through socketcall). */
  if (arch != SCMP_ARCH_X86_64 && arch != SCMP_ARCH_AARCH64)
    return sbx_err (err, SBX_E_SYSTEM,
                    "seccomp: no policy for native architecture %#x", arch);
  if (check_tables (err) < 0)
    return -1;

  ctx = seccomp_init (ACT_DEFAULT);
  if (ctx == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "seccomp: seccomp_init failed");
  if (set_attributes (ctx, err) < 0)
    return -1;
  if (add_names (ctx, ACT_ALLOW, sys_allow, ARRAY_SIZE (sys_allow), err) < 0
      || add_names (ctx, ACT_DENY, sys_deny, ARRAY_SIZE (sys_deny), err) < 0)
    return -1;
  for (size_t i = 0; i < ARRAY_SIZE (arg_rules); i++)
    if (add_arg_rule (ctx, &arg_rules[i], err) < 0)
      return -1;
  return export_program (ctx, prog, len, err);
}
