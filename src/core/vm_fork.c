/* sbx: fork of a VM with its memory (docs/vm.md "Fork and hibernate").
 *
 * A VM's processes can be carried, unlike a namespace sandbox's: the
 * source's memory (vCPUs, devices, RAM, its disk included) is saved once
 * through QEMU's migration into a file of the daemon's own in the store
 * (a name no client can give, iso/snapstore.h: not in the catalog, never
 * listed), and each new sandbox is a restore from it, as a create from a
 * snapshot (iso/vm.c). The source runs on after its save; the file goes
 * when the copies are up, and on any failure.
 *
 * The restores run in parallel, at most RESTORE_MAX_PARALLEL at a time
 * (and no more than the CPUs: under TCG each restoring QEMU is busy on
 * one). All or nothing: after a failure no further copy starts, the
 * caller discards those that came up (core/fork.c), and the error names
 * the copy that failed first.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "iso/copy.h"
#include "iso/snapstore.h"
#include "priv/proto.h"
#include "util/log.h"

#define RESTORE_MAX_PARALLEL 4

struct restores
{
  pthread_mutex_t lock;
  const char *tenant;
  const struct sbx_create_opts *opts;
  unsigned count, next, failed_at; /* failed_at: count when none failed */
  struct sbx_sandbox *sb[SBX_FORK_MAX];
  sbx_error_t *err[SBX_FORK_MAX];
};

static void *
restore_main (void *arg)
{
  struct restores *r = arg;

  for (;;)
    {
      unsigned i;
      pthread_mutex_lock (&r->lock);
      i = r->failed_at < r->count ? r->count : r->next++;
      pthread_mutex_unlock (&r->lock);
      if (i >= r->count)
        return NULL;
      r->sb[i] = sbx_sandbox_create (r->tenant, r->opts, &r->err[i]);
      if (r->sb[i] == NULL)
        {
          pthread_mutex_lock (&r->lock);
          if (i < r->failed_at)
            r->failed_at = i;
          pthread_mutex_unlock (&r->lock);
        }
    }
}

/* count restores from opts' snapshot into out->sb (in order); -1 with the
   first failed copy's error (the ones that came up are in out->sb). */
static int
restore_all (const char *tenant, const struct sbx_create_opts *opts, unsigned count,
             struct sbx_fork_result *out, sbx_error_t **err)
{
  struct restores r;
  pthread_t t[RESTORE_MAX_PARALLEL];
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);
  unsigned n = count, started = 0, i;
  int rc = 0;

  memset (&r, 0, sizeof r);
  pthread_mutex_init (&r.lock, NULL);
  r.tenant = tenant;
  r.opts = opts;
  r.count = count;
  r.failed_at = count;
  if (n > RESTORE_MAX_PARALLEL)
    n = RESTORE_MAX_PARALLEL;
  if (cpus > 0 && n > (unsigned) cpus)
    n = (unsigned) cpus;
  /* This thread is one of them: n - 1 more. */
  while (started + 1 < n && pthread_create (&t[started], NULL, restore_main, &r) == 0)
    started++;
  restore_main (&r);
  for (i = 0; i < started; i++)
    pthread_join (t[i], NULL);
  pthread_mutex_destroy (&r.lock);
  for (i = 0; i < count; i++)
    if (r.sb[i] != NULL)
      out->sb[out->n++] = r.sb[i];
  if (r.failed_at < count)
    {
      if (r.err[r.failed_at] == NULL)
        sbx_err (&r.err[r.failed_at], SBX_E_SYSTEM, "the restore failed");
      sbx_err_wrap (&r.err[r.failed_at], "copy %u of %u", r.failed_at + 1, count);
      if (err)
        *err = r.err[r.failed_at];
      else
        sbx_error_free (r.err[r.failed_at]);
      r.err[r.failed_at] = NULL;
      rc = -1;
    }
  for (i = 0; i < count; i++)
    sbx_error_free (r.err[i]);
  return rc;
}

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
  if (count > SBX_FORK_MAX)
    count = SBX_FORK_MAX;
  rc = restore_all (tenant, &opts, count, out, err);
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
