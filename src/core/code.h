/* sbx: talking to the code interpreter server inside a sandbox (core/code.c). */
#ifndef SBX_CORE_CODE_H
#define SBX_CORE_CODE_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "util/buf.h"

/* One request to the server: HTTP/1.0, so the answer ends at end of file. */
struct sbx_code_conn
{
  int fd;
  unsigned status;   /* of the answer */
  struct sbx_buf in; /* bytes read and not yet taken */
  size_t consume;    /* the line handed out last, dropped at the next call */
  int eof;
};

enum
{
  SBX_CODE_LINE = 1,     /* *line, *len: one line without its newline */
  SBX_CODE_EOF = 0,      /* the answer ended after a whole line */
  SBX_CODE_TIMEOUT = -1, /* nothing complete within wait_ms */
  SBX_CODE_TOO_LONG = -2,
  SBX_CODE_BROKEN = -3,  /* a cut line, a read error, out of memory */
};

/* Connect to the server (waiting a little while one that is starting
   binds), send METHOD PATH with a JSON body and read the head of the answer
   (c->status). Errors: NOT_FOUND (the sandbox is gone), BAD_GATEWAY (no
   server, or it broke HTTP), GATEWAY_TIMEOUT. Close c afterwards. */
int sbx_code_open (struct sbx_sandbox *sb, const char *method, const char *path, const char *body,
                   size_t body_len, struct sbx_code_conn *c, sbx_error_t **err);
/* The next line of the answer (at most max bytes), waiting up to wait_ms;
   valid until the next call. */
int sbx_code_line (struct sbx_code_conn *c, const char **line, size_t *len, size_t max,
                   int64_t wait_ms);
/* Read the whole (bounded) answer into c->in. */
int sbx_code_body (struct sbx_code_conn *c, size_t max, int64_t wait_ms, sbx_error_t **err);
void sbx_code_close (struct sbx_code_conn *c);

/* Start the server in a sandbox of the code template and wait until it is
   warm (core/internal.h callers: the pool and create). */
int sbx__code_start (struct sbx_sandbox *sb, sbx_error_t **err);
/* Give the running server the sandbox's environment (its create's `env`):
   every context, those the pool warmed before anyone named it included,
   has it from the next execution on, as commands do. */
int sbx__code_set_env (struct sbx_sandbox *sb, sbx_error_t **err);

#endif
