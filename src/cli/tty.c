/* sbx CLI: `-t` of run and exec, as docker's -it: the command runs on a
 * terminal in the sandbox (the API's `pty`) the size of ours; our
 * terminal is raw while it runs, so every key (Ctrl-C as byte 3, which
 * the sandbox's terminal turns into SIGINT of its foreground job; Ctrl-D;
 * arrows) goes to the command, and is restored on every way out; a
 * change of our window size (SIGWINCH) is sent as a resize.
 */
#include "cli/tty.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"

/* One terminal per process: the state lives here for the atexit hook and
   the signal handler. */
static struct termios saved_mode;
static int raw_fd = -1;
static int winch_pipe[2] = {-1, -1};

void
sbx_cli_tty_size (unsigned *cols, unsigned *rows)
{
  struct winsize ws;
  int fds[] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  size_t i;

  *cols = 80;
  *rows = 24;
  for (i = 0; i < sizeof fds / sizeof fds[0]; i++)
    if (ioctl (fds[i], TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
      {
        /* the API's bound (1 .. 1000) */
        *cols = ws.ws_col > 1000 ? 1000 : ws.ws_col;
        *rows = ws.ws_row > 1000 ? 1000 : ws.ws_row;
        return;
      }
}

void
sbx_cli_tty_restore (void)
{
  if (raw_fd >= 0)
    {
      tcsetattr (raw_fd, TCSADRAIN, &saved_mode);
      raw_fd = -1;
    }
}

int
sbx_cli_tty_raw (sbx_error_t **err)
{
  static int hooked;
  struct termios raw;

  if (tcgetattr (STDIN_FILENO, &saved_mode) < 0)
    return sbx_err_sys (err, errno, "the terminal's mode");
  raw = saved_mode;
  /* Output untouched too: the sandbox's terminal sends \r\n already. */
  cfmakeraw (&raw);
  if (!hooked)
    {
      atexit (sbx_cli_tty_restore);
      hooked = 1;
    }
  if (tcsetattr (STDIN_FILENO, TCSADRAIN, &raw) < 0)
    return sbx_err_sys (err, errno, "making the terminal raw");
  raw_fd = STDIN_FILENO;
  return 0;
}

/* ---- resizes ------------------------------------------------------------ */

struct resizer
{
  struct sbx_api api; /* owned */
  char *target;       /* owned; ".../processes/PID/resize" */
};

static void
on_winch (int sig)
{
  int saved = errno;
  ssize_t r = write (winch_pipe[1], "", 1);

  (void) sig;
  (void) r;
  errno = saved;
}

static void *
resizer_main (void *arg)
{
  struct resizer *rz = arg;
  char drain[64];

  for (;;)
    {
      unsigned cols, rows;
      json_t *body;
      sbx_error_t *e = NULL;
      ssize_t n = read (winch_pipe[0], drain, sizeof drain);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      sbx_cli_tty_size (&cols, &rows);
      body = json_pack ("{s:I,s:I}", "cols", (json_int_t) cols, "rows", (json_int_t) rows);
      if (body == NULL)
        sbx_oom ();
      if (sbx_api_json (&rz->api, "POST", rz->target, body, NULL, &e) < 0)
        {
          /* the command ended: nothing left to resize */
          sbx_error_free (e);
          json_decref (body);
          break;
        }
      json_decref (body);
    }
  sbx_api_clear (&rz->api);
  free (rz->target);
  free (rz);
  return NULL;
}

int
sbx_cli_tty_forward_resizes (const char *id, long long pid, sbx_error_t **err)
{
  struct resizer *rz = calloc (1, sizeof *rz);
  struct sbx_buf target = SBX_BUF_INIT;
  struct sigaction sa;
  int rc;

  if (rz == NULL)
    sbx_oom ();
  if (winch_pipe[0] < 0 && pipe2 (winch_pipe, O_CLOEXEC) < 0)
    {
      free (rz);
      return sbx_err_sys (err, errno, "pipe2");
    }
  sbx_api_sandbox_path (&target, id, NULL);
  sbx_buf_printf (&target, "/processes/%lld/resize", pid);
  if (sbx_api_init (&rz->api, err) < 0)
    {
      sbx_buf_free (&target);
      free (rz);
      return -1;
    }
  rz->target = sbx_buf_steal (&target);
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_winch;
  sa.sa_flags = SA_RESTART;
  sigemptyset (&sa.sa_mask);
  /* the resizer only reads the pipe the handler writes */
  rc = sbx_cli_thread_detached (resizer_main, rz);
  if (rc != 0)
    {
      sbx_api_clear (&rz->api);
      free (rz->target);
      free (rz);
      return sbx_err_sys (err, rc, "starting the resize thread");
    }
  if (sigaction (SIGWINCH, &sa, NULL) < 0)
    return sbx_err_sys (err, errno, "sigaction");
  return 0;
}
