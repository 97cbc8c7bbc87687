/* sbx: UTF-8 sanitizing (RFC 3629: no overlongs, no surrogates, <= U+10FFFF). */
#include "util/utf8.h"

#include <stdint.h>

static const char replacement[] = "\xEF\xBF\xBD";

/* Length of the valid sequence at s (1..4), 0 if invalid, -1 if it could
   still become valid with more bytes. */
static int
sequence (const unsigned char *s, size_t left)
{
  unsigned char c = s[0];
  int need, i;
  uint32_t cp;

  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    need = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    need = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    need = 4, cp = c & 0x07;
  else
    return 0;
  for (i = 1; i < need; i++)
    {
      if ((size_t) i >= left)
        return -1;
      if ((s[i] & 0xC0) != 0x80)
        return 0;
      cp = cp << 6 | (s[i] & 0x3F);
      /* Reject overlongs and surrogates as early as the second byte shows. */
      if (i == 1)
        {
          if (need == 3 && c == 0xE0 && s[1] < 0xA0)
            return 0;
          if (need == 3 && c == 0xED && s[1] > 0x9F)
            return 0;
          if (need == 4 && c == 0xF0 && s[1] < 0x90)
            return 0;
          if (need == 4 && c == 0xF4 && s[1] > 0x8F)
            return 0;
        }
    }
  (void) cp;
  return need;
}

size_t
sbx_utf8_sanitize (struct sbx_buf *out, const void *in, size_t len, int final)
{
  const unsigned char *s = in;
  size_t i = 0, run = 0;

  while (i < len)
    {
      int n = sequence (s + i, len - i);
      if (n > 0)
        {
          i += (size_t) n;
          continue;
        }
      if (n < 0 && !final)
        break; /* incomplete tail: keep for the next chunk */
      if (i > run)
        sbx_buf_append (out, s + run, i - run);
      sbx_buf_append (out, replacement, 3);
      i++;
      run = i;
    }
  if (i > run)
    sbx_buf_append (out, s + run, i - run);
  return i;
}
