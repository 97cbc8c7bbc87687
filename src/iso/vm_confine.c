/* sbx: the Landlock domain QEMU runs in (docs/vm.md, threat model).
 *
 * QEMU runs as the sandbox slot's own uid, in its cgroup, under its own
 * seccomp policy; without this it could still read every world-readable
 * file of the host and connect to any TCP port. What it opens is fixed
 * (strace of a boot): its binary and libraries, two files of /etc, the
 * guest kernel, its own /proc entries, a few of /sys, /dev/kvm. Everything
 * else the guest needs (initramfs, disk image, snapshot, serial and
 * monitor sockets) arrives as an fd. So a QEMU escape lands in a process
 * that can read /usr and little more, and write nothing by path. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include "iso/vm.h"
#include "util/cleanup.h"
#include "util/landlock.h"

int
sbx_vm_confine_qemu (const char *kernel, sbx_error_t **err)
{
  static const char *const read_only[] = {
      "/usr",            /* QEMU, its modules, firmware, libraries */
      "/etc/ld.so.cache", "/etc/localtime",
      "/proc/filesystems",
      "/sys/devices/system/cpu", "/sys/devices/system/node", /* NUMA and CPU facts */
  };
  const uint64_t read_rights = LL_FS_READ_FILE | LL_FS_READ_DIR;
  const uint64_t dev_rw = LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV;
  cleanup_close int ruleset = -1;
  char self[64];
  long abi = sbx_landlock_abi ();
  size_t i;

  if (abi < 1)
    return 0; /* the daemon refuses to start without Landlock; a relay never gets here */
  /* Neither TCP right is granted: QEMU has no network device and no
     reason to bind or connect (its sockets are inherited fds). */
  ruleset = sbx_landlock_ruleset (abi, LL_NET_BIND_TCP | LL_NET_CONNECT_TCP,
                                  LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL, err);
  if (ruleset < 0)
    return -1;
  for (i = 0; i < sizeof read_only / sizeof *read_only; i++)
    if (sbx_landlock_allow (ruleset, abi, read_only[i],
                            read_rights | (i == 0 ? LL_FS_EXECUTE : 0), 1, err) < 0)
      return -1;
  /* Its own /proc/PID only (status, exe, fd/N for the initramfs): the pid
     stays the same across the exec that follows. */
  snprintf (self, sizeof self, "/proc/%d", (int) getpid ());
  if (sbx_landlock_allow (ruleset, abi, self, read_rights, 0, err) < 0
      || sbx_landlock_allow (ruleset, abi, kernel, LL_FS_READ_FILE, 0, err) < 0
      || sbx_landlock_allow (ruleset, abi, "/dev/null", LL_FS_READ_FILE | LL_FS_WRITE_FILE, 1,
                             err) < 0
      || sbx_landlock_allow (ruleset, abi, "/dev/urandom", LL_FS_READ_FILE, 1, err) < 0
      || sbx_landlock_allow (ruleset, abi, "/dev/kvm", dev_rw, 1, err) < 0)
    return -1;
  return sbx_landlock_enforce (ruleset, err);
}
