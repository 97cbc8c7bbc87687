/* sbx: the privileged parent's side of privilege separation (see
 * priv/proto.h). It owns the isolation engine: the zygote, cgroups, id
 * maps, sandboxes' roots, and the files API's path resolution. Each
 * channel is served by its own thread; a malformed message ends that
 * channel. The parent keeps its own table of the sandboxes it built or
 * adopted: every request names a slot, and only a slot in that table, of
 * the current front end, is acted on.
 */
#include "priv/server.h"
#include "priv/audit_anchor.h"
#include "priv/seal_key.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

#include "core/template.h"
#include "iso/tmpl.h"
#include "iso/copy.h"
#include "iso/kernel.h"
#include "iso/snapstore.h"
#include "iso/vm.h"
#include "iso/vm_image.h"
#include "iso/wire.h"
#include "priv/proto.h"
#include "util/cleanup.h"
#include "util/landlock.h"
#include "util/log.h"

#define MAX_UPLOADS 1024
#define LIST_MAX 10000
#define DEPTH_MAX 16
#define HOSTNAME "sandbox"
#define USER_ID 1000

struct slot
{
  int in_use;
  int dying;
  int refs; /* requests using the box right now */
  unsigned gen; /* the front end it belongs to */
  char id[SBX_ID_LEN + 1];
  char tmpl[32]; /* a stored template it mounts ("" for built-ins): not removable meanwhile */
  struct sbx_iso_box box; /* ctl is the front end's: closed here */
};

struct upload
{
  uint64_t token; /* 0: free */
  uint32_t slot;
  unsigned gen;
  struct sbx_fs_upload up;
};

#define SBX_PRIV_CHANNEL_STACK (1024 * 1024)

/* One per channel thread: copies call back on the channel being served. */
struct chan
{
  int fd;
  int broken;
  struct sbx_fs_copier copier;
};

static struct
{
  pthread_mutex_t lock;
  pthread_cond_t cond;
  const struct sbx_config *cfg;
  struct sbx_engine *eng;
  struct slot *slots;
  unsigned nslots;
  unsigned gen;
  struct upload uploads[MAX_UPLOADS];
  int snapstore; /* STATE/snapshots, -1 when unavailable */
  uint8_t seal_key[32]; /* priv/seal_key.h, for the front end at HELLO */
  uint64_t anchor_remade; /* priv/audit_anchor.h: told to the first front end */
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .snapstore = -1};

/* ---- replies ----------------------------------------------------------- */

static int
send_reply (struct chan *c, const sbx_error_t *e, uint64_t value, const void *payload,
            size_t payload_len, const int *fds, int nfds)
{
  unsigned char buf[sizeof (struct sbx_priv_reply) + SBX_PRIV_REPLY_PAYLOAD_MAX];
  struct sbx_priv_reply *r = (struct sbx_priv_reply *) buf;

  if (payload_len > sizeof buf - sizeof *r)
    return -1;
  memset (buf, 0, sizeof buf);
  r->hdr.op = SBX_PRIV_REPLY;
  r->hdr.len = (uint32_t) (sizeof *r + payload_len);
  r->value = value;
  r->payload = (uint32_t) payload_len;
  if (e)
    {
      r->status = -1;
      r->kind = e->kind;
      r->sys_errno = e->sys_errno;
      snprintf (r->msg, sizeof r->msg, "%s", e->msg);
    }
  if (payload_len)
    memcpy (r + 1, payload, payload_len);
  if (sbx__sendmsg (c->fd, buf, r->hdr.len, fds, nfds, 0) < 0)
    {
      c->broken = 1;
      return -1;
    }
  return 0;
}

/* ---- the copier: the front end runs copies through the sandbox's init -- */

static int
pump_answer (struct chan *c, uint64_t *job, sbx_error_t **err)
{
  struct sbx_priv_pump_done d;
  int fds[SBX_PRIV_MAX_FDS], nfds = 0;
  ssize_t n = sbx__iso_recv (c->fd, &d, sizeof d, fds, SBX_PRIV_MAX_FDS, &nfds, 0);

  if (n != (ssize_t) sizeof d || nfds != 0 || d.hdr.op != SBX_PRIV_PUMP_DONE
      || d.hdr.len != sizeof d || memchr (d.msg, '\0', sizeof d.msg) == NULL)
    {
      while (nfds > 0)
        close (fds[--nfds]);
      c->broken = 1;
      return sbx_err (err, SBX_E_SYSTEM, "the front end broke the protocol");
    }
  if (d.status < 0)
    {
      enum sbx_error_kind k = d.kind >= SBX_E_INVALID && d.kind <= SBX_E_LAST
                                  ? (enum sbx_error_kind) d.kind
                                  : SBX_E_SYSTEM;
      return sbx_err (err, k, "%s", d.msg);
    }
  if (job)
    *job = d.job;
  return 0;
}

static int
remote_start (void *arg, int in_fd, int out_fd, void **job, sbx_error_t **err)
{
  struct chan *c = arg;
  struct sbx_priv_pump m;
  int fds[2] = {in_fd, out_fd};
  uint64_t j = 0;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_PUMP_START;
  m.hdr.len = sizeof m;
  if (sbx__sendmsg (c->fd, &m, sizeof m, fds, 2, 0) < 0)
    {
      c->broken = 1;
      return sbx_err (err, SBX_E_UNAVAILABLE, "the front end went away");
    }
  if (pump_answer (c, &j, err) < 0)
    return -1;
  if (j == 0)
    {
      c->broken = 1;
      return sbx_err (err, SBX_E_SYSTEM, "the front end broke the protocol");
    }
  *job = (void *) (uintptr_t) j;
  return 0;
}

static int
remote_finish (void *arg, void *job, sbx_error_t **err)
{
  struct chan *c = arg;
  struct sbx_priv_pump m;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_PUMP_FINISH;
  m.hdr.len = sizeof m;
  m.job = (uint64_t) (uintptr_t) job;
  if (sbx__sendmsg (c->fd, &m, sizeof m, NULL, 0, 0) < 0)
    {
      c->broken = 1;
      return sbx_err (err, SBX_E_UNAVAILABLE, "the front end went away");
    }
  return pump_answer (c, NULL, err);
}

/* ---- the slot table ---------------------------------------------------- */

