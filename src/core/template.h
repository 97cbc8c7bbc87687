/* sbx: templates, the read-only trees sandboxes start from. */
#ifndef SBX_CORE_TEMPLATE_H
#define SBX_CORE_TEMPLATE_H

#include <jansson.h>

#include "iso/engine.h"

#define SBX_HOSTNAME "sandbox"
/* The code interpreter's template, and where its server is inside. */
#define SBX_CODE_TEMPLATE "code-interpreter-v1"
#define SBX_CODE_SERVER_PATH "/opt/sbx/code_server.py"
#define SBX_CODE_SERVER_MAX (256 * 1024)
#define SBX_CODE_PORT 49999
#define SBX_CODE_MIN_MEMORY (256ULL << 20)

struct sbx_template
{
  const char *name;
  struct sbx_plan plan;
};

struct sbx_etc_file
{
  const char *name; /* under /etc */
  const char *content;
};
/* sbx's generated /etc files, NULL-terminated. */
const struct sbx_etc_file *sbx_template_etc (void);

/* Build the built-in templates from the host (call once at start). */
int sbx_templates_init (const char *state_dir, sbx_error_t **err);
void sbx_templates_free (void);
/* A built-in template ("base", "code-interpreter-v1"); NULL for any other name. */
const struct sbx_template *sbx_template_find (const char *name);

/* Stored templates, as the front end sees them (tmpl_catalog.c). `tenant`
   NULL is the administrator (sees all). */
json_t *sbx_template_get_json (const char *tenant, const char *name, sbx_error_t **err);
json_t *sbx_template_list_json (const char *tenant);
/* 1 when `tenant` may create sandboxes from `name` (built-in or visible). */
int sbx_template_usable (const char *tenant, const char *name);
/* Whose `name` is: 1 a template `tenant` may use (*everyone: built in or
   global), 0 another tenant's, -1 no template of that name. */
int sbx_template_lookup (const char *tenant, const char *name, int *everyone);
/* The templates tenant owns: how many, and their bytes (quota, GET /v1/info). */
void sbx_template_usage (const char *tenant, unsigned *count, uint64_t *bytes);
/* 1 when `name` would be a stored template (not a built-in). */
int sbx_template_is_stored (const char *name);
/* {env: {K: V}, workdir?, user?, source} of a stored template, or NULL. */
json_t *sbx_template_meta (const char *name);
/* Build from the archive in fd ("oci" or "dir"); remove (409 while used). */
int sbx_template_build (const char *tenant, const char *name, const char *format, int fd,
                        sbx_error_t **err);
int sbx_template_delete (const char *tenant, const char *name, sbx_error_t **err);
/* The recipe build cache, the administrator's only (tenant NULL):
   {"entries": N, "bytes": B}, or with prune what emptying it removed. */
json_t *sbx_template_cache (const char *tenant, int prune, sbx_error_t **err);
/* {name, bytes, tail: [lines]} of a recipe build in progress, or NULL (404). */
json_t *sbx_template_progress (const char *tenant, const char *name, sbx_error_t **err);

#endif
