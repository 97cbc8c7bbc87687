/* sbx: base64 codec. */
#include "util/base64.h"

#include <stdint.h>

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t
sbx_base64_encoded_len (size_t n)
{
  return (n + 2) / 3 * 4;
}

void
sbx_base64_encode (struct sbx_buf *out, const void *p, size_t n)
{
  const unsigned char *s = p;
  char q[4];
  size_t i;

  for (i = 0; i + 3 <= n; i += 3)
    {
      uint32_t v = (uint32_t) s[i] << 16 | (uint32_t) s[i + 1] << 8 | s[i + 2];
      q[0] = alphabet[v >> 18 & 63];
      q[1] = alphabet[v >> 12 & 63];
      q[2] = alphabet[v >> 6 & 63];
      q[3] = alphabet[v & 63];
      sbx_buf_append (out, q, 4);
    }
  if (n - i == 1)
    {
      uint32_t v = (uint32_t) s[i] << 16;
      q[0] = alphabet[v >> 18 & 63];
      q[1] = alphabet[v >> 12 & 63];
      q[2] = q[3] = '=';
      sbx_buf_append (out, q, 4);
    }
  else if (n - i == 2)
    {
      uint32_t v = (uint32_t) s[i] << 16 | (uint32_t) s[i + 1] << 8;
      q[0] = alphabet[v >> 18 & 63];
      q[1] = alphabet[v >> 12 & 63];
      q[2] = alphabet[v >> 6 & 63];
      q[3] = '=';
      sbx_buf_append (out, q, 4);
    }
}

static int
value_of (char c)
{
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

int
sbx_base64_decode (struct sbx_buf *out, const char *s, size_t n)
{
  size_t start = out->len, i;

  if (n % 4 != 0)
    return -1;
  for (i = 0; i < n; i += 4)
    {
      int a = value_of (s[i]), b = value_of (s[i + 1]);
      int c = s[i + 2] == '=' ? -2 : value_of (s[i + 2]);
      int d = s[i + 3] == '=' ? -2 : value_of (s[i + 3]);
      unsigned char o[3];
      uint32_t v;
      int last = i + 4 == n;

      if (a < 0 || b < 0 || c == -1 || d == -1)
        goto bad;
      /* Padding only in the final quantum, and "x=y=" is never valid. */
      if ((c == -2 || d == -2) && !last)
        goto bad;
      if (c == -2 && d != -2)
        goto bad;
      v = (uint32_t) a << 18 | (uint32_t) b << 12;
      if (c >= 0)
        v |= (uint32_t) c << 6;
      if (d >= 0)
        v |= (uint32_t) d;
      o[0] = (unsigned char) (v >> 16);
      o[1] = (unsigned char) (v >> 8);
      o[2] = (unsigned char) v;
      sbx_buf_append (out, o, c == -2 ? 1 : d == -2 ? 2 : 3);
    }
  return 0;
bad:
  out->len = start;
  if (out->data)
    out->data[start] = '\0';
  return -1;
}
