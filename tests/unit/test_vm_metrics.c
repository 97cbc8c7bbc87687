/* Unit tests for a VM guest's metrics answer, read as hostile
 * (src/core/vm_metrics.c): one METRICS record of its exact size, then END,
 * consistent values; anything else is a broken guest (503), never figures. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "tap.h"
#include "vm/fs_wire.h"

static char buf[4096];

static struct sbx_vm_fs_answer
answer (const struct sbx_vm_fs_metrics *m, uint32_t tag, uint32_t mlen, int with_end,
        size_t extra, int exit_code)
{
  struct sbx_vm_fs_rec rec = {tag, mlen}, end_rec = {SBX_VM_FS_END, sizeof (struct sbx_vm_fs_end)};
  struct sbx_vm_fs_end end = {0, 0};
  struct sbx_vm_fs_answer a;
  size_t n = 0;

  memcpy (buf + n, &rec, sizeof rec), n += sizeof rec;
  memcpy (buf + n, m, sizeof *m), n += sizeof *m;
  if (with_end)
    {
      memcpy (buf + n, &end_rec, sizeof end_rec), n += sizeof end_rec;
      memcpy (buf + n, &end, sizeof end), n += sizeof end;
    }
  memset (buf + n, 'x', extra);
  n += extra;
  memset (&a, 0, sizeof a);
  a.data = buf;
  a.len = n;
  a.exit_code = exit_code;
  return a;
}

static struct sbx_vm_fs_metrics
good (void)
{
  struct sbx_vm_fs_metrics m;
  memset (&m, 0, sizeof m);
  m.mem_total = 250u << 20;
  m.mem_available = 200u << 20;
  m.disk_total = 64u << 20;
  m.disk_free = 60u << 20;
  m.cpu_busy_ticks = 100;
  m.cpu_total_ticks = 1000;
  m.cpus = 1;
  m.processes = 20;
  return m;
}

static int
broken (struct sbx_vm_fs_answer a)
{
  struct sbx_vm_fs_metrics out;
  sbx_error_t *err = NULL;
  int rc = sbx__vm_metrics_parse (&a, &out, &err);
  int ok = rc < 0 && err != NULL && err->kind == SBX_E_UNAVAILABLE
           && strstr (err->msg, "out of format") != NULL;
  sbx_error_free (err);
  return ok;
}

static int
test_good (void)
{
  struct sbx_vm_fs_metrics m = good (), out;
  struct sbx_vm_fs_answer a = answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 0, 0);
  sbx_error_t *err = NULL;

  CHECK (sbx__vm_metrics_parse (&a, &out, &err) == 0);
  CHECK (err == NULL);
  CHECK (memcmp (&out, &m, sizeof m) == 0);
  return 0;
}

static int
test_hostile (void)
{
  struct sbx_vm_fs_metrics m = good ();

  CHECK (broken (answer (&m, SBX_VM_FS_ENTRY, sizeof m, 1, 0, 0)));    /* wrong tag */
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m - 8, 1, 0, 0))); /* wrong length */
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 0, 0, 0)));  /* no END */
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 1, 0)));  /* a byte after END */
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 0, 1)));  /* exit 1 without ERROR */
  m = good (), m.mem_available = m.mem_total + 1;
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 0, 0)));
  m = good (), m.mem_total = 0, m.mem_available = 0;
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 0, 0)));
  m = good (), m.disk_free = m.disk_total + 1;
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 0, 0)));
  m = good (), m.cpu_busy_ticks = m.cpu_total_ticks + 1;
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 0, 0)));
  m = good (), m.cpus = 0;
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 0, 0)));
  m = good (), m.cpus = 100000;
  CHECK (broken (answer (&m, SBX_VM_FS_METRICS, sizeof m, 1, 0, 0)));
  return 0;
}

int
main (void)
{
  RUN (test_good);
  RUN (test_hostile);
  return tap_done ();
}
