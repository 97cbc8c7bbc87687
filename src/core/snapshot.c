/* sbx: snapshots (docs/api.md "Snapshots").
 *
 * A snapshot saves a sandbox's disk (/home/user, /tmp, /dev/shm: exactly
 * what changed against its template) once, into the privileged parent's
 * store (iso/snapstore.c), taken while the sandbox is frozen. A sandbox
 * created from it has it as the shared read-only lower layer of its disk,
 * or, where the kernel cannot layer it (iso/kernel.h), a copy of it in its
 * disk (core/create.c); a snapshot is in use, and its delete a 409, while
 * any sandbox made from it runs, either way. A snapshot of a sandbox made
 * from a snapshot is flat: it holds the whole disk. Snapshots belong to
 * the source's tenant: another tenant can neither see, use nor delete
 * them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "iso/copy.h"
#include "iso/snapstore.h"
#include "priv/proto.h"
#include "util/log.h"



static int
check_name (const char *name, sbx_error_t **err)
{
  if (name == NULL || !sbx_snapshot_name_valid (name))
    return sbx_err (err, SBX_E_INVALID,
                    "a snapshot name is 1 to %d of A-Z a-z 0-9 . _ - (not starting with . or -)",
                    SBX_SNAPSHOT_NAME_MAX);
  return 0;
}

struct usage
{
  unsigned count;
  uint64_t bytes;
};

static void
count_one (const struct sbx_snapshot_record *r, void *arg)
{
  struct usage *u = arg;

  u->count++;
  u->bytes += r->bytes;
}

int
sbx_snapshot_usage (const char *tenant, unsigned *count, uint64_t *bytes, sbx_error_t **err)
{
  struct usage u = {0, 0};

  if (sbx_store_snapshot_list (sbx_core.store, tenant, NULL, count_one, &u, err) < 0)
    return -1;
  *count = u.count;
  *bytes = u.bytes;
  return 0;
}

/* A snapshot being saved is nobody's to use or delete yet. */
static void
keep_one (const struct sbx_snapshot_record *r, void *arg)
{
  if (!r->pending)
    *(struct sbx_snapshot_record *) arg = *r;
}

static void
keep_any (const struct sbx_snapshot_record *r, void *arg)
{
  *(struct sbx_snapshot_record *) arg = *r;
}

int
sbx__snapshot_lookup (const char *tenant, const char *name, struct sbx_snapshot_record *out,
                      sbx_error_t **err)
{
  if (check_name (name, err) < 0)
    return -1;
  memset (out, 0, sizeof *out);
  if (sbx_store_snapshot_list (sbx_core.store, tenant, name, keep_one, out, err) < 0)
    return -1;
  /* Another tenant's snapshot and a missing one look alike. */
  if (out->name[0] == '\0')
    return sbx_err (err, SBX_E_NOT_FOUND, "snapshot `%s` not found", name);
  return 0;
}

static json_t *
snapshot_json (const struct sbx_snapshot_record *r)
{
  json_t *j = json_pack ("{s:s, s:s, s:s, s:o, s:I, s:I, s:I, s:s}", "name", r->name,
                         "template", r->template_name, "source", r->source, "created_at",
                         sbx_json_time (r->created_ms), "bytes", (json_int_t) r->bytes, "files",
                         (json_int_t) r->files, "disk", (json_int_t) r->disk, "isolation",
                         r->isolation == SBX_ISOLATION_VM ? "vm" : "namespace");
  /* A VM's snapshot is its memory: a restore gets the same machine. */
  if (j && r->isolation == SBX_ISOLATION_VM)
    {
      json_object_set_new (j, "memory", json_integer ((json_int_t) r->memory));
      json_object_set_new (j, "cpus", json_real ((double) r->cpu_milli / 1000.0));
    }
  return j;
}

/* A save that did not complete: its files (if any were put in place) and
   its record go. */
static void
forget_pending (const struct sbx_snapshot_record *r)
{
  sbx_error_t *e = NULL;

  if (sbx_store_snapshot_delete (sbx_core.store, r->tenant, r->name, 1, &e) < 0)
    {
      sbx_warn ("snapshot %s: removing its pending record: %s", r->name, e->msg);
      sbx_error_free (e);
    }
}

struct pending_list
{
  struct sbx_snapshot_record *v;
  size_t n, cap;
};

static void
collect_pending (const struct sbx_snapshot_record *r, void *arg)
{
  struct pending_list *l = arg;

  if (!r->pending)
    return;
  if (l->n == l->cap)
    {
      l->cap = l->cap ? l->cap * 2 : 8;
      l->v = realloc (l->v, l->cap * sizeof *l->v);
      if (l->v == NULL)
        sbx_oom ();
    }
  l->v[l->n++] = *r;
}

