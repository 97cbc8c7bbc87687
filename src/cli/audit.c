/* sbx CLI: `sbx audit verify|tail` (docs/audit.md).
 *
 * Reads STATE/audit/ directly (the administrator's tool, on the daemon's
 * host): audit.log.1, audit.log.2, ... (oldest first) and then audit.log.
 * SHA-256 comes from the system's libcrypto, loaded with dlopen on the
 * first use: the CLI's other commands, `sbx run` first, never pay for
 * mapping it (docs/architecture.md, "Two binaries").
 */
#include "cli/audit.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/cleanup.h"

#define AUDIT_FILE "audit.log"

typedef unsigned char *(*sha256_fn) (const unsigned char *d, size_t n, unsigned char *md);

int
sbx_cli_sha256 (const void *p, size_t n, unsigned char out[32])
{
  static sha256_fn fn;
  static int tried;

  if (!tried)
    {
      static const char *const names[] = {"libcrypto.so.3", "libcrypto.so"};
      size_t i;
      tried = 1;
      for (i = 0; i < sizeof names / sizeof *names && fn == NULL; i++)
        {
          void *h = dlopen (names[i], RTLD_NOW | RTLD_LOCAL);
          if (h)
            fn = (sha256_fn) (uintptr_t) dlsym (h, "SHA256");
        }
    }
  if (fn == NULL)
    return -1;
  fn (p, n, out);
  return 0;
}

static void
to_hex (const unsigned char *d, size_t n, char *out)
{
  static const char digits[] = "0123456789abcdef";
  size_t i;

  for (i = 0; i < n; i++)
    {
      out[2 * i] = digits[d[i] >> 4];
      out[2 * i + 1] = digits[d[i] & 15];
    }
  out[2 * n] = '\0';
}

/* ---- the files, in order ----------------------------------------------- */

static unsigned
rotated_index (const char *name)
{
  static const char prefix[] = AUDIT_FILE ".";
  unsigned long n;
  char *end;

  if (strncmp (name, prefix, sizeof prefix - 1) != 0)
    return 0;
  name += sizeof prefix - 1;
  if (name[0] < '1' || name[0] > '9')
    return 0;
  errno = 0;
  n = strtoul (name, &end, 10);
  if (*end || errno || n > 1000000000UL)
    return 0;
  return (unsigned) n;
}

static int
cmp_unsigned (const void *a, const void *b)
{
  unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;
  return x < y ? -1 : x > y;
}

void
sbx_audit_files_free (struct sbx_audit_files *f)
{
  size_t i;

  for (i = 0; i < f->n; i++)
    free (f->names[i]);
  free (f->names);
  f->names = NULL;
  f->n = 0;
}

int
sbx_audit_files (const char *dir, struct sbx_audit_files *f, char *msg, size_t cap)
{
  DIR *d = opendir (dir);
  struct dirent *de;
  unsigned *idx = NULL;
  size_t n = 0, alloc = 0, i;
  int current = 0;

  memset (f, 0, sizeof *f);
  if (d == NULL)
    {
      snprintf (msg, cap, "`%s`: %s", dir, strerror (errno));
      return -1;
    }
  while ((de = readdir (d)) != NULL)
    {
      unsigned k = rotated_index (de->d_name);
      if (strcmp (de->d_name, AUDIT_FILE) == 0)
        current = 1;
      if (k == 0)
        continue;
      if (n == alloc)
        {
          alloc = alloc ? alloc * 2 : 16;
          idx = realloc (idx, alloc * sizeof *idx);
          if (idx == NULL)
            sbx_oom ();
        }
      idx[n++] = k;
    }
  closedir (d);
  if (n)
    qsort (idx, n, sizeof *idx, cmp_unsigned);
  f->names = calloc (n + 1, sizeof *f->names);
  if (f->names == NULL)
    sbx_oom ();
  for (i = 0; i < n; i++)
    {
      char name[64];
      snprintf (name, sizeof name, AUDIT_FILE ".%u", idx[i]);
      f->names[f->n++] = strdup (name);
    }
  if (current)
    f->names[f->n++] = strdup (AUDIT_FILE);
  f->first_index = n ? idx[0] : 0;
  free (idx);
  return 0;
}

/* ---- verify ------------------------------------------------------------ */

/* The parent's anchor (priv/audit_anchor.h): its seq and hash in hex,
   and the "remade" line's text ("" when none). 0, or 1 with why (not
   root's, not an anchor, missing). */
struct anchor
{
  unsigned long long seq;
  char hash[65];
  char remade[96];
};

