/* sbx: lowercase hexadecimal (hex.h). */
#include "util/hex.h"

static int
digit (char c)
{
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void
sbx_hex_encode (const void *p, size_t n, char *out)
{
  static const char digits[] = "0123456789abcdef";
  const unsigned char *d = p;
  size_t i;

  for (i = 0; i < n; i++)
    {
      out[2 * i] = digits[d[i] >> 4];
      out[2 * i + 1] = digits[d[i] & 15];
    }
  out[2 * n] = '\0';
}

long
sbx_hex_decode (const char *s, size_t len, void *out)
{
  unsigned char *o = out;
  size_t i;

  if (len % 2 != 0)
    return -1;
  for (i = 0; i < len; i += 2)
    {
      int hi = digit (s[i]), lo = digit (s[i + 1]);
      if (hi < 0 || lo < 0)
        return -1;
      o[i / 2] = (unsigned char) (hi << 4 | lo);
    }
  return (long) (len / 2);
}
