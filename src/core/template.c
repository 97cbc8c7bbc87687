/* sbx: the built-in template "base": the host's /usr read-only, the
 * merged-/usr links, and a generated /etc. Nothing else of the host: not
 * its /etc (only the CA certificates, the alternatives links and the
 * loader cache, all public and read-only), not /root, /home, /tmp, /var,
 * /run, /sys, nor the daemon's state directory. */
#include "core/template.h"

#include "egress/tls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct sbx_template base = {"base", {SBX_BUF_INIT, 0}};
/* E2B's code interpreter template: base's tree plus sbx's code interpreter
   server (share/sbx/code_server.py, read from next to the binary), which
   the core starts in every sandbox of it (core/code.c). */
static struct sbx_template code = {SBX_CODE_TEMPLATE, {SBX_BUF_INIT, 0}};

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "user:x:1000:1000:user:/home/user:/bin/bash\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group[] = "root:x:0:\n"
                            "tty:x:5:\n"
                            "user:x:1000:\n"
                            "nogroup:x:65534:\n";
static const char hosts[] = "127.0.0.1\tlocalhost\n"
                            "::1\tlocalhost ip6-localhost ip6-loopback\n"
                            "127.0.1.1\t" SBX_HOSTNAME "\n";
static const char nsswitch[] = "passwd: files\n"
                               "group: files\n"
                               "shadow: files\n"
                               "hosts: files dns\n"
                               "networks: files\n"
                               "protocols: files\n"
                               "services: files\n";
static const char resolv[] = "# sbx: this sandbox has no network access and no DNS server.\n";
static const char shells[] = "/bin/sh\n/bin/bash\n/usr/bin/sh\n/usr/bin/bash\n";

/* The same files for layered templates (iso/tmpl_store.c puts them in
   the generated top layer). */
const struct sbx_etc_file *
sbx_template_etc (void)
{
  static const struct sbx_etc_file files[] = {
      {"passwd", passwd},         {"group", group},   {"hosts", hosts},
      {"hostname", SBX_HOSTNAME "\n"}, {"nsswitch.conf", nsswitch}, {"resolv.conf", resolv},
      {"shells", shells},         {NULL, NULL},
  };
  return files;
}

static int
add_file (struct sbx_plan *p, const char *dst, const char *content, sbx_error_t **err)
{
  return sbx_plan_add (p, SBX_PLAN_FILE, 0, 0644, NULL, dst, content, strlen (content), err);
}

/* /bin, /lib, ...: links on a merged-/usr host, read-only binds otherwise. */
static int
add_top_level (struct sbx_plan *p, const char *name, sbx_error_t **err)
{
  char host[64], target[PATH_MAX];
  struct stat st;
  ssize_t n;

  snprintf (host, sizeof host, "/%s", name);
  if (lstat (host, &st) < 0)
    return 0;
  if (S_ISLNK (st.st_mode))
    {
      n = readlink (host, target, sizeof target - 1);
      if (n <= 0)
        return 0;
      target[n] = '\0';
      return sbx_plan_add (p, SBX_PLAN_SYMLINK, 0, 0, NULL, name, target, (size_t) n, err);
    }
  if (S_ISDIR (st.st_mode))
    return sbx_plan_add (p, SBX_PLAN_BIND_RO, 0, 0, host, name, NULL, 0, err);
  return 0;
}

/* The JDK's configuration (/etc/java-N-openjdk: java.security, which the
   JDK's conf/ links to, and without which no JVM starts): the code
   interpreter's Java contexts. Each such directory of the host, read-only,
   at most a few. */
static int
add_java_configs (struct sbx_plan *p, sbx_error_t **err)
{
  DIR *d = opendir ("/etc");
  struct dirent *e;
  int n = 0, rc = 0;

  if (d == NULL)
    return 0;
  while (rc == 0 && n < 4 && (e = readdir (d)) != NULL)
    {
      char src[300], dst[300];
      size_t len = strlen (e->d_name);
      if (strncmp (e->d_name, "java-", 5) != 0 || len < 13 || len > 40
          || strcmp (e->d_name + len - 8, "-openjdk") != 0
          || strspn (e->d_name + 5, "0123456789") != len - 13)
        continue;
      snprintf (src, sizeof src, "/etc/%s", e->d_name);
      snprintf (dst, sizeof dst, "etc/%s", e->d_name);
      rc = sbx_plan_add (p, SBX_PLAN_BIND_RO, SBX_PLAN_OPTIONAL, 0, src, dst, NULL, 0, err);
      n++;
    }
  closedir (d);
  return rc;
}

