/* sbx: the root image of a VM (docs/vm.md "The root filesystem"):
 * template base's for a new VM, and for a restore the very image its
 * snapshot recorded (the guest's memory holds the page cache and ext4's
 * view of those bytes: any other image would corrupt it). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/template.h"
#include "iso/snapstore.h"
#include "iso/vm.h"
#include "iso/vm_image.h"
#include "util/cleanup.h"

int
sbx_vm_root_open (const struct sbx_iso_spec *spec, struct sbx_iso_box *box, sbx_error_t **err)
{
  struct sbx_vm_image img;
  int fd;

  box->vm_image[0] = '\0';
  if (spec->snapshot != NULL)
    {
      sbx_error_t *e = NULL;
      cleanup_close int rec = sbx_snapstore_open_file (spec->snapshot_store, spec->snapshot_tenant,
                                                       spec->snapshot, SBX_VM_IMAGE_RECORD, &e);
      char line[160];
      ssize_t n;

      if (rec < 0)
        {
          /* A snapshot of a VM that booted without an image. */
          int none = e && e->kind == SBX_E_NOT_FOUND;
          if (none)
            {
              sbx_error_free (e);
              return -1;
            }
          if (err)
            *err = e;
          else
            sbx_error_free (e);
          return -1;
        }
      n = read (rec, line, sizeof line - 1);
      if (n < 0)
        return sbx_err_sys (err, errno, "read the snapshot's %s", SBX_VM_IMAGE_RECORD);
      line[n] = '\0';
      if (n != 130 || line[64] != ' ' || line[129] != '\n')
        return sbx_err (err, SBX_E_CONFLICT, "isolation vm: snapshot `%s`: its %s is malformed",
                        spec->snapshot, SBX_VM_IMAGE_RECORD);
      memcpy (img.key, line, 64);
      img.key[64] = '\0';
      memcpy (img.sum, line + 65, 64);
      img.sum[64] = '\0';
      fd = sbx_vm_image_open (&img, err);
    }
  else if (spec->root_mnt >= 0)
    fd = sbx_vm_image_tree (spec->root_mnt, &img, err); /* a stored template */
  else if (spec->plan != NULL && spec->plan == &sbx_template_find (SBX_CODE_TEMPLATE)->plan)
    fd = sbx_vm_image_code (spec->plan, &img, err);
  else
    fd = sbx_vm_image_base (&img, err);
  if (fd < 0)
    {
      if (err && *err == NULL)
        sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: no root image");
      return -1;
    }
  snprintf (box->vm_image, sizeof box->vm_image, "%s %s", img.key, img.sum);
  return fd;
}

int
sbx_vm_root_record (int dir, const struct sbx_iso_box *box, sbx_error_t **err)
{
  cleanup_close int fd = -1;
  char line[160];
  int n;

  if (box->vm_image[0] == '\0')
    return 0;
  n = snprintf (line, sizeof line, "%s\n", box->vm_image);
  fd = openat (dir, SBX_VM_IMAGE_RECORD, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               0600);
  if (fd < 0 || write (fd, line, (size_t) n) != n || fsync (fd) < 0)
    return sbx_err_sys (err, errno, "write the snapshot's %s", SBX_VM_IMAGE_RECORD);
  return 0;
}
