/* sbx: GET /v1/audit, the audit log's records (administrator only;
 * docs/audit.md, docs/api.md). */
#include <stdio.h>
#include <string.h>

#include "core/audit.h"
#include "server/request.h"
#include "util/parse.h"

#define AUDIT_LIMIT_DEFAULT 100
#define AUDIT_LIMIT_MAX 1000

void
sbx_route_audit (struct sbx_req *r)
{
  const char *sandbox = sbx_req_query (r, "sandbox");
  const char *after = sbx_req_query (r, "after_seq");
  const char *limit_s = sbx_req_query (r, "limit");
  uint64_t after_seq = 0, limit = AUDIT_LIMIT_DEFAULT;
  sbx_error_t *err = NULL;
  json_t *o;

  if (after && sbx_parse_uint64 (after, &after_seq, &err) < 0)
    {
      sbx_error_free (err);
      sbx_reply_errorf (r, SBX_E_INVALID, "after_seq must be a record's seq (0 or more)");
      return;
    }
  if (limit_s && (sbx_parse_uint64 (limit_s, &limit, &err) < 0 || limit < 1
                  || limit > AUDIT_LIMIT_MAX))
    {
      sbx_error_free (err);
      sbx_reply_errorf (r, SBX_E_INVALID, "limit must be 1 to %d", AUDIT_LIMIT_MAX);
      return;
    }
  if (sandbox && (sandbox[0] == '\0' || strlen (sandbox) > 64))
    {
      sbx_reply_errorf (r, SBX_E_INVALID, "sandbox must be a sandbox id");
      return;
    }
  o = sbx_audit_query (sandbox, after_seq, (size_t) limit, &err);
  if (o == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  sbx_reply_json (r, 200, o);
}
