/* sbx: growable byte buffer. */
#include "util/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* 0 when extra more bytes (and a NUL) fit; -1 when memory ran out. */
static int
reserve (struct sbx_buf *b, size_t extra)
{
  size_t need, cap;
  char *p;

  if (b->failed)
    return -1; /* later appends would leave a hole */
  if (extra > (size_t) -1 - b->len - 1)
    goto fail;
  need = b->len + extra + 1;
  if (need <= b->cap)
    return 0;
  cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap = cap > ((size_t) -1) / 2 ? need : cap * 2;
  if (b->wipe)
    {
      /* Not realloc: it may leave the old copy behind, unwiped. */
      p = malloc (cap);
      if (p == NULL)
        goto fail;
      if (b->data)
        {
          memcpy (p, b->data, b->len + 1);
          explicit_bzero (b->data, b->cap);
          free (b->data);
        }
    }
  else
    p = realloc (b->data, cap);
  if (p == NULL)
    goto fail;
  b->data = p;
  b->cap = cap;
  return 0;
fail:
  if (!sbx_oom_soft)
    sbx_oom ();
  b->failed = 1;
  return -1;
}

void
sbx_buf_reserve (struct sbx_buf *b, size_t n)
{
  reserve (b, n);
}

void
sbx_buf_append (struct sbx_buf *b, const void *p, size_t n)
{
  if (reserve (b, n) < 0)
    return;
  if (n)
    memcpy (b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void
sbx_buf_printf (struct sbx_buf *b, const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vsnprintf (NULL, 0, fmt, ap);
  va_end (ap);
  if (n < 0 || reserve (b, (size_t) n) < 0)
    {
      if (!sbx_oom_soft)
        sbx_oom ();
      b->failed = 1;
      return;
    }
  va_start (ap, fmt);
  vsnprintf (b->data + b->len, (size_t) n + 1, fmt, ap);
  va_end (ap);
  b->len += (size_t) n;
}

void
sbx_buf_consume (struct sbx_buf *b, size_t n)
{
  if (n >= b->len)
    {
      if (b->wipe && b->data)
        explicit_bzero (b->data, b->len);
      b->len = 0;
      if (b->data)
        b->data[0] = '\0';
      return;
    }
  memmove (b->data, b->data + n, b->len - n);
  if (b->wipe)
    explicit_bzero (b->data + b->len - n, n);
  b->len -= n;
  b->data[b->len] = '\0';
}

void
sbx_buf_reset (struct sbx_buf *b)
{
  if (b->wipe && b->data)
    explicit_bzero (b->data, b->cap);
  b->len = 0;
  b->failed = 0;
  if (b->data)
    b->data[0] = '\0';
}

void
sbx_buf_free (struct sbx_buf *b)
{
  if (b->wipe && b->data)
    explicit_bzero (b->data, b->cap);
  free (b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
}

char *
sbx_buf_steal (struct sbx_buf *b)
{
  char *p;

  if (b->data == NULL)
    {
      if (reserve (b, 0) < 0)
        return NULL; /* only with sbx_oom_soft */
      b->data[0] = '\0'; /* reserve() only allocates */
    }
  p = b->data;
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
  return p;
}
