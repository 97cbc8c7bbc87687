/* Unit tests for src/cli/common.c: the helpers every subcommand shares
 * (basename, durations and times for `sbx ls`, the table printer, full
 * writes, the failure exit statuses).
 */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>

#include "cli/api.h"
#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

static int
test_is_help (void)
{
  CHECK (sbx_cli_is_help ("--help"));
  CHECK (sbx_cli_is_help ("-h"));
  CHECK (!sbx_cli_is_help ("-help"));
  CHECK (!sbx_cli_is_help ("--help=1"));
  CHECK (!sbx_cli_is_help ("help"));
  CHECK (!sbx_cli_is_help ("-H"));
  CHECK (!sbx_cli_is_help (""));
  return 0;
}

static int
test_basename (void)
{
  static const struct
  {
    const char *in, *out;
    int in_place; /* a pointer into the argument */
  } cases[] = {
    {"a/b", "b", 1},     {"b", "b", 1},       {"/a", "a", 1},     {"/a/b/c.txt", "c.txt", 1},
    {"a/b/", "b", 0},    {"a//", "a", 0},     {"/a/b///", "b", 0}, {"/", "", 1},
    {"///", "", 1},      {"", "", 1},         {"./", ".", 0},     {"..", "..", 1},
    {"a/..", "..", 1},   {"a/.", ".", 1},
  };
  char scratch[8];

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      const char *got;

      memset (scratch, 'X', sizeof scratch);
      got = sbx_cli_basename (cases[i].in, scratch, sizeof scratch);
      CHECK_STR (got, cases[i].out);
      if (cases[i].in[0] && cases[i].out[0])
        CHECK (cases[i].in_place ? got >= cases[i].in && got < cases[i].in + strlen (cases[i].in)
                                 : got == scratch);
    }
  /* A scratch buffer too small for the name: "" rather than a cut name. */
  CHECK_STR (sbx_cli_basename ("dir/longname/", scratch, 8), "");
  CHECK_STR (sbx_cli_basename ("dir/seven77/", scratch, 8), "seven77");
  CHECK_STR (sbx_cli_basename ("dir/longname", scratch, 8), "longname"); /* in place: any length */
  return 0;
}

static int
test_format_duration (void)
{
  static const struct
  {
    long long s;
    const char *want;
  } cases[] = {
    {-5, "0s"},          {0, "0s"},          {1, "1s"},          {45, "45s"},
    {59, "59s"},         {60, "1m00s"},      {61, "1m01s"},      {299, "4m59s"},
    {3599, "59m59s"},    {3600, "1h00m"},    {3659, "1h00m"},    {7380, "2h03m"},
    {86399, "23h59m"},   {86400, "1d00h"},   {273600, "3d04h"},  {90061, "1d01h"},
    {864000000, "10000d00h"},
  };
  char buf[32];

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      sbx_cli_format_duration (cases[i].s, buf, sizeof buf);
      if (strcmp (buf, cases[i].want) != 0)
        {
          fprintf (stderr, "#   %lld: `%s`, want `%s`\n", cases[i].s, buf, cases[i].want);
          return -1;
        }
    }
  sbx_cli_format_duration (7380, buf, 4);
  CHECK_STR (buf, "2h0");
  return 0;
}

static int
test_parse_time (void)
{
  static const struct
  {
    const char *in;
    long long want;
  } cases[] = {
    {"2026-11-29T15:53:11Z", 1795967591LL},
    {"2026-11-29T15:53:11.123Z", 1795967591LL},
    {"2026-11-29T15:53:11.123456789Z", 1795967591LL},
    {"2026-11-29T15:53:11+00:00", 1795967591LL},
    {"2026-11-29T15:53:11.5+00:00", 1795967591LL},
    {"1970-01-01T00:00:00Z", 0},
    {"2038-01-19T03:14:08Z", 2147483648LL},
    {"2000-02-29T23:59:59Z", 951868799LL},
    {NULL, -1},
    {"", -1},
    {"garbage", -1},
    {"2026-11-29T15:53:11", -1},      /* no zone */
    {"2026-11-29T15:53:11+01:00", -1}, /* only UTC */
    {"2026-11-29T15:53:11z", -1},
    {"2026-11-29T15:53:11Z ", -1},
    {"2026-11-29T15:53:11ZZ", -1},
    {"2026-11-29 15:53:11Z", -1},
    {"2026-11-29", -1},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      long long got = sbx_cli_parse_time (cases[i].in);
      if (got != cases[i].want)
        {
          fprintf (stderr, "#   `%s`: %lld, want %lld\n", cases[i].in ? cases[i].in : "(null)",
                   got, cases[i].want);
          return -1;
        }
    }
  return 0;
}

/* Run fn with stdout going to a pipe; the captured text in out. */
static int
capture_stdout (void (*fn) (void), char *out, size_t cap)
{
  int fds[2], saved;
  ssize_t n;
  size_t got = 0;

  fflush (stdout);
  if (pipe (fds) < 0)
    return -1;
  saved = dup (STDOUT_FILENO);
  dup2 (fds[1], STDOUT_FILENO);
  close (fds[1]);
  fn ();
  fflush (stdout);
  dup2 (saved, STDOUT_FILENO);
  close (saved);
  while (got < cap - 1 && (n = read (fds[0], out + got, cap - 1 - got)) > 0)
    got += (size_t) n;
  close (fds[0]);
  out[got] = '\0';
  return 0;
}

