/* sbx: the agent's file operations (vm/agent_fs.c, vm/fs_wire.h). */
#ifndef SBX_VM_AGENT_FS_H
#define SBX_VM_AGENT_FS_H

#include "util/error.h"
#include "vm/fs_wire.h"

/* In a command's child, after every wall is up (user, capabilities,
   no_new_privs, seccomp): run argv (SBX_VM_FS_ARGV0, operation, its
   arguments), write the records to stdout, and exit: 0 after END, 1 after
   ERROR, 2 when argv is not a file operation. */
__attribute__ ((noreturn)) void sbx_agent_fs_run (int argc, char **argv);

/* vm/agent_watch.c: `watch PATH RECURSIVE`, the namespace engine's
   directory watch helper (iso/init/watch_run.c), its records on stdout. */
__attribute__ ((noreturn)) void sbx_agent_watch_run (const char *path, int recursive);

/* vm/agent_metrics.c: the guest's memory, CPU and the disk at `disk`. */
int sbx_agent_metrics (const char *disk, struct sbx_vm_fs_metrics *m, sbx_error_t **err);

#endif
