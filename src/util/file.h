/* sbx: small whole-file reads (manifests, metadata, records). */
#ifndef SBX_UTIL_FILE_H
#define SBX_UTIL_FILE_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
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
   while the kernel answers EBUSY (5 ms, doubling to 100 ms between tries,
   about 10 s in all): F_SEAL_WRITE needs the file's pages to have no
   references but the page cache's, and pages just written can be held a
   while longer (another CPU's LRU batch; isolation for compaction or
   migration when memory is short), longer than the kernel's own wait
   (memfd_wait_for_pins). Seen in CI with QEMU guests using most of the
   memory. Still failing closed: an unsealed initramfs or init blob would
   be writable by whoever holds it. 0, or -1 with errno. */
int sbx_seal_memfd (int fd, unsigned int seals);

/* A directory stream of NAME under DIR ("." for DIR itself), never through
   a final link; NULL with errno (no descriptor left open). */
DIR *sbx_opendir_at (int dir, const char *name);

/* What the tree under DIR holds, never through a link, at most MAX_DEPTH
   levels down: *content the regular files' sizes, *disk every entry's
   blocks (st_blocks * 512, as du counts them); either may be NULL. */
void sbx_tree_sizes (int dir, unsigned max_depth, uint64_t *content, uint64_t *disk);

#endif