void
sbx__snapshot_roll_back_pending (void)
{
  struct pending_list l = {NULL, 0, 0};
  sbx_error_t *err = NULL;
  size_t i;

  if (sbx_store_snapshot_list (sbx_core.store, NULL, NULL, collect_pending, &l, &err) < 0)
    {
      sbx_warn ("reading snapshots: %s", err->msg);
      sbx_error_free (err);
      return;
    }
  for (i = 0; i < l.n; i++)
    {
      /* Cut short by the previous daemon's end: the client got an error
         or nothing. Files first: a record without files is harmless, files
         without a record would be lost space and a name taken for good. */
      if (sbx_host_snapshot (SBX_PRIV_SNAP_REMOVE, 0, l.v[i].tenant, l.v[i].name, NULL, &err)
              < 0
          && err->kind != SBX_E_NOT_FOUND) /* cut before it was put in place */
        {
          sbx_warn ("snapshot %s: removing an unfinished save: %s", l.v[i].name, err->msg);
          sbx_error_free (err);
          err = NULL;
          continue;
        }
      sbx_error_free (err);
      err = NULL;
      forget_pending (&l.v[i]);
      sbx_warn ("snapshot %s of tenant %s was not complete when the daemon stopped: removed",
                l.v[i].name, l.v[i].tenant);
      sbx_audit_lifecycle ("snapshot rolled back", l.v[i].source, l.v[i].tenant, l.v[i].name);
    }
  free (l.v);
}

