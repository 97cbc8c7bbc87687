/* Unit tests for src/iso/fs.c: the files API's path rules, run as real
 * file operations.
 *
 * Each test builds a fake sandbox root in a fresh temporary directory T:
 *
 *   T/canary, T/canary-dir/inside   the "host": must never be read or written
 *   T/root/                         the sandbox's "/" (opened O_PATH)
 *     etc/passwd, home/user/hello.txt, tmp/ (01777)
 *     home/user/{to-root, up, way-up, rel-canary, abs-canary, ...}
 *                                   symlinks aimed at "/", "..", and at T
 *
 * and calls the public functions with a context whose uid_base, uid and gid
 * are 0 (permission checks pass as root), or 1000 where the sandbox user's
 * permissions are the point. Every test runs in a mount namespace of its
 * own with private propagation (tests mount tmpfs and procfs inside the
 * root), and checks afterwards that T holds exactly what it held before.
 */
#include "iso/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))
#define USER 1000
#define OTHER 2000 /* another user of the sandbox */

static char tmp[64];     /* T */
static char rootdir[96]; /* T/root */
static struct sbx_fs_ctx ctx;  /* as root */
static struct sbx_fs_ctx user; /* as uid/gid 1000 */
static char mounts[4][4096];
static int n_mounts;

/*============================ The tree ================================= */

static int
write_file_mode (const char *path, const char *content, mode_t mode)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  size_t n = strlen (content);

  if (fd < 0)
    return -1;
  if (write (fd, content, n) != (ssize_t) n || fchmod (fd, mode) < 0)
    {
      close (fd);
      return -1;
    }
  return close (fd);
}

static int
write_file (const char *path, const char *content)
{
  return write_file_mode (path, content, 0644);
}

/* T/root/<rel> into buf. */
static const char *
in_root (char *buf, size_t cap, const char *rel)
{
  snprintf (buf, cap, "%s/%s", rootdir, rel);
  return buf;
}

/* Content of a host file, or NULL (buf static: one at a time). */
static const char *
slurp (const char *path)
{
  static char buf[4096];
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  ssize_t n;

  if (fd < 0)
    return NULL;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n < 0)
    return NULL;
  buf[n] = '\0';
  return buf;
}

static const char *
slurp_root (const char *rel)
{
  char path[4096];
  return slurp (in_root (path, sizeof path, rel));
}

static int
exists_root (const char *rel)
{
  char path[4096];
  struct stat st;
  return lstat (in_root (path, sizeof path, rel), &st) == 0;
}

static int
lstat_root (const char *rel, struct stat *st)
{
  char path[4096];
  return lstat (in_root (path, sizeof path, rel), st);
}

static int
symlink_root (const char *target, const char *rel)
{
  char path[4096];
  return symlink (target, in_root (path, sizeof path, rel));
}

static int
mkdir_root (const char *rel, mode_t mode)
{
  char path[4096];
  if (mkdir (in_root (path, sizeof path, rel), mode) < 0)
    return -1;
  return chmod (path, mode);
}

static int
file_root (const char *rel, const char *content)
{
  char path[4096];
  return write_file (in_root (path, sizeof path, rel), content);
}

/* Mount a tmpfs (or procfs) at T/root/<rel>, remembered for teardown. */
static int
mount_root (const char *type, const char *rel, const char *options)
{
  char *path = mounts[n_mounts];

  if (n_mounts >= (int) ARRAY_SIZE (mounts))
    return -1;
  snprintf (path, sizeof mounts[0], "%s/%s", rootdir, rel);
  if (mount (type, path, type, MS_NOSUID | MS_NODEV, options) < 0)
    {
      fprintf (stderr, "#   mount %s at %s: %s\n", type, path, strerror (errno));
      return -1;
    }
  n_mounts++;
  return 0;
}

/* Entry names of a host directory, sorted, joined by ' '. */
static const char *
dir_names (const char *path)
{
  static char out[1024];
  struct dirent **names;
  int n = scandir (path, &names, NULL, alphasort);

  out[0] = '\0';
  if (n < 0)
    return NULL;
  for (int i = 0; i < n; i++)
    {
      if (strcmp (names[i]->d_name, ".") != 0 && strcmp (names[i]->d_name, "..") != 0)
        {
          if (out[0])
            strncat (out, " ", sizeof out - strlen (out) - 1);
          strncat (out, names[i]->d_name, sizeof out - strlen (out) - 1);
        }
      free (names[i]);
    }
  free (names);
  return out;
}

static int
names_are (const char *path, const char *want)
{
  const char *names = dir_names (path);
  return names != NULL && strcmp (names, want) == 0;
}

/* The host side of T is exactly as setup left it. */
static int
host_untouched (void)
{
  char path[128];
  const char *s;

  s = dir_names (tmp);
  if (s == NULL || strcmp (s, "canary canary-dir root") != 0)
    {
      fprintf (stderr, "#   T holds `%s`\n", s ? s : "(unreadable)");
      return -1;
    }
  snprintf (path, sizeof path, "%s/canary-dir", tmp);
  s = dir_names (path);
  if (s == NULL || strcmp (s, "inside") != 0)
    {
      fprintf (stderr, "#   T/canary-dir holds `%s`\n", s ? s : "(unreadable)");
      return -1;
    }
  snprintf (path, sizeof path, "%s/canary", tmp);
  s = slurp (path);
  if (s == NULL || strcmp (s, "host canary\n") != 0)
    return -1;
  snprintf (path, sizeof path, "%s/canary-dir/inside", tmp);
  s = slurp (path);
  if (s == NULL || strcmp (s, "host inside\n") != 0)
    return -1;
  return 0;
}

static int
setup (void)
{
  char path[256], target[160];

  umask (022);
  /* Our mounts stay in this test's process. */
  if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    {
      perror ("#   private mount namespace");
      return -1;
    }
  snprintf (tmp, sizeof tmp, "/tmp/sbx-test-fs-XXXXXX");
  if (mkdtemp (tmp) == NULL)
    return -1;
  snprintf (rootdir, sizeof rootdir, "%s/root", tmp);
  snprintf (path, sizeof path, "%s/canary", tmp);
  if (write_file (path, "host canary\n") < 0)
    return -1;
  snprintf (path, sizeof path, "%s/canary-dir", tmp);
  if (mkdir (path, 0755) < 0)
    return -1;
  snprintf (path, sizeof path, "%s/canary-dir/inside", tmp);
  if (write_file (path, "host inside\n") < 0)
    return -1;

  if (mkdir (rootdir, 0755) < 0 || mkdir_root ("etc", 0755) < 0 || mkdir_root ("home", 0755) < 0
      || mkdir_root ("home/user", 0755) < 0 || mkdir_root ("tmp", 01777) < 0
      || file_root ("etc/passwd", "sandbox passwd\n") < 0
      || file_root ("home/user/hello.txt", "hello\n") < 0)
    return -1;
  if (chown (in_root (path, sizeof path, "home/user"), USER, USER) < 0
      || chown (in_root (path, sizeof path, "home/user/hello.txt"), USER, USER) < 0)
    return -1;
  snprintf (target, sizeof target, "%s/canary", tmp);
  if (symlink_root ("/", "home/user/to-root") < 0 || symlink_root ("../../..", "home/user/up") < 0
      || symlink_root ("../../../../../../../..", "home/user/way-up") < 0
      || symlink_root ("../../../canary", "home/user/rel-canary") < 0
      || symlink_root (target, "home/user/abs-canary") < 0
      || symlink_root ("../../../canary-dir", "home/user/rel-canary-dir") < 0
      || symlink_root ("nowhere", "home/user/dangling") < 0)
    return -1;
  snprintf (target, sizeof target, "%s/canary-dir", tmp);
  if (symlink_root (target, "home/user/abs-canary-dir") < 0 || symlink_root (tmp, "escape") < 0)
    return -1;

  memset (&ctx, 0, sizeof ctx);
  ctx.root = open (rootdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (ctx.root < 0)
    return -1;
  user = ctx;
  user.uid = USER;
  user.gid = USER;
  return host_untouched ();
}

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st;
  (void) flag;
  (void) ftw;
  return remove (path);
}

