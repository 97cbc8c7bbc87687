/* failalloc: an LD_PRELOAD shim that makes heap allocations fail on a
 * schedule the test controls while the process runs.
 *
 *   FAILALLOC_CTL=/path/to/ctl LD_PRELOAD=build/failalloc.so sbxd ...
 *
 * The control file (created by the test, at least 4 KiB) is mapped shared;
 * its first words, native 64-bit integers, are:
 *
 *   [0] every:  0 = off; N = every Nth allocation call fails (ENOMEM)
 *   [1] calls:  allocation calls counted while on (written by the shim)
 *   [2] failed: allocations made to fail (written by the shim)
 *   [3] seen:   every allocation call since start (written by the shim)
 *
 * malloc, calloc, realloc (to a non-zero size), posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc are covered; glibc's own
 * internal allocations (strdup, asprintf, fopen...) go through malloc and
 * are covered too. The real allocator is glibc's, reached through its
 * __libc_* entry points, so no dlsym (which itself allocates) is needed.
 *
 * Only for the plain build: ASan replaces the allocator itself.
 */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc (size_t n);
extern void *__libc_calloc (size_t n, size_t size);
extern void *__libc_realloc (void *p, size_t n);
extern void *__libc_memalign (size_t align, size_t n);
extern void *__libc_valloc (size_t n);
extern void *__libc_pvalloc (size_t n);

#define CTL_EVERY 0
#define CTL_CALLS 1
#define CTL_FAILED 2
#define CTL_SEEN 3

static volatile uint64_t *ctl;

__attribute__ ((constructor)) static void
failalloc_init (void)
{
  const char *path = getenv ("FAILALLOC_CTL");
  void *p;
  int fd;

  if (path == NULL || path[0] == '\0')
    return;
  fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return;
  p = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close (fd);
  if (p != MAP_FAILED)
    ctl = p;
}

/* 1 when this allocation must fail. */
static int
should_fail (void)
{
  uint64_t every, n;

  if (ctl == NULL)
    return 0;
  __atomic_add_fetch (&ctl[CTL_SEEN], 1, __ATOMIC_RELAXED);
  every = __atomic_load_n (&ctl[CTL_EVERY], __ATOMIC_RELAXED);
  if (every == 0)
    return 0;
  n = __atomic_add_fetch (&ctl[CTL_CALLS], 1, __ATOMIC_RELAXED);
  if (n % every != 0)
    return 0;
  __atomic_add_fetch (&ctl[CTL_FAILED], 1, __ATOMIC_RELAXED);
  errno = ENOMEM;
  return 1;
}

void *
malloc (size_t n)
{
  return should_fail () ? NULL : __libc_malloc (n);
}

void *
calloc (size_t n, size_t size)
{
  return should_fail () ? NULL : __libc_calloc (n, size);
}

void *
realloc (void *p, size_t n)
{
  /* realloc(p, 0) frees: never "fail" that. */
  if (n > 0 && should_fail ())
    return NULL;
  return __libc_realloc (p, n);
}

void *
memalign (size_t align, size_t n)
{
  return should_fail () ? NULL : __libc_memalign (align, n);
}

void *
aligned_alloc (size_t align, size_t n)
{
  return should_fail () ? NULL : __libc_memalign (align, n);
}

int
posix_memalign (void **out, size_t align, size_t n)
{
  void *p;

  if (align < sizeof (void *) || (align & (align - 1)) != 0)
    return EINVAL;
  if (should_fail ())
    return ENOMEM;
  p = __libc_memalign (align, n);
  if (p == NULL)
    return ENOMEM;
  *out = p;
  return 0;
}

void *
valloc (size_t n)
{
  return should_fail () ? NULL : __libc_valloc (n);
}

void *
pvalloc (size_t n)
{
  return should_fail () ? NULL : __libc_pvalloc (n);
}
