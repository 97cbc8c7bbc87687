/* sbx: the read-only root image of a VM sandbox (docs/vm.md "The root
 * filesystem"), built and cached by the privileged parent.
 *
 * Two kinds: template base's, whose files (a fixed list of the host's
 * installed Debian packages and their dependencies) iso/vm_image_base.c
 * stages under STATE/vm-images/ (root, 0700); and a stored template's,
 * from the read-only overlay mount the namespace engine uses. Either tree
 * is made into an ext4 image by mke2fs -d (a child, fixed argv, no shell,
 * a deadline).
 *
 * Cache: STATE/vm-images/KEY.img (0600), KEY the sha256 of what went in
 * (base: package names, architectures and versions, the generated files,
 * the bound files' sizes and times, so a package upgrade makes a new
 * image; a template: its tree's metadata). KEY.sum holds the sha256 of
 * the image's bytes: an image is checked against it before its first use
 * (and again whenever its inode, size or times change), and a corrupt one
 * is rebuilt. Everything is written under a temporary name and renamed; a
 * failed build leaves nothing.
 */
#include "iso/vm_image.h"
#include "iso/helper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "iso/vm_image_base.h"
#include "util/hex.h"
#include "util/cleanup.h"
#include "util/file.h"
#include "util/log.h"

#define MKE2FS_TIMEOUT_S 120

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int images_dir = -1;
static char images_path[PATH_MAX];

/* Images whose bytes were checked, by what their inode looked like then. */
struct checked
{
  char key[65];
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime, ctime;
};
static struct checked checked[16];
static unsigned nchecked;


