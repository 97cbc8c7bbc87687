/* The VM relay's egress streams against a hostile guest (iso/vm_relay_net.c,
 * docs/vm.md "Egress"): crafted frames, exact outcomes. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iso/proto.h"
#include "iso/vm_relay_net.h"
#include "tap.h"

static int daemon_end = -1;
static struct sbx_buf queue = SBX_BUF_INIT;

static void
start (void)
{
  int sv[2];
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    abort ();
  daemon_end = sv[0];
  sbx_vm_net_init (sv[1], &queue);
}

static int
guest (uint32_t type, uint64_t id, const void *p, uint32_t len)
{
  struct sbx_vm_frame f = {type, len, id};
  const char *why = NULL;
  int rc = sbx_vm_net_frame (&f, p, &why);
  if (rc < 0 && why == NULL)
    return -2;
  return rc;
}

/* The socket the daemon got for the last OPEN, or -1 when none came. */
static int
egress_fd (void)
{
  struct sbx_msg_egress m;
  char cbuf[CMSG_SPACE (sizeof (int))];
  struct iovec iov = {&m, sizeof m};
  struct msghdr mh = {0};
  int fd = -1;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  if (recvmsg (daemon_end, &mh, MSG_DONTWAIT) != (ssize_t) sizeof m || m.hdr.type != SBX_MSG_EGRESS)
    return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR (&mh);
  if (c != NULL && c->cmsg_type == SCM_RIGHTS)
    memcpy (&fd, CMSG_DATA (c), sizeof fd);
  return fd;
}

/* The last frame queued for the guest (type), or 0. */
static uint32_t
last_to_guest (uint64_t *id, uint32_t *ack)
{
  size_t off = 0;
  struct sbx_vm_frame f = {0, 0, 0};
  while (off + sizeof f <= queue.len)
    {
      memcpy (&f, queue.data + off, sizeof f);
      if (f.type == SBX_VMF_CONN_ACK && ack)
        memcpy (ack, queue.data + off + sizeof f, sizeof *ack);
      off += sizeof f + f.len;
    }
  if (id)
    *id = f.id;
  queue.len = 0;
  return f.type;
}

static int
test_stream_both_ways (void)
{
  char buf[64];
  uint64_t id;
  uint32_t ack = 0;
  int fd;

  start ();
  CHECK (guest (SBX_VMF_CONN_OPEN, 1, NULL, 0) == 0);
  fd = egress_fd ();
  CHECK (fd >= 0);
  CHECK (sbx_vm_net_open_count () == 1);
  CHECK (guest (SBX_VMF_CONN_DATA, 1, "GET /", 5) == 0);
  /* Written to the daemon's side; its ACK waits for 16 KiB. */
  CHECK (last_to_guest (NULL, NULL) == 0);
  CHECK (read (fd, buf, sizeof buf) == 5 && memcmp (buf, "GET /", 5) == 0);
  for (int i = 0; i < 16 * 1024 - 5; i++)
    {
      CHECK (guest (SBX_VMF_CONN_DATA, 1, "y", 1) == 0);
      CHECK (read (fd, buf, sizeof buf) == 1);
    }
  CHECK (last_to_guest (&id, &ack) == SBX_VMF_CONN_ACK && id == 1 && ack == 16 * 1024);
  /* The guest half-closes: the daemon's side reads EOF. */
  CHECK (guest (SBX_VMF_CONN_CLOSE, 1, NULL, 0) == 0);
  CHECK (read (fd, buf, sizeof buf) == 0);
  /* Data after its own CLOSE: broken. */
  CHECK (guest (SBX_VMF_CONN_DATA, 1, "x", 1) == -1);
  /* The answer travels as DATA, then CLOSE; the stream ends. */
  CHECK (write (fd, "200", 3) == 3);
  close (fd);
  struct pollfd pf[SBX_VM_CONN_MAX];
  const char *why;
  for (int i = 0; i < 4; i++)
    {
      int n = sbx_vm_net_pollfds (pf, 0);
      CHECK (poll (pf, (nfds_t) n, 100) >= 0);
      CHECK (sbx_vm_net_after_poll (pf, n, &why) == 0);
    }
  CHECK (sbx_vm_net_open_count () == 0);
  /* Late frames of an ended stream are dropped. */
  CHECK (guest (SBX_VMF_CONN_ACK, 1, &(uint32_t){3}, 4) == 0);
  return 0;
}

