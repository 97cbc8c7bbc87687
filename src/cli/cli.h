/* sbx CLI: subcommands and the helpers they share. */
#ifndef SBX_CLI_CLI_H
#define SBX_CLI_CLI_H

#include <stddef.h>

#include "util/error.h"

#ifndef SBX_VERSION
#define SBX_VERSION "0.1.0"
#endif

/* Exit statuses. run and exec hand every other status to the command, so
   their own failures use 125 (like `docker run`); other subcommands use 1
   for failures and 2 for usage errors. Not reaching the daemon is 125
   everywhere. */
#define SBX_EXIT_FAILURE 1
#define SBX_EXIT_USAGE 2
#define SBX_EXIT_SBX 125
#define SBX_EXIT_TIMEOUT 124
#define SBX_EXIT_KILLED 137

struct sbx_api;

/* Subcommands: argv[0] is the subcommand's name; the result is the exit
   status. */
int sbx_cmd_run (int argc, char **argv);
int sbx_cmd_exec (int argc, char **argv);
int sbx_cmd_create (int argc, char **argv);
int sbx_cmd_cp (int argc, char **argv);
int sbx_cmd_ls (int argc, char **argv);
int sbx_cmd_kill (int argc, char **argv);
int sbx_cmd_inspect (int argc, char **argv);
int sbx_cmd_stats (int argc, char **argv);
int sbx_cmd_logs (int argc, char **argv);
int sbx_cmd_completion (int argc, char **argv);
/* manual.c: the roff manual page and the shell completions. */
int sbx_cli_print_manual (void);
int sbx_cli_print_completion (const char *shell);
int sbx_cmd_pause (int argc, char **argv);
int sbx_cmd_resume (int argc, char **argv);
int sbx_cmd_fork (int argc, char **argv);
int sbx_cmd_snapshot (int argc, char **argv);
int sbx_cmd_net (int argc, char **argv);
int sbx_cmd_key (int argc, char **argv);
int sbx_cmd_secret (int argc, char **argv);
int sbx_cmd_serve (int argc, char **argv);
int sbx_cmd_audit (int argc, char **argv);
int sbx_cmd_code (int argc, char **argv);
int sbx_cmd_template (int argc, char **argv);

/* Print the help of a subcommand ("key create" for a sub-subcommand) on
   stdout; the general help for anything else (help.c). */
void sbx_cli_help (const char *cmd);
/* 1 if `cmd` has a help text of its own. */
int sbx_cli_has_help (const char *cmd);
/* The general help. */
extern const char sbx_cli_main_help[];
/* The per-command help texts, for the manual page and the completions
   made from them (manual.c): NULL past the last. */
size_t sbx_cli_help_count (void);
const char *sbx_cli_help_name (size_t i);
const char *sbx_cli_help_text (size_t i);

/* "sbx: <message> (try 'sbx help')" on stderr, one line. */
void sbx_cli_usage (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* 0 when id is well formed (util/id.h); else a usage error naming cmd
   and SBX_EXIT_USAGE: an unset "$id" would reach the daemon as
   /v1/sandboxes//pause and come back as a puzzle about routes. */
int sbx_cli_check_id (const char *cmd, const char *id);

/* fn(arg) in a detached thread with every signal blocked (the main
   thread handles them). 0, or the error number. */
int sbx_cli_thread_detached (void *(*fn) (void *), void *arg);
/* "sbx: <message>" on stderr. */
void sbx_cli_message (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* Print e (one line) and pick the exit status: 125 when the daemon could not
   be reached, else `status`. Frees e. */
int sbx_cli_fail (const struct sbx_api *api, sbx_error_t *e, int status);

/* DELETE PREFIX + NAME (escaped) through api: 0, or the status of
   sbx_cli_fail after printing why (125: no daemon, so callers removing
   several names stop there). */
int sbx_cli_delete_named (struct sbx_api *api, const char *prefix, const char *name);

/* 1 for "--help" and "-h". */
int sbx_cli_is_help (const char *arg);

/* write(2) all of p[0..n): retries on EINTR, waits out EAGAIN (a stdout
   shared with a non-blocking terminal). -1 with errno on failure. */
int sbx_write_all (int fd, const void *p, size_t n);

/* Last path component of `path` ("a/b/" -> "b"), without allocating when
   possible: returns a pointer into path, or into `scratch` (of size n) when
   trailing slashes had to be dropped. "" when there is none. */
const char *sbx_cli_basename (const char *path, char *scratch, size_t n);

/* Print a table on stdout: `cells` row-major, `cols` per row, the first
   row the header; columns separated by three spaces, left-aligned. */
void sbx_cli_print_table (size_t cols, char *const *cells, size_t n_cells);

/* Seconds as "45s", "4m59s", "2h03m", "3d04h". */
void sbx_cli_format_duration (long long seconds, char *buf, size_t len);
/* RFC 3339 UTC ("2026-11-29T15:53:11Z", fraction allowed) to a time_t; -1
   when malformed. */
long long sbx_cli_parse_time (const char *s);

#endif
