/* sbx: the front end gives up root before it reads a byte from a client.
 *
 * In this order, each step needing what the one before still has: the
 * capability bounding set (needs CAP_SETPCAP), supplementary groups, gid,
 * uid (a uid change away from 0 clears every capability), no_new_privs,
 * not dumpable, a Landlock domain that reaches only the state directory
 * and /dev/null (no TCP bind or connect, no signals or abstract sockets
 * outside it), and a seccomp allowlist for a network server: no
 * namespaces, no mounts, no ptrace, no bpf, no setuid family, no sockets
 * but AF_UNIX (it only accepts on sockets the parent opened). A bug in
 * the HTTP, JSON or Connect parsing then has no root to hand out: what it
 * could reach is the front end's own authority (the daemon's users and
 * sandboxes), never the host.
 */
#include "priv/drop.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <string.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/landlock.h"
#include "util/log.h"

/* Syscalls a threaded HTTP server with SQLite needs; everything else is
   ENOSYS (so libc falls back, as for clone3), and the ones below EPERM. */
static const char *const allowed[] = {
  "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "lseek",
  "close", "close_range", "dup", "dup2", "dup3", "fcntl", "open", "openat", "stat", "fstat",
  "lstat", "newfstatat", "statx", "fstatfs", "access", "faccessat", "faccessat2", "readlink",
  "readlinkat", "getdents64", "fsync", "fdatasync", "ftruncate", "fallocate", "unlink",
  "unlinkat", "rename", "renameat", "renameat2", "flock", "mmap", "munmap", "mprotect",
  "mremap", "madvise", "brk", "msync", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
  "rt_sigtimedwait", "sigaltstack", "futex", "set_robust_list", "get_robust_list", "rseq",
  "set_tid_address", "exit", "exit_group", "gettid", "getpid", "getppid", "getuid", "geteuid",
  "getgid", "getegid", "getresuid", "getresgid", "tgkill", "nanosleep", "clock_nanosleep",
  "clock_gettime", "clock_getres", "gettimeofday", "time", "poll", "ppoll", "select",
  "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
  "eventfd2", "pipe", "pipe2", "splice", "tee", "sendfile", "socketpair", "accept", "accept4",
  "recvfrom", "sendto", "recvmsg", "sendmsg", "shutdown", "getsockopt", "setsockopt",
  "getsockname", "getpeername", "getrandom", "uname", "sysinfo", "sched_getaffinity",
  "sched_yield", "getrlimit", "restart_syscall", "waitid", "getcwd", "umask", "capget",
};

/* Named so that a test sees EPERM, not ENOSYS: these are refused. */
static const char *const denied[] = {
  "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount",
  "move_mount", "open_tree", "fspick", "mount_setattr", "ptrace", "process_vm_readv",
  "process_vm_writev", "pidfd_getfd", "pidfd_open", "pidfd_send_signal", "kill", "bpf",
  "perf_event_open", "userfaultfd", "io_uring_setup", "keyctl", "add_key", "request_key",
  "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
  "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid",
  "setfsgid", "capset", "chown", "fchown", "lchown", "fchownat", "chmod", "fchmod", "fchmodat",
  "mknod", "mknodat", "mkdir", "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat",
  "execve", "execveat", "fork", "vfork", "memfd_create", "open_by_handle_at",
  "name_to_handle_at", "swapon", "swapoff", "settimeofday", "clock_settime", "adjtimex",
  "setpriority", "sched_setscheduler", "sched_setaffinity", "setrlimit",
};

/* Sanitizer builds only: LeakSanitizer's exit-time scan (a tracer
   clone, ptrace, /proc) needs more than a server does; there the
   syscalls not named below are allowed, and only the denials stand. */
#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_ACTION SCMP_ACT_ALLOW
#else
#define DEFAULT_ACTION SCMP_ACT_ERRNO (ENOSYS)
#endif

#define CLONE_THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD)

