/* Unit tests for the audit log's writer (src/core/audit.c): numbering,
 * chaining, canonical lines, rotation that keeps the chain, and a new
 * writer that continues where the last one stopped (or where a cut line
 * left it). The log is read back here with libcrypto, independently of
 * `sbx audit verify` (tests/unit/test_cli_audit.c). */
#include "core/audit.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <sys/stat.h>

#include "tap.h"

static char state[256];

static void
make_state (void)
{
  snprintf (state, sizeof state, "/tmp/sbx-unit-audit-XXXXXX");
  if (mkdtemp (state) == NULL)
    abort ();
}

static void
remove_state (void)
{
  char dir[300], path[600];
  DIR *d;
  struct dirent *de;

  snprintf (dir, sizeof dir, "%s/audit", state);
  d = opendir (dir);
  while (d && (de = readdir (d)) != NULL)
    if (de->d_name[0] != '.')
      {
        snprintf (path, sizeof path, "%s/%s", dir, de->d_name);
        unlink (path);
      }
  if (d)
    closedir (d);
  rmdir (dir);
  rmdir (state);
}

/* Check the chain of dir's files audit.log.1..n then audit.log; count
   records into *n, last seq into *last. -1 on any break. */
static int
chain (uint64_t *n, uint64_t *last, int *files)
{
  unsigned char prev[SHA256_DIGEST_LENGTH] = {0};
  char path[600], hex[65];
  int i, f = 0, bad = 0;

  *n = 0;
  *last = 0;
  for (i = 1;; i++)
    {
      FILE *fp;
      char *line = NULL;
      size_t cap = 0;
      ssize_t len;
      int more;

      snprintf (path, sizeof path, "%s/audit/audit.log.%d", state, i);
      more = access (path, F_OK) == 0;
      if (!more)
        snprintf (path, sizeof path, "%s/audit/audit.log", state);
      fp = fopen (path, "r");
      if (fp == NULL)
        return -1;
      f++;
      while ((len = getline (&line, &cap, fp)) > 0)
        {
          json_t *o;
          char *canon;
          const char *t;
          int k, ok;
          if (line[len - 1] != '\n')
            {
              bad = 1;
              break;
            }
          line[--len] = '\0';
          o = json_loads (line, 0, NULL);
          canon = o ? json_dumps (o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
          for (k = 0; k < 32; k++)
            snprintf (hex + 2 * k, 3, "%02x", prev[k]);
          t = json_string_value (json_object_get (o, "time"));
          ok = canon && strcmp (canon, line) == 0
               && json_string_value (json_object_get (o, "prev"))
               && strcmp (json_string_value (json_object_get (o, "prev")), hex) == 0
               && (uint64_t) json_integer_value (json_object_get (o, "seq")) == *last + 1
               && t && strlen (t) == 24;
          free (canon);
          json_decref (o);
          if (!ok)
            {
              bad = 1;
              break;
            }
          *last += 1;
          *n += 1;
          SHA256 ((unsigned char *) line, (size_t) len, prev);
        }
      free (line);
      fclose (fp);
      if (bad)
        return -1;
      if (!more)
        break;
    }
  *files = f;
  return 0;
}

static int
test_chain_and_restart (void)
{
  uint64_t n, last;
  int files;
  json_t *argv = json_pack ("[sss]", "sh", "-c", "echo \"hi\" \xc3\xa9");

  make_state ();
  CHECK (sbx_audit_open (state, 1 << 20, NULL) == 0);
  sbx_audit_api ("acme", "POST /v1/sandboxes", "abc", 201, 1);
  sbx_audit_api (NULL, "GET (no route)", NULL, 404, 1);
  sbx_audit_command ("abc", 7, argv, "user", "/home/user", 0, NULL, 12, NULL);
  sbx_audit_file_write ("abc", "/tmp/\xff", 3, "00", "native");
  sbx_audit_lifecycle ("killed", "abc", "acme", "sandbox killed");
  sbx_audit_egress ("abc", "pypi.org", 443, "allow", NULL, 10, 20);
  sbx_audit_close ();
  CHECK (chain (&n, &last, &files) == 0);
  /* started, 6, stopped */
  CHECK (n == 8 && last == 8 && files == 1);
  /* A new writer goes on with seq 9 and the last line's hash. */
  CHECK (sbx_audit_open (state, 1 << 20, NULL) == 0);
  sbx_audit_lifecycle ("adopted", "abc", "acme", NULL);
  sbx_audit_close ();
  CHECK (chain (&n, &last, &files) == 0);
  CHECK (n == 11 && last == 11);
  /* Nothing is written when closed. */
  sbx_audit_api ("acme", "GET /v1/info", NULL, 200, 1);
  CHECK (chain (&n, &last, &files) == 0 && n == 11);
  json_decref (argv);
  remove_state ();
  return 0;
}

static int
test_rotation (void)
{
  uint64_t n, last;
  int files, i;
  char path[600];
  struct stat st;

  make_state ();
  CHECK (sbx_audit_open (state, 4096, NULL) == 0);
  for (i = 0; i < 200; i++)
    sbx_audit_lifecycle ("created", "0123456789abcdef0123", "tenant", NULL);
  sbx_audit_close ();
  CHECK (chain (&n, &last, &files) == 0);
  CHECK (files >= 3);
  for (i = 1; i < files; i++)
    {
      snprintf (path, sizeof path, "%s/audit/audit.log.%d", state, i);
      CHECK (stat (path, &st) == 0 && st.st_size <= 4096);
    }
  /* started + 200 + stopped + one "rotated" per rotation */
  CHECK (n == 202 + (uint64_t) (files - 1));
  remove_state ();
  return 0;
}

/* Wait up to 5 s for sbx_audit_healthy () to become want. */
static int
wait_healthy (int want)
{
  int i;

  for (i = 0; i < 500; i++)
    {
      if (sbx_audit_healthy () == want)
        return 0;
      usleep (10000);
    }
  return -1;
}

/* The reported error of a log that cannot rotate is the rename that
   failed, not what followed from it: the failed rotation closes the file
   it had just written into, and the writer's periodic sync must not then
   sync a closed descriptor and report EBADF in its place. Unsynced data
   is what made that happen, so the records come in one burst (they are
   written, and so unsynced, when the rotation fails). A retry a second
   later fails for the same reason and reports the same cause. */
static int
test_blocked_rotation_reports_its_cause (void)
{
  uint64_t n, last;
  int files, i;
  char blocker[600];
  json_t *info;

  make_state ();
  CHECK (sbx_audit_open (state, 4096, NULL) == 0);
  snprintf (blocker, sizeof blocker, "%s/audit/audit.log.1", state);
  CHECK (mkdir (blocker, 0700) == 0);
  for (i = 0; i < 100; i++)
    sbx_audit_lifecycle ("created", "0123456789abcdef0123", "tenant", NULL);
  CHECK (wait_healthy (0) == 0);
  for (i = 0; i < 2; i++)
    {
      const char *e;

      info = sbx_audit_info_json ();
      e = json_string_value (json_object_get (info, "error"));
      CHECK (e != NULL && strncmp (e, "rename `audit.log` to `audit.log.1`: ", 37) == 0);
      CHECK (strstr (e, "Is a directory") != NULL);
      json_decref (info);
      usleep (1200 * 1000); /* past the writer's retry */
    }
  CHECK (rmdir (blocker) == 0);
  CHECK (wait_healthy (1) == 0);
  info = sbx_audit_info_json ();
  CHECK (json_is_null (json_object_get (info, "error")));
  json_decref (info);
  sbx_audit_close ();
  /* Nothing was lost while the log was blocked. */
  CHECK (chain (&n, &last, &files) == 0);
  CHECK (files >= 2 && last == n);
  CHECK (n >= 102);
  remove_state ();
  return 0;
}

static int
test_cut_line (void)
{
  uint64_t n, last;
  int files, fd;
  char path[600];

  make_state ();
  CHECK (sbx_audit_open (state, 1 << 20, NULL) == 0);
  sbx_audit_close ();
  snprintf (path, sizeof path, "%s/audit/audit.log", state);
  fd = open (path, O_WRONLY | O_APPEND);
  CHECK (fd >= 0 && write (fd, "{\"kind\":", 8) == 8);
  close (fd);
  /* The cut file is set aside as audit.log.1; the chain goes on from its
     last whole record in a new audit.log. */
  CHECK (sbx_audit_open (state, 1 << 20, NULL) == 0);
  sbx_audit_close ();
  CHECK (chain (&n, &last, &files) == -1); /* the cut line itself */
  /* Without the cut bytes, the chain holds across the two files. */
  {
    struct stat st;
    snprintf (path, sizeof path, "%s/audit/audit.log.1", state);
    CHECK (stat (path, &st) == 0 && truncate (path, st.st_size - 8) == 0);
  }
  CHECK (chain (&n, &last, &files) == 0);
  CHECK (files == 2 && n == 4 && last == 4);
  remove_state ();
  return 0;
}

static int
test_format_time (void)
{
  char t[32];

  sbx_audit_format_time (1764452400123LL, t);
  CHECK_STR (t, "2025-11-29T21:40:00.123Z");
  sbx_audit_format_time (0, t);
  CHECK_STR (t, "1970-01-01T00:00:00.000Z");
  return 0;
}

int
main (void)
{
  RUN (test_chain_and_restart);
  RUN (test_rotation);
  RUN (test_blocked_rotation_reports_its_cause);
  RUN (test_cut_line);
  RUN (test_format_time);
  return tap_done ();
}
