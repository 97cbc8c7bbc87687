/* sbx: stored templates as the front end sees them (docs/templates.md).
 *
 * The parent owns the store (iso/tmpl_store.c); the front end reads the
 * small files of STATE/templates/by-name/NAME/ (layers, meta.json, owner,
 * created: root's, world-readable) to list, inspect and apply a template,
 * and asks the parent to build and remove. meta.json was written by the
 * confined extractor from a hostile image config: it is parsed here, in
 * the unprivileged process, and every field checked before use.
 *
 * Names are global (one store), ownership is per tenant: a template built
 * through the unix socket (the administrator, owner "*") is visible to
 * every tenant; one a tenant built is visible to and removable by that
 * tenant only, and to another tenant it does not exist (404).
 */
#include "core/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#include "core/template.h"
#include "iso/tmpl.h"
#include "priv/host.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/file.h"

#define GLOBAL_OWNER "*"

static char *
read_small (const char *name, const char *file, size_t cap)
{
  char path[1024];

  if (!sbx_tmpl_name_ok (name))
    return NULL;
  snprintf (path, sizeof path, "%s/templates/by-name/%s/%s", sbx_core.cfg.state_dir, name, file);
  return sbx_read_small_at (AT_FDCWD, path, cap, NULL);
}

static int
visible_to (const char *owner, const char *tenant)
{
  return tenant == NULL || strcmp (owner, GLOBAL_OWNER) == 0 || strcmp (owner, tenant) == 0;
}

/* meta.json, checked: env an array of "K=V" strings, workdir absolute,
   user a short string. NULL when missing or malformed. */
static json_t *
load_meta (const char *name)
{
  cleanup_free char *text = read_small (name, "meta.json", SBX_TMPL_META_MAX);
  json_t *m, *env, *v, *clean;
  const char *s;
  size_t i;

  if (text == NULL || (m = json_loads (text, JSON_REJECT_DUPLICATES, NULL)) == NULL)
    return NULL;
  clean = json_object ();
  env = json_object ();
  json_array_foreach (json_object_get (m, "env"), i, v)
  {
    const char *kv = json_string_value (v), *eq = kv ? strchr (kv, '=') : NULL;
    if (eq && eq != kv && (size_t) (eq - kv) < 256)
      {
        char key[256];
        memcpy (key, kv, (size_t) (eq - kv));
        key[eq - kv] = '\0';
        json_object_set_new (env, key, json_string (eq + 1));
      }
  }
  json_object_set_new (clean, "env", env);
  s = json_string_value (json_object_get (m, "workdir"));
  if (s && s[0] == '/' && strlen (s) < 1024)
    json_object_set_new (clean, "workdir", json_string (s));
  s = json_string_value (json_object_get (m, "user"));
  if (s && strlen (s) < 64)
    json_object_set_new (clean, "user", json_string (s));
  s = json_string_value (json_object_get (m, "source"));
  json_object_set_new (clean, "source",
                       json_string (s && (strcmp (s, "oci") == 0 || strcmp (s, "recipe") == 0)
                                        ? s
                                        : "dir"));
  json_decref (m);
  return clean;
}

/* The template's JSON for `tenant`, or NULL (absent or not visible). */
static json_t *
template_json (const char *tenant, const char *name)
{
  cleanup_free char *owner = read_small (name, "owner", 128);
  cleanup_free char *layers = read_small (name, "layers", 16384);
  cleanup_free char *created = read_small (name, "created", 128);
  json_t *o, *arr, *meta;
  long long ms = 0;
  unsigned long long bytes = 0;
  char *p, *save = NULL;

  if (owner == NULL || layers == NULL || !visible_to (owner, tenant))
    return NULL;
  meta = load_meta (name);
  if (meta == NULL)
    return NULL;
  if (created)
    sscanf (created, "%lld %llu", &ms, &bytes);
  arr = json_array ();
  for (p = strtok_r (layers, "\n", &save); p; p = strtok_r (NULL, "\n", &save))
    {
      char id[80];
      snprintf (id, sizeof id, "sha256:%.64s", p);
      json_array_append_new (arr, json_string (id));
    }
  /* created_at as every other time in the API (RFC 3339); created_ms kept
     for the clients written against it */
  o = json_pack ("{s:s, s:b, s:s, s:o, s:I, s:o, s:I}", "name", name, "builtin", 0, "owner",
                 strcmp (owner, GLOBAL_OWNER) == 0 ? "global" : owner, "layers", arr,
                 "size_bytes", (json_int_t) bytes, "created_at", sbx_json_time (ms), "created_ms",
                 (json_int_t) ms);
  json_object_update (o, meta);
  json_decref (meta);
  return o;
}