/* Take a reference on a live slot of the current front end. */
static struct slot *
slot_get (uint32_t slot, sbx_error_t **err)
{
  struct slot *s;

  pthread_mutex_lock (&P.lock);
  if (slot >= P.nslots || !P.slots[slot].in_use || P.slots[slot].dying
      || P.slots[slot].gen != P.gen)
    {
      pthread_mutex_unlock (&P.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "no sandbox in slot %u", (unsigned) slot), NULL;
    }
  s = &P.slots[slot];
  s->refs++;
  pthread_mutex_unlock (&P.lock);
  return s;
}

static void
slot_put (struct slot *s)
{
  pthread_mutex_lock (&P.lock);
  if (--s->refs == 0)
    pthread_cond_broadcast (&P.cond);
  pthread_mutex_unlock (&P.lock);
}

static void
drop_uploads_locked (uint32_t slot, int all)
{
  /* Not a reserved entry (UINT64_MAX): a channel thread is filling it in
     without the lock, holding a reference on its slot (so that slot is
     not destroyed meanwhile); it checks the front end's generation when
     it publishes the token. Aborting it here closed its files under that
     thread: a concurrent upload's commit got EBADF from fchmod (an ASan
     CI run), and the numbers could have been reused by another open. */
  for (size_t i = 0; i < MAX_UPLOADS; i++)
    if (P.uploads[i].token && P.uploads[i].token != UINT64_MAX
        && (all || P.uploads[i].slot == slot))
      {
        /* No copier any more: the front end's pump ends with its pipe. */
        P.uploads[i].up.ctx.copier = NULL;
        P.uploads[i].up.job = NULL;
        sbx_fs_upload_abort (&P.uploads[i].up);
        P.uploads[i].token = 0;
      }
}

/* Kill the sandbox of a slot and forget it (the lock is not held). */
static void
slot_destroy (uint32_t slot)
{
  struct slot *s = &P.slots[slot];
  sbx_error_t *err = NULL;

  pthread_mutex_lock (&P.lock);
  s->dying = 1;
  while (s->refs > 0)
    pthread_cond_wait (&P.cond, &P.lock);
  drop_uploads_locked (slot, 0);
  pthread_mutex_unlock (&P.lock);
  if (sbx_iso_destroy (P.eng, &s->box, &err) < 0)
    {
      sbx_warn ("destroying the sandbox in slot %u: %s", (unsigned) slot, err->msg);
      sbx_error_free (err);
    }
  pthread_mutex_lock (&P.lock);
  memset (s, 0, sizeof *s);
  sbx_iso_box_init (&s->box);
  pthread_mutex_unlock (&P.lock);
}

static uid_t
slot_uid_base (uint32_t slot)
{
  return P.cfg->uid_base + (uid_t) slot * SBX_IDS_PER_SANDBOX;
}

/* ---- requests ---------------------------------------------------------- */

static int
check_limits (uint64_t memory, uint32_t cpu, uint32_t pids, sbx_error_t **err)
{
  const struct sbx_config *c = P.cfg;

  if (memory < c->min.memory_bytes || memory > c->max.memory_bytes || cpu < c->min.cpu_milli
      || cpu > c->max.cpu_milli || pids < c->min.pids || pids > c->max.pids)
    return sbx_err (err, SBX_E_INVALID, "limits out of the configured range");
  return 0;
}

static int
check_disk (uint64_t bytes, sbx_error_t **err)
{
  if (bytes < P.cfg->min.disk_bytes / 2 || bytes > P.cfg->max.disk_bytes)
    return sbx_err (err, SBX_E_INVALID, "disk size out of the configured range");
  return 0;
}

static void
handle_create (struct chan *c, const struct sbx_priv_create *m)
{
  const struct sbx_template *tmpl;
  struct sbx_iso_spec spec;
  struct sbx_iso_box box;
  struct sbx_priv_box out;
  static const struct sbx_plan empty_plan = {SBX_BUF_INIT, 0};
  sbx_error_t *err = NULL;
  int fds[2], stored;

  if (memchr (m->id, '\0', sizeof m->id) == NULL
      || memchr (m->template_name, '\0', sizeof m->template_name) == NULL || m->background > 1
      || m->isolation > SBX_ISOLATION_VM || m->reserved != 0
      || memchr (m->snapshot_tenant, '\0', sizeof m->snapshot_tenant) == NULL
      || memchr (m->snapshot, '\0', sizeof m->snapshot) == NULL)
    {
      c->broken = 1;
      return;
    }
  tmpl = sbx_template_find (m->template_name);
  stored = tmpl == NULL && sbx_tmpl_exists (m->template_name);
  if (!sbx_id_valid (m->id))
    sbx_err (&err, SBX_E_INVALID, "not a sandbox id");
  else if (tmpl == NULL && !stored)
    sbx_err (&err, SBX_E_INVALID, "unknown template");
  else if (m->snapshot[0] != '\0'
           && (!sbx_snapstore_name_valid (m->snapshot) || m->snapshot_tenant[0] == '\0'))
    sbx_err (&err, SBX_E_INVALID, "bad snapshot");
  else if (check_limits (m->memory_bytes, m->cpu_milli, m->pids, &err) == 0)
    check_disk (m->disk_bytes, &err);
  if (err == NULL)
    {
      pthread_mutex_lock (&P.lock);
      if (m->slot >= P.nslots || P.slots[m->slot].in_use)
        sbx_err (&err, SBX_E_CONFLICT, "slot %u is not free", (unsigned) m->slot);
      for (unsigned i = 0; err == NULL && i < P.nslots; i++)
        if (P.slots[i].in_use && strcmp (P.slots[i].id, m->id) == 0)
          sbx_err (&err, SBX_E_CONFLICT, "sandbox id in use");
      if (err == NULL)
        {
          /* Reserved: a concurrent create of the same slot fails above. */
          P.slots[m->slot].in_use = 1;
          P.slots[m->slot].dying = 1;
          P.slots[m->slot].gen = P.gen;
          snprintf (P.slots[m->slot].id, sizeof P.slots[m->slot].id, "%s", m->id);
          snprintf (P.slots[m->slot].tmpl, sizeof P.slots[m->slot].tmpl, "%s",
                    stored ? m->template_name : "");
        }
      pthread_mutex_unlock (&P.lock);
    }
  if (err)
    {
      send_reply (c, err, 0, NULL, 0, NULL, 0);
      sbx_error_free (err);
      return;
    }
  memset (&spec, 0, sizeof spec);
  spec.name = m->id;
  spec.uid_base = slot_uid_base (m->slot);
  spec.limits.memory_bytes = m->memory_bytes;
  spec.limits.cpu_milli = m->cpu_milli;
  spec.limits.pids = m->pids;
  spec.disk_bytes = m->disk_bytes;
  spec.hostname = HOSTNAME;
  if (stored)
    {
      /* The template's layers as one read-only overlay; init makes it "/". */
      spec.plan = &empty_plan;
      spec.root_mnt = sbx_tmpl_mount (m->template_name, &err);
    }
  else
    {
      spec.plan = &tmpl->plan;
      spec.root_mnt = -1;
    }
  spec.user_uid = USER_ID;
  spec.user_gid = USER_ID;
  spec.background = (int) m->background;
  spec.isolation = (enum sbx_isolation) m->isolation;
  spec.snapshot_store = P.snapstore;
  if (m->snapshot[0] != '\0')
    {
      spec.snapshot_tenant = m->snapshot_tenant;
      spec.snapshot = m->snapshot;
    }
  if ((spec.root_mnt < 0 && stored) || sbx_iso_create (P.eng, &spec, &box, &err) < 0)
    {
      if (spec.root_mnt >= 0)
        close (spec.root_mnt);
      pthread_mutex_lock (&P.lock);
      memset (&P.slots[m->slot], 0, sizeof P.slots[m->slot]);
      sbx_iso_box_init (&P.slots[m->slot].box);
      pthread_mutex_unlock (&P.lock);
      send_reply (c, err, 0, NULL, 0, NULL, 0);
      sbx_error_free (err);
      return;
    }
  if (spec.root_mnt >= 0)
    close (spec.root_mnt); /* init holds its own copy now */
  memset (&out, 0, sizeof out);
  out.pid = box.pid;
  out.uid_base = box.uid_base;
  out.landlock_abi = box.landlock_abi;
  fds[0] = box.ctl;
  fds[1] = box.pidfd;
  /* Live before the front end hears of it: once it has the reply it may
     destroy the sandbox at once (on another channel, if it could not use
     it), which must not find a reserved slot and leave it to us. */
  pthread_mutex_lock (&P.lock);
  P.slots[m->slot].box = box;
  P.slots[m->slot].box.ctl = -1; /* the control socket is the front end's */
  P.slots[m->slot].dying = 0;
  pthread_mutex_unlock (&P.lock);
  send_reply (c, NULL, 0, &out, sizeof out, fds, 2);
  close_and_reset (&box.ctl);
}

