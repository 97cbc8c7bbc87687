/* sbx: creating sandboxes: checking limits, building one through the
 * isolation engine, or taking a pre-built one from the pool and fitting
 * it to the request. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/internal.h"
#include "iso/kernel.h"
#include "core/code.h"
#include "core/secrets.h"
#include "core/template.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/parse.h"

/* ---- building ---------------------------------------------------------- */

/* The disk is a tmpfs: its pages are memory, charged to the sandbox. Were
   it allowed to fill the whole memory limit, a full disk would leave no
   room to run anything (not even `rm`), and the OOM killer, finding only
   small processes, would take PID 1 and the whole sandbox. So it holds at
   most the memory limit minus this much, whatever `disk` asks. */
#define DISK_HEADROOM (16ULL << 20)

uint64_t
sbx_sandbox_disk_limit (struct sbx_sandbox *sb)
{
  uint64_t v;

  pthread_mutex_lock (&sbx_core.lock);
  v = sbx__effective_disk (&sb->limits);
  pthread_mutex_unlock (&sbx_core.lock);
  return v;
}

uint64_t
sbx__effective_disk (const struct sbx_limits *limits)
{
  uint64_t cap = limits->memory_bytes > 2 * DISK_HEADROOM ? limits->memory_bytes - DISK_HEADROOM
                                                           : limits->memory_bytes / 2;
  return limits->disk_bytes < cap ? limits->disk_bytes : cap;
}

/* Build a sandbox with the default limits (pool) or the given ones. The
   result is not in any list yet; it holds one reference (the caller's). */
int
sbx__is_code (const struct sbx_sandbox *sb)
{
  return strcmp (sb->template_name, SBX_CODE_TEMPLATE) == 0;
}