static int
add (scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
     const struct scmp_arg_cmp *cmp, sbx_error_t **err)
{
  int nr = seccomp_syscall_resolve_name (name);

  if (nr == __NR_SCMP_ERROR)
    return 0; /* not on this architecture */
  if (action == DEFAULT_ACTION)
    return 0; /* libseccomp refuses rules that change nothing */
  if (seccomp_rule_add_array (ctx, action, nr, n, cmp) < 0)
    return sbx_err (err, SBX_E_SYSTEM, "seccomp rule for %s", name);
  return 0;
}


static int
apply_seccomp (sbx_error_t **err)
{
  scmp_filter_ctx ctx = seccomp_init (DEFAULT_ACTION);
  struct scmp_arg_cmp thread = SCMP_A0 (SCMP_CMP_MASKED_EQ, CLONE_THREAD_FLAGS, CLONE_THREAD_FLAGS);
  __attribute__ ((unused)) struct scmp_arg_cmp process
      = SCMP_A0 (SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0);
  struct scmp_arg_cmp unix_only = SCMP_A0 (SCMP_CMP_EQ, AF_UNIX);
  struct scmp_arg_cmp not_unix = SCMP_A0 (SCMP_CMP_NE, AF_UNIX);
  struct scmp_arg_cmp read_limit = SCMP_A2 (SCMP_CMP_EQ, 0);
  struct scmp_arg_cmp set_limit = SCMP_A2 (SCMP_CMP_NE, 0);
  struct scmp_arg_cmp ioctls[] = {SCMP_A1 (SCMP_CMP_EQ, FIONREAD), SCMP_A1 (SCMP_CMP_EQ, FIONBIO),
                                  SCMP_A1 (SCMP_CMP_EQ, FIOCLEX)};
  /* prctl: naming threads, and questions about ourselves. */
  static const int prctls[] = {PR_SET_NAME, PR_GET_NAME, PR_CAPBSET_READ, PR_GET_NO_NEW_PRIVS,
                               PR_GET_SECCOMP, PR_GET_DUMPABLE, PR_GET_KEEPCAPS};
  size_t i;
  int rc = -1;

  if (ctx == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "seccomp_init failed");
  for (i = 0; i < sizeof allowed / sizeof *allowed; i++)
    if (add (ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL, err) < 0)
      goto out;
  for (i = 0; i < sizeof denied / sizeof *denied; i++)
    {
#if defined(__SANITIZE_ADDRESS__)
      if (strcmp (denied[i], "ptrace") == 0 || strcmp (denied[i], "fork") == 0)
        continue;
#endif
      if (add (ctx, SCMP_ACT_ERRNO (EPERM), denied[i], 0, NULL, err) < 0)
        goto out;
    }
  /* Threads only: a new process could leave the filter's assumptions. */
  if (add (ctx, SCMP_ACT_ALLOW, "clone", 1, &thread, err) < 0
#if !defined(__SANITIZE_ADDRESS__)
      || add (ctx, SCMP_ACT_ERRNO (EPERM), "clone", 1, &process, err) < 0
#endif
      || add (ctx, SCMP_ACT_ALLOW, "socket", 1, &unix_only, err) < 0
      || add (ctx, SCMP_ACT_ERRNO (EPERM), "socket", 1, &not_unix, err) < 0
      /* getrlimit(2) is prlimit64 without a new limit. */
      || add (ctx, SCMP_ACT_ALLOW, "prlimit64", 1, &read_limit, err) < 0
      || add (ctx, SCMP_ACT_ERRNO (EPERM), "prlimit64", 1, &set_limit, err) < 0)
    goto out;
  for (i = 0; i < sizeof ioctls / sizeof *ioctls; i++)
    if (add (ctx, SCMP_ACT_ALLOW, "ioctl", 1, &ioctls[i], err) < 0)
      goto out;
  for (i = 0; i < sizeof prctls / sizeof *prctls; i++)
    {
      struct scmp_arg_cmp option = SCMP_A0 (SCMP_CMP_EQ, (scmp_datum_t) prctls[i]);
      if (add (ctx, SCMP_ACT_ALLOW, "prctl", 1, &option, err) < 0)
        goto out;
    }
  if (seccomp_load (ctx) < 0)
    {
      sbx_err (err, SBX_E_SYSTEM, "seccomp_load failed");
      goto out;
    }
  rc = 0;
out:
  seccomp_release (ctx);
  return rc;
}

