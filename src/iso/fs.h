/* sbx: file operations inside a sandbox's root, from the daemon.
 *
 * Every path is resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
 * against the O_PATH fd of the sandbox's "/": ".." and symlinks, whatever
 * the sandbox made of them, never lead out of it (CVE-2021-30465 and the
 * whole runc path-traversal class). Each operation runs with the sandbox
 * user's host ids as the thread's fsuid/fsgid, so the sandbox's own
 * permissions apply and new files belong to that user. procfs, sysfs,
 * devpts, device nodes, FIFOs and sockets are refused: opening them from
 * the daemon could block it, reach a driver, or touch init's memory.
 */
#ifndef SBX_ISO_FS_H
#define SBX_ISO_FS_H

#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

#define SBX_FS_PATH_MAX 4096

/* Copies bytes into the sandbox on its own account. Pages the daemon wrote
   into a sandbox's tmpfs would be charged to the daemon's memory cgroup,
   so a tenant could park host RAM outside its limit; the core supplies a
   copier whose helper runs inside the sandbox (SBX_MSG_PUMP). Without one
   (unit tests) the daemon copies itself. */
struct sbx_fs_copier
{
  /* Start copying in_fd to out_fd (both borrowed); *job identifies it. */
  int (*start) (void *arg, int in_fd, int out_fd, void **job, sbx_error_t **err);
  /* Wait for the copy to end: 0 when everything was copied. */
  int (*finish) (void *arg, void *job, sbx_error_t **err);
  void *arg;
};

struct sbx_fs_entry;

/* File metadata, E2B's: each pair is the extended attribute
   user.e2b.KEY = VALUE of a regular file or directory. Keys are HTTP
   tokens (letters, digits, !#$%&'*+-.^_`|~), values printable ASCII
   (0x20..0x7e, possibly empty). The bounds are ours: envd caps a file's
   whole metadata at 4096 bytes counting the 9-byte prefix of each name,
   which we keep, and we also cap the count and each size so that the
   packed form fits a fixed-size privsep message. */
#define SBX_FS_META_PREFIX "user.e2b."
#define SBX_FS_META_KEYS 32
#define SBX_FS_META_KEY_MAX 64
#define SBX_FS_META_VALUE_MAX 1024
#define SBX_FS_META_TOTAL 4096 /* sum of 9 + key + value over the pairs */

struct sbx_fs_meta
{
  uint32_t len;   /* bytes of data in use */
  uint32_t count; /* pairs */
  /* KEY\0VALUE\0 per pair: key + value + 2 <= 9 + key + value, so the
     total bound above is also a bound on this. */
  char data[SBX_FS_META_TOTAL];
};

/* Append a pair, checking it and the bounds (SBX_E_INVALID); a key that is
   already there keeps its first value (envd: the first header wins). */
int sbx_fs_meta_add (struct sbx_fs_meta *m, const char *key, size_t key_len, const char *value,
                     size_t value_len, sbx_error_t **err);
/* A packed set received from another process: every pair well formed,
   the bounds kept, count right. */
int sbx_fs_meta_check (const struct sbx_fs_meta *m, sbx_error_t **err);
/* Iterate: *off starts at 0; NULL at the end. Only on a checked set. */
const char *sbx_fs_meta_next (const struct sbx_fs_meta *m, uint32_t *off, const char **value);

/* File operations done elsewhere: in a VM's guest (core/vm_fs.c), where
   no descriptor of the host can resolve a path. The front end's
   sbx_host_fs_* (priv/client.c) call these instead of the privileged
   parent when a context has them; same contracts as below. An upload's
   *job is the remote side's, ended by exactly one upload_end. */
struct sbx_fs_remote
{
  /* A whole file into *data (malloc), at most max bytes (else 413): the
     front end cannot make a file to hand out (no memfd_create there). */
  int (*read) (void *arg, const char *path, size_t max, char **data, size_t *len,
               sbx_error_t **err);
  int (*stat) (void *arg, const char *path, struct sbx_fs_entry *out, sbx_error_t **err);
  int (*list) (void *arg, const char *path, int depth, size_t max_entries,
               int (*fn) (const struct sbx_fs_entry *e, void *fn_arg), void *fn_arg,
               int *truncated, sbx_error_t **err);
  int (*mkdir) (void *arg, const char *path, uint32_t mode, int parents, sbx_error_t **err);
  int (*move) (void *arg, const char *from, const char *to, int overwrite, sbx_error_t **err);
  int (*remove) (void *arg, const char *path, int recursive, sbx_error_t **err);
  int (*upload_begin) (void *arg, const char *path, uint32_t mode, int parents, void **job,
                       sbx_error_t **err);
  int (*upload_write) (void *job, const void *data, size_t len, sbx_error_t **err);
  int (*upload_end) (void *job, int commit, sbx_error_t **err);
  void *arg;
};

