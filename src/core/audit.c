/* sbx: the audit log's writer (audit.h, docs/audit.md).
 *
 * Producers queue JSON objects under `mu` (memory only: the event loop
 * and the core lock's holders never wait for the disk); one writer thread
 * takes them in order, gives each its seq and prev, dumps it canonically
 * and writes it with one write(2) to a file opened O_APPEND. Durability:
 * a record is in the kernel (it survives a crash of the daemon) as soon
 * as the writer has written it, normally within a millisecond; the
 * writer calls fdatasync at most once a second while there is unsynced
 * data, and at rotation and close, so a power loss costs at most about
 * the last second. A kill -9 loses only what was still queued.
 */
#include "core/audit.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/cleanup.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/utf8.h"

/* The last line is looked for in this many final bytes of a file. */
#define TAIL_MAX (256 * 1024)

struct entry
{
  struct entry *next;
  json_t *obj;
};

static struct
{
  pthread_mutex_t mu;
  pthread_cond_t cond;
  pthread_t thread;
  int open;
  int stopping;
  /* the queue (mu) */
  struct entry *head, **tail;
  size_t queued;
  uint64_t dropped;       /* not queued (full) since the last gap record */
  uint64_t dropped_total;
  /* the writer's (mu for reading from other threads) */
  int dir;
  int fd;
  uint64_t size;
  uint64_t max_size;
  uint64_t seq;           /* of the last record written */
  unsigned char prev[SHA256_DIGEST_LENGTH];
  unsigned next_index;    /* of the next rotated file */
  int healthy;
  char error[200];        /* the cause of the current failure, "" when healthy */
  int cause_known;        /* this write attempt has failed: error holds its first cause */
  int64_t last_sync_mono;
  int dirty;
} A = {
  .mu = PTHREAD_MUTEX_INITIALIZER,
  .cond = PTHREAD_COND_INITIALIZER,
  .dir = -1,
  .fd = -1,
  .healthy = 1,
};

static int64_t
mono_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t
real_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
sbx_audit_format_time (int64_t ms, char out[32])
{
  time_t s = (time_t) (ms / 1000);
  struct tm tm;

  char buf[96];

  gmtime_r (&s, &tm);
  snprintf (buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) (ms % 1000));
  snprintf (out, 32, "%.31s", buf);
}


void
sbx_audit_sha256_hex (const void *p, size_t n, char out[65])
{
  unsigned char d[SHA256_DIGEST_LENGTH];

  SHA256 (p, n, d);
  sbx_hex_encode (d, sizeof d, out);
}

/* A JSON string of any bytes: invalid UTF-8 becomes U+FFFD, so a
   client's odd path still makes a record. */
static json_t *
jstr (const char *s)
{
  struct sbx_buf b = SBX_BUF_INIT;
  json_t *j;

  if (s == NULL)
    return json_null ();
  j = json_string (s);
  if (j)
    return j;
  sbx_utf8_sanitize (&b, s, strlen (s), 1);
  j = json_stringn (b.data ? b.data : "", b.len);
  sbx_buf_free (&b);
  return j ? j : json_null ();
}

/* ---- the queue --------------------------------------------------------- */

void
sbx_audit_record (const char *kind, json_t *fields)
{
  struct entry *e;
  char when[32];

  if (fields == NULL)
    fields = json_object ();
  if (fields == NULL)
    goto dropped;
  /* The time it happened, not the time it was written. */
  sbx_audit_format_time (real_ms (), when);
  if (json_object_set_new (fields, "kind", json_string (kind)) < 0
      || json_object_set_new (fields, "time", json_string (when)) < 0)
    goto dropped;
  e = malloc (sizeof *e);
  if (e == NULL)
    goto dropped;
  e->next = NULL;
  e->obj = fields;
  pthread_mutex_lock (&A.mu);
  if (!A.open || A.stopping || A.queued >= SBX_AUDIT_QUEUE_MAX)
    {
      if (A.open && !A.stopping)
        {
          A.dropped++;
          A.dropped_total++;
        }
      pthread_mutex_unlock (&A.mu);
      json_decref (fields);
      free (e);
      return;
    }
  *A.tail = e;
  A.tail = &e->next;
  A.queued++;
  pthread_cond_signal (&A.cond);
  pthread_mutex_unlock (&A.mu);
  return;
dropped:
  json_decref (fields);
  pthread_mutex_lock (&A.mu);
  if (A.open)
    {
      A.dropped++;
      A.dropped_total++;
    }
  pthread_mutex_unlock (&A.mu);
}

