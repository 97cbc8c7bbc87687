/* Unit tests for src/cli/opts.c: the options of run, create and exec.
 *
 * Every spelling of every option ("--name value", "--name=value", "-x
 * value", "-xvalue", clusters like "-ie K=V"), where parsing stops ("--",
 * the first non-option, "-"), usage errors (*usage = 1) against bad values
 * (*usage = 0), and the JSON the values become for the daemon.
 */
#include "cli/opts.h"

#include <stdarg.h>

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))
#define ALL 0xfffu

/*============================ Helpers ================================== */

/* Parse a NULL-terminated list of arguments; argv[0] is "run". */
static int
parse (unsigned allowed, struct sbx_cli_opts *o, int *usage, sbx_error_t **err, ...)
{
  char *argv[64];
  int argc = 0;
  va_list ap;
  const char *a;

  argv[argc++] = (char *) (uintptr_t) "run";
  va_start (ap, err);
  while ((a = va_arg (ap, const char *)) != NULL && argc < 63)
    argv[argc++] = (char *) (uintptr_t) a;
  va_end (ap);
  argv[argc] = NULL;
  return sbx_cli_parse_opts (argc, argv, allowed, o, usage, err);
}

#define PARSE(allowed, o, usage, err, ...) parse (allowed, o, usage, err, __VA_ARGS__, NULL)

/* A usage error (unknown option, missing value) with this message. */
static int
usage_error (int rc, const int *usage_p, sbx_error_t **err, const char *msg)
{
  int usage = *usage_p; /* read after the parse (argument order is unspecified) */
  int ok = rc == -1 && usage == 1 && *err != NULL && (*err)->kind == SBX_E_INVALID
           && strcmp ((*err)->msg, msg) == 0;

  if (!ok)
    fprintf (stderr, "#   rc %d usage %d `%s`, want `%s`\n", rc, usage,
             *err ? (*err)->msg : "(none)", msg);
  sbx_error_free (*err);
  *err = NULL;
  return ok ? 0 : -1;
}

/* A bad value: not a usage error; the message starts with `prefix`. */
static int
value_error (int rc, const int *usage_p, sbx_error_t **err, const char *prefix)
{
  int usage = *usage_p;
  int ok = rc == -1 && usage == 0 && *err != NULL && (*err)->kind == SBX_E_INVALID
           && strncmp ((*err)->msg, prefix, strlen (prefix)) == 0;

  if (!ok)
    fprintf (stderr, "#   rc %d usage %d `%s`, want `%s...`\n", rc, usage,
             *err ? (*err)->msg : "(none)", prefix);
  sbx_error_free (*err);
  *err = NULL;
  return ok ? 0 : -1;
}

static const char *
env_value (const struct sbx_cli_opts *o, const char *name)
{
  return json_string_value (json_object_get (o->env, name));
}

/*============================ Every option ============================= */

static int
test_long_options (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage = -1;

  CHECK (PARSE (ALL, &o, &usage, &err, "--timeout", "30s", "--memory", "512M", "--cpus", "0.5",
                "--pids", "64", "--disk", "1G", "--env", "A=1", "--workdir", "/srv", "--user",
                "root", "--template", "base", "--file", "a.txt:/tmp/a", "--interactive", "cmd",
                "--memory", "x")
         == 22);
  CHECK (usage == 0 && err == NULL);
  CHECK_STR (o.timeout, "30s");
  CHECK (o.timeout_ms == 30000);
  CHECK_STR (o.memory, "512M");
  CHECK (o.memory_bytes == 512ULL << 20);
  CHECK_STR (o.cpus, "0.5");
  CHECK (o.cpus_milli == 500);
  CHECK_STR (o.pids, "64");
  CHECK (o.pids_n == 64);
  CHECK_STR (o.disk, "1G");
  CHECK (o.disk_bytes == 1ULL << 30);
  CHECK_STR (env_value (&o, "A"), "1");
  CHECK (json_object_size (o.env) == 1);
  CHECK_STR (o.workdir, "/srv");
  CHECK_STR (o.user, "root");
  CHECK_STR (o.template_name, "base");
  CHECK (o.n_files == 1);
  CHECK_STR (o.files[0].local, "a.txt");
  CHECK_STR (o.files[0].remote, "/tmp/a");
  CHECK (o.interactive == 1 && o.help == 0);
  sbx_cli_opts_clear (&o);
  CHECK (o.env == NULL && o.files == NULL && o.n_files == 0);
  return 0;
}

