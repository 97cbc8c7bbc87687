/* sbx: the VM root image of template code-interpreter-v1 (docs/vm.md "The
 * root filesystem"): base's image plus the host's Debian packages the
 * namespace template's server imports (a namespace sandbox of it sees the
 * host's /usr; a VM sees only what its image holds) and the server itself,
 * /opt/sbx/code_server.py, the very bytes the template's plan gives a
 * namespace sandbox. Cached under its own KEY (the extra packages'
 * versions and the server's bytes are in it). */
#include <string.h>

#include "core/template.h"
#include "iso/engine.h"
#include "iso/proto.h"
#include "iso/vm_image.h"
#include "iso/vm_image_base.h"

/* What code_server.py imports besides the standard library (IPython and
   traitlets, numpy, pandas, matplotlib with its inline backend), as in
   scripts/install-deps.sh; their dependencies come with them. */
static const char *const code_packages[]
    = {"python3-ipython", "python3-matplotlib-inline", "python3-numpy", "python3-pandas",
       "python3-matplotlib", NULL};

/* Debian's dependencies that the server never loads, kept out of the
   image (they tripled it: 1133 MiB of files, against 3xx without):
   python3-fonttools (matplotlib's PDF/PS font subsetting) depends on
   python3-sympy and unicode-data, python3-scipy on python3-pythran (a
   compiler: gcc, g++, boost's headers), mailcap on perl (its update
   script), matplotlib on python3-tk (a GUI backend; the server draws
   with Agg). A namespace sandbox sees the host's whole /usr; a VM's cell
   that imports one of these gets ModuleNotFoundError. */
static const char *const code_skip[]
    = {"python3-pythran", "python3-sympy", "unicode-data", "perl", "python3-tk", NULL};

/* The server's bytes in the plan: the FILE entry at SBX_CODE_SERVER_PATH.
   The plan is the parent's own (core/template.c), but walked with bounds
   all the same. */
static int
find_server (const struct sbx_plan *plan, const void **data, size_t *len)
{
  const char *want = &SBX_CODE_SERVER_PATH[1];
  const unsigned char *b = (const unsigned char *) plan->bytes.data;
  size_t off = 0, n = plan->bytes.len;

  for (uint32_t i = 0; i < plan->count; i++)
    {
      struct sbx_plan_entry e;
      size_t body;
      if (n - off < sizeof e)
        return -1;
      memcpy (&e, b + off, sizeof e);
      off += sizeof e;
      body = (size_t) e.src_len + e.dst_len + e.data_len;
      if (n - off < body)
        return -1;
      if (e.kind == SBX_PLAN_FILE && e.dst_len == strlen (want)
          && memcmp (b + off + e.src_len, want, e.dst_len) == 0 && e.data_len > 0)
        {
          *data = b + off + e.src_len + e.dst_len;
          *len = e.data_len;
          return 0;
        }
      off += body;
    }
  return -1;
}

/* The extra of code-interpreter-v1's image: its packages and server. */
static void
code_extra (const struct sbx_plan *plan, struct sbx_vm_extra *extra)
{
  *extra = (struct sbx_vm_extra){SBX_CODE_TEMPLATE, code_packages, code_skip, NULL, NULL, 0};
  /* Without the server (sbxd found no share/sbx/code_server.py) the image
     still holds the packages; the core then says the server does not run,
     as for a namespace sandbox (core/code.c). */
  if (find_server (plan, &extra->data, &extra->len) == 0)
    extra->file = &SBX_CODE_SERVER_PATH[1];
}

int
sbx_vm_image_code (const struct sbx_plan *plan, struct sbx_vm_image *img, sbx_error_t **err)
{
  struct sbx_vm_extra extra;

  code_extra (plan, &extra);
  return sbx_vm_image_builtin (&extra, img, err);
}

int
sbx_vm_image_code_key (const struct sbx_plan *plan, struct sbx_vm_pkgs *p, char key[65],
                       sbx_error_t **err)
{
  struct sbx_vm_extra extra;

  code_extra (plan, &extra);
  return sbx_vm_base_key (p, &extra, key, err);
}
