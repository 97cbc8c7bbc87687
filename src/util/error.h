/* sbx: the one error contract.
 *
 * A function that can fail takes `sbx_error_t **err` as its last argument and
 * returns an int (0 on success, -1 on failure) or a pointer (NULL on failure).
 * On success `*err` is left alone; on failure it points to a freshly
 * allocated error that the caller owns (sbx_error_free, or cleanup_error).
 * The constructors return -1 so that a failing call site is one line:
 *
 *     if (fd < 0)
 *       return sbx_err_sys (err, errno, "open `%s`", path);
 *
 * `kind` says what went wrong from the caller's point of view (and maps to an
 * HTTP status at the API edge); `sys_errno` keeps the errno when a system
 * call was the cause. sbx_err_wrap prefixes context onto an existing error.
 */
#ifndef SBX_UTIL_ERROR_H
#define SBX_UTIL_ERROR_H

#include <stdarg.h>

enum sbx_error_kind
{
  SBX_E_INVALID = 1,  /* malformed or out-of-range input: 400 */
  SBX_E_UNAUTHORIZED, /* missing or wrong credentials: 401 */
  SBX_E_FORBIDDEN,    /* authenticated but not allowed: 403 */
  SBX_E_NOT_FOUND,    /* unknown id or path: 404 */
  SBX_E_CONFLICT,     /* state does not allow it (already exists, dead): 409 */
  SBX_E_TOO_LARGE,    /* body or value over a limit: 413 */
  SBX_E_LIMIT,        /* a capacity limit of the daemon was reached: 429 */
  SBX_E_SYSTEM,       /* a system call or library failed: 500 */
  SBX_E_UNAVAILABLE,  /* shutting down, or a sandbox died meanwhile: 503 */
  SBX_E_BAD_GATEWAY,  /* a server in a sandbox refused or broke HTTP (the port proxy): 502 */
  SBX_E_GATEWAY_TIMEOUT, /* a server in a sandbox did not answer in time: 504 */
  SBX_E_NOT_IMPLEMENTED, /* this sandbox's engine lacks the feature (isolation vm): 501 */
};
#define SBX_E_LAST SBX_E_NOT_IMPLEMENTED /* the kinds are dense from SBX_E_INVALID */

typedef struct sbx_error_s
{
  enum sbx_error_kind kind;
  int sys_errno; /* 0 unless a system call failed */
  char *msg;     /* owned, never NULL */
} sbx_error_t;

int sbx_err (sbx_error_t **err, enum sbx_error_kind kind, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
int sbx_err_sys (sbx_error_t **err, int sys_errno, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
/* A system call failed in a way the caller can name (ENOENT: not found). */
int sbx_err_errno (sbx_error_t **err, enum sbx_error_kind kind, int sys_errno, const char *fmt,
                   ...) __attribute__ ((format (printf, 4, 5)));
int sbx_errv (sbx_error_t **err, enum sbx_error_kind kind, int sys_errno,
              const char *fmt, va_list ap) __attribute__ ((format (printf, 4, 0)));
/* Prefix "<context>: " to *err; returns -1. */
int sbx_err_wrap (sbx_error_t **err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
void sbx_error_free (sbx_error_t *e);
/* Move *from into *to (freeing whatever *to held); *from becomes NULL. */
void sbx_error_move (sbx_error_t **to, sbx_error_t **from);

const char *sbx_error_kind_name (enum sbx_error_kind kind);
int sbx_error_kind_http_status (enum sbx_error_kind kind);

static inline void
sbx_error_freep (sbx_error_t **e)
{
  if (*e)
    sbx_error_free (*e);
}
#define cleanup_error __attribute__ ((cleanup (sbx_error_freep)))

/* Allocation failure. Short-lived programs (the CLI, the tests) abort
   loudly through sbx_oom. The daemon must outlive it, so it sets
   sbx_oom_soft at start; from then on code that can fail a request on
   allocation failure does so (503 "out of memory") instead of calling
   sbx_oom, and sbx_buf marks a buffer it could not grow (`failed`) instead
   of aborting. An error object that cannot itself be allocated is always
   replaced by a shared static one (kind SBX_E_UNAVAILABLE, "out of
   memory"), which sbx_error_free leaves alone. */
__attribute__ ((noreturn)) void sbx_oom (void);
extern int sbx_oom_soft;
/* *err = the static out-of-memory error; returns -1. */
int sbx_err_oom (sbx_error_t **err);

#endif
