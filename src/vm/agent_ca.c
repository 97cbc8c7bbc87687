/* sbx: sbx's egress CA in the guest (docs/vm.md "Egress", docs/egress.md
 * "Credentials").
 *
 * The namespace engine binds the host's public copies onto
 * SBX_SANDBOX_CA_CERT and SBX_SANDBOX_CA_BUNDLE (/etc/ssl/...). The guest's
 * root is a read-only image with no such files, and the only writable
 * places (the --disk tmpfs: /home/user, /tmp, /dev/shm) are the user's. So
 * the agent mounts a tmpfs of its own over /etc/ssl, root's and mode 0755,
 * puts back every entry the image had there (bound from the image, or the
 * same symlink), writes the certificate (from SETUP) and the bundle (the
 * image's roots, which are the host's, then the certificate) mode 0444,
 * and remounts the tmpfs read-only: no command, the guest's root
 * included (no capabilities), can write, rename or unlink either file.
 */
#include "vm/agent_ca.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/tls.h"

#define SSL_DIR "/etc/ssl"
#define HOST_BUNDLE "certs/ca-certificates.crt" /* in SSL_DIR: Debian's */
#define HOST_BUNDLE_MAX (4 << 20)
#define MAX_ENTRIES 64

struct entry
{
  char name[256];
  mode_t mode;
  int fd;            /* O_PATH of a directory or file to bind back; -1 */
  char target[4096]; /* a symlink's */
};

static char *
read_bundle (int dir, size_t *len)
{
  int fd = openat (dir, HOST_BUNDLE, O_RDONLY | O_CLOEXEC);
  char *buf;
  ssize_t n;

  *len = 0;
  if (fd < 0)
    return NULL;
  buf = malloc (HOST_BUNDLE_MAX);
  while (buf != NULL && *len < HOST_BUNDLE_MAX - 1
         && ((n = read (fd, buf + *len, HOST_BUNDLE_MAX - 1 - *len)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0)
      *len += (size_t) n;
  close (fd);
  return buf;
}

static int
write_file (int dir, const char *name, const char *a, size_t alen, const char *b, size_t blen)
{
  int fd = openat (dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  const char *parts[2] = {a, b};
  size_t lens[2] = {alen, blen};

  if (fd < 0)
    return -1;
  for (int i = 0; i < 2; i++)
    while (lens[i] > 0)
      {
        ssize_t w = write (fd, parts[i], lens[i]);
        if (w < 0 && errno == EINTR)
          continue;
        if (w <= 0)
          {
            close (fd);
            return -1;
          }
        parts[i] += w;
        lens[i] -= (size_t) w;
      }
  return fchmod (fd, 0444) < 0 || close (fd) < 0 ? -1 : 0;
}

/* What the image has in /etc/ssl (certs/ on the base image), to put back
   over the tmpfs. */
static int
list_entries (int old, struct entry *e, int max)
{
  int n = 0, fd = dup (old);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *de;

  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  while ((de = readdir (d)) != NULL && n < max)
    {
      struct stat st;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
          || strcmp (de->d_name, &SBX_SANDBOX_CA_CERT[sizeof SSL_DIR]) == 0
          || strcmp (de->d_name, &SBX_SANDBOX_CA_BUNDLE[sizeof SSL_DIR]) == 0
          || strlen (de->d_name) >= sizeof e[n].name
          || fstatat (old, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      memset (&e[n], 0, sizeof e[n]);
      snprintf (e[n].name, sizeof e[n].name, "%s", de->d_name);
      e[n].mode = st.st_mode;
      e[n].fd = -1;
      if (S_ISDIR (st.st_mode) || S_ISREG (st.st_mode))
        e[n].fd = openat (old, de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      else if (S_ISLNK (st.st_mode))
        {
          ssize_t k = readlinkat (old, de->d_name, e[n].target, sizeof e[n].target - 1);
          if (k <= 0)
            continue;
          e[n].target[k] = '\0';
        }
      else
        continue;
      n++;
    }
  closedir (d);
  return n;
}

static const char *
put_back (int dir, const struct entry *e)
{
  char from[64], to[300];

  if (S_ISLNK (e->mode))
    return symlinkat (e->target, dir, e->name) < 0 ? "link back /etc/ssl's entries" : NULL;
  if (e->fd < 0)
    return NULL; /* gone meanwhile: nothing to put back */
  if (S_ISDIR (e->mode))
    {
      if (mkdirat (dir, e->name, 0755) < 0)
        return "make /etc/ssl's directories";
    }
  else
    {
      int fd = openat (dir, e->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0)
        return "make /etc/ssl's files";
      close (fd);
    }
  snprintf (from, sizeof from, "/proc/self/fd/%d", e->fd);
  snprintf (to, sizeof to, SSL_DIR "/%s", e->name);
  if (mount (from, to, NULL, MS_BIND | MS_REC, NULL) < 0)
    return "bind back /etc/ssl's entries";
  return NULL;
}

const char *
sbx_agent_ca_install (const char *pem, size_t len)
{
  static struct entry entries[MAX_ENTRIES];
  const char *failed = NULL;
  char *host = NULL;
  size_t host_len = 0;
  int old, dir = -1, n;
  const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;

  if (len == 0)
    return NULL;
  old = open (SSL_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (old < 0 && errno == ENOENT) /* the initramfs (writable until sealed) */
    {
      if ((mkdir ("/etc", 0755) == 0 || errno == EEXIST) && mkdir (SSL_DIR, 0755) == 0)
        old = open (SSL_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
  if (old < 0)
    {
      /* An image without /etc/ssl and read-only: the guest does without
         (a ruled host's certificate then fails verification, no more). */
      static const char msg[] = "sbx-vm-agent: no " SSL_DIR ": sbx's egress CA is left out\n";
      (void) !write (2, msg, sizeof msg - 1);
      return NULL;
    }
  host = read_bundle (old, &host_len);
  n = list_entries (old, entries, MAX_ENTRIES);
  close (old);
  if (n < 0)
    {
      free (host);
      return "list " SSL_DIR;
    }
  if (mount ("sbx-ssl", SSL_DIR, "tmpfs", flags, "mode=0755,size=8m") < 0)
    failed = "mount a tmpfs on " SSL_DIR;
  else if ((dir = open (SSL_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    failed = "open the tmpfs on " SSL_DIR;
  for (int i = 0; i < n; i++)
    {
      if (failed == NULL)
        failed = put_back (dir, &entries[i]);
      if (entries[i].fd >= 0)
        close (entries[i].fd);
    }
  if (failed == NULL)
    {
      /* The bundle as the host's: its roots, then sbx's CA (a newline
         between them when the roots do not end with one). */
      int nl = host_len > 0 && host[host_len - 1] != '\n';
      if (nl)
        host[host_len++] = '\n'; /* room: read_bundle stops short of the buffer's end */
      if (write_file (dir, &SBX_SANDBOX_CA_CERT[sizeof SSL_DIR], pem, len, NULL, 0) < 0
          || write_file (dir, &SBX_SANDBOX_CA_BUNDLE[sizeof SSL_DIR], host, host_len, pem, len)
                 < 0)
        failed = "write sbx's CA into " SSL_DIR;
      else if (mount (NULL, SSL_DIR, NULL, MS_REMOUNT | MS_RDONLY | flags, NULL) < 0)
        failed = "remount " SSL_DIR " read-only";
    }
  if (dir >= 0)
    close (dir);
  free (host);
  return failed;
}