static int
test_hostile_frames (void)
{
  uint32_t big = SBX_VM_CONN_WINDOW;
  static char chunk[SBX_VM_CHUNK + 1];

  start ();
  CHECK (guest (SBX_VMF_CONN_DATA, 7, "x", 1) == -1);  /* never opened */
  CHECK (guest (SBX_VMF_CONN_OPEN, 0, NULL, 0) == -1); /* id 0 */
  CHECK (guest (SBX_VMF_CONN_OPEN, 5, "x", 1) == -1);  /* a payload */
  CHECK (guest (SBX_VMF_CONN_OPEN, 5, NULL, 0) == 0);
  int fd = egress_fd ();
  CHECK (fd >= 0);
  CHECK (guest (SBX_VMF_CONN_OPEN, 5, NULL, 0) == -1); /* not above the last */
  CHECK (guest (SBX_VMF_CONN_OPEN, 4, NULL, 0) == -1);
  CHECK (guest (SBX_VMF_CONN_DATA, 5, NULL, 0) == -1); /* empty */
  CHECK (guest (SBX_VMF_CONN_DATA, 5, chunk, SBX_VM_CHUNK + 1) == -1);
  CHECK (guest (SBX_VMF_CONN_ACK, 5, &big, 4) == -1); /* more than in flight */
  CHECK (guest (SBX_VMF_CONN_ACK, 5, &big, 3) == -1);
  CHECK (guest (SBX_VMF_CONN_CLOSE, 5, "x", 1) == -1);
  CHECK (guest (40, 5, NULL, 0) == -1); /* a type of the range, unknown */
  /* Past the window while the daemon's side does not read: broken. */
  int ok = 0;
  for (int i = 0; i < SBX_VM_CONN_WINDOW / SBX_VM_CHUNK + 64; i++)
    if (guest (SBX_VMF_CONN_DATA, 5, chunk, SBX_VM_CHUNK) == 0)
      ok++;
    else
      break;
  /* The socket buffer took some, the window the rest: never unbounded. */
  CHECK (ok < SBX_VM_CONN_WINDOW / SBX_VM_CHUNK + 64);
  /* The guest resets it; its late data is dropped. */
  CHECK (guest (SBX_VMF_CONN_RESET, 5, NULL, 0) == 0);
  CHECK (guest (SBX_VMF_CONN_DATA, 5, "x", 1) == 0);
  CHECK (sbx_vm_net_open_count () == 0);
  close (fd);
  return 0;
}

static int
test_too_many_streams (void)
{
  uint64_t id;
  int fds[SBX_VM_CONN_MAX];

  start ();
  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    {
      CHECK (guest (SBX_VMF_CONN_OPEN, (uint64_t) i + 1, NULL, 0) == 0);
      fds[i] = egress_fd ();
      CHECK (fds[i] >= 0);
    }
  queue.len = 0;
  /* One more is reset, the guest is not broken for it. */
  CHECK (guest (SBX_VMF_CONN_OPEN, SBX_VM_CONN_MAX + 1, NULL, 0) == 0);
  CHECK (egress_fd () == -1);
  CHECK (last_to_guest (&id, NULL) == SBX_VMF_CONN_RESET && id == SBX_VM_CONN_MAX + 1);
  CHECK (sbx_vm_net_open_count () == SBX_VM_CONN_MAX);
  /* The daemon's side ends one: its stream is CLOSEd to the guest. */
  close (fds[0]);
  struct pollfd pf[SBX_VM_CONN_MAX];
  const char *why;
  int n = sbx_vm_net_pollfds (pf, 0);
  CHECK (poll (pf, (nfds_t) n, 100) >= 1);
  CHECK (sbx_vm_net_after_poll (pf, n, &why) == 0);
  CHECK (last_to_guest (&id, NULL) == SBX_VMF_CONN_CLOSE && id == 1);
  /* While the port is backed up, no socket is read. */
  n = sbx_vm_net_pollfds (pf, 2u << 20);
  for (int i = 0; i < n; i++)
    CHECK (!(pf[i].events & POLLIN));
  for (int i = 1; i < SBX_VM_CONN_MAX; i++)
    close (fds[i]);
  return 0;
}