static void
handle_adopt (struct chan *c, const struct sbx_priv_adopt *m)
{
  struct sbx_iso_box box;
  struct sbx_priv_box out;
  sbx_error_t *err = NULL;
  int fds[2], stale = 0;

  if (memchr (m->id, '\0', sizeof m->id) == NULL)
    {
      c->broken = 1;
      return;
    }
  if (!sbx_id_valid (m->id) || m->init_pid <= 1 || m->slot >= P.nslots)
    {
      sbx_err (&err, SBX_E_INVALID, "not a sandbox record");
      goto fail;
    }
  pthread_mutex_lock (&P.lock);
  if (P.slots[m->slot].in_use)
    {
      /* Ours from a front end that died: the same sandbox again, or a
         record that lies. */
      if (P.slots[m->slot].gen == P.gen || strcmp (P.slots[m->slot].id, m->id) != 0)
        sbx_err (&err, SBX_E_CONFLICT, "slot %u holds another sandbox", (unsigned) m->slot);
      else
        stale = 1;
    }
  pthread_mutex_unlock (&P.lock);
  if (err)
    goto fail;
  if (stale)
    {
      /* Let go of the old fds, not of the sandbox. */
      struct slot *s = &P.slots[m->slot];
      pthread_mutex_lock (&P.lock);
      while (s->refs > 0)
        pthread_cond_wait (&P.cond, &P.lock);
      close_and_reset (&s->box.pidfd);
      close_and_reset (&s->box.root);
      close_and_reset (&s->box.disk);
      sbx_cgroup_close (&s->box.cg);
      memset (s, 0, sizeof *s);
      sbx_iso_box_init (&s->box);
      pthread_mutex_unlock (&P.lock);
    }
  if (sbx_iso_adopt (P.eng, m->id, slot_uid_base (m->slot), m->init_pid, &box, &err) < 0)
    goto fail;
  memset (&out, 0, sizeof out);
  out.pid = box.pid;
  out.uid_base = box.uid_base;
  out.landlock_abi = box.landlock_abi;
  fds[0] = box.ctl;
  fds[1] = box.pidfd;
  pthread_mutex_lock (&P.lock);
  P.slots[m->slot].in_use = 1;
  P.slots[m->slot].gen = P.gen;
  snprintf (P.slots[m->slot].id, sizeof P.slots[m->slot].id, "%s", m->id);
  P.slots[m->slot].box = box;
  P.slots[m->slot].box.ctl = -1;
  pthread_mutex_unlock (&P.lock);
  send_reply (c, NULL, 0, &out, sizeof out, fds, 2);
  close_and_reset (&box.ctl);
  return;
fail:
  send_reply (c, err, 0, NULL, 0, NULL, 0);
  sbx_error_free (err);
}

static void
kill_foreign_cgroup (const char *name, void *arg)
{
  struct sbx_cgroup cg;
  sbx_error_t *err = NULL;
  unsigned i;

  (void) arg;
  pthread_mutex_lock (&P.lock);
  for (i = 0; i < P.nslots; i++)
    if (P.slots[i].in_use && strcmp (P.slots[i].id, name) == 0)
      break;
  pthread_mutex_unlock (&P.lock);
  if (i < P.nslots)
    return;
  /* A pool sandbox, a half-built one, or one whose init is gone. */
  if (sbx_cgroup_open (&P.eng->cgroups, name, &cg, &err) < 0)
    {
      int partial = err->sys_errno == ENOENT;
      sbx_error_free (err);
      err = NULL;
      if (!partial)
        {
          sbx_warn ("leftover cgroup %s: cannot open it", name);
          return;
        }
      /* Not in every hierarchy: a daemon died between the mkdirs of a
         sandbox (nothing ran in it yet) or between its rmdirs (nothing runs
         in it any more). rmdir what is left by name; a directory that still
         holds a process refuses (EBUSY), so nothing alive is touched. */
      memset (&cg, 0, sizeof cg);
      for (int c = 0; c < SBX_CG_NCTRL; c++)
        cg.dir[c] = -1;
      snprintf (cg.name, sizeof cg.name, "%s", name);
      sbx_info ("removing partial leftover sandbox cgroup %s", name);
      if (sbx_cgroup_destroy (&P.eng->cgroups, &cg, &err) < 0)
        {
          sbx_warn ("leftover cgroup %s: %s", name, err->msg);
          sbx_error_free (err);
        }
      return;
    }
  sbx_info ("removing leftover sandbox cgroup %s", name);
  if (sbx_cgroup_kill (&P.eng->cgroups, &cg, &err) < 0
      || sbx_cgroup_destroy (&P.eng->cgroups, &cg, &err) < 0)
    {
      sbx_warn ("leftover cgroup %s: %s", name, err->msg);
      sbx_error_free (err);
    }
  sbx_cgroup_close (&cg);
}

