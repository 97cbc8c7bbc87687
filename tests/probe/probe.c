/* sbx test probe: a static binary run inside a sandbox by the integration
 * tests (the idea of crun's tests/init.c and bubblewrap's
 * tests/try-syscall.c).
 *
 *   probe syscalls        run every syscall probe, print "NAME RESULT" lines
 *   probe syscall NAME    run one probe, print its line
 *   probe expected        print "NAME EXPECTED" (the result inside sbx)
 *   probe int80           getpid through the 32-bit `int $0x80` ABI
 *
 * and single checks for the hostile-code tests (each prints one line per
 * result, "WHAT RESULT", RESULT as below):
 *
 *   probe fds             the open fds (but the one listing them): "N TARGET"
 *   probe caps            capabilities, no_new_privs, seccomp mode, seen
 *                         through the syscalls rather than /proc
 *   probe open PATH MODE  open PATH with MODE r, w, rw, creat or path
 *   probe readlink PATH   readlink PATH: the target or the errno
 *   probe mknod PATH      mknod a character device (1:3, like /dev/null)
 *   probe kill PID [SIG]  kill(PID, SIG) (default 0: only the permission)
 *   probe connect HOST PORT  TCP connect to an IPv4/IPv6 literal (5 s)
 *   probe ifaces          the network interfaces, one name a line
 *   probe tiocsti         TIOCSTI on stdio and on a pty opened here
 *   probe siblings        signal and ptrace a child of our own
 *   probe forkbomb        fork until refused; report the count and errno
 *   probe memhog MB       allocate and touch MB MiB, reporting progress
 *   probe fill PATH       write zeros to PATH until refused; errno and bytes
 *
 * RESULT is `ok` (the call succeeded), an errno name (EPERM, ENOSYS, EBADF,
 * EFAULT, EINVAL...), or a signal name (SIGSYS) if the probe was killed.
 *
 * Every probe passes arguments that make the kernel refuse the call even
 * for root outside any sandbox (a bad fd, an unmapped pointer, an invalid
 * flag combination), so an ALLOWED call fails harmlessly with EBADF, EFAULT,
 * EINVAL... while a BLOCKED one fails with the filter's EPERM or ENOSYS. The
 * probe must be safe to run anywhere: it never mounts, reboots, loads
 * modules or sets the clock. Two probes can succeed outside, harmlessly:
 * personality(READ_IMPLIES_EXEC) (it only changes the throwaway child it
 * runs in) and vhangup (the child first leaves its session, so there is no
 * terminal to hang up).
 *
 * Each probe runs in a forked child, so a probe killed by the filter (x32)
 * or changing its own process (personality) cannot disturb the others.
 *
 * Exit status: 0; 2 if the probe program itself is misused (unknown
 * subcommand or probe name); 1 if stdout could not be written.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

/* An address below vm.mmap_min_addr: never mapped, so every access by the
   kernel fails with EFAULT. */
#define BAD_PTR 8L
/* A socket type with a bit outside SOCK_TYPE_MASK and the SOCK_* flags:
   socket() and socketpair() reject it (EINVAL) before looking at the
   family, so an allowed family cannot actually create anything. */
#define BAD_SOCK_TYPE 0x10L
/* Flags that no syscall accepts. */
#define BAD_FLAGS (-1L)
/* A pid above PID_MAX_LIMIT (4M): never exists. */
#define NO_PID 0x7fffffffL
#define HIGH_BIT (1L << 32)

/* Child exit status meaning "the probe's own setup failed". */
#define SETUP_FAILED 255

enum probe_flags
{
  PROBE_SETSID = 1 << 0,     /* leave the session first: no controlling tty */
  PROBE_INT_RESULT = 1 << 1, /* the kernel returns an int in a long register */
};

struct syscall_probe
{
  const char *name;
  const char *expect; /* result inside an sbx sandbox */
  long nr;
  long arg[6];
  unsigned int flags;
};

/* Arguments not listed are 0. */
/* clang-format off */
#define PROBE(name, expect, nr, ...)                                           \
  { name, expect, nr, { __VA_ARGS__ }, 0 }
#define PROBE_WITH(flags, name, expect, nr, ...)                               \
  { name, expect, nr, { __VA_ARGS__ }, flags }
/* clang-format on */

/*============================ The probes ================================ */

