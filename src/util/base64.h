/* sbx: base64 (RFC 4648, standard alphabet, padded) for binary output in
 * JSON. Small enough that the CLI need not load libcrypto for it. */
#ifndef SBX_UTIL_BASE64_H
#define SBX_UTIL_BASE64_H

#include <stddef.h>

#include "util/buf.h"

/* Bytes needed to encode n bytes, without the NUL. */
size_t sbx_base64_encoded_len (size_t n);
/* Append the encoding of p[0..n) to out. */
void sbx_base64_encode (struct sbx_buf *out, const void *p, size_t n);
/* Append the decoding of s[0..n) to out; -1 on malformed input (nothing is
   appended then). Padding is required, whitespace is not accepted. */
int sbx_base64_decode (struct sbx_buf *out, const char *s, size_t n);

#endif
