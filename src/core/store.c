/* sbx: SQLite store (see store.h). Statements are prepared per call: the
 * store is not on any hot path that a prepared-statement cache would help
 * more than it would complicate. */
#include "core/store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/seal.h"
#include "util/cleanup.h"
#include "util/hex.h"
#include "util/log.h"

struct sbx_store
{
  sqlite3 *db;
  pthread_mutex_t lock;
  uint8_t key[SBX_SEAL_KEY_LEN]; /* secrets and tokens are sealed with it (core/seal.h) */
};

static const char schema[]
    = "PRAGMA journal_mode=WAL;"
      "PRAGMA synchronous=NORMAL;"
      /* What is deleted or overwritten (a secret, a token sealed in
         place) is zeroed in the file, not left in a free page. */
      "PRAGMA secure_delete=ON;"
      "PRAGMA foreign_keys=ON;"
      "CREATE TABLE IF NOT EXISTS sandboxes ("
      "  id TEXT PRIMARY KEY,"
      "  tenant TEXT NOT NULL,"
      "  template TEXT NOT NULL,"
      "  user TEXT NOT NULL,"
      "  state TEXT NOT NULL,"
      "  created_ms INTEGER NOT NULL,"
      "  expires_ms INTEGER NOT NULL,"
      "  ended_ms INTEGER,"
      "  end_reason TEXT,"
      "  memory INTEGER NOT NULL,"
      "  cpu_milli INTEGER NOT NULL,"
      "  pids INTEGER NOT NULL,"
      "  disk INTEGER NOT NULL,"
      "  env TEXT NOT NULL,"
      "  metadata TEXT NOT NULL,"
      "  slot INTEGER NOT NULL,"
      "  uid_base INTEGER NOT NULL,"
      "  init_pid INTEGER NOT NULL,"
      "  timeout_ms INTEGER NOT NULL DEFAULT 0,"
      "  access_token TEXT NOT NULL DEFAULT '',"
      "  traffic_token TEXT NOT NULL DEFAULT '',"
      "  network TEXT NOT NULL DEFAULT '',"
      "  lifecycle INTEGER NOT NULL DEFAULT 0,"
      "  remaining_ms INTEGER NOT NULL DEFAULT 0,"
      "  snapshot TEXT NOT NULL DEFAULT '',"
      "  hibernated INTEGER NOT NULL DEFAULT 0,"
      "  pending TEXT NOT NULL DEFAULT '');"
      "CREATE INDEX IF NOT EXISTS sandboxes_state ON sandboxes(state);"
      "CREATE TABLE IF NOT EXISTS snapshots ("
      "  tenant TEXT NOT NULL,"
      "  name TEXT NOT NULL,"
      "  template TEXT NOT NULL,"
      "  source TEXT NOT NULL,"
      "  created_ms INTEGER NOT NULL,"
      "  bytes INTEGER NOT NULL,"
      "  files INTEGER NOT NULL,"
      "  disk INTEGER NOT NULL,"
      "  isolation INTEGER NOT NULL DEFAULT 0,"
      "  memory INTEGER NOT NULL DEFAULT 0,"
      "  cpu_milli INTEGER NOT NULL DEFAULT 0,"
      "  pending INTEGER NOT NULL DEFAULT 0,"
      "  PRIMARY KEY (tenant, name));"
      "CREATE TABLE IF NOT EXISTS api_keys ("
      "  id TEXT PRIMARY KEY,"
      "  tenant TEXT NOT NULL,"
      "  hash BLOB NOT NULL UNIQUE,"
      "  prefix TEXT NOT NULL,"
      "  created_ms INTEGER NOT NULL);"
      /* Secrets (docs/egress.md, Credentials): written by the API, read
         only by the front end when it hands a connection to the egress
         process; never returned. */
      "CREATE TABLE IF NOT EXISTS secrets ("
      "  tenant TEXT NOT NULL,"
      "  name TEXT NOT NULL,"
      "  value BLOB NOT NULL,"
      "  description TEXT NOT NULL DEFAULT '',"
      "  created_ms INTEGER NOT NULL,"
      "  PRIMARY KEY (tenant, name));";

static int
db_err (struct sbx_store *st, sbx_error_t **err, const char *what)
{
  int code = sqlite3_errcode (st->db) & 0xff; /* extended codes are on */
  enum sbx_error_kind kind = (code == SQLITE_FULL || code == SQLITE_BUSY || code == SQLITE_LOCKED)
                                 ? SBX_E_LIMIT
                             : code == SQLITE_NOMEM ? SBX_E_UNAVAILABLE /* as any out of memory */
                                                    : SBX_E_SYSTEM;
  return sbx_err (err, kind, "%s: %s", what, sqlite3_errmsg (st->db));
}

static int
first_row (void *arg, int ncols, char **values, char **names)
{
  char *out = arg;

  (void) names;
  if (out[0] == '\0' && ncols > 0)
    {
      snprintf (out, 200, "%s", values[0] ? values[0] : "");
      for (; *out; out++)
        if (*out == '\n')
          *out = ' '; /* one line in the log */
    }
  return 0;
}

/* A damaged database is refused at start, before anything is written to
   it (the operator needs it as it is), rather than found by some later
   request. quick_check reads every page once: cheap for a store of
   records pruned after a week. */
static int
check_integrity (struct sbx_store *st, const char *path, sbx_error_t **err)
{
  char first[200] = "";
  char *msg = NULL;

  if (sqlite3_exec (st->db, "PRAGMA quick_check", first_row, first, &msg) != SQLITE_OK)
    {
      sbx_err (err, SBX_E_SYSTEM, "database `%s`: %s", path, msg ? msg : "check failed");
      sqlite3_free (msg);
      return -1;
    }
  if (strcmp (first, "ok") != 0)
    return sbx_err (err, SBX_E_SYSTEM, "database `%s` is damaged (%s); move it away to start afresh",
                    path, first);
  return 0;
}

/* ---- sealed values (core/seal.h) ---------------------------------------- */

/* Where a value belongs, its associated data: "secret\0TENANT\0NAME" or
   "token\0SANDBOX\0access": moved to another row, it does not unseal. */
static size_t
seal_aad (char *buf, size_t cap, const char *kind, const char *a, const char *b)
{
  int n = snprintf (buf, cap, "%s%c%s%c%s", kind, 0, a, 0, b);

  return n > 0 && (size_t) n < cap ? (size_t) n : 0;
}

/* Sealed text in a TEXT column (a sandbox's tokens, its environment):
   "s1:" and the sealed bytes in hex. Text in the clear from before
   sealing never starts so (a token is 40 hex digits, the environment a
   JSON object). */