static const struct syscall_probe probes[] = {
  /* Allowed controls: the filter lets them through to the kernel. */
  PROBE ("getpid", "ok", SYS_getpid, 0),
  PROBE ("read", "EBADF", SYS_read, -1, 0, 0),
  /* Faults on copying `how` in. */
  PROBE ("openat2", "EFAULT", SYS_openat2, AT_FDCWD, BAD_PTR, BAD_PTR, 24),
  PROBE ("memfd_create", "EFAULT", SYS_memfd_create, BAD_PTR, 0),
  PROBE ("close_range", "EINVAL", SYS_close_range, 0x7fffffffL, 0, 0),
  PROBE ("pidfd_open", "EINVAL", SYS_pidfd_open, NO_PID, BAD_FLAGS),
  PROBE ("seccomp", "EINVAL", SYS_seccomp, BAD_FLAGS, 0, 0),
  PROBE ("ioctl(TCGETS)", "EBADF", SYS_ioctl, -1, TCGETS, BAD_PTR),
  /* CLONE_SIGHAND without CLONE_VM is EINVAL in copy_process. */
  PROBE ("clone(CLONE_SIGHAND)", "EINVAL", SYS_clone, CLONE_SIGHAND),
  PROBE ("personality(0xffffffff)", "ok", SYS_personality, 0xffffffffL),
  PROBE ("socket(AF_UNIX)", "EINVAL", SYS_socket, AF_UNIX, BAD_SOCK_TYPE, 0),
  PROBE ("socket(AF_INET)", "EINVAL", SYS_socket, AF_INET, BAD_SOCK_TYPE, 0),
  PROBE ("socket(AF_INET6)", "EINVAL", SYS_socket, AF_INET6, BAD_SOCK_TYPE, 0),
  PROBE ("socket(AF_NETLINK,NETLINK_ROUTE)", "EINVAL", SYS_socket, AF_NETLINK,
         BAD_SOCK_TYPE, NETLINK_ROUTE),
  /* The kernel only reads the low 32 bits of the family. */
  PROBE ("socket(AF_INET|1<<32)", "EINVAL", SYS_socket, AF_INET | HIGH_BIT,
         BAD_SOCK_TYPE, 0),
  PROBE ("socketpair(AF_UNIX)", "EINVAL", SYS_socketpair, AF_UNIX,
         BAD_SOCK_TYPE, 0, BAD_PTR),

  /* Namespaces: clone with a CLONE_NEW* flag is EPERM. Outside, the extra
     flags make copy_process refuse: CLONE_FS with NEWNS or NEWUSER, and
     CLONE_SIGHAND without CLONE_VM. */
  PROBE ("clone(CLONE_NEWUSER)", "EPERM", SYS_clone,
         CLONE_NEWUSER | CLONE_FS | CLONE_SIGHAND),
  PROBE ("clone(CLONE_NEWNS)", "EPERM", SYS_clone,
         CLONE_NEWNS | CLONE_FS | CLONE_SIGHAND),
  PROBE ("clone(CLONE_NEWNET)", "EPERM", SYS_clone,
         CLONE_NEWNET | CLONE_SIGHAND),
  PROBE ("clone(CLONE_NEWPID)", "EPERM", SYS_clone,
         CLONE_NEWPID | CLONE_SIGHAND),
  PROBE ("clone(CLONE_NEWIPC)", "EPERM", SYS_clone,
         CLONE_NEWIPC | CLONE_SIGHAND),
  PROBE ("clone(CLONE_NEWUTS)", "EPERM", SYS_clone,
         CLONE_NEWUTS | CLONE_SIGHAND),
  PROBE ("clone(CLONE_NEWCGROUP)", "EPERM", SYS_clone,
         CLONE_NEWCGROUP | CLONE_SIGHAND),
  PROBE ("clone(CLONE_NEWUSER|1<<32)", "EPERM", SYS_clone,
         CLONE_NEWUSER | CLONE_FS | CLONE_SIGHAND | HIGH_BIT),
  /* Flags behind a pointer: ENOSYS so libc falls back to clone. Outside,
     a size below CLONE_ARGS_SIZE_VER0 is EINVAL. */
  PROBE ("clone3", "ENOSYS", SYS_clone3, 0, 0),
  /* CLONE_VFORK is not an unshare flag: EINVAL outside. */
  PROBE ("unshare(CLONE_NEWUSER)", "EPERM", SYS_unshare,
         CLONE_NEWUSER | CLONE_VFORK),
  PROBE ("setns", "EPERM", SYS_setns, -1, 0),

  /* Socket families. */
  PROBE ("socket(AF_ALG)", "EPERM", SYS_socket, AF_ALG, BAD_SOCK_TYPE, 0),
  PROBE ("socket(AF_ALG|1<<32)", "EPERM", SYS_socket, AF_ALG | HIGH_BIT,
         BAD_SOCK_TYPE, 0),
  PROBE ("socket(AF_PACKET)", "EPERM", SYS_socket, AF_PACKET, BAD_SOCK_TYPE,
         0),
  PROBE ("socket(AF_VSOCK)", "EPERM", SYS_socket, AF_VSOCK, BAD_SOCK_TYPE, 0),
  PROBE ("socket(AF_KEY)", "EPERM", SYS_socket, AF_KEY, BAD_SOCK_TYPE, 0),
  PROBE ("socket(AF_NETLINK,NETLINK_NETFILTER)", "EPERM", SYS_socket,
         AF_NETLINK, BAD_SOCK_TYPE, NETLINK_NETFILTER),
  PROBE ("socketpair(AF_INET)", "EPERM", SYS_socketpair, AF_INET,
         BAD_SOCK_TYPE, 0, BAD_PTR),

  /* Terminal injection, on a bad fd (EBADF outside). */
  PROBE ("ioctl(TIOCSTI)", "EPERM", SYS_ioctl, -1, TIOCSTI, BAD_PTR),
  /* CVE-2019-10063: the kernel ignores the upper half of the request. */
  PROBE ("ioctl(TIOCSTI|1<<32)", "EPERM", SYS_ioctl, -1, TIOCSTI | HIGH_BIT,
         BAD_PTR),
  PROBE ("ioctl(TIOCLINUX)", "EPERM", SYS_ioctl, -1, TIOCLINUX, BAD_PTR),
  PROBE ("ioctl(TIOCSETD)", "EPERM", SYS_ioctl, -1, TIOCSETD, BAD_PTR),

  /* Personas: only Docker's list. Succeeds outside, in the throwaway
     child only. */
  PROBE ("personality(READ_IMPLIES_EXEC)", "EPERM", SYS_personality,
         READ_IMPLIES_EXEC),

  /* Default action: ENOSYS. */
  PROBE ("syscall(1000)", "ENOSYS", 1000, 0),
  PROBE ("io_setup", "ENOSYS", SYS_io_setup, 1, BAD_PTR),
  PROBE ("memfd_secret", "ENOSYS", SYS_memfd_secret, BAD_FLAGS),
  PROBE ("process_mrelease", "ENOSYS", SYS_process_mrelease, -1, 0),
#ifdef __x86_64__
  /* x32 ABI numbers: libseccomp sends them to the bad-arch action. */
  PROBE ("x32(getpid)", "SIGSYS", SYS_getpid | 0x40000000L, 0),
#endif

  /* Mounts. */
  PROBE ("mount", "EPERM", SYS_mount, BAD_PTR, BAD_PTR, BAD_PTR, 0, BAD_PTR),
  PROBE ("umount2", "EPERM", SYS_umount2, BAD_PTR, BAD_FLAGS),
  PROBE ("pivot_root", "EPERM", SYS_pivot_root, BAD_PTR, BAD_PTR),
  PROBE ("chroot", "EPERM", SYS_chroot, BAD_PTR),
  PROBE ("fsopen", "EPERM", SYS_fsopen, BAD_PTR, BAD_FLAGS),
  PROBE ("fsconfig", "EPERM", SYS_fsconfig, -1, BAD_FLAGS, BAD_PTR, BAD_PTR,
         -1),
  PROBE ("fsmount", "EPERM", SYS_fsmount, -1, BAD_FLAGS, BAD_FLAGS),
  PROBE ("fspick", "EPERM", SYS_fspick, -1, BAD_PTR, BAD_FLAGS),
  PROBE ("move_mount", "EPERM", SYS_move_mount, -1, BAD_PTR, -1, BAD_PTR,
         BAD_FLAGS),
  PROBE ("open_tree", "EPERM", SYS_open_tree, -1, BAD_PTR, BAD_FLAGS),
  PROBE ("mount_setattr", "EPERM", SYS_mount_setattr, -1, BAD_PTR, BAD_FLAGS,
         BAD_PTR, 0),

  /* Keyring. */
  PROBE ("keyctl", "EPERM", SYS_keyctl, 0x7fffffffL),
  PROBE ("add_key", "EPERM", SYS_add_key, BAD_PTR, BAD_PTR, BAD_PTR, 0, 0),
  PROBE ("request_key", "EPERM", SYS_request_key, BAD_PTR, BAD_PTR, BAD_PTR,
         0),

  /* Big kernel surfaces. */
  PROBE ("bpf", "EPERM", SYS_bpf, BAD_FLAGS, 0, 0),
  PROBE ("perf_event_open", "EPERM", SYS_perf_event_open, BAD_PTR, 0, -1, -1,
         BAD_FLAGS),
  PROBE ("userfaultfd", "EPERM", SYS_userfaultfd, BAD_FLAGS),
  PROBE ("io_uring_setup", "EPERM", SYS_io_uring_setup, 0, BAD_PTR),
  PROBE ("io_uring_enter", "EPERM", SYS_io_uring_enter, -1, 0, 0, BAD_FLAGS, 0,
         0),
  PROBE ("io_uring_register", "EPERM", SYS_io_uring_register, -1, BAD_FLAGS, 0,
         0),

  /* Other processes. */
  PROBE ("ptrace", "EPERM", SYS_ptrace, -1, NO_PID, 0, 0),
  PROBE ("process_vm_readv", "EPERM", SYS_process_vm_readv, NO_PID, 0, 0, 0, 0,
         BAD_FLAGS),
  PROBE ("process_vm_writev", "EPERM", SYS_process_vm_writev, NO_PID, 0, 0, 0,
         0, BAD_FLAGS),
  PROBE ("kcmp", "EPERM", SYS_kcmp, NO_PID, NO_PID, 0, 0, 0),
  PROBE ("pidfd_getfd", "EPERM", SYS_pidfd_getfd, -1, 0, 0),
  PROBE ("process_madvise", "EPERM", SYS_process_madvise, -1, 0, 0, 0,
         BAD_FLAGS),

  /* Kernel code and boot: bad flags / segment counts, wrong magic. */
  PROBE ("kexec_load", "EPERM", SYS_kexec_load, 0, BAD_FLAGS, 0, BAD_FLAGS),
  PROBE ("kexec_file_load", "EPERM", SYS_kexec_file_load, -1, -1, 0, 0,
         BAD_FLAGS),
  PROBE ("init_module", "EPERM", SYS_init_module, BAD_PTR, 0, BAD_PTR),
  PROBE ("finit_module", "EPERM", SYS_finit_module, -1, BAD_PTR, BAD_FLAGS),
  PROBE ("delete_module", "EPERM", SYS_delete_module, BAD_PTR, 0),
  PROBE ("reboot", "EPERM", SYS_reboot, 0, 0, 0, 0),
#ifdef SYS_create_module
  PROBE ("create_module", "EPERM", SYS_create_module, BAD_PTR, 0),
  PROBE ("get_kernel_syms", "EPERM", SYS_get_kernel_syms, BAD_PTR),
  PROBE ("query_module", "EPERM", SYS_query_module, BAD_PTR, 0, BAD_PTR, 0,
         BAD_PTR),
#endif

  /* Time. */
  PROBE ("settimeofday", "EPERM", SYS_settimeofday, BAD_PTR, BAD_PTR),
  PROBE ("clock_settime", "EPERM", SYS_clock_settime, CLOCK_REALTIME, BAD_PTR),
  PROBE ("clock_adjtime", "EPERM", SYS_clock_adjtime, CLOCK_REALTIME, BAD_PTR),
  PROBE ("adjtimex", "EPERM", SYS_adjtimex, BAD_PTR),

  /* Host-global state. */
  PROBE ("swapon", "EPERM", SYS_swapon, BAD_PTR, BAD_FLAGS),
  PROBE ("swapoff", "EPERM", SYS_swapoff, BAD_PTR),
  /* Not NULL: acct(NULL) would switch accounting off. */
  PROBE ("acct", "EPERM", SYS_acct, BAD_PTR),
  /* Type 0xff >= MAXQUOTAS. */
  PROBE ("quotactl", "EPERM", SYS_quotactl, 0xff, BAD_PTR, 0, BAD_PTR),
  PROBE ("quotactl_fd", "EPERM", SYS_quotactl_fd, -1, 0xff, 0, BAD_PTR),
  /* An unknown action (not SYSLOG_ACTION_CLEAR). */
  PROBE ("syslog", "EPERM", SYS_syslog, 9999, BAD_PTR, 0),
  PROBE_WITH (PROBE_SETSID, "vhangup", "EPERM", SYS_vhangup, 0),
  PROBE ("sethostname", "EPERM", SYS_sethostname, BAD_PTR, -1),
  PROBE ("setdomainname", "EPERM", SYS_setdomainname, BAD_PTR, -1),
  PROBE ("open_by_handle_at", "EPERM", SYS_open_by_handle_at, -1, BAD_PTR, 0),
  PROBE ("name_to_handle_at", "EPERM", SYS_name_to_handle_at, -1, BAD_PTR,
         BAD_PTR, BAD_PTR, BAD_FLAGS),
  PROBE ("fanotify_init", "EPERM", SYS_fanotify_init, BAD_FLAGS, 0),
  PROBE ("fanotify_mark", "EPERM", SYS_fanotify_mark, -1, BAD_FLAGS, 0, -1,
         BAD_PTR),

  /* NUMA. */
  PROBE ("mbind", "EPERM", SYS_mbind, 0, 0, BAD_FLAGS, BAD_PTR, 0, BAD_FLAGS),
  PROBE ("set_mempolicy", "EPERM", SYS_set_mempolicy, BAD_FLAGS, BAD_PTR, 0),
  PROBE ("set_mempolicy_home_node", "EPERM", SYS_set_mempolicy_home_node, 0, 0,
         BAD_FLAGS, BAD_FLAGS),
  PROBE ("migrate_pages", "EPERM", SYS_migrate_pages, NO_PID, BAD_FLAGS,
         BAD_PTR, BAD_PTR),
  PROBE ("move_pages", "EPERM", SYS_move_pages, NO_PID, 1, BAD_PTR, BAD_PTR,
         BAD_PTR, BAD_FLAGS),

/* Hardware, x86 legacy, obsolete. */
#ifdef SYS_iopl
  PROBE ("iopl", "EPERM", SYS_iopl, 4),           /* levels are 0-3 */
  PROBE ("ioperm", "EPERM", SYS_ioperm, 0, 0, 1), /* empty range */
#endif
#ifdef SYS_modify_ldt
  /* A write of 0 bytes: EINVAL. modify_ldt returns (unsigned int) -EINVAL,
     which syscall() cannot see as an error. */
  PROBE_WITH (PROBE_INT_RESULT, "modify_ldt", "EPERM", SYS_modify_ldt, 1,
              BAD_PTR, 0),
#endif
#ifdef SYS_uselib
  PROBE ("uselib", "EPERM", SYS_uselib, BAD_PTR),
#endif
#ifdef SYS_ustat
  PROBE ("ustat", "EPERM", SYS_ustat, 0, BAD_PTR),
#endif
#ifdef SYS_sysfs
  PROBE ("sysfs", "EPERM", SYS_sysfs, 99, 0, 0),
#endif
#ifdef SYS__sysctl
  PROBE ("_sysctl", "EPERM", SYS__sysctl, BAD_PTR),
#endif
  PROBE ("nfsservctl", "EPERM", SYS_nfsservctl, 0, BAD_PTR, BAD_PTR),
  PROBE ("lookup_dcookie", "EPERM", SYS_lookup_dcookie, 0, BAD_PTR, 0),
};

