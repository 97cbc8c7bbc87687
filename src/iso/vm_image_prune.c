/* sbx: pruning the VM root image cache (docs/vm.md "The root filesystem").
 *
 * An image is kept while anything may still attach it: a VM of this
 * parent (running, paused, in the pool: its slot records "KEY SUM"), any
 * directory of the snapshot store with a vm.root (a client's snapshot, a
 * hibernated VM's .sbx-hib-*, a fork's .sbx-fork-* file, a save under way),
 * the current KEY of base and code-interpreter-v1, and the KEY of every
 * stored template still present. Everything else goes: an image a package
 * upgrade, a template's removal or a snapshot's deletion left behind.
 *
 * The whole decision is taken under the cache's lock, which every build,
 * open and restore of an image also takes: an image cannot appear or be
 * opened between "nothing uses it" and its unlink. A create whose slot is
 * reserved but not yet live (it may hold an fd of an image it opened before
 * we took the lock, its slot not yet saying which), or a VM whose slot does
 * not know its image, defers the prune to the next occasion: when unsure,
 * keep. Any error reading the store, a template or dpkg's status keeps
 * everything too.
 */
#include "iso/vm_image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iso/tmpl.h"
#include "iso/vm_image_base.h"
#include "util/cleanup.h"
#include "util/log.h"

struct cand
{
  char key[65];
  int keep;
};

struct sbx_vm_keys
{
  struct cand *c;
  size_t n, cap;
};

static int
is_key (const char *s, size_t len)
{
  return len >= 64 && strspn (s, "0123456789abcdef") >= 64;
}

void
sbx_vm_keys_keep (struct sbx_vm_keys *k, const char *record)
{
  if (record == NULL || !is_key (record, strlen (record)))
    return;
  for (size_t i = 0; i < k->n; i++)
    if (memcmp (k->c[i].key, record, 64) == 0)
      k->c[i].keep = 1;
}

static size_t
left (const struct sbx_vm_keys *k)
{
  size_t n = 0;

  for (size_t i = 0; i < k->n; i++)
    n += !k->c[i].keep;
  return n;
}

/* The cached images: KEY.img and KEY.sum (a .sum alone is a publish cut
   short by a crash). Temporary names (.stage-*, .build-*) are a build's. */
