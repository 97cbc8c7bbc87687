/* sbx: terminals of a VM's commands, the relay's part (docs/vm.md
 * "Terminals").
 *
 * The terminal is the guest's (vm/agent_pty.c): the relay never allocates
 * one on the host. The daemon, which for a namespace sandbox gets the
 * master from init, gets one end of a unix socket pair instead and reads
 * and writes it exactly as a master (the front end takes a stream socket
 * there from a VM relay only, iso/sandbox.c); the relay copies its bytes
 * to STDIN frames and the guest's STDOUT frames to it.
 */
#include <errno.h>
#include <unistd.h>

#include "iso/vm_relay_pty.h"
#include "iso/wire.h"

static int
size_ok (unsigned cols, unsigned rows)
{
  return cols >= 1 && cols <= SBX_PTY_MAX && rows >= 1 && rows <= SBX_PTY_MAX;
}

int
sbx_vm_pty_check_spawn (const struct sbx_msg_spawn *s)
{
  return s->flags == SBX_SPAWN_PTY && s->keep_mask == 0 && size_ok (s->pty_cols, s->pty_rows)
             ? 0
             : -1;
}

int
sbx_vm_pty_resize (const struct sbx_msg_resize *r, struct sbx_vm_pty *t)
{
  if (!size_ok (r->cols, r->rows))
    return -1;
  t->cols = r->cols;
  t->rows = r->rows;
  t->reserved = 0;
  return 0;
}

int
sbx_vm_pty_send_spawned (int ctl, const struct sbx_msg_spawned *m, int fd)
{
  /* As the relay's other answers (reply()): one that does not go ends
     the relay, SPAWNED is never lost. */
  int r = sbx__sendmsg (ctl, m, sizeof *m, &fd, 1, 0);
  close (fd);
  return r < 0 ? -1 : 0;
}
