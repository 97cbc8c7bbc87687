/* Unit tests for src/iso/cgroup.c against fake cgroup trees.
 *
 * sbx_cgroup_root_open takes a forced mode so that the real code paths run
 * against a temporary directory laid out like a cgroup v2 parent or like
 * the v1 hierarchies (memory, pids, cpu, cpuacct, freezer). In a normal
 * directory mkdir makes an empty directory, not a cgroup with its control
 * files, so the limit tests pre-create a sandbox's directory with empty
 * control files and use sbx_cgroup_open; sbx_cgroup_create is tested for
 * what it can show there: its cleanup.
 *
 * What is asserted is exactly what the kernel would be told: the bytes of
 * every control file, and, through inotify (IN_CLOSE_WRITE, queued in
 * order), the order of the writes. Files written more than once (the
 * parents' cgroup.subtree_control, freezer.state) are FIFOs held open by
 * the test, so the whole stream of writes is read back. Writes never
 * truncate (cgroupfs ignores the offset), so files are emptied between
 * calls.
 *
 * The real /sys/fs/cgroup is only opened for mode detection, with an empty
 * parent name: nothing is created or written there.
 */
#include "iso/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))
#define MIB (UINT64_C (1) << 20)
#define GIB (UINT64_C (1) << 30)

static const char *const v2_files[] = {
  "memory.max",   "memory.swap.max", "pids.max",      "cpu.max",     "cgroup.procs",
  "cgroup.kill",  "cgroup.events",   "memory.events", "cpu.stat",    "memory.current",
  "pids.current", "memory.peak",     NULL,
};

static const char *const v1_names[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

static char tmp[64];

/*============================ Helpers ================================== */

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st;
  (void) flag;
  (void) ftw;
  return remove (path);
}

static int
make_tmp (void)
{
  snprintf (tmp, sizeof tmp, "/tmp/sbx-test-cg-XXXXXX");
  return mkdtemp (tmp) ? 0 : -1;
}

