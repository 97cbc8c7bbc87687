/* sbx CLI: helpers shared by the subcommands (see cli.h). */
#include "cli/cli.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/api.h"
#include "util/id.h"

void
sbx_cli_message (const char *fmt, ...)
{
  va_list ap;

  fputs ("sbx: ", stderr);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
}

void
sbx_cli_usage (const char *fmt, ...)
{
  va_list ap;

  fputs ("sbx: ", stderr);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  /* One line, like every other error: scripts keep the last line. */
  fputs (" (try 'sbx help')\n", stderr);
}

int
sbx_cli_check_id (const char *cmd, const char *id)
{
  if (sbx_id_valid (id))
    return 0;
  if (id[0] == '\0')
    sbx_cli_usage ("%s: the sandbox ID is empty (an unset variable?)", cmd);
  else
    sbx_cli_usage ("%s: `%.64s` is not a sandbox ID (%d lowercase letters and digits, as `sbx "
                   "ls` shows)",
                   cmd, id, SBX_ID_LEN);
  return SBX_EXIT_USAGE;
}

int
sbx_cli_fail (const struct sbx_api *api, sbx_error_t *e, int status)
{
  if (e != NULL)
    sbx_cli_message ("%s", e->msg);
  sbx_error_free (e);
  if (api != NULL && sbx_api_unreachable (api))
    return SBX_EXIT_SBX;
  return status;
}

int
sbx_cli_is_help (const char *arg)
{
  return strcmp (arg, "--help") == 0 || strcmp (arg, "-h") == 0;
}

int
sbx_write_all (int fd, const void *p, size_t n)
{
  const char *s = p;

  while (n > 0)
    {
      ssize_t w = write (fd, s, n);
      if (w < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN)
            {
              struct pollfd pfd = {fd, POLLOUT, 0};
              if (poll (&pfd, 1, -1) < 0 && errno != EINTR)
                return -1;
              continue;
            }
          return -1;
        }
      s += w;
      n -= (size_t) w;
    }
  return 0;
}

const char *
sbx_cli_basename (const char *path, char *scratch, size_t n)
{
  size_t len = strlen (path), start;

  while (len > 1 && path[len - 1] == '/')
    len--;
  if (len == 1 && path[0] == '/')
    return "";
  start = len;
  while (start > 0 && path[start - 1] != '/')
    start--;
  if (path[len] == '\0')
    return path + start;
  if (len - start >= n)
    return "";
  memcpy (scratch, path + start, len - start);
  scratch[len - start] = '\0';
  return scratch;
}

void
sbx_cli_format_duration (long long s, char *buf, size_t len)
{
  if (s < 0)
    s = 0;
  if (s < 60)
    snprintf (buf, len, "%llds", s);
  else if (s < 3600)
    snprintf (buf, len, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400)
    snprintf (buf, len, "%lldh%02lldm", s / 3600, s / 60 % 60);
  else
    snprintf (buf, len, "%lldd%02lldh", s / 86400, s / 3600 % 24);
}

long long
sbx_cli_parse_time (const char *s)
{
  struct tm tm;
  const char *rest;

  if (s == NULL)
    return -1;
  memset (&tm, 0, sizeof tm);
  rest = strptime (s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == NULL)
    return -1;
  if (*rest == '.')
    {
      rest++;
      while (*rest >= '0' && *rest <= '9')
        rest++;
    }
  if (strcmp (rest, "Z") != 0 && strcmp (rest, "+00:00") != 0)
    return -1;
  return (long long) timegm (&tm);
}

void
sbx_cli_print_table (size_t cols, char *const *cells, size_t n_cells)
{
  size_t width[16] = {0}, i;

  if (cols == 0 || cols > 16)
    return;
  for (i = 0; i < n_cells; i++)
    {
      size_t w = strlen (cells[i]);
      if (w > width[i % cols])
        width[i % cols] = w;
    }
  for (i = 0; i < n_cells; i++)
    {
      size_t c = i % cols;
      if (c + 1 == cols)
        printf ("%s\n", cells[i]);
      else
        printf ("%-*s   ", (int) width[c], cells[i]);
    }
}

int
sbx_cli_delete_named (struct sbx_api *api, const char *prefix, const char *name)
{
  struct sbx_buf target = SBX_BUF_INIT;
  sbx_error_t *e = NULL;
  int rc;

  sbx_buf_printf (&target, "%s", prefix);
  sbx_url_escape (&target, name, 0);
  rc = sbx_api_json (api, "DELETE", target.data, NULL, NULL, &e);
  sbx_buf_free (&target);
  return rc < 0 ? sbx_cli_fail (api, e, SBX_EXIT_FAILURE) : 0;
}

int
sbx_cli_thread_detached (void *(*fn) (void *), void *arg)
{
  sigset_t all, old;
  pthread_attr_t attr;
  pthread_t thread;
  int rc;

  /* Signals are for the main thread, which owns the cleanup. */
  sigfillset (&all);
  pthread_sigmask (SIG_BLOCK, &all, &old);
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  rc = pthread_create (&thread, &attr, fn, arg);
  pthread_attr_destroy (&attr);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  return rc;
}
