/* sbx: the relay between the daemon and a microVM's guest agent
 * (docs/vm.md).
 *
 * The daemon binary re-executed by iso/vm.c as the sandbox's own
 * unprivileged uid, inside its cgroup, with the control socket at fd 3 and
 * the initramfs at fd 4. Single-threaded. It starts QEMU (microvm, no
 * firmware, no network device, -sandbox on) with one virtio-serial port
 * whose other end it holds, and then is the sandbox's "init" as the daemon
 * sees it: SPAWN, SIGNAL, RELEASE, KEEP and DEADLINE from iso/proto.h; the
 * daemon's pipes it copies to and from the guest's frames (vm/wire.h).
 * What a VM cannot do yet (PUMP, WATCH) is refused per request. A
 * command on a terminal (iso/vm_relay_pty.c) gets the daemon a socket for
 * its master, which the guest keeps.
 * Egress streams and the port proxy's (CONNECT; SBX_VMF_CONN_*) are
 * iso/vm_relay_net.c's. When the daemon's end closes, or QEMU or the guest breaks the
 * protocol, it kills QEMU and exits; the daemon sees its pidfd.
 *
 * A restored guest (argv "restore": QEMU -incoming from a snapshot, docs/vm.md
 * "Snapshots") is already set up and its agent mid-stream: the old relay
 * may have read half of a frame. This relay sends no SETUP but a PING with
 * a random id, and drops every byte until the agent's HELLO with that id.
 * The commands that were running in the source run on in the copy; their
 * frames carry ids no command here has (ours are xor'ed with that random
 * key on the wire), so their output and exits are dropped: they belong to
 * no one.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/kvm.h>

#include "iso/proto.h"
#include "iso/seccomp.h"
#include "iso/vm.h"
#include "iso/vm_relay_net.h"
#include "iso/vm_relay_pty.h"
#include "util/buf.h"
#include "util/error.h"
#include "vm/wire.h"

#define MAX_CMDS 256
#define OUT_CAP (64u << 20) /* output held for a slow reader, per command and stream */

struct cmd
{
  uint64_t id;
  int pid; /* in the guest; 0: slot free */
  int in;  /* read end of the command's stdin pipe (the daemon writes) */
  int out[2];
  struct sbx_buf q[2]; /* output not yet written to the daemon's pipe */
  size_t qoff[2];
  int exited, status;
  int pty;  /* on a terminal: in and out[0] are one socket, out[1] -1 */
  int peer; /* the daemon's end of it until SPAWNED carries it; else -1 */
};

static struct cmd cmds[MAX_CMDS];
static int ctl = SBX_INIT_CTL_FD, ser = -1;
static pid_t qemu = -1;
static struct sbx_buf sq; /* frames not yet written to the guest */
static size_t sq_off;
/* A restored guest: the wire's ids are the daemon's xor key (0 after a
   boot); syncing until the agent answers the PING. */
static uint64_t key;
static int restored, syncing, orphans;

