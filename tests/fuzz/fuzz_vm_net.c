/* Fuzz target: the VM relay's egress streams (iso/vm_relay_net.c) against a
 * hostile guest, with the daemon's side acting at random.
 *
 * Input: a sequence of steps, each [op u8][id u8][len u16 LE][payload...].
 * op % 8: 0-4 a guest frame of type SBX_VMF_CONN_OPEN + op (OPEN, DATA,
 * CLOSE, RESET, ACK) with that id, len and payload (len taken modulo 40 KiB,
 * so oversize DATA is reachable); 5 a frame of another type of the range;
 * 6 the daemon reads what waits on every egress socket; 7 the daemon closes
 * the egress socket of stream `id % 64` in the order it got them, or, when
 * id >= 128, asks for a port-proxy stream (SBX_MSG_CONNECT; its socket, if
 * the guest answers CONNECTED, joins the egress ones). A frame's id >= 128
 * is the host's id space's id - 128 (SBX_VM_CONN_HOST_BIT). After
 * each step a poll round runs. Checked: the documented outcomes (a -1 ends
 * the input, as the relay would end the VM; never more than 64 streams;
 * what the relay queues for the guest is well-formed frames of the stream
 * types, DATA within the window it was given; the relay never reads a
 * socket past the window), and no descriptor outlives the input.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "iso/proto.h"
#include "iso/vm_relay_net.h"

static int daemon_end = -1, relay_end = -1;
static struct sbx_buf queue = SBX_BUF_INIT;
static int egress[256];
static int negress;
static uint64_t outstanding[256]; /* DATA to the guest not yet ACKed, per slot (slot()) */
static int nconnects;

/* The input's 8-bit ids: 128 and above are the host's space. */
static uint64_t
wire_id (uint8_t id)
{
  return id >= 128 ? SBX_VM_CONN_HOST_BIT | (uint64_t) (id - 128) : id;
}

static unsigned
slot (uint64_t id)
{
  return id & SBX_VM_CONN_HOST_BIT ? 128u + (unsigned) (id & 127) : (unsigned) id;
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  int sv[2];
  (void) argc;
  (void) argv;
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    abort ();
  daemon_end = sv[0];
  relay_end = sv[1];
  sbx_vm_net_init (relay_end, &queue);
  return 0;
}

static void
take_egress (void)
{
  for (;;)
    {
      union
      {
        struct sbx_msg_hdr hdr;
        struct sbx_msg_egress egress;
        struct sbx_msg_connect_result connect;
      } m;
      char cbuf[CMSG_SPACE (sizeof (int))];
      struct iovec iov = {&m, sizeof m};
      struct msghdr mh;
      memset (&mh, 0, sizeof mh);
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = cbuf;
      mh.msg_controllen = sizeof cbuf;
      ssize_t n = recvmsg (daemon_end, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0)
        return;
      struct cmsghdr *c = CMSG_FIRSTHDR (&mh);
      if (m.hdr.type == SBX_MSG_CONNECT_FAILED)
        {
          FUZZ_ASSERT (n == (ssize_t) sizeof m.connect && m.hdr.len == sizeof m.connect
                       && m.connect.sys_errno > 0 && m.connect.sys_errno < 4096 && c == NULL);
          continue;
        }
      if (m.hdr.type == SBX_MSG_CONNECTED)
        FUZZ_ASSERT (n == (ssize_t) sizeof m.connect && m.hdr.len == sizeof m.connect
                     && m.connect.sys_errno == 0);
      else
        FUZZ_ASSERT (n == (ssize_t) sizeof m.egress && m.hdr.type == SBX_MSG_EGRESS
                     && m.hdr.len == sizeof m.egress);
      FUZZ_ASSERT (c != NULL && c->cmsg_type == SCM_RIGHTS);
      int fd;
      memcpy (&fd, CMSG_DATA (c), sizeof fd);
      FUZZ_ASSERT (negress < 256);
      fcntl (fd, F_SETFL, O_NONBLOCK);
      egress[negress++] = fd;
    }
}

/* Everything queued for the guest: frames of the stream types, well
   formed. */
