/* sbx: helper processes that die with the parent (helper.h). */
#include "iso/helper.h"

#include <assert.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KEEP_MAX 16

void
sbx_helper_close_all_but (const int *keep, size_t nkeep)
{
  int sorted[KEEP_MAX];
  size_t i, j, n = 0;
  unsigned lo = 3;

  assert (nkeep <= KEEP_MAX);
  /* Insertion sort: no allocation, no libc that could take a lock. */
  for (i = 0; i < nkeep; i++)
    {
      int v = keep[i];
      if (v < 3)
        continue;
      for (j = n; j > 0 && sorted[j - 1] > v; j--)
        sorted[j] = sorted[j - 1];
      sorted[j] = v;
      n++;
    }
  for (i = 0; i < n; i++)
    {
      if ((unsigned) sorted[i] > lo)
        syscall (SYS_close_range, lo, (unsigned) sorted[i] - 1, 0);
      lo = (unsigned) sorted[i] + 1;
    }
  syscall (SYS_close_range, lo, ~0U, 0);
}

pid_t
sbx_helper_fork_all (void)
{
  pid_t parent = getpid ();
  pid_t pid = fork ();

  if (pid != 0)
    return pid;
  /* The death signal is armed by now: a parent gone before it was is
     seen as a new parent (the reaper), and we go at once. */
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid () != parent)
    _exit (127);
  return 0;
}

pid_t
sbx_helper_fork (const int *keep, size_t nkeep)
{
  pid_t pid = sbx_helper_fork_all ();

  if (pid == 0)
    sbx_helper_close_all_but (keep, nkeep);
  return pid;
}
