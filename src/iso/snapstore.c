/* sbx: the snapshot store (docs/api.md "Snapshots"), kept by the
 * privileged parent in STATE/snapshots (root, 0700):
 *
 *     snapshots/<tenant, hex>/<name>/{home,tmp,shm}
 *
 * A snapshot is what a sandbox's disk holds: exactly what changed against
 * its template (the template's tree is read-only; the disk starts empty).
 * Owners are stored canonically, moved to SBX_SNAPSHOT_ID_BASE + the id
 * inside (no host account has those ids; nothing there is ever run on the
 * host), so a snapshot taken from one sandbox's id range serves another.
 * A save is written under a hidden temporary name and renamed into place
 * (no half snapshot is ever visible); the source is frozen meanwhile.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iso/copy.h"
#include "iso/engine.h"
#include "iso/idmap.h"
#include "iso/snapstore.h"
#include "iso/helper.h"
#include "util/cleanup.h"
#include "util/file.h"

static const char *const parts[] = {"home", "tmp", "shm"};


/* What a daemon that ended left half done or kept for itself: saves under
   their temporary names, a fork's memory. Not a hibernated VM's: its
   record outlives the daemon, and the next one resumes it (or, ending the
   record, removes the file: core/adopt.c). Only at the parent's start,
   when nothing of ours runs yet. */