static void
teardown (void)
{
  while (n_mounts > 0)
    umount2 (mounts[--n_mounts], MNT_DETACH);
  if (ctx.root >= 0)
    close (ctx.root);
  ctx.root = -1;
  if (tmp[0])
    nftw (tmp, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  tmp[0] = '\0';
}

/* Build the tree, run the test, check the host side, clean up. */
static int
with_tree (int (*body) (void))
{
  int rc = setup ();

  if (rc == 0)
    rc = body ();
  if (rc == 0 && host_untouched () < 0)
    {
      fprintf (stderr, "#   the host side of the tree changed\n");
      rc = -1;
    }
  teardown ();
  return rc;
}

#define TREE_TEST(name)                                                        \
  static int name##_in_tree (void);                                            \
  static int name (void) { return with_tree (name##_in_tree); }                \
  static int name##_in_tree (void)

/* rc must be -1 with an error of `kind`; the error is freed. */
static int
failed_with (int rc, sbx_error_t **err, enum sbx_error_kind kind, int sys_errno)
{
  int ok = rc == -1 && *err != NULL && (*err)->kind == kind
           && (sys_errno < 0 || (*err)->sys_errno == sys_errno);

  if (!ok)
    fprintf (stderr, "#   rc %d, error: kind %d errno %d `%s` (want kind %d errno %d)\n", rc,
             *err ? (int) (*err)->kind : 0, *err ? (*err)->sys_errno : 0,
             *err ? (*err)->msg : "(none)", (int) kind, sys_errno);
  sbx_error_free (*err);
  *err = NULL;
  return ok ? 0 : -1;
}

#define CHECK_FAILS(call, kind, e)                                             \
  do                                                                           \
    {                                                                          \
      sbx_error_t *err_ = NULL;                                                \
      int rc_ = (call);                                                        \
      if (rc_ >= 0)                                                            \
        close_if_fd (rc_);                                                     \
      if (failed_with (rc_ < 0 ? -1 : rc_, &err_, kind, e) < 0)                \
        {                                                                      \
          fprintf (stderr, "#   %s:%d: %s\n", __FILE__, __LINE__, #call);      \
          return -1;                                                           \
        }                                                                      \
    }                                                                          \
  while (0)
#define CHECK_OK(call)                                                         \
  do                                                                           \
    {                                                                          \
      sbx_error_t *err_ = NULL;                                                \
      if ((call) < 0)                                                          \
        {                                                                      \
          fprintf (stderr, "#   %s:%d: %s: %s\n", __FILE__, __LINE__, #call,   \
                   err_ ? err_->msg : "failed without an error");              \
          sbx_error_free (err_);                                               \
          return -1;                                                           \
        }                                                                      \
      CHECK (err_ == NULL);                                                    \
    }                                                                          \
  while (0)

/* open_read returns an fd: one that "succeeds" when it should not is
   closed before the check reports it. */
static void
close_if_fd (int rc)
{
  if (rc > 2)
    close (rc);
}

/* The whole content of an fd from open_read. */
static const char *
read_fd (int fd)
{
  static char buf[4096];
  size_t got = 0;
  ssize_t n;

  while ((n = read (fd, buf + got, sizeof buf - 1 - got)) > 0)
    got += (size_t) n;
  close (fd);
  buf[got] = '\0';
  return n < 0 ? NULL : buf;
}

/* open_read + read_fd; NULL on failure (error freed). */
static const char *
read_path (const struct sbx_fs_ctx *c, const char *path)
{
  sbx_error_t *err = NULL;
  uint64_t size = 0;
  int fd = sbx_fs_open_read (c, path, &size, &err);

  if (fd < 0)
    {
      sbx_error_free (err);
      return NULL;
    }
  return read_fd (fd);
}

static int
current_fsuid (void)
{
  /* An invalid id changes nothing and returns the current one. */
  return (int) syscall (SYS_setfsuid, (uid_t) -1);
}

static int
current_fsgid (void)
{
  return (int) syscall (SYS_setfsgid, (gid_t) -1);
}

/* Upload `content` to path in one go. */
static int
upload (const struct sbx_fs_ctx *c, const char *path, const char *content, uint32_t mode,
        int parents, sbx_error_t **err)
{
  struct sbx_fs_upload up;

  if (sbx_fs_upload_begin (c, path, mode, parents, &up, err) < 0)
    return -1;
  if (sbx_fs_upload_write (&up, content, strlen (content), err) < 0)
    {
      sbx_fs_upload_abort (&up);
      return -1;
    }
  return sbx_fs_upload_commit (&up, err);
}

/* Names in T/root/<rel> that start with `prefix`. */
static int
count_prefixed (const char *rel, const char *prefix)
{
  char path[256];
  DIR *d = opendir (in_root (path, sizeof path, rel));
  struct dirent *de;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((de = readdir (d)) != NULL)
    if (strncmp (de->d_name, prefix, strlen (prefix)) == 0)
      n++;
  closedir (d);
  return n;
}

/* Upload temporaries left in T/root/<rel>. */
static int
count_temporaries (const char *rel)
{
  return count_prefixed (rel, ".sbx-upload-");
}

/* Free blocks of the filesystem holding T/root/<rel> (a tmpfs gives an
   unnamed file's blocks back when its last fd closes), or -1. */
static long long
free_blocks (const char *rel)
{
  char path[256];
  struct statvfs sv;

  if (statvfs (in_root (path, sizeof path, rel), &sv) < 0)
    return -1;
  return (long long) sv.f_bfree;
}

/* Byte i of a test pattern: a misplaced or missing block shows. */
static char
pattern_at (size_t i)
{
  return (char) ('a' + (i / 4096 + i) % 26);
}

static int
write_pattern (const char *path, size_t size, mode_t mode)
{
  char buf[4096];
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);

  if (fd < 0)
    return -1;
  for (size_t done = 0; done < size; done += sizeof buf)
    {
      size_t n = size - done < sizeof buf ? size - done : sizeof buf;
      for (size_t i = 0; i < n; i++)
        buf[i] = pattern_at (done + i);
      if (write (fd, buf, n) != (ssize_t) n)
        {
          close (fd);
          return -1;
        }
    }
  if (fchmod (fd, mode) < 0)
    {
      close (fd);
      return -1;
    }
  return close (fd);
}

/* 1 if the host file holds exactly `size` bytes of the pattern. */
static int
holds_pattern (const char *path, size_t size)
{
  char buf[4096];
  size_t done = 0;
  ssize_t n;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), ok = fd >= 0;

  while (ok && (n = read (fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; i++, done++)
      ok = ok && done < size && buf[i] == pattern_at (done);
  if (fd >= 0)
    close (fd);
  return ok && done == size;
}

/*============================ normalize ================================ */

static int
test_normalize (void)
{
  static const struct
  {
    const char *in, *out;
  } cases[] = {
    {"/", "/"},
    {"/etc/passwd", "/etc/passwd"},
    {"a", "/home/user/a"},
    {"a/b/", "/home/user/a/b/"},
    {".", "/home/user/."},
    {"..", "/home/user/.."},
    {"../../x", "/home/user/../../x"}, /* kept: resolution confines it */
    {"./x", "/home/user/./x"},
    {"//x", "//x"},
    {"/tmp/../..", "/tmp/../.."},
    {" x", "/home/user/ x"},
  };
  char out[SBX_FS_PATH_MAX];
  sbx_error_t *err = NULL;
  char *longest = malloc (SBX_FS_PATH_MAX + 1);

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      CHECK (sbx_fs_normalize (cases[i].in, out, sizeof out, &err) == 0);
      CHECK_STR (out, cases[i].out);
    }
  CHECK (failed_with (sbx_fs_normalize ("", out, sizeof out, &err), &err, SBX_E_INVALID, 0) == 0);
  CHECK (failed_with (sbx_fs_normalize (NULL, out, sizeof out, &err), &err, SBX_E_INVALID, 0)
         == 0);

  /* 4095 bytes absolute is the longest path. */
  CHECK (longest != NULL);
  memset (longest, 'a', SBX_FS_PATH_MAX + 1);
  longest[0] = '/';
  longest[SBX_FS_PATH_MAX - 1] = '\0';
  CHECK (sbx_fs_normalize (longest, out, sizeof out, &err) == 0);
  CHECK (strlen (out) == SBX_FS_PATH_MAX - 1);
  longest[SBX_FS_PATH_MAX - 1] = 'a';
  longest[SBX_FS_PATH_MAX] = '\0';
  CHECK (failed_with (sbx_fs_normalize (longest, out, sizeof out, &err), &err, SBX_E_INVALID, 0)
         == 0);
  /* Relative: "/home/user/" (11 bytes) counts too. */
  longest[1 + SBX_FS_PATH_MAX - 1 - 11] = '\0';
  CHECK (sbx_fs_normalize (longest + 1, out, sizeof out, &err) == 0);
  CHECK (strlen (out) == SBX_FS_PATH_MAX - 1);
  longest[1 + SBX_FS_PATH_MAX - 1 - 11] = 'a';
  longest[1 + SBX_FS_PATH_MAX - 11] = '\0';
  CHECK (failed_with (sbx_fs_normalize (longest + 1, out, sizeof out, &err), &err, SBX_E_INVALID,
                      0)
         == 0);
  free (longest);

  /* The output capacity is respected. */
  CHECK (sbx_fs_normalize ("/abc", out, 5, &err) == 0);
  CHECK_STR (out, "/abc");
  CHECK (failed_with (sbx_fs_normalize ("/abcd", out, 5, &err), &err, SBX_E_INVALID, 0) == 0);
  CHECK (failed_with (sbx_fs_normalize ("a", out, 12, &err), &err, SBX_E_INVALID, 0) == 0);
  CHECK (sbx_fs_normalize ("a", out, 13, &err) == 0);
  CHECK_STR (out, "/home/user/a");
  return 0;
}

static int
test_type_names (void)
{
  CHECK_STR (sbx_fs_type_name (SBX_FS_FILE), "file");
  CHECK_STR (sbx_fs_type_name (SBX_FS_DIR), "dir");
  CHECK_STR (sbx_fs_type_name (SBX_FS_SYMLINK), "symlink");
  CHECK_STR (sbx_fs_type_name (SBX_FS_OTHER), "other");
  CHECK_STR (sbx_fs_type_name ((enum sbx_fs_type) 99), "other");
  return 0;
}

/*============================ Resolution: reads ======================== */

/* Symlinks to "/", "..", and host paths resolve inside the root. */
TREE_TEST (test_read_symlinks_stay_inside)
{
  static const char *const via_root[] = {
    "/home/user/to-root/etc/passwd", "/home/user/up/etc/passwd",
    "/home/user/way-up/etc/passwd",  "/../../../etc/passwd",
    "../../../../etc/passwd",        "/home/../../etc/passwd",
    "to-root/etc/passwd",            "up/../../../../etc/passwd",
    "/etc/../../etc/passwd",
  };
  static const char *const canaries[] = {
    "/home/user/rel-canary",        "/home/user/abs-canary",   "rel-canary",
    "/../canary",                   "/../../canary",           "../../../canary",
    "/home/user/up/../canary",      "/home/user/way-up/canary", "/escape/canary",
    "/home/user/rel-canary-dir/inside", "/home/user/abs-canary-dir/inside",
  };

  for (size_t i = 0; i < ARRAY_SIZE (via_root); i++)
    {
      const char *s = read_path (&ctx, via_root[i]);
      if (s == NULL || strcmp (s, "sandbox passwd\n") != 0)
        {
          fprintf (stderr, "#   %s: read `%s`\n", via_root[i], s ? s : "(failed)");
          return -1;
        }
    }
  /* Nothing named canary exists inside yet: every attempt fails. */
  for (size_t i = 0; i < ARRAY_SIZE (canaries); i++)
    CHECK_FAILS (sbx_fs_open_read (&ctx, canaries[i], &(uint64_t){0}, &err_), SBX_E_NOT_FOUND,
                 ENOENT);

  /* Planted inside, the relative ones find them there: resolution really
     is in-root, not merely failing. (The absolute ones name T's path under
     the root: see the next test.) */
  CHECK (file_root ("canary", "sandbox canary\n") == 0);
  CHECK (mkdir_root ("canary-dir", 0755) == 0 && file_root ("canary-dir/inside", "in root\n") == 0);
  for (size_t i = 0; i < ARRAY_SIZE (canaries); i++)
    {
      const char *s;
      if (strstr (canaries[i], "abs-") != NULL || strstr (canaries[i], "escape") != NULL)
        continue;
      s = read_path (&ctx, canaries[i]);
      if (s == NULL || (strcmp (s, "sandbox canary\n") != 0 && strcmp (s, "in root\n") != 0))
        {
          fprintf (stderr, "#   %s: read `%s`\n", canaries[i], s ? s : "(failed)");
          return -1;
        }
    }
  return 0;
}

/* An absolute link to a host path means that path under the root. */
TREE_TEST (test_read_absolute_link_means_in_root)
{
  char path[256];
  const char *s;

  /* T/root/<T>/canary: T is /tmp/<name>, and the root has a /tmp. */
  CHECK (strncmp (tmp, "/tmp/", 5) == 0);
  snprintf (path, sizeof path, "%s%s", rootdir, tmp);
  CHECK (mkdir (path, 0755) == 0);
  snprintf (path, sizeof path, "%s%s/canary", rootdir, tmp);
  CHECK (write_file (path, "mirror canary\n") == 0);
  s = read_path (&ctx, "/home/user/abs-canary");
  CHECK (s != NULL);
  CHECK_STR (s, "mirror canary\n");
  s = read_path (&ctx, "/escape/canary");
  CHECK (s != NULL);
  CHECK_STR (s, "mirror canary\n");
  /* Clean the mirror so the host check sees T as it was. */
  snprintf (path, sizeof path, "%s%s/canary", rootdir, tmp);
  CHECK (unlink (path) == 0);
  return 0;
}

TREE_TEST (test_open_read)
{
  sbx_error_t *err = NULL;
  uint64_t size = 0;
  int fd, flags;

  fd = sbx_fs_open_read (&ctx, "/home/user/hello.txt", &size, &err);
  CHECK (fd > 2 && err == NULL);
  CHECK (size == 6);
  flags = fcntl (fd, F_GETFL);
  CHECK ((flags & O_ACCMODE) == O_RDONLY);
  CHECK (fcntl (fd, F_GETFD) & FD_CLOEXEC);
  CHECK (write (fd, "x", 1) < 0 && errno == EBADF);
  CHECK_STR (read_fd (fd), "hello\n");
  /* Relative to /home/user. */
  CHECK_STR (read_path (&ctx, "hello.txt"), "hello\n");
  /* A final symlink is followed (inside). */
  CHECK (symlink_root ("hello.txt", "home/user/link") == 0);
  CHECK_STR (read_path (&ctx, "link"), "hello\n");

  CHECK_FAILS (sbx_fs_open_read (&ctx, "/home/user", &size, &err_), SBX_E_INVALID, -1);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "/", &size, &err_), SBX_E_INVALID, -1);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "/nope", &size, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "dangling", &size, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "hello.txt/x", &size, &err_), SBX_E_INVALID, ENOTDIR);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "", &size, &err_), SBX_E_INVALID, 0);
  /* A loop. */
  CHECK (symlink_root ("loop2", "home/user/loop1") == 0);
  CHECK (symlink_root ("loop1", "home/user/loop2") == 0);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "loop1", &size, &err_), SBX_E_INVALID, ELOOP);
  return 0;
}

/* FIFOs, sockets and device nodes are refused without being opened (a
   FIFO open would block the daemon). */
