/* sbx: small whole-file reads (manifests, metadata, records). */
#ifndef SBX_UTIL_FILE_H
#define SBX_UTIL_FILE_H

#include <stddef.h>

/* The whole of regular file NAME under DIR (AT_FDCWD: the cwd), NUL
   terminated, without following a final link. NULL when it is missing,
   not a regular file, larger than CAP bytes or cannot be read (errno
   set). *LEN, when given, gets its length. The caller frees. */
char *sbx_read_small_at (int dir, const char *name, size_t cap, size_t *len);

#endif
