/* sbx: the audit log's anchor (audit_anchor.h). */
#include "priv/audit_anchor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/hex.h"
#include "util/log.h"

static struct
{
  pthread_mutex_t lock;
  int fd; /* STATE/audit-anchor/head, -1 before open */
  uint64_t seq;
  unsigned char hash[32];
  int remade;           /* remade at start, its seq not yet known */
  char remade_line[96]; /* "remade SEQ TIME\n" once known, else "" */
  char remade_time[32];
  int warned; /* a head that went back was logged */
} N = {PTHREAD_MUTEX_INITIALIZER, -1, 0, {0}, 0, "", "", 0};

/* The file's content parsed into N; -1 when it is not an anchor. */
static int
parse (const char *text)
{
  char hex[65];
  unsigned long long seq;
  int used = 0;
  const char *rest;

  if (sscanf (text, "sbx audit anchor 1\nseq %llu\nhash %64[0-9a-f]\n%n", &seq, hex, &used) != 2
      || used == 0 || strlen (hex) != 64)
    return -1;
  if (sbx_hex_decode (hex, 64, N.hash) != 32)
    return -1;
  N.seq = seq;
  rest = text + used;
  if (strncmp (rest, "remade ", 7) == 0)
    snprintf (N.remade_line, sizeof N.remade_line, "%.*s", (int) strcspn (rest, "\n") + 1, rest);
  else if (*rest != '\0')
    return -1;
  return 0;
}

/* N into the file, whole, synced. */
static int
store_locked (void)
{
  char text[256], hex[65];
  int n;

  sbx_hex_encode (N.hash, sizeof N.hash, hex);
  n = snprintf (text, sizeof text, "sbx audit anchor 1\nseq %" PRIu64 "\nhash %s\n%s", N.seq, hex,
                N.remade_line);
  if (n < 0 || (size_t) n >= sizeof text || pwrite (N.fd, text, (size_t) n, 0) != n
      || ftruncate (N.fd, n) < 0 || fdatasync (N.fd) < 0)
    return -1;
  return 0;
}

/* Whether state_dir's log holds anything: audit.log not empty, or a
   rotated file. */
static int
log_has_records (const char *state_dir)
{
  char path[700];
  struct stat st;
  DIR *d;
  struct dirent *e;
  int found = 0;

  snprintf (path, sizeof path, "%s/audit/audit.log", state_dir);
  if (stat (path, &st) == 0 && st.st_size > 0)
    return 1;
  snprintf (path, sizeof path, "%s/audit", state_dir);
  d = opendir (path);
  if (d == NULL)
    return 0;
  while (!found && (e = readdir (d)) != NULL)
    found = strncmp (e->d_name, "audit.log.", 10) == 0;
  closedir (d);
  return found;
}

int
sbx_audit_anchor_open (const char *state_dir, uint64_t *remade, sbx_error_t **err)
{
  char where[700], text[512];
  cleanup_close int dir = -1;
  struct stat st;
  ssize_t n;
  int fd;

  *remade = 0;
  snprintf (where, sizeof where, "%s/%s", state_dir, SBX_AUDIT_ANCHOR_DIR);
  if (mkdir (where, 0755) < 0 && errno != EEXIST)
    return sbx_err_sys (err, errno, "create `%s`", where);
  dir = open (where, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0 || fstat (dir, &st) < 0)
    return sbx_err_sys (err, errno, "open `%s`", where);
  /* Root's, so that the front end (the state directory's owner) cannot
     write in it; readable, for the administrator's verify. */
  if ((st.st_uid != 0 || st.st_gid != 0) && fchown (dir, 0, 0) < 0)
    return sbx_err_sys (err, errno, "chown `%s`", where);
  if ((st.st_mode & 07777) != 0755 && fchmod (dir, 0755) < 0)
    return sbx_err_sys (err, errno, "chmod `%s`", where);
  fd = openat (dir, SBX_AUDIT_ANCHOR_FILE, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  pthread_mutex_lock (&N.lock);
  N.seq = 0;
  memset (N.hash, 0, sizeof N.hash);
  N.remade_line[0] = '\0';
  N.remade = 0;
  if (fd >= 0)
    {
      if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != 0
          || (n = pread (fd, text, sizeof text - 1, 0)) < 0 || (text[n] = '\0', parse (text) < 0))
        {
          close (fd);
          pthread_mutex_unlock (&N.lock);
          return sbx_err (err, SBX_E_SYSTEM,
                          "`%s/%s` is not an audit anchor of root's: it is evidence (the log's"
                          " end may have been cut); move it away to start a new one",
                          where, SBX_AUDIT_ANCHOR_FILE);
        }
    }
  else if (errno == ENOENT)
    {
      fd = openat (dir, SBX_AUDIT_ANCHOR_FILE,
                   O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0)
        {
          pthread_mutex_unlock (&N.lock);
          return sbx_err_sys (err, errno, "create `%s/%s`", where, SBX_AUDIT_ANCHOR_FILE);
        }
      if (log_has_records (state_dir))
        {
          time_t now = time (NULL);
          struct tm tm;
          gmtime_r (&now, &tm);
          strftime (N.remade_time, sizeof N.remade_time, "%Y-%m-%dT%H:%M:%SZ", &tm);
          N.remade = 1;
          sbx_warn ("audit: the log's anchor was missing while the log has records: remade (the"
                    " log's end before now is vouched for by its chain alone)");
        }
    }
  else
    {
      pthread_mutex_unlock (&N.lock);
      return sbx_err_sys (err, errno, "open `%s/%s`", where, SBX_AUDIT_ANCHOR_FILE);
    }
  N.fd = fd;
  if (store_locked () < 0)
    {
      pthread_mutex_unlock (&N.lock);
      return sbx_err_sys (err, errno, "write `%s/%s`", where, SBX_AUDIT_ANCHOR_FILE);
    }
  *remade = N.remade ? 1 : 0;
  pthread_mutex_unlock (&N.lock);
  return 0;
}

int
sbx_audit_anchor_advance (uint64_t seq, const unsigned char hash[32])
{
  int rc = 0;

  pthread_mutex_lock (&N.lock);
  if (N.fd < 0)
    rc = 0;
  else if (seq < N.seq || (seq == N.seq && memcmp (hash, N.hash, 32) != 0 && N.seq != 0))
    {
      /* Once: the front end says it every second. */
      if (!N.warned)
        sbx_warn ("audit: the front end's head (seq %" PRIu64 ") goes back from the anchor's"
                  " (seq %" PRIu64 "): refused (the log's end may have been cut; to start a new"
                  " log on purpose, move " SBX_AUDIT_ANCHOR_DIR " away with it)",
                  seq, N.seq);
      N.warned = 1;
      rc = -1;
    }
  else if (seq > N.seq)
    {
      N.seq = seq;
      memcpy (N.hash, hash, 32);
      if (N.remade)
        {
          /* The first head after a remake: what the anchor vouches from. */
          snprintf (N.remade_line, sizeof N.remade_line, "remade %" PRIu64 " %s\n", seq,
                    N.remade_time);
          N.remade = 0;
        }
      if (store_locked () < 0)
        sbx_warn ("audit: cannot write the log's anchor: %s", strerror (errno));
    }
  pthread_mutex_unlock (&N.lock);
  return rc;
}
