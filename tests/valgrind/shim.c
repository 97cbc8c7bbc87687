/* sbx: system calls valgrind does not know, for `make valgrind` only.
 *
 * Linked into build/sbxd-vg (the daemon's own objects plus this file),
 * never into build/sbxd. Valgrind emulates every system call its client
 * makes and answers ENOSYS to those it has no wrapper for. Debian 12's
 * valgrind (3.19) lacks several that sbxd needs, and refuses to run
 * without (Debian 13's 3.24 still lacks most of them):
 *
 *   openat2 (437)                  the files API; probed at start
 *   landlock_create_ruleset (444)  the Landlock probe at start, and
 *   landlock_add_rule (445),       a front end's own confinement
 *   landlock_restrict_self (446)
 *   pidfd_send_signal (424)        killing a sandbox's PID 1, the zygote
 *   pidfd_open (434)               for the clone3 emulation below
 *   fsconfig (431), fspick (433)   resizing a pooled sandbox's disk
 *   fsopen (430), fsmount (432),   the kernel probes at start (the mount
 *   open_tree (428),               API, overlay layers, idmapped mounts,
 *   mount_setattr (442),           a tmpfs's user xattrs)
 *   pidfd_getfd (438)
 *   seccomp (317)                  libseccomp's feature probes, and a
 *                                  front end's own filter
 *   clone3 (435)                   starting the zygote: valgrind answers
 *                                  ENOSYS on purpose (glibc falls back to
 *                                  clone), so it is emulated with fork
 *   execveat (322)                 known, but with AT_EMPTY_PATH (the
 *                                  zygote from its memfd) it fails
 *                                  (ENOENT): made an execve (below)
 *
 * The executable's syscall(), fspick() and fsconfig() take precedence over
 * glibc's, for libseccomp too. The calls above run on the real CPU through
 * VALGRIND_NON_SIMD_CALL1, as the bare instruction; memcheck does not see
 * their memory accesses. None of them writes client memory except
 * seccomp(SECCOMP_GET_NOTIF_SIZES), marked defined here, and clone3's
 * pidfd, stored here by the client. Landlock and seccomp filters applied
 * this way bind the calling thread of the valgrind process, valgrind's
 * own work on it included, as they bind the daemon's thread without
 * valgrind. Every other call is made as the bare instruction in the
 * client, where valgrind checks it as usual.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>

#if !defined(__x86_64__)
#error "tests/valgrind/shim.c: x86_64 only"
#endif

#define CLONE_PIDFD_FLAG 0x00001000ULL
#define CLONE_CLEAR_SIGHAND_FLAG 0x100000000ULL
#define SECCOMP_SET_MODE_STRICT_OP 0
#define SECCOMP_SET_MODE_FILTER_OP 1
#define SECCOMP_GET_ACTION_AVAIL_OP 2
#define SECCOMP_GET_NOTIF_SIZES_OP 3

struct call
{
  long nr, a[6], ret;
};

static inline long
raw (long nr, const long a[6])
{
  register long r10 __asm__ ("r10") = a[3];
  register long r8 __asm__ ("r8") = a[4];
  register long r9 __asm__ ("r9") = a[5];
  long ret;

  __asm__ volatile ("syscall"
                    : "=a"(ret)
                    : "0"(nr), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10), "r"(r8), "r"(r9)
                    : "rcx", "r11", "memory");
  return ret;
}

/* On the real CPU, in valgrind's own context: no libc, no errno, no stack
   protector (there is no client TLS to read the canary from or write
   errno to). */
static long __attribute__ ((noinline, no_stack_protector))
native (long tid, struct call *c)
{
  (void) tid;
  c->ret = raw (c->nr, c->a);
  return c->ret;
}

static long
result (long ret)
{
  if (ret < 0 && ret > -4096)
    {
      errno = (int) -ret;
      return -1;
    }
  return ret;
}

static long
call_native (long nr, const long a[6])
{
  struct call c = {nr, {a[0], a[1], a[2], a[3], a[4], a[5]}, 0};

  if (!RUNNING_ON_VALGRIND)
    return result (raw (nr, a));
  VALGRIND_NON_SIMD_CALL1 (native, &c);
  return result (c.ret);
}

/* clone3 as start_zygote uses it (CLONE_PIDFD, CLONE_CLEAR_SIGHAND,
   SIGCHLD): fork, then a pidfd for the child. Nothing reaps the daemon's
   children but their pidfds, so the pid cannot be reused in between.
   CLONE_CLEAR_SIGHAND changes nothing: the child execs right away. */
static long
emulate_clone3 (const long a[6])
{
  const uint64_t *ca = (const uint64_t *) (uintptr_t) a[0];
  long pid, pidfd, b[6] = {0, 0, 0, 0, 0, 0};

  if (!RUNNING_ON_VALGRIND)
    return result (raw (SYS_clone3, a));
  /* The floor probe's clone3 (NULL, 0): the kernel's EINVAL or EFAULT,
     nothing created. */
  if (ca == NULL)
    return call_native (SYS_clone3, a);
  if ((ca[0] & ~(CLONE_PIDFD_FLAG | CLONE_CLEAR_SIGHAND_FLAG)) || !(ca[0] & CLONE_PIDFD_FLAG)
      || ca[4] != SIGCHLD)
    {
      errno = ENOSYS;
      return -1;
    }
  pid = fork ();
  if (pid <= 0)
    return pid;
  b[0] = pid;
  pidfd = call_native (SYS_pidfd_open, b);
  if (pidfd < 0)
    {
      int e = errno;
      kill ((pid_t) pid, SIGKILL);
      errno = e;
      return -1;
    }
  *(int *) (uintptr_t) ca[1] = (int) pidfd;
  return pid;
}

