/* sbx: lowercase hexadecimal, for digests and sealed bytes in text. */
#ifndef SBX_UTIL_HEX_H
#define SBX_UTIL_HEX_H

#include <stddef.h>

/* out (2 n + 1 bytes) gets p[0..n) in lowercase hex, NUL-terminated. */
void sbx_hex_encode (const void *p, size_t n, char *out);

/* out (len / 2 bytes) gets the bytes of s[0..len): len even, every digit
   lowercase hex; else -1 and out unspecified. Returns len / 2. */
long sbx_hex_decode (const char *s, size_t len, void *out);

#endif
