/* sbx: pause and resume routes (docs/api.md "Pause and resume"). */
#include <stdio.h>
#include <string.h>

#include "server/request.h"

/* POST /v1/sandboxes/ID/pause: every process frozen, memory kept, the
   lifetime clock stopped. 409 when it is already paused. */
void
sbx_route_sandbox_pause (struct sbx_req *r)
{
  static const char *const allowed[] = {NULL};
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  json_t *body = NULL;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0)
    goto fail;
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL || sbx_sandbox_pause (sb, &err) < 0)
    goto fail;
  sbx_reply_json (r, 200, sbx_sandbox_json (sb));
  sbx_sandbox_unref (sb);
  json_decref (body);
  return;
fail:
  if (sb)
    sbx_sandbox_unref (sb);
  json_decref (body);
  sbx_reply_error (r, err);
}

/* POST /v1/sandboxes/ID/resume {"timeout": T}: the lifetime left at the
   pause continues, or a new one of T starts. 409 when it is not paused. */
void
sbx_route_sandbox_resume (struct sbx_req *r)
{
  static const char *const allowed[] = {"timeout", NULL};
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  json_t *body = NULL;
  uint64_t ms = 0;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_duration (body, "timeout", &ms, &err) < 0)
    goto fail;
  sb = sbx_req_sandbox (r, 2, &err);
  if (sb == NULL || sbx_sandbox_resume (sb, ms, &err) < 0)
    goto fail;
  sbx_reply_json (r, 200, sbx_sandbox_json (sb));
  sbx_sandbox_unref (sb);
  json_decref (body);
  return;
fail:
  if (sb)
    sbx_sandbox_unref (sb);
  json_decref (body);
  sbx_reply_error (r, err);
}