static json_t *
builtin_json (const char *name)
{
  return json_pack ("{s:s, s:b, s:s, s:[], s:{}, s:s}", "name", name, "builtin", 1, "owner",
                    "global", "layers", "env", "source", "host");
}

json_t *
sbx_template_get_json (const char *tenant, const char *name, sbx_error_t **err)
{
  json_t *o;

  if (sbx_template_find (name) != NULL)
    return builtin_json (name);
  o = template_json (tenant, name);
  if (o == NULL)
    sbx_err (err, SBX_E_NOT_FOUND, "template `%.64s` not found", name);
  return o;
}

json_t *
sbx_template_list_json (const char *tenant)
{
  json_t *arr = json_array ();
  char path[1024];
  struct dirent *de;
  DIR *d;

  json_array_append_new (arr, builtin_json ("base"));
  json_array_append_new (arr, builtin_json ("code-interpreter-v1"));
  snprintf (path, sizeof path, "%s/templates/by-name", sbx_core.cfg.state_dir);
  d = opendir (path);
  if (d == NULL)
    return arr;
  while ((de = readdir (d)) != NULL)
    {
      json_t *o = sbx_tmpl_name_ok (de->d_name) ? template_json (tenant, de->d_name) : NULL;
      if (o)
        json_array_append_new (arr, o);
    }
  closedir (d);
  return arr;
}

/* ---- a tenant's quota (--tenant-templates, --tenant-template-bytes) ---- */

/* Builds under way count against their tenant's quota from their start:
   two at once cannot both take what only one may. */
static pthread_mutex_t quota_lock = PTHREAD_MUTEX_INITIALIZER;
static struct
{
  char tenant[64];
  uint64_t bytes; /* the most the build may store */
} building[64];

void
sbx_template_usage (const char *tenant, unsigned *count, uint64_t *bytes)
{
  char path[1024];
  struct dirent *de;
  DIR *d;

  *count = 0;
  *bytes = 0;
  snprintf (path, sizeof path, "%s/templates/by-name", sbx_core.cfg.state_dir);
  d = opendir (path);
  while (d && (de = readdir (d)) != NULL)
    {
      cleanup_free char *owner = NULL, *created = NULL;
      long long ms = 0;
      unsigned long long b = 0;
      if (!sbx_tmpl_name_ok (de->d_name)
          || (owner = read_small (de->d_name, "owner", 128)) == NULL || strcmp (owner, tenant) != 0)
        continue;
      created = read_small (de->d_name, "created", 128);
      if (created)
        sscanf (created, "%lld %llu", &ms, &b);
      (*count)++;
      *bytes += b;
    }
  if (d)
    closedir (d);
}

/* Reserve a build's place in tenant's quota: the bytes it may store, or
   -1 with err (TOO_MANY, TOO_LARGE) when none is left. */
