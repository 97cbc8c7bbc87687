/* sbx: error objects (see error.h for the contract). */
#include "util/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
sbx_oom (void)
{
  static const char msg[] = "sbx: out of memory\n";
  ssize_t r = write (STDERR_FILENO, msg, sizeof msg - 1);
  (void) r;
  abort ();
}

int
sbx_errv (sbx_error_t **err, enum sbx_error_kind kind, int sys_errno,
          const char *fmt, va_list ap)
{
  sbx_error_t *e;
  char *msg = NULL;

  if (err == NULL)
    return -1;
  e = calloc (1, sizeof *e);
  if (e == NULL)
    sbx_oom ();
  if (vasprintf (&msg, fmt, ap) < 0)
    sbx_oom ();
  if (sys_errno != 0)
    {
      char *full = NULL;
      if (asprintf (&full, "%s: %s", msg, strerror (sys_errno)) < 0)
        sbx_oom ();
      free (msg);
      msg = full;
    }
  e->kind = kind;
  e->sys_errno = sys_errno;
  e->msg = msg;
  if (*err != NULL)
    sbx_error_free (*err);
  *err = e;
  return -1;
}

int
sbx_err (sbx_error_t **err, enum sbx_error_kind kind, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  sbx_errv (err, kind, 0, fmt, ap);
  va_end (ap);
  return -1;
}

int
sbx_err_errno (sbx_error_t **err, enum sbx_error_kind kind, int sys_errno, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  sbx_errv (err, kind, sys_errno, fmt, ap);
  va_end (ap);
  return -1;
}

/* A system call failed. Resource exhaustion is reported as a capacity limit,
   everything else as a system error. */
int
sbx_err_sys (sbx_error_t **err, int sys_errno, const char *fmt, ...)
{
  va_list ap;
  enum sbx_error_kind kind = SBX_E_SYSTEM;

  if (sys_errno == EMFILE || sys_errno == ENFILE || sys_errno == EAGAIN
      || sys_errno == ENOSPC || sys_errno == ENOMEM)
    kind = SBX_E_LIMIT;
  va_start (ap, fmt);
  sbx_errv (err, kind, sys_errno, fmt, ap);
  va_end (ap);
  return -1;
}

int
sbx_err_wrap (sbx_error_t **err, const char *fmt, ...)
{
  va_list ap;
  char *prefix = NULL, *full = NULL;

  if (err == NULL || *err == NULL)
    return -1;
  va_start (ap, fmt);
  if (vasprintf (&prefix, fmt, ap) < 0)
    sbx_oom ();
  va_end (ap);
  if (asprintf (&full, "%s: %s", prefix, (*err)->msg) < 0)
    sbx_oom ();
  free (prefix);
  free ((*err)->msg);
  (*err)->msg = full;
  return -1;
}

void
sbx_error_free (sbx_error_t *e)
{
  if (e == NULL)
    return;
  free (e->msg);
  free (e);
}

void
sbx_error_move (sbx_error_t **to, sbx_error_t **from)
{
  if (*to != NULL)
    sbx_error_free (*to);
  *to = *from;
  *from = NULL;
}

const char *
sbx_error_kind_name (enum sbx_error_kind kind)
{
  switch (kind)
    {
    case SBX_E_INVALID:
      return "invalid_argument";
    case SBX_E_UNAUTHORIZED:
      return "unauthorized";
    case SBX_E_FORBIDDEN:
      return "forbidden";
    case SBX_E_NOT_FOUND:
      return "not_found";
    case SBX_E_CONFLICT:
      return "conflict";
    case SBX_E_TOO_LARGE:
      return "too_large";
    case SBX_E_LIMIT:
      return "resource_exhausted";
    case SBX_E_SYSTEM:
      return "internal";
    case SBX_E_UNAVAILABLE:
      return "unavailable";
    default:
      return "internal";
    }
}

int
sbx_error_kind_http_status (enum sbx_error_kind kind)
{
  switch (kind)
    {
    case SBX_E_INVALID:
      return 400;
    case SBX_E_UNAUTHORIZED:
      return 401;
    case SBX_E_FORBIDDEN:
      return 403;
    case SBX_E_NOT_FOUND:
      return 404;
    case SBX_E_CONFLICT:
      return 409;
    case SBX_E_TOO_LARGE:
      return 413;
    case SBX_E_LIMIT:
      return 429;
    case SBX_E_SYSTEM:
      return 500;
    case SBX_E_UNAVAILABLE:
      return 503;
    default:
      return 500;
    }
}
