/* sbx: envd's /files: GET downloads a file, POST uploads one or many
 * (multipart/form-data, parts named "file" whose filename is the
 * destination path; or a raw body to ?path=), streamed into the sandbox
 * through the same parent-side resolver and in-sandbox copier as the
 * native files API. Authorized by the sandbox's access token, or by a URL
 * signed with it (the SDK's uploadUrl()/downloadUrl()):
 *   signature = "v1_" + base64(sha256("PATH:OPERATION:USER:TOKEN[:EXPIRY]"))
 * without padding (infra packages/shared/pkg/keys/sha256.go). */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <strings.h>
#include <unistd.h>

#include "core/audit.h"
#include "priv/host.h"
#include "server/e2b.h"
#include "util/base64.h"
#include "util/utf8.h"

#define MAX_FILES_PER_REQUEST 1000
#define POST_BUFFER 65536

struct files_upload
{
  struct MHD_PostProcessor *pp; /* multipart; NULL for a raw body */
  struct sbx_fs_ctx ctx;
  struct sbx_fs_upload up;
  int open;            /* up is in progress */
  uint64_t part_bytes; /* of the current part */
  char part_name[SBX_FS_PATH_MAX];
  char current[SBX_FS_PATH_MAX]; /* absolute path being written */
  const char *query_path;        /* ?path=, which wins over filenames */
  const char *user;
  unsigned files;
  json_t *written; /* [{path, name, type[, metadata]}] */
  /* X-Metadata-KEY: VALUE, checked; every file of the upload gets it */
  struct sbx_fs_meta meta;
  sbx_error_t *err;
  /* the audit record of each file: its content's hash as it streams by */
  EVP_MD_CTX *sha;
  uint64_t file_bytes;
  const char *sandbox; /* r->sb's id */
  /* Content-Encoding: gzip (a raw body): inflated as it arrives; the file
     is what it inflates to, bounded like any upload by the disk limit. */
  z_stream *z;
  int z_ended; /* the gzip stream's end was seen */
};

/* ---- authorization ------------------------------------------------------ */

enum signature
{
  SIGNATURE_BAD,     /* none, malformed, or not this sandbox's */
  SIGNATURE_EXPIRED, /* this sandbox's, past its expiration */
  SIGNATURE_OK,
};

/* E2B's method signing: v1_ and the unpadded base64 of SHA-256 over
   "path:operation:user:access token[:expiration]". An expired one is told
   apart only once it verifies (which needs the token), as E2B's envd says
   "signature is already expired". */
static enum signature
signature_check (struct sbx_req *r, const char *operation)
{
  const char *sig = sbx_req_query (r, "signature");
  const char *exp = sbx_req_query (r, "signature_expiration");
  const char *path = sbx_req_query (r, "path");
  const char *user = sbx_req_query (r, "username");
  struct sbx_buf raw = SBX_BUF_INIT, enc = SBX_BUF_INIT;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  long long expires = 0;
  int ok = 0;

  if (sig == NULL || strncmp (sig, "v1_", 3) != 0 || path == NULL)
    return SIGNATURE_BAD;
  if (exp != NULL)
    {
      char *end;
      errno = 0;
      expires = strtoll (exp, &end, 10);
      if (*exp == '\0' || *end != '\0' || errno != 0)
        return SIGNATURE_BAD; /* not a time */
    }
  sbx_buf_printf (&raw, "%s:%s:%s:%s", path, operation, user ? user : "", r->sb->access_token);
  if (exp != NULL)
    sbx_buf_printf (&raw, ":%s", exp);
  if (!raw.failed)
    {
      SHA256 ((const unsigned char *) raw.data, raw.len, digest);
      sbx_base64_encode (&enc, digest, sizeof digest);
      while (enc.len > 0 && enc.data[enc.len - 1] == '=')
        enc.len--; /* RawStdEncoding: no padding */
      ok = !enc.failed && strlen (sig + 3) == enc.len
           && CRYPTO_memcmp (sig + 3, enc.data, enc.len) == 0;
    }
  sbx_buf_free (&raw);
  sbx_buf_free (&enc);
  if (!ok)
    return SIGNATURE_BAD;
  return exp != NULL && expires <= sbx_now_ms () / 1000 ? SIGNATURE_EXPIRED : SIGNATURE_OK;
}

