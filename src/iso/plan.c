/* sbx: encoding a template's root plan for init (see proto.h). */
#include <string.h>

#include "iso/engine.h"

int
sbx_plan_add (struct sbx_plan *plan, enum sbx_plan_kind kind, uint16_t flags, uint32_t mode,
              const char *src, const char *dst, const void *data, size_t data_len,
              sbx_error_t **err)
{
  struct sbx_plan_entry e;
  size_t src_len = src ? strlen (src) : 0, dst_len = strlen (dst);

  if (plan->count >= SBX_PLAN_MAX_ENTRIES)
    return sbx_err (err, SBX_E_INVALID, "template plan has more than %d entries",
                    SBX_PLAN_MAX_ENTRIES);
  if (!sbx_plan_path_ok (dst, dst_len))
    return sbx_err (err, SBX_E_INVALID, "template path `%s` is not a clean relative path", dst);
  if (src_len >= SBX_PATH_MAX || (kind == SBX_PLAN_BIND_RO && (src_len == 0 || src[0] != '/')))
    return sbx_err (err, SBX_E_INVALID, "template source `%s` must be an absolute path",
                    src ? src : "");
  if (kind != SBX_PLAN_DIR && kind != SBX_PLAN_FILE && kind != SBX_PLAN_SYMLINK
      && kind != SBX_PLAN_BIND_RO)
    return sbx_err (err, SBX_E_INVALID, "template entry `%s` has an unknown kind %d", dst,
                    (int) kind);
  /* init refuses an empty or path-sized link target (a protocol violation
     that ends the sandbox), and a NUL would cut it short there. */
  if (kind == SBX_PLAN_SYMLINK
      && (data_len == 0 || data_len >= SBX_PATH_MAX || memchr (data, '\0', data_len) != NULL))
    return sbx_err (err, SBX_E_INVALID, "template link `%s` needs a target of 1 to %d bytes",
                    dst, SBX_PATH_MAX - 1);
  if (data_len > SBX_PROTO_MAX_MSG / 2)
    return sbx_err (err, SBX_E_TOO_LARGE, "template file `%s` is too large", dst);
  memset (&e, 0, sizeof e);
  e.kind = (uint16_t) kind;
  e.flags = flags;
  e.mode = mode;
  e.src_len = (uint32_t) src_len;
  e.dst_len = (uint32_t) dst_len;
  e.data_len = (uint32_t) data_len;
  sbx_buf_append (&plan->bytes, &e, sizeof e);
  if (src_len)
    sbx_buf_append (&plan->bytes, src, src_len);
  sbx_buf_append (&plan->bytes, dst, dst_len);
  if (data_len)
    sbx_buf_append (&plan->bytes, data, data_len);
  plan->count++;
  return 0;
}

void
sbx_plan_free (struct sbx_plan *plan)
{
  sbx_buf_free (&plan->bytes);
  plan->count = 0;
}
