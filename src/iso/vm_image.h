/* sbx: the microVM engine's read-only root images (iso/vm_image.c,
 * docs/vm.md "The root filesystem"). */
#ifndef SBX_ISO_VM_IMAGE_H
#define SBX_ISO_VM_IMAGE_H

#include <stdint.h>

#include "util/error.h"

#define SBX_VM_IMAGE_DIR "vm-images"  /* under the state directory, root 0700 */
#define SBX_VM_IMAGE_RECORD "vm.root" /* in a VM snapshot: "KEY SUM\n" */

/* An image: KEY names what it was built from (the packages and their
   versions, the generated files), SUM is the sha256 of its bytes. A
   snapshot records both: a restore must attach the very same bytes. */
struct sbx_vm_image
{
  char key[65];
  char sum[65];
};

/* Once, in the privileged parent: where the images are cached. */
int sbx_vm_image_init (const char *state_dir, sbx_error_t **err);

/* The image of template base: built on first use (a few seconds) and
   cached by KEY; a cached one whose bytes no longer match its sum is
   rebuilt. Returns an O_RDONLY fd of it and fills *img. */
int sbx_vm_image_base (struct sbx_vm_image *img, sbx_error_t **err);

/* The image of template code-interpreter-v1 (iso/vm_image_code.c): base's
   plus the Python packages its server imports and the server itself,
   taken from the template's plan (what a namespace sandbox of it gets). */
struct sbx_plan;
int sbx_vm_image_code (const struct sbx_plan *plan, struct sbx_vm_image *img, sbx_error_t **err);

/* The image of a tree: a stored template's read-only mount (its layers
   under sbx's top layer), keyed by every entry's metadata. */
int sbx_vm_image_tree (int tree, struct sbx_vm_image *img, sbx_error_t **err);

/* A restore: the image a snapshot recorded, with the same bytes, or a
   CONFLICT that says why not. */
int sbx_vm_image_open (const struct sbx_vm_image *want, sbx_error_t **err);

/* Pruning (iso/vm_image_prune.c): remove every cached image that no VM,
   snapshot (hibernation and fork files included) or template needs.
   live() is called under the cache's lock and calls sbx_vm_keys_keep
   with each VM's "KEY SUM"; it returns non-zero when it cannot tell (a
   create under way): then nothing is removed and res->deferred is set.
   code_plan: code-interpreter-v1's plan (its image's key), or NULL. */
struct sbx_vm_keys;
void sbx_vm_keys_keep (struct sbx_vm_keys *keys, const char *record);
struct sbx_vm_prune_result
{
  unsigned removed, kept;
  int deferred;
  uint64_t freed; /* bytes */
};
int sbx_vm_image_prune (int snapstore, const struct sbx_plan *code_plan,
                        int (*live) (struct sbx_vm_keys *keys), struct sbx_vm_prune_result *res,
                        sbx_error_t **err);

#endif