static int
read_anchor (const char *path, struct anchor *a, char *why, size_t cap)
{
  char text[512], dirpath[4096];
  struct stat st, dst;
  cleanup_close int fd = -1;
  ssize_t n;
  int used = 0;
  const char *rest;

  memset (a, 0, sizeof *a);
  snprintf (dirpath, sizeof dirpath, "%s", path);
  if (strrchr (dirpath, '/'))
    *strrchr (dirpath, '/') = '\0';
  fd = open (path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    {
      snprintf (why, cap,
                "the log's anchor `%.900s` is %s: moved or removed — the log's end cannot be"
                " vouched for",
                path, errno == ENOENT ? "missing" : strerror (errno));
      return 1;
    }
  /* The front end owns the state directory, never this: root's alone. */
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0
      || lstat (dirpath, &dst) < 0 || !S_ISDIR (dst.st_mode) || dst.st_uid != 0
      || (dst.st_mode & 022) != 0)
    {
      snprintf (why, cap,
                "the log's anchor `%.900s` is not root's (file and directory, written by root"
                " only) — replaced",
                path);
      return 1;
    }
  n = read (fd, text, sizeof text - 1);
  if (n < 0)
    n = 0;
  text[n] = '\0';
  if (sscanf (text, "sbx audit anchor 1\nseq %llu\nhash %64[0-9a-f]\n%n", &a->seq, a->hash, &used)
          != 2
      || used == 0 || strlen (a->hash) != 64)
    {
      snprintf (why, cap, "the log's anchor `%.900s` is not an anchor — edited", path);
      return 1;
    }
  rest = text + used;
  if (strncmp (rest, "remade ", 7) == 0)
    snprintf (a->remade, sizeof a->remade, "%.*s", (int) strcspn (rest + 7, "\n"), rest + 7);
  return 0;
}