/* Returns the ABI enforced, 0 when the kernel has no Landlock. */
static long
apply_landlock (const char *state_dir, sbx_error_t **err)
{
  cleanup_close int ruleset = -1;
  uint64_t state_rights;
  long abi = sbx_landlock_abi ();

  if (abi < 1)
    return 0;
  /* No rule grants either TCP right: the front end neither binds nor
     connects. */
  ruleset = sbx_landlock_ruleset (abi, LL_NET_BIND_TCP | LL_NET_CONNECT_TCP,
                                  LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL, err);
  if (ruleset < 0)
    return -1;
  state_rights = LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_READ_DIR | LL_FS_REMOVE_FILE
                 | LL_FS_MAKE_REG | LL_FS_TRUNCATE;
  if (access (state_dir, X_OK) < 0)
    return sbx_err_sys (err, errno,
                        "the state directory `%s` is out of the front end's reach (its account"
                        " must be able to search every directory above it)",
                        state_dir);
  if (sbx_landlock_allow (ruleset, abi, state_dir, state_rights, 0, err) < 0
      || sbx_landlock_allow (ruleset, abi, "/dev/null", LL_FS_READ_FILE | LL_FS_WRITE_FILE, 0,
                             err) < 0)
    return -1;
#if defined(__SANITIZE_ADDRESS__)
  /* Sanitizer reports read /proc/self/maps. */
  if (sbx_landlock_allow (ruleset, abi, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR, 0, err) < 0)
    return -1;
#endif
  if (sbx_landlock_enforce (ruleset, err) < 0)
    return -1;
  return abi;
}

int
sbx_drop_credentials (uid_t uid, gid_t gid, sbx_error_t **err)
{
  pid_t parent = getppid ();
  int cap;

  /* Gone from the bounding set, no exec can bring a capability back. */
  for (cap = 0; cap <= CAP_LAST_CAP; cap++)
    if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      return sbx_err_sys (err, errno, "drop capability %d from the bounding set", cap);
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return sbx_err_sys (err, errno, "clear ambient capabilities");
  if (setgroups (0, NULL) < 0 || setresgid (gid, gid, gid) < 0)
    return sbx_err_sys (err, errno, "setresgid %u", (unsigned) gid);
  if (prctl (PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0 || setresuid (uid, uid, uid) < 0)
    return sbx_err_sys (err, errno, "setresuid %u", (unsigned) uid);
  /* Paranoia (CVE-2009-1897-style surprises): there is no way back. */
  if (setresuid (0, 0, 0) == 0)
    return sbx_err (err, SBX_E_SYSTEM, "could regain root after dropping it");
  /* Our credentials changed: set the parent-death signal after that, and
     catch a parent that died meanwhile. */
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    return sbx_err_sys (err, errno, "PR_SET_PDEATHSIG");
  if (getppid () != parent)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the privileged process is gone");
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return sbx_err_sys (err, errno, "prctl");
  /* Not dumpable (the uid change made us so already): nothing else of
     our uid can ptrace us or read our memory. Sanitizer builds only are
     dumpable: LeakSanitizer's tracer reads our /proc/PID/task. */
#if defined(__SANITIZE_ADDRESS__)
  if (prctl (PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
#else
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
#endif
    return sbx_err_sys (err, errno, "prctl");
  return 0;
}

int
sbx_priv_drop (uid_t uid, gid_t gid, const char *state_dir, sbx_error_t **err)
{
  long abi;

  if (uid == 0 || gid == 0)
    return sbx_err (err, SBX_E_INVALID, "the front end must not run as root");
  if (sbx_drop_credentials (uid, gid, err) < 0)
    return -1;
  abi = apply_landlock (state_dir, err);
  if (abi < 0)
    return -1;
  if (apply_seccomp (err) < 0)
    return -1;
  sbx_debug ("front end: uid %u, no capabilities, Landlock ABI %ld, seccomp allowlist",
            (unsigned) uid, abi);
  return 0;
}
