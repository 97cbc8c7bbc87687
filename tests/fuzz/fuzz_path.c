/* Fuzz target: the files API's path resolution (iso/fs.c), run as real
 * file operations against a throwaway tree.
 *
 * The harness runs in a mount namespace of its own, with a private tmpfs on
 * /tmp (and /var/tmp, /dev/shm), holding T = /tmp/sbx-fuzz-path:
 *
 *   T/canary, T/canary-dir/inside   the "host", owned by an id no operation
 *                                   acts as, world-writable: an escape
 *                                   that wrote there would succeed, and show
 *   T/root/                         the sandbox's "/", a fresh tmpfs for
 *                                   every input, with etc/, home/user/,
 *                                   tmp/ (01777), a procfs at proc/, a second
 *                                   tmpfs at home/user/mnt/, and symlinks
 *                                   aimed at "/", "..", T and the canaries
 *
 * Operations act as the sandbox's root or user, i.e. host ids FUZZ_UID and
 * FUZZ_UID + 1000, never as the daemon's root: even a bug cannot touch
 * the host's own files.
 *
 * Input: lines "<op><flags><path>"; op (mod 8) is normalize, stat,
 * open_read, list, mkdir, upload (the next line is the content), move
 * (the next line is the target) or remove. After every operation:
 *   - T, the canaries and /tmp are exactly as set up;
 *   - a returned fd is a file under T/root, not owned by the canary's id;
 *   - no stat or listing shows the canary's owner;
 *   - the error contract holds, no fd leaked, fsuid/fsgid are back to 0.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fuzz.h"
#include "iso/fs.h"

#define FUZZ_UID 2000000000u /* the sandbox's uid_base */
#define CANARY_ID 4242u      /* inside id of the host canaries' owner */
#define T "/tmp/sbx-fuzz-path"
#define ROOT T "/root"
#define CANARY_TEXT "host canary\n"
#define INSIDE_TEXT "host inside\n"
#define MAX_OPS 6

static struct sbx_fs_ctx ctx;

static void
die (const char *what)
{
  fprintf (stderr, "fuzz_path setup: %s: %s\n", what, strerror (errno));
  abort ();
}

static void
write_file (const char *path, const char *text, mode_t mode, uid_t uid)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  size_t n = strlen (text);

  if (fd < 0 || write (fd, text, n) != (ssize_t) n || fchmod (fd, mode) < 0
      || fchown (fd, uid, uid) < 0 || close (fd) < 0)
    die (path);
}

