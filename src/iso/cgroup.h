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

#include <stddef.h>
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
  int hierarchy[SBX_CG_NCTRL]; /* where parent lives (to remove it at the end): v2, the base */
  int first_made[SBX_CG_NCTRL]; /* index of the first component of parent we made, or -1 */
  char parent_name[256];        /* relative to hierarchy[] */
  char base_path[256];          /* v2: the base's path from the root, no leading '/' ("": root) */
  int v1_memsw; /* swap accounting files exist */
};

/* v2: where a daemon's sandboxes go, worked out from the cgroup it was
   started in (sbx_cgroup_place); every path from the root, without the
   leading '/'. The rules (docs/architecture.md, Cgroups):
   - --cgroup-parent /P (absolute): P, wherever the daemon runs;
   - the daemon alone in its cgroup C (a systemd service with Delegate=yes,
     a container's own cgroup): it moves itself into C/daemon, a leaf
     (v2 allows no processes in a cgroup that gives controllers to its
     children), and sandboxes go under C/PARENT;
   - already in a leaf named "daemon" (systemd's DelegateSubgroup=daemon,
     a restart into it): likewise, with C its parent;
   - the root cgroup, or C shared with other processes (started by hand
     from a login shell): /PARENT at the root of the hierarchy. */
#define SBX_CGROUP_DAEMON_LEAF "daemon"
struct sbx_cgroup_place
{
  char base[256];   /* the subtree that is ours ("" : the root) */
  char parent[256]; /* PARENT, relative to base */
  char daemon[256]; /* the daemon's cgroup once placed */
  int move_to_leaf; /* the daemon moves into base/daemon first (sbx_cgroup_enter) */
  char why[800];    /* how it was chosen, for the log */
};
/* own: the daemon's cgroup path ("/..."), self: its pid (tests pass both;
   sbx_cgroup_place reads /proc/self/cgroup). Nothing is changed. */
int sbx_cgroup_place_from (const char *mount_root, const char *own, pid_t self,
                           const char *parent_name, struct sbx_cgroup_place *out,
                           sbx_error_t **err);
int sbx_cgroup_place (const char *mount_root, const char *parent_name,
                      struct sbx_cgroup_place *out, sbx_error_t **err);
/* Move this process into base/daemon when the place says so. */
int sbx_cgroup_enter (const char *mount_root, const struct sbx_cgroup_place *place,
                      sbx_error_t **err);
/* Undo sbx_cgroup_enter (a refused start, once its sandboxes' parent is
   gone): back into the cgroup it was started in, the leaf removed. */
int sbx_cgroup_leave (const char *mount_root, const struct sbx_cgroup_place *place);
/* The cgroup holder (`sbxd --cgroup-holder`, sbx-sandboxes.service): a
   process alone in its cgroup moves into its leaf and gives the cgroup's
   children the controllers; the daemon then makes its sandboxes' parent
   there (--cgroup-parent /that/cgroup/sbx). 1 (and nothing done) on
   cgroup v1 and hybrid hosts. */
int sbx_cgroup_hold (const char *mount_root, sbx_error_t **err);

/* For GET /v1/info: the sandboxes' parent from the root ("/..."; v1: the
   parent under each controller's hierarchy). */
void sbx_cgroup_root_describe (const struct sbx_cgroup_root *root, char *parent, size_t cap);

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
/* The same with parent_name under base (v2; "" is the root): nothing
   above base is written to. */
int sbx_cgroup_root_open_at (struct sbx_cgroup_root *root, const char *mount_root,
                             const char *base, const char *parent_name,
                             enum sbx_cgroup_mode force_mode, sbx_error_t **err);
void sbx_cgroup_root_close (struct sbx_cgroup_root *root);
/* At the daemon's end: remove the (empty) parent directories it made, and
   close. Busy ones (something else lives there) are left alone. */
void sbx_cgroup_root_remove (struct sbx_cgroup_root *root);

/* How long sbx_cgroup_kill waits for the cgroup to empty: it looks after
   5 ms, then twice as long each time, up to 100 ms between looks. */
#define SBX_CGROUP_KILL_WAIT_MS 10000
#define SBX_CGROUP_KILL_STEP_MAX_MS 100

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
