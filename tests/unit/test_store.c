/* Unit tests for src/core/store.c and src/core/keys.c on a temporary
 * SQLite file: sandbox records (insert, expiry, end, end of all running
 * after a restart, pruning) and API keys (shape, check, list, delete,
 * tenants). What the store wrote is read back with a separate SQLite
 * connection, and the database files are searched byte by byte to show
 * that a key is never stored, only its SHA-256.
 */
#include "core/keys.h"
#include "core/store.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/sha.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

static char tmp[64];
static char db_path[96];
static const uint8_t test_key[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                     17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
static const uint8_t other_key[32] = {32, 31, 30};

/*============================ Helpers ================================== */

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st;
  (void) flag;
  (void) ftw;
  return remove (path);
}

/* tmp: a fresh directory; db_path: sbx.db in it (not made yet). */
static int
fresh_db_path (void)
{
  snprintf (tmp, sizeof tmp, "/tmp/sbx-test-store-XXXXXX");
  if (mkdtemp (tmp) == NULL)
    return -1;
  snprintf (db_path, sizeof db_path, "%s/sbx.db", tmp);
  return 0;
}

/* A fresh store in a fresh directory for each test; removed afterwards. */
static int
with_store (int (*body) (struct sbx_store *st))
{
  struct sbx_store *st = NULL;
  sbx_error_t *err = NULL;
  int rc;

  if (fresh_db_path () < 0)
    return -1;
  if (sbx_store_open (db_path, test_key, &st, &err) < 0)
    {
      fprintf (stderr, "#   open: %s\n", err->msg);
      sbx_error_free (err);
      rc = -1;
    }
  else
    rc = body (st);
  sbx_store_close (st);
  nftw (tmp, remove_one, 8, FTW_DEPTH | FTW_PHYS);
  return rc;
}

