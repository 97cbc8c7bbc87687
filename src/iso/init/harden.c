/* sbx-init: the lock-down steps after the root is built, in the order the
 * peers agree on (docs/security.md section 2): network and hostname (need
 * privilege), then ids and
 * capabilities, then no_new_privs, then Landlock, and seccomp last. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iso/init/init.h"

#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#define SECBIT_KEEP_CAPS (1 << 4)
#define SECBIT_KEEP_CAPS_LOCKED (1 << 5)
#define SECBIT_NO_CAP_AMBIENT_RAISE (1 << 6)
#define SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED (1 << 7)
#endif

#include "util/landlock.h"

void
init_setup_network (void)
{
  struct ifreq ifr;
  int s;

  /* A new network namespace has only "lo", and it is down. Bring it up so
     code can talk to itself; there is no other interface and no route. */
  s = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    init_die (errno, "socket");
  memset (&ifr, 0, sizeof ifr);
  strncpy (ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl (s, SIOCGIFFLAGS, &ifr) < 0)
    init_die (errno, "SIOCGIFFLAGS lo");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl (s, SIOCSIFFLAGS, &ifr) < 0)
    init_die (errno, "SIOCSIFFLAGS lo");
  close (s);
}

void
init_set_hostname (const char *name)
{
  if (sethostname (name, strnlen (name, SBX_HOSTNAME_MAX)) < 0)
    init_die (errno, "sethostname");
  if (setdomainname ("", 0) < 0)
    init_die (errno, "setdomainname");
}

static int
cap_last (void)
{
  int last = CAP_LAST_CAP;

  /* Newer kernels know more capabilities than our headers: drop those too. */
  while (prctl (PR_CAPBSET_READ, last + 1, 0, 0, 0) >= 0)
    last++;
  return last;
}

