/* sbx: the kernel's features, probed once (kernel.h). */
#include "iso/kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "iso/idmap.h"
#include "util/cleanup.h"
#include "util/landlock.h"
#include "util/log.h"

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

struct sbx_kernel sbx_kernel;

/* 1 when the system call exists: called with arguments it must refuse,
   anything but ENOSYS means the kernel knows it. */
static int
has_syscall (long rc)
{
  return rc >= 0 || errno != ENOSYS;
}

static int
refuse (const struct sbx_kernel *k, const char *feature, const char *since, sbx_error_t **err)
{
  return sbx_err (err, SBX_E_SYSTEM,
                  "this kernel (Linux %s) lacks %s (Linux %s); sbx needs Linux " SBX_KERNEL_FLOOR
                  " or newer (docs/security.md, Kernel floor)",
                  k->release, feature, since);
}

static int
probe_user_namespaces (const struct sbx_kernel *k, sbx_error_t **err)
{
  cleanup_close int fd = open ("/proc/sys/user/max_user_namespaces", O_RDONLY | O_CLOEXEC);
  char text[32];
  ssize_t n;

  /* (A procfs file's size is 0: read it, do not stat it.) */
  n = fd >= 0 ? read (fd, text, sizeof text - 1) : -1;
  if (n <= 0)
    return refuse (k, "user namespaces (CONFIG_USER_NS)", "3.8", err);
  text[n] = '\0';
  if (strtoul (text, NULL, 10) == 0)
    return sbx_err (err, SBX_E_SYSTEM,
                    "user namespaces are switched off (sysctl user.max_user_namespaces = 0);"
                    " sbx gives every sandbox its own");
  return 0;
}