static void
check_queue (void)
{
  size_t off = 0;
  while (off < queue.len)
    {
      struct sbx_vm_frame f;
      FUZZ_ASSERT (queue.len - off >= sizeof f);
      memcpy (&f, queue.data + off, sizeof f);
      FUZZ_ASSERT (sbx_vm_net_is_frame (f.type) && f.type != SBX_VMF_CONN_OPEN
                   && f.type <= SBX_VMF_CONN_CONNECT);
      FUZZ_ASSERT (queue.len - off - sizeof f >= f.len);
      FUZZ_ASSERT ((f.id & ~SBX_VM_CONN_HOST_BIT) > 0 && (f.id & ~SBX_VM_CONN_HOST_BIT) < 128);
      if (f.type == SBX_VMF_CONN_DATA)
        {
          FUZZ_ASSERT (f.len > 0 && f.len <= SBX_VM_CHUNK);
          outstanding[slot (f.id)] += f.len;
          FUZZ_ASSERT (outstanding[slot (f.id)] <= SBX_VM_CONN_WINDOW);
        }
      else if (f.type == SBX_VMF_CONN_RESET)
        outstanding[slot (f.id)] = 0;
      else if (f.type == SBX_VMF_CONN_CONNECT)
        FUZZ_ASSERT (f.len == 4 && (f.id & SBX_VM_CONN_HOST_BIT));
      else if (f.type == SBX_VMF_CONN_ACK)
        FUZZ_ASSERT (f.len == 4);
      else
        FUZZ_ASSERT (f.len == 0);
      off += sizeof f + f.len;
    }
  queue.len = 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static char payload[40 * 1024];
  size_t pos = 0;

  negress = nconnects = 0;
  memset (outstanding, 0, sizeof outstanding);
  while (size - pos >= 4)
    {
      uint8_t op = data[pos] % 8, id = data[pos + 1];
      uint32_t len = (uint32_t) (data[pos + 2] | data[pos + 3] << 8) % sizeof payload;
      pos += 4;
      if (op <= 5)
        {
          struct sbx_vm_frame f = {op == 5 ? 37u + id % 11 : SBX_VMF_CONN_OPEN + op, len,
                                   wire_id (id)};
          const char *why = NULL;
          size_t have = size - pos < len ? size - pos : len;
          memset (payload, 'x', len);
          memcpy (payload, data + pos, have);
          pos += have;
          int rc = sbx_vm_net_frame (&f, payload, &why);
          FUZZ_ASSERT (rc == 0 || (rc == -1 && why != NULL));
          if (rc < 0)
            break; /* the relay ends the VM */
          if (f.type == SBX_VMF_CONN_ACK)
            {
              uint32_t acked;
              memcpy (&acked, payload, sizeof acked);
              /* Accepted: no more than was outstanding (or an ended stream's). */
              unsigned k = slot (f.id);
              outstanding[k] = acked > outstanding[k] ? 0 : outstanding[k] - acked;
            }
          else if (f.type == SBX_VMF_CONN_RESET)
            outstanding[slot (f.id)] = 0;
        }
      else if (op == 6)
        {
          char buf[65536];
          for (int i = 0; i < negress; i++)
            if (egress[i] >= 0)
              while (read (egress[i], buf, sizeof buf) > 0)
                ;
        }
      else if (id >= 128)
        {
          /* The host's ids stay under 128 in an input (check_queue). */
          if (nconnects < 120)
            {
              nconnects++;
              FUZZ_ASSERT (sbx_vm_net_connect (id, 1 + id) == 0);
            }
        }
      else if (negress > 0 && egress[id % negress] >= 0)
        {
          close (egress[id % negress]);
          egress[id % negress] = -1;
        }
      FUZZ_ASSERT (sbx_vm_net_tick () == 0);
      take_egress ();
      FUZZ_ASSERT (sbx_vm_net_open_count () <= SBX_VM_CONN_MAX);
      struct pollfd pf[SBX_VM_CONN_MAX];
      const char *why = NULL;
      int n = sbx_vm_net_pollfds (pf, 0);
      FUZZ_ASSERT (n >= 0 && n <= SBX_VM_CONN_MAX);
      if (poll (pf, (nfds_t) n, 0) >= 0)
        FUZZ_ASSERT (sbx_vm_net_after_poll (pf, n, &why) == 0);
      check_queue ();
    }
  take_egress ();
  for (int i = 0; i < negress; i++)
    if (egress[i] >= 0)
      close (egress[i]);
  sbx_vm_net_forget_all ();
  FUZZ_ASSERT (sbx_vm_net_open_count () == 0);
  queue.len = 0;
  return 0;
}