static void
quit (const char *what, int e)
{
  if (what != NULL)
    {
      struct sbx_msg_failure f;
      memset (&f, 0, sizeof f);
      f.hdr.type = SBX_MSG_SETUP_FAILED;
      f.hdr.len = sizeof f;
      f.sys_errno = e;
      snprintf (f.what, sizeof f.what, "%s", what);
      send (ctl, &f, sizeof f, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  if (qemu > 0)
    {
      kill (qemu, SIGKILL);
      waitpid (qemu, NULL, 0);
    }
  _exit (what != NULL);
}

static void
frame (uint32_t type, uint64_t id, const void *a, size_t alen, const void *b, size_t blen)
{
  struct sbx_vm_frame f = {type, (uint32_t) (alen + blen), id ^ key};
  sbx_buf_append (&sq, &f, sizeof f);
  if (alen)
    sbx_buf_append (&sq, a, alen);
  if (blen)
    sbx_buf_append (&sq, b, blen);
  if (sq.failed)
    quit ("out of memory", ENOMEM);
}

static void
flush_serial (void)
{
  while (sq_off < sq.len)
    {
      ssize_t w = write (ser, sq.data + sq_off, sq.len - sq_off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        return;
      if (w <= 0)
        quit (NULL, 0);
      sq_off += (size_t) w;
    }
  sq.len = sq_off = 0;
}

static void
reply (const void *m, size_t len)
{
  if (send (ctl, m, len, MSG_NOSIGNAL) != (ssize_t) len)
    quit (NULL, 0);
}

static struct cmd *
find (uint64_t id)
{
  for (int i = 0; i < MAX_CMDS; i++)
    if (cmds[i].pid != 0 && cmds[i].id == id)
      return &cmds[i];
  return NULL;
}

static void
spawn_failed (uint64_t id, int e, uint32_t stage)
{
  struct sbx_msg_spawn_failed m = {{SBX_MSG_SPAWN_FAILED, sizeof m}, id, e, stage};
  reply (&m, sizeof m);
}

static void
close_fds (const int *fds, int n)
{
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0)
      close (fds[i]);
}

/* One message from the daemon. */
static void
from_daemon (void)
{
  static char buf[SBX_PROTO_MAX_MSG];
  char cbuf[CMSG_SPACE (8 * sizeof (int))];
  struct iovec iov = {buf, sizeof buf};
  struct msghdr mh = {0};
  struct sbx_msg_hdr hdr;
  int fds[8], nfds = 0;
  ssize_t n;

  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  n = recvmsg (ctl, &mh, MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0)
    quit (NULL, 0); /* the daemon let go of the sandbox */
  for (struct cmsghdr *c = CMSG_FIRSTHDR (&mh); c != NULL; c = CMSG_NXTHDR (&mh, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      {
        int k = (int) ((c->cmsg_len - CMSG_LEN (0)) / sizeof (int));
        for (int i = 0; i < k && nfds < 8; i++)
          memcpy (&fds[nfds++], CMSG_DATA (c) + i * sizeof (int), sizeof (int));
      }
  if ((size_t) n < sizeof hdr)
    quit ("a short message", EPROTO);
  memcpy (&hdr, buf, sizeof hdr);
  if (hdr.len != (uint32_t) n)
    quit ("a message of the wrong length", EPROTO);
  switch (hdr.type)
    {
    case SBX_MSG_SPAWN:
      {
        struct sbx_msg_spawn s;
        struct sbx_vm_spawn v;
        struct cmd *c = NULL;
        if ((size_t) n < sizeof s)
          quit ("a short SPAWN", EPROTO);
        memcpy (&s, buf, sizeof s);
        int pty = (s.flags & SBX_SPAWN_PTY) != 0;
        /* A terminal's SPAWN carries no descriptor (iso/proto.h). */
        if ((pty ? nfds != 0 || sbx_vm_pty_check_spawn (&s) < 0 : nfds < 3)
            || s.strings_len != (size_t) n - sizeof s - s.tag_len)
          quit ("a malformed SPAWN", EPROTO);
        if (pty)
          {
            /* The daemon's master is one end of a socket pair (made now:
               a failure is the daemon's, not the guest's business). */
            int sv[2] = {-1, -1};
            if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0
                || (fds[0] = fcntl (sv[0], F_DUPFD_CLOEXEC, 3)) < 0)
              {
                int e = errno;
                close_fds (sv, 2);
                spawn_failed (s.req_id, e, SBX_STAGE_PTY);
                return;
              }
            fds[1] = sv[0];
            fds[2] = -1;
            fds[3] = sv[1];
          }
        else
          {
            close_fds (fds + 3, nfds - 3); /* kept ends: a VM does not outlive its daemon */
            fds[3] = -1;
          }
        for (int i = 0; i < MAX_CMDS && c == NULL; i++)
          if (cmds[i].pid == 0)
            c = &cmds[i];
        if (c == NULL || s.strings_len > SBX_VM_FRAME_MAX - sizeof v - sizeof (struct sbx_vm_pty))
          {
            close_fds (fds, 4);
            spawn_failed (s.req_id, c == NULL ? EAGAIN : E2BIG, SBX_STAGE_FORK);
            return;
          }
        memset (c, 0, sizeof *c);
        c->id = s.req_id;
        c->pid = -1; /* taken, not yet started */
        c->in = fds[0];
        c->out[0] = fds[1];
        c->out[1] = fds[2];
        c->pty = pty;
        c->peer = fds[3];
        fcntl (c->out[0], F_SETFL, O_NONBLOCK);
        if (c->out[1] >= 0)
          fcntl (c->out[1], F_SETFL, O_NONBLOCK);
        v.uid = s.uid;
        v.gid = s.gid;
        v.argc = s.argc;
        v.envc = s.envc;
        v.rlimit_nofile = s.rlimit_nofile;
        v.rlimit_fsize = s.rlimit_fsize;
        if (pty)
          {
            /* The terminal's size, then SPAWN's payload. */
            char head[sizeof (struct sbx_vm_pty) + sizeof v];
            struct sbx_vm_pty t = {s.pty_cols, s.pty_rows, 0};
            memcpy (head, &t, sizeof t);
            memcpy (head + sizeof t, &v, sizeof v);
            frame (SBX_VMF_SPAWN_PTY, s.req_id, head, sizeof head, buf + sizeof s, s.strings_len);
            return;
          }
        /* A file operation (core/vm_fs.c) is a frame of its own kind. */
        frame (s.flags & SBX_SPAWN_FILE_OP ? SBX_VMF_FILE_OP : SBX_VMF_SPAWN, s.req_id, &v,
               sizeof v, buf + sizeof s, s.strings_len);
        return;
      }
    case SBX_MSG_SIGNAL:
      {
        struct sbx_msg_signal s;
        if ((size_t) n != sizeof s || nfds)
          quit ("a malformed SIGNAL", EPROTO);
        memcpy (&s, buf, sizeof s);
        uint32_t signo = s.signo;
        frame (SBX_VMF_SIGNAL, s.req_id, &signo, sizeof signo, NULL, 0);
        return;
      }
    case SBX_MSG_RESIZE:
      {
        struct sbx_msg_resize r;
        struct sbx_vm_pty t;
        if ((size_t) n != sizeof r || nfds)
          quit ("a malformed RESIZE", EPROTO);
        memcpy (&r, buf, sizeof r);
        if (sbx_vm_pty_resize (&r, &t) < 0)
          quit ("a malformed RESIZE", EPROTO);
        struct cmd *c = find (r.req_id);
        /* Answered here, in order, as init does: the guest's ioctl of a
           valid size on its master does not fail, and a command that ends
           meanwhile drops the frame there. */
        struct sbx_msg_resized a = {{SBX_MSG_RESIZED, sizeof a}, r.req_id, ESRCH, 0};
        if (c != NULL && c->pty && c->pid > 0 && !c->exited)
          {
            frame (SBX_VMF_RESIZE, r.req_id, &t, sizeof t, NULL, 0);
            a.sys_errno = 0;
          }
        reply (&a, sizeof a);
        return;
      }
    case SBX_MSG_KEEP: /* a VM ends with its daemon: nothing to keep */
    case SBX_MSG_DEADLINE:
    case SBX_MSG_RELEASE:
      close_fds (fds, nfds);
      return;
    case SBX_MSG_PUMP:
    case SBX_MSG_WATCH:
      {
        uint64_t id;
        close_fds (fds, nfds);
        memcpy (&id, buf + sizeof hdr, sizeof id);
        spawn_failed (id, ENOTSUP, SBX_STAGE_SETUP);
        return;
      }
    case SBX_MSG_CONNECT:
      {
        /* A stream the relay opens to the guest's 127.0.0.1:port
           (iso/vm_relay_net.c); the answer comes when the guest's does. */
        struct sbx_msg_connect c;
        close_fds (fds, nfds);
        if ((size_t) n != sizeof c || nfds != 0)
          quit ("a malformed CONNECT", EPROTO);
        memcpy (&c, buf, sizeof c);
        if (c.port == 0 || c.port > 65535 || c.reserved != 0)
          quit ("a malformed CONNECT", EPROTO);
        if (sbx_vm_net_connect (c.req_id, c.port) < 0)
          quit ("out of memory", ENOMEM);
        return;
      }
    default:
      close_fds (fds, nfds);
      quit ("a message the VM relay does not know", EPROTO);
    }
}

static void
maybe_exited (struct cmd *c)
{
  if (!c->exited || c->q[0].len > c->qoff[0] || c->q[1].len > c->qoff[1])
    return;
  struct sbx_msg_exited m = {{SBX_MSG_EXITED, sizeof m}, c->id, c->pid, c->status};
  close_fds (c->out, 2);
  if (c->in >= 0)
    close (c->in);
  if (c->peer >= 0)
    close (c->peer);
  sbx_buf_free (&c->q[0]);
  sbx_buf_free (&c->q[1]);
  memset (c, 0, sizeof *c);
  reply (&m, sizeof m);
}

static void
flush_out (struct cmd *c, int k)
{
  while (c->qoff[k] < c->q[k].len)
    {
      ssize_t w = write (c->out[k], c->q[k].data + c->qoff[k], c->q[k].len - c->qoff[k]);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        return;
      if (w <= 0) /* the daemon closed its end: drop the rest */
        {
          c->qoff[k] = c->q[k].len;
          break;
        }
      c->qoff[k] += (size_t) w;
    }
  c->q[k].len = c->qoff[k] = 0;
  maybe_exited (c);
}

/* Frames from the guest, as many as are complete in rb. */
static struct sbx_buf rb;

static void
from_guest (void)
{
  char chunk[65536];
  ssize_t n = read (ser, chunk, sizeof chunk);
  size_t off = 0;

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0)
    quit (NULL, 0); /* QEMU is gone */
  sbx_buf_append (&rb, chunk, (size_t) n);
  if (rb.failed)
    quit ("out of memory", ENOMEM);
  if (syncing)
    {
      /* Everything before the answer to our PING is the old relay's. */
      struct sbx_vm_frame want = {SBX_VMF_HELLO, 0, key};
      size_t i;
      for (i = 0; i + sizeof want <= rb.len; i++)
        if (memcmp (rb.data + i, &want, sizeof want) == 0)
          break;
      if (i + sizeof want > rb.len)
        {
          size_t keep = rb.len < sizeof want ? rb.len : sizeof want - 1;
          memmove (rb.data, rb.data + rb.len - keep, keep);
          rb.len = keep;
          return;
        }
      off = i + sizeof want;
      syncing = 0;
      struct sbx_msg_ready r = {{SBX_MSG_READY, sizeof r}, SBX_PROTO_VERSION, 0};
      reply (&r, sizeof r);
    }
  for (;;)
    {
      struct sbx_vm_frame f;
      const char *p;
      struct cmd *c;
      if (rb.len - off < sizeof f)
        break;
      memcpy (&f, rb.data + off, sizeof f);
      if (f.len > SBX_VM_FRAME_MAX)
        quit ("the guest sent a frame too large", EPROTO);
      if (rb.len - off < sizeof f + f.len)
        break;
      p = rb.data + off + sizeof f;
      off += sizeof f + f.len;
      if (sbx_vm_net_is_frame (f.type))
        {
          /* Stream ids are the agent's, not xor'ed. */
          const char *why;
          if (sbx_vm_net_frame (&f, p, &why) < 0)
            quit (why, EPROTO);
          continue;
        }
      c = find (f.id ^ key);
      if (restored && c == NULL && f.type >= SBX_VMF_SPAWNED && f.type <= SBX_VMF_EXITED)
        {
          /* A command started before the snapshot: it runs on in this
             copy, but its streams belong to no one. */
          if (!orphans++)
            fprintf (stderr, "sbx-vm-relay: output of commands started before the snapshot is "
                             "dropped (their streams belong to the source)\n");
          continue;
        }
      switch (f.type)
        {
        case SBX_VMF_HELLO:
          {
            if (restored)
              quit ("the guest sent a stray HELLO", EPROTO);
            struct sbx_msg_ready r = {{SBX_MSG_READY, sizeof r}, SBX_PROTO_VERSION, 0};
            reply (&r, sizeof r);
            break;
          }
        case SBX_VMF_SPAWNED:
          {
            int32_t pid;
            if (c == NULL || c->pid != -1 || f.len != sizeof pid)
              quit ("the guest sent a stray SPAWNED", EPROTO);
            memcpy (&pid, p, sizeof pid);
            c->pid = pid > 0 ? pid : 1;
            struct sbx_msg_spawned m = {{SBX_MSG_SPAWNED, sizeof m}, c->id, c->pid, 0};
            if (c->pty)
              {
                m.flags = SBX_SPAWNED_PTY;
                if (sbx_vm_pty_send_spawned (ctl, &m, c->peer) < 0)
                  quit (NULL, 0);
                c->peer = -1;
              }
            else
              reply (&m, sizeof m);
            break;
          }
        case SBX_VMF_SPAWN_FAILED:
          {
            int32_t m[2];
            if (c == NULL || c->pid != -1 || f.len != sizeof m)
              quit ("the guest sent a stray SPAWN_FAILED", EPROTO);
            memcpy (m, p, sizeof m);
            close_fds (c->out, 2);
            if (c->in >= 0)
              close (c->in);
            if (c->peer >= 0)
              close (c->peer);
            memset (c, 0, sizeof *c);
            spawn_failed (f.id, m[0], (uint32_t) m[1]);
            break;
          }
        case SBX_VMF_STDOUT:
        case SBX_VMF_STDERR:
          {
            int k = f.type == SBX_VMF_STDERR;
            if (c == NULL || c->pid <= 0)
              quit ("the guest sent output of no command", EPROTO);
            if (k == 1 && c->pty) /* a terminal has one stream */
              quit ("the guest sent stderr of a terminal", EPROTO);
            if (c->q[k].len - c->qoff[k] + f.len <= OUT_CAP)
              sbx_buf_append (&c->q[k], p, f.len);
            if (c->q[k].failed)
              quit ("out of memory", ENOMEM);
            flush_out (c, k);
            break;
          }
        case SBX_VMF_EXITED:
          if (c == NULL || c->pid <= 0 || f.len != sizeof (int32_t))
            quit ("the guest sent a stray EXITED", EPROTO);
          memcpy (&c->status, p, sizeof c->status);
          c->exited = 1;
          maybe_exited (c);
          break;
        default:
          quit ("the guest broke the protocol", EPROTO);
        }
    }
  memmove (rb.data, rb.data + off, rb.len - off);
  rb.len -= off;
}

static void
stdin_ready (struct cmd *c)
{
  char chunk[SBX_VM_CHUNK];
  ssize_t n = read (c->in, chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0)
    {
      close (c->in);
      c->in = -1;
      if (c->pty) /* a terminal has no end of file: ^D is a byte */
        return;
      n = 0; /* end of file */
    }
  frame (SBX_VMF_STDIN, c->id, chunk, (size_t) n, NULL, 0);
}

/* execv's argv is char *const[]; the strings are never written. */
static char *
arg (const char *s)
{
  union
  {
    const char *c;
    char *m;
  } u = {s};
  return u.m;
}

static int
kvm_usable (void)
{
  int fd = open ("/dev/kvm", O_RDWR | O_CLOEXEC);
  int ok = fd >= 0 && ioctl (fd, KVM_GET_API_VERSION, 0) == KVM_API_VERSION;
  if (fd >= 0)
    close (fd);
  return ok;
}

int
sbx_vm_relay_main (int argc, char **argv)
{
  int sv[2];
  sigset_t none;
  /* The parent passes the read-only root image as fd SBX_VM_ROOT_FD
     (iso/vm_root.c) when the guest has one; checked before we open any. */
  int root = fcntl (SBX_VM_ROOT_FD, F_GETFD) >= 0;
  /* And sbx's egress CA certificate (iso/vm_ca.c), read before QEMU is
     started: it is the guest's (SETUP), not QEMU's. */
  char ca[SBX_VM_CA_MAX];
  size_t ca_len = 0;
  if (fcntl (SBX_VM_CA_FD, F_GETFD) >= 0)
    {
      ssize_t n;
      while (ca_len < sizeof ca
             && ((n = read (SBX_VM_CA_FD, ca + ca_len, sizeof ca - ca_len)) > 0
                 || (n < 0 && errno == EINTR)))
        if (n > 0)
          ca_len += (size_t) n;
      close (SBX_VM_CA_FD);
      if (ca_len == sizeof ca) /* the parent checked its size: cut short, not sent */
        ca_len = 0;
    }

  /* argv: name, SBX_VM_RELAY_ARG, qemu, kernel, initrd, memory MiB, cpus, disk, uid,
     boot|restore */
  if (argc != 10 || (strcmp (argv[9], "boot") != 0 && strcmp (argv[9], "restore") != 0))
    quit ("the relay's arguments", EINVAL);
  restored = strcmp (argv[9], "restore") == 0;
  if (restored)
    {
      while (getrandom (&key, sizeof key, 0) != (ssize_t) sizeof key)
        if (errno != EINTR)
          quit ("getrandom", errno);
      key |= 1ull << 63; /* never 0: the daemon's ids are small */
      syncing = 1;
    }
  signal (SIGPIPE, SIG_IGN);
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    quit ("socketpair", errno);
  qemu = fork ();
  if (qemu < 0)
    quit ("fork QEMU", errno);
  if (qemu == 0)
    {
      char mem[64], smp[32], cdev[64], accel[64], qmp[64], incoming[32];
      char root_fd[64], cmdline[300];
      int kvm = kvm_usable ();
      size_t nq;
      snprintf (mem, sizeof mem, "%s", argv[5]);
      snprintf (smp, sizeof smp, "%s", argv[6]);
      snprintf (cdev, sizeof cdev, "socket,id=sbx,fd=%d", SBX_VM_SERIAL_FD);
      snprintf (qmp, sizeof qmp, "socket,id=qmp,fd=%d", SBX_VM_QMP_FD);
      snprintf (incoming, sizeof incoming, "fd:%d", SBX_VM_INCOMING_FD);
      /* TCG's code cache defaults to 1 GiB of address space; 64 MiB will do. */
      snprintf (accel, sizeof accel, "%s", kvm ? "kvm" : "tcg,tb-size=64");
      /* Under TCG, virtual time follows the instructions run (icount), not
         the host's clock: on a loaded host the guest's early timer checks
         otherwise see no tick and the boot stalls (seen here, 1 in 3). */
      snprintf (root_fd, sizeof root_fd, "fd=%d,set=1,opaque=sbx-root", SBX_VM_ROOT_FD);
      /* No timer the kernel can calibrate against under TCG's microvm:
         lpj and jiffies skip the calibration loops that would otherwise
         hang the boot. sbx.root tells the agent to switch to the image. */
      snprintf (cmdline, sizeof cmdline,
                "console=ttyS0 quiet loglevel=3 panic=-1 clocksource=jiffies lpj=1000000 "
                "rdinit=/init%s",
                root ? " sbx.root=vda" : "");
      char *qargv[64] = {argv[2],
                       arg (kvm ? "-name" : "-icount"), arg (kvm ? "sbx" : "shift=auto"),
                       arg ("-M"),
                       arg ("microvm,x-option-roms=off,isa-serial=on,pit=on,rtc=on"),
                       arg ("-accel"), accel,
                       arg ("-cpu"), arg (kvm ? "host" : "max"),
                       arg ("-nodefaults"), arg ("-no-user-config"), arg ("-nographic"),
                       arg ("-m"), mem, arg ("-smp"), smp,
                       arg ("-kernel"), argv[3], arg ("-initrd"), argv[4],
                       arg ("-append"), cmdline,
                       arg ("-serial"), arg ("stdio"),
                       arg ("-device"), arg ("virtio-serial-device"),
                       arg ("-chardev"), cdev,
                       arg ("-device"), arg ("virtserialport,chardev=sbx,name=sbx"),
                       arg ("-sandbox"),
                       arg ("on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                            "resourcecontrol=deny"),
                       arg ("-no-reboot"),
                       /* The parent's QMP monitor (snapshots, iso/vm_qmp.c). */
                       arg ("-chardev"), qmp,
                       arg ("-mon"), arg ("chardev=qmp,mode=control"),
                       NULL};
      for (nq = 0; qargv[nq] != NULL; nq++)
        ;
      if (root)
        {
          /* The root image, read-only, through QEMU's fd set: QEMU uses
             the fd it got, it opens no path (the image is root's, 0600). */
          qargv[nq++] = arg ("-add-fd");
          qargv[nq++] = root_fd;
          qargv[nq++] = arg ("-drive");
          qargv[nq++] = arg ("file=/dev/fdset/1,format=raw,if=none,readonly=on,id=root,"
                             "file.locking=off");
          qargv[nq++] = arg ("-device");
          qargv[nq++] = arg ("virtio-blk-device,drive=root");
        }
      /* A restore: the snapshot's file, opened by the parent. */
      if (restored)
        {
          qargv[nq++] = arg ("-incoming");
          qargv[nq++] = incoming;
        }
      qargv[nq] = NULL;
      /* The only regular file QEMU writes is a snapshot's (an fd from the
         parent): a legitimate one is at most the guest's RAM, page headers
         and device state; a hostile QEMU does not fill the host's disk. */
      {
        unsigned long long mib = strtoull (argv[5], NULL, 10);
        struct rlimit fsize = {(mib + mib / 16 + 64) << 20, (mib + mib / 16 + 64) << 20};
        if (setrlimit (RLIMIT_FSIZE, &fsize) < 0)
          _exit (127);
      }
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      if (dup2 (sv[1], SBX_VM_SERIAL_FD) < 0 || dup2 (2, 1) < 0)
        _exit (127);
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      if (sbx_vm_confine_qemu (argv[3], NULL) < 0)
        _exit (127);
      execv (argv[2], qargv);
      _exit (127);
    }
  close (sv[1]);
  ser = sv[0];
  fcntl (ser, F_SETFL, O_NONBLOCK);
  fcntl (ctl, F_SETFL, O_NONBLOCK);
  sbx_vm_net_init (ctl, &sq);
  close (SBX_VM_INITRD_FD);
  close (SBX_VM_QMP_FD);
  if (restored)
    close (SBX_VM_INCOMING_FD);
  close (SBX_VM_ROOT_FD);

  if (restored)
    frame (SBX_VMF_PING, 0, NULL, 0, NULL, 0); /* id 0 ^ key: the key */
  else
  {
    void *prog;
    size_t len;
    struct sbx_vm_setup s;
    sbx_error_t *err = NULL;
    if (sbx_seccomp_build (&prog, &len, &err) < 0)
      quit ("build the seccomp filter", ENOMEM);
    memset (&s, 0, sizeof s);
    s.disk_bytes = strtoull (argv[7], NULL, 10);
    s.user_uid = 1000;
    s.user_gid = 1000;
    s.seccomp_len = (uint32_t) len;
    s.ca_len = (uint32_t) ca_len;
    /* The filter and the certificate, one after the other. */
    char *tail = realloc (prog, len + ca_len);
    if (tail == NULL)
      quit ("build SETUP", ENOMEM);
    memcpy (tail + len, ca, ca_len);
    frame (SBX_VMF_SETUP, 0, &s, sizeof s, tail, len + ca_len);
    free (tail);
  }


  for (;;)
    {
      struct pollfd pf[2 + 3 * MAX_CMDS + SBX_VM_CONN_MAX];
      struct cmd *who[2 + 3 * MAX_CMDS];
      int nf = 0, status, net0, nnet;
      const char *why;

      pf[nf++] = (struct pollfd){ctl, POLLIN, 0};
      pf[nf++] = (struct pollfd){ser, (short) (POLLIN | (sq.len > sq_off ? POLLOUT : 0)), 0};
      for (int i = 0; i < MAX_CMDS; i++)
        {
          struct cmd *c = &cmds[i];
          if (c->pid <= 0)
            continue;
          if (c->in >= 0 && sq.len - sq_off < (1u << 20))
            who[nf] = c, pf[nf++] = (struct pollfd){c->in, POLLIN, 0};
          for (int k = 0; k < 2; k++)
            if (c->q[k].len > c->qoff[k])
              who[nf] = c, pf[nf++] = (struct pollfd){c->out[k], POLLOUT, 0};
        }
      net0 = nf;
      nnet = sbx_vm_net_pollfds (pf + net0, sq.len - sq_off);
      nf += nnet;
      if (poll (pf, (nfds_t) nf, 1000) < 0 && errno != EINTR)
        quit ("poll", errno);
      if (waitpid (qemu, &status, WNOHANG) == qemu)
        {
          qemu = -1;
          quit ("QEMU exited", 0);
        }
      if (pf[0].revents)
        from_daemon ();
      if (pf[1].revents & (POLLIN | POLLHUP | POLLERR))
        from_guest ();
      if (pf[1].revents & POLLOUT)
        flush_serial ();
      for (int k = 2; k < net0; k++)
        {
          struct cmd *c = who[k];
          if (pf[k].revents == 0 || c->pid <= 0)
            continue;
          if (pf[k].fd == c->in && c->in >= 0)
            stdin_ready (c);
          else if (pf[k].fd == c->out[0])
            flush_out (c, 0);
          else if (pf[k].fd == c->out[1])
            flush_out (c, 1);
        }
      if (sbx_vm_net_after_poll (pf + net0, nnet, &why) < 0)
        quit (why, ENOMEM);
      if (sbx_vm_net_tick () < 0)
        quit ("out of memory", ENOMEM);
      flush_serial ();
    }
}
