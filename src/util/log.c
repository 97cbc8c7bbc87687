/* sbx: logging. One write(2) per line so lines from threads never interleave. */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static enum sbx_log_level min_level = SBX_LOG_INFO;

void
sbx_log_set_level (enum sbx_log_level level)
{
  min_level = level;
}

void
sbx_log (enum sbx_log_level level, const char *fmt, ...)
{
  static const char *const names[] = {"debug", "info", "warn", "error"};
  char line[2048];
  struct timespec ts;
  struct tm tm;
  va_list ap;
  int n, m;

  if (level < min_level)
    return;
  clock_gettime (CLOCK_REALTIME, &ts);
  gmtime_r (&ts.tv_sec, &tm);
  n = snprintf (line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ sbxd[%d] %s: ",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                tm.tm_sec, ts.tv_nsec / 1000000, (int) getpid (), names[level]);
  va_start (ap, fmt);
  m = vsnprintf (line + n, sizeof line - (size_t) n - 1, fmt, ap);
  va_end (ap);
  if (m < 0)
    return;
  n += m;
  if ((size_t) n > sizeof line - 2)
    n = (int) sizeof line - 2;
  line[n++] = '\n';
  if (write (STDERR_FILENO, line, (size_t) n) < 0)
    return;
}
