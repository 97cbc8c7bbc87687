/* sbx: is a uid range or a cgroup parent in use by another daemon's
 * sandboxes? The host-wide names a daemon holds (sbxd.c) go away with it,
 * but its sandboxes do not (they survive restarts): a second daemon
 * started meanwhile on the same cgroup parent would remove them as
 * leftovers, and one on the same uid range would give its own sandboxes
 * their uids (then they could signal and ptrace each other). So at start
 * the kernel's state decides: every live process in our uid range must
 * live under our cgroup parent, and every process under our cgroup parent
 * must run with a uid of our range. Our own sandboxes left running pass;
 * another daemon's fail one test or the other. */
#include "iso/inuse.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"

static int
read_small (const char *path, char *buf, size_t cap)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return -1;
  n = read (fd, buf, cap - 1);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return 0;
}

/* 1 if pid is on its way out (PF_EXITING in /proc/PID/stat's flags): a
   v1 hierarchy shows such a process in its root cgroup already
   (proc_cgroup_show prints "/" for it), so a sandbox's process dying as we
   look would seem to live outside our parent. */
static int
exiting (long pid)
{
  char path[64], buf[1024], *end;
  unsigned long flags = 0;
  int field;

  snprintf (path, sizeof path, "/proc/%ld/stat", pid);
  if (read_small (path, buf, sizeof buf) < 0)
    return 1;
  /* comm may hold spaces and parentheses: the fields start after the last ')'. */
  end = strrchr (buf, ')');
  if (end == NULL)
    return 1;
  /* state ppid pgrp session tty_nr tpgid flags: flags is the 7th after it. */
  for (field = 0; field < 7 && end != NULL; field++)
    end = strchr (end + 1, ' ');
  if (end == NULL)
    return 1;
  flags = strtoul (end + 1, NULL, 10);
  return (flags & 0x00000004UL /* PF_EXITING */) != 0;
}

/* Real uid of pid, or -1 when it is gone. A zombie, or a process already
   exiting, counts as gone: it has left its cgroups (the kernel shows it in
   the root). */
static long long
uid_of (long pid)
{
  char path[64], buf[4096], *line;

  if (exiting (pid))
    return -1;
  snprintf (path, sizeof path, "/proc/%ld/status", pid);
  if (read_small (path, buf, sizeof buf) < 0)
    return -1;
  line = strstr (buf, "\nState:");
  if (line == NULL || strchr ("ZX", line[8 + strspn (line + 8, " \t")]) != NULL)
    return -1;
  line = strstr (buf, "\nUid:");
  if (line == NULL)
    return -1;
  return strtoll (line + 5, NULL, 10);
}

/* 1 if pid's cgroup (the unified one, or v1's pids) is under /parent/. */
static int
under_parent (long pid, int v2, const char *parent)
{
  char path[64], buf[8192], want[600], *line, *save = NULL;

  snprintf (path, sizeof path, "/proc/%ld/cgroup", pid);
  if (read_small (path, buf, sizeof buf) < 0)
    return 1; /* gone: not a witness against us */
  snprintf (want, sizeof want, "/%s/", parent);
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char *ctrl = strchr (line, ':'), *cgpath;
      if (ctrl == NULL || (cgpath = strchr (ctrl + 1, ':')) == NULL)
        continue;
      *cgpath++ = '\0';
      ctrl++;
      if (v2 ? ctrl[0] == '\0' : strcmp (ctrl, "pids") == 0)
        return strncmp (cgpath, want, strlen (want)) == 0;
    }
  return 0;
}

/* A witness against us, which a second look may clear: a process of our
   uid range outside our parent (one of ours between its id switch and its
   cgroup join), or a root process under our parent (a helper or a sandbox
   still in setup of a predecessor killed an instant ago): both end with
   that predecessor. */
struct stranger
{
  long pid;
  long long uid;
  int in_parent; /* 1: under our parent, as root; 0: our uids, elsewhere */
};

