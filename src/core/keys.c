/* sbx: API keys (see keys.h). */
#include "core/keys.h"

#include <openssl/sha.h>
#include <string.h>

#include "core/core.h"
#include "util/id.h"

int
sbx_tenant_valid (const char *t)
{
  size_t i, n = t ? strlen (t) : 0;

  if (n == 0 || n > SBX_TENANT_MAX)
    return 0;
  for (i = 0; i < n; i++)
    if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z')
          || (t[i] >= '0' && t[i] <= '9') || t[i] == '_' || t[i] == '.' || t[i] == '-'))
      return 0;
  return 1;
}


int
sbx_key_create (struct sbx_store *st, const char *tenant, char key[SBX_KEY_LEN + 1], char id[16],
                long long *created_ms, sbx_error_t **err)
{
  unsigned char hash[SHA256_DIGEST_LENGTH];
  char prefix[9];

  if (!sbx_tenant_valid (tenant))
    return sbx_err (err, SBX_E_INVALID,
                    "tenant names are 1 to %d characters of letters, digits, '_', '.' and '-'",
                    SBX_TENANT_MAX);
  memcpy (key, "e2b_", 4);
  sbx_random_hex (key + 4, 20);
  memcpy (id, "k", 1);
  sbx_random_id (id + 1, 9);
  memcpy (prefix, key, 8);
  prefix[8] = '\0';
  /* OpenSSL 3 allocates even here: a failure must not store garbage. */
  if (SHA256 ((const unsigned char *) key, SBX_KEY_LEN, hash) == NULL)
    return sbx_err_oom (err);
  *created_ms = sbx_now_ms ();
  return sbx_store_key_insert (st, id, tenant, hash, prefix, *created_ms, err);
}

int
sbx_key_check (struct sbx_store *st, const char *key, char *tenant, size_t cap, sbx_error_t **err)
{
  unsigned char hash[SHA256_DIGEST_LENGTH];
  size_t n = key ? strlen (key) : 0;

  /* Look up by hash: the comparison the database makes is on a digest of
     a 160-bit secret, so its timing tells an attacker nothing useful. */
  if (n == 0 || n > 256)
    return sbx_err (err, SBX_E_UNAUTHORIZED, "missing or malformed API key");
  if (SHA256 ((const unsigned char *) key, n, hash) == NULL)
    return sbx_err_oom (err);
  return sbx_store_key_lookup (st, hash, tenant, cap, err);
}
