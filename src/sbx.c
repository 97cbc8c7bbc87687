/* sbx: the command-line client of the sandbox daemon.
 *
 * A thin dispatcher: each subcommand lives in src/cli/. Startup does no
 * needless work (no locale, no config files): `sbx run -- /bin/true` is
 * benchmarked against bubblewrap.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "cli/cli.h"

struct command
{
  const char *name;
  int (*fn) (int argc, char **argv);
};

static const struct command commands[] = {
  {"run", sbx_cmd_run},   {"exec", sbx_cmd_exec}, {"create", sbx_cmd_create},
  {"cp", sbx_cmd_cp},     {"ls", sbx_cmd_ls},     {"kill", sbx_cmd_kill},
  {"key", sbx_cmd_key},   {"secret", sbx_cmd_secret}, {"serve", sbx_cmd_serve}, {"net", sbx_cmd_net},
  {"audit", sbx_cmd_audit}, {"template", sbx_cmd_template}, {"pause", sbx_cmd_pause},
  {"resume", sbx_cmd_resume}, {"fork", sbx_cmd_fork}, {"snapshot", sbx_cmd_snapshot},
  {"code", sbx_cmd_code}, {"inspect", sbx_cmd_inspect}, {"stats", sbx_cmd_stats}, {"logs", sbx_cmd_logs},
  {"completion", sbx_cmd_completion},
  /* docker's words for what sbx calls kill: sbx has no stopped state */
  {"stop", sbx_cmd_kill}, {"rm", sbx_cmd_kill},
};

/* With fd 0, 1 or 2 closed, the daemon connection could become "stdout"
   and the command's output would be written into it. */
static void
ensure_stdio (void)
{
  int fd;

  for (fd = 0; fd <= 2; fd++)
    if (fcntl (fd, F_GETFD) < 0 && errno == EBADF
        && open ("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd)
      _exit (SBX_EXIT_SBX);
}

int
main (int argc, char **argv)
{
  const char *cmd;
  size_t i;

  ensure_stdio ();
  /* jansson seeds its hash function from /dev/urandom (open, read, close)
     unless given a seed: the kernel already put 16 random bytes in our
     auxiliary vector, for free. */
  {
    const void *random16 = (const void *) getauxval (AT_RANDOM);
    size_t seed = 0;
    if (random16 != NULL)
      memcpy (&seed, random16, sizeof seed);
    json_object_seed (seed | 1);
  }
  if (argc < 2)
    {
      fputs (sbx_cli_main_help, stderr);
      return SBX_EXIT_USAGE;
    }
  cmd = argv[1];
  if (strcmp (cmd, "help") == 0 || sbx_cli_is_help (cmd))
    {
      if (argc > 2 && sbx_cli_is_help (argv[2]))
        {
          sbx_cli_help (""); /* `sbx help --help`: the help is the overview */
          return 0;
        }
      if (argc > 2 && strcmp (argv[2], "--man") == 0)
        return sbx_cli_print_manual ();
      if (argc > 2 && !sbx_cli_has_help (argv[2]))
        {
          sbx_cli_usage ("help: unknown command `%s`", argv[2]);
          return SBX_EXIT_USAGE;
        }
      sbx_cli_help (argc > 2 ? argv[2] : "");
      return 0;
    }
  if (strcmp (cmd, "version") == 0 || strcmp (cmd, "--version") == 0)
    {
      if (argc > 2 && sbx_cli_is_help (argv[2]))
        sbx_cli_help ("version");
      else
        printf ("sbx %s\n", SBX_VERSION);
      return 0;
    }
  for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp (commands[i].name, cmd) == 0)
      return commands[i].fn (argc - 1, argv + 1);
  sbx_cli_usage ("unknown command `%s`", cmd);
  return SBX_EXIT_USAGE;
}
