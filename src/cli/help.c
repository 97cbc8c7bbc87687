/* sbx CLI: help texts (`sbx help`, `sbx COMMAND --help`). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define SANDBOX_OPTIONS_HELP                                                   \
  "  --memory SIZE          memory limit, no swap (512M, 1G; default 512M)\n"  \
  "  --cpus N               CPU limit, fractions allowed (0.5; default 1)\n"   \
  "  --pids N               process limit (default 256)\n"                     \
  "  --disk SIZE            size of /home/user + /tmp + /dev/shm (default 1G)\n" \
  "  --template NAME        sandbox template (default base)\n"                 \
  "  --isolation ENGINE     namespace (default) or vm: a QEMU microVM\n"       \
  "  --net SPEC             network egress (repeatable): all, none (default),\n" \
  "                         allow:HOST[,HOST...], deny:HOST[,HOST...]; HOST is\n" \
  "                         a name, *.domain, NAME:PORT, an IP or a CIDR\n"

#define FILE_OPTION_HELP                                                       \
  "  --file LOCAL[:REMOTE]  copy a local file in before the command runs\n"    \
  "                         (repeatable; keeps its mode; REMOTE empty or\n"    \
  "                         ending in / keeps the local name; relative REMOTE\n" \
  "                         is relative to /home/user)\n"

#define EXIT_STATUS_HELP                                                       \
  "Exit status: the command's; 124 if it timed out; 137 if it was killed (out\n" \
  "of memory, a signal, the sandbox died); 127/126 if it could not start;\n"   \
  "125 if sbx itself failed.\n"

static const struct
{
  const char *name;
  const char *text;
} help_texts[] = {
  {"run",
   "usage: sbx run [OPTIONS] [--] CMD [ARG...]\n"
   "\n"
   "Run CMD in a fresh sandbox, stream its output, then remove the sandbox\n"
   "(also on errors and on SIGINT/SIGTERM/SIGHUP).\n"
   "\n"
   "Options:\n"
   "  --timeout DURATION     kill CMD after this long (30, 500ms, 10s, 1m30s);\n"
   "                         the sandbox lives 10s longer\n" SANDBOX_OPTIONS_HELP
   "  -e, --env K=V          set a variable (repeatable; -e K passes ours)\n"
   "  -w, --workdir DIR      working directory of CMD (default /home/user)\n"
   "  -u, --user NAME        run CMD as `user` (default) or `root`\n" FILE_OPTION_HELP
   "  -i, --interactive      pass our stdin to CMD (else it reads nothing)\n"
   "  -t, --tty              run CMD on a terminal the size of ours (our TERM);\n"
   "                         with -i our terminal is raw meanwhile: every key,\n"
   "                         Ctrl-C too, goes to CMD; window resizes follow\n"
   "\n" EXIT_STATUS_HELP},
  {"exec",
   "usage: sbx exec [OPTIONS] ID [--] CMD [ARG...]\n"
   "\n"
   "Run CMD in the existing sandbox ID and stream its output.\n"
   "\n"
   "Options:\n"
   "  --timeout DURATION     kill CMD after this long (30, 500ms, 10s, 1m30s)\n"
   "  -e, --env K=V          set a variable for CMD (repeatable; -e K passes ours)\n"
   "  -w, --workdir DIR      working directory (default /home/user)\n"
   "  -u, --user NAME        run CMD as `user` or `root` (default: the sandbox's)\n"
   FILE_OPTION_HELP
   "  -i, --interactive      pass our stdin to CMD (else it reads nothing)\n"
   "  -t, --tty              run CMD on a terminal the size of ours (our TERM);\n"
   "                         with -i our terminal is raw meanwhile: every key,\n"
   "                         Ctrl-C too, goes to CMD; window resizes follow\n"
   "\n" EXIT_STATUS_HELP},
  {"create",
   "usage: sbx create [OPTIONS]\n"
   "\n"
   "Create a sandbox and print its id (the last line of the output).\n"
   "\n"
   "Options:\n"
   "  --timeout DURATION     lifetime of the sandbox (default 300s)\n"
   "  --on-timeout ACTION    at the end of its lifetime: kill (default) or pause\n"
   "  --snapshot NAME        start with the files of snapshot NAME\n" SANDBOX_OPTIONS_HELP
   "  -e, --env K=V          set a variable for every command (repeatable)\n"
   "  -u, --user NAME        default user of commands: `user` or `root`\n" FILE_OPTION_HELP},
  {"cp",
   "usage: sbx cp [-r] SRC DST\n"
   "\n"
   "Copy a file or a directory tree into or out of a sandbox. Exactly one of\n"
   "SRC and DST is ID:PATH (PATH relative to /home/user unless absolute); the\n"
   "local side may be - for stdin or stdout. Files keep their mode bits. When\n"
   "DST is a directory (an existing local one, or a remote path ending in /),\n"
   "SRC keeps its name in it. A directory is copied whole, as docker cp does\n"
   "(-r is accepted, not needed): directories that exist are merged into,\n"
   "files replaced; links and special files are left out, and counted in the\n"
   "summary on stderr. Write a local path containing ':' as ./NAME.\n"},
  {"ls",
   "usage: sbx ls [-q | --json | --format TEMPLATE] [--filter KEY=VALUE]...\n"
   "\n"
   "List sandboxes (running and paused): ID, STATE, ISOLATION, TEMPLATE, the\n"
   "limits, AGE and the lifetime left.\n"
   "\n"
   "Options:\n"
   "  -q, --quiet            IDs only, one a line\n"
   "  --json                 the API's objects, as a JSON list (--format json)\n"
   "  --format TEMPLATE      one line each: {{.id}}, {{.state}}, {{.limits.memory}},\n"
   "                         {{.metadata.KEY}}, {{json .}}; \\t is a tab\n"
   "  -f, --filter KEY=VALUE only those with state=, isolation=, template=,\n"
   "                         user=, id= (a prefix), metadata.KEY= or\n"
   "                         label=KEY[=VALUE]; filters of several keys all hold\n"},
  {"inspect",
   "usage: sbx inspect [--format TEMPLATE] ID...\n"
   "\n"
   "Everything the daemon knows of sandboxes (GET /v1/sandboxes/ID): a JSON\n"
   "list, as docker inspect prints it, or TEMPLATE for each (see `sbx help\n"
   "ls`). Exits 1 if any is unknown; the others are still shown.\n"},
  {"logs",
   "usage: sbx logs [-f] ID [PID]\n"
   "\n"
   "What a sandbox's processes printed, as docker logs: stdout to stdout,\n"
   "stderr to stderr. The daemon keeps the output of background processes\n"
   "(POST .../processes, E2B's background commands) and of commands while\n"
   "they run, the last 1 MiB per stream; each process with output kept, or\n"
   "PID alone, a line on stderr naming each when there are several. -f then\n"
   "follows the newest (or PID) until it ends.\n"},
  {"stats",
   "usage: sbx stats [-f] [--json] [ID...]\n"
   "\n"
   "What sandboxes use, as docker stats shows it: CPU % (100 is one CPU busy,\n"
   "over the last half second), memory and its limit, processes and threads,\n"
   "disk and its limit, OOM kills; of the IDs given, or of every sandbox.\n"
   "-f redraws every second until interrupted; --json prints the daemon's\n"
   "metrics (GET /v1/sandboxes/ID/metrics) with `id` and `cpu_percent`.\n"},
  {"completion",
   "usage: sbx completion bash|zsh\n"
   "\n"
   "Print the shell's completion for sbx (commands, subcommands, options, and\n"
   "sandbox IDs from `sbx ls -q`), made from these help texts: source it, or\n"
   "let `make install` put it where bash-completion and zsh look. `sbx help\n"
   "--man` prints the manual page, sbx(1), made the same way.\n"},
  {"stop",
   "usage: sbx stop ID...\n"
   "\n"
   "The same as `sbx kill` (docker's word): sbx has no stopped state, so the\n"
   "sandbox and its files are gone. `sbx pause` keeps one.\n"},
  {"rm",
   "usage: sbx rm ID...\n"
   "\n"
   "The same as `sbx kill` (docker's word).\n"},
  {"kill",
   "usage: sbx kill ID...\n"
   "\n"
   "Kill sandboxes: their processes and files are gone. Exits 1 if any\n"
   "could not be killed (the others still are).\n"},
  {"pause",
   "usage: sbx pause [--to-disk|--no-memory] ID...\n"
   "\n"
   "Pause sandboxes: every process is frozen, memory stays resident, and the\n"
   "lifetime clock stops. Commands and files answer 409 until it resumes.\n"
   "\n"
   "  --to-disk     hibernate (isolation vm only): save the VM's memory to the\n"
   "                daemon's state and end its QEMU, freeing the host's memory;\n"
   "                resume restores it (running commands go on, their streams end)\n"
   "  --no-memory   keep only the files (isolation namespace only: /home/user,\n"
   "                /tmp, /dev/shm go to the daemon's state) and end every\n"
   "                process, freeing the host's memory; resume boots the sandbox\n"
   "                again (a new boot id, the code interpreter started afresh)\n"},
  {"resume",
   "usage: sbx resume [--timeout DURATION] ID...\n"
   "\n"
   "Resume paused sandboxes where they stopped. Their lifetime continues\n"
   "with what was left at the pause, or --timeout sets a new one.\n"},
  {"fork",
   "usage: sbx fork ID [--count N] [--timeout DURATION]\n"
   "\n"
   "Make N (default 1, at most 256) new sandboxes with a copy of sandbox ID's\n"
   "files (/home/user, /tmp, /dev/shm) and settings, and print their ids.\n"
   "Running processes are not carried over. ID is frozen during the copy.\n"},
  {"snapshot",
   "usage: sbx snapshot create ID NAME\n"
   "       sbx snapshot ls [--json]\n"
   "       sbx snapshot rm NAME...\n"
   "\n"
   "Save sandbox ID's files (/home/user, /tmp, /dev/shm) as snapshot NAME\n"
   "(1 to 64 of A-Z a-z 0-9 . _ -), list your snapshots, delete them. Start\n"
   "sandboxes from one with `sbx create --snapshot NAME`.\n"},
  {"net",
   "usage: sbx net ID [SPEC...]\n"
   "\n"
   "Show the egress policy of sandbox ID, or replace it with SPECs: all,\n"
   "none, allow:HOST[,HOST...], deny:HOST[,HOST...] (deny wins). HOST is a\n"
   "name (pypi.org), *.domain, NAME:PORT, an IP ([::1]:443) or a CIDR\n"
   "(10.0.0.0/8). Takes effect on the sandbox's next connection.\n"},
  {"code",
   "usage: sbx code ID [--context CTX] [--timeout DUR] [-e K=V]... [--json] (CODE | -f FILE | -)\n"
   "\n"
   "Run Python in a sandbox of template code-interpreter-v1 (sbx create\n"
   "--template code-interpreter-v1): in its default context, or in CTX.\n"
   "Variables persist between runs of a context. Prints stdout and stderr\n"
   "as the code prints, then each result's text (the last expression's\n"
   "value); an error's traceback goes to stderr and the exit status is 1.\n"
   "The code comes from the argument, a file (-f), or stdin (-). --timeout\n"
   "interrupts the run (KeyboardInterrupt; the context keeps its state).\n"
   "--json prints the events (stdout, stderr, result, error, ...) as JSON\n"
   "lines, images included (base64).\n"},
  {"key",
   "usage: sbx key create [--tenant NAME]\n"
   "       sbx key ls [--json]\n"
   "       sbx key rm ID...\n"
   "\n"
   "Manage API keys for the daemon's TCP listener (only over the unix\n"
   "socket). `create` prints the key, once, alone on its last line.\n"},
  {"secret",
   "usage: sbx secret create NAME [--value-file FILE] [--description TEXT]\n"
   "       sbx secret ls [--json]\n"
   "       sbx secret rm NAME...\n"
   "\n"
   "Manage your tenant's secrets, which sandboxes' network rules put into\n"
   "request headers on the way out (docs/egress.md). The value comes from\n"
   "stdin or FILE (one trailing newline dropped), never from the command\n"
   "line, and is never shown again: `ls` lists names.\n"},
  {"template",
   "usage: sbx template build NAME --from-dir DIR | --from-oci FILE | --from-recipe FILE\n"
   "       sbx template ls [--json]\n"
   "       sbx template inspect [--json] NAME...\n"
   "       sbx template rm NAME...\n"
   "       sbx template cache [--json]\n"
   "       sbx template prune [--json]\n"
   "\n"
   "Manage templates: read-only root trees sandboxes start from (`--template\n"
   "NAME` on run and create; E2B's templateID). `build --from-dir` uploads a\n"
   "tar of DIR (made with tar(1)) as one layer; `--from-oci` an image archive\n"
   "as `docker save` or `skopeo copy ... oci-archive:` write it (layers,\n"
   "whiteouts, Env, WorkingDir and User kept); `--from-recipe` a JSON file\n"
   "{\"release\": \"bookworm\", \"packages\": [...]} built with debootstrap\n"
   "(administrator only; cached by recipe). Layers are stored once by\n"
   "content. `rm` fails while a sandbox uses the template; it keeps the\n"
   "recipe build cache, which makes a rebuild a copy: `cache` shows its\n"
   "size, `prune` empties it (administrator only; refused while a recipe\n"
   "build runs). See docs/templates.md.\n"},
  {"audit",
   "usage: sbx audit verify [--state DIR]\n"
   "       sbx audit tail [--state DIR] [--sandbox ID] [-n N] [--follow]\n"
   "\n"
   "Read the daemon's audit log ($SBX_STATE/audit, default /var/lib/sbx/audit)\n"
   "on its host (as root). `verify` checks every record's seq and hash chain:\n"
   "\"ok: N records, last seq S\", or the first break and exit status 1.\n"
   "`tail` prints the last N records (default 10, 0: all) as JSON lines, of\n"
   "one sandbox with --sandbox; --follow (-f) then prints new ones as they\n"
   "are written, across rotations. See docs/audit.md.\n"},
  {"serve",
   "usage: sbx serve [ARGS...]\n"
   "\n"
   "Run the daemon: execs sbxd (next to sbx, or $SBX_DAEMON) with ARGS.\n"},
  {"version", "usage: sbx version\n\nPrint the version of sbx.\n"},
  {"help", "usage: sbx help [COMMAND]\n\nShow help for sbx or one of its commands.\n"},
};

const char sbx_cli_main_help[] =
    "usage: sbx COMMAND [ARGS...]\n"
    "\n"
    "Run untrusted code in throwaway sandboxes.\n"
    "\n"
    "Commands:\n"
    "  run [OPTIONS] [--] CMD [ARG...]      run CMD in a fresh sandbox, then remove it\n"
    "  create [OPTIONS]                     create a sandbox and print its id\n"
    "  exec [OPTIONS] ID [--] CMD [ARG...]  run CMD in an existing sandbox\n"
    "  cp SRC DST                           copy a file or a tree in or out (ID:PATH)\n"
    "  ls [-q|--json|--format T] [-f K=V]   list sandboxes (filters: state, metadata...)\n"
    "  inspect ID...                        everything the daemon knows of sandboxes\n"
    "  stats [-f] [ID...]                   CPU, memory, processes, disk of sandboxes\n"
    "  logs [-f] ID [PID]                   what its processes printed\n"
    "  kill ID... (stop, rm)                kill sandboxes\n"
    "  pause ID... / resume ID...           freeze sandboxes, resume them\n"
    "  fork ID [--count N]                  copy a sandbox's files into new ones\n"
    "  snapshot create|ls|rm                save a sandbox's files, list, delete\n"
    "  net ID [SPEC...]                     show or set a sandbox's egress policy\n"
    "  code ID (CODE | -f FILE | -)         run Python in a code-interpreter sandbox\n"
    "  key create|ls|rm                     manage API keys\n"
    "  secret create|ls|rm                  manage secrets for network rules\n"
    "  template build|ls|inspect|rm         manage templates (--from-dir, --from-oci)\n"
    "  template cache|prune                 the recipe build cache: its size, empty it\n"
    "  serve [ARGS...]                      run the daemon (sbxd)\n"
    "  audit verify|tail                    check or read the audit log (on the host)\n"
    "  version                              print the version\n"
    "  help [COMMAND]                       show help; also `sbx COMMAND --help`\n"
    "  completion bash|zsh                  print the shell completion (help --man: sbx(1))\n"
    "\n"
    "Environment:\n"
    "  SBX_URL      http://HOST:PORT of the daemon's TCP listener (no https)\n"
    "  SBX_API_KEY  the API key sent to SBX_URL\n"
    "  SBX_STATE    state directory of a local daemon; its socket is\n"
    "               $SBX_STATE/sbx.sock (default /var/lib/sbx)\n"
    "  SBX_DAEMON   the sbxd binary `sbx serve` runs\n"
    "\n" EXIT_STATUS_HELP;

void
sbx_cli_help (const char *cmd)
{
  size_t i, n = strcspn (cmd, " ");

  for (i = 0; i < sizeof help_texts / sizeof help_texts[0]; i++)
    if (strlen (help_texts[i].name) == n && strncmp (help_texts[i].name, cmd, n) == 0)
      {
        fputs (help_texts[i].text, stdout);
        return;
      }
  fputs (sbx_cli_main_help, stdout);
}

int
sbx_cli_has_help (const char *cmd)
{
  size_t i;

  for (i = 0; i < sizeof help_texts / sizeof help_texts[0]; i++)
    if (strcmp (help_texts[i].name, cmd) == 0)
      return 1;
  return 0;
}

size_t
sbx_cli_help_count (void)
{
  return sizeof help_texts / sizeof help_texts[0];
}

const char *
sbx_cli_help_name (size_t i)
{
  return i < sbx_cli_help_count () ? help_texts[i].name : NULL;
}

const char *
sbx_cli_help_text (size_t i)
{
  return i < sbx_cli_help_count () ? help_texts[i].text : NULL;
}