static struct sbx_sandbox *
build (const struct sbx_limits *limits, int background, const char *template_name,
       const char *tenant, const char *snapshot, int isolation, sbx_error_t **err)
{
  const char *tmpl_name = template_name ? template_name : "base";
  struct sbx_host_create req;
  struct sbx_sandbox *sb;
  uint32_t slot;

  sb = calloc (1, sizeof *sb);
  if (sb == NULL)
    return sbx_err_oom (err), NULL;
  sb->refs = 1;
  sb->state = SBX_SB_POOLED;
  pthread_cond_init (&sb->cond, NULL);
  sbx_random_id (sb->id, SBX_ID_LEN);
  snprintf (sb->template_name, sizeof sb->template_name, "%s", tmpl_name);
  sb->limits = *limits;
  sb->isolation = (enum sbx_isolation) isolation;

  pthread_mutex_lock (&sbx_core.lock);
  if (sbx__slot_take (&slot) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      pthread_cond_destroy (&sb->cond);
      free (sb);
      return sbx_err (err, SBX_E_LIMIT, "no free sandbox id range"), NULL;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  sb->slot = slot;

  memset (&req, 0, sizeof req);
  req.slot = slot;
  req.id = sb->id;
  /* A built-in by its own name (base, code-interpreter-v1: the parent
     builds its tree); a stored one by its name in the store. */
  req.template_name
      = sbx_template_find (tmpl_name) ? sbx_template_find (tmpl_name)->name : tmpl_name;
  req.limits.memory_bytes = limits->memory_bytes;
  req.limits.cpu_milli = limits->cpu_milli;
  req.limits.pids = limits->pids;
  req.disk_bytes = sbx__effective_disk (limits);
  req.background = background;
  req.isolation = isolation;
  req.snapshot_tenant = tenant;
  req.snapshot = snapshot;
  if (sbx_host_create (&req, &sb->box, err) < 0)
    {
      pthread_mutex_lock (&sbx_core.lock);
      sbx__slot_release (slot);
      pthread_mutex_unlock (&sbx_core.lock);
      pthread_cond_destroy (&sb->cond);
      free (sb);
      return NULL;
    }
  pthread_mutex_lock (&sbx_core.lock);
  sb->refs++; /* the loop's watches and whichever list holds it */
  sb->ctl_watch = sbx__watch_add (sb->box.ctl, EPOLLIN, SBX_W_CTL, sb, 0);
  sb->pidfd_watch = sbx__watch_add (sb->box.pidfd, EPOLLIN, SBX_W_PIDFD, sb, 0);
  pthread_mutex_unlock (&sbx_core.lock);
  if (!sb->ctl_watch || !sb->pidfd_watch)
    {
      /* Unwatched, its init's messages and death would go unnoticed. */
      sbx__discard (sb);
      return sbx_err_oom (err), NULL;
    }
  if (snapshot)
    snprintf (sb->snapshot, sizeof sb->snapshot, "%s", snapshot);
  return sb;
}

/* Snapshots are copied, not layered, once the kernel said it cannot layer
   them: at start (iso/kernel.c's probe of the store's filesystem) or at a
   sandbox's setup (overlayfs refusing the layer): said once, in the log
   and in GET /v1/info, never silently. */
static pthread_mutex_t copy_lock = PTHREAD_MUTEX_INITIALIZER;
static char copy_reason[200];

static int
snapshots_copied (void)
{
  int copied;

  pthread_mutex_lock (&copy_lock);
  copied = copy_reason[0] != '\0' || !(sbx_core.host.kernel_paths & SBX_KERNEL_SNAPSHOT_LAYERS);
  pthread_mutex_unlock (&copy_lock);
  return copied;
}

static void
copy_snapshots_from_now (const char *why)
{
  pthread_mutex_lock (&copy_lock);
  if (copy_reason[0] == '\0')
    {
      snprintf (copy_reason, sizeof copy_reason, "%s", why);
      sbx_warn ("snapshots cannot be layers on this host (%s): sandboxes made from one get a"
                " copy of it from now on",
                why);
    }
  pthread_mutex_unlock (&copy_lock);
}

const char *
sbx_core_snapshot_copy_reason (char *buf, size_t cap)
{
  pthread_mutex_lock (&copy_lock);
  snprintf (buf, cap, "%s", copy_reason[0] ? copy_reason : sbx_core.host.snapshot_copy_reason);
  pthread_mutex_unlock (&copy_lock);
  return buf;
}

struct sbx_sandbox *
sbx__build (const struct sbx_limits *limits, int background, const char *template_name,
            sbx_error_t **err)
{
  return build (limits, background, template_name, NULL, NULL, SBX_ISOLATION_NS, err);
}

struct sbx_sandbox *
sbx__build_layered (const struct sbx_limits *limits, const char *template_name,
                    const char *tenant, const char *snapshot, sbx_error_t **err)
{
  return build (limits, 0, template_name, tenant, snapshot, SBX_ISOLATION_NS, err);
}

struct sbx_sandbox *
sbx__build_vm (const struct sbx_limits *limits, int background, sbx_error_t **err)
{
  return build (limits, background, NULL, NULL, NULL, SBX_ISOLATION_VM, err);
}

/* A VM of a stored template: its root image is made from the template's
   layers (iso/vm_image.c). */
static struct sbx_sandbox *
sbx__build_vm_template (const struct sbx_limits *limits, const char *template_name,
                        sbx_error_t **err)
{
  return build (limits, 0, template_name, NULL, NULL, SBX_ISOLATION_VM, err);
}

struct sbx_sandbox *
sbx__build_vm_restore (const struct sbx_limits *limits, const char *tenant, const char *snapshot,
                       sbx_error_t **err)
{
  return build (limits, 0, NULL, tenant, snapshot, SBX_ISOLATION_VM, err);
}

static int
limits_equal (const struct sbx_limits *a, const struct sbx_limits *b)
{
  return a->memory_bytes == b->memory_bytes && a->cpu_milli == b->cpu_milli && a->pids == b->pids;
}

/* "memory 1 is too small: at least 16M": the bound that was crossed, as
   a value the user may type (sbx_format_size_bound), then the range. */
static int
check_range (const char *what, uint64_t v, uint64_t min, uint64_t max, int is_size,
             sbx_error_t **err)
{
  char a[32], b[32], c[32];

  if (v >= min && v <= max)
    return 0;
  if (is_size)
    {
      sbx_format_size (v, a, sizeof a);
      sbx_format_size_bound (min, 1, b, sizeof b);
      sbx_format_size_bound (max, 0, c, sizeof c);
    }
  else
    {
      snprintf (a, sizeof a, "%llu", (unsigned long long) v);
      snprintf (b, sizeof b, "%llu", (unsigned long long) min);
      snprintf (c, sizeof c, "%llu", (unsigned long long) max);
    }
  if (v < min)
    return sbx_err (err, SBX_E_INVALID, "%s %s is too small: at least %s (%s .. %s)", what, a, b,
                    b, c);
  return sbx_err (err, SBX_E_INVALID, "%s %s is too large: at most %s (%s .. %s)", what, a, c, b,
                  c);
}

/* Fill defaults and check every value against the configured range. */
static int
resolve_limits (const struct sbx_limits *in, struct sbx_limits *out, sbx_error_t **err)
{
  const struct sbx_config *c = &sbx_core.cfg;

  *out = *in;
  if (!out->memory_bytes)
    out->memory_bytes = c->defaults.memory_bytes;
  if (!out->cpu_milli)
    out->cpu_milli = c->defaults.cpu_milli;
  if (!out->pids)
    out->pids = c->defaults.pids;
  if (!out->disk_bytes)
    out->disk_bytes = c->defaults.disk_bytes;
  if (check_range ("memory", out->memory_bytes, c->min.memory_bytes, c->max.memory_bytes, 1, err)
          < 0
      || check_range ("pids", out->pids, c->min.pids, c->max.pids, 0, err) < 0
      || check_range ("disk", out->disk_bytes, c->min.disk_bytes, c->max.disk_bytes, 1, err) < 0)
    return -1;
  if (out->cpu_milli < c->min.cpu_milli || out->cpu_milli > c->max.cpu_milli)
    return sbx_err (err, SBX_E_INVALID, "cpus %g is too %s: at %s %g (%g .. %g)",
                    out->cpu_milli / 1000.0, out->cpu_milli < c->min.cpu_milli ? "few" : "many",
                    out->cpu_milli < c->min.cpu_milli ? "least" : "most",
                    (out->cpu_milli < c->min.cpu_milli ? c->min.cpu_milli : c->max.cpu_milli)
                        / 1000.0,
                    c->min.cpu_milli / 1000.0, c->max.cpu_milli / 1000.0);
  return 0;
}

int
sbx__check_timeout (uint64_t ms, sbx_error_t **err)
{
  char v[48], max[48];

  if (ms >= 1000 && ms <= sbx_core.cfg.max_timeout_ms)
    return 0;
  sbx_format_duration_ms (ms, v, sizeof v);
  sbx_format_duration_ms (sbx_core.cfg.max_timeout_ms, max, sizeof max);
  if (ms < 1000)
    return sbx_err (err, SBX_E_INVALID, "timeout %s is too short: at least 1s (1s .. %s)", v, max);
  return sbx_err (err, SBX_E_INVALID, "timeout %s is too long: at most %s (1s .. %s)", v, max, max);
}

/* Kill a sandbox that never became visible. */
void
sbx__discard (struct sbx_sandbox *sb)
{
  sbx_error_t *err = NULL;

  pthread_mutex_lock (&sbx_core.lock);
  sb->state = SBX_SB_DYING;
  sbx__watch_del (&sb->ctl_watch);
  sbx__watch_del (&sb->pidfd_watch);
  pthread_mutex_unlock (&sbx_core.lock);
  if (sbx_host_destroy (sb->slot, &sb->box, &err) < 0)
    {
      sbx_warn ("discard sandbox %s: %s", sb->id, err->msg);
      sbx_error_free (err);
    }
  pthread_mutex_lock (&sbx_core.lock);
  sbx__slot_release (sb->slot);
  sb->state = SBX_SB_DEAD;
  sbx__sandbox_unref_locked (sb); /* the list/watch reference */
  sbx__sandbox_unref_locked (sb); /* ours */
  pthread_mutex_unlock (&sbx_core.lock);
}

static struct sbx_sandbox *
create_sandbox (const char *tenant, const struct sbx_create_opts *opts, sbx_error_t **err)
{
  struct sbx_sandbox *sb = NULL;
  struct sbx_sandbox_record rec;
  struct sbx_limits limits;
  int isolation;
  uint64_t timeout = opts->timeout_ms ? opts->timeout_ms : sbx_core.cfg.default_timeout_ms;
  const char *user = opts->user ? opts->user : "user";
  int code, fresh = 0;
  struct sbx_sandbox **link;
  cleanup_free char *env_json = NULL, *meta_json = NULL, *net_json = NULL;
  struct sbx_create_opts from_snapshot;
  struct sbx_snapshot_record snap;
  struct sbx_limits copy_limits;
  int vm_snapshot = 0;

  json_t *tmeta = NULL, *env_all = NULL;
  int stored;

  if (opts->snapshot)
    {
      /* Its template, and by default its source's disk size (it fits). */
      if (opts->internal_snapshot)
        snap = *opts->internal_snapshot;
      else if (sbx__snapshot_lookup (tenant ? tenant : "default", opts->snapshot, &snap, err) < 0)
        return NULL;
      if (opts->template_name && strcmp (opts->template_name, snap.template_name) != 0)
        return sbx_err (err, SBX_E_INVALID,
                        "snapshot `%s` is of template `%s`, not `%s` (leave `template` out)",
                        snap.name, snap.template_name, opts->template_name),
               NULL;
      from_snapshot = *opts;
      from_snapshot.template_name = snap.template_name;
      if (!from_snapshot.limits.disk_bytes)
        from_snapshot.limits.disk_bytes = snap.disk;
      if (snap.isolation == SBX_ISOLATION_VM)
        {
          /* A VM's memory: the restore is the same machine (QEMU's
             incoming migration needs it), its disk is in that memory. */
          if (opts->isolation && strcmp (opts->isolation, "vm") != 0)
            return sbx_err (err, SBX_E_INVALID,
                            "snapshot `%s` is of a VM (its memory): isolation must be `vm`",
                            snap.name),
                   NULL;
          if ((opts->limits.memory_bytes && opts->limits.memory_bytes != snap.memory)
              || (opts->limits.cpu_milli && opts->limits.cpu_milli != snap.cpu_milli)
              || (opts->limits.disk_bytes && opts->limits.disk_bytes != snap.disk))
            return sbx_err (err, SBX_E_INVALID,
                            "snapshot `%s` is of a VM: its memory, cpus and disk are the "
                            "source's (leave them out)",
                            snap.name),
                   NULL;
          from_snapshot.isolation = "vm";
          from_snapshot.limits.memory_bytes = snap.memory;
          from_snapshot.limits.cpu_milli = snap.cpu_milli;
          vm_snapshot = 1;
        }
      opts = &from_snapshot;
    }
  stored = sbx_template_is_stored (opts->template_name);
  code = opts->template_name && strcmp (opts->template_name, SBX_CODE_TEMPLATE) == 0;
  if (!sbx_template_usable (tenant, opts->template_name)
      || (stored && (tmeta = sbx_template_meta (opts->template_name)) == NULL))
    return sbx_err (err, SBX_E_NOT_FOUND,
                    "unknown template `%.64s` (built in: base; `sbx template ls` or GET "
                    "/v1/templates lists the others)",
                    opts->template_name),
           NULL;
  /* The image's user applies when the caller names none: root if it says
     so, else sbx's user. */
  if (opts->user == NULL && tmeta)
    {
      const char *u = json_string_value (json_object_get (tmeta, "user"));
      if (u && (strcmp (u, "root") == 0 || strcmp (u, "0") == 0 || strncmp (u, "0:", 2) == 0
                || strncmp (u, "root:", 5) == 0))
        user = "root";
    }
  json_decref (tmeta);
  tmeta = NULL;
  if (strcmp (user, "user") != 0 && strcmp (user, "root") != 0)
    return sbx_err (err, SBX_E_INVALID, "user must be `user` or `root`, not `%s`", user), NULL;
  if (opts->mask_host && !sbx_mask_host_ok (opts->mask_host))
    return sbx_err (err, SBX_E_INVALID,
                    "the mask of the Host header must be a host[:port] of letters, digits, `.`, "
                    "`-`, `:`, `[`, `]` and `${PORT}`"),
           NULL;
  if (sbx__check_timeout (timeout, err) < 0 || resolve_limits (&opts->limits, &limits, err) < 0)
    return NULL;
  if (opts->isolation == NULL)
    isolation = sbx_core.cfg.default_isolation;
  else if (strcmp (opts->isolation, "namespace") == 0)
    isolation = SBX_ISOLATION_NS;
  else if (strcmp (opts->isolation, "vm") == 0)
    isolation = SBX_ISOLATION_VM;
  else
    return sbx_err (err, SBX_E_INVALID, "isolation must be `namespace` or `vm`, not `%s`",
                    opts->isolation),
           NULL;
  if (isolation == SBX_ISOLATION_VM)
    {
      const char *missing = NULL;
      if (opts->snapshot && !vm_snapshot)
        missing = "starting from a namespace sandbox's snapshot";
      if (missing)
        return sbx_err (err, SBX_E_NOT_IMPLEMENTED, "not supported for isolation vm: %s", missing),
               NULL;
    }
  /* Its interpreter holds ~110 MB before the first cell: less would have
     the server killed by the memory limit as the sandbox is handed out. */
  if (code && limits.memory_bytes < SBX_CODE_MIN_MEMORY)
    return sbx_err (err, SBX_E_INVALID,
                    "template " SBX_CODE_TEMPLATE " needs at least %llu MiB of memory",
                    (unsigned long long) (SBX_CODE_MIN_MEMORY >> 20)),
           NULL;
  /* The secrets its rules name are this tenant's (else a 400 before
     anything is made); placeholders are chosen here. */
  if (sbx_network_bind (sbx_core.store, tenant ? tenant : "default", opts->network, NULL, err) < 0)
    return NULL;

  pthread_mutex_lock (&sbx_core.lock);
  if (sbx_core.stopping)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_UNAVAILABLE, "the daemon is shutting down"), NULL;
    }
  if (sbx_core.running >= sbx_core.cfg.max_sandboxes)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_LIMIT, "the daemon's limit of %u running sandboxes is reached",
                      sbx_core.cfg.max_sandboxes),
             NULL;
    }
  sbx_core.running++; /* reserved now, so parallel creates respect the cap */
  sbx_core.creating++;
  if (code && !sbx_core.code_wanted)
    {
      /* From now on the pool keeps one warm (pool.c). */
      sbx_core.code_wanted = 1;
      pthread_cond_signal (&sbx_core.pool_cond);
    }
  if (isolation == SBX_ISOLATION_VM && !sbx_core.vm_wanted)
    {
      sbx_core.vm_wanted = 1; /* and one booted VM, likewise */
      pthread_cond_signal (&sbx_core.pool_cond);
    }
  /* The pool holds base and code-interpreter sandboxes, and VMs of the
     default limits (a guest's RAM, vCPUs and disk are fixed at its boot). */
  for (link = &sbx_core.pool; *link && !stored && !opts->snapshot; link = &(*link)->next)
    if (isolation == SBX_ISOLATION_VM
            ? (*link)->isolation == SBX_ISOLATION_VM && limits_equal (&limits, &(*link)->limits)
                  && limits.disk_bytes == (*link)->limits.disk_bytes && sbx__is_code (*link) == code
            : (*link)->isolation == SBX_ISOLATION_NS && sbx__is_code (*link) == code)
      {
        sb = *link;
        *link = sb->next;
        sb->next = NULL;
        sb->in_pool = 0;
        sb->refs++; /* the caller's; the pool's becomes the registry's */
        sbx__pool_uncount (sb);
        pthread_cond_signal (&sbx_core.pool_cond);
        break;
      }
  pthread_mutex_unlock (&sbx_core.lock);

  if (sb == NULL && vm_snapshot)
    {
      /* QEMU -incoming from the snapshot's file: the guest goes on where
         the source was. It does not depend on the file afterwards. */
      sb = sbx__build_vm_restore (&limits, tenant ? tenant : "default", opts->snapshot, err);
      if (sb == NULL)
        goto fail_unreserve;
      sb->snapshot[0] = '\0';
      fresh = 1;
    }
  if (sb == NULL && opts->snapshot)
    {
      /* The snapshot as the lower layer of its disk; where the kernel
         cannot (idmapped mounts of the store's filesystem, overlayfs on
         them in a user namespace: iso/kernel.h), a copy into a plain one
         below, its disk grown by the snapshot's size so that what the
         sandbox may write is what a layer would leave it. */
      sbx_error_t *e = NULL;
      if (!snapshots_copied ())
        sb = sbx__build_layered (&limits, stored || code ? opts->template_name : NULL,
                                 tenant ? tenant : "default", opts->snapshot, &e);
      fresh = sb != NULL;
      if (sb == NULL)
        {
          /* The kernel refusing the layer (overlayfs, the idmap) is this
             host's for good; anything else (memory, a race) this
             request's only. */
          if (e && (strstr (e->msg, "overlay") || strstr (e->msg, "idmap")))
            copy_snapshots_from_now (e->msg);
          else if (e)
            sbx_warn ("a sandbox on snapshot %s: %s; copying it instead", opts->snapshot, e->msg);
          sbx_error_free (e);
          /* Both: the disk is a tmpfs, its pages charged to the memory
             limit, which caps it (sbx__effective_disk). */
          copy_limits = limits;
          copy_limits.disk_bytes = sbx__effective_disk (&limits) + snap.bytes;
          copy_limits.memory_bytes = limits.memory_bytes + snap.bytes;
          sb = sbx__build (&copy_limits, 0, stored || code ? opts->template_name : NULL, err);
          if (sb == NULL)
            goto fail_unreserve;
          sb->limits = limits;
          sb->snapshot_copied = 1;
          snprintf (sb->snapshot, sizeof sb->snapshot, "%s", opts->snapshot);
          fresh = 1;
        }
    }
  if (sb == NULL)
    {
      sb = isolation == SBX_ISOLATION_VM
               ? (stored || code ? sbx__build_vm_template (&limits, opts->template_name, err)
                         : sbx__build_vm (&limits, 0, err))
               : sbx__build (&limits, 0, stored || code ? opts->template_name : NULL, err);
      if (sb == NULL)
        goto fail_unreserve;
      fresh = 1;
    }
  else
    {
      if (sbx_host_set_foreground (sb->slot, err) < 0)
        goto fail_discard;
      if (!limits_equal (&limits, &sb->limits))
        {
          struct sbx_cgroup_limits cl = {limits.memory_bytes, limits.cpu_milli, limits.pids};
          if (sbx_host_set_limits (sb->slot, &cl, err) < 0)
            goto fail_discard;
        }
      if (sbx__effective_disk (&limits) != sbx__effective_disk (&sb->limits)
          && sbx_host_set_disk (sb->slot, sbx__effective_disk (&limits), err) < 0)
        goto fail_discard;
      sb->limits = limits;
    }

  /* Built here (not from the pool): its interpreter starts now, and the
     create waits until it is warm. A VM restored from a snapshot has the
     source's, running, in its memory. */
  if (code && fresh && !vm_snapshot && sbx__code_start (sb, err) < 0)
    {
      sbx_err_wrap (err, "starting the code interpreter");
      goto fail_discard;
    }
  snprintf (sb->tenant, sizeof sb->tenant, "%s", tenant ? tenant : "default");
  /* The name asked for (an alias of the template it runs on). */
  snprintf (sb->template_name, sizeof sb->template_name, "%s",
            opts->template_name ? opts->template_name : "base");
  snprintf (sb->user, sizeof sb->user, "%s", user);
  /* A stored template's env (its image's), under the caller's. */
  tmeta = stored ? sbx_template_meta (opts->template_name) : NULL;
  env_all = tmeta ? json_deep_copy (json_object_get (tmeta, "env")) : json_object ();
  json_decref (tmeta);
  if (env_all && opts->env)
    json_object_update (env_all, opts->env);
  sb->env = env_all;
  sb->metadata = opts->metadata ? json_deep_copy (opts->metadata) : json_object ();
  json_decref (sb->network);
  sb->network = opts->network ? json_deep_copy (opts->network) : NULL;
  sbx_random_hex (sb->access_token, 20);
  sbx_random_hex (sb->traffic_token, 20);
  sb->created_ms = sbx_now_ms ();
  /* Its tenant's usage counts from its hand-out (a pooled one's build
     included, a few milliseconds of CPU): metrics_history.c. */
  sb->usage_ms = sb->created_ms;
  sb->usage_cpu = 0;
  sb->lifecycle = opts->lifecycle & SBX_LIFECYCLE_MASK;
  /* A VM's disk lives in its memory: its pause keeps both (docs/api.md),
     and its record says so. */
  if (isolation == SBX_ISOLATION_VM)
    sb->lifecycle &= ~(uint32_t) SBX_LIFECYCLE_PAUSE_DROPS_MEMORY;
  snprintf (sb->mask_host, sizeof sb->mask_host, "%s", opts->mask_host ? opts->mask_host : "");
  sb->timeout_ms = timeout;
  sb->expires_ms = sb->created_ms + (int64_t) timeout;
  sb->expires_mono = sbx_mono_ms () + (int64_t) timeout;
  env_json = sb->env ? json_dumps (sb->env, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  meta_json = sb->metadata ? json_dumps (sb->metadata, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  net_json = sb->network ? json_dumps (sb->network, JSON_COMPACT) : strdup ("");
  if (env_json == NULL || meta_json == NULL || net_json == NULL
      || (opts->network && sb->network == NULL))
    {
      sbx_err_oom (err);
      goto fail_discard;
    }

  memset (&rec, 0, sizeof rec);
  rec.id = sb->id;
  rec.tenant = sb->tenant;
  rec.template_name = sb->template_name;
  rec.user = sb->user;
  rec.created_ms = sb->created_ms;
  rec.expires_ms = sb->expires_ms;
  rec.memory = limits.memory_bytes;
  rec.cpu_milli = limits.cpu_milli;
  rec.pids = limits.pids;
  rec.disk = limits.disk_bytes;
  rec.env_json = env_json;
  rec.metadata_json = meta_json;
  rec.slot = sb->slot;
  rec.uid_base = (int64_t) sb->box.uid_base;
  rec.init_pid = sb->box.pid;
  rec.timeout_ms = (int64_t) sb->timeout_ms;
  rec.access_token = sb->access_token;
  rec.traffic_token = sb->traffic_token;
  rec.network_json = net_json;
  rec.lifecycle = sb->lifecycle;
  rec.snapshot = sb->snapshot;
  rec.snapshot_copied = sb->snapshot_copied;
  rec.pending = opts->pending;
  rec.mask_host = sb->mask_host;
  if (sbx_store_sandbox_insert (sbx_core.store, &rec, err) < 0)
    goto fail_discard;
  /* From here on the sandbox outlives this daemon (re-adopted at the next
     start), and ends by itself if no daemon ends it in time. */
  if (sbx_iso_keep (&sb->box, sb->expires_ms + SBX_KEEP_GRACE_MS, err) < 0)
    {
      sbx_store_sandbox_end (sbx_core.store, sb->id, "failed", "could not be kept", sbx_now_ms (),
                             NULL);
      goto fail_discard;
    }

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_POOLED || sb->kill_queued)
    {
      /* Its init died between the pool and here. */
      pthread_mutex_unlock (&sbx_core.lock);
      sbx_store_sandbox_end (sbx_core.store, sb->id, "failed", "init died during start",
                             sbx_now_ms (), NULL);
      sbx_err (err, SBX_E_UNAVAILABLE, "the sandbox died while starting");
      goto fail_discard;
    }
  sb->state = SBX_SB_RUNNING;
  sb->next = sbx_core.sandboxes;
  sbx_core.sandboxes = sb;
  /* Registered: a stop from now on finds it in the list. */
  if (--sbx_core.creating == 0)
    pthread_cond_broadcast (&sbx_core.creating_cond);
  pthread_mutex_unlock (&sbx_core.lock);
  sbx__wake_loop (); /* a new deadline */
  sbx_audit_lifecycle ("created", sb->id, sb->tenant, NULL);
  if (sb->snapshot_copied && sbx__snapshot_load (sb, opts->snapshot, err) < 0)
    {
      sbx_sandbox_kill (sb, "its snapshot could not be copied", NULL);
      sbx_sandbox_unref (sb);
      return NULL;
    }
  /* The server was started before the sandbox had an environment (in the
     pool): runCode must see it as commands do. */
  if (code && json_object_size (sb->env) > 0 && sbx__code_set_env (sb, err) < 0)
    {
      sbx_sandbox_kill (sb, "its environment could not reach the code interpreter", NULL);
      sbx_sandbox_unref (sb);
      return NULL;
    }
  return sb;

fail_discard:
  sbx__discard (sb);
fail_unreserve:
  pthread_mutex_lock (&sbx_core.lock);
  sbx_core.running--;
  pthread_cond_signal (&sbx_core.pool_cond); /* the cap may let it refill */
  if (--sbx_core.creating == 0)
    pthread_cond_broadcast (&sbx_core.creating_cond);
  pthread_mutex_unlock (&sbx_core.lock);
  return NULL;
}


/* Counted for GET /metrics (core/counters.h): made, with how long it took,
   or failed, by the error's kind. */
struct sbx_sandbox *
sbx_sandbox_create (const char *tenant, const struct sbx_create_opts *opts, sbx_error_t **err)
{
  sbx_error_t *local = NULL;
  int64_t start = sbx_mono_ms ();
  struct sbx_sandbox *sb = create_sandbox (tenant, opts, &local);

  if (sb != NULL)
    sbx_counters_created (sb->isolation, sbx_mono_ms () - start);
  else
    {
      sbx_counters_create_failed (local ? local->kind : SBX_E_SYSTEM);
      if (err)
        sbx_error_move (err, &local);
      else
        sbx_error_free (local);
    }
  return sb;
}
