/* Unit tests for `sbx audit verify`'s chain check (src/cli/audit.c), on
 * logs made here record by record: a good chain (one file, rotated files,
 * the oldest removed), and each way of breaking it, with where it says
 * the break is. */
#include "cli/audit.h"

#include <jansson.h>
#include <sys/stat.h>

#include "tap.h"

static char dir[256];

/* n records into audit.log.1 (first `split` of them) and audit.log. */
static void
make_log (int n, int split)
{
  unsigned char h[32];
  char prev[65], path[400];
  FILE *fp;
  int i, k;

  snprintf (dir, sizeof dir, "/tmp/sbx-unit-cli-audit-XXXXXX");
  if (mkdtemp (dir) == NULL)
    abort ();
  memset (prev, '0', 64);
  prev[64] = '\0';
  snprintf (path, sizeof path, "%s/%s", dir, split ? "audit.log.1" : "audit.log");
  fp = fopen (path, "w");
  for (i = 1; i <= n; i++)
    {
      json_t *o = json_pack ("{s:I, s:s, s:s, s:s, s:i}", "seq", (json_int_t) i, "prev", prev,
                             "time", "2026-11-29T21:40:00.000Z", "kind", "api", "status", 200);
      char *line = json_dumps (o, JSON_COMPACT | JSON_SORT_KEYS);
      if (i == split + 1 && split)
        {
          fclose (fp);
          snprintf (path, sizeof path, "%s/audit.log", dir);
          fp = fopen (path, "w");
        }
      fprintf (fp, "%s\n", line);
      if (sbx_cli_sha256 (line, strlen (line), h) < 0)
        abort ();
      for (k = 0; k < 32; k++)
        snprintf (prev + 2 * k, 3, "%02x", h[k]);
      free (line);
      json_decref (o);
    }
  fclose (fp);
}

static void
clean (void)
{
  char path[400];

  snprintf (path, sizeof path, "%s/audit.log", dir);
  unlink (path);
  snprintf (path, sizeof path, "%s/audit.log.1", dir);
  unlink (path);
  snprintf (path, sizeof path, "%s/audit.log.2", dir);
  unlink (path);
  rmdir (dir);
}

/* Replace the file's content by f(content). */
static void
rewrite (const char *name, void (*f) (char *buf, size_t *len))
{
  char path[400], buf[65536];
  size_t len;
  FILE *fp;

  snprintf (path, sizeof path, "%s/%s", dir, name);
  fp = fopen (path, "r");
  len = fread (buf, 1, sizeof buf - 1, fp);
  fclose (fp);
  buf[len] = '\0';
  f (buf, &len);
  fp = fopen (path, "w");
  fwrite (buf, 1, len, fp);
  fclose (fp);
}

static char *
nth_line (char *buf, int n)
{
  while (--n > 0)
    buf = strchr (buf, '\n') + 1;
  return buf;
}

static void
edit_status (char *buf, size_t *len)
{
  char *l = nth_line (buf, 3);
  (void) len;
  *strstr (l, "200") = '4'; /* still canonical JSON */
}

static void
drop_line_3 (char *buf, size_t *len)
{
  char *l = nth_line (buf, 3), *next = strchr (l, '\n') + 1;
  memmove (l, next, *len - (size_t) (next - buf));
  *len -= (size_t) (next - l);
}

static void
cut_end (char *buf, size_t *len)
{
  (void) buf;
  *len -= 5;
}

static int
test_good (void)
{
  struct sbx_audit_verdict v;

  make_log (6, 0);
  CHECK (sbx_audit_verify (dir, NULL, &v) == 0);
  CHECK_STR (v.message, "ok: 6 records, last seq 6");
  clean ();
  make_log (6, 4);
  CHECK (sbx_audit_verify (dir, NULL, &v) == 0);
  CHECK_STR (v.message, "ok: 6 records, last seq 6");
  CHECK_STR (v.file, "audit.log");
  clean ();
  return 0;
}

static int
test_breaks (void)
{
  struct sbx_audit_verdict v;

  make_log (6, 0);
  rewrite ("audit.log", edit_status);
  CHECK (sbx_audit_verify (dir, NULL, &v) == 1);
  CHECK_STR (v.message, "record at audit.log:4 (seq 4): prev hash does not match the previous"
                        " record — edited, deleted or reordered");
  CHECK (v.records == 3);
  clean ();
  make_log (6, 0);
  rewrite ("audit.log", drop_line_3);
  CHECK (sbx_audit_verify (dir, NULL, &v) == 1);
  CHECK (strncmp (v.message, "record at audit.log:3 (seq 4): prev hash", 40) == 0);
  clean ();
  make_log (6, 0);
  rewrite ("audit.log", cut_end);
  CHECK (sbx_audit_verify (dir, NULL, &v) == 1);
  CHECK (strncmp (v.message, "record at audit.log:6: truncated", 32) == 0);
  clean ();
  /* Across files: the first record of audit.log checks against the last
     of audit.log.1. */
  make_log (6, 3);
  rewrite ("audit.log.1", edit_status);
  CHECK (sbx_audit_verify (dir, NULL, &v) == 1);
  CHECK (strncmp (v.message, "record at audit.log:1 (seq 4): prev hash", 40) == 0);
  clean ();
  return 0;
}

static int
test_trimmed_and_empty (void)
{
  struct sbx_audit_verdict v;
  char a[400], b[400];

  /* The oldest file removed (retention): the oldest left is audit.log.2,
     whose chain starts at seq 4. */
  make_log (6, 3);
  snprintf (a, sizeof a, "%s/audit.log.1", dir);
  CHECK (unlink (a) == 0);
  snprintf (a, sizeof a, "%s/audit.log", dir);
  snprintf (b, sizeof b, "%s/audit.log.2", dir);
  CHECK (rename (a, b) == 0);
  CHECK (sbx_audit_verify (dir, NULL, &v) == 0);
  CHECK (v.trimmed && v.first_seq == 4 && v.last_seq == 6 && v.records == 3);
  clean ();
  make_log (6, 3);
  snprintf (a, sizeof a, "%s/audit.log.1", dir);
  CHECK (unlink (a) == 0);
  /* audit.log alone, starting at seq 4: records before it were deleted. */
  CHECK (sbx_audit_verify (dir, NULL, &v) == 1);
  CHECK (strncmp (v.message, "record at audit.log:1 (seq 4): the first record", 47) == 0);
  clean ();
  /* No log at all. */
  snprintf (dir, sizeof dir, "/tmp/sbx-unit-cli-audit-XXXXXX");
  CHECK (mkdtemp (dir) != NULL);
  CHECK (sbx_audit_verify (dir, NULL, &v) == -1);
  rmdir (dir);
  return 0;
}

int
main (void)
{
  RUN (test_good);
  RUN (test_breaks);
  RUN (test_trimmed_and_empty);
  return tap_done ();
}
