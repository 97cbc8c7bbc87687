/* Unit tests for the template root plan: sbx_plan_path_ok (src/iso/proto.h),
 * the daemon's encoder sbx_plan_add (src/iso/plan.c), and what init does
 * with the bytes.
 *
 * The decoder is init's own: src/iso/init/rootfs.c is compiled into this
 * test, with init_die and init_protocol_violation replaced by exits that
 * say which one happened, so validate_plan and apply_plan run exactly as
 * in a sandbox's PID 1. They run in a child in a mount namespace of its
 * own (private propagation), against a temporary directory as the root,
 * so the read-only binds of BIND_RO entries are real mounts that vanish
 * with the child.
 */
#include "iso/engine.h"
#include "iso/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "tap.h"

/* init's rootfs code, with its static functions. */
/* What init embeds as its sudo client (src/iso/init/sudo_client.S): a
   stand-in of known bytes for the sudo layer rootfs.c makes. */
__asm__ (".section .rodata\n"
         ".global sbx_sudo_client\n.global sbx_sudo_client_end\n"
         "sbx_sudo_client: .ascii \"#!/bin/sh\\n\"\n"
         "sbx_sudo_client_end:\n"
         ".previous");

#include "iso/init/rootfs.c"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

/* How a child running init's code ended. */
#define EXIT_VIOLATION 90
#define EXIT_DIE 91
#define EXIT_CHECK 92

void
init_die (int sys_errno, const char *what)
{
  fprintf (stderr, "#   init_die: %s: %s\n", what, strerror (sys_errno));
  fflush (stderr);
  _exit (EXIT_DIE);
}

void
init_protocol_violation (void)
{
  _exit (EXIT_VIOLATION);
}

/*============================ Helpers ================================== */

static char tmp_dir[64];

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st;
  (void) flag;
  (void) ftw;
  return remove (path);
}