/*============================ Running ================================== */

static void
no_core_dumps (void)
{
  const struct rlimit zero = { 0, 0 };
  /* A probe killed by SIGSYS must not litter the sandbox with cores. */
  (void) setrlimit (RLIMIT_CORE, &zero);
}

static void
format_status (int status, char *buf, size_t size)
{
  if (WIFEXITED (status))
    {
      int code = WEXITSTATUS (status);
      const char *name = code ? strerrorname_np (code) : "ok";

      if (code == SETUP_FAILED)
        snprintf (buf, size, "SETUP_FAILED");
      else if (name != NULL)
        snprintf (buf, size, "%s", name);
      else
        snprintf (buf, size, "E%d", code);
    }
  else if (WIFSIGNALED (status))
    {
      const char *name = sigabbrev_np (WTERMSIG (status));
      if (name != NULL)
        snprintf (buf, size, "SIG%s", name);
      else
        snprintf (buf, size, "SIG%d", WTERMSIG (status));
    }
  else
    snprintf (buf, size, "STATUS%#x", status);
}

/* Child side: the raw syscall, reported as the exit status (0 = success,
   otherwise the errno). */
static __attribute__ ((noreturn)) void
probe_child (const struct syscall_probe *p)
{
  pid_t self;
  long rc;

  no_core_dumps ();
  if ((p->flags & PROBE_SETSID) && setsid () < 0)
    _exit (SETUP_FAILED);
  self = getpid ();
  errno = 0;
  rc = syscall (p->nr, p->arg[0], p->arg[1], p->arg[2], p->arg[3], p->arg[4],
                p->arg[5]);
  /* If a clone probe unexpectedly created a process, that copy stops
     here. */
  if (getpid () != self)
    _exit (0);
  if ((p->flags & PROBE_INT_RESULT) && rc != -1 && (int) rc < 0
      && (int) rc > -4096)
    {
      errno = -(int) rc;
      rc = -1;
    }
  _exit (rc == -1 ? (errno > 0 && errno < SETUP_FAILED ? errno : SETUP_FAILED)
                  : 0);
}