static int
build_base (const char *state_dir, struct sbx_plan *p, sbx_error_t **err)
{
  char pub[200], bundle[260], ca[260];
  static const char *const tops[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL};
  static const char *const etc_binds[][2] = {
      {"/etc/ssl/certs", "etc/ssl/certs"},
      {"/etc/alternatives", "etc/alternatives"},
      {"/etc/ld.so.cache", "etc/ld.so.cache"},
      {"/etc/services", "etc/services"},
      {"/etc/protocols", "etc/protocols"},
      /* R's configuration (Renviron, ldpaths; /usr/lib/R/etc links here):
         the code interpreter's R contexts */
      {"/etc/R", "etc/R"},
      {NULL, NULL},
  };
  int i;

  if (access ("/usr/bin", X_OK) < 0)
    return sbx_err_sys (err, errno, "template base needs the host's /usr");
  /* The host's /usr, with the sandbox's own sudo at /usr/bin/sudo. */
  if (sbx_plan_add (p, SBX_PLAN_BIND_RO, SBX_PLAN_SUDO, 0, "/usr", "usr", NULL, 0, err) < 0)
    return -1;
  for (i = 0; tops[i]; i++)
    if (add_top_level (p, tops[i], err) < 0)
      return -1;
  if (add_file (p, "etc/passwd", passwd, err) < 0 || add_file (p, "etc/group", group, err) < 0
      || add_file (p, "etc/hosts", hosts, err) < 0
      || add_file (p, "etc/hostname", SBX_HOSTNAME "\n", err) < 0
      || add_file (p, "etc/nsswitch.conf", nsswitch, err) < 0
      || add_file (p, "etc/resolv.conf", resolv, err) < 0
      || add_file (p, "etc/shells", shells, err) < 0)
    return -1;
  for (i = 0; etc_binds[i][0]; i++)
    if (sbx_plan_add (p, SBX_PLAN_BIND_RO, SBX_PLAN_OPTIONAL, 0, etc_binds[i][0], etc_binds[i][1],
                      NULL, 0, err)
        < 0)
      return -1;
  if (add_java_configs (p, err) < 0)
    return -1;
  /* The host's trust and sbx's egress CA (egress/tls.h), for hosts with
     credential rules; the certificate only, never its key. Bound from
     where the parent publishes them (a copy would cost every create the
     host bundle's 220 KB). */
  sbx_egress_ca_public_dir (state_dir, pub, sizeof pub);
  snprintf (bundle, sizeof bundle, "%s/bundle.crt", pub);
  snprintf (ca, sizeof ca, "%s/ca.crt", pub);
  if (sbx_plan_add (p, SBX_PLAN_BIND_RO, SBX_PLAN_OPTIONAL, 0, bundle,
                    &SBX_SANDBOX_CA_BUNDLE[1], NULL, 0, err)
          < 0
      || sbx_plan_add (p, SBX_PLAN_BIND_RO, SBX_PLAN_OPTIONAL, 0, ca, &SBX_SANDBOX_CA_CERT[1],
                       NULL, 0, err)
             < 0)
    return -1;
  if (sbx_plan_add (p, SBX_PLAN_SYMLINK, 0, 0, NULL, "etc/os-release", "../usr/lib/os-release",
                    strlen ("../usr/lib/os-release"), err)
          < 0
      || sbx_plan_add (p, SBX_PLAN_SYMLINK, 0, 0, NULL, "etc/localtime",
                       "/usr/share/zoneinfo/Etc/UTC", strlen ("/usr/share/zoneinfo/Etc/UTC"), err)
             < 0
      || sbx_plan_add (p, SBX_PLAN_DIR, 0, 0755, NULL, "home", NULL, 0, err) < 0
      || sbx_plan_add (p, SBX_PLAN_DIR, 0, 0755, NULL, "var", NULL, 0, err) < 0
      || sbx_plan_add (p, SBX_PLAN_SYMLINK, 0, 0, NULL, "var/tmp", "/tmp", 4, err) < 0
      || sbx_plan_add (p, SBX_PLAN_DIR, 0, 0755, NULL, "run", NULL, 0, err) < 0)
    return -1;
  return 0;
}

/* The server's source: next to the binary in the build tree
   (build/sbxd -> share/sbx/) and when installed (/usr/local/bin/sbxd ->
   /usr/local/share/sbx/). NULL when it is not there. */
static char *
read_code_server (size_t *len)
{
  char exe[PATH_MAX], path[PATH_MAX + 64];
  struct sbx_buf b = SBX_BUF_INIT;
  char chunk[16384];
  ssize_t n;
  char *slash;
  int fd;

  n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  slash = strrchr (exe, '/');
  if (slash == NULL)
    return NULL;
  *slash = '\0';
  snprintf (path, sizeof path, "%s/../share/sbx/code_server.py", exe);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  while ((n = read (fd, chunk, sizeof chunk)) > 0 && b.len < SBX_CODE_SERVER_MAX)
    sbx_buf_append (&b, chunk, (size_t) n);
  close (fd);
  if (n != 0 || b.failed || b.len == 0 || b.len > SBX_CODE_SERVER_MAX)
    {
      sbx_buf_free (&b);
      return NULL;
    }
  *len = b.len;
  return b.data;
}

int
sbx_templates_init (const char *state_dir, sbx_error_t **err)
{
  char *src;
  size_t len = 0;
  int rc;

  if (build_base (state_dir, &base.plan, err) < 0 || build_base (state_dir, &code.plan, err) < 0)
    return -1;
  if (sbx_plan_add (&code.plan, SBX_PLAN_DIR, 0, 0755, NULL, "opt", NULL, 0, err) < 0
      || sbx_plan_add (&code.plan, SBX_PLAN_DIR, 0, 0755, NULL, "opt/sbx", NULL, 0, err) < 0)
    return -1;
  src = read_code_server (&len);
  if (src == NULL)
    {
      /* The front end needs only the name; the parent builds the tree. A
         sandbox of it then has no server, and says so (core/code.c). */
      return 0;
    }
  rc = sbx_plan_add (&code.plan, SBX_PLAN_FILE, 0, 0644, NULL, &SBX_CODE_SERVER_PATH[1], src,
                     len, err);
  free (src);
  return rc;
}

void
sbx_templates_free (void)
{
  sbx_plan_free (&base.plan);
  sbx_plan_free (&code.plan);
}

const struct sbx_template *
sbx_template_find (const char *name)
{
  if (name == NULL || strcmp (name, "base") == 0)
    return &base;
  if (strcmp (name, SBX_CODE_TEMPLATE) == 0)
    return &code;
  return NULL;
}
