/* sbx unit tests: a tiny TAP producer.
 *
 * Each test is a function returning 0 (pass), -1 (fail) or 77 (skip), like
 * crun's tests. Each runs in its own forked process (libuv's runner), so a
 * crash or leak in one cannot poison the others; a crash counts as a fail.
 *
 *   static int test_sizes (void) { CHECK (x == 1); return 0; }
 *   int main (void) { RUN (test_sizes); return tap_done (); }
 */
#ifndef SBX_TESTS_TAP_H
#define SBX_TESTS_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

static int tap_n, tap_failed;

/* A test child ends with _exit(), which skips LeakSanitizer's exit-time
   check: run it here, so that a passing test that leaks fails. Not under
   a seccomp filter (test_seccomp.c), which denies the ptrace LeakSanitizer
   needs to suspend the threads it scans. */
static inline int
tap_leak_check (void)
{
#ifdef __SANITIZE_ADDRESS__
  if (prctl (PR_GET_SECCOMP, 0, 0, 0, 0) == 0 && __lsan_do_recoverable_leak_check () != 0)
    return -1;
#endif
  return 0;
}

#define CHECK(cond)                                                            \
  do                                                                           \
    {                                                                          \
      if (!(cond))                                                             \
        {                                                                      \
          fprintf (stderr, "#   %s:%d: CHECK failed: %s\n", __FILE__,        \
                   __LINE__, #cond);                                           \
          return -1;                                                           \
        }                                                                      \
    }                                                                          \
  while (0)

#define CHECK_STR(a, b)                                                        \
  do                                                                           \
    {                                                                          \
      const char *a_ = (a), *b_ = (b);                                         \
      if (a_ == NULL || b_ == NULL || strcmp (a_, b_) != 0)                    \
        {                                                                      \
          fprintf (stderr, "#   %s:%d: `%s` != `%s`\n", __FILE__, __LINE__,  \
                   a_ ? a_ : "(null)", b_ ? b_ : "(null)");                    \
          return -1;                                                           \
        }                                                                      \
    }                                                                          \
  while (0)

static inline void
tap_run (const char *name, int (*fn) (void))
{
  pid_t pid;
  int status = 0, rc;

  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  if (pid < 0)
    {
      perror ("fork");
      exit (2);
    }
  if (pid == 0)
    {
      rc = fn ();
      if (rc == 0)
        rc = tap_leak_check ();
      fflush (NULL);
      _exit (rc == 0 ? 0 : rc == 77 ? 77 : 1);
    }
  while (waitpid (pid, &status, 0) < 0)
    ;
  tap_n++;
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    printf ("ok %d - %s\n", tap_n, name);
  else if (WIFEXITED (status) && WEXITSTATUS (status) == 77)
    printf ("ok %d - %s # SKIP\n", tap_n, name);
  else
    {
      tap_failed++;
      if (WIFSIGNALED (status))
        printf ("not ok %d - %s (killed by signal %d)\n", tap_n, name, WTERMSIG (status));
      else
        printf ("not ok %d - %s\n", tap_n, name);
    }
  fflush (stdout);
}

#define RUN(fn) tap_run (#fn, fn)

static inline int
tap_done (void)
{
  printf ("1..%d\n", tap_n);
  if (tap_failed)
    printf ("# %d of %d failed\n", tap_failed, tap_n);
  return tap_failed ? 1 : 0;
}

#endif