static int
audit_enabled (void)
{
  int open;

  pthread_mutex_lock (&A.mu);
  open = A.open && !A.stopping;
  pthread_mutex_unlock (&A.mu);
  return open;
}

void
sbx_audit_api (const char *tenant, const char *action, const char *sandbox, unsigned status,
               int completed)
{
  json_t *o;

  if (!audit_enabled ())
    return;
  o = json_object ();
  json_object_set_new (o, "tenant", jstr (tenant));
  json_object_set_new (o, "action", jstr (action));
  json_object_set_new (o, "sandbox", jstr (sandbox));
  json_object_set_new (o, "status", json_integer (status));
  json_object_set_new (o, "completed", json_boolean (completed));
  sbx_audit_record ("api", o);
}

void
sbx_audit_command (const char *sandbox, int pid, json_t *argv, const char *user, const char *cwd,
                   int exit_code, const char *signal, int64_t duration_ms, const char *reason)
{
  json_t *o, *a;
  size_t i, budget = SBX_AUDIT_ARGV_MAX;
  int truncated = 0;

  if (!audit_enabled ())
    return;
  o = json_object ();
  a = json_array ();
  /* Bounded: a record is one line, and the queue holds thousands. */
  for (i = 0; argv && i < json_array_size (argv); i++)
    {
      const char *s = json_string_value (json_array_get (argv, i));
      size_t n = s ? strlen (s) : 0;
      if (n > budget)
        {
          truncated = 1;
          break;
        }
      budget -= n;
      json_array_append_new (a, jstr (s ? s : ""));
    }
  json_object_set_new (o, "sandbox", jstr (sandbox));
  json_object_set_new (o, "pid", pid > 0 ? json_integer (pid) : json_null ());
  json_object_set_new (o, "argv", a);
  if (truncated)
    json_object_set_new (o, "argv_truncated", json_true ());
  json_object_set_new (o, "user", jstr (user));
  json_object_set_new (o, "cwd", jstr (cwd));
  json_object_set_new (o, "exit_code", exit_code >= 0 ? json_integer (exit_code) : json_null ());
  json_object_set_new (o, "signal", jstr (signal));
  json_object_set_new (o, "duration_ms", json_integer (duration_ms));
  json_object_set_new (o, "reason", jstr (reason));
  sbx_audit_record ("command", o);
}

void
sbx_audit_file_write (const char *sandbox, const char *path, uint64_t size, const char *sha256,
                      const char *via)
{
  json_t *o;

  if (!audit_enabled ())
    return;
  o = json_object ();
  json_object_set_new (o, "sandbox", jstr (sandbox));
  json_object_set_new (o, "path", jstr (path));
  json_object_set_new (o, "size", json_integer ((json_int_t) size));
  json_object_set_new (o, "sha256", jstr (sha256));
  json_object_set_new (o, "via", jstr (via));
  sbx_audit_record ("file_write", o);
}

void
sbx_audit_lifecycle (const char *event, const char *sandbox, const char *tenant,
                     const char *reason)
{
  json_t *o;

  if (!audit_enabled ())
    return;
  o = json_object ();
  json_object_set_new (o, "event", jstr (event));
  json_object_set_new (o, "sandbox", jstr (sandbox));
  json_object_set_new (o, "tenant", jstr (tenant));
  json_object_set_new (o, "reason", jstr (reason));
  sbx_audit_record ("sandbox", o);
}

void
sbx_audit_egress (const char *sandbox, const char *host, unsigned port, const char *decision,
                  const char *reason, uint64_t bytes_out, uint64_t bytes_in)
{
  json_t *o;

  if (!audit_enabled ())
    return;
  o = json_object ();
  json_object_set_new (o, "sandbox", jstr (sandbox));
  json_object_set_new (o, "host", jstr (host));
  json_object_set_new (o, "port", json_integer (port));
  json_object_set_new (o, "decision", jstr (decision));
  json_object_set_new (o, "reason", jstr (reason));
  json_object_set_new (o, "bytes_out", json_integer ((json_int_t) bytes_out));
  json_object_set_new (o, "bytes_in", json_integer ((json_int_t) bytes_in));
  sbx_audit_record ("egress", o);
}