static int
authorize (struct sbx_req *r, const char *operation, sbx_error_t **err)
{
  const char *t = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "X-Access-Token");
  enum signature sig;

  if (r->admin)
    return 0;
  if (t != NULL && strlen (t) == strlen (r->sb->access_token)
      && CRYPTO_memcmp (t, r->sb->access_token, strlen (t)) == 0)
    return 0;
  sig = signature_check (r, operation);
  if (sig == SIGNATURE_OK)
    return 0;
  if (sig == SIGNATURE_EXPIRED)
    return sbx_err (err, SBX_E_UNAUTHORIZED, "signature is already expired");
  return sbx_err (err, SBX_E_UNAUTHORIZED,
                  "unauthorized access, please provide a valid access token or method signing");
}

/* ?username= names the user on /files; else the Basic header's. */
static int
files_user (struct sbx_req *r, const char **user, sbx_error_t **err)
{
  const char *u = sbx_req_query (r, "username");

  if (u == NULL || u[0] == '\0')
    *user = sbx_e2b_user (r);
  else if (strcmp (u, "user") == 0 || strcmp (u, "root") == 0)
    *user = strcmp (u, "user") == 0 ? "user" : "root";
  else
    return sbx_err (err, SBX_E_UNAUTHORIZED, "the user must be `user` or `root`");
  return 0;
}

/* ---- GET ---------------------------------------------------------------- */