#define STORE_TEST(name)                                                       \
  static int name##_with (struct sbx_store *st);                               \
  static int name (void) { return with_store (name##_with); }                  \
  static int name##_with (struct sbx_store *st)

static int
failed_with (int rc, sbx_error_t **err, enum sbx_error_kind kind)
{
  int ok = rc == -1 && *err != NULL && (*err)->kind == kind;

  if (!ok)
    fprintf (stderr, "#   rc %d, error: kind %d `%s` (want kind %d)\n", rc,
             *err ? (int) (*err)->kind : 0, *err ? (*err)->msg : "(none)", (int) kind);
  sbx_error_free (*err);
  *err = NULL;
  return ok ? 0 : -1;
}

/* One value from the database through a connection of our own, as text
   ("NULL" for NULL, "(none)" without a row). */
static const char *
query (const char *sql)
{
  static char out[1024];
  sqlite3 *db = NULL;
  sqlite3_stmt *stmt = NULL;

  snprintf (out, sizeof out, "(error)");
  if (sqlite3_open_v2 (db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK
      || sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL) != SQLITE_OK)
    fprintf (stderr, "#   query `%s`: %s\n", sql, db ? sqlite3_errmsg (db) : "no db");
  else if (sqlite3_step (stmt) != SQLITE_ROW)
    snprintf (out, sizeof out, "(none)");
  else if (sqlite3_column_type (stmt, 0) == SQLITE_NULL)
    snprintf (out, sizeof out, "NULL");
  else
    snprintf (out, sizeof out, "%s", (const char *) sqlite3_column_text (stmt, 0));
  sqlite3_finalize (stmt);
  sqlite3_close (db);
  return out;
}

static struct sbx_sandbox_record
record (const char *id)
{
  struct sbx_sandbox_record r;

  memset (&r, 0, sizeof r);
  r.id = id;
  r.tenant = "acme";
  r.template_name = "base";
  r.user = "user";
  r.created_ms = 1700000000000LL;
  r.expires_ms = 1700000300000LL;
  r.memory = 512ULL << 20;
  r.disk = 1ULL << 30;
  r.cpu_milli = 1500;
  r.pids = 256;
  r.env_json = "{\"A\":\"1\"}";
  r.metadata_json = "{}";
  r.slot = 3;
  r.uid_base = 1000000;
  r.init_pid = 4242;
  return r;
}

static int
insert (struct sbx_store *st, const char *id)
{
  struct sbx_sandbox_record r = record (id);
  sbx_error_t *err = NULL;

  if (sbx_store_sandbox_insert (st, &r, &err) < 0)
    {
      fprintf (stderr, "#   insert %s: %s\n", id, err->msg);
      sbx_error_free (err);
      return -1;
    }
  return 0;
}

static long long
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1 if `needle` occurs in the file at path. */
static int
file_contains (const char *path, const void *needle, size_t n)
{
  static char buf[1 << 22];
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t got;

  if (fd < 0)
    return 0;
  got = read (fd, buf, sizeof buf);
  close (fd);
  return got > 0 && memmem (buf, (size_t) got, needle, n) != NULL;
}

/*============================ Sandboxes ================================ */

STORE_TEST (test_schema)
{
  (void) st;
  CHECK_STR (query ("PRAGMA journal_mode"), "wal");
  CHECK_STR (query ("SELECT count(*) FROM sandboxes"), "0");
  CHECK_STR (query ("SELECT count(*) FROM api_keys"), "0");
  CHECK_STR (query ("SELECT count(*) FROM sqlite_master WHERE name = 'sandboxes_state'"), "1");
  return 0;
}

STORE_TEST (test_insert)
{
  struct sbx_sandbox_record r = record ("sb1");
  sbx_error_t *err = NULL;

  CHECK (sbx_store_sandbox_insert (st, &r, &err) == 0 && err == NULL);
  CHECK_STR (query ("SELECT id || '|' || tenant || '|' || template || '|' || user || '|' || state"
                    " FROM sandboxes"),
             "sb1|acme|base|user|running");
  CHECK_STR (query ("SELECT created_ms || ' ' || expires_ms || ' ' || memory || ' ' || cpu_milli"
                    " || ' ' || pids || ' ' || disk FROM sandboxes"),
             "1700000000000 1700000300000 536870912 1500 256 1073741824");
  /* The environment is sealed (test_sealed_in_the_file). */
  CHECK_STR (query ("SELECT substr (env, 1, 3) || metadata || ' ' || slot || ' ' || uid_base"
                    " || ' ' || init_pid FROM sandboxes"),
             "s1:{} 3 1000000 4242");
  CHECK_STR (query ("SELECT ended_ms FROM sandboxes"), "NULL");
  CHECK_STR (query ("SELECT end_reason FROM sandboxes"), "NULL");
  /* The id is a primary key. */
  CHECK (failed_with (sbx_store_sandbox_insert (st, &r, &err), &err, SBX_E_SYSTEM) == 0);
  CHECK_STR (query ("SELECT count(*) FROM sandboxes"), "1");
  return 0;
}

/* Values are bound, never spliced into SQL. */
STORE_TEST (test_insert_quotes)
{
  struct sbx_sandbox_record r = record ("a'b\"c;--");
  sbx_error_t *err = NULL;

  r.metadata_json = "{\"k\":\"'); DROP TABLE sandboxes; --\"}";
  CHECK (sbx_store_sandbox_insert (st, &r, &err) == 0);
  CHECK_STR (query ("SELECT id FROM sandboxes"), "a'b\"c;--");
  CHECK_STR (query ("SELECT metadata FROM sandboxes"), "{\"k\":\"'); DROP TABLE sandboxes; --\"}");
  CHECK (sbx_store_sandbox_end (st, "a'b\"c;--", "killed", "it's done", 5, &err) == 0);
  CHECK_STR (query ("SELECT end_reason FROM sandboxes"), "it's done");
  return 0;
}

/* Large unsigned limits survive as 64-bit integers. */
STORE_TEST (test_insert_extremes)
{
  struct sbx_sandbox_record r = record ("big");
  sbx_error_t *err = NULL;

  r.memory = (uint64_t) INT64_MAX;
  r.cpu_milli = UINT32_MAX;
  r.pids = UINT32_MAX;
  r.slot = UINT32_MAX;
  r.created_ms = INT64_MIN;
  r.init_pid = -1;
  CHECK (sbx_store_sandbox_insert (st, &r, &err) == 0);
  CHECK_STR (query ("SELECT memory FROM sandboxes"), "9223372036854775807");
  CHECK_STR (query ("SELECT cpu_milli || ' ' || pids || ' ' || slot FROM sandboxes"),
             "4294967295 4294967295 4294967295");
  CHECK_STR (query ("SELECT created_ms || ' ' || init_pid FROM sandboxes"),
             "-9223372036854775808 -1");
  return 0;
}

STORE_TEST (test_set_expiry)
{
  sbx_error_t *err = NULL;

  CHECK (insert (st, "sb1") == 0 && insert (st, "sb2") == 0);
  CHECK (sbx_store_sandbox_set_expiry (st, "sb1", 1800000000000LL, 600000, &err) == 0);
  CHECK_STR (query ("SELECT expires_ms || ' ' || timeout_ms FROM sandboxes WHERE id = 'sb1'"),
             "1800000000000 600000");
  CHECK_STR (query ("SELECT expires_ms FROM sandboxes WHERE id = 'sb2'"), "1700000300000");
  /* Unknown ids change nothing and are not an error here. */
  CHECK (sbx_store_sandbox_set_expiry (st, "nope", 1, 1, &err) == 0 && err == NULL);
  return 0;
}

STORE_TEST (test_end)
{
  sbx_error_t *err = NULL;

  CHECK (insert (st, "sb1") == 0 && insert (st, "sb2") == 0);
  CHECK (sbx_store_sandbox_end (st, "sb1", "killed", "killed by the API", 1700000100000LL, &err)
         == 0);
  CHECK_STR (query ("SELECT state || '|' || ended_ms || '|' || end_reason FROM sandboxes"
                    " WHERE id = 'sb1'"),
             "killed|1700000100000|killed by the API");
  CHECK_STR (query ("SELECT state FROM sandboxes WHERE id = 'sb2'"), "running");
  CHECK_STR (query ("SELECT ended_ms FROM sandboxes WHERE id = 'sb2'"), "NULL");
  /* Only a running record ends: the first end stays. */
  CHECK (sbx_store_sandbox_end (st, "sb1", "timeout", "later", 1700000200000LL, &err) == 0);
  CHECK_STR (query ("SELECT state || '|' || ended_ms || '|' || end_reason FROM sandboxes"
                    " WHERE id = 'sb1'"),
             "killed|1700000100000|killed by the API");
  /* A NULL reason is stored as NULL. */
  CHECK (sbx_store_sandbox_end (st, "sb2", "exited", NULL, 7, &err) == 0);
  CHECK_STR (query ("SELECT end_reason FROM sandboxes WHERE id = 'sb2'"), "NULL");
  CHECK (sbx_store_sandbox_end (st, "nope", "killed", "x", 1, &err) == 0 && err == NULL);
  return 0;
}

struct seen
{
  char ids[256];
  int ok;
};

static void
collect_running (const struct sbx_sandbox_record *r, void *arg)
{
  struct seen *s = arg;

  /* Every field a restarted daemon needs comes back as stored. */
  if (strcmp (r->tenant, "acme") == 0 && strcmp (r->template_name, "base") == 0
      && strcmp (r->user, "user") == 0 && r->created_ms == 1700000000000LL
      && r->expires_ms == 1700000300000LL && r->memory == (512ULL << 20) && r->disk == (1ULL << 30)
      && r->cpu_milli == 1500 && r->pids == 256 && strcmp (r->env_json, "{\"A\":\"1\"}") == 0
      && strcmp (r->metadata_json, "{}") == 0 && r->slot == 3 && r->uid_base == 1000000
      && r->init_pid == 4242)
    s->ok++;
  strncat (s->ids, r->id, sizeof s->ids - strlen (s->ids) - 2);
  strncat (s->ids, " ", sizeof s->ids - strlen (s->ids) - 1);
}

STORE_TEST (test_running)
{
  sbx_error_t *err = NULL;
  struct seen seen = {"", 0};

  CHECK (insert (st, "a") == 0 && insert (st, "b") == 0 && insert (st, "c") == 0);
  CHECK (sbx_store_sandbox_end (st, "b", "killed", "by hand", 10, &err) == 0);
  CHECK (sbx_store_sandbox_running (st, collect_running, &seen, &err) == 0);
  CHECK_STR (seen.ids, "a c ");
  CHECK (seen.ok == 2);
  return 0;
}

static void
collect_pending (const struct sbx_sandbox_record *r, void *arg)
{
  struct seen *s = arg;

  strncat (s->ids, r->id, sizeof s->ids - strlen (s->ids) - 3);
  strncat (s->ids, r->pending[0] ? "=p " : "=c ", sizeof s->ids - strlen (s->ids) - 1);
}

/* A fork's records (core/fork.c, core/adopt.c): pending under the fork's
   tag until one update completes all of them; another fork's stay. */
STORE_TEST (test_pending_fork)
{
  sbx_error_t *err = NULL;
  struct seen seen = {"", 0};
  struct sbx_sandbox_record r;

  CHECK (insert (st, "plain") == 0);
  r = record ("f1");
  r.pending = "fork of src 01";
  CHECK (sbx_store_sandbox_insert (st, &r, &err) == 0);
  r = record ("f2");
  r.pending = "fork of src 01";
  CHECK (sbx_store_sandbox_insert (st, &r, &err) == 0);
  r = record ("g1");
  r.pending = "fork of src 02";
  CHECK (sbx_store_sandbox_insert (st, &r, &err) == 0);
  CHECK (sbx_store_sandbox_running (st, collect_pending, &seen, &err) == 0);
  CHECK_STR (seen.ids, "plain=c f1=p f2=p g1=p ");
  CHECK (sbx_store_sandbox_complete (st, "fork of src 01", &err) == 0);
  seen.ids[0] = '\0';
  CHECK (sbx_store_sandbox_running (st, collect_pending, &seen, &err) == 0);
  CHECK_STR (seen.ids, "plain=c f1=c f2=c g1=p ");
  CHECK_STR (query ("SELECT pending FROM sandboxes WHERE id = 'g1'"), "fork of src 02");
  return 0;
}

static void
list_snapshots (const struct sbx_snapshot_record *r, void *arg)
{
  char *out = arg;
  char one[160];

  snprintf (one, sizeof one, "%s=%s%llu ", r->name, r->pending ? "p" : "c",
            (unsigned long long) r->bytes);
  strncat (out, one, 255 - strlen (out));
}

/* A snapshot's record (core/snapshot.c): pending while it is saved (its
   name taken), completed with what it holds; a delete names which kind
   it removes, so a client's delete never takes a save in progress. */
STORE_TEST (test_pending_snapshot)
{
  sbx_error_t *err = NULL;
  struct sbx_snapshot_record r;
  char seen[256] = "";

  memset (&r, 0, sizeof r);
  snprintf (r.tenant, sizeof r.tenant, "acme");
  snprintf (r.name, sizeof r.name, "s1");
  snprintf (r.template_name, sizeof r.template_name, "base");
  snprintf (r.source, sizeof r.source, "sb1");
  r.pending = 1;
  CHECK (sbx_store_snapshot_insert (st, &r, &err) == 0);
  /* The name is taken: a second record of it is refused. */
  CHECK (failed_with (sbx_store_snapshot_insert (st, &r, &err), &err, SBX_E_SYSTEM) == 0);
  CHECK (failed_with (sbx_store_snapshot_delete (st, "acme", "s1", 0, &err), &err,
                      SBX_E_NOT_FOUND)
         == 0);
  CHECK (sbx_store_snapshot_list (st, "acme", NULL, list_snapshots, seen, &err) == 0);
  CHECK_STR (seen, "s1=p0 ");
  r.bytes = 4096;
  r.files = 2;
  CHECK (sbx_store_snapshot_complete (st, &r, &err) == 0);
  seen[0] = '\0';
  CHECK (sbx_store_snapshot_list (st, "acme", NULL, list_snapshots, seen, &err) == 0);
  CHECK_STR (seen, "s1=c4096 ");
  /* Only once: a completed record is not pending any more. */
  CHECK (failed_with (sbx_store_snapshot_complete (st, &r, &err), &err, SBX_E_NOT_FOUND) == 0);
  CHECK (failed_with (sbx_store_snapshot_delete (st, "acme", "s1", 1, &err), &err,
                      SBX_E_NOT_FOUND)
         == 0);
  CHECK (sbx_store_snapshot_delete (st, "acme", "s1", 0, &err) == 0);
  CHECK_STR (query ("SELECT count(*) FROM snapshots"), "0");
  return 0;
}

static void
collect_hibernated (const struct sbx_sandbox_record *r, void *arg)
{
  struct seen *s = arg;

  strncat (s->ids, r->id, sizeof s->ids - strlen (s->ids) - 4);
  strncat (s->ids, r->hibernated ? "=h " : r->paused ? "=p " : "=r ",
           sizeof s->ids - strlen (s->ids) - 1);
}

static void
collect_kind (const struct sbx_sandbox_record *r, void *arg)
{
  struct seen *s = arg;
  char one[64];

  snprintf (one, sizeof one, "%s=%d ", r->id, r->hibernated);
  strncat (s->ids, one, sizeof s->ids - strlen (s->ids) - 1);
}

/* A hibernated VM's record (core/vm_hibernate.c, core/adopt.c): paused
   and hibernated in one update; a resume clears both, a lifetime change
   while paused neither; an ended record is not listed. */
STORE_TEST (test_hibernated)
{
  sbx_error_t *err = NULL;
  struct seen seen = {"", 0};

  CHECK (insert (st, "h") == 0 && insert (st, "p") == 0 && insert (st, "r") == 0
         && insert (st, "k") == 0);
  CHECK_STR (query ("SELECT group_concat(hibernated, '') FROM sandboxes"), "0000");
  CHECK (sbx_store_sandbox_set_hibernated (st, "h", SBX_HIBERNATED_MEMORY, 5000, 7, &err) == 0);
  CHECK_STR (query ("SELECT state || ' ' || hibernated || ' ' || remaining_ms || ' ' || expires_ms"
                    " FROM sandboxes WHERE id = 'h'"),
             "paused 1 5000 7");
  CHECK (sbx_store_sandbox_set_paused (st, "p", 1, 100, 8, &err) == 0);
  /* A new lifetime for a hibernated one keeps it hibernated. */
  CHECK (sbx_store_sandbox_set_paused (st, "h", 1, 9000, 7, &err) == 0);
  CHECK (sbx_store_sandbox_set_hibernated (st, "k", SBX_HIBERNATED_MEMORY, 1, 1, &err) == 0);
  CHECK (sbx_store_sandbox_end (st, "k", "killed", "x", 10, &err) == 0);
  CHECK (sbx_store_sandbox_running (st, collect_hibernated, &seen, &err) == 0);
  CHECK_STR (seen.ids, "h=h p=p r=r ");
  /* The resume. */
  CHECK (sbx_store_sandbox_set_paused (st, "h", 0, 0, 9, &err) == 0);
  CHECK_STR (query ("SELECT state || ' ' || hibernated FROM sandboxes WHERE id = 'h'"),
             "running 0");
  /* An ended or unknown record: NOT_FOUND. */
  CHECK (failed_with (sbx_store_sandbox_set_hibernated (st, "k", SBX_HIBERNATED_MEMORY, 1, 1, &err), &err,
                      SBX_E_NOT_FOUND)
         == 0);
  CHECK (failed_with (sbx_store_sandbox_set_hibernated (st, "nope", SBX_HIBERNATED_MEMORY, 1, 1, &err), &err,
                      SBX_E_NOT_FOUND)
         == 0);
  return 0;
}

/* A namespace sandbox paused with its files only (core/pause_files.c):
   hibernated 2, read back as such; booted again, its new init is kept and
   it is no longer hibernated but still paused (the resume says running). */
STORE_TEST (test_hibernated_filesystem)
{
  sbx_error_t *err = NULL;
  struct seen seen = {"", 0};

  CHECK (insert (st, "f") == 0);
  CHECK (sbx_store_sandbox_set_hibernated (st, "f", SBX_HIBERNATED_FILESYSTEM, 3000, 5, &err)
         == 0);
  CHECK_STR (query ("SELECT state || ' ' || hibernated FROM sandboxes WHERE id = 'f'"),
             "paused 2");
  CHECK (sbx_store_sandbox_running (st, collect_kind, &seen, &err) == 0);
  CHECK_STR (seen.ids, "f=2 ");
  CHECK (sbx_store_sandbox_set_init (st, "f", 4242, &err) == 0);
  CHECK_STR (query ("SELECT state || ' ' || hibernated || ' ' || init_pid FROM sandboxes"
                    " WHERE id = 'f'"),
             "paused 0 4242");
  CHECK (sbx_store_sandbox_end (st, "f", "killed", "x", 10, &err) == 0);
  CHECK (failed_with (sbx_store_sandbox_set_init (st, "f", 1, &err), &err, SBX_E_NOT_FOUND) == 0);
  return 0;
}

STORE_TEST (test_prune)
{
  sbx_error_t *err = NULL;

  CHECK (insert (st, "old") == 0 && insert (st, "edge") == 0 && insert (st, "new") == 0
         && insert (st, "running") == 0);
  CHECK (sbx_store_sandbox_end (st, "old", "exited", NULL, 100, &err) == 0);
  CHECK (sbx_store_sandbox_end (st, "edge", "exited", NULL, 200, &err) == 0);
  CHECK (sbx_store_sandbox_end (st, "new", "exited", NULL, 300, &err) == 0);
  /* Strictly before; running records are never pruned. */
  CHECK (sbx_store_sandbox_prune (st, 200, &err) == 0);
  CHECK_STR (query ("SELECT group_concat(id, ' ') FROM (SELECT id FROM sandboxes ORDER BY id)"),
             "edge new running");
  CHECK (sbx_store_sandbox_prune (st, INT64_MAX, &err) == 0);
  CHECK_STR (query ("SELECT group_concat(id, ' ') FROM sandboxes"), "running");
  return 0;
}

/* Records outlive the connection. */
static int
test_reopen (void)
{
  struct sbx_store *st = NULL;
  sbx_error_t *err = NULL;
  char key[SBX_KEY_LEN + 1], id[16], tenant[80];
  long long created;
  int rc = -1;

  CHECK (fresh_db_path () == 0);
  if (sbx_store_open (db_path, test_key, &st, &err) == 0 && insert (st, "kept") == 0
      && sbx_key_create (st, "acme", key, id, &created, &err) == 0)
    {
      sbx_store_close (st);
      st = NULL;
      if (sbx_store_open (db_path, test_key, &st, &err) == 0
          && sbx_key_check (st, key, tenant, sizeof tenant, &err) == 0
          && strcmp (tenant, "acme") == 0
          && strcmp (query ("SELECT id FROM sandboxes"), "kept") == 0)
        rc = 0;
    }
  if (err)
    fprintf (stderr, "#   %s\n", err->msg);
  sbx_error_free (err);
  sbx_store_close (st);
  nftw (tmp, remove_one, 8, FTW_DEPTH | FTW_PHYS);
  return rc;
}

static int
test_open_failures (void)
{
  struct sbx_store *st = NULL;
  sbx_error_t *err = NULL;

  CHECK (failed_with (sbx_store_open ("/nonexistent/sbx-test/sbx.db", test_key, &st, &err), &err,
                      SBX_E_SYSTEM)
         == 0);
  CHECK (st == NULL);
  CHECK (failed_with (sbx_store_open ("/", test_key, &st, &err), &err, SBX_E_SYSTEM) == 0);
  CHECK (st == NULL);
  /* Not a database. */
  snprintf (tmp, sizeof tmp, "/tmp/sbx-test-store-XXXXXX");
  CHECK (mkdtemp (tmp) != NULL);
  snprintf (db_path, sizeof db_path, "%s/junk.db", tmp);
  {
    int fd = open (db_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    char junk[4096];
    memset (junk, 'j', sizeof junk);
    CHECK (fd >= 0 && write (fd, junk, sizeof junk) == (ssize_t) sizeof junk);
    close (fd);
  }
  {
    int rc = sbx_store_open (db_path, test_key, &st, &err);
    nftw (tmp, remove_one, 8, FTW_DEPTH | FTW_PHYS);
    CHECK (failed_with (rc, &err, SBX_E_SYSTEM) == 0);
  }
  sbx_store_close (NULL);
  return 0;
}

/* A write the database cannot take in time (another writer holds it past
   the 5 s busy timeout) is a capacity error (429), not an internal one. */
STORE_TEST (test_busy_is_a_limit)
{
  sqlite3 *other = NULL;
  sbx_error_t *err = NULL;
  int rc;

  CHECK (sqlite3_open_v2 (db_path, &other, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
  CHECK (sqlite3_exec (other, "BEGIN IMMEDIATE; INSERT INTO api_keys VALUES"
                              " ('x', 't', x'00', 'p', 0);",
                       NULL, NULL, NULL)
         == SQLITE_OK);
  rc = sbx_store_sandbox_insert (st, &(struct sbx_sandbox_record){0}, &err);
  sqlite3_exec (other, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close (other);
  CHECK (failed_with (rc, &err, SBX_E_LIMIT) == 0);
  return 0;
}

/*============================ Keys ===================================== */

static int
is_lower_hex (const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

STORE_TEST (test_key_shape)
{
  char key[SBX_KEY_LEN + 8], id[16], prev[SBX_KEY_LEN + 1] = "";
  sbx_error_t *err = NULL;
  long long created, before = now_ms ();

  CHECK (SBX_KEY_LEN == 44);
  for (int i = 0; i < 20; i++)
    {
      memset (key, 'X', sizeof key);
      memset (id, 'X', sizeof id);
      CHECK (sbx_key_create (st, "acme", key, id, &created, &err) == 0 && err == NULL);
      CHECK (strlen (key) == SBX_KEY_LEN);
      CHECK (key[SBX_KEY_LEN + 1] == 'X');
      CHECK (memcmp (key, "e2b_", 4) == 0);
      CHECK (is_lower_hex (key + 4, 40));
      CHECK (strlen (id) == 10 && id[0] == 'k');
      for (int k = 1; k < 10; k++)
        CHECK ((id[k] >= 'a' && id[k] <= 'z') || (id[k] >= '0' && id[k] <= '9'));
      CHECK (created >= before && created <= now_ms ());
      CHECK (strcmp (key, prev) != 0);
      memcpy (prev, key, sizeof prev);
    }
  CHECK_STR (query ("SELECT count(*) FROM api_keys"), "20");
  CHECK_STR (query ("SELECT count(DISTINCT hash) || ' ' || count(DISTINCT id) FROM api_keys"),
             "20 20");
  return 0;
}

STORE_TEST (test_key_check)
{
  char key[SBX_KEY_LEN + 1], id[16], tenant[80], wrong[SBX_KEY_LEN + 1];
  sbx_error_t *err = NULL;
  long long created;

  CHECK (sbx_key_create (st, "acme", key, id, &created, &err) == 0);
  memset (tenant, 'X', sizeof tenant);
  CHECK (sbx_key_check (st, key, tenant, sizeof tenant, &err) == 0 && err == NULL);
  CHECK_STR (tenant, "acme");

  /* Every single-character change is another key. */
  for (size_t i = 0; i < SBX_KEY_LEN; i++)
    {
      memcpy (wrong, key, sizeof wrong);
      wrong[i] = wrong[i] == 'a' ? 'b' : 'a';
      CHECK (failed_with (sbx_key_check (st, wrong, tenant, sizeof tenant, &err), &err,
                          SBX_E_UNAUTHORIZED)
             == 0);
    }
  /* Upper case, a prefix, a suffix, the hex alone: all unknown. */
  {
    const char *variants[4];
    char upper[SBX_KEY_LEN + 1], longer[SBX_KEY_LEN + 2], prefix[SBX_KEY_LEN];
    for (size_t i = 0; i <= SBX_KEY_LEN; i++)
      upper[i] = (char) (key[i] >= 'a' && key[i] <= 'f' ? key[i] - 32 : key[i]);
    memcpy (longer, key, SBX_KEY_LEN);
    longer[SBX_KEY_LEN] = '0';
    longer[SBX_KEY_LEN + 1] = '\0';
    memcpy (prefix, key, SBX_KEY_LEN - 1);
    prefix[SBX_KEY_LEN - 1] = '\0';
    variants[0] = upper;
    variants[1] = longer;
    variants[2] = prefix;
    variants[3] = key + 4;
    for (size_t i = 0; i < ARRAY_SIZE (variants); i++)
      CHECK (failed_with (sbx_key_check (st, variants[i], tenant, sizeof tenant, &err), &err,
                          SBX_E_UNAUTHORIZED)
             == 0);
  }
  /* Missing or absurd. */
  CHECK (failed_with (sbx_key_check (st, NULL, tenant, sizeof tenant, &err), &err,
                      SBX_E_UNAUTHORIZED)
         == 0);
  CHECK (failed_with (sbx_key_check (st, "", tenant, sizeof tenant, &err), &err,
                      SBX_E_UNAUTHORIZED)
         == 0);
  {
    char huge[300];
    memset (huge, 'a', sizeof huge);
    huge[257] = '\0';
    CHECK (failed_with (sbx_key_check (st, huge, tenant, sizeof tenant, &err), &err,
                        SBX_E_UNAUTHORIZED)
           == 0);
    huge[256] = '\0';
    CHECK (failed_with (sbx_key_check (st, huge, tenant, sizeof tenant, &err), &err,
                        SBX_E_UNAUTHORIZED)
           == 0);
  }
  CHECK (failed_with (sbx_key_check (st, "e2b_0000000000000000000000000000000000000000", tenant,
                                     sizeof tenant, &err),
                      &err, SBX_E_UNAUTHORIZED)
         == 0);
  /* The tenant is cut to the caller's buffer. */
  CHECK (sbx_key_check (st, key, tenant, 3, &err) == 0);
  CHECK_STR (tenant, "ac");
  return 0;
}

/* Keys of several tenants, each mapping to its own. */
STORE_TEST (test_keys_per_tenant)
{
  static const char *const tenants[] = {"acme", "Globex-2", "a.b_c", "x"};
  char keys[4][SBX_KEY_LEN + 1], id[16], tenant[80];
  sbx_error_t *err = NULL;
  long long created;

  for (size_t i = 0; i < ARRAY_SIZE (tenants); i++)
    CHECK (sbx_key_create (st, tenants[i], keys[i], id, &created, &err) == 0);
  for (size_t i = 0; i < ARRAY_SIZE (tenants); i++)
    {
      CHECK (sbx_key_check (st, keys[i], tenant, sizeof tenant, &err) == 0);
      CHECK_STR (tenant, tenants[i]);
    }
  return 0;
}

static int
test_tenant_valid (void)
{
  static const char *const good[] = {
    "a", "acme", "ACME", "Acme-Corp_2.0", "0", "-", "_", ".", "..",
    "0123456789012345678901234567890123456789012345678901234567890123", /* 64 */
  };
  static const char *const bad[] = {
    NULL, "", "a b", "a/b", "a:b", "a@b", "a'b", "a\"b", "a;b", "\xc3\xa9", "a\nb", "a\tb",
    "01234567890123456789012345678901234567890123456789012345678901234", /* 65 */
  };

  for (size_t i = 0; i < ARRAY_SIZE (good); i++)
    if (!sbx_tenant_valid (good[i]))
      {
        fprintf (stderr, "#   `%s` refused\n", good[i]);
        return -1;
      }
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    if (sbx_tenant_valid (bad[i]))
      {
        fprintf (stderr, "#   `%s` accepted\n", bad[i]);
        return -1;
      }
  return 0;
}

STORE_TEST (test_key_create_bad_tenant)
{
  static const char *const bad[] = {"", "a b", "x'; DROP TABLE api_keys; --", "\xc3\xa9"};
  char key[SBX_KEY_LEN + 1], id[16];
  sbx_error_t *err = NULL;
  long long created;

  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    CHECK (failed_with (sbx_key_create (st, bad[i], key, id, &created, &err), &err, SBX_E_INVALID)
           == 0);
  CHECK (failed_with (sbx_key_create (st, NULL, key, id, &created, &err), &err, SBX_E_INVALID)
         == 0);
  CHECK_STR (query ("SELECT count(*) FROM api_keys"), "0");
  return 0;
}

STORE_TEST (test_key_list_and_delete)
{
  char key[3][SBX_KEY_LEN + 1], id[3][16], tenant[80];
  long long created[3];
  struct sbx_key_record *list = NULL;
  sbx_error_t *err = NULL;
  size_t n = 99;

  CHECK (sbx_store_key_list (st, &list, &n, &err) == 0);
  CHECK (n == 0);
  free (list);
  for (int i = 0; i < 3; i++)
    {
      struct timespec pause_ts = {0, 2000000};
      CHECK (sbx_key_create (st, i == 1 ? "other" : "acme", key[i], id[i], &created[i], &err)
             == 0);
      nanosleep (&pause_ts, NULL); /* distinct created_ms: the list's order */
    }
  CHECK (sbx_store_key_list (st, &list, &n, &err) == 0);
  CHECK (n == 3);
  for (int i = 0; i < 3; i++)
    {
      CHECK_STR (list[i].id, id[i]);
      CHECK_STR (list[i].tenant, i == 1 ? "other" : "acme");
      CHECK (strlen (list[i].prefix) == 8 && memcmp (list[i].prefix, key[i], 8) == 0);
      CHECK (list[i].created_ms == created[i]);
    }
  free (list);

  CHECK (sbx_store_key_delete (st, id[1], &err) == 0 && err == NULL);
  CHECK (failed_with (sbx_key_check (st, key[1], tenant, sizeof tenant, &err), &err,
                      SBX_E_UNAUTHORIZED)
         == 0);
  CHECK (sbx_key_check (st, key[0], tenant, sizeof tenant, &err) == 0);
  CHECK (failed_with (sbx_store_key_delete (st, id[1], &err), &err, SBX_E_NOT_FOUND) == 0);
  CHECK (failed_with (sbx_store_key_delete (st, "kdoesnotexi", &err), &err, SBX_E_NOT_FOUND) == 0);
  CHECK (failed_with (sbx_store_key_delete (st, "' OR '1'='1", &err), &err, SBX_E_NOT_FOUND) == 0);
  CHECK (sbx_store_key_list (st, &list, &n, &err) == 0);
  CHECK (n == 2);
  CHECK_STR (list[0].id, id[0]);
  CHECK_STR (list[1].id, id[2]);
  free (list);
  return 0;
}

/* Only the SHA-256 of a key is stored: no column, and no byte of the
   database or its WAL, holds the key (or its random part). */
STORE_TEST (test_key_not_stored)
{
  char key[SBX_KEY_LEN + 1], id[16], sql[512], hex[65];
  unsigned char hash[SHA256_DIGEST_LENGTH];
  sbx_error_t *err = NULL;
  long long created;
  char wal[128];

  CHECK (sbx_key_create (st, "acme", key, id, &created, &err) == 0);
  SHA256 ((const unsigned char *) key, SBX_KEY_LEN, hash);
  for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
    snprintf (hex + 2 * i, 3, "%02X", hash[i]);
  CHECK_STR (query ("SELECT hex(hash) FROM api_keys"), hex);
  CHECK_STR (query ("SELECT length(hash) FROM api_keys"), "32");
  snprintf (sql, sizeof sql, "SELECT prefix FROM api_keys");
  CHECK (strncmp (query (sql), key, 8) == 0 && strlen (query (sql)) == 8);
  /* No column of any row, as text, contains the key or its last 36
     characters (all of it past the stored prefix). */
  snprintf (sql, sizeof sql,
            "SELECT count(*) FROM api_keys WHERE instr(id || tenant || prefix || created_ms"
            " || hex(hash) || hash, '%s') > 0 OR instr(id || tenant || prefix || hash, '%s') > 0",
            key, key + 8);
  CHECK_STR (query (sql), "0");
  snprintf (wal, sizeof wal, "%s-wal", db_path);
  CHECK (!file_contains (db_path, key, SBX_KEY_LEN) && !file_contains (wal, key, SBX_KEY_LEN));
  CHECK (!file_contains (db_path, key + 8, SBX_KEY_LEN - 8)
         && !file_contains (wal, key + 8, SBX_KEY_LEN - 8));
  /* The digest is there (the search works). */
  CHECK (file_contains (db_path, hash, sizeof hash) || file_contains (wal, hash, sizeof hash));
  return 0;
}

/* The same digest twice (a key inserted twice) is refused. */
STORE_TEST (test_key_hash_unique)
{
  unsigned char hash[32];
  sbx_error_t *err = NULL;
  char tenant[80];

  memset (hash, 7, sizeof hash);
  CHECK (sbx_store_key_insert (st, "k1", "acme", hash, "e2b_0000", 1, &err) == 0);
  CHECK (failed_with (sbx_store_key_insert (st, "k2", "other", hash, "e2b_0000", 2, &err), &err,
                      SBX_E_SYSTEM)
         == 0);
  CHECK (failed_with (sbx_store_key_insert (st, "k1", "acme", (unsigned char[32]){1}, "p", 3,
                                            &err),
                      &err, SBX_E_SYSTEM)
         == 0);
  CHECK (sbx_store_key_lookup (st, hash, tenant, sizeof tenant, &err) == 0);
  CHECK_STR (tenant, "acme");
  memset (hash, 8, sizeof hash);
  CHECK (failed_with (sbx_store_key_lookup (st, hash, tenant, sizeof tenant, &err), &err,
                      SBX_E_UNAUTHORIZED)
         == 0);
  return 0;
}

/*========================= Sealed at rest ================================ */

/* 1 when needle is anywhere in the database's files (the main file and
   its write-ahead log). */
static int
in_files (const char *needle)
{
  static const char *const suffixes[] = {"", "-wal"};
  size_t n = strlen (needle);

  for (size_t i = 0; i < ARRAY_SIZE (suffixes); i++)
    {
      char p[128], *buf;
      struct stat st;
      FILE *f;
      int found = 0;

      snprintf (p, sizeof p, "%s%s", db_path, suffixes[i]);
      if (stat (p, &st) < 0 || st.st_size == 0)
        continue;
      buf = malloc ((size_t) st.st_size);
      f = fopen (p, "rb");
      if (buf && f && fread (buf, 1, (size_t) st.st_size, f) == (size_t) st.st_size)
        found = memmem (buf, (size_t) st.st_size, needle, n) != NULL;
      if (f)
        fclose (f);
      free (buf);
      if (found)
        return 1;
    }
  return 0;
}

struct token_seen
{
  char access[65], traffic[65], env[256];
};

static void
collect_tokens (const struct sbx_sandbox_record *r, void *arg)
{
  struct token_seen *t = arg;

  snprintf (t->access, sizeof t->access, "%s", r->access_token);
  snprintf (t->traffic, sizeof t->traffic, "%s", r->traffic_token);
  snprintf (t->env, sizeof t->env, "%s", r->env_json);
}

#define ACCESS "0123456789abcdef0123456789abcdef01234567"
#define TRAFFIC "fedcba9876543210fedcba9876543210fedcba98"
#define VALUE "sk-live-value-that-must-not-be-in-the-file"
#define ENV_VALUE "env-api-key-that-must-not-be-in-the-file"
#define ENV "{\"OPENAI_API_KEY\":\"" ENV_VALUE "\"}"

/* Secrets' values and tokens are in the files only sealed; they come
   back whole. */
STORE_TEST (test_sealed_in_the_file)
{
  struct sbx_sandbox_record r = record ("sealed");
  struct token_seen seen = {{0}, {0}, {0}};
  sbx_error_t *err = NULL;
  char *value = NULL;
  size_t len = 0;

  r.access_token = ACCESS;
  r.traffic_token = TRAFFIC;
  r.env_json = ENV;
  CHECK (sbx_store_sandbox_insert (st, &r, &err) == 0);
  CHECK (sbx_store_secret_insert (st, "acme", "API_KEY", VALUE, strlen (VALUE), "", 1, &err) == 0);
  CHECK (strncmp (query ("SELECT access_token FROM sandboxes"), "s1:", 3) == 0);
  CHECK (strncmp (query ("SELECT env FROM sandboxes"), "s1:", 3) == 0);
  CHECK_STR (query ("SELECT sealed FROM secrets"), "1");
  CHECK (!in_files (ACCESS) && !in_files (TRAFFIC) && !in_files (VALUE) && !in_files (ENV_VALUE));
  CHECK (sbx_store_sandbox_running (st, collect_tokens, &seen, &err) == 0);
  CHECK_STR (seen.access, ACCESS);
  CHECK_STR (seen.traffic, TRAFFIC);
  CHECK_STR (seen.env, ENV);
  CHECK (sbx_store_secret_get (st, "acme", "API_KEY", &value, &len, &err) == 0);
  CHECK (len == strlen (VALUE) && strcmp (value, VALUE) == 0);
  free (value);
  /* New tokens are sealed too. */
  CHECK (sbx_store_sandbox_set_tokens (st, "sealed", TRAFFIC, ACCESS, &err) == 0);
  CHECK (sbx_store_sandbox_running (st, collect_tokens, &seen, &err) == 0);
  CHECK_STR (seen.access, TRAFFIC);
  CHECK (!in_files (ACCESS) && !in_files (TRAFFIC));
  return 0;
}

/* Another key (the key file replaced): secrets refuse to open, tokens
   come back empty (core/adopt.c then makes new ones). A sealed value
   moved to another row of a tampered database does not open there. */
static int
test_wrong_key_and_moved_values (void)
{
  struct sbx_store *st = NULL;
  struct sbx_sandbox_record r = record ("moved");
  struct token_seen seen = {{0}, {0}, {0}};
  sbx_error_t *err = NULL;
  char *value = NULL;
  size_t len;
  sqlite3 *db = NULL;

  CHECK (fresh_db_path () == 0);
  CHECK (sbx_store_open (db_path, test_key, &st, &err) == 0);
  r.access_token = ACCESS;
  r.traffic_token = TRAFFIC;
  CHECK (sbx_store_sandbox_insert (st, &r, &err) == 0);
  CHECK (sbx_store_secret_insert (st, "acme", "A", VALUE, strlen (VALUE), "", 1, &err) == 0);
  CHECK (sbx_store_secret_insert (st, "acme", "B", "other", 5, "", 1, &err) == 0);
  sbx_store_close (st);
  st = NULL;
  CHECK (sbx_store_open (db_path, other_key, &st, &err) == 0);
  CHECK (failed_with (sbx_store_secret_get (st, "acme", "A", &value, &len, &err), &err,
                      SBX_E_SYSTEM)
         == 0);
  CHECK (value == NULL);
  CHECK (sbx_store_sandbox_running (st, collect_tokens, &seen, &err) == 0);
  CHECK_STR (seen.access, "");
  CHECK_STR (seen.env, "{}");
  sbx_store_close (st);
  st = NULL;
  /* B's row gets A's sealed value. */
  CHECK (sqlite3_open (db_path, &db) == SQLITE_OK);
  CHECK (sqlite3_exec (db,
                       "UPDATE secrets SET value = (SELECT value FROM secrets WHERE name = 'A')"
                       " WHERE name = 'B'",
                       NULL, NULL, NULL)
         == SQLITE_OK);
  sqlite3_close (db);
  CHECK (sbx_store_open (db_path, test_key, &st, &err) == 0);
  CHECK (failed_with (sbx_store_secret_get (st, "acme", "B", &value, &len, &err), &err,
                      SBX_E_SYSTEM)
         == 0);
  CHECK (sbx_store_secret_get (st, "acme", "A", &value, &len, &err) == 0);
  CHECK_STR (value, VALUE);
  free (value);
  sbx_store_close (st);
  nftw (tmp, remove_one, 8, FTW_DEPTH | FTW_PHYS);
  return 0;
}

/* A database an older daemon wrote, values in the clear: sealed at open,
   and the clear copies are gone from the files. */
static int
test_legacy_values_sealed_at_open (void)
{
  struct sbx_store *st = NULL;
  struct token_seen seen = {{0}, {0}, {0}};
  sbx_error_t *err = NULL;
  char *value = NULL;
  size_t len;
  sqlite3 *db = NULL;

  CHECK (fresh_db_path () == 0);
  CHECK (sbx_store_open (db_path, test_key, &st, &err) == 0);
  CHECK (insert (st, "legacy") == 0);
  sbx_store_close (st);
  st = NULL;
  CHECK (sqlite3_open (db_path, &db) == SQLITE_OK);
  CHECK (sqlite3_exec (db,
                       "UPDATE sandboxes SET access_token = '" ACCESS "', traffic_token = '" TRAFFIC
                       "', env = '" ENV "';"
                       "INSERT INTO secrets (tenant, name, value, created_ms, sealed)"
                       " VALUES ('acme', 'OLD', CAST ('" VALUE "' AS BLOB), 1, 0)",
                       NULL, NULL, NULL)
         == SQLITE_OK);
  sqlite3_close (db);
  CHECK (in_files (VALUE));
  if (sbx_store_open (db_path, test_key, &st, &err) < 0)
    fprintf (stderr, "#   reopen: %s\n", err->msg);
  CHECK (st != NULL);
  CHECK (!in_files (VALUE) && !in_files (ACCESS) && !in_files (TRAFFIC) && !in_files (ENV_VALUE));
  CHECK_STR (query ("SELECT sealed FROM secrets"), "1");
  CHECK (sbx_store_secret_get (st, "acme", "OLD", &value, &len, &err) == 0);
  CHECK_STR (value, VALUE);
  free (value);
  CHECK (sbx_store_sandbox_running (st, collect_tokens, &seen, &err) == 0);
  CHECK_STR (seen.access, ACCESS);
  CHECK_STR (seen.traffic, TRAFFIC);
  CHECK_STR (seen.env, ENV);
  sbx_store_close (st);
  nftw (tmp, remove_one, 8, FTW_DEPTH | FTW_PHYS);
  return 0;
}

int
main (void)
{
  RUN (test_schema);
  RUN (test_insert);
  RUN (test_insert_quotes);
  RUN (test_insert_extremes);
  RUN (test_set_expiry);
  RUN (test_end);
  RUN (test_running);
  RUN (test_hibernated);
  RUN (test_hibernated_filesystem);
  RUN (test_pending_fork);
  RUN (test_pending_snapshot);
  RUN (test_prune);
  RUN (test_reopen);
  RUN (test_open_failures);
  RUN (test_sealed_in_the_file);
  RUN (test_wrong_key_and_moved_values);
  RUN (test_legacy_values_sealed_at_open);
  RUN (test_busy_is_a_limit);
  RUN (test_key_shape);
  RUN (test_key_check);
  RUN (test_keys_per_tenant);
  RUN (test_tenant_valid);
  RUN (test_key_create_bad_tenant);
  RUN (test_key_list_and_delete);
  RUN (test_key_not_stored);
  RUN (test_key_hash_unique);
  return tap_done ();
}