/* ---- VM root images (iso/vm_image_prune.c) ------------------------------ */

/* Every VM's image. A slot reserved or being destroyed (a create may hold
   an image it opened without saying which yet) or a VM without a known
   image: cannot tell, prune another time. */
static int
live_images (struct sbx_vm_keys *keys)
{
  int busy = 0;

  pthread_mutex_lock (&P.lock);
  for (unsigned i = 0; !busy && i < P.nslots; i++)
    if (P.slots[i].in_use)
      {
        busy = P.slots[i].dying || (P.slots[i].box.qmp >= 0 && P.slots[i].box.vm_image[0] == '\0');
        sbx_vm_keys_keep (keys, P.slots[i].box.vm_image);
      }
  pthread_mutex_unlock (&P.lock);
  return busy;
}

/* At start (once the front end has adopted its sandboxes) and after a
   snapshot's or a template's removal: what they needed may be unused now. */
static void
prune_images (const char *why)
{
  const struct sbx_template *code = sbx_template_find (SBX_CODE_TEMPLATE);
  struct sbx_vm_prune_result r;
  struct timespec t0, t1;
  sbx_error_t *e = NULL;
  long long ms;
  int rc;

  clock_gettime (CLOCK_MONOTONIC, &t0);
  rc = sbx_vm_image_prune (P.snapstore, code ? &code->plan : NULL, live_images, &r, &e);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  ms = (t1.tv_sec - t0.tv_sec) * 1000LL + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  if (rc < 0)
    {
      sbx_warn ("VM root images not pruned (%s): %s", why, e->msg);
      sbx_error_free (e);
    }
  else if (r.deferred)
    sbx_debug ("VM root images not pruned (%s): a sandbox is being made or destroyed", why);
  else if (r.removed > 0)
    sbx_info ("pruned VM root images (%s): %u removed, %u kept, %llu KiB freed, in %lld ms", why,
              r.removed, r.kept, (unsigned long long) (r.freed >> 10), ms);
}

static void
handle_adopt_done (struct chan *c)
{
  /* What an earlier front end had and this one did not take back. */
  for (unsigned i = 0; i < P.nslots; i++)
    {
      int old;
      pthread_mutex_lock (&P.lock);
      old = P.slots[i].in_use && !P.slots[i].dying && P.slots[i].gen != P.gen;
      pthread_mutex_unlock (&P.lock);
      if (old)
        slot_destroy (i);
    }
  sbx_cgroup_list (&P.eng->cgroups, kill_foreign_cgroup, NULL, NULL);
  /* Before the reply: the daemon serves with its cache already pruned. */
  prune_images ("start");
  send_reply (c, NULL, 0, NULL, 0, NULL, 0);
}

/* ---- files ------------------------------------------------------------- */

struct list_ctx
{
  struct chan *c;
};

static int
send_entry (const struct sbx_fs_entry *e, void *arg)
{
  struct list_ctx *lc = arg;
  struct sbx_priv_entry m;

  memset (&m, 0, sizeof m);
  m.hdr.op = SBX_PRIV_LIST_ENTRY;
  m.hdr.len = sizeof m;
  m.entry = *e;
  if (sbx__sendmsg (lc->c->fd, &m, sizeof m, NULL, 0, 0) < 0)
    {
      lc->c->broken = 1;
      return -1;
    }
  return 0;
}

static struct upload *
upload_slot_locked (void)
{
  for (size_t i = 0; i < MAX_UPLOADS; i++)
    if (P.uploads[i].token == 0)
      return &P.uploads[i];
  return NULL;
}

