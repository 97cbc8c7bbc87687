/* sbx: the front end's side of privilege separation (see priv/proto.h).
 *
 * Requests go out on a pool of channels, one request per channel at a
 * time, so HTTP threads never wait for each other's privileged calls. A
 * channel is a SOCK_SEQPACKET pair whose other end we hand to the parent
 * on the first channel. While waiting for its answer, a request may get
 * callbacks (PUMP_START, PUMP_FINISH) that run the copier of the call.
 */
#include "priv/host.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iso/copy.h"
#include "iso/wire.h"
#include "priv/proto.h"
#include "util/cleanup.h"
#include "util/log.h"

#define MAX_CHANNELS 64
#define IDLE_CHANNELS 4 /* kept open between bursts; more are closed */

static struct
{
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int master;
  int free_fds[MAX_CHANNELS];
  int nfree, total;
  struct sbx_host_info info;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .master = -1};

static int
proto_error (sbx_error_t **err)
{
  return sbx_err (err, SBX_E_SYSTEM, "the privileged process broke the protocol");
}

/* The error a reply carries. */
static int
reply_error (struct sbx_priv_reply *r, sbx_error_t **err)
{
  enum sbx_error_kind k = r->kind >= SBX_E_INVALID && r->kind <= SBX_E_LAST
                              ? (enum sbx_error_kind) r->kind
                              : SBX_E_SYSTEM;

  r->msg[sizeof r->msg - 1] = '\0';
  /* The parent's message already ends with strerror: keep its errno
     (callers test it: ENOENT, EMFILE) without adding it twice. */
  if (r->sys_errno != 0)
    {
      const char *s = strerror (r->sys_errno);
      size_t ml = strlen (r->msg), sl = strlen (s);
      if (ml >= sl + 2 && strcmp (r->msg + ml - sl, s) == 0
          && memcmp (r->msg + ml - sl - 2, ": ", 2) == 0)
        r->msg[ml - sl - 2] = '\0';
    }
  return sbx_err_errno (err, k, r->sys_errno, "%s", r->msg);
}

static int
chan_get (sbx_error_t **err)
{
  struct sbx_priv_reply r;
  int fds[SBX_PRIV_MAX_FDS], nfds = 0;
  ssize_t n;
  int fd = -1, sv[2];
  struct sbx_priv_hdr m = {SBX_PRIV_CHANNEL, sizeof m};

  pthread_mutex_lock (&C.lock);
  while (C.nfree == 0 && C.total >= MAX_CHANNELS)
    pthread_cond_wait (&C.cond, &C.lock);
  if (C.nfree > 0)
    {
      fd = C.free_fds[--C.nfree];
      pthread_mutex_unlock (&C.lock);
      return fd;
    }
  if (C.master < 0)
    {
      pthread_mutex_unlock (&C.lock);
      return sbx_err (err, SBX_E_UNAVAILABLE, "the privileged process is gone");
    }
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    {
      int e = errno;
      pthread_mutex_unlock (&C.lock);
      return sbx_err_sys (err, e, "socketpair");
    }
  if (sbx__sendmsg (C.master, &m, sizeof m, &sv[1], 1, 0) < 0)
    {
      pthread_mutex_unlock (&C.lock);
      close (sv[0]);
      close (sv[1]);
      return sbx_err (err, SBX_E_UNAVAILABLE, "the privileged process is gone");
    }
  close (sv[1]);
  /* The parent answers whether it took the channel: when its fd table is
     full the kernel drops its end, and the request would meet a channel
     with nobody at the other end. */
  n = sbx__iso_recv (C.master, &r, sizeof r, fds, SBX_PRIV_MAX_FDS, &nfds, 0);
  if (n == (ssize_t) sizeof r && nfds == 0 && r.status == 0)
    C.total++;
  pthread_mutex_unlock (&C.lock);
  if (n != (ssize_t) sizeof r || nfds != 0 || r.hdr.op != SBX_PRIV_REPLY || r.hdr.len != sizeof r
      || r.payload != 0)
    {
      while (nfds > 0)
        close (fds[--nfds]);
      close (sv[0]);
      if (n < 0 && errno == EMFILE)
        return sbx_err_sys (err, EMFILE, "the parent's answer");
      return n <= 0 ? sbx_err (err, SBX_E_UNAVAILABLE, "the privileged process is gone")
                    : proto_error (err);
    }
  if (r.status < 0)
    {
      close (sv[0]);
      return reply_error (&r, err);
    }
  return sv[0];
}

static void
chan_put (int fd, int broken)
{
  pthread_mutex_lock (&C.lock);
  /* A burst's extra channels go (each is a thread in the parent). */
  if (broken || C.nfree >= IDLE_CHANNELS)
    {
      close (fd);
      C.total--;
    }
  else
    C.free_fds[C.nfree++] = fd;
  pthread_cond_signal (&C.cond);
  pthread_mutex_unlock (&C.lock);
}