static int
reserve (const char *tenant, uint64_t *may, unsigned *slot, sbx_error_t **err)
{
  const struct sbx_config *c = &sbx_core.cfg;
  unsigned count, i, free_slot = UINT32_MAX;
  uint64_t bytes;
  int rc = 0;

  pthread_mutex_lock (&quota_lock);
  sbx_template_usage (tenant, &count, &bytes);
  for (i = 0; i < sizeof building / sizeof *building; i++)
    if (building[i].tenant[0] == '\0')
      free_slot = free_slot == UINT32_MAX ? i : free_slot;
    else if (strcmp (building[i].tenant, tenant) == 0)
      {
        count++;
        bytes += building[i].bytes;
      }
  if (count >= c->tenant_max_templates)
    rc = sbx_err (err, SBX_E_LIMIT,
                  "tenant `%s` has %u templates (at most %u: sbx serve --tenant-templates);"
                  " remove one first",
                  tenant, count, c->tenant_max_templates);
  else if (bytes + 4096 > c->tenant_template_bytes)
    rc = sbx_err (err, SBX_E_TOO_LARGE,
                  "tenant `%s`'s templates hold %llu of its %llu bytes"
                  " (sbx serve --tenant-template-bytes); remove one first",
                  tenant, (unsigned long long) bytes, (unsigned long long) c->tenant_template_bytes);
  else if (free_slot == UINT32_MAX)
    rc = sbx_err (err, SBX_E_LIMIT, "too many template builds at once; try again");
  else
    {
      *may = c->tenant_template_bytes - bytes;
      *slot = free_slot;
      snprintf (building[free_slot].tenant, sizeof building[free_slot].tenant, "%s", tenant);
      building[free_slot].bytes = *may;
    }
  pthread_mutex_unlock (&quota_lock);
  return rc;
}

static void
unreserve (unsigned slot)
{
  pthread_mutex_lock (&quota_lock);
  building[slot].tenant[0] = '\0';
  pthread_mutex_unlock (&quota_lock);
}

int
sbx_template_usable (const char *tenant, const char *name)
{
  cleanup_free char *owner = NULL;

  if (name == NULL || sbx_template_find (name) != NULL)
    return 1;
  owner = read_small (name, "owner", 128);
  return owner != NULL && visible_to (owner, tenant);
}

int
sbx_template_lookup (const char *tenant, const char *name, int *everyone)
{
  cleanup_free char *owner = NULL;

  *everyone = 0;
  if (name == NULL)
    return -1;
  if (sbx_template_find (name) != NULL)
    {
      *everyone = 1;
      return 1;
    }
  if (!sbx_tmpl_name_ok (name) || (owner = read_small (name, "owner", 128)) == NULL)
    return -1;
  *everyone = strcmp (owner, GLOBAL_OWNER) == 0;
  return visible_to (owner, tenant) ? 1 : 0;
}

int
sbx_template_is_stored (const char *name)
{
  return name != NULL && sbx_template_find (name) == NULL && sbx_tmpl_name_ok (name);
}

json_t *
sbx_template_meta (const char *name)
{
  return sbx_template_is_stored (name) ? load_meta (name) : NULL;
}

/* The client's recipe {"release": R, "packages": [P...]} (JSON, in the
   spool file) rewritten there in the parent's line form. */
