/* sbx: small whole-file reads. */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

char *
sbx_read_small_at (int dir, const char *name, size_t cap, size_t *len)
{
  cleanup_close int fd = openat (dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  char *buf;

  if (fd < 0 || fstat (fd, &st) < 0)
    return NULL;
  if (!S_ISREG (st.st_mode) || (size_t) st.st_size > cap)
    {
      errno = S_ISREG (st.st_mode) ? EFBIG : EINVAL;
      return NULL;
    }
  buf = malloc ((size_t) st.st_size + 1);
  if (buf == NULL)
    return NULL;
  /* Short reads are an error too: these files are written whole. */
  if (read (fd, buf, (size_t) st.st_size) != st.st_size)
    {
      free (buf);
      errno = EIO;
      return NULL;
    }
  buf[st.st_size] = '\0';
  if (len)
    *len = (size_t) st.st_size;
  return buf;
}
