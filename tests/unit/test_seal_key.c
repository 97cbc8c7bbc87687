/* The parent's sealing key file (priv/seal_key.h): made once, whole, root
 * 0600 in a root 0700 directory; loaded the same afterwards; anything
 * else in its place (wrong size, mode, owner, a symlink, a FIFO) refused
 * without replacing it. Runs as root (the daemon does). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "priv/seal_key.h"
#include "tap.h"

static char state[64], keyfile[128];

static int
refused (const char *why_part)
{
  uint8_t key[32];
  sbx_error_t *err = NULL;
  int ok = sbx_seal_key_ensure (state, key, &err) == -1 && err != NULL
           && strstr (err->msg, why_part) != NULL;

  if (!ok)
    fprintf (stderr, "#   %s\n", err ? err->msg : "(accepted)");
  sbx_error_free (err);
  return ok;
}

static int
test_made_then_loaded (void)
{
  uint8_t a[32], b[32], zero[32] = {0};
  sbx_error_t *err = NULL;
  struct stat st;
  char dir[128];

  CHECK (sbx_seal_key_ensure (state, a, &err) == 0);
  CHECK (memcmp (a, zero, sizeof a) != 0);
  snprintf (dir, sizeof dir, "%s/seal", state);
  CHECK (stat (dir, &st) == 0 && st.st_uid == 0 && (st.st_mode & 07777) == 0700);
  CHECK (stat (keyfile, &st) == 0 && st.st_uid == 0 && (st.st_mode & 07777) == 0600
         && st.st_size == 32);
  CHECK (sbx_seal_key_ensure (state, b, &err) == 0);
  CHECK (memcmp (a, b, sizeof a) == 0);
  /* A directory someone loosened is closed again. */
  CHECK (chmod (dir, 0755) == 0);
  CHECK (sbx_seal_key_ensure (state, b, &err) == 0);
  CHECK (stat (dir, &st) == 0 && (st.st_mode & 07777) == 0700);
  return 0;
}

static int
test_wrong_files_refused (void)
{
  uint8_t before[32], after[32];
  sbx_error_t *err = NULL;
  char moved[160];
  FILE *f;

  CHECK (sbx_seal_key_ensure (state, before, &err) == 0);
  CHECK (chmod (keyfile, 0644) == 0);
  CHECK (refused ("is not root's 0600 file of 32 bytes"));
  CHECK (chmod (keyfile, 0600) == 0);
  CHECK (chown (keyfile, 1234, 1234) == 0);
  CHECK (refused ("is not root's 0600 file of 32 bytes"));
  CHECK (chown (keyfile, 0, 0) == 0);
  /* Cut short: refused, not remade (what it sealed would be lost). */
  snprintf (moved, sizeof moved, "%s.whole", keyfile);
  CHECK (rename (keyfile, moved) == 0);
  f = fopen (keyfile, "w");
  CHECK (f != NULL && fwrite ("short", 1, 5, f) == 5 && fclose (f) == 0);
  CHECK (chmod (keyfile, 0600) == 0);
  CHECK (refused ("is not root's 0600 file of 32 bytes"));
  /* A symlink to a good key: not followed. */
  CHECK (unlink (keyfile) == 0);
  CHECK (symlink (moved, keyfile) == 0);
  CHECK (refused ("open"));
  /* A FIFO: neither followed nor waited on. */
  CHECK (unlink (keyfile) == 0);
  CHECK (mkfifo (keyfile, 0600) == 0);
  CHECK (refused ("is not root's 0600 file of 32 bytes"));
  CHECK (unlink (keyfile) == 0);
  CHECK (rename (moved, keyfile) == 0);
  CHECK (sbx_seal_key_ensure (state, after, &err) == 0);
  CHECK (memcmp (before, after, sizeof before) == 0);
  return 0;
}

int
main (void)
{
  int rc;

  if (geteuid () != 0)
    {
      printf ("1..0 # SKIP needs root (the key is root's)\n");
      return 0;
    }
  snprintf (state, sizeof state, "/tmp/sbx-test-sealkey-XXXXXX");
  if (mkdtemp (state) == NULL)
    return 1;
  snprintf (keyfile, sizeof keyfile, "%s/seal/key", state);
  RUN (test_made_then_loaded);
  RUN (test_wrong_files_refused);
  rc = tap_done ();
  {
    char cmd[128];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", state);
    if (system (cmd) != 0)
      fprintf (stderr, "# could not remove %s\n", state);
  }
  return rc;
}