static int
test_equals_spellings (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  CHECK (PARSE (ALL, &o, &usage, &err, "--timeout=500ms", "--memory=1G", "--cpus=2",
                "--pids=10", "--disk=64k", "--env=B=x=y", "--workdir=/a=b", "--user=user",
                "--template=t", "--file=l:r")
         == 11);
  CHECK (o.timeout_ms == 500 && o.memory_bytes == 1ULL << 30 && o.cpus_milli == 2000);
  CHECK (o.pids_n == 10 && o.disk_bytes == 65536);
  CHECK_STR (env_value (&o, "B"), "x=y");
  CHECK_STR (o.workdir, "/a=b");
  CHECK_STR (o.user, "user");
  CHECK_STR (o.template_name, "t");
  CHECK_STR (o.files[0].local, "l");
  CHECK_STR (o.files[0].remote, "r");
  sbx_cli_opts_clear (&o);
  /* An empty value after '=' is a value (and here a bad one). */
  CHECK (value_error (PARSE (ALL, &o, &usage, &err, "--memory="), &usage, &err,
                      "--memory: empty size")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "--workdir=") == 2);
  CHECK_STR (o.workdir, "");
  sbx_cli_opts_clear (&o);
  return 0;
}

static int
test_short_options (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  CHECK (PARSE (ALL, &o, &usage, &err, "-e", "A=1", "-eB=2", "-w", "/w", "-w/x", "-u", "u1",
                "-uu2", "-i", "cmd")
         == 11);
  CHECK_STR (env_value (&o, "A"), "1");
  CHECK_STR (env_value (&o, "B"), "2");
  CHECK_STR (o.workdir, "/x"); /* the last one wins */
  CHECK_STR (o.user, "u2");
  CHECK (o.interactive == 1);
  sbx_cli_opts_clear (&o);

  /* Clusters: flags, then at most one option with a value. */
  CHECK (PARSE (ALL, &o, &usage, &err, "-ie", "K=V", "x") == 3);
  CHECK (o.interactive && strcmp (env_value (&o, "K"), "V") == 0);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "-ieK=V") == 2);
  CHECK (o.interactive && strcmp (env_value (&o, "K"), "V") == 0);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "-iii") == 2);
  CHECK (o.interactive == 1);
  sbx_cli_opts_clear (&o);
  /* After a value-taking option the rest of the cluster is its value. */
  CHECK (PARSE (ALL, &o, &usage, &err, "-wi", "cmd") == 2);
  CHECK_STR (o.workdir, "i");
  CHECK (o.interactive == 0);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "-ui") == 2);
  CHECK_STR (o.user, "i");
  sbx_cli_opts_clear (&o);
  return 0;
}

/* Where options end. */
static int
test_stops (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  CHECK (PARSE (ALL, &o, &usage, &err, "cmd", "-i") == 1);
  CHECK (o.interactive == 0);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "--", "-i") == 2);
  CHECK (o.interactive == 0);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "-i", "--", "--", "x") == 3);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "-", "-i") == 1); /* "-" is an argument */
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "-i") == 2); /* nothing left */
  sbx_cli_opts_clear (&o);
  {
    char *argv[] = {(char *) (uintptr_t) "run", NULL};
    CHECK (sbx_cli_parse_opts (1, argv, ALL, &o, &usage, &err) == 1);
    sbx_cli_opts_clear (&o);
  }
  /* The value of an option may look like an option. */
  CHECK (PARSE (ALL, &o, &usage, &err, "-w", "-i", "cmd") == 3);
  CHECK_STR (o.workdir, "-i");
  CHECK (o.interactive == 0);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "--user", "--", "cmd") == 3);
  CHECK_STR (o.user, "--");
  sbx_cli_opts_clear (&o);
  return 0;
}

static int
test_help (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  CHECK (PARSE (ALL, &o, &usage, &err, "--help", "--nope") == 2);
  CHECK (o.help == 1 && err == NULL);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (0, &o, &usage, &err, "-h") == 2);
  CHECK (o.help == 1);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "-i", "--help") == 3);
  CHECK (o.help == 1 && o.interactive == 1);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "cmd", "--help") == 1);
  CHECK (o.help == 0);
  sbx_cli_opts_clear (&o);
  /* Only the exact spellings. */
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "--help=1"), &usage, &err,
                      "run: unknown option --help")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "-ih"), &usage, &err,
                      "run: unknown option -h")
         == 0);
  sbx_cli_opts_clear (&o);
  return 0;
}