static void
run_probe (const struct syscall_probe *p)
{
  char result[64];
  int status;
  pid_t pid;

  fflush (stdout);
  pid = fork ();
  if (pid < 0)
    {
      printf ("%s FORK_FAILED_%s\n", p->name, strerrorname_np (errno));
      return;
    }
  if (pid == 0)
    probe_child (p);
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      {
        printf ("%s WAIT_FAILED\n", p->name);
        return;
      }
  format_status (status, result, sizeof result);
  printf ("%s %s\n", p->name, result);
  fflush (stdout);
}

/*============================ Subcommands ============================== */

static int
cmd_syscalls (int argc, char **argv)
{
  (void) argc;
  (void) argv;
  for (size_t i = 0; i < ARRAY_SIZE (probes); i++)
    run_probe (&probes[i]);
  return 0;
}

static int
cmd_syscall (int argc, char **argv)
{
  if (argc != 1)
    {
      fprintf (stderr, "usage: probe syscall NAME\n");
      return 2;
    }
  for (size_t i = 0; i < ARRAY_SIZE (probes); i++)
    if (strcmp (probes[i].name, argv[0]) == 0)
      {
        run_probe (&probes[i]);
        return 0;
      }
  fprintf (stderr, "probe: no syscall probe named `%s`\n", argv[0]);
  return 2;
}

