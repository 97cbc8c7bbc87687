/* sbx: the VM relay's part in terminals (iso/vm_relay_pty.c). */
#ifndef SBX_ISO_VM_RELAY_PTY_H
#define SBX_ISO_VM_RELAY_PTY_H

#include "iso/proto.h"
#include "vm/wire.h"

/* A SPAWN with SBX_SPAWN_PTY from the daemon: its size 1..SBX_PTY_MAX and
   no flag but the terminal's. 0, or -1 (a broken daemon). */
int sbx_vm_pty_check_spawn (const struct sbx_msg_spawn *s);
/* A RESIZE from the daemon into the guest's frame. 0, or -1. */
int sbx_vm_pty_resize (const struct sbx_msg_resize *r, struct sbx_vm_pty *t);
/* SPAWNED (flags SBX_SPAWNED_PTY) with the daemon's end of the command's
   socket pair; closes fd either way. 0, or -1 (the daemon is gone). */
int sbx_vm_pty_send_spawned (int ctl, const struct sbx_msg_spawned *m, int fd);

#endif