static void
remove_tmp (void)
{
  if (tmp[0])
    nftw (tmp, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  tmp[0] = '\0';
}

/* T/<rel> */
static const char *
at (char *buf, size_t cap, const char *rel)
{
  snprintf (buf, cap, "%s/%s", tmp, rel);
  return buf;
}

static int
mkdir_at (const char *rel)
{
  char p[512];
  return mkdir (at (p, sizeof p, rel), 0755);
}

static int
put (const char *rel, const char *content)
{
  char p[512];
  int fd = open (at (p, sizeof p, rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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

/* Content of T/<rel>, "(missing)" when it does not exist. */
static const char *
get (const char *rel)
{
  static char buf[4096];
  char p[512];
  int fd = open (at (p, sizeof p, rel), O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return "(missing)";
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  buf[n < 0 ? 0 : n] = '\0';
  return buf;
}

static int
exists (const char *rel)
{
  char p[512];
  struct stat st;
  return lstat (at (p, sizeof p, rel), &st) == 0;
}

/* A sandbox directory with empty control files. */
static int
make_box (const char *rel, const char *const *files)
{
  char p[512];

  if (mkdir_at (rel) < 0)
    return -1;
  for (size_t i = 0; files[i]; i++)
    {
      snprintf (p, sizeof p, "%s/%s", rel, files[i]);
      if (put (p, "") < 0)
        return -1;
    }
  return 0;
}

/* Empty every regular file under T/<rel> (writes do not truncate). */
static int
empty_files (const char *rel)
{
  char p[512];
  DIR *d = opendir (at (p, sizeof p, rel));
  struct dirent *de;

  if (d == NULL)
    return -1;
  while ((de = readdir (d)) != NULL)
    if (de->d_type == DT_REG)
      {
        char f[768];
        snprintf (f, sizeof f, "%s/%s", p, de->d_name);
        if (truncate (f, 0) < 0)
          {
            closedir (d);
            return -1;
          }
      }
  closedir (d);
  return 0;
}

/* A FIFO at T/<rel> held open read-write by us, so that writers never
   block and everything they write can be read back. Returns our fd. */
static int
recorder (const char *rel)
{
  char p[512];

  if (mkfifo (at (p, sizeof p, rel), 0644) < 0)
    return -1;
  return open (p, O_RDWR | O_NONBLOCK | O_CLOEXEC);
}

/* All bytes written to a recorder so far. */
static const char *
recorded (int fd)
{
  static char buf[65536];
  size_t got = 0;
  ssize_t n;

  while (got < sizeof buf - 1 && (n = read (fd, buf + got, sizeof buf - 1 - got)) > 0)
    got += (size_t) n;
  buf[got] = '\0';
  return buf;
}

/* Write order through inotify: watch directories, then collect the names of
   files closed after writing, as "label/name" joined by ' '. */
struct order
{
  int fd;
  int wd[8];
  const char *label[8];
  int n;
};

static int
order_watch (struct order *o, const char *rel, const char *label)
{
  char p[512];

  if (o->fd <= 0)
    {
      o->fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
      if (o->fd < 0)
        return -1;
    }
  o->wd[o->n] = inotify_add_watch (o->fd, at (p, sizeof p, rel), IN_CLOSE_WRITE);
  if (o->wd[o->n] < 0)
    return -1;
  o->label[o->n++] = label;
  return 0;
}

static const char *
order_get (struct order *o)
{
  static char out[2048];
  char buf[8192] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
  ssize_t n;

  out[0] = '\0';
  while ((n = read (o->fd, buf, sizeof buf)) > 0)
    for (char *p = buf; p < buf + n;)
      {
        const struct inotify_event *ev = (const struct inotify_event *) p;
        const char *label = "?";
        for (int i = 0; i < o->n; i++)
          if (o->wd[i] == ev->wd)
            label = o->label[i];
        if (ev->len > 0)
          {
            if (out[0])
              strncat (out, " ", sizeof out - strlen (out) - 1);
            if (label[0])
              {
                strncat (out, label, sizeof out - strlen (out) - 1);
                strncat (out, "/", sizeof out - strlen (out) - 1);
              }
            strncat (out, ev->name, sizeof out - strlen (out) - 1);
          }
        p += sizeof *ev + ev->len;
      }
  return out;
}

static void
order_close (struct order *o)
{
  if (o->fd > 0)
    close (o->fd);
  memset (o, 0, sizeof *o);
}

static int
same_file (int fd, const char *rel)
{
  struct stat a, b;
  char p[512];

  return fstat (fd, &a) == 0 && stat (at (p, sizeof p, rel), &b) == 0 && a.st_dev == b.st_dev
         && a.st_ino == b.st_ino;
}

/* rc must be -1 with an error of `kind` (and errno, unless < 0). */
static int
failed_with (int rc, sbx_error_t **err, enum sbx_error_kind kind, int sys_errno)
{
  int ok = rc == -1 && *err != NULL && (*err)->kind == kind
           && (sys_errno < 0 || (*err)->sys_errno == sys_errno);

  if (!ok)
    fprintf (stderr, "#   rc %d, error: kind %d errno %d `%s`\n", rc, *err ? (int) (*err)->kind : 0,
             *err ? (*err)->sys_errno : 0, *err ? (*err)->msg : "(none)");
  sbx_error_free (*err);
  *err = NULL;
  return ok ? 0 : -1;
}

/* Run a test body in T, then remove T whatever happened. */
static int
in_tmp (int (*body) (void))
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
  static int name (void) { return in_tmp (name##_in_tmp); }                    \
  static int name##_in_tmp (void)

/* v2: T/cgroup.subtree_control and T/sbx/cgroup.subtree_control as
   recorders, then the root opened on T with parent "sbx". */
static int
open_v2 (struct sbx_cgroup_root *root, int rec[2])
{
  sbx_error_t *err = NULL;

  if (mkdir_at ("sbx") < 0)
    return -1;
  rec[0] = recorder ("cgroup.subtree_control");
  rec[1] = recorder ("sbx/cgroup.subtree_control");
  if (rec[0] < 0 || rec[1] < 0)
    return -1;
  if (sbx_cgroup_root_open (root, tmp, "sbx", SBX_CGROUP_V2, &err) < 0)
    {
      fprintf (stderr, "#   root_open: %s\n", err->msg);
      sbx_error_free (err);
      return -1;
    }
  return 0;
}

/* v1: the five hierarchies (cpuacct optional), parent "sbx" made by the
   root's open; memsw files when asked. */
static int
open_v1 (struct sbx_cgroup_root *root, int memsw, int comount)
{
  sbx_error_t *err = NULL;

  for (size_t i = 0; i < ARRAY_SIZE (v1_names); i++)
    {
      if (comount && strcmp (v1_names[i], "cpuacct") == 0)
        {
          char p[512];
          if (symlink ("cpu", at (p, sizeof p, "cpuacct")) < 0)
            return -1;
        }
      else if (mkdir_at (v1_names[i]) < 0)
        return -1;
    }
  if (memsw && (mkdir_at ("memory/sbx") < 0 || put ("memory/sbx/memory.memsw.limit_in_bytes", "") < 0))
    return -1;
  if (sbx_cgroup_root_open (root, tmp, "sbx", SBX_CGROUP_V1, &err) < 0)
    {
      fprintf (stderr, "#   root_open: %s\n", err->msg);
      sbx_error_free (err);
      return -1;
    }
  return 0;
}

static const char *const v1_memory_files[] = {
  "memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.swappiness",
  "memory.usage_in_bytes", "memory.max_usage_in_bytes",   "memory.oom_control",
  "cgroup.procs",          NULL,
};
static const char *const v1_pids_files[] = {"pids.max", "pids.current", "cgroup.procs", NULL};
static const char *const v1_cpu_files[] = {"cpu.cfs_period_us", "cpu.cfs_quota_us",
                                           "cpuacct.usage", "cgroup.procs", NULL};
static const char *const v1_procs_files[] = {"cgroup.procs", "cpuacct.usage", NULL};
static const char *const v1_freezer_files[] = {"cgroup.procs", NULL};

/* The sandbox's directory in every v1 hierarchy, with control files. */
static int
make_v1_box (const char *name, int comount)
{
  char p[128];

  snprintf (p, sizeof p, "memory/sbx/%s", name);
  if (make_box (p, v1_memory_files) < 0)
    return -1;
  snprintf (p, sizeof p, "pids/sbx/%s", name);
  if (make_box (p, v1_pids_files) < 0)
    return -1;
  snprintf (p, sizeof p, "cpu/sbx/%s", name);
  if (make_box (p, v1_cpu_files) < 0)
    return -1;
  snprintf (p, sizeof p, "cpuacct/sbx/%s", name);
  if (!comount && make_box (p, v1_procs_files) < 0)
    return -1;
  snprintf (p, sizeof p, "freezer/sbx/%s", name);
  return make_box (p, v1_freezer_files);
}

/*============================ v2 ======================================= */

TMP_TEST (test_v2_root_open)
{
  struct sbx_cgroup_root root;
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (root.mode == SBX_CGROUP_V2);
  CHECK (root.parent[0] > 2 && same_file (root.parent[0], "sbx"));
  for (int c = 1; c < SBX_CG_NCTRL; c++)
    CHECK (root.parent[c] == -1);
  CHECK (root.v1_memsw == 0);
  CHECK (fcntl (root.parent[0], F_GETFD) & FD_CLOEXEC);
  /* Controllers are delegated at every level: memory and pids required,
     cpu asked for separately (it may be refused). */
  CHECK_STR (recorded (rec[0]), "+memory +pids+cpu");
  CHECK_STR (recorded (rec[1]), "+memory +pids+cpu");
  sbx_cgroup_root_close (&root);
  CHECK (root.parent[0] == -1);
  sbx_cgroup_root_close (&root); /* twice is fine */
  close (rec[0]);
  close (rec[1]);
  return 0;
}

TMP_TEST (test_v2_root_open_nested_parent)
{
  struct sbx_cgroup_root root;
  sbx_error_t *err = NULL;
  int r0, r1, r2;

  CHECK (mkdir_at ("a") == 0 && mkdir_at ("a/b") == 0);
  r0 = recorder ("cgroup.subtree_control");
  r1 = recorder ("a/cgroup.subtree_control");
  r2 = recorder ("a/b/cgroup.subtree_control");
  CHECK (r0 >= 0 && r1 >= 0 && r2 >= 0);
  CHECK (sbx_cgroup_root_open (&root, tmp, "a/b", SBX_CGROUP_V2, &err) == 0);
  CHECK (same_file (root.parent[0], "a/b"));
  CHECK_STR (recorded (r0), "+memory +pids+cpu");
  CHECK_STR (recorded (r1), "+memory +pids+cpu");
  CHECK_STR (recorded (r2), "+memory +pids+cpu");
  sbx_cgroup_root_close (&root);
  /* "//a///b/" is the same parent. */
  CHECK (sbx_cgroup_root_open (&root, tmp, "//a///b/", SBX_CGROUP_V2, &err) == 0);
  CHECK (same_file (root.parent[0], "a/b"));
  sbx_cgroup_root_close (&root);
  close (r0);
  close (r1);
  close (r2);
  return 0;
}

TMP_TEST (test_v2_root_open_failures)
{
  struct sbx_cgroup_root root;
  sbx_error_t *err = NULL;
  int rec;
  char p[512];

  /* No cgroup.subtree_control at the mount: memory and pids cannot be
     delegated. */
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "sbx", SBX_CGROUP_V2, &err), &err,
                      SBX_E_SYSTEM, ENOENT)
         == 0);
  CHECK (root.parent[0] == -1);
  rec = recorder ("cgroup.subtree_control");
  CHECK (rec >= 0);
  /* A parent that is not there yet is made, but a plain directory has no
     cgroup.subtree_control to enable controllers for its children: the
     refusal removes what it made. */
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "fresh", SBX_CGROUP_V2, &err), &err,
                      SBX_E_SYSTEM, ENOENT)
         == 0);
  CHECK (root.parent[0] == -1);
  CHECK (!exists ("fresh"));
  /* Names that could climb out. */
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "..", SBX_CGROUP_V2, &err), &err,
                      SBX_E_INVALID, 0)
         == 0);
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "a/../..", SBX_CGROUP_V2, &err), &err,
                      SBX_E_INVALID, 0)
         == 0);
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "./x", SBX_CGROUP_V2, &err), &err,
                      SBX_E_INVALID, 0)
         == 0);
  /* (A parent is checked part by part: "a" was made before ".." was
     seen.) */
  CHECK (!exists ("x"));
  /* A symlink is not followed to a parent elsewhere. */
  CHECK (symlink ("/tmp", at (p, sizeof p, "link")) == 0);
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "link", SBX_CGROUP_V2, &err), &err,
                      SBX_E_SYSTEM, -1)
         == 0);
  CHECK (failed_with (sbx_cgroup_root_open (&root, "/nonexistent/sbx-test", "sbx", SBX_CGROUP_V2,
                                            &err),
                      &err, SBX_E_SYSTEM, ENOENT)
         == 0);
  close (rec);
  return 0;
}

