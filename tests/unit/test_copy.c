/* Unit tests for src/iso/copy.c and the snapshot store's names: the copier
 * as root on a tree in a temporary directory, owners in one id range
 * (SRC + k), copied into another (DST + k). Needs root (chown); skipped
 * otherwise. */
#include "iso/copy.h"
#include "iso/snapstore.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#define SRC 0x70000000u
#define DST 0x70010000u

static char tmp[64];

static int
rm_one (const char *p, const struct stat *st, int flag, struct FTW *f)
{
  (void) st;
  (void) flag;
  (void) f;
  return remove (p);
}

static int
setup (int *src, int *dst)
{
  snprintf (tmp, sizeof tmp, "/tmp/sbx-copy-XXXXXX");
  if (mkdtemp (tmp) == NULL || chdir (tmp) < 0 || mkdir ("src", 0755) < 0
      || mkdir ("dst", 0755) < 0)
    return -1;
  if (chown ("src", SRC + 1000, SRC + 1000) < 0)
    return -1;
  *src = open ("src", O_RDONLY | O_DIRECTORY);
  *dst = open ("dst", O_RDONLY | O_DIRECTORY);
  return *src >= 0 && *dst >= 0 ? 0 : -1;
}

static void
teardown (void)
{
  if (chdir ("/") == 0)
    nftw (tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int
put (const char *path, const char *data, mode_t mode, uid_t uid)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd < 0 || write (fd, data, strlen (data)) != (ssize_t) strlen (data))
    return -1;
  close (fd);
  return chown (path, uid, uid) == 0 && chmod (path, mode) == 0 ? 0 : -1;
}

static int
test_owners_modes_links_specials (void)
{
  struct sbx_copy_result res;
  struct stat st;
  char buf[64];
  int src, dst;
  ssize_t n;

  if (geteuid () != 0)
    return 77;
  CHECK (setup (&src, &dst) == 0);
  CHECK (mkdir ("src/d", 0700) == 0 && chown ("src/d", SRC + 1000, SRC + 1000) == 0);
  CHECK (put ("src/d/f", "hello", 0640, SRC + 1000) == 0);
  CHECK (put ("src/rootfile", "r", 04755, SRC) == 0);
  CHECK (symlink ("/etc/shadow", "src/shadow") == 0);
  CHECK (lchown ("src/shadow", SRC + 1000, SRC + 1000) == 0);
  CHECK (mkfifo ("src/fifo", 0600) == 0 && chown ("src/fifo", SRC + 1000, SRC + 1000) == 0);
  memset (&res, 0, sizeof res);
  sbx_copy_tree_now (src, dst, SRC, DST, NULL, &res);
  CHECK (res.sys_errno == 0);
  CHECK (res.files == 2 && res.dirs == 1 && res.symlinks == 1 && res.skipped == 1);
  CHECK (res.bytes == 6);
  CHECK (stat ("dst/d/f", &st) == 0 && st.st_uid == DST + 1000 && (st.st_mode & 07777) == 0640);
  CHECK (stat ("dst/d", &st) == 0 && st.st_uid == DST + 1000 && (st.st_mode & 07777) == 0700);
  CHECK (stat ("dst/rootfile", &st) == 0 && st.st_uid == DST && (st.st_mode & 07777) == 04755);
  CHECK (lstat ("dst/shadow", &st) == 0 && S_ISLNK (st.st_mode) && st.st_uid == DST + 1000);
  n = readlink ("dst/shadow", buf, sizeof buf - 1);
  CHECK (n == 11 && memcmp (buf, "/etc/shadow", 11) == 0);
  CHECK (lstat ("dst/fifo", &st) < 0 && errno == ENOENT);
  CHECK (stat ("dst", &st) == 0 && st.st_uid == DST + 1000);
  teardown ();
  return 0;
}

/* The target already holds some names (a fresh sandbox's own server
   wrote them): directories are copied into, files and links replaced by
   the source's, a link never followed; a directory where the source has
   a file stops the copy, naming it. */
