/* sbx: the files API's operations inside a VM's guest (docs/vm.md, Files).
 *
 * Runs in a child of the agent that is already the requested user behind
 * the command's walls (vm/agent.c: uid, no capabilities, no_new_privs,
 * seccomp), so the guest's kernel resolves every path and checks every
 * permission. The operations are the namespace engine's own code
 * (iso/fs.c) against the guest's "/": the same openat2 confinement, the
 * same refusals (procfs, sysfs, mount points, "." and ".."), and the same
 * error kinds and messages, so both engines answer alike. What it finds
 * goes to stdout as vm/fs_wire.h records; nothing here trusts the host's
 * arguments beyond their format either.
 */
#include "vm/agent_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iso/fs.h"
#include "vm/fs_wire.h"

static size_t written; /* bytes sent so far: a listing stops at SBX_VM_FS_OUT_MAX */
static int over_budget;

static void
put (const void *p, size_t n)
{
  const char *c = p;

  while (n > 0)
    {
      ssize_t w = write (1, c, n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        _exit (3); /* the host went away */
      c += w;
      n -= (size_t) w;
    }
  written += (size_t) (c - (const char *) p);
}

static void
record (uint32_t tag, const void *a, size_t alen, const void *b, size_t blen, const void *c,
        size_t clen, const void *d, size_t dlen)
{
  struct sbx_vm_fs_rec h = {tag, (uint32_t) (alen + blen + clen + dlen)};

  put (&h, sizeof h);
  put (a, alen);
  put (b, blen);
  put (c, clen);
  put (d, dlen);
}

static size_t
bounded (const char *s, size_t cap)
{
  size_t n = strnlen (s, cap);
  return n;
}

static int
send_entry (const struct sbx_fs_entry *e, void *arg)
{
  struct sbx_vm_fs_entry w;
  size_t nl = bounded (e->name, sizeof e->name), pl = bounded (e->path, sizeof e->path);
  size_t tl = e->type == SBX_FS_SYMLINK ? bounded (e->target, sizeof e->target) : 0;

  (void) arg;
  if (written + sizeof (struct sbx_vm_fs_rec) + sizeof w + nl + pl + tl + 64
      > SBX_VM_FS_OUT_MAX)
    {
      over_budget = 1;
      return -1;
    }
  memset (&w, 0, sizeof w);
  w.type = (uint32_t) e->type;
  w.mode = e->mode;
  w.uid = e->uid;
  w.gid = e->gid;
  w.size = e->size;
  w.mtime_sec = e->mtime_sec;
  w.name_len = (uint32_t) nl;
  w.path_len = (uint32_t) pl;
  w.target_len = (uint32_t) tl;
  record (SBX_VM_FS_ENTRY, &w, sizeof w, e->name, nl, e->path, pl, e->target, tl);
  return 0;
}

__attribute__ ((noreturn)) static void
end (int truncated)
{
  struct sbx_vm_fs_end m = {(uint32_t) truncated, 0};

  record (SBX_VM_FS_END, &m, sizeof m, NULL, 0, NULL, 0, NULL, 0);
  _exit (0);
}

__attribute__ ((noreturn)) static void
fail (sbx_error_t *e)
{
  struct sbx_vm_fs_error m = {(uint32_t) e->kind, e->sys_errno};

  record (SBX_VM_FS_ERROR, &m, sizeof m, e->msg, bounded (e->msg, SBX_VM_FS_MSG_MAX), NULL, 0,
          NULL, 0);
  _exit (1);
}

/* "0" or "1"; a decimal in [lo, hi]; octal permission bits. */
static int
number (const char *s, int base, long lo, long hi, long *out)
{
  char *endp;
  long v;

  errno = 0;
  v = strtol (s, &endp, base);
  if (*s == '\0' || *endp != '\0' || errno || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

/* The file's bytes as DATA records, up to max + 1 (one more: the host
   then knows it is larger than max). */
static int
read_file (const struct sbx_fs_ctx *ctx, const char *path, uint64_t max, sbx_error_t **err)
{
  static char chunk[SBX_VM_FS_DATA_MAX];
  uint64_t size, sent = 0;
  int fd = sbx_fs_open_read (ctx, path, &size, err);

  if (fd < 0)
    return -1;
  while (sent <= max)
    {
      ssize_t n = read (fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return sbx_err_sys (err, errno, "read `%s`", path);
      if (n == 0)
        break;
      record (SBX_VM_FS_DATA, chunk, (size_t) n, NULL, 0, NULL, 0, NULL, 0);
      sent += (uint64_t) n;
    }
  close (fd);
  return 0;
}

/* stdin into the file, replaced atomically at its end (iso/fs.c: an
   unnamed temporary that a kill leaves nowhere). */
static int
upload (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode, int parents,
        sbx_error_t **err)
{
  static char chunk[SBX_VM_FS_DATA_MAX];
  struct sbx_fs_upload up;

  /* Past RLIMIT_FSIZE (the disk's size), write fails with EFBIG: "the
     sandbox disk is full", as for the namespace engine, not a kill. */
  signal (SIGXFSZ, SIG_IGN);
  if (sbx_fs_upload_begin (ctx, path, mode, parents, &up, err) < 0)
    return -1;
  for (;;)
    {
      ssize_t n = read (0, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          sbx_fs_upload_abort (&up);
          return sbx_err_sys (err, errno, "read the upload");
        }
      if (n == 0)
        break;
      if (sbx_fs_upload_write (&up, chunk, (size_t) n, err) < 0)
        {
          sbx_fs_upload_abort (&up);
          return -1;
        }
    }
  return sbx_fs_upload_commit (&up, err);
}

void
sbx_agent_fs_run (int argc, char **argv)
{
  struct sbx_fs_ctx ctx;
  sbx_error_t *err = NULL;
  const char *op;
  long a = 0, b = 0;
  int rc = -1, truncated = 0;

  /* No exec closed the agent's descriptors (close-on-exec): the port to
     the host, other commands' pipes, our own stdin's write end. Only the
     operation's stdio stays. */
  if (syscall (SYS_close_range, 3u, ~0u, 0u) < 0)
    _exit (5);
  if (argc < 3 || strcmp (argv[0], SBX_VM_FS_ARGV0) != 0)
    _exit (2);
  op = argv[1];
  /* A watch writes watch records, never these (vm/agent_watch.c). */
  if (strcmp (op, "watch") == 0)
    {
      if (argc != 4 || number (argv[3], 10, 0, 1, &a) < 0)
        _exit (2);
      sbx_agent_watch_run (argv[2], (int) a);
    }
  memset (&ctx, 0, sizeof ctx);
  /* The guest's root; ids are the guest's own (uid_base 0), as the
     namespace engine reports the sandbox's inside ids. */
  ctx.root = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  ctx.uid = (uint32_t) getuid ();
  ctx.gid = (uint32_t) getgid ();
  if (ctx.root < 0)
    {
      sbx_err_sys (&err, errno, "open /");
      fail (err);
    }
  if (strcmp (op, "stat") == 0 && argc == 3)
    {
      struct sbx_fs_entry *e = malloc (sizeof *e);
      if (e == NULL)
        _exit (4);
      rc = sbx_fs_stat (&ctx, argv[2], e, &err);
      if (rc == 0)
        send_entry (e, NULL);
    }
  else if (strcmp (op, "list") == 0 && argc == 5 && number (argv[3], 10, 1, 16, &a) == 0
           && number (argv[4], 10, 1, 1000000, &b) == 0)
    {
      rc = sbx_fs_list (&ctx, argv[2], (int) a, (size_t) b, send_entry, NULL, &truncated, &err);
      if (rc < 0 && over_budget)
        rc = 0, truncated = 1;
    }
  else if (strcmp (op, "mkdir") == 0 && argc == 5 && number (argv[3], 8, 0, 07777, &a) == 0
           && number (argv[4], 10, 0, 1, &b) == 0)
    rc = sbx_fs_mkdir (&ctx, argv[2], (uint32_t) a, (int) b, &err);
  else if (strcmp (op, "move") == 0 && argc == 5 && number (argv[4], 10, 0, 1, &a) == 0)
    rc = sbx_fs_move (&ctx, argv[2], argv[3], (int) a, &err);
  else if (strcmp (op, "remove") == 0 && argc == 4 && number (argv[3], 10, 0, 1, &a) == 0)
    rc = sbx_fs_remove (&ctx, argv[2], (int) a, &err);
  else if (strcmp (op, "read") == 0 && argc == 4 && number (argv[3], 10, 0, 1L << 40, &a) == 0)
    rc = read_file (&ctx, argv[2], (uint64_t) a, &err);
  else if (strcmp (op, "metrics") == 0 && argc == 3)
    {
      struct sbx_vm_fs_metrics m;
      rc = sbx_agent_metrics (argv[2], &m, &err);
      if (rc == 0)
        record (SBX_VM_FS_METRICS, &m, sizeof m, NULL, 0, NULL, 0, NULL, 0);
    }
  else if (strcmp (op, "upload") == 0 && argc == 5 && number (argv[3], 8, 0, 07777, &a) == 0
           && number (argv[4], 10, 0, 1, &b) == 0)
    rc = upload (&ctx, argv[2], (uint32_t) a, (int) b, &err);
  else
    _exit (2);
  if (rc < 0)
    {
      if (err == NULL)
        sbx_err (&err, SBX_E_SYSTEM, "the file operation failed");
      fail (err);
    }
  end (truncated);
}
