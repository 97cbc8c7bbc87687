/* sbx: the running kernel, probed once at the daemon's start.
 *
 * As bubblewrap and crun do, sbx asks the kernel for each feature it uses
 * instead of trusting a version number (distributions backport: RHEL 9's
 * 5.14 has features of 5.19). A feature below the floor that sbx cannot do
 * without is a one-line refusal at start, naming the feature, the release
 * that brought it and this kernel's release; never an EINVAL from a
 * sandbox's setup later. A feature with a fallback picks its path here,
 * once; GET /v1/info reports every choice (docs/security.md, "Kernel
 * floor").
 */
#ifndef SBX_ISO_KERNEL_H
#define SBX_ISO_KERNEL_H

#include <stdint.h>

#include "iso/kernel_settings.h"
#include "util/error.h"

/* The oldest release whose features sbx needs, all of them (Ubuntu 22.04's
   5.15): see sbx_kernel_probe for the list. */
#define SBX_KERNEL_FLOOR "5.15"

enum sbx_kernel_path
{
  /* overlayfs takes a layer by descriptor (FSCONFIG_SET_FD, Linux 6.13);
     else by its /proc/self/fd path as a string. */
  SBX_KERNEL_OVERLAY_LAYER_FDS = 1u << 0,
  /* overlayfs takes lower layers one per call ("lowerdir+", Linux 6.8);
     else all of them in one "lowerdir=a:b:c" of mount(2)'s options
     (fsconfig's strings stop at 256 bytes, mount(2)'s data at a page). */
  SBX_KERNEL_OVERLAY_APPEND = 1u << 1,
  /* The snapshot store's filesystem takes idmapped mounts (ext4, xfs,
     btrfs: 5.12-5.15; tmpfs: 6.3): snapshots are shared lower layers;
     else each sandbox made from one gets a copy. */
  SBX_KERNEL_SNAPSHOT_LAYERS = 1u << 2,
  /* cgroup v2's cgroup.kill (Linux 5.14); else every process is signalled
     until the cgroup is empty. */
  SBX_KERNEL_CGROUP_KILL = 1u << 3,
};

struct sbx_kernel
{
  char release[65];  /* uname -r */
  uint32_t paths;    /* SBX_KERNEL_* */
  uint32_t landlock_abi;
  /* Why snapshots are copied ("" when they are layers). */
  char snapshot_copy_reason[160];
  /* The settings of iso/kernel_settings.h, read at start. */
  int32_t settings[SBX_KERNEL_SETTINGS_MAX];
};

/* The floor: every feature sbx cannot do without (namespaces, openat2,
   clone3, close_range, pidfds, the mount API with mount_setattr, seccomp,
   Landlock), and the paths that depend on the kernel alone. Fails with one
   line naming what is missing. Nothing is made on the host. */
int sbx_kernel_probe (struct sbx_kernel *k, sbx_error_t **err);

/* The paths that depend on the state directory's filesystem (overlay
   layers, snapshot idmaps), probed in a scratch directory under
   state_dir (an fd) that is removed again. */
void sbx_kernel_probe_state (struct sbx_kernel *k, int state_dir);

/* The process-wide result (read-only once the daemon serves). */
extern struct sbx_kernel sbx_kernel;

/* For GET /v1/info: what each path is, in words. */
const char *sbx_kernel_describe (uint32_t paths, enum sbx_kernel_path path);

#endif
