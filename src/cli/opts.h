/* sbx CLI: the options shared by run, create and exec. */
#ifndef SBX_CLI_OPTS_H
#define SBX_CLI_OPTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Which options a subcommand accepts. */
enum
{
  SBX_OPT_TIMEOUT = 1u << 0,
  SBX_OPT_MEMORY = 1u << 1,
  SBX_OPT_CPUS = 1u << 2,
  SBX_OPT_PIDS = 1u << 3,
  SBX_OPT_DISK = 1u << 4,
  SBX_OPT_ENV = 1u << 5,
  SBX_OPT_WORKDIR = 1u << 6,
  SBX_OPT_USER = 1u << 7,
  SBX_OPT_TEMPLATE = 1u << 8,
  SBX_OPT_FILE = 1u << 9,
  SBX_OPT_INTERACTIVE = 1u << 10,
  SBX_OPT_NET = 1u << 11,
  SBX_OPT_SNAPSHOT = 1u << 12,
  SBX_OPT_ON_TIMEOUT = 1u << 13,
  SBX_OPT_ISOLATION = 1u << 14,
  SBX_OPT_TTY = 1u << 15,
};

struct sbx_cli_file
{
  char *local;        /* owned */
  const char *remote; /* borrowed from argv; "" when not given */
};

struct sbx_cli_opts
{
  /* Values as typed (borrowed from argv), NULL when not given, and parsed. */
  const char *timeout;
  uint64_t timeout_ms;
  const char *memory;
  uint64_t memory_bytes;
  const char *cpus;
  uint32_t cpus_milli;
  const char *pids;
  uint64_t pids_n;
  const char *disk;
  uint64_t disk_bytes;
  json_t *env; /* owned; object of strings, NULL without -e */
  const char *workdir;
  const char *user;
  const char *template_name;
  const char *isolation; /* --isolation: namespace or vm */
  const char *snapshot;   /* --snapshot NAME */
  const char *on_timeout; /* --on-timeout kill|pause */
  struct sbx_cli_file *files; /* owned array */
  size_t n_files;
  int interactive;
  int tty; /* -t: a terminal in the sandbox (tty.c) */
  json_t *network; /* owned; {"allow": [...], "deny": [...]}, NULL without --net */
  int help; /* --help was given: print help, do nothing else */
};

/* Parse options from argv[1..] (argv[0] is the subcommand) until the first
   non-option or "--" (consumed). Returns the index of the first remaining
   argument, or -1 with *err set; *usage is then 1 for usage errors (unknown
   option, missing value) and 0 for a bad value. */
int sbx_cli_parse_opts (int argc, char **argv, unsigned allowed,
                        struct sbx_cli_opts *o, int *usage, sbx_error_t **err);
void sbx_cli_opts_clear (struct sbx_cli_opts *o);

/* One network spec (`--net`, `sbx net`) into *network (created when NULL):
   `all` (allow *), `none` (empty both lists), `allow:A[,B...]`,
   `deny:A[,B...]`. The daemon checks each entry. */
int sbx_cli_net_spec (json_t **network, const char *spec, sbx_error_t **err);

/* JSON for the daemon: sizes as integer bytes, CPUs as a number, durations
   as integer seconds or "<n>ms" when not whole seconds. */
json_t *sbx_cli_json_size (uint64_t bytes);
json_t *sbx_cli_json_cpus (uint32_t milli);
json_t *sbx_cli_json_duration (uint64_t ms);

#endif
