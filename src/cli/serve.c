/* sbx CLI: `sbx serve [ARGS...]` execs the daemon, `sbxd`, found next to
 * this binary (or at $SBX_DAEMON), with ARGS passed through unchanged. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

/* The daemon's path: $SBX_DAEMON, else "sbxd" in the directory of
   /proc/self/exe (the real binary, whatever symlink or PATH entry ran us).
   Returns 0, or -1 with errno. */
static int
daemon_path (char *out, size_t len)
{
  const char *env = getenv ("SBX_DAEMON");
  char self[PATH_MAX];
  ssize_t n;
  char *slash;

  if (env != NULL && env[0] != '\0')
    {
      if ((size_t) snprintf (out, len, "%s", env) >= len)
        {
          errno = ENAMETOOLONG;
          return -1;
        }
      return 0;
    }
  n = readlink ("/proc/self/exe", self, sizeof self - 1);
  if (n < 0)
    return -1;
  self[n] = '\0';
  slash = strrchr (self, '/');
  if (slash == NULL)
    {
      errno = ENOENT;
      return -1;
    }
  *slash = '\0';
  if ((size_t) snprintf (out, len, "%s/sbxd", self) >= len)
    {
      errno = ENAMETOOLONG;
      return -1;
    }
  return 0;
}

int
sbx_cmd_serve (int argc, char **argv)
{
  static char name[] = "sbxd";
  char path[PATH_MAX];
  char **args;
  int i, saved, help = argc > 1 && sbx_cli_is_help (argv[1]);

  if (help)
    {
      /* Our summary first, then the daemon's own options if it is there. */
      sbx_cli_help ("serve");
      fflush (stdout);
    }
  if (daemon_path (path, sizeof path) < 0)
    {
      if (help)
        return 0;
      sbx_cli_message ("serve: cannot locate the daemon: %s (set SBX_DAEMON to the sbxd binary)",
                       strerror (errno));
      return SBX_EXIT_SBX;
    }
  args = calloc ((size_t) argc + 1, sizeof *args);
  if (args == NULL)
    sbx_oom ();
  args[0] = name;
  for (i = 1; i < argc; i++)
    args[i] = argv[i];
  args[argc] = NULL;
  fflush (NULL);
  execv (path, args);
  saved = errno;
  free (args);
  if (help)
    return 0;
  sbx_cli_message ("serve: cannot run the daemon %s: %s (set SBX_DAEMON to the sbxd binary)",
                   path, strerror (saved));
  return SBX_EXIT_SBX;
}