static int
test_usage_errors (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "--nope"), &usage, &err,
                      "run: unknown option --nope")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "--nope=1"), &usage, &err,
                      "run: unknown option --nope")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "--mem", "1G"), &usage, &err,
                      "run: unknown option --mem")
         == 0); /* no abbreviations */
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "--Memory", "1G"), &usage, &err,
                      "run: unknown option --Memory")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "-x"), &usage, &err,
                      "run: unknown option -x")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "-ix"), &usage, &err,
                      "run: unknown option -x")
         == 0);
  sbx_cli_opts_clear (&o);
  /* Missing values. */
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "--timeout"), &usage, &err,
                      "run: option --timeout needs a value")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "-e"), &usage, &err,
                      "run: option -e needs a value")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "-ie"), &usage, &err,
                      "run: option -e needs a value")
         == 0);
  sbx_cli_opts_clear (&o);
  /* A flag with a value. */
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "--interactive=1"), &usage, &err,
                      "run: option --interactive takes no value")
         == 0);
  sbx_cli_opts_clear (&o);
  CHECK (usage_error (PARSE (ALL, &o, &usage, &err, "--interactive="), &usage, &err,
                      "run: option --interactive takes no value")
         == 0);
  sbx_cli_opts_clear (&o);
  return 0;
}

