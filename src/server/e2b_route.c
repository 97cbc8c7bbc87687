/* sbx: choosing the E2B plane of a request (see e2b_route.h). */
#include "server/e2b_route.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/base64.h"
#include "util/buf.h"

/* "1".."65535" with no sign, spaces or leading zeros. */
static int
parse_port (const char *s, size_t len, unsigned *out)
{
  unsigned v = 0;
  size_t i;

  if (len == 0 || len > 5 || s[0] == '0')
    return -1;
  for (i = 0; i < len; i++)
    {
      if (s[i] < '0' || s[i] > '9')
        return -1;
      v = v * 10 + (unsigned) (s[i] - '0');
    }
  if (v == 0 || v > 65535)
    return -1;
  *out = v;
  return 0;
}

static void
set_plane (struct sbx_e2b_target *t)
{
  t->plane = t->port == SBX_E2B_ENVD_PORT   ? SBX_PLANE_ENVD
             : t->port == SBX_E2B_CODE_PORT ? SBX_PLANE_CODE
                                            : SBX_PLANE_PORT;
}

/* Host "PORT-ID.DOMAIN[:port]" (DNS is case-insensitive; ids are lower
   case). 1 when it has that form, 0 when it is some other host. */
static int
from_host (const char *host, const char *domain, struct sbx_e2b_target *t)
{
  size_t dlen = strlen (domain), hlen;
  const char *colon, *dash;
  char label[SBX_ID_LEN + 8];
  size_t llen, i;

  colon = strrchr (host, ':');
  hlen = colon && host[0] != '[' ? (size_t) (colon - host) : strlen (host);
  if (hlen > dlen + 1 && host[hlen - dlen - 1] == '.'
      && strncasecmp (host + hlen - dlen, domain, dlen) == 0)
    llen = hlen - dlen - 1;
  else
    return 0;
  if (llen >= sizeof label || memchr (host, '.', llen) != NULL)
    return 0; /* a deeper name is not ours */
  for (i = 0; i < llen; i++)
    label[i] = (char) (host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
  label[llen] = '\0';
  dash = strchr (label, '-');
  if (dash == NULL || parse_port (label, (size_t) (dash - label), &t->port) < 0
      || !sbx_id_valid (dash + 1))
    return 0;
  memcpy (t->sandbox_id, dash + 1, strlen (dash + 1) + 1);
  return 1;
}

int
sbx_e2b_route (const char *host, const char *sandbox_id_header, const char *port_header,
               const char *domain, struct sbx_e2b_target *t, const char **why)
{
  memset (t, 0, sizeof *t);
  t->plane = SBX_PLANE_API;
  *why = NULL;
  if (sandbox_id_header != NULL)
    {
      if (!sbx_id_valid (sandbox_id_header))
        return *why = "E2b-Sandbox-Id is not a sandbox id", -1;
      memcpy (t->sandbox_id, sandbox_id_header, strlen (sandbox_id_header) + 1);
      /* The SDK always sends both; without a port it meant envd. */
      t->port = SBX_E2B_ENVD_PORT;
      if (port_header != NULL && parse_port (port_header, strlen (port_header), &t->port) < 0)
        return *why = "E2b-Sandbox-Port must be a port number 1..65535", -1;
      set_plane (t);
      return 0;
    }
  if (port_header != NULL)
    return *why = "E2b-Sandbox-Port needs E2b-Sandbox-Id", -1;
  if (host != NULL && domain != NULL && domain[0] != '\0' && from_host (host, domain, t))
    {
      set_plane (t);
      return 0;
    }
  memset (t, 0, sizeof *t);
  t->plane = SBX_PLANE_API;
  return 0;
}

int
sbx_e2b_basic_user (const char *authorization, char out[16])
{
  struct sbx_buf dec = SBX_BUF_INIT;
  const char *p;
  int rc = -1;

  if (authorization == NULL)
    {
      memcpy (out, "user", 5);
      return 0;
    }
  if (strncasecmp (authorization, "Basic ", 6) != 0)
    return -1;
  p = authorization + 6;
  while (*p == ' ')
    p++;
  if (strlen (p) > 64 || sbx_base64_decode (&dec, p, strlen (p)) < 0 || dec.failed)
    goto out;
  /* "NAME:" (E2B sends no password); the name is one of ours. */
  if (dec.len == 5 && memcmp (dec.data, "user:", 5) == 0)
    memcpy (out, "user", 5), rc = 0;
  else if (dec.len == 5 && memcmp (dec.data, "root:", 5) == 0)
    memcpy (out, "root", 5), rc = 0;
out:
  sbx_buf_free (&dec);
  return rc;
}
