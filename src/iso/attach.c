/* sbx: sandboxes that outlive the daemon (see SBX_MSG_KEEP in proto.h).
 *
 * A new daemon finds each kept sandbox's init from its record, checks it
 * is what the record says through the kernel's own view (the process is
 * in the sandbox's cgroup, is PID 1 of a pid namespace, runs as the
 * sandbox's uid 0), takes back its end of the control socket with
 * pidfd_getfd(2) (init keeps it at SBX_INIT_KEEP_FD), and asks init for
 * the rest (ATTACH): the root and disk fds, then each command with the
 * kept ends of its pipes.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iso/engine.h"
#include "iso/wire.h"
#include "util/cleanup.h"

#define ATTACH_TIMEOUT_MS 10000
#define STALE_MAX 100000 /* old events to skip before ROOTS, at most */

int
sbx_iso_keep (struct sbx_iso_box *box, int64_t deadline_ms, sbx_error_t **err)
{
  struct sbx_msg_keep m;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_KEEP;
  m.hdr.len = sizeof m;
  m.deadline_ms = deadline_ms;
  return sbx__iso_send (box->ctl, &m, sizeof m, &box->ctl, 1, err);
}

int
sbx_iso_set_deadline (struct sbx_iso_box *box, int64_t deadline_ms, sbx_error_t **err)
{
  struct sbx_msg_deadline m;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_DEADLINE;
  m.hdr.len = sizeof m;
  m.deadline_ms = deadline_ms;
  return sbx__iso_send (box->ctl, &m, sizeof m, NULL, 0, err);
}

int
sbx_iso_release (struct sbx_iso_box *box, uint64_t req_id, int only_stdin, sbx_error_t **err)
{
  struct sbx_msg_release m;

  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_RELEASE;
  m.hdr.len = sizeof m;
  m.req_id = req_id;
  m.what = only_stdin ? SBX_RELEASE_STDIN : SBX_RELEASE_ALL;
  return sbx__iso_send (box->ctl, &m, sizeof m, NULL, 0, err);
}

/* The kernel's word on pid: PID 1 of its own pid namespace, host uid
   uid_base (root inside). */