/* Options a subcommand does not take are unknown to it. */
static int
test_allowed_sets (void)
{
  static const struct
  {
    const char *arg;
    unsigned flag;
    const char *msg;
  } cases[] = {
    {"--timeout=1", SBX_OPT_TIMEOUT, "run: unknown option --timeout"},
    {"--memory=1G", SBX_OPT_MEMORY, "run: unknown option --memory"},
    {"--cpus=1", SBX_OPT_CPUS, "run: unknown option --cpus"},
    {"--pids=1", SBX_OPT_PIDS, "run: unknown option --pids"},
    {"--disk=1G", SBX_OPT_DISK, "run: unknown option --disk"},
    {"--env=A=1", SBX_OPT_ENV, "run: unknown option --env"},
    {"-eA=1", SBX_OPT_ENV, "run: unknown option -e"},
    {"--workdir=/", SBX_OPT_WORKDIR, "run: unknown option --workdir"},
    {"-w/", SBX_OPT_WORKDIR, "run: unknown option -w"},
    {"--user=u", SBX_OPT_USER, "run: unknown option --user"},
    {"-uu", SBX_OPT_USER, "run: unknown option -u"},
    {"--template=t", SBX_OPT_TEMPLATE, "run: unknown option --template"},
    {"--file=a", SBX_OPT_FILE, "run: unknown option --file"},
    {"--interactive", SBX_OPT_INTERACTIVE, "run: unknown option --interactive"},
    {"-i", SBX_OPT_INTERACTIVE, "run: unknown option -i"},
    {"--net=all", SBX_OPT_NET, "run: unknown option --net"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_cli_opts o;
      sbx_error_t *err = NULL;
      int usage;

      CHECK (usage_error (PARSE (ALL & ~cases[i].flag, &o, &usage, &err, cases[i].arg), &usage,
                          &err, cases[i].msg)
             == 0);
      sbx_cli_opts_clear (&o);
      CHECK (PARSE (cases[i].flag, &o, &usage, &err, cases[i].arg) == 2);
      sbx_cli_opts_clear (&o);
    }
  return 0;
}

/* Bad values: the option named, the parser's reason, not a usage error. */
static int
test_bad_values (void)
{
  static const struct
  {
    const char *arg, *prefix;
  } cases[] = {
    {"--timeout=1d", "--timeout: `1d` has an unknown or repeated duration unit"},
    {"--timeout=", "--timeout: empty duration"},
    {"--memory=abc", "--memory: `abc` is not a size"},
    {"--memory=16E", "--memory: `16E` has an unknown size unit"},
    {"--memory=99999999999999999999", "--memory: size `99999999999999999999` is too large"},
    {"--cpus=x", "--cpus: `x` is not a CPU count"},
    {"--cpus=-1", "--cpus: `-1` is not a CPU count"},
    {"--pids=-1", "--pids: `-1` is not a non-negative integer"},
    {"--pids=1k", "--pids: `1k` is not a non-negative integer"},
    {"--disk=1.5", "--disk: size `1.5` has a fraction of a byte"},
    {"--env==x", "--env: `=x` has an empty variable name"},
    {"--env=", "--env: `` has an empty variable name"},
    {"-e=", "--env: `=` has an empty variable name"},
    {"--env=A=\xff", "--env: `A=\xff` is not valid UTF-8"},
    {"--env=\xff=1", "--env: `\xff=1` is not valid UTF-8"},
    {"--file=", "--file: `` has no local file"},
    {"--file=:/remote", "--file: `:/remote` has no local file"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_cli_opts o;
      sbx_error_t *err = NULL;
      int usage = -1;

      if (value_error (PARSE (ALL, &o, &usage, &err, "-i", cases[i].arg), &usage, &err,
                       cases[i].prefix)
          < 0)
        {
          fprintf (stderr, "#   %s\n", cases[i].arg);
          sbx_cli_opts_clear (&o);
          return -1;
        }
      /* What was parsed before is there to be cleared (no leak). */
      CHECK (o.interactive == 1);
      sbx_cli_opts_clear (&o);
    }
  return 0;
}

/*============================ -e and --file ============================ */

static int
test_env (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  /* NAME alone passes our value through; unset means not set there. */
  CHECK (setenv ("SBX_TEST_SET", "from here", 1) == 0);
  CHECK (setenv ("SBX_TEST_EMPTY", "", 1) == 0);
  unsetenv ("SBX_TEST_UNSET");
  CHECK (PARSE (ALL, &o, &usage, &err, "-e", "SBX_TEST_SET", "-e", "SBX_TEST_UNSET", "-e",
                "SBX_TEST_EMPTY", "-e", "A=", "-e", "B=b=c", "-e", "C=1", "-e", "C=2", "-e",
                "D=\xc3\xa9", "-e", "SPACE X=y", "cmd")
         == 19);
  CHECK_STR (env_value (&o, "SBX_TEST_SET"), "from here");
  CHECK (json_object_get (o.env, "SBX_TEST_UNSET") == NULL);
  CHECK_STR (env_value (&o, "SBX_TEST_EMPTY"), "");
  CHECK_STR (env_value (&o, "A"), "");
  CHECK_STR (env_value (&o, "B"), "b=c");
  CHECK_STR (env_value (&o, "C"), "2"); /* the last one wins */
  CHECK_STR (env_value (&o, "D"), "\xc3\xa9");
  CHECK_STR (env_value (&o, "SPACE X"), "y");
  CHECK (json_object_size (o.env) == 7);
  sbx_cli_opts_clear (&o);
  /* Only unset names: an empty object, not NULL (-e was given). */
  CHECK (PARSE (ALL, &o, &usage, &err, "-e", "SBX_TEST_UNSET") == 3);
  CHECK (o.env != NULL && json_object_size (o.env) == 0);
  sbx_cli_opts_clear (&o);
  /* Without -e: NULL. */
  CHECK (PARSE (ALL, &o, &usage, &err, "-i") == 2);
  CHECK (o.env == NULL);
  sbx_cli_opts_clear (&o);
  return 0;
}

static int
test_files (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  CHECK (PARSE (ALL, &o, &usage, &err, "--file", "a.txt:/home/user/a.txt", "--file", "b.txt",
                "--file=c:d:e", "--file", "d:", "--file", "/abs/path:rel", "cmd")
         == 10);
  CHECK (o.n_files == 5);
  CHECK_STR (o.files[0].local, "a.txt");
  CHECK_STR (o.files[0].remote, "/home/user/a.txt");
  CHECK_STR (o.files[1].local, "b.txt");
  CHECK_STR (o.files[1].remote, ""); /* not given */
  CHECK_STR (o.files[2].local, "c"); /* LOCAL ends at the first ':' */
  CHECK_STR (o.files[2].remote, "d:e");
  CHECK_STR (o.files[3].local, "d");
  CHECK_STR (o.files[3].remote, "");
  CHECK_STR (o.files[4].local, "/abs/path");
  CHECK_STR (o.files[4].remote, "rel");
  sbx_cli_opts_clear (&o);
  return 0;
}

/* parse_opts starts from a clean struct: values of an earlier parse are
   not kept (the caller clears in between). */
static int
test_fresh_state (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  CHECK (PARSE (ALL, &o, &usage, &err, "-w", "/a", "-i") == 4);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "cmd") == 1);
  CHECK (o.workdir == NULL && o.interactive == 0 && o.timeout == NULL && o.timeout_ms == 0);
  sbx_cli_opts_clear (&o);
  return 0;
}

/*============================ JSON for the daemon ====================== */

static int
is_json (json_t *v, const char *want)
{
  char *s = json_dumps (v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION (10));
  int ok = s != NULL && strcmp (s, want) == 0;

  if (!ok)
    fprintf (stderr, "#   `%s`, want `%s`\n", s ? s : "(null)", want);
  free (s);
  json_decref (v);
  return ok;
}

