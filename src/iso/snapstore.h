/* sbx: the snapshot store, kept by the privileged parent (iso/snapstore.c). */
#ifndef SBX_ISO_SNAPSTORE_H
#define SBX_ISO_SNAPSTORE_H

#include <sys/types.h>

#include "iso/copy.h"
#include "util/error.h"

/* Owners in the store: this base + the id inside the sandbox. */
#define SBX_SNAPSHOT_ID_BASE 0xFFFE0000u
#define SBX_SNAPSHOT_NAME_MAX 64

/* 1 when name is 1..64 of [A-Za-z0-9._-], not starting with . or -. */
int sbx_snapshot_name_valid (const char *name);
/* The daemon's own entries (a fork's memory, core/fork.c; a hibernated
   VM's, core/hibernate.c): this prefix and [a-z0-9-]. A client's name
   cannot start with a dot, so no client can name, list or use one. */
#define SBX_SNAPSHOT_INTERNAL_PREFIX ".sbx-"
/* A hibernated VM's memory (".sbx-hib-<sandbox id>"): the one entry of
   the daemon's own that outlives it, for the next daemon's resume (the
   core removes it when it ends the record, core/adopt.c). */
#define SBX_SNAPSHOT_HIBERNATE_PREFIX SBX_SNAPSHOT_INTERNAL_PREFIX "hib-"
/* 1 for a client's name or one of the daemon's own. */
int sbx_snapstore_name_valid (const char *name);
/* Make or open STATE/snapshots (root, 0700). */
int sbx_snapstore_open (const char *state_dir, int *out, sbx_error_t **err);
/* Save a (frozen) sandbox's disk as tenant's snapshot `name` (CONFLICT
   when it exists), the copier bounded by lim and started with enter (a
   cgroup of its own to be charged to: iso/sandbox.c). */
struct sbx_iso_box;
struct sbx_copy_limits;
int sbx_snapstore_save (int store, const struct sbx_iso_box *src, const char *tenant,
                        const char *name, const struct sbx_copy_limits *lim,
                        int (*enter) (void *arg, pid_t pid), void *enter_arg,
                        struct sbx_copy_result *res, sbx_error_t **err);
/* Copy snapshot `name` into a new sandbox's disk (enter: join its cgroup). */
int sbx_snapstore_load (int store, const char *tenant, const char *name, int dst_disk,
                        uid_t dst_base, const struct sbx_copy_limits *lim,
                        int (*enter) (void *arg, pid_t pid), void *enter_arg,
                        struct sbx_copy_result *res, sbx_error_t **err);
/* Stage snapshot `name`, idmapped to the ids of a sandbox being made (base)
   and read-only, at /tmp in its mount namespace (pidfd: its init, not yet
   released), for init to layer under its disk (SBX_CONFIG_SNAPSHOT_LAYER). */
int sbx_snapstore_stage (int store, const char *tenant, const char *name, int pidfd, uid_t base,
                         sbx_error_t **err);
/* A VM snapshot (iso/vm.c): fill writes its files into dir (a hidden
   directory, renamed to `name` when fill succeeds, removed when it fails). */
int sbx_snapstore_save_with (int store, const char *tenant, const char *name,
                             int (*fill) (int dir, void *arg), void *arg, sbx_error_t **err);
/* Open file `file` of snapshot `name` read-only (-1 and NOT_FOUND when
   there is none). */
int sbx_snapstore_open_file (int store, const char *tenant, const char *name, const char *file,
                             sbx_error_t **err);
int sbx_snapstore_remove (int store, const char *tenant, const char *name, sbx_error_t **err);

#endif
