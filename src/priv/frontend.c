/* sbx: the front end's life: drop privileges, connect to the parent,
 * start the core (re-adopting what is running), serve HTTP, and stop on
 * SIGTERM (the parent forwards its own). */
#include "priv/frontend.h"
#include "iso/kernel_settings.h"

#include <errno.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/audit.h"
#include "core/core.h"
#include "priv/drop.h"
#include "priv/host.h"
#include "server/server.h"
#include "util/log.h"
#include "util/self_stats.h"

int
sbx_frontend_main (const struct sbx_config *cfg, int master, const int listen_fds[2], uid_t uid,
                   gid_t gid)
{
  struct sbx_host_info info;
  sbx_error_t *err = NULL;
  sigset_t mask;
  siginfo_t si;
  unsigned char digest[SHA256_DIGEST_LENGTH];

  sigemptyset (&mask);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGINT);
  sigaddset (&mask, SIGHUP);
  sigaddset (&mask, SIGQUIT);
  pthread_sigmask (SIG_BLOCK, &mask, NULL);
  signal (SIGPIPE, SIG_IGN);

  /* OpenSSL sets itself up at its first use (hashing an API key), and if
     that fails for want of memory it keeps NULL locks that every later
     SHA256 dereferences: a crash of the front end. Here a failure is a
     start-up error, and Landlock does not yet hide OpenSSL's config. */
  if (SHA256 ((const unsigned char *) "", 0, digest) == NULL)
    {
      sbx_err (&err, SBX_E_SYSTEM, "OpenSSL could not initialise");
      goto fail;
    }
  /* /metrics reads the front end's own /proc files, out of Landlock's
     reach after the drop: kept open from here (util/self_stats.h). */
  if (sbx_self_stats_open () < 0)
    sbx_warn ("the front end's own memory and descriptors will not be in /metrics: %s",
              strerror (errno));
  if (sbx_priv_drop (uid, gid, cfg->state_dir, &err) < 0
      || sbx_host_connect (master, &info, &err) < 0)
    goto fail;
  /* Before the core: re-adoption already makes records. */
  sbx_audit_set_anchor (sbx_host_audit_head);
  if (sbx_audit_open (cfg->state_dir, cfg->audit_max_size, &err) < 0)
    {
      sbx_err_wrap (&err, "audit log");
      goto fail;
    }
  if (info.anchor_remade)
    sbx_audit_record ("audit", json_pack ("{s:s}", "event", "anchor_remade"));
  if (sbx_core_start (cfg, &err) < 0)
    {
      sbx_core_stop ();
      sbx_core_free ();
      sbx_audit_close ();
      goto fail;
    }
  if (sbx_server_start (cfg->state_dir, cfg->listen, listen_fds, &err) < 0
      || sbx_host_ready (&err) < 0)
    {
      sbx_core_stop ();
      sbx_core_free ();
      sbx_audit_close ();
      goto fail;
    }
  sbx_info ("sbx ready (state %s)", cfg->state_dir);
  /* The host's weak kernel settings (iso/kernel_settings.h), once the
     daemon serves: a start refused for another reason stays one line. */
  for (size_t i = 0; i < sbx_kernel_settings_count; i++)
    if (sbx_kernel_setting_weak (i, info.kernel_settings[i]))
      {
        char line[256];
        sbx_kernel_setting_describe (i, info.kernel_settings[i], line, sizeof line);
        sbx_warn ("host: %s; see docs/security.md, Deploying", line);
      }

  while (sigwaitinfo (&mask, &si) < 0)
    if (errno != EINTR)
      break;
  sbx_info ("signal %d: stopping; %s", si.si_signo,
            cfg->kill_on_exit ? "every sandbox is killed"
                              : "running sandboxes keep running for the next start");
  sbx_server_quiesce ();
  sbx_core_stop ();
  sbx_server_stop ();
  sbx_core_free ();
  sbx_audit_close ();
  sbx_host_disconnect ();
  return 0;
fail:
  fprintf (stderr, "sbx serve: %s\n", err->msg);
  sbx_error_free (err);
  return 1;
}
