/* sbx: the recipe build cache (--template-cache, default
 * STATE/templates/cache): built debootstrap and command layers by recipe
 * hash, which a rebuild copies instead of running debootstrap again
 * (tmpl_recipe.c). Removing a template keeps them, as docker's image
 * removal keeps its build cache; `sbx template prune` (DELETE
 * /v1/template-cache) empties it.
 *
 * The cache may be shared by daemons, and a build copies from it and into
 * it while it runs. A build holds a shared flock on the cache directory
 * for as long as it uses it; a prune takes the exclusive lock without
 * waiting, and refuses while any build (of any daemon) holds it, so
 * neither ever sees the other's half-made or half-removed tree.
 */
#include "iso/tmpl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/file.h"

/* Deeper than any Debian tree; the removal's bound too. */
#define CACHE_MAX_DEPTH 256

int
sbx_tmpl_cache_hold (const char *cache_dir)
{
  int fd;

  if (cache_dir[0] == '\0')
    return -1;
  if (mkdir (cache_dir, 0700) < 0 && errno != EEXIST)
    return -1;
  fd = open (cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  while (flock (fd, LOCK_SH) < 0)
    if (errno != EINTR)
      {
        close (fd);
        return -1;
      }
  return fd;
}

/* The cache directory, open, locked as `how` (LOCK_SH, or LOCK_EX |
   LOCK_NB); -2 when it does not exist (an empty cache). */
static int
open_locked (const char *cache_dir, int how, sbx_error_t **err)
{
  int fd = open (cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int rc;

  if (fd < 0 && errno == ENOENT)
    return -2;
  if (fd < 0)
    return sbx_err_sys (err, errno, "the recipe cache `%s`", cache_dir);

  while ((rc = flock (fd, how)) < 0 && errno == EINTR)
    ;
  if (rc < 0)
    {
      int e = errno;
      close (fd);
      if (e == EWOULDBLOCK)
        return sbx_err (err, SBX_E_CONFLICT,
                        "a recipe build is using the cache `%s` now (this daemon's or another's "
                        "on the same cache); prune when it ends",
                        cache_dir);
      return sbx_err_sys (err, e, "lock the recipe cache `%s`", cache_dir);
    }
  return fd;
}

static int
walk (const char *cache_dir, int prune, struct sbx_tmpl_cache_usage *u, sbx_error_t **err)
{
  /* a prune does not wait for builds; a look waits for a prune */
  int fd = open_locked (cache_dir, prune ? LOCK_EX | LOCK_NB : LOCK_SH, err);
  struct dirent *de;
  DIR *d;

  memset (u, 0, sizeof *u);
  if (fd == -2)
    return 0;
  if (fd < 0)
    return -1;
  d = fdopendir (fd);
  if (d == NULL)
    {
      close (fd);
      return sbx_err_sys (err, errno, "read the recipe cache `%s`", cache_dir);
    }
  /* The lock is the open directory's: it lasts until closedir. */
  while ((de = readdir (d)) != NULL)
    {
      struct stat st;
      uint64_t bytes;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
          || fstatat (fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      bytes = (uint64_t) st.st_blocks * 512;
      if (S_ISDIR (st.st_mode))
        {
          cleanup_close int sub
              = openat (fd, de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0)
            {
              uint64_t disk;
              sbx_tree_sizes (sub, CACHE_MAX_DEPTH, NULL, &disk);
              bytes += disk;
            }
        }
      /* KEY: a build; .tmp-KEY-PID: a copy a crashed build left (none is
         in progress while we hold the exclusive lock) */
      if (prune && sbx_remove_tree_at (fd, de->d_name, CACHE_MAX_DEPTH) < 0)
        {
          int e = errno;
          closedir (d);
          return sbx_err_sys (err, e, "remove `%s` from the recipe cache (%u removed before it)",
                              de->d_name, u->entries);
        }
      u->entries++;
      u->bytes += bytes;
    }
  closedir (d);
  return 0;
}

int
sbx_tmpl_cache_usage (const char *cache_dir, struct sbx_tmpl_cache_usage *u, sbx_error_t **err)
{
  return walk (cache_dir, 0, u, err);
}

int
sbx_tmpl_cache_prune (const char *cache_dir, struct sbx_tmpl_cache_usage *removed,
                      sbx_error_t **err)
{
  return walk (cache_dir, 1, removed, err);
}
