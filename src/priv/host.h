/* sbx: what the front end asks the privileged parent for (priv/client.c).
 *
 * The front end holds, per sandbox, its slot, init's pid, a pidfd and the
 * control socket (struct sbx_iso_box with root, disk and cgroup unset);
 * everything that needs privilege goes through these calls.
 */
#ifndef SBX_PRIV_HOST_H
#define SBX_PRIV_HOST_H

#include <stdint.h>

#include "iso/engine.h"
#include "iso/fs.h"
#include "util/error.h"

/* What the parent said at HELLO: the host's cgroups and kernel. */
struct sbx_host_info
{
  uint32_t cgroup_mode;
  uint32_t landlock_abi;
  uint32_t kernel_paths; /* SBX_KERNEL_* (iso/kernel.h) */
  char kernel_release[65];
  char snapshot_copy_reason[160];
  char cgroup_parent[256];
  char cgroup_daemon[256];
  char cgroup_why[256];
  int32_t kernel_settings[16]; /* iso/kernel_settings.h */
  uint8_t seal_key[32];        /* priv/seal_key.h; wiped once the store has it */
  uint64_t anchor_remade;      /* priv/audit_anchor.h: 0, or the seq it was remade at + 1 */
};

/* Overwrite the sealing key in what HELLO said (the store keeps its own
   copy). */
void sbx_host_forget_seal_key (void);

/* The audit log's last synced record, for the parent's anchor
   (priv/audit_anchor.h); no answer. */
void sbx_host_audit_head (uint64_t seq, const unsigned char hash[32]);

/* Talk to the parent over `fd` (the first channel); HELLO. */
int sbx_host_connect (int fd, struct sbx_host_info *info, sbx_error_t **err);
void sbx_host_disconnect (void);
/* What HELLO said. */
const struct sbx_host_info *sbx_host_get_info (void);
/* Tell the parent we serve (a death from now on is a crash, not a failed
   start). */
int sbx_host_ready (sbx_error_t **err);

struct sbx_host_create
{
  uint32_t slot;
  const char *id;
  const char *template_name;
  struct sbx_cgroup_limits limits;
  uint64_t disk_bytes;
  int background;
  const char *snapshot_tenant, *snapshot; /* NULL: none; else a layer */
  int isolation; /* enum sbx_isolation */
};
int sbx_host_create (const struct sbx_host_create *req, struct sbx_iso_box *box,
                     sbx_error_t **err);
/* Kill the sandbox and forget it; closes box's fds. */
int sbx_host_destroy (uint32_t slot, struct sbx_iso_box *box, sbx_error_t **err);
int sbx_host_set_limits (uint32_t slot, const struct sbx_cgroup_limits *limits, sbx_error_t **err);
int sbx_host_set_disk (uint32_t slot, uint64_t bytes, sbx_error_t **err);
int sbx_host_set_foreground (uint32_t slot, sbx_error_t **err);
/* Fork: copy the frozen sandbox's disk into the new one's. */
struct sbx_copy_result;
int sbx_host_copy_disk (uint32_t src_slot, uint32_t dst_slot, struct sbx_copy_result *res,
                        sbx_error_t **err);
/* Snapshots: op is SBX_PRIV_SNAP_SAVE (slot frozen), LOAD or REMOVE (slot
   unused); res may be NULL. */
int sbx_host_snapshot (uint32_t op, uint32_t slot, const char *tenant, const char *name,
                       struct sbx_copy_result *res, sbx_error_t **err);
/* The same, a save bounded by what the tenant's quota leaves (0: none). */
int sbx_host_snapshot_max (uint32_t op, uint32_t slot, const char *tenant, const char *name,
                           uint64_t max_bytes, struct sbx_copy_result *res, sbx_error_t **err);
/* Pause (frozen 1) or resume every process of the sandbox. */
int sbx_host_freeze (uint32_t slot, int frozen, sbx_error_t **err);
int sbx_host_stats (uint32_t slot, struct sbx_iso_stats *out, sbx_error_t **err);
/* How init ended, when it ended on its own: 1 with *wstatus as waitpid(2)
   gives it, 0 when unknown or still running. */
int sbx_host_init_status (uint32_t slot, int *wstatus);
/* OOM kills so far (0 when unknown). */
uint64_t sbx_host_oom_kills (uint32_t slot);
int sbx_host_adopt (uint32_t slot, const char *id, pid_t init_pid, struct sbx_iso_box *box,
                    sbx_error_t **err);
/* Every sandbox not adopted by now is killed. */
int sbx_host_adopt_done (sbx_error_t **err);
/* Templates (iso/tmpl.h): build from an archive in a file (fd, read from
   offset 0), or remove one. */
int sbx_host_template_build (int fd, const char *name, const char *owner, uint32_t format,
                             uint64_t max_bytes, sbx_error_t **err);
int sbx_host_template_remove (const char *name, sbx_error_t **err);
/* The recipe build cache: its entries and disk bytes, or (prune) what
   emptying it removed; SBX_E_CONFLICT while a build uses it. */
int sbx_host_template_cache (int prune, uint64_t *entries, uint64_t *bytes, sbx_error_t **err);

/* Files: ctx->slot names the sandbox; ctx->uid/gid the user; ctx->copier
   runs the copies the parent asks for. Same contracts as iso/fs.h. */
int sbx_host_fs_open_read (const struct sbx_fs_ctx *ctx, const char *path, uint64_t *size,
                           sbx_error_t **err);
int sbx_host_fs_stat (const struct sbx_fs_ctx *ctx, const char *path, struct sbx_fs_entry *out,
                      sbx_error_t **err);
int sbx_host_fs_list (const struct sbx_fs_ctx *ctx, const char *path, int depth,
                      size_t max_entries, int (*fn) (const struct sbx_fs_entry *e, void *arg),
                      void *arg, int *truncated, sbx_error_t **err);
int sbx_host_fs_mkdir (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode, int parents,
                       sbx_error_t **err);
int sbx_host_fs_move (const struct sbx_fs_ctx *ctx, const char *from, const char *to,
                      int overwrite, sbx_error_t **err);
int sbx_host_fs_remove (const struct sbx_fs_ctx *ctx, const char *path, int recursive,
                        sbx_error_t **err);
/* Uploads: up->pipe takes the body; commit or abort end it. */
int sbx_host_fs_upload_begin (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode,
                              int parents, struct sbx_fs_upload *up, sbx_error_t **err);
/* The same with the file's metadata (iso/fs.h; may be NULL): a VM sandbox
   answers SBX_E_NOT_IMPLEMENTED for any. */
int sbx_host_fs_upload_begin_meta (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode,
                                   int parents, const struct sbx_fs_meta *meta,
                                   struct sbx_fs_upload *up, sbx_error_t **err);
int sbx_host_fs_upload_write (struct sbx_fs_upload *up, const void *data, size_t len,
                              sbx_error_t **err);
int sbx_host_fs_upload_commit (struct sbx_fs_upload *up, sbx_error_t **err);
void sbx_host_fs_upload_abort (struct sbx_fs_upload *up);

#endif
