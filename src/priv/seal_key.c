/* sbx: the parent's sealing key (seal_key.h). */
#include "priv/seal_key.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"

#define KEY_LEN 32

static int
load (int dir, const char *where, uint8_t key[KEY_LEN], sbx_error_t **err)
{
  cleanup_close int fd = openat (dir, "key", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  ssize_t n;

  if (fd < 0)
    return errno == ENOENT ? 1 : sbx_err_sys (err, errno, "open `%s/key`", where);
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != 0
      || (st.st_mode & 077) != 0 || st.st_size != KEY_LEN)
    return sbx_err (err, SBX_E_SYSTEM,
                    "`%s/key` is not root's 0600 file of %d bytes: the values sealed with it"
                    " (secrets, sandboxes' tokens) cannot be read without it; put the right"
                    " one back, or move the state directory away to start afresh",
                    where, KEY_LEN);
  n = read (fd, key, KEY_LEN);
  if (n != KEY_LEN)
    return sbx_err_sys (err, n < 0 ? errno : EIO, "read `%s/key`", where);
  return 0;
}

/* A fresh key, written whole (to a temporary name, synced, renamed,
   the directory synced) before it seals anything. */
static int
make (int dir, const char *where, uint8_t key[KEY_LEN], sbx_error_t **err)
{
  cleanup_close int fd = -1;

  if (getrandom (key, KEY_LEN, 0) != KEY_LEN)
    return sbx_err_sys (err, errno, "getrandom");
  unlinkat (dir, "key.new", 0);
  fd = openat (dir, "key.new", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_err_sys (err, errno, "create `%s/key.new`", where);
  if (write (fd, key, KEY_LEN) != KEY_LEN || fsync (fd) < 0)
    {
      int e = errno;
      unlinkat (dir, "key.new", 0);
      return sbx_err_sys (err, e, "write `%s/key.new`", where);
    }
  if (renameat (dir, "key.new", dir, "key") < 0 || fsync (dir) < 0)
    {
      int e = errno;
      unlinkat (dir, "key.new", 0);
      return sbx_err_sys (err, e, "install `%s/key`", where);
    }
  sbx_info ("made the sealing key %s/key (back it up apart from the state directory)", where);
  return 0;
}

int
sbx_seal_key_ensure (const char *state_dir, uint8_t key[KEY_LEN], sbx_error_t **err)
{
  char where[700];
  cleanup_close int dir = -1;
  struct stat st;
  int rc;

  snprintf (where, sizeof where, "%s/%s", state_dir, SBX_SEAL_KEY_DIR);
  if (mkdir (where, 0700) < 0 && errno != EEXIST)
    return sbx_err_sys (err, errno, "create `%s`", where);
  dir = open (where, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0 || fstat (dir, &st) < 0)
    return sbx_err_sys (err, errno, "open `%s`", where);
  /* The state directory is the front end's: this one is root's and
     closed, so the front end cannot read the key (nor list the name). */
  if ((st.st_uid != 0 || st.st_gid != 0) && fchown (dir, 0, 0) < 0)
    return sbx_err_sys (err, errno, "chown `%s`", where);
  if ((st.st_mode & 07777) != 0700 && fchmod (dir, 0700) < 0)
    return sbx_err_sys (err, errno, "chmod `%s`", where);
  rc = load (dir, where, key, err);
  if (rc <= 0)
    return rc;
  return make (dir, where, key, err);
}