int
sbx_audit_verify (const char *dir, const char *anchor_path, struct sbx_audit_verdict *v)
{
  struct sbx_audit_files files;
  unsigned char prev_hash[32];
  char expected[65], zeros[65], anchored[65] = "";
  struct anchor anchor;
  int have_prev = 0, rc = 0;
  size_t fi;

  memset (v, 0, sizeof *v);
  memset (zeros, '0', 64);
  zeros[64] = '\0';
  if (anchor_path != NULL && read_anchor (anchor_path, &anchor, v->message, sizeof v->message))
    return 1;
  if (sbx_audit_files (dir, &files, v->message, sizeof v->message) < 0)
    return -1;
  if (files.n == 0)
    {
      snprintf (v->message, sizeof v->message, "`%s` holds no audit log", dir);
      sbx_audit_files_free (&files);
      return -1;
    }
  for (fi = 0; fi < files.n && rc == 0; fi++)
    {
      char path[4096];
      FILE *fp;
      char *line = NULL;
      size_t lcap = 0;
      ssize_t len;
      unsigned long lineno = 0;

      snprintf (path, sizeof path, "%.3900s/%.64s", dir, files.names[fi]);
      fp = fopen (path, "re");
      if (fp == NULL)
        {
          snprintf (v->message, sizeof v->message, "`%.900s`: %s", path, strerror (errno));
          rc = -1;
          break;
        }
      while ((len = getline (&line, &lcap, fp)) > 0)
        {
          json_t *o, *seqj, *prevj;
          char *canon;
          json_int_t seq;
          const char *prev;
          size_t n = (size_t) len;

          lineno++;
          if (line[n - 1] != '\n')
            {
              snprintf (v->message, sizeof v->message,
                        "record at %s:%lu: truncated (the line has no end) — cut short, or"
                        " written by something other than sbx",
                        files.names[fi], lineno);
              rc = 1;
              break;
            }
          n--;
          o = json_loadb (line, n, JSON_REJECT_DUPLICATES, NULL);
          seqj = json_object_get (o, "seq");
          prevj = json_object_get (o, "prev");
          prev = json_string_value (prevj);
          if (!json_is_object (o) || !json_is_integer (seqj) || prev == NULL
              || strlen (prev) != 64)
            {
              snprintf (v->message, sizeof v->message,
                        "record at %s:%lu: not an audit record (not JSON, or no seq or prev)"
                        " — edited",
                        files.names[fi], lineno);
              json_decref (o);
              rc = 1;
              break;
            }
          seq = json_integer_value (seqj);
          /* The daemon writes every line canonically (compact, sorted):
             any other spelling of the same JSON was written by hand. */
          canon = json_dumps (o, JSON_COMPACT | JSON_SORT_KEYS);
          if (canon == NULL || strlen (canon) != n || memcmp (canon, line, n) != 0)
            {
              snprintf (v->message, sizeof v->message,
                        "record at %s:%lu (seq %lld): not in the form sbx writes — edited",
                        files.names[fi], lineno, (long long) seq);
              free (canon);
              json_decref (o);
              rc = 1;
              break;
            }
          free (canon);
          if (!have_prev)
            {
              /* The first record here: the start of the chain, unless the
                 oldest files were removed (retention), when the oldest
                 left is not audit.log.1. */
              int trimmed = files.first_index > 1;
              if (!trimmed && (strcmp (prev, zeros) != 0 || seq != 1))
                {
                  snprintf (v->message, sizeof v->message,
                            "record at %s:%lu (seq %lld): the first record must have seq 1 and"
                            " prev 0…0 — records before it were deleted",
                            files.names[fi], lineno, (long long) seq);
                  json_decref (o);
                  rc = 1;
                  break;
                }
              v->first_seq = (uint64_t) seq;
              v->trimmed = trimmed;
            }
          else
            {
              to_hex (prev_hash, 32, expected);
              if (strcmp (prev, expected) != 0)
                {
                  snprintf (v->message, sizeof v->message,
                            "record at %s:%lu (seq %lld): prev hash does not match the previous"
                            " record — edited, deleted or reordered",
                            files.names[fi], lineno, (long long) seq);
                  json_decref (o);
                  rc = 1;
                  break;
                }
              if ((uint64_t) seq != v->last_seq + 1)
                {
                  snprintf (v->message, sizeof v->message,
                            "record at %s:%lu (seq %lld): seq does not follow %llu — edited,"
                            " deleted or reordered",
                            files.names[fi], lineno, (long long) seq,
                            (unsigned long long) v->last_seq);
                  json_decref (o);
                  rc = 1;
                  break;
                }
            }
          json_decref (o);
          if (sbx_cli_sha256 (line, n, prev_hash) < 0)
            {
              snprintf (v->message, sizeof v->message,
                        "cannot load libcrypto (SHA-256): %s", dlerror () ? dlerror () : "?");
              rc = -1;
              break;
            }
          have_prev = 1;
          if (anchor_path != NULL && (unsigned long long) seq == anchor.seq)
            to_hex (prev_hash, 32, anchored);
          v->last_seq = (uint64_t) seq;
          v->records++;
          snprintf (v->file, sizeof v->file, "%s", files.names[fi]);
          v->line = lineno;
        }
      free (line);
      fclose (fp);
    }
  if (rc == 0 && anchor_path != NULL && anchor.seq > 0)
    {
      /* The daemon synced seq `anchor.seq` with this hash: the log must
         still reach it (a valid chain whose end was cut shows nothing
         else), and hold that very record there. */
      if (anchor.seq > v->last_seq)
        {
          snprintf (v->message, sizeof v->message,
                    "records were cut from the log's end: it ends at seq %llu, the daemon had"
                    " written seq %llu (its anchor, `%.700s`)",
                    (unsigned long long) v->last_seq, anchor.seq, anchor_path);
          rc = 1;
        }
      else if (strcmp (anchored, anchor.hash) != 0)
        {
          snprintf (v->message, sizeof v->message,
                    "record seq %llu is not the one the daemon wrote (its hash differs from the"
                    " anchor's) — the log's end was rewritten",
                    anchor.seq);
          rc = 1;
        }
    }
  if (rc == 0)
    {
      char note[256] = "";

      if (anchor_path != NULL && anchor.remade[0])
        snprintf (note, sizeof note,
                  "; the anchor was remade (seq and time: %.60s) when it was missing: the log's"
                  " end before then is vouched for by its chain alone",
                  anchor.remade);
      if (v->records == 0)
        snprintf (v->message, sizeof v->message, "ok: 0 records%s", note);
      else
        snprintf (v->message, sizeof v->message, "ok: %llu records, last seq %llu%s%s",
                  (unsigned long long) v->records, (unsigned long long) v->last_seq,
                  v->trimmed ? " (older files were removed: the chain starts at a later seq)"
                             : "",
                  note);
    }
  sbx_audit_files_free (&files);
  return rc;
}

/* ---- tail -------------------------------------------------------------- */

