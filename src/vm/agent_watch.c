/* sbx: a directory watch inside a VM's guest (docs/vm.md, Directory
 * watches).
 *
 * A file operation of its own ("sbx-fs watch PATH RECURSIVE", vm/fs_wire.h):
 * the agent forked it as for a command and put up the command's walls
 * (the requested user, no capabilities, no_new_privs, seccomp) and
 * vm/agent_fs.c closed the agent's descriptors. What is left here is what
 * the namespace engine's init adds for its helper (iso/init/watch.c):
 * default signals, not dumpable, no core, no file writes, few
 * descriptors. Then the
 * namespace engine's own watch code (iso/init/watch_run.c) runs: its
 * records go to stdout, which the agent sends as STDOUT frames and the
 * relay writes into the daemon's pipe, where core/watch.c checks them as
 * it checks the namespace helper's. The watch ends when the host kills it
 * (SIGNAL to its process group) or its directory goes.
 */
#include "vm/agent_fs.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "iso/init/watch_run.h"

void
sbx_agent_watch_run (const char *path, int recursive)
{
  sigset_t none;

  /* No exec reset what the agent had: SIGPIPE must kill it when the
     stream is gone, as it does the namespace helper. */
  for (int i = 1; i < NSIG; i++)
    signal (i, SIG_DFL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  prctl (PR_SET_NAME, "sbx-watch", 0, 0, 0);
  /* As init's helper: not dumpable, so no command of the same uid (root's
     included: commands have no capabilities) can open its stdout through
     /proc/PID/fd and forge records. A uid change would have cleared the
     flag for "user"; for "root" there was none. */
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    _exit (5);
  if (path[0] != '/' || strlen (path) >= SBX_WATCH_PATH_MAX)
    _exit (2); /* the host checked it: not a request the host makes */
  sbx_watch_run_limits ();
  /* The helper keeps its working directory at / (watch_run.c). */
  if (chdir ("/") < 0)
    sbx_watch_run_fail (errno);
  sbx_watch_run (path, recursive);
}
