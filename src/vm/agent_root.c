/* sbx: the guest agent's switch to the read-only root image (docs/vm.md
 * "The root filesystem").
 *
 * When the kernel command line says sbx.root=vda (the relay adds it when
 * the parent gave QEMU an image), the agent loads virtio_blk, mounts the
 * image read-only (ext4, no journal replay, nodev, nosuid), moves /proc,
 * /sys and /dev into it and makes it the root: mount --move onto / and
 * chroot, as switch_root does (pivot_root cannot leave an initramfs).
 * The initramfs stays underneath, unreachable; the agent keeps an O_PATH
 * fd of its own binary in it (sbx_agent_self_fd) should it re-exec.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vm/agent_pty.h"
#include "vm/agent_root.h"

int sbx_agent_self_fd = -1;
static int on_image;

static int
wants_image (void)
{
  char line[2048];
  int fd = open ("/proc/cmdline", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read (fd, line, sizeof line - 1) : -1;

  if (fd >= 0)
    close (fd);
  if (n <= 0)
    return 0;
  line[n] = '\0';
  for (char *w = strtok (line, " \n"); w; w = strtok (NULL, " \n"))
    if (strcmp (w, "sbx.root=vda") == 0)
      return 1;
  return 0;
}

static const char *
load (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return path;
  if (syscall (SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
    {
      close (fd);
      return path;
    }
  close (fd);
  return NULL;
}

const char *
sbx_agent_root_switch (void)
{
  static const char *const moved[] = {"/proc", "/sys", "/dev"};
  const char *fail;
  struct stat st;
  int tries;

  sbx_agent_self_fd = open ("/init", O_PATH | O_CLOEXEC);
  if (!wants_image ())
    return NULL;
  if ((fail = load ("/lib/modules/virtio_blk.ko")) != NULL)
    return fail;
  /* devtmpfs makes the node once the driver probed the device. */
  for (tries = 0; tries < 500 && stat ("/dev/vda", &st) < 0; tries++)
    usleep (10000);
  if (mkdir ("/newroot", 0755) < 0 && errno != EEXIST)
    return "mkdir /newroot";
  if (mount ("/dev/vda", "/newroot", "ext4", MS_RDONLY | MS_NODEV | MS_NOSUID, "noload") < 0)
    return "mount the root image";
  for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++)
    {
      char to[32];
      snprintf (to, sizeof to, "/newroot%s", moved[i]);
      if (mount (moved[i], to, NULL, MS_MOVE, NULL) < 0)
        return moved[i];
    }
  if (chdir ("/newroot") < 0 || mount (".", "/", NULL, MS_MOVE, NULL) < 0 || chroot (".") < 0
      || chdir ("/") < 0)
    return "switch to the root image";
  setenv ("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
  on_image = 1;
  return NULL;
}

const char *
sbx_agent_disk_dir (void)
{
  struct stat st;
  if (stat ("/disk", &st) == 0 && S_ISDIR (st.st_mode))
    return "/disk";
  /* devtmpfs is writable by the agent; the directory is root's, 0755. */
  if (mkdir ("/dev/.sbx-disk", 0755) < 0 && errno != EEXIST)
    return "/disk"; /* the mount then fails with a clear message */
  return "/dev/.sbx-disk";
}

int
sbx_agent_root_seal (void)
{
  /* A remount replaces the mount's flags: keep nodev and nosuid. */
  unsigned long flags = MS_REMOUNT | MS_RDONLY | (on_image ? MS_NODEV | MS_NOSUID : 0);
  return mount (NULL, "/", NULL, flags, NULL);
}

const char *
sbx_agent_dev_minimal (const char *shm_dir)
{
  static const struct
  {
    const char *name;
    unsigned major, minor;
  } nodes[] = {{"null", 1, 3}, {"zero", 1, 5},    {"full", 1, 7},
               {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
  static const struct
  {
    const char *name, *target;
  } links[] = {{"fd", "/proc/self/fd"},
               {"stdin", "/proc/self/fd/0"},
               {"stdout", "/proc/self/fd/1"},
               {"stderr", "/proc/self/fd/2"}};
  char path[64];
  /* The disk may be under the devtmpfs (a template's image has no /disk):
     held by an fd, as the tmpfs below hides it. */
  int shm = open (shm_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (shm < 0)
    return "open the disk's shm";
  /* Over the devtmpfs, which stays mounted beneath (the agent's port is an
     open fd, the root image is mounted): no command can reach it by path. */
  if (mount ("dev", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
    return "mount a tmpfs on /dev";
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
    {
      snprintf (path, sizeof path, "/dev/%s", nodes[i].name);
      if (mknod (path, S_IFCHR | 0666, makedev (nodes[i].major, nodes[i].minor)) < 0
          || chmod (path, 0666) < 0)
        return "make /dev's nodes";
    }
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
    {
      snprintf (path, sizeof path, "/dev/%s", links[i].name);
      if (symlink (links[i].target, path) < 0)
        return "make /dev's links";
    }
  snprintf (path, sizeof path, "/proc/self/fd/%d", shm);
  if (mkdir ("/dev/shm", 01777) < 0 || mount (path, "/dev/shm", NULL, MS_BIND, NULL) < 0)
    return "bind /dev/shm";
  close (shm);
  {
    const char *failed = sbx_agent_pty_dev (); /* /dev/pts, /dev/ptmx */
    if (failed)
      return failed;
  }
  if (mount (NULL, "/dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) < 0)
    return "remount /dev read-only";
  return NULL;
}
