/* Unit tests for the E2B routing decisions (src/server/e2b_route.c) and
 * envd's path rule (relative to the user's home, ".." clamped at "/"). */
#include <string.h>

#include "server/e2b.h"
#include "server/e2b_route.h"

#include "tap.h"

#define ID "abcdefghij0123456789"

static int
test_headers (void)
{
  struct sbx_e2b_target t;
  const char *why;

  CHECK (sbx_e2b_route (NULL, NULL, NULL, NULL, &t, &why) == 0 && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("localhost", ID, "49983", NULL, &t, &why) == 0
         && t.plane == SBX_PLANE_ENVD && t.port == 49983);
  CHECK_STR (t.sandbox_id, ID);
  CHECK (sbx_e2b_route (NULL, ID, NULL, NULL, &t, &why) == 0 && t.plane == SBX_PLANE_ENVD);
  CHECK (sbx_e2b_route (NULL, ID, "49999", NULL, &t, &why) == 0 && t.plane == SBX_PLANE_CODE);
  CHECK (sbx_e2b_route (NULL, ID, "8000", NULL, &t, &why) == 0 && t.plane == SBX_PLANE_PORT
         && t.port == 8000);
  CHECK (sbx_e2b_route (NULL, ID, "1", NULL, &t, &why) == 0 && t.port == 1);
  CHECK (sbx_e2b_route (NULL, ID, "65535", NULL, &t, &why) == 0 && t.port == 65535);
  /* Refused: bad ids, bad ports, a port without an id. */
  CHECK (sbx_e2b_route (NULL, "short", "49983", NULL, &t, &why) == -1 && why != NULL);
  CHECK (sbx_e2b_route (NULL, "ABCDEFGHIJ0123456789", NULL, NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, "abcdefghij012345678-", NULL, NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, "", NULL, NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, ID, "0", NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, ID, "65536", NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, ID, "08000", NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, ID, "+80", NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, ID, " 80", NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, ID, "", NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, ID, "999999999999", NULL, &t, &why) == -1);
  CHECK (sbx_e2b_route (NULL, NULL, "49983", NULL, &t, &why) == -1);
  return 0;
}

static int
test_host (void)
{
  struct sbx_e2b_target t;
  const char *why;

  CHECK (sbx_e2b_route ("8000-" ID ".sbx.test", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_PORT && t.port == 8000);
  CHECK_STR (t.sandbox_id, ID);
  CHECK (sbx_e2b_route ("49983-" ID ".SBX.Test:443", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_ENVD);
  CHECK (sbx_e2b_route ("49983-ABCDEFGHIJ0123456789.sbx.test", NULL, NULL, "sbx.test", &t, &why)
             == 0
         && t.plane == SBX_PLANE_ENVD); /* DNS is case-insensitive */
  /* Anything else is the API: no domain, another domain, deeper names, a
     bad label, a suffix match that is not at a dot. */
  CHECK (sbx_e2b_route ("8000-" ID ".sbx.test", NULL, NULL, NULL, &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("8000-" ID ".sbx.test", NULL, NULL, "", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("8000-" ID ".evil.test", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("a.8000-" ID ".sbx.test", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("8000-" ID "xsbx.test", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("0-" ID ".sbx.test", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("8000" ID ".sbx.test", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("sbx.test", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route (".sbx.test", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  CHECK (sbx_e2b_route ("[::1]:80", NULL, NULL, "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_API);
  /* Headers win over Host. */
  CHECK (sbx_e2b_route ("8000-" ID ".sbx.test", ID, "49983", "sbx.test", &t, &why) == 0
         && t.plane == SBX_PLANE_ENVD);
  return 0;
}

static int
test_basic_user (void)
{
  char u[16];

  CHECK (sbx_e2b_basic_user (NULL, u) == 0);
  CHECK_STR (u, "user");
  CHECK (sbx_e2b_basic_user ("Basic cm9vdDo=", u) == 0); /* root: */
  CHECK_STR (u, "root");
  CHECK (sbx_e2b_basic_user ("basic   dXNlcjo=", u) == 0); /* user: */
  CHECK_STR (u, "user");
  CHECK (sbx_e2b_basic_user ("Basic cm9vdA==", u) == -1);     /* root (no colon) */
  CHECK (sbx_e2b_basic_user ("Basic cm9vdDpwdw==", u) == -1); /* root:pw */
  CHECK (sbx_e2b_basic_user ("Basic bm9ib2R5Og==", u) == -1); /* nobody: */
  CHECK (sbx_e2b_basic_user ("Basic !!!!", u) == -1);
  CHECK (sbx_e2b_basic_user ("Bearer cm9vdDo=", u) == -1);
  CHECK (sbx_e2b_basic_user ("Basic ", u) == -1);
  return 0;
}

static int
test_paths (void)
{
  char out[SBX_FS_PATH_MAX];
  sbx_error_t *err = NULL;

  CHECK (sbx_e2b_path (NULL, "user", "a/b.txt", out, &err) == 0);
  CHECK_STR (out, "/home/user/a/b.txt");
  CHECK (sbx_e2b_path (NULL, "root", "x", out, &err) == 0);
  CHECK_STR (out, "/root/x");
  CHECK (sbx_e2b_path (NULL, "user", "../../../../etc/passwd", out, &err) == 0);
  CHECK_STR (out, "/etc/passwd");
  CHECK (sbx_e2b_path (NULL, "user", "/tmp/./a//b/../c/", out, &err) == 0);
  CHECK_STR (out, "/tmp/a/c");
  CHECK (sbx_e2b_path (NULL, "user", "/..", out, &err) == 0);
  CHECK_STR (out, "/");
  CHECK (sbx_e2b_path (NULL, "user", "/", out, &err) == 0);
  CHECK_STR (out, "/");
  CHECK (sbx_e2b_path (NULL, "user", "", out, &err) == -1 && err != NULL);
  sbx_error_free (err);
  err = NULL;
  CHECK (sbx_e2b_path (NULL, "user", NULL, out, &err) == -1);
  sbx_error_free (err);
  return 0;
}

int
main (void)
{
  RUN (test_headers);
  RUN (test_host);
  RUN (test_basic_user);
  RUN (test_paths);
  return tap_done ();
}
