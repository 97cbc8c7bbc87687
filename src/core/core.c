/* sbx: starting and stopping the core; configuration defaults. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/template.h"
#include "util/cleanup.h"
#include "util/log.h"

struct sbx_core_state sbx_core = {.lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .wakefd = -1};

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)
#define RECORD_RETENTION_MS (7LL * 24 * 3600 * 1000)

void
sbx_config_defaults (struct sbx_config *cfg)
{
  struct sysinfo si;
  long ncpu = sysconf (_SC_NPROCESSORS_ONLN);

  memset (cfg, 0, sizeof *cfg);
  snprintf (cfg->state_dir, sizeof cfg->state_dir, "/var/lib/sbx");
  snprintf (cfg->frontend_user, sizeof cfg->frontend_user, "sbx");
  cfg->egress_fd = -1;
  cfg->pool_size = 4;
  cfg->socket_gid = -1; /* the socket is root's only */
  cfg->max_sandboxes = 1024;
  /* 0x60000000: far above any real account, below 2^31 (some tools treat
     larger ids as negative). 8192 ranges of 65536 fit below 2^32 - 1. */
  cfg->uid_base = 0x60000000u;
  cfg->default_timeout_ms = 300 * 1000;
  cfg->max_timeout_ms = 24 * 3600 * 1000;
  cfg->proxy_idle_ms = 60 * 1000;
  cfg->metrics_interval_ms = SBX_METRICS_INTERVAL_MS;
  cfg->audit_max_size = SBX_AUDIT_DEFAULT_MAX_SIZE;
  cfg->template_max_upload = 2 * GIB;
  cfg->template_max_bytes = 4 * GIB;
  cfg->template_max_inodes = 500000;
  cfg->tenant_max_templates = 16;
  cfg->tenant_template_bytes = 8 * GIB;
  cfg->tenant_snapshot_bytes = 8 * GIB;
  snprintf (cfg->template_mirror, sizeof cfg->template_mirror, "http://deb.debian.org/debian");
  cfg->defaults.memory_bytes = 512 * MIB;
  cfg->defaults.cpu_milli = 1000;
  cfg->defaults.pids = 256;
  cfg->defaults.disk_bytes = 1 * GIB;
  cfg->min.memory_bytes = 16 * MIB;
  cfg->min.cpu_milli = 10;
  cfg->min.pids = 16;
  cfg->min.disk_bytes = 1 * MIB;
  cfg->max.memory_bytes = sysinfo (&si) == 0 ? (uint64_t) si.totalram * si.mem_unit : 64 * GIB;
  cfg->max.cpu_milli = (uint32_t) (ncpu > 0 ? ncpu : 1) * 1000;
  cfg->max.pids = 65536;
  cfg->max.disk_bytes = 256 * GIB;
}

int64_t
sbx_now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
sbx__abstime (struct timespec *ts, int64_t ms)
{
  clock_gettime (CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L)
    {
      ts->tv_sec++;
      ts->tv_nsec -= 1000000000L;
    }
}

int64_t
sbx_mono_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

