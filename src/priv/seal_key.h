/* sbx: the key values are sealed with at rest (core/seal.h), the root
 * parent's: STATE/seal/key, 32 random bytes, root 0600 in a root 0700
 * directory, made at the first start. The front end (another account)
 * cannot read it; it gets the key at HELLO and keeps it in memory only.
 * Lose it and every sealed value is gone: back it up with the state
 * directory, but apart from it (docs/security.md).
 */
#ifndef SBX_PRIV_SEAL_KEY_H
#define SBX_PRIV_SEAL_KEY_H

#include <stdint.h>

#include "util/error.h"

#define SBX_SEAL_KEY_DIR "seal"

/* Load the key, or make it when there is none. A key file that is not
   root's regular 0600 file of exactly 32 bytes is refused (nothing is
   replaced: the values sealed with it would be lost). */
int sbx_seal_key_ensure (const char *state_dir, uint8_t key[32], sbx_error_t **err);

#endif