static int
test_daemon_full_resets (void)
{
  uint64_t id;
  struct sbx_msg_egress m;
  int sv[2];

  /* A control socket with no room: the stream is reset, nothing waits. */
  CHECK (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  sbx_vm_net_init (sv[1], &queue);
  memset (&m, 0, sizeof m);
  while (send (sv[1], &m, sizeof m, MSG_DONTWAIT) == (ssize_t) sizeof m)
    ;
  CHECK (errno == EAGAIN);
  CHECK (guest (SBX_VMF_CONN_OPEN, 1, NULL, 0) == 0);
  CHECK (last_to_guest (&id, NULL) == SBX_VMF_CONN_RESET && id == 1);
  CHECK (sbx_vm_net_open_count () == 0);
  return 0;
}

/* The daemon's answer to a CONNECT: its errno (0: CONNECTED, *fd the
   socket), or -1 when none came or it was for another req_id. */
static int
connect_answer (uint64_t req_id, int *fd)
{
  struct sbx_msg_connect_result m;
  char cbuf[CMSG_SPACE (sizeof (int))];
  struct iovec iov = {&m, sizeof m};
  struct msghdr mh = {0};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  *fd = -1;
  if (recvmsg (daemon_end, &mh, MSG_DONTWAIT) != (ssize_t) sizeof m || m.req_id != req_id)
    return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR (&mh);
  if (c != NULL && c->cmsg_type == SCM_RIGHTS)
    memcpy (fd, CMSG_DATA (c), sizeof *fd);
  if (m.hdr.type == SBX_MSG_CONNECTED)
    return m.sys_errno == 0 && *fd >= 0 ? 0 : -1;
  return m.hdr.type == SBX_MSG_CONNECT_FAILED && *fd < 0 ? m.sys_errno : -1;
}

static void
pump_once (void)
{
  struct pollfd pf[SBX_VM_CONN_MAX];
  const char *why;
  int n = sbx_vm_net_pollfds (pf, 0);
  poll (pf, (nfds_t) n, 100);
  sbx_vm_net_after_poll (pf, n, &why);
}

/* The port proxy's streams (host-opened): the guest's answers are as
   hostile as the rest. */
static int
test_host_connect (void)
{
  uint64_t id, id2;
  uint32_t port = 8080;
  int32_t refused = ECONNREFUSED;
  char buf[16];
  int fd;

  start ();
  sbx_vm_net_forget_all ();
  queue.len = 0;
  CHECK (sbx_vm_net_connect (77, port) == 0);
  CHECK (last_to_guest (&id, NULL) == SBX_VMF_CONN_CONNECT && (id & SBX_VM_CONN_HOST_BIT));
  CHECK (connect_answer (77, &fd) == -1); /* nothing yet */
  /* An answer for a stream never asked for, or malformed: broken. */
  CHECK (guest (SBX_VMF_CONN_CONNECTED, id + 1, NULL, 0) == -1);
  CHECK (guest (SBX_VMF_CONN_CONNECTED, id, "x", 1) == -1);
  CHECK (guest (SBX_VMF_CONN_CONNECT_FAILED, id, "x", 1) == -1);
  /* Nothing but the answer (or a RESET) before it. */
  CHECK (guest (SBX_VMF_CONN_DATA, id, "x", 1) == -1);
  CHECK (guest (SBX_VMF_CONN_CLOSE, id, NULL, 0) == -1);
  /* The guest may not open a stream in the host's id space. */
  CHECK (guest (SBX_VMF_CONN_OPEN, id + 5, NULL, 0) == -1);
  CHECK (guest (SBX_VMF_CONN_CONNECTED, id, NULL, 0) == 0);
  CHECK (connect_answer (77, &fd) == 0);
  /* A second answer: broken. */
  CHECK (guest (SBX_VMF_CONN_CONNECTED, id, NULL, 0) == -1);
  CHECK (guest (SBX_VMF_CONN_CONNECT_FAILED, id, &refused, 4) == -1);
  /* Bytes both ways, as an egress stream's. */
  CHECK (write (fd, "GET /", 5) == 5);
  pump_once ();
  CHECK (last_to_guest (&id2, NULL) == SBX_VMF_CONN_DATA && id2 == id);
  CHECK (guest (SBX_VMF_CONN_DATA, id, "200", 3) == 0);
  CHECK (read (fd, buf, sizeof buf) == 3 && memcmp (buf, "200", 3) == 0);
  CHECK (guest (SBX_VMF_CONN_RESET, id, NULL, 0) == 0);
  CHECK (read (fd, buf, sizeof buf) == 0);
  close (fd);
  /* An answer for a guest-opened stream: broken. */
  CHECK (guest (SBX_VMF_CONN_OPEN, 1, NULL, 0) == 0);
  fd = egress_fd ();
  CHECK (fd >= 0);
  CHECK (guest (SBX_VMF_CONN_CONNECTED, 1, NULL, 0) == -1);
  close (fd);
  sbx_vm_net_forget_all ();

  /* Refused: the guest's errno, the stream gone; late frames dropped. */
  CHECK (sbx_vm_net_connect (78, port) == 0);
  CHECK (last_to_guest (&id, NULL) == SBX_VMF_CONN_CONNECT);
  CHECK (guest (SBX_VMF_CONN_CONNECT_FAILED, id, &refused, 4) == 0);
  CHECK (connect_answer (78, &fd) == ECONNREFUSED);
  CHECK (sbx_vm_net_open_count () == 0);
  CHECK (guest (SBX_VMF_CONN_CONNECTED, id, NULL, 0) == 0);
  /* A nonsense errno is reported as EIO, no more. */
  CHECK (sbx_vm_net_connect (79, port) == 0);
  CHECK (last_to_guest (&id, NULL) == SBX_VMF_CONN_CONNECT);
  CHECK (guest (SBX_VMF_CONN_CONNECT_FAILED, id, &(int32_t){-5}, 4) == 0);
  CHECK (connect_answer (79, &fd) == EIO);

  /* Host-opened streams count in the same cap: the 65th is EAGAIN now. */
  for (int i = 0; i < SBX_VM_CONN_MAX; i++)
    CHECK (sbx_vm_net_connect (100 + (uint64_t) i, port) == 0);
  CHECK (sbx_vm_net_connect (999, port) == 0);
  CHECK (connect_answer (999, &fd) == EAGAIN);
  CHECK (guest (SBX_VMF_CONN_OPEN, 2, NULL, 0) == 0);
  CHECK (egress_fd () == -1);
  CHECK (last_to_guest (&id, NULL) == SBX_VMF_CONN_RESET && id == 2);
  return 0;
}

/* A guest that never answers: ETIMEDOUT after the bound, the stream reset,
   the late answer dropped. */
static int
test_host_connect_timeout (void)
{
  uint64_t id;
  int fd;

  start ();
  sbx_vm_net_forget_all ();
  queue.len = 0;
  CHECK (sbx_vm_net_connect (5, 80) == 0);
  CHECK (last_to_guest (&id, NULL) == SBX_VMF_CONN_CONNECT);
  CHECK (sbx_vm_net_tick () == 0);
  CHECK (connect_answer (5, &fd) == -1);
  usleep ((SBX_VM_CONNECT_TIMEOUT_MS + 100) * 1000);
  CHECK (sbx_vm_net_tick () == 0);
  CHECK (connect_answer (5, &fd) == ETIMEDOUT);
  CHECK (last_to_guest (NULL, NULL) == SBX_VMF_CONN_RESET);
  CHECK (sbx_vm_net_open_count () == 0);
  CHECK (guest (SBX_VMF_CONN_CONNECTED, id, NULL, 0) == 0);
  CHECK (sbx_vm_net_open_count () == 0);
  return 0;
}

int
main (void)
{
  RUN (test_stream_both_ways);
  RUN (test_hostile_frames);
  RUN (test_too_many_streams);
  RUN (test_daemon_full_resets);
  RUN (test_host_connect);
  RUN (test_host_connect_timeout);
  return tap_done ();
}