#define SEALED_PREFIX "s1:"

/* A sandbox's columns that are sealed: its data-plane tokens, and its
   environment (E2B users pass API keys there). */
static const char *const sealed_columns[] = {"access_token", "traffic_token", "env"};

/* text sealed into out (wiped when freed) for sandbox id's column which;
   "" stays "". */
static int
seal_text (struct sbx_store *st, const char *id, const char *which, const char *text,
           struct sbx_buf *out, sbx_error_t **err)
{
  struct sbx_buf sealed = SBX_BUF_INIT;
  char aad[200];
  size_t aad_len = seal_aad (aad, sizeof aad, "sandbox", id, which);

  sbx_buf_reset (out);
  out->wipe = 1;
  sbx_buf_append (out, "", 0);
  if (text[0] == '\0')
    return out->failed ? sbx_err_oom (err) : 0;
  if (aad_len == 0)
    return sbx_err (err, SBX_E_INVALID, "a sandbox id to seal for is malformed");
  if (sbx_seal (st->key, aad, aad_len, text, strlen (text), &sealed, err) < 0)
    return -1;
  sbx_buf_append (out, SEALED_PREFIX, 3);
  sbx_buf_reserve (out, 2 * sealed.len);
  if (!out->failed)
    {
      sbx_hex_encode (sealed.data, sealed.len, out->data + out->len);
      out->len += 2 * sealed.len;
    }
  sbx_buf_free (&sealed);
  return out->failed ? sbx_err_oom (err) : 0;
}

/* The text of a column (sealed, or in the clear from before sealing) into
   out; -1 when it does not unseal (the key replaced, the value changed or
   moved from another row), logged. */
static int
open_text (struct sbx_store *st, const char *id, const char *which, const char *text,
           struct sbx_buf *out)
{
  struct sbx_buf raw = SBX_BUF_INIT;
  sbx_error_t *e = NULL;
  char aad[200];
  size_t aad_len = seal_aad (aad, sizeof aad, "sandbox", id, which), n;
  int rc = -1;

  sbx_buf_reset (out);
  out->wipe = 1;
  if (strncmp (text, SEALED_PREFIX, 3) != 0)
    {
      sbx_buf_append (out, text, strlen (text));
      return out->failed ? -1 : 0;
    }
  n = strlen (text + 3);
  raw.wipe = 1;
  sbx_buf_reserve (&raw, n / 2);
  if (!raw.failed && sbx_hex_decode (text + 3, n, raw.data) >= 0)
    raw.len = n / 2;
  if (raw.len == n / 2 && n > 0 && aad_len
      && sbx_unseal (st->key, aad, aad_len, raw.data, raw.len, out, &e) == 0)
    rc = 0;
  else
    {
      sbx_warn ("sandbox %s: its %s does not unseal (%s)", id, which, e ? e->msg : "malformed");
      sbx_error_free (e);
    }
  sbx_buf_free (&raw);
  return rc;
}

/* One secret of value[0..n) sealed into out, for tenant's name. */
static int
seal_secret (struct sbx_store *st, const char *tenant, const char *name, const void *value,
             size_t n, struct sbx_buf *out, sbx_error_t **err)
{
  char aad[200];
  size_t aad_len = seal_aad (aad, sizeof aad, "secret", tenant, name);

  if (aad_len == 0)
    return sbx_err (err, SBX_E_INVALID, "a secret's name is malformed");
  return sbx_seal (st->key, aad, aad_len, value, n, out, err);
}

static int run (struct sbx_store *st, const char *sql,
                void (*bind) (sqlite3_stmt *, const void *), const void *arg, int *changes,
                sbx_error_t **err);

struct seal_row
{
  const char *a, *b, *c;
  const void *blob;
  size_t blob_len;
};

static void
bind_seal_row (sqlite3_stmt *s, const void *arg)
{
  const struct seal_row *r = arg;

  sqlite3_bind_text (s, 1, r->a, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 2, r->b, -1, SQLITE_STATIC);
  if (r->blob)
    sqlite3_bind_blob (s, 3, r->blob, (int) r->blob_len, SQLITE_STATIC);
  else
    sqlite3_bind_text (s, 3, r->c, -1, SQLITE_STATIC);
}

/* The first row of sql (two or three text columns and a blob), copied
   into the caller's buffers; 0 none, 1 one, -1 error. */