json_t *
sbx_snapshot_create (struct sbx_sandbox *sb, const char *name, sbx_error_t **err)
{
  struct sbx_snapshot_record rec, old;
  struct sbx_copy_result res;
  struct usage u = {0, 0};
  uint64_t quota = sbx_core.cfg.tenant_snapshot_bytes, left = 0;
  int was_paused = 0, rc;

  int vm = sb->isolation == SBX_ISOLATION_VM;

  if (check_name (name, err) < 0)
    return NULL;
  memset (&rec, 0, sizeof rec);
  pthread_mutex_lock (&sbx_core.lock);
  snprintf (rec.tenant, sizeof rec.tenant, "%s", sb->tenant);
  snprintf (rec.template_name, sizeof rec.template_name, "%s", sb->template_name);
  snprintf (rec.source, sizeof rec.source, "%s", sb->id);
  rec.disk = sb->limits.disk_bytes;
  if (vm)
    {
      rec.isolation = SBX_ISOLATION_VM;
      rec.memory = sb->limits.memory_bytes;
      rec.cpu_milli = sb->limits.cpu_milli;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  snprintf (rec.name, sizeof rec.name, "%s", name);
  if (sbx_store_snapshot_list (sbx_core.store, rec.tenant, NULL, count_one, &u, err) < 0)
    return NULL;
  if (u.count >= SBX_SNAPSHOTS_PER_TENANT)
    return sbx_err (err, SBX_E_LIMIT, "at most %d snapshots per tenant (delete some)",
                    SBX_SNAPSHOTS_PER_TENANT),
           NULL;
  /* Bytes on the host's disk: what the tenant's quota leaves bounds the
     copy (--tenant-snapshot-bytes; 0: none). */
  if (quota)
    {
      if (u.bytes + 4096 > quota)
        return sbx_err (err, SBX_E_TOO_LARGE,
                        "tenant `%s`'s snapshots hold %llu of its %llu bytes"
                        " (sbx serve --tenant-snapshot-bytes); delete some",
                        rec.tenant, (unsigned long long) u.bytes, (unsigned long long) quota),
               NULL;
      left = quota - u.bytes;
    }
  /* All or nothing, also across a crash: the name is taken by a pending
     record first (a daemon that finds one at its start removes the save),
     completed once the save is in place. The record's key is the check
     that the name is free: a refused insert is a name taken, by a saved
     snapshot or a save in progress. */
  rec.pending = 1;
  rec.created_ms = sbx_now_ms ();
  if (sbx_store_snapshot_insert (sbx_core.store, &rec, err) < 0)
    {
      memset (&old, 0, sizeof old);
      if (sbx_store_snapshot_list (sbx_core.store, rec.tenant, name, keep_any, &old, NULL) == 0
          && old.name[0] != '\0')
        {
          sbx_error_free (*err);
          *err = NULL;
          return sbx_err (err, SBX_E_CONFLICT, "snapshot `%s` %s", name,
                          old.pending ? "is being saved" : "exists"),
                 NULL;
        }
      return NULL;
    }

  /* Frozen for a consistent copy (a paused sandbox stays as it is). A VM
     is not frozen: QEMU stops its vCPUs and saves its memory itself,
     which a frozen QEMU could not (iso/vm_qmp.c). */
  if (sbx__transition_begin (sb, &was_paused, err) < 0)
    {
      forget_pending (&rec);
      return NULL;
    }
  if (vm && was_paused)
    {
      sbx__transition_end (sb);
      forget_pending (&rec);
      return sbx_err (err, SBX_E_CONFLICT,
                      "sandbox %s is paused: resume it to take a snapshot of its memory", sb->id),
             NULL;
    }
  if (sb->hibernated == SBX_HIBERNATED_FILESYSTEM)
    {
      /* Nothing runs to copy from (its files wait in the store). */
      sbx__transition_end (sb);
      forget_pending (&rec);
      return sbx_err (err, SBX_E_CONFLICT,
                      "sandbox %s is paused without its memory: resume it to take a snapshot",
                      sb->id),
             NULL;
    }
  rc = was_paused || vm ? 0 : sbx_host_freeze (sb->slot, 1, err);
  if (rc == 0)
    rc = sbx_host_snapshot_max (SBX_PRIV_SNAP_SAVE, sb->slot, rec.tenant, name, vm ? 0 : left,
                                &res, err);
  if (rc < 0 && left && *err && (*err)->kind == SBX_E_TOO_LARGE)
    sbx_err_wrap (err, "tenant `%s`'s snapshot quota leaves %llu bytes", rec.tenant,
                  (unsigned long long) left);
  if (!was_paused && !vm)
    {
      sbx_error_t *e = NULL;
      if (sbx_host_freeze (sb->slot, 0, &e) < 0)
        {
          sbx_error ("sandbox %s: thawing after a snapshot: %s", sb->id, e->msg);
          sbx_error_free (e);
        }
    }
  sbx__transition_end (sb);
  if (rc < 0)
    {
      forget_pending (&rec);
      return NULL;
    }
  rec.created_ms = sbx_now_ms ();
  rec.bytes = res.bytes;
  rec.files = res.files;
  rec.pending = 0;
  if (sbx_store_snapshot_complete (sbx_core.store, &rec, err) < 0)
    {
      sbx_host_snapshot (SBX_PRIV_SNAP_REMOVE, 0, rec.tenant, name, NULL, NULL);
      forget_pending (&rec);
      return NULL;
    }
  sbx_audit_lifecycle ("snapshot", sb->id, rec.tenant, name);
  return snapshot_json (&rec);
}

struct list_ctx
{
  json_t *arr;
};

static void
add_one (const struct sbx_snapshot_record *r, void *arg)
{
  if (!r->pending)
    json_array_append_new (((struct list_ctx *) arg)->arr, snapshot_json (r));
}

json_t *
sbx_snapshot_list (const char *tenant, const char *name, sbx_error_t **err)
{
  struct list_ctx c = {json_array ()};

  if (c.arr == NULL)
    return sbx_err_oom (err), NULL;
  if (sbx_store_snapshot_list (sbx_core.store, tenant, name, add_one, &c, err) < 0)
    {
      json_decref (c.arr);
      return NULL;
    }
  return c.arr;
}

int
sbx_snapshot_delete (const char *tenant, const char *name, sbx_error_t **err)
{
  struct sbx_snapshot_record rec;
  sbx_error_t *e = NULL;

  struct sbx_sandbox *sb;
  unsigned users = 0;

  if (sbx__snapshot_lookup (tenant, name, &rec, err) < 0)
    return -1;
  /* In use by these (their disks' lower layer, or copied into them where
     the kernel cannot layer it): it stays until they end, on every kernel. */
  pthread_mutex_lock (&sbx_core.lock);
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (sb->state == SBX_SB_RUNNING && strcmp (sb->tenant, tenant) == 0
        && strcmp (sb->snapshot, name) == 0)
      users++;
  pthread_mutex_unlock (&sbx_core.lock);
  if (users)
    return sbx_err (err, SBX_E_CONFLICT,
                    "snapshot `%s` is in use by %u running sandbox(es) made from it: kill them"
                    " first",
                    name, users);
  if (sbx_store_snapshot_delete (sbx_core.store, tenant, name, 0, err) < 0)
    return -1;
  /* The catalog no longer has it (nobody can use it now); its files go. */
  if (sbx_host_snapshot (SBX_PRIV_SNAP_REMOVE, 0, tenant, name, NULL, &e) < 0)
    {
      sbx_warn ("removing the files of snapshot %s: %s", name, e->msg);
      sbx_error_free (e);
    }
  sbx_audit_lifecycle ("snapshot deleted", rec.source, tenant, name);
  return 0;
}

int
sbx__snapshot_load (struct sbx_sandbox *sb, const char *name, sbx_error_t **err)
{
  struct sbx_copy_result res;

  if (sbx_host_snapshot (SBX_PRIV_SNAP_LOAD, sb->slot, sb->tenant, name, &res, err) < 0)
    {
      if (*err && (*err)->kind == SBX_E_TOO_LARGE)
        sbx_err_wrap (err, "snapshot `%s` does not fit in the sandbox's disk (ask for a larger"
                           " `disk`)", name);
      return -1;
    }
  return 0;
}