/* ---- status ------------------------------------------------------------ */

int
sbx_audit_healthy (void)
{
  int h;

  pthread_mutex_lock (&A.mu);
  h = !A.open || A.healthy;
  pthread_mutex_unlock (&A.mu);
  return h;
}

json_t *
sbx_audit_info_json (void)
{
  json_t *o = json_object ();

  pthread_mutex_lock (&A.mu);
  json_object_set_new (o, "enabled", json_boolean (A.open));
  json_object_set_new (o, "healthy", json_boolean (!A.open || A.healthy));
  json_object_set_new (o, "seq", json_integer ((json_int_t) A.seq));
  json_object_set_new (o, "queued", json_integer ((json_int_t) A.queued));
  json_object_set_new (o, "dropped", json_integer ((json_int_t) A.dropped_total));
  json_object_set_new (o, "error", A.error[0] ? json_string (A.error) : json_null ());
  json_object_set_new (o, "file", json_string (SBX_AUDIT_DIR "/" SBX_AUDIT_FILE));
  pthread_mutex_unlock (&A.mu);
  return o;
}

void
sbx_audit_stats (struct sbx_audit_stats *out)
{
  pthread_mutex_lock (&A.mu);
  out->enabled = A.open;
  out->healthy = !A.open || A.healthy;
  out->written = (uint64_t) A.seq;
  out->queued = (uint64_t) A.queued;
  out->dropped = (uint64_t) A.dropped_total;
  pthread_mutex_unlock (&A.mu);
}

/* The first failure of a write attempt is its cause: what fails after it
   in the same attempt (a sync of the file it left behind, say) follows
   from it and must not hide it from the operator. A later attempt that
   fails for another reason reports that one. */
static void
set_error_text (const char *msg)
{
  pthread_mutex_lock (&A.mu);
  if (!A.cause_known)
    {
      if (A.healthy || strcmp (A.error, msg) != 0)
        sbx_error ("audit log: %s; state-changing requests are refused until it can be"
                   " written again",
                   msg);
      snprintf (A.error, sizeof A.error, "%s", msg);
      A.cause_known = 1;
    }
  A.healthy = 0;
  pthread_mutex_unlock (&A.mu);
}


static void
set_error (int e, const char *what)
{
  char msg[200];

  snprintf (msg, sizeof msg, "%s: %s", what, strerror (e));
  set_error_text (msg);
}

static void
set_healthy (void)
{
  pthread_mutex_lock (&A.mu);
  if (!A.healthy)
    sbx_info ("audit log: writable again");
  A.healthy = 1;
  A.error[0] = '\0';
  pthread_mutex_unlock (&A.mu);
}

/* ---- files ------------------------------------------------------------- */

