/* sbx: the template store, in the privileged parent (layout: tmpl.h).
 *
 * A build runs the extractor (tmpl_extract.c) in a forked child that keeps
 * uid 0, so that what it writes belongs to root, but nothing else: every
 * capability dropped, no_new_privs, not dumpable, a Landlock domain that
 * reaches only its own build directory, every other descriptor closed,
 * CPU and file-size limits. It builds in tmp/; the parent then moves new
 * layers into layers/ (a layer already there is kept: one copy of each)
 * and the template's directory into by-name/ with one rename, under one
 * lock that removal's garbage collection also takes. A failed build
 * leaves nothing: its directory is removed whatever happened in it.
 *
 * Sandboxes never see the store: the parent mounts an overlay of the
 * layers (read-only, nosuid, nodev, userxattr for the whiteouts the
 * unprivileged extractor made) and init attaches the detached mount as
 * its root. An overlay without an upper directory cannot be written.
 */
#include "iso/tmpl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/template.h"
#include "iso/kernel.h"
#include "iso/helper.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/file.h"
#include "util/id.h"
#include "util/landlock.h"
#include "util/log.h"
#include "util/parse.h"

#define SBX_LAYER "sbx-v1" /* the generated top layer; a new name if its content changes */

static struct
{
  pthread_mutex_t lock;
  int dir; /* STATE/templates */
  char path[600]; /* its path, for debootstrap */
  char mirror[512];
  char cache[600];
} S = {PTHREAD_MUTEX_INITIALIZER, -1, "", "", ""};

int
sbx_tmpl_name_ok (const char *name)
{
  _Static_assert (SBX_TMPL_NAME_MAX == 31, "util/parse.c spells names of at most 31");
  return sbx_template_name_spelled_ok (name) && strcmp (name, "base") != 0
         && strcmp (name, "code-interpreter-v1") != 0;
}

/* ---- helpers ----------------------------------------------------------- */

/* rm -r of dir/name (root: permissions do not stop it, and what the
   extractor made is hostile). */
static void
rm_tree (int dir, const char *name)
{
  if (sbx_remove_tree_at (dir, name, 4096) < 0)
    sbx_warn ("templates: cannot remove `%s`: %s", name, strerror (errno));
}

