/* sbx: the content of template base's VM image (iso/vm_image_base.c),
 * private to iso/vm_image.c. */
#ifndef SBX_ISO_VM_IMAGE_BASE_H
#define SBX_ISO_VM_IMAGE_BASE_H

#include <stdint.h>

#include "util/error.h"

#define IMAGE_FORMAT "sbx-vm-image 5" /* bump when what an image holds changes */

/* The host's installed packages (dpkg's status). */
struct sbx_vm_pkgs;
struct sbx_vm_pkgs *sbx_vm_pkgs_load (sbx_error_t **err);
void sbx_vm_pkgs_free (struct sbx_vm_pkgs *p);

/* KEY of base's image: the format, the packages it holds with their
   versions, the generated /etc, the bound host files' sizes and times. */
int sbx_vm_base_key (struct sbx_vm_pkgs *p, char key[65], sbx_error_t **err);

/* Copy base's files into the directory root; what it holds, for sizing. */
int sbx_vm_base_stage (struct sbx_vm_pkgs *p, int root, uint64_t *bytes, uint64_t *entries,
                       sbx_error_t **err);

#endif
