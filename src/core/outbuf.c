/* sbx: the bounded buffers that hold a command's output (see the modes in
 * core.h: HEAD keeps the first bytes, TAIL is a ring of the last ones,
 * BLOCK is a ring the event loop stops filling while it is full). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "util/cleanup.h"

void
sbx__outbuf_init (struct sbx_outbuf *o, size_t cap, int fd)
{
  memset (o, 0, sizeof *o);
  o->cap = cap;
  o->fd = fd;
  o->drain_left = -1;
}

/* Copy [from, from+n) of the kept window into dst. */
void
sbx__outbuf_copy (const struct sbx_outbuf *o, enum sbx_out_mode mode, uint64_t from, char *dst,
             size_t n)
{
  size_t pos, first;

  if (mode == SBX_OUT_HEAD)
    {
      memcpy (dst, o->data + from, n);
      return;
    }
  pos = (size_t) (from % o->cap);
  first = o->cap - pos < n ? o->cap - pos : n;
  memcpy (dst, o->data + pos, first);
  memcpy (dst + first, o->data, n - first);
}

void
sbx__outbuf_append (struct sbx_outbuf *o, enum sbx_out_mode mode, const char *src, size_t n)
{
  size_t pos, first;

  if (mode == SBX_OUT_HEAD)
    {
      /* Linear, grown on demand up to cap; the rest is counted, not kept. */
      size_t keep = o->end < o->cap ? (size_t) (o->cap - o->end) : 0;
      if (keep > n)
        keep = n;
      if (keep)
        {
          size_t need = (size_t) o->end + keep;
          if (need > o->alloc)
            {
              size_t cap = o->alloc ? o->alloc : 4096;
              char *p;
              while (cap < need)
                cap *= 2;
              if (cap > o->cap)
                cap = o->cap;
              p = realloc (o->data, cap);
              if (p == NULL)
                {
                  /* No memory: keep no more (a hole would be worse), and
                     the result reports the output as truncated. */
                  keep = 0;
                  o->cap = (size_t) o->end;
                }
              else
                {
                  o->data = p;
                  o->alloc = cap;
                }
            }
          if (keep)
            memcpy (o->data + o->end, src, keep);
          o->end += keep;
        }
      o->dropped += n - keep;
      return;
    }
  if (o->data == NULL)
    {
      /* TAIL: made on the first output (a lossless BLOCK buffer is made
         with its process). Without memory the bytes are lost, and a reader
         is told so, as for bytes the ring no longer holds. */
      o->data = malloc (o->cap);
      if (o->data == NULL)
        {
          o->end += n;
          o->start = o->end;
          return;
        }
      o->alloc = o->cap;
    }
  if (n > o->cap)
    {
      /* Only the newest cap bytes can survive anyway. */
      o->end += n - o->cap;
      src += n - o->cap;
      n = o->cap;
    }
  pos = (size_t) (o->end % o->cap);
  first = o->cap - pos < n ? o->cap - pos : n;
  memcpy (o->data + pos, src, first);
  memcpy (o->data, src + first, n - first);
  o->end += n;
  if (o->end - o->start > o->cap)
    o->start = o->end - o->cap; /* TAIL: the oldest bytes are overwritten */
}

void
sbx__outbuf_close (struct sbx_outbuf *o)
{
  sbx__watch_del (&o->watch);
  close_and_reset (&o->fd);
}

