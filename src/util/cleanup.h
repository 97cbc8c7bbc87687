/* sbx: ownership helpers built on __attribute__((cleanup)).
 *
 * A variable declared `cleanup_free char *s = NULL;` is freed when it goes
 * out of scope; `steal_pointer (&s)` hands the value to someone else and
 * leaves NULL behind, so ownership transfers are visible at the call site.
 */
#ifndef SBX_UTIL_CLEANUP_H
#define SBX_UTIL_CLEANUP_H

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static inline void
sbx_freep (void *p)
{
  free (*(void **) p);
}

static inline void
sbx_closep (int *fd)
{
  if (*fd >= 0)
    {
      int saved = errno;
      close (*fd);
      errno = saved;
    }
}

#define cleanup_free __attribute__ ((cleanup (sbx_freep)))
#define cleanup_close __attribute__ ((cleanup (sbx_closep)))

static inline void *
sbx_steal_pointer (void *pp)
{
  void **p = (void **) pp;
  void *v = *p;
  *p = NULL;
  return v;
}
/* The `0 ? *(pp) :` arm keeps the result typed like the pointer stolen. */
#define steal_pointer(pp) (0 ? (*(pp)) : sbx_steal_pointer (pp))

static inline int
sbx_steal_fd (int *fd)
{
  int v = *fd;
  *fd = -1;
  return v;
}

/* Close an fd we own and mark it closed. Never used on stdio: closing 0-2 by
   mistake would let the next open() land on a standard stream. */
static inline void
close_and_reset (int *fd)
{
  if (*fd >= 0)
    {
      assert (*fd > 2);
      close (*fd);
      *fd = -1;
    }
}

#endif