static int
list_images (int dir, struct sbx_vm_keys *k)
{
  int fd = openat (dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *de;

  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  while ((de = readdir (d)) != NULL)
    {
      size_t len = strlen (de->d_name), i;
      if (len != 68 || !is_key (de->d_name, len)
          || (strcmp (de->d_name + 64, ".img") != 0 && strcmp (de->d_name + 64, ".sum") != 0))
        continue;
      for (i = 0; i < k->n && memcmp (k->c[i].key, de->d_name, 64) != 0; i++)
        ;
      if (i < k->n)
        continue;
      if (k->n == k->cap)
        {
          k->cap = k->cap ? 2 * k->cap : 16;
          k->c = realloc (k->c, k->cap * sizeof *k->c);
          if (k->c == NULL)
            sbx_oom ();
        }
      memcpy (k->c[k->n].key, de->d_name, 64);
      k->c[k->n].key[64] = '\0';
      k->c[k->n++].keep = 0;
    }
  closedir (d);
  return 0;
}

/* DIR/vm.root, if any: 0 (kept or none), -1 (unreadable: keep all). */
static int
keep_record (int dir, const char *name, struct sbx_vm_keys *k)
{
  char path[600], line[160];
  cleanup_close int fd = -1;
  ssize_t n;

  if ((size_t) snprintf (path, sizeof path, "%s/%s", name, SBX_VM_IMAGE_RECORD) >= sizeof path)
    return -1;
  fd = openat (dir, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
  n = read (fd, line, sizeof line - 1);
  if (n < 0)
    return -1;
  line[n] = '\0';
  sbx_vm_keys_keep (k, line);
  return 0;
}

/* Every snapshot directory of the store (STATE/snapshots/TENANT/NAME),
   hidden ones included: hibernation, fork, saves under way. */
static int
keep_snapshots (int store, struct sbx_vm_keys *k)
{
  int fd = openat (store, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *de;

  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  while (rc == 0 && (de = readdir (d)) != NULL)
    {
      DIR *t;
      struct dirent *te;
      int tfd;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      rc = keep_record (dirfd (d), de->d_name, k);
      tfd = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (tfd < 0)
        {
          if (errno != ENOTDIR && errno != ENOENT)
            rc = -1;
          continue;
        }
      t = fdopendir (tfd);
      if (t == NULL)
        {
          close (tfd);
          rc = -1;
          continue;
        }
      while (rc == 0 && (te = readdir (t)) != NULL)
        if (strcmp (te->d_name, ".") != 0 && strcmp (te->d_name, "..") != 0)
          rc = keep_record (dirfd (t), te->d_name, k);
      closedir (t);
    }
  closedir (d);
  return rc;
}

static int
keep_template (const char *name, void *arg)
{
  struct sbx_vm_keys *k = arg;
  sbx_error_t *e = NULL;
  char key[65];
  int mnt = sbx_tmpl_mount (name, &e), rc = 0;

  if (mnt < 0)
    {
      /* Removed meanwhile: nothing to keep for it. */
      rc = sbx_tmpl_exists (name) ? -1 : 0;
      if (rc < 0)
        sbx_warn ("VM image prune: template `%s`: %s", name, e ? e->msg : "?");
      sbx_error_free (e);
      return rc;
    }
  if (sbx_vm_image_tree_key (mnt, key, &e) < 0)
    {
      sbx_warn ("VM image prune: template `%s`: %s", name, e->msg);
      sbx_error_free (e);
      rc = -1;
    }
  else
    sbx_vm_keys_keep (k, key);
  close (mnt);
  return rc;
}

/* The built-in templates' current keys. */
static int
keep_builtin (const struct sbx_plan *code_plan, struct sbx_vm_keys *k)
{
  struct sbx_vm_pkgs *p;
  sbx_error_t *e = NULL;
  char key[65];
  int rc = -1;

  if ((p = sbx_vm_pkgs_load (&e)) == NULL || sbx_vm_base_key (p, NULL, key, &e) < 0)
    goto out;
  sbx_vm_keys_keep (k, key);
  if (code_plan != NULL)
    {
      if (sbx_vm_image_code_key (code_plan, p, key, &e) < 0)
        goto out;
      sbx_vm_keys_keep (k, key);
    }
  rc = 0;
out:
  if (e)
    sbx_warn ("VM image prune: the built-in templates' keys: %s", e->msg);
  sbx_error_free (e);
  sbx_vm_pkgs_free (p);
  return rc;
}

/* Unlink KEY.img then KEY.sum: bytes freed. */
static uint64_t
remove_image (int dir, const char *key)
{
  static const char *const ext[] = {".img", ".sum"};
  uint64_t freed = 0;

  for (int i = 0; i < 2; i++)
    {
      char name[80];
      struct stat st;
      snprintf (name, sizeof name, "%s%s", key, ext[i]);
      if (fstatat (dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (unlinkat (dir, name, 0) < 0)
        sbx_warn ("VM image prune: unlink %s: %s", name, strerror (errno));
      else if (st.st_nlink <= 1)
        freed += (uint64_t) st.st_blocks * 512;
    }
  return freed;
}

int
sbx_vm_image_prune (int snapstore, const struct sbx_plan *code_plan,
                    int (*live) (struct sbx_vm_keys *keys), struct sbx_vm_prune_result *res,
                    sbx_error_t **err)
{
  struct sbx_vm_keys k = {NULL, 0, 0};
  int dir, rc = -1;

  memset (res, 0, sizeof *res);
  if ((dir = sbx_vm_image_cache_lock ()) < 0)
    return 0; /* no cache */
  if (list_images (dir, &k) < 0)
    {
      sbx_err_sys (err, errno, "VM image prune: read the cache");
      goto out;
    }
  if (left (&k) > 0 && live (&k) != 0)
    {
      res->deferred = 1;
      rc = 0;
      goto out;
    }
  if (left (&k) > 0 && (snapstore < 0 || keep_snapshots (snapstore, &k) < 0))
    {
      sbx_err (err, SBX_E_UNAVAILABLE, "VM image prune: cannot read the snapshot store");
      goto out;
    }
  if (left (&k) > 0 && keep_builtin (code_plan, &k) < 0)
    {
      sbx_err (err, SBX_E_UNAVAILABLE, "VM image prune: cannot compute base's image key");
      goto out;
    }
  if (left (&k) > 0 && sbx_tmpl_each (keep_template, &k) != 0)
    {
      sbx_err (err, SBX_E_UNAVAILABLE, "VM image prune: cannot read a stored template");
      goto out;
    }
  for (size_t i = 0; i < k.n; i++)
    if (k.c[i].keep)
      res->kept++;
    else
      {
        uint64_t b = remove_image (dir, k.c[i].key);
        res->removed++;
        res->freed += b;
        sbx_info ("removed VM root image %s (%llu KiB): no VM, snapshot or template uses it",
                  k.c[i].key, (unsigned long long) (b >> 10));
      }
  rc = 0;
out:
  sbx_vm_image_cache_unlock ();
  free (k.c);
  return rc;
}