static void
remove_tmp (void)
{
  if (tmp_dir[0])
    nftw (tmp_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  tmp_dir[0] = '\0';
}

static int
make_tmp (void)
{
  snprintf (tmp_dir, sizeof tmp_dir, "/tmp/sbx-test-plan-XXXXXX");
  if (mkdtemp (tmp_dir) == NULL)
    {
      tmp_dir[0] = '\0';
      return -1;
    }
  return 0;
}

/* Run a test body with a fresh tmp_dir, removed whatever happened. */
static int
with_tmp (int (*body) (void))
{
  int rc;

  if (make_tmp () < 0)
    return -1;
  rc = body ();
  remove_tmp ();
  return rc;
}

#define TMP_TEST(name)                                                         \
  static int name##_in_tmp (void);                                             \
  static int name (void) { return with_tmp (name##_in_tmp); }                  \
  static int name##_in_tmp (void)

static int
write_file (const char *path, const char *content)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  size_t n = strlen (content);

  if (fd < 0)
    return -1;
  if (write (fd, content, n) != (ssize_t) n)
    {
      close (fd);
      return -1;
    }
  return close (fd);
}

static void
config_for (const struct sbx_plan *plan, struct sbx_msg_config *cfg)
{
  memset (cfg, 0, sizeof *cfg);
  cfg->hdr.type = SBX_MSG_CONFIG;
  cfg->version = SBX_PROTO_VERSION;
  cfg->plan_count = plan->count;
  cfg->plan_bytes = (uint32_t) plan->bytes.len;
}

/* Run init's validate_plan over (count, bytes) in a child; its exit code. */
static int
run_validate (uint32_t count, const void *bytes, size_t len)
{
  struct sbx_msg_config cfg;
  int status;
  pid_t pid;

  memset (&cfg, 0, sizeof cfg);
  cfg.plan_count = count;
  cfg.plan_bytes = (uint32_t) len;
  fflush (NULL);
  pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      validate_plan (&cfg, bytes);
      _exit (0);
    }
  if (waitpid (pid, &status, 0) != pid || !WIFEXITED (status))
    return -1;
  return WEXITSTATUS (status);
}

/* Add an entry, which must succeed. */
static int
add_ok (struct sbx_plan *p, enum sbx_plan_kind kind, uint16_t flags, uint32_t mode,
        const char *src, const char *dst, const char *data)
{
  sbx_error_t *err = NULL;

  if (sbx_plan_add (p, kind, flags, mode, src, dst, data, data ? strlen (data) : 0, &err) < 0)
    {
      fprintf (stderr, "#   sbx_plan_add `%s`: %s\n", dst, err->msg);
      sbx_error_free (err);
      return -1;
    }
  return 0;
}

/* An add that must fail with `kind` and leave the plan as it was. */
static int
add_fails (struct sbx_plan *p, enum sbx_plan_kind kind, const char *src, const char *dst,
           const void *data, size_t data_len, enum sbx_error_kind want)
{
  sbx_error_t *err = NULL;
  uint32_t count = p->count;
  size_t len = p->bytes.len;
  int rc = sbx_plan_add (p, kind, 0, 0644, src, dst, data, data_len, &err);
  int ok = rc == -1 && err != NULL && err->kind == want && p->count == count
           && p->bytes.len == len;

  if (!ok)
    fprintf (stderr, "#   sbx_plan_add kind %d dst `%.40s` src `%.40s` (%zu data bytes): %s\n",
             (int) kind, dst, src ? src : "(null)", data_len,
             rc == 0 ? "accepted" : err ? err->msg : "no error");
  sbx_error_free (err);
  return ok ? 0 : -1;
}

/*============================ sbx_plan_path_ok ========================= */

static int
test_path_ok (void)
{
  static const char *const good[] = {
    "a", "etc", "etc/passwd", "usr/lib/x86_64-linux-gnu", "a.b", "...", "..a", "a..", ".a",
    "a/.b", "a/..b", "a/b/c/d/e", "-", " ", "a b", "\xc3\xa9", "a\\b", "a:b",
  };
  static const char *const bad[] = {
    "", "/", "/a", "/etc/passwd", "a/", "a//b", "//", ".", "./a", "a/.", "a/./b",
    "..", "../a", "a/..", "a/../b", "../../etc", "a/b/..", "./", "/..",
  };
  char longest[SBX_PATH_MAX + 1];

  for (size_t i = 0; i < ARRAY_SIZE (good); i++)
    if (!sbx_plan_path_ok (good[i], strlen (good[i])))
      {
        fprintf (stderr, "#   `%s` refused\n", good[i]);
        return -1;
      }
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    if (sbx_plan_path_ok (bad[i], strlen (bad[i])))
      {
        fprintf (stderr, "#   `%s` accepted\n", bad[i]);
        return -1;
      }
  /* Lengths: up to SBX_PATH_MAX - 1 (in components of at most 255). */
  memset (longest, 'a', sizeof longest);
  for (size_t i = 255; i < sizeof longest; i += 256)
    longest[i] = '/';
  CHECK (sbx_plan_path_ok (longest, SBX_PATH_MAX - 1));
  CHECK (!sbx_plan_path_ok (longest, SBX_PATH_MAX));
  CHECK (!sbx_plan_path_ok (longest, SBX_PATH_MAX + 1));
  /* NULs inside the counted bytes. */
  CHECK (!sbx_plan_path_ok ("a\0b", 3));
  CHECK (!sbx_plan_path_ok ("a\0", 2));
  CHECK (!sbx_plan_path_ok ("\0", 1));
  /* Only the counted bytes matter. */
  CHECK (sbx_plan_path_ok ("abc/..", 3));
  CHECK (!sbx_plan_path_ok ("a/..", 2));
  CHECK (!sbx_plan_path_ok ("abc", 0));
  CHECK (sbx_plan_path_ok ("a/b\0garbage", 3));
  return 0;
}

/*============================ sbx_plan_add ============================= */

static int
test_add_rejects_paths (void)
{
  static const char *const bad[] = {
    "", "/", "/etc/passwd", "..", ".", "a/..", "../a", "a/./b", "a//b", "a/", "./a",
  };
  struct sbx_plan p = {SBX_BUF_INIT, 0};
  char too_long[SBX_PATH_MAX + 1];

  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      CHECK (add_fails (&p, SBX_PLAN_DIR, NULL, bad[i], NULL, 0, SBX_E_INVALID) == 0);
      CHECK (add_fails (&p, SBX_PLAN_FILE, NULL, bad[i], "x", 1, SBX_E_INVALID) == 0);
      CHECK (add_fails (&p, SBX_PLAN_SYMLINK, NULL, bad[i], "t", 1, SBX_E_INVALID) == 0);
      CHECK (add_fails (&p, SBX_PLAN_BIND_RO, "/usr", bad[i], NULL, 0, SBX_E_INVALID) == 0);
    }
  memset (too_long, 'a', sizeof too_long);
  for (size_t i = 200; i < sizeof too_long; i += 200)
    too_long[i] = '/';
  too_long[SBX_PATH_MAX] = '\0'; /* 512 bytes */
  CHECK (add_fails (&p, SBX_PLAN_DIR, NULL, too_long, NULL, 0, SBX_E_INVALID) == 0);
  too_long[SBX_PATH_MAX - 1] = '\0'; /* 511 bytes */
  CHECK (add_ok (&p, SBX_PLAN_DIR, 0, 0755, NULL, too_long, NULL) == 0);
  CHECK (p.count == 1);
  sbx_plan_free (&p);
  CHECK (p.count == 0 && p.bytes.data == NULL);
  return 0;
}