static int
cmd_expected (int argc, char **argv)
{
  (void) argc;
  (void) argv;
  for (size_t i = 0; i < ARRAY_SIZE (probes); i++)
    printf ("%s %s\n", probes[i].name, probes[i].expect);
  return 0;
}

/* getpid (20) through the i386 entry point. Inside the sandbox the filter
   sees AUDIT_ARCH_I386 and kills the process with SIGSYS; outside it prints
   the pid. A kernel without IA32 emulation (or one that refuses int 0x80)
   raises SIGSEGV before seccomp ever runs. */
static int
cmd_int80 (int argc, char **argv)
{
  (void) argc;
  (void) argv;
#ifdef __x86_64__
  long ret;

  no_core_dumps ();
  fflush (stdout);
  __asm__ volatile("int $0x80"
                   : "=a"(ret)
                   : "a"(20L)
                   : "memory", "cc", "r8", "r9", "r10", "r11");
  if (ret < 0 && ret > -4096)
    {
      const char *name = strerrorname_np ((int) -ret);
      printf ("int80 %s\n", name ? name : "error");
    }
  else
    printf ("int80 %ld\n", ret);
#else
  printf ("int80 unsupported\n");
#endif
  return 0;
}

/*======================== Single checks ================================= */

/* "ok" or the errno's name. */
static const char *
result_name (int rc, int err)
{
  const char *name;

  if (rc >= 0)
    return "ok";
  name = strerrorname_np (err);
  return name ? name : "E?";
}

