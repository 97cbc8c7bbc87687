/* sbx: templates, the read-only trees sandboxes start from. */
#ifndef SBX_CORE_TEMPLATE_H
#define SBX_CORE_TEMPLATE_H

#include "iso/engine.h"

#define SBX_HOSTNAME "sandbox"

struct sbx_template
{
  const char *name;
  struct sbx_plan plan;
};

/* Build the built-in templates from the host (call once at start). */
int sbx_templates_init (const char *state_dir, sbx_error_t **err);
void sbx_templates_free (void);
/* NULL when unknown. */
const struct sbx_template *sbx_template_find (const char *name);

#endif
