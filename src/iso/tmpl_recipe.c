/* sbx: templates from a recipe: a Debian release and packages, installed
 * by debootstrap from the configured mirror (docs/templates.md).
 *
 * A recipe build is for the administrator only (the front end refuses it
 * over TCP), names nothing but a release and package names (checked
 * here again), and fetches only from the daemon's mirror, with the
 * archive's signatures checked against debian-archive-keyring. Root of
 * the host runs debootstrap's first stage only (--foreign: download,
 * check, unpack; nothing from a package runs); its second stage, where
 * the packages' maintainer scripts run, is in a build sandbox
 * (tmpl_run.c), as the recipe's commands are. The tree is
 * then made a layer like any other: every file root's, setuid/setgid
 * dropped, device nodes, FIFOs and sockets removed. Built layers are kept
 * in a cache keyed by the SHA-256 of the canonical recipe and the mirror
 * (--template-cache, shared by daemons), so the second build of a recipe
 * is a copy. A recipe's build commands run afterwards (tmpl_run.c); their
 * layer is keyed by the whole recipe.
 */
#include "iso/tmpl.h"
#include "iso/helper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/file.h"
#include "util/log.h"

#define RECIPE_MAX 8192
#define MAX_PACKAGES 128
#define BUILD_TIMEOUT_S 1800

static int
name_ok (const char *s, size_t n, int pkg)
{
  size_t i;

  if (n == 0 || n > 64)
    return 0;
  for (i = 0; i < n; i++)
    {
      char ch = s[i];
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')
            || (pkg && i > 0 && (ch == '.' || ch == '+' || ch == '-'))))
        return 0;
    }
  return 1;
}

/* "release NAME\n" then "package NAME\n" lines (the front end's canonical
   form of the client's JSON): checked, and the --include list made. */
int
sbx_tmpl_recipe_parse (const char *text, char *release, size_t rlen, char *include, size_t ilen)
{
  const char *p = text;
  size_t io = 0;
  int npkg = 0, have_release = 0, nrun = 0;

  include[0] = '\0';
  while (*p)
    {
      const char *nl = strchr (p, '\n'), *v;
      size_t n;
      if (nl == NULL)
        return -1;
      if (strncmp (p, "release ", 8) == 0 && !have_release)
        {
          v = p + 8;
          n = (size_t) (nl - v);
          if (!name_ok (v, n, 0) || n >= rlen)
            return -1;
          memcpy (release, v, n);
          release[n] = '\0';
          have_release = 1;
        }
      else if (strncmp (p, "package ", 8) == 0 && npkg < MAX_PACKAGES)
        {
          v = p + 8;
          n = (size_t) (nl - v);
          if (!name_ok (v, n, 1) || io + n + 2 >= ilen)
            return -1;
          if (io)
            include[io++] = ',';
          memcpy (include + io, v, n);
          io += n;
          include[io] = '\0';
          npkg++;
        }
      else if (strncmp (p, "run ", 4) == 0 && have_release && nrun < SBX_TMPL_RUN_MAX)
        {
          /* build commands come last; printable ASCII (and tab) only */
          v = p + 4;
          n = (size_t) (nl - v);
          if (n == 0 || n > SBX_TMPL_RUN_LEN)
            return -1;
          for (size_t k = 0; k < n; k++)
            if (((unsigned char) v[k] < 0x20 && v[k] != '\t') || (unsigned char) v[k] > 0x7e)
              return -1;
          nrun++;
        }
      else
        return -1;
      if (nrun && strncmp (p, "run ", 4) != 0)
        return -1;
      p = nl + 1;
    }
  return have_release ? 0 : -1;
}

/* ---- making the tree a layer ------------------------------------------- */

/* upper: an overlay's upper (the build commands' changes): its 0/0
   character devices are whiteouts and stay, any other device node sets
   *bad; otherwise every device node goes. */