static void
handle_fs (struct chan *c, const struct sbx_priv_fs *m)
{
  struct sbx_fs_ctx ctx;
  struct slot *s;
  sbx_error_t *err = NULL;
  uint64_t value = 0;
  int fd = -1;

  if (memchr (m->path, '\0', sizeof m->path) == NULL
      || memchr (m->path2, '\0', sizeof m->path2) == NULL
      || !((m->uid == 0 && m->gid == 0) || (m->uid == USER_ID && m->gid == USER_ID))
      || m->mode > 07777
      || (m->flags & ~(uint32_t) (SBX_PRIV_FS_PARENTS | SBX_PRIV_FS_RECURSIVE | SBX_PRIV_FS_OVERWRITE))
      || m->fs_op < SBX_PRIV_FS_OPEN_READ || m->fs_op > SBX_PRIV_FS_UPLOAD
      || (m->fs_op == SBX_PRIV_FS_LIST
          && (m->depth < 1 || m->depth > DEPTH_MAX || m->max_entries > LIST_MAX))
      /* The front end checked the metadata; we do again, it is the one
         parsing hostile headers. */
      || (m->fs_op != SBX_PRIV_FS_UPLOAD && (m->meta.len != 0 || m->meta.count != 0))
      || sbx_fs_meta_check (&m->meta, NULL) < 0)
    {
      c->broken = 1;
      return;
    }
  s = slot_get (m->slot, &err);
  if (s == NULL)
    goto reply;
  memset (&ctx, 0, sizeof ctx);
  ctx.root = s->box.root;
  ctx.uid_base = s->box.uid_base;
  ctx.uid = m->uid;
  ctx.gid = m->gid;
  ctx.copier = &c->copier;
  switch ((enum sbx_priv_fs_op) m->fs_op)
    {
    case SBX_PRIV_FS_OPEN_READ:
      fd = sbx_fs_open_read (&ctx, m->path, &value, &err);
      break;
    case SBX_PRIV_FS_STAT:
      {
        struct sbx_fs_entry e;
        if (sbx_fs_stat (&ctx, m->path, &e, &err) == 0)
          send_entry (&e, &(struct list_ctx){c});
        break;
      }
    case SBX_PRIV_FS_LIST:
      {
        int truncated = 0;
        if (sbx_fs_list (&ctx, m->path, (int) m->depth, m->max_entries, send_entry,
                         &(struct list_ctx){c}, &truncated, &err)
            == 0)
          value = (uint64_t) truncated;
        break;
      }
    case SBX_PRIV_FS_MKDIR:
      sbx_fs_mkdir (&ctx, m->path, m->mode, (m->flags & SBX_PRIV_FS_PARENTS) != 0, &err);
      break;
    case SBX_PRIV_FS_MOVE:
      sbx_fs_move (&ctx, m->path, m->path2, (m->flags & SBX_PRIV_FS_OVERWRITE) != 0, &err);
      break;
    case SBX_PRIV_FS_REMOVE:
      sbx_fs_remove (&ctx, m->path, (m->flags & SBX_PRIV_FS_RECURSIVE) != 0, &err);
      break;
    case SBX_PRIV_FS_UPLOAD:
      {
        struct upload *u;
        pthread_mutex_lock (&P.lock);
        u = upload_slot_locked ();
        if (u)
          {
            u->token = UINT64_MAX; /* reserved: drop_uploads_locked leaves it */
            u->slot = m->slot;
            u->gen = P.gen;
          }
        pthread_mutex_unlock (&P.lock);
        if (u == NULL)
          {
            sbx_err (&err, SBX_E_LIMIT, "too many uploads in progress");
            break;
          }
        if (sbx_fs_upload_begin_meta (&ctx, m->path, m->mode,
                                      (m->flags & SBX_PRIV_FS_PARENTS) != 0, &m->meta, &u->up,
                                      &err)
            < 0)
          {
            pthread_mutex_lock (&P.lock);
            u->token = 0;
            pthread_mutex_unlock (&P.lock);
            break;
          }
        /* The body goes straight from the front end into the copy. */
        fd = u->up.pipe;
        u->up.pipe = -1;
        pthread_mutex_lock (&P.lock);
        if (u->gen != P.gen)
          {
            /* Its front end went away meanwhile (the uploads it had were
               dropped): this one would be nobody's. */
            pthread_mutex_unlock (&P.lock);
            u->up.ctx.copier = NULL;
            u->up.job = NULL;
            sbx_fs_upload_abort (&u->up);
            close_and_reset (&fd);
            pthread_mutex_lock (&P.lock);
            u->token = 0;
            pthread_mutex_unlock (&P.lock);
            sbx_err (&err, SBX_E_UNAVAILABLE, "the front end went away");
            break;
          }
        do
          sbx_random_bytes (&value, sizeof value);
        while (value == 0 || value == UINT64_MAX);
        u->token = value;
        pthread_mutex_unlock (&P.lock);
        break;
      }
    default:
      break;
    }
  slot_put (s);
reply:
  if (!c->broken)
    send_reply (c, err, err ? 0 : value, NULL, 0, &fd, err == NULL && fd >= 0 ? 1 : 0);
  close_and_reset (&fd);
  sbx_error_free (err);
}

static void
handle_upload_end (struct chan *c, const struct sbx_priv_upload_end *m)
{
  struct upload *u = NULL;
  struct sbx_fs_upload up;
  sbx_error_t *err = NULL;

  if (m->commit > 1)
    {
      c->broken = 1;
      return;
    }
  pthread_mutex_lock (&P.lock);
  for (size_t i = 0; i < MAX_UPLOADS; i++)
    if (m->token != 0 && m->token != UINT64_MAX && P.uploads[i].token == m->token
        && P.uploads[i].gen == P.gen)
      u = &P.uploads[i];
  if (u)
    {
      up = u->up;
      u->token = 0;
    }
  pthread_mutex_unlock (&P.lock);
  if (u == NULL)
    {
      sbx_err (&err, SBX_E_NOT_FOUND, "no such upload");
      send_reply (c, err, 0, NULL, 0, NULL, 0);
      sbx_error_free (err);
      return;
    }
  /* The copy's end is reported on this channel. */
  up.ctx.copier = &c->copier;
  if (m->commit)
    sbx_fs_upload_commit (&up, &err);
  else
    sbx_fs_upload_abort (&up);
  send_reply (c, err, 0, NULL, 0, NULL, 0);
  sbx_error_free (err);
}

/* ---- channels ---------------------------------------------------------- */

/* A slot (reserved or live) mounts it. Lock order: the store's, then P's. */
static int
template_in_use (const char *name)
{
  int used = 0;

  pthread_mutex_lock (&P.lock);
  for (unsigned i = 0; !used && i < P.nslots; i++)
    used = P.slots[i].in_use && strcmp (P.slots[i].tmpl, name) == 0;
  pthread_mutex_unlock (&P.lock);
  return used;
}

/* The recipe build cache: what it holds, or empty it (iso/tmpl_cache.c). */
static void
handle_template_cache (struct chan *c, int prune)
{
  sbx_error_t *err = NULL;
  struct sbx_tmpl_cache_usage u;
  struct sbx_priv_cache out;

  if (prune)
    {
      sbx_tmpl_cache_prune (sbx_tmpl_cache_dir (), &u, &err);
      if (err == NULL)
        sbx_info ("templates: the recipe cache pruned: %u entries, %llu bytes", u.entries,
                  (unsigned long long) u.bytes);
    }
  else
    sbx_tmpl_cache_usage (sbx_tmpl_cache_dir (), &u, &err);
  out.entries = u.entries;
  out.bytes = u.bytes;
  send_reply (c, err, 0, err ? NULL : &out, err ? 0 : sizeof out, NULL, 0);
  sbx_error_free (err);
}