TMP_TEST (test_v2_set_limits)
{
  static const struct
  {
    uint64_t memory;
    uint32_t cpu_milli, pids;
    const char *memory_max, *pids_max, *cpu_max;
  } cases[] = {
    {512 * MIB, 500, 100, "536870912", "100", "50000 100000"},
    {GIB, 1000, 1, "1073741824", "1", "100000 100000"},
    {16 * MIB, 2500, 4096, "16777216", "4096", "250000 100000"},
    {1, 10, 0, "1", "0", "1000 100000"},  /* 1% of a CPU, the kernel's 1 ms minimum */
    {2, 9, 1, "2", "1", "1000 100000"},   /* below: raised to the minimum */
    {3, 1, 2, "3", "2", "1000 100000"},
    {4, 0, 3, "4", "3", "1000 100000"},
    {5, 11, 4, "5", "4", "1100 100000"},
    {6, 64000, 5, "6", "5", "6400000 100000"},
    {UINT64_MAX, UINT32_MAX, UINT32_MAX, "18446744073709551615", "4294967295",
     "429496729500 100000"},
  };
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (make_box ("sbx/box1", v2_files) == 0);
  CHECK (sbx_cgroup_open (&root, "box1", &cg, &err) == 0);
  CHECK_STR (cg.name, "box1");
  CHECK (cg.dir[0] > 2 && same_file (cg.dir[0], "sbx/box1"));
  for (int c = 1; c < SBX_CG_NCTRL; c++)
    CHECK (cg.dir[c] == -1);
  CHECK (sbx_cgroup_clone_fd (&root, &cg) == cg.dir[0]);

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_cgroup_limits l = {cases[i].memory, cases[i].cpu_milli, cases[i].pids};
      struct order o = {0};

      CHECK (empty_files ("sbx/box1") == 0);
      CHECK (order_watch (&o, "sbx/box1", "") == 0);
      CHECK (sbx_cgroup_set_limits (&root, &cg, &l, &err) == 0);
      CHECK_STR (get ("sbx/box1/memory.max"), cases[i].memory_max);
      CHECK_STR (get ("sbx/box1/memory.swap.max"), "0");
      CHECK_STR (get ("sbx/box1/pids.max"), cases[i].pids_max);
      CHECK_STR (get ("sbx/box1/cpu.max"), cases[i].cpu_max);
      CHECK_STR (order_get (&o), "memory.max memory.swap.max pids.max cpu.max");
      order_close (&o);
    }
  sbx_cgroup_close (&cg);
  CHECK (cg.dir[0] == -1);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

/* Optional files: no swap accounting, no cpu controller delegated. A
   missing required file fails at that file, after what came before. */
