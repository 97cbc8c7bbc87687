/* sbx: the content of template base's VM image (docs/vm.md "The root
 * filesystem"): the files of a fixed list of the host's installed Debian
 * packages and the closure of their installed dependencies (Depends,
 * Pre-Depends; dpkg's own status and file lists, read here, no apt, no
 * shell), only those under /usr (and /bin, /lib... on a host without merged
 * /usr), without documentation; plus the namespace engine's generated /etc,
 * the few public host files it binds, the alternatives links and Python's
 * compiled modules. Staged into a directory that iso/vm_image.c makes into
 * an image. Setuid and setgid bits are dropped from the copies.
 */
#include "iso/vm_image_base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/template.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/file.h"

#define DPKG_STATUS "/var/lib/dpkg/status"
#define DPKG_INFO "/var/lib/dpkg/info"
#define DPKG_ALTERNATIVES "/var/lib/dpkg/alternatives"
#define MAX_PKGS 8192

static void
sha256_buf (const struct sbx_buf *b, char out[65])
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned mdlen = 0;
  EVP_Digest (b->data, b->len, md, &mdlen, EVP_sha256 (), NULL);
  for (unsigned i = 0; i < mdlen && i < 32; i++)
    snprintf (out + 2 * i, 3, "%02x", md[i]);
}

/* What a VM's base holds: a shell and the usual tools, Python, TLS
   roots and curl (for when VMs get egress). Their dependencies come with
   them; a package the host lacks is left out (and changes the key). */
static const char *const base_packages[]
    = {"bash",  "coreutils", "findutils", "grep",  "sed",        "tar",          "gzip",
       "procps", "mawk",     "diffutils", "python3", "python3-minimal", "ca-certificates",
       "curl",  "libc-bin",  "dash",      "hostname", "busybox-static", NULL};

/* Tools no package above brings, from busybox (links made only where the
   image has no command of that name: the packages' own come first). */
static const char *const busybox_applets[]
    = {"nc", "wget", "pidof", "unzip", "xxd", "less", "vi", NULL};

/* Host files the namespace engine's base binds under /etc (public). */
static const char *const etc_files[] = {"ld.so.cache", "services", "protocols", NULL};
static const char *const etc_dirs[] = {"ssl/certs", NULL};

/* Mount points and empty directories the agent needs in the root. */
static const struct
{
  const char *path;
  mode_t mode;
} skeleton[] = {{"proc", 0555}, {"sys", 0555},   {"dev", 0755},       {"tmp", 01777},
                {"disk", 0755}, {"home", 0755},  {"home/user", 0755}, {"root", 0700},
                {"etc", 0755},  {"var", 0755},   {"var/tmp", 01777},  {"run", 0755}};

/* ---- dpkg's status: the packages and their dependency closure ---------- */

struct pkg
{
  const char *name, *arch, *version, *depends, *predepends, *provides; /* into the status */
  size_t name_len;
  int wanted; /* 1 in the image, -1 kept out (sbx_vm_extra.skip) */
};

struct sbx_vm_pkgs
{
  char *status; /* owned, cut into fields in place */
  struct pkg *v;
  size_t n;
  const char *native; /* dpkg's own architecture */
};

static void
pkgs_free (struct sbx_vm_pkgs *p)
{
  free (p->status);
  free (p->v);
}