/* "audit.log.N" -> N; 0 for anything else. */
static unsigned
rotated_index (const char *name)
{
  static const char prefix[] = SBX_AUDIT_FILE ".";
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

static unsigned
highest_rotated (int dir)
{
  int fd = openat (dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d;
  struct dirent *de;
  unsigned max = 0;

  if (fd < 0)
    return 0;
  d = fdopendir (fd);
  if (d == NULL)
    {
      close (fd);
      return 0;
    }
  while ((de = readdir (d)) != NULL)
    {
      unsigned n = rotated_index (de->d_name);
      if (n > max)
        max = n;
    }
  closedir (d);
  return max;
}

/* The last complete line of dir/name: 1 and its seq and hash, 0 when the
   file has none (or is absent), -1 on a read error. *torn: bytes after
   the last newline. */
static int
last_record (int dir, const char *name, uint64_t *seq, unsigned char hash[SHA256_DIGEST_LENGTH],
             uint64_t *torn, sbx_error_t **err)
{
  cleanup_close int fd = openat (dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_free char *buf = NULL;
  struct stat st;
  size_t n, end, start;
  off_t off;
  ssize_t got;
  json_t *o, *s;

  *torn = 0;
  if (fd < 0)
    {
      if (errno == ENOENT)
        return 0;
      return sbx_err_sys (err, errno, "open `%s`", name);
    }
  if (fstat (fd, &st) < 0)
    return sbx_err_sys (err, errno, "stat `%s`", name);
  if (st.st_size == 0)
    return 0;
  n = st.st_size > TAIL_MAX ? TAIL_MAX : (size_t) st.st_size;
  off = st.st_size - (off_t) n;
  buf = malloc (n + 1);
  if (buf == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "out of memory");
  got = pread (fd, buf, n, off);
  if (got != (ssize_t) n)
    return sbx_err_sys (err, got < 0 ? errno : EIO, "read `%s`", name);
  end = n;
  while (end > 0 && buf[end - 1] != '\n')
    end--;
  *torn = n - end;
  if (end == 0)
    return 0;
  end--; /* the newline */
  start = end;
  while (start > 0 && buf[start - 1] != '\n')
    start--;
  if (start == 0 && off > 0)
    return sbx_err (err, SBX_E_SYSTEM, "`%s`: the last record is longer than %d bytes", name,
                    TAIL_MAX);
  SHA256 ((const unsigned char *) buf + start, end - start, hash);
  o = json_loadb (buf + start, end - start, 0, NULL);
  s = json_object_get (o, "seq");
  if (!json_is_integer (s) || json_integer_value (s) < 1)
    {
      json_decref (o);
      return sbx_err (err, SBX_E_SYSTEM,
                      "`%s`: the last record has no seq (run `sbx audit verify`)", name);
    }
  *seq = (uint64_t) json_integer_value (s);
  json_decref (o);
  return 1;
}

static int
open_current (sbx_error_t **err)
{
  struct stat st;

  A.fd = openat (A.dir, SBX_AUDIT_FILE, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                 0600);
  if (A.fd < 0)
    return sbx_err_sys (err, errno, "open `" SBX_AUDIT_DIR "/" SBX_AUDIT_FILE "`");
  if (fstat (A.fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (A.fd);
      A.fd = -1;
      return sbx_err (err, SBX_E_SYSTEM, "`" SBX_AUDIT_FILE "` is not a regular file");
    }
  A.size = (uint64_t) st.st_size;
  return 0;
}

/* audit.log -> audit.log.N, and a new audit.log. */
static int
rotate (char *previous, size_t cap, sbx_error_t **err)
{
  snprintf (previous, cap, SBX_AUDIT_FILE ".%u", A.next_index);
  if (A.fd >= 0)
    {
      int synced = fdatasync (A.fd);
      int e = errno;

      close (A.fd);
      A.fd = -1;
      /* Nothing open holds unsynced data now: the writer's periodic sync
         has no file to sync until open_current gives it one. */
      A.dirty = 0;
      if (synced < 0)
        return sbx_err_sys (err, e, "fdatasync `" SBX_AUDIT_FILE "` before its rotation");
    }
  if (renameat (A.dir, SBX_AUDIT_FILE, A.dir, previous) < 0)
    return sbx_err_sys (err, errno, "rename `%s` to `%s`", SBX_AUDIT_FILE, previous);
  A.next_index++;
  if (open_current (err) < 0)
    return -1;
  fsync (A.dir);
  return 0;
}

/* ---- the writer -------------------------------------------------------- */

/* Number, chain and dump o. NULL when out of memory. */
static char *
format_line (json_t *o, uint64_t seq, size_t *len)
{
  char prev[65];
  char *text;

  sbx_hex_encode (A.prev, sizeof A.prev, prev);
  if (json_object_set_new (o, "seq", json_integer ((json_int_t) seq)) < 0
      || json_object_set_new (o, "prev", json_string (prev)) < 0)
    return NULL;
  text = json_dumps (o, JSON_COMPACT | JSON_SORT_KEYS);
  if (text)
    *len = strlen (text);
  return text;
}

/* Write one record (the next seq), rotating first when it would not fit.
   -1: nothing of it is in the file (an I/O error, now the log's state);
   -2: no memory to format it (tried again soon: the log is only behind). */
static int
write_record (json_t *o)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  ssize_t w;

  if (A.fd < 0)
    {
      sbx_error_t *err = NULL;
      if (open_current (&err) < 0)
        {
          set_error_text (err->msg);
          sbx_error_free (err);
          return -1;
        }
    }
  text = format_line (o, A.seq + 1, &len);
  if (text == NULL)
    return -2;
  if (A.size > 0 && A.size + len + 1 > A.max_size)
    {
      char previous[64];
      sbx_error_t *err = NULL;
      json_t *r = json_object ();
      int rc;

      if (r == NULL)
        return -2;
      if (rotate (previous, sizeof previous, &err) < 0)
        {
          json_decref (r);
          set_error_text (err->msg);
          sbx_error_free (err);
          return -1; /* the next write opens audit.log again */
        }
      json_object_set_new (r, "previous", json_string (previous));
      sbx_audit_format_time (real_ms (), previous);
      json_object_set_new (r, "time", json_string (previous));
      json_object_set_new (r, "kind", json_string ("rotated"));
      rc = write_record (r);
      json_decref (r);
      if (rc < 0)
        return rc;
      free (text);
      text = format_line (o, A.seq + 1, &len);
      if (text == NULL)
        return -2;
    }
  text[len] = '\n';
  /* One write: with O_APPEND the line lands whole at the end. */
  w = write (A.fd, text, len + 1);
  if (w != (ssize_t) (len + 1))
    {
      int e = w < 0 ? errno : ENOSPC;
      /* A part of a line would break the chain for good: take it back. */
      if (w > 0 && ftruncate (A.fd, (off_t) A.size) < 0)
        sbx_error ("audit log: cannot remove a partial record: %s", strerror (errno));
      set_error (e, "write");
      return -1;
    }
  A.size += len + 1;
  pthread_mutex_lock (&A.mu);
  A.seq++;
  pthread_mutex_unlock (&A.mu);
  SHA256 ((const unsigned char *) text, len, A.prev);
  A.dirty = 1;
  return 0;
}

static int
write_gap (uint64_t n)
{
  json_t *o = json_object ();
  char when[32];
  int rc;

  if (o == NULL)
    return -2;
  sbx_audit_format_time (real_ms (), when);
  json_object_set_new (o, "kind", json_string ("dropped"));
  json_object_set_new (o, "time", json_string (when));
  json_object_set_new (o, "count", json_integer ((json_int_t) n));
  rc = write_record (o);
  if (rc == 0)
    {
      pthread_mutex_lock (&A.mu);
      A.dropped -= n;
      pthread_mutex_unlock (&A.mu);
    }
  json_decref (o);
  return rc;
}

/* When the writer must sync next (CLOCK_REALTIME, for the cond wait). */
static void
deadline (struct timespec *ts, int64_t in_ms)
{
  clock_gettime (CLOCK_REALTIME, ts);
  ts->tv_sec += in_ms / 1000;
  ts->tv_nsec += (in_ms % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000)
    {
      ts->tv_sec++;
      ts->tv_nsec -= 1000000000;
    }
}

static void (*anchor_fn) (uint64_t seq, const unsigned char hash[32]);

void
sbx_audit_set_anchor (void (*fn) (uint64_t seq, const unsigned char hash[32]))
{
  anchor_fn = fn;
}

/* What is synced now, for the anchor (the writer's own A.seq and A.prev). */
static void
anchor (void)
{
  uint64_t seq;

  pthread_mutex_lock (&A.mu);
  seq = A.seq;
  pthread_mutex_unlock (&A.mu);
  if (anchor_fn && seq > 0)
    anchor_fn (seq, A.prev);
}

static void *
writer_main (void *arg)
{
  (void) arg;
  pthread_mutex_lock (&A.mu);
  for (;;)
    {
      struct entry *e;
      uint64_t dropped;
      int failed = 0;
      struct timespec ts;

      while (A.head == NULL && A.dropped == 0 && !A.stopping)
        {
          int64_t left = A.last_sync_mono + 1000 - mono_ms ();
          if (!A.dirty)
            pthread_cond_wait (&A.cond, &A.mu);
          else if (left <= 0)
            break;
          else
            {
              deadline (&ts, left);
              pthread_cond_timedwait (&A.cond, &A.mu, &ts);
            }
        }
      dropped = A.dropped;
      A.cause_known = 0; /* a new attempt: its first failure is its cause */
      pthread_mutex_unlock (&A.mu);

      if (dropped)
        failed = write_gap (dropped);
      /* One at a time: producers append while we write. */
      while (!failed)
        {
          pthread_mutex_lock (&A.mu);
          e = A.head;
          pthread_mutex_unlock (&A.mu);
          if (e == NULL)
            break;
          failed = write_record (e->obj);
          if (failed < 0)
            break;
          pthread_mutex_lock (&A.mu);
          A.head = e->next;
          if (A.head == NULL)
            A.tail = &A.head;
          A.queued--;
          pthread_mutex_unlock (&A.mu);
          json_decref (e->obj);
          free (e);
        }
      if (!failed)
        set_healthy ();
      /* Only a successful write sets dirty, and every path that closes
         the file clears it (rotate): a sync never meets a closed fd. */
      assert (!A.dirty || A.fd >= 0);
      if (A.dirty && (failed == -1 || mono_ms () - A.last_sync_mono >= 1000))
        {
          if (fdatasync (A.fd) < 0)
            set_error (errno, "fdatasync");
          else
            anchor ();
          A.dirty = 0;
          A.last_sync_mono = mono_ms ();
        }
      pthread_mutex_lock (&A.mu);
      if (A.stopping && (failed || A.head == NULL))
        break;
      if (failed)
        {
          /* Again in a second (a full disk may get space), or soon when
             memory was short; the queue keeps the records meanwhile, up
             to its bound. */
          deadline (&ts, failed == -2 ? 10 : 1000);
          pthread_cond_timedwait (&A.cond, &A.mu, &ts);
        }
    }
  pthread_mutex_unlock (&A.mu);
  if (A.fd >= 0 && fdatasync (A.fd) == 0)
    anchor ();
  return NULL;
}

/* ---- reading (GET /v1/audit) ------------------------------------------ */

/* Append file `name`'s matching records to out; 1 when limit was hit. */
static int
query_file (int dir, const char *name, const char *sandbox, uint64_t after_seq, size_t limit,
            json_t *out, sbx_error_t **err)
{
  int fd = openat (dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  FILE *fp;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int full = 0;

  if (fd < 0)
    return errno == ENOENT ? 0 : sbx_err_sys (err, errno, "open `%s`", name);
  fp = fdopen (fd, "r");
  if (fp == NULL)
    {
      close (fd);
      return sbx_err_sys (err, errno, "open `%s`", name);
    }
  while ((len = getline (&line, &cap, fp)) > 0)
    {
      json_t *o, *s;
      if (line[len - 1] != '\n')
        break; /* being written */
      o = json_loadb (line, (size_t) len - 1, 0, NULL);
      s = json_object_get (o, "sandbox");
      if (o == NULL || (uint64_t) json_integer_value (json_object_get (o, "seq")) <= after_seq
          || (sandbox && (!json_is_string (s) || strcmp (json_string_value (s), sandbox) != 0)))
        {
          json_decref (o);
          continue;
        }
      if (json_array_size (out) >= limit)
        {
          json_decref (o);
          full = 1;
          break;
        }
      json_array_append_new (out, o);
    }
  free (line);
  fclose (fp);
  return full;
}

json_t *
sbx_audit_query (const char *sandbox, uint64_t after_seq, size_t limit, sbx_error_t **err)
{
  cleanup_close int dir = -1;
  json_t *records, *o;
  unsigned top, first, i;
  int rc = 0;

  pthread_mutex_lock (&A.mu);
  if (A.open)
    dir = dup (A.dir);
  pthread_mutex_unlock (&A.mu);
  if (dir < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE, "the audit log is not open"), NULL;
  records = json_array ();
  if (records == NULL)
    return sbx_err_oom (err), NULL;
  /* From the newest rotated file back to the first that reaches past
     after_seq; then forward from there. */
  top = highest_rotated (dir);
  for (first = top; first > 0; first--)
    {
      char name[64];
      uint64_t seq = 0, torn;
      unsigned char h[SHA256_DIGEST_LENGTH];
      snprintf (name, sizeof name, SBX_AUDIT_FILE ".%u", first);
      if (last_record (dir, name, &seq, h, &torn, NULL) == 1 && seq <= after_seq)
        break;
    }
  for (i = first ? first + 1 : 1; i <= top && rc == 0; i++)
    {
      char name[64];
      snprintf (name, sizeof name, SBX_AUDIT_FILE ".%u", i);
      rc = query_file (dir, name, sandbox, after_seq, limit, records, err);
    }
  if (rc == 0)
    rc = query_file (dir, SBX_AUDIT_FILE, sandbox, after_seq, limit, records, err);
  if (rc < 0)
    {
      json_decref (records);
      return NULL;
    }
  o = json_object ();
  json_object_set_new (o, "records", records);
  json_object_set_new (o, "more", json_boolean (rc == 1));
  return o;
}

/* ---- open and close ---------------------------------------------------- */

int
sbx_audit_open (const char *state_dir, uint64_t max_size, sbx_error_t **err)
{
  cleanup_close int sd = -1;
  uint64_t torn = 0, seq = 0;
  unsigned char hash[SHA256_DIGEST_LENGTH];
  unsigned top, i;
  int rc;
  char previous[64] = "";

  if (A.open)
    return sbx_err (err, SBX_E_SYSTEM, "the audit log is already open");
  memset (A.prev, 0, sizeof A.prev);
  A.seq = 0;
  A.max_size = max_size < 4096 ? 4096 : max_size;
  sd = open (state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sd < 0)
    return sbx_err_sys (err, errno, "open `%s`", state_dir);
  /* Made by the parent (the front end may not mkdir); tests make it here. */
  if (mkdirat (sd, SBX_AUDIT_DIR, 0700) < 0 && errno != EEXIST && errno != EPERM)
    return sbx_err_sys (err, errno, "create `%s/" SBX_AUDIT_DIR "`", state_dir);
  A.dir = openat (sd, SBX_AUDIT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (A.dir < 0)
    return sbx_err_sys (err, errno, "open `%s/" SBX_AUDIT_DIR "`", state_dir);
  top = highest_rotated (A.dir);
  A.next_index = top + 1;

  /* Continue from the newest complete record: in audit.log, else in the
     newest rotated file that has one. */
  rc = last_record (A.dir, SBX_AUDIT_FILE, &seq, hash, &torn, err);
  for (i = top; rc == 0 && i > 0; i--)
    {
      char name[64];
      uint64_t t;
      snprintf (name, sizeof name, SBX_AUDIT_FILE ".%u", i);
      rc = last_record (A.dir, name, &seq, hash, &t, err);
    }
  if (rc < 0)
    goto fail;
  if (rc == 1)
    {
      A.seq = seq;
      memcpy (A.prev, hash, sizeof hash);
    }
  if (torn)
    {
      /* A line cut short (a power loss during a write): the file is kept
         as it is, as evidence, and the chain goes on in a new one from
         the last whole record. `sbx audit verify` reports the cut line. */
      sbx_warn ("audit log: `%s` ends with %llu bytes of a partial record; keeping it as a"
                " rotated file",
                SBX_AUDIT_FILE, (unsigned long long) torn);
      if (rotate (previous, sizeof previous, err) < 0)
        goto fail;
    }
  else if (open_current (err) < 0)
    goto fail;
  A.head = NULL;
  A.tail = &A.head;
  A.queued = 0;
  A.dropped = 0;
  A.dropped_total = 0;
  A.healthy = 1;
  A.error[0] = '\0';
  A.stopping = 0;
  A.dirty = 0;
  A.last_sync_mono = mono_ms ();
  A.open = 1;
  if (pthread_create (&A.thread, NULL, writer_main, NULL) != 0)
    {
      A.open = 0;
      sbx_err (err, SBX_E_SYSTEM, "cannot start the audit writer");
      goto fail;
    }
  {
    json_t *o = json_object ();
    json_object_set_new (o, "pid", json_integer (getpid ()));
    if (torn)
      {
        json_object_set_new (o, "previous", json_string (previous));
        json_object_set_new (o, "partial_bytes", json_integer ((json_int_t) torn));
      }
    sbx_audit_record ("daemon_started", o);
  }
  return 0;
fail:
  if (A.fd >= 0)
    close (A.fd);
  A.fd = -1;
  close (A.dir);
  A.dir = -1;
  return -1;
}

void
sbx_audit_close (void)
{
  pthread_mutex_lock (&A.mu);
  if (!A.open)
    {
      pthread_mutex_unlock (&A.mu);
      return;
    }
  pthread_mutex_unlock (&A.mu);
  sbx_audit_record ("daemon_stopped", NULL);
  pthread_mutex_lock (&A.mu);
  A.stopping = 1;
  pthread_cond_signal (&A.cond);
  pthread_mutex_unlock (&A.mu);
  pthread_join (A.thread, NULL);
  pthread_mutex_lock (&A.mu);
  while (A.head)
    {
      struct entry *e = A.head;
      A.head = e->next;
      json_decref (e->obj);
      free (e);
    }
  A.tail = &A.head;
  A.queued = 0;
  A.open = 0;
  A.stopping = 0;
  pthread_mutex_unlock (&A.mu);
  if (A.fd >= 0)
    close (A.fd);
  A.fd = -1;
  if (A.dir >= 0)
    close (A.dir);
  A.dir = -1;
}