/* Build (fd: the uploaded archive) or remove a stored template. */
static void
handle_template (struct chan *c, const struct sbx_priv_template *m, int fd)
{
  sbx_error_t *err = NULL;
  struct stat st;

  if (memchr (m->name, '\0', sizeof m->name) == NULL
      || memchr (m->owner, '\0', sizeof m->owner) == NULL
      || (m->tmpl_op == SBX_PRIV_TEMPLATE_BUILD) != (fd >= 0)
      || m->tmpl_op < SBX_PRIV_TEMPLATE_BUILD || m->tmpl_op > SBX_PRIV_TEMPLATE_CACHE_PRUNE)
    {
      c->broken = 1;
      return;
    }
  for (const char *p = m->owner; *p; p++)
    if ((unsigned char) *p < 0x21 || (unsigned char) *p > 0x7e)
      {
        c->broken = 1;
        return;
      }
  if (m->tmpl_op == SBX_PRIV_TEMPLATE_CACHE || m->tmpl_op == SBX_PRIV_TEMPLATE_CACHE_PRUNE)
    {
      handle_template_cache (c, m->tmpl_op == SBX_PRIV_TEMPLATE_CACHE_PRUNE);
      return;
    }
  if (!sbx_tmpl_name_ok (m->name))
    sbx_err (&err, SBX_E_INVALID, "template name `%s` is not valid", m->name);
  else if (m->tmpl_op == SBX_PRIV_TEMPLATE_BUILD)
    {
      struct sbx_tmpl_limits lim = {P.cfg->template_max_bytes, P.cfg->template_max_inodes};
      /* The owner's quota may leave less (core/tmpl_catalog.c). */
      if (m->max_bytes && m->max_bytes < lim.max_bytes)
        lim.max_bytes = m->max_bytes;
      if (m->format != SBX_TMPL_DIR && m->format != SBX_TMPL_OCI
          && !(m->format == SBX_TMPL_RECIPE && strcmp (m->owner, "*") == 0))
        sbx_err (&err, SBX_E_INVALID, "unknown template format");
      else if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
        sbx_err (&err, SBX_E_INVALID, "the template archive is not a file");
      else
        sbx_tmpl_build (fd, m->name, m->owner[0] ? m->owner : "default",
                        (enum sbx_tmpl_format) m->format, &lim, &err);
    }
  else
    {
      sbx_tmpl_remove (m->name, template_in_use, &err);
      if (err == NULL)
        prune_images ("a template removed");
    }
  send_reply (c, err, 0, NULL, 0, NULL, 0);
  sbx_error_free (err);
}

union request
{
  struct sbx_priv_hdr hdr;
  struct sbx_priv_hello hello;
  struct sbx_priv_slot slot;
  struct sbx_priv_create create;
  struct sbx_priv_limits limits;
  struct sbx_priv_disk disk;
  struct sbx_priv_adopt adopt;
  struct sbx_priv_fs fs;
  struct sbx_priv_upload_end upload_end;
  struct sbx_priv_template tmpl;
  struct sbx_priv_copy copy;
  struct sbx_priv_snapshot snapshot;
  struct sbx_priv_audit_head audit_head;
};

/* Fork: the copy of one sandbox's disk into another's (both ours; the
   source frozen, which sbx_iso_copy_disk checks). */
static void
handle_copy_disk (struct chan *c, const struct sbx_priv_copy *m)
{
  sbx_error_t *err = NULL;
  struct sbx_copy_result res;
  struct slot *src = NULL, *dst = NULL;

  memset (&res, 0, sizeof res);
  if (m->src_slot == m->dst_slot)
    sbx_err (&err, SBX_E_INVALID, "a sandbox cannot be copied onto itself");
  else if ((src = slot_get (m->src_slot, &err)) != NULL
           && (dst = slot_get (m->dst_slot, &err)) != NULL)
    sbx_iso_copy_disk (P.eng, &src->box, &dst->box, &res, &err);
  if (src)
    slot_put (src);
  if (dst)
    slot_put (dst);
  send_reply (c, err, 0, err ? NULL : &res, err ? 0 : sizeof res, NULL, 0);
  sbx_error_free (err);
}

/* Snapshots: the names are checked again (they become file names). */
static void
handle_snapshot (struct chan *c, const struct sbx_priv_snapshot *m)
{
  sbx_error_t *err = NULL;
  struct sbx_copy_result res;
  struct slot *s = NULL;
  int have_res = 0;

  memset (&res, 0, sizeof res);
  if (memchr (m->tenant, '\0', sizeof m->tenant) == NULL
      || memchr (m->name, '\0', sizeof m->name) == NULL || m->tenant[0] == '\0'
      || !sbx_snapstore_name_valid (m->name))
    sbx_err (&err, SBX_E_INVALID, "bad snapshot request");
  else if (m->snap_op == SBX_PRIV_SNAP_REMOVE)
    {
      /* Not after the daemon's own files (a fork's, a resumed hibernation's):
         their VMs run on and hold the image; keep forks and resumes fast. */
      if (sbx_snapstore_remove (P.snapstore, m->tenant, m->name, &err) == 0
          && m->name[0] != '.')
        prune_images ("a snapshot removed");
    }
  else if (m->snap_op != SBX_PRIV_SNAP_SAVE && m->snap_op != SBX_PRIV_SNAP_LOAD
           && m->snap_op != SBX_PRIV_SNAP_HIBERNATE)
    sbx_err (&err, SBX_E_INVALID, "bad snapshot request");
  else if ((s = slot_get (m->slot, &err)) != NULL)
    {
      have_res = 1;
      if (m->snap_op == SBX_PRIV_SNAP_HIBERNATE)
        sbx_vm_hibernate_save (&s->box, P.snapstore, m->tenant, m->name, &res.bytes, &err);
      else if (m->snap_op == SBX_PRIV_SNAP_SAVE && s->box.qmp >= 0)
        /* A VM: its memory, disk included, through QEMU's migration. */
        sbx_vm_snapshot_save (&s->box, P.snapstore, m->tenant, m->name, &res.bytes, &err);
      else if (m->snap_op == SBX_PRIV_SNAP_SAVE)
        sbx_iso_snapshot_save (P.eng, P.snapstore, &s->box, m->tenant, m->name, m->max_bytes,
                               &res, &err);
      else
        sbx_iso_snapshot_load (P.eng, P.snapstore, &s->box, m->tenant, m->name, &res, &err);
      slot_put (s);
    }
  send_reply (c, err, 0, have_res && !err ? &res : NULL, have_res && !err ? sizeof res : 0, NULL,
              0);
  sbx_error_free (err);
}

/* The exact size of each request type; 0 for unknown ones. */
static size_t
request_size (uint32_t op)
{
  switch (op)
    {
    case SBX_PRIV_CREATE:
      return sizeof (struct sbx_priv_create);
    case SBX_PRIV_DESTROY:
    case SBX_PRIV_FOREGROUND:
    case SBX_PRIV_STATS:
    case SBX_PRIV_INIT_STATUS:
    case SBX_PRIV_FREEZE:
    case SBX_PRIV_THAW:
      return sizeof (struct sbx_priv_slot);
    case SBX_PRIV_LIMITS:
      return sizeof (struct sbx_priv_limits);
    case SBX_PRIV_DISK:
      return sizeof (struct sbx_priv_disk);
    case SBX_PRIV_ADOPT:
      return sizeof (struct sbx_priv_adopt);
    case SBX_PRIV_ADOPT_DONE:
      return sizeof (struct sbx_priv_hdr);
    case SBX_PRIV_FS:
      return sizeof (struct sbx_priv_fs);
    case SBX_PRIV_UPLOAD_END:
      return sizeof (struct sbx_priv_upload_end);
    case SBX_PRIV_TEMPLATE:
      return sizeof (struct sbx_priv_template);
    case SBX_PRIV_COPY_DISK:
      return sizeof (struct sbx_priv_copy);
    case SBX_PRIV_SNAPSHOT:
      return sizeof (struct sbx_priv_snapshot);
    default:
      return 0;
    }
}

