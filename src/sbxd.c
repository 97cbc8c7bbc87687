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
#include <pwd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "core/audit.h"
#include "core/core.h"
#include "egress/egress.h"
#include "egress/tls.h"
#include "iso/cgroup.h"
#include "iso/inuse.h"
#include "iso/kernel.h"
#include "iso/proto.h"
#include "iso/tmpl.h"
#include "iso/vm.h"
#include "priv/frontend.h"
#include "priv/server.h"
#include "server/server.h"
#include "util/cleanup.h"
#include "util/file.h"
#include "util/log.h"
#include "util/parse.h"

static const char usage[]
    = "usage: sbx serve [OPTIONS]\n"
      "\n"
      "  --state DIR          state directory (default $SBX_STATE or /var/lib/sbx)\n"
      "  --listen HOST:PORT   also serve HTTP on TCP (API keys required there)\n"
      "  --socket-group NAME  the unix socket root:NAME 0660: the group's members are\n"
      "                       the administrator, as root is (off: root only)\n"
      "  --pool N             pre-built idle sandboxes kept ready (default 4)\n"
      "  --max-sandboxes N    running sandboxes allowed at once (default 1024)\n"
      "  --uid-base N         first host uid of the sandboxes' id ranges (default 1610612736)\n"
      "  --cgroup-root DIR    cgroup filesystem (default /sys/fs/cgroup)\n"
      "  --cgroup-parent NAME cgroup under which sandboxes live (default sbx)\n"
      "  --max-timeout DUR    longest sandbox lifetime allowed (default 24h)\n"
      "  --proxy-timeout DUR  port proxy: how long a server in a sandbox may stay\n"
      "                       silent before the request fails (default 60s)\n"
      "  --metrics-interval DUR  how often each sandbox's metrics are kept for its\n"
      "                       history (1s to 1m, default 5s; the last 720 are kept)\n"
      "  --audit-max-size N   rotate the audit log at this size (default 64M, min 4K)\n"
      "  --template-max-size N  largest template upload and unpacked template (default 2G/4G)\n"
      "  --template-max-files N files one template may hold (default 500000)\n"
      "  --tenant-templates N   templates one tenant (an API key's) may own (default 16)\n"
      "  --tenant-template-bytes N  their bytes together (default 8G)\n"
      "  --tenant-snapshot-bytes N  a tenant's snapshots' bytes together (default 8G)\n"
      "  --template-mirror URL  Debian mirror of recipe templates (default deb.debian.org)\n"
      "  --template-cache DIR   keep recipe builds here, by recipe hash (default in STATE)\n"
      "  --log-level LEVEL    debug, info, warn or error (default info)\n"
      "  --kill-on-exit       kill running sandboxes when stopped (default: they keep\n"
      "                       running and the next start re-adopts them)\n"
      "  --user NAME          account of the unprivileged HTTP front end (default sbx)\n"
      "  --isolation ENGINE   default engine of a create that names none: namespace\n"
      "                       (the default) or vm (a QEMU microVM, docs/vm.md)\n"
      "  --vm-dir DIR         the microVM guest's kernel and files (default\n"
      "                       " SBX_VM_DIR_DEFAULT ")\n"
      "  --domain NAME        E2B sandbox domain: Host PORT-ID.NAME reaches that port of\n"
      "                       that sandbox (default: by E2b-Sandbox-Id headers only)\n"
      "  --egress-max-bytes N bytes each sandbox may move through the egress proxy\n"
      "                       (both ways, while the daemon runs; default unbounded)\n"
      "  --egress-idle-timeout DUR  close an egress connection silent both ways this\n"
      "                       long (default 5m)\n"
      "  --egress-connections N  egress connections open at once, in all (default\n"
      "                       1024); --egress-tenant-connections N one tenant's\n"
      "                       sandboxes together (default a quarter of all), and\n"
      "                       --egress-sandbox-connections N one sandbox (default 64)\n"
      "  --code-start-timeout DUR  how long a code-interpreter sandbox's server may\n"
      "                       take to start (importing numpy, pandas, matplotlib;\n"
      "                       default 60s, for slow or emulated hosts up to 10m)\n"
      "  --e2b-open-internet  an E2B create that says nothing of the network gets\n"
      "                       the internet (through the egress proxy), as at E2B;\n"
      "                       default: no network, as any sbx sandbox\n"
      "  --read-only-root     keep sandboxes' \"/\" read-only for root inside too\n"
      "                       (default: root inside may write it, on the\n"
      "                       sandbox's disk; /usr and the host's files stay\n"
      "                       read-only either way)\n"
      "  --require-hardened-host  refuse to start while a kernel setting\n"
      "                       docs/security.md recommends is weak (default: warn)\n"
      "  --egress-allow-private  TESTS ONLY: let the egress proxy reach loopback and\n"
      "                       private addresses (SSRF protection off)\n"
      "  --egress-upstream-ca FILE  TESTS ONLY: also trust the CA certificates in\n"
      "                       FILE (PEM) for upstreams of hosts with credential rules\n";

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
      if (strcmp (opt, "--kill-on-exit") == 0)
        {
          cfg->kill_on_exit = 1;
          continue;
        }
      if (strcmp (opt, "--egress-allow-private") == 0)
        {
          cfg->egress_allow_private = 1;
          continue;
        }
      if (strcmp (opt, "--require-hardened-host") == 0)
        {
          cfg->require_hardened_host = 1;
          continue;
        }
      if (strcmp (opt, "--e2b-open-internet") == 0)
        {
          cfg->e2b_open_internet = 1;
          continue;
        }
      if (strcmp (opt, "--read-only-root") == 0)
        {
          cfg->engine.read_only_root = 1;
          continue;
        }
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
      else if (strcmp (name, "--isolation") == 0)
        {
          if (strcmp (val, "namespace") == 0)
            cfg->default_isolation = SBX_ISOLATION_NS;
          else if (strcmp (val, "vm") == 0)
            cfg->default_isolation = SBX_ISOLATION_VM;
          else
            return fail ("--isolation must be `namespace` or `vm`, not `%s`", val);
        }
      else if (strcmp (name, "--vm-dir") == 0)
        {
          if (val[0] != '/' || strlen (val) >= sizeof cfg->vm_dir)
            return fail ("--vm-dir must be an absolute path, not `%s`", val);
          snprintf (cfg->vm_dir, sizeof cfg->vm_dir, "%s", val);
          cfg->engine.vm_dir = cfg->vm_dir;
        }
      else if (strcmp (name, "--listen") == 0)
        snprintf (cfg->listen, sizeof cfg->listen, "%s", val);
      else if (strcmp (name, "--socket-group") == 0)
        {
          /* Whoever connects to the socket is the administrator (every
             tenant's sandboxes, keys, secrets' names, recipe builds): a
             group of its own, as docker's, and as trusted as root. */
          struct group gr, *found = NULL;
          char buf[4096];
          if (getgrnam_r (val, &gr, buf, sizeof buf, &found) != 0 || found == NULL)
            return fail ("--socket-group `%s`: no such group", val);
          if (found->gr_gid == 0)
            return fail ("--socket-group `%s` is root's group: the socket is root's already", val);
          cfg->socket_gid = (long) found->gr_gid;
        }
      else if (strcmp (name, "--user") == 0)
        {
          if (val[0] == '\0' || strlen (val) >= sizeof cfg->frontend_user)
            return fail ("--user `%s` is not an account name", val);
          snprintf (cfg->frontend_user, sizeof cfg->frontend_user, "%s", val);
        }
      else if (strcmp (name, "--domain") == 0)
        {
          /* A DNS name: letters, digits, `-` and `.`; what the SDK joins
             to PORT-ID. */
          if (val[0] == '\0' || val[0] == '.' || val[0] == '-'
              || strlen (val) >= sizeof cfg->domain
              || strspn (val, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.")
                     != strlen (val))
            return fail ("--domain `%s` is not a DNS name", val);
          snprintf (cfg->domain, sizeof cfg->domain, "%s", val);
        }
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
        {
          /* Plain components, relative to the daemon's own subtree or,
             with a leading `/`, to the root: "" or "/" would make a
             hierarchy's root our parent, whose every child a start
             removes as a leftover. */
          const char *rel = val[0] == '/' ? val + 1 : val;
          if (!sbx_plan_path_ok (rel, strlen (rel)) || strspn (rel, "abcdefghijklmnopqrstuvwxyz"
                                                                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                                    "0123456789._-/")
                                                            != strlen (rel))
            return fail ("--cgroup-parent `%s` must be a path of letters, digits, `.`, `_`,"
                         " `-` and `/` (relative: under the daemon's own cgroup; with a"
                         " leading `/`: from the root)",
                         val);
          cfg->engine.cgroup_parent = val;
        }
      else if (strcmp (name, "--max-timeout") == 0)
        {
          if (sbx_parse_duration_ms (val, &n, &err) < 0 || n < 1000)
            {
              sbx_error_free (err);
              return fail ("--max-timeout `%s` is not a duration of 1s or more", val);
            }
          cfg->max_timeout_ms = n;
        }
      else if (strcmp (name, "--proxy-timeout") == 0)
        {
          if (sbx_parse_duration_ms (val, &n, &err) < 0 || n < 1000 || n > 3600 * 1000)
            {
              sbx_error_free (err);
              return fail ("--proxy-timeout `%s` is not a duration of 1s to 1h", val);
            }
          cfg->proxy_idle_ms = n;
        }
      else if (strcmp (name, "--metrics-interval") == 0)
        {
          if (sbx_parse_duration_ms (val, &n, &err) < 0 || n < 1000 || n > 60 * 1000)
            {
              sbx_error_free (err);
              return fail ("--metrics-interval `%s` is not a duration of 1s to 1m", val);
            }
          cfg->metrics_interval_ms = n;
        }
      else if (strcmp (name, "--egress-max-bytes") == 0)
        {
          if (sbx_parse_size (val, &n, &err) < 0 || n == 0)
            {
              sbx_error_free (err);
              return fail ("--egress-max-bytes `%s` is not a size of 1 byte or more", val);
            }
          cfg->egress_max_bytes = n;
        }
      else if (strcmp (name, "--egress-upstream-ca") == 0)
        {
          if (val[0] != '/')
            return fail ("--egress-upstream-ca must be an absolute path, not `%s`", val);
          cfg->egress_upstream_ca = val;
        }
      else if (strcmp (name, "--egress-idle-timeout") == 0)
        {
          if (sbx_parse_duration_ms (val, &n, &err) < 0 || n < 1000 || n > 24 * 3600 * 1000)
            {
              sbx_error_free (err);
              return fail ("--egress-idle-timeout `%s` is not a duration of 1s to 24h", val);
            }
          cfg->egress_idle_ms = n;
        }
      else if (strcmp (name, "--code-start-timeout") == 0)
        {
          if (sbx_parse_duration_ms (val, &n, &err) < 0 || n < 1000 || n > 600 * 1000)
            {
              sbx_error_free (err);
              return fail ("--code-start-timeout `%s` is not a duration of 1s to 10m", val);
            }
          cfg->code_start_ms = n;
        }
      else if (strcmp (name, "--template-max-size") == 0)
        {
          if (sbx_parse_size (val, &n, &err) < 0 || n < 4096)
            {
              sbx_error_free (err);
              return fail ("--template-max-size `%s` is not a size of 4K or more", val);
            }
          cfg->template_max_bytes = n;
          cfg->template_max_upload = n;
        }
      else if (strcmp (name, "--template-mirror") == 0)
        {
          if ((strncmp (val, "http://", 7) != 0 && strncmp (val, "https://", 8) != 0)
              || strlen (val) >= sizeof cfg->template_mirror || strpbrk (val, " \t\n'\"\\") != NULL)
            return fail ("--template-mirror `%s` is not an http(s) URL", val);
          snprintf (cfg->template_mirror, sizeof cfg->template_mirror, "%s", val);
        }
      else if (strcmp (name, "--template-cache") == 0)
        {
          if (val[0] != '/' || strlen (val) >= sizeof cfg->template_cache)
            return fail ("--template-cache `%s` is not an absolute path", val);
          snprintf (cfg->template_cache, sizeof cfg->template_cache, "%s", val);
        }
      else if (strcmp (name, "--egress-connections") == 0
               || strcmp (name, "--egress-tenant-connections") == 0
               || strcmp (name, "--egress-sandbox-connections") == 0)
        {
          char *end;
          errno = 0;
          n = strtoull (val, &end, 10);
          if (errno || *end || *val == '\0' || n < 1 || n > 65536)
            return fail ("%s `%s` is not a count (1 .. 65536)", name, val);
          if (strcmp (name, "--egress-connections") == 0)
            cfg->egress_max_total = (unsigned) n;
          else if (strcmp (name, "--egress-tenant-connections") == 0)
            cfg->egress_max_tenant = (unsigned) n;
          else
            cfg->egress_max_sandbox = (unsigned) n;
        }
      else if (strcmp (name, "--tenant-templates") == 0)
        {
          char *end;
          errno = 0;
          n = strtoull (val, &end, 10);
          if (errno || *end || *val == '\0' || n > 100000)
            return fail ("--tenant-templates `%s` is not a count (0 .. 100000)", val);
          cfg->tenant_max_templates = (unsigned) n;
        }
      else if (strcmp (name, "--tenant-template-bytes") == 0
               || strcmp (name, "--tenant-snapshot-bytes") == 0)
        {
          if (sbx_parse_size (val, &n, &err) < 0)
            {
              sbx_error_free (err);
              return fail ("%s `%s` is not a size", name, val);
            }
          if (strcmp (name, "--tenant-template-bytes") == 0)
            cfg->tenant_template_bytes = n;
          else
            cfg->tenant_snapshot_bytes = n;
        }
      else if (strcmp (name, "--template-max-files") == 0)
        {
          char *end;
          errno = 0;
          n = strtoull (val, &end, 10);
          if (errno || *end || n < 16 || n > 100000000)
            return fail ("--template-max-files `%s` is not a count of 16 or more", val);
          cfg->template_max_inodes = n;
        }
      else if (strcmp (name, "--audit-max-size") == 0)
        {
          if (sbx_parse_size (val, &n, &err) < 0 || n < 4096)
            {
              sbx_error_free (err);
              return fail ("--audit-max-size `%s` is not a size of 4K or more", val);
            }
          cfg->audit_max_size = n;
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
   parent (each removes "leftover" cgroups under its parent at start; named
   by its path from the cgroup root) or a uid range (their sandboxes could
   then signal each other). */
static int
take_host_locks (const struct sbx_config *cfg, const char *parent)
{
  char path[700], what[600], name[100], hex[2 * SHA256_DIGEST_LENGTH + 1];
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

/* The front end's account: its own user, never root. */
static int
frontend_account (const char *name, uid_t *uid, gid_t *gid)
{
  struct passwd *pw = getpwnam (name);

  if (pw == NULL)
    {
      fprintf (stderr,
               "sbx serve: no account `%s` for the unprivileged front end (create it with"
               " `useradd --system --no-create-home --shell /usr/sbin/nologin %s`, or pass"
               " --user)\n",
               name, name);
      return -1;
    }
  if (pw->pw_uid == 0 || pw->pw_gid == 0)
    {
      fprintf (stderr, "sbx serve: the front end's account `%s` must not be root\n", name);
      return -1;
    }
  *uid = pw->pw_uid;
  *gid = pw->pw_gid;
  return 0;
}

/* The state directory belongs to the front end (SQLite and the audit log
   live there; it may not mkdir, so its audit directory is made here); the
   lock file and the admin socket stay root's. */
static int
give_state_dir (const char *dir, uid_t uid, gid_t gid)
{
  static const char *const files[] = {"sbx.db", "sbx.db-wal", "sbx.db-shm"};
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  size_t i;

  if (fd < 0 || fchown (fd, uid, gid) < 0 || fchmod (fd, 0700) < 0)
    {
      fprintf (stderr, "sbx serve: `%s`: %s\n", dir, strerror (errno));
      if (fd >= 0)
        close (fd);
      return -1;
    }
  if ((mkdirat (fd, SBX_AUDIT_DIR, 0700) < 0 && errno != EEXIST)
      || fchownat (fd, SBX_AUDIT_DIR, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
    {
      fprintf (stderr, "sbx serve: `%s/" SBX_AUDIT_DIR "`: %s\n", dir, strerror (errno));
      close (fd);
      return -1;
    }
  for (i = 0; i < sizeof files / sizeof *files; i++)
    if (fchownat (fd, files[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOENT)
      {
        fprintf (stderr, "sbx serve: `%s/%s`: %s\n", dir, files[i], strerror (errno));
        close (fd);
        return -1;
      }
  close (fd);
  return 0;
}

/* What a start made before it refused: removed again, so that a refusal
   leaves the host as it found it. */
struct start_undo
{
  const struct sbx_cgroup_place *place; /* the daemon moved into its leaf */
  int made_state;             /* the state directory is new */
  int made_ca;                /* its egress CA directory is new */
  int published;              /* its CA is in /run/sbx (sbx_egress_ca_ensure ran) */
  struct sbx_engine *engine;  /* opened: its cgroup parents go with it */
};

static int
state_has (const char *state_dir, const char *name)
{
  char path[700];
  struct stat st;

  snprintf (path, sizeof path, "%s/%s", state_dir, name);
  return lstat (path, &st) == 0;
}

static void
undo_start (const struct sbx_config *cfg, const struct start_undo *undo, int listen_fds[2])
{
  char path[700];
  int i;

  if (undo->engine)
    sbx_engine_close (undo->engine);
  if (undo->place)
    sbx_cgroup_leave (cfg->engine.cgroup_mount ? cfg->engine.cgroup_mount : "/sys/fs/cgroup",
                      undo->place);
  /* Another daemon's socket and CA (it holds the state directory) are
     not ours: only what this start made goes. */
  if (listen_fds[0] >= 0)
    {
      snprintf (path, sizeof path, "%s/sbx.sock", cfg->state_dir);
      unlink (path);
    }
  for (i = 0; i < 2; i++)
    if (listen_fds[i] >= 0)
      close (listen_fds[i]);
  if (undo->published)
    sbx_egress_ca_unpublish (cfg->state_dir);
  if (undo->made_state)
    {
      /* All of it is ours: made by this start. */
      sbx_remove_tree_at (AT_FDCWD, cfg->state_dir, 16);
      return;
    }
  if (undo->made_ca)
    {
      int sd = open (cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (sd >= 0)
        {
          sbx_remove_tree_at (sd, SBX_EGRESS_CA_DIR, 2);
          close (sd);
        }
    }
}

struct frontend
{
  pid_t pid;
  pthread_t serving;
  int master;
};

/* The argument vector of a child that is this binary again (the front end,
   the egress proxy): ours with FLAG and a spec string put in front. Made
   once at start, so that a restart, which may come while the host is out
   of memory, allocates nothing (an allocation failure there would end the
   parent and with it every sandbox's daemon side). */
struct child_argv
{
  char **argv; /* argv[2] is spec */
  char flag[16];
  char spec[128];
};

static void
child_argv_init (struct child_argv *c, char **argv, int argc, const char *flag)
{
  int i;

  c->argv = calloc ((size_t) argc + 3, sizeof *c->argv);
  if (c->argv == NULL)
    sbx_oom ();
  snprintf (c->flag, sizeof c->flag, "%s", flag);
  c->argv[0] = argv[0];
  c->argv[1] = c->flag;
  c->argv[2] = c->spec;
  for (i = 1; i < argc; i++)
    c->argv[i + 2] = argv[i];
}

/* fork + exec ourselves as the front end: a fresh process with nothing of
   ours in its memory (and no locks another thread held at fork). */
static int
spawn_frontend (int self, struct child_argv *c, const int listen_fds[2], int egress_fd,
                uid_t uid, gid_t gid, struct frontend *fe)
{
  int sv[2];

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return -1;
  snprintf (c->spec, sizeof c->spec, "%d,%d,%d,%u,%u,%d", sv[1], listen_fds[0], listen_fds[1],
            (unsigned) uid, (unsigned) gid, egress_fd);
  fe->pid = fork ();
  if (fe->pid == 0)
    {
      /* Only async-signal-safe calls until exec. */
      fcntl (sv[1], F_SETFD, 0);
      fcntl (listen_fds[0], F_SETFD, 0);
      if (listen_fds[1] >= 0)
        fcntl (listen_fds[1], F_SETFD, 0);
      fcntl (egress_fd, F_SETFD, 0);
      syscall (SYS_execveat, self, "", c->argv, environ, AT_EMPTY_PATH);
      _exit (127);
    }
  close (sv[1]);
  if (fe->pid < 0)
    {
      close (sv[0]);
      return -1;
    }
  fe->master = sv[0];
  return 0;
}

/* fork + exec ourselves as the egress proxy (egress/main.c), given its
   end of the channel the front end hands it connections on. The parent
   keeps both ends: either side restarts without the other noticing. */
static pid_t
spawn_egress (int self, struct child_argv *c, int channel, uid_t uid, gid_t gid)
{
  pid_t pid;

  snprintf (c->spec, sizeof c->spec, "%d,%u,%u", channel, (unsigned) uid, (unsigned) gid);
  pid = fork ();
  if (pid == 0)
    {
      fcntl (channel, F_SETFD, 0);
      syscall (SYS_execveat, self, "", c->argv, environ, AT_EMPTY_PATH);
      _exit (127);
    }
  return pid;
}

static int
egress_main_from_args (int argc, char **argv)
{
  struct sbx_config cfg;
  struct sbx_egress_opts o;
  int channel, rc;
  unsigned uid, gid;

  if (argc < 3 || sscanf (argv[2], "%d,%u,%u", &channel, &uid, &gid) != 3)
    return 2;
  argv[2] = argv[0];
  sbx_config_defaults (&cfg);
  rc = parse_args (argc - 2, argv + 2, &cfg);
  if (rc)
    return rc;
  fcntl (channel, F_SETFD, FD_CLOEXEC);
  sbx_egress_opts_defaults (&o);
  o.allow_private = cfg.egress_allow_private;
  o.max_bytes = cfg.egress_max_bytes;
  if (cfg.egress_max_total)
    o.max_total = cfg.egress_max_total;
  if (cfg.egress_max_sandbox)
    o.max_conns = cfg.egress_max_sandbox;
  /* A tenant's bound: a quarter of all, unless given (never above all). */
  o.max_tenant = cfg.egress_max_tenant ? cfg.egress_max_tenant : o.max_total / 4;
  if (o.max_tenant == 0)
    o.max_tenant = 1;
  if (o.max_tenant > o.max_total)
    o.max_tenant = o.max_total;
  if (cfg.egress_idle_ms)
    o.idle_ms = cfg.egress_idle_ms;
  o.state_dir = cfg.state_dir;
  o.upstream_ca = cfg.egress_upstream_ca;
  o.build_mirror = cfg.template_mirror;
  return sbx_egress_main (&o, channel, (uid_t) uid, (gid_t) gid);
}

static void *
serve_frontend (void *arg)
{
  struct frontend *fe = arg;

  sbx_priv_serve_master (fe->master);
  close (fe->master);
  return NULL;
}

/* The front end's pid is gone: 1 if it was ours and it died. */
static int
reaped (pid_t pid, int *status)
{
  pid_t r;

  do
    r = waitpid (pid, status, WNOHANG);
  while (r < 0 && errno == EINTR);
  return r == pid;
}

static int
frontend_main_from_args (int argc, char **argv)
{
  struct sbx_config cfg;
  int master, fds[2], rc, egress_fd;
  unsigned uid, gid;

  if (argc < 3
      || sscanf (argv[2], "%d,%d,%d,%u,%u,%d", &master, &fds[0], &fds[1], &uid, &gid, &egress_fd)
             != 6)
    return 2;
  /* The rest are the parent's own arguments. */
  argv[2] = argv[0];
  sbx_config_defaults (&cfg);
  rc = parse_args (argc - 2, argv + 2, &cfg);
  if (rc)
    return rc;
  fcntl (master, F_SETFD, FD_CLOEXEC);
  fcntl (fds[0], F_SETFD, FD_CLOEXEC);
  if (fds[1] >= 0)
    fcntl (fds[1], F_SETFD, FD_CLOEXEC);
  fcntl (egress_fd, F_SETFD, FD_CLOEXEC);
  cfg.egress_fd = egress_fd;
  return sbx_frontend_main (&cfg, master, fds, (uid_t) uid, (gid_t) gid);
}

#if defined(__SANITIZE_ADDRESS__)
/* Sanitizer builds only. A VM's relay is exec'd with a clean environment
   (no ASAN_OPTIONS) and is charged to its sandbox's memory cgroup: ASan's
   default 256 MiB quarantine of freed frames could outgrow the VM's
   overhead allowance (VM_OVERHEAD_BYTES) and get it OOM-killed in a test
   that moves a lot of data. ASAN_OPTIONS, where set, still overrides this
   per option. */
const char *__asan_default_options (void);
const char *
__asan_default_options (void)
{
  return "quarantine_size_mb=8";
}
#endif

/* `sbxd --cgroup-holder`: what sbx-sandboxes.service runs (share/systemd).
   It holds the delegated cgroup the daemon's sandboxes live in, so that
   the daemon's own unit can be restarted (upgraded) while they run: with
   systemd before 254 a unit whose cgroup has sandboxes below it cannot be
   started again (docs/architecture.md, Cgroups). It moves into its leaf,
   enables the controllers, and waits for its stop, which systemd makes the
   end of every sandbox below it. */
/* Tell systemd we are ready (Type=notify: sbx.service starts only once
   the controllers are given, or its own write would race ours), the
   protocol of sd_notify(3) without libsystemd: one datagram to
   $NOTIFY_SOCKET. */
static void
notify_ready (void)
{
  const char *path = getenv ("NOTIFY_SOCKET");
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  socklen_t len;
  int fd;

  if (path == NULL || (path[0] != '/' && path[0] != '@') || strlen (path) >= sizeof sa.sun_path)
    return;
  memcpy (sa.sun_path, path, strlen (path));
  if (path[0] == '@')
    sa.sun_path[0] = '\0';
  len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + strlen (path));
  fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  (void) sendto (fd, "READY=1", 7, MSG_NOSIGNAL, (struct sockaddr *) &sa, len);
  close (fd);
}

static time_t
mono_s (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static int
cgroup_holder_main (void)
{
  sbx_error_t *err = NULL;
  sigset_t set;
  int sig = 0;

  if (sbx_cgroup_hold ("/sys/fs/cgroup", &err) < 0)
    {
      fprintf (stderr, "sbxd --cgroup-holder: %s\n", err->msg);
      sbx_error_free (err);
      return 1;
    }
  notify_ready ();
  sigemptyset (&set);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGINT);
  sigprocmask (SIG_BLOCK, &set, NULL);
  sigwait (&set, &sig);
  return 0;
}

/* The kernel settings docs/security.md recommends (iso/kernel_settings.h),
   read for HELLO (the front end warns of each weak one once it serves), or
   a refusal under --require-hardened-host. */
static int
check_kernel_settings (const struct sbx_config *cfg)
{
  cleanup_close int procsys = open ("/proc/sys", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char weak[512];

  sbx_kernel_settings_read (procsys, sbx_kernel.settings);
  if (sbx_kernel_settings_weak_list (sbx_kernel.settings, weak, sizeof weak) == 0)
    return 0;
  if (cfg->require_hardened_host)
    {
      fprintf (stderr,
               "sbx serve: weak kernel settings (--require-hardened-host): %s; see"
               " docs/security.md, Deploying\n",
               weak);
      return -1;
    }
  return 0;
}

int
main (int argc, char **argv)
{
  /* iso/vm.c runs this binary as a microVM's relay (docs/vm.md). */
  if (argc > 1 && strcmp (argv[1], SBX_VM_RELAY_ARG) == 0)
    return sbx_vm_relay_main (argc, argv);
  struct sbx_config cfg;
  struct sbx_engine engine;
  struct frontend fe = {0};
  sbx_error_t *err = NULL;
  struct rlimit rl;
  sigset_t mask;
  siginfo_t info;
  int rc, self, listen_fds[2] = {-1, -1}, restarts = 0, status = 0, egress[2];
  int egress_restarts = 0;
  struct start_undo undo = {0};
  struct child_argv egress_argv, frontend_argv;
  struct sbx_cgroup_place place;
  char place_parent[520];
  const char *cgroup_mount;
  pid_t egress_pid;
  time_t egress_start, egress_next = 0;
  time_t last_start;
  uid_t fe_uid;
  gid_t fe_gid;

  /* A fixed mmap threshold: every command's output ring (256 KiB for a
     stream, 1 MiB in the background) and large bodies are mmapped and go
     back to the kernel when freed. With glibc's default the threshold
     rises after the first such free, they come from the per-thread arenas
     instead, and the freed space stays: measured in the soak, idle RSS 31
     MB creeping ~1 MB per 10000 requests, against 16 MB and flat. */
  mallopt (M_MMAP_THRESHOLD, 128 * 1024);
  ensure_stdio ();
  /* The daemon outlives allocation failures (see error.h): requests fail
     with 503, and JSON answers that lost a part are never sent. */
  sbx_oom_soft = 1;
  sbx_json_checked_alloc ();
  if (argc >= 2 && strcmp (argv[1], "--frontend") == 0)
    return frontend_main_from_args (argc, argv);
  if (argc >= 2 && strcmp (argv[1], "--egress") == 0)
    return egress_main_from_args (argc, argv);
  if (argc == 2 && strcmp (argv[1], "--cgroup-holder") == 0)
    return cgroup_holder_main ();
  sbx_config_defaults (&cfg);
  rc = parse_args (argc, argv, &cfg);
  if (rc)
    return rc;
  if (geteuid () != 0)
    {
      fprintf (stderr, "sbx serve: must run as root (it creates namespaces and cgroups)\n");
      return 1;
    }
  /* The kernel first: a kernel below the floor is one line, before
     anything exists on the host (iso/kernel.h). */
  if (sbx_kernel_probe (&sbx_kernel, &err) < 0)
    {
      fprintf (stderr, "sbx serve: %s\n", err->msg);
      sbx_error_free (err);
      return 1;
    }
  if (check_kernel_settings (&cfg) < 0)
    return 1;
  umask (022);
  /* No supplementary groups: file operations on behalf of sandboxes must
     carry the sandbox user's ids only. */
  if (setgroups (0, NULL) < 0)
    {
      perror ("sbx serve: setgroups");
      return 1;
    }
  /* Each sandbox holds a handful of fds here (pidfd, root, cgroups) and in
     the front end (pidfd, control socket, streams). */
  if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max)
    {
      rl.rlim_cur = rl.rlim_max;
      setrlimit (RLIMIT_NOFILE, &rl);
    }
  signal (SIGPIPE, SIG_IGN);
  /* Started with SIGCHLD ignored, children would be reaped by the kernel
     and every waitpid fail with ECHILD; the termination signals keep
     what the daemon was started with (nohup's SIGHUP stays ignored). */
  signal (SIGCHLD, SIG_DFL);
  /* Termination signals and the front end's death are taken synchronously
     by main; every thread created from here on inherits the mask. */
  sigemptyset (&mask);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGINT);
  sigaddset (&mask, SIGHUP);
  sigaddset (&mask, SIGQUIT);
  sigaddset (&mask, SIGCHLD);
  pthread_sigmask (SIG_BLOCK, &mask, NULL);

  if (mkdir (cfg.state_dir, 0700) == 0)
    undo.made_state = 1;
  else if (errno != EEXIST)
    {
      fprintf (stderr, "sbx serve: create `%s`: %s\n", cfg.state_dir, strerror (errno));
      return 1;
    }
  /* Where the sandboxes' cgroups go: below the daemon's own, delegated
     cgroup where it has one (iso/cgroup.h). */
  cgroup_mount = cfg.engine.cgroup_mount ? cfg.engine.cgroup_mount : "/sys/fs/cgroup";
  if (sbx_cgroup_place (cgroup_mount,
                        cfg.engine.cgroup_parent ? cfg.engine.cgroup_parent : "sbx", &place,
                        &err)
      < 0)
    {
      fprintf (stderr, "sbx serve: %s\n", err->msg);
      sbx_error_free (err);
      undo_start (&cfg, &undo, listen_fds);
      return 1;
    }
  if (place.move_to_leaf && getenv ("INVOCATION_ID") != NULL && strlen (place.base) > 8
      && strcmp (place.base + strlen (place.base) - 8, ".service") == 0)
    {
      /* systemd started us at the root of our service's cgroup, so it has
         no DelegateSubgroup= (systemd 254) to start us in a leaf:
         sandboxes below it would make the unit's next start fail (a
         process may not join a cgroup that gives controllers to its
         children: 219/CGROUP, seen with Debian 12's systemd 252). */
      fprintf (stderr,
               "sbx serve: systemd started sbx at the root of its unit's cgroup /%s, and"
               " sandboxes below it would make the unit's next start fail: use the shipped"
               " units (share/systemd: sbx-sandboxes.service holds the sandboxes' cgroups), or"
               " DelegateSubgroup=" SBX_CGROUP_DAEMON_LEAF " with systemd 254 or newer\n",
               place.base);
      undo_start (&cfg, &undo, listen_fds);
      return 1;
    }
  cfg.engine.cgroup_place = &place;
  snprintf (place_parent, sizeof place_parent, "%s%s%s", place.base, place.base[0] ? "/" : "",
            place.parent);
  /* The lock fds stay open (close-on-exec) until we exit. */
  if (take_host_locks (&cfg, place_parent) < 0
      || frontend_account (cfg.frontend_user, &fe_uid, &fe_gid) < 0
      || give_state_dir (cfg.state_dir, fe_uid, fe_gid) < 0)
    {
      undo_start (&cfg, &undo, listen_fds);
      return 1;
    }
  /* The names only guard running daemons; sandboxes outlive theirs. */
  if (sbx_iso_check_unshared (cgroup_mount,
                              place_parent, cfg.uid_base,
                              (uint64_t) cfg.uid_base
                                  + (uint64_t) (cfg.max_sandboxes + cfg.pool_size + 16)
                                        * SBX_IDS_PER_SANDBOX,
                              &err)
      < 0)
    {
      fprintf (stderr, "sbx serve: %s\n", err->msg);
      sbx_error_free (err);
      undo_start (&cfg, &undo, listen_fds);
      return 1;
    }
  self = open ("/proc/self/exe", O_PATH | O_CLOEXEC);
  if (self < 0)
    {
      perror ("sbx serve: /proc/self/exe");
      return 1;
    }
  /* What the state directory's filesystem can do: overlay layers, and
     snapshots as idmapped layers or copies (iso/kernel.h). */
  {
    int sd = open (cfg.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sd >= 0)
      {
        sbx_kernel_probe_state (&sbx_kernel, sd);
        close (sd);
      }
  }
  /* The egress CA, for hosts with credential rules (egress/tls.h): before
     the templates, which give sandboxes its certificate. */
  undo.made_ca = !state_has (cfg.state_dir, SBX_EGRESS_CA_DIR);
  undo.published = 1;
  if (cfg.socket_gid >= 0)
    {
      /* The group reaches the socket only through the state directory. */
      struct stat sd;
      if (stat (cfg.state_dir, &sd) == 0 && !(sd.st_mode & S_IXOTH)
          && !((gid_t) cfg.socket_gid == sd.st_gid && (sd.st_mode & S_IXGRP)))
        fprintf (stderr,
                 "sbx serve: warning: --socket-group: the state directory `%s` (mode %03o) is"
                 " not searchable by the group, so its members cannot reach the socket"
                 " (chmod o+x, or chgrp it with g+x)\n",
                 cfg.state_dir, (unsigned) (sd.st_mode & 0777));
    }
  if (sbx_egress_ca_ensure (cfg.state_dir, &err) < 0
      || sbx_server_listen (cfg.state_dir, cfg.listen, cfg.socket_gid, listen_fds, &err) < 0
      || (undo.place = &place, sbx_engine_open (&engine, &cfg.engine, &err) < 0)
      || (undo.engine = &engine, sbx_priv_server_init (&cfg, &engine, &err) < 0))
    {
      fprintf (stderr, "sbx serve: %s\n", err->msg);
      sbx_error_free (err);
      undo_start (&cfg, &undo, listen_fds);
      return 1;
    }

  child_argv_init (&egress_argv, argv, argc, "--egress");
  child_argv_init (&frontend_argv, argv, argc, "--frontend");
  /* The egress proxy: the only way out of a sandbox (docs/egress.md). */
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, egress) < 0
      || (egress_pid = spawn_egress (self, &egress_argv, egress[1], fe_uid, fe_gid)) < 0)
    {
      fprintf (stderr, "sbx serve: cannot start the egress proxy: %s\n", strerror (errno));
      return 1;
    }
  egress_start = mono_s ();
  /* recipe build commands reach the mirror through it too */
  sbx_tmpl_recipe_set_egress (egress[0]);

  for (;;)
    {
      int stop = 0;

      last_start = time (NULL);
      if (spawn_frontend (self, &frontend_argv, listen_fds, egress[0], fe_uid, fe_gid, &fe) < 0
          || pthread_create (&fe.serving, NULL, serve_frontend, &fe) != 0)
        {
          fprintf (stderr, "sbx serve: cannot start the front end: %s\n", strerror (errno));
          rc = 1;
          break;
        }
      for (;;)
        {
          /* An egress proxy that keeps dying is started again later and
             later (1 s, 2 s, ... 30 s), never given up on: what killed it
             (the host out of memory, say) may pass, and without it no
             sandbox has egress. */
          if (egress_pid < 0)
            {
              struct timespec wait = {egress_next - mono_s (), 0};
              if (wait.tv_sec <= 0 || sigtimedwait (&mask, &info, &wait) < 0)
                {
                  if (wait.tv_sec <= 0 || errno == EAGAIN)
                    {
                      egress_start = mono_s ();
                      egress_pid = spawn_egress (self, &egress_argv, egress[1], fe_uid, fe_gid);
                      if (egress_pid < 0)
                        egress_next = mono_s () + 1;
                    }
                  continue;
                }
            }
          else if (sigwaitinfo (&mask, &info) < 0)
            continue;
          if (info.si_signo == SIGCHLD)
            {
              int estatus;
              if (egress_pid > 0 && reaped (egress_pid, &estatus))
                {
                  /* Its connections are cut; the channel (both ends ours)
                     keeps what the front end sends meanwhile. */
                  unsigned delay;
                  egress_restarts = mono_s () - egress_start < 10 ? egress_restarts + 1 : 0;
                  delay = egress_restarts == 0 ? 0 : egress_restarts > 5 ? 30 : 1u << (egress_restarts - 1);
                  sbx_error ("the egress proxy died (%s %d); restarting it%s",
                             WIFSIGNALED (estatus) ? "signal" : "status",
                             WIFSIGNALED (estatus) ? WTERMSIG (estatus) : WEXITSTATUS (estatus),
                             delay ? " later (it keeps dying: sandboxes have no egress meanwhile)"
                                   : "");
                  egress_pid = -1;
                  egress_next = mono_s () + delay;
                }
              if (reaped (fe.pid, &status))
                break;
              continue;
            }
          /* Stop: the front end stops first (killing sandboxes through us
             with --kill-on-exit), then we do. */
          stop = 1;
          kill (fe.pid, SIGTERM);
          while (waitpid (fe.pid, &status, 0) < 0 && errno == EINTR)
            ;
          break;
        }
      pthread_join (fe.serving, NULL);
      if (stop)
        {
          rc = WIFEXITED (status) ? WEXITSTATUS (status) : 1;
          break;
        }
      if (!sbx_priv_frontend_ready ())
        {
          /* It never started (bad state, bad options): that is ours too. */
          rc = WIFEXITED (status) ? WEXITSTATUS (status) : 1;
          if (rc == 0)
            rc = 1;
          break;
        }
      /* A crash (a bug reached by some input): sandboxes keep running, a
         new front end re-adopts them. Not forever in a tight loop. */
      sbx_error ("the front end died (%s %d); restarting it",
                 WIFSIGNALED (status) ? "signal" : "status",
                 WIFSIGNALED (status) ? WTERMSIG (status) : WEXITSTATUS (status));
      restarts = time (NULL) - last_start < 10 ? restarts + 1 : 0;
      if (restarts >= 5)
        {
          sbx_error ("the front end keeps dying; giving up");
          rc = 1;
          break;
        }
      if (restarts > 0)
        sleep ((unsigned) restarts);
    }
  if (egress_pid > 0)
    {
      kill (egress_pid, SIGTERM);
      while (waitpid (egress_pid, &status, 0) < 0 && errno == EINTR)
        ;
    }
  sbx_priv_server_stop ();
  sbx_engine_close (&engine);
  free (egress_argv.argv);
  free (frontend_argv.argv);
  /* Sandboxes left running keep their bind of it. */
  sbx_egress_ca_unpublish (cfg.state_dir);
  if (rc == 0)
    sbx_info ("stopped");
  return rc;
}