static int
test_add_rejects_sources (void)
{
  struct sbx_plan p = {SBX_BUF_INIT, 0};
  char long_src[SBX_PATH_MAX + 1];

  /* A bind needs an absolute host path. */
  CHECK (add_fails (&p, SBX_PLAN_BIND_RO, NULL, "usr", NULL, 0, SBX_E_INVALID) == 0);
  CHECK (add_fails (&p, SBX_PLAN_BIND_RO, "", "usr", NULL, 0, SBX_E_INVALID) == 0);
  CHECK (add_fails (&p, SBX_PLAN_BIND_RO, "usr", "usr", NULL, 0, SBX_E_INVALID) == 0);
  CHECK (add_fails (&p, SBX_PLAN_BIND_RO, "./usr", "usr", NULL, 0, SBX_E_INVALID) == 0);
  /* Too long for any kind. */
  memset (long_src, 'x', sizeof long_src);
  long_src[0] = '/';
  long_src[SBX_PATH_MAX] = '\0';
  CHECK (add_fails (&p, SBX_PLAN_BIND_RO, long_src, "usr", NULL, 0, SBX_E_INVALID) == 0);
  CHECK (add_fails (&p, SBX_PLAN_DIR, long_src, "usr", NULL, 0, SBX_E_INVALID) == 0);
  long_src[SBX_PATH_MAX - 1] = '\0';
  CHECK (add_ok (&p, SBX_PLAN_BIND_RO, 0, 0, long_src, "usr", NULL) == 0);
  sbx_plan_free (&p);
  return 0;
}

/* Entries init would refuse are refused here, where the error can say
   which template entry is wrong (instead of a sandbox that dies). */
