/* sbx: a growable byte buffer with a hard cap. */
#ifndef SBX_UTIL_BUF_H
#define SBX_UTIL_BUF_H

#include <stddef.h>

struct sbx_buf
{
  char *data; /* owned; always NUL-terminated when non-NULL */
  size_t len;
  size_t cap;
  int failed; /* an append found no memory and was dropped (sbx_oom_soft) */
  int wipe;   /* it holds secrets: storage it gives back (growth, consume,
                 reset, free) is overwritten first */
};

#define SBX_BUF_INIT {NULL, 0, 0, 0, 0}

/* Append. On allocation failure: abort (see sbx_oom), or with sbx_oom_soft
   drop the append and set `failed`, which stays set until reset or free:
   a caller that needs the whole content checks it once at the end. */
void sbx_buf_append (struct sbx_buf *b, const void *p, size_t n);
void sbx_buf_printf (struct sbx_buf *b, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
/* Room for n more bytes without growing (same failure rules as append). */
void sbx_buf_reserve (struct sbx_buf *b, size_t n);
/* Drop the first n bytes. */
void sbx_buf_consume (struct sbx_buf *b, size_t n);
void sbx_buf_reset (struct sbx_buf *b);
void sbx_buf_free (struct sbx_buf *b);
/* Hand the storage to the caller (NUL-terminated); the buffer becomes empty. */
char *sbx_buf_steal (struct sbx_buf *b);

#endif
