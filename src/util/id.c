/* sbx: random identifiers from getrandom(2). */
#include "util/id.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

void
sbx_random_bytes (void *out, size_t n)
{
  unsigned char *p = out;

  while (n > 0)
    {
      ssize_t r = getrandom (p, n, 0);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          abort (); /* no entropy source: nothing safe to do */
        }
      p += r;
      n -= (size_t) r;
    }
}

void
sbx_random_id (char *out, size_t len)
{
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char raw[64];
  size_t i = 0;

  while (i < len)
    {
      size_t j;
      sbx_random_bytes (raw, sizeof raw);
      for (j = 0; j < sizeof raw && i < len; j++)
        /* 252 = 7 * 36: reject the tail so every character is equally likely. */
        if (raw[j] < 252)
          out[i++] = alphabet[raw[j] % 36];
    }
  out[len] = '\0';
}

void
sbx_random_hex (char *out, size_t nbytes)
{
  static const char hex[] = "0123456789abcdef";
  unsigned char raw[64];
  size_t i;

  while (nbytes > 0)
    {
      size_t n = nbytes < sizeof raw ? nbytes : sizeof raw;
      sbx_random_bytes (raw, n);
      for (i = 0; i < n; i++)
        {
          *out++ = hex[raw[i] >> 4];
          *out++ = hex[raw[i] & 15];
        }
      nbytes -= n;
    }
  *out = '\0';
}

int
sbx_id_valid (const char *s)
{
  size_t i;

  if (s == NULL || strlen (s) != SBX_ID_LEN)
    return 0;
  for (i = 0; i < SBX_ID_LEN; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
      return 0;
  return 1;
}