struct call
{
  const struct sbx_fs_copier *copier;                   /* for PUMP callbacks */
  int (*on_entry) (const struct sbx_fs_entry *e, void *arg); /* for LIST */
  void *arg;
  int entry_failed;
  int fds_lost; /* a reply came, its descriptors could not be received */
  int send_fd;  /* 1: req_fd rides with the request (a template build's archive) */
  int req_fd;
  /* out */
  struct sbx_priv_reply reply;
  unsigned char payload[256];
  int fds[SBX_PRIV_MAX_FDS];
  int nfds;
};

static int
answer_pump (int fd, int status, uint64_t job, sbx_error_t *e)
{
  struct sbx_priv_pump_done d;

  memset (&d, 0, sizeof d);
  d.hdr.op = SBX_PRIV_PUMP_DONE;
  d.hdr.len = sizeof d;
  d.status = status;
  d.job = job;
  if (e)
    {
      d.kind = e->kind;
      snprintf (d.msg, sizeof d.msg, "%s", e->msg);
    }
  return sbx__sendmsg (fd, &d, sizeof d, NULL, 0, 0);
}

/* A callback from the parent in the middle of a request. */
static int
callback (int fd, struct call *cl, const struct sbx_priv_pump *m, size_t n, int *fds, int nfds)
{
  sbx_error_t *e = NULL;
  int r;

  if (n != sizeof *m || cl->copier == NULL)
    {
      while (nfds > 0)
        close (fds[--nfds]);
      return -1;
    }
  if (m->hdr.op == SBX_PRIV_PUMP_START)
    {
      void *job = NULL;
      if (nfds != 2)
        {
          while (nfds > 0)
            close (fds[--nfds]);
          return -1;
        }
      r = cl->copier->start (cl->copier->arg, fds[0], fds[1], &job, &e);
      close (fds[0]);
      close (fds[1]);
      r = answer_pump (fd, r < 0 ? -1 : 0, (uint64_t) (uintptr_t) job, e);
    }
  else
    {
      if (nfds != 0 || m->job == 0)
        return -1;
      r = cl->copier->finish (cl->copier->arg, (void *) (uintptr_t) m->job, &e);
      r = answer_pump (fd, r < 0 ? -1 : 0, 0, e);
    }
  sbx_error_free (e);
  return r;
}

/* Send a request and wait for its reply; 0 when the parent said yes. */
static int
call (const void *req, size_t len, struct call *cl, sbx_error_t **err)
{
  union
  {
    struct sbx_priv_hdr hdr;
    struct sbx_priv_reply reply;
    struct sbx_priv_pump pump;
    struct sbx_priv_entry entry;
    unsigned char raw[sizeof (struct sbx_priv_entry) + 64];
  } *m = malloc (sizeof *m);
  int fd, broken = 1, rc = -1;

  if (m == NULL)
    return sbx_err_oom (err);
  cl->nfds = 0;
  fd = chan_get (err);
  if (fd < 0)
    {
      free (m);
      return -1;
    }
  if (sbx__sendmsg (fd, req, len, cl->send_fd ? &cl->req_fd : NULL, cl->send_fd ? 1 : 0, 0) < 0)
    {
      sbx_err (err, SBX_E_UNAVAILABLE, "the privileged process is gone");
      goto out;
    }
  for (;;)
    {
      int fds[SBX_PRIV_MAX_FDS], nfds = 0;
      ssize_t n;

      m->hdr.op = 0;
      n = sbx__iso_recv (fd, m, sizeof *m, fds, SBX_PRIV_MAX_FDS, &nfds, 0);
      if (n < 0 && errno == EMFILE)
        {
          /* Our fd table is full: the kernel dropped the descriptors of
             the message (its bytes are in m). A reply ends the request
             and leaves the channel usable; the caller undoes what the
             parent did for it (fds_lost). In the middle of a request the
             channel is closed, which aborts it in the parent. */
          if (m->hdr.op == SBX_PRIV_REPLY)
            {
              cl->reply = m->reply;
              cl->fds_lost = 1;
              broken = 0;
            }
          sbx_err_sys (err, EMFILE, "receive from the privileged process");
          goto out;
        }
      if (n <= 0)
        {
          sbx_err (err, SBX_E_UNAVAILABLE, "the privileged process is gone");
          goto out;
        }
      if ((size_t) n < sizeof m->hdr || m->hdr.len != (size_t) n)
        goto bad;
      if (m->hdr.op == SBX_PRIV_PUMP_START || m->hdr.op == SBX_PRIV_PUMP_FINISH)
        {
          if (callback (fd, cl, &m->pump, (size_t) n, fds, nfds) < 0)
            {
              proto_error (err);
              goto out;
            }
          continue;
        }
      if (m->hdr.op == SBX_PRIV_LIST_ENTRY)
        {
          if ((size_t) n != sizeof m->entry || nfds != 0)
            goto bad;
          m->entry.entry.name[sizeof m->entry.entry.name - 1] = '\0';
          m->entry.entry.path[sizeof m->entry.entry.path - 1] = '\0';
          m->entry.entry.target[sizeof m->entry.entry.target - 1] = '\0';
          /* Its pairs become JSON: well formed or the channel is broken. */
          if (sbx_fs_meta_check (&m->entry.entry.meta, NULL) < 0)
            goto bad;
          if (!cl->entry_failed && cl->on_entry && cl->on_entry (&m->entry.entry, cl->arg) < 0)
            cl->entry_failed = 1;
          continue;
        }
      if (m->hdr.op != SBX_PRIV_REPLY || (size_t) n < sizeof m->reply
          || m->reply.payload > sizeof cl->payload || (size_t) n != sizeof m->reply + m->reply.payload)
        {
        bad:
          while (nfds > 0)
            close (fds[--nfds]);
          proto_error (err);
          goto out;
        }
      cl->reply = m->reply;
      cl->reply.msg[sizeof cl->reply.msg - 1] = '\0';
      memcpy (cl->payload, &m->reply + 1, m->reply.payload);
      memcpy (cl->fds, fds, sizeof (int) * (size_t) nfds);
      cl->nfds = nfds;
      broken = 0;
      if (m->reply.status < 0)
        {
          while (cl->nfds > 0)
            close (cl->fds[--cl->nfds]);
          reply_error (&m->reply, err);
          goto out;
        }
      rc = 0;
      goto out;
    }
out:
  chan_put (fd, broken);
  free (m);
  return rc;
}

