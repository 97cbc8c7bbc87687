/* sbx: the files API's download for a VM sandbox (docs/vm.md).
 *
 * The parent cannot open a file inside a guest: its disk is guest memory.
 * The file is read in the guest instead, by `cat` run through the agent as
 * the requested user, so the guest's kernel resolves the path and checks
 * its permissions, as the parent's openat2 does for the namespace engine.
 * The bytes come back as the command's stdout (HEAD mode, capped); what
 * cat says on stderr becomes the error's kind.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/internal.h"

#define VM_READ_TIMEOUT_MS 60000

static int
cat_error (const char *path, const char *msg, sbx_error_t **err)
{
  if (strstr (msg, "No such file") || strstr (msg, "Not a directory"))
    return sbx_err (err, SBX_E_NOT_FOUND, "no such file: %.200s", path);
  if (strstr (msg, "Permission denied"))
    return sbx_err (err, SBX_E_FORBIDDEN, "permission denied: %.200s", path);
  if (strstr (msg, "Is a directory"))
    return sbx_err (err, SBX_E_INVALID, "%.200s is a directory", path);
  return sbx_err (err, SBX_E_SYSTEM, "reading %.200s in the VM failed", path);
}

int
sbx_vm_file_read (struct sbx_sandbox *sb, const char *user, const char *path, size_t max,
                  char **data, size_t *len, sbx_error_t **err)
{
  static char a_cat[] = "cat", a_dash[] = "--";
  char *p_copy = strdup (path);
  char *argv[] = {a_cat, a_dash, p_copy, NULL};
  struct sbx_exec_opts o;
  struct sbx_process *p;
  int rc = -1;

  *data = NULL;
  *len = 0;
  if (p_copy == NULL)
    return sbx_err_oom (err);
  if (path[0] != '/')
    {
      free (p_copy);
      return sbx_err (err, SBX_E_INVALID, "the path must be absolute");
    }
  memset (&o, 0, sizeof o);
  o.argv = argv;
  o.user = user;
  o.cwd = "/";
  o.timeout_ms = VM_READ_TIMEOUT_MS;
  o.mode = SBX_OUT_HEAD;
  o.out_cap = max + 1; /* one more: a file larger than max is a 413 */
  p = sbx_process_start (sb, &o, err);
  free (p_copy);
  if (p == NULL)
    return -1;
  sbx_process_wait (p, -1);
  pthread_mutex_lock (&sbx_core.lock);
  {
    const struct sbx_outbuf *out = &p->out[0], *e = &p->out[1];
    size_t n = (size_t) (out->end - out->start), en = (size_t) (e->end - e->start);
    if (p->timed_out)
      sbx_err (err, SBX_E_UNAVAILABLE, "reading %.200s in the VM took over %d s", path,
               VM_READ_TIMEOUT_MS / 1000);
    else if (!p->exited || !WIFEXITED (p->wait_status) || WEXITSTATUS (p->wait_status) != 0)
      {
        char msg[256];
        if (en >= sizeof msg)
          en = sizeof msg - 1;
        sbx__outbuf_copy (e, SBX_OUT_HEAD, e->start, msg, en);
        msg[en] = '\0';
        cat_error (path, msg, err);
      }
    else if (n > max || out->dropped)
      sbx_err (err, SBX_E_TOO_LARGE, "%.200s is larger than %zu bytes", path, max);
    else if ((*data = malloc (n ? n : 1)) == NULL)
      sbx_err_oom (err);
    else
      {
        sbx__outbuf_copy (out, SBX_OUT_HEAD, out->start, *data, n);
        *len = n;
        rc = 0;
      }
  }
  pthread_mutex_unlock (&sbx_core.lock);
  sbx_process_collect (p);
  sbx_process_unref (p);
  return rc;
}