static int
test_add_rejects_what_init_refuses (void)
{
  struct sbx_plan p = {SBX_BUF_INIT, 0};
  char target[SBX_PATH_MAX + 1];

  CHECK (add_fails (&p, SBX_PLAN_SYMLINK, NULL, "lnk", "", 0, SBX_E_INVALID) == 0);
  CHECK (add_fails (&p, SBX_PLAN_SYMLINK, NULL, "lnk", NULL, 0, SBX_E_INVALID) == 0);
  CHECK (add_fails (&p, SBX_PLAN_SYMLINK, NULL, "lnk", "a\0b", 3, SBX_E_INVALID) == 0);
  memset (target, 't', sizeof target);
  CHECK (add_fails (&p, SBX_PLAN_SYMLINK, NULL, "lnk", target, SBX_PATH_MAX, SBX_E_INVALID)
         == 0);
  CHECK (add_fails (&p, (enum sbx_plan_kind) 0, NULL, "x", NULL, 0, SBX_E_INVALID) == 0);
  CHECK (add_fails (&p, (enum sbx_plan_kind) 5, NULL, "x", NULL, 0, SBX_E_INVALID) == 0);
  CHECK (add_fails (&p, (enum sbx_plan_kind) 0xffff, NULL, "x", NULL, 0, SBX_E_INVALID) == 0);
  /* The longest and shortest targets init takes. */
  CHECK (sbx_plan_add (&p, SBX_PLAN_SYMLINK, 0, 0, NULL, "long", target, SBX_PATH_MAX - 1, NULL)
         == 0);
  CHECK (sbx_plan_add (&p, SBX_PLAN_SYMLINK, 0, 0, NULL, "short", "/", 1, NULL) == 0);
  CHECK (p.count == 2);
  CHECK (run_validate (p.count, p.bytes.data, p.bytes.len) == 0);
  sbx_plan_free (&p);
  return 0;
}

static int
test_add_limits (void)
{
  struct sbx_plan p = {SBX_BUF_INIT, 0};
  char *data = malloc (SBX_PROTO_MAX_MSG / 2 + 1);

  CHECK (data != NULL);
  memset (data, 'd', SBX_PROTO_MAX_MSG / 2 + 1);
  CHECK (add_fails (&p, SBX_PLAN_FILE, NULL, "big", data, SBX_PROTO_MAX_MSG / 2 + 1,
                    SBX_E_TOO_LARGE)
         == 0);
  CHECK (sbx_plan_add (&p, SBX_PLAN_FILE, 0, 0644, NULL, "big", data, SBX_PROTO_MAX_MSG / 2,
                       NULL)
         == 0);
  free (data);
  for (int i = 1; i < SBX_PLAN_MAX_ENTRIES; i++)
    {
      char dst[16];
      snprintf (dst, sizeof dst, "d%d", i);
      CHECK (add_ok (&p, SBX_PLAN_DIR, 0, 0755, NULL, dst, NULL) == 0);
    }
  CHECK (p.count == SBX_PLAN_MAX_ENTRIES);
  CHECK (add_fails (&p, SBX_PLAN_DIR, NULL, "one-more", NULL, 0, SBX_E_INVALID) == 0);
  CHECK (run_validate (p.count, p.bytes.data, p.bytes.len) == 0);
  sbx_plan_free (&p);
  return 0;
}

/* The wire layout, byte for byte: a fixed header, then src, dst and data
   without NULs, entries back to back. */