int
sbx_kernel_probe (struct sbx_kernel *k, sbx_error_t **err)
{
  struct open_how how = {0};
  struct utsname u;
  long abi;
  int fd;

  memset (k, 0, sizeof *k);
  if (uname (&u) == 0)
    snprintf (k->release, sizeof k->release, "%s", u.release);
  /* Oldest first: the refusal names the first feature this kernel lacks. */
  if (prctl (PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL)
    return refuse (k, "seccomp filters (CONFIG_SECCOMP_FILTER)", "3.5", err);
  if (probe_user_namespaces (k, err) < 0)
    return -1;
  fd = (int) syscall (SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fd < 0)
    return refuse (k, "the mount API (fsopen)", "5.2", err);
  close (fd);
  if (!has_syscall (syscall (SYS_clone3, NULL, 0)))
    return refuse (k, "clone3 (or a seccomp filter around sbx hides it: a container's)", "5.3",
                   err);
  fd = (int) syscall (SYS_pidfd_open, getpid (), 0);
  if (fd < 0)
    return refuse (k, "pidfd_open", "5.3", err);
  close (fd);
  if (!has_syscall (syscall (SYS_openat2, AT_FDCWD, NULL, &how, sizeof how)))
    return refuse (k, "openat2", "5.6", err);
  if (!has_syscall (syscall (SYS_pidfd_getfd, -1, 0, 0)))
    return refuse (k, "pidfd_getfd", "5.6", err);
  if (!has_syscall (syscall (SYS_close_range, ~0U, 0U, 0)))
    return refuse (k, "close_range", "5.9", err);
  if (!has_syscall (syscall (SYS_mount_setattr, -1, "", AT_EMPTY_PATH, NULL, 0)))
    return refuse (k, "mount_setattr", "5.12", err);
  abi = syscall (SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  if (abi < 1 && errno == EOPNOTSUPP)
    return sbx_err (err, SBX_E_SYSTEM,
                    "Landlock is built into this kernel (Linux %s) but not enabled: add landlock"
                    " to its lsm= boot parameter (docs/security.md, Kernel floor)",
                    k->release);
  if (abi < 1)
    return refuse (k, "Landlock", "5.13", err);
  k->landlock_abi = (uint32_t) abi;
  return 0;
}

/* An overlay of the two lower layers a and b in dir, created (never
   mounted) the way the sandboxes' mounts will be: by descriptor, or by
   path one layer per call. 1 when the kernel takes it. */
static int
overlay_takes (int dir, int by_fd)
{
  cleanup_close int fs = -1, a = -1, b = -1;
  char pa[32], pb[32];

  fs = (int) syscall (SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  a = openat (dir, "a", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  b = openat (dir, "b", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fs < 0 || a < 0 || b < 0)
    return 0;
  snprintf (pa, sizeof pa, "/proc/self/fd/%d", a);
  snprintf (pb, sizeof pb, "/proc/self/fd/%d", b);
  /* overlayfs before its own option parser (6.5) stores any key and
     refuses it at CMD_CREATE, into the kernel log: a key no kernel knows
     tells it apart without a line there, and such an overlayfs has
     neither feature. (The new parser's refusals go to this context's own
     log, not the kernel's.) */
  if (fsconfig (fs, FSCONFIG_SET_STRING, "sbx-probe-no-such-option", "1", 0) == 0)
    return 0;
  if (by_fd)
    return fsconfig (fs, FSCONFIG_SET_FD, "lowerdir+", NULL, a) == 0
           && fsconfig (fs, FSCONFIG_SET_FD, "lowerdir+", NULL, b) == 0
           && fsconfig (fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0;
  return fsconfig (fs, FSCONFIG_SET_STRING, "lowerdir+", pa, 0) == 0
         && fsconfig (fs, FSCONFIG_SET_STRING, "lowerdir+", pb, 0) == 0
         && fsconfig (fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0;
}

/* 0 when a clone of dir/a takes an idmapping, else the errno. */
static int
idmap_refused (int dir)
{
  cleanup_close int tree = -1, userns = -1;
  struct mount_attr attr = {0};

  userns = sbx_idmap_userns (0, 65534, 1, NULL);
  if (userns < 0)
    return errno ? errno : EIO;
  tree = (int) syscall (SYS_open_tree, dir, "a", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0)
    return errno;
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = (uint64_t) userns;
  if (syscall (SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
    return errno;
  return 0;
}

/* 0 when a tmpfs (a sandbox's disk, the upper layer of a snapshot's
   overlay) takes user.* xattrs (Linux 6.6), else the errno. overlayfs in
   a user namespace keeps its opaque-directory and redirect marks there
   (`userxattr`): without them, removing a directory of the snapshot from
   a sandbox fails with EIO (seen on 6.1). */
static int
tmpfs_user_xattr_refused (void)
{
  cleanup_close int fs = -1, mnt = -1, root = -1;

  fs = (int) syscall (SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0 || fsconfig (fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0
      || fsconfig (fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return errno;
  mnt = fsmount (fs, FSMOUNT_CLOEXEC, 0);
  if (mnt < 0)
    return errno;
  /* (fsmount's descriptor is an O_PATH one: open the root itself.) */
  root = openat (mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0 || fsetxattr (root, "user.sbx-probe", "1", 1, 0) < 0)
    return errno;
  return 0;
}

void
sbx_kernel_probe_state (struct sbx_kernel *k, int state_dir)
{
  char name[64];
  cleanup_close int dir = -1;
  int e;

  snprintf (name, sizeof name, ".kernel-probe-%d", (int) getpid ());
  if (mkdirat (state_dir, name, 0700) < 0 && errno != EEXIST)
    {
      snprintf (k->snapshot_copy_reason, sizeof k->snapshot_copy_reason,
                "the state directory could not be probed (%s)", strerror (errno));
      return;
    }
  dir = openat (state_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir >= 0 && (mkdirat (dir, "a", 0700) == 0 || errno == EEXIST)
      && (mkdirat (dir, "b", 0700) == 0 || errno == EEXIST))
    {
      if (overlay_takes (dir, 1))
        k->paths |= SBX_KERNEL_OVERLAY_LAYER_FDS;
      if (overlay_takes (dir, 0))
        k->paths |= SBX_KERNEL_OVERLAY_APPEND;
      e = idmap_refused (dir);
      if (e != 0)
        snprintf (k->snapshot_copy_reason, sizeof k->snapshot_copy_reason,
                  "the state directory's filesystem takes no idmapped mount (%s; tmpfs needs"
                  " Linux 6.3)",
                  strerror (e));
      else if ((e = tmpfs_user_xattr_refused ()) != 0)
        snprintf (k->snapshot_copy_reason, sizeof k->snapshot_copy_reason,
                  "a sandbox's disk (tmpfs) takes no user.* xattrs for overlayfs's marks (%s;"
                  " Linux 6.6)",
                  strerror (e));
      else
        k->paths |= SBX_KERNEL_SNAPSHOT_LAYERS;
    }
  if (dir >= 0)
    {
      unlinkat (dir, "a", AT_REMOVEDIR);
      unlinkat (dir, "b", AT_REMOVEDIR);
    }
  unlinkat (state_dir, name, AT_REMOVEDIR);
}

const char *
sbx_kernel_describe (uint32_t paths, enum sbx_kernel_path path)
{
  int on = (paths & path) != 0;

  switch (path)
    {
    case SBX_KERNEL_OVERLAY_LAYER_FDS:
      return on ? "by descriptor" : "by /proc/self/fd path";
    case SBX_KERNEL_OVERLAY_APPEND:
      return on ? "lowerdir+" : "lowerdir list in mount(2) options";
    case SBX_KERNEL_SNAPSHOT_LAYERS:
      return on ? "layer" : "copy";
    case SBX_KERNEL_CGROUP_KILL:
      return on ? "cgroup.kill" : "signal every process";
    default:
      return "?";
    }
}