static void
handle_slot_op (struct chan *c, const union request *m)
{
  sbx_error_t *err = NULL;
  struct sbx_iso_stats st;
  struct slot *s;
  uint64_t value = 0;
  int have_stats = 0, wstatus = 0;

  s = slot_get (m->slot.slot, &err);
  if (s == NULL)
    goto reply;
  switch (m->hdr.op)
    {
    case SBX_PRIV_DESTROY:
      slot_put (s);
      s = NULL;
      slot_destroy (m->slot.slot);
      break;
    case SBX_PRIV_FOREGROUND:
      sbx_iso_set_foreground (P.eng, &s->box, &err);
      break;
    case SBX_PRIV_FREEZE:
    case SBX_PRIV_THAW:
      sbx_iso_freeze (P.eng, &s->box, m->hdr.op == SBX_PRIV_FREEZE, &err);
      break;
    case SBX_PRIV_STATS:
      have_stats = sbx_iso_stats (P.eng, &s->box, &st, &err) == 0;
      break;
    case SBX_PRIV_INIT_STATUS:
      /* Its exit may lag its control socket's close: wait a moment. */
      if (sbx_iso_init_status (&s->box, 1000, &wstatus) == 1)
        value = (1ULL << 32) | (uint32_t) wstatus;
      break;
    case SBX_PRIV_LIMITS:
      if (check_limits (m->limits.memory_bytes, m->limits.cpu_milli, m->limits.pids, &err) == 0)
        {
          struct sbx_cgroup_limits l = {m->limits.memory_bytes, m->limits.cpu_milli,
                                        m->limits.pids};
          sbx_iso_set_limits (P.eng, &s->box, &l, &err);
        }
      break;
    case SBX_PRIV_DISK:
      if (check_disk (m->disk.bytes, &err) == 0)
        sbx_iso_set_disk (&s->box, m->disk.bytes, &err);
      break;
    default:
      break;
    }
  if (s)
    slot_put (s);
reply:
  send_reply (c, err, value, have_stats ? &st : NULL, have_stats ? sizeof st : 0, NULL, 0);
  sbx_error_free (err);
}

static void *
serve_channel (void *arg)
{
  struct chan *c = arg;
  union request m;

  c->copier.start = remote_start;
  c->copier.finish = remote_finish;
  c->copier.arg = c;
  while (!c->broken)
    {
      int fds[SBX_PRIV_MAX_FDS], nfds = 0;
      ssize_t n = sbx__iso_recv (c->fd, &m, sizeof m, fds, SBX_PRIV_MAX_FDS, &nfds, 0);
      if (n <= 0)
        break;
      /* Requests carry no descriptors but a template build's archive;
         sizes are exact. */
      if ((size_t) n >= sizeof m.hdr && m.hdr.op == SBX_PRIV_TEMPLATE
          && (size_t) n == sizeof m.tmpl && nfds == 1
          && m.tmpl.tmpl_op == SBX_PRIV_TEMPLATE_BUILD && m.hdr.len == (size_t) n)
        {
          handle_template (c, &m.tmpl, fds[0]);
          close (fds[0]);
          continue;
        }
      if (nfds != 0 || (size_t) n < sizeof m.hdr || m.hdr.len != (size_t) n
          || request_size (m.hdr.op) != (size_t) n)
        {
          while (nfds > 0)
            close (fds[--nfds]);
          sbx_warn ("privsep: malformed request (op %u, %zd bytes): channel closed",
                    (unsigned) m.hdr.op, n);
          break;
        }
      switch (m.hdr.op)
        {
        case SBX_PRIV_CREATE:
          handle_create (c, &m.create);
          break;
        case SBX_PRIV_ADOPT:
          handle_adopt (c, &m.adopt);
          break;
        case SBX_PRIV_ADOPT_DONE:
          handle_adopt_done (c);
          break;
        case SBX_PRIV_FS:
          handle_fs (c, &m.fs);
          break;
        case SBX_PRIV_UPLOAD_END:
          handle_upload_end (c, &m.upload_end);
          break;
        case SBX_PRIV_TEMPLATE:
          handle_template (c, &m.tmpl, -1);
          break;
        case SBX_PRIV_COPY_DISK:
          handle_copy_disk (c, &m.copy);
          break;
        case SBX_PRIV_SNAPSHOT:
          handle_snapshot (c, &m.snapshot);
          break;
        default:
          handle_slot_op (c, &m);
          break;
        }
    }
  if (c->broken)
    sbx_warn ("privsep: channel closed after a protocol error");
  close (c->fd);
  free (c);
  return NULL;
}

static int
start_channel (int fd)
{
  struct chan *c = calloc (1, sizeof *c);
  pthread_attr_t attr;
  pthread_t t;
  int rc;

  if (c == NULL)
    {
      close (fd);
      errno = ENOMEM;
      return -1;
    }
  c->fd = fd;
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  /* A channel's work runs on this stack: a VM's root image build walks
     and copies trees, and a template build forks its extractor from here
     (the child keeps this stack). 256 KiB overflowed under ASan, whose
     frames are several times larger. */
  pthread_attr_setstacksize (&attr, SBX_PRIV_CHANNEL_STACK);
  rc = pthread_create (&t, &attr, serve_channel, c);
  pthread_attr_destroy (&attr);
  if (rc != 0)
    {
      close (fd);
      free (c);
      errno = rc;
      return -1;
    }
  return 0;
}

int
sbx_priv_server_init (const struct sbx_config *cfg, struct sbx_engine *eng, sbx_error_t **err)
{
  P.cfg = cfg;
  P.eng = eng;
  /* recipe builds' cgroups go beside the sandboxes' */
  sbx_tmpl_recipe_set_cgroups (&eng->cgroups);
  if (sbx_seal_key_ensure (cfg->state_dir, P.seal_key, err) < 0
      || sbx_audit_anchor_open (cfg->state_dir, &P.anchor_remade, err) < 0)
    return -1;
  {
    sbx_error_t *e = NULL;
    if (sbx_snapstore_open (cfg->state_dir, &P.snapstore, &e) < 0)
      {
        sbx_warn ("snapshots are unavailable: %s", e->msg);
        sbx_error_free (e);
      }
  }
  {
    sbx_error_t *e = NULL;
    sbx_vm_ca_init (cfg->state_dir);
    if (sbx_vm_image_init (cfg->state_dir, &e) < 0)
      {
        sbx_warn ("VM root images are unavailable: %s", e->msg);
        sbx_error_free (e);
      }
  }
  P.nslots = cfg->max_sandboxes + cfg->pool_size + 16;
  if (sbx_tmpl_store_open (cfg->state_dir, cfg->template_mirror, cfg->template_cache, err) < 0)
    return -1;
  P.slots = calloc (P.nslots, sizeof *P.slots);
  if (P.slots == NULL)
    sbx_oom ();
  for (unsigned i = 0; i < P.nslots; i++)
    sbx_iso_box_init (&P.slots[i].box);
  return sbx_templates_init (cfg->state_dir, err);
}

