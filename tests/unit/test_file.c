/* Unit tests for src/util/file.c: small writes, rm -r that never
 * follows a link and is not stopped by a directory's mode, and a tree's
 * sizes (never through a link, within its depth). */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "util/file.h"

static int
test_write_small (void)
{
  char dir[] = "/tmp/sbx-test-file-XXXXXX";
  char *back;
  size_t len = 0;
  int d;

  CHECK (mkdtemp (dir) != NULL);
  d = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK (d >= 0);
  CHECK (sbx_write_small_at (d, "f", "hello", 5, 0640) == 0);
  back = sbx_read_small_at (d, "f", 100, &len);
  CHECK (back != NULL && len == 5 && memcmp (back, "hello", 5) == 0);
  free (back);
  /* A final link is not followed. */
  CHECK (symlinkat ("/etc/passwd", d, "l") == 0);
  CHECK (sbx_write_small_at (d, "l", "x", 1, 0600) < 0 && errno == ELOOP);
  CHECK (sbx_remove_tree_at (AT_FDCWD, dir, 10) == 0);
  close (d);
  return 0;
}

static int
test_remove_tree (void)
{
  char dir[] = "/tmp/sbx-test-file-XXXXXX", path[4096], outside[] = "/tmp/sbx-test-keep-XXXXXX";
  struct stat st;
  int i, n;

  CHECK (mkdtemp (dir) != NULL && mkdtemp (outside) != NULL);
  /* Deep, with files at each level. */
  n = snprintf (path, sizeof path, "%s", dir);
  for (i = 0; i < 50; i++)
    {
      n += snprintf (path + n, sizeof path - (size_t) n, "/d");
      CHECK (mkdir (path, 0755) == 0);
    }
  /* Links to outside, to a directory and to a file: never followed. */
  snprintf (path, sizeof path, "%s/d/to-dir", dir);
  CHECK (symlink (outside, path) == 0);
  snprintf (path, sizeof path, "%s/keep", outside);
  CHECK (close (open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == 0);
  /* A directory whose mode lets no one in (root removes it anyway). */
  snprintf (path, sizeof path, "%s/closed", dir);
  CHECK (mkdir (path, 0755) == 0);
  snprintf (path, sizeof path, "%s/closed/f", dir);
  CHECK (close (open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == 0);
  snprintf (path, sizeof path, "%s/closed", dir);
  CHECK (chmod (path, 0) == 0);
  /* Many entries in one directory (removed across several passes). */
  for (i = 0; i < 2000; i++)
    {
      snprintf (path, sizeof path, "%s/d/f%04d", dir, i);
      CHECK (close (open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == 0);
    }
  CHECK (sbx_remove_tree_at (AT_FDCWD, dir, 100) == 0);
  CHECK (lstat (dir, &st) < 0 && errno == ENOENT);
  snprintf (path, sizeof path, "%s/keep", outside);
  CHECK (stat (path, &st) == 0);
  /* Gone already: not an error. */
  CHECK (sbx_remove_tree_at (AT_FDCWD, dir, 100) == 0);
  CHECK (sbx_remove_tree_at (AT_FDCWD, outside, 100) == 0);
  return 0;
}

static int
test_tree_sizes (void)
{
  char dir[] = "/tmp/sbx-test-file-XXXXXX";
  uint64_t content = 1, disk = 0, shallow = 0;
  int d;

  CHECK (mkdtemp (dir) != NULL);
  d = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK (d >= 0);
  CHECK (sbx_write_small_at (d, "a", "12345", 5, 0600) == 0);
  CHECK (mkdirat (d, "sub", 0700) == 0);
  CHECK (mkdirat (d, "sub/deeper", 0700) == 0);
  CHECK (sbx_write_small_at (d, "sub/b", "123", 3, 0600) == 0);
  CHECK (sbx_write_small_at (d, "sub/deeper/c", "1234567", 7, 0600) == 0);
  /* links count as themselves: /etc and /etc/passwd are not walked */
  CHECK (symlinkat ("/etc", d, "sub/etc") == 0);
  CHECK (symlinkat ("/etc/passwd", d, "passwd") == 0);
  sbx_tree_sizes (d, 256, &content, &disk);
  CHECK (content == 15);
  CHECK (disk > 0);
  /* depth 0: the top directory's entries only */
  sbx_tree_sizes (d, 0, &shallow, NULL);
  CHECK (shallow == 5);
  sbx_tree_sizes (d, 256, NULL, NULL);
  CHECK (sbx_remove_tree_at (AT_FDCWD, dir, 16) == 0);
  close (d);
  return 0;
}

int
main (void)
{
  RUN (test_write_small);
  RUN (test_remove_tree);
  RUN (test_tree_sizes);
  return tap_done ();
}
