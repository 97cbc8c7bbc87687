/* sbx: terminals for a VM's commands (docs/vm.md "Terminals").
 *
 * The namespace engine's init does the same in iso/init/spawn.c: a
 * terminal from the sandbox's own devpts instance, the slave as the
 * command's stdio and controlling terminal, the master kept by the agent.
 * Its bytes travel as the command's STDOUT and STDIN frames; the host never
 * holds a terminal of the guest (the relay gives the daemon a socket).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "iso/proto.h"
#include "vm/agent.h"
#include "vm/agent_pty.h"

const char *
sbx_agent_pty_dev (void)
{
  /* newinstance: not the guest's initial devpts (the console's, none
     here), ptmxmode 0666 for uid 1000; max as a namespace sandbox. */
  if (mkdir ("/dev/pts", 0755) < 0)
    return "make /dev/pts";
  if (mount ("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
             "newinstance,ptmxmode=0666,mode=0620,gid=5,max=256")
      < 0)
    return "mount devpts";
  if (symlink ("pts/ptmx", "/dev/ptmx") < 0)
    return "make /dev/ptmx";
  return NULL;
}

int
sbx_agent_pty_check (const struct sbx_vm_pty *t)
{
  return t->cols >= 1 && t->cols <= SBX_PTY_MAX && t->rows >= 1 && t->rows <= SBX_PTY_MAX
                 && t->reserved == 0
             ? 0
             : -1;
}

int
sbx_agent_pty_open (uint32_t uid, const struct sbx_vm_pty *t, int *master, int *slave)
{
  struct winsize ws;
  int unlock = 0, m, s, e;

  /* devpts gives a new terminal the fsuid of whoever opens ptmx: the
     command's user owns its terminal, as after a login. */
  setfsuid (uid);
  m = open ("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  e = errno;
  setfsuid (0);
  if (m < 0)
    return -e;
  memset (&ws, 0, sizeof ws);
  ws.ws_col = t->cols;
  ws.ws_row = t->rows;
  if (ioctl (m, TIOCSPTLCK, &unlock) < 0 || ioctl (m, TIOCSWINSZ, &ws) < 0)
    goto fail;
  /* The slave through the master, not by its path (iso/init/spawn.c). */
  s = ioctl (m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0)
    goto fail;
  *master = m;
  *slave = s;
  return 0;
fail:
  e = errno;
  close (m);
  return -e;
}

int
sbx_agent_pty_stdio (int slave)
{
  if (setsid () < 0 || ioctl (slave, TIOCSCTTY, 0) < 0)
    return errno;
  for (int fd = 0; fd < 3; fd++)
    if (dup2 (slave, fd) < 0)
      return errno;
  return 0;
}

void
sbx_agent_pty_resize (int master, const struct sbx_vm_pty *t)
{
  struct winsize ws;
  memset (&ws, 0, sizeof ws);
  ws.ws_col = t->cols;
  ws.ws_row = t->rows;
  (void) ioctl (master, TIOCSWINSZ, &ws); /* valid sizes: it does not fail */
}

void
sbx_agent_pty_drain (int master, uint64_t id)
{
  static char chunk[SBX_VM_CHUNK];
  for (;;)
    {
      /* A read that finds nothing (EAGAIN) first flushes the terminal's
         pending input to us: what the command wrote before it ended. */
      ssize_t n = read (master, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) /* EAGAIN, or EIO: no slave is open and all was read */
        return;
      agent_send_frame (SBX_VMF_STDOUT, id, chunk, (size_t) n, NULL, 0);
    }
}
