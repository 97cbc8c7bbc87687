/* sbx: fork: N new sandboxes from a running one (docs/api.md "Fork").
 *
 * Each new sandbox is created as any other (pool, limits, the same
 * tenant's cap) with the source's settings, then gets a copy of the
 * source's disk (/home/user, /tmp, /dev/shm), made by the privileged
 * parent while the source is frozen (iso/copy.c: the tree is hostile).
 * Processes are not carried: the engine cannot checkpoint them (no CRIU
 * on the kernels we target), so a fork starts with only init running.
 * A VM's are: its fork is a restore of its memory (core/vm_fork.c).
 */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "iso/copy.h"
#include "util/log.h"

void
sbx_fork_result_release (struct sbx_fork_result *out)
{
  unsigned i;

  for (i = 0; i < out->n; i++)
    sbx_sandbox_unref (out->sb[i]);
  out->n = 0;
}

/* Kill what was made so far: a failed fork leaves nothing. */
static void
undo (struct sbx_fork_result *out)
{
  unsigned i;

  for (i = 0; i < out->n; i++)
    sbx_sandbox_kill (out->sb[i], "fork failed", NULL);
  sbx_fork_result_release (out);
}

int
sbx_sandbox_fork (struct sbx_sandbox *src, unsigned count, uint64_t timeout_ms,
                  struct sbx_fork_result *out, sbx_error_t **err)
{
  struct sbx_create_opts opts;
  char tenant[sizeof src->tenant], template_name[sizeof src->template_name],
      user[sizeof src->user], mask_host[sizeof src->mask_host];
  json_t *env = NULL, *metadata = NULL, *network = NULL;
  char nonce[17], pending[96];
  int was_paused = 0, rc = -1;
  unsigned i;

