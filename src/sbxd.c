/* sbxd: the sbx daemon (`sbx serve` runs this).
 *
 * Kept apart from the `sbx` CLI binary so the CLI loads no more than libc,
 * jansson and http-parser: on these machines loading libmicrohttpd,
 * SQLite, libseccomp and OpenSSL costs several milliseconds per process,
 * more than a whole sandboxed run should.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include <stddef.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "server/server.h"
#include "util/log.h"
#include "util/parse.h"

static const char usage[]
    = "usage: sbx serve [OPTIONS]\n"
      "\n"
      "  --state DIR          state directory (default $SBX_STATE or /var/lib/sbx)\n"
      "  --listen HOST:PORT   also serve HTTP on TCP (API keys required there)\n"
      "  --pool N             pre-built idle sandboxes kept ready (default 4)\n"
      "  --max-sandboxes N    running sandboxes allowed at once (default 1024)\n"
      "  --uid-base N         first host uid of the sandboxes' id ranges (default 1610612736)\n"
      "  --cgroup-root DIR    cgroup filesystem (default /sys/fs/cgroup)\n"
      "  --cgroup-parent NAME cgroup under which sandboxes live (default sbx)\n"
      "  --max-timeout DUR    longest sandbox lifetime allowed (default 24h)\n"
      "  --log-level LEVEL    debug, info, warn or error (default info)\n";

static int __attribute__ ((format (printf, 1, 2)))
fail (const char *fmt, ...)
{
  va_list ap;

  fputs ("sbx serve: ", stderr);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  return 2;
}

static int
parse_args (int argc, char **argv, struct sbx_config *cfg)
{
  const char *env_state = getenv ("SBX_STATE");
  sbx_error_t *err = NULL;
  int i;

  if (env_state && env_state[0])
    snprintf (cfg->state_dir, sizeof cfg->state_dir, "%s", env_state);
  for (i = 1; i < argc; i++)
    {
      const char *opt = argv[i], *val = NULL;
      char name[64];
      const char *eq = strchr (opt, '=');
      uint64_t n;

      if (strcmp (opt, "--help") == 0 || strcmp (opt, "-h") == 0)
        {
          fputs (usage, stdout);
          exit (0);
        }
      if (strncmp (opt, "--", 2) != 0)
        return fail ("unexpected argument `%s` (try --help)", opt);
      if (eq)
        {
          snprintf (name, sizeof name, "%.*s", (int) (eq - opt), opt);
          val = eq + 1;
        }
      else
        {
          snprintf (name, sizeof name, "%s", opt);
          if (i + 1 >= argc)
            return fail ("%s needs a value", opt);
          val = argv[++i];
        }
      if (strcmp (name, "--state") == 0)
        {
          if (val[0] != '/')
            return fail ("--state must be an absolute path, not `%s`", val);
          snprintf (cfg->state_dir, sizeof cfg->state_dir, "%s", val);
        }
      else if (strcmp (name, "--listen") == 0)
        snprintf (cfg->listen, sizeof cfg->listen, "%s", val);
      else if (strcmp (name, "--pool") == 0 || strcmp (name, "--max-sandboxes") == 0
               || strcmp (name, "--uid-base") == 0)
        {
          if (sbx_parse_uint64 (val, &n, &err) < 0 || n > 0xffffffffULL)
            {
              sbx_error_free (err);
              return fail ("`%s` is not a valid number", val);
            }
          if (strcmp (name, "--pool") == 0)
            cfg->pool_size = (unsigned) n;
          else if (strcmp (name, "--max-sandboxes") == 0)
            {
              if (n == 0 || n > 8000)
                return fail ("--max-sandboxes must be 1 to 8000, not %s", val);
              cfg->max_sandboxes = (unsigned) n;
            }
          else
            {
              if (n < 65536)
                return fail ("--uid-base %s would overlap system accounts", val);
              cfg->uid_base = (uid_t) n;
            }
        }
      else if (strcmp (name, "--cgroup-root") == 0)
        cfg->engine.cgroup_mount = val;
      else if (strcmp (name, "--cgroup-parent") == 0)
        cfg->engine.cgroup_parent = val;
      else if (strcmp (name, "--max-timeout") == 0)
        {
          if (sbx_parse_duration_ms (val, &n, &err) < 0 || n < 1000)
            {
              sbx_error_free (err);
              return fail ("--max-timeout `%s` is not a duration of 1s or more", val);
            }
          cfg->max_timeout_ms = n;
        }
      else if (strcmp (name, "--log-level") == 0)
        {
          if (strcmp (val, "debug") == 0)
            sbx_log_set_level (SBX_LOG_DEBUG);
          else if (strcmp (val, "info") == 0)
            sbx_log_set_level (SBX_LOG_INFO);
          else if (strcmp (val, "warn") == 0)
            sbx_log_set_level (SBX_LOG_WARN);
          else if (strcmp (val, "error") == 0)
            sbx_log_set_level (SBX_LOG_ERROR);
          else
            return fail ("unknown log level `%s`", val);
        }
      else
        return fail ("unknown option `%s` (try --help)", name);
    }
  if (cfg->default_timeout_ms > cfg->max_timeout_ms)
    cfg->default_timeout_ms = cfg->max_timeout_ms;
  return 0;
}

/* Hold an exclusive lock on path for the life of the process. */
static int
take_lock (const char *path, const char *what)
{
  int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

  if (fd < 0)
    {
      fprintf (stderr, "sbx serve: open `%s`: %s\n", path, strerror (errno));
      return -1;
    }
  if (flock (fd, LOCK_EX | LOCK_NB) < 0)
    {
      fprintf (stderr, "sbx serve: another daemon is using %s\n", what);
      close (fd);
      return -1;
    }
  return fd;
}

