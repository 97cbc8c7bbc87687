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
  /* O_NONBLOCK: a cgroup file never blocks, anything planted that
     would (a FIFO) fails the read instead of stalling the daemon. */
  cleanup_close int fd = openat (dir, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
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

/* What to do about a cgroup that refuses us, by errno. */
static const char *
refusal_hint (int e)
{
  switch (e)
    {
    case EBUSY:
      return "it holds processes, and cgroup v2 lets only a cgroup without processes give"
             " controllers to children: run sbx in a cgroup of its own (systemd: the shipped"
             " units, docs/architecture.md), or give --cgroup-parent /PATH";
    case EROFS:
    case EACCES:
    case EPERM:
      return "the cgroup tree is read-only or not ours: systemd delegates a subtree with"
             " Delegate=yes; a container needs a writable cgroup mount";
    case ENOENT:
      return "the controller is not offered here: enable it in the parent's"
             " cgroup.subtree_control, or delegate it (systemd: Delegate=yes)";
    default:
      return "see docs/architecture.md, Cgroups";
    }
}

/* v2 delegates controllers level by level: children of dir (at `where`,
   for messages) get memory and pids; "cpu" is optional, some hosts do not
   offer it to delegated subtrees. */
static int
enable_controllers (int dir, const char *where, sbx_error_t **err)
{
  sbx_error_t *ignored = NULL;
  char have[512];

  char given[512];

  if (read_at (dir, "cgroup.controllers", have, sizeof have) == 0
      && (strstr (have, "memory") == NULL || strstr (have, "pids") == NULL))
    return sbx_err (err, SBX_E_SYSTEM,
                    "cgroup `%s` offers no memory or pids controller (it has: %.*s): %s",
                    where, (int) strcspn (have, "\n"), have, refusal_hint (ENOENT));
  /* Given already (by systemd, the holder, our last start): nothing to
     write, which a cgroup that still holds a process would refuse. */
  if (read_at (dir, "cgroup.subtree_control", given, sizeof given) == 0
      && strstr (given, "memory") && strstr (given, "pids")
      && (strstr (given, "cpu") || strstr (have, "cpu") == NULL))
    return 0;
  if (write_at (dir, "cgroup.subtree_control", "+memory +pids", &ignored) < 0)
    {
      int e = ignored ? ignored->sys_errno : 0;
      sbx_error_free (ignored);
      return sbx_err_errno (err, SBX_E_SYSTEM, e,
                            "cannot enable the memory and pids controllers in cgroup `%s` (%s):"
                            " %s",
                            where, strerror (e), refusal_hint (e));
    }
  write_at (dir, "cgroup.subtree_control", "+cpu", &ignored);
  sbx_error_free (ignored);
  return 0;
}

/* mkdir -p of a relative path under dirfd (which is at `base_path`, for
   messages), returning an fd of the last. */
static int
open_or_make_path (int base, const char *base_path, const char *path, int enable_v2,
                   int *first_made, sbx_error_t **err)
{
  cleanup_free char *copy = strdup (path);
  char *part, *save = NULL, where[600];
  int dir, depth = 0;

  if (copy == NULL)
    sbx_oom ();
  snprintf (where, sizeof where, "/%s", base_path);
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
      if (enable_v2 && enable_controllers (dir, where, err) < 0)
        {
          close (dir);
          return -1;
        }
      if (mkdirat (dir, part, 0755) == 0)
        {
          if (*first_made < 0)
            *first_made = depth;
        }
      else if (errno != EEXIST)
        {
          int e = errno;
          close (dir);
          return sbx_err_sys (err, e, "mkdir cgroup `%s`", path);
        }
      depth++;
      next = openat (dir, part, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      close (dir);
      if (next < 0)
        return sbx_err_sys (err, errno, "open cgroup `%s`", path);
      dir = next;
      snprintf (where + strlen (where), sizeof where - strlen (where), "%s%s",
                strcmp (where, "/") == 0 ? "" : "/", part);
    }
  return dir;
}

static void remove_what_was_made (struct sbx_cgroup_root *root);

int
sbx_cgroup_root_open (struct sbx_cgroup_root *root, const char *mount_root,
                      const char *parent_name, enum sbx_cgroup_mode force_mode, sbx_error_t **err)
{
  return sbx_cgroup_root_open_at (root, mount_root, "", parent_name, force_mode, err);
}

int
sbx_cgroup_root_open_at (struct sbx_cgroup_root *root, const char *mount_root, const char *base,
                         const char *parent_name, enum sbx_cgroup_mode force_mode,
                         sbx_error_t **err)
{
  cleanup_close int mnt = -1;
  struct statfs sfs;
  int c;

  memset (root, 0, sizeof *root);
  for (c = 0; c < SBX_CG_NCTRL; c++)
    root->parent[c] = root->hierarchy[c] = root->first_made[c] = -1;
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
      /* From the base down only: above it the tree is another manager's
         (systemd's slices), and ours is what it delegated. */
      while (*base == '/')
        base++;
      snprintf (root->base_path, sizeof root->base_path, "%s", base);
      snprintf (root->parent_name, sizeof root->parent_name, "%s", parent_name);
      root->hierarchy[0] = base[0] ? openat (mnt, base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                   : fcntl (mnt, F_DUPFD_CLOEXEC, 3);
      if (root->hierarchy[0] < 0)
        return sbx_err_sys (err, errno, "open cgroup `/%s`", base);
      root->parent[0] = open_or_make_path (root->hierarchy[0], base, parent_name, 1,
                                           &root->first_made[0], err);
      /* Children of PARENT get the controllers too. */
      if (root->parent[0] < 0 || enable_controllers (root->parent[0], parent_name, err) < 0)
        {
          remove_what_was_made (root);
          return -1;
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
      root->parent[c] = open_or_make_path (hier, v1_names[c], parent_name, 0, &root->first_made[c],
                                           err);
      if (root->parent[c] < 0)
        {
          remove_what_was_made (root);
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

/* rmdir the components of path under dir from the deepest up to the one
   at index first (those this daemon made), stopping at the first that will
   not go (it holds something). */
static void
remove_made (int dir, const char *path, int first)
{
  char buf[256];
  int depth = 0, i;
  size_t n;

  snprintf (buf, sizeof buf, "%s", path);
  n = strlen (buf);
  while (n > 0 && buf[n - 1] == '/')
    buf[--n] = '\0';
  for (i = 0; buf[i]; i++)
    if (buf[i] == '/' && i > 0 && buf[i - 1] != '/')
      depth++;
  /* depth: the index of the last component */
  while (depth >= first && n > 0)
    {
      /* ENOENT: a component never made (the failure came first). */
      if (unlinkat (dir, buf, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return;
      while (n > 0 && buf[n - 1] != '/')
        buf[--n] = '\0';
      while (n > 0 && buf[n - 1] == '/')
        buf[--n] = '\0';
      depth--;
    }
}

/* A refused open: the directories it made go, none it found (an
   operator's, with its settings). */
static void
remove_what_was_made (struct sbx_cgroup_root *root)
{
  int c;

  for (c = 0; c < SBX_CG_NCTRL; c++)
    if (root->hierarchy[c] >= 0 && root->first_made[c] >= 0 && !root->duplicate[c])
      remove_made (root->hierarchy[c], root->parent_name, root->first_made[c]);
  sbx_cgroup_root_close (root);
}

void
sbx_cgroup_root_remove (struct sbx_cgroup_root *root)
{
  int c;

  for (c = 0; c < SBX_CG_NCTRL; c++)
    if (root->hierarchy[c] >= 0 && root->parent_name[0] && !root->duplicate[c])
      {
        /* What this start made, all of it that is empty; a parent found
           there (a restart's: sandboxes may live on in it), if empty. */
        if (root->first_made[c] >= 0)
          remove_made (root->hierarchy[c], root->parent_name, root->first_made[c]);
        else
          unlinkat (root->hierarchy[c], root->parent_name, AT_REMOVEDIR);
      }
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

/* Sleep *step ms and return it; the next sleep is twice as long, up to
   SBX_CGROUP_KILL_STEP_MAX_MS. */
static int
next_step (int *step)
{
  int slept = *step;

  sleep_ms (slept);
  *step = slept * 2 < SBX_CGROUP_KILL_STEP_MAX_MS ? slept * 2 : SBX_CGROUP_KILL_STEP_MAX_MS;
  return slept;
}

int
sbx_cgroup_kill (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg,
                 sbx_error_t **err)
{
  int dir = root->mode == SBX_CGROUP_V2 ? cg->dir[0] : cg->dir[SBX_CG_PIDS];
  int freezer = root->mode == SBX_CGROUP_V1 ? cg->dir[SBX_CG_FREEZER] : -1;
  int step = 5, waited;

  if (dir < 0)
    return 0;
  if (root->mode == SBX_CGROUP_V2 && write_at (dir, "cgroup.kill", "1", NULL) == 0)
    {
      /* Dying takes as long as the last process's exit frees what the
         sandbox held (a disk of hundreds of MB): over a second on a loaded
         or emulated machine, where a second's bound left the cgroup behind
         for good (a fork cut by a crash, in a 6.1 guest). */
      for (waited = 0; waited < SBX_CGROUP_KILL_WAIT_MS; waited += next_step (&step))
        if (read_keyed_at (dir, "cgroup.events", "populated") == 0)
          return 0;
      return sbx_err (err, SBX_E_SYSTEM, "cgroup `%s` still populated 10 s after cgroup.kill",
                      cg->name);
    }
  /* v1 (or v2 before 5.14). Usually the cgroup is already empty (killing
     init ended its pid namespace), and freezing costs milliseconds, so
     look first. Otherwise freeze so nothing forks while we read the list,
     kill what is listed, and always thaw (a frozen task cannot die). */
  if (kill_listed (dir) == 0)
    return 0;
  /* Bounded as above: exits that free much take long on a slow machine. */
  for (waited = 0; waited < SBX_CGROUP_KILL_WAIT_MS; waited += next_step (&step))
    {
      int n;
      if (freezer >= 0)
        write_at (freezer, "freezer.state", "FROZEN", NULL);
      n = kill_listed (dir);
      if (freezer >= 0)
        write_at (freezer, "freezer.state", "THAWED", NULL);
      if (n == 0)
        return 0;
    }
  return sbx_err (err, SBX_E_SYSTEM, "cgroup `%s` still has processes 10 s after SIGKILL",
                  cg->name);
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

/* ---- where the daemon's subtree is (v2) -------------------------------- */

/* 1 when the cgroup dir holds no process but self. */
static int
holds_only (int dir, pid_t self)
{
  char buf[4096], *line, *save = NULL;
  int n = 0;

  if (read_at (dir, "cgroup.procs", buf, sizeof buf) < 0)
    return 0;
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      if (strtol (line, NULL, 10) != (long) self)
        return 0;
      n++;
    }
  return n == 1;
}

int
sbx_cgroup_place_from (const char *mount_root, const char *own, pid_t self,
                       const char *parent_name, struct sbx_cgroup_place *out, sbx_error_t **err)
{
  cleanup_close int mnt = -1, dir = -1;
  const char *rel = own;
  const char *leaf;

  memset (out, 0, sizeof *out);
  while (*rel == '/')
    rel++;
  snprintf (out->daemon, sizeof out->daemon, "%s", rel);
  if (parent_name[0] == '/')
    {
      /* The operator's choice, from the root: its parent cgroup (one that
         is delegated to us, such as sbx-sandboxes.service's) must exist;
         nothing above it is written to. */
      const char *slash;
      while (*parent_name == '/')
        parent_name++;
      slash = strrchr (parent_name, '/');
      if (slash)
        snprintf (out->base, sizeof out->base, "%.*s", (int) (slash - parent_name), parent_name);
      snprintf (out->parent, sizeof out->parent, "%s", slash ? slash + 1 : parent_name);
      snprintf (out->why, sizeof out->why, "--cgroup-parent is absolute");
      return 0;
    }
  snprintf (out->parent, sizeof out->parent, "%s", parent_name);
  mnt = open (mount_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mnt < 0)
    return sbx_err_sys (err, errno, "open `%s`", mount_root);
  if (rel[0] == '\0')
    {
      /* The root: exempt from v2's rule on processes in inner cgroups,
         unless it is only the root of a cgroup namespace (which has the
         files every non-root cgroup has). */
      if (faccessat (mnt, "cgroup.events", F_OK, 0) < 0)
        {
          snprintf (out->why, sizeof out->why, "the daemon runs in the root cgroup");
          return 0;
        }
      if (!holds_only (mnt, self))
        return sbx_err (err, SBX_E_SYSTEM,
                        "the daemon's cgroup (the root of its cgroup namespace) holds other"
                        " processes, and no cgroup above it is ours: run sbx alone in its"
                        " container, or give --cgroup-parent /PATH");
      out->move_to_leaf = 1;
      snprintf (out->daemon, sizeof out->daemon, SBX_CGROUP_DAEMON_LEAF);
      snprintf (out->why, sizeof out->why,
                "the daemon is alone in its cgroup namespace's root: it moves into /"
                SBX_CGROUP_DAEMON_LEAF);
      return 0;
    }
  leaf = strrchr (rel, '/');
  leaf = leaf ? leaf + 1 : rel;
  if (strcmp (leaf, SBX_CGROUP_DAEMON_LEAF) == 0)
    {
      /* Started in our leaf (systemd's DelegateSubgroup=daemon). */
      snprintf (out->base, sizeof out->base, "%.*s", (int) (leaf - rel > 0 ? leaf - rel - 1 : 0),
                rel);
      snprintf (out->why, sizeof out->why, "the daemon starts in its leaf /%s", rel);
      return 0;
    }
  dir = openat (mnt, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return sbx_err_sys (err, errno, "open the daemon's cgroup `/%s`", rel);
  if (holds_only (dir, self) && strlen (leaf) > 6 && strcmp (leaf + strlen (leaf) - 6, ".scope") == 0)
    {
      /* A transient scope (systemd-run --scope) ends with the daemon, and
         the next start is in another: sandboxes below it could never be
         adopted again. */
      snprintf (out->why, sizeof out->why,
                "the daemon's cgroup /%s is a transient scope, which its next start will not"
                " share: its sandboxes go at the root of the hierarchy; run sbx as the shipped"
                " systemd units to keep them in a subtree of its own",
                rel);
      return 0;
    }
  if (holds_only (dir, self))
    {
      snprintf (out->base, sizeof out->base, "%s", rel);
      snprintf (out->daemon, sizeof out->daemon, "%s/" SBX_CGROUP_DAEMON_LEAF, rel);
      out->move_to_leaf = 1;
      snprintf (out->why, sizeof out->why,
                "the daemon is alone in /%s: it moves into /%s and its sandboxes go under it",
                rel, out->daemon);
      return 0;
    }
  snprintf (out->why, sizeof out->why,
            "the daemon's cgroup /%s holds other processes (a login shell's?): its sandboxes"
            " go at the root of the hierarchy; run sbx as the shipped systemd units to keep"
            " them in a subtree of its own",
            rel);
  return 0;
}

int
sbx_cgroup_place (const char *mount_root, const char *parent_name, struct sbx_cgroup_place *out,
                  sbx_error_t **err)
{
  char buf[4096], *line, *save = NULL;
  struct statfs sfs;

  if (statfs (mount_root, &sfs) == 0 && sfs.f_type != CGROUP2_SUPER_MAGIC)
    {
      /* v1 (and hybrid): PARENT under each controller's root, as given. */
      memset (out, 0, sizeof *out);
      while (*parent_name == '/')
        parent_name++;
      snprintf (out->parent, sizeof out->parent, "%s", parent_name);
      snprintf (out->why, sizeof out->why, "cgroup v1: under each controller's hierarchy");
      return 0;
    }

  if (read_at (AT_FDCWD, "/proc/self/cgroup", buf, sizeof buf) < 0)
    return sbx_err_sys (err, errno, "read /proc/self/cgroup");
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    if (strncmp (line, "0::", 3) == 0)
      return sbx_cgroup_place_from (mount_root, line + 3, getpid (), parent_name, out, err);
  return sbx_err (err, SBX_E_SYSTEM, "/proc/self/cgroup names no cgroup v2 path");
}

int
sbx_cgroup_enter (const char *mount_root, const struct sbx_cgroup_place *place,
                  sbx_error_t **err)
{
  cleanup_close int mnt = -1, leaf = -1;
  char pid[32];

  if (!place->move_to_leaf)
    return 0;
  mnt = open (mount_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mnt < 0)
    return sbx_err_sys (err, errno, "open `%s`", mount_root);
  if (mkdirat (mnt, place->daemon, 0755) < 0 && errno != EEXIST)
    return sbx_err_sys (err, errno, "make the daemon's leaf cgroup `/%s` (%s)", place->daemon,
                        refusal_hint (errno));
  leaf = openat (mnt, place->daemon, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (leaf < 0)
    return sbx_err_sys (err, errno, "open cgroup `/%s`", place->daemon);
  /* The whole process, every thread: cgroup.procs takes a thread group. */
  snprintf (pid, sizeof pid, "%d", (int) getpid ());
  if (write_at (leaf, "cgroup.procs", pid, err) < 0)
    return sbx_err_wrap (err, "move the daemon into `/%s`", place->daemon);
  return 0;
}

void
sbx_cgroup_root_describe (const struct sbx_cgroup_root *root, char *parent, size_t cap)
{
  if (root->mode == SBX_CGROUP_V2)
    snprintf (parent, cap, "/%s%s%s", root->base_path, root->base_path[0] ? "/" : "",
              root->parent_name);
  else
    snprintf (parent, cap, "/%s", root->parent_name);
}

int
sbx_cgroup_hold (const char *mount_root, sbx_error_t **err)
{
  struct sbx_cgroup_place place;
  cleanup_close int base = -1;
  char where[300];

  if (sbx_cgroup_place (mount_root, SBX_CGROUP_DAEMON_LEAF, &place, err) < 0)
    return -1;
  if (strncmp (place.why, "cgroup v1", 9) == 0)
    return 1; /* v1 and hybrid: each controller's tree has no such rule to hold for */
  if (!place.move_to_leaf)
    return sbx_err (err, SBX_E_SYSTEM,
                    "the cgroup holder must be alone in a cgroup of its own (systemd:"
                    " sbx-sandboxes.service with Delegate=yes): %s", place.why);
  if (sbx_cgroup_enter (mount_root, &place, err) < 0)
    return -1;
  base = open (mount_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (base >= 0 && place.base[0])
    {
      int dir = openat (base, place.base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      close (base);
      base = dir;
    }
  if (base < 0)
    return sbx_err_sys (err, errno, "open cgroup `/%s`", place.base);
  snprintf (where, sizeof where, "/%s", place.base);
  return enable_controllers (base, where, err);
}

int
sbx_cgroup_leave (const char *mount_root, const struct sbx_cgroup_place *place)
{
  cleanup_close int mnt = -1, base = -1;
  char pid[32], *slash;
  char own[256];

  char now[4096], want[300];

  if (!place->move_to_leaf)
    return 0;
  /* Only if we did move (the start may have been refused before). */
  snprintf (want, sizeof want, "0::/%s\n", place->daemon);
  if (read_at (AT_FDCWD, "/proc/self/cgroup", now, sizeof now) < 0 || strstr (now, want) == NULL)
    return 0;
  mnt = open (mount_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mnt < 0)
    return -1;
  snprintf (own, sizeof own, "%s", place->daemon);
  slash = strrchr (own, '/');
  if (slash)
    *slash = '\0';
  base = slash ? openat (mnt, own, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
               : fcntl (mnt, F_DUPFD_CLOEXEC, 3);
  if (base < 0)
    return -1;
  /* Back where we were started (which must give no controllers for a
     process to join it), and the leaf gone. */
  snprintf (pid, sizeof pid, "%d", (int) getpid ());
  if (write_at (base, "cgroup.subtree_control", "-cpu -memory -pids", NULL) < 0
      || write_at (base, "cgroup.procs", pid, NULL) < 0)
    return -1;
  return unlinkat (mnt, place->daemon, AT_REMOVEDIR);
}