static int
matches (const char *line, size_t n, const char *sandbox)
{
  json_t *o;
  int ok;

  if (sandbox == NULL)
    return 1;
  o = json_loadb (line, n, 0, NULL);
  ok = json_is_string (json_object_get (o, "sandbox"))
       && strcmp (json_string_value (json_object_get (o, "sandbox")), sandbox) == 0;
  json_decref (o);
  return ok;
}

static int
emit (const char *line, size_t n)
{
  if (sbx_write_all (1, line, n) < 0 || sbx_write_all (1, "\n", 1) < 0)
    return -1;
  return 0;
}

/* Complete lines from fd into *pending; each matching one printed. -1
   when stdout is gone. */
static int
follow_read (int fd, char **pending, size_t *plen, const char *sandbox)
{
  char buf[65536];
  ssize_t got;

  while ((got = read (fd, buf, sizeof buf)) > 0)
    {
      char *p, *nl, *start;
      *pending = realloc (*pending, *plen + (size_t) got + 1);
      if (*pending == NULL)
        sbx_oom ();
      memcpy (*pending + *plen, buf, (size_t) got);
      *plen += (size_t) got;
      start = *pending;
      p = start;
      while ((nl = memchr (p, '\n', *plen - (size_t) (p - start))) != NULL)
        {
          if (matches (p, (size_t) (nl - p), sandbox) && emit (p, (size_t) (nl - p)) < 0)
            return -1;
          p = nl + 1;
        }
      memmove (start, p, *plen - (size_t) (p - start));
      *plen -= (size_t) (p - start);
    }
  return 0;
}

static int
audit_tail (const char *dir, const char *sandbox, long count, int follow)
{
  struct sbx_audit_files files;
  char msg[512], **ring = NULL;
  size_t *lens = NULL, fi, head = 0, held = 0, i;
  int fd = -1;
  char *pending = NULL;
  size_t plen = 0;
  off_t end = 0;

  if (sbx_audit_files (dir, &files, msg, sizeof msg) < 0)
    {
      sbx_cli_message ("audit tail: %s", msg);
      return SBX_EXIT_FAILURE;
    }
  if (count > 0)
    {
      ring = calloc ((size_t) count, sizeof *ring);
      lens = calloc ((size_t) count, sizeof *lens);
      if (ring == NULL || lens == NULL)
        sbx_oom ();
    }
  for (fi = 0; fi < files.n; fi++)
    {
      char path[4096], *line = NULL;
      size_t lcap = 0;
      ssize_t len;
      FILE *fp;

      snprintf (path, sizeof path, "%.3900s/%.64s", dir, files.names[fi]);
      fp = fopen (path, "re");
      if (fp == NULL)
        continue; /* rotated away meanwhile */
      while ((len = getline (&line, &lcap, fp)) > 0)
        {
          size_t n = (size_t) len;
          if (line[n - 1] != '\n')
            break; /* a record being written: --follow prints it whole */
          n--;
          if (!matches (line, n, sandbox))
            continue;
          if (count == 0)
            {
              if (emit (line, n) < 0)
                break;
              continue;
            }
          free (ring[head]);
          ring[head] = strndup (line, n);
          lens[head] = n;
          head = (head + 1) % (size_t) count;
          if (held < (size_t) count)
            held++;
        }
      if (fi == files.n - 1 && strcmp (files.names[fi], AUDIT_FILE) == 0)
        {
          /* Where --follow goes on: after the last whole line. */
          end = ftello (fp);
          if (len > 0 && line[len - 1] != '\n')
            end -= len;
        }
      free (line);
      fclose (fp);
    }
  for (i = 0; i < held; i++)
    {
      size_t k = (head + (size_t) count - held + i) % (size_t) count;
      if (emit (ring[k], lens[k]) < 0)
        break;
    }
  for (i = 0; ring && i < (size_t) count; i++)
    free (ring[i]);
  free (ring);
  free (lens);
  sbx_audit_files_free (&files);
  if (!follow)
    return 0;

  /* Follow audit.log: poll for new lines (5 times a second); when the
     name points at another file (rotation), finish the old one and start
     the new one at its beginning. */
  {
    char path[4096];
    snprintf (path, sizeof path, "%.3900s/" AUDIT_FILE, dir);
    for (;;)
      {
        struct stat a, b;
        struct timespec ts = {0, 200 * 1000 * 1000};
        if (fd < 0)
          {
            fd = open (path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0 && end > 0)
              lseek (fd, end, SEEK_SET);
            end = 0;
          }
        if (fd >= 0 && follow_read (fd, &pending, &plen, sandbox) < 0)
          break;
        if (fd >= 0 && stat (path, &a) == 0 && fstat (fd, &b) == 0
            && (a.st_ino != b.st_ino || a.st_dev != b.st_dev))
          {
            if (follow_read (fd, &pending, &plen, sandbox) < 0)
              break;
            close (fd);
            fd = -1;
            plen = 0;
            continue;
          }
        nanosleep (&ts, NULL);
      }
  }
  if (fd >= 0)
    close (fd);
  free (pending);
  return 0;
}