static void
make_dir (const char *path, mode_t mode, uid_t uid)
{
  if (mkdir (path, mode) < 0 || chmod (path, mode) < 0 || chown (path, uid, uid) < 0)
    die (path);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  (void) argc;
  (void) argv;
  /* Everything below stays in this process's mount namespace and goes
     away with it: nothing is left on the host, even after a crash. */
  if (unshare (CLONE_NEWNS) < 0)
    die ("unshare(CLONE_NEWNS) (fuzz_path needs root)");
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    die ("make / private");
  if (mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") < 0)
    die ("tmpfs on /tmp");
  mount ("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1m");
  mount ("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1m");
  umask (022);
  make_dir (T, 0777, FUZZ_UID + CANARY_ID);
  write_file (T "/canary", CANARY_TEXT, 0666, FUZZ_UID + CANARY_ID);
  make_dir (T "/canary-dir", 0777, FUZZ_UID + CANARY_ID);
  write_file (T "/canary-dir/inside", INSIDE_TEXT, 0666, FUZZ_UID + CANARY_ID);
  make_dir (ROOT, 0755, 0);
  return 0;
}

/* A fresh sandbox root for each input. */
static void
build_root (void)
{
  static const struct
  {
    const char *target, *name;
  } links[] = {
      {"/", "home/user/to-root"},
      {"../../..", "home/user/up"},
      {"../../../../../../../..", "home/user/way-up"},
      {"../../../canary", "home/user/rel-canary"},
      {T "/canary", "home/user/abs-canary"},
      {"../../../canary-dir", "home/user/rel-canary-dir"},
      {T "/canary-dir", "home/user/abs-canary-dir"},
      {"nowhere", "home/user/dangling"},
      {"/proc/self/root", "home/user/magic"},
      {T, "escape"},
      {"../canary", "tmp/canary"},
  };
  char opts[64];
  size_t i;

  snprintf (opts, sizeof opts, "mode=0755,uid=%u,gid=%u,size=4m,nr_inodes=2048", FUZZ_UID,
            FUZZ_UID);
  if (mount ("tmpfs", ROOT, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    die ("tmpfs on root");
  make_dir (ROOT "/etc", 0755, FUZZ_UID);
  write_file (ROOT "/etc/passwd", "sandbox passwd\n", 0644, FUZZ_UID);
  make_dir (ROOT "/home", 0755, FUZZ_UID);
  make_dir (ROOT "/home/user", 0755, FUZZ_UID + 1000);
  write_file (ROOT "/home/user/hello.txt", "hello\n", 0644, FUZZ_UID + 1000);
  make_dir (ROOT "/home/user/mnt", 0755, FUZZ_UID + 1000);
  make_dir (ROOT "/tmp", 01777, FUZZ_UID);
  make_dir (ROOT "/proc", 0555, FUZZ_UID);
  for (i = 0; i < sizeof links / sizeof links[0]; i++)
    {
      char path[256];
      snprintf (path, sizeof path, ROOT "/%s", links[i].name);
      if (symlink (links[i].target, path) < 0)
        die (path);
    }
  snprintf (opts, sizeof opts, "mode=0755,uid=%u,gid=%u,size=1m", FUZZ_UID + 1000,
            FUZZ_UID + 1000);
  if (mount ("tmpfs", ROOT "/home/user/mnt", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    die ("tmpfs on home/user/mnt");
  write_file (ROOT "/home/user/mnt/file", "other mount\n", 0644, FUZZ_UID + 1000);
  if (mount ("proc", ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    die ("procfs");
  memset (&ctx, 0, sizeof ctx);
  ctx.uid_base = FUZZ_UID;
  ctx.root = open (ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (ctx.root < 0)
    die ("open root");
}

static void
drop_root (void)
{
  close (ctx.root);
  ctx.root = -1;
  /* Lazily, with the procfs and tmpfs below it. */
  if (umount2 (ROOT, MNT_DETACH) < 0)
    die ("umount root");
}

/* Entry names of a directory, sorted, joined by ' '. */
static const char *
names (const char *path)
{
  static char out[1024];
  struct dirent **list;
  int n = scandir (path, &list, NULL, alphasort);

  out[0] = '\0';
  FUZZ_ASSERT (n >= 0);
  for (int i = 0; i < n; i++)
    {
      if (strcmp (list[i]->d_name, ".") && strcmp (list[i]->d_name, ".."))
        snprintf (out + strlen (out), sizeof out - strlen (out), "%s%s", out[0] ? " " : "",
                  list[i]->d_name);
      free (list[i]);
    }
  free (list);
  return out;
}

static int
content_is (const char *path, const char *want)
{
  char buf[64];
  int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return 0;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n < 0)
    return 0;
  buf[n] = '\0';
  return strcmp (buf, want) == 0;
}

static int lowest_fd;

static void
check_host (const char *op)
{
  int fd;

  if (strcmp (names (T), "canary canary-dir root") != 0 || strcmp (names ("/tmp"), "sbx-fuzz-path")
      || strcmp (names (T "/canary-dir"), "inside") != 0 || !content_is (T "/canary", CANARY_TEXT)
      || !content_is (T "/canary-dir/inside", INSIDE_TEXT))
    {
      fprintf (stderr, "%s changed the host side: T holds `%s`\n", op, names (T));
      abort ();
    }
  /* Back to the daemon's ids (setfsuid(-1) only reports them). */
  FUZZ_ASSERT (syscall (SYS_setfsuid, -1) == 0 && syscall (SYS_setfsgid, -1) == 0);
  fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd != lowest_fd)
    {
      fprintf (stderr, "%s leaked an fd (next fd %d, was %d)\n", op, fd, lowest_fd);
      abort ();
    }
  close (fd);
}

/* An fd the files API returned: a file under ROOT, not the canary's. */
static void
check_fd (int fd)
{
  char link[64], target[PATH_MAX];
  struct stat st;
  ssize_t n;

  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, target, sizeof target - 1);
  FUZZ_ASSERT (n > 0);
  target[n] = '\0';
  if (strncmp (target, ROOT "/", strlen (ROOT) + 1) != 0 || fstat (fd, &st) < 0
      || st.st_uid == FUZZ_UID + CANARY_ID || !S_ISREG (st.st_mode))
    {
      fprintf (stderr, "open_read returned `%s`, outside the root\n", target);
      abort ();
    }
}

static void
check_entry (const struct sbx_fs_entry *e)
{
  FUZZ_ASSERT (e->path[0] == '/' && memchr (e->path, '\0', sizeof e->path));
  FUZZ_ASSERT (memchr (e->name, '\0', sizeof e->name));
  if (e->uid == CANARY_ID || e->gid == CANARY_ID)
    {
      fprintf (stderr, "stat/list showed `%s`, a host canary\n", e->path);
      abort ();
    }
}

static int
on_entry (const struct sbx_fs_entry *e, void *arg)
{
  (void) arg;
  FUZZ_ASSERT (strchr (e->name, '/') == NULL && e->name[0]);
  check_entry (e);
  return 0;
}

static void
run_op (int op, unsigned flags, const char *path, const char *next)
{
  struct sbx_fs_ctx c = ctx;
  sbx_error_t *err = NULL;
  char abs[SBX_FS_PATH_MAX];
  static struct sbx_fs_entry e;
  struct sbx_fs_upload up;
  uint64_t size;
  int fd, trunc = 0;

  if (flags & 1)
    c.uid = c.gid = 1000;
  switch (op)
    {
    case 0:
      if (FUZZ_CONTRACT (sbx_fs_normalize (path, abs, sizeof abs, &err), &err) == 0)
        FUZZ_ASSERT (abs[0] == '/' && strlen (abs) < SBX_FS_PATH_MAX);
      break;
    case 1:
      if (FUZZ_CONTRACT (sbx_fs_stat (&c, path, &e, &err), &err) == 0)
        check_entry (&e);
      break;
    case 2:
      fd = sbx_fs_open_read (&c, path, &size, &err);
      FUZZ_CONTRACT (fd < 0 ? -1 : 0, &err);
      if (fd >= 0)
        {
          check_fd (fd);
          close (fd);
        }
      break;
    case 3:
      if (FUZZ_CONTRACT (sbx_fs_list (&c, path, 1 + (int) ((flags >> 1) & 3), 64, on_entry, NULL,
                                      &trunc, &err),
                         &err)
          == 0)
        FUZZ_ASSERT (trunc == 0 || trunc == 1);
      break;
    case 4:
      FUZZ_CONTRACT (sbx_fs_mkdir (&c, path, 0700 | (flags & 077), (flags >> 1) & 1, &err), &err);
      break;
    case 5:
      if (FUZZ_CONTRACT (sbx_fs_upload_begin (&c, path, 0600 | (flags & 066), (flags >> 1) & 1,
                                              &up, &err),
                         &err)
          < 0)
        break;
      if (FUZZ_CONTRACT (sbx_fs_upload_write (&up, next, strlen (next), &err), &err) < 0)
        {
          sbx_fs_upload_abort (&up);
          break;
        }
      if (flags & 4)
        sbx_fs_upload_abort (&up);
      else
        FUZZ_CONTRACT (sbx_fs_upload_commit (&up, &err), &err);
      break;
    case 6:
      FUZZ_CONTRACT (sbx_fs_move (&c, path, next, (flags >> 1) & 1, &err), &err);
      break;
    default:
      FUZZ_CONTRACT (sbx_fs_remove (&c, path, (flags >> 1) & 1, &err), &err);
      break;
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const char *const op_names[] = {"normalize", "stat", "open_read", "list",
                                         "mkdir",     "upload", "move",    "remove"};
  static char line[SBX_FS_PATH_MAX + 64], next[SBX_FS_PATH_MAX + 64];
  struct fuzz_lines in = {data, size};
  int ops = 0;

  build_root ();
  lowest_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  close (lowest_fd);
  while (ops++ < MAX_OPS && fuzz_line (&in, line, sizeof line))
    {
      int op;
      unsigned flags;
      if (strlen (line) < 2)
        continue;
      op = (unsigned char) line[0] & 7;
      flags = (unsigned char) line[1];
      next[0] = '\0';
      if (op == 5 || op == 6)
        fuzz_line (&in, next, sizeof next);
      run_op (op, flags, line + 2, next);
      check_host (op_names[op]);
    }
  drop_root ();
  return 0;
}
