/* Fuzz target: the E2B routing decisions and envd's path rule
 * (server/e2b_route.c, server/e2b_envd.c sbx_e2b_path).
 *
 * Input: NUL-separated fields: Host, E2b-Sandbox-Id, E2b-Sandbox-Port,
 * domain, Authorization, path (a missing field is an absent header).
 * Invariants: a routed request names a well-formed sandbox id and a port
 * in 1..65535, and its plane agrees with the port; a refusal says why; a
 * Basic user is "user" or "root"; a path made absolute starts with "/",
 * has no "." or ".." segment and no "//", and fits.
 */
#include "fuzz.h"
#include "iso/fs.h"
#include "server/e2b.h"
#include "server/e2b_route.h"

#define FIELDS 6

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *buf = malloc (size + 1), *f[FIELDS] = {NULL};
  struct sbx_e2b_target t;
  const char *why = NULL;
  char user[16], out[SBX_FS_PATH_MAX];
  sbx_error_t *err = NULL;
  size_t i, start = 0;
  int n = 0, rc;

  if (buf == NULL)
    return 0;
  memcpy (buf, data, size);
  buf[size] = '\0';
  for (i = 0; i <= size && n < FIELDS; i++)
    if (i == size || buf[i] == '\0')
      {
        f[n++] = buf + start;
        start = i + 1;
      }
  rc = sbx_e2b_route (f[0], f[1], f[2], f[3], &t, &why);
  if (rc < 0)
    FUZZ_ASSERT (why != NULL && why[0] != '\0');
  else if (t.plane != SBX_PLANE_API)
    {
      FUZZ_ASSERT (sbx_id_valid (t.sandbox_id));
      FUZZ_ASSERT (t.port >= 1 && t.port <= 65535);
      FUZZ_ASSERT ((t.plane == SBX_PLANE_ENVD) == (t.port == SBX_E2B_ENVD_PORT));
      FUZZ_ASSERT ((t.plane == SBX_PLANE_CODE) == (t.port == SBX_E2B_CODE_PORT));
    }
  if (sbx_e2b_basic_user (f[4], user) == 0)
    FUZZ_ASSERT (strcmp (user, "user") == 0 || strcmp (user, "root") == 0);
  if (f[5] != NULL)
    {
      if (sbx_e2b_path (NULL, (f[4] && f[4][0] & 1) ? "root" : "user", f[5], out, &err) == 0)
        {
          FUZZ_ASSERT (out[0] == '/');
          FUZZ_ASSERT (strstr (out, "//") == NULL);
          FUZZ_ASSERT (strstr (out, "/./") == NULL && strstr (out, "/../") == NULL);
          size_t len = strlen (out);
          FUZZ_ASSERT (len < SBX_FS_PATH_MAX);
          FUZZ_ASSERT (!(len >= 2 && strcmp (out + len - 2, "/.") == 0));
          FUZZ_ASSERT (!(len >= 3 && strcmp (out + len - 3, "/..") == 0));
          FUZZ_ASSERT (len == 1 || out[len - 1] != '/');
        }
      else
        FUZZ_ASSERT (err != NULL && err->msg[0] != '\0');
      sbx_error_free (err);
    }
  free (buf);
  return 0;
}