/* Split the status file into installed packages. */
static int
pkgs_load (struct sbx_vm_pkgs *p, sbx_error_t **err)
{
  char *s, *line, *next;
  struct pkg cur;
  int installed = 0;

  memset (p, 0, sizeof *p);
  p->status = sbx_read_small_at (AT_FDCWD, DPKG_STATUS, 64 << 20, NULL);
  if (p->status == NULL)
    return sbx_err (err, SBX_E_UNAVAILABLE,
                    "isolation vm: the root image is made of the host's Debian packages, and "
                    "%s cannot be read (%s)",
                    DPKG_STATUS, strerror (errno));
  p->v = calloc (MAX_PKGS, sizeof *p->v);
  if (p->v == NULL)
    return sbx_err_oom (err);
  memset (&cur, 0, sizeof cur);
  for (s = p->status; s != NULL; s = next)
    {
      next = strchr (s, '\n');
      if (next)
        *next++ = '\0';
      line = s;
      if (*line == '\0' || next == NULL)
        {
          /* End of a stanza. */
          if (cur.name && cur.version && installed && p->n < MAX_PKGS)
            {
              cur.name_len = strlen (cur.name);
              if (cur.arch == NULL)
                cur.arch = "all";
              p->v[p->n++] = cur;
              if (strcmp (cur.name, "dpkg") == 0)
                p->native = cur.arch;
            }
          memset (&cur, 0, sizeof cur);
          installed = 0;
          if (next == NULL)
            break;
          continue;
        }
      if (strncmp (line, "Package: ", 9) == 0)
        cur.name = line + 9;
      else if (strncmp (line, "Status: ", 8) == 0)
        installed = strcmp (line + 8, "install ok installed") == 0;
      else if (strncmp (line, "Architecture: ", 14) == 0)
        cur.arch = line + 14;
      else if (strncmp (line, "Version: ", 9) == 0)
        cur.version = line + 9;
      else if (strncmp (line, "Depends: ", 9) == 0)
        cur.depends = line + 9;
      else if (strncmp (line, "Pre-Depends: ", 13) == 0)
        cur.predepends = line + 13;
      else if (strncmp (line, "Provides: ", 10) == 0)
        cur.provides = line + 10;
    }
  if (p->native == NULL)
    p->native = "amd64";
  return 0;
}

/* Does the comma list `list` ("a, b (= 1), c:any") name `name`? */
static int
list_names (const char *list, const char *name, size_t len)
{
  const char *c = list;
  while (c && *c)
    {
      while (*c == ' ' || *c == ',')
        c++;
      if (strncmp (c, name, len) == 0 && strchr (" ,:(", c[len]) != NULL)
        return 1;
      c = strchr (c, ',');
    }
  return 0;
}

/* The installed package `name` (native or `all` first), or one that
   provides it. */
static struct pkg *
pkgs_find (struct sbx_vm_pkgs *p, const char *name, size_t len)
{
  struct pkg *any = NULL;
  for (size_t i = 0; i < p->n; i++)
    if (p->v[i].name_len == len && memcmp (p->v[i].name, name, len) == 0)
      {
        if (strcmp (p->v[i].arch, p->native) == 0 || strcmp (p->v[i].arch, "all") == 0)
          return &p->v[i];
        any = any ? any : &p->v[i];
      }
  if (any)
    return any;
  for (size_t i = 0; i < p->n; i++)
    if (p->v[i].provides && list_names (p->v[i].provides, name, len))
      return &p->v[i];
  return NULL;
}

static void pkgs_want (struct sbx_vm_pkgs *p, struct pkg *k, unsigned depth);

/* Each comma group of a Depends line: its first alternative installed. */
static void
pkgs_want_list (struct sbx_vm_pkgs *p, const char *list, unsigned depth)
{
  const char *c = list;
  while (c && *c)
    {
      const char *group_end = strchr (c, ',');
      if (group_end == NULL)
        group_end = c + strlen (c);
      for (const char *alt = c; alt < group_end;)
        {
          size_t len;
          struct pkg *k;
          while (alt < group_end && (*alt == ' ' || *alt == '|'))
            alt++;
          len = strcspn (alt, " ,:|(");
          if (alt + len > group_end)
            len = (size_t) (group_end - alt);
          if (len > 0 && (k = pkgs_find (p, alt, len)) != NULL)
            {
              pkgs_want (p, k, depth + 1);
              break;
            }
          alt = memchr (alt, '|', (size_t) (group_end - alt));
          if (alt == NULL)
            break;
        }
      c = *group_end ? group_end + 1 : group_end;
    }
}

static void
pkgs_want (struct sbx_vm_pkgs *p, struct pkg *k, unsigned depth)
{
  if (k->wanted || depth > 64)
    return;
  k->wanted = 1;
  pkgs_want_list (p, k->predepends, depth);
  pkgs_want_list (p, k->depends, depth);
}

/* ---- the staging tree --------------------------------------------------- */

struct stage
{
  int root; /* the staging directory */
  uint64_t bytes, entries;
  sbx_error_t **err;
};

/* The directory that holds rel (made as needed, never through a link);
   *leaf points at rel's last component. */