static void
close_fds (struct call *cl)
{
  while (cl->nfds > 0)
    close (cl->fds[--cl->nfds]);
}

int
sbx_host_connect (int fd, struct sbx_host_info *info, sbx_error_t **err)
{
  struct sbx_priv_hello h = {{SBX_PRIV_HELLO, sizeof h}, SBX_PRIV_VERSION, 0};
  struct
  {
    struct sbx_priv_reply r;
    struct sbx_priv_info info;
  } a;
  int fds[SBX_PRIV_MAX_FDS], nfds = 0;
  ssize_t n;

  if (sbx__sendmsg (fd, &h, sizeof h, NULL, 0, 0) < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the privileged process is gone");
  n = sbx__iso_recv (fd, &a, sizeof a, fds, SBX_PRIV_MAX_FDS, &nfds, 0);
  /* The reply and the info, without the padding `a` may end with. */
  if (n != (ssize_t) (sizeof a.r + sizeof a.info) || nfds != 0 || a.r.hdr.op != SBX_PRIV_REPLY
      || a.r.hdr.len != sizeof a.r + sizeof a.info || a.r.status != 0
      || a.info.version != SBX_PRIV_VERSION)
    {
      while (nfds > 0)
        close (fds[--nfds]);
      return proto_error (err);
    }
  info->cgroup_mode = a.info.cgroup_mode;
  info->landlock_abi = a.info.landlock_abi;
  info->kernel_paths = a.info.kernel_paths;
  memcpy (info->kernel_settings, a.info.kernel_settings, sizeof info->kernel_settings);
  memcpy (info->seal_key, a.info.seal_key, sizeof info->seal_key);
  info->anchor_remade = a.info.anchor_remade;
  explicit_bzero (a.info.seal_key, sizeof a.info.seal_key);
  /* Strings from the parent are ours to trust, but bounded all the same. */
#define COPY_STRING(f) snprintf (info->f, sizeof info->f, "%.*s", (int) sizeof a.info.f, a.info.f)
  COPY_STRING (kernel_release);
  COPY_STRING (snapshot_copy_reason);
  COPY_STRING (cgroup_parent);
  COPY_STRING (cgroup_daemon);
  COPY_STRING (cgroup_why);
#undef COPY_STRING
  pthread_mutex_lock (&C.lock);
  C.info = *info;
  C.master = fd;
  pthread_mutex_unlock (&C.lock);
  return 0;
}

const struct sbx_host_info *
sbx_host_get_info (void)
{
  return &C.info;
}

void
sbx_host_audit_head (uint64_t seq, const unsigned char hash[32])
{
  struct sbx_priv_audit_head m;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_AUDIT_HEAD;
  m.hdr.len = sizeof m;
  m.seq = seq;
  memcpy (m.hash, hash, sizeof m.hash);
  /* Without waiting: one lost (a full channel) is made good by the next,
     a second later. */
  pthread_mutex_lock (&C.lock);
  if (C.master >= 0)
    sbx__sendmsg (C.master, &m, sizeof m, NULL, 0, MSG_DONTWAIT);
  pthread_mutex_unlock (&C.lock);
}

void
sbx_host_forget_seal_key (void)
{
  explicit_bzero (C.info.seal_key, sizeof C.info.seal_key);
}

int
sbx_host_ready (sbx_error_t **err)
{
  struct sbx_priv_hdr m = {SBX_PRIV_READY, sizeof m};
  int r;

  pthread_mutex_lock (&C.lock);
  r = C.master >= 0 ? sbx__sendmsg (C.master, &m, sizeof m, NULL, 0, 0) : -EPIPE;
  pthread_mutex_unlock (&C.lock);
  if (r < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the privileged process is gone");
  return 0;
}

void
sbx_host_disconnect (void)
{
  pthread_mutex_lock (&C.lock);
  while (C.nfree > 0)
    close (C.free_fds[--C.nfree]);
  C.total = 0;
  if (C.master >= 0)
    close (C.master);
  C.master = -1;
  pthread_cond_broadcast (&C.cond);
  pthread_mutex_unlock (&C.lock);
}

/* ---- sandboxes --------------------------------------------------------- */

static int
take_box (struct call *cl, struct sbx_iso_box *box, sbx_error_t **err)
{
  struct sbx_priv_box b;

  if (cl->reply.payload != sizeof b || cl->nfds != 2)
    {
      close_fds (cl);
      return proto_error (err);
    }
  memcpy (&b, cl->payload, sizeof b);
  sbx_iso_box_init (box);
  box->pid = b.pid;
  box->uid_base = b.uid_base;
  box->landlock_abi = b.landlock_abi;
  box->ctl = cl->fds[0];
  box->pidfd = cl->fds[1];
  cl->nfds = 0;
  if (fcntl (box->ctl, F_SETFL, O_NONBLOCK) < 0)
    {
      close_and_reset (&box->ctl);
      close_and_reset (&box->pidfd);
      return sbx_err_sys (err, errno, "fcntl");
    }
  return 0;
}

static int slot_call (uint32_t op, uint32_t slot, struct call *cl, sbx_error_t **err);

int
sbx_host_create (const struct sbx_host_create *req, struct sbx_iso_box *box, sbx_error_t **err)
{
  struct sbx_priv_create m;
  struct call cl = {0};

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_CREATE;
  m.hdr.len = sizeof m;
  m.slot = req->slot;
  m.background = req->background ? 1 : 0;
  snprintf (m.id, sizeof m.id, "%s", req->id);
  snprintf (m.template_name, sizeof m.template_name, "%s", req->template_name);
  m.memory_bytes = req->limits.memory_bytes;
  m.cpu_milli = req->limits.cpu_milli;
  m.pids = req->limits.pids;
  m.disk_bytes = req->disk_bytes;
  m.isolation = (uint32_t) req->isolation;
  if (req->snapshot)
    {
      if (strlen (req->snapshot) >= sizeof m.snapshot
          || strlen (req->snapshot_tenant) >= sizeof m.snapshot_tenant)
        return sbx_err (err, SBX_E_INVALID, "snapshot name or tenant too long");
      snprintf (m.snapshot, sizeof m.snapshot, "%s", req->snapshot);
      snprintf (m.snapshot_tenant, sizeof m.snapshot_tenant, "%s", req->snapshot_tenant);
    }
  if (call (&m, sizeof m, &cl, err) < 0)
    {
      /* Made, but we could not take its control socket and pidfd: the
         parent undoes it (nothing may be left of a failed create). */
      if (cl.fds_lost && cl.reply.status == 0)
        {
          struct call undo = {0};
          sbx_error_t *e = NULL;
          if (slot_call (SBX_PRIV_DESTROY, req->slot, &undo, &e) < 0)
            {
              sbx_warn ("destroying sandbox %s, whose fds were lost: %s", req->id, e->msg);
              sbx_error_free (e);
            }
        }
      return -1;
    }
  return take_box (&cl, box, err);
}

int
sbx_host_adopt (uint32_t slot, const char *id, pid_t init_pid, struct sbx_iso_box *box,
                sbx_error_t **err)
{
  struct sbx_priv_adopt m;
  struct call cl = {0};

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_ADOPT;
  m.hdr.len = sizeof m;
  m.slot = slot;
  m.init_pid = init_pid;
  snprintf (m.id, sizeof m.id, "%s", id);
  if (call (&m, sizeof m, &cl, err) < 0)
    return -1;
  return take_box (&cl, box, err);
}

int
sbx_host_adopt_done (sbx_error_t **err)
{
  struct sbx_priv_hdr m = {SBX_PRIV_ADOPT_DONE, sizeof m};
  struct call cl = {0};
  int rc = call (&m, sizeof m, &cl, err);

  close_fds (&cl);
  return rc;
}

static int
slot_call (uint32_t op, uint32_t slot, struct call *cl, sbx_error_t **err)
{
  struct sbx_priv_slot m;
  int rc;

  memset (&m, 0, sizeof m);
  m.hdr.op = op;
  m.hdr.len = sizeof m;
  m.slot = slot;
  rc = call (&m, sizeof m, cl, err);
  close_fds (cl);
  return rc;
}

int
sbx_host_destroy (uint32_t slot, struct sbx_iso_box *box, sbx_error_t **err)
{
  int rc, tries;

  /* The front end frees the slot whatever happens: a destroy that never
     reached the parent (no memory or fd for the request, its channel or
     its answer, in either process) would leave the parent holding the slot
     and refusing the next create in it ("slot is not free"). Such failures
     pass; try again for a while. */
  for (tries = 0;; tries++)
    {
      struct call cl = {0};
      sbx_error_t *e = NULL;
      rc = slot_call (SBX_PRIV_DESTROY, slot, &cl, &e);
      if (rc == 0 || tries >= 100
          || (e->sys_errno != ENOMEM && e->sys_errno != EMFILE && e->sys_errno != ENFILE
              && e->sys_errno != EAGAIN))
        {
          if (rc < 0)
            sbx_error_move (err, &e);
          break;
        }
      sbx_error_free (e);
      usleep (10000);
    }
  close_and_reset (&box->ctl);
  close_and_reset (&box->pidfd);
  return rc;
}

int
sbx_host_set_foreground (uint32_t slot, sbx_error_t **err)
{
  struct call cl = {0};
  return slot_call (SBX_PRIV_FOREGROUND, slot, &cl, err);
}

int
sbx_host_copy_disk (uint32_t src_slot, uint32_t dst_slot, struct sbx_copy_result *res,
                    sbx_error_t **err)
{
  struct sbx_priv_copy m;
  struct call cl = {0};
  int rc;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_COPY_DISK;
  m.hdr.len = sizeof m;
  m.src_slot = src_slot;
  m.dst_slot = dst_slot;
  rc = call (&m, sizeof m, &cl, err);
  if (rc == 0 && cl.reply.payload != sizeof *res)
    rc = proto_error (err);
  if (rc == 0)
    memcpy (res, cl.payload, sizeof *res);
  close_fds (&cl);
  return rc;
}

int
sbx_host_snapshot (uint32_t op, uint32_t slot, const char *tenant, const char *name,
                   struct sbx_copy_result *res, sbx_error_t **err)
{
  return sbx_host_snapshot_max (op, slot, tenant, name, 0, res, err);
}

int
sbx_host_snapshot_max (uint32_t op, uint32_t slot, const char *tenant, const char *name,
                       uint64_t max_bytes, struct sbx_copy_result *res, sbx_error_t **err)
{
  struct sbx_priv_snapshot m;
  struct call cl = {0};
  int rc;

  memset (&m, 0, sizeof m);
  if (strlen (tenant) >= sizeof m.tenant || strlen (name) >= sizeof m.name)
    return sbx_err (err, SBX_E_INVALID, "snapshot name or tenant too long");
  m.hdr.op = SBX_PRIV_SNAPSHOT;
  m.hdr.len = sizeof m;
  m.snap_op = op;
  m.slot = slot;
  m.max_bytes = max_bytes;
  snprintf (m.tenant, sizeof m.tenant, "%s", tenant);
  snprintf (m.name, sizeof m.name, "%s", name);
  rc = call (&m, sizeof m, &cl, err);
  if (rc == 0 && res != NULL)
    {
      if (cl.reply.payload == sizeof *res)
        memcpy (res, cl.payload, sizeof *res);
      else
        memset (res, 0, sizeof *res);
    }
  close_fds (&cl);
  return rc;
}

_Static_assert (sizeof (struct sbx_copy_result) <= sizeof ((struct call *) 0)->payload,
                "a copy result fits a reply's payload");

int
sbx_host_freeze (uint32_t slot, int frozen, sbx_error_t **err)
{
  struct call cl = {0};
  return slot_call (frozen ? SBX_PRIV_FREEZE : SBX_PRIV_THAW, slot, &cl, err);
}

int
sbx_host_stats (uint32_t slot, struct sbx_iso_stats *out, sbx_error_t **err)
{
  struct call cl = {0};

  if (slot_call (SBX_PRIV_STATS, slot, &cl, err) < 0)
    return -1;
  if (cl.reply.payload != sizeof *out)
    return proto_error (err);
  memcpy (out, cl.payload, sizeof *out);
  return 0;
}

int
sbx_host_init_status (uint32_t slot, int *wstatus)
{
  struct call cl = {0};

  if (slot_call (SBX_PRIV_INIT_STATUS, slot, &cl, NULL) < 0 || (cl.reply.value >> 32) != 1)
    return 0;
  *wstatus = (int) (uint32_t) cl.reply.value;
  return 1;
}

uint64_t
sbx_host_oom_kills (uint32_t slot)
{
  struct sbx_iso_stats st;
  sbx_error_t *err = NULL;

  if (sbx_host_stats (slot, &st, &err) < 0)
    {
      sbx_error_free (err);
      return 0;
    }
  return st.cg.oom_kills;
}

int
sbx_host_set_limits (uint32_t slot, const struct sbx_cgroup_limits *limits, sbx_error_t **err)
{
  struct sbx_priv_limits m;
  struct call cl = {0};
  int rc;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_LIMITS;
  m.hdr.len = sizeof m;
  m.slot = slot;
  m.memory_bytes = limits->memory_bytes;
  m.cpu_milli = limits->cpu_milli;
  m.pids = limits->pids;
  rc = call (&m, sizeof m, &cl, err);
  close_fds (&cl);
  return rc;
}

int
sbx_host_set_disk (uint32_t slot, uint64_t bytes, sbx_error_t **err)
{
  struct sbx_priv_disk m;
  struct call cl = {0};
  int rc;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_DISK;
  m.hdr.len = sizeof m;
  m.slot = slot;
  m.bytes = bytes;
  rc = call (&m, sizeof m, &cl, err);
  close_fds (&cl);
  return rc;
}

/* ---- files ------------------------------------------------------------- */

/* The parent's limit, for a remote context too: both engines answer alike. */
static int
fs_paths_fit (const char *path, const char *path2, sbx_error_t **err)
{
  if (strlen (path) >= sizeof ((struct sbx_priv_fs *) 0)->path
      || (path2 && strlen (path2) >= sizeof ((struct sbx_priv_fs *) 0)->path2))
    return sbx_err (err, SBX_E_INVALID, "path too long");
  return 0;
}

static struct sbx_priv_fs *
fs_request (const struct sbx_fs_ctx *ctx, enum sbx_priv_fs_op op, const char *path,
            const char *path2, sbx_error_t **err)
{
  struct sbx_priv_fs *m = calloc (1, sizeof *m);

  if (m == NULL)
    return sbx_err_oom (err), NULL;
  m->hdr.op = SBX_PRIV_FS;
  m->hdr.len = sizeof *m;
  m->fs_op = op;
  m->slot = ctx->slot;
  m->uid = ctx->uid;
  m->gid = ctx->gid;
  if (strlen (path) >= sizeof m->path || (path2 && strlen (path2) >= sizeof m->path2))
    {
      free (m);
      return sbx_err (err, SBX_E_INVALID, "path too long"), NULL;
    }
  memcpy (m->path, path, strlen (path) + 1);
  if (path2)
    memcpy (m->path2, path2, strlen (path2) + 1);
  return m;
}

static int
fs_call (struct sbx_priv_fs *m, const struct sbx_fs_ctx *ctx, struct call *cl, sbx_error_t **err)
{
  int rc;

  cl->copier = ctx->copier;
  rc = call (m, sizeof *m, cl, err);
  free (m);
  return rc;
}

static int
fs_simple (struct sbx_priv_fs *m, const struct sbx_fs_ctx *ctx, sbx_error_t **err)
{
  struct call cl = {0};
  int rc;

  if (m == NULL)
    return -1;
  rc = fs_call (m, ctx, &cl, err);
  close_fds (&cl);
  return rc;
}

int
sbx_host_fs_open_read (const struct sbx_fs_ctx *ctx, const char *path, uint64_t *size,
                       sbx_error_t **err)
{
  struct sbx_priv_fs *m;
  struct call cl = {0};

  if (ctx->remote) /* its read gives bytes, not an fd (server/files_reply.c) */
    return sbx_err (err, SBX_E_SYSTEM, "a remote file is read with its read");
  m = fs_request (ctx, SBX_PRIV_FS_OPEN_READ, path, NULL, err);
  if (m == NULL || fs_call (m, ctx, &cl, err) < 0)
    return -1;
  if (cl.nfds != 1)
    {
      close_fds (&cl);
      return proto_error (err);
    }
  *size = cl.reply.value;
  return cl.fds[0];
}

static int
keep_entry (const struct sbx_fs_entry *e, void *arg)
{
  struct sbx_fs_entry *out = arg;

  *out = *e;
  return 0;
}

int
sbx_host_fs_stat (const struct sbx_fs_ctx *ctx, const char *path, struct sbx_fs_entry *out,
                  sbx_error_t **err)
{
  struct sbx_priv_fs *m;
  struct call cl = {0};

  memset (out, 0, sizeof *out);
  if (ctx->remote)
    return fs_paths_fit (path, NULL, err) < 0 ? -1 : ctx->remote->stat (ctx->remote->arg, path, out, err);
  m = fs_request (ctx, SBX_PRIV_FS_STAT, path, NULL, err);
  cl.on_entry = keep_entry;
  cl.arg = out;
  memset (out, 0, sizeof *out);
  if (m == NULL || fs_call (m, ctx, &cl, err) < 0)
    return -1;
  close_fds (&cl);
  return 0;
}

int
sbx_host_fs_list (const struct sbx_fs_ctx *ctx, const char *path, int depth, size_t max_entries,
                  int (*fn) (const struct sbx_fs_entry *e, void *arg), void *arg, int *truncated,
                  sbx_error_t **err)
{
  struct sbx_priv_fs *m;
  struct call cl = {0};

  if (ctx->remote)
    return fs_paths_fit (path, NULL, err) < 0
               ? -1
               : ctx->remote->list (ctx->remote->arg, path, depth, max_entries, fn, arg,
                                    truncated, err);
  m = fs_request (ctx, SBX_PRIV_FS_LIST, path, NULL, err);
  if (m == NULL)
    return -1;
  m->depth = depth > 0 ? (uint32_t) depth : 0;
  m->max_entries = (uint32_t) max_entries;
  cl.on_entry = fn;
  cl.arg = arg;
  if (fs_call (m, ctx, &cl, err) < 0)
    return -1;
  close_fds (&cl);
  *truncated = cl.reply.value != 0;
  return 0;
}

int
sbx_host_fs_mkdir (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode, int parents,
                   sbx_error_t **err)
{
  struct sbx_priv_fs *m;

  if (ctx->remote)
    return fs_paths_fit (path, NULL, err) < 0 ? -1 : ctx->remote->mkdir (ctx->remote->arg, path, mode, parents, err);
  m = fs_request (ctx, SBX_PRIV_FS_MKDIR, path, NULL, err);
  if (m)
    {
      m->mode = mode;
      m->flags = parents ? SBX_PRIV_FS_PARENTS : 0;
    }
  return fs_simple (m, ctx, err);
}

int
sbx_host_fs_move (const struct sbx_fs_ctx *ctx, const char *from, const char *to, int overwrite,
                  sbx_error_t **err)
{
  struct sbx_priv_fs *m;

  if (ctx->remote)
    return fs_paths_fit (from, to, err) < 0 ? -1 : ctx->remote->move (ctx->remote->arg, from, to, overwrite, err);
  m = fs_request (ctx, SBX_PRIV_FS_MOVE, from, to, err);
  if (m)
    m->flags = overwrite ? SBX_PRIV_FS_OVERWRITE : 0;
  return fs_simple (m, ctx, err);
}

int
sbx_host_fs_remove (const struct sbx_fs_ctx *ctx, const char *path, int recursive,
                    sbx_error_t **err)
{
  struct sbx_priv_fs *m;

  if (ctx->remote)
    return fs_paths_fit (path, NULL, err) < 0 ? -1 : ctx->remote->remove (ctx->remote->arg, path, recursive, err);
  m = fs_request (ctx, SBX_PRIV_FS_REMOVE, path, NULL, err);
  if (m)
    m->flags = recursive ? SBX_PRIV_FS_RECURSIVE : 0;
  return fs_simple (m, ctx, err);
}

int
sbx_host_fs_upload_begin (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode,
                          int parents, struct sbx_fs_upload *up, sbx_error_t **err)
{
  return sbx_host_fs_upload_begin_meta (ctx, path, mode, parents, NULL, up, err);
}

int
sbx_host_fs_upload_begin_meta (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode,
                               int parents, const struct sbx_fs_meta *meta,
                               struct sbx_fs_upload *up, sbx_error_t **err)
{
  struct sbx_priv_fs *m;
  struct call cl = {0};

  memset (up, 0, sizeof *up);
  up->dir = up->fd = up->pipe = -1;
  up->ctx = *ctx;
  if (meta != NULL && meta->count > 0 && sbx_fs_meta_check (meta, err) < 0)
    return -1;
  if (ctx->remote)
    {
      /* The guest agent's wire (vm/fs_wire.h) carries no metadata yet:
         refused, never dropped. */
      if (meta != NULL && meta->count > 0)
        return sbx_err (err, SBX_E_NOT_IMPLEMENTED,
                        "file metadata is not supported in VM sandboxes (isolation vm) yet");
      return fs_paths_fit (path, NULL, err) < 0
                 ? -1
                 : ctx->remote->upload_begin (ctx->remote->arg, path, mode, parents,
                                              &up->remote_job, err);
    }
  m = fs_request (ctx, SBX_PRIV_FS_UPLOAD, path, NULL, err);
  if (m == NULL)
    return -1;
  if (meta != NULL)
    m->meta = *meta;
  m->mode = mode;
  m->flags = parents ? SBX_PRIV_FS_PARENTS : 0;
  if (fs_call (m, ctx, &cl, err) < 0)
    return -1;
  if (cl.nfds != 1 || cl.reply.value == 0)
    {
      close_fds (&cl);
      return proto_error (err);
    }
  up->pipe = cl.fds[0];
  up->token = cl.reply.value;
  return 0;
}

int
sbx_host_fs_upload_write (struct sbx_fs_upload *up, const void *data, size_t len,
                          sbx_error_t **err)
{
  const char *p = data;

  if (up->ctx.remote)
    {
      if (up->remote_job == NULL)
        return sbx_err (err, SBX_E_SYSTEM, "upload interrupted");
      if (up->ctx.remote->upload_write (up->remote_job, data, len, err) < 0)
        return -1;
      up->written += len;
      return 0;
    }
  while (len > 0)
    {
      ssize_t w = write (up->pipe, p, len);
      if (w < 0)
        {
          if (errno == EINTR)
            continue;
          /* The copy in the sandbox stopped reading (disk full, killed):
             ending the upload tells why. */
          if (errno == EPIPE)
            {
              struct sbx_priv_upload_end m = {{SBX_PRIV_UPLOAD_END, sizeof m}, up->token, 1, 0};
              struct call cl = {0};
              close_and_reset (&up->pipe);
              cl.copier = up->ctx.copier;
              if (call (&m, sizeof m, &cl, err) < 0)
                return -1;
              close_fds (&cl);
              up->token = 0;
              return sbx_err (err, SBX_E_SYSTEM, "upload interrupted");
            }
          return sbx_err_sys (err, errno, "write upload");
        }
      p += w;
      len -= (size_t) w;
      up->written += (uint64_t) w;
    }
  return 0;
}

static int
upload_end (struct sbx_fs_upload *up, int commit, sbx_error_t **err)
{
  struct sbx_priv_upload_end m = {{SBX_PRIV_UPLOAD_END, sizeof m}, up->token, (uint32_t) commit, 0};
  struct call cl = {0};
  int rc;

  if (up->ctx.remote)
    {
      void *job = up->remote_job;
      up->remote_job = NULL;
      return job ? up->ctx.remote->upload_end (job, commit, err) : 0;
    }
  /* Our end first: the copy in the sandbox sees the end of the body. */
  close_and_reset (&up->pipe);
  if (up->token == 0)
    return 0;
  up->token = 0;
  cl.copier = up->ctx.copier;
  rc = call (&m, sizeof m, &cl, err);
  close_fds (&cl);
  return rc;
}

int
sbx_host_fs_upload_commit (struct sbx_fs_upload *up, sbx_error_t **err)
{
  if (up->token == 0 && up->remote_job == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "upload interrupted");
  return upload_end (up, 1, err);
}

void
sbx_host_fs_upload_abort (struct sbx_fs_upload *up)
{
  upload_end (up, 0, NULL);
}

/* ---- templates --------------------------------------------------------- */

static int
template_call (uint32_t op, const char *name, const char *owner, uint32_t format, int fd,
               uint64_t max_bytes, sbx_error_t **err)
{
  struct sbx_priv_template m;
  struct call cl = {0};
  int rc;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_TEMPLATE;
  m.hdr.len = sizeof m;
  m.tmpl_op = op;
  m.format = format;
  m.max_bytes = max_bytes;
  if (strlen (name) >= sizeof m.name || strlen (owner) >= sizeof m.owner)
    return sbx_err (err, SBX_E_INVALID, "template name or owner too long");
  snprintf (m.name, sizeof m.name, "%s", name);
  snprintf (m.owner, sizeof m.owner, "%s", owner);
  cl.send_fd = fd >= 0;
  cl.req_fd = fd;
  rc = call (&m, sizeof m, &cl, err);
  close_fds (&cl);
  return rc;
}

int
sbx_host_template_build (int fd, const char *name, const char *owner, uint32_t format,
                         uint64_t max_bytes, sbx_error_t **err)
{
  return template_call (SBX_PRIV_TEMPLATE_BUILD, name, owner, format, fd, max_bytes, err);
}

int
sbx_host_template_remove (const char *name, sbx_error_t **err)
{
  return template_call (SBX_PRIV_TEMPLATE_REMOVE, name, "", 0, -1, 0, err);
}

int
sbx_host_template_cache (int prune, uint64_t *entries, uint64_t *bytes, sbx_error_t **err)
{
  struct sbx_priv_template m;
  struct sbx_priv_cache out;
  struct call cl = {0};

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_TEMPLATE;
  m.hdr.len = sizeof m;
  m.tmpl_op = prune ? SBX_PRIV_TEMPLATE_CACHE_PRUNE : SBX_PRIV_TEMPLATE_CACHE;
  cl.req_fd = -1;
  if (call (&m, sizeof m, &cl, err) < 0)
    {
      close_fds (&cl);
      return -1;
    }
  close_fds (&cl);
  if (cl.reply.payload != sizeof out)
    return sbx_err (err, SBX_E_SYSTEM, "the privileged process answered the cache request badly");
  memcpy (&out, cl.payload, sizeof out);
  *entries = out.entries;
  *bytes = out.bytes;
  return 0;
}
