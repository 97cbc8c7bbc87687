/* sbx: the egress process gives up root before it reads a byte.
 *
 * Like the front end (priv/drop.c), with the opposite network rights: the
 * egress process is the one part of sbx that connects to the Internet, and
 * nothing else. Bounding set emptied, groups, gid, uid (the front end's
 * account), no_new_privs, not dumpable; Landlock: read-only access to the
 * few files name resolution reads (nothing else in the filesystem, no TCP
 * bind); seccomp: a threaded relay with inet sockets and connect, no
 * exec, no fork, no mount, no ptrace, no namespaces, no file writes
 * beyond what it already holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <netdb.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "egress/egress.h"
#include "priv/drop.h"
#include "util/cleanup.h"
#include "util/landlock.h"
#include "util/log.h"

static const char *const allowed[] = {
  "read", "write", "readv", "writev", "pread64", "lseek", "close", "close_range", "dup",
  "dup2", "dup3", "fcntl", "open", "openat", "stat", "fstat", "lstat", "newfstatat", "statx",
  "fstatfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents64",
  "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "rt_sigaction", "rt_sigprocmask",
  "rt_sigreturn", "rt_sigtimedwait", "sigaltstack", "futex", "set_robust_list",
  "get_robust_list", "rseq", "set_tid_address", "exit", "exit_group", "gettid", "getpid",
  "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "tgkill",
  "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
  "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait",
  "epoll_pwait", "eventfd2", "pipe2", "connect", "recvfrom", "sendto", "recvmsg", "sendmsg",
  "recvmmsg", "sendmmsg", "shutdown", "getsockopt", "setsockopt", "getsockname",
  "getpeername", "getrandom", "uname", "sysinfo", "sched_getaffinity", "sched_yield",
  "getrlimit", "restart_syscall", "getcwd", "umask", "capget",
};

static const char *const denied[] = {
  "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount",
  "move_mount", "open_tree", "fspick", "mount_setattr", "ptrace", "process_vm_readv",
  "process_vm_writev", "pidfd_getfd", "pidfd_open", "pidfd_send_signal", "kill", "bpf",
  "perf_event_open", "userfaultfd", "io_uring_setup", "keyctl", "add_key", "request_key",
  "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
  "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid",
  "setfsgid", "capset", "chown", "fchown", "lchown", "fchownat", "chmod", "fchmod", "fchmodat",
  "mknod", "mknodat", "mkdir", "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat",
  "unlink", "unlinkat", "rename", "renameat", "renameat2", "truncate", "ftruncate",
  "execve", "execveat", "fork", "vfork", "memfd_create", "open_by_handle_at",
  "name_to_handle_at", "swapon", "swapoff", "settimeofday", "clock_settime", "adjtimex",
  "setpriority", "sched_setscheduler", "sched_setaffinity", "setrlimit", "bind", "listen",
  "accept", "accept4", "splice", "socketpair",
};

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

  if (nr == __NR_SCMP_ERROR || action == DEFAULT_ACTION)
    return 0;
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
  /* IPv4 and IPv6 for upstreams and DNS; AF_UNIX for nscd-less libc
     probes, which then find nothing (Landlock). No netlink, no raw. */
  static const int families[] = {AF_INET, AF_INET6, AF_UNIX};
  struct scmp_arg_cmp read_limit = SCMP_A2 (SCMP_CMP_EQ, 0);
  struct scmp_arg_cmp set_limit = SCMP_A2 (SCMP_CMP_NE, 0);
  struct scmp_arg_cmp ioctls[] = {SCMP_A1 (SCMP_CMP_EQ, FIONREAD), SCMP_A1 (SCMP_CMP_EQ, FIONBIO),
                                  SCMP_A1 (SCMP_CMP_EQ, FIOCLEX)};
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
  for (i = 0; i < sizeof families / sizeof *families; i++)
    {
      struct scmp_arg_cmp fam = SCMP_A0 (SCMP_CMP_EQ, (scmp_datum_t) families[i]);
      if (add (ctx, SCMP_ACT_ALLOW, "socket", 1, &fam, err) < 0)
        goto out;
    }
  if (add (ctx, SCMP_ACT_ALLOW, "clone", 1, &thread, err) < 0
#if !defined(__SANITIZE_ADDRESS__)
      || add (ctx, SCMP_ACT_ERRNO (EPERM), "clone", 1, &process, err) < 0
#endif
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

static long
apply_landlock (sbx_error_t **err)
{
  /* What glibc's getaddrinfo reads with the files and dns services; the
     NSS modules themselves are loaded before this (a warm-up lookup). */
  static const char *const files[] = {"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf",
                                      "/etc/gai.conf", "/etc/host.conf", "/dev/null"};
  cleanup_close int ruleset = -1;
  size_t i;
  long abi = sbx_landlock_abi ();

  if (abi < 1)
    return 0;
  /* Bind: never. Connect is the point of this process (any port the
     policy allows), so it is not handled. */
  ruleset = sbx_landlock_ruleset (abi, LL_NET_BIND_TCP,
                                  LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL, err);
  if (ruleset < 0)
    return -1;
  /* Read-only rules; a path that does not exist on this host is skipped. */
  for (i = 0; i < sizeof files / sizeof *files; i++)
    if (sbx_landlock_allow (ruleset, abi, files[i], LL_FS_READ_FILE, 1, err) < 0)
      return -1;
#if defined(__SANITIZE_ADDRESS__)
  if (sbx_landlock_allow (ruleset, abi, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR, 1, err) < 0)
    return -1;
#endif
  if (sbx_landlock_enforce (ruleset, err) < 0)
    return -1;
  return abi;
}

int
sbx_egress_drop (uid_t uid, gid_t gid, sbx_error_t **err)
{
  struct addrinfo hints, *res = NULL;
  long abi;

  if (uid == 0 || gid == 0)
    return sbx_err (err, SBX_E_INVALID, "the egress process must not run as root");
  /* Load the NSS modules getaddrinfo uses while the libraries are still
     in reach: Landlock below leaves only the configuration files. */
  memset (&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo ("localhost", "80", &hints, &res) == 0)
    freeaddrinfo (res);
  if (sbx_drop_credentials (uid, gid, err) < 0)
    return -1;
  abi = apply_landlock (err);
  if (abi < 0)
    return -1;
  if (apply_seccomp (err) < 0)
    return -1;
  sbx_debug ("egress: uid %u, no capabilities, Landlock ABI %ld, seccomp allowlist",
             (unsigned) uid, abi);
  return 0;
}
