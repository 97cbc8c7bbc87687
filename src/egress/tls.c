/* sbx: the egress proxy's TLS (see egress/tls.h). */
#include "egress/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"

#define CA_DAYS 3650
#define LEAF_DAYS 30
#define LEAF_CACHE 128
#define HANDSHAKE_TIMEOUT_S 10

/* ---- the CA, in the parent --------------------------------------------- */

static int
add_ext (X509 *cert, X509 *issuer, int nid, const char *value)
{
  X509V3_CTX ctx;
  X509_EXTENSION *ext;

  X509V3_set_ctx_nodb (&ctx);
  X509V3_set_ctx (&ctx, issuer, cert, NULL, NULL, 0);
  ext = X509V3_EXT_conf_nid (NULL, &ctx, nid, value);
  if (ext == NULL)
    return -1;
  X509_add_ext (cert, ext, -1);
  X509_EXTENSION_free (ext);
  return 0;
}

static int
random_serial (X509 *cert)
{
  unsigned char b[16];
  BIGNUM *bn;
  int ok;

  if (RAND_bytes (b, sizeof b) != 1)
    return -1;
  b[0] &= 0x7f; /* positive */
  bn = BN_bin2bn (b, sizeof b, NULL);
  ok = bn != NULL && BN_to_ASN1_INTEGER (bn, X509_get_serialNumber (cert)) != NULL;
  BN_free (bn);
  return ok ? 0 : -1;
}

