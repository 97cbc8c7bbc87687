/* sbx: make arbitrary bytes into valid UTF-8 for JSON strings. */
#ifndef SBX_UTIL_UTF8_H
#define SBX_UTIL_UTF8_H

#include <stddef.h>

#include "util/buf.h"

/* Append in[0..len) to out as UTF-8, with each invalid byte replaced by
   U+FFFD. Unless `final`, an incomplete sequence at the very end is not
   consumed: the return value is how many bytes were (the caller keeps the
   rest for the next chunk). */
size_t sbx_utf8_sanitize (struct sbx_buf *out, const void *in, size_t len, int final);

#endif