static int
open_parent (int root, const char *rel, const char **leaf)
{
  char part[PATH_MAX];
  int dir = fcntl (root, F_DUPFD_CLOEXEC, 0);
  const char *c = rel;

  for (;;)
    {
      const char *slash = strchr (c, '/');
      size_t len;
      int sub;
      if (slash == NULL)
        break;
      len = (size_t) (slash - c);
      if (len == 0 || len >= sizeof part)
        {
          c = slash + 1;
          continue;
        }
      memcpy (part, c, len);
      part[len] = '\0';
      if (mkdirat (dir, part, 0755) < 0 && errno != EEXIST)
        {
          close (dir);
          return -1;
        }
      sub = openat (dir, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      close (dir);
      if (sub < 0)
        return -1;
      dir = sub;
      c = slash + 1;
    }
  *leaf = c;
  return dir;
}

static int
copy_file (int src, int dst, off_t size)
{
  off_t done = 0;
  while (done < size)
    {
      ssize_t n = copy_file_range (src, NULL, dst, NULL, (size_t) (size - done), 0);
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL))
        {
          char buf[65536];
          n = read (src, buf, sizeof buf);
          if (n > 0 && write (dst, buf, (size_t) n) != n)
            return -1;
        }
      if (n < 0)
        return -1;
      if (n == 0)
        break;
      done += n;
    }
  return 0;
}

/* Copy host path `host` (absolute, not a link in its directories) to the
   same place in the staging tree. Links are copied as links; devices,
   sockets and fifos are skipped. */
