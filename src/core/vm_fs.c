/* sbx: the files API for a VM sandbox (docs/vm.md, Files).
 *
 * The front end cannot resolve a path in a guest (its disk is guest
 * memory), so sbx_sandbox_fs_open gives a VM's context a struct
 * sbx_fs_remote, which priv/client.c calls instead of the privileged
 * parent. Stat, list, mkdir, move and remove run as a file operation of
 * the agent (SBX_SPAWN_FILE_OP, vm/agent_fs.c): a command's child, as the
 * requested user behind the command's walls, that runs the namespace
 * engine's iso/fs.c against the guest's root and writes vm/fs_wire.h
 * records to its stdout; so do read (the bytes come back as records) and
 * upload (the body is the operation's stdin).
 *
 * Everything the guest writes is the tenant's: it is parsed here as
 * hostile (bounded size and count, every length checked, types and error
 * kinds from fixed sets, names without '/' or NUL and never "." or "..",
 * paths under the one asked for), and anything out of format is a broken
 * guest (503), never a partial answer.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "util/cleanup.h"
#include "vm/fs_wire.h"

#define VM_FS_TIMEOUT_MS 60000
#define OUT_CAP (SBX_VM_FS_OUT_MAX + 4096) /* the END after a listing cut at the budget */

struct vm_fs
{
  struct sbx_fs_remote remote; /* remote.arg is this */
  struct sbx_sandbox *sb;      /* holds a reference */
  const char *user;            /* "user" or "root" */
};

/* Start argv as a file operation of the agent (its stdin open for an
   upload). */
static struct sbx_process *
op_start (struct vm_fs *v, char **argv, size_t out_cap, int stdin_open, sbx_error_t **err)
{
  struct sbx_exec_opts o;

  memset (&o, 0, sizeof o);
  o.argv = argv;
  o.user = v->user;
  o.cwd = "/";
  o.timeout_ms = stdin_open ? 0 : VM_FS_TIMEOUT_MS; /* an upload lasts as its body */
  o.stdin_open = stdin_open;
  o.mode = SBX_OUT_HEAD;
  o.out_cap = out_cap;
  o.file_op = 1;
  return sbx_process_start (v->sb, &o, err);
}

/* Wait for it to end and take its stdout; the process is gone after. */
static int
op_finish (struct sbx_process *p, size_t out_cap, struct sbx_vm_fs_answer *a, sbx_error_t **err)
{
  int rc = -1;

  memset (a, 0, sizeof *a);
  sbx_process_wait (p, -1);
  pthread_mutex_lock (&sbx_core.lock);
  {
    const struct sbx_outbuf *out = &p->out[0];
    size_t n = (size_t) (out->end - out->start);
    int st = p->wait_status;
    if (p->timed_out)
      sbx_err (err, SBX_E_UNAVAILABLE, "the file operation in the VM took too long");
    else if (!p->exited)
      sbx_err (err, SBX_E_UNAVAILABLE, "the file operation in the VM did not start (%s)",
               p->reason[0] ? p->reason : "unknown");
    else if (!WIFEXITED (st) || WEXITSTATUS (st) > 1)
      sbx_err (err, SBX_E_UNAVAILABLE, "the file operation in the VM ended with status %d",
               WIFEXITED (st) ? WEXITSTATUS (st) : 128 + WTERMSIG (st));
    else if (out->dropped || n > out_cap)
      sbx__vm_fs_broken ("too long", err);
    else if ((a->data = malloc (n ? n : 1)) == NULL)
      sbx_err_oom (err);
    else
      {
        sbx__outbuf_copy (out, SBX_OUT_HEAD, out->start, a->data, n);
        a->len = n;
        a->exit_code = WEXITSTATUS (st);
        rc = 0;
      }
  }
  pthread_mutex_unlock (&sbx_core.lock);
  sbx_process_collect (p);
  sbx_process_unref (p);
  return rc;
}

static int
run (struct vm_fs *v, char **argv, size_t out_cap, struct sbx_vm_fs_answer *a, sbx_error_t **err)
{
  struct sbx_process *p = op_start (v, argv, out_cap, 0, err);
  return p ? op_finish (p, out_cap, a, err) : -1;
}

int
sbx__vm_fs_call (struct sbx_sandbox *sb, const char *user, char **argv, size_t out_cap,
                 struct sbx_vm_fs_answer *a, sbx_error_t **err)
{
  struct vm_fs v;

  memset (&v, 0, sizeof v);
  v.sb = sb;
  v.user = user;
  return run (&v, argv, out_cap, a, err);
}

