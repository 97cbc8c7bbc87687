/* sbx: the content of template base's VM image (iso/vm_image_base.c),
 * private to iso/vm_image.c. */
#ifndef SBX_ISO_VM_IMAGE_BASE_H
#define SBX_ISO_VM_IMAGE_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define IMAGE_FORMAT "sbx-vm-image 5" /* bump when what an image holds changes */

/* The host's installed packages (dpkg's status). */
struct sbx_vm_pkgs;
struct sbx_vm_pkgs *sbx_vm_pkgs_load (sbx_error_t **err);
void sbx_vm_pkgs_free (struct sbx_vm_pkgs *p);

/* What a built-in template adds to base's image (iso/vm_image_code.c):
   more packages (their dependencies come with them) and one file of
   sbx's own. NULL: base itself. */
struct sbx_vm_extra
{
  const char *name;             /* in the key: the template's name */
  const char *const *packages;  /* NULL-terminated */
  const char *const *skip;      /* not taken even as their dependency; NULL-terminated */
  const char *file;             /* relative path in the image, or NULL */
  const void *data;
  size_t len;
};

/* KEY of base's image (plus extra's): the format, the packages it holds
   with their versions, the generated /etc, the bound host files' sizes
   and times, extra's file. */
int sbx_vm_base_key (struct sbx_vm_pkgs *p, const struct sbx_vm_extra *extra, char key[65],
                     sbx_error_t **err);

/* Copy base's files (and extra's) into the directory root; what it holds,
   for sizing. */
int sbx_vm_base_stage (struct sbx_vm_pkgs *p, const struct sbx_vm_extra *extra, int root,
                       uint64_t *bytes, uint64_t *entries, sbx_error_t **err);

/* base's image plus extra's (NULL: base), built and cached as base's
   (iso/vm_image.c). */
struct sbx_vm_image;
int sbx_vm_image_builtin (const struct sbx_vm_extra *extra, struct sbx_vm_image *img,
                          sbx_error_t **err);

/* For iso/vm_image_prune.c. The cache's directory fd with its lock held
   (builds and opens take it), or -1 (no cache, the lock not taken). */
int sbx_vm_image_cache_lock (void);
void sbx_vm_image_cache_unlock (void);
/* KEY of a tree's image, as sbx_vm_image_tree computes it. */
int sbx_vm_image_tree_key (int tree, char key[65], sbx_error_t **err);
/* KEY of code-interpreter-v1's image for its plan (iso/vm_image_code.c). */
struct sbx_plan;
int sbx_vm_image_code_key (const struct sbx_plan *plan, struct sbx_vm_pkgs *p, char key[65],
                           sbx_error_t **err);

#endif
