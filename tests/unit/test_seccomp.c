/* Unit tests for src/iso/seccomp.c: the sandbox syscall policy.
 *
 * Each test runs in its own forked process (tap.h), builds the filter with
 * sbx_seccomp_build, loads it into itself the way the sandbox init does
 * (no_new_privs, then seccomp(SECCOMP_SET_MODE_FILTER)) and asserts exact
 * errnos, like bubblewrap's test-seccomp.py. As in tests/probe/probe.c,
 * every call passes arguments the kernel refuses anyway (bad fd, unmapped
 * pointer, invalid flags), so an allowed call fails harmlessly with
 * EBADF/EFAULT/EINVAL and a broken filter cannot mount, reboot or set the
 * clock on the machine running the tests.
 *
 * Architectures this machine cannot run (i386 `int 0x80` may be disabled)
 * are checked with a small classic BPF interpreter over the exported
 * program.
 */
#include "iso/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

#include "tap.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

/* Below vm.mmap_min_addr: every kernel access faults. */
#define BAD_PTR 8L
/* A socket type with an unknown bit: EINVAL before the family is used. */
#define BAD_SOCK_TYPE 0x10L
#define BAD_FLAGS (-1L)
#define NO_PID 0x7fffffffL
#define HIGH_BIT (1L << 32)
#define X32_BIT 0x40000000L

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

static struct sock_fprog program;
static size_t program_bytes;

/*============================ Helpers ================================== */

static int
build (void)
{
  sbx_error_t *err = NULL;
  void *prog = NULL;
  size_t len = 0;

  if (sbx_seccomp_build (&prog, &len, &err) < 0)
    {
      fprintf (stderr, "#   sbx_seccomp_build: %s\n", err->msg);
      sbx_error_free (err);
      return -1;
    }
  program.filter = prog;
  program.len = (unsigned short) (len / sizeof (struct sock_filter));
  program_bytes = len;
  return 0;
}

/* What the sandbox init does. */
static int
load (void)
{
  if (build () < 0)
    return -1;
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    {
      perror ("#   PR_SET_NO_NEW_PRIVS");
      return -1;
    }
  if (syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) < 0)
    {
      perror ("#   seccomp(SECCOMP_SET_MODE_FILTER)");
      return -1;
    }
  return 0;
}

static const char *
errno_name (int e)
{
  const char *name = e ? strerrorname_np (e) : "success";
  return name ? name : "unknown errno";
}

/* 0 if the raw syscall succeeded, else its errno. */
static int
call_result (long nr, const long arg[6])
{
  long rc;

  errno = 0;
  rc = syscall (nr, arg[0], arg[1], arg[2], arg[3], arg[4], arg[5]);
  return rc == -1 ? errno : 0;
}

struct call
{
  const char *name;
  long nr;
  long arg[6];
  int want; /* 0: success; otherwise the errno */
};

/* Arguments not listed are 0. */
/* clang-format off */
#define CALL(name, want, nr, ...) { name, nr, { __VA_ARGS__ }, want }
/* clang-format on */

/* Run every call, report each mismatch, fail if any. */
static int
check_calls (const struct call *calls, size_t n)
{
  int failed = 0;

  for (size_t i = 0; i < n; i++)
    {
      int got = call_result (calls[i].nr, calls[i].arg);
      if (got != calls[i].want)
        {
          fprintf (stderr, "#   %s: got %s, want %s\n", calls[i].name,
                   errno_name (got), errno_name (calls[i].want));
          failed = 1;
        }
    }
  return failed ? -1 : 0;
}

/* One check of a generated argument value: prints the value on failure. */
static int
check_value (const char *what, long nr, const long arg[6], unsigned long value,
             int want)
{
  int got = call_result (nr, arg);
  if (got == want)
    return 0;
  fprintf (stderr, "#   %s %#lx: got %s, want %s\n", what, value,
           errno_name (got), errno_name (want));
  return -1;
}

static void
no_core_dumps (void)
{
  const struct rlimit zero = { 0, 0 };
  (void) setrlimit (RLIMIT_CORE, &zero);
}