void
init_drop_privileges (void)
{
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  const uint32_t keep
      = (1U << CAP_SETUID) | (1U << CAP_SETGID) | (1U << CAP_KILL);
  int cap, last = cap_last ();

  /* Keyrings are not namespaced: leave whatever session keyring the daemon
     had for a fresh anonymous one before anything else runs. */
  if (syscall (SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0)
    init_die (errno, "keyctl join session keyring");

  /* Root inside gains nothing from exec (NOROOT), uid changes away from 0
     clear capabilities (no SETUID_FIXUP, locked), and none of this can be
     undone. */
  if (prctl (PR_SET_SECUREBITS,
             SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED
                 | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE
                 | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
             0, 0, 0)
      < 0)
    init_die (errno, "PR_SET_SECUREBITS");
  for (cap = 0; cap <= last; cap++)
    if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      init_die (errno, "PR_CAPBSET_DROP");
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
    init_die (errno, "PR_CAP_AMBIENT_CLEAR_ALL");
  memset (data, 0, sizeof data);
  data[0].effective = data[0].permitted = keep;
  if (syscall (SYS_capset, &hdr, data) < 0)
    init_die (errno, "capset");
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    init_die (errno, "PR_SET_NO_NEW_PRIVS");
}

static void
landlock_allow (int ruleset, const char *path, uint64_t access, uint64_t handled)
{
  struct sbx_landlock_path_beneath rule;
  int fd = open (path, O_PATH | O_CLOEXEC);

  if (fd < 0)
    {
      if (errno == ENOENT)
        return;
      init_die (errno, path);
    }
  rule.allowed_access = access & handled;
  rule.parent_fd = fd;
  if (syscall (SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0) < 0)
    init_die (errno, path);
  close (fd);
}

uint32_t
init_apply_landlock (uint32_t max_abi, int root_writable)
{
  struct sbx_landlock_ruleset_attr attr = {0};
  uint64_t fs_all, read_exec, write_all, dev_rw;
  size_t attr_size;
  long abi;
  int ruleset;

  if (max_abi == 0)
    return 0;
  abi = syscall (SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  if (abi < 1)
    init_die (abi < 0 ? errno : ENOSYS, "landlock ABI");
  if (abi > (long) max_abi)
    abi = (long) max_abi;
  if (abi > LL_MAX_ABI)
    abi = LL_MAX_ABI;

  /* Handle every filesystem right this ABI knows (the kernel documentation's
     fall-through pattern), so nothing is allowed merely for being new. */
  fs_all = (LL_FS_MAKE_SYM << 1) - 1;
  if (abi >= 2)
    fs_all |= LL_FS_REFER;
  if (abi >= 3)
    fs_all |= LL_FS_TRUNCATE;
  if (abi >= 5)
    fs_all |= LL_FS_IOCTL_DEV;
  attr.handled_access_fs = fs_all;
  /* No network right is handled: TCP is confined by the network namespace
     (only lo). The sandbox's code may connect to its own servers, and so
     does init for the daemon's port proxy (connect.c); a rule here would
     bind both, and could not be left. */
  attr_size = offsetof (struct sbx_landlock_ruleset_attr, handled_access_net);
  if (abi >= 6)
    {
      /* Signals and abstract unix sockets stay inside the sandbox's domain
         (the netns already isolates abstract sockets; CVE-2020-15257). */
      attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
      attr_size = sizeof attr;
    }
  else if (abi >= 4)
    attr_size = offsetof (struct sbx_landlock_ruleset_attr, scoped);
  ruleset = (int) syscall (SYS_landlock_create_ruleset, &attr, attr_size, 0);
  if (ruleset < 0)
    init_die (errno, "landlock_create_ruleset");

  read_exec = LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR;
  write_all = fs_all & ~(LL_FS_MAKE_CHAR | LL_FS_MAKE_BLOCK | LL_FS_IOCTL_DEV);
  dev_rw = LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV | LL_FS_TRUNCATE;

  /* Read and execute everywhere in the tree; write only to the disk (with
     a writable root, its skeleton "/" too) and the few devices meant for
     it. Even a wrong mount flag cannot make the rest writable, except
     under a writable "/", where the mounts' own read-only flags (the
     host's directories, /dev, /proc/sys) are the wall. Devices: neither
     made nor driven by ioctl anywhere, whatever "/" allows. */
  landlock_allow (ruleset, "/", root_writable ? read_exec | write_all : read_exec, fs_all);
  landlock_allow (ruleset, "/home/user", write_all, fs_all);
  landlock_allow (ruleset, "/tmp", write_all, fs_all);
  landlock_allow (ruleset, "/dev/shm", write_all, fs_all);
  landlock_allow (ruleset, "/dev/null", dev_rw, fs_all);
  landlock_allow (ruleset, "/dev/zero", dev_rw, fs_all);
  landlock_allow (ruleset, "/dev/full", dev_rw, fs_all);
  landlock_allow (ruleset, "/dev/tty", dev_rw, fs_all);
  landlock_allow (ruleset, "/dev/pts", dev_rw, fs_all);
  /* procfs checks its own permissions; writes there are things like
     /proc/self/oom_score_adj and /proc/self/comm. */
  landlock_allow (ruleset, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_WRITE_FILE, fs_all);

  if (syscall (SYS_landlock_restrict_self, ruleset, 0) < 0)
    init_die (errno, "landlock_restrict_self");
  close (ruleset);
  return (uint32_t) abi;
}

void
init_apply_seccomp (const void *prog, size_t len)
{
  struct sock_fprog fprog;

  if (len == 0 || len % sizeof (struct sock_filter) != 0
      || len / sizeof (struct sock_filter) > BPF_MAXINSNS)
    init_protocol_violation ();
  fprog.len = (unsigned short) (len / sizeof (struct sock_filter));
  fprog.filter = (struct sock_filter *) (uintptr_t) prog;
  /* Last step before we serve requests: init itself runs under the filter
     (bubblewrap's init does too), and every command inherits it. */
  if (syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0)
    init_die (errno, "seccomp");
}