/* The table takes mutable strings (char *const *). */
static char c_id[] = "ID", c_state[] = "STATE", c_age[] = "AGE", c_abc[] = "abc",
            c_running[] = "running", c_5s[] = "5s", c_long[] = "longer-id", c_x[] = "x",
            c_3d[] = "3d04h", c_name[] = "NAME", c_value[] = "VALUE";

static void
print_sandboxes (void)
{
  char *const cells[] = {c_id, c_state, c_age, c_abc, c_running, c_5s, c_long, c_x, c_3d};
  sbx_cli_print_table (3, cells, ARRAY_SIZE (cells));
}

static void
print_nothing (void)
{
  char *const cells[] = {c_abc, c_x};
  sbx_cli_print_table (0, cells, 2);
  sbx_cli_print_table (17, cells, 2);
}

static void
print_header_only (void)
{
  char *const cells[] = {c_name, c_value};
  sbx_cli_print_table (2, cells, 2);
}

static int
test_print_table (void)
{
  char out[1024];

  CHECK (capture_stdout (print_sandboxes, out, sizeof out) == 0);
  CHECK_STR (out, "ID          STATE     AGE\n"
                  "abc         running   5s\n"
                  "longer-id   x         3d04h\n");
  CHECK (capture_stdout (print_nothing, out, sizeof out) == 0);
  CHECK_STR (out, "");
  CHECK (capture_stdout (print_header_only, out, sizeof out) == 0);
  CHECK_STR (out, "NAME   VALUE\n");
  return 0;
}

struct drain
{
  int fd;
  size_t total;
};

static void *
drain_slowly (void *arg)
{
  struct drain *d = arg;
  char buf[4096];
  ssize_t n;

  usleep (50000); /* let the writer fill the pipe and see EAGAIN */
  while ((n = read (d->fd, buf, sizeof buf)) > 0)
    d->total += (size_t) n;
  return NULL;
}

/* Everything is written, also through a non-blocking pipe that fills up. */
static int
test_write_all (void)
{
  static char data[1 << 20];
  struct drain d = {-1, 0};
  pthread_t th;
  int fds[2];

  memset (data, 'w', sizeof data);
  CHECK (pipe2 (fds, O_CLOEXEC) == 0);
  CHECK (fcntl (fds[1], F_SETFL, O_NONBLOCK) == 0);
  d.fd = fds[0];
  CHECK (pthread_create (&th, NULL, drain_slowly, &d) == 0);
  CHECK (sbx_write_all (fds[1], data, sizeof data) == 0);
  CHECK (sbx_write_all (fds[1], data, 0) == 0);
  close (fds[1]);
  CHECK (pthread_join (th, NULL) == 0);
  close (fds[0]);
  CHECK (d.total == sizeof data);
  /* A real error is returned with errno. */
  errno = 0;
  CHECK (sbx_write_all (-1, "x", 1) == -1 && errno == EBADF);
  CHECK (pipe2 (fds, O_CLOEXEC) == 0);
  close (fds[0]);
  signal (SIGPIPE, SIG_IGN);
  CHECK (sbx_write_all (fds[1], "x", 1) == -1 && errno == EPIPE);
  close (fds[1]);
  return 0;
}

/* Errors are printed on one line; not reaching the daemon is 125. */
static int
test_fail_status (void)
{
  sbx_error_t *err = NULL;
  int devnull = open ("/dev/null", O_WRONLY | O_CLOEXEC);

  CHECK (devnull >= 0);
  dup2 (devnull, STDERR_FILENO); /* the messages are expected */
  close (devnull);
  sbx_err (&err, SBX_E_NOT_FOUND, "sandbox `x` not found");
  CHECK (sbx_cli_fail (NULL, err, SBX_EXIT_FAILURE) == SBX_EXIT_FAILURE);
  err = NULL; /* freed by sbx_cli_fail */
  CHECK (sbx_cli_fail (NULL, NULL, SBX_EXIT_USAGE) == SBX_EXIT_USAGE);
  {
    struct sbx_api api;
    memset (&api, 0, sizeof api);
    sbx_http_endpoint_from_unix (&api.ep, "/nonexistent/sbx-test/sbx.sock");
    api.conn = sbx_http_conn_new (&api.ep);
    sbx_err (&err, SBX_E_INVALID, "bad");
    CHECK (sbx_cli_fail (&api, err, SBX_EXIT_FAILURE) == SBX_EXIT_FAILURE);
    err = NULL;
    CHECK (sbx_http_conn_connect (api.conn, &err) == -1);
    CHECK (err->kind == SBX_E_UNAVAILABLE && err->sys_errno == ENOENT);
    CHECK (sbx_api_unreachable (&api));
    CHECK (sbx_cli_fail (&api, err, SBX_EXIT_FAILURE) == SBX_EXIT_SBX);
    sbx_api_clear (&api);
  }
  return 0;
}

int
main (void)
{
  RUN (test_is_help);
  RUN (test_basename);
  RUN (test_format_duration);
  RUN (test_parse_time);
  RUN (test_print_table);
  RUN (test_write_all);
  RUN (test_fail_status);
  return tap_done ();
}