static int
test_json_values (void)
{
  CHECK (is_json (sbx_cli_json_size (0), "0"));
  CHECK (is_json (sbx_cli_json_size (536870912), "536870912"));
  CHECK (is_json (sbx_cli_json_size ((uint64_t) INT64_MAX), "9223372036854775807"));
  /* Past a JSON integer: a string, for the daemon to refuse with a reason. */
  CHECK (is_json (sbx_cli_json_size ((uint64_t) INT64_MAX + 1), "\"9223372036854775808\""));
  CHECK (is_json (sbx_cli_json_size (UINT64_MAX), "\"18446744073709551615\""));

  CHECK (is_json (sbx_cli_json_cpus (2000), "2"));
  CHECK (is_json (sbx_cli_json_cpus (0), "0"));
  CHECK (is_json (sbx_cli_json_cpus (500), "0.5"));
  CHECK (is_json (sbx_cli_json_cpus (1), "0.001"));
  CHECK (is_json (sbx_cli_json_cpus (1234), "1.234"));
  CHECK (is_json (sbx_cli_json_cpus (UINT32_MAX), "4294967.295"));

  CHECK (is_json (sbx_cli_json_duration (30000), "30"));
  CHECK (is_json (sbx_cli_json_duration (0), "0"));
  CHECK (is_json (sbx_cli_json_duration (1500), "\"1500ms\""));
  CHECK (is_json (sbx_cli_json_duration (999), "\"999ms\""));
  CHECK (is_json (sbx_cli_json_duration (UINT64_MAX), "\"18446744073709551615ms\""));
  CHECK (is_json (sbx_cli_json_duration (UINT64_C (18446744073709551000)), "18446744073709551"));
  return 0;
}

/* Round trip: what the options parse to is what the JSON says. */
static int
test_parse_then_json (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;

  CHECK (PARSE (ALL, &o, &usage, &err, "--timeout=1.5s", "--cpus=0.25", "--memory=1.5G") == 4);
  CHECK (is_json (sbx_cli_json_duration (o.timeout_ms), "\"1500ms\""));
  CHECK (is_json (sbx_cli_json_cpus (o.cpus_milli), "0.25"));
  CHECK (is_json (sbx_cli_json_size (o.memory_bytes), "1610612736"));
  sbx_cli_opts_clear (&o);
  return 0;
}

/* --net: specs accumulate into {"allow", "deny"}; none empties both. */
static int
test_net (void)
{
  struct sbx_cli_opts o;
  sbx_error_t *err = NULL;
  int usage;
  char *s;

  CHECK (PARSE (ALL, &o, &usage, &err, "--net", "allow:pypi.org,files.pythonhosted.org",
                "--net=deny:10.0.0.0/8", "--net", "all", "cmd")
         == 6);
  s = json_dumps (o.network, JSON_COMPACT | JSON_SORT_KEYS);
  CHECK_STR (s, "{\"allow\":[\"pypi.org\",\"files.pythonhosted.org\",\"*\"],"
                "\"deny\":[\"10.0.0.0/8\"]}");
  free (s);
  sbx_cli_opts_clear (&o);
  CHECK (PARSE (ALL, &o, &usage, &err, "--net", "all", "--net", "none", "cmd") == 5);
  s = json_dumps (o.network, JSON_COMPACT | JSON_SORT_KEYS);
  CHECK_STR (s, "{\"allow\":[],\"deny\":[]}");
  free (s);
  sbx_cli_opts_clear (&o);
  {
    static const char *const bad[] = {"some", "allow:", "allow:a,,b", "deny:a,", "ALL", ""};
    for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
      {
        CHECK (PARSE (ALL, &o, &usage, &err, "--net", bad[i], "cmd") == -1);
        CHECK (usage == 0);
        CHECK (strstr (err->msg, "--net") != NULL);
        sbx_error_free (err);
        err = NULL;
        sbx_cli_opts_clear (&o);
      }
  }
  return 0;
}

int
main (void)
{
  RUN (test_long_options);
  RUN (test_equals_spellings);
  RUN (test_short_options);
  RUN (test_stops);
  RUN (test_help);
  RUN (test_usage_errors);
  RUN (test_allowed_sets);
  RUN (test_bad_values);
  RUN (test_env);
  RUN (test_files);
  RUN (test_fresh_state);
  RUN (test_json_values);
  RUN (test_parse_then_json);
  RUN (test_net);
  return tap_done ();
}
