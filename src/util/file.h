/* sbx: small whole-file reads (manifests, metadata, records). */
#ifndef SBX_UTIL_FILE_H
#define SBX_UTIL_FILE_H

#include <dirent.h>
#include <stddef.h>
#include <sys/types.h>

/* The whole of regular file NAME under DIR (AT_FDCWD: the cwd), NUL
   terminated, without following a final link. NULL when it is missing,
   not a regular file, larger than CAP bytes or cannot be read (errno
   set). *LEN, when given, gets its length. The caller frees. */
char *sbx_read_small_at (int dir, const char *name, size_t cap, size_t *len);

/* Create (or truncate) NAME under DIR, without following a final link,
   with exactly LEN bytes of DATA and MODE. 0, or -1 with errno. */
int sbx_write_small_at (int dir, const char *name, const void *data, size_t len, mode_t mode);

/* rm -r of NAME under DIR: never follows a link, and does not stop at
   permissions (a caller that is root removes a hostile tree whole); at
   most MAX_DEPTH levels. 0, or -1 with errno when NAME is still there. */
int sbx_remove_tree_at (int dir, const char *name, unsigned max_depth);

/* fcntl(FD, F_ADD_SEALS, SEALS) for a memfd just written, tried again
   while the kernel answers EBUSY (up to about a second): F_SEAL_WRITE
   waits for the file's pages to have no references but the page cache's,
   and pages just written can still be held for a moment by another CPU's
   LRU batch, which the kernel's own wait (memfd_wait_for_pins) does not
   always outlast on a loaded machine. 0, or -1 with errno. */
int sbx_seal_memfd (int fd, unsigned int seals);

/* A directory stream of NAME under DIR ("." for DIR itself), never through
   a final link; NULL with errno (no descriptor left open). */
DIR *sbx_opendir_at (int dir, const char *name);

#endif
