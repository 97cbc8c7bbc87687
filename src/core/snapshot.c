/* sbx: snapshots (docs/api.md "Snapshots").
 *
 * A snapshot saves a sandbox's disk (/home/user, /tmp, /dev/shm: exactly
 * what changed against its template) once, into the privileged parent's
 * store (iso/snapstore.c), taken while the sandbox is frozen. A sandbox
 * created from it gets a copy of it in its own disk (copy at create: the
 * overlay route, a shared read-only lower layer, is not done yet; see
 * docs/api.md). A snapshot of a sandbox made from a snapshot is flat: it
 * holds the whole disk. Snapshots belong to the source's tenant: another
 * tenant can neither see, use nor delete them. Sandboxes made from one do
 * not depend on it afterwards, so deleting it never conflicts.
 */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "iso/copy.h"
#include "iso/snapstore.h"
#include "priv/proto.h"
#include "util/log.h"

#define SNAPSHOTS_PER_TENANT 64

static int
check_name (const char *name, sbx_error_t **err)
{
  if (name == NULL || !sbx_snapshot_name_valid (name))
    return sbx_err (err, SBX_E_INVALID,
                    "a snapshot name is 1 to %d of A-Z a-z 0-9 . _ - (not starting with . or -)",
                    SBX_SNAPSHOT_NAME_MAX);
  return 0;
}

static void
count_one (const struct sbx_snapshot_record *r, void *arg)
{
  (void) r;
  (*(unsigned *) arg)++;
}

static void
keep_one (const struct sbx_snapshot_record *r, void *arg)
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
  return json_pack ("{s:s, s:s, s:s, s:o, s:I, s:I, s:I}", "name", r->name, "template",
                    r->template_name, "source", r->source, "created_at",
                    sbx_json_time (r->created_ms), "bytes", (json_int_t) r->bytes, "files",
                    (json_int_t) r->files, "disk", (json_int_t) r->disk);
}

json_t *
sbx_snapshot_create (struct sbx_sandbox *sb, const char *name, sbx_error_t **err)
{
  struct sbx_snapshot_record rec, old;
  struct sbx_copy_result res;
  unsigned n = 0;
  int was_paused = 0, rc;

  if (sb->isolation == SBX_ISOLATION_VM)
    return sbx_err (err, SBX_E_NOT_IMPLEMENTED,
                    "not supported for isolation vm: snapshots (of its disk or memory)"),
           NULL;
  if (check_name (name, err) < 0)
    return NULL;
  memset (&rec, 0, sizeof rec);
  pthread_mutex_lock (&sbx_core.lock);
  snprintf (rec.tenant, sizeof rec.tenant, "%s", sb->tenant);
  snprintf (rec.template_name, sizeof rec.template_name, "%s", sb->template_name);
  snprintf (rec.source, sizeof rec.source, "%s", sb->id);
  rec.disk = sb->limits.disk_bytes;
  pthread_mutex_unlock (&sbx_core.lock);
  snprintf (rec.name, sizeof rec.name, "%s", name);
  if (sbx_store_snapshot_list (sbx_core.store, rec.tenant, NULL, count_one, &n, err) < 0)
    return NULL;
  if (n >= SNAPSHOTS_PER_TENANT)
    return sbx_err (err, SBX_E_LIMIT, "at most %d snapshots per tenant (delete some)",
                    SNAPSHOTS_PER_TENANT),
           NULL;
  if (sbx__snapshot_lookup (rec.tenant, name, &old, NULL) == 0)
    return sbx_err (err, SBX_E_CONFLICT, "snapshot `%s` exists", name), NULL;

  /* Frozen for a consistent copy (a paused sandbox stays as it is). */
  if (sbx__transition_begin (sb, &was_paused, err) < 0)
    return NULL;
  rc = was_paused ? 0 : sbx_host_freeze (sb->slot, 1, err);
  if (rc == 0)
    rc = sbx_host_snapshot (SBX_PRIV_SNAP_SAVE, sb->slot, rec.tenant, name, &res, err);
  if (!was_paused)
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
    return NULL;
  rec.created_ms = sbx_now_ms ();
  rec.bytes = res.bytes;
  rec.files = res.files;
  if (sbx_store_snapshot_insert (sbx_core.store, &rec, err) < 0)
    {
      sbx_host_snapshot (SBX_PRIV_SNAP_REMOVE, 0, rec.tenant, name, NULL, NULL);
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
  /* It is the lower layer of these: it stays until they end. */
  pthread_mutex_lock (&sbx_core.lock);
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (sb->state == SBX_SB_RUNNING && strcmp (sb->tenant, tenant) == 0
        && strcmp (sb->snapshot, name) == 0)
      users++;
  pthread_mutex_unlock (&sbx_core.lock);
  if (users)
    return sbx_err (err, SBX_E_CONFLICT,
                    "snapshot `%s` is the lower layer of %u running sandbox(es): kill them first",
                    name, users);
  if (sbx_store_snapshot_delete (sbx_core.store, tenant, name, err) < 0)
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
