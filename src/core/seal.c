/* sbx: values sealed at rest (seal.h). */
#include "core/seal.h"

#include <errno.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/random.h>

#define SEAL_VERSION 1
#define NONCE_LEN 12
#define TAG_LEN 16

_Static_assert (SBX_SEAL_OVERHEAD == 1 + NONCE_LEN + TAG_LEN, "the layout of seal.h");

static void
cleanup_cipher (EVP_CIPHER_CTX **c)
{
  EVP_CIPHER_CTX_free (*c);
}

/* out, emptied, wiped whenever it gives storage back, with room for n. */
static int
prepare (struct sbx_buf *out, size_t n)
{
  sbx_buf_reset (out);
  out->wipe = 1;
  sbx_buf_reserve (out, n);
  return out->failed ? -1 : 0;
}

int
sbx_seal (const uint8_t key[SBX_SEAL_KEY_LEN], const void *aad, size_t aad_len, const void *pt,
          size_t n, struct sbx_buf *out, sbx_error_t **err)
{
  __attribute__ ((cleanup (cleanup_cipher))) EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new ();
  unsigned char *p;
  int len, fin;

  if (n > (size_t) INT32_MAX || aad_len > (size_t) INT32_MAX)
    return sbx_err (err, SBX_E_TOO_LARGE, "a value to seal is too large");
  if (c == NULL || prepare (out, n + SBX_SEAL_OVERHEAD) < 0)
    return sbx_err_oom (err);
  p = (unsigned char *) out->data;
  p[0] = SEAL_VERSION;
  if (getrandom (p + 1, NONCE_LEN, 0) != NONCE_LEN)
    return sbx_err_sys (err, errno, "getrandom");
  if (EVP_EncryptInit_ex (c, EVP_aes_256_gcm (), NULL, NULL, NULL) != 1
      || EVP_CIPHER_CTX_ctrl (c, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1
      || EVP_EncryptInit_ex (c, NULL, NULL, key, p + 1) != 1
      || EVP_EncryptUpdate (c, NULL, &len, aad, (int) aad_len) != 1
      || EVP_EncryptUpdate (c, p + 1 + NONCE_LEN, &len, pt, (int) n) != 1
      || EVP_EncryptFinal_ex (c, p + 1 + NONCE_LEN + len, &fin) != 1
      || (size_t) len + (size_t) fin != n
      || EVP_CIPHER_CTX_ctrl (c, EVP_CTRL_GCM_GET_TAG, TAG_LEN, p + 1 + NONCE_LEN + n) != 1)
    {
      sbx_buf_reset (out);
      /* OpenSSL fails here only for want of memory (or a broken build):
         try again later, as for any allocation. */
      return sbx_err (err, SBX_E_UNAVAILABLE, "cannot seal a value (OpenSSL)");
    }
  out->len = n + SBX_SEAL_OVERHEAD;
  out->data[out->len] = '\0';
  return 0;
}

int
sbx_unseal (const uint8_t key[SBX_SEAL_KEY_LEN], const void *aad, size_t aad_len, const void *in,
            size_t n, struct sbx_buf *out, sbx_error_t **err)
{
  __attribute__ ((cleanup (cleanup_cipher))) EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new ();
  const unsigned char *s = in;
  unsigned char tag[TAG_LEN];
  size_t pt_len;
  int len, fin;

  if (n < SBX_SEAL_OVERHEAD || s[0] != SEAL_VERSION || n - SBX_SEAL_OVERHEAD > (size_t) INT32_MAX
      || aad_len > (size_t) INT32_MAX)
    return sbx_err (err, SBX_E_SYSTEM, "a sealed value is malformed");
  pt_len = n - SBX_SEAL_OVERHEAD;
  if (c == NULL || prepare (out, pt_len) < 0)
    return sbx_err_oom (err);
  memcpy (tag, s + n - TAG_LEN, TAG_LEN);
  if (EVP_DecryptInit_ex (c, EVP_aes_256_gcm (), NULL, NULL, NULL) != 1
      || EVP_CIPHER_CTX_ctrl (c, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1
      || EVP_DecryptInit_ex (c, NULL, NULL, key, s + 1) != 1
      || EVP_DecryptUpdate (c, NULL, &len, aad, (int) aad_len) != 1
      || EVP_DecryptUpdate (c, (unsigned char *) out->data, &len, s + 1 + NONCE_LEN, (int) pt_len)
             != 1
      || EVP_CIPHER_CTX_ctrl (c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1)
    {
      sbx_buf_reset (out);
      return sbx_err (err, SBX_E_UNAVAILABLE, "cannot unseal a value (OpenSSL)");
    }
  /* Only the tag's check says the value is not ours. */
  if (EVP_DecryptFinal_ex (c, (unsigned char *) out->data + len, &fin) != 1
      || (size_t) len + (size_t) fin != pt_len)
    {
      sbx_buf_reset (out);
      return sbx_err (err, SBX_E_SYSTEM,
                      "a sealed value does not open with this daemon's key (STATE/seal/key"
                      " replaced, or the value changed)");
    }
  out->len = pt_len;
  out->data[out->len] = '\0';
  return 0;
}
