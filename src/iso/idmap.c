/* sbx: user namespaces that carry an id mapping. */
#include "iso/idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iso/helper.h"

int
sbx_idmap_write (pid_t pid, uint32_t inside, uint32_t outside, uint32_t count)
{
  char path[64], map[64];
  int i, len;

  len = snprintf (map, sizeof map, "%u %u %u", inside, outside, count);
  for (i = 0; i < 2; i++)
    {
      int m, e;
      snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, i ? "gid_map" : "uid_map");
      m = open (path, O_WRONLY | O_CLOEXEC);
      if (m < 0)
        return -1;
      if (write (m, map, (size_t) len) != len)
        {
          e = errno ? errno : EIO;
          close (m);
          errno = e;
          return -1;
        }
      close (m);
    }
  return 0;
}

int
sbx_idmap_userns (uint32_t inside, uint32_t outside, uint32_t count, sbx_error_t **err)
{
  int sync[2], fd = -1, e = 0, child_errno = 0;
  char path[64];
  pid_t pid;

  if (pipe2 (sync, O_CLOEXEC) < 0)
    return err ? sbx_err_sys (err, errno, "pipe") : -1;
  pid = sbx_helper_fork (&sync[1], 1);
  if (pid == 0)
    {
      /* 0 once the namespace exists, else the errno of the unshare: the
         parent reports the child's own cause, not an errno of its own. */
      int rc = unshare (CLONE_NEWUSER) < 0 ? errno : 0;

      if (write (sync[1], &rc, sizeof rc) != sizeof rc || rc != 0)
        _exit (1);
      for (;;)
        pause ();
    }
  if (pid < 0)
    e = errno;
  close (sync[1]);
  if (pid > 0)
    {
      if (read (sync[0], &child_errno, sizeof child_errno) != sizeof child_errno)
        e = EIO; /* the child died before it could say */
      else if (child_errno != 0)
        e = child_errno;
      else if (sbx_idmap_write (pid, inside, outside, count) < 0)
        e = errno;
      else
        {
          snprintf (path, sizeof path, "/proc/%d/ns/user", (int) pid);
          fd = open (path, O_RDONLY | O_CLOEXEC);
          if (fd < 0)
            e = errno;
        }
    }
  close (sync[0]);
  if (pid > 0)
    {
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
    }
  if (fd < 0 && err)
    sbx_err_sys (err, e ? e : EIO, "make a user namespace for an id map");
  if (fd < 0)
    errno = e ? e : EIO; /* for callers without err (kernel.c's probe) */
  return fd;
}