void
sbx_tmpl_sanitize (int dir, int depth, uint64_t *bytes, int upper, int *bad)
{
  struct dirent *de;
  DIR *d = sbx_opendir_at (dir, ".");

  if (d == NULL)
    return;
  while ((de = readdir (d)) != NULL)
    {
      struct stat st;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (upper && S_ISCHR (st.st_mode) && st.st_rdev == 0)
        {
          if (fchownat (dirfd (d), de->d_name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0)
            *bad = 1;
          continue;
        }
      if (upper && (S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode)))
        {
          *bad = 1;
          continue;
        }
      if (S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode) || S_ISFIFO (st.st_mode)
          || S_ISSOCK (st.st_mode))
        {
          unlinkat (dirfd (d), de->d_name, 0);
          continue;
        }
      /* root's, without setuid/setgid; an entry that will not be made so
         is not kept */
      if (fchownat (dirfd (d), de->d_name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0
          || (!S_ISLNK (st.st_mode) && fchmodat (dirfd (d), de->d_name, st.st_mode & 01777, 0) < 0))
        {
          sbx_warn ("templates: recipe: dropping `%s` (%s)", de->d_name, strerror (errno));
          if (unlinkat (dirfd (d), de->d_name, S_ISDIR (st.st_mode) ? AT_REMOVEDIR : 0) < 0)
            sbx_warn ("templates: recipe: cannot drop `%s`", de->d_name);
          continue;
        }
      if (S_ISREG (st.st_mode))
        *bytes += (uint64_t) st.st_size;
      if (S_ISDIR (st.st_mode) && depth < 256)
        {
          int sub = openat (dirfd (d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0)
            {
              sbx_tmpl_sanitize (sub, depth + 1, bytes, upper, bad);
              close (sub);
            }
        }
    }
  closedir (d);
}

static void
sanitize (int dir, int depth, uint64_t *bytes)
{
  int bad = 0;
  sbx_tmpl_sanitize (dir, depth, bytes, 0, &bad);
}

/* Bytes of the regular files under dir (a layer already stored). */
static uint64_t
tree_bytes (int dir)
{
  uint64_t content;

  sbx_tree_sizes (dir, 256, &content, NULL);
  return content;
}

/* Every entry's owner and group k to SBX_TMPL_BUILD_ID_BASE + k (65535
   at most: a larger id is nobody's, 65534), by descriptor, never through
   a symlink. An entry shifted already (a hard link seen twice) stays. 0,
   or -1 with errno. */
static int
shift_owners (int dir, int depth)
{
  struct dirent *de;
  int rc = 0;
  DIR *d = sbx_opendir_at (dir, ".");

  if (d == NULL)
    return -1;
  while (rc == 0 && (de = readdir (d)) != NULL)
    {
      struct stat st;
      uid_t u;
      gid_t g;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        {
          rc = -1;
          break;
        }
      u = st.st_uid >= SBX_TMPL_BUILD_ID_BASE ? st.st_uid
          : SBX_TMPL_BUILD_ID_BASE + (st.st_uid < 65536 ? st.st_uid : 65534);
      g = st.st_gid >= SBX_TMPL_BUILD_ID_BASE ? st.st_gid
          : SBX_TMPL_BUILD_ID_BASE + (st.st_gid < 65536 ? st.st_gid : 65534);
      if ((u != st.st_uid || g != st.st_gid)
          && fchownat (dirfd (d), de->d_name, u, g, AT_SYMLINK_NOFOLLOW) < 0)
        {
          rc = -1;
          break;
        }
      if (S_ISDIR (st.st_mode) && depth < 256)
        {
          int sub = openat (dirfd (d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub < 0)
            rc = -1;
          else
            {
              rc = shift_owners (sub, depth + 1);
              close (sub);
            }
        }
    }
  {
    int e = errno;
    closedir (d);
    errno = e;
  }
  return rc;
}

/* Run argv (absolute) with output to log_fd; its exit status, or -1. */
static int
run (char *const argv[], int log_fd, int timeout_s)
{
  pid_t pid = sbx_helper_fork (&log_fd, 1);
  int status;
  time_t end = time (NULL) + timeout_s;

  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      static char *const env[] = {(char *) (uintptr_t) "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                  (char *) (uintptr_t) "LANG=C.UTF-8",
                                  (char *) (uintptr_t) "DEBIAN_FRONTEND=noninteractive", NULL};
      int null = open ("/dev/null", O_RDONLY | O_CLOEXEC);
      if (null < 0 || dup2 (null, 0) < 0 || dup2 (log_fd, 1) < 0 || dup2 (log_fd, 2) < 0)
        _exit (127);
      syscall (SYS_close_range, 3, ~0U, 0);
      setsid ();
      /* debootstrap mounts /proc and /sys in its target: in a mount
         namespace of its own, they go with it, whatever happens. */
      if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        _exit (126);
      execve (argv[0], argv, env);
      _exit (127);
    }
  for (;;)
    {
      pid_t r = waitpid (pid, &status, WNOHANG);
      if (r == pid)
        return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
      if (r < 0 && errno != EINTR)
        return -1;
      if (time (NULL) > end)
        {
          kill (-pid, SIGKILL);
          kill (pid, SIGKILL);
        }
      usleep (100 * 1000);
    }
}

/* The last line of the log starting with "E:" (debootstrap's errors), or
   its last line. */
static void
log_reason (int log_fd, char *out, size_t len)
{
  char buf[8192], *line, *save = NULL, *best = NULL, *last = NULL;
  off_t size = lseek (log_fd, 0, SEEK_END), from = size > (off_t) sizeof buf - 1 ? size - (off_t) sizeof buf + 1 : 0;
  ssize_t n = pread (log_fd, buf, sizeof buf - 1, from);

  snprintf (out, len, "debootstrap failed");
  if (n <= 0)
    return;
  buf[n] = '\0';
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      last = line;
      if (strncmp (line, "E:", 2) == 0)
        best = line;
    }
  if (best || last)
    snprintf (out, len, "debootstrap failed: %.300s", best ? best : last);
  for (char *p = out; *p; p++)
    if ((unsigned char) *p < 0x20 || (unsigned char) *p > 0x7e)
      *p = '?';
}