static int
cmd_fds (int argc, char **argv)
{
  struct dirent *de;
  DIR *d;

  (void) argc;
  (void) argv;
  d = opendir ("/proc/self/fd");
  if (d == NULL)
    {
      printf ("fds %s\n", result_name (-1, errno));
      return 0;
    }
  while ((de = readdir (d)) != NULL)
    {
      char target[256];
      ssize_t n;

      if (de->d_name[0] == '.' || atoi (de->d_name) == dirfd (d))
        continue;
      n = readlinkat (dirfd (d), de->d_name, target, sizeof target - 1);
      target[n < 0 ? 0 : n] = '\0';
      printf ("%s %s\n", de->d_name, target);
    }
  closedir (d);
  return 0;
}

static int
cmd_caps (int argc, char **argv)
{
  struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct data[2];
  unsigned long long bnd = 0, amb = 0;
  int cap;

  (void) argc;
  (void) argv;
  memset (data, 0, sizeof data);
  if (syscall (SYS_capget, &hdr, data) < 0)
    {
      printf ("capget %s\n", result_name (-1, errno));
      return 0;
    }
  for (cap = 0; cap < 64; cap++)
    {
      if (prctl (PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
        bnd |= 1ULL << cap;
      if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1)
        amb |= 1ULL << cap;
    }
#define CAP64(field)                                                           \
  ((unsigned long long) data[1].field << 32 | data[0].field)
  printf ("CapInh %#llx\n", CAP64 (inheritable));
  printf ("CapPrm %#llx\n", CAP64 (permitted));
  printf ("CapEff %#llx\n", CAP64 (effective));
#undef CAP64
  printf ("CapBnd %#llx\n", bnd);
  printf ("CapAmb %#llx\n", amb);
  printf ("NoNewPrivs %d\n", prctl (PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
  printf ("Seccomp %d\n", prctl (PR_GET_SECCOMP, 0, 0, 0, 0));
  printf ("uid %d euid %d gid %d egid %d\n", (int) getuid (), (int) geteuid (),
          (int) getgid (), (int) getegid ());
  return 0;
}

static int
cmd_open (int argc, char **argv)
{
  static const struct
  {
    const char *name;
    int flags;
  } modes[] = {
    { "r", O_RDONLY },
    { "w", O_WRONLY },
    { "rw", O_RDWR },
    { "creat", O_WRONLY | O_CREAT | O_EXCL },
    { "path", O_PATH },
  };
  int fd;

  if (argc != 2)
    {
      fprintf (stderr, "usage: probe open PATH r|w|rw|creat|path\n");
      return 2;
    }
  for (size_t i = 0; i < ARRAY_SIZE (modes); i++)
    if (strcmp (modes[i].name, argv[1]) == 0)
      {
        fd = open (argv[0], modes[i].flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                   0644);
        printf ("open(%s,%s) %s\n", argv[0], argv[1], result_name (fd, errno));
        return 0;
      }
  fprintf (stderr, "probe: unknown open mode `%s`\n", argv[1]);
  return 2;
}

static int
cmd_readlink (int argc, char **argv)
{
  char target[4096];
  ssize_t n;

  if (argc != 1)
    {
      fprintf (stderr, "usage: probe readlink PATH\n");
      return 2;
    }
  n = readlink (argv[0], target, sizeof target - 1);
  if (n < 0)
    printf ("readlink(%s) %s\n", argv[0], result_name (-1, errno));
  else
    printf ("readlink(%s) =%.*s\n", argv[0], (int) n, target);
  return 0;
}

static int
cmd_mknod (int argc, char **argv)
{
  int rc;

  if (argc != 1)
    {
      fprintf (stderr, "usage: probe mknod PATH\n");
      return 2;
    }
  rc = mknod (argv[0], S_IFCHR | 0666, makedev (1, 3));
  printf ("mknod(%s) %s\n", argv[0], result_name (rc, errno));
  return 0;
}

static int
cmd_kill (int argc, char **argv)
{
  int sig = argc > 1 ? atoi (argv[1]) : 0, rc;

  if (argc < 1 || argc > 2)
    {
      fprintf (stderr, "usage: probe kill PID [SIG]\n");
      return 2;
    }
  rc = kill ((pid_t) atol (argv[0]), sig);
  printf ("kill(%s,%d) %s\n", argv[0], sig, result_name (rc, errno));
  return 0;
}

/* A TCP connect that gives up after 5 s (a dropped SYN would hang). */
static int
cmd_connect (int argc, char **argv)
{
  struct sockaddr_storage ss;
  socklen_t len;
  struct pollfd pfd;
  int fd, rc, err = 0;

  if (argc != 2)
    {
      fprintf (stderr, "usage: probe connect HOST PORT\n");
      return 2;
    }
  memset (&ss, 0, sizeof ss);
  if (inet_pton (AF_INET, argv[0], &((struct sockaddr_in *) &ss)->sin_addr)
      == 1)
    {
      ((struct sockaddr_in *) &ss)->sin_family = AF_INET;
      ((struct sockaddr_in *) &ss)->sin_port = htons ((uint16_t) atoi (argv[1]));
      len = sizeof (struct sockaddr_in);
    }
  else if (inet_pton (AF_INET6, argv[0],
                      &((struct sockaddr_in6 *) &ss)->sin6_addr)
           == 1)
    {
      ((struct sockaddr_in6 *) &ss)->sin6_family = AF_INET6;
      ((struct sockaddr_in6 *) &ss)->sin6_port
          = htons ((uint16_t) atoi (argv[1]));
      len = sizeof (struct sockaddr_in6);
    }
  else
    {
      fprintf (stderr, "probe: `%s` is not an IP address\n", argv[0]);
      return 2;
    }
  fd = socket (ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    {
      printf ("connect(%s,%s) socket:%s\n", argv[0], argv[1],
              result_name (-1, errno));
      return 0;
    }
  rc = connect (fd, (struct sockaddr *) &ss, len);
  if (rc < 0 && errno == EINPROGRESS)
    {
      pfd.fd = fd;
      pfd.events = POLLOUT;
      rc = poll (&pfd, 1, 5000);
      if (rc == 0)
        {
          rc = -1;
          errno = ETIMEDOUT;
        }
      else if (rc > 0)
        {
          len = sizeof err;
          getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err ? -1 : 0;
          errno = err;
        }
    }
  printf ("connect(%s,%s) %s\n", argv[0], argv[1], result_name (rc, errno));
  close (fd);
  return 0;
}

static int
cmd_ifaces (int argc, char **argv)
{
  struct if_nameindex *ifs, *i;

  (void) argc;
  (void) argv;
  ifs = if_nameindex ();
  if (ifs == NULL)
    {
      printf ("ifaces %s\n", result_name (-1, errno));
      return 0;
    }
  for (i = ifs; i->if_index != 0; i++)
    printf ("%s\n", i->if_name);
  if_freenameindex (ifs);
  return 0;
}

/* TIOCSTI pushes a byte into a terminal's input queue (CVE-2017-5226). */
static void
try_tiocsti (const char *what, int fd)
{
  char c = '#';
  int rc = ioctl (fd, TIOCSTI, &c);

  printf ("tiocsti(%s) %s\n", what, result_name (rc, errno));
}

static int
cmd_tiocsti (int argc, char **argv)
{
  int master, slave, rc;
  char *name;

  (void) argc;
  (void) argv;
  try_tiocsti ("stdin", 0);
  try_tiocsti ("stdout", 1);
  try_tiocsti ("stderr", 2);
  /* A terminal of our own, through /dev/ptmx of the sandbox's devpts. */
  master = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0)
    {
      printf ("openpty %s\n", result_name (-1, errno));
      return 0;
    }
  rc = grantpt (master) < 0 || unlockpt (master) < 0 ? -1 : 0;
  name = rc == 0 ? ptsname (master) : NULL;
  slave = name ? open (name, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
  printf ("openpty %s\n", result_name (slave, errno));
  if (slave < 0)
    return 0;
  rc = isatty (slave);
  printf ("isatty(pty) %s\n", rc ? "ok" : result_name (-1, errno));
  try_tiocsti ("pty master", master);
  try_tiocsti ("pty slave", slave);
  close (slave);
  close (master);
  return 0;
}

/* Within one sandbox, processes may signal each other; ptrace is denied
   by the filter even on our own child. */
static int
cmd_siblings (int argc, char **argv)
{
  int status, rc;
  pid_t child;

  (void) argc;
  (void) argv;
  fflush (stdout);
  child = fork ();
  if (child < 0)
    {
      printf ("fork %s\n", result_name (-1, errno));
      return 0;
    }
  if (child == 0)
    {
      pause ();
      _exit (0);
    }
  rc = (int) syscall (SYS_ptrace, PTRACE_ATTACH, child, 0, 0);
  printf ("ptrace(ATTACH,child) %s\n", result_name (rc, errno));
  rc = kill (child, 0);
  printf ("kill(child,0) %s\n", result_name (rc, errno));
  rc = kill (child, SIGTERM);
  printf ("kill(child,SIGTERM) %s\n", result_name (rc, errno));
  while (waitpid (child, &status, 0) < 0 && errno == EINTR)
    ;
  printf ("child %s\n", WIFSIGNALED (status) && WTERMSIG (status) == SIGTERM
                            ? "SIGTERM"
                            : "other");
  return 0;
}

/* Fork children that wait, until the kernel refuses; then end them all. */
static int
cmd_forkbomb (int argc, char **argv)
{
  static pid_t kids[1 << 16];
  size_t n = 0;
  int err = 0;

  (void) argc;
  (void) argv;
  fflush (stdout);
  while (n < ARRAY_SIZE (kids))
    {
      pid_t pid = fork ();
      if (pid == 0)
        {
          pause ();
          _exit (0);
        }
      if (pid < 0)
        {
          err = errno;
          break;
        }
      kids[n++] = pid;
    }
  for (size_t i = 0; i < n; i++)
    kill (kids[i], SIGKILL);
  for (size_t i = 0; i < n; i++)
    while (waitpid (kids[i], NULL, 0) < 0 && errno == EINTR)
      ;
  printf ("forkbomb %s %zu\n", err ? result_name (-1, err) : "no-limit", n);
  return 0;
}

static int
cmd_memhog (int argc, char **argv)
{
  const size_t mib = 1 << 20;
  long want;

  if (argc != 1 || (want = atol (argv[0])) <= 0)
    {
      fprintf (stderr, "usage: probe memhog MB\n");
      return 2;
    }
  for (long i = 0; i < want; i++)
    {
      char *p = mmap (NULL, mib, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        {
          printf ("memhog %s at %ld\n", result_name (-1, errno), i);
          return 1;
        }
      memset (p, 0x5a, mib);
      if ((i + 1) % 16 == 0)
        {
          printf ("memhog %ld\n", i + 1);
          fflush (stdout);
        }
    }
  printf ("memhog done %ld\n", want);
  return 0;
}

/* A disk bomb with a small footprint of its own (static, one 64 KiB
   buffer): SIGXFSZ is ignored so RLIMIT_FSIZE shows as EFBIG. */
static int
cmd_fill (int argc, char **argv)
{
  static char block[1 << 16];
  unsigned long long total = 0;
  int fd, err = 0;

  if (argc != 1)
    {
      fprintf (stderr, "usage: probe fill PATH\n");
      return 2;
    }
  signal (SIGXFSZ, SIG_IGN);
  fd = open (argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    {
      printf ("fill open:%s\n", result_name (-1, errno));
      return 0;
    }
  for (;;)
    {
      ssize_t n = write (fd, block, sizeof block);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          err = errno;
          break;
        }
      total += (unsigned long long) n;
    }
  close (fd);
  printf ("fill %s %llu\n", result_name (-1, err), total);
  return 0;
}

struct command
{
  const char *name;
  const char *usage;
  int (*run) (int argc, char **argv); /* argv after the subcommand */
};

static const struct command commands[] = {
  { "syscalls", "", cmd_syscalls },
  { "syscall", " NAME", cmd_syscall },
  { "expected", "", cmd_expected },
  { "int80", "", cmd_int80 },
  { "fds", "", cmd_fds },
  { "caps", "", cmd_caps },
  { "open", " PATH r|w|rw|creat|path", cmd_open },
  { "readlink", " PATH", cmd_readlink },
  { "mknod", " PATH", cmd_mknod },
  { "kill", " PID [SIG]", cmd_kill },
  { "connect", " HOST PORT", cmd_connect },
  { "ifaces", "", cmd_ifaces },
  { "tiocsti", "", cmd_tiocsti },
  { "siblings", "", cmd_siblings },
  { "forkbomb", "", cmd_forkbomb },
  { "memhog", " MB", cmd_memhog },
  { "fill", " PATH", cmd_fill },
};

static int
usage (void)
{
  fprintf (stderr, "usage:\n");
  for (size_t i = 0; i < ARRAY_SIZE (commands); i++)
    fprintf (stderr, "  probe %s%s\n", commands[i].name, commands[i].usage);
  return 2;
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    return usage ();
  for (size_t i = 0; i < ARRAY_SIZE (commands); i++)
    if (strcmp (commands[i].name, argv[1]) == 0)
      {
        int rc = commands[i].run (argc - 2, argv + 2);
        /* Lost output must not look like a clean run. */
        if (fflush (stdout) != 0 && rc == 0)
          rc = 1;
        return rc;
      }
  fprintf (stderr, "probe: unknown subcommand `%s`\n", argv[1]);
  return usage ();
}
