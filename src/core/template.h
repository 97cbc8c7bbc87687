/* sbx: templates, the read-only trees sandboxes start from. */
#ifndef SBX_CORE_TEMPLATE_H
#define SBX_CORE_TEMPLATE_H

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

/* Build the built-in templates from the host (call once at start). */
int sbx_templates_init (const char *state_dir, sbx_error_t **err);
void sbx_templates_free (void);
/* NULL when unknown. "base" and "code-interpreter-v1". */
const struct sbx_template *sbx_template_find (const char *name);

#endif