static X509 *
make_ca (EVP_PKEY *key)
{
  X509 *c = X509_new ();
  X509_NAME *name;
  char host[64] = "";

  if (c == NULL)
    return NULL;
  gethostname (host, sizeof host - 1);
  name = X509_get_subject_name (c);
  if (X509_set_version (c, 2) != 1 || random_serial (c) < 0
      || X509_gmtime_adj (X509_getm_notBefore (c), -3600) == NULL
      || X509_gmtime_adj (X509_getm_notAfter (c), (long) CA_DAYS * 86400) == NULL
      || X509_set_pubkey (c, key) != 1
      || X509_NAME_add_entry_by_txt (name, "O", MBSTRING_ASC, (const unsigned char *) "sbx", -1, -1,
                                     0)
             != 1
      || X509_NAME_add_entry_by_txt (name, "CN", MBSTRING_UTF8,
                                     (const unsigned char *) "sbx egress CA", -1, -1, 0)
             != 1
      || X509_set_issuer_name (c, name) != 1
      || add_ext (c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0
      || add_ext (c, c, NID_key_usage, "critical,keyCertSign,cRLSign") < 0
      || add_ext (c, c, NID_subject_key_identifier, "hash") < 0
      || X509_sign (c, key, EVP_sha256 ()) <= 0)
    {
      X509_free (c);
      return NULL;
    }
  return c;
}

/* Write through a temporary name (mode), then rename into place. */
static int
write_pem (int dir, const char *name, mode_t mode, EVP_PKEY *key, X509 *cert, const char *prefix,
           size_t prefix_len, sbx_error_t **err)
{
  char tmp[64];
  int fd;
  FILE *f;
  int ok = 1;

  snprintf (tmp, sizeof tmp, ".%s.tmp", name);
  unlinkat (dir, tmp, 0);
  fd = openat (dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return sbx_err_sys (err, errno, "create %s/%s", SBX_EGRESS_CA_DIR, tmp);
  fchmod (fd, mode);
  f = fdopen (fd, "w");
  if (f == NULL)
    {
      close (fd);
      return sbx_err_sys (err, errno, "fdopen");
    }
  if (prefix_len > 0 && fwrite (prefix, 1, prefix_len, f) != prefix_len)
    ok = 0;
  if (prefix_len > 0 && prefix[prefix_len - 1] != '\n' && fputc ('\n', f) == EOF)
    ok = 0;
  if (key != NULL && PEM_write_PrivateKey (f, key, NULL, NULL, 0, NULL, NULL) != 1)
    ok = 0;
  if (cert != NULL && PEM_write_X509 (f, cert) != 1)
    ok = 0;
  if (fflush (f) != 0 || fsync (fileno (f)) != 0)
    ok = 0;
  if (fclose (f) != 0)
    ok = 0;
  if (!ok || renameat (dir, tmp, dir, name) < 0)
    {
      unlinkat (dir, tmp, 0);
      return sbx_err (err, SBX_E_SYSTEM, "cannot write %s/%s", SBX_EGRESS_CA_DIR, name);
    }
  return 0;
}

static char *
read_all (const char *path, size_t *len)
{
  FILE *f = fopen (path, "re");
  char *buf = NULL;
  size_t cap = 0, n = 0;

  *len = 0;
  if (f == NULL)
    return NULL;
  for (;;)
    {
      size_t got;
      if (n == cap)
        {
          char *g = realloc (buf, cap ? cap * 2 : 65536);
          if (g == NULL)
            {
              free (buf);
              fclose (f);
              return NULL;
            }
          buf = g;
          cap = cap ? cap * 2 : 65536;
        }
      got = fread (buf + n, 1, cap - n, f);
      if (got == 0)
        break;
      n += got;
    }
  fclose (f);
  *len = n;
  return buf;
}

void
sbx_egress_ca_public_dir (const char *state_dir, char *out, size_t cap)
{
  unsigned char d[SHA256_DIGEST_LENGTH];
  char hex[33];
  int i;

  SHA256 ((const unsigned char *) state_dir, strlen (state_dir), d);
  for (i = 0; i < 16; i++)
    snprintf (hex + 2 * i, 3, "%02x", d[i]);
  snprintf (out, cap, "/run/sbx/egress-ca/%s", hex);
}

void
sbx_egress_ca_unpublish (const char *state_dir)
{
  char pub[200], path[260];

  sbx_egress_ca_public_dir (state_dir, pub, sizeof pub);
  snprintf (path, sizeof path, "%s/ca.crt", pub);
  unlink (path);
  snprintf (path, sizeof path, "%s/bundle.crt", pub);
  unlink (path);
  rmdir (pub);
  /* Shared with other daemons: gone only when empty. */
  rmdir ("/run/sbx/egress-ca");
  rmdir ("/run/sbx");
}

int
sbx_egress_ca_ensure (const char *state_dir, sbx_error_t **err)
{
  char path[700];
  cleanup_close int dir = -1;
  struct stat st;
  EVP_PKEY *key = NULL;
  X509 *ca = NULL;
  char *host = NULL;
  size_t host_len = 0;
  int rc = -1;

  snprintf (path, sizeof path, "%s/%s", state_dir, SBX_EGRESS_CA_DIR);
  if (mkdir (path, 0755) < 0 && errno != EEXIST)
    return sbx_err_sys (err, errno, "create `%s`", path);
  dir = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0 || fstat (dir, &st) < 0)
    return sbx_err_sys (err, errno, "open `%s`", path);
  /* The state directory is the front end's: this one is root's, so the
     front end can neither read the key nor put another in its place. */
  if (st.st_uid != 0 && fchown (dir, 0, 0) < 0)
    return sbx_err_sys (err, errno, "chown `%s`", path);
  fchmod (dir, 0755);
  if (fstatat (dir, "ca.key", &st, AT_SYMLINK_NOFOLLOW) == 0
      && fstatat (dir, "ca.crt", &st, AT_SYMLINK_NOFOLLOW) == 0)
    {
      FILE *f;
      int fd = openat (dir, "ca.crt", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      f = fd >= 0 ? fdopen (fd, "r") : NULL;
      ca = f ? PEM_read_X509 (f, NULL, NULL, NULL) : NULL;
      if (f)
        fclose (f);
      else if (fd >= 0)
        close (fd);
      if (ca == NULL)
        {
          sbx_err (err, SBX_E_SYSTEM, "`%s/ca.crt` is not a certificate; move the directory"
                   " away to make a new CA", path);
          goto out;
        }
    }
  else
    {
      key = EVP_EC_gen ("P-256");
      ca = key ? make_ca (key) : NULL;
      if (ca == NULL)
        {
          sbx_err (err, SBX_E_SYSTEM, "cannot make the egress CA");
          goto out;
        }
      if (write_pem (dir, "ca.key", 0600, key, NULL, NULL, 0, err) < 0
          || write_pem (dir, "ca.crt", 0644, NULL, ca, NULL, 0, err) < 0)
        goto out;
      sbx_info ("egress: made a CA in %s (its certificate goes into sandboxes' trust stores)",
                path);
    }
  /* What sandboxes see, where their init can bind it from (the state
     directory is not in its reach): the certificate, and the host's trust
     followed by it. Remade at every start. */
  {
    char pub[200];
    cleanup_close int pd = -1;
    sbx_egress_ca_public_dir (state_dir, pub, sizeof pub);
    int tries, made = 0;
    /* Another daemon stopping may remove the shared parents meanwhile. */
    for (tries = 0; tries < 5 && !made; tries++)
      made = (mkdir ("/run/sbx", 0755) == 0 || errno == EEXIST)
             && (mkdir ("/run/sbx/egress-ca", 0755) == 0 || errno == EEXIST)
             && (mkdir (pub, 0755) == 0 || errno == EEXIST);
    if (!made)
      {
        sbx_err_sys (err, errno, "create `%s`", pub);
        goto out;
      }
    pd = open (pub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pd < 0 || fstat (pd, &st) < 0 || st.st_uid != 0)
      {
        sbx_err (err, SBX_E_SYSTEM, "`%s` is not a directory of root's", pub);
        goto out;
      }
    host = read_all (X509_get_default_cert_file (), &host_len);
    if (write_pem (pd, "ca.crt", 0644, NULL, ca, NULL, 0, err) < 0
        || write_pem (pd, "bundle.crt", 0644, NULL, ca, host, host_len, err) < 0)
      goto out;
  }
  rc = 0;
out:
  free (host);
  EVP_PKEY_free (key);
  X509_free (ca);
  return rc;
}

/* ---- in the egress process --------------------------------------------- */

static EVP_PKEY *ca_key, *leaf_key;
static X509 *ca_cert;
static SSL_CTX *upstream_ctx;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct
{
  char host[256];
  SSL_CTX *ctx;
} cache[LEAF_CACHE];
static unsigned cache_next;

int
sbx_egress_tls_ready (void)
{
  return ca_key != NULL && upstream_ctx != NULL;
}

static void
openssl_reason (char *why, size_t cap)
{
  unsigned long e = ERR_get_error ();

  if (e == 0)
    snprintf (why, cap, "unknown error");
  else
    ERR_error_string_n (e, why, cap);
  ERR_clear_error ();
}

int
sbx_egress_tls_init (const char *state_dir, const char *upstream_ca, sbx_error_t **err)
{
  char path[700], why[200];
  FILE *f;

  OPENSSL_init_ssl (OPENSSL_INIT_LOAD_CONFIG, NULL);
  snprintf (path, sizeof path, "%s/%s/ca.key", state_dir, SBX_EGRESS_CA_DIR);
  f = fopen (path, "re");
  if (f == NULL)
    return sbx_err_sys (err, errno, "open `%s`", path);
  ca_key = PEM_read_PrivateKey (f, NULL, NULL, NULL);
  fclose (f);
  snprintf (path, sizeof path, "%s/%s/ca.crt", state_dir, SBX_EGRESS_CA_DIR);
  f = fopen (path, "re");
  if (f == NULL)
    return sbx_err_sys (err, errno, "open `%s`", path);
  ca_cert = PEM_read_X509 (f, NULL, NULL, NULL);
  fclose (f);
  leaf_key = EVP_EC_gen ("P-256");
  if (ca_key == NULL || ca_cert == NULL || leaf_key == NULL
      || X509_check_private_key (ca_cert, ca_key) != 1)
    return sbx_err (err, SBX_E_SYSTEM, "the egress CA in `%s/%s` is unusable", state_dir,
                    SBX_EGRESS_CA_DIR);
  upstream_ctx = SSL_CTX_new (TLS_client_method ());
  if (upstream_ctx == NULL)
    return sbx_err (err, SBX_E_SYSTEM, "SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version (upstream_ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify (upstream_ctx, SSL_VERIFY_PEER, NULL);
  /* The trust store is read whole now: Landlock lets no file be opened
     later (a certificate directory would be read lazily). */
  if (SSL_CTX_load_verify_file (upstream_ctx, X509_get_default_cert_file ()) != 1)
    {
      ERR_clear_error ();
      sbx_warn ("egress: no system trust store at %s: only --egress-upstream-ca is trusted",
                X509_get_default_cert_file ());
    }
  if (upstream_ca != NULL && SSL_CTX_load_verify_file (upstream_ctx, upstream_ca) != 1)
    {
      openssl_reason (why, sizeof why);
      return sbx_err (err, SBX_E_INVALID, "--egress-upstream-ca `%s`: %s", upstream_ca, why);
    }
  return 0;
}

static X509 *
make_leaf (const char *host)
{
  X509 *c = X509_new ();
  char san[300], cn[65];

  /* Rules apply to names only (core/secrets.c): a DNS name in the SAN. */
  if (c == NULL)
    return NULL;
  snprintf (cn, sizeof cn, "%s", host);
  snprintf (san, sizeof san, "DNS:%s", host);
  if (X509_set_version (c, 2) != 1 || random_serial (c) < 0
      || X509_gmtime_adj (X509_getm_notBefore (c), -3600) == NULL
      || X509_gmtime_adj (X509_getm_notAfter (c), (long) LEAF_DAYS * 86400) == NULL
      || X509_set_pubkey (c, leaf_key) != 1
      || X509_NAME_add_entry_by_txt (X509_get_subject_name (c), "CN", MBSTRING_ASC,
                                     (const unsigned char *) cn, -1, -1, 0)
             != 1
      || X509_set_issuer_name (c, X509_get_subject_name (ca_cert)) != 1
      || add_ext (c, ca_cert, NID_basic_constraints, "critical,CA:FALSE") < 0
      || add_ext (c, ca_cert, NID_key_usage, "critical,digitalSignature") < 0
      || add_ext (c, ca_cert, NID_ext_key_usage, "serverAuth") < 0
      || add_ext (c, ca_cert, NID_subject_alt_name, san) < 0
      || add_ext (c, ca_cert, NID_authority_key_identifier, "keyid:always") < 0
      || X509_sign (c, ca_key, EVP_sha256 ()) <= 0)
    {
      X509_free (c);
      return NULL;
    }
  return c;
}

/* A server context for host: cached, or made now (a new reference). */
static SSL_CTX *
leaf_ctx (const char *host)
{
  SSL_CTX *ctx = NULL;
  X509 *leaf;
  unsigned i;

  pthread_mutex_lock (&cache_lock);
  for (i = 0; i < LEAF_CACHE; i++)
    if (cache[i].ctx != NULL && strcmp (cache[i].host, host) == 0)
      {
        ctx = cache[i].ctx;
        SSL_CTX_up_ref (ctx);
        break;
      }
  pthread_mutex_unlock (&cache_lock);
  if (ctx != NULL)
    return ctx;
  leaf = make_leaf (host);
  ctx = leaf ? SSL_CTX_new (TLS_server_method ()) : NULL;
  if (ctx == NULL || SSL_CTX_use_certificate (ctx, leaf) != 1
      || SSL_CTX_use_PrivateKey (ctx, leaf_key) != 1 || SSL_CTX_add1_chain_cert (ctx, ca_cert) != 1)
    {
      X509_free (leaf);
      SSL_CTX_free (ctx);
      return NULL;
    }
  X509_free (leaf);
  SSL_CTX_set_min_proto_version (ctx, TLS1_2_VERSION);
  /* HTTP/1.1 only (the proxy rewrites HTTP/1 heads): a client that
     offers h2 by ALPN gets no ALPN answer and falls back. */
  pthread_mutex_lock (&cache_lock);
  i = cache_next++ % LEAF_CACHE;
  SSL_CTX_free (cache[i].ctx);
  snprintf (cache[i].host, sizeof cache[i].host, "%s", host);
  cache[i].ctx = ctx;
  SSL_CTX_up_ref (ctx);
  pthread_mutex_unlock (&cache_lock);
  return ctx;
}

static void
blocking_with_timeout (int fd, int seconds)
{
  struct timeval tv = {seconds, 0};
  int fl = fcntl (fd, F_GETFL), one = 1;

  /* Handshakes are small writes answered by small reads: no Nagle. */
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (fl >= 0 && (fl & O_NONBLOCK))
    fcntl (fd, F_SETFL, fl & ~O_NONBLOCK);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

sbx_ssl *
sbx_egress_tls_connect (int fd, const char *host, char *why, size_t cap)
{
  SSL *s = SSL_new (upstream_ctx);
  char sni[256]; /* the macro takes a non-const pointer */
  long vr;

  if (s == NULL)
    {
      snprintf (why, cap, "out of memory");
      return NULL;
    }
  blocking_with_timeout (fd, HANDSHAKE_TIMEOUT_S);
  snprintf (sni, sizeof sni, "%s", host);
  if (SSL_set_fd (s, fd) != 1 || SSL_set_tlsext_host_name (s, sni) != 1
      || SSL_set1_host (s, host) != 1)
    {
      openssl_reason (why, cap);
      SSL_free (s);
      return NULL;
    }
  ERR_clear_error ();
  if (SSL_connect (s) != 1)
    {
      vr = SSL_get_verify_result (s);
      if (vr != X509_V_OK)
        snprintf (why, cap, "its certificate is not trusted (%s)",
                  X509_verify_cert_error_string (vr));
      else
        {
          char r[160];
          openssl_reason (r, sizeof r);
          snprintf (why, cap, "the TLS handshake failed (%s)", r);
        }
      SSL_free (s);
      return NULL;
    }
  return s;
}

sbx_ssl *
sbx_egress_tls_accept (int fd, const char *host)
{
  SSL_CTX *ctx = leaf_ctx (host);
  SSL *s;

  if (ctx == NULL)
    return NULL;
  s = SSL_new (ctx);
  SSL_CTX_free (ctx);
  if (s == NULL)
    return NULL;
  blocking_with_timeout (fd, HANDSHAKE_TIMEOUT_S);
  ERR_clear_error ();
  if (SSL_set_fd (s, fd) != 1 || SSL_accept (s) != 1)
    {
      ERR_clear_error ();
      SSL_free (s);
      return NULL;
    }
  return s;
}

void
sbx_egress_tls_close (sbx_ssl *s)
{
  if (s == NULL)
    return;
  SSL_shutdown (s);
  SSL_free (s);
  ERR_clear_error ();
}