/* Hold a host-wide name for the life of the process: an abstract unix
   socket, which the kernel releases when we exit, so nothing is left in
   the filesystem. The daemon runs in the host's network namespace, where
   the abstract names live. */
static int
take_name (const char *name, const char *what)
{
  struct sockaddr_un sa;
  size_t n = strlen (name);
  int fd;

  if (n + 1 > sizeof sa.sun_path)
    return -1;
  memset (&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy (sa.sun_path + 1, name, n); /* sun_path[0] = '\0': abstract */
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    {
      fprintf (stderr, "sbx serve: socket: %s\n", strerror (errno));
      return -1;
    }
  if (bind (fd, (struct sockaddr *) &sa, (socklen_t) (offsetof (struct sockaddr_un, sun_path) + 1 + n))
      < 0)
    {
      if (errno == EADDRINUSE)
        fprintf (stderr, "sbx serve: another daemon is using %s\n", what);
      else
        fprintf (stderr, "sbx serve: bind @%s: %s\n", name, strerror (errno));
      close (fd);
      return -1;
    }
  return fd;
}

/* Two daemons on one host must not share a state directory, a cgroup
   parent (each removes "leftover" cgroups under its parent at start) or a
   uid range (their sandboxes could then signal each other). */
static int
take_host_locks (const struct sbx_config *cfg)
{
  char path[700], what[600], name[100], hex[2 * SHA256_DIGEST_LENGTH + 1];
  const char *parent = cfg->engine.cgroup_parent ? cfg->engine.cgroup_parent : "sbx";
  unsigned char digest[SHA256_DIGEST_LENGTH];
  size_t i;

  snprintf (path, sizeof path, "%s/sbxd.lock", cfg->state_dir);
  snprintf (what, sizeof what, "`%s`", cfg->state_dir);
  if (take_lock (path, what) < 0)
    return -1;
  /* Cgroup parents are paths of any length: name them by their digest. */
  SHA256 ((const unsigned char *) parent, strlen (parent), digest);
  for (i = 0; i < 16; i++)
    snprintf (hex + 2 * i, 3, "%02x", digest[i]);
  snprintf (name, sizeof name, "sbx/cgroup/%s", hex);
  snprintf (what, sizeof what, "cgroup parent `%s` (choose another with --cgroup-parent)", parent);
  if (take_name (name, what) < 0)
    return -1;
  snprintf (name, sizeof name, "sbx/uids/%u", (unsigned) cfg->uid_base);
  snprintf (what, sizeof what, "uid base %u (choose another with --uid-base)",
            (unsigned) cfg->uid_base);
  if (take_name (name, what) < 0)
    return -1;
  return 0;
}

/* fds 0-2 must be open: otherwise the first file we open becomes "stdout". */
static void
ensure_stdio (void)
{
  int fd;

  while ((fd = open ("/dev/null", O_RDWR)) >= 0 && fd <= 2)
    ;
  if (fd > 2)
    close (fd);
}

int
main (int argc, char **argv)
{
  struct sbx_config cfg;
  sbx_error_t *err = NULL;
  struct rlimit rl;
  sigset_t mask;
  siginfo_t info;
  int rc;

  /* A fixed mmap threshold: every command's output ring (256 KiB for a
     stream, 1 MiB in the background) and large bodies are mmapped and go
     back to the kernel when freed. With glibc's default the threshold
     rises after the first such free, they come from the per-thread arenas
     instead, and the freed space stays: measured in the soak, idle RSS 31
     MB creeping ~1 MB per 10000 requests, against 16 MB and flat. */
  mallopt (M_MMAP_THRESHOLD, 128 * 1024);
  ensure_stdio ();
  sbx_config_defaults (&cfg);
  rc = parse_args (argc, argv, &cfg);
  if (rc)
    return rc;
  if (geteuid () != 0)
    {
      fprintf (stderr, "sbx serve: must run as root (it creates namespaces and cgroups)\n");
      return 1;
    }
  umask (022);
  /* No supplementary groups: file operations on behalf of sandboxes must
     carry the sandbox user's ids only. */
  if (setgroups (0, NULL) < 0)
    {
      perror ("sbx serve: setgroups");
      return 1;
    }
  /* Each sandbox holds a handful of fds here (pidfd, control socket, root,
     cgroups) and each stream a few more. */
  if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max)
    {
      rl.rlim_cur = rl.rlim_max;
      setrlimit (RLIMIT_NOFILE, &rl);
    }
  signal (SIGPIPE, SIG_IGN);
  /* Termination signals are taken synchronously by main; every thread
     created from here on inherits the mask. */
  sigemptyset (&mask);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGINT);
  sigaddset (&mask, SIGHUP);
  sigaddset (&mask, SIGQUIT);
  pthread_sigmask (SIG_BLOCK, &mask, NULL);

  if (mkdir (cfg.state_dir, 0700) < 0 && errno != EEXIST)
    {
      fprintf (stderr, "sbx serve: create `%s`: %s\n", cfg.state_dir, strerror (errno));
      return 1;
    }
  /* The lock fds stay open (close-on-exec) until we exit. */
  if (take_host_locks (&cfg) < 0)
    return 1;

  if (sbx_core_start (&cfg, &err) < 0)
    {
      fprintf (stderr, "sbx serve: %s\n", err->msg);
      sbx_error_free (err);
      sbx_core_stop ();
      sbx_core_free ();
      return 1;
    }
  if (sbx_server_start (cfg.state_dir, cfg.listen, &err) < 0)
    {
      fprintf (stderr, "sbx serve: %s\n", err->msg);
      sbx_error_free (err);
      sbx_core_stop ();
      sbx_core_free ();
      return 1;
    }
  sbx_info ("sbx ready (state %s)", cfg.state_dir);

  while (sigwaitinfo (&mask, &info) < 0)
    if (errno != EINTR)
      break;
  sbx_info ("signal %d: stopping; every sandbox is killed", info.si_signo);
  sbx_server_quiesce ();
  sbx_core_stop ();
  sbx_server_stop ();
  sbx_core_free ();
  sbx_info ("stopped");
  return 0;
}