  memset (out, 0, sizeof *out);
  if (count < 1 || count > SBX_FORK_MAX)
    return sbx_err (err, SBX_E_INVALID, "count must be 1 to %d, not %u", SBX_FORK_MAX, count);
  if (timeout_ms && sbx__check_timeout (timeout_ms, err) < 0)
    return -1;
  memset (&opts, 0, sizeof opts);
  pthread_mutex_lock (&sbx_core.lock);
  if (src->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", src->id);
    }
  if (sbx_core.running + count > sbx_core.cfg.max_sandboxes)
    {
      /* Said before any child is made (each would be made and undone). */
      unsigned running = sbx_core.running;
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_LIMIT,
                      "a fork of %u would pass the daemon's limit of %u sandboxes (%u run)", count,
                      sbx_core.cfg.max_sandboxes, running);
    }
  if (src->hibernated == SBX_HIBERNATED_FILESYSTEM)
    {
      /* Nothing runs to copy from (its files wait in the store). */
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_CONFLICT,
                      "sandbox %s is paused without its memory: resume it to fork it", src->id);
    }
  snprintf (mask_host, sizeof mask_host, "%s", src->mask_host);
  snprintf (tenant, sizeof tenant, "%s", src->tenant);
  snprintf (template_name, sizeof template_name, "%s", src->template_name);
  snprintf (user, sizeof user, "%s", src->user);
  env = json_deep_copy (src->env);
  metadata = json_deep_copy (src->metadata);
  network = src->network ? json_deep_copy (src->network) : NULL;
  opts.limits = src->limits;
  opts.timeout_ms = timeout_ms ? timeout_ms : src->timeout_ms;
  opts.lifecycle = src->lifecycle;
  pthread_mutex_unlock (&sbx_core.lock);
  if (env == NULL || metadata == NULL || (src->network && network == NULL))
    {
      sbx_err_oom (err);
      goto out;
    }
  opts.template_name = template_name;
  opts.user = user;
  opts.env = env;
  opts.metadata = metadata;
  opts.network = network;
  opts.mask_host = mask_host[0] ? mask_host : NULL;
  /* All or nothing, also across a crash: the new sandboxes' records stay
     pending (a restart ends them) until every copy is made. */
  sbx_random_hex (nonce, 8);
  snprintf (pending, sizeof pending, "fork of %s %s", src->id, nonce);
  opts.pending = pending;

  if (src->isolation == SBX_ISOLATION_VM)
    {
      out->vm = 1;
      rc = sbx__vm_fork (src, tenant, &opts, count, out, err);
      if (rc == 0)
        rc = sbx_store_sandbox_complete (sbx_core.store, pending, err);
      if (rc < 0)
        undo (out);
      else
        for (i = 0; i < out->n; i++)
          sbx_audit_lifecycle ("forked", out->sb[i]->id, out->sb[i]->tenant, src->id);
      goto out;
    }
  for (i = 0; i < count; i++)
    {
      struct sbx_sandbox *sb = sbx_sandbox_create (tenant, &opts, err);
      if (sb == NULL)
        {
          undo (out);
          goto out;
        }
      out->sb[out->n++] = sb;
    }

  /* One consistent state for all of them: frozen once for every copy (a
     paused source stays as it is), and held (requests to it wait). */
  if (sbx__transition_begin (src, &was_paused, err) < 0)
    {
      undo (out);
      goto out;
    }
  rc = was_paused ? 0 : sbx_host_freeze (src->slot, 1, err);
  if (rc == 0 && src->hibernated == SBX_HIBERNATED_FILESYSTEM)
    /* Paused so since the check above. */
    rc = sbx_err (err, SBX_E_CONFLICT,
                  "sandbox %s is paused without its memory: resume it to fork it", src->id);
  for (i = 0; rc == 0 && i < out->n; i++)
    {
      struct sbx_copy_result res;
      rc = sbx_host_copy_disk (src->slot, out->sb[i]->slot, &res, err);
      if (rc == 0)
        {
          out->files = res.files;
          out->dirs = res.dirs;
          out->symlinks = res.symlinks;
          out->bytes = res.bytes;
          out->skipped = res.skipped;
        }
    }
  if (!was_paused)
    {
      sbx_error_t *e = NULL;
      if (sbx_host_freeze (src->slot, 0, &e) < 0)
        {
          sbx_error ("sandbox %s: thawing after a fork: %s", src->id, e->msg);
          sbx_error_free (e);
        }
    }
  sbx__transition_end (src);
  if (rc == 0)
    rc = sbx_store_sandbox_complete (sbx_core.store, pending, err);
  if (rc < 0)
    {
      sbx_err_wrap (err, "fork of sandbox `%s`", src->id);
      undo (out);
      goto out;
    }
  for (i = 0; i < out->n; i++)
    sbx_audit_lifecycle ("forked", out->sb[i]->id, out->sb[i]->tenant, src->id);
out:
  json_decref (env);
  json_decref (metadata);
  json_decref (network);
  return rc;
}

json_t *
sbx_fork_result_json (const struct sbx_fork_result *out)
{
  json_t *arr = json_array ();
  unsigned i;

  for (i = 0; i < out->n; i++)
    json_array_append_new (arr, sbx_sandbox_json (out->sb[i]));
  if (out->vm)
    return json_pack ("{s:o, s:b, s:s, s:I}", "sandboxes", arr, "processes_not_carried", 0,
                      "note",
                      "a VM's memory is carried: its processes, files and disk go on in each"
                      " copy from the moment of the save",
                      "memory_image_bytes", (json_int_t) out->memory_image_bytes);
  return json_pack ("{s:o, s:b, s:s, s:{s:I, s:I, s:I, s:I, s:I}}", "sandboxes", arr,
                    "processes_not_carried", 1, "note",
                    "the files of /home/user, /tmp and /dev/shm and the settings are copied;"
                    " running processes are not carried over",
                    "copied", "files", (json_int_t) out->files, "directories",
                    (json_int_t) out->dirs, "symlinks", (json_int_t) out->symlinks, "bytes",
                    (json_int_t) out->bytes, "skipped_special", (json_int_t) out->skipped);
}
