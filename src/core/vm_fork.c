/* sbx: fork of a VM with its memory (docs/vm.md "Fork and hibernate").
 *
 * A VM's processes can be carried, unlike a namespace sandbox's: the
 * source's memory (vCPUs, devices, RAM, its disk included) is saved once
 * through QEMU's migration into a file of the daemon's own in the store
 * (a name no client can give, iso/snapstore.h: not in the catalog, never
 * listed), and each new sandbox is a restore from it, as a create from a
 * snapshot (iso/vm.c). The source runs on after its save; the file goes
 * when the copies are up, and on any failure.
 */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "iso/copy.h"
#include "iso/snapstore.h"
#include "priv/proto.h"
#include "util/log.h"

int
sbx__vm_fork (struct sbx_sandbox *src, const char *tenant, const struct sbx_create_opts *settings,
              unsigned count, struct sbx_fork_result *out, sbx_error_t **err)
{
  struct sbx_snapshot_record rec;
  struct sbx_create_opts opts = *settings;
  struct sbx_copy_result res;
  sbx_error_t *e = NULL;
  char hex[17];
  int was_paused = 0, rc;
  unsigned i;

  memset (&rec, 0, sizeof rec);
  sbx_random_hex (hex, 8);
  snprintf (rec.name, sizeof rec.name, SBX_SNAPSHOT_INTERNAL_PREFIX "fork-%s", hex);
  snprintf (rec.tenant, sizeof rec.tenant, "%s", tenant);
  snprintf (rec.template_name, sizeof rec.template_name, "%s", settings->template_name);
  snprintf (rec.source, sizeof rec.source, "%s", src->id);
  rec.isolation = SBX_ISOLATION_VM;
  rec.memory = settings->limits.memory_bytes;
  rec.cpu_milli = settings->limits.cpu_milli;
  rec.disk = settings->limits.disk_bytes;

  /* The save stops the vCPUs itself (a frozen QEMU could not answer), so
     a paused VM is refused as for a snapshot; requests to it wait. */
  if (sbx__transition_begin (src, &was_paused, err) < 0)
    return -1;
  if (was_paused)
    {
      sbx__transition_end (src);
      return sbx_err (err, SBX_E_CONFLICT,
                      "sandbox `%s` is paused: resume it to fork it with its memory", src->id);
    }
  memset (&res, 0, sizeof res);
  rc = sbx_host_snapshot (SBX_PRIV_SNAP_SAVE, src->slot, rec.tenant, rec.name, &res, err);
  sbx__transition_end (src);
  if (rc < 0)
    return sbx_err_wrap (err, "fork of sandbox `%s`: saving its memory", src->id);
  out->memory_image_bytes = res.bytes;

  opts.isolation = "vm";
  opts.snapshot = rec.name;
  opts.internal_snapshot = &rec;
  for (i = 0; rc == 0 && i < count; i++)
    {
      struct sbx_sandbox *sb = sbx_sandbox_create (tenant, &opts, err);
      if (sb == NULL)
        rc = -1;
      else
        out->sb[out->n++] = sb;
    }
  /* The copies do not need it any more (QEMU read it all at the restore). */
  if (sbx_host_snapshot (SBX_PRIV_SNAP_REMOVE, 0, rec.tenant, rec.name, NULL, &e) < 0)
    {
      sbx_warn ("fork of sandbox %s: removing its memory image: %s", src->id, e->msg);
      sbx_error_free (e);
    }
  if (rc < 0)
    sbx_err_wrap (err, "fork of sandbox `%s`", src->id);
  return rc;
}
