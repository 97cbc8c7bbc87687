/* sbx: small whole-file reads and writes, and removing a tree. */
#include "util/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

char *
sbx_read_small_at (int dir, const char *name, size_t cap, size_t *len)
{
  cleanup_close int fd = openat (dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  char *buf;

  if (fd < 0 || fstat (fd, &st) < 0)
    return NULL;
  if (!S_ISREG (st.st_mode) || (size_t) st.st_size > cap)
    {
      errno = S_ISREG (st.st_mode) ? EFBIG : EINVAL;
      return NULL;
    }
  buf = malloc ((size_t) st.st_size + 1);
  if (buf == NULL)
    return NULL;
  /* Short reads are an error too: these files are written whole. */
  if (read (fd, buf, (size_t) st.st_size) != st.st_size)
    {
      free (buf);
      errno = EIO;
      return NULL;
    }
  buf[st.st_size] = '\0';
  if (len)
    *len = (size_t) st.st_size;
  return buf;
}

int
sbx_write_small_at (int dir, const char *name, const void *data, size_t len, mode_t mode)
{
  cleanup_close int fd
      = openat (dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return -1;
  if (write (fd, data, len) != (ssize_t) len)
    {
      if (errno == 0)
        errno = EIO;
      return -1;
    }
  return fchmod (fd, mode);
}

int
sbx_seal_memfd (int fd, unsigned int seals)
{
  long wait_ms = 5;

  for (int tries = 0;; tries++)
    {
      struct timespec pause;
      if (fcntl (fd, F_ADD_SEALS, seals) == 0)
        return 0;
      if (errno != EBUSY || tries == 100)
        return -1;
      pause.tv_sec = 0;
      pause.tv_nsec = wait_ms * 1000 * 1000;
      nanosleep (&pause, NULL);
      if (wait_ms < 100)
        wait_ms *= 2;
    }
}

DIR *
sbx_opendir_at (int dir, const char *name)
{
  int fd = openat (dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d;

  if (fd < 0)
    return NULL;
  d = fdopendir (fd);
  if (d == NULL)
    {
      int e = errno;
      close (fd);
      errno = e;
    }
  return d;
}

static void
remove_below (int dir, const char *name, unsigned depth, unsigned max_depth)
{
  struct dirent *de;
  DIR *d;
  int fd, found = 1;

  if (depth > max_depth)
    return;
  fd = openat (dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return;
  d = fdopendir (fd);
  if (d == NULL)
    {
      close (fd);
      return;
    }
  /* Passes until one finds nothing but . and .. (an entry removed during
     a pass may make the kernel skip another). */
  for (int passes = 0; found && passes < 64; passes++)
    {
      found = 0;
      rewinddir (d);
      while ((de = readdir (d)) != NULL)
        {
          if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
          found = 1;
          if (unlinkat (dirfd (d), de->d_name, 0) < 0 && (errno == EISDIR || errno == EPERM))
            {
              remove_below (dirfd (d), de->d_name, depth + 1, max_depth);
              unlinkat (dirfd (d), de->d_name, AT_REMOVEDIR);
            }
        }
    }
  closedir (d);
}

int
sbx_remove_tree_at (int dir, const char *name, unsigned max_depth)
{
  if (unlinkat (dir, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -1;
  remove_below (dir, name, 0, max_depth);
  if (unlinkat (dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
    return 0;
  return -1;
}

static void
tree_sizes (int dir, unsigned depth_left, uint64_t *content, uint64_t *disk)
{
  struct dirent *de;
  DIR *d = sbx_opendir_at (dir, ".");

  if (d == NULL)
    return;
  while ((de = readdir (d)) != NULL)
    {
      struct stat st;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
          || fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      *disk += (uint64_t) st.st_blocks * 512;
      if (S_ISREG (st.st_mode))
        *content += (uint64_t) st.st_size;
      else if (S_ISDIR (st.st_mode) && depth_left > 0)
        {
          int sub = openat (dirfd (d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0)
            {
              tree_sizes (sub, depth_left - 1, content, disk);
              close (sub);
            }
        }
    }
  closedir (d);
}

void
sbx_tree_sizes (int dir, unsigned max_depth, uint64_t *content, uint64_t *disk)
{
  uint64_t c = 0, k = 0;

  tree_sizes (dir, max_depth, &c, &k);
  if (content)
    *content = c;
  if (disk)
    *disk = k;
}
