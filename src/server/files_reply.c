/* sbx: a download's response, for both engines (the files API's GET and
 * E2B's GET /files). The namespace engine's parent opens the file and MHD
 * sends the fd; a VM's guest sends the bytes (core/vm_fs.c), which the
 * response holds in memory, at most VM_READ_MAX. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "priv/host.h"
#include "server/request.h"

#define VM_READ_MAX (64u << 20)

struct MHD_Response *
sbx_files_response (const struct sbx_fs_ctx *ctx, const char *path, sbx_error_t **err)
{
  struct MHD_Response *resp;

  if (ctx->remote)
    {
      char *data = NULL;
      size_t len = 0;
      if (strlen (path) >= SBX_FS_PATH_MAX) /* the parent's limit (priv/client.c) */
        return sbx_err (err, SBX_E_INVALID, "path too long"), NULL;
      if (ctx->remote->read (ctx->remote->arg, path, VM_READ_MAX, &data, &len, err) < 0)
        return NULL;
      resp = MHD_create_response_from_buffer (len, data, MHD_RESPMEM_MUST_FREE);
      if (resp == NULL)
        {
          free (data);
          sbx_err_oom (err);
        }
      return resp;
    }
  {
    uint64_t size = 0;
    int fd = sbx_host_fs_open_read (ctx, path, &size, err);
    if (fd < 0)
      return NULL;
    /* MHD owns fd now and sends it with sendfile. */
    resp = MHD_create_response_from_fd64 (size, fd);
    if (resp == NULL)
      {
        /* The size and fd are good: it found no memory. */
        close (fd);
        sbx_err_oom (err);
      }
    return resp;
  }
}