void
sbx_route_envd_files_get (struct sbx_req *r)
{
  char path[SBX_FS_PATH_MAX], disposition[600];
  struct sbx_fs_ctx ctx;
  struct MHD_Response *resp;
  sbx_error_t *err = NULL;
  const char *user = NULL, *leaf;

  ctx.root = -1;
  if (authorize (r, "read", &err) < 0 || files_user (r, &user, &err) < 0
      || sbx_e2b_path (r, user, sbx_req_query (r, "path"), path, &err) < 0
      || sbx_sandbox_fs_open (r->sb, user, &ctx, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  resp = sbx_files_response (&ctx, path, &err);
  sbx_sandbox_fs_close (&ctx);
  if (resp == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  leaf = strrchr (path, '/');
  leaf = leaf && leaf[1] ? leaf + 1 : "file";
  /* A name from the sandbox goes into a header: quotes, controls and
     non-ASCII bytes out. */
  {
    char safe[256];
    size_t i, n = 0;
    for (i = 0; leaf[i] && n < sizeof safe - 1; i++)
      safe[n++] = (leaf[i] >= 0x20 && leaf[i] < 0x7f && leaf[i] != '"' && leaf[i] != '\\')
                      ? leaf[i]
                      : '_';
    safe[n] = '\0';
    snprintf (disposition, sizeof disposition, "inline; filename=\"%s\"", safe);
  }
  MHD_add_response_header (resp, "Content-Type", "application/octet-stream");
  MHD_add_response_header (resp, "Content-Disposition", disposition);
  sbx_reply_response (r, 200, resp);
}

/* ---- POST --------------------------------------------------------------- */

static void
fail_upload (struct files_upload *u, sbx_error_t *err)
{
  if (u->err == NULL)
    u->err = err ? err : (sbx_err_oom (&u->err), u->err);
  else
    sbx_error_free (err);
  if (u->open)
    {
      sbx_host_fs_upload_abort (&u->up);
      u->open = 0;
    }
}

static int
commit_current (struct files_upload *u)
{
  sbx_error_t *err = NULL;
  const char *leaf;

  if (!u->open)
    return 0;
  u->open = 0;
  if (sbx_host_fs_upload_commit (&u->up, &err) < 0)
    {
      fail_upload (u, err);
      return -1;
    }
  {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    char hexd[65];
    unsigned i;
    EVP_DigestFinal_ex (u->sha, d, &dn);
    for (i = 0; i < dn && i < 32; i++)
      snprintf (hexd + 2 * i, 3, "%02x", d[i]);
    hexd[64] = '\0';
    sbx_audit_file_write (u->sandbox, u->current, u->file_bytes, hexd, "e2b");
  }
  leaf = strrchr (u->current, '/');
  {
    json_t *o = json_pack ("{s:s, s:s, s:s}", "path", u->current, "name",
                           leaf ? leaf + 1 : u->current, "type", "file");
    /* What the file was given is what it has: the upload made a new inode
       and set exactly these. */
    if (o != NULL && u->meta.count > 0)
      json_object_set_new (o, "metadata", sbx_e2b_meta_json (&u->meta));
    json_array_append_new (u->written, o);
  }
  return 0;
}

static int
open_file (struct sbx_req *r, struct files_upload *u, const char *name)
{
  sbx_error_t *err = NULL;

  if (++u->files > MAX_FILES_PER_REQUEST)
    {
      sbx_err (&err, SBX_E_LIMIT, "at most %d files per upload", MAX_FILES_PER_REQUEST);
      fail_upload (u, err);
      return -1;
    }
  if (u->query_path == NULL && (name == NULL || name[0] == '\0'))
    {
      sbx_err (&err, SBX_E_INVALID, "a file part needs a filename (its path) or ?path=");
      fail_upload (u, err);
      return -1;
    }
  /* envd creates the parents, and replaces a file that is there. */
  if (sbx_e2b_path (r, u->user, u->query_path ? u->query_path : name, u->current, &err) < 0
      || sbx_host_fs_upload_begin_meta (&u->ctx, u->current, 0644, 1, &u->meta, &u->up, &err)
             < 0)
    {
      fail_upload (u, err);
      return -1;
    }
  if ((u->sha == NULL && (u->sha = EVP_MD_CTX_new ()) == NULL)
      || EVP_DigestInit_ex (u->sha, EVP_sha256 (), NULL) != 1)
    {
      sbx_host_fs_upload_abort (&u->up);
      sbx_err_oom (&err);
      fail_upload (u, err);
      return -1;
    }
  u->open = 1;
  u->part_bytes = 0;
  u->file_bytes = 0;
  return 0;
}

/* Into the file, and into its hash. */
static int
upload_write (struct files_upload *u, const char *data, size_t size, sbx_error_t **err)
{
  if (sbx_host_fs_upload_write (&u->up, data, size, err) < 0)
    return -1;
  EVP_DigestUpdate (u->sha, data, size);
  u->file_bytes += size;
  return 0;
}

/* A gzip body's next bytes, inflated into the file. Anything after the
   gzip stream's end, or a stream that is not gzip, is refused. */
static int
inflate_write (struct files_upload *u, const char *data, size_t len, sbx_error_t **err)
{
  unsigned char out[64 * 1024];

  if (u->z_ended)
    return len ? sbx_err (err, SBX_E_INVALID, "bytes after the end of the gzip body") : 0;
  u->z->next_in = (unsigned char *) (uintptr_t) data;
  u->z->avail_in = (uInt) len;
  while (u->z->avail_in > 0 && !u->z_ended)
    {
      int rc;
      u->z->next_out = out;
      u->z->avail_out = sizeof out;
      rc = inflate (u->z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END)
        return sbx_err (err, SBX_E_INVALID, "the gzip body is malformed (%s)",
                        u->z->msg ? u->z->msg : "inflate failed");
      if (sizeof out - u->z->avail_out > 0
          && upload_write (u, (const char *) out, sizeof out - u->z->avail_out, err) < 0)
        return -1;
      if (rc == Z_STREAM_END)
        {
          u->z_ended = 1;
          if (u->z->avail_in > 0)
            return sbx_err (err, SBX_E_INVALID, "bytes after the end of the gzip body");
        }
    }
  return 0;
}

static enum MHD_Result
on_part (void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
         const char *content_type, const char *transfer_encoding, const char *data, uint64_t off,
         size_t size)
{
  struct sbx_req *r = cls;
  struct files_upload *u = r->e2b_files;
  sbx_error_t *err = NULL;

  (void) kind;
  (void) content_type;
  (void) transfer_encoding;
  if (u->err != NULL)
    return MHD_NO;
  if (key == NULL || strcmp (key, "file") != 0)
    return MHD_YES; /* other fields: not ours */
  /* A new part starts at offset 0; the same part may be called at 0 with
     no data first. */
  if (off == 0
      && (!u->open || u->part_bytes > 0 || strcmp (filename ? filename : "", u->part_name) != 0))
    {
      if (commit_current (u) < 0)
        return MHD_NO;
      snprintf (u->part_name, sizeof u->part_name, "%s", filename ? filename : "");
      if (open_file (r, u, filename) < 0)
        return MHD_NO;
    }
  if (size > 0)
    {
      if (!u->open)
        return MHD_NO;
      if (upload_write (u, data, size, &err) < 0)
        {
          fail_upload (u, err);
          return MHD_NO;
        }
      u->part_bytes += size;
    }
  return MHD_YES;
}

/* envd's file metadata: each X-Metadata-KEY header, KEY lowercased (a
   header name's case means nothing in HTTP, and envd lowercases it), the
   first of a repeated one winning. Every byte is hostile whatever the SDK
   checked: sbx_fs_meta_add refuses what is not a token or printable
   ASCII, and the bounds (iso/fs.h). */
struct meta_scan
{
  struct sbx_fs_meta *meta;
  sbx_error_t *err;
};

static enum MHD_Result
scan_metadata (void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
               const char *value, size_t value_size)
{
  static const char prefix[] = "X-Metadata-";
  struct meta_scan *ms = cls;
  char lower[SBX_FS_META_KEY_MAX];
  const char *k;
  size_t n;

  (void) kind;
  if (key == NULL || key_size < sizeof prefix - 1
      || strncasecmp (key, prefix, sizeof prefix - 1) != 0)
    return MHD_YES;
  k = key + sizeof prefix - 1;
  n = key_size - (sizeof prefix - 1);
  if (n <= sizeof lower)
    {
      for (size_t i = 0; i < n; i++)
        lower[i] = (k[i] >= 'A' && k[i] <= 'Z') ? (char) (k[i] - 'A' + 'a') : k[i];
      k = lower;
    }
  if (sbx_fs_meta_add (ms->meta, k, n, value ? value : "", value ? value_size : 0, &ms->err)
      < 0)
    return MHD_NO;
  return MHD_YES;
}

static int
read_metadata (struct sbx_req *r, struct sbx_fs_meta *meta, sbx_error_t **err)
{
  struct meta_scan ms = {meta, NULL};

  memset (meta, 0, sizeof *meta);
  MHD_get_connection_values_n (r->conn, MHD_HEADER_KIND, scan_metadata, &ms);
  if (ms.err != NULL)
    {
      *err = ms.err;
      return -1;
    }
  return 0;
}

/* The upload's answer is this error, once its body has been read. */
static int
refuse_after_body (struct files_upload *u, enum sbx_error_kind kind, const char *msg)
{
  sbx_err (&u->err, kind, "%s", msg);
  return 0;
}

int
sbx_e2b_files_begin (struct sbx_req *r, sbx_error_t **err)
{
  const char *ct = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Content-Type");
  struct files_upload *u;

  if (authorize (r, "write", err) < 0)
    return -1;
  u = calloc (1, sizeof *u);
  if (u == NULL)
    return sbx_err_oom (err);
  r->e2b_files = u;
  u->ctx.root = -1;
  u->written = json_array ();
  u->sandbox = r->sb->id;
  u->query_path = sbx_req_query (r, "path");
  if (u->query_path && u->query_path[0] == '\0')
    u->query_path = NULL;
  if (u->written == NULL || files_user (r, &u->user, err) < 0
      || sbx_sandbox_fs_open (r->sb, u->user, &u->ctx, err) < 0)
    return -1;
  /* From here on, a refusal of what the (authorized) client sends is
     answered after its body, which is read and dropped: a reply before it
     makes the client's send fail (EPIPE), and the SDK reports a bare
     `fetch failed` instead of the status. Nothing is written. */
  /* File metadata (X-Metadata-*, envd 0.6.2's xattrs): a bad pair is a
     400 and no file, the whole upload's. */
  if (read_metadata (r, &u->meta, &u->err) < 0)
    return 0;
  if (ct != NULL && strncasecmp (ct, "multipart/form-data", 19) == 0)
    {
      u->pp = MHD_create_post_processor (r->conn, POST_BUFFER, on_part, r);
      if (u->pp == NULL)
        return refuse_after_body (u, SBX_E_INVALID, "the multipart body has no boundary");
      return 0;
    }
  if (ct != NULL && strncasecmp (ct, "application/octet-stream", 24) != 0)
    {
      sbx_err (&u->err, SBX_E_INVALID,
               "upload as multipart/form-data or application/octet-stream, not `%.64s`", ct);
      return 0;
    }
  {
    const char *enc = MHD_lookup_connection_value (r->conn, MHD_HEADER_KIND, "Content-Encoding");
    if (enc != NULL && strcasecmp (enc, "gzip") == 0)
      {
        u->z = calloc (1, sizeof *u->z);
        /* 15 + 16: a gzip header and trailer, the largest window */
        if (u->z == NULL || inflateInit2 (u->z, 15 + 16) != Z_OK)
          {
            free (u->z);
            u->z = NULL;
            return sbx_err_oom (err);
          }
      }
    else if (enc != NULL && strcasecmp (enc, "identity") != 0)
      return refuse_after_body (u, SBX_E_INVALID,
                                "Content-Encoding must be gzip or identity (uploads)");
  }
  if (u->query_path == NULL)
    return refuse_after_body (u, SBX_E_INVALID, "a raw upload needs ?path=");
  if (open_file (r, u, NULL) < 0)
    {
      sbx_error_t *e = u->err;
      u->err = NULL;
      *err = e;
      return -1;
    }
  return 0;
}

void
sbx_e2b_files_body (struct sbx_req *r, const char *data, size_t len)
{
  struct files_upload *u = r->e2b_files;
  sbx_error_t *err = NULL;

  if (u == NULL || u->err != NULL)
    return;
  if (u->pp != NULL)
    {
      if (MHD_post_process (u->pp, data, len) != MHD_YES && u->err == NULL)
        {
          sbx_err (&err, SBX_E_INVALID, "the multipart body is malformed");
          fail_upload (u, err);
        }
      return;
    }
  if (u->open && u->z != NULL)
    {
      if (inflate_write (u, data, len, &err) < 0)
        fail_upload (u, err);
      return;
    }
  if (u->open && upload_write (u, data, len, &err) < 0)
    fail_upload (u, err);
}

void
sbx_e2b_files_free (struct sbx_req *r)
{
  struct files_upload *u = r->e2b_files;

  if (u == NULL)
    return;
  if (u->pp)
    MHD_destroy_post_processor (u->pp);
  if (u->z)
    {
      inflateEnd (u->z);
      free (u->z);
    }
  if (u->open)
    sbx_host_fs_upload_abort (&u->up);
  sbx_sandbox_fs_close (&u->ctx);
  json_decref (u->written);
  sbx_error_free (u->err);
  if (u->sha)
    EVP_MD_CTX_free (u->sha);
  free (u);
  r->e2b_files = NULL;
}

void
sbx_route_envd_files_post (struct sbx_req *r)
{
  struct files_upload *u = r->e2b_files;
  sbx_error_t *err = NULL;

  if (u->pp != NULL)
    {
      /* Flushes the last part to on_part. */
      if (MHD_destroy_post_processor (u->pp) != MHD_YES && u->err == NULL)
        {
          sbx_err (&err, SBX_E_INVALID, "the multipart body ended in the middle of a part");
          fail_upload (u, err);
        }
      u->pp = NULL;
    }
  if (u->err == NULL && u->z != NULL && u->open && !u->z_ended)
    {
      sbx_error_t *short_body = NULL;
      sbx_err (&short_body, SBX_E_INVALID, "the gzip body ended before its end");
      fail_upload (u, short_body);
    }
  if (u->err == NULL)
    commit_current (u);
  if (u->err != NULL)
    {
      err = u->err;
      u->err = NULL;
      if (err->kind == SBX_E_TOO_LARGE)
        {
          /* envd's 507 (the SDK's NotEnoughSpaceError). */
          json_t *o = json_pack ("{s:i, s:s}", "code", 507, "message", err->msg);
          sbx_error_free (err);
          sbx_reply_json (r, 507, o);
          return;
        }
      sbx_reply_error (r, err);
      return;
    }
  if (json_array_size (u->written) == 0)
    {
      sbx_reply_errorf (r, SBX_E_INVALID, "the request has no file part named `file`");
      return;
    }
  sbx_reply_json (r, 200, json_incref (u->written));
}
