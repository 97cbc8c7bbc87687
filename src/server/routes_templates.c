/* sbx: the templates API (docs/templates.md).
 *
 *   POST   /v1/templates?name=NAME&format=oci|dir   body: the archive
 *   GET    /v1/templates, /v1/templates/NAME
 *   DELETE /v1/templates/NAME
 *   GET    /v1/template-cache    the recipe build cache: {"entries", "bytes"}
 *   DELETE /v1/template-cache    empty it: what it removed (the administrator's)
 *
 * The body is spooled, as it arrives, to an unnamed file (O_TMPFILE) in
 * the state directory, bounded by --template-max-size: nothing is left
 * behind if the daemon dies. The privileged parent gets the descriptor and
 * builds the template in a confined child (iso/tmpl_store.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "core/template.h"
#include "server/request.h"

int
sbx_templates_upload_begin (struct sbx_req *r, sbx_error_t **err)
{
  const struct sbx_config *cfg = sbx_core_config ();
  int fd;

  if (r->content_length != UINT64_MAX && r->content_length > cfg->template_max_upload)
    return sbx_err (err, SBX_E_TOO_LARGE, "the template archive is larger than %llu bytes",
                    (unsigned long long) cfg->template_max_upload);
  fd = open (cfg->state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_err_sys (err, errno, "spool the template archive");
  r->tmpl_spool = fd + 1;
  return 0;
}

void
sbx_templates_upload_body (struct sbx_req *r, const char *data, size_t len)
{
  if (r->tmpl_spool == 0 || r->tmpl_too_large)
    return;
  r->tmpl_bytes += len;
  if (r->tmpl_bytes > sbx_core_config ()->template_max_upload)
    {
      r->tmpl_too_large = 1;
      close (r->tmpl_spool - 1);
      r->tmpl_spool = 0;
      return;
    }
  while (len > 0)
    {
      ssize_t w = write (r->tmpl_spool - 1, data, len);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        {
          /* the state directory's file system is full: refuse it as too large */
          r->tmpl_too_large = 1;
          close (r->tmpl_spool - 1);
          r->tmpl_spool = 0;
          return;
        }
      data += w;
      len -= (size_t) w;
    }
}

void
sbx_route_template_build (struct sbx_req *r)
{
  const char *name = sbx_req_query (r, "name"), *format = sbx_req_query (r, "format");
  sbx_error_t *err = NULL;
  json_t *o;

  if (r->tmpl_too_large)
    {
      sbx_reply_errorf (r, SBX_E_TOO_LARGE, "the template archive is larger than %llu bytes",
                        (unsigned long long) sbx_core_config ()->template_max_upload);
      return;
    }
  if (r->tmpl_spool == 0 || r->tmpl_bytes == 0)
    {
      sbx_reply_errorf (r, SBX_E_INVALID, "the body must be the template archive (a tar)");
      return;
    }
  if (sbx_template_build (sbx_req_tenant (r), name, format, r->tmpl_spool - 1, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  o = sbx_template_get_json (sbx_req_tenant (r), name, &err);
  if (o == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  sbx_reply_json (r, 201, o);
}

void
sbx_route_template_list (struct sbx_req *r)
{
  sbx_reply_json (r, 200, json_pack ("{s:o}", "templates", sbx_template_list_json (sbx_req_tenant (r))));
}

void
sbx_route_template_get (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *o = sbx_template_get_json (sbx_req_tenant (r), r->segs[2], &err);

  if (o == NULL)
    sbx_reply_error (r, err);
  else
    sbx_reply_json (r, 200, o);
}

void
sbx_route_template_delete (struct sbx_req *r)
{
  sbx_error_t *err = NULL;

  if (sbx_template_delete (sbx_req_tenant (r), r->segs[2], &err) < 0)
    sbx_reply_error (r, err);
  else
    sbx_reply_empty (r, 204);
}

void
sbx_route_template_progress (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *o = sbx_template_progress (sbx_req_tenant (r), r->segs[2], &err);

  if (o == NULL)
    sbx_reply_error (r, err);
  else
    sbx_reply_json (r, 200, o);
}

static void
template_cache (struct sbx_req *r, int prune)
{
  sbx_error_t *err = NULL;
  json_t *o = sbx_template_cache (sbx_req_tenant (r), prune, &err);

  if (o == NULL)
    sbx_reply_error (r, err);
  else
    sbx_reply_json (r, 200, o);
}

void
sbx_route_template_cache_get (struct sbx_req *r)
{
  template_cache (r, 0);
}

void
sbx_route_template_cache_prune (struct sbx_req *r)
{
  template_cache (r, 1);
}
