/* sbx: cgroups for sandboxes, v1 (legacy/hybrid hosts) and v2 (unified),
 * detected at run time.
 *
 * v2: one directory per sandbox under PARENT, limits in memory.max,
 *     memory.swap.max, pids.max, cpu.max; cgroup.kill ends everything.
 * v1: one directory per sandbox in each of the memory, pids, cpu, cpuacct
 *     and freezer hierarchies under PARENT; limits in memory.limit_in_bytes
 *     (+ memsw when swap accounting exists), pids.max, cpu.cfs_quota_us.
 *
 * All paths are opened relative to directory fds taken once at start.
 */
#ifndef SBX_ISO_CGROUP_H
#define SBX_ISO_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

enum sbx_cgroup_mode
{
  SBX_CGROUP_V1 = 1,
  SBX_CGROUP_V2 = 2,
};

enum sbx_cgroup_ctrl
{
  SBX_CG_MEMORY,
  SBX_CG_PIDS,
  SBX_CG_CPU,
  SBX_CG_CPUACCT,
  SBX_CG_FREEZER,
  SBX_CG_NCTRL,
};

struct sbx_cgroup_limits
{
  uint64_t memory_bytes;
  uint32_t cpu_milli; /* thousandths of a CPU */
  uint32_t pids;
};

/* The host side: where sandboxes' cgroups go. */
struct sbx_cgroup_root
{
  enum sbx_cgroup_mode mode;
  /* v2: parent[0] is the PARENT directory. v1: one per controller, -1 when a
     controller is unavailable (cpuacct and freezer are optional; when cpu and
     cpuacct are co-mounted both point at the same hierarchy). */
  int parent[SBX_CG_NCTRL];
  int duplicate[SBX_CG_NCTRL]; /* same hierarchy as an earlier controller */
  int hierarchy[SBX_CG_NCTRL]; /* where parent lives (to remove it at the end) */
  char parent_name[256];
  int v1_memsw; /* swap accounting files exist */
};

/* One sandbox's cgroup: directory fds in each hierarchy (owned). */
struct sbx_cgroup
{
  int dir[SBX_CG_NCTRL];
  char name[64];
};

struct sbx_cgroup_stats
{
  uint64_t cpu_usec;
  uint64_t memory_bytes;
  uint64_t memory_peak_bytes;
  uint64_t oom_kills;
  uint64_t pids;
  uint64_t limit_hits; /* v2: times usage reached memory.max (0 on v1) */
};

/* Detect the mode under `mount_root` (normally /sys/fs/cgroup) and open or
   create `parent_name` there. `force_mode` 0 detects; tests pass a mode to
   run against a directory tree of their own. */
int sbx_cgroup_root_open (struct sbx_cgroup_root *root, const char *mount_root,
                          const char *parent_name, enum sbx_cgroup_mode force_mode,
                          sbx_error_t **err);
void sbx_cgroup_root_close (struct sbx_cgroup_root *root);
/* At the daemon's end: remove the (empty) parent directories it made, and
   close. Busy ones (something else lives there) are left alone. */
void sbx_cgroup_root_remove (struct sbx_cgroup_root *root);

/* On failure out->name is empty, unless directories were made and could
   not be removed again: then it names them, for sbx_cgroup_remove later. */
int sbx_cgroup_create (const struct sbx_cgroup_root *root, const char *name,
                       const struct sbx_cgroup_limits *limits, struct sbx_cgroup *out,
                       sbx_error_t **err);
/* rmdir a sandbox cgroup by name in every hierarchy (missing counts as
   removed). */
int sbx_cgroup_remove (const struct sbx_cgroup_root *root, const char *name, sbx_error_t **err);
/* Open an existing sandbox cgroup (for cleanup after a restart). */
int sbx_cgroup_open (const struct sbx_cgroup_root *root, const char *name, struct sbx_cgroup *out,
                     sbx_error_t **err);
int sbx_cgroup_set_limits (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg,
                           const struct sbx_cgroup_limits *limits, sbx_error_t **err);
/* Move pid into the cgroup (every hierarchy). */
int sbx_cgroup_attach (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, pid_t pid,
                       sbx_error_t **err);
/* v2 only: an O_DIRECTORY fd for clone3(CLONE_INTO_CGROUP), else -1. */
int sbx_cgroup_clone_fd (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg);
/* SIGKILL every process in the cgroup and wait (bounded) until it is empty. */
/* 1 if pid (host pid namespace) is a process of the cgroup. The kernel
   keeps a sandbox's processes there: they cannot leave it. */
/* Give every thread in the cgroup this nice value (best effort). */
void sbx_cgroup_renice (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, int prio);
int sbx_cgroup_has_pid (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, pid_t pid);
int sbx_cgroup_kill (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg,
                     sbx_error_t **err);
/* Freeze (frozen 1) or thaw every task of the cgroup: v2 cgroup.freeze,
   v1 the freezer controller (SBX_E_UNAVAILABLE without one). Returns once
   the kernel reports the new state (bounded; a freeze that does not
   complete is undone and fails). Memory stays resident. A frozen task
   does not act on SIGKILL on v1 until thawed: sbx_cgroup_kill thaws. */
int sbx_cgroup_freeze (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg, int frozen,
                       sbx_error_t **err);
int sbx_cgroup_is_frozen (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg);
/* rmdir everywhere (retrying briefly while the kernel finishes) and close. */
int sbx_cgroup_destroy (const struct sbx_cgroup_root *root, struct sbx_cgroup *cg,
                        sbx_error_t **err);
void sbx_cgroup_close (struct sbx_cgroup *cg);
int sbx_cgroup_stats (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg,
                      struct sbx_cgroup_stats *out, sbx_error_t **err);
/* Just the OOM-kill counter (cheap: one file). */
uint64_t sbx_cgroup_oom_kills (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg);
/* v2: the times usage reached memory.max (memory.events "max"); 0 on v1. */
uint64_t sbx_cgroup_limit_hits (const struct sbx_cgroup_root *root, const struct sbx_cgroup *cg);
/* Names of the sandbox cgroups that exist under the parent (in any
   hierarchy), for cleanup of leftovers; calls fn once for each. */
int sbx_cgroup_list (const struct sbx_cgroup_root *root, void (*fn) (const char *name, void *arg),
                     void *arg, sbx_error_t **err);

#endif
