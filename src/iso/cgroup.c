/* sbx: cgroup v1 and v2 management (see cgroup.h). */
#include "iso/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

#define CPU_PERIOD_USEC 100000

static const char *const v1_names[SBX_CG_NCTRL] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

static int
write_at (int dir, const char *file, const char *value, sbx_error_t **err)
{
  cleanup_close int fd = openat (dir, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  size_t len = strlen (value);
  ssize_t w;

  if (fd < 0)
    return sbx_err_sys (err, errno, "open cgroup file `%s`", file);
  w = write (fd, value, len);
  if (w < 0)
    return sbx_err_sys (err, errno, "write `%s` to cgroup file `%s`", value, file);
  if ((size_t) w != len)
    return sbx_err (err, SBX_E_SYSTEM, "short write to cgroup file `%s`", file);
  return 0;
}

static int
read_at (int dir, const char *file, char *buf, size_t cap)
{
  cleanup_close int fd = openat (dir, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  size_t got = 0;

  if (fd < 0)
    return -1;
  while (got + 1 < cap)
    {
      ssize_t r = read (fd, buf + got, cap - 1 - got);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return -1;
        }
      if (r == 0)
        break;
      got += (size_t) r;
    }
  buf[got] = '\0';
  return 0;
}

/* The value of `key` in "key value" lines (buf is cut up). */
static uint64_t
parse_keyed (char *buf, const char *key)
{
  char *line, *save = NULL;
  size_t klen = strlen (key);

  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    if (strncmp (line, key, klen) == 0 && line[klen] == ' ')
      return strtoull (line + klen + 1, NULL, 10);
  return 0;
}

/* "key value" lines, as in memory.events, cpu.stat and memory.oom_control. */
static uint64_t
read_keyed_at (int dir, const char *file, const char *key)
{
  char buf[4096];

  if (dir < 0 || read_at (dir, file, buf, sizeof buf) < 0)
    return 0;
  return parse_keyed (buf, key);
}

/* One value for the metrics: a plain number, or `key`'s in a keyed file.
   A file this kernel lacks reads as 0, but one that cannot be read (the
   daemon is out of fds) is an error: metrics of all zeros would lie. */
static int
stat_at (int dir, const char *file, const char *key, uint64_t *out, sbx_error_t **err)
{
  char buf[4096];

  *out = 0;
  if (dir < 0)
    return 0;
  if (read_at (dir, file, buf, sizeof buf) < 0)
    return errno == ENOENT ? 0 : sbx_err_sys (err, errno, "read cgroup file `%s`", file);
  *out = key ? parse_keyed (buf, key) : strtoull (buf, NULL, 10);
  return 0;
}

static int
same_dir (int a, int b)
{
  struct stat sa, sb;

  return a >= 0 && b >= 0 && fstat (a, &sa) == 0 && fstat (b, &sb) == 0 && sa.st_dev == sb.st_dev
         && sa.st_ino == sb.st_ino;
}

/* Controllers whose directory is a duplicate of an earlier one (cpu and
   cpuacct co-mounted) are skipped for mkdir/rmdir/attach. Worked out once
   at start: these checks sit on every create and destroy. */
static int
is_duplicate (const struct sbx_cgroup_root *root, int c)
{
  return root->duplicate[c];
}

static void
find_duplicates (struct sbx_cgroup_root *root)
{
  int c, i;

  for (c = 0; c < SBX_CG_NCTRL; c++)
    {
      root->duplicate[c] = 0;
      for (i = 0; i < c; i++)
        if (root->parent[i] >= 0 && same_dir (root->parent[i], root->parent[c]))
          root->duplicate[c] = 1;
    }
}

/* mkdir -p of a relative path under dirfd, returning an fd of the last. */
static int
open_or_make_path (int base, const char *path, int enable_v2, sbx_error_t **err)
{
  cleanup_free char *copy = strdup (path);
  char *part, *save = NULL;
  int dir;

  if (copy == NULL)
    sbx_oom ();
  dir = fcntl (base, F_DUPFD_CLOEXEC, 3);
  if (dir < 0)
    return sbx_err_sys (err, errno, "dup");
  for (part = strtok_r (copy, "/", &save); part; part = strtok_r (NULL, "/", &save))
    {
      int next;
      if (strcmp (part, ".") == 0 || strcmp (part, "..") == 0)
        {
          close (dir);
          return sbx_err (err, SBX_E_INVALID, "cgroup parent `%s` must not contain . or ..", path);
        }
      if (enable_v2)
        {
          /* v2 delegates controllers level by level. "cpu" is optional:
             some hosts do not offer it to delegated subtrees. */
          sbx_error_t *ignored = NULL;
          if (write_at (dir, "cgroup.subtree_control", "+memory +pids", err) < 0)
            {
              close (dir);
              return sbx_err_wrap (err, "enable memory and pids controllers");
            }
          write_at (dir, "cgroup.subtree_control", "+cpu", &ignored);
          sbx_error_free (ignored);
        }
      if (mkdirat (dir, part, 0755) < 0 && errno != EEXIST)
        {
          int e = errno;
          close (dir);
          return sbx_err_sys (err, e, "mkdir cgroup `%s`", path);
        }
      next = openat (dir, part, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      close (dir);
      if (next < 0)
        return sbx_err_sys (err, errno, "open cgroup `%s`", path);
      dir = next;
    }
  return dir;
}

int
sbx_cgroup_root_open (struct sbx_cgroup_root *root, const char *mount_root,
                      const char *parent_name, enum sbx_cgroup_mode force_mode, sbx_error_t **err)
{
  cleanup_close int mnt = -1;
  struct statfs sfs;
  int c;

  memset (root, 0, sizeof *root);
  for (c = 0; c < SBX_CG_NCTRL; c++)
    root->parent[c] = root->hierarchy[c] = -1;
  mnt = open (mount_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mnt < 0)
    return sbx_err_sys (err, errno, "open `%s`", mount_root);
  if (force_mode)
    root->mode = force_mode;
  else
    {
      if (fstatfs (mnt, &sfs) < 0)
        return sbx_err_sys (err, errno, "statfs `%s`", mount_root);
      root->mode = sfs.f_type == CGROUP2_SUPER_MAGIC ? SBX_CGROUP_V2 : SBX_CGROUP_V1;
    }

  if (root->mode == SBX_CGROUP_V2)
    {
      snprintf (root->parent_name, sizeof root->parent_name, "%s", parent_name);
      root->hierarchy[0] = fcntl (mnt, F_DUPFD_CLOEXEC, 3);
      root->parent[0] = open_or_make_path (mnt, parent_name, 1, err);
      if (root->parent[0] < 0)
        return -1;
      /* Children of PARENT get the controllers too. */
      if (write_at (root->parent[0], "cgroup.subtree_control", "+memory +pids", err) < 0)
        {
          sbx_cgroup_root_close (root);
          return sbx_err_wrap (err, "enable controllers in `%s`", parent_name);
        }
      {
        sbx_error_t *ignored = NULL;
        write_at (root->parent[0], "cgroup.subtree_control", "+cpu", &ignored);
        sbx_error_free (ignored);
      }
      return 0;
    }

  for (c = 0; c < SBX_CG_NCTRL; c++)
    {
      cleanup_close int hier = openat (mnt, v1_names[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (hier < 0)
        {
          if (c == SBX_CG_CPUACCT || c == SBX_CG_FREEZER)
            continue;
          sbx_err_sys (err, errno, "cgroup v1 controller `%s` under `%s`", v1_names[c], mount_root);
          sbx_cgroup_root_close (root);
          return -1;
        }
      if (!force_mode && (fstatfs (hier, &sfs) < 0 || sfs.f_type != CGROUP_SUPER_MAGIC))
        {
          if (c == SBX_CG_CPUACCT || c == SBX_CG_FREEZER)
            continue;
          sbx_err (err, SBX_E_SYSTEM, "`%s/%s` is not a cgroup v1 hierarchy", mount_root,
                   v1_names[c]);
          sbx_cgroup_root_close (root);
          return -1;
        }
      snprintf (root->parent_name, sizeof root->parent_name, "%s", parent_name);
      root->hierarchy[c] = fcntl (hier, F_DUPFD_CLOEXEC, 3);
      root->parent[c] = open_or_make_path (hier, parent_name, 0, err);
      if (root->parent[c] < 0)
        {
          sbx_cgroup_root_close (root);
          return -1;
        }
    }
  root->v1_memsw
      = faccessat (root->parent[SBX_CG_MEMORY], "memory.memsw.limit_in_bytes", F_OK, 0) == 0;
  find_duplicates (root);
  return 0;
}

void
sbx_cgroup_root_close (struct sbx_cgroup_root *root)
{
  int c;

  for (c = 0; c < SBX_CG_NCTRL; c++)
    {
      if (root->parent[c] >= 0)
        close (root->parent[c]);
      if (root->hierarchy[c] >= 0)
        close (root->hierarchy[c]);
      root->parent[c] = root->hierarchy[c] = -1;
    }
}

void
sbx_cgroup_root_remove (struct sbx_cgroup_root *root)
{
  int c;

  for (c = 0; c < SBX_CG_NCTRL; c++)
    if (root->hierarchy[c] >= 0 && root->parent_name[0] && !root->duplicate[c])
      unlinkat (root->hierarchy[c], root->parent_name, AT_REMOVEDIR);
  sbx_cgroup_root_close (root);
}

static int
ncontrollers (const struct sbx_cgroup_root *root)
{
  return root->mode == SBX_CGROUP_V2 ? 1 : SBX_CG_NCTRL;
}

static int
valid_name (const char *name)
{
  size_t n = strlen (name), i;

  if (n == 0 || n >= sizeof ((struct sbx_cgroup *) 0)->name)
    return 0;
  for (i = 0; i < n; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')
          || name[i] == '-' || name[i] == '_'))
      return 0;
  return 1;
}

static int remove_dirs (const struct sbx_cgroup_root *root, struct sbx_cgroup *cg, int upto,
                        sbx_error_t **err);

static int
open_dirs (const struct sbx_cgroup_root *root, const char *name, struct sbx_cgroup *out,
           int create, sbx_error_t **err)
{
  int c;

  memset (out, 0, sizeof *out);
  for (c = 0; c < SBX_CG_NCTRL; c++)
    out->dir[c] = -1;
  if (!valid_name (name))
    return sbx_err (err, SBX_E_INVALID, "bad cgroup name `%s`", name);
  snprintf (out->name, sizeof out->name, "%s", name);
  for (c = 0; c < ncontrollers (root); c++)
    {
      if (root->parent[c] < 0)
        continue;
      if (create && !is_duplicate (root, c) && mkdirat (root->parent[c], name, 0755) < 0)
        {
          int e = errno;
          /* Only what we made: on EEXIST the directory is someone else's
             (another sandbox, a leftover), and so may be the later ones. */
          if (remove_dirs (root, out, c, NULL) == 0)
            out->name[0] = '\0';
          return sbx_err_sys (err, e, "mkdir cgroup `%s`", name);
        }
      out->dir[c] = openat (root->parent[c], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (out->dir[c] < 0)
        {
          int e = errno;
          if (create)
            {
              if (remove_dirs (root, out, c + 1, NULL) == 0)
                out->name[0] = '\0';
            }
          else
            sbx_cgroup_close (out);
          return sbx_err_sys (err, e, "open cgroup `%s`", name);
        }
    }
  return 0;
}

int
sbx_cgroup_create (const struct sbx_cgroup_root *root, const char *name,
                   const struct sbx_cgroup_limits *limits, struct sbx_cgroup *out,
                   sbx_error_t **err)
{
  if (open_dirs (root, name, out, 1, err) < 0)
    return -1;
  if (sbx_cgroup_set_limits (root, out, limits, err) < 0)
    {
      if (sbx_cgroup_destroy (root, out, NULL) == 0)
        out->name[0] = '\0';
      return -1;
    }
  return 0;
}

int
sbx_cgroup_remove (const struct sbx_cgroup_root *root, const char *name, sbx_error_t **err)
{
  struct sbx_cgroup cg;
  int c;

  for (c = 0; c < SBX_CG_NCTRL; c++)
    cg.dir[c] = -1;
  snprintf (cg.name, sizeof cg.name, "%s", name);
  return remove_dirs (root, &cg, ncontrollers (root), err);
}

int
sbx_cgroup_open (const struct sbx_cgroup_root *root, const char *name, struct sbx_cgroup *out,
                 sbx_error_t **err)
{
  return open_dirs (root, name, out, 0, err);
}

static int
set_memory_v1 (const struct sbx_cgroup_root *root, int dir, uint64_t bytes, sbx_error_t **err)
{
  char v[32];

  snprintf (v, sizeof v, "%" PRIu64, bytes);
  if (!root->v1_memsw)
    return write_at (dir, "memory.limit_in_bytes", v, err);
  /* memsw (memory + swap) may never be below the memory limit: when
     growing, raise memsw first; when shrinking, lower memory first. Equal
     values mean no swap at all. */
  if (write_at (dir, "memory.limit_in_bytes", v, NULL) == 0)
    return write_at (dir, "memory.memsw.limit_in_bytes", v, err);
  if (write_at (dir, "memory.memsw.limit_in_bytes", v, err) < 0)
    return -1;
  return write_at (dir, "memory.limit_in_bytes", v, err);
}

int
sbx_cgroup_set_limits (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg,
                       const struct sbx_cgroup_limits *limits, sbx_error_t **err)
{
  char v[64];
  uint64_t quota = (uint64_t) limits->cpu_milli * CPU_PERIOD_USEC / 1000;

  if (quota < 1000)
    quota = 1000; /* the kernel's minimum quota is 1 ms */
  if (root->mode == SBX_CGROUP_V2)
    {
      int dir = cg->dir[0];
      snprintf (v, sizeof v, "%" PRIu64, limits->memory_bytes);
      if (write_at (dir, "memory.max", v, err) < 0)
        return -1;
      /* No swap: a sandbox over its limit is killed, not paged out. */
      if (faccessat (dir, "memory.swap.max", F_OK, 0) == 0
          && write_at (dir, "memory.swap.max", "0", err) < 0)
        return -1;
      snprintf (v, sizeof v, "%" PRIu32, limits->pids);
      if (write_at (dir, "pids.max", v, err) < 0)
        return -1;
      if (faccessat (dir, "cpu.max", F_OK, 0) == 0)
        {
          snprintf (v, sizeof v, "%" PRIu64 " %d", quota, CPU_PERIOD_USEC);
          if (write_at (dir, "cpu.max", v, err) < 0)
            return -1;
        }
      return 0;
    }
  if (set_memory_v1 (root, cg->dir[SBX_CG_MEMORY], limits->memory_bytes, err) < 0)
    return -1;
  {
    sbx_error_t *ignored = NULL;
    write_at (cg->dir[SBX_CG_MEMORY], "memory.swappiness", "0", &ignored);
    sbx_error_free (ignored);
  }
  snprintf (v, sizeof v, "%" PRIu32, limits->pids);
  if (write_at (cg->dir[SBX_CG_PIDS], "pids.max", v, err) < 0)
    return -1;
  snprintf (v, sizeof v, "%d", CPU_PERIOD_USEC);
  if (write_at (cg->dir[SBX_CG_CPU], "cpu.cfs_period_us", v, err) < 0)
    return -1;
  snprintf (v, sizeof v, "%" PRIu64, quota);
  return write_at (cg->dir[SBX_CG_CPU], "cpu.cfs_quota_us", v, err);
}

int
sbx_cgroup_attach (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, pid_t pid,
                   sbx_error_t **err)
{
  char v[32];
  int c;

  snprintf (v, sizeof v, "%d", (int) pid);
  for (c = 0; c < ncontrollers (root); c++)
    if (cg->dir[c] >= 0 && !is_duplicate (root, c)
        && write_at (cg->dir[c], "cgroup.procs", v, err) < 0)
      return -1;
  return 0;
}

int
sbx_cgroup_clone_fd (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg)
{
  return root->mode == SBX_CGROUP_V2 ? cg->dir[0] : -1;
}

static void
sleep_ms (long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* Kill every pid listed in cgroup.procs; returns how many were listed. */
static int
kill_listed (int dir)
{
  char buf[65536], *p, *save = NULL;
  int n = 0;

  if (read_at (dir, "cgroup.procs", buf, sizeof buf) < 0)
    return 0;
  for (p = strtok_r (buf, "\n", &save); p; p = strtok_r (NULL, "\n", &save))
    {
      long pid = strtol (p, NULL, 10);
      if (pid > 0)
        {
          kill ((pid_t) pid, SIGKILL);
          n++;
        }
    }
  return n;
}

void
sbx_cgroup_renice (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, int prio)
{
  int dir = root->mode == SBX_CGROUP_V2 ? cg->dir[0] : cg->dir[SBX_CG_PIDS];
  char buf[65536], *p, *save = NULL;

  /* Threads: on Linux a nice value is a thread's own. */
  if (dir < 0
      || read_at (dir, root->mode == SBX_CGROUP_V2 ? "cgroup.threads" : "tasks", buf, sizeof buf)
             < 0)
    return;
  for (p = strtok_r (buf, "\n", &save); p; p = strtok_r (NULL, "\n", &save))
    {
      long tid = strtol (p, NULL, 10);
      if (tid > 0)
        setpriority (PRIO_PROCESS, (id_t) tid, prio);
    }
}

int
sbx_cgroup_has_pid (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, pid_t pid)
{
  int dir = root->mode == SBX_CGROUP_V2 ? cg->dir[0] : cg->dir[SBX_CG_PIDS];
  char buf[65536], *p, *save = NULL;

  if (dir < 0 || read_at (dir, "cgroup.procs", buf, sizeof buf) < 0)
    return 0;
  for (p = strtok_r (buf, "\n", &save); p; p = strtok_r (NULL, "\n", &save))
    if (strtol (p, NULL, 10) == (long) pid)
      return 1;
  return 0;
}

int
sbx_cgroup_kill (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg,
                 sbx_error_t **err)
{
  int dir = root->mode == SBX_CGROUP_V2 ? cg->dir[0] : cg->dir[SBX_CG_PIDS];
  int freezer = root->mode == SBX_CGROUP_V1 ? cg->dir[SBX_CG_FREEZER] : -1;
  int round;

  if (dir < 0)
    return 0;
  if (root->mode == SBX_CGROUP_V2 && write_at (dir, "cgroup.kill", "1", NULL) == 0)
    {
      for (round = 0; round < 200; round++)
        {
          if (read_keyed_at (dir, "cgroup.events", "populated") == 0)
            return 0;
          sleep_ms (5);
        }
      return sbx_err (err, SBX_E_SYSTEM, "cgroup `%s` still populated after cgroup.kill", cg->name);
    }
  /* v1 (or v2 before 5.14). Usually the cgroup is already empty (killing
     init ended its pid namespace), and freezing costs milliseconds, so
     look first. Otherwise freeze so nothing forks while we read the list,
     kill what is listed, and always thaw (a frozen task cannot die). */
  if (kill_listed (dir) == 0)
    return 0;
  for (round = 0; round < 200; round++)
    {
      int n;
      if (freezer >= 0)
        write_at (freezer, "freezer.state", "FROZEN", NULL);
      n = kill_listed (dir);
      if (freezer >= 0)
        write_at (freezer, "freezer.state", "THAWED", NULL);
      if (n == 0)
        return 0;
      sleep_ms (5);
    }
  return sbx_err (err, SBX_E_SYSTEM, "cgroup `%s` still has processes after SIGKILL", cg->name);
}

/* Pause and resume (docs/api.md "Pause and resume"). The kernel freezes
   asynchronously: v1 reports FREEZING until every task has stopped (one
   in an uninterruptible sleep holds it), v2 sets "frozen 1" in
   cgroup.events. Wait for it, bounded, so that "paused" means no task of
   the sandbox runs any more; a freeze that does not complete is undone. */
#define FREEZE_WAIT_ROUNDS 400 /* x 5 ms */

static int
freeze_done (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, int frozen)
{
  char buf[64];

  if (root->mode == SBX_CGROUP_V2)
    return read_keyed_at (cg->dir[0], "cgroup.events", "frozen") == (uint64_t) (frozen ? 1 : 0);
  if (read_at (cg->dir[SBX_CG_FREEZER], "freezer.state", buf, sizeof buf) < 0)
    return 0;
  return strncmp (buf, frozen ? "FROZEN" : "THAWED", 6) == 0;
}

int
sbx_cgroup_freeze (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, int frozen,
                   sbx_error_t **err)
{
  int dir = root->mode == SBX_CGROUP_V2 ? cg->dir[0] : cg->dir[SBX_CG_FREEZER];
  const char *file = root->mode == SBX_CGROUP_V2 ? "cgroup.freeze" : "freezer.state";
  const char *value = root->mode == SBX_CGROUP_V2 ? (frozen ? "1" : "0")
                                                  : (frozen ? "FROZEN" : "THAWED");
  int round;

  if (dir < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE,
                    "this host has no cgroup freezer (v1: mount the freezer controller)");
  if (write_at (dir, file, value, err) < 0)
    return -1;
  for (round = 0; round < FREEZE_WAIT_ROUNDS; round++)
    {
      if (freeze_done (root, cg, frozen))
        return 0;
      sleep_ms (round < 20 ? 1 : 5);
    }
  if (frozen)
    write_at (dir, file, root->mode == SBX_CGROUP_V2 ? "0" : "THAWED", NULL);
  return sbx_err (err, SBX_E_SYSTEM, "cgroup `%s` did not %s in time", cg->name,
                  frozen ? "freeze" : "thaw");
}

int
sbx_cgroup_is_frozen (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg)
{
  int dir = root->mode == SBX_CGROUP_V2 ? cg->dir[0] : cg->dir[SBX_CG_FREEZER];

  return dir >= 0 && freeze_done (root, cg, 1);
}

/* Close, then rmdir the directories of the controllers below `upto`. */
static int
remove_dirs (const struct sbx_cgroup_root *root, struct sbx_cgroup *cg, int upto,
             sbx_error_t **err)
{
  int c, rc = 0;

  sbx_cgroup_close (cg);
  for (c = 0; c < upto; c++)
    {
      int round, e = 0, gone = 0;
      if (root->parent[c] < 0 || is_duplicate (root, c) || cg->name[0] == '\0')
        continue;
      /* The kernel releases a cgroup shortly after its last task is gone. */
      for (round = 0; round < 100 && !gone; round++)
        {
          if (unlinkat (root->parent[c], cg->name, AT_REMOVEDIR) == 0)
            gone = 1;
          else if ((e = errno) == ENOENT)
            gone = 1;
          else if (e != EBUSY)
            break;
          else
            sleep_ms (10);
        }
      if (!gone)
        {
          rc = sbx_err_sys (err, e, "rmdir cgroup `%s`", cg->name);
          err = NULL; /* keep the first error */
        }
    }
  return rc;
}

int
sbx_cgroup_destroy (const struct sbx_cgroup_root *root, struct sbx_cgroup *cg, sbx_error_t **err)
{
  return remove_dirs (root, cg, ncontrollers (root), err);
}

void
sbx_cgroup_close (struct sbx_cgroup *cg)
{
  int c;

  for (c = 0; c < SBX_CG_NCTRL; c++)
    if (cg->dir[c] >= 0)
      {
        close (cg->dir[c]);
        cg->dir[c] = -1;
      }
}

int
sbx_cgroup_stats (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg,
                  struct sbx_cgroup_stats *out, sbx_error_t **err)
{
  memset (out, 0, sizeof *out);
  if (root->mode == SBX_CGROUP_V2)
    {
      int dir = cg->dir[0];
      if (stat_at (dir, "cpu.stat", "usage_usec", &out->cpu_usec, err) < 0
          || stat_at (dir, "memory.current", NULL, &out->memory_bytes, err) < 0
          || stat_at (dir, "memory.peak", NULL, &out->memory_peak_bytes, err) < 0
          || stat_at (dir, "memory.events", "oom_kill", &out->oom_kills, err) < 0
          || stat_at (dir, "pids.current", NULL, &out->pids, err) < 0)
        return -1;
      out->limit_hits = sbx_cgroup_limit_hits (root, cg);
      return 0;
    }
  {
    int acct = cg->dir[SBX_CG_CPUACCT] >= 0 ? cg->dir[SBX_CG_CPUACCT] : cg->dir[SBX_CG_CPU];
    if (stat_at (acct, "cpuacct.usage", NULL, &out->cpu_usec, err) < 0)
      return -1;
    out->cpu_usec /= 1000;
  }
  if (stat_at (cg->dir[SBX_CG_MEMORY], "memory.usage_in_bytes", NULL, &out->memory_bytes, err) < 0
      || stat_at (cg->dir[SBX_CG_MEMORY], "memory.max_usage_in_bytes", NULL,
                  &out->memory_peak_bytes, err)
             < 0
      || stat_at (cg->dir[SBX_CG_MEMORY], "memory.oom_control", "oom_kill", &out->oom_kills, err)
             < 0
      || stat_at (cg->dir[SBX_CG_PIDS], "pids.current", NULL, &out->pids, err) < 0)
    return -1;
  return 0;
}

uint64_t
sbx_cgroup_oom_kills (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg)
{
  if (root->mode == SBX_CGROUP_V2)
    return read_keyed_at (cg->dir[0], "memory.events", "oom_kill");
  return read_keyed_at (cg->dir[SBX_CG_MEMORY], "memory.oom_control", "oom_kill");
}

uint64_t
sbx_cgroup_limit_hits (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg)
{
  if (root->mode == SBX_CGROUP_V2)
    return read_keyed_at (cg->dir[0], "memory.events", "max");
  return 0;
}


int
sbx_cgroup_list (const struct sbx_cgroup_root *root, void (*fn) (const char *name, void *arg),
                 void *arg, sbx_error_t **err)
{
  typedef char name_t[sizeof ((struct sbx_cgroup *) 0)->name];
  name_t *names = NULL;
  size_t n = 0, cap = 0, i;
  int c;

  /* Every hierarchy, not just the first: a daemon that died half way
     through the mkdirs or rmdirs of a sandbox left its directory in some
     of them only. Each name once. */
  for (c = 0; c < ncontrollers (root); c++)
    {
      struct dirent *de;
      DIR *d;
      int fd;

      if (root->parent[c] < 0 || is_duplicate (root, c))
        continue;
      fd = openat (root->parent[c], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0 || (d = fdopendir (fd)) == NULL)
        {
          int e = errno;
          if (fd >= 0)
            close (fd);
          free (names);
          return sbx_err_sys (err, e, "open cgroup parent");
        }
      while ((de = readdir (d)) != NULL)
        {
          if (de->d_type != DT_DIR || de->d_name[0] == '.' || !valid_name (de->d_name))
            continue;
          for (i = 0; i < n && strcmp (names[i], de->d_name) != 0; i++)
            ;
          if (i < n)
            continue;
          if (n == cap)
            {
              cap = cap ? cap * 2 : 64;
              names = realloc (names, cap * sizeof *names);
              if (names == NULL)
                sbx_oom ();
            }
          /* valid_name: shorter than a name_t */
          memcpy (names[n++], de->d_name, strlen (de->d_name) + 1);
        }
      closedir (d);
    }
  for (i = 0; i < n; i++)
    fn (names[i], arg);
  free (names);
  return 0;
}