/* A deterministic 64-bit generator (splitmix64) for argument sweeps. */
static uint64_t
next_random (uint64_t *state)
{
  uint64_t z = (*state += UINT64_C (0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/*======================= A classic BPF interpreter ====================== */

#define BPF_UNSUPPORTED UINT32_MAX

/* Runs the subset of classic BPF that seccomp filters use over a synthetic
   struct seccomp_data; returns the SECCOMP_RET_* value, or BPF_UNSUPPORTED
   for anything the kernel's checker would refuse or we do not model. */
static uint32_t
run_bpf (const struct sock_fprog *prog, const struct seccomp_data *data)
{
  const unsigned char *bytes = (const unsigned char *) data;
  uint32_t a = 0;

  for (size_t pc = 0; pc < prog->len; pc++)
    {
      const struct sock_filter *f = &prog->filter[pc];
      uint32_t k = f->k;
      bool taken;

      switch (f->code)
        {
        case BPF_LD | BPF_W | BPF_ABS:
          if (k % 4 != 0 || k > sizeof *data - 4)
            return BPF_UNSUPPORTED;
          memcpy (&a, bytes + k, sizeof a);
          continue;
        case BPF_ALU | BPF_AND | BPF_K:
          a &= k;
          continue;
        case BPF_RET | BPF_K:
          return k;
        case BPF_JMP | BPF_JA:
          pc += k;
          continue;
        case BPF_JMP | BPF_JEQ | BPF_K:
          taken = a == k;
          break;
        case BPF_JMP | BPF_JGT | BPF_K:
          taken = a > k;
          break;
        case BPF_JMP | BPF_JGE | BPF_K:
          taken = a >= k;
          break;
        case BPF_JMP | BPF_JSET | BPF_K:
          taken = (a & k) != 0;
          break;
        default:
          fprintf (stderr, "#   bpf: unsupported code %#x at %zu\n", f->code,
                   pc);
          return BPF_UNSUPPORTED;
        }
      pc += taken ? f->jt : f->jf;
    }
  return BPF_UNSUPPORTED; /* ran off the end */
}

static uint32_t
emulate (uint32_t arch, uint32_t nr, uint64_t arg0, uint64_t arg1)
{
  struct seccomp_data data;

  memset (&data, 0, sizeof data);
  data.arch = arch;
  data.nr = (int) nr;
  data.args[0] = arg0;
  data.args[1] = arg1;
  return run_bpf (&program, &data);
}

/*============================ Tests ==================================== */

static int
test_program_shape (void)
{
  CHECK (build () == 0);
  CHECK (program_bytes > 0);
  CHECK (program_bytes % sizeof (struct sock_filter) == 0);
  CHECK (program.len <= BPF_MAXINSNS);
  /* The architecture is checked before anything else. */
  CHECK (program.filter[0].code == (BPF_LD | BPF_W | BPF_ABS));
  CHECK (program.filter[0].k == offsetof (struct seccomp_data, arch));
  free (program.filter);
  return 0;
}

/* Every explicitly denied syscall: EPERM from the filter. Outside a filter
   the same calls fail with EINVAL/EFAULT/EBADF/ESRCH (or ENOSYS where the
   kernel lacks them), so EPERM here can only come from the policy when the
   tests run as root. */
static const struct call denied[] = {
  CALL ("mount", EPERM, SYS_mount, BAD_PTR, BAD_PTR, BAD_PTR, 0, BAD_PTR),
  CALL ("umount2", EPERM, SYS_umount2, BAD_PTR, BAD_FLAGS),
  CALL ("pivot_root", EPERM, SYS_pivot_root, BAD_PTR, BAD_PTR),
  CALL ("chroot", EPERM, SYS_chroot, BAD_PTR),
  CALL ("fsopen", EPERM, SYS_fsopen, BAD_PTR, BAD_FLAGS),
  CALL ("fsconfig", EPERM, SYS_fsconfig, -1, BAD_FLAGS, BAD_PTR, BAD_PTR, -1),
  CALL ("fsmount", EPERM, SYS_fsmount, -1, BAD_FLAGS, BAD_FLAGS),
  CALL ("fspick", EPERM, SYS_fspick, -1, BAD_PTR, BAD_FLAGS),
  CALL ("move_mount", EPERM, SYS_move_mount, -1, BAD_PTR, -1, BAD_PTR,
        BAD_FLAGS),
  CALL ("open_tree", EPERM, SYS_open_tree, -1, BAD_PTR, BAD_FLAGS),
  CALL ("mount_setattr", EPERM, SYS_mount_setattr, -1, BAD_PTR, BAD_FLAGS,
        BAD_PTR, 0),
  CALL ("unshare(0)", EPERM, SYS_unshare, 0),
  CALL ("unshare(CLONE_NEWUSER)", EPERM, SYS_unshare,
        CLONE_NEWUSER | CLONE_VFORK),
  CALL ("setns", EPERM, SYS_setns, -1, 0),
  CALL ("keyctl", EPERM, SYS_keyctl, 0x7fffffffL),
  CALL ("add_key", EPERM, SYS_add_key, BAD_PTR, BAD_PTR, BAD_PTR, 0, 0),
  CALL ("request_key", EPERM, SYS_request_key, BAD_PTR, BAD_PTR, BAD_PTR, 0),
  CALL ("bpf", EPERM, SYS_bpf, BAD_FLAGS, 0, 0),
  CALL ("perf_event_open", EPERM, SYS_perf_event_open, BAD_PTR, 0, -1, -1,
        BAD_FLAGS),
  CALL ("userfaultfd", EPERM, SYS_userfaultfd, BAD_FLAGS),
  CALL ("io_uring_setup", EPERM, SYS_io_uring_setup, 0, BAD_PTR),
  CALL ("io_uring_enter", EPERM, SYS_io_uring_enter, -1, 0, 0, BAD_FLAGS),
  CALL ("io_uring_register", EPERM, SYS_io_uring_register, -1, BAD_FLAGS),
  CALL ("ptrace", EPERM, SYS_ptrace, -1, NO_PID),
  CALL ("process_vm_readv", EPERM, SYS_process_vm_readv, NO_PID, 0, 0, 0, 0,
        BAD_FLAGS),
  CALL ("process_vm_writev", EPERM, SYS_process_vm_writev, NO_PID, 0, 0, 0,
        0, BAD_FLAGS),
  CALL ("kcmp", EPERM, SYS_kcmp, NO_PID, NO_PID),
  CALL ("pidfd_getfd", EPERM, SYS_pidfd_getfd, -1, 0, 0),
  CALL ("process_madvise", EPERM, SYS_process_madvise, -1, 0, 0, 0,
        BAD_FLAGS),
  CALL ("kexec_load", EPERM, SYS_kexec_load, 0, BAD_FLAGS, 0, BAD_FLAGS),
  CALL ("kexec_file_load", EPERM, SYS_kexec_file_load, -1, -1, 0, 0,
        BAD_FLAGS),
  CALL ("init_module", EPERM, SYS_init_module, BAD_PTR, 0, BAD_PTR),
  CALL ("finit_module", EPERM, SYS_finit_module, -1, BAD_PTR, BAD_FLAGS),
  CALL ("delete_module", EPERM, SYS_delete_module, BAD_PTR, 0),
  CALL ("reboot", EPERM, SYS_reboot, 0, 0, 0, 0),
  CALL ("settimeofday", EPERM, SYS_settimeofday, BAD_PTR, BAD_PTR),
  CALL ("clock_settime", EPERM, SYS_clock_settime, CLOCK_REALTIME, BAD_PTR),
  CALL ("clock_adjtime", EPERM, SYS_clock_adjtime, CLOCK_REALTIME, BAD_PTR),
  CALL ("adjtimex", EPERM, SYS_adjtimex, BAD_PTR),
  CALL ("swapon", EPERM, SYS_swapon, BAD_PTR, BAD_FLAGS),
  CALL ("swapoff", EPERM, SYS_swapoff, BAD_PTR),
  CALL ("acct", EPERM, SYS_acct, BAD_PTR),
  CALL ("open_by_handle_at", EPERM, SYS_open_by_handle_at, -1, BAD_PTR, 0),
  CALL ("name_to_handle_at", EPERM, SYS_name_to_handle_at, -1, BAD_PTR,
        BAD_PTR, BAD_PTR, BAD_FLAGS),
  CALL ("quotactl", EPERM, SYS_quotactl, 0xff, BAD_PTR, 0, BAD_PTR),
  CALL ("quotactl_fd", EPERM, SYS_quotactl_fd, -1, 0xff, 0, BAD_PTR),
  CALL ("lookup_dcookie", EPERM, SYS_lookup_dcookie, 0, BAD_PTR, 0),
  CALL ("syslog", EPERM, SYS_syslog, 9999, BAD_PTR, 0),
  CALL ("vhangup", EPERM, SYS_vhangup, 0),
  CALL ("nfsservctl", EPERM, SYS_nfsservctl, 0, BAD_PTR, BAD_PTR),
  CALL ("mbind", EPERM, SYS_mbind, 0, 0, BAD_FLAGS, BAD_PTR, 0, BAD_FLAGS),
  CALL ("set_mempolicy", EPERM, SYS_set_mempolicy, BAD_FLAGS, BAD_PTR, 0),
  CALL ("set_mempolicy_home_node", EPERM, SYS_set_mempolicy_home_node, 0, 0,
        BAD_FLAGS, BAD_FLAGS),
  CALL ("migrate_pages", EPERM, SYS_migrate_pages, NO_PID, BAD_FLAGS,
        BAD_PTR, BAD_PTR),
  CALL ("move_pages", EPERM, SYS_move_pages, NO_PID, 1, BAD_PTR, BAD_PTR,
        BAD_PTR, BAD_FLAGS),
  CALL ("fanotify_init", EPERM, SYS_fanotify_init, BAD_FLAGS, 0),
  CALL ("fanotify_mark", EPERM, SYS_fanotify_mark, -1, BAD_FLAGS, 0, -1,
        BAD_PTR),
  CALL ("sethostname", EPERM, SYS_sethostname, BAD_PTR, -1),
  CALL ("setdomainname", EPERM, SYS_setdomainname, BAD_PTR, -1),
#ifdef __x86_64__
  CALL ("iopl", EPERM, SYS_iopl, 4),
  CALL ("ioperm", EPERM, SYS_ioperm, 0, 0, 1),
  CALL ("modify_ldt", EPERM, SYS_modify_ldt, 1, BAD_PTR, 0),
  CALL ("uselib", EPERM, SYS_uselib, BAD_PTR),
  CALL ("ustat", EPERM, SYS_ustat, 0, BAD_PTR),
  CALL ("sysfs", EPERM, SYS_sysfs, 99, 0, 0),
  CALL ("_sysctl", EPERM, SYS__sysctl, BAD_PTR),
  CALL ("create_module", EPERM, SYS_create_module, BAD_PTR, 0),
  CALL ("get_kernel_syms", EPERM, SYS_get_kernel_syms, BAD_PTR),
  CALL ("query_module", EPERM, SYS_query_module, BAD_PTR, 0, BAD_PTR, 0,
        BAD_PTR),
#endif
};

static int
test_denied_syscalls_eperm (void)
{
  /* No controlling terminal, so even an unfiltered vhangup is a no-op. */
  CHECK (setsid () >= 0);
  CHECK (load () == 0);
  return check_calls (denied, ARRAY_SIZE (denied));
}

static int
test_unlisted_syscalls_enosys (void)
{
  static const struct call calls[] = {
    CALL ("syscall(1000)", ENOSYS, 1000),
    CALL ("syscall(-1)", ENOSYS, -1),
    CALL ("clone3", ENOSYS, SYS_clone3, 0, 0),
    CALL ("io_setup", ENOSYS, SYS_io_setup, 1, BAD_PTR),
    CALL ("io_submit", ENOSYS, SYS_io_submit, 0, 0, BAD_PTR),
    CALL ("io_getevents", ENOSYS, SYS_io_getevents, 0, 0, 0, BAD_PTR),
    CALL ("io_destroy", ENOSYS, SYS_io_destroy, 0),
    CALL ("memfd_secret", ENOSYS, SYS_memfd_secret, BAD_FLAGS),
    CALL ("process_mrelease", ENOSYS, SYS_process_mrelease, -1, 0),
#ifdef __x86_64__
    CALL ("set_thread_area", ENOSYS, SYS_set_thread_area, BAD_PTR),
#endif
  };

  CHECK (load () == 0);
  return check_calls (calls, ARRAY_SIZE (calls));
}

/* Allowed syscalls reach the kernel, which rejects the bad arguments. */
static int
test_allowed_syscalls_reach_kernel (void)
{
  static const struct call calls[] = {
    CALL ("getpid", 0, SYS_getpid),
    CALL ("read(-1)", EBADF, SYS_read, -1, 0, 0),
    CALL ("fcntl(-1)", EBADF, SYS_fcntl, -1, F_GETFD),
    CALL ("openat2", EFAULT, SYS_openat2, AT_FDCWD, BAD_PTR, BAD_PTR, 24),
    CALL ("statx", EFAULT, SYS_statx, AT_FDCWD, BAD_PTR, 0, 0, BAD_PTR),
    CALL ("memfd_create", EFAULT, SYS_memfd_create, BAD_PTR, 0),
    CALL ("close_range", EINVAL, SYS_close_range, 0x7fffffffL, 0, 0),
    CALL ("pidfd_open", EINVAL, SYS_pidfd_open, NO_PID, BAD_FLAGS),
    CALL ("seccomp", EINVAL, SYS_seccomp, BAD_FLAGS, 0, 0),
    CALL ("ioctl(TCGETS)", EBADF, SYS_ioctl, -1, TCGETS, BAD_PTR),
    CALL ("personality(0xffffffff)", 0, SYS_personality, 0xffffffffL),
    CALL ("sched_getaffinity", EFAULT, SYS_sched_getaffinity, 0, 128,
          BAD_PTR),
    CALL ("prlimit64", EFAULT, SYS_prlimit64, 0, RLIMIT_NOFILE, 0, BAD_PTR),
  };

  CHECK (load () == 0);
  return check_calls (calls, ARRAY_SIZE (calls));
}

static void *
thread_main (void *arg)
{
  return arg;
}

/* A normal userland still works: fork, threads (glibc tries clone3, gets
   ENOSYS and falls back to clone), pipes, a dynamically linked shell
   pipeline. */
static int
test_userland_runs (void)
{
  static char sh[] = "sh", dash_c[] = "-c",
              script[] = "echo hello | cat >/dev/null && ls / >/dev/null",
              path[] = "PATH=/usr/bin:/bin";
  char *const argv[] = { sh, dash_c, script, NULL };
  char *const envp[] = { path, NULL };
  pthread_t thread;
  void *ret = NULL;
  int status, fds[2];
  char byte;
  pid_t pid;

  CHECK (load () == 0);

  pid = fork ();
  CHECK (pid >= 0);
  if (pid == 0)
    _exit (7);
  CHECK (waitpid (pid, &status, 0) == pid);
  CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 7);

  CHECK (pthread_create (&thread, NULL, thread_main, &byte) == 0);
  CHECK (pthread_join (thread, &ret) == 0);
  CHECK (ret == &byte);

  CHECK (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  CHECK (write (fds[0], "x", 1) == 1);
  CHECK (read (fds[1], &byte, 1) == 1 && byte == 'x');
  close (fds[0]);
  close (fds[1]);

  if (access ("/bin/sh", X_OK) != 0)
    return 0;
  pid = fork ();
  CHECK (pid >= 0);
  if (pid == 0)
    {
      execve ("/bin/sh", argv, envp);
      _exit (127);
    }
  CHECK (waitpid (pid, &status, 0) == pid);
  CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  return 0;
}

/* clone(2) with any CLONE_NEW* flag is EPERM; without, it reaches the
   kernel (CLONE_SIGHAND without CLONE_VM: EINVAL there). */
static int
test_clone_namespace_flags (void)
{
  static const struct call calls[] = {
    CALL ("clone(CLONE_SIGHAND)", EINVAL, SYS_clone, CLONE_SIGHAND),
    CALL ("clone(NEWUSER)", EPERM, SYS_clone,
          CLONE_NEWUSER | CLONE_FS | CLONE_SIGHAND),
    CALL ("clone(NEWNS)", EPERM, SYS_clone,
          CLONE_NEWNS | CLONE_FS | CLONE_SIGHAND),
    CALL ("clone(NEWNET)", EPERM, SYS_clone, CLONE_NEWNET | CLONE_SIGHAND),
    CALL ("clone(NEWPID)", EPERM, SYS_clone, CLONE_NEWPID | CLONE_SIGHAND),
    CALL ("clone(NEWIPC)", EPERM, SYS_clone, CLONE_NEWIPC | CLONE_SIGHAND),
    CALL ("clone(NEWUTS)", EPERM, SYS_clone, CLONE_NEWUTS | CLONE_SIGHAND),
    CALL ("clone(NEWCGROUP)", EPERM, SYS_clone,
          CLONE_NEWCGROUP | CLONE_SIGHAND),
    /* CLONE_NEWTIME's bit is exit-signal bit 7 in clone(2). */
    CALL ("clone(0x80)", EPERM, SYS_clone, 0x80 | CLONE_SIGHAND),
    CALL ("clone(NEWUSER|1<<32)", EPERM, SYS_clone,
          CLONE_NEWUSER | CLONE_FS | CLONE_SIGHAND | HIGH_BIT),
    CALL ("clone(NEWNET|0xffffffff<<32)", EPERM, SYS_clone,
          CLONE_NEWNET | CLONE_SIGHAND | (long) 0xffffffff00000000UL),
  };
  int status;
  long pid;

  CHECK (load () == 0);
  if (check_calls (calls, ARRAY_SIZE (calls)) < 0)
    return -1;

  /* A plain fork-like clone works. */
  pid = syscall (SYS_clone, (long) SIGCHLD, 0L, 0L, 0L, 0L);
  CHECK (pid >= 0);
  if (pid == 0)
    _exit (0);
  CHECK (waitpid ((pid_t) pid, &status, 0) == pid);
  CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  return 0;
}

static int
test_socket_families (void)
{
  static const struct call calls[] = {
    /* Allowed: the kernel rejects the type. */
    CALL ("AF_UNIX", EINVAL, SYS_socket, AF_UNIX, BAD_SOCK_TYPE, 0),
    CALL ("AF_INET", EINVAL, SYS_socket, AF_INET, BAD_SOCK_TYPE, 0),
    CALL ("AF_INET6", EINVAL, SYS_socket, AF_INET6, BAD_SOCK_TYPE, 0),
    CALL ("AF_NETLINK/ROUTE", EINVAL, SYS_socket, AF_NETLINK, BAD_SOCK_TYPE,
          NETLINK_ROUTE),
    /* The kernel reads ints: upper halves do not matter either way. */
    CALL ("AF_INET|1<<32", EINVAL, SYS_socket, AF_INET | HIGH_BIT,
          BAD_SOCK_TYPE, 0),
    CALL ("AF_NETLINK/ROUTE|1<<32", EINVAL, SYS_socket, AF_NETLINK,
          BAD_SOCK_TYPE, NETLINK_ROUTE | HIGH_BIT),
    CALL ("AF_ALG|1<<32", EPERM, SYS_socket, AF_ALG | HIGH_BIT, BAD_SOCK_TYPE,
          0),
    CALL ("AF_NETLINK|1<<32/NETFILTER", EPERM, SYS_socket,
          AF_NETLINK | HIGH_BIT, BAD_SOCK_TYPE, NETLINK_NETFILTER),
    /* Denied families and netlink protocols. */
    CALL ("AF_UNSPEC", EPERM, SYS_socket, AF_UNSPEC, BAD_SOCK_TYPE, 0),
    CALL ("AF_ALG", EPERM, SYS_socket, AF_ALG, BAD_SOCK_TYPE, 0),
    CALL ("AF_PACKET", EPERM, SYS_socket, AF_PACKET, BAD_SOCK_TYPE, 0),
    CALL ("AF_VSOCK", EPERM, SYS_socket, AF_VSOCK, BAD_SOCK_TYPE, 0),
    CALL ("AF_KEY", EPERM, SYS_socket, AF_KEY, BAD_SOCK_TYPE, 0),
    CALL ("AF_BLUETOOTH", EPERM, SYS_socket, AF_BLUETOOTH, BAD_SOCK_TYPE, 0),
    CALL ("AF_NETLINK/NETFILTER", EPERM, SYS_socket, AF_NETLINK,
          BAD_SOCK_TYPE, NETLINK_NETFILTER),
    CALL ("AF_NETLINK/XFRM", EPERM, SYS_socket, AF_NETLINK, BAD_SOCK_TYPE,
          NETLINK_XFRM),
    CALL ("family 1000", EPERM, SYS_socket, 1000, BAD_SOCK_TYPE, 0),
    CALL ("family -1", EPERM, SYS_socket, -1, BAD_SOCK_TYPE, 0),
    CALL ("socketpair(AF_UNIX)", EINVAL, SYS_socketpair, AF_UNIX,
          BAD_SOCK_TYPE, 0, BAD_PTR),
    CALL ("socketpair(AF_INET)", EPERM, SYS_socketpair, AF_INET,
          BAD_SOCK_TYPE, 0, BAD_PTR),
    CALL ("socketpair(AF_NETLINK)", EPERM, SYS_socketpair, AF_NETLINK,
          BAD_SOCK_TYPE, 0, BAD_PTR),
  };
  int fd, fds[2];

  CHECK (load () == 0);
  if (check_calls (calls, ARRAY_SIZE (calls)) < 0)
    return -1;

  /* Every family and every netlink protocol below 64. */
  for (long family = 0; family < 64; family++)
    {
      long arg[6] = { family, BAD_SOCK_TYPE, 0 };
      bool allowed = family == AF_UNIX || family == AF_INET
                     || family == AF_INET6 || family == AF_NETLINK;
      CHECK (check_value ("socket family", SYS_socket, arg,
                          (unsigned long) family, allowed ? EINVAL : EPERM)
             == 0);
    }
  for (long protocol = 0; protocol < 64; protocol++)
    {
      long arg[6] = { AF_NETLINK, BAD_SOCK_TYPE, protocol };
      CHECK (check_value ("netlink protocol", SYS_socket, arg,
                          (unsigned long) protocol,
                          protocol == NETLINK_ROUTE ? EINVAL : EPERM)
             == 0);
    }

  /* Real sockets of the allowed kinds. */
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK (fd >= 0);
  close (fd);
  fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  CHECK (fd >= 0);
  close (fd);
  fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  CHECK (fd >= 0);
  close (fd);
  CHECK (socketpair (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, fds) == 0);
  close (fds[0]);
  close (fds[1]);
  return 0;
}

static bool
is_denied_ioctl (uint32_t request)
{
  return request == TIOCSTI || request == TIOCLINUX || request == TIOCSETD;
}

/* Denied requests are recognised by their low 32 bits whatever the upper
   half holds (CVE-2019-10063); everything else reaches the kernel (EBADF
   on fd -1). */
static int
test_ioctl_requests (void)
{
  static const struct call calls[] = {
    CALL ("TIOCSTI", EPERM, SYS_ioctl, -1, TIOCSTI, BAD_PTR),
    CALL ("TIOCSTI|1<<32", EPERM, SYS_ioctl, -1, TIOCSTI | HIGH_BIT, BAD_PTR),
    CALL ("TIOCSTI|0xffffffff<<32", EPERM, SYS_ioctl, -1,
          TIOCSTI | (long) 0xffffffff00000000UL, BAD_PTR),
    CALL ("TIOCLINUX", EPERM, SYS_ioctl, -1, TIOCLINUX, BAD_PTR),
    CALL ("TIOCLINUX|1<<32", EPERM, SYS_ioctl, -1, TIOCLINUX | HIGH_BIT,
          BAD_PTR),
    CALL ("TIOCSETD", EPERM, SYS_ioctl, -1, TIOCSETD, BAD_PTR),
    CALL ("TCGETS", EBADF, SYS_ioctl, -1, TCGETS, BAD_PTR),
    CALL ("TIOCGWINSZ", EBADF, SYS_ioctl, -1, TIOCGWINSZ, BAD_PTR),
    CALL ("FIONREAD", EBADF, SYS_ioctl, -1, FIONREAD, BAD_PTR),
    CALL ("TIOCSTI|1<<31", EBADF, SYS_ioctl, -1, TIOCSTI | 0x80000000L,
          BAD_PTR),
  };
  uint64_t state = 1;

  CHECK (load () == 0);
  if (check_calls (calls, ARRAY_SIZE (calls)) < 0)
    return -1;

  /* The whole 'T' range, then random 64-bit requests (some forced onto
     the denied low halves). */
  for (long request = 0x5400; request < 0x5500; request++)
    {
      long arg[6] = { -1, request, BAD_PTR };
      CHECK (check_value ("ioctl", SYS_ioctl, arg, (unsigned long) request,
                          is_denied_ioctl ((uint32_t) request) ? EPERM : EBADF)
             == 0);
    }
  for (int i = 0; i < 4096; i++)
    {
      uint64_t request = next_random (&state);
      long arg[6] = { -1, 0, BAD_PTR };

      if (i % 8 == 0)
        request = (request & ~UINT64_C (0xffffffff)) | TIOCSTI;
      arg[1] = (long) request;
      CHECK (check_value ("ioctl", SYS_ioctl, arg, (unsigned long) request,
                          is_denied_ioctl ((uint32_t) request) ? EPERM : EBADF)
             == 0);
    }
  return 0;
}

static bool
is_allowed_persona (uint32_t persona)
{
  return persona == PER_LINUX || persona == PER_LINUX32 || persona == UNAME26
         || persona == (PER_LINUX32 | UNAME26) || persona == 0xffffffff;
}

/* personality(2) only for Docker's list; the kernel reads an unsigned int,
   so the upper half does not matter. Allowed calls change this (throwaway)
   test process only. */
static int
test_personality_values (void)
{
  static const struct call calls[] = {
    CALL ("query", 0, SYS_personality, 0xffffffffL),
    CALL ("PER_LINUX", 0, SYS_personality, PER_LINUX),
    CALL ("PER_LINUX32", 0, SYS_personality, PER_LINUX32),
    CALL ("UNAME26", 0, SYS_personality, UNAME26),
    CALL ("PER_LINUX32|UNAME26", 0, SYS_personality, PER_LINUX32 | UNAME26),
    CALL ("PER_LINUX|1<<32", 0, SYS_personality, HIGH_BIT),
    CALL ("READ_IMPLIES_EXEC", EPERM, SYS_personality, READ_IMPLIES_EXEC),
    CALL ("READ_IMPLIES_EXEC|1<<32", EPERM, SYS_personality,
          READ_IMPLIES_EXEC | HIGH_BIT),
    CALL ("ADDR_NO_RANDOMIZE", EPERM, SYS_personality, ADDR_NO_RANDOMIZE),
    CALL ("0xfffffffe", EPERM, SYS_personality, 0xfffffffeL),
    CALL ("0x7fffffff", EPERM, SYS_personality, 0x7fffffffL),
  };
  static const uint32_t bases[]
      = { PER_LINUX, PER_LINUX32, UNAME26, PER_LINUX32 | UNAME26 };
  uint64_t state = 2;

  CHECK (load () == 0);
  if (check_calls (calls, ARRAY_SIZE (calls)) < 0)
    return -1;

  /* Each allowed persona with one more bit set. */
  for (size_t i = 0; i < ARRAY_SIZE (bases); i++)
    for (int bit = 0; bit < 32; bit++)
      {
        uint32_t persona = bases[i] | (UINT32_C (1) << bit);
        long arg[6] = { (long) persona };

        CHECK (check_value ("personality", SYS_personality, arg, persona,
                            is_allowed_persona (persona) ? 0 : EPERM)
               == 0);
      }
  for (int i = 0; i < 1024; i++)
    {
      uint64_t persona = next_random (&state);
      long arg[6] = { (long) persona };

      CHECK (check_value ("personality", SYS_personality, arg, persona,
                          is_allowed_persona ((uint32_t) persona) ? 0 : EPERM)
             == 0);
    }
  return 0;
}

/* Run `fn` in a child, optionally under the filter; return its wait
   status. */
static int
run_child (void (*fn) (void), bool filtered)
{
  int status;
  pid_t pid;

  fflush (NULL);
  pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      no_core_dumps ();
      /* Let a fault kill the child even under ASan's handlers. */
      signal (SIGSEGV, SIG_DFL);
      signal (SIGBUS, SIG_DFL);
      if (filtered && load () < 0)
        _exit (3);
      fn ();
      _exit (0);
    }
  if (waitpid (pid, &status, 0) != pid)
    return -1;
  return status;
}

#ifdef __x86_64__
static void
call_x32_getpid (void)
{
  syscall (SYS_getpid | X32_BIT);
}

static void
call_int80_getpid (void)
{
  long ret;

  /* getpid is 20 in the i386 table. */
  __asm__ volatile ("int $0x80"
                    : "=a"(ret)
                    : "a"(20L)
                    : "memory", "cc", "r8", "r9", "r10", "r11");
  (void) ret;
}
#endif

/* x32 syscall numbers (nr | 0x40000000): libseccomp's x86_64 filter sends
   them to the bad-arch action, KILL_PROCESS. */
static int
test_x32_syscall_kills (void)
{
#ifdef __x86_64__
  int status = run_child (call_x32_getpid, true);

  CHECK (status != -1);
  CHECK (WIFSIGNALED (status));
  CHECK (WTERMSIG (status) == SIGSYS);
  return 0;
#else
  return 77;
#endif
}

/* The 32-bit ABI (int 0x80, AUDIT_ARCH_I386): killed by SIGSYS. Skipped
   where int 0x80 does not work at all (no IA32 emulation: SIGSEGV before
   seccomp runs); test_foreign_arch_emulated covers the filter there. */
static int
test_int80_kills (void)
{
#ifdef __x86_64__
  int status = run_child (call_int80_getpid, false);

  CHECK (status != -1);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      printf ("# int 0x80 unusable here (signal %d)\n",
              WIFSIGNALED (status) ? WTERMSIG (status) : -1);
      return 77;
    }
  status = run_child (call_int80_getpid, true);
  CHECK (status != -1);
  CHECK (WIFSIGNALED (status));
  CHECK (WTERMSIG (status) == SIGSYS);
  return 0;
#else
  return 77;
#endif
}

static int
test_foreign_arch_emulated (void)
{
#ifdef NATIVE_ARCH
  const uint32_t kill = SECCOMP_RET_KILL_PROCESS;
  const uint32_t enosys = SECCOMP_RET_ERRNO | ENOSYS;
  const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;

  CHECK (build () == 0);
  CHECK (emulate (NATIVE_ARCH, SYS_getpid, 0, 0) == SECCOMP_RET_ALLOW);
  CHECK (emulate (NATIVE_ARCH, SYS_mount, 0, 0) == eperm);
  CHECK (emulate (NATIVE_ARCH, 1000, 0, 0) == enosys);
  CHECK (emulate (NATIVE_ARCH, SYS_ioctl, 0,
                  TIOCSTI | UINT64_C (0xdeadbeef00000000))
         == eperm);
  CHECK (emulate (AUDIT_ARCH_I386, 20, 0, 0) == kill);
  CHECK (emulate (AUDIT_ARCH_ARM, 20, 0, 0) == kill);
  CHECK (emulate (NATIVE_ARCH == AUDIT_ARCH_X86_64 ? AUDIT_ARCH_AARCH64
                                                   : AUDIT_ARCH_X86_64,
                  SYS_getpid, 0, 0)
         == kill);
#ifdef __x86_64__
  CHECK (emulate (NATIVE_ARCH, SYS_getpid | X32_BIT, 0, 0) == kill);
  CHECK (emulate (NATIVE_ARCH, 0x7fffffff, 0, 0) == kill);
  /* -1 is what a tracer writes to skip a syscall: default action. */
  CHECK (emulate (NATIVE_ARCH, 0xffffffff, 0, 0) == enosys);
#endif
  return 0;
#else
  return 77;
#endif
}

/* Every native syscall number with zero arguments gets one of the three
   policy actions: nothing falls off the program or hits an unexpected
   action. */
static int
test_every_number_has_an_action (void)
{
#ifdef NATIVE_ARCH
  CHECK (build () == 0);
  for (uint32_t nr = 0; nr < 1024; nr++)
    {
      uint32_t action = emulate (NATIVE_ARCH, nr, 0, 0);
      if (action != SECCOMP_RET_ALLOW
          && action != (SECCOMP_RET_ERRNO | EPERM)
          && action != (SECCOMP_RET_ERRNO | ENOSYS))
        {
          fprintf (stderr, "#   syscall %u: action %#x\n", nr, action);
          return -1;
        }
    }
  return 0;
#else
  return 77;
#endif
}

int
main (void)
{
  RUN (test_program_shape);
  RUN (test_denied_syscalls_eperm);
  RUN (test_unlisted_syscalls_enosys);
  RUN (test_allowed_syscalls_reach_kernel);
  RUN (test_userland_runs);
  RUN (test_clone_namespace_flags);
  RUN (test_socket_families);
  RUN (test_ioctl_requests);
  RUN (test_personality_values);
  RUN (test_x32_syscall_kills);
  RUN (test_int80_kills);
  RUN (test_foreign_arch_emulated);
  RUN (test_every_number_has_an_action);
  return tap_done ();
}