/* execveat (fd, "", argv, envp, AT_EMPTY_PATH) as an execve: of the file's
   path when it has one (valgrind can then trace the program, as it would
   a front end the daemon execs of itself), else of the fd's /proc/self/fd
   link (the zygote's memfd, which the smoke tells valgrind not to trace).
   In the forked child: no malloc, no stdio. */
static long
emulate_execveat (const long a[6])
{
  static const char suffix[] = " (deleted)";
  const char *path = (const char *) a[1];
  char link[32] = "/proc/self/fd/", digits[12], target[4096];
  long b[6] = {(long) link, a[2], a[3], 0, 0, 0}, r[6] = {(long) link, (long) target,
                                                         sizeof target - 1, 0, 0, 0};
  unsigned long fd = (unsigned long) (int) a[0];
  size_t n = 0, at = sizeof "/proc/self/fd/" - 1;
  long len;

  if (!RUNNING_ON_VALGRIND || !(a[4] & AT_EMPTY_PATH) || path == NULL || path[0] != '\0'
      || (int) a[0] < 0)
    return result (raw (SYS_execveat, a));
  do
    digits[n++] = (char) ('0' + fd % 10);
  while ((fd /= 10) != 0);
  while (n)
    link[at++] = digits[--n];
  link[at] = '\0';
  len = raw (SYS_readlink, r);
  if (len > 0 && target[0] == '/')
    {
      target[len] = '\0';
      if ((size_t) len < sizeof suffix - 1
          || memcmp (target + len - (sizeof suffix - 1), suffix, sizeof suffix - 1) != 0)
        b[0] = (long) target;
    }
  return result (raw (SYS_execve, b));
}

long
syscall (long nr, ...)
{
  long a[6];
  va_list ap;
  int i;

  /* As glibc's syscall(): six argument words, whatever the call uses. */
  va_start (ap, nr);
  for (i = 0; i < 6; i++)
    a[i] = va_arg (ap, long);
  va_end (ap);
  switch (nr)
    {
    case SYS_clone3:
      return emulate_clone3 (a);
    case SYS_execveat:
      return emulate_execveat (a);
    case SYS_openat2:
    case SYS_landlock_create_ruleset:
    case SYS_landlock_add_rule:
    case SYS_landlock_restrict_self:
    case SYS_pidfd_send_signal:
    case SYS_pidfd_open:
    case SYS_fsconfig:
    case SYS_fspick:
    case SYS_fsopen:
    case SYS_fsmount:
    case SYS_open_tree:
    case SYS_mount_setattr:
    case SYS_pidfd_getfd:
      return call_native (nr, a);
    case SYS_seccomp:
      {
        long r;
        /* libseccomp's probes (SET_MODE_STRICT with flags, SET_MODE_FILTER
           without a program: EINVAL, EFAULT tell the syscall and its flags
           are there) and a filter the daemon puts on itself (a front end
           confines itself), which then binds valgrind's own system calls on
           that thread as it would bind the daemon's. Never strict mode. */
        if (!(a[0] == SECCOMP_SET_MODE_STRICT_OP && a[1] != 0)
            && a[0] != SECCOMP_SET_MODE_FILTER_OP && a[0] != SECCOMP_GET_ACTION_AVAIL_OP
            && a[0] != SECCOMP_GET_NOTIF_SIZES_OP)
          {
            errno = ENOSYS;
            return -1;
          }
        r = call_native (nr, a);
        if (r == 0 && a[0] == SECCOMP_GET_NOTIF_SIZES_OP)
          VALGRIND_MAKE_MEM_DEFINED ((void *) a[2], 3 * sizeof (uint16_t));
        return r;
      }
    default:
      return result (raw (nr, a));
    }
}

int
fspick (int dfd, const char *path, unsigned int flags)
{
  long a[6] = {dfd, (long) path, (long) flags, 0, 0, 0};

  return (int) call_native (SYS_fspick, a);
}

int
fsconfig (int fd, unsigned int cmd, const char *key, const void *value, int aux)
{
  long a[6] = {fd, (long) cmd, (long) key, (long) value, aux, 0};

  return (int) call_native (SYS_fsconfig, a);
}

int
fsopen (const char *fs_name, unsigned int flags)
{
  long a[6] = {(long) fs_name, (long) flags, 0, 0, 0, 0};

  return (int) call_native (SYS_fsopen, a);
}

int
fsmount (int fd, unsigned int flags, unsigned int attr_flags)
{
  long a[6] = {fd, (long) flags, (long) attr_flags, 0, 0, 0};

  return (int) call_native (SYS_fsmount, a);
}

int
open_tree (int dfd, const char *path, unsigned int flags)
{
  long a[6] = {dfd, (long) path, (long) flags, 0, 0, 0};

  return (int) call_native (SYS_open_tree, a);
}

int
mount_setattr (int dfd, const char *path, unsigned int flags, struct mount_attr *attr, size_t size)
{
  long a[6] = {dfd, (long) path, (long) flags, (long) attr, (long) size, 0};

  return (int) call_native (SYS_mount_setattr, a);
}

int
pidfd_getfd (int pidfd, int targetfd, unsigned int flags)
{
  long a[6] = {pidfd, targetfd, (long) flags, 0, 0, 0};

  return (int) call_native (SYS_pidfd_getfd, a);
}