struct sbx_fs_ctx
{
  int root;       /* borrowed O_PATH fd of the sandbox's "/" */
  uid_t uid_base; /* host id of uid 0 inside */
  uint32_t uid, gid; /* the acting user, inside ids */
  const struct sbx_fs_copier *copier; /* may be NULL */
  uint32_t slot;  /* the front end (priv/host.h): which sandbox; root is unset */
  const struct sbx_fs_remote *remote; /* the front end: a VM's; NULL for the parent */
};

enum sbx_fs_type
{
  SBX_FS_FILE,
  SBX_FS_DIR,
  SBX_FS_SYMLINK,
  SBX_FS_OTHER,
};

struct sbx_fs_entry
{
  char name[256];
  char path[SBX_FS_PATH_MAX]; /* absolute, inside the sandbox */
  enum sbx_fs_type type;
  uint64_t size;
  uint32_t mode; /* permission bits */
  uint32_t uid, gid; /* inside ids (65534 for ids not mapped) */
  int64_t mtime_sec;
  char target[SBX_FS_PATH_MAX]; /* symlinks only */
  /* Regular files and directories: their user.e2b.* attributes, those
     within the bounds above (others are left out; never an error). */
  struct sbx_fs_meta meta;
};

const char *sbx_fs_type_name (enum sbx_fs_type t);

/* Turn a user-supplied path into an absolute one inside the sandbox
   (relative paths are relative to /home/user); rejects empty, NUL, too long. */
int sbx_fs_normalize (const char *in, char *out, size_t cap, sbx_error_t **err);

/* Open a regular file for reading; returns an fd (O_RDONLY, O_CLOEXEC). */
int sbx_fs_open_read (const struct sbx_fs_ctx *ctx, const char *path, uint64_t *size,
                      sbx_error_t **err);

/* An upload in progress: written to an unnamed temporary file (O_TMPFILE)
   in the target's directory, which commit links to a hidden name and
   renames over the target; abort, or the death of every process holding
   it, leaves nothing. Where O_TMPFILE is not supported, a hidden named
   temporary from the start, which abort removes. */
struct sbx_fs_upload
{
  int dir;  /* O_PATH of the target's directory */
  int fd;   /* the temporary file */
  int pipe; /* with a copier: where the body goes, -1 otherwise */
  void *job; /* the copier's */
  char tmp_name[64]; /* "" while the temporary is unnamed */
  char leaf[256];
  uint32_t mode;
  uint64_t written;
  struct sbx_fs_ctx ctx;
  uint64_t token; /* the front end: the parent's name for it */
  void *remote_job; /* the front end: ctx.remote's upload */
};
int sbx_fs_upload_begin (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode,
                         int parents, struct sbx_fs_upload *up, sbx_error_t **err);
/* The same, the file getting meta (checked; may be NULL) as its user.e2b.*
   attributes before any byte is written. The new file replaces the old
   inode, so an upload without metadata leaves none of the old one's. A
   filesystem without user xattrs (tmpfs before Linux 6.6) is SBX_E_INVALID
   naming the reason, and no file. */
int sbx_fs_upload_begin_meta (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode,
                              int parents, const struct sbx_fs_meta *meta,
                              struct sbx_fs_upload *up, sbx_error_t **err);
int sbx_fs_upload_write (struct sbx_fs_upload *up, const void *data, size_t len,
                         sbx_error_t **err);
int sbx_fs_upload_commit (struct sbx_fs_upload *up, sbx_error_t **err);
void sbx_fs_upload_abort (struct sbx_fs_upload *up);

int sbx_fs_stat (const struct sbx_fs_ctx *ctx, const char *path, struct sbx_fs_entry *out,
                 sbx_error_t **err);
/* Calls fn for each entry, depth-first, to `depth` levels (1 = the
   directory's own entries). Stops after max_entries (sets *truncated). */
int sbx_fs_list (const struct sbx_fs_ctx *ctx, const char *path, int depth, size_t max_entries,
                 int (*fn) (const struct sbx_fs_entry *e, void *arg), void *arg, int *truncated,
                 sbx_error_t **err);
int sbx_fs_mkdir (const struct sbx_fs_ctx *ctx, const char *path, uint32_t mode, int parents,
                  sbx_error_t **err);
int sbx_fs_move (const struct sbx_fs_ctx *ctx, const char *from, const char *to, int overwrite,
                 sbx_error_t **err);
int sbx_fs_remove (const struct sbx_fs_ctx *ctx, const char *path, int recursive,
                   sbx_error_t **err);

#endif