static int
canonical_recipe (int fd, sbx_error_t **err)
{
  static const char *const allowed[] = {"release", "packages", "run", NULL};
  char buf[8192], release[72], include[8192];
  struct sbx_buf out = SBX_BUF_INIT;
  json_error_t je;
  json_t *j, *v;
  ssize_t n = pread (fd, buf, sizeof buf, 0);
  const char *key;
  size_t i;
  int rc = -1;

  if (n <= 0 || (size_t) n >= sizeof buf)
    return sbx_err (err, SBX_E_INVALID, "the recipe must be a JSON object under 8 KiB");
  j = json_loadb (buf, (size_t) n, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object (j))
    {
      json_decref (j);
      return sbx_err (err, SBX_E_INVALID, "malformed recipe: %s", j ? "not an object" : je.text);
    }
  json_object_foreach (j, key, v)
  {
    int ok = 0;
    for (i = 0; allowed[i]; i++)
      ok |= strcmp (key, allowed[i]) == 0;
    if (!ok)
      {
        sbx_err (err, SBX_E_INVALID, "recipe: unknown field `%.64s` (release, packages, run)", key);
        goto out;
      }
  }
  v = json_object_get (j, "release");
  if (!json_is_string (v))
    {
      sbx_err (err, SBX_E_INVALID, "recipe: `release` (a Debian codename: bookworm) is required");
      goto out;
    }
  sbx_buf_printf (&out, "release %s\n", json_string_value (v));
  v = json_object_get (j, "packages");
  if (v && !json_is_array (v))
    {
      sbx_err (err, SBX_E_INVALID, "recipe: `packages` must be an array of package names");
      goto out;
    }
  {
    json_t *p;
    json_array_foreach (v, i, p)
    {
      const char *s = json_string_value (p);
      if (s == NULL || strchr (s, '\n') != NULL)
        {
          sbx_err (err, SBX_E_INVALID, "recipe: `packages[%zu]` must be a package name", i);
          goto out;
        }
      sbx_buf_printf (&out, "package %s\n", s);
    }
  }
  v = json_object_get (j, "run");
  if (v && (!json_is_array (v) || json_array_size (v) > SBX_TMPL_RUN_MAX))
    {
      sbx_err (err, SBX_E_INVALID, "recipe: `run` must be an array of at most %d commands",
               SBX_TMPL_RUN_MAX);
      goto out;
    }
  {
    json_t *c;
    json_array_foreach (v, i, c)
    {
      const char *s = json_string_value (c);
      size_t len = s ? strlen (s) : 0;
      int ok = s != NULL && len > 0 && len <= SBX_TMPL_RUN_LEN
               && json_string_length (c) == len;
      for (size_t k = 0; ok && k < len; k++)
        ok = ((unsigned char) s[k] >= 0x20 || s[k] == '\t') && (unsigned char) s[k] <= 0x7e;
      if (!ok)
        {
          sbx_err (err, SBX_E_INVALID,
                   "recipe: `run[%zu]` must be a command: a string of 1 to %d printable ASCII "
                   "characters (one line)",
                   i, SBX_TMPL_RUN_LEN);
          goto out;
        }
      sbx_buf_printf (&out, "run %s\n", s);
    }
  }
  if (out.failed)
    {
      sbx_err_oom (err);
      goto out;
    }
  sbx_buf_append (&out, "", 1);
  if (sbx_tmpl_recipe_parse (out.data, release, sizeof release, include, sizeof include) < 0)
    {
      sbx_err (err, SBX_E_INVALID,
               "recipe: a release is a-z0-9 (bookworm), a package a-z0-9 then .+- (at most "
               "128 packages, 64 bytes each)");
      goto out;
    }
  if (ftruncate (fd, 0) < 0 || pwrite (fd, out.data, out.len - 1, 0) != (ssize_t) (out.len - 1))
    {
      sbx_err_sys (err, errno, "recipe: spool");
      goto out;
    }
  rc = 0;
out:
  sbx_buf_free (&out);
  json_decref (j);
  return rc;
}

int
sbx_template_build (const char *tenant, const char *name, const char *format, int fd,
                    sbx_error_t **err)
{
  uint32_t f;

  if (format == NULL || strcmp (format, "oci") == 0)
    f = SBX_TMPL_OCI;
  else if (strcmp (format, "dir") == 0)
    f = SBX_TMPL_DIR;
  else if (strcmp (format, "recipe") == 0)
    {
      /* debootstrap runs package scripts as root on the host (in a chroot) */
      if (tenant != NULL)
        return sbx_err (err, SBX_E_FORBIDDEN,
                        "recipe templates are built by the administrator (the unix socket) only");
      f = SBX_TMPL_RECIPE;
    }
  else
    return sbx_err (err, SBX_E_INVALID, "format must be `oci`, `dir` or `recipe`, not `%.32s`",
                    format);
  if (name == NULL || !sbx_tmpl_name_ok (name))
    return sbx_err (err, SBX_E_INVALID,
                    "template name `%.64s`: 1 to 31 of a-z 0-9 . _ -, starting with a letter or "
                    "digit, and not a built-in template",
                    name ? name : "");
  if (tenant && (strlen (tenant) >= 64 || strcmp (tenant, GLOBAL_OWNER) == 0))
    return sbx_err (err, SBX_E_INVALID, "this tenant's name cannot own templates");
  if (f == SBX_TMPL_RECIPE && canonical_recipe (fd, err) < 0)
    return -1;
  if (tenant == NULL)
    return sbx_host_template_build (fd, name, GLOBAL_OWNER, f, 0, err);
  {
    uint64_t may = 0;
    unsigned slot = 0;
    int rc;

    if (reserve (tenant, &may, &slot, err) < 0)
      return -1;
    rc = sbx_host_template_build (fd, name, tenant, f, may, err);
    unreserve (slot);
    if (rc < 0 && (*err)->kind == SBX_E_TOO_LARGE && may < sbx_core.cfg.template_max_bytes)
      sbx_err_wrap (err, "tenant `%s`'s template quota leaves %llu bytes", tenant,
                    (unsigned long long) may);
    return rc;
  }
}

