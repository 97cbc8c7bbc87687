/* sbx: pause and resume routes (docs/api.md "Pause and resume"). */
#include <stdio.h>
#include <string.h>

#include "server/request.h"

/* POST /v1/sandboxes/ID/pause {"to_disk": B, "keep_memory": B}: every
   process frozen, memory kept, the lifetime clock stopped; to_disk (a VM):
   its memory saved in the store and its QEMU ended (docs/vm.md);
   keep_memory false (a namespace sandbox): its files kept, its processes
   ended, and the resume boots it again (core/pause_files.c). 409 when it
   is already paused. */
void
sbx_route_sandbox_pause (struct sbx_req *r)
{
  static const char *const allowed[] = {"to_disk", "keep_memory", NULL};
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  cleanup_json json_t *body = NULL;
  int to_disk = 0, keep_memory = 1;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_bool (body, "to_disk", &to_disk, &err) < 0
      || sbx_param_bool (body, "keep_memory", &keep_memory, &err) < 0)
    goto fail;
  if (to_disk && !keep_memory)
    {
      sbx_err (&err, SBX_E_INVALID, "to_disk keeps the memory: it cannot go with keep_memory false");
      goto fail;
    }
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL
      || (to_disk        ? sbx_sandbox_hibernate (sb, &err)
          : !keep_memory ? sbx_sandbox_pause_files (sb, -1, &err)
                         : sbx_sandbox_pause (sb, &err))
             < 0)
    goto fail;
  sbx_reply_json (r, 200, sbx_sandbox_json (sb));
  return;
fail:
  sbx_reply_error (r, err);
}

/* POST /v1/sandboxes/ID/resume {"timeout": T}: the lifetime left at the
   pause continues, or a new one of T starts. 409 when it is not paused. */
void
sbx_route_sandbox_resume (struct sbx_req *r)
{
  static const char *const allowed[] = {"timeout", NULL};
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  cleanup_json json_t *body = NULL;
  uint64_t ms = 0;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_duration (body, "timeout", &ms, &err) < 0)
    goto fail;
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL || sbx_sandbox_resume (sb, ms, &err) < 0)
    goto fail;
  sbx_reply_json (r, 200, sbx_sandbox_json (sb));
  return;
fail:
  sbx_reply_error (r, err);
}

/* POST /v1/sandboxes/ID/fork {"count": N, "timeout": T}: N new sandboxes
   with a copy of its file system and its settings (processes are not
   carried: the answer says so). */
void
sbx_route_sandbox_fork (struct sbx_req *r)
{
  static const char *const allowed[] = {"count", "timeout", NULL};
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  struct sbx_fork_result res;
  cleanup_json json_t *body = NULL;
  uint64_t count = 1, ms = 0;

  memset (&res, 0, sizeof res);
  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_uint (body, "count", &count, &err) < 0
      || sbx_param_duration (body, "timeout", &ms, &err) < 0)
    goto fail;
  if (json_object_get (body, "count") == NULL)
    count = 1;
  if (count < 1 || count > SBX_FORK_MAX)
    {
      sbx_err (&err, SBX_E_INVALID, "count must be 1 to %d", SBX_FORK_MAX);
      goto fail;
    }
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL || sbx_sandbox_fork (sb, (unsigned) count, ms, &res, &err) < 0)
    goto fail;
  sbx_reply_json (r, 201, sbx_fork_result_json (&res));
  if (r->out_of_memory || r->queue_failed)
    for (unsigned i = 0; i < res.n; i++)
      sbx_sandbox_kill (res.sb[i], "sandbox killed", NULL); /* nobody learnt their ids */
  sbx_fork_result_release (&res);
  return;
fail:
  sbx_reply_error (r, err);
}

/* ---- snapshots ---------------------------------------------------------- */

static const char *
tenant_or_default (struct sbx_req *r)
{
  return sbx_req_tenant (r) ? sbx_req_tenant (r) : "default";
}

/* POST /v1/sandboxes/ID/snapshots {"name": N}: 201 the snapshot. */
void
sbx_route_snapshot_create (struct sbx_req *r)
{
  static const char *const allowed[] = {"name", NULL};
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  cleanup_json json_t *body = NULL;
  json_t *snap;
  const char *name = NULL;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_string (body, "name", &name, &err) < 0)
    goto fail;
  if (name == NULL)
    {
      sbx_err (&err, SBX_E_INVALID, "`name` is required");
      goto fail;
    }
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL || (snap = sbx_snapshot_create (sb, name, &err)) == NULL)
    goto fail;
  sbx_reply_json (r, 201, snap);
  return;
fail:
  sbx_reply_error (r, err);
}

/* GET /v1/snapshots: the tenant's. */
void
sbx_route_snapshot_list (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *arr = sbx_snapshot_list (tenant_or_default (r), NULL, &err);

  if (arr == NULL)
    sbx_reply_error (r, err);
  else
    sbx_reply_json (r, 200, json_pack ("{s:o}", "snapshots", arr));
}

/* DELETE /v1/snapshots/NAME: 204. Sandboxes made from it keep their copy. */
void
sbx_route_snapshot_delete (struct sbx_req *r)
{
  sbx_error_t *err = NULL;

  if (sbx_snapshot_delete (tenant_or_default (r), r->segs[2], &err) < 0)
    sbx_reply_error (r, err);
  else
    sbx_reply_empty (r, 204);
}