static int
test_names_in_the_target_are_the_sources (void)
{
  struct sbx_copy_result res;
  struct stat st;
  char buf[64];
  int src, dst, fd;
  ssize_t n;

  if (geteuid () != 0)
    return 77;
  CHECK (setup (&src, &dst) == 0);
  CHECK (mkdir ("src/.cache", 0700) == 0 && chown ("src/.cache", SRC + 1000, SRC + 1000) == 0);
  CHECK (put ("src/.cache/mine", "source", 0600, SRC + 1000) == 0);
  CHECK (put ("src/f", "source f", 0644, SRC + 1000) == 0);
  CHECK (put ("src/was_link", "data", 0644, SRC + 1000) == 0);
  CHECK (symlink ("f", "src/l") == 0 && lchown ("src/l", SRC + 1000, SRC + 1000) == 0);
  CHECK (mkdir ("src/was_file", 0755) == 0 && chown ("src/was_file", SRC + 1000, SRC + 1000) == 0);
  /* The target's own. */
  CHECK (mkdir ("dst/.cache", 0755) == 0 && put ("dst/.cache/theirs", "t", 0600, DST + 1000) == 0);
  CHECK (put ("dst/.cache/mine", "target's", 0600, DST + 1000) == 0);
  CHECK (put ("dst/f", "target's f, longer", 0600, DST + 1000) == 0);
  CHECK (put ("outside", "host", 0600, 0) == 0);
  CHECK (symlink ("../outside", "dst/was_link") == 0);
  CHECK (symlink ("elsewhere", "dst/l") == 0);
  CHECK (put ("dst/was_file", "x", 0600, DST + 1000) == 0);
  memset (&res, 0, sizeof res);
  sbx_copy_tree_now (src, dst, SRC, DST, NULL, &res);
  CHECK (res.sys_errno == 0);
  fd = open ("dst/.cache/mine", O_RDONLY);
  CHECK (fd >= 0 && (n = read (fd, buf, sizeof buf)) == 6 && memcmp (buf, "source", 6) == 0);
  close (fd);
  CHECK (stat ("dst/.cache/theirs", &st) == 0);
  CHECK (stat ("dst/.cache", &st) == 0 && (st.st_mode & 07777) == 0700 && st.st_uid == DST + 1000);
  CHECK (stat ("dst/f", &st) == 0 && st.st_size == 8 && (st.st_mode & 07777) == 0644);
  /* The link was replaced, not written through: the host's file is as it was. */
  CHECK (lstat ("dst/was_link", &st) == 0 && S_ISREG (st.st_mode) && st.st_size == 4);
  fd = open ("outside", O_RDONLY);
  CHECK (fd >= 0 && (n = read (fd, buf, sizeof buf)) == 4 && memcmp (buf, "host", 4) == 0);
  close (fd);
  n = readlink ("dst/l", buf, sizeof buf - 1);
  CHECK (n == 1 && buf[0] == 'f');
  CHECK (stat ("dst/was_file", &st) == 0 && S_ISDIR (st.st_mode));
  teardown ();

  /* A directory of the target where the source has a file: not emptied. */
  CHECK (setup (&src, &dst) == 0);
  CHECK (put ("src/name", "file", 0644, SRC + 1000) == 0);
  CHECK (mkdir ("dst/name", 0755) == 0 && put ("dst/name/kept", "k", 0600, DST + 1000) == 0);
  memset (&res, 0, sizeof res);
  sbx_copy_tree_now (src, dst, SRC, DST, NULL, &res);
  CHECK (res.sys_errno == EISDIR);
  CHECK (strstr (res.what, "is a directory in the target") != NULL);
  CHECK (stat ("dst/name/kept", &st) == 0);
  teardown ();
  return 0;
}

static int
test_foreign_owner_stops (void)
{
  struct sbx_copy_result res;
  int src, dst;

  if (geteuid () != 0)
    return 77;
  CHECK (setup (&src, &dst) == 0);
  CHECK (put ("src/host", "x", 0644, 0) == 0); /* host root: not the sandbox's */
  memset (&res, 0, sizeof res);
  sbx_copy_tree_now (src, dst, SRC, DST, NULL, &res);
  CHECK (res.sys_errno == EPERM);
  CHECK (strstr (res.what, "outside the sandbox's ids") != NULL);
  teardown ();
  return 0;
}

/* A sparse file stays sparse (the red team's attack: a sandbox using
   4 KiB made snapshots write gigabytes of zeros to the host), its size
   and its data intact; the data cap and the per-file bound refuse what
   is more than the source's disk could hold, with TOO_LARGE. */
