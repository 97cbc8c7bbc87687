/* sbx: API keys. A key is "e2b_" + 40 hex digits (the shape E2B's SDKs
 * accept), 160 random bits; only its SHA-256 is stored, so a leaked
 * database does not leak keys. */
#ifndef SBX_CORE_KEYS_H
#define SBX_CORE_KEYS_H

#include <stddef.h>

#include "core/store.h"

#define SBX_KEY_LEN 44
#define SBX_TENANT_MAX 64

/* 1 if the tenant name is 1..64 of [A-Za-z0-9_.-]. */
int sbx_tenant_valid (const char *t);

/* Create a key for tenant; writes the key (SBX_KEY_LEN + NUL) and its id. */
int sbx_key_create (struct sbx_store *st, const char *tenant, char key[SBX_KEY_LEN + 1],
                    char id[16], long long *created_ms, sbx_error_t **err);
/* Authenticate: the key's tenant, or SBX_E_UNAUTHORIZED. */
int sbx_key_check (struct sbx_store *st, const char *key, char *tenant, size_t cap,
                   sbx_error_t **err);

#endif
