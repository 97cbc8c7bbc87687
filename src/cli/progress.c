/* sbx CLI: a word on a terminal while a create takes long. Most creates
 * take milliseconds (a pooled sandbox); a VM without a pooled one boots
 * for seconds, a code interpreter's first start imports its libraries,
 * a snapshot is copied. After a second of waiting, and only when stderr
 * is a terminal, one line says what the daemon is doing; scripts see
 * nothing. A thread of its own waits, so the request itself is untouched.
 */
#include "cli/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define PROGRESS_AFTER_MS 1000

struct waiter
{
  int cancel[2]; /* the main thread closes [1]: stop, or say nothing */
  char what[160];
};

static void *
waiter_main (void *arg)
{
  struct waiter *w = arg;
  struct pollfd p = {w->cancel[0], POLLIN, 0};
  int rc;

  while ((rc = poll (&p, 1, PROGRESS_AFTER_MS)) < 0 && errno == EINTR)
    ;
  if (rc == 0)
    fprintf (stderr, "sbx: creating the sandbox: %s...\n", w->what);
  /* the main thread is done with us once it closed its end */
  while (read (w->cancel[0], &rc, 1) < 0 && errno == EINTR)
    ;
  close (w->cancel[0]);
  free (w);
  return NULL;
}

int
sbx_cli_progress_start (const json_t *create_body)
{
  const char *iso = json_string_value (json_object_get (create_body, "isolation"));
  const char *tmpl = json_string_value (json_object_get (create_body, "template"));
  const char *snap = json_string_value (json_object_get (create_body, "snapshot"));
  struct waiter *w;
  int fd;

  if (!isatty (STDERR_FILENO))
    return -1;
  w = calloc (1, sizeof *w);
  if (w == NULL)
    sbx_oom ();
  if (iso && strcmp (iso, "vm") == 0)
    snprintf (w->what, sizeof w->what,
              "booting a VM (3-5 s when no pooled VM is free; --pool keeps some ready)");
  else if (snap)
    snprintf (w->what, sizeof w->what, "copying the files of snapshot `%.64s`", snap);
  else if (tmpl && strncmp (tmpl, "code-interpreter", 16) == 0)
    snprintf (w->what, sizeof w->what, "starting the code interpreter (its first start imports "
                                       "numpy, pandas and matplotlib)");
  else
    snprintf (w->what, sizeof w->what, "waiting for the daemon (no pooled sandbox was free)");
  if (pipe2 (w->cancel, O_CLOEXEC) < 0)
    {
      free (w);
      return -1;
    }
  fd = w->cancel[1];
  if (sbx_cli_thread_detached (waiter_main, w) != 0)
    {
      close (w->cancel[0]);
      close (w->cancel[1]);
      free (w);
      return -1;
    }
  return fd;
}

void
sbx_cli_progress_stop (int handle)
{
  if (handle >= 0)
    close (handle);
}
