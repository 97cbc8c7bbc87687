/* sbx: the start of a directory watch in a VM (docs/vm.md, Directory
 * watches).
 *
 * A VM has no init to fork the namespace engine's helper (SBX_MSG_WATCH):
 * the watch is a file operation of the guest agent instead ("sbx-fs watch
 * PATH RECURSIVE", vm/agent_watch.c), which runs the same helper code
 * behind a command's walls. Its stdout is the watch's pipe: the relay
 * writes the STDOUT frames' bytes into it, and core/watch.c reads and
 * checks them exactly as it does the namespace helper's (iso/watch.c:
 * they are the tenant's, as there). Its end is a SIGKILL to req_id, as
 * for the namespace helper; its EXITED (or SPAWN_FAILED) event comes for
 * req_id the same way. No frame or message is new.
 */
#include <string.h>

#include "core/internal.h"
#include "vm/fs_wire.h"

int
sbx__vm_watch_start (struct sbx_sandbox *sb, uint64_t req_id, uint32_t uid, int recursive,
                     const char *path, int write_fd, sbx_error_t **err)
{
  static char a0[] = SBX_VM_FS_ARGV0, a1[] = "watch";
  char p[SBX_WATCH_PATH_MAX], r[2] = {recursive ? '1' : '0', '\0'};
  char *argv[] = {a0, a1, p, r, NULL};
  char *envp[] = {NULL};
  struct sbx_iso_spawn spawn;
  size_t len = strlen (path);

  /* The caller checked it; a copy, argv's strings being mutable. */
  if (len >= sizeof p)
    return sbx_err (err, SBX_E_INVALID, "the path to watch is too long");
  memcpy (p, path, len + 1);

  memset (&spawn, 0, sizeof spawn);
  spawn.req_id = req_id;
  spawn.uid = spawn.gid = uid;
  spawn.cwd = "/";
  spawn.argv = argv;
  spawn.envp = envp;
  /* The helper lowers both itself (no writes, few descriptors). */
  spawn.rlimit_nofile = 32;
  spawn.rlimit_fsize = 0;
  /* Its stderr says nothing the daemon wants; only stdout is the stream. */
  spawn.stdio[0] = sbx_core.devnull;
  spawn.stdio[1] = write_fd;
  spawn.stdio[2] = sbx_core.devnull;
  spawn.keep[0] = spawn.keep[1] = spawn.keep[2] = -1; /* a VM ends with its daemon */
  spawn.file_op = 1;
  return sbx_iso_spawn (&sb->box, &spawn, err);
}
