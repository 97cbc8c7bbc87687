/* Values sealed at rest (core/seal.h): they open only with their key and
 * associated data, unchanged; every byte is covered; each seal is fresh. */
#include <string.h>

#include "core/seal.h"
#include "tap.h"

static const uint8_t key[SBX_SEAL_KEY_LEN] = {7, 7, 7};
static const char aad[] = "secret\0acme\0API_KEY";

static int
test_round_trip (void)
{
  struct sbx_buf a = SBX_BUF_INIT, b = SBX_BUF_INIT, out = SBX_BUF_INIT;
  sbx_error_t *err = NULL;

  CHECK (sbx_seal (key, aad, sizeof aad, "hello", 5, &a, &err) == 0);
  CHECK (a.len == 5 + SBX_SEAL_OVERHEAD && a.wipe);
  CHECK (memmem (a.data, a.len, "hello", 5) == NULL);
  CHECK (sbx_seal (key, aad, sizeof aad, "hello", 5, &b, &err) == 0);
  /* A fresh nonce each time: the same value seals differently. */
  CHECK (memcmp (a.data, b.data, a.len) != 0);
  CHECK (sbx_unseal (key, aad, sizeof aad, a.data, a.len, &out, &err) == 0);
  CHECK (out.len == 5 && memcmp (out.data, "hello", 6) == 0 && out.wipe);
  /* The empty value too. */
  CHECK (sbx_seal (key, aad, sizeof aad, "", 0, &a, &err) == 0);
  CHECK (sbx_unseal (key, aad, sizeof aad, a.data, a.len, &out, &err) == 0);
  CHECK (out.len == 0);
  sbx_buf_free (&a);
  sbx_buf_free (&b);
  sbx_buf_free (&out);
  return 0;
}

/* Any change refuses: each byte flipped, cut short, another key, other
   associated data (the value moved to another row). */
static int
test_changes_refused (void)
{
  struct sbx_buf s = SBX_BUF_INIT, out = SBX_BUF_INIT;
  sbx_error_t *err = NULL;
  uint8_t other[SBX_SEAL_KEY_LEN] = {7, 7, 8};

  CHECK (sbx_seal (key, aad, sizeof aad, "a secret value", 14, &s, &err) == 0);
  for (size_t i = 0; i < s.len; i++)
    {
      s.data[i] ^= 0x20;
      CHECK (sbx_unseal (key, aad, sizeof aad, s.data, s.len, &out, &err) == -1);
      CHECK (err != NULL && err->kind == SBX_E_SYSTEM);
      CHECK (out.len == 0);
      sbx_error_free (err);
      err = NULL;
      s.data[i] ^= 0x20;
    }
  for (size_t n = 0; n < s.len; n++)
    {
      CHECK (sbx_unseal (key, aad, sizeof aad, s.data, n, &out, &err) == -1);
      sbx_error_free (err);
      err = NULL;
    }
  CHECK (sbx_unseal (other, aad, sizeof aad, s.data, s.len, &out, &err) == -1);
  sbx_error_free (err);
  err = NULL;
  CHECK (sbx_unseal (key, "secret\0acme\0OTHER", 18, s.data, s.len, &out, &err) == -1);
  sbx_error_free (err);
  err = NULL;
  CHECK (sbx_unseal (key, aad, sizeof aad, s.data, s.len, &out, &err) == 0);
  CHECK_STR (out.data, "a secret value");
  sbx_buf_free (&s);
  sbx_buf_free (&out);
  return 0;
}

int
main (void)
{
  RUN (test_round_trip);
  RUN (test_changes_refused);
  return tap_done ();
}