static int
legacy_row (struct sbx_store *st, const char *sql, char a[256], char b[256], struct sbx_buf *blob,
           sbx_error_t **err)
{
  sqlite3_stmt *stmt = NULL;
  int rc;

  if (sqlite3_prepare_v2 (st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return db_err (st, err, "prepare");
  rc = sqlite3_step (stmt);
  if (rc == SQLITE_ROW)
    {
      const char *ta = (const char *) sqlite3_column_text (stmt, 0);
      const char *tb = (const char *) sqlite3_column_text (stmt, 1);
      snprintf (a, 256, "%s", ta ? ta : "");
      snprintf (b, 256, "%s", tb ? tb : "");
      sbx_buf_reset (blob);
      sbx_buf_append (blob, sqlite3_column_blob (stmt, 2), (size_t) sqlite3_column_bytes (stmt, 2));
    }
  sqlite3_finalize (stmt);
  if (rc == SQLITE_ROW)
    return 1;
  return rc == SQLITE_DONE ? 0 : db_err (st, err, "read");
}

/* Values from before sealing, sealed in place, one row at a time; then
   the write-ahead log is emptied, so the clear copies are gone from the
   files too (secure_delete zeroes the pages they were on). */
static int
seal_legacy (struct sbx_store *st, sbx_error_t **err)
{
  struct sbx_buf value = SBX_BUF_INIT, sealed = SBX_BUF_INIT;
  char a[256], b[256];
  unsigned done = 0;
  int rc;

  value.wipe = 1;
  while ((rc = legacy_row (st, "SELECT tenant, name, value FROM secrets WHERE sealed = 0 LIMIT 1",
                          a, b, &value, err))
         == 1)
    {
      struct seal_row r = {a, b, NULL, NULL, 0};
      if (seal_secret (st, a, b, value.data, value.len, &sealed, err) < 0)
        {
          rc = -1;
          break;
        }
      r.blob = sealed.data;
      r.blob_len = sealed.len;
      if (run (st, "UPDATE secrets SET value = ?3, sealed = 1 WHERE tenant = ?1 AND name = ?2",
               bind_seal_row, &r, NULL, err)
          < 0)
        {
          rc = -1;
          break;
        }
      done++;
    }
  /* Then a sandbox's sealed columns, one column at a time (rc is 0 here,
     or we are done). */
  for (size_t c = 0; rc == 0 && c < sizeof sealed_columns / sizeof sealed_columns[0]; c++)
    while (rc == 0)
      {
        char sql[300];
        struct seal_row r = {a, NULL, NULL, NULL, 0};
        int row;

        snprintf (sql, sizeof sql,
                  "SELECT id, '', %s FROM sandboxes WHERE %s != '' AND substr (%s, 1, 3) != 's1:'"
                  " LIMIT 1",
                  sealed_columns[c], sealed_columns[c], sealed_columns[c]);
        row = legacy_row (st, sql, a, b, &value, err);
        if (row <= 0)
          {
            rc = row;
            break;
          }
        snprintf (sql, sizeof sql, "UPDATE sandboxes SET %s = ?3 WHERE id = ?1",
                  sealed_columns[c]);
        r.b = "";
        if (seal_text (st, a, sealed_columns[c], value.data, &sealed, err) < 0)
          rc = -1;
        else
          {
            r.c = sealed.data;
            if (run (st, sql, bind_seal_row, &r, NULL, err) < 0)
              rc = -1;
            else
              done++;
          }
      }
  sbx_buf_free (&value);
  sbx_buf_free (&sealed);
  if (rc != 0)
    return -1;
  if (done)
    {
      sqlite3_exec (st->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
      sbx_info ("store: sealed %u values kept in the clear by an older daemon", done);
    }
  return 0;
}

static int seal_legacy (struct sbx_store *st, sbx_error_t **err);

int
sbx_store_open (const char *path, const uint8_t key[SBX_SEAL_KEY_LEN], struct sbx_store **out,
                sbx_error_t **err)
{
  struct sbx_store *st = calloc (1, sizeof *st);
  char *msg = NULL;

  if (st == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "open database `%s`: out of memory", path);
  memcpy (st->key, key, sizeof st->key);
  pthread_mutex_init (&st->lock, NULL);
  if (sqlite3_open_v2 (path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                                           | SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_EXRESCODE,
                       NULL)
      != SQLITE_OK)
    {
      sbx_err (err, SBX_E_SYSTEM, "open database `%s`: %s", path,
               st->db ? sqlite3_errmsg (st->db) : "out of memory");
      sbx_store_close (st);
      return -1;
    }
  sqlite3_busy_timeout (st->db, 5000);
  if (check_integrity (st, path, err) < 0)
    {
      sbx_store_close (st);
      return -1;
    }
  if (sqlite3_exec (st->db, schema, NULL, NULL, &msg) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT timeout_ms FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* A database from before the lifetime was kept as set (a restarted
       daemon shows it): the column, with 0 meaning expires - created. */
    sqlite3_exec (st->db, "ALTER TABLE sandboxes ADD COLUMN timeout_ms INTEGER NOT NULL DEFAULT 0",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT access_token FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* A database from before the E2B data plane: records without tokens
       (an adopted one gets new ones, see core/adopt.c). */
    sqlite3_exec (st->db,
                  "ALTER TABLE sandboxes ADD COLUMN access_token TEXT NOT NULL DEFAULT '';"
                  "ALTER TABLE sandboxes ADD COLUMN traffic_token TEXT NOT NULL DEFAULT ''",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT network FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* A database from before egress policies: no network (the default). */
    sqlite3_exec (st->db, "ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT ''",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT lifecycle FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* A database from before pause and resume: every sandbox ends at its
       lifetime, none is paused. */
    sqlite3_exec (st->db,
                  "ALTER TABLE sandboxes ADD COLUMN lifecycle INTEGER NOT NULL DEFAULT 0;"
                  "ALTER TABLE sandboxes ADD COLUMN remaining_ms INTEGER NOT NULL DEFAULT 0",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT snapshot FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* From before snapshot layers: no sandbox has one. */
    sqlite3_exec (st->db, "ALTER TABLE sandboxes ADD COLUMN snapshot TEXT NOT NULL DEFAULT ''",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT hibernated FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* From before hibernated VMs outlived a restart: none is (the daemon
       that wrote it ended them at its next start). */
    sqlite3_exec (st->db,
                  "ALTER TABLE sandboxes ADD COLUMN hibernated INTEGER NOT NULL DEFAULT 0",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT snapshot_copied FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* From before snapshots could be copies: every one was a layer. */
    sqlite3_exec (st->db,
                  "ALTER TABLE sandboxes ADD COLUMN snapshot_copied INTEGER NOT NULL DEFAULT 0",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT pending FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* From before forks were all or nothing: every record is complete. */
    sqlite3_exec (st->db, "ALTER TABLE sandboxes ADD COLUMN pending TEXT NOT NULL DEFAULT ''",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT mask_host FROM sandboxes LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* From before E2B's maskRequestHost: every proxy kept the client's Host. */
    sqlite3_exec (st->db, "ALTER TABLE sandboxes ADD COLUMN mask_host TEXT NOT NULL DEFAULT ''",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT isolation FROM snapshots LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* From before VM snapshots: every snapshot is a namespace one's disk. */
    sqlite3_exec (st->db,
                  "ALTER TABLE snapshots ADD COLUMN isolation INTEGER NOT NULL DEFAULT 0;"
                  "ALTER TABLE snapshots ADD COLUMN memory INTEGER NOT NULL DEFAULT 0;"
                  "ALTER TABLE snapshots ADD COLUMN cpu_milli INTEGER NOT NULL DEFAULT 0",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT pending FROM snapshots LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* From before saves were recorded as pending first: all complete. */
    sqlite3_exec (st->db, "ALTER TABLE snapshots ADD COLUMN pending INTEGER NOT NULL DEFAULT 0",
                  NULL, NULL, &msg);
  if (msg == NULL && sqlite3_errcode (st->db) == SQLITE_OK
      && sqlite3_exec (st->db, "SELECT sealed FROM secrets LIMIT 0", NULL, NULL, NULL)
             != SQLITE_OK)
    /* From before values were sealed: every one is in the clear (sealed
       by seal_legacy below). */
    sqlite3_exec (st->db, "ALTER TABLE secrets ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0",
                  NULL, NULL, &msg);
  if (msg != NULL || sqlite3_errcode (st->db) != SQLITE_OK)
    {
      sbx_err (err, SBX_E_SYSTEM, "database `%s`: %s", path, msg ? msg : "schema failed");
      sqlite3_free (msg);
      sbx_store_close (st);
      return -1;
    }
  if (seal_legacy (st, err) < 0)
    {
      sbx_err_wrap (err, "database `%s`", path);
      sbx_store_close (st);
      return -1;
    }
  *out = st;
  return 0;
}

void
sbx_store_close (struct sbx_store *st)
{
  if (st == NULL)
    return;
  sqlite3_close_v2 (st->db);
  pthread_mutex_destroy (&st->lock);
  explicit_bzero (st->key, sizeof st->key);
  free (st);
}

/* Prepare, bind with a callback, step to completion. */
static int
run (struct sbx_store *st, const char *sql, void (*bind) (sqlite3_stmt *, const void *),
     const void *arg, int *changes, sbx_error_t **err)
{
  sqlite3_stmt *stmt = NULL;
  int rc;

  pthread_mutex_lock (&st->lock);
  if (sqlite3_prepare_v2 (st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    {
      db_err (st, err, "prepare");
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  if (bind)
    bind (stmt, arg);
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
    ;
  if (rc != SQLITE_DONE)
    {
      db_err (st, err, "database write");
      sqlite3_finalize (stmt);
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  if (changes)
    *changes = sqlite3_changes (st->db);
  sqlite3_finalize (stmt);
  pthread_mutex_unlock (&st->lock);
  return 0;
}

static void
bind_insert (sqlite3_stmt *s, const void *arg)
{
  const struct sbx_sandbox_record *r = arg;
  sqlite3_bind_text (s, 1, r->id, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 2, r->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 3, r->template_name, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 4, r->user, -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 5, r->created_ms);
  sqlite3_bind_int64 (s, 6, r->expires_ms);
  sqlite3_bind_int64 (s, 7, (sqlite3_int64) r->memory);
  sqlite3_bind_int64 (s, 8, r->cpu_milli);
  sqlite3_bind_int64 (s, 9, r->pids);
  sqlite3_bind_int64 (s, 10, (sqlite3_int64) r->disk);
  sqlite3_bind_text (s, 11, r->env_json, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 12, r->metadata_json, -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 13, r->slot);
  sqlite3_bind_int64 (s, 14, r->uid_base);
  sqlite3_bind_int64 (s, 15, r->init_pid);
  sqlite3_bind_int64 (s, 16, r->timeout_ms);
  sqlite3_bind_text (s, 17, r->access_token ? r->access_token : "", -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 18, r->traffic_token ? r->traffic_token : "", -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 19, r->network_json ? r->network_json : "", -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 20, r->lifecycle);
  sqlite3_bind_text (s, 21, r->snapshot ? r->snapshot : "", -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 22, r->snapshot_copied);
  sqlite3_bind_text (s, 23, r->pending ? r->pending : "", -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 24, r->mask_host ? r->mask_host : "", -1, SQLITE_STATIC);
}

static int insert_sealed (struct sbx_store *st, const struct sbx_sandbox_record *r,
                          sbx_error_t **err);

int
sbx_store_sandbox_insert (struct sbx_store *st, const struct sbx_sandbox_record *r,
                          sbx_error_t **err)
{
  struct sbx_buf access = SBX_BUF_INIT, traffic = SBX_BUF_INIT, env = SBX_BUF_INIT;
  struct sbx_sandbox_record sealed = *r;
  int rc = -1;

  const char *id = r->id ? r->id : "";

  if (seal_text (st, id, "access_token", r->access_token ? r->access_token : "", &access, err)
          == 0
      && seal_text (st, id, "traffic_token", r->traffic_token ? r->traffic_token : "", &traffic,
                    err)
             == 0
      && seal_text (st, id, "env", r->env_json ? r->env_json : "", &env, err) == 0)
    {
      sealed.access_token = access.data;
      sealed.traffic_token = traffic.data;
      sealed.env_json = env.data;
      rc = insert_sealed (st, &sealed, err);
    }
  sbx_buf_free (&access);
  sbx_buf_free (&traffic);
  sbx_buf_free (&env);
  return rc;
}

static int
insert_sealed (struct sbx_store *st, const struct sbx_sandbox_record *r, sbx_error_t **err)
{
  return run (st,
              "INSERT INTO sandboxes (id, tenant, template, user, state, created_ms, expires_ms,"
              " memory, cpu_milli, pids, disk, env, metadata, slot, uid_base, init_pid, timeout_ms,"
              " access_token, traffic_token, network, lifecycle, snapshot, snapshot_copied,"
              " pending, mask_host)"
              " VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,"
              " ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)",
              bind_insert, r, NULL, err);
}

struct id_int
{
  const char *id;
  int64_t value;
  const char *s1, *s2;
};

static void
bind_id_int (sqlite3_stmt *s, const void *arg)
{
  const struct id_int *a = arg;
  sqlite3_bind_text (s, 1, a->id, -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 2, a->value);
  if (a->s1)
    sqlite3_bind_text (s, 3, a->s1, -1, SQLITE_STATIC);
  if (a->s2)
    sqlite3_bind_text (s, 4, a->s2, -1, SQLITE_STATIC);
}

struct expiry
{
  const char *id;
  int64_t expires_ms, timeout_ms;
};

static void
bind_expiry (sqlite3_stmt *s, const void *arg)
{
  const struct expiry *a = arg;
  sqlite3_bind_text (s, 1, a->id, -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 2, a->expires_ms);
  sqlite3_bind_int64 (s, 3, a->timeout_ms);
}

int
sbx_store_sandbox_set_expiry (struct sbx_store *st, const char *id, int64_t expires_ms,
                              int64_t timeout_ms, sbx_error_t **err)
{
  struct expiry a = {id, expires_ms, timeout_ms};
  return run (st, "UPDATE sandboxes SET expires_ms = ?2, timeout_ms = ?3 WHERE id = ?1",
              bind_expiry, &a, NULL, err);
}

struct paused
{
  const char *id;
  int paused;
  int64_t remaining_ms, expires_ms;
};

static void
bind_paused (sqlite3_stmt *s, const void *arg)
{
  const struct paused *a = arg;
  sqlite3_bind_text (s, 1, a->id, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 2, a->paused ? "paused" : "running", -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 3, a->remaining_ms);
  sqlite3_bind_int64 (s, 4, a->expires_ms);
}

/* One statement: a record that says paused says hibernated too, or
   neither (a restart would look for a relay that is gone). A resume
   clears hibernated; a pause or a new deadline keeps what it was. */
static int
set_paused (struct sbx_store *st, const char *sql, const struct paused *a, sbx_error_t **err)
{
  int changes = 0;

  if (run (st, sql, bind_paused, a, &changes, err) < 0)
    return -1;
  if (changes == 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", a->id);
  return 0;
}

int
sbx_store_sandbox_set_paused (struct sbx_store *st, const char *id, int paused,
                              int64_t remaining_ms, int64_t expires_ms, sbx_error_t **err)
{
  struct paused a = {id, paused, remaining_ms, expires_ms};

  return set_paused (st,
                     "UPDATE sandboxes SET state = ?2, remaining_ms = ?3, expires_ms = ?4,"
                     " hibernated = CASE WHEN ?2 = 'running' THEN 0 ELSE hibernated END"
                     " WHERE id = ?1 AND state IN ('running', 'paused')",
                     &a, err);
}

int
sbx_store_sandbox_set_hibernated (struct sbx_store *st, const char *id, int kind,
                                  int64_t remaining_ms, int64_t expires_ms, sbx_error_t **err)
{
  struct paused a = {id, 1, remaining_ms, expires_ms};

  assert (kind == SBX_HIBERNATED_MEMORY || kind == SBX_HIBERNATED_FILESYSTEM);
  return set_paused (st,
                     kind == SBX_HIBERNATED_MEMORY
                         ? "UPDATE sandboxes SET state = ?2, remaining_ms = ?3, expires_ms = ?4,"
                           " hibernated = 1 WHERE id = ?1 AND state IN ('running', 'paused')"
                         : "UPDATE sandboxes SET state = ?2, remaining_ms = ?3, expires_ms = ?4,"
                           " hibernated = 2 WHERE id = ?1 AND state IN ('running', 'paused')",
                     &a, err);
}

struct init_pid
{
  const char *id;
  int64_t pid;
};

static void
bind_init_pid (sqlite3_stmt *s, const void *arg)
{
  const struct init_pid *a = arg;
  sqlite3_bind_text (s, 1, a->id, -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 2, a->pid);
}

int
sbx_store_sandbox_set_init (struct sbx_store *st, const char *id, int64_t init_pid,
                            sbx_error_t **err)
{
  struct init_pid a = {id, init_pid};
  int changes = 0;

  if (run (st,
           "UPDATE sandboxes SET init_pid = ?2, hibernated = 0"
           " WHERE id = ?1 AND state IN ('running', 'paused')",
           bind_init_pid, &a, &changes, err)
      < 0)
    return -1;
  if (changes == 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", id);
  return 0;
}

static void
bind_pending (sqlite3_stmt *s, const void *arg)
{
  sqlite3_bind_text (s, 1, arg, -1, SQLITE_STATIC);
}

int
sbx_store_sandbox_complete (struct sbx_store *st, const char *pending, sbx_error_t **err)
{
  assert (pending != NULL && pending[0] != '\0');
  return run (st, "UPDATE sandboxes SET pending = '' WHERE pending = ?1", bind_pending, pending,
              NULL, err);
}

int
sbx_store_sandbox_end (struct sbx_store *st, const char *id, const char *state, const char *reason,
                       int64_t ended_ms, sbx_error_t **err)
{
  struct id_int a = {id, ended_ms, state, reason};
  return run (st,
              "UPDATE sandboxes SET ended_ms = ?2, state = ?3, end_reason = ?4"
              " WHERE id = ?1 AND state IN ('running', 'paused')",
              bind_id_int, &a, NULL, err);
}

static void
bind_prune (sqlite3_stmt *s, const void *arg)
{
  sqlite3_bind_int64 (s, 1, *(const int64_t *) arg);
}

int
sbx_store_sandbox_prune (struct sbx_store *st, int64_t before_ms, sbx_error_t **err)
{
  return run (st, "DELETE FROM sandboxes WHERE state NOT IN ('running', 'paused') AND ended_ms < ?1", bind_prune,
              &before_ms, NULL, err);
}

struct key_args
{
  const char *id, *tenant, *prefix;
  const unsigned char *hash;
  int64_t created_ms;
};

static void
bind_key (sqlite3_stmt *s, const void *arg)
{
  const struct key_args *k = arg;
  sqlite3_bind_text (s, 1, k->id, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 2, k->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_blob (s, 3, k->hash, 32, SQLITE_STATIC);
  sqlite3_bind_text (s, 4, k->prefix, -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 5, k->created_ms);
}

int
sbx_store_key_insert (struct sbx_store *st, const char *id, const char *tenant,
                      const unsigned char hash[32], const char *prefix, int64_t created_ms,
                      sbx_error_t **err)
{
  struct key_args k = {id, tenant, prefix, hash, created_ms};
  return run (st,
              "INSERT INTO api_keys (id, tenant, hash, prefix, created_ms)"
              " VALUES (?1, ?2, ?3, ?4, ?5)",
              bind_key, &k, NULL, err);
}

int
sbx_store_key_lookup (struct sbx_store *st, const unsigned char hash[32], char *tenant, size_t cap,
                      sbx_error_t **err)
{
  sqlite3_stmt *stmt = NULL;
  int rc, found = 0;

  pthread_mutex_lock (&st->lock);
  if (sqlite3_prepare_v2 (st->db, "SELECT tenant FROM api_keys WHERE hash = ?1", -1, &stmt, NULL)
      != SQLITE_OK)
    {
      db_err (st, err, "prepare");
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  sqlite3_bind_blob (stmt, 1, hash, 32, SQLITE_STATIC);
  rc = sqlite3_step (stmt);
  if (rc == SQLITE_ROW)
    {
      const char *t = (const char *) sqlite3_column_text (stmt, 0);
      snprintf (tenant, cap, "%s", t ? t : "");
      found = 1;
    }
  else if (rc != SQLITE_DONE)
    {
      db_err (st, err, "key lookup");
      sqlite3_finalize (stmt);
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  sqlite3_finalize (stmt);
  pthread_mutex_unlock (&st->lock);
  if (!found)
    return sbx_err (err, SBX_E_UNAUTHORIZED, "unknown API key");
  return 0;
}

int
sbx_store_key_list (struct sbx_store *st, struct sbx_key_record **out, size_t *n,
                    sbx_error_t **err)
{
  sqlite3_stmt *stmt = NULL;
  struct sbx_key_record *v = NULL;
  size_t count = 0, cap = 0;
  int rc;

  pthread_mutex_lock (&st->lock);
  if (sqlite3_prepare_v2 (st->db,
                          "SELECT id, tenant, prefix, created_ms FROM api_keys ORDER BY created_ms",
                          -1, &stmt, NULL)
      != SQLITE_OK)
    {
      db_err (st, err, "prepare");
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
    {
      if (count == cap)
        {
          struct sbx_key_record *grown;
          cap = cap ? cap * 2 : 16;
          grown = realloc (v, cap * sizeof *v);
          if (grown == NULL)
            {
              free (v);
              sqlite3_finalize (stmt);
              pthread_mutex_unlock (&st->lock);
              return sbx_err_oom (err);
            }
          v = grown;
        }
      memset (&v[count], 0, sizeof v[count]);
      snprintf (v[count].id, sizeof v[count].id, "%s", (const char *) sqlite3_column_text (stmt, 0));
      snprintf (v[count].tenant, sizeof v[count].tenant, "%s",
                (const char *) sqlite3_column_text (stmt, 1));
      snprintf (v[count].prefix, sizeof v[count].prefix, "%s",
                (const char *) sqlite3_column_text (stmt, 2));
      v[count].created_ms = sqlite3_column_int64 (stmt, 3);
      count++;
    }
  if (rc != SQLITE_DONE)
    {
      db_err (st, err, "list keys");
      free (v);
      sqlite3_finalize (stmt);
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  sqlite3_finalize (stmt);
  pthread_mutex_unlock (&st->lock);
  *out = v;
  *n = count;
  return 0;
}

int
sbx_store_sandbox_running (struct sbx_store *st,
                           void (*fn) (const struct sbx_sandbox_record *r, void *arg), void *arg,
                           sbx_error_t **err)
{
  sqlite3_stmt *stmt = NULL;
  int rc;

  /* Under the store's lock for the whole walk; fn must not use the store
     (it collects, the caller acts afterwards). */
  pthread_mutex_lock (&st->lock);
  if (sqlite3_prepare_v2 (st->db,
                          "SELECT id, tenant, template, user, created_ms, expires_ms, memory,"
                          " cpu_milli, pids, disk, env, metadata, slot, uid_base, init_pid,"
                          " timeout_ms, access_token, traffic_token, network, state, lifecycle,"
                          " remaining_ms, snapshot, hibernated, snapshot_copied, pending,"
                          " mask_host FROM sandboxes"
                          " WHERE state IN ('running', 'paused')"
                          " ORDER BY created_ms",
                          -1, &stmt, NULL)
      != SQLITE_OK)
    {
      db_err (st, err, "prepare");
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
    {
      struct sbx_sandbox_record r;
      struct sbx_buf access = SBX_BUF_INIT, traffic = SBX_BUF_INIT, env = SBX_BUF_INIT;
      int64_t cpu = sqlite3_column_int64 (stmt, 7), pids = sqlite3_column_int64 (stmt, 8);
      int64_t slot = sqlite3_column_int64 (stmt, 12);

      memset (&r, 0, sizeof r);
      r.id = (const char *) sqlite3_column_text (stmt, 0);
      r.tenant = (const char *) sqlite3_column_text (stmt, 1);
      r.template_name = (const char *) sqlite3_column_text (stmt, 2);
      r.user = (const char *) sqlite3_column_text (stmt, 3);
      r.created_ms = sqlite3_column_int64 (stmt, 4);
      r.expires_ms = sqlite3_column_int64 (stmt, 5);
      r.memory = (uint64_t) sqlite3_column_int64 (stmt, 6);
      r.cpu_milli = cpu >= 0 && cpu <= UINT32_MAX ? (uint32_t) cpu : 0;
      r.pids = pids >= 0 && pids <= UINT32_MAX ? (uint32_t) pids : 0;
      r.disk = (uint64_t) sqlite3_column_int64 (stmt, 9);
      r.env_json = (const char *) sqlite3_column_text (stmt, 10);
      r.metadata_json = (const char *) sqlite3_column_text (stmt, 11);
      r.slot = slot >= 0 && slot <= UINT32_MAX ? (uint32_t) slot : UINT32_MAX;
      r.uid_base = sqlite3_column_int64 (stmt, 13);
      r.init_pid = sqlite3_column_int64 (stmt, 14);
      r.timeout_ms = sqlite3_column_int64 (stmt, 15);
      r.access_token = (const char *) sqlite3_column_text (stmt, 16);
      r.traffic_token = (const char *) sqlite3_column_text (stmt, 17);
      r.network_json = (const char *) sqlite3_column_text (stmt, 18);
      r.paused = sqlite3_column_text (stmt, 19) != NULL
                 && strcmp ((const char *) sqlite3_column_text (stmt, 19), "paused") == 0;
      r.lifecycle = (uint32_t) (sqlite3_column_int64 (stmt, 20) & SBX_LIFECYCLE_MASK);
      r.remaining_ms = sqlite3_column_int64 (stmt, 21);
      r.snapshot = (const char *) sqlite3_column_text (stmt, 22);
      if (r.snapshot == NULL)
        r.snapshot = "";
      r.hibernated = 0;
      if (r.paused
          && (sqlite3_column_int64 (stmt, 23) == SBX_HIBERNATED_MEMORY
              || sqlite3_column_int64 (stmt, 23) == SBX_HIBERNATED_FILESYSTEM))
        r.hibernated = (int) sqlite3_column_int64 (stmt, 23);
      r.snapshot_copied = sqlite3_column_int64 (stmt, 24) == 1;
      r.pending = (const char *) sqlite3_column_text (stmt, 25);
      if (r.pending == NULL)
        r.pending = "";
      r.mask_host = (const char *) sqlite3_column_text (stmt, 26);
      if (r.mask_host == NULL)
        r.mask_host = "";
      if (r.id && r.tenant && r.template_name && r.user && r.env_json && r.metadata_json
          && r.access_token && r.traffic_token && r.network_json)
        {
          /* Tokens that do not open are "" (core/adopt.c makes new ones);
             an environment that does not, none. */
          if (open_text (st, r.id, "access_token", r.access_token, &access) < 0)
            sbx_buf_reset (&access);
          if (open_text (st, r.id, "traffic_token", r.traffic_token, &traffic) < 0)
            sbx_buf_reset (&traffic);
          if (open_text (st, r.id, "env", r.env_json, &env) < 0)
            {
              sbx_buf_reset (&env);
              sbx_buf_append (&env, "{}", 2);
            }
          sbx_buf_append (&access, "", 0);
          sbx_buf_append (&traffic, "", 0);
          r.access_token = access.data;
          r.traffic_token = traffic.data;
          r.env_json = env.data;
          if (r.access_token && r.traffic_token && r.env_json)
            fn (&r, arg);
          sbx_buf_free (&access);
          sbx_buf_free (&traffic);
          sbx_buf_free (&env);
        }
    }
  if (rc != SQLITE_DONE)
    db_err (st, err, "list running sandboxes");
  sqlite3_finalize (stmt);
  pthread_mutex_unlock (&st->lock);
  return rc == SQLITE_DONE ? 0 : -1;
}

struct tokens
{
  const char *id, *access, *traffic;
};

static void bind_tokens (sqlite3_stmt *s, const void *arg);

int
sbx_store_sandbox_set_network (struct sbx_store *st, const char *id, const char *network_json,
                               sbx_error_t **err)
{
  struct tokens a = {id, network_json, NULL};
  return run (st, "UPDATE sandboxes SET network = ?2 WHERE id = ?1", bind_tokens, &a, NULL, err);
}

static void
bind_tokens (sqlite3_stmt *s, const void *arg)
{
  const struct tokens *a = arg;
  sqlite3_bind_text (s, 1, a->id, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 2, a->access, -1, SQLITE_STATIC);
  if (a->traffic)
    sqlite3_bind_text (s, 3, a->traffic, -1, SQLITE_STATIC);
}

int
sbx_store_sandbox_set_tokens (struct sbx_store *st, const char *id, const char *access_token,
                              const char *traffic_token, sbx_error_t **err)
{
  struct sbx_buf access = SBX_BUF_INIT, traffic = SBX_BUF_INIT;
  struct tokens a = {id, NULL, NULL};
  int rc = -1;

  if (seal_text (st, id, "access_token", access_token, &access, err) == 0
      && seal_text (st, id, "traffic_token", traffic_token, &traffic, err) == 0)
    {
      a.access = access.data;
      a.traffic = traffic.data;
      rc = run (st, "UPDATE sandboxes SET access_token = ?2, traffic_token = ?3 WHERE id = ?1",
                bind_tokens, &a, NULL, err);
    }
  sbx_buf_free (&access);
  sbx_buf_free (&traffic);
  return rc;
}

static void
bind_text1 (sqlite3_stmt *s, const void *arg)
{
  sqlite3_bind_text (s, 1, arg, -1, SQLITE_STATIC);
}

int
sbx_store_key_delete (struct sbx_store *st, const char *id, sbx_error_t **err)
{
  int changes = 0;

  if (run (st, "DELETE FROM api_keys WHERE id = ?1", bind_text1, id, &changes, err) < 0)
    return -1;
  if (changes == 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "key `%s` not found", id);
  return 0;
}

/* ---- snapshots (core/snapshot.c) ---------------------------------------- */

static void
bind_snapshot (sqlite3_stmt *s, const void *arg)
{
  const struct sbx_snapshot_record *r = arg;
  sqlite3_bind_text (s, 1, r->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 2, r->name, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 3, r->template_name, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 4, r->source, -1, SQLITE_STATIC);
  sqlite3_bind_int64 (s, 5, r->created_ms);
  sqlite3_bind_int64 (s, 6, (sqlite3_int64) r->bytes);
  sqlite3_bind_int64 (s, 7, (sqlite3_int64) r->files);
  sqlite3_bind_int64 (s, 8, (sqlite3_int64) r->disk);
  sqlite3_bind_int64 (s, 9, (sqlite3_int64) r->isolation);
  sqlite3_bind_int64 (s, 10, (sqlite3_int64) r->memory);
  sqlite3_bind_int64 (s, 11, (sqlite3_int64) r->cpu_milli);
  sqlite3_bind_int64 (s, 12, r->pending ? 1 : 0);
}

int
sbx_store_snapshot_insert (struct sbx_store *st, const struct sbx_snapshot_record *r,
                           sbx_error_t **err)
{
  return run (st,
              "INSERT INTO snapshots (tenant, name, template, source, created_ms, bytes, files,"
              " disk, isolation, memory, cpu_milli, pending)"
              " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
              bind_snapshot, r, NULL, err);
}

int
sbx_store_snapshot_complete (struct sbx_store *st, const struct sbx_snapshot_record *r,
                             sbx_error_t **err)
{
  int changes = 0;

  if (run (st,
           "UPDATE snapshots SET created_ms = ?5, bytes = ?6, files = ?7, pending = 0"
           " WHERE tenant = ?1 AND name = ?2 AND pending = 1",
           bind_snapshot, r, &changes, err)
      < 0)
    return -1;
  if (changes == 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "snapshot `%s`'s pending record is gone", r->name);
  return 0;
}

static void
bind_two (sqlite3_stmt *s, const void *arg)
{
  const char *const *a = arg;
  sqlite3_bind_text (s, 1, a[0], -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 2, a[1], -1, SQLITE_STATIC);
}

int
sbx_store_snapshot_delete (struct sbx_store *st, const char *tenant, const char *name,
                           int pending, sbx_error_t **err)
{
  const char *a[2] = {tenant, name};
  int changes = 0;

  if (run (st,
           pending ? "DELETE FROM snapshots WHERE tenant = ?1 AND name = ?2 AND pending = 1"
                   : "DELETE FROM snapshots WHERE tenant = ?1 AND name = ?2 AND pending = 0",
           bind_two, a, &changes, err)
      < 0)
    return -1;
  if (changes == 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "snapshot `%s` not found", name);
  return 0;
}

int
sbx_store_snapshot_list (struct sbx_store *st, const char *tenant, const char *name,
                         void (*fn) (const struct sbx_snapshot_record *r, void *arg), void *arg,
                         sbx_error_t **err)
{
  sqlite3_stmt *stmt = NULL;
  int rc;

  pthread_mutex_lock (&st->lock);
  if (sqlite3_prepare_v2 (st->db,
                          "SELECT tenant, name, template, source, created_ms, bytes, files, disk,"
                          " isolation, memory, cpu_milli, pending"
                          " FROM snapshots WHERE (?1 IS NULL OR tenant = ?1)"
                          " AND (?2 IS NULL OR name = ?2) ORDER BY created_ms, name",
                          -1, &stmt, NULL)
      != SQLITE_OK)
    {
      db_err (st, err, "prepare");
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  if (tenant)
    sqlite3_bind_text (stmt, 1, tenant, -1, SQLITE_STATIC);
  if (name)
    sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
    {
      struct sbx_snapshot_record r;
      const char *t = (const char *) sqlite3_column_text (stmt, 0);
      const char *n = (const char *) sqlite3_column_text (stmt, 1);
      const char *tp = (const char *) sqlite3_column_text (stmt, 2);
      const char *src = (const char *) sqlite3_column_text (stmt, 3);
      memset (&r, 0, sizeof r);
      if (!t || !n || !tp || !src)
        continue;
      snprintf (r.tenant, sizeof r.tenant, "%s", t);
      snprintf (r.name, sizeof r.name, "%s", n);
      snprintf (r.template_name, sizeof r.template_name, "%s", tp);
      snprintf (r.source, sizeof r.source, "%s", src);
      r.created_ms = sqlite3_column_int64 (stmt, 4);
      r.bytes = (uint64_t) sqlite3_column_int64 (stmt, 5);
      r.files = (uint64_t) sqlite3_column_int64 (stmt, 6);
      r.disk = (uint64_t) sqlite3_column_int64 (stmt, 7);
      r.isolation = (uint32_t) sqlite3_column_int64 (stmt, 8);
      r.memory = (uint64_t) sqlite3_column_int64 (stmt, 9);
      r.cpu_milli = (uint64_t) sqlite3_column_int64 (stmt, 10);
      r.pending = sqlite3_column_int64 (stmt, 11) != 0;
      fn (&r, arg);
    }
  if (rc != SQLITE_DONE)
    db_err (st, err, "list snapshots");
  sqlite3_finalize (stmt);
  pthread_mutex_unlock (&st->lock);
  return rc == SQLITE_DONE ? 0 : -1;
}

struct secret_args
{
  const char *tenant, *name, *description;
  const void *value;
  size_t value_len;
  int64_t created_ms;
};

static void
bind_secret (sqlite3_stmt *s, const void *arg)
{
  const struct secret_args *a = arg;
  sqlite3_bind_text (s, 1, a->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text (s, 2, a->name, -1, SQLITE_STATIC);
  if (a->value)
    {
      sqlite3_bind_blob (s, 3, a->value, (int) a->value_len, SQLITE_STATIC);
      sqlite3_bind_text (s, 4, a->description ? a->description : "", -1, SQLITE_STATIC);
      sqlite3_bind_int64 (s, 5, a->created_ms);
    }
}

int
sbx_store_secret_insert (struct sbx_store *st, const char *tenant, const char *name,
                         const void *value, size_t value_len, const char *description,
                         int64_t created_ms, sbx_error_t **err)
{
  struct secret_args a = {tenant, name, description, NULL, 0, created_ms};
  struct sbx_buf sealed = SBX_BUF_INIT;
  sbx_error_t *e = NULL;
  int rc;

  if (seal_secret (st, tenant, name, value, value_len, &sealed, err) < 0)
    return -1;
  a.value = sealed.data;
  a.value_len = sealed.len;
  rc = run (st,
            "INSERT INTO secrets (tenant, name, value, description, created_ms, sealed)"
            " VALUES (?1, ?2, ?3, ?4, ?5, 1)",
            bind_secret, &a, NULL, &e);
  sbx_buf_free (&sealed);
  if (rc == 0)
    return 0;
  if ((sqlite3_extended_errcode (st->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
      || strstr (e->msg, "UNIQUE") != NULL)
    {
      sbx_error_free (e);
      return sbx_err (err, SBX_E_CONFLICT, "secret `%s` already exists (delete it first)", name);
    }
  sbx_error_move (err, &e);
  return -1;
}

int
sbx_store_secret_delete (struct sbx_store *st, const char *tenant, const char *name,
                         sbx_error_t **err)
{
  struct secret_args a = {tenant, name, NULL, NULL, 0, 0};
  int changes = 0;

  if (run (st, "DELETE FROM secrets WHERE tenant = ?1 AND name = ?2", bind_secret, &a, &changes,
           err)
      < 0)
    return -1;
  if (changes == 0)
    return sbx_err (err, SBX_E_NOT_FOUND, "secret `%s` not found", name);
  return 0;
}

int
sbx_store_secret_get (struct sbx_store *st, const char *tenant, const char *name, char **value,
                      size_t *len, sbx_error_t **err)
{
  struct sbx_buf sealed = SBX_BUF_INIT, plain = SBX_BUF_INIT;
  sqlite3_stmt *stmt = NULL;
  int rc, opened = 0;

  *value = NULL;
  *len = 0;
  pthread_mutex_lock (&st->lock);
  if (sqlite3_prepare_v2 (st->db,
                          "SELECT value FROM secrets WHERE tenant = ?1 AND name = ?2 AND sealed = 1",
                          -1, &stmt, NULL)
      != SQLITE_OK)
    {
      db_err (st, err, "prepare");
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  sqlite3_bind_text (stmt, 1, tenant, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, 2, name, -1, SQLITE_STATIC);
  rc = sqlite3_step (stmt);
  if (rc == SQLITE_ROW)
    sbx_buf_append (&sealed, sqlite3_column_blob (stmt, 0),
                    (size_t) sqlite3_column_bytes (stmt, 0));
  sqlite3_finalize (stmt);
  pthread_mutex_unlock (&st->lock);
  if (rc == SQLITE_ROW)
    {
      char aad[200];
      size_t aad_len = seal_aad (aad, sizeof aad, "secret", tenant, name);

      opened = sealed.data != NULL && aad_len > 0
               && sbx_unseal (st->key, aad, aad_len, sealed.data, sealed.len, &plain, err) == 0;
      sbx_buf_free (&sealed);
      if (!opened)
        {
          sbx_buf_free (&plain);
          return err && *err ? sbx_err_wrap (err, "secret `%s`", name)
                             : sbx_err (err, SBX_E_SYSTEM, "secret `%s` cannot be read", name);
        }
      *len = plain.len;
      *value = sbx_buf_steal (&plain); /* the caller wipes it */
      return *value ? 0 : sbx_err_oom (err);
    }
  if (rc == SQLITE_DONE)
    return sbx_err (err, SBX_E_NOT_FOUND, "secret `%s` not found", name);
  return sbx_err (err, SBX_E_SYSTEM, "secret lookup failed");
}

int
sbx_store_secret_list (struct sbx_store *st, const char *tenant,
                       void (*fn) (const char *name, const char *description, int64_t created_ms,
                                   void *arg),
                       void *arg, sbx_error_t **err)
{
  sqlite3_stmt *stmt = NULL;
  int rc;

  pthread_mutex_lock (&st->lock);
  if (sqlite3_prepare_v2 (st->db,
                          "SELECT name, description, created_ms FROM secrets WHERE tenant = ?1"
                          " ORDER BY name",
                          -1, &stmt, NULL)
      != SQLITE_OK)
    {
      db_err (st, err, "prepare");
      pthread_mutex_unlock (&st->lock);
      return -1;
    }
  sqlite3_bind_text (stmt, 1, tenant, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
    {
      const char *n = (const char *) sqlite3_column_text (stmt, 0);
      const char *d = (const char *) sqlite3_column_text (stmt, 1);
      if (n)
        fn (n, d ? d : "", sqlite3_column_int64 (stmt, 2), arg);
    }
  if (rc != SQLITE_DONE)
    db_err (st, err, "list secrets");
  sqlite3_finalize (stmt);
  pthread_mutex_unlock (&st->lock);
  return rc == SQLITE_DONE ? 0 : -1;
}