/* *e to the caller, who may want none (err NULL: E2B's probes). */
static void
hand_over (sbx_error_t **err, sbx_error_t **e)
{
  if (err)
    sbx_error_move (err, e);
  else
    {
      sbx_error_free (*e);
      *e = NULL;
    }
}

static int
op (struct vm_fs *v, char **argv, size_t max, int (*fn) (struct sbx_fs_entry *e, void *arg),
    void *arg, int *truncated, sbx_error_t **err)
{
  struct sbx_vm_fs_answer a;
  int rc;

  if (run (v, argv, OUT_CAP, &a, err) < 0)
    return -1;
  rc = sbx__vm_fs_parse (&a, max, fn, arg, truncated, 0, err);
  free (a.data);
  return rc;
}

static int
no_entries (struct sbx_fs_entry *e, void *arg)
{
  (void) e;
  (void) arg;
  return -1; /* the caller's parse reports it */
}

static int
simple (struct vm_fs *v, char **argv, sbx_error_t **err)
{
  sbx_error_t *e = NULL;
  if (op (v, argv, 0, no_entries, NULL, NULL, &e) < 0)
    {
      hand_over (err, &e);
      return -1;
    }
  return 0;
}

/* ---- stat -------------------------------------------------------------- */

struct stat_want
{
  struct sbx_fs_entry *out;
  char path[SBX_FS_PATH_MAX]; /* what the namespace engine would name it */
  const char *name;
  int seen;
};

static int
keep_stat (struct sbx_fs_entry *e, void *arg)
{
  struct stat_want *w = arg;

  if (strcmp (e->path, w->path) != 0 || strcmp (e->name, w->name) != 0)
    return -1;
  *w->out = *e;
  w->seen = 1;
  return 0;
}

static int
vm_stat (void *arg, const char *path, struct sbx_fs_entry *out, sbx_error_t **err)
{
  static char a0[] = SBX_VM_FS_ARGV0, a1[] = "stat";
  cleanup_free struct stat_want *w = calloc (1, sizeof *w);
  cleanup_free char *p = strdup (path);
  sbx_error_t *e = NULL;
  size_t n;

  if (w == NULL || p == NULL)
    return sbx_err_oom (err);
  /* iso/fs.c's own naming: normalized, trailing slashes gone, the last
     component (or "/"). The guest's answer must say exactly that. */
  if (sbx_fs_normalize (path, w->path, sizeof w->path, err) < 0)
    return -1;
  n = strlen (w->path);
  while (n > 1 && w->path[n - 1] == '/')
    w->path[--n] = '\0';
  w->name = strrchr (w->path, '/');
  w->name = (w->name && w->name[1]) ? w->name + 1 : w->path;
  w->out = out;
  char *argv[] = {a0, a1, p, NULL};
  if (op (arg, argv, 1, keep_stat, w, NULL, &e) < 0)
    {
      if (e == NULL)
        sbx__vm_fs_broken ("a stat's name", &e);
      hand_over (err, &e);
      return -1;
    }
  if (!w->seen)
    return sbx__vm_fs_broken ("a stat without its entry", err);
  return 0;
}

/* ---- list -------------------------------------------------------------- */

struct list_want
{
  char root[SBX_FS_PATH_MAX];
  int depth;
  int (*fn) (const struct sbx_fs_entry *e, void *arg);
  void *arg;
  int bad;
};

static int
pass_listed (struct sbx_fs_entry *e, void *arg)
{
  struct list_want *w = arg;

  if (!sbx__vm_fs_listed_ok (e, w->root, w->depth))
    {
      w->bad = 1;
      return -1;
    }
  return w->fn (e, w->arg);
}

