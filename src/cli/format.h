/* sbx CLI: --format TEMPLATE over the API's JSON objects (format.c). */
#ifndef SBX_CLI_FORMAT_H
#define SBX_CLI_FORMAT_H

#include <jansson.h>

#include "util/buf.h"
#include "util/error.h"

/* tmpl over o appended to out; with o NULL only the syntax is checked
   (nothing appended for the fields). 0, or -1 with err. */
int sbx_cli_format_render (const char *tmpl, const json_t *o, struct sbx_buf *out,
                           sbx_error_t **err);

/* 0 if tmpl is well formed, else -1 with a message naming the bad part. */
int sbx_cli_format_check (const char *tmpl, sbx_error_t **err);
/* tmpl over o, and a newline, on stdout; tmpl checked before: 0. */
int sbx_cli_format_print (const char *tmpl, const json_t *o);

#endif
