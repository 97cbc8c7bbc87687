/* sbx: terminals for a VM's commands (vm/agent_pty.c, docs/vm.md "Terminals"). */
#ifndef SBX_VM_AGENT_PTY_H
#define SBX_VM_AGENT_PTY_H

#include <stddef.h>
#include <stdint.h>

#include "vm/wire.h"

/* In the guest's minimal /dev, before it is made read-only: a private
   devpts instance at /dev/pts and the /dev/ptmx link, as a namespace
   sandbox has. NULL, or what failed (errno set). */
const char *sbx_agent_pty_dev (void);

/* A SPAWN_PTY or RESIZE payload's size: 0 when valid, else -1. */
int sbx_agent_pty_check (const struct sbx_vm_pty *t);

/* A new terminal of t's size owned by uid: both ends close-on-exec, the
   master non-blocking. 0, or -errno. */
int sbx_agent_pty_open (uint32_t uid, const struct sbx_vm_pty *t, int *master, int *slave);

/* In the command's child, before its walls: a session of its own with the
   slave as controlling terminal and as fds 0, 1 and 2. 0, or errno. */
int sbx_agent_pty_stdio (int slave);

/* RESIZE: the kernel signals SIGWINCH to the terminal's foreground group. */
void sbx_agent_pty_resize (int master, const struct sbx_vm_pty *t);

/* After the command was reaped: what it wrote is read from the master
   until nothing is left (a terminal has no end of file while a process
   the command left behind holds the slave), sent as STDOUT frames. */
void sbx_agent_pty_drain (int master, uint64_t id);

#endif