static int
vm_list (void *arg, const char *path, int depth, size_t max_entries,
         int (*fn) (const struct sbx_fs_entry *e, void *fn_arg), void *fn_arg, int *truncated,
         sbx_error_t **err)
{
  static char a0[] = SBX_VM_FS_ARGV0, a1[] = "list";
  cleanup_free struct list_want *w = calloc (1, sizeof *w);
  cleanup_free char *p = strdup (path);
  char a_depth[16], a_max[24];
  sbx_error_t *e = NULL;
  size_t n;

  *truncated = 0;
  if (w == NULL || p == NULL)
    return sbx_err_oom (err);
  if (depth < 1 || depth > 16)
    return sbx_err (err, SBX_E_INVALID, "depth must be 1 to 16");
  if (max_entries > 1000000) /* the agent's bound; the routes ask for 10000 */
    return sbx_err (err, SBX_E_INVALID, "at most 1000000 entries");
  if (sbx_fs_normalize (path, w->root, sizeof w->root, err) < 0)
    return -1;
  n = strlen (w->root);
  while (n > 1 && w->root[n - 1] == '/')
    w->root[--n] = '\0';
  w->depth = depth;
  w->fn = fn;
  w->arg = fn_arg;
  snprintf (a_depth, sizeof a_depth, "%d", depth);
  snprintf (a_max, sizeof a_max, "%zu", max_entries);
  char *argv[] = {a0, a1, p, a_depth, a_max, NULL};
  if (op (arg, argv, max_entries, pass_listed, w, truncated, &e) < 0)
    {
      if (e == NULL && w->bad)
        sbx__vm_fs_broken ("a listed name", &e);
      else if (e == NULL)
        sbx_err_oom (&e);
      hand_over (err, &e);
      return -1;
    }
  return 0;
}

/* ---- mkdir, move, remove ----------------------------------------------- */

static int
vm_mkdir (void *arg, const char *path, uint32_t mode, int parents, sbx_error_t **err)
{
  static char a0[] = SBX_VM_FS_ARGV0, a1[] = "mkdir";
  cleanup_free char *p = strdup (path);
  char a_mode[16], a_parents[2] = {parents ? '1' : '0', '\0'};

  if (p == NULL)
    return sbx_err_oom (err);
  snprintf (a_mode, sizeof a_mode, "%o", (unsigned) (mode & 07777));
  char *argv[] = {a0, a1, p, a_mode, a_parents, NULL};
  return simple (arg, argv, err);
}

static int
vm_move (void *arg, const char *from, const char *to, int overwrite, sbx_error_t **err)
{
  static char a0[] = SBX_VM_FS_ARGV0, a1[] = "move";
  cleanup_free char *f = strdup (from);
  cleanup_free char *t = strdup (to);
  char a_over[2] = {overwrite ? '1' : '0', '\0'};

  if (f == NULL || t == NULL)
    return sbx_err_oom (err);
  char *argv[] = {a0, a1, f, t, a_over, NULL};
  return simple (arg, argv, err);
}

static int
vm_remove (void *arg, const char *path, int recursive, sbx_error_t **err)
{
  static char a0[] = SBX_VM_FS_ARGV0, a1[] = "remove";
  cleanup_free char *p = strdup (path);
  char a_rec[2] = {recursive ? '1' : '0', '\0'};

  if (p == NULL)
    return sbx_err_oom (err);
  char *argv[] = {a0, a1, p, a_rec, NULL};
  return simple (arg, argv, err);
}

/* ---- read, upload ------------------------------------------------------ */

static int
vm_read (void *arg, const char *path, size_t max, char **data, size_t *len, sbx_error_t **err)
{
  static char a0[] = SBX_VM_FS_ARGV0, a1[] = "read";
  cleanup_free char *p = strdup (path);
  char a_max[24];
  /* max + 1 bytes, a record header per chunk, the END. */
  size_t cap = max + 1 + (max / SBX_VM_FS_DATA_MAX + 2) * sizeof (struct sbx_vm_fs_rec) + 4096;
  struct sbx_vm_fs_answer a;

  *data = NULL;
  *len = 0;
  if (p == NULL)
    return sbx_err_oom (err);
  snprintf (a_max, sizeof a_max, "%zu", max);
  char *argv[] = {a0, a1, p, a_max, NULL};
  if (run (arg, argv, cap, &a, err) < 0)
    return -1;
  if (sbx__vm_fs_parse (&a, 0, no_entries, NULL, NULL, 1, err) < 0)
    {
      free (a.data);
      return -1;
    }
  if (a.data_len > max)
    {
      free (a.data);
      return sbx_err (err, SBX_E_TOO_LARGE, "`%.200s` is larger than %zu bytes", path, max);
    }
  *data = a.data;
  *len = a.data_len;
  return 0;
}

/* An upload: the operation, until its answer is taken. */
struct vm_upload
{
  struct sbx_process *p; /* NULL once finished */
  sbx_error_t *err;      /* the operation's own error, once finished */
};

