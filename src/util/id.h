/* sbx: random identifiers. */
#ifndef SBX_UTIL_ID_H
#define SBX_UTIL_ID_H

#include <stddef.h>

#define SBX_ID_LEN 20 /* sandbox ids: lowercase letters and digits, DNS-label safe */

/* Fill out[0..len) with random [a-z0-9] and NUL-terminate (out has len+1). */
void sbx_random_id (char *out, size_t len);
/* Fill out with 2*nbytes lowercase hex digits and a NUL. */
void sbx_random_hex (char *out, size_t nbytes);
/* Random bytes from the kernel; aborts if the kernel cannot give them. */
void sbx_random_bytes (void *out, size_t n);
/* 1 if s is a well-formed sandbox id (length and alphabet), else 0. */
int sbx_id_valid (const char *s);

#endif
