/* sbx: the files API's download and upload for a VM sandbox (docs/vm.md).
 *
 * The parent cannot open a file inside a guest: its disk is guest memory.
 * The file is read or written in the guest instead, by a command run
 * through the agent as the requested user (`cat`, or a short sh script
 * for an upload), so the guest's kernel resolves the path and checks its
 * permissions, as the parent's openat2 does for the namespace engine.
 * A download's bytes come back as the command's stdout (HEAD mode,
 * capped); an upload's body is its stdin. What it says on stderr becomes
 * the error's kind.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/internal.h"

#define VM_READ_TIMEOUT_MS 60000

/* Written beside the target and renamed over it (an upload replaces the
   file atomically, as for the namespace engine). $1 path, $2 mode, $3
   parents. */
static const char upload_script[]
    = "p=$1; d=${p%/*}; [ -n \"$d\" ] || d=/\n"
      "if [ \"$3\" = 1 ]; then mkdir -p -- \"$d\" || exit 1; fi\n"
      "t=\"$d/.sbx-upload.$$\"\n"
      "trap 'rm -f -- \"$t\"' EXIT\n"
      "trap 'exit 1' TERM INT HUP\n"
      "cat > \"$t\" && chmod \"$2\" \"$t\" && mv -f -- \"$t\" \"$p\" || exit 1\n"
      "trap - EXIT\n";

static int
cmd_error (const char *path, const char *msg, sbx_error_t **err)
{
  /* busybox's and coreutils' messages; for a redirection into a missing
     directory busybox's shell says "nonexistent directory", dash (the
     root image's sh) "Directory nonexistent". */
  if (strstr (msg, "No such file") || strstr (msg, "Not a directory")
      || strstr (msg, "nonexistent directory") || strstr (msg, "Directory nonexistent"))
    return sbx_err (err, SBX_E_NOT_FOUND, "no such file or directory: %.200s", path);
  if (strstr (msg, "Permission denied") || strstr (msg, "Read-only file system"))
    return sbx_err (err, SBX_E_FORBIDDEN, "permission denied: %.200s", path);
  if (strstr (msg, "Is a directory"))
    return sbx_err (err, SBX_E_INVALID, "%.200s is a directory", path);
  if (strstr (msg, "No space left"))
    return sbx_err (err, SBX_E_TOO_LARGE, "the file is larger than the sandbox's disk");
  return sbx_err (err, SBX_E_SYSTEM, "%.200s: the command in the VM failed", path);
}

static int
check_path (const char *path, sbx_error_t **err)
{
  size_t n = strlen (path);
  if (path[0] != '/')
    return sbx_err (err, SBX_E_INVALID, "the path must be absolute");
  if (n > 1 && path[n - 1] == '/')
    return sbx_err (err, SBX_E_INVALID, "the path must not end in `/`");
  return 0;
}

/* After the command ended: 0, or its error from its status and stderr. */
static int
finished (struct sbx_process *p, const char *path, sbx_error_t **err)
{
  const struct sbx_outbuf *e = &p->out[1];
  char msg[256];
  size_t en = (size_t) (e->end - e->start);

  if (p->timed_out)
    return sbx_err (err, SBX_E_UNAVAILABLE, "%.200s: the command in the VM took too long", path);
  if (p->exited && WIFEXITED (p->wait_status) && WEXITSTATUS (p->wait_status) == 0)
    return 0;
  if (!p->exited)
    return sbx_err (err, SBX_E_UNAVAILABLE, "%.200s: the command in the VM did not start (%s)",
                    path, p->reason[0] ? p->reason : "unknown");
  if (en >= sizeof msg)
    en = sizeof msg - 1;
  sbx__outbuf_copy (e, SBX_OUT_HEAD, e->start, msg, en);
  msg[en] = '\0';
  return cmd_error (path, msg, err);
}

int
sbx_vm_file_read (struct sbx_sandbox *sb, const char *user, const char *path, size_t max,
                  char **data, size_t *len, sbx_error_t **err)
{
  static char a_cat[] = "cat", a_dash[] = "--";
  char *p_copy;
  struct sbx_exec_opts o;
  struct sbx_process *p;
  int rc = -1;

  *data = NULL;
  *len = 0;
  if (check_path (path, err) < 0)
    return -1;
  if ((p_copy = strdup (path)) == NULL)
    return sbx_err_oom (err);
  char *argv[] = {a_cat, a_dash, p_copy, NULL};
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
    const struct sbx_outbuf *out = &p->out[0];
    size_t n = (size_t) (out->end - out->start);
    if (finished (p, path, err) < 0)
      ;
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

struct sbx_process *
sbx_vm_upload_begin (struct sbx_sandbox *sb, const char *user, const char *path, uint32_t mode,
                     int parents, sbx_error_t **err)
{
  static char a_sh[] = "sh", a_c[] = "-c";
  char a_mode[8], a_parents[2] = {parents ? '1' : '0', '\0'};
  char *p_copy, *script;
  struct sbx_exec_opts o;
  struct sbx_process *p;

  if (check_path (path, err) < 0)
    return NULL;
  snprintf (a_mode, sizeof a_mode, "%o", (unsigned) mode & 0777);
  p_copy = strdup (path);
  script = strdup (upload_script);
  if (p_copy == NULL || script == NULL)
    {
      free (p_copy);
      free (script);
      return sbx_err_oom (err), NULL;
    }
  char *argv[] = {a_sh, a_c, script, a_sh, p_copy, a_mode, a_parents, NULL};
  memset (&o, 0, sizeof o);
  o.argv = argv;
  o.user = user;
  o.cwd = "/";
  o.stdin_open = 1;
  o.mode = SBX_OUT_HEAD;
  o.out_cap = 4096;
  p = sbx_process_start (sb, &o, err);
  free (p_copy);
  free (script);
  return p;
}

int
sbx_vm_upload_write (struct sbx_process *p, const void *data, size_t len, sbx_error_t **err)
{
  return sbx_process_write_stdin (p, data, len, 0, NULL, NULL, err);
}

int
sbx_vm_upload_end (struct sbx_process *p, const char *path, int commit, sbx_error_t **err)
{
  int rc = 0;

  if (!commit)
    {
      /* Its trap removes the temporary file; a guest that does not end it
         in 10 s loses it (SIGKILL: the temporary stays). */
      sbx_process_signal (p, SIGTERM, NULL);
      if (!sbx_process_wait (p, 10000))
        sbx_process_signal (p, SIGKILL, NULL);
    }
  else if (sbx_process_write_stdin (p, NULL, 0, 1, NULL, NULL, err) < 0)
    rc = -1;
  sbx_process_wait (p, -1);
  if (commit && rc == 0)
    {
      pthread_mutex_lock (&sbx_core.lock);
      rc = finished (p, path, err);
      pthread_mutex_unlock (&sbx_core.lock);
    }
  sbx_process_collect (p);
  sbx_process_unref (p);
  return rc;
}