static int
test_encoding (void)
{
  struct sbx_plan p = {SBX_BUF_INIT, 0};
  struct sbx_plan_entry e;
  const char *b;

  CHECK (sizeof e == 20);
  CHECK (add_ok (&p, SBX_PLAN_BIND_RO, SBX_PLAN_OPTIONAL, 0, "/etc/resolv.conf",
                 "etc/resolv.conf", NULL)
         == 0);
  CHECK (add_ok (&p, SBX_PLAN_FILE, 0, 0640, NULL, "etc/hosts", "127.0.0.1 localhost\n") == 0);
  CHECK (add_ok (&p, SBX_PLAN_SYMLINK, 0, 0, NULL, "bin", "usr/bin") == 0);
  CHECK (add_ok (&p, SBX_PLAN_DIR, 0, 01777, "/ignored", "tmp2", NULL) == 0);
  CHECK (p.count == 4);
  CHECK (p.bytes.len == 4 * sizeof e + (16 + 15) + (9 + 20) + (3 + 7) + (8 + 4));

  b = p.bytes.data;
  memcpy (&e, b, sizeof e);
  CHECK (e.kind == SBX_PLAN_BIND_RO && e.flags == SBX_PLAN_OPTIONAL && e.mode == 0);
  CHECK (e.src_len == 16 && e.dst_len == 15 && e.data_len == 0);
  CHECK (memcmp (b + sizeof e, "/etc/resolv.confetc/resolv.conf", 31) == 0);
  b += sizeof e + 31;

  memcpy (&e, b, sizeof e);
  CHECK (e.kind == SBX_PLAN_FILE && e.flags == 0 && e.mode == 0640);
  CHECK (e.src_len == 0 && e.dst_len == 9 && e.data_len == 20);
  CHECK (memcmp (b + sizeof e, "etc/hosts127.0.0.1 localhost\n", 29) == 0);
  b += sizeof e + 29;

  memcpy (&e, b, sizeof e);
  CHECK (e.kind == SBX_PLAN_SYMLINK && e.src_len == 0 && e.dst_len == 3 && e.data_len == 7);
  CHECK (memcmp (b + sizeof e, "binusr/bin", 10) == 0);
  b += sizeof e + 10;

  /* A source on a kind that does not use one is carried (and ignored). */
  memcpy (&e, b, sizeof e);
  CHECK (e.kind == SBX_PLAN_DIR && e.mode == 01777);
  CHECK (e.src_len == 8 && e.dst_len == 4 && e.data_len == 0);
  CHECK (memcmp (b + sizeof e, "/ignoredtmp2", 12) == 0);
  b += sizeof e + 12;
  CHECK (b == p.bytes.data + p.bytes.len);

  /* Binary file content goes through as is, NULs included. */
  CHECK (sbx_plan_add (&p, SBX_PLAN_FILE, 0, 0600, NULL, "bin.dat", "\0\1\2", 3, NULL) == 0);
  CHECK (memcmp (p.bytes.data + p.bytes.len - 10, "bin.dat\0\1\2", 10) == 0);

  CHECK (run_validate (p.count, p.bytes.data, p.bytes.len) == 0);
  sbx_plan_free (&p);
  return 0;
}

/*============================ init's side ============================== */

/* validate_plan accepts exactly the encoder's output: every corruption of
   the counts or lengths is a protocol violation. */
static int
test_validate_rejects_corruption (void)
{
  struct sbx_plan p = {SBX_BUF_INIT, 0};
  struct sbx_plan_entry e;
  char *copy;
  size_t n;

  CHECK (add_ok (&p, SBX_PLAN_DIR, 0, 0755, NULL, "home", NULL) == 0);
  CHECK (add_ok (&p, SBX_PLAN_FILE, 0, 0644, NULL, "etc/passwd", "root:x:0:0::/root:/bin/sh\n")
         == 0);
  CHECK (add_ok (&p, SBX_PLAN_SYMLINK, 0, 0, NULL, "lib", "usr/lib") == 0);
  n = p.bytes.len;
  copy = malloc (n + 1);
  CHECK (copy != NULL);

  CHECK (run_validate (p.count, p.bytes.data, n) == 0);
  CHECK (run_validate (0, p.bytes.data, 0) == 0);
  CHECK (run_validate (p.count + 1, p.bytes.data, n) == EXIT_VIOLATION);
  CHECK (run_validate (p.count - 1, p.bytes.data, n) == EXIT_VIOLATION);
  CHECK (run_validate (p.count, p.bytes.data, n - 1) == EXIT_VIOLATION);
  memcpy (copy, p.bytes.data, n);
  copy[n] = 0;
  CHECK (run_validate (p.count, copy, n + 1) == EXIT_VIOLATION);
  CHECK (run_validate (SBX_PLAN_MAX_ENTRIES + 1, p.bytes.data, n) == EXIT_VIOLATION);

  /* Inflate each length field of the first entry by one. */
  for (int field = 0; field < 3; field++)
    {
      memcpy (copy, p.bytes.data, n);
      memcpy (&e, copy, sizeof e);
      if (field == 0)
        e.src_len++;
      else if (field == 1)
        e.dst_len++;
      else
        e.data_len++;
      memcpy (copy, &e, sizeof e);
      /* The bytes still add up only if something else shrank: they do not. */
      CHECK (run_validate (p.count, copy, n) == EXIT_VIOLATION);
    }
  /* Lengths past the limits. */
  memcpy (copy, p.bytes.data, n);
  memcpy (&e, copy, sizeof e);
  e.dst_len = SBX_PATH_MAX;
  memcpy (copy, &e, sizeof e);
  CHECK (run_validate (p.count, copy, n) == EXIT_VIOLATION);
  e.dst_len = 4;
  e.data_len = 0xffffffffu; /* would wrap a 32-bit sum */
  memcpy (copy, &e, sizeof e);
  CHECK (run_validate (p.count, copy, n) == EXIT_VIOLATION);
  free (copy);
  sbx_plan_free (&p);
  return 0;
}