static int
is_sandbox_init (pid_t pid, uid_t uid_base)
{
  char path[64], buf[4096], *line, *save = NULL;
  int nspid_one = 0, uid_ok = 0;
  cleanup_close int fd = -1;
  ssize_t n;

  snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  n = read (fd, buf, sizeof buf - 1);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  for (line = strtok_r (buf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      if (strncmp (line, "NSpid:", 6) == 0)
        {
          const char *last = strrchr (line, '\t');
          /* At least two levels (host, sandbox) and 1 innermost. */
          nspid_one = last != NULL && last != strchr (line, '\t') && strcmp (last + 1, "1") == 0;
        }
      else if (strncmp (line, "Uid:", 4) == 0)
        {
          unsigned long r = 0, e = 0, s = 0;
          uid_ok = sscanf (line + 4, "%lu %lu %lu", &r, &e, &s) == 3 && r == uid_base
                   && e == uid_base && s == uid_base;
        }
    }
  return nspid_one && uid_ok;
}

/* Wait up to ATTACH_TIMEOUT_MS for the next packet of the answer. */
static ssize_t
recv_answer (struct sbx_iso_box *box, void *buf, size_t cap, int *fds, int *nfds,
             sbx_error_t **err)
{
  struct pollfd pfd[2] = {{box->ctl, POLLIN, 0}, {box->pidfd, POLLIN, 0}};
  ssize_t n;

  for (;;)
    {
      n = sbx__iso_recv (box->ctl, buf, cap, fds, SBX_ISO_MAX_FDS, nfds, MSG_DONTWAIT);
      if (n > 0)
        return n;
      if (n == 0)
        return sbx_err (err, SBX_E_UNAVAILABLE, "sandbox init went away");
      if (errno != EAGAIN)
        return sbx_err_sys (err, errno, "receive from sandbox init");
      if (poll (pfd, 2, ATTACH_TIMEOUT_MS) <= 0)
        return sbx_err (err, SBX_E_UNAVAILABLE, "sandbox init did not answer");
      if ((pfd[1].revents & POLLIN) && !(pfd[0].revents & POLLIN))
        return sbx_err (err, SBX_E_UNAVAILABLE, "sandbox init exited");
    }
}

static void
close_fds (int *fds, int n)
{
  while (n > 0)
    close (fds[--n]);
}

int
sbx_iso_adopt (struct sbx_engine *eng, const char *name, uid_t uid_base, pid_t pid,
               struct sbx_iso_box *box, sbx_error_t **err)
{
  struct sbx_msg_hdr attach = {SBX_MSG_ATTACH, sizeof attach};
  union
  {
    struct sbx_msg_hdr hdr;
    struct sbx_msg_roots roots;
    char raw[sizeof (struct sbx_msg_proc) + SBX_TAG_MAX];
  } m;
  int fds[SBX_ISO_MAX_FDS], nfds = 0, i;
  ssize_t n;

  sbx_iso_box_init (box);
  box->uid_base = uid_base;
  box->pid = pid;
  box->landlock_abi = eng->landlock_abi;
  if (pid <= 1)
    return sbx_err (err, SBX_E_INVALID, "no init pid recorded");
  if (sbx_cgroup_open (&eng->cgroups, name, &box->cg, err) < 0)
    return -1;
  /* A paused sandbox: init must answer ATTACH (the daemon freezes it
     again once adopted). */
  if (sbx_cgroup_is_frozen (&eng->cgroups, &box->cg)
      && sbx_cgroup_freeze (&eng->cgroups, &box->cg, 0, err) < 0)
    goto fail;
  box->pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
  if (box->pidfd < 0)
    {
      sbx_err_sys (err, errno, "its init (pid %d) is gone", (int) pid);
      goto fail;
    }
  /* Checked after pidfd_open: the pid cannot be reused under the pidfd
     any more, and a pidfd of a process that died since reads as such. */
  if (!sbx_cgroup_has_pid (&eng->cgroups, &box->cg, pid) || !is_sandbox_init (pid, uid_base)
      || syscall (SYS_pidfd_send_signal, box->pidfd, 0, NULL, 0) < 0)
    {
      sbx_err (err, SBX_E_NOT_FOUND, "pid %d is not the sandbox's init any more", (int) pid);
      goto fail;
    }
  box->ctl = (int) syscall (SYS_pidfd_getfd, box->pidfd, SBX_INIT_KEEP_FD, 0);
  if (box->ctl < 0)
    {
      sbx_err_sys (err, errno, "take the control socket back from init");
      goto fail;
    }
  {
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt (box->ctl, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_SEQPACKET)
      {
        sbx_err (err, SBX_E_SYSTEM, "init holds no control socket (never kept)");
        goto fail;
      }
  }
  if (fcntl (box->ctl, F_SETFL, O_NONBLOCK) < 0)
    {
      sbx_err_sys (err, errno, "fcntl");
      goto fail;
    }
  if (sbx__iso_send (box->ctl, &attach, sizeof attach, NULL, 0, err) < 0)
    goto fail;
  /* Events meant for the old daemon come first: skip them. */
  for (i = 0; i < STALE_MAX; i++)
    {
      n = recv_answer (box, &m, sizeof m, fds, &nfds, err);
      if (n < 0)
        goto fail;
      if (m.hdr.type == SBX_MSG_ROOTS)
        break;
      close_fds (fds, nfds);
      /* Events (and connect answers, their sockets closed above) meant
         for the old daemon. */
      if ((size_t) n < sizeof m.hdr
          || ((m.hdr.type < SBX_MSG_SPAWNED || m.hdr.type > SBX_MSG_EXITED)
              && m.hdr.type != SBX_MSG_RESIZED && m.hdr.type != SBX_MSG_CONNECTED
              && m.hdr.type != SBX_MSG_CONNECT_FAILED && m.hdr.type != SBX_MSG_EGRESS))
        {
          sbx_err (err, SBX_E_SYSTEM, "sandbox init broke the protocol");
          goto fail;
        }
    }
  if (i == STALE_MAX || (size_t) n != sizeof m.roots || m.hdr.len != sizeof m.roots || nfds != 2)
    {
      close_fds (fds, nfds);
      sbx_err (err, SBX_E_SYSTEM, "sandbox init sent a malformed ROOTS");
      goto fail;
    }
  if (m.roots.version != SBX_PROTO_VERSION)
    {
      close_fds (fds, nfds);
      sbx_err (err, SBX_E_SYSTEM, "its init speaks protocol %u, this daemon %u",
               (unsigned) m.roots.version, SBX_PROTO_VERSION);
      goto fail;
    }
  box->root = fds[0];
  box->disk = fds[1];
  return 0;
fail:
  close_and_reset (&box->ctl);
  close_and_reset (&box->pidfd);
  sbx_cgroup_close (&box->cg);
  box->cg.name[0] = '\0';
  return -1;
}

int
sbx_iso_next_attached (struct sbx_iso_box *box, struct sbx_iso_attached *a, sbx_error_t **err)
{
  union
  {
    struct sbx_msg_hdr hdr;
    struct sbx_msg_proc proc;
    struct sbx_msg_attach_end end;
    char raw[sizeof (struct sbx_msg_proc) + SBX_TAG_MAX];
  } m;
  int fds[SBX_ISO_MAX_FDS], nfds = 0, k, j = 0;
  ssize_t n;

  n = recv_answer (box, &m, sizeof m, fds, &nfds, err);
  if (n < 0)
    return -1;
  if ((size_t) n < sizeof m.hdr || m.hdr.len != (size_t) n)
    goto bad;
  if (m.hdr.type == SBX_MSG_ATTACH_END)
    {
      if ((size_t) n != sizeof m.end || nfds != 0)
        goto bad;
      return 0;
    }
  /* Init lives in the sandbox: every field is checked as hostile input. */
  if (m.hdr.type != SBX_MSG_PROC || (size_t) n < sizeof m.proc || m.proc.tag_len > SBX_TAG_MAX
      || (size_t) n != sizeof m.proc + m.proc.tag_len || m.proc.pid <= 0
      || (m.proc.keep_mask != SBX_KEEP_PTY && (m.proc.keep_mask & ~(uint32_t) SBX_KEEP_ALL) != 0)
      || nfds != __builtin_popcount (m.proc.keep_mask)
      || (m.proc.state != SBX_ATTACHED_RUNNING && m.proc.state != SBX_ATTACHED_EXITED))
    goto bad;
  /* A terminal's master is that and nothing else (see SBX_KEEP_PTY). */
  if (m.proc.keep_mask == SBX_KEEP_PTY && !sbx__iso_is_pty_master (fds[0]))
    goto bad;
  memset (a, 0, sizeof *a);
  a->pty_fd = -1;
  a->req_id = m.proc.req_id;
  a->pid = m.proc.pid;
  a->exited = m.proc.state == SBX_ATTACHED_EXITED;
  a->wait_status = m.proc.wait_status;
  a->exited_ms = m.proc.exited_ms;
  a->causes = m.proc.causes & (SBX_SIGNAL_TIMEOUT | SBX_SIGNAL_API);
  if (m.proc.keep_mask == SBX_KEEP_PTY)
    {
      a->pty_fd = fds[0];
      a->fds[0] = a->fds[1] = a->fds[2] = -1;
    }
  else
    for (k = 0; k < 3; k++)
      a->fds[k] = (m.proc.keep_mask & (1u << k)) ? fds[j++] : -1;
  a->tag_len = m.proc.tag_len;
  memcpy (a->tag, &m.proc + 1, m.proc.tag_len);
  a->tag[a->tag_len] = '\0';
  return 1;
bad:
  close_fds (fds, nfds);
  return sbx_err (err, SBX_E_SYSTEM, "sandbox init sent a malformed command list");
}
