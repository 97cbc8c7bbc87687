/* sbx: /v1/secrets, a tenant's secrets (docs/egress.md, Credentials).
 *
 * POST takes {"name", "value", "description"?}; GET lists names, never
 * values; DELETE /v1/secrets/NAME. A tenant sees and names only its own;
 * the administrator (unix socket) acts for the tenant in ?tenant= (the
 * "default" tenant without it). The request body that carried a value is
 * wiped as soon as it is parsed; an audit record names the secret, never
 * its value.
 */
#include <stdint.h>
#include <string.h>

#include "core/audit.h"
#include "core/keys.h"
#include "core/secrets.h"
#include "server/request.h"

static const char *
secret_tenant (struct sbx_req *r)
{
  const char *t = sbx_req_tenant (r);

  if (t != NULL)
    return t;
  t = sbx_req_query (r, "tenant");
  return t ? t : "default";
}

static void
audit_secret (const char *tenant, const char *action, const char *name)
{
  sbx_audit_record ("secret", json_pack ("{s:s, s:s, s:s}", "tenant", tenant, "action", action,
                                         "name", name));
}

/* Overwrite a JSON string's bytes before it is freed. */
static void
wipe_string (json_t *v)
{
  char *p = (char *) (uintptr_t) json_string_value (v);

  if (p != NULL)
    explicit_bzero (p, json_string_length (v));
}

void
sbx_route_secret_create (struct sbx_req *r)
{
  static const char *const allowed[] = {"name", "value", "description", NULL};
  const char *tenant = secret_tenant (r), *name = NULL, *description = NULL;
  sbx_error_t *err = NULL;
  json_t *body = NULL, *value;
  int64_t created = 0;
  int rc;

  if (!sbx_tenant_valid (tenant))
    {
      sbx_reply_errorf (r, SBX_E_INVALID, "tenant must be 1 to 64 of A-Z, a-z, 0-9, _, . and -");
      return;
    }
  rc = sbx_req_json (r, &body, &err);
  if (r->body.data)
    explicit_bzero (r->body.data, r->body.cap);
  if (rc < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_string (body, "name", &name, &err) < 0
      || sbx_param_string (body, "description", &description, &err) < 0)
    goto fail;
  value = json_object_get (body, "value");
  if (name == NULL)
    {
      sbx_err (&err, SBX_E_INVALID, "name is required");
      goto fail;
    }
  if (!json_is_string (value))
    {
      sbx_err (&err, SBX_E_INVALID, "value is required (a string)");
      goto fail;
    }
  if (sbx_secret_create (sbx_core_store (), tenant, name, json_string_value (value),
                         json_string_length (value), description, &created, &err)
      < 0)
    goto fail;
  audit_secret (tenant, "created", name);
  sbx_reply_json (r, 201,
                  json_pack ("{s:s, s:s, s:o}", "name", name, "description",
                             description ? description : "", "created_at",
                             sbx_json_time (created)));
  wipe_string (value);
  json_decref (body);
  return;
fail:
  wipe_string (json_object_get (body, "value"));
  json_decref (body);
  sbx_reply_error (r, err);
}

void
sbx_route_secret_list (struct sbx_req *r)
{
  const char *tenant = secret_tenant (r);
  sbx_error_t *err = NULL;
  json_t *a = sbx_secret_list (sbx_core_store (), tenant, &err);

  if (a == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  sbx_reply_json (r, 200, json_pack ("{s:o}", "secrets", a));
}

void
sbx_route_secret_delete (struct sbx_req *r)
{
  const char *tenant = secret_tenant (r), *name = r->segs[2];
  sbx_error_t *err = NULL;

  if (sbx_secret_delete (sbx_core_store (), tenant, name, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  audit_secret (tenant, "deleted", name);
  sbx_reply_empty (r, 204);
}