int
sbx_template_delete (const char *tenant, const char *name, sbx_error_t **err)
{
  cleanup_free char *owner = NULL;
  struct sbx_sandbox *sb;
  unsigned users = 0;

  if (name && sbx_template_find (name) != NULL)
    return sbx_err (err, SBX_E_FORBIDDEN, "template `%s` is built in", name);
  owner = name ? read_small (name, "owner", 128) : NULL;
  if (owner == NULL || !visible_to (owner, tenant)
      || (tenant != NULL && strcmp (owner, tenant) != 0))
    {
      if (owner && visible_to (owner, tenant))
        return sbx_err (err, SBX_E_FORBIDDEN, "template `%s` belongs to the administrator", name);
      return sbx_err (err, SBX_E_NOT_FOUND, "template `%.64s` not found", name ? name : "");
    }
  pthread_mutex_lock (&sbx_core.lock);
  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (sb->state == SBX_SB_RUNNING && strcmp (sb->template_name, name) == 0)
      users++;
  pthread_mutex_unlock (&sbx_core.lock);
  if (users)
    return sbx_err (err, SBX_E_CONFLICT,
                    "template `%s` is used by %u running sandbox%s; remove it when they end", name,
                    users, users == 1 ? "" : "es");
  return sbx_host_template_remove (name, err);
}

json_t *
sbx_template_cache (const char *tenant, int prune, sbx_error_t **err)
{
  uint64_t entries = 0, bytes = 0;

  /* Recipes are the administrator's (sbx_template_build); so is their cache. */
  if (tenant != NULL)
    {
      sbx_err (err, SBX_E_FORBIDDEN,
               "the recipe build cache is the administrator's (the unix socket) only");
      return NULL;
    }
  if (sbx_host_template_cache (prune, &entries, &bytes, err) < 0)
    return NULL;
  return json_pack ("{s:I,s:I}", "entries", (json_int_t) entries, "bytes", (json_int_t) bytes);
}

json_t *
sbx_template_progress (const char *tenant, const char *name, sbx_error_t **err)
{
  char path[1024], buf[4096];
  cleanup_close int fd = -1;
  struct stat st;
  off_t from;
  ssize_t n;
  json_t *lines;
  char *p, *save = NULL;

  /* only recipe builds have progress, and only the administrator makes them */
  if (tenant != NULL || !sbx_tmpl_name_ok (name))
    return sbx_err (err, SBX_E_NOT_FOUND, "no build of `%.64s` in progress", name), NULL;
  snprintf (path, sizeof path, "%s/templates/progress/%s", sbx_core.cfg.state_dir, name);
  fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    return sbx_err (err, SBX_E_NOT_FOUND, "no build of `%.64s` in progress", name), NULL;
  from = st.st_size > (off_t) sizeof buf - 1 ? st.st_size - (off_t) sizeof buf + 1 : 0;
  n = pread (fd, buf, sizeof buf - 1, from);
  buf[n > 0 ? n : 0] = '\0';
  lines = json_array ();
  for (p = strtok_r (buf, "\n", &save); p; p = strtok_r (NULL, "\n", &save))
    {
      for (char *q = p; *q; q++)
        if ((unsigned char) *q < 0x20 || (unsigned char) *q > 0x7e)
          *q = '?';
      json_array_append_new (lines, json_string (p));
    }
  /* the first line may be cut: drop it when the file was longer */
  if (from > 0 && json_array_size (lines) > 0)
    json_array_remove (lines, 0);
  return json_pack ("{s:s, s:I, s:o}", "name", name, "bytes", (json_int_t) st.st_size, "tail",
                    lines);
}