json_t *
sbx_json_time (int64_t ms)
{
  char buf[48];
  time_t t = (time_t) (ms / 1000);
  struct tm tm;
  size_t n;

  /* Milliseconds: sandboxes made in one second must still sort by their
     start (E2B's startedAt), and RFC 3339 takes the fraction. */
  gmtime_r (&t, &tm);
  n = strftime (buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf (buf + n, sizeof buf - n, ".%03dZ", (int) (((ms % 1000) + 1000) % 1000));
  return json_string (buf);
}

static __thread int json_alloc_failed;

static void *
json_malloc (size_t n)
{
  void *p = malloc (n);

  if (p == NULL)
    json_alloc_failed = 1;
  return p;
}

/* What jansson gives back is overwritten first: its parser's buffers and
   the strings it made hold request bodies, secrets' values among them,
   which must not linger in freed memory (read by a later bug, or in a
   core file). The bodies it handles are small; the cost is one memset. */
static void
json_free_wiped (void *p)
{
  if (p != NULL)
    explicit_bzero (p, malloc_usable_size (p));
  free (p);
}

void
sbx_json_checked_alloc (void)
{
  json_set_alloc_funcs (json_malloc, json_free_wiped);
}

int
sbx_json_alloc_failed (void)
{
  return json_alloc_failed;
}

void
sbx_json_alloc_reset (void)
{
  json_alloc_failed = 0;
}

void
sbx_json_alloc_mark_failed (void)
{
  json_alloc_failed = 1;
}

const struct sbx_config *
sbx_core_config (void)
{
  return &sbx_core.cfg;
}

struct sbx_store *
sbx_core_store (void)
{
  return sbx_core.store;
}

const struct sbx_host_info *
sbx_core_host_info (void)
{
  return &sbx_core.host;
}

int
sbx_core_start (const struct sbx_config *cfg, sbx_error_t **err)
{
  char path[600];
  uint64_t span;

  sbx_core.cfg = *cfg;
  /* Every slot there can be (running, pool, spare) needs its range. */
  span = (uint64_t) cfg->uid_base
         + (uint64_t) (cfg->max_sandboxes + cfg->pool_size + 16) * SBX_IDS_PER_SANDBOX;
  if (span > 0xfffffffeULL)
    return sbx_err (err, SBX_E_INVALID, "uid base %u leaves no room for %u sandboxes",
                    (unsigned) cfg->uid_base, cfg->max_sandboxes);
  /* Room for every running sandbox plus the pool. */
  sbx_core.nslots = cfg->max_sandboxes + cfg->pool_size + 16;
  sbx_core.slots = calloc (sbx_core.nslots, 1);
  /* Room for every sandbox there can be: queueing a kill (in the loop)
     never allocates. */
  sbx_core.janitor_cap = sbx_core.nslots;
  sbx_core.janitor_q = calloc (sbx_core.janitor_cap, sizeof *sbx_core.janitor_q);
  if (sbx_core.slots == NULL || sbx_core.janitor_q == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "out of memory");

  /* The parent made the state directory ours (0700); the privileged
     parent told us about the host at HELLO. */
  sbx_core.host = *sbx_host_get_info ();
  snprintf (path, sizeof path, "%s/sbx.db", cfg->state_dir);
  if (sbx_store_open (path, sbx_core.host.seal_key, &sbx_core.store, err) < 0)
    return -1;
  /* The store has its copy; none is left about elsewhere. */
  explicit_bzero (sbx_core.host.seal_key, sizeof sbx_core.host.seal_key);
  sbx_host_forget_seal_key ();
  sbx_core.devnull = open ("/dev/null", O_RDWR | O_CLOEXEC);
  if (sbx_core.devnull < 0)
    return sbx_err_sys (err, errno, "open /dev/null");
  if (sbx_templates_init (cfg->state_dir, err) < 0)
    return -1;

  sbx_store_sandbox_prune (sbx_core.store, sbx_now_ms () - RECORD_RETENTION_MS, NULL);

  sbx_core.epfd = epoll_create1 (EPOLL_CLOEXEC);
  sbx_core.wakefd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (sbx_core.epfd < 0 || sbx_core.wakefd < 0)
    return sbx_err_sys (err, errno, "epoll");
  /* Before any thread runs: what a previous daemon left running. */
  sbx__adopt_all ();
  pthread_mutex_lock (&sbx_core.lock);
  sbx__watch_add (sbx_core.wakefd, EPOLLIN, SBX_W_WAKE, NULL, 0);
  /* The egress process's reports (core/egress.c). */
  if (sbx_core.cfg.egress_fd >= 0)
    sbx__watch_add (sbx_core.cfg.egress_fd, EPOLLIN, SBX_W_EGRESS, NULL, 0);
  pthread_mutex_unlock (&sbx_core.lock);
  pthread_cond_init (&sbx_core.pool_cond, NULL);
  pthread_cond_init (&sbx_core.janitor_cond, NULL);
  pthread_cond_init (&sbx_core.history_cond, NULL);
  pthread_cond_init (&sbx_core.creating_cond, NULL);
  if (pthread_create (&sbx_core.loop_thread, NULL, sbx__loop_main, NULL) != 0
      || pthread_create (&sbx_core.janitor_thread, NULL, sbx__janitor_main, NULL) != 0
      || pthread_create (&sbx_core.pool_thread, NULL, sbx__pool_main, NULL) != 0
      || pthread_create (&sbx_core.history_thread, NULL, sbx__history_main, NULL) != 0)
    return sbx_err (err, SBX_E_SYSTEM, "cannot start the core's threads");
  sbx_core.threads_started = 1;
  sbx_info ("core ready: cgroup %s, Landlock ABI %u, pool %u, uid base %u",
            sbx_core.host.cgroup_mode == SBX_CGROUP_V2 ? "v2" : "v1", sbx_core.host.landlock_abi,
            cfg->pool_size, (unsigned) cfg->uid_base);
  sbx_info ("cgroups: sandboxes under %s (%s)", sbx_core.host.cgroup_parent,
            sbx_core.host.cgroup_why);
  return 0;
}

/* Let go of the sandboxes that keep running (no thread runs any more):
   close our fds (init holds its own copies) and free what we hold. */
static void
leave_running (void)
{
  pthread_mutex_lock (&sbx_core.lock);
  while (sbx_core.sandboxes)
    {
      struct sbx_sandbox *sb = sbx_core.sandboxes;
      sbx_core.sandboxes = sb->next;
      sb->next = NULL;
      sbx__watch_del (&sb->ctl_watch);
      sbx__watch_del (&sb->pidfd_watch);
      sb->state = SBX_SB_DEAD;
      sbx__process_kill_all (sb, "the daemon stopped");
      close_and_reset (&sb->box.pidfd);
      close_and_reset (&sb->box.ctl);
      sbx_info ("sandbox %s keeps running", sb->id);
      sbx__sandbox_unref_locked (sb);
    }
  pthread_mutex_unlock (&sbx_core.lock);
}

void
sbx_core_stop (void)
{
  if (sbx_core.threads_started)
    {
      pthread_mutex_lock (&sbx_core.lock);
      sbx_core.stopping = 1;
      pthread_cond_broadcast (&sbx_core.pool_cond);
      /* Creates already past the stopping check finish first, so every
         sandbox is in a list when we sweep. */
      while (sbx_core.creating > 0 || sbx_core.pausers > 0)
        pthread_cond_wait (&sbx_core.creating_cond, &sbx_core.lock);
      pthread_mutex_unlock (&sbx_core.lock);
      pthread_join (sbx_core.pool_thread, NULL);

      /* Kill the pool, and running sandboxes only when asked to: by
         default they live on, kept by their inits, for the next start. */
      for (;;)
        {
          struct sbx_sandbox *sb;
          pthread_mutex_lock (&sbx_core.lock);
          sb = sbx_core.cfg.kill_on_exit && sbx_core.sandboxes ? sbx_core.sandboxes : sbx_core.pool;
          while (sb && sb->state != SBX_SB_RUNNING && sb->state != SBX_SB_POOLED)
            sb = sb->next;
          if (sb)
            sb->refs++;
          pthread_mutex_unlock (&sbx_core.lock);
          if (sb == NULL)
            break;
          sbx_sandbox_kill (sb, "daemon stopped", NULL);
          sbx_sandbox_unref (sb);
        }

      pthread_mutex_lock (&sbx_core.lock);
      sbx_core.stopping = 2;
      pthread_cond_broadcast (&sbx_core.janitor_cond);
      pthread_cond_broadcast (&sbx_core.history_cond);
      pthread_mutex_unlock (&sbx_core.lock);
      sbx__wake_loop ();
      pthread_join (sbx_core.janitor_thread, NULL);
      pthread_join (sbx_core.history_thread, NULL);
      pthread_join (sbx_core.loop_thread, NULL);
      sbx_core.threads_started = 0;
      leave_running ();
    }
}

void
sbx_core_free (void)
{
  sbx_templates_free ();
  if (sbx_core.devnull > 0)
    close (sbx_core.devnull);
  sbx_core.devnull = -1;
  sbx_store_close (sbx_core.store);
  sbx_core.store = NULL;
  if (sbx_core.epfd >= 0)
    close (sbx_core.epfd);
  if (sbx_core.wakefd >= 0)
    close (sbx_core.wakefd);
  sbx_core.epfd = sbx_core.wakefd = -1;
  free (sbx_core.watches);
  sbx_core.watches = NULL;
  free (sbx_core.slots);
  sbx_core.slots = NULL;
  free (sbx_core.janitor_q);
  sbx_core.janitor_q = NULL;
  sbx_core.janitor_len = sbx_core.janitor_cap = 0;
}