TREE_TEST (test_open_read_refuses_special_files)
{
  char path[256];
  uint64_t size;
  int s;
  struct sockaddr_un sa;

  CHECK (mkfifo (in_root (path, sizeof path, "home/user/fifo"), 0666) == 0);
  CHECK (mknod (in_root (path, sizeof path, "home/user/null"), S_IFCHR | 0666, makedev (1, 3))
         == 0);
  s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK (s >= 0);
  memset (&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  in_root (path, sizeof path, "home/user/sock");
  CHECK (strlen (path) < sizeof sa.sun_path);
  memcpy (sa.sun_path, path, strlen (path) + 1);
  CHECK (bind (s, (struct sockaddr *) &sa, sizeof sa) == 0);
  close (s);

  CHECK_FAILS (sbx_fs_open_read (&ctx, "fifo", &size, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "null", &size, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "sock", &size, &err_), SBX_E_FORBIDDEN, 0);
  /* stat and list show them as "other". */
  {
    struct sbx_fs_entry *e = malloc (sizeof *e);
    CHECK (e != NULL);
    CHECK_OK (sbx_fs_stat (&ctx, "fifo", e, &err_));
    CHECK (e->type == SBX_FS_OTHER);
    CHECK_OK (sbx_fs_stat (&ctx, "null", e, &err_));
    CHECK (e->type == SBX_FS_OTHER);
    free (e);
  }
  return 0;
}

/* procfs inside the root: magic links are not followed, and its files are
   not opened, listed or removed through the API. */
TREE_TEST (test_procfs_is_refused)
{
  uint64_t size;
  int truncated = 0;
  char path[256];

  CHECK (mkdir_root ("proc", 0555) == 0);
  CHECK (mount_root ("proc", "proc", NULL) == 0);
  /* The magic link /proc/self/root would lead to the host's "/". */
  CHECK_FAILS (sbx_fs_open_read (&ctx, "/proc/self/root/etc/passwd", &size, &err_),
               SBX_E_INVALID, ELOOP);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "/proc/self/cwd/canary", &size, &err_), SBX_E_INVALID,
               ELOOP);
  snprintf (path, sizeof path, "/proc/self/fd/%d/etc/passwd", ctx.root);
  CHECK_FAILS (sbx_fs_open_read (&ctx, path, &size, &err_), SBX_E_INVALID, ELOOP);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "/proc/self/status", &size, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_open_read (&ctx, "/proc/version", &size, &err_), SBX_E_FORBIDDEN, 0);
  /* Not even stat: readlink of /proc/<pid>/exe or cwd would show what the
     process hides. */
  {
    struct sbx_fs_entry *e = malloc (sizeof *e);
    CHECK (e != NULL);
    CHECK_FAILS (sbx_fs_stat (&ctx, "/proc/self/cwd", e, &err_), SBX_E_FORBIDDEN, 0);
    CHECK_FAILS (sbx_fs_stat (&ctx, "/proc/self/root", e, &err_), SBX_E_FORBIDDEN, 0);
    CHECK_FAILS (sbx_fs_stat (&ctx, "/proc/self/status", e, &err_), SBX_E_FORBIDDEN, 0);
    CHECK_FAILS (sbx_fs_stat (&ctx, "/proc", e, &err_), SBX_E_FORBIDDEN, 0);
    /* The mount point's parent is fine. */
    CHECK_OK (sbx_fs_stat (&ctx, "/", e, &err_));
    free (e);
  }
  CHECK_FAILS (sbx_fs_list (&ctx, "/proc", 1, 100, NULL, NULL, &truncated, &err_),
               SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_list (&ctx, "/proc/self", 1, 100, NULL, NULL, &truncated, &err_),
               SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "/proc/self/environ", 0, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "/proc/sys", 1, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "/proc", 1, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "/proc/new", 0755, 0, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (upload (&ctx, "/proc/self/comm", "x", 0644, 0, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "/home/user/hello.txt", "/proc/x", 0, &err_), SBX_E_FORBIDDEN,
               0);
  CHECK (exists_root ("home/user/hello.txt"));
  return 0;
}

/*============================ stat ===================================== */

