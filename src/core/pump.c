/* sbx: copies into a sandbox made by a helper that its init forks
 * (SBX_MSG_PUMP), so that the pages of an upload or of a move between
 * /tmp and /home/user are charged to the sandbox's memory cgroup. Written
 * by the daemon, they would count against the daemon's, and a tenant could
 * fill host RAM through the files API beyond its own limit. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"

struct copier
{
  struct sbx_fs_copier base;
  struct sbx_sandbox *sb; /* holds a reference */
  uint32_t uid, gid;
};

static void
unlink_pump (struct sbx_sandbox *sb, struct sbx_pump *pm)
{
  struct sbx_pump **pp;

  for (pp = &sb->pumps; *pp; pp = &(*pp)->next)
    if (*pp == pm)
      {
        *pp = pm->next;
        return;
      }
}

static int
pump_start (void *arg, int in_fd, int out_fd, void **job, sbx_error_t **err)
{
  struct copier *c = arg;
  struct sbx_sandbox *sb = c->sb;
  struct sbx_pump *pm;

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  pm = calloc (1, sizeof *pm);
  if (pm == NULL)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err_oom (err);
    }
  pm->req_id = ++sb->next_req_id;
  if (sbx_iso_pump (&sb->box, pm->req_id, c->uid, c->gid, in_fd, out_fd, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      free (pm);
      return -1;
    }
  pm->next = sb->pumps;
  sb->pumps = pm;
  pthread_mutex_unlock (&sbx_core.lock);
  *job = pm;
  return 0;
}

static int
pump_finish (void *arg, void *job, sbx_error_t **err)
{
  struct copier *c = arg;
  struct sbx_sandbox *sb = c->sb;
  struct sbx_pump *pm = job;
  int status;

  pthread_mutex_lock (&sbx_core.lock);
  while (!pm->done)
    pthread_cond_wait (&sb->cond, &sbx_core.lock);
  status = pm->status;
  unlink_pump (sb, pm);
  pthread_mutex_unlock (&sbx_core.lock);
  free (pm);
  switch (status)
    {
    case 0:
      return 0;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return sbx_err (err, SBX_E_TOO_LARGE, "the sandbox disk is full");
    case ECANCELED:
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    case EAGAIN:
      return sbx_err (err, SBX_E_LIMIT, "the sandbox's process limit is reached");
    case EPIPE:
      return sbx_err (err, SBX_E_UNAVAILABLE, "the copy was interrupted");
    default:
      return sbx_err_errno (err, SBX_E_SYSTEM, status, "copy into the sandbox");
    }
}

int
sbx__pump_on_event (struct sbx_sandbox *sb, const struct sbx_iso_event *ev)
{
  struct sbx_pump *pm;

  for (pm = sb->pumps; pm; pm = pm->next)
    if (pm->req_id == ev->req_id && !pm->done)
      {
        if (ev->type == SBX_ISO_SPAWN_FAILED)
          pm->status = ev->sys_errno ? ev->sys_errno : EIO;
        else if (ev->type == SBX_ISO_EXITED)
          /* Killed (by the sandbox's own code, or OOM): interrupted. */
          pm->status = WIFEXITED (ev->wait_status) ? WEXITSTATUS (ev->wait_status) : EPIPE;
        else
          return 0; /* a pump never reports SPAWNED */
        pm->done = 1;
        pthread_cond_broadcast (&sb->cond);
        return 1;
      }
  return 0;
}

void
sbx__pump_cancel_all (struct sbx_sandbox *sb)
{
  struct sbx_pump *pm;

  for (pm = sb->pumps; pm; pm = pm->next)
    if (!pm->done)
      {
        pm->done = 1;
        pm->status = ECANCELED;
      }
  pthread_cond_broadcast (&sb->cond);
}

int
sbx_sandbox_fs_open (struct sbx_sandbox *sb, const char *user, struct sbx_fs_ctx *ctx,
                     sbx_error_t **err)
{
  const char *u;
  struct copier *c;

  memset (ctx, 0, sizeof *ctx);
  ctx->root = -1;
  if (sb->isolation == SBX_ISOLATION_VM)
    return sbx__vm_fs_open (sb, user, ctx, err);
  /* Copies run in a helper init forks: not while it is frozen. */
  if (sbx_sandbox_awake (sb, err) < 0)
    return -1;
  pthread_mutex_lock (&sbx_core.lock);
  u = user ? user : sb->user;
  if (strcmp (u, "user") == 0)
    ctx->uid = ctx->gid = 1000;
  else if (strcmp (u, "root") == 0)
    ctx->uid = ctx->gid = 0;
  else
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_INVALID, "user must be `user` or `root`, not `%.32s`", u);
    }
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  /* The privileged parent resolves paths in the sandbox's root: we name
     the sandbox by its slot (the parent checks it is still the same). */
  ctx->slot = sb->slot;
  ctx->uid_base = sb->box.uid_base;
  sb->refs++;
  pthread_mutex_unlock (&sbx_core.lock);
  c = calloc (1, sizeof *c);
  if (c == NULL)
    {
      close (ctx->root);
      ctx->root = -1;
      sbx_sandbox_unref (sb);
      return sbx_err_oom (err);
    }
  c->base.start = pump_start;
  c->base.finish = pump_finish;
  c->base.arg = c;
  c->sb = sb;
  c->uid = ctx->uid;
  c->gid = ctx->gid;
  ctx->copier = &c->base;
  return 0;
}

void
sbx_sandbox_fs_close (struct sbx_fs_ctx *ctx)
{
  if (ctx->remote)
    sbx__vm_fs_close (ctx);
  if (ctx->copier)
    {
      struct copier *c = ctx->copier->arg;
      sbx_sandbox_unref (c->sb);
      free (c);
      ctx->copier = NULL;
    }
}
