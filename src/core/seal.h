/* sbx: values sealed at rest (AES-256-GCM), so that the store's file
 * alone (a backup, a copy, a read through some other hole) gives away
 * no secret value and no sandbox's data-plane tokens.
 *
 * The key is the root parent's (STATE/seal/key, root 0600 in a root 0700
 * directory: priv/seal_key.c); the front end gets it at HELLO and keeps
 * it in memory only. A sealed value is bound to where it belongs by its
 * associated data (the table, and the row's names): moved to another row
 * of a tampered database, it does not unseal. Hashing would not do: the
 * daemon needs the tokens themselves (E2B's connect answers the envd
 * token; file URLs are signed with it).
 *
 * Layout: a version byte, a 12-byte random nonce, the ciphertext, a
 * 16-byte tag.
 */
#ifndef SBX_CORE_SEAL_H
#define SBX_CORE_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/error.h"

#define SBX_SEAL_KEY_LEN 32
#define SBX_SEAL_OVERHEAD (1 + 12 + 16)

/* out (emptied first, marked to be wiped) gets the sealed bytes of
   pt[0..n) for the associated data aad[0..aad_len). */
int sbx_seal (const uint8_t key[SBX_SEAL_KEY_LEN], const void *aad, size_t aad_len,
              const void *pt, size_t n, struct sbx_buf *out, sbx_error_t **err);

/* out (emptied first, marked to be wiped) gets the plaintext of the sealed
   bytes in[0..n); SBX_E_SYSTEM when they were not sealed with this key and
   associated data, or were changed. */
int sbx_unseal (const uint8_t key[SBX_SEAL_KEY_LEN], const void *aad, size_t aad_len,
                const void *in, size_t n, struct sbx_buf *out, sbx_error_t **err);

#endif