static void
sweep_internal (int store)
{
  cleanup_close int walk = openat (store, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = walk >= 0 ? fdopendir (walk) : NULL;
  struct dirent *t;

  if (d == NULL)
    return;
  walk = -1; /* the DIR has it */
  while ((t = readdir (d)) != NULL)
    {
      cleanup_close int tdir = -1, twalk = -1;
      DIR *td;
      struct dirent *e;

      if (t->d_name[0] == '.')
        continue;
      tdir = openat (store, t->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      twalk = tdir >= 0 ? openat (tdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
      td = twalk >= 0 ? fdopendir (twalk) : NULL;
      if (td == NULL)
        continue;
      twalk = -1;
      while ((e = readdir (td)) != NULL)
        if ((strncmp (e->d_name, SBX_SNAPSHOT_INTERNAL_PREFIX,
                      strlen (SBX_SNAPSHOT_INTERNAL_PREFIX))
                 == 0
             && strncmp (e->d_name, SBX_SNAPSHOT_HIBERNATE_PREFIX,
                         strlen (SBX_SNAPSHOT_HIBERNATE_PREFIX))
                    != 0)
            || strncmp (e->d_name, ".tmp-", 5) == 0)
          sbx_remove_tree_at (tdir, e->d_name, 200);
      closedir (td);
    }
  closedir (d);
}

int
sbx_snapstore_open (const char *state_dir, int *out, sbx_error_t **err)
{
  cleanup_close int state = open (state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  int fd;

  *out = -1;
  if (state < 0)
    return sbx_err_sys (err, errno, "open `%s`", state_dir);
  if (mkdirat (state, "snapshots", 0700) < 0 && errno != EEXIST)
    return sbx_err_sys (err, errno, "make `%s/snapshots`", state_dir);
  fd = openat (state, "snapshots", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys (err, errno, "open `%s/snapshots`", state_dir);
  /* The state directory belongs to the front end's user: a directory it
     made there instead of ours is not trusted. */
  if (fstat (fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 077) != 0)
    {
      close (fd);
      return sbx_err (err, SBX_E_SYSTEM,
                      "`%s/snapshots` must be root's and mode 0700 (move it away)", state_dir);
    }
  sweep_internal (fd);
  *out = fd;
  return 0;
}

int
sbx_snapshot_name_valid (const char *name)
{
  size_t i, n = strlen (name);

  if (n == 0 || n > SBX_SNAPSHOT_NAME_MAX || name[0] == '.' || name[0] == '-')
    return 0;
  for (i = 0; i < n; i++)
    {
      char c = name[i];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
            || c == '_' || c == '-'))
        return 0;
    }
  return 1;
}

int
sbx_snapstore_name_valid (const char *name)
{
  size_t i, n = strlen (name), p = strlen (SBX_SNAPSHOT_INTERNAL_PREFIX);

  if (sbx_snapshot_name_valid (name))
    return 1;
  if (n <= p || n > SBX_SNAPSHOT_NAME_MAX || strncmp (name, SBX_SNAPSHOT_INTERNAL_PREFIX, p) != 0)
    return 0;
  for (i = p; i < n; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')
          || name[i] == '-'))
      return 0;
  return 1;
}

/* The tenant's directory (made when `make`), or -1 with errno. */
static int
tenant_dir (int store, const char *tenant, int make)
{
  char hex[2 * 80 + 1];
  size_t i, n = strlen (tenant);

  if (n == 0 || n > 80)
    {
      errno = EINVAL;
      return -1;
    }
  for (i = 0; i < n; i++)
    snprintf (hex + 2 * i, 3, "%02x", (unsigned char) tenant[i]);
  if (make && mkdirat (store, hex, 0700) < 0 && errno != EEXIST)
    return -1;
  return openat (store, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}


static int
open_parts (int from, int to, int make_to, int fds[6], struct sbx_copy_job jobs[3],
            sbx_error_t **err)
{
  int i;

  for (i = 0; i < 6; i++)
    fds[i] = -1;
  for (i = 0; i < 3; i++)
    {
      if (make_to && mkdirat (to, parts[i], 0700) < 0)
        return sbx_err_sys (err, errno, "make the snapshot's `%s`", parts[i]);
      fds[2 * i] = from < 0 ? -2
                            : openat (from, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      fds[2 * i + 1] = openat (to, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fds[2 * i] == -1 || fds[2 * i + 1] < 0)
        return sbx_err_sys (err, errno, "open `%s`", parts[i]);
      jobs[i].src = fds[2 * i];
      jobs[i].dst = fds[2 * i + 1];
    }
  return 0;
}

static void
close_parts (int fds[6])
{
  int i;

  for (i = 0; i < 6; i++)
    if (fds[i] >= 0)
      close (fds[i]);
}

int
sbx_snapstore_save (int store, const struct sbx_iso_box *src, const char *tenant,
                    const char *name, const struct sbx_copy_limits *lim,
                    int (*enter) (void *arg, pid_t pid),
                    void *enter_arg, struct sbx_copy_result *res, sbx_error_t **err)
{
  static unsigned counter;
  cleanup_close int tdir = -1, tmp = -1;
  struct sbx_copy_job jobs[3];
  struct stat st;
  char tmpname[128];
  /* -1 until open_parts fills them: a failure before it must not close
     whatever numbers the stack held (another slot's pidfd, say). */
  int fds[6] = {-1, -1, -1, -1, -1, -1}, rc;

  memset (res, 0, sizeof *res);
  if (store < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the snapshot store is not available");
  if (!sbx_snapstore_name_valid (name))
    return sbx_err (err, SBX_E_INVALID, "bad snapshot name");
  tdir = tenant_dir (store, tenant, 1);
  if (tdir < 0)
    return sbx_err_sys (err, errno, "open the tenant's snapshots");
  if (fstatat (tdir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return sbx_err (err, SBX_E_CONFLICT, "snapshot `%s` exists", name);
  snprintf (tmpname, sizeof tmpname, ".tmp-%d-%u-%s", (int) getpid (),
            __atomic_add_fetch (&counter, 1, __ATOMIC_RELAXED), name);
  if (mkdirat (tdir, tmpname, 0700) < 0)
    return sbx_err_sys (err, errno, "make the snapshot");
  tmp = openat (tdir, tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  /* Its root is the sandbox root's, as seen through the idmapped layer
     (the store's own directory, root's and 0700, keeps host users out). */
  rc = tmp < 0 || fchown (tmp, SBX_SNAPSHOT_ID_BASE, SBX_SNAPSHOT_ID_BASE) < 0
               || fchmod (tmp, 0755) < 0
           ? sbx_err_sys (err, errno, "make the snapshot")
           : 0;
  if (rc == 0)
    rc = open_parts (-1, tmp, 1, fds, jobs, err);
  /* The source as the sandbox sees it: a sandbox on a snapshot is saved
     flat (its layer and the snapshot's, merged). */
  for (int i = 0; rc == 0 && i < 3; i++)
    {
      fds[2 * i] = jobs[i].src = sbx_iso_open_part (src, i);
      if (fds[2 * i] < 0)
        rc = sbx_err_sys (err, errno, "open the sandbox's `%s`", parts[i]);
    }
  if (rc == 0)
    rc = sbx_copy_run (jobs, 3, src->uid_base, SBX_SNAPSHOT_ID_BASE, lim, enter, enter_arg, res,
                       err);
  close_parts (fds);
  if (rc == 0 && renameat2 (tdir, tmpname, tdir, name, RENAME_NOREPLACE) < 0)
    rc = errno == EEXIST ? sbx_err (err, SBX_E_CONFLICT, "snapshot `%s` exists", name)
                         : sbx_err_sys (err, errno, "store the snapshot");
  if (rc < 0)
    sbx_remove_tree_at (tdir, tmpname, 200);
  return rc;
}

int
sbx_snapstore_load (int store, const char *tenant, const char *name, int dst_disk,
                    uid_t dst_base, const struct sbx_copy_limits *lim,
                    int (*enter) (void *arg, pid_t pid),
                    void *enter_arg, struct sbx_copy_result *res, sbx_error_t **err)
{
  cleanup_close int tdir = -1, snap = -1;
  struct sbx_copy_job jobs[3];
  int fds[6], rc;

  memset (res, 0, sizeof *res);
  if (store < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the snapshot store is not available");
  if (!sbx_snapstore_name_valid (name))
    return sbx_err (err, SBX_E_INVALID, "bad snapshot name");
  tdir = tenant_dir (store, tenant, 0);
  if (tdir >= 0)
    snap = openat (tdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (snap < 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "snapshot `%s` not found", name);
  rc = open_parts (snap, dst_disk, 0, fds, jobs, err);
  if (rc == 0)
    rc = sbx_copy_run (jobs, 3, SBX_SNAPSHOT_ID_BASE, dst_base, lim, enter, enter_arg, res, err);
  close_parts (fds);
  return rc;
}

int
sbx_snapstore_save_with (int store, const char *tenant, const char *name,
                         int (*fill) (int dir, void *arg), void *arg, sbx_error_t **err)
{
  static unsigned counter;
  cleanup_close int tdir = -1, tmp = -1;
  struct stat st;
  char tmpname[128];
  int rc;

  if (store < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the snapshot store is not available");
  if (!sbx_snapstore_name_valid (name))
    return sbx_err (err, SBX_E_INVALID, "bad snapshot name");
  tdir = tenant_dir (store, tenant, 1);
  if (tdir < 0)
    return sbx_err_sys (err, errno, "open the tenant's snapshots");
  if (fstatat (tdir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return sbx_err (err, SBX_E_CONFLICT, "snapshot `%s` exists", name);
  snprintf (tmpname, sizeof tmpname, ".tmp-%d-%u-%s", (int) getpid (),
            __atomic_add_fetch (&counter, 1, __ATOMIC_RELAXED), name);
  if (mkdirat (tdir, tmpname, 0700) < 0)
    return sbx_err_sys (err, errno, "make the snapshot");
  tmp = openat (tdir, tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  rc = tmp < 0 ? sbx_err_sys (err, errno, "make the snapshot") : fill (tmp, arg);
  if (rc == 0 && renameat2 (tdir, tmpname, tdir, name, RENAME_NOREPLACE) < 0)
    rc = errno == EEXIST ? sbx_err (err, SBX_E_CONFLICT, "snapshot `%s` exists", name)
                         : sbx_err_sys (err, errno, "store the snapshot");
  if (rc < 0)
    sbx_remove_tree_at (tdir, tmpname, 200);
  return rc;
}

int
sbx_snapstore_open_file (int store, const char *tenant, const char *name, const char *file,
                         sbx_error_t **err)
{
  cleanup_close int tdir = -1, snap = -1;
  int fd = -1;

  if (store < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the snapshot store is not available");
  if (!sbx_snapstore_name_valid (name))
    return sbx_err (err, SBX_E_INVALID, "bad snapshot name");
  tdir = tenant_dir (store, tenant, 0);
  if (tdir >= 0)
    snap = openat (tdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (snap >= 0)
    fd = openat (snap, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "snapshot `%s` not found", name);
  return fd;
}

int
sbx_snapstore_remove (int store, const char *tenant, const char *name, sbx_error_t **err)
{
  cleanup_close int tdir = -1;
  struct stat st;

  if (store < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the snapshot store is not available");
  if (!sbx_snapstore_name_valid (name))
    return sbx_err (err, SBX_E_INVALID, "bad snapshot name");
  tdir = tenant_dir (store, tenant, 0);
  if (tdir < 0 || fstatat (tdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "snapshot `%s` not found", name);
  sbx_remove_tree_at (tdir, name, 200);
  if (fstatat (tdir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return sbx_err (err, SBX_E_SYSTEM, "snapshot `%s` could not be removed entirely", name);
  return 0;
}

/* ---- layers: a snapshot as the lower layer of a new sandbox's disk ----- */

/* A user namespace that maps the store's canonical ids onto the sandbox's
   (SBX_SNAPSHOT_ID_BASE + k -> base + k): the idmapping of the lower
   layer. Made by a child that unshares and waits; we write its maps (as
   root in the parent namespace, any mapping is ours to write). */
static int
idmap_userns (uid_t base, sbx_error_t **err)
{
  return sbx_idmap_userns (SBX_SNAPSHOT_ID_BASE, (uint32_t) base, SBX_IDS_PER_SANDBOX, err);
}

int
sbx_snapstore_stage (int store, const char *tenant, const char *name, int pidfd, uid_t base,
                     sbx_error_t **err)
{
  cleanup_close int tdir = -1, userns = -1, tree = -1;
  struct mount_attr attr;
  int status = 0;
  pid_t pid;

  if (store < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the snapshot store is not available");
  if (!sbx_snapstore_name_valid (name))
    return sbx_err (err, SBX_E_INVALID, "bad snapshot name");
  tdir = tenant_dir (store, tenant, 0);
  if (tdir >= 0)
    tree = (int) syscall (SYS_open_tree, tdir, name,
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
  if (tree < 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "snapshot `%s` not found", name);
  userns = idmap_userns (base, err);
  if (userns < 0)
    return -1;
  memset (&attr, 0, sizeof attr);
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  attr.userns_fd = (uint64_t) userns;
  if (syscall (SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
    return sbx_err_sys (err, errno, "idmap snapshot `%s`", name);
  /* Attached in the sandbox's own mount namespace (overlayfs clones its
     layers, and only mounts of the mounter's namespace may be), at the
     place init builds its root later: init takes it first. */
  {
    int keep[] = {pidfd, tree};
    pid = sbx_helper_fork (keep, 2);
  }
  if (pid == 0)
    _exit (setns (pidfd, CLONE_NEWNS) < 0 || chdir ("/") < 0
                   || syscall (SYS_move_mount, tree, "", AT_FDCWD, "/tmp", MOVE_MOUNT_F_EMPTY_PATH)
                          < 0
               ? 1
               : 0);
  if (pid < 0)
    return sbx_err_sys (err, errno, "fork");
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return sbx_err (err, SBX_E_SYSTEM, "attach snapshot `%s` in the sandbox", name);
  return 0;
}