/* What the checks of apply_plan look like from a plan: run it and get the
   exit code (90 protocol violation, 91 init_die, 92 a check failed, 0). */
static int
run_apply (const char *root_dir, const struct sbx_plan *plan, int (*verify) (int root))
{
  int status;
  pid_t pid;

  fflush (NULL);
  pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      struct sbx_msg_config cfg;
      char disk_dir[160], empty[180];
      int root, disk;

      umask (022);
      if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        {
          perror ("#   private mount namespace");
          _exit (EXIT_CHECK);
        }
      /* The sandbox's disk stands in with its empty directory: the second
         lower layer of every host directory's overlay. */
      /* In the test's directory, which is removed after it. */
      snprintf (disk_dir, sizeof disk_dir, "%s/disk", tmp_dir);
      snprintf (empty, sizeof empty, "%s/" EMPTY_LOWER, disk_dir);
      if ((mkdir (disk_dir, 0755) < 0 && errno != EEXIST) || (mkdir (empty, 0555) < 0 && errno != EEXIST))
        _exit (EXIT_CHECK);
      root = open (root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
      disk = open (disk_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (root < 0 || disk < 0)
        _exit (EXIT_CHECK);
      config_for (plan, &cfg);
      apply_plan (root, disk, &cfg, (const unsigned char *) plan->bytes.data);
      _exit (verify == NULL || verify (root) == 0 ? 0 : EXIT_CHECK);
    }
  if (waitpid (pid, &status, 0) != pid || !WIFEXITED (status))
    return -1;
  return WEXITSTATUS (status);
}

static char host_src[128], host_file[128];

static int
read_at_root (int root, const char *path, char *buf, size_t cap)
{
  int fd = openat (root, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  ssize_t n;

  if (fd < 0)
    return -1;
  n = read (fd, buf, cap - 1);
  close (fd);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return 0;
}

static int
verify_tree (int root)
{
  struct stat st;
  struct statvfs vfs;
  char buf[256];
  ssize_t n;
  int fd;

  /* DIR: exact mode, parents made. */
  CHECK (fstatat (root, "home", &st, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK (S_ISDIR (st.st_mode) && (st.st_mode & 07777) == 0711);
  CHECK (fstatat (root, "var/spool/deep", &st, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK (S_ISDIR (st.st_mode) && (st.st_mode & 07777) == 01777);
  CHECK (fstatat (root, "var/spool", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode));
  /* FILE: content and exact mode, parents made 0755. */
  CHECK (read_at_root (root, "etc/app/conf", buf, sizeof buf) == 0);
  CHECK_STR (buf, "key = value\n");
  CHECK (fstatat (root, "etc/app/conf", &st, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK (S_ISREG (st.st_mode) && (st.st_mode & 07777) == 0640);
  CHECK (fstatat (root, "etc/app", &st, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK ((st.st_mode & 07777) == 0755);
  CHECK (fstatat (root, "empty", &st, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK (S_ISREG (st.st_mode) && st.st_size == 0 && (st.st_mode & 07777) == 0600);
  /* SYMLINK: the target verbatim. */
  n = readlinkat (root, "bin", buf, sizeof buf);
  CHECK (n == 7 && memcmp (buf, "usr/bin", 7) == 0);
  n = readlinkat (root, "etc/localtime", buf, sizeof buf);
  CHECK (n == 27 && memcmp (buf, "/usr/share/zoneinfo/Etc/UTC", 27) == 0);
  /* BIND_RO of a directory: the host's content, read-only, nosuid, nodev,
     through an overlay of the sandbox's own (not the host's inodes). */
  CHECK (read_at_root (root, "opt/host/hello", buf, sizeof buf) == 0);
  CHECK_STR (buf, "from the host\n");
  fd = openat (root, "opt/host", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK (fd >= 0);
  {
    struct statfs sfs;
    struct stat host;
    CHECK (fstatfs (fd, &sfs) == 0 && sfs.f_type == OVERLAYFS_SUPER_MAGIC);
    CHECK (fstat (fd, &st) == 0 && stat (host_src, &host) == 0 && st.st_dev != host.st_dev);
  }
  CHECK (fstatvfs (fd, &vfs) == 0);
  CHECK ((vfs.f_flag & ST_RDONLY) && (vfs.f_flag & ST_NOSUID) && (vfs.f_flag & ST_NODEV));
  CHECK (openat (fd, "new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 && errno == EROFS);
  close (fd);
  /* BIND_RO of a file. */
  CHECK (read_at_root (root, "etc/hostfile", buf, sizeof buf) == 0);
  CHECK_STR (buf, "one file\n");
  fd = openat (root, "etc/hostfile", O_WRONLY | O_CLOEXEC);
  CHECK (fd < 0 && errno == EROFS);
  /* An optional bind whose source is missing is skipped entirely. */
  CHECK (fstatat (root, "opt/missing", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
  return 0;
}

TMP_TEST (test_apply_builds_the_tree)
{
  struct sbx_plan p = {SBX_BUF_INIT, 0};
  char root_dir[128];
  int rc;

  snprintf (host_src, sizeof host_src, "%s/host", tmp_dir);
  snprintf (host_file, sizeof host_file, "%s/hostfile", tmp_dir);
  snprintf (root_dir, sizeof root_dir, "%s/root", tmp_dir);
  CHECK (mkdir (host_src, 0755) == 0);
  CHECK (mkdir (root_dir, 0755) == 0);
  {
    char path[160];
    snprintf (path, sizeof path, "%s/hello", host_src);
    CHECK (write_file (path, "from the host\n") == 0);
  }
  CHECK (write_file (host_file, "one file\n") == 0);

  CHECK (add_ok (&p, SBX_PLAN_DIR, 0, 0711, NULL, "home", NULL) == 0);
  CHECK (add_ok (&p, SBX_PLAN_DIR, 0, 01777, NULL, "var/spool/deep", NULL) == 0);
  CHECK (add_ok (&p, SBX_PLAN_FILE, 0, 0640, NULL, "etc/app/conf", "key = value\n") == 0);
  CHECK (add_ok (&p, SBX_PLAN_FILE, 0, 0600, NULL, "empty", "") == 0);
  CHECK (add_ok (&p, SBX_PLAN_SYMLINK, 0, 0, NULL, "bin", "usr/bin") == 0);
  CHECK (add_ok (&p, SBX_PLAN_SYMLINK, 0, 0, NULL, "etc/localtime",
                 "/usr/share/zoneinfo/Etc/UTC")
         == 0);
  CHECK (add_ok (&p, SBX_PLAN_BIND_RO, 0, 0, host_src, "opt/host", NULL) == 0);
  CHECK (add_ok (&p, SBX_PLAN_BIND_RO, 0, 0, host_file, "etc/hostfile", NULL) == 0);
  CHECK (add_ok (&p, SBX_PLAN_BIND_RO, SBX_PLAN_OPTIONAL, 0, "/nonexistent/sbx-test",
                 "opt/missing", NULL)
         == 0);

  rc = run_apply (root_dir, &p, verify_tree);
  sbx_plan_free (&p);
  CHECK (rc == 0);
  return 0;
}

/* A missing source that is not optional is a setup failure (init_die),
   not a protocol violation. */
TMP_TEST (test_apply_missing_bind_dies)
{
  struct sbx_plan p = {SBX_BUF_INIT, 0};
  int rc;

  CHECK (add_ok (&p, SBX_PLAN_BIND_RO, 0, 0, "/nonexistent/sbx-test", "opt/missing", NULL) == 0);
  rc = run_apply (tmp_dir, &p, NULL);
  sbx_plan_free (&p);
  CHECK (rc == EXIT_DIE);
  return 0;
}

/* Hand-made entries the encoder refuses are protocol violations in init:
   the two sides agree on what is valid. */
TMP_TEST (test_apply_refuses_what_add_refuses)
{
  static const struct
  {
    uint16_t kind;
    const char *src, *dst, *data;
  } bad[] = {
    {SBX_PLAN_DIR, "", "/abs", ""},       {SBX_PLAN_DIR, "", "a/../b", ""},
    {SBX_PLAN_FILE, "", "a//b", "x"},      {SBX_PLAN_FILE, "", ".", "x"},
    {SBX_PLAN_SYMLINK, "", "lnk", ""},     {SBX_PLAN_BIND_RO, "", "usr", ""},
    {SBX_PLAN_BIND_RO, "usr", "usr", ""}, {0, "", "x", ""},
    {7, "", "x", ""},
  };

  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      struct sbx_plan p = {SBX_BUF_INIT, 0};
      struct sbx_plan_entry e;
      int rc;

      memset (&e, 0, sizeof e);
      e.kind = bad[i].kind;
      e.mode = 0755;
      e.src_len = (uint32_t) strlen (bad[i].src);
      e.dst_len = (uint32_t) strlen (bad[i].dst);
      e.data_len = (uint32_t) strlen (bad[i].data);
      sbx_buf_append (&p.bytes, &e, sizeof e);
      sbx_buf_append (&p.bytes, bad[i].src, e.src_len);
      sbx_buf_append (&p.bytes, bad[i].dst, e.dst_len);
      sbx_buf_append (&p.bytes, bad[i].data, e.data_len);
      p.count = 1;
      CHECK (run_validate (p.count, p.bytes.data, p.bytes.len) == 0);
      rc = run_apply (tmp_dir, &p, NULL);
      if (rc != EXIT_VIOLATION)
        {
          fprintf (stderr, "#   entry %zu: exit %d\n", i, rc);
          sbx_plan_free (&p);
          return -1;
        }
      /* And the encoder refuses the same entry. */
      CHECK (sbx_plan_add (&p, (enum sbx_plan_kind) bad[i].kind, 0, 0755,
                           bad[i].src[0] ? bad[i].src : NULL, bad[i].dst, bad[i].data,
                           strlen (bad[i].data), NULL)
             == -1);
      sbx_plan_free (&p);
    }
  return 0;
}

int
main (void)
{
  RUN (test_path_ok);
  RUN (test_add_rejects_paths);
  RUN (test_add_rejects_sources);
  RUN (test_add_rejects_what_init_refuses);
  RUN (test_add_limits);
  RUN (test_encoding);
  RUN (test_validate_rejects_corruption);
  RUN (test_apply_builds_the_tree);
  RUN (test_apply_missing_bind_dies);
  RUN (test_apply_refuses_what_add_refuses);
  return tap_done ();
}