TMP_TEST (test_v2_set_limits_optional_files)
{
  static const char *const minimal[] = {"memory.max", "pids.max", NULL};
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_limits l = {256 * MIB, 500, 50};
  struct order o = {0};
  sbx_error_t *err = NULL;
  int rec[2];
  char p[512];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (make_box ("sbx/small", minimal) == 0);
  CHECK (sbx_cgroup_open (&root, "small", &cg, &err) == 0);
  CHECK (order_watch (&o, "sbx/small", "") == 0);
  CHECK (sbx_cgroup_set_limits (&root, &cg, &l, &err) == 0);
  CHECK_STR (order_get (&o), "memory.max pids.max");
  CHECK_STR (get ("sbx/small/memory.max"), "268435456");
  CHECK_STR (get ("sbx/small/pids.max"), "50");
  CHECK (!exists ("sbx/small/memory.swap.max") && !exists ("sbx/small/cpu.max"));

  CHECK (unlink (at (p, sizeof p, "sbx/small/pids.max")) == 0);
  CHECK (empty_files ("sbx/small") == 0);
  CHECK (failed_with (sbx_cgroup_set_limits (&root, &cg, &l, &err), &err, SBX_E_SYSTEM, ENOENT)
         == 0);
  CHECK_STR (order_get (&o), "memory.max");
  CHECK (unlink (at (p, sizeof p, "sbx/small/memory.max")) == 0);
  CHECK (failed_with (sbx_cgroup_set_limits (&root, &cg, &l, &err), &err, SBX_E_SYSTEM, ENOENT)
         == 0);
  CHECK_STR (order_get (&o), "");
  /* A control file is never written through a symlink. */
  CHECK (symlink ("../../elsewhere", at (p, sizeof p, "sbx/small/memory.max")) == 0);
  CHECK (failed_with (sbx_cgroup_set_limits (&root, &cg, &l, &err), &err, SBX_E_SYSTEM, ELOOP)
         == 0);
  CHECK (!exists ("elsewhere"));
  order_close (&o);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

TMP_TEST (test_v2_stats)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_stats st;
  sbx_error_t *err = NULL;
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (make_box ("sbx/box", v2_files) == 0);
  CHECK (put ("sbx/box/cpu.stat", "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n"
                                  "nr_periods 7\nnr_throttled 2\nthrottled_usec 999\n")
         == 0);
  CHECK (put ("sbx/box/memory.current", "1048576\n") == 0);
  CHECK (put ("sbx/box/memory.peak", "2097152\n") == 0);
  CHECK (put ("sbx/box/memory.events", "low 0\nhigh 0\nmax 17\noom 2\noom_kill 1\n"
                                       "oom_group_kill 3\n")
         == 0);
  CHECK (put ("sbx/box/pids.current", "5\n") == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  memset (&st, 0xff, sizeof st);
  CHECK (sbx_cgroup_stats (&root, &cg, &st, &err) == 0);
  CHECK (st.cpu_usec == 123456);
  CHECK (st.memory_bytes == 1048576);
  CHECK (st.memory_peak_bytes == 2097152);
  CHECK (st.oom_kills == 1);
  CHECK (st.pids == 5);
  CHECK (sbx_cgroup_oom_kills (&root, &cg) == 1);

  /* Keys match whole words, wherever the line is. */
  CHECK (put ("sbx/box/memory.events", "oom_kill_extra 9\noom 4\noom_kill 6") == 0);
  CHECK (put ("sbx/box/cpu.stat", "usage_usec_total 1\nusage 2\nusage_usec 3\n") == 0);
  CHECK (sbx_cgroup_stats (&root, &cg, &st, &err) == 0);
  CHECK (st.oom_kills == 6 && st.cpu_usec == 3);
  CHECK (sbx_cgroup_oom_kills (&root, &cg) == 6);
  /* Missing files (memory.peak before Linux 5.19) and odd content read as
     0; the largest value survives. */
  {
    char p[512];
    CHECK (unlink (at (p, sizeof p, "sbx/box/memory.peak")) == 0);
  }
  CHECK (put ("sbx/box/memory.current", "max\n") == 0);
  CHECK (put ("sbx/box/pids.current", "18446744073709551615\n") == 0);
  CHECK (put ("sbx/box/memory.events", "") == 0);
  CHECK (put ("sbx/box/cpu.stat", "usage_usec\n") == 0);
  CHECK (sbx_cgroup_stats (&root, &cg, &st, &err) == 0);
  CHECK (st.memory_peak_bytes == 0 && st.memory_bytes == 0 && st.oom_kills == 0);
  CHECK (st.cpu_usec == 0 && st.pids == UINT64_MAX);
  CHECK (sbx_cgroup_oom_kills (&root, &cg) == 0);
  CHECK (err == NULL);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

TMP_TEST (test_v2_attach)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (make_box ("sbx/box", v2_files) == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  CHECK (sbx_cgroup_attach (&root, &cg, 4242, &err) == 0);
  CHECK_STR (get ("sbx/box/cgroup.procs"), "4242");
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

/* Names: what sandbox ids and leftovers can be, nothing that walks. */
TMP_TEST (test_names)
{
  static const char *const bad[] = {
    "", ".", "..", "a/b", "../x", "Box", "a b", "a.b", "a\nb", "\xc3\xa9",
    "0123456789012345678901234567890123456789012345678901234567890123", /* 64 */
  };
  static const char *const good[] = {
    "a", "abc123", "a-b_c", "-", "_",
    "012345678901234567890123456789012345678901234567890123456789012", /* 63 */
  };
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  struct sbx_cgroup_limits l = {MIB, 1000, 10};
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      CHECK (failed_with (sbx_cgroup_open (&root, bad[i], &cg, &err), &err, SBX_E_INVALID, 0)
             == 0);
      CHECK (cg.dir[0] == -1);
      CHECK (failed_with (sbx_cgroup_create (&root, bad[i], &l, &cg, &err), &err, SBX_E_INVALID,
                          0)
             == 0);
    }
  /* Valid names get past the check (and fail at the missing directory). */
  for (size_t i = 0; i < ARRAY_SIZE (good); i++)
    {
      CHECK (failed_with (sbx_cgroup_open (&root, good[i], &cg, &err), &err, SBX_E_SYSTEM, ENOENT)
             == 0);
      CHECK (cg.dir[0] == -1);
    }
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

/* create on a fake tree: mkdir gives an empty directory, so setting the
   limits fails; the directory it made is removed again. */
TMP_TEST (test_v2_create_cleans_up)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_limits l = {MIB, 1000, 10};
  sbx_error_t *err = NULL;
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (failed_with (sbx_cgroup_create (&root, "fresh", &l, &cg, &err), &err, SBX_E_SYSTEM,
                      ENOENT)
         == 0);
  CHECK (!exists ("sbx/fresh"));
  CHECK (cg.dir[0] == -1);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

/* A name that exists already (another sandbox's cgroup, a leftover) is an
   error, and what exists is left alone: create must only ever remove what
   it made itself. */
TMP_TEST (test_v2_create_existing)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_limits l = {MIB, 1000, 10};
  sbx_error_t *err = NULL;
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (mkdir_at ("sbx/taken") == 0); /* empty: rmdir would succeed */
  CHECK (failed_with (sbx_cgroup_create (&root, "taken", &l, &cg, &err), &err, SBX_E_SYSTEM,
                      EEXIST)
         == 0);
  CHECK (exists ("sbx/taken"));
  CHECK (cg.dir[0] == -1);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

TMP_TEST (test_v2_destroy)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  int rec[2];
  char p[512];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (make_box ("sbx/box", v2_files) == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  /* Not empty (a plain directory with files): the error is kept, the fds
     are closed anyway. */
  CHECK (failed_with (sbx_cgroup_destroy (&root, &cg, &err), &err, SBX_E_SYSTEM, ENOTEMPTY) == 0);
  CHECK (cg.dir[0] == -1);
  CHECK (exists ("sbx/box"));
  for (size_t i = 0; v2_files[i]; i++)
    {
      snprintf (p, sizeof p, "%s/sbx/box/%s", tmp, v2_files[i]);
      CHECK (unlink (p) == 0);
    }
  CHECK (sbx_cgroup_destroy (&root, &cg, &err) == 0);
  CHECK (!exists ("sbx/box"));
  /* Already gone is fine. */
  CHECK (sbx_cgroup_destroy (&root, &cg, &err) == 0);
  CHECK (err == NULL);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

static void
list_collect (const char *name, void *arg)
{
  char *out = arg;

  if (out[0])
    strcat (out, " ");
  strcat (out, name);
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The names collected, sorted. */
static const char *
sorted (char *joined)
{
  static char out[512];
  char *words[32], *save = NULL;
  int n = 0;

  for (char *w = strtok_r (joined, " ", &save); w && n < 32; w = strtok_r (NULL, " ", &save))
    words[n++] = w;
  qsort (words, (size_t) n, sizeof words[0], cmp_str);
  out[0] = '\0';
  for (int i = 0; i < n; i++)
    {
      if (i)
        strcat (out, " ");
      strcat (out, words[i]);
    }
  return out;
}

TMP_TEST (test_v2_list)
{
  struct sbx_cgroup_root root;
  sbx_error_t *err = NULL;
  char names[512] = "";
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (mkdir_at ("sbx/abc") == 0 && mkdir_at ("sbx/x-y_1") == 0 && mkdir_at ("sbx/Bad") == 0
         && mkdir_at ("sbx/.hidden") == 0 && mkdir_at ("sbx/a.b") == 0);
  CHECK (put ("sbx/file", "") == 0);
  CHECK (symlink ("abc", at ((char[512]){0}, 512, "sbx/link")) == 0);
  CHECK (sbx_cgroup_list (&root, list_collect, names, &err) == 0);
  CHECK_STR (sorted (names), "abc x-y_1");
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

/*============================ kill ===================================== */

static pid_t
spawn_sleeper (void)
{
  pid_t pid;

  fflush (NULL);
  pid = fork ();
  if (pid == 0)
    {
      /* Never outlive a test that failed before killing it. */
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      for (;;)
        pause ();
    }
  return pid;
}

static long
elapsed_ms (const struct timespec *since)
{
  struct timespec now;
  clock_gettime (CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

/* cgroup.kill, then wait for "populated 0" in cgroup.events. */
TMP_TEST (test_v2_kill)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  struct timespec t0;
  int rec[2];

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (make_box ("sbx/box", v2_files) == 0);
  CHECK (put ("sbx/box/cgroup.events", "populated 0\nfrozen 0\n") == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  CHECK (sbx_cgroup_kill (&root, &cg, &err) == 0);
  CHECK_STR (get ("sbx/box/cgroup.kill"), "1");
  /* Still populated: gives up after SBX_CGROUP_KILL_WAIT_MS (a bound, not
     a timing: never before it, and not for ever). */
  CHECK (put ("sbx/box/cgroup.events", "frozen 0\npopulated 1\n") == 0);
  clock_gettime (CLOCK_MONOTONIC, &t0);
  CHECK (failed_with (sbx_cgroup_kill (&root, &cg, &err), &err, SBX_E_SYSTEM, 0) == 0);
  CHECK (elapsed_ms (&t0) >= SBX_CGROUP_KILL_WAIT_MS - 100
         && elapsed_ms (&t0) < 6 * SBX_CGROUP_KILL_WAIT_MS);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

/* Without cgroup.kill (before Linux 5.14): SIGKILL what cgroup.procs lists
   until it lists nothing. */
TMP_TEST (test_v2_kill_without_cgroup_kill)
{
  static const char *const files[] = {"cgroup.procs", "cgroup.events", NULL};
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  char pidline[32];
  int rec[2], status;
  pid_t child;

  CHECK (open_v2 (&root, rec) == 0);
  CHECK (make_box ("sbx/box", files) == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  CHECK (sbx_cgroup_kill (&root, &cg, &err) == 0); /* empty: nothing to do */
  child = spawn_sleeper ();
  CHECK (child > 0);
  snprintf (pidline, sizeof pidline, "%d\n", (int) child);
  CHECK (put ("sbx/box/cgroup.procs", pidline) == 0);
  /* The fake list never empties, but the child is killed. */
  CHECK (failed_with (sbx_cgroup_kill (&root, &cg, &err), &err, SBX_E_SYSTEM, 0) == 0);
  CHECK (waitpid (child, &status, 0) == child);
  CHECK (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  close (rec[0]);
  close (rec[1]);
  return 0;
}

/*============================ v1 ======================================= */

TMP_TEST (test_v1_root_open)
{
  struct sbx_cgroup_root root;

  CHECK (open_v1 (&root, 0, 0) == 0);
  CHECK (root.mode == SBX_CGROUP_V1);
  for (size_t c = 0; c < ARRAY_SIZE (v1_names); c++)
    {
      char rel[64];
      snprintf (rel, sizeof rel, "%s/sbx", v1_names[c]);
      CHECK (root.parent[c] > 2 && same_file (root.parent[c], rel));
    }
  CHECK (root.v1_memsw == 0);
  sbx_cgroup_root_close (&root);
  CHECK (root.parent[SBX_CG_MEMORY] == -1);
  /* Swap accounting is seen. */
  remove_tmp ();
  CHECK (make_tmp () == 0);
  CHECK (open_v1 (&root, 1, 0) == 0);
  CHECK (root.v1_memsw == 1);
  sbx_cgroup_root_close (&root);
  return 0;
}

TMP_TEST (test_v1_root_open_optional_hierarchies)
{
  struct sbx_cgroup_root root;
  sbx_error_t *err = NULL;

  CHECK (mkdir_at ("memory") == 0 && mkdir_at ("pids") == 0);
  /* cpu is required. */
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "sbx", SBX_CGROUP_V1, &err), &err,
                      SBX_E_SYSTEM, ENOENT)
         == 0);
  for (int c = 0; c < SBX_CG_NCTRL; c++)
    CHECK (root.parent[c] == -1);
  /* cpuacct and freezer are not. */
  CHECK (mkdir_at ("cpu") == 0);
  CHECK (sbx_cgroup_root_open (&root, tmp, "sbx", SBX_CGROUP_V1, &err) == 0);
  CHECK (root.parent[SBX_CG_MEMORY] > 2 && root.parent[SBX_CG_PIDS] > 2
         && root.parent[SBX_CG_CPU] > 2);
  CHECK (root.parent[SBX_CG_CPUACCT] == -1 && root.parent[SBX_CG_FREEZER] == -1);
  sbx_cgroup_root_close (&root);
  /* Without memory nothing works. */
  remove_tmp ();
  CHECK (make_tmp () == 0);
  CHECK (mkdir_at ("pids") == 0 && mkdir_at ("cpu") == 0);
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "sbx", SBX_CGROUP_V1, &err), &err,
                      SBX_E_SYSTEM, ENOENT)
         == 0);
  return 0;
}

TMP_TEST (test_v1_set_limits)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_limits l = {GIB, 1500, 64};
  sbx_error_t *err = NULL;
  struct order o = {0};

  CHECK (open_v1 (&root, 1, 0) == 0);
  CHECK (make_v1_box ("box", 0) == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  for (size_t c = 0; c < ARRAY_SIZE (v1_names); c++)
    {
      char rel[64];
      snprintf (rel, sizeof rel, "%s/sbx/box", v1_names[c]);
      CHECK (cg.dir[c] > 2 && same_file (cg.dir[c], rel));
    }
  CHECK (sbx_cgroup_clone_fd (&root, &cg) == -1);
  CHECK (order_watch (&o, "memory/sbx/box", "memory") == 0
         && order_watch (&o, "pids/sbx/box", "pids") == 0
         && order_watch (&o, "cpu/sbx/box", "cpu") == 0);
  CHECK (sbx_cgroup_set_limits (&root, &cg, &l, &err) == 0);
  /* memsw equal to the memory limit: no swap. */
  CHECK_STR (get ("memory/sbx/box/memory.limit_in_bytes"), "1073741824");
  CHECK_STR (get ("memory/sbx/box/memory.memsw.limit_in_bytes"), "1073741824");
  CHECK_STR (get ("memory/sbx/box/memory.swappiness"), "0");
  CHECK_STR (get ("pids/sbx/box/pids.max"), "64");
  CHECK_STR (get ("cpu/sbx/box/cpu.cfs_period_us"), "100000");
  CHECK_STR (get ("cpu/sbx/box/cpu.cfs_quota_us"), "150000");
  CHECK_STR (order_get (&o), "memory/memory.limit_in_bytes memory/memory.memsw.limit_in_bytes "
                             "memory/memory.swappiness pids/pids.max cpu/cpu.cfs_period_us "
                             "cpu/cpu.cfs_quota_us");
  /* Minimum quota. */
  l.cpu_milli = 5;
  CHECK (empty_files ("cpu/sbx/box") == 0);
  CHECK (sbx_cgroup_set_limits (&root, &cg, &l, &err) == 0);
  CHECK_STR (get ("cpu/sbx/box/cpu.cfs_quota_us"), "1000");
  order_close (&o);
  sbx_cgroup_close (&cg);
  for (int c = 0; c < SBX_CG_NCTRL; c++)
    CHECK (cg.dir[c] == -1);
  sbx_cgroup_root_close (&root);
  return 0;
}

/* Without swap accounting only memory.limit_in_bytes is written, and a
   missing memory.swappiness is not an error. */
TMP_TEST (test_v1_set_limits_without_memsw)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_limits l = {512 * MIB, 250, 32};
  sbx_error_t *err = NULL;
  struct order o = {0};
  char p[512];

  CHECK (open_v1 (&root, 0, 0) == 0);
  CHECK (make_v1_box ("box", 0) == 0);
  CHECK (unlink (at (p, sizeof p, "memory/sbx/box/memory.swappiness")) == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  CHECK (order_watch (&o, "memory/sbx/box", "memory") == 0);
  CHECK (sbx_cgroup_set_limits (&root, &cg, &l, &err) == 0);
  CHECK_STR (order_get (&o), "memory/memory.limit_in_bytes");
  CHECK_STR (get ("memory/sbx/box/memory.limit_in_bytes"), "536870912");
  CHECK_STR (get ("memory/sbx/box/memory.memsw.limit_in_bytes"), "");
  CHECK_STR (get ("pids/sbx/box/pids.max"), "32");
  CHECK_STR (get ("cpu/sbx/box/cpu.cfs_quota_us"), "25000");
  order_close (&o);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  return 0;
}

/* When the memory limit cannot be written first (growing above the
   current memsw limit), memsw goes first and memory is retried. Here
   memory.limit_in_bytes is a directory, so both memory attempts fail:
   memsw is written in between, and the error is memory's. */
TMP_TEST (test_v1_memsw_goes_first_when_memory_fails)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_limits l = {2 * GIB, 1000, 10};
  sbx_error_t *err = NULL;
  struct order o = {0};
  char p[512];

  CHECK (open_v1 (&root, 1, 0) == 0);
  CHECK (make_v1_box ("box", 0) == 0);
  CHECK (unlink (at (p, sizeof p, "memory/sbx/box/memory.limit_in_bytes")) == 0);
  CHECK (mkdir (p, 0755) == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  CHECK (order_watch (&o, "memory/sbx/box", "") == 0);
  CHECK (failed_with (sbx_cgroup_set_limits (&root, &cg, &l, &err), &err, SBX_E_SYSTEM, EISDIR)
         == 0);
  CHECK_STR (order_get (&o), "memory.memsw.limit_in_bytes");
  CHECK_STR (get ("memory/sbx/box/memory.memsw.limit_in_bytes"), "2147483648");
  CHECK_STR (get ("pids/sbx/box/pids.max"), ""); /* stopped before */
  order_close (&o);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  return 0;
}

TMP_TEST (test_v1_stats)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_stats st;
  sbx_error_t *err = NULL;

  CHECK (open_v1 (&root, 0, 0) == 0);
  CHECK (make_v1_box ("box", 0) == 0);
  CHECK (put ("cpuacct/sbx/box/cpuacct.usage", "123456789\n") == 0);
  CHECK (put ("cpu/sbx/box/cpuacct.usage", "999999999\n") == 0); /* not this one */
  CHECK (put ("memory/sbx/box/memory.usage_in_bytes", "4096\n") == 0);
  CHECK (put ("memory/sbx/box/memory.max_usage_in_bytes", "8192\n") == 0);
  CHECK (put ("memory/sbx/box/memory.oom_control", "oom_kill_disable 0\nunder_oom 1\noom_kill 3\n")
         == 0);
  CHECK (put ("pids/sbx/box/pids.current", "7\n") == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  CHECK (sbx_cgroup_stats (&root, &cg, &st, &err) == 0);
  CHECK (st.cpu_usec == 123456); /* nanoseconds in cpuacct.usage */
  CHECK (st.memory_bytes == 4096 && st.memory_peak_bytes == 8192);
  CHECK (st.oom_kills == 3 && st.pids == 7);
  CHECK (sbx_cgroup_oom_kills (&root, &cg) == 3);
  /* Kernels without the oom_kill line (before 4.13): 0. */
  CHECK (put ("memory/sbx/box/memory.oom_control", "oom_kill_disable 1\nunder_oom 0\n") == 0);
  CHECK (sbx_cgroup_oom_kills (&root, &cg) == 0);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  return 0;
}

/* cpu and cpuacct co-mounted (one hierarchy, "cpu,cpuacct"): one directory,
   made, attached and removed once; the usage is read from it. */
TMP_TEST (test_v1_comounted_cpu_cpuacct)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_stats st;
  sbx_error_t *err = NULL;
  struct order o = {0};

  CHECK (open_v1 (&root, 0, 1) == 0);
  CHECK (root.parent[SBX_CG_CPUACCT] > 2);
  CHECK (same_file (root.parent[SBX_CG_CPUACCT], "cpu/sbx"));
  CHECK (make_v1_box ("box", 1) == 0);
  CHECK (put ("cpu/sbx/box/cpuacct.usage", "5000000\n") == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  CHECK (same_file (cg.dir[SBX_CG_CPUACCT], "cpu/sbx/box"));
  CHECK (sbx_cgroup_stats (&root, &cg, &st, &err) == 0);
  CHECK (st.cpu_usec == 5000);
  CHECK (order_watch (&o, "cpu/sbx/box", "cpu") == 0);
  CHECK (sbx_cgroup_attach (&root, &cg, 77, &err) == 0);
  CHECK_STR (order_get (&o), "cpu/cgroup.procs");
  CHECK_STR (get ("cpu/sbx/box/cgroup.procs"), "77");
  order_close (&o);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  return 0;
}

TMP_TEST (test_v1_attach)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;

  CHECK (open_v1 (&root, 0, 0) == 0);
  CHECK (make_v1_box ("box", 0) == 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  CHECK (sbx_cgroup_attach (&root, &cg, 31337, &err) == 0);
  for (size_t c = 0; c < ARRAY_SIZE (v1_names); c++)
    {
      char rel[64];
      snprintf (rel, sizeof rel, "%s/sbx/box/cgroup.procs", v1_names[c]);
      CHECK_STR (get (rel), "31337");
    }
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  return 0;
}

/* Freeze, kill what is listed, always thaw (a frozen task cannot die). */
TMP_TEST (test_v1_kill)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  char pidline[32];
  int freezer, status;
  pid_t child;
  const char *stream;

  CHECK (open_v1 (&root, 0, 0) == 0);
  CHECK (make_v1_box ("box", 0) == 0);
  freezer = recorder ("freezer/sbx/box/freezer.state");
  CHECK (freezer >= 0);
  CHECK (sbx_cgroup_open (&root, "box", &cg, &err) == 0);
  /* Empty: no freezing at all. */
  CHECK (sbx_cgroup_kill (&root, &cg, &err) == 0);
  CHECK_STR (recorded (freezer), "");
  child = spawn_sleeper ();
  CHECK (child > 0);
  snprintf (pidline, sizeof pidline, "%d\n", (int) child);
  CHECK (put ("pids/sbx/box/cgroup.procs", pidline) == 0);
  CHECK (failed_with (sbx_cgroup_kill (&root, &cg, &err), &err, SBX_E_SYSTEM, 0) == 0);
  CHECK (waitpid (child, &status, 0) == child);
  CHECK (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  /* One round of FROZEN then THAWED per look, nothing else: as many
     looks as SBX_CGROUP_KILL_WAIT_MS takes (5 ms, doubling up to SBX_CGROUP_KILL_STEP_MAX_MS). */
  {
    int rounds = 0, step = 5, waited;
    for (waited = 0; waited < SBX_CGROUP_KILL_WAIT_MS; rounds++)
      {
        waited += step;
        step = step * 2 < SBX_CGROUP_KILL_STEP_MAX_MS ? step * 2 : SBX_CGROUP_KILL_STEP_MAX_MS;
      }
    stream = recorded (freezer);
    CHECK (rounds == 104 && strlen (stream) == (size_t) rounds * 12);
    for (int i = 0; i < rounds; i++)
      CHECK (memcmp (stream + 12 * i, "FROZENTHAWED", 12) == 0);
  }
  close (freezer);
  sbx_cgroup_close (&cg);
  sbx_cgroup_root_close (&root);
  return 0;
}

/* create: the directory in every hierarchy, removed again on failure. */
TMP_TEST (test_v1_create_cleans_up)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_limits l = {MIB, 1000, 10};
  sbx_error_t *err = NULL;

  CHECK (open_v1 (&root, 0, 1) == 0);
  CHECK (failed_with (sbx_cgroup_create (&root, "fresh", &l, &cg, &err), &err, SBX_E_SYSTEM,
                      ENOENT)
         == 0);
  for (size_t c = 0; c < ARRAY_SIZE (v1_names); c++)
    {
      char rel[64];
      snprintf (rel, sizeof rel, "%s/sbx/fresh", v1_names[c]);
      CHECK (!exists (rel));
    }
  for (int c = 0; c < SBX_CG_NCTRL; c++)
    CHECK (cg.dir[c] == -1);
  sbx_cgroup_root_close (&root);
  return 0;
}

/* A name taken in one hierarchy: error, the directories made before it
   are removed, the one that was there stays. */
TMP_TEST (test_v1_create_existing)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  struct sbx_cgroup_limits l = {MIB, 1000, 10};
  sbx_error_t *err = NULL;

  CHECK (open_v1 (&root, 0, 0) == 0);
  CHECK (mkdir_at ("pids/sbx/taken") == 0);
  CHECK (failed_with (sbx_cgroup_create (&root, "taken", &l, &cg, &err), &err, SBX_E_SYSTEM,
                      EEXIST)
         == 0);
  CHECK (!exists ("memory/sbx/taken"));
  CHECK (exists ("pids/sbx/taken"));
  CHECK (!exists ("cpu/sbx/taken") && !exists ("cpuacct/sbx/taken")
         && !exists ("freezer/sbx/taken"));
  sbx_cgroup_root_close (&root);
  return 0;
}

TMP_TEST (test_v1_destroy_and_list)
{
  struct sbx_cgroup_root root;
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  char names[512] = "";

  CHECK (open_v1 (&root, 0, 1) == 0);
  for (size_t c = 0; c < ARRAY_SIZE (v1_names); c++)
    {
      char rel[64];
      if (c == SBX_CG_CPUACCT)
        continue;
      snprintf (rel, sizeof rel, "%s/sbx/empty", v1_names[c]);
      CHECK (mkdir_at (rel) == 0);
    }
  CHECK (mkdir_at ("memory/sbx/other") == 0 && mkdir_at ("pids/sbx/only-pids") == 0);
  CHECK (put ("memory/sbx/memory.limit_in_bytes", "") == 0);
  /* Listed from every hierarchy, each name once: a daemon that died half
     way through a sandbox's mkdirs or rmdirs left it in some only. */
  CHECK (sbx_cgroup_list (&root, list_collect, names, &err) == 0);
  CHECK_STR (sorted (names), "empty only-pids other");
  CHECK (sbx_cgroup_open (&root, "empty", &cg, &err) == 0);
  CHECK (sbx_cgroup_destroy (&root, &cg, &err) == 0);
  for (size_t c = 0; c < ARRAY_SIZE (v1_names); c++)
    {
      char rel[64];
      snprintf (rel, sizeof rel, "%s/sbx/empty", v1_names[c]);
      CHECK (!exists (rel));
    }
  CHECK (exists ("memory/sbx/other") && exists ("pids/sbx/only-pids"));
  sbx_cgroup_root_close (&root);
  return 0;
}

/*============================ The real hierarchy ======================= */

/* Detection on /sys/fs/cgroup, with an empty parent name so that nothing
   is created or written (v1 opens only; v2 would write
   cgroup.subtree_control, so it is not opened). */
static int
test_detect_host (void)
{
  struct sbx_cgroup_root root;
  sbx_error_t *err = NULL;
  struct statfs sfs;

  if (statfs ("/sys/fs/cgroup", &sfs) < 0)
    return 77;
  if ((unsigned long) sfs.f_type == CGROUP2_SUPER_MAGIC)
    {
      printf ("# /sys/fs/cgroup is cgroup v2: detection not exercised\n");
      return 77;
    }
  CHECK (sbx_cgroup_root_open (&root, "/sys/fs/cgroup", "", 0, &err) == 0);
  CHECK (root.mode == SBX_CGROUP_V1);
  for (size_t c = 0; c < ARRAY_SIZE (v1_names); c++)
    {
      char path[64];
      struct stat a, b;
      snprintf (path, sizeof path, "/sys/fs/cgroup/%s", v1_names[c]);
      if (c == SBX_CG_CPUACCT || c == SBX_CG_FREEZER)
        if (stat (path, &b) < 0)
          {
            CHECK (root.parent[c] == -1);
            continue;
          }
      CHECK (root.parent[c] > 2);
      CHECK (fstat (root.parent[c], &a) == 0 && stat (path, &b) == 0);
      CHECK (a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    }
  CHECK (root.v1_memsw == (access ("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes", F_OK) == 0));
  sbx_cgroup_root_close (&root);
  /* Its cgroup2 mount for systemd, on hybrid hosts, is not the mount root. */
  if (statfs ("/sys/fs/cgroup/unified", &sfs) == 0)
    CHECK ((unsigned long) sfs.f_type == CGROUP2_SUPER_MAGIC);
  return 0;
}

/* A forced mode wins over detection: forcing v1 on the real (v1) tree
   with an empty parent opens the same hierarchies; forcing v2 on a fake
   tree was tested above. Without force, a plain directory is v1 and
   fails for want of hierarchies. */
TMP_TEST (test_detect_plain_directory)
{
  struct sbx_cgroup_root root;
  sbx_error_t *err = NULL;

  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "", 0, &err), &err, SBX_E_SYSTEM, ENOENT)
         == 0);
  /* Hierarchies that are plain directories are refused when detecting. */
  for (size_t c = 0; c < ARRAY_SIZE (v1_names); c++)
    CHECK (mkdir_at (v1_names[c]) == 0);
  CHECK (failed_with (sbx_cgroup_root_open (&root, tmp, "", 0, &err), &err, SBX_E_SYSTEM, 0) == 0);
  /* Forced, they are taken. */
  CHECK (sbx_cgroup_root_open (&root, tmp, "", SBX_CGROUP_V1, &err) == 0);
  CHECK (same_file (root.parent[SBX_CG_MEMORY], "memory"));
  sbx_cgroup_root_close (&root);
  return 0;
}

int
main (void)
{
  RUN (test_v2_root_open);
  RUN (test_v2_root_open_nested_parent);
  RUN (test_v2_root_open_failures);
  RUN (test_v2_set_limits);
  RUN (test_v2_set_limits_optional_files);
  RUN (test_v2_stats);
  RUN (test_v2_attach);
  RUN (test_names);
  RUN (test_v2_create_cleans_up);
  RUN (test_v2_create_existing);
  RUN (test_v2_destroy);
  RUN (test_v2_list);
  RUN (test_v2_kill);
  RUN (test_v2_kill_without_cgroup_kill);
  RUN (test_v1_root_open);
  RUN (test_v1_root_open_optional_hierarchies);
  RUN (test_v1_set_limits);
  RUN (test_v1_set_limits_without_memsw);
  RUN (test_v1_memsw_goes_first_when_memory_fails);
  RUN (test_v1_stats);
  RUN (test_v1_comounted_cpu_cpuacct);
  RUN (test_v1_attach);
  RUN (test_v1_kill);
  RUN (test_v1_create_cleans_up);
  RUN (test_v1_create_existing);
  RUN (test_v1_destroy_and_list);
  RUN (test_detect_host);
  RUN (test_detect_plain_directory);
  return tap_done ();
}
