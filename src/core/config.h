/* sbx: the daemon's configuration (from `sbx serve` options). */
#ifndef SBX_CORE_CONFIG_H
#define SBX_CORE_CONFIG_H

#include <stdint.h>
#include <sys/types.h>

#include "iso/engine.h"

struct sbx_limits
{
  uint64_t memory_bytes;
  uint32_t cpu_milli;
  uint32_t pids;
  uint64_t disk_bytes;
};

struct sbx_config
{
  char state_dir[512];
  char listen[256];            /* "" = unix socket only */
  long socket_gid;             /* --socket-group: the socket's group (0660), -1 without */
  unsigned pool_size;          /* pre-built idle sandboxes */
  unsigned max_sandboxes;      /* running, all tenants */
  uid_t uid_base;              /* first host uid of the sandbox id ranges */
  uint64_t default_timeout_ms; /* sandbox lifetime */
  uint64_t max_timeout_ms;
  uint64_t proxy_idle_ms;      /* port proxy: a server silent this long gets 504 */
  uint64_t metrics_interval_ms; /* how often each sandbox's metrics are kept (metrics_history.c) */
  struct sbx_limits defaults;
  struct sbx_limits min, max;
  struct sbx_engine_opts engine;
  int verbose;
  int kill_on_exit; /* a clean stop kills running sandboxes (default: they live on) */
  char frontend_user[64]; /* the account the HTTP front end runs as */
  /* E2B's sandbox domain: Host "PORT-ID.DOMAIN" reaches a sandbox's port
     (server/e2b_route.h); "" = by headers only. */
  char domain[256];
  /* The egress proxy (egress/egress.h): its options, and the front end's
     end of the channel to it (-1 in the parent and in tests). */
  int egress_allow_private; /* --egress-allow-private: tests only */
  int require_hardened_host; /* --require-hardened-host (iso/kernel_settings.h) */
  /* --e2b-open-internet: an E2B create that says nothing of the network
     gets the internet, E2B's default (sbx's: none). */
  int e2b_open_internet;
  uint64_t egress_max_bytes; /* per sandbox; 0: unbounded */
  uint64_t egress_idle_ms;   /* a relay silent both ways this long is closed; 0: default */
  /* Egress connections open at once (egress/limits.h); 0: the default. */
  unsigned egress_max_total, egress_max_tenant, egress_max_sandbox;
  uint64_t code_start_ms;    /* --code-start-timeout: the code interpreter's start; 0: default */
  int egress_fd;
  const char *egress_upstream_ca; /* --egress-upstream-ca FILE: tests only */
  uint64_t audit_max_size; /* rotate STATE/audit/audit.log at this size */
  int default_isolation;   /* enum sbx_isolation of a create that names none */
  char vm_dir[256];        /* --vm-dir: the microVM engine's guest files; "": default */
  /* Templates (docs/templates.md): the largest upload, and what one
     template may hold once unpacked (file bytes, entries). */
  uint64_t template_max_upload;
  uint64_t template_max_bytes;
  uint64_t template_max_inodes;
  /* Per tenant (API keys; the administrator has none): templates it may
     own and their bytes, and the bytes of its snapshots (their count is
     bounded by SNAPSHOTS_PER_TENANT). */
  unsigned tenant_max_templates;
  uint64_t tenant_template_bytes;
  uint64_t tenant_snapshot_bytes;
  char template_mirror[512]; /* recipes: the Debian mirror */
  char template_cache[512];  /* recipes: built layers by recipe hash ("": in the state dir) */
};

void sbx_config_defaults (struct sbx_config *cfg);

#endif