/* ---- the command ------------------------------------------------------- */

static const char *
state_dir (const char *opt)
{
  const char *s = opt ? opt : getenv ("SBX_STATE");
  return s && s[0] ? s : "/var/lib/sbx";
}

int
sbx_cmd_audit (int argc, char **argv)
{
  const char *sub, *state = NULL, *sandbox = NULL;
  long count = 10;
  int follow = 0, i;
  char dir[4096];

  if (argc < 2 || sbx_cli_is_help (argv[1]))
    {
      sbx_cli_help ("audit");
      return argc < 2 ? SBX_EXIT_USAGE : 0;
    }
  sub = argv[1];
  if (strcmp (sub, "verify") != 0 && strcmp (sub, "tail") != 0)
    {
      sbx_cli_usage ("audit: unknown subcommand `%s` (verify or tail)", sub);
      return SBX_EXIT_USAGE;
    }
  for (i = 2; i < argc; i++)
    {
      const char *a = argv[i];
      const char *val = NULL;
      int is_tail = strcmp (sub, "tail") == 0;

      if (sbx_cli_is_help (a))
        {
          sbx_cli_help (is_tail ? "audit tail" : "audit verify");
          return 0;
        }
      if (is_tail && (strcmp (a, "--follow") == 0 || strcmp (a, "-f") == 0))
        {
          follow = 1;
          continue;
        }
      if (strcmp (a, "--state") == 0 || (is_tail && (strcmp (a, "--sandbox") == 0
                                                     || strcmp (a, "-n") == 0)))
        {
          if (i + 1 >= argc)
            {
              sbx_cli_usage ("audit %s: option %s needs a value", sub, a);
              return SBX_EXIT_USAGE;
            }
          val = argv[++i];
        }
      else if (strncmp (a, "--state=", 8) == 0)
        {
          val = a + 8;
          a = "--state";
        }
      else if (is_tail && strncmp (a, "--sandbox=", 10) == 0)
        {
          val = a + 10;
          a = "--sandbox";
        }
      else
        {
          sbx_cli_usage ("audit %s: unexpected argument `%s`", sub, a);
          return SBX_EXIT_USAGE;
        }
      if (strcmp (a, "--state") == 0)
        state = val;
      else if (strcmp (a, "--sandbox") == 0)
        sandbox = val;
      else
        {
          char *end;
          errno = 0;
          count = strtol (val, &end, 10);
          if (*val == '\0' || *end || errno || count < 0 || count > 1000000)
            {
              sbx_cli_usage ("audit tail: -n wants a count from 0 (all) to 1000000, not `%s`",
                             val);
              return SBX_EXIT_USAGE;
            }
        }
    }
  snprintf (dir, sizeof dir, "%.3900s/audit", state_dir (state));
  if (strcmp (sub, "verify") == 0)
    {
      struct sbx_audit_verdict v;
      char anchor[4096];
      int rc;

      snprintf (anchor, sizeof anchor, "%.3900s/audit-anchor/head", state_dir (state));
      rc = sbx_audit_verify (dir, anchor, &v);
      /* A live log: the line being written at that instant may not be
         whole yet. Once more, a moment later, before calling it cut. */
      if (rc == 1 && strncmp (v.message, "record at " AUDIT_FILE ":", sizeof "record at " AUDIT_FILE ":" - 1)
                         == 0
          && strstr (v.message, ": truncated") != NULL)
        {
          struct timespec ts = {0, 300 * 1000 * 1000};
          nanosleep (&ts, NULL);
          rc = sbx_audit_verify (dir, anchor, &v);
        }
      if (rc < 0)
        {
          sbx_cli_message ("audit verify: %s", v.message);
          return SBX_EXIT_FAILURE;
        }
      if (rc > 0)
        {
          printf ("%s\n", v.message);
          return SBX_EXIT_FAILURE;
        }
      printf ("%s\n", v.message);
      return 0;
    }
  signal (SIGPIPE, SIG_IGN);
  return audit_tail (dir, sandbox, count, follow);
}
