/* sbx: a VM's metrics as its guest sees them (docs/vm.md, Metrics).
 *
 * The host's cgroup says what a VM costs the host (QEMU, TCG's code cache,
 * the guest's touched RAM); it cannot say how much of its memory or disk
 * the guest uses. The agent reads that from the guest's kernel, as a file
 * operation behind the command's walls (vm/agent_metrics.c), and it is
 * checked here as hostile: one record of exactly its size, then END, and
 * values that are consistent (used <= total, at least one CPU). */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "vm/fs_wire.h"

#define METRICS_OUT_CAP 4096
#define METRICS_CPUS_MAX 1024

int
sbx__vm_metrics_parse (struct sbx_vm_fs_answer *a, struct sbx_vm_fs_metrics *m,
                       sbx_error_t **err)
{
  struct sbx_vm_fs_rec rec, end_rec;
  struct sbx_vm_fs_end end;
  const size_t want = 2 * sizeof rec + sizeof *m + sizeof end;

  if (a->exit_code != 0)
    {
      int truncated = 0;
      sbx_error_t *e = NULL;
      /* The guest's ERROR record, checked there (or out of format). */
      if (sbx__vm_fs_parse (a, 0, NULL, NULL, &truncated, 0, &e) == 0 || e == NULL)
        {
          sbx_error_free (e);
          return sbx__vm_fs_broken ("metrics without a record", err);
        }
      sbx_error_move (err, &e);
      return -1;
    }
  if (a->len != want)
    return sbx__vm_fs_broken ("metrics of the wrong size", err);
  memcpy (&rec, a->data, sizeof rec);
  memcpy (m, a->data + sizeof rec, sizeof *m);
  memcpy (&end_rec, a->data + sizeof rec + sizeof *m, sizeof end_rec);
  memcpy (&end, a->data + 2 * sizeof rec + sizeof *m, sizeof end);
  if (rec.tag != SBX_VM_FS_METRICS || rec.len != sizeof *m || end_rec.tag != SBX_VM_FS_END
      || end_rec.len != sizeof end || end.truncated != 0 || end.reserved != 0)
    return sbx__vm_fs_broken ("metrics records", err);
  if (m->mem_total == 0 || m->mem_available > m->mem_total || m->disk_free > m->disk_total
      || m->cpu_busy_ticks > m->cpu_total_ticks || m->cpus == 0 || m->cpus > METRICS_CPUS_MAX)
    return sbx__vm_fs_broken ("metrics out of range", err);
  return 0;
}

int
sbx__vm_guest_metrics (struct sbx_sandbox *sb, struct sbx_vm_fs_metrics *m, sbx_error_t **err)
{
  static char argv0[] = SBX_VM_FS_ARGV0, op[] = "metrics", disk[] = "/home/user";
  char *argv[] = {argv0, op, disk, NULL};
  struct sbx_vm_fs_answer a;
  int rc;

  if (sbx__vm_fs_call (sb, "user", argv, METRICS_OUT_CAP, &a, err) < 0)
    return -1;
  rc = sbx__vm_metrics_parse (&a, m, err);
  free (a.data);
  return rc;
}