static int
test_holes_kept_and_bounds (void)
{
  struct sbx_copy_result res;
  struct sbx_copy_limits lim = {0, 0};
  sbx_error_t *err = NULL;
  struct sbx_copy_job job;
  struct stat st;
  char buf[8];
  int src, dst, fd;

  if (geteuid () != 0)
    return 77;
  CHECK (setup (&src, &dst) == 0);
  fd = open ("src/sparse", O_WRONLY | O_CREAT, 0644);
  CHECK (fd >= 0 && fchown (fd, SRC, SRC) == 0);
  /* 8 GiB apparent, 2 blocks of data: one at 1 GiB, one at the end. */
  CHECK (pwrite (fd, "middle", 6, 1LL << 30) == 6);
  CHECK (pwrite (fd, "end", 3, (8LL << 30) - 3) == 3);
  close (fd);
  memset (&res, 0, sizeof res);
  sbx_copy_tree_now (src, dst, SRC, DST, NULL, &res);
  CHECK (res.sys_errno == 0);
  CHECK (stat ("dst/sparse", &st) == 0 && st.st_size == 8LL << 30);
  CHECK (st.st_blocks * 512 < (1 << 20)); /* not 8 GiB of zeros */
  CHECK (res.bytes < (1 << 20));
  fd = open ("dst/sparse", O_RDONLY);
  CHECK (fd >= 0 && pread (fd, buf, 6, 1LL << 30) == 6 && memcmp (buf, "middle", 6) == 0);
  CHECK (pread (fd, buf, 3, (8LL << 30) - 3) == 3 && memcmp (buf, "end", 3) == 0);
  CHECK (pread (fd, buf, 4, 4096) == 4 && memcmp (buf, "\0\0\0\0", 4) == 0);
  close (fd);
  CHECK (unlink ("dst/sparse") == 0);
  /* A data cap below what is there: refused, too large. */
  lim.max_bytes = 4096;
  fd = open ("src/data", O_WRONLY | O_CREAT, 0644);
  CHECK (fd >= 0 && fchown (fd, SRC, SRC) == 0);
  memset (buf, 'x', sizeof buf);
  for (int i = 0; i < 2048; i++)
    CHECK (write (fd, buf, sizeof buf) == sizeof buf);
  close (fd);
  job.src = src;
  job.dst = dst;
  CHECK (sbx_copy_run (&job, 1, SRC, DST, &lim, NULL, NULL, &res, &err) == -1);
  CHECK (err->kind == SBX_E_TOO_LARGE && strstr (err->msg, "more data than") != NULL);
  sbx_error_free (err);
  err = NULL;
  teardown ();
  /* A file larger than the target's disk (RLIMIT_FSIZE in the copier). */
  CHECK (setup (&src, &dst) == 0);
  fd = open ("src/big", O_WRONLY | O_CREAT, 0644);
  CHECK (fd >= 0 && fchown (fd, SRC, SRC) == 0 && ftruncate (fd, 1LL << 40) == 0);
  close (fd);
  lim.max_bytes = 0;
  lim.max_file = 1 << 30;
  job.src = src;
  job.dst = dst;
  CHECK (sbx_copy_run (&job, 1, SRC, DST, &lim, NULL, NULL, &res, &err) == -1);
  CHECK (err->kind == SBX_E_TOO_LARGE && strstr (err->msg, "larger than the target") != NULL);
  sbx_error_free (err);
  teardown ();
  return 0;
}

static int
test_depth_bound (void)
{
  struct sbx_copy_result res;
  sbx_error_t *err = NULL;
  struct sbx_copy_job job;
  char path[1024] = "src";
  int src, dst, i;

  if (geteuid () != 0)
    return 77;
  CHECK (setup (&src, &dst) == 0);
  for (i = 0; i < 140; i++)
    {
      size_t len = strlen (path);
      snprintf (path + len, sizeof path - len, "/d");
      CHECK (mkdir (path, 0755) == 0 && chown (path, SRC, SRC) == 0);
    }
  job.src = src;
  job.dst = dst;
  CHECK (sbx_copy_run (&job, 1, SRC, DST, NULL, NULL, NULL, &res, &err) == -1);
  CHECK (err->kind == SBX_E_INVALID && strstr (err->msg, "deeper than 128") != NULL);
  sbx_error_free (err);
  teardown ();
  return 0;
}

static int
test_snapshot_names (void)
{
  CHECK (sbx_snapshot_name_valid ("deps-1.2_x"));
  CHECK (sbx_snapshot_name_valid ("a"));
  CHECK (!sbx_snapshot_name_valid (""));
  CHECK (!sbx_snapshot_name_valid ("."));
  CHECK (!sbx_snapshot_name_valid (".."));
  CHECK (!sbx_snapshot_name_valid (".hidden"));
  CHECK (!sbx_snapshot_name_valid ("-opt"));
  CHECK (!sbx_snapshot_name_valid ("a/b"));
  CHECK (!sbx_snapshot_name_valid ("a b"));
  CHECK (!sbx_snapshot_name_valid ("\xc3\xa9"));
  CHECK (sbx_snapshot_name_valid ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
  CHECK (!sbx_snapshot_name_valid ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
  return 0;
}

int
main (void)
{
  RUN (test_owners_modes_links_specials);
  RUN (test_names_in_the_target_are_the_sources);
  RUN (test_foreign_owner_stops);
  RUN (test_holes_kept_and_bounds);
  RUN (test_depth_bound);
  RUN (test_snapshot_names);
  return tap_done ();
}
