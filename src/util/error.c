/* sbx: error objects (see error.h for the contract). */
#include "util/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sbx_oom_soft;

/* Never freed: what an error becomes when memory for it ran out. */
static char oom_msg[] = "out of memory";
static sbx_error_t oom_error = {SBX_E_UNAVAILABLE, ENOMEM, oom_msg};

int
sbx_err_oom (sbx_error_t **err)
{
  if (err == NULL)
    return -1;
  if (*err != NULL)
    sbx_error_free (*err);
  *err = &oom_error;
  return -1;
}

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
  if (e == NULL || vasprintf (&msg, fmt, ap) < 0)
    {
      free (e);
      return sbx_err_oom (err);
    }
  if (sys_errno != 0)
    {
      char *full = NULL;
      if (asprintf (&full, "%s: %s", msg, strerror (sys_errno)) < 0)
        {
          free (msg);
          free (e);
          return sbx_err_oom (err);
        }
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

  if (err == NULL || *err == NULL || *err == &oom_error)
    return -1;
  va_start (ap, fmt);
  if (vasprintf (&prefix, fmt, ap) < 0)
    prefix = NULL;
  va_end (ap);
  if (prefix == NULL || asprintf (&full, "%s: %s", prefix, (*err)->msg) < 0)
    {
      /* Without memory for the context, the error stays as it was. */
      free (prefix);
      return -1;
    }
  free (prefix);
  free ((*err)->msg);
  (*err)->msg = full;
  return -1;
}

void
sbx_error_free (sbx_error_t *e)
{
  if (e == NULL || e == &oom_error)
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
    case SBX_E_BAD_GATEWAY:
      return "bad_gateway";
    case SBX_E_GATEWAY_TIMEOUT:
      return "gateway_timeout";
    case SBX_E_NOT_IMPLEMENTED:
      return "not_implemented";
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
    case SBX_E_BAD_GATEWAY:
      return 502;
    case SBX_E_GATEWAY_TIMEOUT:
      return 504;
    case SBX_E_NOT_IMPLEMENTED:
      return 501;
    default:
      return 500;
    }
}