int
sbx_vm_image_init (const char *state_dir, sbx_error_t **err)
{
  cleanup_close int state = open (state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat st;

  if (state < 0)
    return sbx_err_sys (err, errno, "open %s", state_dir);
  if (mkdirat (state, SBX_VM_IMAGE_DIR, 0700) < 0 && errno != EEXIST)
    return sbx_err_sys (err, errno, "make %s/%s", state_dir, SBX_VM_IMAGE_DIR);
  images_dir = openat (state, SBX_VM_IMAGE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (images_dir < 0 || fstat (images_dir, &st) < 0)
    return sbx_err_sys (err, errno, "open %s/%s", state_dir, SBX_VM_IMAGE_DIR);
  if (st.st_uid != 0 || (st.st_mode & 077) != 0)
    if (fchown (images_dir, 0, 0) < 0 || fchmod (images_dir, 0700) < 0)
      return sbx_err_sys (err, errno, "make %s/%s root-only", state_dir, SBX_VM_IMAGE_DIR);
  snprintf (images_path, sizeof images_path, "%s/%s", state_dir, SBX_VM_IMAGE_DIR);
  {
    /* What a build cut short by a crash left (.stage-*, .build-*). */
    int fd = openat (images_dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
    struct dirent *de;
    if (d == NULL && fd >= 0)
      close (fd);
    while (d != NULL && (de = readdir (d)) != NULL)
      if (strncmp (de->d_name, ".stage-", 7) == 0 || strncmp (de->d_name, ".build-", 7) == 0)
        sbx_remove_tree_at (images_dir, de->d_name, 100);
    if (d != NULL)
      closedir (d);
  }
  return 0;
}

/* ---- sha256 ------------------------------------------------------------ */

static int
sha256_fd (int fd, char out[65], sbx_error_t **err)
{
  EVP_MD_CTX *h = EVP_MD_CTX_new ();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned mdlen = 0;
  static __thread char chunk[1 << 16];
  off_t off = 0;
  ssize_t n;

  if (h == NULL || EVP_DigestInit_ex (h, EVP_sha256 (), NULL) != 1)
    {
      EVP_MD_CTX_free (h);
      return sbx_err (err, SBX_E_SYSTEM, "sha256 unavailable");
    }
  while ((n = pread (fd, chunk, sizeof chunk, off)) > 0)
    {
      EVP_DigestUpdate (h, chunk, (size_t) n);
      off += n;
    }
  EVP_DigestFinal_ex (h, md, &mdlen);
  EVP_MD_CTX_free (h);
  if (n < 0)
    return sbx_err_sys (err, errno, "read a VM image");
  sbx_hex_encode (md, mdlen < 32 ? mdlen : 32, out);
  return 0;
}


/* Remove our own staging tree (never following a link). */


/* A built image into place: its sum (sum[0..63], hex) as KEY.sum, then
   the image as KEY.img, both from their temporary names; *name gets
   KEY.img. The sum goes first: an image is never without its sum. */
static int
publish (const char *key, char *sum, const char *sum_tmp, const char *img_tmp, char *name,
         size_t name_len, sbx_error_t **err)
{
  sum[64] = '\n';
  if (sbx_write_small_at (images_dir, sum_tmp, sum, 65, 0600) < 0)
    return sbx_err_sys (err, errno, "write %s", sum_tmp);
  snprintf (name, name_len, "%s.sum", key);
  if (renameat (images_dir, sum_tmp, images_dir, name) < 0)
    return sbx_err_sys (err, errno, "rename %s", sum_tmp);
  snprintf (name, name_len, "%s.img", key);
  if (renameat (images_dir, img_tmp, images_dir, name) < 0)
    return sbx_err_sys (err, errno, "rename %s", img_tmp);
  fsync (images_dir);
  return 0;
}

/* ---- mke2fs ------------------------------------------------------------- */

static const char *
mke2fs_path (void)
{
  return access ("/usr/sbin/mke2fs", X_OK) == 0 ? "/usr/sbin/mke2fs" : "/sbin/mke2fs";
}

/* mke2fs -d stage img size: a child with a fixed argv and environment,
   stdout and stderr to a memfd whose end becomes the error. */
static int
run_mke2fs (const char *stage, int stage_fd, const char *img, uint64_t size_kib, uint64_t inodes,
            sbx_error_t **err)
{
  char a_size[32], a_inodes[32];
  char *argv[] = {(char *) (uintptr_t) mke2fs_path (),
                  (char *) (uintptr_t) "-q",
                  (char *) (uintptr_t) "-F",
                  (char *) (uintptr_t) "-t",
                  (char *) (uintptr_t) "ext4",
                  (char *) (uintptr_t) "-b",
                  (char *) (uintptr_t) "4096",
                  (char *) (uintptr_t) "-m",
                  (char *) (uintptr_t) "0",
                  (char *) (uintptr_t) "-N",
                  a_inodes,
                  (char *) (uintptr_t) "-O",
                  (char *) (uintptr_t) "^has_journal,^resize_inode",
                  (char *) (uintptr_t) "-L",
                  (char *) (uintptr_t) "sbx-root",
                  /* Fixed ids (no host randomness in the guest's view). The
                     bytes still vary between builds (file times, order):
                     a snapshot needs the very file it ran on. */
                  (char *) (uintptr_t) "-U",
                  (char *) (uintptr_t) "5b8e0000-0000-4000-8000-000000000001",
                  (char *) (uintptr_t) "-E",
                  (char *) (uintptr_t) "root_owner=0:0,lazy_itable_init=0,nodiscard,"
                                       "hash_seed=5b8e0000-0000-4000-8000-000000000002",
                  (char *) (uintptr_t) "-d",
                  (char *) (uintptr_t) stage,
                  (char *) (uintptr_t) img,
                  a_size,
                  NULL};
  static char *const env[] = {(char *) (uintptr_t) "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                              (char *) (uintptr_t) "LC_ALL=C",
                              (char *) (uintptr_t) "E2FSPROGS_FAKE_TIME=1700000000", NULL};
  cleanup_close int log = memfd_create ("sbx-mke2fs", MFD_CLOEXEC);
  cleanup_close int null = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  /* A tree given as an fd (a template's mount) is the child's fd 3. */
  cleanup_close int src = stage_fd >= 0 ? fcntl (stage_fd, F_DUPFD_CLOEXEC, 64) : -1;
  time_t end = time (NULL) + MKE2FS_TIMEOUT_S;
  int status;
  pid_t pid;

  snprintf (a_size, sizeof a_size, "%lluk", (unsigned long long) size_kib);
  snprintf (a_inodes, sizeof a_inodes, "%llu", (unsigned long long) inodes);
  if (log < 0 || null < 0)
    return sbx_err_sys (err, errno, "memfd_create");
  {
    int keep[] = {null, log, src};
    pid = sbx_helper_fork (keep, src >= 0 ? 3 : 2);
  }
  if (pid < 0)
    return sbx_err_sys (err, errno, "fork");
  if (pid == 0)
    {
      if (dup2 (null, 0) < 0 || dup2 (log, 1) < 0 || dup2 (log, 2) < 0)
        _exit (127);
      if (src >= 0 && dup2 (src, 3) < 0)
        _exit (127);
      syscall (SYS_close_range, src >= 0 ? 4 : 3, ~0U, 0);
      execve (argv[0], argv, env);
      _exit (127);
    }
  for (;;)
    {
      pid_t r = waitpid (pid, &status, WNOHANG);
      if (r == pid)
        break;
      if (r < 0 && errno != EINTR)
        return sbx_err_sys (err, errno, "wait for mke2fs");
      if (time (NULL) > end)
        kill (pid, SIGKILL);
      usleep (20 * 1000);
    }
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  {
    char msg[512];
    ssize_t n = pread (log, msg, sizeof msg - 1, 0);
    msg[n > 0 ? n : 0] = '\0';
    msg[strcspn (msg, "\n")] = '\0';
    return sbx_err (err, SBX_E_UNAVAILABLE,
                    "isolation vm: mke2fs failed to make the root image (%s%s); "
                    "scripts/install-deps.sh installs e2fsprogs",
                    WIFEXITED (status) ? "exit " : "signal ",
                    n > 0 ? msg : (WIFEXITED (status) ? "?" : "killed"));
  }
}

/* ---- the cache ---------------------------------------------------------- */

static int
remember_checked (const char *key, const struct stat *st, int lookup)
{
  for (unsigned i = 0; i < nchecked; i++)
    if (strcmp (checked[i].key, key) == 0)
      {
        if (lookup)
          return checked[i].dev == st->st_dev && checked[i].ino == st->st_ino
                 && checked[i].size == st->st_size
                 && checked[i].mtime.tv_sec == st->st_mtim.tv_sec
                 && checked[i].mtime.tv_nsec == st->st_mtim.tv_nsec
                 && checked[i].ctime.tv_sec == st->st_ctim.tv_sec
                 && checked[i].ctime.tv_nsec == st->st_ctim.tv_nsec;
        break;
      }
  if (lookup)
    return 0;
  {
    unsigned i;
    for (i = 0; i < nchecked && strcmp (checked[i].key, key) != 0; i++)
      ;
    if (i == nchecked)
      i = nchecked < sizeof checked / sizeof checked[0] ? nchecked++ : 0;
    snprintf (checked[i].key, sizeof checked[i].key, "%s", key);
    checked[i].dev = st->st_dev;
    checked[i].ino = st->st_ino;
    checked[i].size = st->st_size;
    checked[i].mtime = st->st_mtim;
    checked[i].ctime = st->st_ctim;
  }
  return 1;
}

/* Open KEY.img if its bytes are what KEY.sum says: the fd, -1 with
   *why set (ENOENT: none; EBADMSG: corrupt). */
static int
open_cached (const char *key, char sum[65], int *why, sbx_error_t **err)
{
  char name[80], actual[65];
  cleanup_free char *want = NULL;
  cleanup_close int fd = -1;
  struct stat st;
  size_t len = 0;
  int r;

  snprintf (name, sizeof name, "%s.sum", key);
  want = sbx_read_small_at (images_dir, name, 128, &len);
  snprintf (name, sizeof name, "%s.img", key);
  fd = openat (images_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || want == NULL)
    {
      *why = fd < 0 && errno != ENOENT ? errno : ENOENT;
      if (fd >= 0)
        *why = EBADMSG;
      return -1;
    }
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != 0 || st.st_nlink != 1
      || len < 64)
    {
      *why = EBADMSG;
      return -1;
    }
  want[64] = '\0';
  if (!remember_checked (key, &st, 1))
    {
      if (sha256_fd (fd, actual, err) < 0)
        return *why = EIO, -1;
      if (strcmp (actual, want) != 0)
        {
          sbx_warn ("VM root image %s/%s is corrupt (sha256 %s, not %s)", images_path, name,
                    actual, want);
          *why = EBADMSG;
          return -1;
        }
      remember_checked (key, &st, 0);
    }
  snprintf (sum, 65, "%s", want);
  r = fd;
  fd = -1;
  return r;
}

/* Build the base image for KEY from the staged tree. */
static int
build (const char *key, struct sbx_vm_pkgs *p, const struct sbx_vm_extra *extra,
       sbx_error_t **err)
{
  char tag[17], stage_name[64], img_name[64], sum_name[64], name[80];
  char stage_path[PATH_MAX + 80], img_path[PATH_MAX + 80], sum[65];
  cleanup_close int root = -1;
  uint64_t bytes = 0, entries = 0;
  cleanup_close int img = -1;
  uint64_t rnd;
  int rc = -1;
  struct timespec t0, t1;

  clock_gettime (CLOCK_MONOTONIC, &t0);
  if (getrandom (&rnd, sizeof rnd, 0) != (ssize_t) sizeof rnd)
    return sbx_err_sys (err, errno, "getrandom");
  snprintf (tag, sizeof tag, "%016llx", (unsigned long long) rnd);
  snprintf (stage_name, sizeof stage_name, ".stage-%s", tag);
  snprintf (img_name, sizeof img_name, ".build-%s.img", tag);
  snprintf (sum_name, sizeof sum_name, ".build-%s.sum", tag);
  snprintf (stage_path, sizeof stage_path, "%s/%s", images_path, stage_name);
  snprintf (img_path, sizeof img_path, "%s/%s", images_path, img_name);
  if (mkdirat (images_dir, stage_name, 0755) < 0)
    return sbx_err_sys (err, errno, "make %s", stage_path);
  root = openat (images_dir, stage_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0)
    {
      sbx_err_sys (err, errno, "open %s", stage_path);
      goto out;
    }
  if (sbx_vm_base_stage (p, extra, root, &bytes, &entries, err) < 0)
    goto out;
  img = openat (images_dir, img_name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (img < 0)
    {
      sbx_err_sys (err, errno, "make %s", img_path);
      goto out;
    }
  /* Room for the files, an inode and a block per entry, 10 % slack. */
  if (run_mke2fs (stage_path, -1, img_path,
                  (bytes + entries * 4096) / 1024 * 11 / 10 + 16384, entries + 1024, err)
      < 0)
    goto out;
  if (fsync (img) < 0)
    {
      sbx_err_sys (err, errno, "fsync %s", img_path);
      goto out;
    }
  if (sha256_fd (img, sum, err) < 0)
    goto out;
  if (publish (key, sum, sum_name, img_name, name, sizeof name, err) < 0)
    goto out;
  clock_gettime (CLOCK_MONOTONIC, &t1);
  sbx_info ("built VM root image %s/%s (%llu files, %llu MiB of content) in %lld ms",
            images_path, name, (unsigned long long) entries, (unsigned long long) (bytes >> 20),
            (long long) ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
  rc = 0;
out:
  close_and_reset (&root);
  sbx_remove_tree_at (images_dir, stage_name, 100);
  if (rc < 0)
    {
      unlinkat (images_dir, img_name, 0);
      unlinkat (images_dir, sum_name, 0);
    }
  return rc;
}

/* ---- an image of a tree (a stored template's read-only mount) ------------- */

struct walk
{
  EVP_MD_CTX *h;
  uint64_t bytes, entries;
};

/* Hash every entry's name, type, mode, owner, size, time and link target
   (the layers are immutable; this is the template's identity as the guest
   sees it), and count what the image must hold. */
static int
walk_tree (struct walk *w, int dir, const char *rel, unsigned depth)
{
  DIR *d;
  struct dirent *de;
  int fd = openat (dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0 || depth > 256)
    {
      if (fd >= 0)
        close (fd);
      errno = fd < 0 ? errno : ELOOP;
      return -1;
    }
  d = fdopendir (fd);
  if (d == NULL)
    {
      close (fd);
      return -1;
    }
  while ((de = readdir (d)) != NULL)
    {
      struct stat st;
      char line[PATH_MAX + 200], target[PATH_MAX] = "";
      int n;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (S_ISLNK (st.st_mode))
        {
          ssize_t t = readlinkat (dirfd (d), de->d_name, target, sizeof target - 1);
          target[t > 0 ? t : 0] = '\0';
        }
      n = snprintf (line, sizeof line, "%s/%s %o %u %u %lld %lld.%09ld %s\n", rel, de->d_name,
                    (unsigned) st.st_mode, (unsigned) st.st_uid, (unsigned) st.st_gid,
                    (long long) st.st_size, (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                    target);
      EVP_DigestUpdate (w->h, line, n > 0 && (size_t) n < sizeof line ? (size_t) n : 0);
      w->entries++;
      w->bytes += ((uint64_t) st.st_size + 4095) & ~4095ull;
      if (S_ISDIR (st.st_mode))
        {
          char sub[PATH_MAX];
          int sfd = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sfd < 0 || (size_t) snprintf (sub, sizeof sub, "%s/%s", rel, de->d_name) >= sizeof sub)
            {
              if (sfd >= 0)
                close (sfd);
              closedir (d);
              errno = sfd < 0 ? errno : ENAMETOOLONG;
              return -1;
            }
          n = walk_tree (w, sfd, sub, depth + 1);
          close (sfd);
          if (n < 0)
            {
              closedir (d);
              return -1;
            }
        }
    }
  closedir (d);
  return 0;
}

static int
build_tree (const char *key, int tree, const struct walk *w, sbx_error_t **err)
{
  char tag[17], img_name[64], sum_name[64], name[80], img_path[PATH_MAX + 80], sum[65];
  cleanup_close int img = -1;
  uint64_t rnd;
  int rc = -1;

  if (getrandom (&rnd, sizeof rnd, 0) != (ssize_t) sizeof rnd)
    return sbx_err_sys (err, errno, "getrandom");
  snprintf (tag, sizeof tag, "%016llx", (unsigned long long) rnd);
  snprintf (img_name, sizeof img_name, ".build-%s.img", tag);
  snprintf (sum_name, sizeof sum_name, ".build-%s.sum", tag);
  snprintf (img_path, sizeof img_path, "%s/%s", images_path, img_name);
  img = openat (images_dir, img_name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (img < 0)
    return sbx_err_sys (err, errno, "make %s", img_path);
  if (run_mke2fs ("/proc/self/fd/3", tree, img_path,
                  (w->bytes + w->entries * 4096) / 1024 * 11 / 10 + 16384, w->entries + 1024, err)
          < 0
      || (fsync (img) < 0 && sbx_err_sys (err, errno, "fsync %s", img_path) < 0)
      || sha256_fd (img, sum, err) < 0)
    goto out;
  if (publish (key, sum, sum_name, img_name, name, sizeof name, err) < 0)
    goto out;
  sbx_info ("built VM root image %s/%s from a template (%llu entries)", images_path, name,
            (unsigned long long) w->entries);
  rc = 0;
out:
  if (rc < 0)
    {
      unlinkat (images_dir, img_name, 0);
      unlinkat (images_dir, sum_name, 0);
    }
  return rc;
}

/* KEY of a tree's image (and what it holds, for sizing). */
static int
tree_key (int tree, struct walk *w, char key[65], sbx_error_t **err)
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned mdlen = 0;

  w->h = EVP_MD_CTX_new ();
  w->bytes = w->entries = 0;
  if (w->h == NULL || EVP_DigestInit_ex (w->h, EVP_sha256 (), NULL) != 1)
    {
      EVP_MD_CTX_free (w->h);
      return sbx_err (err, SBX_E_SYSTEM, "sha256 unavailable");
    }
  EVP_DigestUpdate (w->h, IMAGE_FORMAT " tree\n", strlen (IMAGE_FORMAT " tree\n"));
  if (walk_tree (w, tree, "", 0) < 0)
    {
      EVP_MD_CTX_free (w->h);
      return sbx_err_sys (err, errno, "isolation vm: read the template's tree");
    }
  EVP_DigestFinal_ex (w->h, md, &mdlen);
  EVP_MD_CTX_free (w->h);
  sbx_hex_encode (md, mdlen < 32 ? mdlen : 32, key);
  return 0;
}

int
sbx_vm_image_tree_key (int tree, char key[65], sbx_error_t **err)
{
  struct walk w;

  return tree_key (tree, &w, key, err);
}

int
sbx_vm_image_tree (int tree, struct sbx_vm_image *img, sbx_error_t **err)
{
  struct walk w;
  int fd = -1, why = 0;

  if (images_dir < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: no image cache (state directory)");
  if (tree_key (tree, &w, img->key, err) < 0)
    return -1;
  pthread_mutex_lock (&lock);
  fd = open_cached (img->key, img->sum, &why, err);
  if (fd < 0 && why != EIO)
    {
      if (build_tree (img->key, tree, &w, err) == 0)
        {
          fd = open_cached (img->key, img->sum, &why, err);
          if (fd < 0 && why != EIO)
            sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: the new root image %s/%s.img: %s",
                     images_path, img->key, strerror (why));
        }
    }
  pthread_mutex_unlock (&lock);
  return fd;
}

int
sbx_vm_image_cache_lock (void)
{
  if (images_dir < 0)
    return -1;
  pthread_mutex_lock (&lock);
  return images_dir;
}

void
sbx_vm_image_cache_unlock (void)
{
  pthread_mutex_unlock (&lock);
}

int
sbx_vm_image_base (struct sbx_vm_image *img, sbx_error_t **err)
{
  return sbx_vm_image_builtin (NULL, img, err);
}

int
sbx_vm_image_builtin (const struct sbx_vm_extra *extra, struct sbx_vm_image *img,
                      sbx_error_t **err)
{
  struct sbx_vm_pkgs *p = NULL;
  int fd = -1, why = 0;

  if (images_dir < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: no image cache (state directory)");
  pthread_mutex_lock (&lock);
  if ((p = sbx_vm_pkgs_load (err)) == NULL || sbx_vm_base_key (p, extra, img->key, err) < 0)
    goto out;
  fd = open_cached (img->key, img->sum, &why, err);
  if (fd < 0 && why == EIO)
    goto out;
  if (fd < 0)
    {
      if (build (img->key, p, extra, err) < 0)
        goto out;
      fd = open_cached (img->key, img->sum, &why, err);
      if (fd < 0 && why != EIO)
        sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: the new root image %s/%s.img: %s",
                 images_path, img->key, strerror (why));
    }
out:
  pthread_mutex_unlock (&lock);
  sbx_vm_pkgs_free (p);
  return fd;
}

int
sbx_vm_image_open (const struct sbx_vm_image *want, sbx_error_t **err)
{
  char sum[65];
  int fd, why = 0;

  if (images_dir < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: no image cache (state directory)");
  if (strspn (want->key, "0123456789abcdef") != 64 || want->key[64] != '\0')
    return sbx_err (err, SBX_E_CONFLICT, "isolation vm: the snapshot's root image key is invalid");
  pthread_mutex_lock (&lock);
  fd = open_cached (want->key, sum, &why, err);
  pthread_mutex_unlock (&lock);
  if (fd < 0 && why == EIO)
    return -1;
  if (fd < 0)
    return sbx_err (err, SBX_E_CONFLICT,
                    "isolation vm: the snapshot's root image %s is %s on this host (the "
                    "guest's memory refers to its exact bytes)",
                    want->key, why == ENOENT ? "no longer" : "corrupt");
  if (strcmp (sum, want->sum) != 0)
    {
      close (fd);
      return sbx_err (err, SBX_E_CONFLICT,
                      "isolation vm: the snapshot's root image %s was rebuilt with other bytes "
                      "since the snapshot (the guest's memory refers to the old ones)",
                      want->key);
    }
  return fd;
}