static int
stage_path (struct stage *s, const char *host)
{
  cleanup_close int parent = -1, src = -1, dst = -1;
  const char *leaf;
  struct stat st;

  if (lstat (host, &st) < 0)
    return 0; /* listed by dpkg, gone since (a diversion, a removal) */
  parent = open_parent (s->root, host + 1, &leaf);
  if (parent < 0)
    return sbx_err_sys (s->err, errno, "stage %s", host);
  if (*leaf == '\0')
    return 0;
  s->entries++;
  if (S_ISDIR (st.st_mode))
    {
      if (mkdirat (parent, leaf, st.st_mode & 01755) < 0 && errno != EEXIST)
        return sbx_err_sys (s->err, errno, "stage %s", host);
      return 0;
    }
  if (S_ISLNK (st.st_mode))
    {
      char target[PATH_MAX];
      ssize_t n = readlink (host, target, sizeof target - 1);
      if (n <= 0)
        return 0;
      target[n] = '\0';
      if (symlinkat (target, parent, leaf) < 0 && errno != EEXIST)
        return sbx_err_sys (s->err, errno, "stage %s", host);
      return 0;
    }
  if (!S_ISREG (st.st_mode))
    return 0;
  src = open (host, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (src < 0)
    return 0;
  dst = openat (parent, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (dst < 0)
    return errno == EEXIST ? 0 : sbx_err_sys (s->err, errno, "stage %s", host);
  if (copy_file (src, dst, st.st_size) < 0
      || fchmod (dst, st.st_mode & 01777) < 0 /* no setuid, no setgid */
      || futimens (dst, (struct timespec[]){st.st_atim, st.st_mtim}) < 0)
    return sbx_err_sys (s->err, errno, "stage %s", host);
  s->bytes += ((uint64_t) st.st_size + 4095) & ~4095ull;
  return 0;
}

/* Where a listed path really is on the host: its directory resolved
   (/bin/bash is /usr/bin/bash on a merged-/usr host). Only the system's
   trees are taken: not /etc (the host's configuration), /var, /boot... */
static int
canonical (const char *path, char *out, size_t len)
{
  static const char *const roots[] = {"/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/",
                                      "/libx32/", NULL};
  /* Documentation and translations: a third of the bytes, no use to a
     program (as in slim container images). */
  static const char *const skipped[]
      = {"/usr/local/",      "/usr/share/doc/",    "/usr/share/man/", "/usr/share/info/",
         "/usr/share/locale/", "/usr/share/lintian/", "/usr/share/bug/", NULL};
  char dir[PATH_MAX], real[PATH_MAX];
  const char *slash = strrchr (path, '/');

  if (slash == NULL || slash == path || (size_t) (slash - path) >= sizeof dir)
    return -1;
  memcpy (dir, path, (size_t) (slash - path));
  dir[slash - path] = '\0';
  if (realpath (dir, real) == NULL)
    return -1;
  if ((size_t) snprintf (out, len, "%s%s", real, slash) >= len)
    return -1;
  for (int i = 0; skipped[i]; i++)
    if (strncmp (out, skipped[i], strlen (skipped[i])) == 0)
      return -1;
  for (int i = 0; roots[i]; i++)
    if (strncmp (out, roots[i], strlen (roots[i])) == 0)
      return 0;
  return -1;
}

/* Python's compiled modules are made by the packages' scripts, in no
   list: without them every import in the guest compiles its source again
   (the image is read-only, nothing is cached). Taken with their directory;
   Python checks each against its source's time and size. */
static int
stage_pycache (struct stage *s, const char *dir)
{
  char path[PATH_MAX];
  DIR *d;
  struct dirent *de;
  int rc = 0;

  if ((size_t) snprintf (path, sizeof path, "%s/__pycache__", dir) >= sizeof path)
    return 0;
  d = opendir (path);
  if (d == NULL)
    return 0;
  while (rc == 0 && (de = readdir (d)) != NULL)
    {
      size_t n = strlen (de->d_name);
      char file[PATH_MAX];
      if (n < 5 || strcmp (de->d_name + n - 4, ".pyc") != 0
          || (size_t) snprintf (file, sizeof file, "%s/%s", path, de->d_name) >= sizeof file)
        continue;
      rc = stage_path (s, file);
    }
  closedir (d);
  return rc;
}

static int
stage_package (struct stage *s, const struct pkg *k)
{
  char list[600], line[PATH_MAX + 2], real[PATH_MAX];
  FILE *f;
  int rc = 0;

  snprintf (list, sizeof list, DPKG_INFO "/%.*s:%s.list", (int) k->name_len, k->name, k->arch);
  f = fopen (list, "re");
  if (f == NULL)
    {
      snprintf (list, sizeof list, DPKG_INFO "/%.*s.list", (int) k->name_len, k->name);
      f = fopen (list, "re");
    }
  if (f == NULL)
    return 0; /* a package without files */
  while (rc == 0 && fgets (line, sizeof line, f))
    {
      line[strcspn (line, "\n")] = '\0';
      struct stat st;
      if (line[0] != '/' || canonical (line, real, sizeof real) < 0)
        continue;
      rc = stage_path (s, real);
      if (rc == 0 && lstat (real, &st) == 0 && S_ISDIR (st.st_mode))
        rc = stage_pycache (s, real);
    }
  fclose (f);
  return rc;
}

/* The host's top-level links (/bin -> usr/bin on a merged-/usr host). */
static int
stage_top_links (struct stage *s)
{
  static const char *const tops[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL};
  for (int i = 0; tops[i]; i++)
    {
      char host[32], target[PATH_MAX];
      ssize_t n;
      snprintf (host, sizeof host, "/%s", tops[i]);
      n = readlink (host, target, sizeof target - 1);
      if (n <= 0)
        continue;
      target[n] = '\0';
      if (symlinkat (target, s->root, tops[i]) < 0 && errno != EEXIST)
        return sbx_err_sys (s->err, errno, "stage /%s", tops[i]);
    }
  return 0;
}


/* /etc: sbx's generated files and the public host files the namespace
   engine binds; the skeleton of mount points. */
static int
stage_etc (struct stage *s)
{
  const struct sbx_etc_file *e = sbx_template_etc ();
  cleanup_close int etc = -1;

  for (size_t i = 0; i < sizeof skeleton / sizeof skeleton[0]; i++)
    if ((mkdirat (s->root, skeleton[i].path, skeleton[i].mode) < 0 && errno != EEXIST)
        || fchmodat (s->root, skeleton[i].path, skeleton[i].mode, 0) < 0)
      return sbx_err_sys (s->err, errno, "stage /%s", skeleton[i].path);
  etc = openat (s->root, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (etc < 0)
    return sbx_err_sys (s->err, errno, "stage /etc");
  for (; e->name; e++)
    {
      if (sbx_write_small_at (etc, e->name, e->content, strlen (e->content), 0644) < 0)
        return sbx_err_sys (s->err, errno, "stage /etc/%s", e->name);
    }
  for (int i = 0; etc_files[i]; i++)
    {
      char host[128];
      struct stat st;
      snprintf (host, sizeof host, "/etc/%s", etc_files[i]);
      if (lstat (host, &st) == 0 && S_ISREG (st.st_mode) && stage_path (s, host) < 0)
        return -1;
    }
  for (int i = 0; etc_dirs[i]; i++)
    {
      char host[128], path[PATH_MAX];
      DIR *d;
      struct dirent *de;
      snprintf (host, sizeof host, "/etc/%s", etc_dirs[i]);
      d = opendir (host);
      if (d == NULL)
        continue;
      while ((de = readdir (d)) != NULL)
        {
          if (de->d_name[0] == '.')
            continue;
          snprintf (path, sizeof path, "%s/%s", host, de->d_name);
          if (stage_path (s, path) < 0)
            {
              closedir (d);
              return -1;
            }
        }
      closedir (d);
    }
  return 0;
}

/* The alternatives (/usr/bin/awk -> /etc/alternatives/awk -> mawk):
   their links are made by update-alternatives, in no package's list.
   Taken when what they finally point to is in the image. */
static int
stage_alternatives (struct stage *s)
{
  DIR *d = opendir (DPKG_ALTERNATIVES);
  struct dirent *de;
  int rc = 0;

  if (d == NULL)
    return 0;
  while (rc == 0 && (de = readdir (d)) != NULL)
    {
      char path[PATH_MAX], link[PATH_MAX], real[PATH_MAX], chosen[PATH_MAX];
      cleanup_free char *text = NULL;
      char *nl;
      struct stat st;

      if (de->d_name[0] == '.')
        continue;
      snprintf (path, sizeof path, DPKG_ALTERNATIVES "/%s", de->d_name);
      text = sbx_read_small_at (AT_FDCWD, path, 64 << 10, NULL);
      /* "auto|manual\n/usr/bin/awk\n...": the second line is the link. */
      if (text == NULL || (nl = strchr (text, '\n')) == NULL)
        continue;
      snprintf (link, sizeof link, "%s", nl + 1);
      link[strcspn (link, "\n")] = '\0';
      snprintf (chosen, sizeof chosen, "/etc/alternatives/%s", de->d_name);
      if (link[0] != '/' || canonical (link, real, sizeof real) < 0 || lstat (real, &st) < 0
          || !S_ISLNK (st.st_mode) || realpath (real, path) == NULL
          || fstatat (s->root, path + 1, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      rc = stage_path (s, chosen);
      if (rc == 0)
        rc = stage_path (s, real);
    }
  closedir (d);
  return rc;
}

/* KEY of base: the format, the packages in the image with their
   versions, the generated /etc and the bound host files. */
int
sbx_vm_base_key (struct sbx_vm_pkgs *p, const struct sbx_vm_extra *extra, char key[65],
                 sbx_error_t **err)
{
  struct sbx_buf b = SBX_BUF_INIT;

  sbx_buf_printf (&b, "%s\n", IMAGE_FORMAT);
  for (int i = 0; base_packages[i]; i++)
    {
      struct pkg *k = pkgs_find (p, base_packages[i], strlen (base_packages[i]));
      sbx_buf_printf (&b, "want %s %s\n", base_packages[i], k ? "yes" : "missing");
      if (k)
        pkgs_want (p, k, 0);
    }
  if (extra)
    {
      /* Base's key stays what it was without one: images already cached
         (and the snapshots that name them) stay valid. */
      sbx_buf_printf (&b, "template %s\n", extra->name);
      /* Kept out even as a dependency (base's closure is made already). */
      for (int i = 0; extra->skip && extra->skip[i]; i++)
        {
          struct pkg *k = pkgs_find (p, extra->skip[i], strlen (extra->skip[i]));
          sbx_buf_printf (&b, "skip %s\n", extra->skip[i]);
          if (k && !k->wanted)
            k->wanted = -1;
        }
      for (int i = 0; extra->packages && extra->packages[i]; i++)
        {
          const char *n = extra->packages[i];
          struct pkg *k = pkgs_find (p, n, strlen (n));
          sbx_buf_printf (&b, "want %s %s\n", n, k ? "yes" : "missing");
          if (k)
            pkgs_want (p, k, 0);
        }
      if (extra->file)
        {
          sbx_buf_printf (&b, "file %s %zu\n", extra->file, extra->len);
          sbx_buf_append (&b, extra->data, extra->len);
        }
    }
  for (size_t i = 0; i < p->n; i++)
    if (p->v[i].wanted > 0)
      sbx_buf_printf (&b, "pkg %.*s:%s=%s\n", (int) p->v[i].name_len, p->v[i].name,
                      p->v[i].arch, p->v[i].version);
  /* The /etc part of the key, without staging anything. */
  {
    const struct sbx_etc_file *e = sbx_template_etc ();
    for (; e->name; e++)
      {
        sbx_buf_printf (&b, "etc %s %zu\n", e->name, strlen (e->content));
        sbx_buf_append (&b, e->content, strlen (e->content));
      }
    for (int i = 0; etc_files[i]; i++)
      {
        char host[128];
        struct stat st;
        snprintf (host, sizeof host, "/etc/%s", etc_files[i]);
        if (lstat (host, &st) == 0 && S_ISREG (st.st_mode))
          sbx_buf_printf (&b, "host %s %lld %lld.%09ld\n", host, (long long) st.st_size,
                          (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
      }
    for (int i = 0; etc_dirs[i]; i++)
      {
        char host[128];
        struct stat st;
        snprintf (host, sizeof host, "/etc/%s", etc_dirs[i]);
        if (stat (host, &st) == 0)
          sbx_buf_printf (&b, "host %s %lld.%09ld\n", host, (long long) st.st_mtim.tv_sec,
                          st.st_mtim.tv_nsec);
      }
    {
      /* update-alternatives replaces its files: the directory's time moves. */
      struct stat st;
      if (stat (DPKG_ALTERNATIVES, &st) == 0)
        sbx_buf_printf (&b, "alternatives %lld.%09ld\n", (long long) st.st_mtim.tv_sec,
                        st.st_mtim.tv_nsec);
    }
  }
  if (b.failed)
    {
      sbx_buf_free (&b);
      return sbx_err_oom (err);
    }
  sha256_buf (&b, key);
  sbx_buf_free (&b);
  return 0;
}



static int
stage_busybox_applets (struct stage *s)
{
  cleanup_close int bin = openat (s->root, "usr/bin", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;

  if (bin < 0 || fstatat (bin, "busybox", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG (st.st_mode))
    return 0;
  for (int i = 0; busybox_applets[i]; i++)
    if (fstatat (bin, busybox_applets[i], &st, AT_SYMLINK_NOFOLLOW) < 0
        && symlinkat ("busybox", bin, busybox_applets[i]) < 0)
      return sbx_err_sys (s->err, errno, "stage /usr/bin/%s", busybox_applets[i]);
  return 0;
}

struct sbx_vm_pkgs *
sbx_vm_pkgs_load (sbx_error_t **err)
{
  struct sbx_vm_pkgs *p = calloc (1, sizeof *p);
  if (p == NULL)
    return sbx_err_oom (err), NULL;
  if (pkgs_load (p, err) < 0)
    {
      sbx_vm_pkgs_free (p);
      return NULL;
    }
  return p;
}

void
sbx_vm_pkgs_free (struct sbx_vm_pkgs *p)
{
  if (p == NULL)
    return;
  pkgs_free (p);
  free (p);
}

/* extra's file, 0644 root, its directories 0755. */
static int
stage_extra_file (struct stage *s, const struct sbx_vm_extra *extra)
{
  cleanup_close int dir = -1;
  const char *leaf;

  if (extra == NULL || extra->file == NULL)
    return 0;
  dir = open_parent (s->root, extra->file, &leaf);
  if (dir < 0)
    return sbx_err_sys (s->err, errno, "stage /%s", extra->file);
  if (sbx_write_small_at (dir, leaf, extra->data, extra->len, 0644) < 0)
    return sbx_err_sys (s->err, errno, "stage /%s", extra->file);
  s->bytes += ((uint64_t) extra->len + 4095) & ~4095ull;
  s->entries++;
  return 0;
}

int
sbx_vm_base_stage (struct sbx_vm_pkgs *p, const struct sbx_vm_extra *extra, int root,
                   uint64_t *bytes, uint64_t *entries, sbx_error_t **err)
{
  struct stage s = {root, 0, 0, err};
  int rc = 0;

  if (stage_top_links (&s) < 0 || stage_etc (&s) < 0)
    rc = -1;
  for (size_t i = 0; rc == 0 && i < p->n; i++)
    if (p->v[i].wanted > 0 && stage_package (&s, &p->v[i]) < 0)
      rc = -1;
  if (rc == 0
      && (stage_alternatives (&s) < 0 || stage_busybox_applets (&s) < 0
          || stage_extra_file (&s, extra) < 0))
    rc = -1;
  *bytes = s.bytes;
  *entries = s.entries;
  return rc;
}