static int frontend_ready;

int
sbx_priv_frontend_ready (void)
{
  int r;

  pthread_mutex_lock (&P.lock);
  r = frontend_ready;
  pthread_mutex_unlock (&P.lock);
  return r;
}

int
sbx_priv_serve_master (int fd)
{
  pthread_mutex_lock (&P.lock);
  /* A new front end: what the last one had is adopted or killed once it
     says ADOPT_DONE; its uploads are gone with its pipes. */
  P.gen++;
  frontend_ready = 0;
  drop_uploads_locked (0, 1);
  pthread_mutex_unlock (&P.lock);
  for (;;)
    {
      union request m;
      int fds[SBX_PRIV_MAX_FDS], nfds = 0, rc;
      ssize_t n;

      m.hdr.op = 0;
      n = sbx__iso_recv (fd, &m, sizeof m, fds, SBX_PRIV_MAX_FDS, &nfds, 0);
      if (n < 0 && errno == EMFILE && m.hdr.op == SBX_PRIV_CHANNEL)
        {
          /* Our fd table is full: the kernel dropped the new channel's
             end. The front end waits for this answer, and gets the reason
             (its request fails with it) instead of a channel with nobody
             at the other end; the session goes on. */
          sbx_error_t *e = NULL;
          struct chan c = {.fd = fd};
          sbx_err_sys (&e, EMFILE, "the privileged process taking a channel");
          n = send_reply (&c, e, 0, NULL, 0, NULL, 0);
          sbx_error_free (e);
          if (n < 0)
            return 0;
          continue;
        }
      if (n <= 0)
        return 0; /* the front end is gone */
      if (m.hdr.op == SBX_PRIV_HELLO && n == (ssize_t) sizeof m.hello
          && m.hdr.len == sizeof m.hello && nfds == 0 && m.hello.version == SBX_PRIV_VERSION)
        {
          /* The ABI inits enforce: what the kernel offers, capped by what
             init knows (LL_MAX_ABI). */
          struct sbx_priv_info info;
          struct chan c = {.fd = fd};

          memset (&info, 0, sizeof info);
          info.version = SBX_PRIV_VERSION;
          info.cgroup_mode = P.eng->cgroups.mode;
          info.landlock_abi = P.eng->landlock_abi < LL_MAX_ABI ? P.eng->landlock_abi : LL_MAX_ABI;
          info.kernel_paths = sbx_kernel.paths;
          _Static_assert (sizeof info.kernel_settings == sizeof sbx_kernel.settings,
                          "the settings pass whole");
          memcpy (info.kernel_settings, sbx_kernel.settings, sizeof info.kernel_settings);
          memcpy (info.seal_key, P.seal_key, sizeof info.seal_key);
          info.anchor_remade = P.anchor_remade;
          P.anchor_remade = 0;
          snprintf (info.kernel_release, sizeof info.kernel_release, "%s", sbx_kernel.release);
          snprintf (info.snapshot_copy_reason, sizeof info.snapshot_copy_reason, "%s",
                    sbx_kernel.snapshot_copy_reason);
          sbx_cgroup_root_describe (&P.eng->cgroups, info.cgroup_parent,
                                    sizeof info.cgroup_parent);
          snprintf (info.cgroup_daemon, sizeof info.cgroup_daemon, "%s", P.eng->cgroup_daemon);
          snprintf (info.cgroup_why, sizeof info.cgroup_why, "%s", P.eng->cgroup_why);
          {
            int sent = send_reply (&c, NULL, 0, &info, sizeof info, NULL, 0);
            explicit_bzero (info.seal_key, sizeof info.seal_key);
            if (sent < 0)
              return -1;
          }
          continue;
        }
      if (m.hdr.op == SBX_PRIV_AUDIT_HEAD && n == (ssize_t) sizeof m.audit_head
          && m.hdr.len == sizeof m.audit_head && nfds == 0)
        {
          sbx_audit_anchor_advance (m.audit_head.seq, m.audit_head.hash);
          continue;
        }
      if (m.hdr.op == SBX_PRIV_READY && n == (ssize_t) sizeof m.hdr
          && m.hdr.len == sizeof m.hdr && nfds == 0)
        {
          pthread_mutex_lock (&P.lock);
          frontend_ready = 1;
          pthread_mutex_unlock (&P.lock);
          continue;
        }
      if (m.hdr.op == SBX_PRIV_CHANNEL && n == (ssize_t) sizeof m.hdr
          && m.hdr.len == sizeof m.hdr && nfds == 1)
        {
          int type = 0;
          socklen_t len = sizeof type;
          struct chan c = {.fd = fd};
          sbx_error_t *e = NULL;
          if (getsockopt (fds[0], SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_SEQPACKET)
            {
              close (fds[0]);
              return -1;
            }
          /* No thread for it (out of memory or threads): an answer the
             request fails with, not the end of the session. */
          if (start_channel (fds[0]) < 0)
            sbx_err_sys (&e, errno, "the privileged process starting a channel");
          rc = send_reply (&c, e, 0, NULL, 0, NULL, 0);
          sbx_error_free (e);
          if (rc < 0)
            return 0;
          continue;
        }
      while (nfds > 0)
        close (fds[--nfds]);
      sbx_warn ("privsep: malformed message on the first channel: the front end is restarted");
      return -1;
    }
}

void
sbx_priv_server_stop (void)
{
  /* The front end is gone for good (the daemon stops): end the uploads
     it left (their temporaries are unnamed). The sandboxes are not ours
     to kill here: with --kill-on-exit the front end destroyed them, and
     kept ones live on by themselves for the next start. */
  pthread_mutex_lock (&P.lock);
  drop_uploads_locked (0, 1);
  pthread_mutex_unlock (&P.lock);
}
