/* sbx: each sandbox's own /dev.
 *
 * The sandbox's device nodes used to be binds of the host's /dev/null,
 * /dev/zero, ...: one inode for the host and every sandbox, so a watch
 * (inotify IN_MODIFY, IN_ACCESS) on /dev/null or /dev/urandom saw every
 * write and read by anyone on the host, and flock on them reached
 * everyone's (issue 16, the sibling of /usr's shared inodes). Nodes of a
 * tmpfs made per sandbox are the same devices behind inodes of its own.
 * The mount is nosuid and noexec; init makes it read-only once its mount
 * points are used.
 */
#include "iso/devnodes.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/cleanup.h"

static const struct
{
  const char *name;
  unsigned major, minor;
} nodes[] = {
    {"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9},
    {"tty", 5, 0},
};

static const char *const links[][2] = {
    {"ptmx", "pts/ptmx"},         {"fd", "/proc/self/fd"},        {"stdin", "/proc/self/fd/0"},
    {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
};

int
sbx_dev_mount (sbx_error_t **err)
{
  static const char *const opts[][2]
      = {{"size", "64k"}, {"nr_inodes", "64"}, {"mode", "0755"}};
  cleanup_close int fs = -1;
  int mnt;
  size_t i;

  fs = (int) syscall (SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0)
    return sbx_err_sys (err, errno, "/dev: fsopen tmpfs");
  for (i = 0; i < sizeof opts / sizeof opts[0]; i++)
    if (syscall (SYS_fsconfig, fs, FSCONFIG_SET_STRING, opts[i][0], opts[i][1], 0) < 0)
      return sbx_err_sys (err, errno, "/dev: tmpfs %s", opts[i][0]);
  if (syscall (SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return sbx_err_sys (err, errno, "/dev: make the tmpfs");
  mnt = (int) syscall (SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
  if (mnt < 0)
    return sbx_err_sys (err, errno, "/dev: mount the tmpfs");
  for (i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
    /* mknod applies the umask: the mode is set after. */
    if (mknodat (mnt, nodes[i].name, S_IFCHR | 0666, makedev (nodes[i].major, nodes[i].minor))
            < 0
        || fchmodat (mnt, nodes[i].name, 0666, 0) < 0)
      goto sys;
  if (mkdirat (mnt, "pts", 0755) < 0 || mkdirat (mnt, "shm", 0755) < 0)
    goto sys;
  for (i = 0; i < sizeof links / sizeof links[0]; i++)
    if (symlinkat (links[i][1], mnt, links[i][0]) < 0)
      goto sys;
  return mnt;
sys:
  sbx_err_sys (err, errno, "/dev: make its nodes");
  close (mnt);
  return -1;
}
