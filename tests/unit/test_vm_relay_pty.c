/* The VM relay's part in terminals (iso/vm_relay_pty.c, docs/vm.md
 * "Terminals"): the daemon's SPAWN and RESIZE are checked as init checks
 * them, and SPAWNED carries exactly one socket. */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iso/vm_relay_pty.h"
#include "tap.h"

static int
test_spawn_checked (void)
{
  struct sbx_msg_spawn s;
  memset (&s, 0, sizeof s);
  s.flags = SBX_SPAWN_PTY;
  s.pty_cols = 80;
  s.pty_rows = 24;
  CHECK (sbx_vm_pty_check_spawn (&s) == 0);
  s.pty_cols = s.pty_rows = SBX_PTY_MAX;
  CHECK (sbx_vm_pty_check_spawn (&s) == 0);
  s.pty_cols = 1, s.pty_rows = 1;
  CHECK (sbx_vm_pty_check_spawn (&s) == 0);
  s.pty_cols = 0;
  CHECK (sbx_vm_pty_check_spawn (&s) < 0);
  s.pty_cols = SBX_PTY_MAX + 1;
  CHECK (sbx_vm_pty_check_spawn (&s) < 0);
  s.pty_cols = 80, s.pty_rows = 0;
  CHECK (sbx_vm_pty_check_spawn (&s) < 0);
  s.pty_rows = 65535;
  CHECK (sbx_vm_pty_check_spawn (&s) < 0);
  s.pty_rows = 24;
  s.keep_mask = SBX_KEEP_STDIN; /* a terminal keeps no pipe end */
  CHECK (sbx_vm_pty_check_spawn (&s) < 0);
  s.keep_mask = 0;
  s.flags = SBX_SPAWN_PTY | SBX_SPAWN_FILE_OP; /* a file operation has no terminal */
  CHECK (sbx_vm_pty_check_spawn (&s) < 0);
  return 0;
}

static int
test_resize_checked (void)
{
  struct sbx_msg_resize r;
  struct sbx_vm_pty t;
  memset (&r, 0, sizeof r);
  memset (&t, 0xff, sizeof t);
  r.cols = 120, r.rows = 40;
  CHECK (sbx_vm_pty_resize (&r, &t) == 0);
  CHECK (t.cols == 120 && t.rows == 40 && t.reserved == 0);
  r.cols = 0;
  CHECK (sbx_vm_pty_resize (&r, &t) < 0);
  r.cols = 1, r.rows = SBX_PTY_MAX + 1;
  CHECK (sbx_vm_pty_resize (&r, &t) < 0);
  return 0;
}

static int
test_spawned_carries_the_socket (void)
{
  int ctl[2], sv[2], fds[2], got = -1;
  struct sbx_msg_spawned m = {{SBX_MSG_SPAWNED, sizeof m}, 7, 42, SBX_SPAWNED_PTY};
  struct sbx_msg_spawned in;
  char cbuf[CMSG_SPACE (2 * sizeof (int))];
  struct iovec iov = {&in, sizeof in};
  struct msghdr mh = {0};
  char c = 0;

  CHECK (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) == 0);
  CHECK (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  CHECK (sbx_vm_pty_send_spawned (ctl[1], &m, sv[1]) == 0);
  CHECK (fcntl (sv[1], F_GETFD) < 0); /* closed in the relay */
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  CHECK (recvmsg (ctl[0], &mh, MSG_CMSG_CLOEXEC) == (ssize_t) sizeof in);
  CHECK (in.req_id == 7 && in.pid == 42 && in.flags == SBX_SPAWNED_PTY);
  struct cmsghdr *cm = CMSG_FIRSTHDR (&mh);
  CHECK (cm != NULL && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN (sizeof (int)));
  memcpy (fds, CMSG_DATA (cm), sizeof (int));
  got = fds[0];
  /* The daemon's end and the relay's are one pipe of bytes, both ways. */
  CHECK (write (got, "i", 1) == 1 && read (sv[0], &c, 1) == 1 && c == 'i');
  CHECK (write (sv[0], "o", 1) == 1 && read (got, &c, 1) == 1 && c == 'o');
  /* The daemon gone: an error, not a crash (SIGPIPE is not raised). */
  close (ctl[0]);
  CHECK (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  CHECK (sbx_vm_pty_send_spawned (ctl[1], &m, fds[1]) < 0);
  close (fds[0]), close (got), close (sv[0]), close (ctl[1]);
  return 0;
}

int
main (void)
{
  RUN (test_spawn_checked);
  RUN (test_resize_checked);
  RUN (test_spawned_carries_the_socket);
  return tap_done ();
}