/* One look: 0 when all is ours; 1 with *who when the only strangers may
   be passing (see struct stranger); -1 with *err when /proc or the
   cgroup cannot be read. */
static int
check_once (const char *cgroup_mount, const char *parent, uid_t lo, uint64_t hi,
            struct stranger *who, sbx_error_t **err)
{
  char dirpath[700], procs[1024], buf[65536];
  struct dirent *de;
  int v2;
  DIR *d;

  snprintf (dirpath, sizeof dirpath, "%s/cgroup.controllers", cgroup_mount);
  v2 = access (dirpath, F_OK) == 0;

  /* Our uid range: only under our cgroup parent. */
  d = opendir ("/proc");
  if (d == NULL)
    return sbx_err_sys (err, errno, "/proc");
  while ((de = readdir (d)) != NULL)
    {
      long pid;
      long long uid;
      if (!isdigit ((unsigned char) de->d_name[0]))
        continue;
      pid = strtol (de->d_name, NULL, 10);
      uid = uid_of (pid);
      if (uid < (long long) lo || uid >= (long long) hi || under_parent (pid, v2, parent))
        continue;
      closedir (d);
      who->pid = pid;
      who->uid = uid;
      who->in_parent = 0;
      return 1;
    }
  closedir (d);

  /* Our cgroup parent: only our uid range. */
  snprintf (dirpath, sizeof dirpath, "%s%s/%s", cgroup_mount, v2 ? "" : "/pids", parent);
  d = opendir (dirpath);
  if (d == NULL)
    return 0; /* not made yet: nobody's */
  while ((de = readdir (d)) != NULL)
    {
      char *line, *save = NULL;
      if (de->d_type != DT_DIR || de->d_name[0] == '.')
        continue;
      snprintf (procs, sizeof procs, "%s/%s/cgroup.procs", dirpath, de->d_name);
      if (read_small (procs, buf, sizeof buf) < 0)
        continue;
      for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
        {
          long pid = strtol (line, NULL, 10);
          long long uid = uid_of (pid);
          if (uid < 0 || (uid >= (long long) lo && uid < (long long) hi))
            continue;
          /* another daemon's sandbox runs with its own range's ids: that
             is no passing state */
          closedir (d);
          who->pid = pid;
          who->uid = uid;
          who->in_parent = 1;
          if (uid == 0)
            return 1;
          return sbx_err (err, SBX_E_CONFLICT,
                          "another daemon is using cgroup parent `%s`: its process %ld there runs"
                          " as uid %lld, outside this daemon's range %u..%llu (choose another with"
                          " --cgroup-parent)",
                          parent, pid, uid, (unsigned) lo, (unsigned long long) hi);
        }
    }
  closedir (d);
  return 0;
}

int
sbx_iso_check_unshared (const char *cgroup_mount, const char *parent, uid_t lo, uint64_t hi,
                        sbx_error_t **err)
{
  struct stranger who = {0, 0, 0};
  int tries, rc = 0;

  /* A predecessor killed with -9 leaves, for an instant, processes that
     look like strangers and die with it (struct stranger). Another
     daemon's stay: one that is still there after 2 s is a stranger. */
  for (tries = 0; tries < 40; tries++)
    {
      rc = check_once (cgroup_mount, parent, lo, hi, &who, err);
      if (rc <= 0)
        return rc;
      usleep (50 * 1000);
    }
  if (!who.in_parent)
    return sbx_err (err, SBX_E_CONFLICT,
                    "another daemon is using uid base %u: its process %ld (uid %lld) lives"
                    " outside cgroup parent `%s` (choose another with --uid-base)",
                    (unsigned) lo, who.pid, who.uid, parent);
  return sbx_err (err, SBX_E_CONFLICT,
                  "another daemon is using cgroup parent `%s`: its process %ld there runs as"
                  " root, outside this daemon's range %u..%llu (choose another with"
                  " --cgroup-parent)",
                  parent, who.pid, (unsigned) lo, (unsigned long long) hi);
}