static void
hex_sha256 (const char *prefix, const char *a, const char *b, char out[65])
{
  static const char digits[] = "0123456789abcdef";
  unsigned char md[32];
  unsigned mdlen = 0;
  EVP_MD_CTX *h = EVP_MD_CTX_new ();

  EVP_DigestInit_ex (h, EVP_sha256 (), NULL);
  EVP_DigestUpdate (h, prefix, strlen (prefix));
  EVP_DigestUpdate (h, a, strlen (a));
  EVP_DigestUpdate (h, "\n", 1);
  EVP_DigestUpdate (h, b, strlen (b));
  EVP_DigestFinal_ex (h, md, &mdlen);
  EVP_MD_CTX_free (h);
  for (int i = 0; i < 32; i++)
    {
      out[2 * i] = digits[md[i] >> 4];
      out[2 * i + 1] = digits[md[i] & 15];
    }
  out[64] = '\0';
}

/* In the build directory `build` (path `build_path`): layers/KEY (from the
   cache or debootstrap), result and meta.json, as the extractor leaves
   them. 0, or -1 with err. */
int
sbx_tmpl_recipe_build (int in_fd, int build, const char *build_path, const char *mirror,
                       const char *cache_dir, int progress_fd, int store_layers,
                       sbx_error_t **err)
{
  char text[RECIPE_MAX + 1], release[72], include[RECIPE_MAX], key[65], reason[400];
  char target[1200], cached[1200], result[300], meta[] = "{\"source\":\"recipe\",\"env\":[]}";
  char run_key[65] = "", *cmds[SBX_TMPL_RUN_MAX], lower[1300];
  char run_text[RECIPE_MAX + 1];
  uint64_t run_bytes = 0;
  int ncmds = 0, stored = 0;
  cleanup_close int log_fd = -1, layers = -1, cache_hold = -1;
  uint64_t bytes = 0;
  ssize_t n = pread (in_fd, text, RECIPE_MAX, 0);
  struct stat st;
  int rc, fd;

  if (n <= 0 || n >= RECIPE_MAX)
    return sbx_err (err, SBX_E_INVALID, "the recipe is empty or larger than %d bytes", RECIPE_MAX);
  text[n] = '\0';
  if (memchr (text, '\0', (size_t) n) != NULL
      || sbx_tmpl_recipe_parse (text, release, sizeof release, include, sizeof include) < 0)
    return sbx_err (err, SBX_E_INVALID, "malformed recipe");
  /* The debootstrap layer is keyed by the release and packages alone (a
     recipe that adds commands reuses it); the commands' layer by the
     whole recipe. */
  {
    char *r = strstr (text, "\nrun ");
    if (r != NULL)
      {
        char *c = r + 1;
        r[1] = '\0';
        hex_sha256 ("sbx-recipe-v2\n", text, mirror, key);
        r[1] = 'r';
        while (*c && ncmds < SBX_TMPL_RUN_MAX)
          {
            char *nl = strchr (c, '\n');
            /* parsed above: "run CMD\n" lines to the end */
            cmds[ncmds++] = c + 4;
            c = nl + 1;
          }
        hex_sha256 ("sbx-recipe-run-v2\n", text, mirror, run_key);
      }
    else
      hex_sha256 ("sbx-recipe-v2\n", text, mirror, key);
  }
  if (mkdirat (build, "layers", 0700) < 0
      || (layers = openat (build, "layers", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    return sbx_err_sys (err, errno, "recipe: mkdir");
  /* A prune (tmpl_cache.c) waits for the end of this build's copies from
     and into the cache; without the hold, do without the cache. */
  if (cache_dir[0] && (cache_hold = sbx_tmpl_cache_hold (cache_dir)) < 0)
    {
      sbx_warn ("templates: the recipe cache `%s` cannot be used: %s", cache_dir,
                strerror (errno));
      cache_dir = "";
    }
  snprintf (target, sizeof target, "%s/layers/%s", build_path, key);
  snprintf (cached, sizeof cached, "%s/%s", cache_dir, key);
  /* debootstrap's output: the progress file clients may read, or a log of
     the build's own */
  log_fd = progress_fd >= 0 ? fcntl (progress_fd, F_DUPFD_CLOEXEC, 3)
                            : openat (build, "log", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (log_fd < 0)
    return sbx_err_sys (err, errno, "recipe: log");
  if ((fd = openat (store_layers, key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
    {
      /* built before by this daemon: the stored layer is the result (the
         commit keeps it and takes nothing from this build) */
      dprintf (log_fd, "sbx: the layer %.12s is stored already\n", key);
      bytes = tree_bytes (fd);
      close (fd);
      stored = 1;
      goto commands;
    }
  if (cache_dir[0] && stat (cached, &st) == 0 && S_ISDIR (st.st_mode) && st.st_uid == 0)
    {
      char *const cp[] = {(char *) (uintptr_t) "/bin/cp", (char *) (uintptr_t) "-a",
                          (char *) (uintptr_t) "--reflink=auto", cached, target, NULL};
      sbx_info ("templates: recipe %.12s from the cache", key);
      dprintf (log_fd, "sbx: copying the cached build %.12s\n", key);
      if (run (cp, log_fd, BUILD_TIMEOUT_S) != 0)
        return sbx_err (err, SBX_E_SYSTEM, "recipe: copying the cached build failed");
    }
  else
    {
      char inc[RECIPE_MAX + 16], mir[600];
      char *argv[9];
      int i = 0;
      snprintf (inc, sizeof inc, "--include=%s", include);
      snprintf (mir, sizeof mir, "%s", mirror);
      argv[i++] = (char *) (uintptr_t) "/usr/sbin/debootstrap";
      argv[i++] = (char *) (uintptr_t) "--variant=minbase";
      argv[i++] = (char *) (uintptr_t) "--foreign";
      if (include[0])
        argv[i++] = inc;
      argv[i++] = release;
      argv[i++] = target;
      argv[i++] = mir;
      argv[i] = NULL;
      sbx_info ("templates: debootstrap %s (%s) from %s", release, include[0] ? include : "-",
                mirror);
      dprintf (log_fd, "sbx: debootstrap %s (%s) from %s\n", release,
               include[0] ? include : "no extra packages", mirror);
      rc = run (argv, log_fd, BUILD_TIMEOUT_S);
      if (rc != 0)
        {
          log_reason (log_fd, reason, sizeof reason);
          return sbx_err (err, rc == 1 ? SBX_E_INVALID : SBX_E_SYSTEM, "%s", reason);
        }
      /* the tree's owners to the build sandbox's ids: root's files are
         root's in there, and nothing it writes is the host root's */
      fd = openat (layers, key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 || shift_owners (fd, 0) < 0
          || fchownat (layers, key, SBX_TMPL_BUILD_ID_BASE, SBX_TMPL_BUILD_ID_BASE,
                       AT_SYMLINK_NOFOLLOW)
                 < 0)
        {
          int e = errno;
          if (fd >= 0)
            close (fd);
          return sbx_err_sys (err, e, "recipe: the unpacked tree's owners");
        }
      close (fd);
      if (sbx_tmpl_run_second_stage (target, mirror, log_fd, err) < 0)
        return -1;
      if (fchownat (layers, key, 0, 0, AT_SYMLINK_NOFOLLOW) < 0)
        return sbx_err_sys (err, errno, "recipe: the built tree");
    }
  fd = openat (layers, key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys (err, errno, "recipe: the built tree");
  dprintf (log_fd, "sbx: making the layer (root's files, no setuid, no device nodes)\n");
  sanitize (fd, 0, &bytes);
  close (fd);
  if (fchmodat (layers, key, 0755, 0) < 0)
    return sbx_err_sys (err, errno, "recipe: the built tree");
  if (cache_dir[0] && stat (cached, &st) < 0)
    {
      /* cp into a temporary name, then rename: a half copy is never used */
      char tmp[1300];
      char *const cp[] = {(char *) (uintptr_t) "/bin/cp", (char *) (uintptr_t) "-a",
                          (char *) (uintptr_t) "--reflink=auto", target, tmp, NULL};
      snprintf (tmp, sizeof tmp, "%s/.tmp-%s-%d", cache_dir, key, (int) getpid ());
      dprintf (log_fd, "sbx: keeping a copy in the recipe cache\n");
      mkdir (cache_dir, 0700);
      if (run (cp, log_fd, BUILD_TIMEOUT_S) != 0 || rename (tmp, cached) < 0)
        sbx_warn ("templates: could not cache recipe %.12s in `%s`", key, cache_dir);
    }
commands:
  if (ncmds > 0)
    {
      char cached_run[1200];
      snprintf (cached_run, sizeof cached_run, "%s/%s", cache_dir, run_key);
      if ((fd = openat (store_layers, run_key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
          >= 0)
        {
          dprintf (log_fd, "sbx: the commands' layer %.12s is stored already\n", run_key);
          run_bytes = tree_bytes (fd);
          close (fd);
        }
      else if (cache_dir[0] && stat (cached_run, &st) == 0 && S_ISDIR (st.st_mode)
               && st.st_uid == 0)
        {
          char run_target[1300];
          char *const cp[] = {(char *) (uintptr_t) "/bin/cp", (char *) (uintptr_t) "-a",
                              (char *) (uintptr_t) "--reflink=auto", cached_run, run_target, NULL};
          snprintf (run_target, sizeof run_target, "%s/layers/%s", build_path, run_key);
          dprintf (log_fd, "sbx: copying the cached commands' layer %.12s\n", run_key);
          if (run (cp, log_fd, BUILD_TIMEOUT_S) != 0)
            return sbx_err (err, SBX_E_SYSTEM, "recipe: copying the cached build failed");
          fd = openat (layers, run_key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          run_bytes = fd >= 0 ? tree_bytes (fd) : 0;
          if (fd >= 0)
            close (fd);
        }
      else
        {
          if (stored)
            snprintf (lower, sizeof lower, "/proc/self/fd/%d/%s", store_layers, key);
          else
            snprintf (lower, sizeof lower, "%s", target);
          memcpy (run_text, text, sizeof run_text);
          for (char *c = run_text; (c = strchr (c, '\n')) != NULL; c++)
            *c = '\0';
          /* cmds point into text: terminate them at their newlines */
          for (int i = 0; i < ncmds; i++)
            cmds[i] = run_text + (cmds[i] - text);
          if (sbx_tmpl_run_commands (build, build_path, lower, run_key, cmds, ncmds, mirror, log_fd, err) < 0)
            return -1;
          fd = openat (layers, run_key, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          run_bytes = fd >= 0 ? tree_bytes (fd) : 0;
          if (fd >= 0)
            close (fd);
          if (cache_dir[0] && stat (cached_run, &st) < 0)
            {
              char tmp[1300], src[1300];
              char *const cp[] = {(char *) (uintptr_t) "/bin/cp", (char *) (uintptr_t) "-a",
                                  (char *) (uintptr_t) "--reflink=auto", src, tmp, NULL};
              snprintf (src, sizeof src, "%s/layers/%s", build_path, run_key);
              snprintf (tmp, sizeof tmp, "%s/.tmp-%s-%d", cache_dir, run_key, (int) getpid ());
              mkdir (cache_dir, 0700);
              if (run (cp, log_fd, BUILD_TIMEOUT_S) != 0 || rename (tmp, cached_run) < 0)
                sbx_warn ("templates: could not cache recipe %.12s in `%s`", run_key, cache_dir);
            }
        }
    }
  snprintf (result, sizeof result, "layer %s %llu\n", key, (unsigned long long) bytes);
  if (ncmds > 0)
    snprintf (result + strlen (result), sizeof result - strlen (result), "layer %s %llu\n",
              run_key, (unsigned long long) run_bytes);
  fd = openat (build, "result", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write (fd, result, strlen (result)) != (ssize_t) strlen (result))
    {
      if (fd >= 0)
        close (fd);
      return sbx_err_sys (err, errno, "recipe: result");
    }
  close (fd);
  fd = openat (build, "meta.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write (fd, meta, strlen (meta)) != (ssize_t) strlen (meta))
    {
      if (fd >= 0)
        close (fd);
      return sbx_err_sys (err, errno, "recipe: meta");
    }
  close (fd);
  return 0;
}
