/* sbx: the process's own figures through descriptors kept from before the
 * privilege drop (util/self_stats.h). */
#include "util/self_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int status_fd = -1, fd_dir = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* fd_dir's offset is shared */

int
sbx_self_stats_open (void)
{
  if (status_fd < 0)
    status_fd = open ("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd_dir < 0)
    fd_dir = open ("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return status_fd >= 0 && fd_dir >= 0 ? 0 : -1;
}

static int64_t
field_kib_or_count (const char *text, const char *name)
{
  const char *p = strstr (text, name);

  if (p == NULL || (p != text && p[-1] != '\n'))
    return -1;
  return strtoll (p + strlen (name), NULL, 10);
}

void
sbx_self_stats_read (struct sbx_self_stats *out)
{
  char text[4096], dents[4096];
  ssize_t n;
  int64_t count = 0;

  out->rss_bytes = out->threads = out->open_fds = -1;
  if (status_fd >= 0 && (n = pread (status_fd, text, sizeof text - 1, 0)) > 0)
    {
      int64_t kib;
      text[n] = '\0';
      kib = field_kib_or_count (text, "VmRSS:");
      out->rss_bytes = kib >= 0 ? kib * 1024 : -1;
      out->threads = field_kib_or_count (text, "Threads:");
    }
  if (fd_dir < 0)
    return;
  pthread_mutex_lock (&lock);
  if (lseek (fd_dir, 0, SEEK_SET) == 0)
    {
      for (;;)
        {
          long got = syscall (SYS_getdents64, fd_dir, dents, sizeof dents);
          long off = 0;
          if (got < 0)
            {
              count = -1;
              break;
            }
          if (got == 0)
            break;
          while (off < got)
            {
              /* struct linux_dirent64: ino, off, reclen, type, name */
              unsigned short reclen;
              const char *name = dents + off + 19;
              memcpy (&reclen, dents + off + 16, sizeof reclen);
              if (reclen == 0)
                break;
              if (name[0] != '.')
                count++;
              off += reclen;
            }
        }
    }
  else
    count = -1;
  pthread_mutex_unlock (&lock);
  /* Ours: the status file and the directory itself. */
  out->open_fds = count >= 2 ? count - 2 : count;
}