static int
vm_upload_begin (void *arg, const char *path, uint32_t mode, int parents, void **job,
                 sbx_error_t **err)
{
  static char a0[] = SBX_VM_FS_ARGV0, a1[] = "upload";
  cleanup_free char *p = strdup (path);
  char a_mode[16], a_parents[2] = {parents ? '1' : '0', '\0'};
  struct vm_upload *u = calloc (1, sizeof *u);

  if (p == NULL || u == NULL)
    {
      free (u);
      return sbx_err_oom (err);
    }
  snprintf (a_mode, sizeof a_mode, "%o", (unsigned) (mode & 07777));
  char *argv[] = {a0, a1, p, a_mode, a_parents, NULL};
  u->p = op_start (arg, argv, OUT_CAP, 1, err);
  if (u->p == NULL)
    {
      free (u);
      return -1;
    }
  *job = u;
  return 0;
}

/* Wait for the operation's answer (its stdin is at its end, or it stopped
   reading it): 0, or in u->err what the guest said. */
static int
upload_answer (struct vm_upload *u)
{
  struct sbx_vm_fs_answer a;
  int rc;

  rc = op_finish (u->p, OUT_CAP, &a, &u->err);
  u->p = NULL;
  if (rc == 0)
    rc = sbx__vm_fs_parse (&a, 0, no_entries, NULL, NULL, 0, &u->err);
  free (a.data);
  return rc;
}

static int
vm_upload_write (void *job, const void *data, size_t len, sbx_error_t **err)
{
  struct vm_upload *u = job;
  sbx_error_t *e = NULL;

  if (u->p == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "upload interrupted");
  if (sbx_process_write_stdin (u->p, data, len, 0, NULL, NULL, &e) == 0)
    return 0;
  /* It stopped reading: it failed at its start (no such directory,
     permission denied) or the disk is full; its own answer says which. */
  sbx_process_signal (u->p, SIGKILL, NULL);
  if (upload_answer (u) < 0 && u->err)
    {
      sbx_error_free (e);
      sbx_error_move (err, &u->err);
      return -1;
    }
  sbx_error_move (err, &e);
  return -1;
}

static int
vm_upload_end (void *job, int commit, sbx_error_t **err)
{
  struct vm_upload *u = job;
  int rc = 0;

  if (u->p && !commit)
    {
      /* Killed, its unnamed temporary goes with it: nothing is written. */
      sbx_process_signal (u->p, SIGKILL, NULL);
      sbx_process_wait (u->p, -1);
      sbx_process_collect (u->p);
      sbx_process_unref (u->p);
      u->p = NULL;
    }
  else if (u->p)
    {
      /* The end of its stdin; an operation that already ended has its
         answer anyway. */
      sbx_process_write_stdin (u->p, NULL, 0, 1, NULL, NULL, NULL);
      rc = upload_answer (u);
      if (rc < 0)
        hand_over (err, &u->err);
    }
  else if (commit)
    rc = sbx_err (err, SBX_E_SYSTEM, "upload interrupted");
  sbx_error_free (u->err);
  free (u);
  return rc;
}

/* ---- the context ------------------------------------------------------- */

int
sbx__vm_fs_open (struct sbx_sandbox *sb, const char *user, struct sbx_fs_ctx *ctx,
                 sbx_error_t **err)
{
  struct vm_fs *v;
  const char *u;

  if (sbx_sandbox_awake (sb, err) < 0)
    return -1;
  v = calloc (1, sizeof *v);
  if (v == NULL)
    return sbx_err_oom (err);
  pthread_mutex_lock (&sbx_core.lock);
  u = user ? user : sb->user;
  if (strcmp (u, "user") == 0)
    v->user = "user", ctx->uid = ctx->gid = 1000;
  else if (strcmp (u, "root") == 0)
    v->user = "root", ctx->uid = ctx->gid = 0;
  else
    {
      pthread_mutex_unlock (&sbx_core.lock);
      free (v);
      return sbx_err (err, SBX_E_INVALID, "user must be `user` or `root`, not `%.32s`", u);
    }
  if (sb->state != SBX_SB_RUNNING)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      free (v);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  sb->refs++;
  pthread_mutex_unlock (&sbx_core.lock);
  v->sb = sb;
  v->remote = (struct sbx_fs_remote){vm_read,  vm_stat,         vm_list,
                                     vm_mkdir, vm_move,         vm_remove,
                                     vm_upload_begin, vm_upload_write, vm_upload_end, v};
  ctx->slot = sb->slot;
  ctx->remote = &v->remote;
  return 0;
}

void
sbx__vm_fs_close (struct sbx_fs_ctx *ctx)
{
  struct vm_fs *v = ctx->remote->arg;

  ctx->remote = NULL;
  sbx_sandbox_unref (v->sb);
  free (v);
}