TREE_TEST (test_stat)
{
  struct sbx_fs_entry *e = malloc (sizeof *e);
  struct stat st;
  char path[256];

  CHECK (e != NULL);
  CHECK_OK (sbx_fs_stat (&ctx, "/home/user/hello.txt", e, &err_));
  CHECK_STR (e->name, "hello.txt");
  CHECK_STR (e->path, "/home/user/hello.txt");
  CHECK (e->type == SBX_FS_FILE && e->size == 6 && e->mode == 0644);
  CHECK (e->uid == USER && e->gid == USER);
  CHECK (lstat_root ("home/user/hello.txt", &st) == 0 && e->mtime_sec == st.st_mtim.tv_sec);
  CHECK (e->target[0] == '\0');

  CHECK_OK (sbx_fs_stat (&ctx, "hello.txt", e, &err_));
  CHECK_STR (e->path, "/home/user/hello.txt");

  CHECK_OK (sbx_fs_stat (&ctx, "/", e, &err_));
  CHECK_STR (e->name, "/");
  CHECK_STR (e->path, "/");
  CHECK (e->type == SBX_FS_DIR && e->mode == 0755 && e->uid == 0);

  CHECK_OK (sbx_fs_stat (&ctx, "/tmp", e, &err_));
  CHECK (e->type == SBX_FS_DIR && e->mode == 01777);

  /* The link itself, not what it points at. */
  CHECK_OK (sbx_fs_stat (&ctx, "/home/user/abs-canary", e, &err_));
  CHECK (e->type == SBX_FS_SYMLINK);
  CHECK_STR (e->name, "abs-canary");
  snprintf (path, sizeof path, "%s/canary", tmp);
  CHECK_STR (e->target, path);
  CHECK_OK (sbx_fs_stat (&ctx, "dangling", e, &err_));
  CHECK (e->type == SBX_FS_SYMLINK);
  CHECK_STR (e->target, "nowhere");
  /* Links in the middle of the path are followed, inside. */
  CHECK_OK (sbx_fs_stat (&ctx, "/home/user/up/etc/passwd", e, &err_));
  CHECK (e->type == SBX_FS_FILE && e->size == 15);
  CHECK_STR (e->name, "passwd");
  CHECK_STR (e->path, "/home/user/up/etc/passwd");

  CHECK_FAILS (sbx_fs_stat (&ctx, "/home/user/abs-canary/x", e, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_stat (&ctx, "/nope", e, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_stat (&ctx, "hello.txt/", e, &err_), SBX_E_INVALID, ENOTDIR);
  CHECK_FAILS (sbx_fs_stat (&ctx, "", e, &err_), SBX_E_INVALID, 0);
  free (e);
  return 0;
}

/* Host ids outside the sandbox's range show as nobody (65534). */
TREE_TEST (test_stat_id_mapping)
{
  struct sbx_fs_entry *e = malloc (sizeof *e);
  struct sbx_fs_ctx shifted = ctx;
  char path[256];

  CHECK (e != NULL);
  CHECK (file_root ("home/user/f", "x") == 0);
  CHECK (chown (in_root (path, sizeof path, "home/user/f"), 65535, 65536) == 0);
  CHECK_OK (sbx_fs_stat (&ctx, "f", e, &err_));
  CHECK (e->uid == 65535 && e->gid == 65534);

  /* With a base of 100000, host 165535 is the last id inside. */
  CHECK (chown (path, 100000 + 65535, 100000 + 12) == 0);
  shifted.uid_base = 100000;
  CHECK_OK (sbx_fs_stat (&shifted, "f", e, &err_));
  CHECK (e->uid == 65535 && e->gid == 12);
  CHECK (chown (path, 99999, 100000 + 65536) == 0);
  CHECK_OK (sbx_fs_stat (&shifted, "f", e, &err_));
  CHECK (e->uid == 65534 && e->gid == 65534);
  CHECK (chown (path, 0, 0) == 0);
  CHECK_OK (sbx_fs_stat (&shifted, "f", e, &err_));
  CHECK (e->uid == 65534 && e->gid == 65534);
  free (e);
  return 0;
}

/*============================ list ===================================== */

struct collected
{
  char lines[64][300];
  int n;
  int stop_after; /* 0: never */
};

static int
collect (const struct sbx_fs_entry *e, void *arg)
{
  struct collected *c = arg;

  if (c->n < 64
      && snprintf (c->lines[c->n], sizeof c->lines[0], "%s %s %s%s%s", sbx_fs_type_name (e->type),
                   e->path, e->name, e->target[0] ? " -> " : "", e->target)
             < (int) sizeof c->lines[0])
    c->n++;
  if (c->stop_after && c->n >= c->stop_after)
    return -1;
  return 0;
}

static int
cmp_lines (const void *a, const void *b)
{
  return strcmp (a, b);
}

/* The collected lines, sorted (readdir order is the filesystem's). */
static const char *
joined (struct collected *c)
{
  static char out[8192];

  qsort (c->lines, (size_t) c->n, sizeof c->lines[0], cmp_lines);
  out[0] = '\0';
  for (int i = 0; i < c->n; i++)
    {
      strncat (out, c->lines[i], sizeof out - strlen (out) - 1);
      strncat (out, "\n", sizeof out - strlen (out) - 1);
    }
  return out;
}

static int
make_list_tree (void)
{
  if (mkdir_root ("home/user/d", 0755) < 0 || file_root ("home/user/d/a", "aaa") < 0
      || mkdir_root ("home/user/d/sub", 0700) < 0 || file_root ("home/user/d/sub/b", "bb") < 0
      || mkdir_root ("home/user/d/sub/deeper", 0755) < 0
      || file_root ("home/user/d/sub/deeper/c", "c") < 0
      || symlink_root ("sub", "home/user/d/link") < 0
      || symlink_root ("../../../canary-dir", "home/user/d/out") < 0)
    return -1;
  return 0;
}

TREE_TEST (test_list_depth)
{
  struct collected *c = calloc (1, sizeof *c);
  int truncated = -1;

  CHECK (c != NULL);
  CHECK (make_list_tree () == 0);
  CHECK_OK (sbx_fs_list (&ctx, "/home/user/d", 1, 100, collect, c, &truncated, &err_));
  CHECK (truncated == 0);
  CHECK_STR (joined (c), "dir /home/user/d/sub sub\n"
                         "file /home/user/d/a a\n"
                         "symlink /home/user/d/link link -> sub\n"
                         "symlink /home/user/d/out out -> ../../../canary-dir\n");
  memset (c, 0, sizeof *c);
  CHECK_OK (sbx_fs_list (&ctx, "/home/user/d", 2, 100, collect, c, &truncated, &err_));
  CHECK_STR (joined (c), "dir /home/user/d/sub sub\n"
                         "dir /home/user/d/sub/deeper deeper\n"
                         "file /home/user/d/a a\n"
                         "file /home/user/d/sub/b b\n"
                         "symlink /home/user/d/link link -> sub\n"
                         "symlink /home/user/d/out out -> ../../../canary-dir\n");
  /* Deep enough for everything; links are never descended into. */
  memset (c, 0, sizeof *c);
  CHECK_OK (sbx_fs_list (&ctx, "d", 50, 100, collect, c, &truncated, &err_));
  CHECK (c->n == 7 && truncated == 0);
  CHECK (strstr (joined (c), "file /home/user/d/sub/deeper/c c\n") != NULL);
  CHECK (strstr (joined (c), "inside") == NULL);
  /* Depth 0 lists the directory's own entries, like 1. */
  memset (c, 0, sizeof *c);
  CHECK_OK (sbx_fs_list (&ctx, "d", 0, 100, collect, c, &truncated, &err_));
  CHECK (c->n == 4);
  free (c);
  return 0;
}

/* Find one entry by name. */
struct found
{
  const char *name;
  struct sbx_fs_entry entry;
  int hits;
};

static int
find_entry (const struct sbx_fs_entry *e, void *arg)
{
  struct found *f = arg;

  if (strcmp (e->name, f->name) == 0)
    {
      f->entry = *e;
      f->hits++;
    }
  return 0;
}

TREE_TEST (test_list_entry_fields)
{
  struct found *f = calloc (1, sizeof *f);
  struct collected *c = calloc (1, sizeof *c);
  struct stat st;
  char want[512];
  int truncated;

  CHECK (f != NULL && c != NULL);
  CHECK (make_list_tree () == 0);
  f->name = "a";
  CHECK_OK (sbx_fs_list (&ctx, "d", 1, 100, find_entry, f, &truncated, &err_));
  CHECK (f->hits == 1);
  CHECK (f->entry.type == SBX_FS_FILE && f->entry.size == 3 && f->entry.mode == 0644);
  CHECK (f->entry.uid == 0 && f->entry.gid == 0 && f->entry.target[0] == '\0');
  CHECK (lstat_root ("home/user/d/a", &st) == 0 && f->entry.mtime_sec == st.st_mtim.tv_sec);
  CHECK_STR (f->entry.path, "/home/user/d/a");
  memset (f, 0, sizeof *f);
  f->name = "sub";
  CHECK_OK (sbx_fs_list (&ctx, "d", 1, 100, find_entry, f, &truncated, &err_));
  CHECK (f->hits == 1 && f->entry.type == SBX_FS_DIR && f->entry.mode == 0700);
  memset (f, 0, sizeof *f);
  f->name = "link";
  CHECK_OK (sbx_fs_list (&ctx, "d", 1, 100, find_entry, f, &truncated, &err_));
  CHECK (f->hits == 1 && f->entry.type == SBX_FS_SYMLINK && f->entry.size == 3);
  CHECK_STR (f->entry.target, "sub");

  /* Listing "/" gives "/name", not "//name". */
  CHECK_OK (sbx_fs_list (&ctx, "/", 1, 100, collect, c, &truncated, &err_));
  snprintf (want, sizeof want,
            "dir /etc etc\n"
            "dir /home home\n"
            "dir /tmp tmp\n"
            "symlink /escape escape -> %s\n",
            tmp);
  CHECK_STR (joined (c), want);
  free (f);
  free (c);
  return 0;
}

TREE_TEST (test_list_limits)
{
  struct collected *c = calloc (1, sizeof *c);
  int truncated = -1;

  CHECK (c != NULL);
  CHECK (make_list_tree () == 0);
  /* max_entries reached with more to come: truncated. */
  CHECK_OK (sbx_fs_list (&ctx, "d", 1, 2, collect, c, &truncated, &err_));
  CHECK (c->n == 2 && truncated == 1);
  /* Exactly as many as there are: not truncated. */
  memset (c, 0, sizeof *c);
  CHECK_OK (sbx_fs_list (&ctx, "d", 1, 4, collect, c, &truncated, &err_));
  CHECK (c->n == 4 && truncated == 0);
  /* The limit counts entries at every depth. */
  memset (c, 0, sizeof *c);
  CHECK_OK (sbx_fs_list (&ctx, "d", 10, 5, collect, c, &truncated, &err_));
  CHECK (c->n == 5 && truncated == 1);
  memset (c, 0, sizeof *c);
  CHECK_OK (sbx_fs_list (&ctx, "d", 10, 0, collect, c, &truncated, &err_));
  CHECK (c->n == 0 && truncated == 1);
  /* An empty directory with no room is not truncated. */
  CHECK (mkdir_root ("home/user/empty", 0755) == 0);
  memset (c, 0, sizeof *c);
  CHECK_OK (sbx_fs_list (&ctx, "empty", 3, 0, collect, c, &truncated, &err_));
  CHECK (c->n == 0 && truncated == 0);
  /* The callback can stop the walk. */
  memset (c, 0, sizeof *c);
  c->stop_after = 3;
  CHECK (sbx_fs_list (&ctx, "d", 10, 100, collect, c, &truncated, NULL) == -1);
  CHECK (c->n == 3);
  free (c);
  return 0;
}

TREE_TEST (test_list_resolution)
{
  struct collected *c = calloc (1, sizeof *c);
  int truncated;

  CHECK (c != NULL);
  CHECK (make_list_tree () == 0);
  /* Through links: inside the root. */
  CHECK_OK (sbx_fs_list (&ctx, "/home/user/up", 1, 100, collect, c, &truncated, &err_));
  CHECK (c->n == 4);
  CHECK (strstr (joined (c), "dir /home/user/up/etc etc\n") != NULL);
  CHECK (strstr (joined (c), "canary") == NULL);
  memset (c, 0, sizeof *c);
  CHECK_FAILS (sbx_fs_list (&ctx, "/home/user/rel-canary-dir", 1, 100, collect, c, &truncated,
                            &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_list (&ctx, "/home/user/abs-canary-dir", 1, 100, collect, c, &truncated,
                            &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_list (&ctx, "/home/user/d/out", 1, 100, collect, c, &truncated, &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK (c->n == 0);
  /* A trailing slash is the same directory. */
  CHECK_OK (sbx_fs_list (&ctx, "/home/user/d/sub/", 1, 100, collect, c, &truncated, &err_));
  CHECK_STR (joined (c), "dir /home/user/d/sub/deeper deeper\n"
                         "file /home/user/d/sub/b b\n");
  CHECK_FAILS (sbx_fs_list (&ctx, "hello.txt", 1, 100, collect, c, &truncated, &err_),
               SBX_E_INVALID, ENOTDIR);
  CHECK_FAILS (sbx_fs_list (&ctx, "/nope", 1, 100, collect, c, &truncated, &err_),
               SBX_E_NOT_FOUND, ENOENT);
  free (c);
  return 0;
}

/* Below the top, a directory the user may not read is listed but not
   entered; the top itself must be readable. */
TREE_TEST (test_list_unreadable_subdirectory)
{
  struct collected *c = calloc (1, sizeof *c);
  int truncated;

  CHECK (c != NULL);
  CHECK (mkdir_root ("root", 0700) == 0 && file_root ("root/private", "p") == 0);
  CHECK_OK (sbx_fs_list (&user, "/", 2, 100, collect, c, &truncated, &err_));
  CHECK (strstr (joined (c), "dir /root root\n") != NULL);
  CHECK (strstr (joined (c), "private") == NULL);
  CHECK (strstr (joined (c), "file /etc/passwd passwd\n") != NULL);
  CHECK_FAILS (sbx_fs_list (&user, "/root", 1, 100, collect, c, &truncated, &err_),
               SBX_E_FORBIDDEN, EACCES);
  /* As root, everything. */
  memset (c, 0, sizeof *c);
  CHECK_OK (sbx_fs_list (&ctx, "/", 2, 100, collect, c, &truncated, &err_));
  CHECK (strstr (joined (c), "file /root/private private\n") != NULL);
  CHECK (current_fsuid () == 0);
  free (c);
  return 0;
}

/* A mount inside the listed tree is listed (it is a directory) but its
   contents are listed only when it is not a forbidden filesystem. */
TREE_TEST (test_list_skips_procfs_below)
{
  struct collected *c = calloc (1, sizeof *c);
  int truncated;

  CHECK (c != NULL);
  CHECK (mkdir_root ("proc", 0555) == 0);
  CHECK (mount_root ("proc", "proc", NULL) == 0);
  CHECK_OK (sbx_fs_list (&ctx, "/", 2, 1000, collect, c, &truncated, &err_));
  CHECK (strstr (joined (c), "dir /proc proc\n") != NULL);
  CHECK (strstr (joined (c), "/proc/") == NULL);
  CHECK (truncated == 0);
  free (c);
  return 0;
}

/*============================ upload =================================== */

/* E2B file metadata: the packed pairs' checks and bounds, then user.e2b.*
   attributes written by an upload, read back by stat and list, gone after
   an overwrite without them; a filesystem without user xattrs (ramfs) is a
   400 and no file. */
TREE_TEST (test_metadata)
{
  struct sbx_fs_meta *m = calloc (1, sizeof *m), *big = calloc (1, sizeof *big);
  struct sbx_fs_entry *e = malloc (sizeof *e);
  struct sbx_fs_upload up;
  const char *k, *v;
  uint32_t off = 0;
  sbx_error_t *merr = NULL;
  char key[80], val[1100];
  int rc;

  CHECK (m != NULL && big != NULL && e != NULL);
  CHECK_OK (sbx_fs_meta_add (m, "author", 6, "mish", 4, &err_));
  CHECK_OK (sbx_fs_meta_add (m, "empty", 5, "", 0, &err_));
  CHECK_OK (sbx_fs_meta_add (m, "author", 6, "second", 6, &err_)); /* the first wins */
  CHECK (m->count == 2);
  CHECK_OK (sbx_fs_meta_check (m, &err_));
  k = sbx_fs_meta_next (m, &off, &v);
  CHECK (k != NULL && strcmp (k, "author") == 0 && strcmp (v, "mish") == 0);
  k = sbx_fs_meta_next (m, &off, &v);
  CHECK (k != NULL && strcmp (k, "empty") == 0 && strcmp (v, "") == 0);
  CHECK (sbx_fs_meta_next (m, &off, &v) == NULL);
  CHECK_FAILS (sbx_fs_meta_add (big, "", 0, "v", 1, &err_), SBX_E_INVALID, -1);
  CHECK_FAILS (sbx_fs_meta_add (big, "a b", 3, "v", 1, &err_), SBX_E_INVALID, -1);
  CHECK_FAILS (sbx_fs_meta_add (big, "a\0b", 3, "v", 1, &err_), SBX_E_INVALID, -1);
  CHECK_FAILS (sbx_fs_meta_add (big, "k", 1, "a\nb", 3, &err_), SBX_E_INVALID, -1);
  CHECK_FAILS (sbx_fs_meta_add (big, "k", 1, "\xc3\xa9", 2, &err_), SBX_E_INVALID, -1);
  CHECK_FAILS (sbx_fs_meta_add (big, "k", 1, "a\0b", 3, &err_), SBX_E_INVALID, -1);
  memset (key, 'k', sizeof key);
  memset (val, 'v', sizeof val);
  CHECK_FAILS (sbx_fs_meta_add (big, key, 65, "v", 1, &err_), SBX_E_INVALID, -1);
  CHECK_FAILS (sbx_fs_meta_add (big, "k", 1, val, 1025, &err_), SBX_E_INVALID, -1);
  CHECK (big->count == 0 && big->len == 0);
  /* 9 + 64 + 1024 = 1097 a key: three fit 4096, a fourth does not */
  for (int i = 0; i < 3; i++)
    {
      key[0] = (char) ('a' + i);
      CHECK_OK (sbx_fs_meta_add (big, key, 64, val, 1024, &err_));
    }
  key[0] = 'z';
  CHECK_FAILS (sbx_fs_meta_add (big, key, 64, val, 1024, &err_), SBX_E_INVALID, -1);
  CHECK_OK (sbx_fs_meta_check (big, &err_));
  memset (big, 0, sizeof *big);
  for (int i = 0; i < 32; i++)
    {
      snprintf (key, sizeof key, "k%d", i);
      CHECK_OK (sbx_fs_meta_add (big, key, strlen (key), "v", 1, &err_));
    }
  CHECK_FAILS (sbx_fs_meta_add (big, "k32", 3, "v", 1, &err_), SBX_E_INVALID, -1);
  /* A packed set from elsewhere: a repeated key, a cut pair, a bad count. */
  {
    struct sbx_fs_meta *bad = calloc (1, sizeof *bad);
    CHECK (bad != NULL);
    memcpy (bad->data, "a\0x\0a\0y\0", 8);
    bad->len = 8;
    bad->count = 2;
    CHECK_FAILS (sbx_fs_meta_check (bad, &err_), SBX_E_INVALID, -1);
    bad->len = 3;
    bad->count = 1;
    CHECK_FAILS (sbx_fs_meta_check (bad, &err_), SBX_E_INVALID, -1);
    bad->len = 4;
    bad->count = 2;
    CHECK_FAILS (sbx_fs_meta_check (bad, &err_), SBX_E_INVALID, -1);
    free (bad);
  }

  rc = sbx_fs_upload_begin_meta (&ctx, "/tmp/meta.txt", 0644, 0, m, &up, &merr);
  if (rc < 0 && merr != NULL && merr->sys_errno == EOPNOTSUPP)
    {
      /* the host's /tmp has no user xattrs: the refusal is the answer */
      CHECK (failed_with (rc, &merr, SBX_E_INVALID, EOPNOTSUPP) == 0);
      CHECK (!exists_root ("tmp/meta.txt") && count_prefixed ("tmp", ".sbx-") == 0);
      goto out;
    }
  if (rc < 0)
    fprintf (stderr, "#   %s\n", merr ? merr->msg : "?");
  sbx_error_free (merr);
  merr = NULL;
  CHECK (rc == 0);
  CHECK_OK (sbx_fs_upload_write (&up, "x", 1, &err_));
  CHECK_OK (sbx_fs_upload_commit (&up, &err_));
  CHECK_OK (sbx_fs_stat (&ctx, "/tmp/meta.txt", e, &err_));
  CHECK (e->meta.count == 2 && e->meta.len == m->len && memcmp (e->meta.data, m->data, m->len) == 0);
  /* not followed through a symlink */
  CHECK (symlink_root ("/tmp/meta.txt", "tmp/meta-link") == 0);
  CHECK_OK (sbx_fs_stat (&ctx, "/tmp/meta-link", e, &err_));
  CHECK (e->type == SBX_FS_SYMLINK && e->meta.count == 0);
  /* overwritten without: none left */
  CHECK_OK (sbx_fs_upload_begin (&ctx, "/tmp/meta.txt", 0644, 0, &up, &err_));
  CHECK_OK (sbx_fs_upload_commit (&up, &err_));
  CHECK_OK (sbx_fs_stat (&ctx, "/tmp/meta.txt", e, &err_));
  CHECK (e->meta.count == 0);

  /* ramfs keeps no user xattrs: refused, and no file, no temporary */
  CHECK (mkdir_root ("tmp/ram", 0777) == 0);
  if (mount_root ("ramfs", "tmp/ram", "mode=0777") == 0)
    {
      rc = sbx_fs_upload_begin_meta (&ctx, "/tmp/ram/f", 0644, 0, m, &up, &merr);
      CHECK (failed_with (rc, &merr, SBX_E_INVALID, EOPNOTSUPP) == 0);
      CHECK (!exists_root ("tmp/ram/f") && count_prefixed ("tmp/ram", ".sbx-") == 0);
      CHECK_OK (sbx_fs_upload_begin (&ctx, "/tmp/ram/f", 0644, 0, &up, &err_));
      CHECK_OK (sbx_fs_upload_commit (&up, &err_));
      CHECK_OK (sbx_fs_stat (&ctx, "/tmp/ram/f", e, &err_));
      CHECK (e->meta.count == 0);
    }
out:
  free (m);
  free (big);
  free (e);
  return 0;
}

TREE_TEST (test_upload_commit_replaces)
{
  struct sbx_fs_upload up;
  struct stat before, after;

  CHECK (lstat_root ("home/user/hello.txt", &before) == 0);
  CHECK_OK (sbx_fs_upload_begin (&ctx, "hello.txt", 0640, 0, &up, &err_));
  CHECK (up.fd > 2 && up.dir > 2);
  CHECK_STR (up.leaf, "hello.txt");
  CHECK_STR (up.tmp_name, ""); /* unnamed (O_TMPFILE) until commit */
  CHECK (up.mode == 0640 && up.written == 0);
  CHECK_OK (sbx_fs_upload_write (&up, "new ", 4, &err_));
  CHECK_OK (sbx_fs_upload_write (&up, "content\n", 8, &err_));
  CHECK_OK (sbx_fs_upload_write (&up, "", 0, &err_));
  CHECK (up.written == 12);
  /* Until commit, readers see the old file; the data is in a temporary
     that has no name in the directory. */
  CHECK_STR (slurp_root ("home/user/hello.txt"), "hello\n");
  CHECK (count_prefixed ("home/user", ".sbx-") == 0);
  CHECK_OK (sbx_fs_upload_commit (&up, &err_));
  CHECK (up.fd == -1 && up.dir == -1);
  /* It was named beside the target for the rename: a hidden random name. */
  CHECK (strncmp (up.tmp_name, ".sbx-upload-", 12) == 0 && strlen (up.tmp_name) == 12 + 16);
  for (int i = 12; i < 28; i++)
    CHECK (strchr ("0123456789abcdef", up.tmp_name[i]) != NULL);
  CHECK_STR (slurp_root ("home/user/hello.txt"), "new content\n");
  CHECK (count_temporaries ("home/user") == 0);
  CHECK (lstat_root ("home/user/hello.txt", &after) == 0);
  CHECK (after.st_ino != before.st_ino); /* replaced by rename, not rewritten */
  CHECK ((after.st_mode & 07777) == 0640);
  /* An abort after commit does nothing. */
  sbx_fs_upload_abort (&up);
  CHECK_STR (slurp_root ("home/user/hello.txt"), "new content\n");
  return 0;
}

TREE_TEST (test_upload_abort_leaves_nothing)
{
  struct sbx_fs_upload up;

  CHECK_OK (sbx_fs_upload_begin (&ctx, "hello.txt", 0600, 0, &up, &err_));
  CHECK_OK (sbx_fs_upload_write (&up, "discarded", 9, &err_));
  sbx_fs_upload_abort (&up);
  CHECK (up.fd == -1 && up.dir == -1);
  CHECK_STR (slurp_root ("home/user/hello.txt"), "hello\n");
  CHECK (count_temporaries ("home/user") == 0);
  sbx_fs_upload_abort (&up); /* twice is harmless */

  CHECK_OK (sbx_fs_upload_begin (&ctx, "/tmp/fresh", 0644, 0, &up, &err_));
  sbx_fs_upload_abort (&up);
  CHECK (!exists_root ("tmp/fresh"));
  CHECK (count_temporaries ("tmp") == 0);
  return 0;
}

/* Two uploads of one path at once: each has its own temporary, the last
   commit wins, nothing is left behind. */
TREE_TEST (test_upload_concurrent)
{
  struct sbx_fs_upload a, b;
  struct stat sa, sb;

  CHECK_OK (sbx_fs_upload_begin (&ctx, "same", 0644, 0, &a, &err_));
  CHECK_OK (sbx_fs_upload_begin (&ctx, "same", 0644, 0, &b, &err_));
  CHECK (fstat (a.fd, &sa) == 0 && fstat (b.fd, &sb) == 0 && sa.st_ino != sb.st_ino);
  CHECK_OK (sbx_fs_upload_write (&a, "first", 5, &err_));
  CHECK_OK (sbx_fs_upload_write (&b, "second", 6, &err_));
  CHECK_OK (sbx_fs_upload_commit (&b, &err_));
  CHECK_OK (sbx_fs_upload_commit (&a, &err_));
  CHECK_STR (slurp_root ("home/user/same"), "first");
  CHECK (count_temporaries ("home/user") == 0);
  return 0;
}

TREE_TEST (test_upload_paths)
{
  struct stat st;

  CHECK_OK (upload (&ctx, "/tmp/new.bin", "data", 0755, 0, &err_));
  CHECK (lstat_root ("tmp/new.bin", &st) == 0 && (st.st_mode & 07777) == 0755);
  /* Mode bits past 07777 are dropped. */
  CHECK_OK (upload (&ctx, "/tmp/m", "x", 0170644, 0, &err_));
  CHECK (lstat_root ("tmp/m", &st) == 0 && S_ISREG (st.st_mode) && (st.st_mode & 07777) == 0644);
  /* A trailing slash names a directory: refused, nothing written. */
  CHECK_FAILS (upload (&ctx, "/tmp/slash/", "s", 0644, 0, &err_), SBX_E_INVALID, 0);
  CHECK (!exists_root ("tmp/slash"));
  /* Missing parents: an error, or made with parents. */
  CHECK_FAILS (upload (&ctx, "/tmp/a/b/c", "x", 0644, 0, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK (!exists_root ("tmp/a"));
  CHECK_OK (upload (&ctx, "/tmp/a/b/c", "abc", 0644, 1, &err_));
  CHECK_STR (slurp_root ("tmp/a/b/c"), "abc");
  CHECK (lstat_root ("tmp/a/b", &st) == 0 && S_ISDIR (st.st_mode) && (st.st_mode & 0777) == 0755);
  /* Names that are not a file. */
  CHECK_FAILS (upload (&ctx, "/", "x", 0644, 0, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (upload (&ctx, "/tmp/.", "x", 0644, 0, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (upload (&ctx, "/tmp/..", "x", 0644, 0, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (upload (&ctx, ".", "x", 0644, 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (upload (&ctx, "/tmp", "x", 0644, 0, &err_), SBX_E_INVALID, 0); /* a directory */
  CHECK_FAILS (upload (&ctx, "hello.txt/x", "x", 0644, 0, &err_), SBX_E_INVALID, ENOTDIR);
  CHECK_FAILS (upload (&ctx, "hello.txt/x", "x", 0644, 1, &err_), SBX_E_INVALID, ENOTDIR);
  {
    char name[300];
    memset (name, 'n', sizeof name);
    memcpy (name, "/tmp/", 5);
    name[5 + 255] = '\0';
    CHECK_OK (upload (&ctx, name, "long", 0644, 0, &err_));
    name[5 + 255] = 'n';
    name[5 + 256] = '\0';
    CHECK_FAILS (upload (&ctx, name, "x", 0644, 0, &err_), SBX_E_INVALID, -1);
  }
  CHECK (count_temporaries ("tmp") == 0);
  return 0;
}

/* Uploads through links land inside the root; a link as the target is
   replaced, never written through. */
TREE_TEST (test_upload_stays_inside)
{
  struct stat st;

  CHECK_OK (upload (&ctx, "/home/user/rel-canary", "replaced\n", 0644, 0, &err_));
  CHECK (lstat_root ("home/user/rel-canary", &st) == 0 && S_ISREG (st.st_mode));
  CHECK_OK (upload (&ctx, "/home/user/abs-canary", "replaced\n", 0644, 0, &err_));
  CHECK (lstat_root ("home/user/abs-canary", &st) == 0 && S_ISREG (st.st_mode));
  CHECK_OK (upload (&ctx, "/home/user/up/canary", "in root\n", 0644, 0, &err_));
  CHECK_STR (slurp_root ("canary"), "in root\n");
  CHECK_OK (upload (&ctx, "/../../canary", "again\n", 0644, 0, &err_));
  CHECK_STR (slurp_root ("canary"), "again\n");
  CHECK_OK (upload (&ctx, "/home/user/way-up/x", "x", 0644, 0, &err_));
  CHECK (exists_root ("x"));
  /* Into a linked directory that only exists outside. */
  CHECK_FAILS (upload (&ctx, "/home/user/rel-canary-dir/inside", "x", 0644, 0, &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (upload (&ctx, "/home/user/abs-canary-dir/inside", "x", 0644, 1, &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (upload (&ctx, "/escape/canary", "x", 0644, 0, &err_), SBX_E_NOT_FOUND, ENOENT);
  return 0;
}

/* A commit puts the new file in place in one step: the name holds the old
   file or the new one, never a part (a reader of the old one keeps it
   whole); the new one is the very inode written, with one name, the mode
   asked for (no umask) and the user as its owner. A name that became a
   directory meanwhile is not replaced. */
TREE_TEST (test_upload_commit_as_user)
{
  struct sbx_fs_upload up;
  struct stat written, after;
  char path[256];
  int old;

  old = open (in_root (path, sizeof path, "home/user/hello.txt"), O_RDONLY | O_CLOEXEC);
  CHECK (old >= 0);
  CHECK_OK (sbx_fs_upload_begin (&user, "hello.txt", 0666, 0, &up, &err_));
  CHECK (fstat (up.fd, &written) == 0 && written.st_nlink == 0);
  CHECK_OK (sbx_fs_upload_write (&up, "replacement\n", 12, &err_));
  CHECK_STR (slurp_root ("home/user/hello.txt"), "hello\n");
  CHECK_OK (sbx_fs_upload_commit (&up, &err_));
  CHECK (lstat_root ("home/user/hello.txt", &after) == 0 && S_ISREG (after.st_mode));
  CHECK (after.st_ino == written.st_ino && after.st_nlink == 1);
  CHECK ((after.st_mode & 07777) == 0666);
  CHECK (after.st_uid == USER && after.st_gid == USER);
  CHECK_STR (slurp_root ("home/user/hello.txt"), "replacement\n");
  CHECK_STR (read_fd (old), "hello\n");
  CHECK (count_prefixed ("home/user", ".sbx-") == 0);

  CHECK_OK (sbx_fs_upload_begin (&user, "later", 0644, 0, &up, &err_));
  CHECK (mkdir_root ("home/user/later", 0755) == 0);
  CHECK_FAILS (sbx_fs_upload_commit (&up, &err_), SBX_E_INVALID, EISDIR);
  CHECK (lstat_root ("home/user/later", &after) == 0 && S_ISDIR (after.st_mode));
  CHECK (count_prefixed ("home/user", ".sbx-") == 0);
  CHECK (current_fsuid () == 0 && current_fsgid () == 0);
  return 0;
}

/* An upload cut short leaves no entry in the directory and gives its blocks
   back, whether aborted or abandoned by a process that died holding it (a
   daemon killed in the middle runs no abort). */
TREE_TEST (test_upload_cut_short_leaves_nothing)
{
  static char chunk[64 << 10];
  struct sbx_fs_upload up;
  long long before;
  char mnt[256], c;
  int status, ready[2], under_way;
  pid_t pid;

  CHECK (mkdir_root ("mnt", 0777) == 0);
  CHECK (mount_root ("tmpfs", "mnt", "size=1m,mode=0777") == 0);
  CHECK (file_root ("mnt/f", "old\n") == 0);
  in_root (mnt, sizeof mnt, "mnt");
  memset (chunk, 'x', sizeof chunk);
  before = free_blocks ("mnt");
  CHECK (before > 0);

  CHECK_OK (sbx_fs_upload_begin (&user, "/mnt/f", 0644, 0, &up, &err_));
  for (int i = 0; i < 4; i++)
    CHECK_OK (sbx_fs_upload_write (&up, chunk, sizeof chunk, &err_));
  CHECK (free_blocks ("mnt") < before);
  CHECK_STR (dir_names (mnt), "f");
  sbx_fs_upload_abort (&up);
  CHECK_STR (dir_names (mnt), "f");
  CHECK (free_blocks ("mnt") == before);

  CHECK (pipe2 (ready, O_CLOEXEC) == 0);
  pid = fork ();
  CHECK (pid >= 0);
  if (pid == 0)
    {
      sbx_error_t *err = NULL;
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      if (sbx_fs_upload_begin (&user, "/mnt/f", 0644, 0, &up, &err) < 0)
        _exit (1);
      for (int i = 0; i < 4; i++)
        if (sbx_fs_upload_write (&up, chunk, sizeof chunk, &err) < 0)
          _exit (1);
      if (write (ready[1], "r", 1) != 1)
        _exit (1);
      pause ();
      _exit (1);
    }
  close (ready[1]);
  /* Under way: the blocks are used, the directory shows nothing. Checked
     before the kill, asserted after it, so that no child is left paused. */
  under_way = read (ready[0], &c, 1) == 1 && free_blocks ("mnt") < before
              && names_are (mnt, "f");
  close (ready[0]);
  kill (pid, SIGKILL);
  CHECK (waitpid (pid, &status, 0) == pid && WIFSIGNALED (status));
  CHECK (under_way);
  CHECK_STR (dir_names (mnt), "f");
  CHECK_STR (slurp_root ("mnt/f"), "old\n");
  CHECK (free_blocks ("mnt") == before);
  return 0;
}

/* Make openat with O_TMPFILE fail with `e`, as a filesystem (EOPNOTSUPP)
   or a kernel (EISDIR) without it does. Filters stack: the last one
   installed answers. */
static int
refuse_tmpfile (int e)
{
#if defined(__x86_64__)
  const uint32_t arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  const uint32_t arch = AUDIT_ARCH_AARCH64;
#else
  const uint32_t arch = 0;
#endif
  /* Little-endian: the flags' low word comes first. */
  struct sock_filter filter[] = {
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, arch)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, nr)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 1, 0),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, args[2])),
    BPF_STMT (BPF_ALU | BPF_AND | BPF_K, O_TMPFILE & ~O_DIRECTORY),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, O_TMPFILE & ~O_DIRECTORY, 0, 1),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((uint32_t) e & SECCOMP_RET_DATA)),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {ARRAY_SIZE (filter), filter};

  if (arch == 0)
    return -1;
  return prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* Without O_TMPFILE, an upload goes to a hidden named temporary, which a
   commit renames over the target and an abort removes. */
TREE_TEST (test_upload_without_tmpfile)
{
  static const int errnos[] = {EOPNOTSUPP, EISDIR};
  struct sbx_fs_upload up;
  struct stat st;
  char path[256];

  for (size_t i = 0; i < ARRAY_SIZE (errnos); i++)
    {
      if (refuse_tmpfile (errnos[i]) < 0)
        return 77;
      CHECK (open (in_root (path, sizeof path, "tmp"), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600) < 0
             && errno == errnos[i]);
      CHECK_OK (sbx_fs_upload_begin (&user, "f", 0640, 0, &up, &err_));
      CHECK (strncmp (up.tmp_name, ".sbx-upload-", 12) == 0 && strlen (up.tmp_name) == 12 + 16);
      CHECK (count_temporaries ("home/user") == 1);
      CHECK_OK (sbx_fs_upload_write (&up, "named\n", 6, &err_));
      CHECK_OK (sbx_fs_upload_commit (&up, &err_));
      CHECK_STR (slurp_root ("home/user/f"), "named\n");
      CHECK (lstat_root ("home/user/f", &st) == 0 && st.st_nlink == 1);
      CHECK ((st.st_mode & 07777) == 0640 && st.st_uid == USER && st.st_gid == USER);
      CHECK (count_temporaries ("home/user") == 0);
      CHECK_OK (sbx_fs_upload_begin (&user, "f", 0640, 0, &up, &err_));
      CHECK (count_temporaries ("home/user") == 1);
      sbx_fs_upload_abort (&up);
      CHECK (count_temporaries ("home/user") == 0);
      CHECK_STR (slurp_root ("home/user/f"), "named\n");
    }
  return 0;
}

/*============================ mkdir ==================================== */

TREE_TEST (test_mkdir)
{
  struct stat st;

  CHECK_OK (sbx_fs_mkdir (&ctx, "newdir", 0750, 0, &err_));
  CHECK (lstat_root ("home/user/newdir", &st) == 0 && S_ISDIR (st.st_mode));
  CHECK ((st.st_mode & 07777) == 0750);
  /* The mode goes through the process umask, like mkdir(2). */
  CHECK_OK (sbx_fs_mkdir (&ctx, "/tmp/open", 0777, 0, &err_));
  CHECK (lstat_root ("tmp/open", &st) == 0 && (st.st_mode & 07777) == 0755);
  CHECK_OK (sbx_fs_mkdir (&ctx, "/tmp/slash/", 0700, 0, &err_));
  CHECK (lstat_root ("tmp/slash", &st) == 0 && S_ISDIR (st.st_mode));
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "newdir", 0755, 0, &err_), SBX_E_CONFLICT, EEXIST);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "hello.txt", 0755, 0, &err_), SBX_E_CONFLICT, EEXIST);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "p/q/r", 0755, 0, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK_OK (sbx_fs_mkdir (&ctx, "p/q/r", 0700, 1, &err_));
  CHECK (lstat_root ("home/user/p/q/r", &st) == 0 && (st.st_mode & 07777) == 0700);
  CHECK (lstat_root ("home/user/p", &st) == 0 && (st.st_mode & 07777) == 0700);
  /* -p on what exists is fine; through a file is not. */
  CHECK_OK (sbx_fs_mkdir (&ctx, "p/q/r", 0700, 1, &err_));
  CHECK_OK (sbx_fs_mkdir (&ctx, "/", 0755, 1, &err_));
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "hello.txt/sub", 0755, 1, &err_), SBX_E_INVALID, ENOTDIR);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "hello.txt", 0755, 1, &err_), SBX_E_INVALID, ENOTDIR);
  /* Names that are not a directory to make. */
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "/", 0755, 0, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "newdir/.", 0755, 0, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "newdir/..", 0755, 0, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "", 0755, 0, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "nothere/..", 0755, 0, &err_), SBX_E_INVALID, 0);
  CHECK (!exists_root ("home/user/nothere"));
  /* Like mkdir -p nothere/..: the parent is made, ".." exists. */
  CHECK_OK (sbx_fs_mkdir (&ctx, "nothere/..", 0755, 1, &err_));
  CHECK (exists_root ("home/user/nothere"));
  return 0;
}

TREE_TEST (test_mkdir_stays_inside)
{
  CHECK_OK (sbx_fs_mkdir (&ctx, "/home/user/up/made", 0755, 0, &err_));
  CHECK (exists_root ("made"));
  CHECK_OK (sbx_fs_mkdir (&ctx, "/../../made2", 0755, 0, &err_));
  CHECK (exists_root ("made2"));
  CHECK_OK (sbx_fs_mkdir (&ctx, "/home/user/way-up/a/b", 0755, 1, &err_));
  CHECK (exists_root ("a/b"));
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "/home/user/rel-canary-dir/new", 0755, 0, &err_),
               SBX_E_NOT_FOUND, ENOENT);
  /* -p through a dangling link to the outside: the link is there, so no
     directory is made in its place, and nothing appears outside. */
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "/home/user/rel-canary-dir/new", 0755, 1, &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_mkdir (&ctx, "/escape/new", 0755, 1, &err_), SBX_E_NOT_FOUND, ENOENT);
  return 0;
}

/*============================ move ===================================== */

TREE_TEST (test_move)
{
  CHECK_OK (sbx_fs_move (&ctx, "hello.txt", "moved.txt", 0, &err_));
  CHECK (!exists_root ("home/user/hello.txt"));
  CHECK_STR (slurp_root ("home/user/moved.txt"), "hello\n");
  CHECK (file_root ("home/user/other", "other\n") == 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "moved.txt", "other", 0, &err_), SBX_E_CONFLICT, EEXIST);
  CHECK_STR (slurp_root ("home/user/other"), "other\n");
  CHECK_OK (sbx_fs_move (&ctx, "moved.txt", "other", 1, &err_));
  CHECK_STR (slurp_root ("home/user/other"), "hello\n");
  CHECK_FAILS (sbx_fs_move (&ctx, "nope", "x", 0, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_move (&ctx, "other", "/nodir/x", 0, &err_), SBX_E_NOT_FOUND, ENOENT);
  /* Directories, and not into themselves. */
  CHECK (mkdir_root ("home/user/dir", 0755) == 0);
  CHECK_OK (sbx_fs_move (&ctx, "dir", "/tmp/dir", 0, &err_));
  CHECK (exists_root ("tmp/dir"));
  CHECK_FAILS (sbx_fs_move (&ctx, "/tmp/dir", "/tmp/dir/inner", 0, &err_), SBX_E_INVALID, EINVAL);
  /* Names that are not files. */
  CHECK_FAILS (sbx_fs_move (&ctx, "/", "/x", 0, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "other", "/", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "other", "/tmp/..", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "/tmp/dir/.", "/x", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "", "/x", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "other", "", 1, &err_), SBX_E_INVALID, 0);
  CHECK (exists_root ("home/user/other"));
  return 0;
}

TREE_TEST (test_move_stays_inside)
{
  struct stat st;

  /* Moving a link moves the link. */
  CHECK_OK (sbx_fs_move (&ctx, "abs-canary", "/tmp/link", 0, &err_));
  CHECK (lstat_root ("tmp/link", &st) == 0 && S_ISLNK (st.st_mode));
  CHECK_OK (sbx_fs_move (&ctx, "hello.txt", "/home/user/up/moved", 0, &err_));
  CHECK (exists_root ("moved"));
  CHECK_OK (sbx_fs_move (&ctx, "/home/user/way-up/moved", "/../../moved2", 0, &err_));
  CHECK (exists_root ("moved2"));
  /* Over a link to the outside: the link is replaced. */
  CHECK_OK (sbx_fs_move (&ctx, "/moved2", "/home/user/rel-canary", 1, &err_));
  CHECK (lstat_root ("home/user/rel-canary", &st) == 0 && S_ISREG (st.st_mode));
  CHECK_FAILS (sbx_fs_move (&ctx, "/home/user/rel-canary", "/home/user/rel-canary-dir/x", 0,
                            &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_move (&ctx, "/home/user/rel-canary-dir/inside", "/tmp/stolen", 0, &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_move (&ctx, "/escape/canary", "/tmp/stolen", 0, &err_), SBX_E_NOT_FOUND,
               ENOENT);
  return 0;
}

/* rename(2) cannot cross mounts: a regular file is copied (content and
   mode) and the source removed; anything else is refused. */
TREE_TEST (test_move_across_mounts)
{
  struct stat st;

  CHECK (mkdir_root ("mnt", 0777) == 0);
  CHECK (mount_root ("tmpfs", "mnt", "size=1m,mode=0777") == 0);
  CHECK (chmod (in_root ((char[256]){0}, 256, "home/user/hello.txt"), 0604) == 0);
  CHECK_OK (sbx_fs_move (&ctx, "hello.txt", "/mnt/hello.txt", 0, &err_));
  CHECK (!exists_root ("home/user/hello.txt"));
  CHECK_STR (slurp_root ("mnt/hello.txt"), "hello\n");
  CHECK (lstat_root ("mnt/hello.txt", &st) == 0 && (st.st_mode & 07777) == 0604);
  CHECK (count_temporaries ("mnt") == 0);
  /* No overwrite across mounts either. */
  CHECK (file_root ("tmp/f", "f\n") == 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "/tmp/f", "/mnt/hello.txt", 0, &err_), SBX_E_CONFLICT, EEXIST);
  CHECK_STR (slurp_root ("mnt/hello.txt"), "hello\n");
  CHECK_OK (sbx_fs_move (&ctx, "/tmp/f", "/mnt/hello.txt", 1, &err_));
  CHECK_STR (slurp_root ("mnt/hello.txt"), "f\n");
  CHECK (!exists_root ("tmp/f"));
  /* Directories and links do not cross. */
  CHECK (mkdir_root ("tmp/d", 0755) == 0);
  CHECK_FAILS (sbx_fs_move (&ctx, "/tmp/d", "/mnt/d", 0, &err_), SBX_E_INVALID, -1);
  CHECK (exists_root ("tmp/d") && !exists_root ("mnt/d"));
  CHECK_FAILS (sbx_fs_move (&ctx, "abs-canary", "/mnt/l", 0, &err_), SBX_E_INVALID, -1);
  CHECK (!exists_root ("mnt/l"));
  CHECK (lstat_root ("home/user/abs-canary", &st) == 0 && S_ISLNK (st.st_mode));
  CHECK (count_prefixed ("mnt", ".sbx-") == 0 && count_prefixed ("home/user", ".sbx-") == 0);
  CHECK (count_prefixed ("tmp", ".sbx-") == 0);
  return 0;
}

/* Across mounts every step runs as the sandbox user: a file the user
   cannot read does not become a readable copy, a file the user may not
   delete (sticky /tmp) is not deleted by the daemon's root, and a move
   that fails leaves no copy, no temporary and the source where it was. */
TREE_TEST (test_move_across_mounts_as_user)
{
  char path[256];
  struct stat st;

  CHECK (mkdir_root ("mnt", 0777) == 0);
  CHECK (mount_root ("tmpfs", "mnt", "size=1m,mode=0777") == 0);
  /* Root's unreadable file in sticky /tmp: the source is opened (as the
     user) before anything else. */
  CHECK (write_file_mode (in_root (path, sizeof path, "tmp/secret"), "root only\n", 0600) == 0);
  CHECK_FAILS (sbx_fs_move (&user, "/tmp/secret", "/mnt/stolen", 0, &err_), SBX_E_FORBIDDEN,
               EACCES);
  CHECK (!exists_root ("mnt/stolen"));
  CHECK_STR (slurp_root ("tmp/secret"), "root only\n");
  CHECK (current_fsuid () == 0 && current_fsgid () == 0);
  /* Readable, but root's in a sticky directory. */
  CHECK (write_file_mode (path, "root, readable\n", 0644) == 0);
  CHECK_FAILS (sbx_fs_move (&user, "/tmp/secret", "/mnt/copy", 0, &err_), SBX_E_FORBIDDEN,
               EPERM);
  CHECK (!exists_root ("mnt/copy"));
  CHECK_STR (slurp_root ("tmp/secret"), "root, readable\n");
  /* Root's unreadable file in a directory anyone may write. */
  CHECK (mkdir_root ("tmp/pub", 0777) == 0);
  CHECK (write_file_mode (in_root (path, sizeof path, "tmp/pub/secret"), "root only\n", 0600)
         == 0);
  CHECK_FAILS (sbx_fs_move (&user, "/tmp/pub/secret", "/mnt/stolen", 0, &err_), SBX_E_FORBIDDEN,
               EACCES);
  CHECK (!exists_root ("mnt/stolen"));
  CHECK (lstat_root ("tmp/pub/secret", &st) == 0 && st.st_uid == 0 && (st.st_mode & 0777) == 0600);
  CHECK_STR (slurp_root ("tmp/pub/secret"), "root only\n");
  CHECK (count_prefixed ("tmp/pub", ".sbx-") == 0 && count_prefixed ("tmp", ".sbx-") == 0);
  CHECK (count_prefixed ("mnt", ".sbx-") == 0);
  CHECK (current_fsuid () == 0 && current_fsgid () == 0);

  /* The user's own file moves, and the copy is the user's. */
  CHECK (write_file (in_root (path, sizeof path, "tmp/mine"), "mine\n") == 0);
  CHECK (chown (path, USER, USER) == 0);
  CHECK_OK (sbx_fs_move (&user, "/tmp/mine", "/mnt/mine", 0, &err_));
  CHECK (!exists_root ("tmp/mine"));
  CHECK (lstat_root ("mnt/mine", &st) == 0 && st.st_uid == USER && st.st_gid == USER);
  CHECK_STR (slurp_root ("mnt/mine"), "mine\n");
  CHECK (count_prefixed ("tmp", ".sbx-") == 0 && count_prefixed ("mnt", ".sbx-") == 0);
  CHECK (current_fsuid () == 0 && current_fsgid () == 0);
  return 0;
}

/* A copier for the tests: copies at once, in start, then calls `between`
   (a move's copy done, its source not yet renamed aside), where a test
   checks the state of the tree or races the move. The hook runs with the
   daemon's ids, like anything else in the sandbox would. */
static void (*between) (void);
static int between_rc;

static int
copy_now (void *arg, int in_fd, int out_fd, void **job, sbx_error_t **err)
{
  uid_t fsuid;
  gid_t fsgid;

  (void) arg;
  for (;;)
    {
      ssize_t n = sendfile (out_fd, in_fd, NULL, 1 << 20);
      if (n == 0)
        break;
      if (n < 0)
        return sbx_err_sys (err, errno, "sendfile");
    }
  *job = NULL;
  if (between)
    {
      fsgid = (gid_t) syscall (SYS_setfsgid, 0);
      fsuid = (uid_t) syscall (SYS_setfsuid, 0);
      between ();
      syscall (SYS_setfsuid, fsuid);
      syscall (SYS_setfsgid, fsgid);
    }
  return 0;
}

static int
copy_finish (void *arg, void *job, sbx_error_t **err)
{
  (void) arg;
  (void) job;
  (void) err;
  return 0;
}

static const struct sbx_fs_copier copier = {copy_now, copy_finish, NULL};

/* A file the user may read but not remove (the file and its sticky
   directory are another user's) does not move across mounts: the copy is
   dropped, the source keeps its name, inode and content, and the target's
   filesystem holds no entry and no block of it. */
TREE_TEST (test_move_across_sticky_source)
{
  struct sbx_fs_ctx with_copier = user;
  const struct sbx_fs_ctx *who[] = {&user, &with_copier};
  char src[256], dir[256], mnt[256];
  struct stat before, after;
  long long free_before;

  with_copier.copier = &copier;
  CHECK (mkdir_root ("mnt", 0777) == 0);
  CHECK (mount_root ("tmpfs", "mnt", "size=1m,mode=0777") == 0);
  in_root (mnt, sizeof mnt, "mnt");
  CHECK (mkdir_root ("tmp/shared", 01777) == 0);
  CHECK (chown (in_root (dir, sizeof dir, "tmp/shared"), OTHER, OTHER) == 0);
  CHECK (write_pattern (in_root (src, sizeof src, "tmp/shared/f"), 256 << 10, 0644) == 0);
  CHECK (chown (src, OTHER, OTHER) == 0);
  CHECK (lstat (src, &before) == 0);
  free_before = free_blocks ("mnt");
  for (size_t i = 0; i < ARRAY_SIZE (who); i++)
    {
      CHECK_FAILS (sbx_fs_move (who[i], "/tmp/shared/f", "/mnt/f", 0, &err_), SBX_E_FORBIDDEN,
                   EPERM);
      CHECK (lstat (src, &after) == 0 && after.st_ino == before.st_ino && after.st_nlink == 1);
      CHECK (after.st_uid == OTHER && (after.st_mode & 07777) == 0644);
      CHECK (holds_pattern (src, 256 << 10));
      CHECK_STR (dir_names (dir), "f");
      CHECK_STR (dir_names (mnt), "");
      CHECK (free_blocks ("mnt") == free_before);
      CHECK (current_fsuid () == 0 && current_fsgid () == 0);
    }
  return 0;
}

/* During the copy the source still has its name and the copy none. */
static void
check_during_copy (void)
{
  char mnt[256];

  if (exists_root ("tmp/mine") && count_prefixed ("tmp", ".sbx-") == 0
      && names_are (in_root (mnt, sizeof mnt, "mnt"), ""))
    between_rc++;
  else
    between_rc = -100;
}

/* A move across mounts that succeeds leaves no aside name and no temporary:
   the target is the copy (content, mode, the user's) with a single name,
   and the source is gone. */
TREE_TEST (test_move_across_leaves_nothing)
{
  struct sbx_fs_ctx with_copier = user;
  const struct sbx_fs_ctx *who[] = {&user, &with_copier};
  char path[256], mnt[256];
  struct stat st;

  with_copier.copier = &copier;
  CHECK (mkdir_root ("mnt", 0777) == 0);
  CHECK (mount_root ("tmpfs", "mnt", "size=1m,mode=0777") == 0);
  in_root (mnt, sizeof mnt, "mnt");
  between = check_during_copy;
  for (size_t i = 0; i < ARRAY_SIZE (who); i++)
    {
      CHECK (write_pattern (in_root (path, sizeof path, "tmp/mine"), 256 << 10, 0640) == 0);
      CHECK (chown (path, USER, USER) == 0);
      CHECK_OK (sbx_fs_move (who[i], "/tmp/mine", "/mnt/mine", 0, &err_));
      CHECK (!exists_root ("tmp/mine"));
      CHECK (count_prefixed ("tmp", ".sbx-") == 0);
      CHECK_STR (dir_names (mnt), "mine");
      CHECK (lstat_root ("mnt/mine", &st) == 0 && S_ISREG (st.st_mode) && st.st_nlink == 1);
      CHECK ((st.st_mode & 07777) == 0640 && st.st_uid == USER && st.st_gid == USER);
      CHECK (holds_pattern (in_root (path, sizeof path, "mnt/mine"), 256 << 10));
      CHECK (unlink (path) == 0);
      CHECK (current_fsuid () == 0 && current_fsgid () == 0);
    }
  CHECK (between_rc == 1); /* the copier's run saw the source in place */
  return 0;
}

static void
swap_source (void)
{
  char a[256], b[256];

  between_rc = rename (in_root (a, sizeof a, "tmp/intruder"), in_root (b, sizeof b, "tmp/src"));
}

static void
target_becomes_dir (void)
{
  between_rc = mkdir_root ("mnt/t", 0755);
}

/* Races during the copy. The source's name given to another file: the
   move fails and that file keeps the name (it was not copied, so it must
   not be removed). The target turned into a directory: the commit fails
   and the source gets its name back. Nothing is left either way. */
TREE_TEST (test_move_across_races)
{
  struct sbx_fs_ctx with_copier = user;
  char path[256], mnt[256];
  struct stat before, after;

  with_copier.copier = &copier;
  CHECK (mkdir_root ("mnt", 0777) == 0);
  CHECK (mount_root ("tmpfs", "mnt", "size=1m,mode=0777") == 0);
  in_root (mnt, sizeof mnt, "mnt");
  CHECK (file_root ("tmp/src", "source\n") == 0 && file_root ("tmp/intruder", "intruder\n") == 0);
  /* The user's own, or the user could not rename it aside (sticky /tmp). */
  CHECK (chown (in_root (path, sizeof path, "tmp/intruder"), USER, USER) == 0);
  CHECK (chown (in_root (path, sizeof path, "tmp/src"), USER, USER) == 0);
  between = swap_source;
  between_rc = -1;
  CHECK_FAILS (sbx_fs_move (&with_copier, "/tmp/src", "/mnt/t", 0, &err_), SBX_E_CONFLICT, 0);
  CHECK (between_rc == 0);
  CHECK_STR (slurp_root ("tmp/src"), "intruder\n");
  CHECK (count_prefixed ("tmp", ".sbx-") == 0);
  CHECK_STR (dir_names (mnt), "");

  CHECK (file_root ("tmp/src", "source\n") == 0);
  CHECK (chown (path, USER, USER) == 0 && lstat (path, &before) == 0);
  between = target_becomes_dir;
  between_rc = -1;
  CHECK_FAILS (sbx_fs_move (&with_copier, "/tmp/src", "/mnt/t", 0, &err_), SBX_E_INVALID, EISDIR);
  CHECK (between_rc == 0);
  CHECK (lstat (path, &after) == 0 && after.st_ino == before.st_ino);
  CHECK_STR (slurp_root ("tmp/src"), "source\n");
  CHECK (count_prefixed ("tmp", ".sbx-") == 0);
  CHECK_STR (dir_names (mnt), "t");
  CHECK (lstat_root ("mnt/t", &after) == 0 && S_ISDIR (after.st_mode));
  CHECK (count_prefixed ("mnt/t", "") == 2); /* "." and ".." */
  CHECK (current_fsuid () == 0 && current_fsgid () == 0);
  return 0;
}

/*============================ remove =================================== */

TREE_TEST (test_remove)
{
  CHECK_OK (sbx_fs_remove (&ctx, "hello.txt", 0, &err_));
  CHECK (!exists_root ("home/user/hello.txt"));
  CHECK_FAILS (sbx_fs_remove (&ctx, "hello.txt", 0, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK (mkdir_root ("home/user/e", 0755) == 0);
  CHECK_OK (sbx_fs_remove (&ctx, "e", 0, &err_));
  CHECK (!exists_root ("home/user/e"));
  CHECK (mkdir_root ("home/user/t", 0755) == 0 && mkdir_root ("home/user/t/u", 0755) == 0
         && file_root ("home/user/t/u/f", "f") == 0 && file_root ("home/user/t/g", "g") == 0
         && symlink_root ("/", "home/user/t/u/root-link") == 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "t", 0, &err_), SBX_E_CONFLICT, ENOTEMPTY);
  CHECK (exists_root ("home/user/t/u/f"));
  CHECK_OK (sbx_fs_remove (&ctx, "t/", 1, &err_));
  CHECK (!exists_root ("home/user/t"));
  CHECK (exists_root ("etc/passwd")); /* the link to "/" was removed, not followed */
  /* recursive on a file is a plain remove. */
  CHECK (file_root ("home/user/plain", "p") == 0);
  CHECK_OK (sbx_fs_remove (&ctx, "plain", 1, &err_));
  CHECK (!exists_root ("home/user/plain"));
  /* Names that are not removable files. */
  CHECK_FAILS (sbx_fs_remove (&ctx, "/", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "/home/user/.", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "/home/user/..", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, ".", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "..", 1, &err_), SBX_E_INVALID, 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "", 1, &err_), SBX_E_INVALID, 0);
  CHECK (exists_root ("home/user"));
  return 0;
}

TREE_TEST (test_remove_stays_inside)
{
  CHECK (mkdir_root ("home/user/trap", 0755) == 0);
  CHECK (symlink_root ("../../../../canary-dir", "home/user/trap/rel") == 0);
  CHECK (symlink_root ("/", "home/user/trap/root") == 0);
  {
    char target[128];
    snprintf (target, sizeof target, "%s/canary-dir", tmp);
    CHECK (symlink_root (target, "home/user/trap/abs") == 0);
  }
  CHECK_OK (sbx_fs_remove (&ctx, "trap", 1, &err_));
  CHECK (!exists_root ("home/user/trap"));
  CHECK (exists_root ("etc/passwd"));
  /* Links themselves are removed, not their targets. */
  CHECK_OK (sbx_fs_remove (&ctx, "abs-canary", 0, &err_));
  CHECK_OK (sbx_fs_remove (&ctx, "rel-canary-dir", 1, &err_));
  CHECK (!exists_root ("home/user/abs-canary") && !exists_root ("home/user/rel-canary-dir"));
  CHECK_OK (sbx_fs_remove (&ctx, "/home/user/up", 1, &err_));
  CHECK (exists_root ("etc/passwd") && exists_root ("home/user"));
  /* Through links to the outside: nothing there. */
  CHECK_FAILS (sbx_fs_remove (&ctx, "/home/user/abs-canary-dir/inside", 0, &err_),
               SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_remove (&ctx, "/escape/canary", 0, &err_), SBX_E_NOT_FOUND, ENOENT);
  CHECK_FAILS (sbx_fs_remove (&ctx, "/../canary", 0, &err_), SBX_E_NOT_FOUND, ENOENT);
  /* Inside, "/../canary" is /canary. */
  CHECK (file_root ("canary", "inside\n") == 0);
  CHECK_OK (sbx_fs_remove (&ctx, "/../canary", 0, &err_));
  CHECK (!exists_root ("canary"));
  return 0;
}

/* A recursive remove never descends into another mount: it stops there
   with an error, and the mount's content survives. */
TREE_TEST (test_remove_does_not_cross_mounts)
{
  CHECK (mkdir_root ("home/user/tree", 0755) == 0 && mkdir_root ("home/user/tree/mnt", 0755) == 0);
  CHECK (mount_root ("tmpfs", "home/user/tree/mnt", "size=1m") == 0);
  CHECK (file_root ("home/user/tree/mnt/precious", "keep\n") == 0);
  CHECK (mkdir_root ("home/user/tree/mnt/sub", 0755) == 0);
  CHECK (file_root ("home/user/tree/mnt/sub/deep", "keep too\n") == 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "tree", 1, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_STR (slurp_root ("home/user/tree/mnt/precious"), "keep\n");
  CHECK_STR (slurp_root ("home/user/tree/mnt/sub/deep"), "keep too\n");
  /* A bind mount of a directory of the same filesystem is a mount too. */
  umount2 (mounts[--n_mounts], MNT_DETACH);
  CHECK (mkdir_root ("home/user/tree/bound", 0755) == 0);
  {
    char src[256], dst[256];
    in_root (src, sizeof src, "etc");
    in_root (dst, sizeof dst, "home/user/tree/bound");
    CHECK (mount (src, dst, NULL, MS_BIND, NULL) == 0);
    snprintf (mounts[n_mounts++], sizeof mounts[0], "%s", dst);
  }
  CHECK_FAILS (sbx_fs_remove (&ctx, "tree", 1, &err_), SBX_E_FORBIDDEN, 0);
  CHECK_STR (slurp_root ("etc/passwd"), "sandbox passwd\n");
  umount2 (mounts[--n_mounts], MNT_DETACH);
  CHECK_OK (sbx_fs_remove (&ctx, "tree", 1, &err_));
  CHECK (!exists_root ("home/user/tree"));
  return 0;
}

/* A recursive remove goes 256 levels below its target and no further:
   deeper trees are refused before anything is removed. */
TREE_TEST (test_remove_depth_limit)
{
  char rel[1024] = "home/user/deep";
  char path[4096];

  CHECK (mkdir_root (rel, 0755) == 0);
  for (int depth = 1; depth <= 257; depth++)
    {
      strcat (rel, "/d");
      CHECK (mkdir_root (rel, 0755) == 0);
    }
  CHECK (file_root ("home/user/deep/f", "f") == 0);
  CHECK_FAILS (sbx_fs_remove (&ctx, "deep", 1, &err_), SBX_E_INVALID, 0);
  CHECK (exists_root (rel) && exists_root ("home/user/deep/d"));
  /* 256 levels: removed. */
  CHECK (rmdir (in_root (path, sizeof path, rel)) == 0);
  CHECK_OK (sbx_fs_remove (&ctx, "deep", 1, &err_));
  CHECK (!exists_root ("home/user/deep"));
  return 0;
}

/*============================ Acting as the user ======================= */

/* The sandbox user's permissions apply, new files are the user's, and the
   thread goes back to the daemon's identity after every call. */
TREE_TEST (test_user_permissions)
{
  struct stat st;
  uint64_t size;
  char path[256];

  CHECK (write_file_mode (in_root (path, sizeof path, "etc/shadow"), "root secret\n", 0600) == 0);
  CHECK_FAILS (sbx_fs_open_read (&user, "/etc/shadow", &size, &err_), SBX_E_FORBIDDEN, EACCES);
  CHECK (current_fsuid () == 0 && current_fsgid () == 0);
  CHECK_STR (read_path (&ctx, "/etc/shadow"), "root secret\n");
  CHECK_STR (read_path (&user, "/etc/passwd"), "sandbox passwd\n");

  CHECK_FAILS (upload (&user, "/etc/passwd", "owned\n", 0644, 0, &err_), SBX_E_FORBIDDEN, EACCES);
  CHECK_STR (slurp_root ("etc/passwd"), "sandbox passwd\n");
  CHECK_FAILS (sbx_fs_mkdir (&user, "/etc/d", 0755, 0, &err_), SBX_E_FORBIDDEN, EACCES);
  CHECK_FAILS (sbx_fs_remove (&user, "/etc/passwd", 0, &err_), SBX_E_FORBIDDEN, EACCES);
  CHECK_FAILS (sbx_fs_move (&user, "/etc/passwd", "/home/user/p", 0, &err_), SBX_E_FORBIDDEN,
               EACCES);
  CHECK (exists_root ("etc/passwd"));

  CHECK_OK (upload (&user, "mine", "mine\n", 0600, 0, &err_));
  CHECK (lstat_root ("home/user/mine", &st) == 0 && st.st_uid == USER && st.st_gid == USER);
  CHECK_OK (sbx_fs_mkdir (&user, "mydir", 0755, 0, &err_));
  CHECK (lstat_root ("home/user/mydir", &st) == 0 && st.st_uid == USER);
  /* Sticky /tmp: another user's file cannot be removed or replaced. */
  CHECK (file_root ("tmp/roots", "r\n") == 0);
  CHECK_FAILS (sbx_fs_remove (&user, "/tmp/roots", 0, &err_), SBX_E_FORBIDDEN, EPERM);
  CHECK_FAILS (sbx_fs_move (&user, "mine", "/tmp/roots", 1, &err_), SBX_E_FORBIDDEN, EPERM);
  CHECK_STR (slurp_root ("tmp/roots"), "r\n");
  CHECK (current_fsuid () == 0 && current_fsgid () == 0);
  return 0;
}

/* With a uid base, the user's host ids are base + inside ids, and entries
   report inside ids. */
TREE_TEST (test_user_with_base)
{
  struct sbx_fs_ctx shifted = user;
  struct sbx_fs_entry *e = malloc (sizeof *e);
  struct stat st;
  char path[256];

  CHECK (e != NULL);
  shifted.uid_base = 200000;
  CHECK (chown (in_root (path, sizeof path, "home/user"), 200000 + USER, 200000 + USER) == 0);
  CHECK_OK (upload (&shifted, "f", "x", 0644, 0, &err_));
  CHECK (lstat_root ("home/user/f", &st) == 0);
  CHECK (st.st_uid == 200000 + USER && st.st_gid == 200000 + USER);
  CHECK_OK (sbx_fs_stat (&shifted, "f", e, &err_));
  CHECK (e->uid == USER && e->gid == USER);
  /* hello.txt belongs to host 1000, which this sandbox does not map. */
  CHECK_OK (sbx_fs_stat (&shifted, "hello.txt", e, &err_));
  CHECK (e->uid == 65534);
  CHECK (current_fsuid () == 0 && current_fsgid () == 0);
  free (e);
  return 0;
}

int
main (void)
{
  if (geteuid () != 0)
    {
      printf ("1..0 # SKIP the files API tests need root\n");
      return 0;
    }
  RUN (test_normalize);
  RUN (test_type_names);
  RUN (test_read_symlinks_stay_inside);
  RUN (test_read_absolute_link_means_in_root);
  RUN (test_open_read);
  RUN (test_open_read_refuses_special_files);
  RUN (test_procfs_is_refused);
  RUN (test_stat);
  RUN (test_stat_id_mapping);
  RUN (test_list_depth);
  RUN (test_list_entry_fields);
  RUN (test_list_limits);
  RUN (test_list_resolution);
  RUN (test_list_unreadable_subdirectory);
  RUN (test_list_skips_procfs_below);
  RUN (test_upload_commit_replaces);
  RUN (test_metadata);
  RUN (test_upload_abort_leaves_nothing);
  RUN (test_upload_concurrent);
  RUN (test_upload_paths);
  RUN (test_upload_stays_inside);
  RUN (test_upload_commit_as_user);
  RUN (test_upload_cut_short_leaves_nothing);
  RUN (test_upload_without_tmpfile);
  RUN (test_mkdir);
  RUN (test_mkdir_stays_inside);
  RUN (test_move);
  RUN (test_move_stays_inside);
  RUN (test_move_across_mounts);
  RUN (test_move_across_mounts_as_user);
  RUN (test_move_across_sticky_source);
  RUN (test_move_across_leaves_nothing);
  RUN (test_move_across_races);
  RUN (test_remove);
  RUN (test_remove_stays_inside);
  RUN (test_remove_does_not_cross_mounts);
  RUN (test_remove_depth_limit);
  RUN (test_user_permissions);
  RUN (test_user_with_base);
  return tap_done ();
}