/* Move dir/name out of sight into tmp/, then remove it. */
static void
discard (int dir, const char *name)
{
  char tmp[40] = "gone-";
  int tmpdir = openat (S.dir, "tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);

  sbx_random_hex (tmp + 5, 12);
  if (tmpdir >= 0 && renameat (dir, name, tmpdir, tmp) == 0)
    rm_tree (tmpdir, tmp);
  else
    rm_tree (dir, name);
  if (tmpdir >= 0)
    close (tmpdir);
}

static int
write_at (int dir, const char *name, const void *data, size_t len, sbx_error_t **err)
{
  cleanup_close int fd
      = openat (dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);

  if (fd < 0)
    return sbx_err_sys (err, errno, "templates: create `%s`", name);
  if (write (fd, data, len) != (ssize_t) len || fchmod (fd, 0644) < 0)
    return sbx_err_sys (err, errno, "templates: write `%s`", name);
  return 0;
}

/* Read a small file the extractor or the store wrote (at most cap bytes). */
static int
hex64 (const char *s, size_t n)
{
  size_t i;

  if (n != 64)
    return 0;
  for (i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

/* "HEX\n" lines (by-name/NAME/layers) or "layer HEX BYTES\n" (a build's
   result): the ids, bottom first, checked. */
static int
parse_layers (const char *text, int with_prefix, char ids[][65], uint64_t *bytes)
{
  int n = 0;
  const char *p = text;

  while (*p)
    {
      const char *nl = strchr (p, '\n');
      if (nl == NULL || n >= SBX_TMPL_MAX_LAYERS)
        return -1;
      if (with_prefix)
        {
          char *end;
          unsigned long long b;
          if (strncmp (p, "layer ", 6) != 0 || nl - p < 6 + 64 + 2 || p[70] != ' ')
            return -1;
          p += 6;
          errno = 0;
          b = strtoull (p + 65, &end, 10);
          if (errno || end != nl)
            return -1;
          *bytes += b;
        }
      if (!hex64 (p, 64) || (!with_prefix && nl - p != 64))
        return -1;
      memcpy (ids[n], p, 64);
      ids[n++][64] = '\0';
      p = nl + 1;
    }
  return n;
}

/* ---- the generated top layer ------------------------------------------- */

static int
make_sbx_layer (sbx_error_t **err)
{
  /* /root 0755: host root owns the layer, which is nobody inside, so the
     sandbox's root could not enter a 0700 one (it is read-only anyway). */
  static const struct
  {
    const char *path;
    mode_t mode;
  } dirs[] = {{"etc", 0755}, {"proc", 0555}, {"dev", 0755},   {"sys", 0555},
              {"home", 0755}, {"home/user", 0755}, {"tmp", 01777}, {"root", 0755},
              {"run", 0755}};
  const struct sbx_etc_file *f;
  char tmp[40] = "sbx-";
  cleanup_close int tmpdir = -1, d = -1;
  size_t i;

  if (faccessat (S.dir, SBX_LAYER, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
    return 0;
  tmpdir = openat (S.dir, "tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
  sbx_random_hex (tmp + 4, 12);
  if (tmpdir < 0 || mkdirat (tmpdir, tmp, 0755) < 0
      || (d = openat (tmpdir, tmp, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    return sbx_err_sys (err, errno, "templates: make the top layer");
  for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (mkdirat (d, dirs[i].path, dirs[i].mode) < 0 || fchmodat (d, dirs[i].path, dirs[i].mode, 0) < 0)
      return sbx_err_sys (err, errno, "templates: top layer `%s`", dirs[i].path);
  for (f = sbx_template_etc (); f->name; f++)
    {
      char path[64];
      snprintf (path, sizeof path, "etc/%s", f->name);
      if (write_at (d, path, f->content, strlen (f->content), err) < 0)
        return -1;
    }
  if (fchmodat (tmpdir, tmp, 0755, 0) < 0 || renameat (tmpdir, tmp, S.dir, SBX_LAYER) < 0)
    return sbx_err_sys (err, errno, "templates: install the top layer");
  return 0;
}

const char *
sbx_tmpl_cache_dir (void)
{
  return S.cache;
}

int
sbx_tmpl_store_open (const char *state_dir, const char *mirror, const char *cache_dir,
                     sbx_error_t **err)
{
  cleanup_close int state = open (state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct dirent *de;
  DIR *d;
  int fd;

  if (state < 0)
    return sbx_err_sys (err, errno, "open the state directory `%s`", state_dir);
  snprintf (S.path, sizeof S.path, "%s/templates", state_dir);
  snprintf (S.mirror, sizeof S.mirror, "%s", mirror);
  if (cache_dir && cache_dir[0])
    snprintf (S.cache, sizeof S.cache, "%s", cache_dir);
  else
    snprintf (S.cache, sizeof S.cache, "%s/templates/cache", state_dir);
  if (mkdirat (state, "templates", 0755) < 0 && errno != EEXIST)
    return sbx_err_sys (err, errno, "mkdir `%s/templates`", state_dir);
  S.dir = openat (state, "templates", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (S.dir < 0)
    return sbx_err_sys (err, errno, "open `%s/templates`", state_dir);
  if (fchownat (S.dir, "", 0, 0, AT_EMPTY_PATH) < 0 || fchmodat (state, "templates", 0755, 0) < 0)
    return sbx_err_sys (err, errno, "own `%s/templates`", state_dir);
  if ((mkdirat (S.dir, "layers", 0700) < 0 && errno != EEXIST)
      || (mkdirat (S.dir, "by-name", 0755) < 0 && errno != EEXIST)
      || (mkdirat (S.dir, "tmp", 0700) < 0 && errno != EEXIST)
      || (mkdirat (S.dir, "progress", 0755) < 0 && errno != EEXIST))
    return sbx_err_sys (err, errno, "mkdir the template store");
  /* Builds a crash interrupted: their directories and progress files. */
  fd = openat (S.dir, "progress", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && (d = fdopendir (fd)) != NULL)
    {
      while ((de = readdir (d)) != NULL)
        if (de->d_name[0] != '.')
          unlinkat (dirfd (d), de->d_name, 0);
      closedir (d);
    }
  else if (fd >= 0)
    close (fd);
  fd = openat (S.dir, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && (d = fdopendir (fd)) != NULL)
    {
      while ((de = readdir (d)) != NULL)
        if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
          rm_tree (dirfd (d), de->d_name);
      closedir (d);
    }
  else if (fd >= 0)
    close (fd);
  return make_sbx_layer (err);
}

/* ---- building ---------------------------------------------------------- */

static int
confine_child (int build)
{
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  long abi = sbx_landlock_abi ();
  int ruleset;

  if (abi < 1)
    return -1; /* the daemon refuses to start without Landlock */
  ruleset = sbx_landlock_ruleset (abi, 0, 0, NULL);
  if (ruleset < 0
      || sbx_landlock_allow_fd (ruleset, abi, build,
                                sbx_landlock_fs_rights (abi)
                                    & ~(LL_FS_EXECUTE | LL_FS_MAKE_BLOCK | LL_FS_MAKE_SOCK
                                        | LL_FS_MAKE_FIFO | LL_FS_IOCTL_DEV),
                                NULL) < 0)
    return -1;
  if (setgroups (0, NULL) < 0 || setresgid (0, 0, 0) < 0)
    return -1;
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    return -1;
  if (sbx_landlock_enforce (ruleset, NULL) < 0)
    return -1;
  close (ruleset);
  for (int cap = 0; cap <= 63; cap++)
    if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      return -1;
  memset (data, 0, sizeof data);
  return (int) syscall (SYS_capset, &hdr, data);
}

static void
child_main (int in_fd, int build, int msg_fd, enum sbx_tmpl_format format,
            const struct sbx_tmpl_limits *lim)
{
  char msg[1024];
  struct rlimit cpu = {600, 600}, fsize = {lim->max_bytes + 1, lim->max_bytes + 1},
                core = {0, 0}, nofile = {256, 256};
  int rc;

  if (dup2 (in_fd, 0) < 0 || dup2 (build, 1) < 0 || dup2 (msg_fd, 2) < 0)
    _exit (1);
  syscall (SYS_close_range, 3, ~0U, 0);
  setrlimit (RLIMIT_CPU, &cpu);
  setrlimit (RLIMIT_FSIZE, &fsize);
  setrlimit (RLIMIT_CORE, &core);
  setrlimit (RLIMIT_NOFILE, &nofile);
  signal (SIGXFSZ, SIG_IGN);
  if (confine_child (1) < 0)
    {
      dprintf (2, "S cannot confine the template builder: %s", strerror (errno));
      _exit (1);
    }
  rc = sbx_tmpl_extract (0, 1, format, lim, msg, sizeof msg);
  if (rc < 0)
    dprintf (2, "%c %s", rc == -2 ? 'L' : 'I', msg);
  _exit (rc < 0 ? 1 : 0);
}

static int
run_child (int in_fd, int build, enum sbx_tmpl_format format, const struct sbx_tmpl_limits *lim,
           sbx_error_t **err)
{
  char msg[1100];
  size_t got = 0;
  int p[2], status;
  pid_t pid;

  if (pipe2 (p, O_CLOEXEC) < 0)
    return sbx_err_sys (err, errno, "pipe");
  {
    int keep[] = {in_fd, build, p[1]};
    pid = sbx_helper_fork (keep, 3);
  }
  if (pid < 0)
    {
      close (p[0]);
      close (p[1]);
      return sbx_err_sys (err, errno, "fork the template builder");
    }
  if (pid == 0)
    child_main (in_fd, build, p[1], format, lim);
  close (p[1]);
  for (;;)
    {
      ssize_t n = read (p[0], msg + got, sizeof msg - 1 - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += (size_t) n;
      if (got == sizeof msg - 1)
        break;
    }
  msg[got] = '\0';
  close (p[0]);
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return sbx_err_sys (err, errno, "wait for the template builder");
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  for (size_t i = 0; i < got; i++)
    if ((unsigned char) msg[i] < 0x20 || (unsigned char) msg[i] > 0x7e)
      msg[i] = '?';
  if (got > 2 && msg[0] == 'L')
    return sbx_err (err, SBX_E_TOO_LARGE, "%s", msg + 2);
  if (got > 2 && msg[0] == 'I')
    return sbx_err (err, SBX_E_INVALID, "%s", msg + 2);
  if (WIFSIGNALED (status) && WTERMSIG (status) == SIGXCPU)
    return sbx_err (err, SBX_E_TOO_LARGE, "the template build used more than 600 s of CPU");
  return sbx_err (err, SBX_E_SYSTEM, "the template builder failed%s%s",
                  got > 2 ? ": " : "", got > 2 ? msg + 2 : "");
}

/* Move the build's layers and the template into place. S.lock held. */
static int
commit (int build, const char *name, const char *owner, sbx_error_t **err)
{
  char ids[SBX_TMPL_MAX_LAYERS][65], tmp[40] = "new-", line[80], stamp[64];
  cleanup_free char *result = NULL, *meta = NULL;
  cleanup_close int byname = -1, layers = -1, blayers = -1, tmpdir = -1, t = -1;
  struct sbx_buf list = SBX_BUF_INIT;
  uint64_t bytes = 0;
  size_t rlen = 0, mlen = 0;
  struct timespec now;
  int n, i;

  result = sbx_read_small_at (build, "result", 16384, &rlen);
  meta = sbx_read_small_at (build, "meta.json", SBX_TMPL_META_MAX, &mlen);
  n = result ? parse_layers (result, 1, ids, &bytes) : -1;
  if (n <= 0 || meta == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "the template builder left no usable result");
  byname = openat (S.dir, "by-name", O_PATH | O_DIRECTORY | O_CLOEXEC);
  layers = openat (S.dir, "layers", O_PATH | O_DIRECTORY | O_CLOEXEC);
  blayers = openat (build, "layers", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  tmpdir = openat (S.dir, "tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (byname < 0 || layers < 0 || blayers < 0 || tmpdir < 0)
    return sbx_err_sys (err, errno, "templates: open the store");
  if (faccessat (byname, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
    return sbx_err (err, SBX_E_CONFLICT, "template `%s` already exists", name);
  for (i = 0; i < n; i++)
    {
      struct stat st;
      if (fstatat (layers, ids[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
        continue; /* stored once: this build's copy goes with the build */
      if (fstatat (blayers, ids[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode)
          || st.st_uid != 0)
        return sbx_err (err, SBX_E_SYSTEM, "the template builder left no layer %.12s", ids[i]);
      if (fchmodat (blayers, ids[i], 0755, 0) < 0 || renameat (blayers, ids[i], layers, ids[i]) < 0)
        return sbx_err_sys (err, errno, "templates: store layer %.12s", ids[i]);
    }
  for (i = 0; i < n; i++)
    {
      snprintf (line, sizeof line, "%s\n", ids[i]);
      sbx_buf_append (&list, line, strlen (line));
    }
  clock_gettime (CLOCK_REALTIME, &now);
  snprintf (stamp, sizeof stamp, "%lld %llu\n",
            (long long) now.tv_sec * 1000 + now.tv_nsec / 1000000, (unsigned long long) bytes);
  sbx_random_hex (tmp + 4, 12);
  if (mkdirat (tmpdir, tmp, 0755) < 0 || (t = openat (tmpdir, tmp, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    {
      sbx_buf_free (&list);
      return sbx_err_sys (err, errno, "templates: mkdir");
    }
  if (list.failed)
    {
      sbx_buf_free (&list);
      rm_tree (tmpdir, tmp);
      return sbx_err_oom (err);
    }
  if (write_at (t, "layers", list.data, list.len, err) < 0
      || write_at (t, "meta.json", meta, mlen, err) < 0
      || write_at (t, "owner", owner, strlen (owner), err) < 0
      || write_at (t, "created", stamp, strlen (stamp), err) < 0
      || fchmodat (tmpdir, tmp, 0755, 0) < 0
      || syscall (SYS_renameat2, tmpdir, tmp, byname, name, RENAME_NOREPLACE) < 0)
    {
      int e = errno;
      sbx_buf_free (&list);
      rm_tree (tmpdir, tmp);
      if (*err)
        return -1;
      if (e == EEXIST)
        return sbx_err (err, SBX_E_CONFLICT, "template `%s` already exists", name);
      return sbx_err_sys (err, e, "templates: install `%s`", name);
    }
  sbx_buf_free (&list);
  return 0;
}

int
sbx_tmpl_build (int in_fd, const char *name, const char *owner, enum sbx_tmpl_format format,
                const struct sbx_tmpl_limits *lim, sbx_error_t **err)
{
  char bname[40] = "build-";
  cleanup_close int tmpdir = -1, build = -1;
  int rc;

  if (S.dir < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the template store is not open");
  if (!sbx_tmpl_name_ok (name))
    return sbx_err (err, SBX_E_INVALID,
                    "template name `%.64s`: 1 to 31 of a-z 0-9 . _ -, starting with a letter or "
                    "digit, and not a built-in template",
                    name);
  if (sbx_tmpl_exists (name))
    return sbx_err (err, SBX_E_CONFLICT, "template `%s` already exists", name);
  tmpdir = openat (S.dir, "tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
  sbx_random_hex (bname + 6, 12);
  if (tmpdir < 0 || mkdirat (tmpdir, bname, 0700) < 0
      || (build = openat (tmpdir, bname, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    return sbx_err_sys (err, errno, "templates: make a build directory");
  if (format == SBX_TMPL_RECIPE)
    {
      /* progress/NAME: debootstrap's output while it runs, readable by the
         front end (GET /v1/templates/NAME/progress); removed at the end */
      char path[700];
      int progress = -1, pdir = openat (S.dir, "progress", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (pdir >= 0)
        progress = openat (pdir, name, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (progress >= 0 && fchmod (progress, 0644) < 0)
        sbx_warn ("templates: progress file: %s", strerror (errno));
      snprintf (path, sizeof path, "%s/tmp/%s", S.path, bname);
      {
        int layers = openat (S.dir, "layers", O_PATH | O_DIRECTORY | O_CLOEXEC);
        rc = sbx_tmpl_recipe_build (in_fd, build, path, S.mirror, S.cache, progress, layers, err);
        if (layers >= 0)
          close (layers);
      }
      if (progress >= 0)
        {
          close (progress);
          unlinkat (pdir, name, 0);
        }
      if (pdir >= 0)
        close (pdir);
    }
  else
    rc = run_child (in_fd, build, format, lim, err);
  if (rc == 0)
    {
      pthread_mutex_lock (&S.lock);
      rc = commit (build, name, owner, err);
      pthread_mutex_unlock (&S.lock);
    }
  rm_tree (tmpdir, bname);
  return rc;
}

int
sbx_tmpl_exists (const char *name)
{
  char path[80];

  if (S.dir < 0 || !sbx_tmpl_name_ok (name))
    return 0;
  snprintf (path, sizeof path, "by-name/%s/layers", name);
  return faccessat (S.dir, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int
sbx_tmpl_each (int (*fn) (const char *name, void *arg), void *arg)
{
  struct dirent *de;
  int fd, rc = 0;
  DIR *d;

  if (S.dir < 0)
    return 0;
  fd = openat (S.dir, "by-name", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  d = fd >= 0 ? fdopendir (fd) : NULL;
  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return errno == ENOENT ? 0 : -1;
    }
  while (rc == 0 && (de = readdir (d)) != NULL)
    if (sbx_tmpl_name_ok (de->d_name) && sbx_tmpl_exists (de->d_name))
      rc = fn (de->d_name, arg);
  closedir (d);
  return rc;
}

/* ---- removal ----------------------------------------------------------- */

static int
referenced (int byname, const char *id)
{
  struct dirent *de;
  int found = 0;
  DIR *d = sbx_opendir_at (byname, ".");

  if (d == NULL)
    return 1; /* unsure: keep it */
  while (!found && (de = readdir (d)) != NULL)
    {
      char path[300], ids[SBX_TMPL_MAX_LAYERS][65];
      cleanup_free char *text = NULL;
      size_t len;
      int n;
      if (de->d_name[0] == '.')
        continue;
      snprintf (path, sizeof path, "%s/layers", de->d_name);
      text = sbx_read_small_at (dirfd (d), path, 16384, &len);
      n = text ? parse_layers (text, 0, ids, NULL) : -1;
      if (n < 0)
        found = 1;
      for (int i = 0; i < n; i++)
        if (strcmp (ids[i], id) == 0)
          found = 1;
    }
  closedir (d);
  return found;
}

int
sbx_tmpl_remove (const char *name, int (*in_use) (const char *name), sbx_error_t **err)
{
  cleanup_close int byname = -1, layers = -1;
  struct dirent *de;
  DIR *d;
  int fd;

  if (!sbx_tmpl_exists (name))
    return sbx_err (err, SBX_E_NOT_FOUND, "template `%.64s` not found", name);
  pthread_mutex_lock (&S.lock);
  if (in_use && in_use (name))
    {
      pthread_mutex_unlock (&S.lock);
      return sbx_err (err, SBX_E_CONFLICT, "template `%s` is in use by a running sandbox", name);
    }
  byname = openat (S.dir, "by-name", O_PATH | O_DIRECTORY | O_CLOEXEC);
  layers = openat (S.dir, "layers", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (byname < 0 || layers < 0)
    {
      pthread_mutex_unlock (&S.lock);
      return sbx_err_sys (err, errno, "templates: open the store");
    }
  discard (byname, name);
  /* Layers no other template names. */
  fd = openat (layers, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  d = fd >= 0 ? fdopendir (fd) : NULL;
  if (d)
    {
      while ((de = readdir (d)) != NULL)
        if (de->d_name[0] != '.' && !referenced (byname, de->d_name))
          discard (layers, de->d_name);
      closedir (d);
    }
  else if (fd >= 0)
    close (fd);
  pthread_mutex_unlock (&S.lock);
  return 0;
}

/* ---- mounting ---------------------------------------------------------- */

/* "/proc/self/fd/N" at p, escaped as overlay's options want (nothing to
   escape in it); no libc: it runs in a forked copy of a threaded process. */
static char *
put_fd_path (char *p, int fd)
{
  static const char prefix[] = "/proc/self/fd/";
  char digits[12];
  int n = 0;

  memcpy (p, prefix, sizeof prefix - 1);
  p += sizeof prefix - 1;
  do
    digits[n++] = (char) ('0' + fd % 10);
  while ((fd /= 10) > 0);
  while (n > 0)
    *p++ = digits[--n];
  return p;
}

/* An errno as an exit status: 0 only for success. */
static int
child_status (int e)
{
  return e == 0 ? 0 : e > 0 && e < 126 ? e : 125;
}

/* The classic way, for kernels without "lowerdir+" (before 6.8): every
   layer in one "lowerdir=" of mount(2)'s options (a page; fsconfig's
   strings stop at 256 bytes), each named by a descriptor of its own so
   that 65 layers fit. overlayfs clones its layers, and only mounts of the
   caller's own namespace may be cloned; mount(2) needs a place to mount
   on. So a child (a copy of us sharing our descriptor table) enters the
   store, takes a mount namespace of its own (private: nothing reaches the
   host's), which moves its working directory to the copy, opens the
   layers from there, mounts, clones the mount detached into the slot we
   reserved, and is gone with its namespace. */
static int
mount_classic (const char *name, char ids[][65], int n, sbx_error_t **err)
{
  char rel[SBX_TMPL_MAX_LAYERS + 1][80];
  int i, nrel = 0, slot = -1, status = 0;
  char *opts;
  pid_t pid;

  /* Topmost first: sbx's layer, then the template's, last applied first. */
  snprintf (rel[nrel++], sizeof rel[0], SBX_LAYER);
  for (i = n - 1; i >= 0; i--)
    snprintf (rel[nrel++], sizeof rel[0], "layers/%s", ids[i]);
  /* "lowerdir=" + ":/proc/self/fd/NNNNNNNNNN" each + ",userxattr" */
  opts = malloc (16 + (size_t) nrel * 26 + 16);
  if (opts == NULL)
    return sbx_err_oom (err);
  slot = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  if (slot < 0)
    {
      free (opts);
      return sbx_err_sys (err, errno, "template `%s`: reserve a descriptor", name);
    }
  pid = (pid_t) syscall (SYS_clone, CLONE_FILES | SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0)
    {
      /* System calls only from here. */
      int fds[SBX_TMPL_MAX_LAYERS + 1], tree, k, e;
      char *p = opts;

      if (fchdir (S.dir) < 0 || unshare (CLONE_NEWNS) < 0
          || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        _exit (child_status (errno));
      memcpy (p, "lowerdir=", 9);
      p += 9;
      e = 0;
      for (k = 0; k < nrel && e == 0; k++)
        {
          fds[k] = openat (AT_FDCWD, rel[k], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (fds[k] < 0)
            {
              e = errno;
              break;
            }
          if (k)
            *p++ = ':';
          p = put_fd_path (p, fds[k]);
        }
      if (e)
        {
          /* The table is the parent's: what we opened in it goes. */
          while (k-- > 0)
            close (fds[k]);
          _exit (child_status (e));
        }
      memcpy (p, ",userxattr", 11);
      e = mount ("overlay", "/tmp", "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts) < 0
              ? errno
              : 0;
      tree = e ? -1
               : (int) syscall (SYS_open_tree, AT_FDCWD, "/tmp", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
      if (!e && (tree < 0 || dup3 (tree, slot, O_CLOEXEC) < 0))
        e = errno;
      /* The table is the parent's too: leave nothing of ours in it. */
      if (tree >= 0)
        close (tree);
      for (k = 0; k < nrel; k++)
        close (fds[k]);
      _exit (child_status (e));
    }
  if (pid < 0)
    {
      free (opts);
      close (slot);
      return sbx_err_sys (err, errno, "template `%s`: clone", name);
    }
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  free (opts);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      close (slot);
      int e = WIFEXITED (status) ? WEXITSTATUS (status) : EIO;
      return sbx_err_sys (err, e == 125 ? EIO : e, "mount template `%s` (overlay)", name);
    }
  return slot;
}

int
sbx_tmpl_mount (const char *name, sbx_error_t **err)
{
  char path[300], ids[SBX_TMPL_MAX_LAYERS][65];
  cleanup_free char *text = NULL;
  cleanup_close int fs = -1;
  size_t len;
  int n, i, mnt;

  if (!sbx_tmpl_name_ok (name))
    return sbx_err (err, SBX_E_INVALID, "unknown template");
  snprintf (path, sizeof path, "by-name/%s/layers", name);
  pthread_mutex_lock (&S.lock);
  text = sbx_read_small_at (S.dir, path, 16384, &len);
  n = text ? parse_layers (text, 0, ids, NULL) : -1;
  if (n <= 0)
    {
      pthread_mutex_unlock (&S.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "template `%s` not found", name);
    }
  if (!(sbx_kernel.paths & SBX_KERNEL_OVERLAY_APPEND))
    {
      mnt = mount_classic (name, ids, n, err);
      pthread_mutex_unlock (&S.lock);
      return mnt;
    }
  fs = fsopen ("overlay", FSOPEN_CLOEXEC);
  if (fs < 0)
    {
      pthread_mutex_unlock (&S.lock);
      return sbx_err_sys (err, errno, "fsopen overlay");
    }
  /* Topmost first: sbx's /etc and mount points, then the template's
     layers from the last applied to the first. Paths through our own
     descriptor of the store: nothing else can swap a directory in. */
  snprintf (path, sizeof path, "/proc/self/fd/%d/" SBX_LAYER, S.dir);
  if (fsconfig (fs, FSCONFIG_SET_STRING, "lowerdir+", path, 0) < 0)
    goto sys;
  for (i = n - 1; i >= 0; i--)
    {
      snprintf (path, sizeof path, "/proc/self/fd/%d/layers/%s", S.dir, ids[i]);
      if (fsconfig (fs, FSCONFIG_SET_STRING, "lowerdir+", path, 0) < 0)
        goto sys;
    }
  if (fsconfig (fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0
      || fsconfig (fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    goto sys;
  pthread_mutex_unlock (&S.lock);
  mnt = fsmount (fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mnt < 0)
    return sbx_err_sys (err, errno, "mount template `%s`", name);
  return mnt;
sys:
  pthread_mutex_unlock (&S.lock);
  return sbx_err_sys (err, errno, "mount template `%s` (overlay)", name);
}
