/* Unit tests for src/cli/http.c and the request half of src/cli/api.c: the
 * CLI's HTTP/1.1 client.
 *
 * URLs and escaping are pure functions. Responses are parsed for real: the
 * client's connection is one end of a socketpair (sbx_http_conn_adopt_fd)
 * and a scripted server thread on the other end reads each request and
 * answers with canned bytes, whole or one byte at a time, then optionally
 * hangs up. The reconnect paths need a daemon to reconnect to, so those
 * tests listen on a unix socket instead.
 */
#include "cli/http.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "cli/api.h"
#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

/*============================ A scripted server ======================== */

struct exchange
{
  const char *response; /* sent after reading one request; NULL: nothing */
  size_t len;           /* 0: strlen (response) */
  int byte_by_byte;     /* one byte per write, with a pause */
  int close_after;      /* hang up after this exchange */
  int no_read;          /* answer without reading a request */
};

struct server
{
  int listen_fd; /* unix listener, or -1 (socketpair) */
  int fd;        /* the current connection, -1 when none */
  const struct exchange *ex;
  size_t n;
  struct sbx_buf requests; /* every request read, back to back */
  int nrequests;
  int connections;  /* accepted (listener mode) */
  int saw_eof;      /* after the script: the client closed its end */
  int joined;
  pthread_t th;
};

static struct server srv;
static struct sbx_http_endpoint ep;
static struct sbx_http_conn *conn;
static char sock_path[108];
static int srv_peer_fd; /* the client's end of the socketpair */

/* Read one request (head, then Content-Length bytes); 0 at EOF. */
static int
read_request (int fd, struct sbx_buf *into)
{
  size_t start = into->len, head_end = 0, body = 0;
  char c;

  for (;;)
    {
      ssize_t n = read (fd, &c, 1);
      if (n <= 0)
        return into->len > start ? -1 : 0;
      sbx_buf_append (into, &c, 1);
      if (into->len - start >= 4 && memcmp (into->data + into->len - 4, "\r\n\r\n", 4) == 0)
        break;
    }
  head_end = into->len;
  {
    const char *cl = strstr (into->data + start, "Content-Length: ");
    if (cl != NULL && cl < into->data + head_end)
      body = strtoul (cl + 16, NULL, 10);
  }
  while (body > 0)
    {
      char buf[4096];
      ssize_t n = read (fd, buf, body < sizeof buf ? body : sizeof buf);
      if (n <= 0)
        return -1;
      sbx_buf_append (into, buf, (size_t) n);
      body -= (size_t) n;
    }
  return 1;
}

static void
send_all (int fd, const char *p, size_t n, int byte_by_byte)
{
  while (n > 0)
    {
      ssize_t w = send (fd, p, byte_by_byte ? 1 : n, MSG_NOSIGNAL);
      if (w <= 0)
        return;
      p += w;
      n -= (size_t) w;
      if (byte_by_byte)
        usleep (200);
    }
}

static void *
serve (void *arg)
{
  struct server *s = arg;

  (void) arg;
  for (size_t i = 0; i < s->n; i++)
    {
      const struct exchange *e = &s->ex[i];

      if (s->fd < 0 && s->listen_fd >= 0)
        {
          s->fd = accept4 (s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
          if (s->fd < 0)
            return NULL;
          s->connections++;
        }
      if (!e->no_read)
        {
          if (read_request (s->fd, &s->requests) <= 0)
            return NULL;
          s->nrequests++;
        }
      if (e->response)
        send_all (s->fd, e->response, e->len ? e->len : strlen (e->response), e->byte_by_byte);
      if (e->close_after)
        {
          close (s->fd);
          s->fd = -1;
        }
    }
  /* Done: wait for the client to hang up, if it does. */
  if (s->fd >= 0)
    {
      char c;
      struct timeval tv = {0, 300000};
      setsockopt (s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      s->saw_eof = read (s->fd, &c, 1) == 0;
    }
  return NULL;
}

/* Connection over a socketpair, server thread on the other end; the
   endpoint from `url` (and `key`) when given, else a unix path that does
   not exist (so that any reconnection fails). */
static int
start_url (const struct exchange *ex, size_t n, const char *url, const char *key)
{
  sbx_error_t *err = NULL;
  int fds[2];

  alarm (30); /* a hang is a failure, not a stuck suite */
  signal (SIGPIPE, SIG_IGN);
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
    return -1;
  if (url == NULL)
    sbx_http_endpoint_from_unix (&ep, "/nonexistent/sbx-test/sbx.sock");
  else if (sbx_http_endpoint_from_url (&ep, url, key, &err) < 0)
    {
      sbx_error_free (err);
      return -1;
    }
  conn = sbx_http_conn_new (&ep);
  sbx_http_conn_adopt_fd (conn, fds[0]);
  srv_peer_fd = fds[0];
  memset (&srv, 0, sizeof srv);
  srv.listen_fd = -1;
  srv.fd = fds[1];
  srv.ex = ex;
  srv.n = n;
  return pthread_create (&srv.th, NULL, serve, &srv) == 0 ? 0 : -1;
}

static int
start (const struct exchange *ex, size_t n)
{
  return start_url (ex, n, NULL, NULL);
}

/* The same with a unix listener the client connects (and reconnects) to. */
static int
start_listening (const struct exchange *ex, size_t n)
{
  struct sockaddr_un sa;

  alarm (30);
  signal (SIGPIPE, SIG_IGN);
  memset (&srv, 0, sizeof srv);
  srv.fd = -1;
  srv.ex = ex;
  srv.n = n;
  snprintf (sock_path, sizeof sock_path, "/tmp/sbx-test-http-%d.sock", (int) getpid ());
  unlink (sock_path);
  memset (&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy (sa.sun_path, sock_path, strlen (sock_path) + 1);
  srv.listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (srv.listen_fd < 0 || bind (srv.listen_fd, (struct sockaddr *) &sa, sizeof sa) < 0
      || listen (srv.listen_fd, 8) < 0)
    return -1;
  sbx_http_endpoint_from_unix (&ep, sock_path);
  conn = sbx_http_conn_new (&ep);
  return pthread_create (&srv.th, NULL, serve, &srv) == 0 ? 0 : -1;
}

/* Wait for the server to finish its script (it then waits briefly for
   the client to hang up, and records whether it did). */
static void
join_server (void)
{
  if (!srv.joined)
    pthread_join (srv.th, NULL);
  srv.joined = 1;
}

/* Hang up and wait for the server; its records stay readable. */
static void
finish (void)
{
  sbx_http_conn_free (conn);
  conn = NULL;
  join_server ();
}

static void
cleanup (void)
{
  if (srv.fd >= 0)
    close (srv.fd);
  srv.fd = -1;
  if (srv.listen_fd >= 0)
    {
      close (srv.listen_fd);
      unlink (sock_path);
    }
  srv.listen_fd = -1;
  sbx_buf_free (&srv.requests);
  sbx_http_endpoint_clear (&ep);
}

static void
stop (void)
{
  finish ();
  cleanup ();
}

static const char *
requests (void)
{
  return srv.requests.data ? srv.requests.data : "";
}

/* Run the script and one GET; the result of sbx_http_do. */
static int
get (const char *target, sbx_http_data_cb on_data, void *ctx, size_t max,
     struct sbx_http_response *resp, sbx_error_t **err)
{
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;

  req.method = "GET";
  req.target = target;
  return sbx_http_do (conn, &req, on_data, ctx, max, resp, err);
}

static const char *
body_of (const struct sbx_http_response *resp)
{
  return resp->body.data ? resp->body.data : "";
}

struct collected
{
  struct sbx_buf data;
  int calls;
  size_t fail_after; /* fail once this many bytes arrived; 0: never */
};

static int
on_data (void *ctx, const char *data, size_t len, sbx_error_t **err)
{
  struct collected *c = ctx;

  c->calls++;
  sbx_buf_append (&c->data, data, len);
  if (c->fail_after && c->data.len >= c->fail_after)
    return sbx_err (err, SBX_E_CONFLICT, "enough after %zu bytes", c->data.len);
  return 0;
}

/*============================ URLs ===================================== */

static int
test_endpoint_from_url (void)
{
  static const struct
  {
    const char *url, *key;
    const char *host, *port, *host_header, *base, *display, *auth;
  } cases[] = {
    {"http://localhost:8080", NULL, "localhost", "8080", "localhost:8080", "",
     "http://localhost:8080", NULL},
    {"http://127.0.0.1", "", "127.0.0.1", "80", "127.0.0.1", "", "http://127.0.0.1", NULL},
    {"HTTP://Example.COM:1/", "k", "Example.COM", "1", "Example.COM:1", "",
     "http://Example.COM:1", "Bearer k"},
    {"http://[::1]:3000/api/v1//", "e2b_0123", "::1", "3000", "[::1]:3000", "/api/v1",
     "http://[::1]:3000", "Bearer e2b_0123"},
    {"http://[::1]", NULL, "::1", "80", "[::1]", "", "http://[::1]", NULL},
    {"http://h:65535/p", NULL, "h", "65535", "h:65535", "/p", "http://h:65535", NULL},
    {"http://h:00080", NULL, "h", "00080", "h:00080", "", "http://h:00080", NULL},
    {"http://sbx.internal/deep/er/", NULL, "sbx.internal", "80", "sbx.internal", "/deep/er",
     "http://sbx.internal", NULL},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_http_endpoint e;
      sbx_error_t *err = NULL;

      if (sbx_http_endpoint_from_url (&e, cases[i].url, cases[i].key, &err) < 0)
        {
          fprintf (stderr, "#   %s: %s\n", cases[i].url, err->msg);
          sbx_error_free (err);
          return -1;
        }
      CHECK (e.is_unix == 0 && e.unix_path == NULL);
      CHECK_STR (e.host, cases[i].host);
      CHECK_STR (e.port, cases[i].port);
      CHECK_STR (e.host_header, cases[i].host_header);
      CHECK_STR (e.base_path, cases[i].base);
      CHECK_STR (e.display, cases[i].display);
      if (cases[i].auth)
        CHECK_STR (e.auth, cases[i].auth);
      else
        CHECK (e.auth == NULL);
      sbx_http_endpoint_clear (&e);
      CHECK (e.host == NULL && e.display == NULL);
    }
  return 0;
}

static int
test_endpoint_rejects (void)
{
  static const struct
  {
    const char *url, *key, *says;
  } cases[] = {
    {"https://h:443", NULL, "https is not supported"},
    {"HTTPS://h", NULL, "https is not supported"},
    {"ftp://h", NULL, "is not an http:// URL"},
    {"h:8080", NULL, "is not an http:// URL"},
    {"", NULL, "is not an http:// URL"},
    {"http:/h", NULL, "is not an http:// URL"},
    {"http://", NULL, "has no host"},
    {"http:///x", NULL, "has no host"},
    {"http://:80", NULL, "has no host"},
    {"http://u:p@h", NULL, "must not contain credentials"},
    {"http://u@h:80/x", NULL, "must not contain credentials"},
    {"http://h?x=1", NULL, "must not have a query or fragment"},
    {"http://h#f", NULL, "must not have a query or fragment"},
    {"http://h/p?x=1", NULL, "must not have a query or fragment"},
    {"http://h/p#f", NULL, "must not have a query or fragment"},
    {"http://h:0", NULL, "has an invalid port"},
    {"http://h:65536", NULL, "has an invalid port"},
    {"http://h:", NULL, "has an invalid port"},
    {"http://h:abc", NULL, "has an invalid port"},
    {"http://h:123456", NULL, "has an invalid port"},
    {"http://h:-1", NULL, "has an invalid port"},
    {"http://h:80:90", NULL, "has an invalid port"},
    {"http://[::1", NULL, "malformed IPv6 address"},
    {"http://[]:80", NULL, "malformed IPv6 address"},
    {"http://[::1]x", NULL, "malformed host"},
    {"http://[::1]:", NULL, "has an invalid port"},
    {"http://[::1]:99999", NULL, "has an invalid port"},
    {"http://h/a b", NULL, "spaces or control characters"},
    {"http://h/a\tb", NULL, "spaces or control characters"},
    {"http://h/a\x7f", NULL, "spaces or control characters"},
    {"http://h/\n", NULL, "spaces or control characters"},
    /* The authority goes into the Host header: no spaces or line breaks
       there either. */
    {"http://h b", NULL, "spaces or control characters"},
    {"http://h\r\nX-Injected: 1", NULL, "spaces or control characters"},
    {"http://h:80\r\n/x", NULL, "spaces or control characters"},
    {"http://h", "a b", "SBX_API_KEY contains spaces or control characters"},
    {"http://h", "a\r\nX-Injected: 1", "SBX_API_KEY contains spaces or control characters"},
    {"http://h", "\x7f", "SBX_API_KEY contains spaces or control characters"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_http_endpoint e;
      sbx_error_t *err = NULL;
      int rc = sbx_http_endpoint_from_url (&e, cases[i].url, cases[i].key, &err);

      if (rc != -1 || err == NULL || err->kind != SBX_E_INVALID
          || strstr (err->msg, cases[i].says) == NULL)
        {
          fprintf (stderr, "#   `%s`: rc %d `%s`\n", cases[i].url, rc, err ? err->msg : "");
          sbx_error_free (err);
          if (rc == 0)
            sbx_http_endpoint_clear (&e);
          return -1;
        }
      /* Nothing allocated on failure. */
      CHECK (e.host == NULL && e.port == NULL && e.auth == NULL && e.display == NULL);
      sbx_error_free (err);
      sbx_http_endpoint_clear (&e);
    }
  return 0;
}

static int
test_endpoint_from_unix_and_env (void)
{
  struct sbx_http_endpoint e;
  sbx_error_t *err = NULL;

  sbx_http_endpoint_from_unix (&e, "/run/sbx/sbx.sock");
  CHECK (e.is_unix == 1);
  CHECK_STR (e.unix_path, "/run/sbx/sbx.sock");
  CHECK_STR (e.host_header, "localhost");
  CHECK_STR (e.base_path, "");
  CHECK_STR (e.display, "unix:/run/sbx/sbx.sock");
  CHECK (e.host == NULL && e.port == NULL && e.auth == NULL);
  sbx_http_endpoint_clear (&e);

  unsetenv ("SBX_URL");
  unsetenv ("SBX_STATE");
  unsetenv ("SBX_API_KEY");
  CHECK (sbx_http_endpoint_from_env (&e, &err) == 0);
  CHECK (e.is_unix);
  CHECK_STR (e.unix_path, "/var/lib/sbx/sbx.sock");
  sbx_http_endpoint_clear (&e);
  setenv ("SBX_STATE", "/srv/state", 1);
  setenv ("SBX_URL", "", 1);
  CHECK (sbx_http_endpoint_from_env (&e, &err) == 0);
  CHECK_STR (e.unix_path, "/srv/state/sbx.sock");
  sbx_http_endpoint_clear (&e);
  setenv ("SBX_STATE", "", 1);
  CHECK (sbx_http_endpoint_from_env (&e, &err) == 0);
  CHECK_STR (e.unix_path, "/var/lib/sbx/sbx.sock");
  sbx_http_endpoint_clear (&e);
  setenv ("SBX_URL", "http://10.0.0.1:49982/sbx", 1);
  setenv ("SBX_API_KEY", "e2b_key", 1);
  CHECK (sbx_http_endpoint_from_env (&e, &err) == 0);
  CHECK (!e.is_unix);
  CHECK_STR (e.host, "10.0.0.1");
  CHECK_STR (e.port, "49982");
  CHECK_STR (e.base_path, "/sbx");
  CHECK_STR (e.auth, "Bearer e2b_key");
  sbx_http_endpoint_clear (&e);
  setenv ("SBX_URL", "https://10.0.0.1", 1);
  CHECK (sbx_http_endpoint_from_env (&e, &err) == -1 && err->kind == SBX_E_INVALID);
  sbx_error_free (err);
  return 0;
}

static int
test_url_escape (void)
{
  static const struct
  {
    const char *in;
    int keep_slash;
    const char *out;
  } cases[] = {
    {"abcXYZ019-._~", 0, "abcXYZ019-._~"},
    {"a b/c?d=e&f#g%h+i", 0, "a%20b%2Fc%3Fd%3De%26f%23g%25h%2Bi"},
    {"a b/c?d=e&f#g%h+i", 1, "a%20b/c%3Fd%3De%26f%23g%25h%2Bi"},
    {"/home/user/x y.txt", 1, "/home/user/x%20y.txt"},
    {"/home/user/x y.txt", 0, "%2Fhome%2Fuser%2Fx%20y.txt"},
    {"\xc3\xa9\x01\x7f\xff", 0, "%C3%A9%01%7F%FF"},
    {"..", 1, ".."},
    {"\"'<>\\`{}|^[]:;,@!$*()", 0,
     "%22%27%3C%3E%5C%60%7B%7D%7C%5E%5B%5D%3A%3B%2C%40%21%24%2A%28%29"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_buf b = SBX_BUF_INIT;
      sbx_url_escape (&b, cases[i].in, cases[i].keep_slash);
      CHECK_STR (b.data ? b.data : "", cases[i].out);
      sbx_buf_free (&b);
    }
  {
    struct sbx_buf b = SBX_BUF_INIT;
    sbx_url_escape (&b, "", 0);
    CHECK (b.len == 0);
    sbx_buf_append (&b, "?path=", 6);
    sbx_url_escape (&b, "a&b", 1);
    CHECK_STR (b.data, "?path=a%26b");
    sbx_buf_free (&b);
  }
  {
    struct sbx_buf b = SBX_BUF_INIT;
    sbx_api_sandbox_path (&b, "a/b c", "/files");
    CHECK_STR (b.data, "/v1/sandboxes/a%2Fb%20c/files");
    sbx_buf_reset (&b);
    sbx_api_sandbox_path (&b, "../x", NULL);
    CHECK_STR (b.data, "/v1/sandboxes/..%2Fx");
    sbx_buf_free (&b);
  }
  return 0;
}

/*============================ Responses ================================ */

static int
test_content_length (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello", 0, 0, 0, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start (ex, 1) == 0);
  CHECK (get ("/v1/x?y=1", NULL, NULL, 1024, &resp, &err) == 0 && err == NULL);
  CHECK (resp.status == 200);
  CHECK (resp.body.len == 5);
  CHECK_STR (body_of (&resp), "hello");
  stop ();
  sbx_http_response_clear (&resp);
  CHECK (resp.status == 0 && resp.body.data == NULL);
  return 0;
}

static int
test_request_head (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", 0, 0, 0, 0},
    {"HTTP/1.1 204 No Content\r\n\r\n", 0, 0, 0, 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, 0, 0, 0},
  };
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;
  int mfd;

  /* A TCP endpoint with a prefix and a key, over our socketpair. */
  CHECK (start_url (ex, 3, "http://sbx.example:8080/base/", "e2b_k") == 0);
  req.method = "POST";
  req.target = "/v1/sandboxes";
  req.content_type = "application/json";
  req.body = "{}";
  req.body_len = 2;
  CHECK (sbx_http_do (conn, &req, NULL, NULL, 1024, &resp, &err) == 0 && resp.status == 201);
  /* has_body without bytes: still a Content-Length. */
  req.method = "DELETE";
  req.target = "/v1/x";
  req.content_type = NULL;
  req.body = NULL;
  req.body_len = 0;
  req.has_body = 1;
  CHECK (sbx_http_do (conn, &req, NULL, NULL, 1024, &resp, &err) == 0 && resp.status == 204);
  CHECK (resp.body.len == 0);
  /* The body from a file descriptor, from its current offset. */
  mfd = memfd_create ("body", MFD_CLOEXEC);
  CHECK (mfd >= 0 && write (mfd, "skip:payload", 12) == 12 && lseek (mfd, 5, SEEK_SET) == 5);
  req.method = "PUT";
  req.target = "/v1/f";
  req.content_type = "application/octet-stream";
  req.body_fd = mfd;
  req.body_len = 7;
  CHECK (sbx_http_do (conn, &req, NULL, NULL, 1024, &resp, &err) == 0 && resp.status == 200);
  close (mfd);
  sbx_http_response_clear (&resp);
  finish ();
  CHECK_STR (requests (),
             "POST /base/v1/sandboxes HTTP/1.1\r\nHost: sbx.example:8080\r\n"
             "Authorization: Bearer e2b_k\r\nContent-Type: application/json\r\n"
             "Content-Length: 2\r\n\r\n{}"
             "DELETE /base/v1/x HTTP/1.1\r\nHost: sbx.example:8080\r\n"
             "Authorization: Bearer e2b_k\r\nContent-Length: 0\r\n\r\n"
             "PUT /base/v1/f HTTP/1.1\r\nHost: sbx.example:8080\r\n"
             "Authorization: Bearer e2b_k\r\nContent-Type: application/octet-stream\r\n"
             "Content-Length: 7\r\n\r\npayload");
  CHECK (srv.nrequests == 3);
  cleanup ();
  return 0;
}

/* A plain GET over a unix socket: the minimal head. */
static int
test_request_head_unix (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 0, 0, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start (ex, 1) == 0);
  CHECK (get ("/healthz?a=b%20c", NULL, NULL, 1024, &resp, &err) == 0);
  finish ();
  CHECK_STR (requests (), "GET /healthz?a=b%20c HTTP/1.1\r\nHost: localhost\r\n\r\n");
  cleanup ();
  sbx_http_response_clear (&resp);
  return 0;
}

static const char chunked[] = "HTTP/1.1 200 OK\r\n"
                              "Transfer-Encoding: chunked\r\n"
                              "\r\n"
                              "5;name=value\r\n"
                              "hello\r\n"
                              "6;a=b;c=\"quoted;value\"\r\n"
                              " world\r\n"
                              "A\r\n"
                              "0123456789\r\n"
                              "0;last\r\n"
                              "Trailer-Field: x\r\n"
                              "\r\n";

static int
test_chunked_with_extensions (void)
{
  static const struct exchange ex[] = {{chunked, 0, 0, 0, 0}};
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start (ex, 1) == 0);
  CHECK (get ("/x", NULL, NULL, 1024, &resp, &err) == 0 && err == NULL);
  CHECK (resp.status == 200);
  CHECK_STR (body_of (&resp), "hello world0123456789");
  stop ();
  sbx_http_response_clear (&resp);
  return 0;
}

/* Every byte in its own segment: headers, chunk sizes and extensions all
   cut everywhere. */
static int
test_chunked_byte_by_byte (void)
{
  static const struct exchange ex[] = {{chunked, 0, 1, 0, 0}};
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  struct collected c = {SBX_BUF_INIT, 0, 0};
  sbx_error_t *err = NULL;

  CHECK (start (ex, 1) == 0);
  CHECK (get ("/x", on_data, &c, 1024, &resp, &err) == 0 && err == NULL);
  CHECK (resp.status == 200);
  CHECK (resp.body.len == 0); /* delivered, not collected */
  CHECK (c.data.len == 21 && memcmp (c.data.data, "hello world0123456789", 21) == 0);
  CHECK (c.calls > 1);
  stop ();
  sbx_buf_free (&c.data);
  sbx_http_response_clear (&resp);
  return 0;
}

/* No Content-Length, no chunks: the body ends with the connection. */
static int
test_close_delimited (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", 0, 0, 1, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start (ex, 1) == 0);
  CHECK (get ("/x", NULL, NULL, 1024, &resp, &err) == 0 && err == NULL);
  CHECK (resp.status == 200);
  CHECK_STR (body_of (&resp), "until the end");
  stop ();
  sbx_http_response_clear (&resp);
  return 0;
}

/* A response that stops before its end is an error, never a short body
   taken as complete. */
static int
test_cut_short (void)
{
  static const char *const cuts[] = {
    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n",
    "HTTP/1.1 200 OK\r\nContent-Len",
    "HTTP/1.1 200 OK\r\n",
    "HTTP/1.1 404 Not Found\r\nContent-Length: 50\r\n\r\n{\"error\":",
    "H",
  };

  for (size_t i = 0; i < ARRAY_SIZE (cuts); i++)
    {
      const struct exchange ex[] = {{cuts[i], 0, 0, 1, 0}};
      struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
      sbx_error_t *err = NULL;
      int rc;

      CHECK (start (ex, 1) == 0);
      rc = get ("/x", NULL, NULL, 1024, &resp, &err);
      if (rc != -1 || err == NULL || err->kind != SBX_E_UNAVAILABLE
          || strstr (err->msg, "closed the connection in the middle of a response") == NULL)
        {
          fprintf (stderr, "#   cut %zu: rc %d `%s`\n", i, rc, err ? err->msg : "");
          return -1;
        }
      /* The connection is dropped, not kept for another request. */
      CHECK (sbx_http_conn_unreachable (conn) == 0);
      sbx_error_free (err);
      stop ();
      sbx_http_response_clear (&resp);
    }
  return 0;
}

static int
test_closed_without_answer (void)
{
  static const struct exchange ex[] = {{NULL, 0, 0, 1, 0}};
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start (ex, 1) == 0);
  CHECK (get ("/x", NULL, NULL, 1024, &resp, &err) == -1);
  CHECK (err->kind == SBX_E_UNAVAILABLE);
  CHECK (strstr (err->msg, "closed the connection without answering") != NULL);
  CHECK (strstr (err->msg, "unix:/nonexistent/sbx-test/sbx.sock") != NULL);
  sbx_error_free (err);
  stop ();
  sbx_http_response_clear (&resp);
  return 0;
}

static int
test_malformed (void)
{
  static const char *const bad[] = {
    "GARBAGE\r\n\r\n",
    "HTTP/1.1 2OO OK\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
  };

  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      const struct exchange ex[] = {{bad[i], 0, 0, 0, 0}};
      struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
      sbx_error_t *err = NULL;
      int rc;

      CHECK (start (ex, 1) == 0);
      rc = get ("/x", NULL, NULL, 1024, &resp, &err);
      if (rc != -1 || err == NULL || err->kind != SBX_E_SYSTEM
          || strstr (err->msg, "malformed response") == NULL)
        {
          fprintf (stderr, "#   response %zu: rc %d `%s`\n", i, rc, err ? err->msg : "");
          return -1;
        }
      sbx_error_free (err);
      finish ();
      CHECK (srv.saw_eof); /* the connection was dropped */
      cleanup ();
      sbx_http_response_clear (&resp);
    }
  return 0;
}

/* 1xx responses come before the real one and have no body. */
static int
test_interim_responses (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
     0, 0, 0, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start (ex, 1) == 0);
  CHECK (get ("/x", NULL, NULL, 1024, &resp, &err) == 0);
  CHECK (resp.status == 200);
  CHECK_STR (body_of (&resp), "ok");
  stop ();
  sbx_http_response_clear (&resp);
  return 0;
}

/* Non-2xx bodies are error objects: collected even when a data callback
   is given, and capped at 1 MiB (the rest is read and dropped, so the
   connection stays usable). */
static int
test_error_bodies (void)
{
  static char big[sizeof "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1572864\r\n\r\n"
                  + 1572864];
  static const char head[] = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1572864\r\n\r\n";
  const struct exchange ex[] = {
    {"HTTP/1.1 404 Not Found\r\nContent-Length: 23\r\n\r\n{\"error\":\"not_found\"}\r\n", 0, 0, 0,
     0},
    {big, sizeof head - 1 + 1572864, 0, 0, 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nyes", 0, 0, 0, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  struct collected c = {SBX_BUF_INIT, 0, 0};
  sbx_error_t *err = NULL;

  memcpy (big, head, sizeof head - 1);
  memset (big + sizeof head - 1, 'e', 1572864);
  CHECK (start (ex, 3) == 0);
  CHECK (get ("/x", on_data, &c, 10, &resp, &err) == 0);
  CHECK (resp.status == 404 && c.calls == 0);
  CHECK_STR (body_of (&resp), "{\"error\":\"not_found\"}\r\n");
  CHECK (get ("/x", on_data, &c, 10, &resp, &err) == 0);
  CHECK (resp.status == 500 && c.calls == 0);
  CHECK (resp.body.len == 1024 * 1024);
  CHECK (get ("/x", on_data, &c, 10, &resp, &err) == 0);
  CHECK (resp.status == 200 && resp.body.len == 0);
  CHECK (c.data.len == 3 && memcmp (c.data.data, "yes", 3) == 0);
  CHECK (srv.nrequests == 3); /* one connection for all three */
  stop ();
  sbx_buf_free (&c.data);
  sbx_http_response_clear (&resp);
  return 0;
}

/* 2xx bodies collected in memory stop at max_collect. */
static int
test_max_collect (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", 0, 0, 0, 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n0123456789A", 0, 0, 0, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start (ex, 2) == 0);
  CHECK (get ("/x", NULL, NULL, 10, &resp, &err) == 0);
  CHECK (resp.body.len == 10);
  CHECK (get ("/x", NULL, NULL, 10, &resp, &err) == -1);
  CHECK (err->kind == SBX_E_TOO_LARGE);
  CHECK_STR (err->msg, "the daemon's response is larger than 10 bytes");
  sbx_error_free (err);
  stop ();
  sbx_http_response_clear (&resp);
  return 0;
}

/* A data callback that fails aborts the request with its own error, and
   the connection is dropped (the daemon sees the disconnect). */
static int
test_callback_aborts (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", 0,
     1, 0, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  struct collected c = {SBX_BUF_INIT, 0, 3};
  sbx_error_t *err = NULL;

  CHECK (start (ex, 1) == 0);
  CHECK (get ("/x", on_data, &c, 1024, &resp, &err) == -1);
  CHECK (err->kind == SBX_E_CONFLICT);
  CHECK_STR (err->msg, "enough after 3 bytes");
  sbx_error_free (err);
  join_server ();
  CHECK (srv.saw_eof); /* we hung up, before the end of the response */
  stop ();
  sbx_buf_free (&c.data);
  sbx_http_response_clear (&resp);
  return 0;
}

/* Keep-alive: requests share the connection until the daemon says
   "Connection: close" or sends more than its response. */
static int
test_keep_alive (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", 0, 0, 0, 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb", 0, 0, 0, 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nc", 0, 0, 0, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start (ex, 3) == 0);
  CHECK (get ("/1", NULL, NULL, 16, &resp, &err) == 0);
  CHECK_STR (body_of (&resp), "a");
  CHECK (get ("/2", NULL, NULL, 16, &resp, &err) == 0);
  CHECK_STR (body_of (&resp), "b");
  CHECK (get ("/3", NULL, NULL, 16, &resp, &err) == 0);
  CHECK_STR (body_of (&resp), "c");
  /* Closed after "Connection: close": the next request must connect, and
     there is no daemon at the endpoint's path. */
  join_server ();
  CHECK (srv.saw_eof);
  CHECK (get ("/4", NULL, NULL, 16, &resp, &err) == -1);
  CHECK (err->kind == SBX_E_UNAVAILABLE && err->sys_errno == ENOENT);
  CHECK (strstr (err->msg, "cannot reach the daemon at unix:/nonexistent/sbx-test/sbx.sock")
         != NULL);
  CHECK (sbx_http_conn_unreachable (conn) == 1);
  sbx_error_free (err);
  stop ();
  sbx_http_response_clear (&resp);
  return 0;
}

/* HTTP/1.0 without keep-alive closes; bytes after a response make the
   connection untrustworthy: both drop it. */
static int
test_no_keep_alive (void)
{
  static const char *const answers[] = {
    "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n",
  };

  for (size_t i = 0; i < ARRAY_SIZE (answers); i++)
    {
      const struct exchange ex[] = {{answers[i], 0, 0, 0, 0}};
      struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
      sbx_error_t *err = NULL;

      CHECK (start (ex, 1) == 0);
      CHECK (get ("/x", NULL, NULL, 16, &resp, &err) == 0);
      CHECK_STR (body_of (&resp), "ok");
      join_server ();
      CHECK (srv.saw_eof);
      stop ();
      sbx_http_response_clear (&resp);
    }
  return 0;
}

/* A kept-alive connection the daemon closed in the meantime is reopened
   before the next request. */
static int
test_reconnect_after_close (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", 0, 0, 1, 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond", 0, 0, 0, 0},
  };
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start_listening (ex, 2) == 0);
  CHECK (get ("/1", NULL, NULL, 16, &resp, &err) == 0);
  CHECK_STR (body_of (&resp), "first");
  usleep (50000); /* the close has arrived */
  CHECK (get ("/2", NULL, NULL, 16, &resp, &err) == 0);
  CHECK_STR (body_of (&resp), "second");
  finish ();
  CHECK (srv.connections == 2 && srv.nrequests == 2);
  cleanup ();
  sbx_http_response_clear (&resp);
  return 0;
}

/* The daemon closes a reused connection as the request arrives, without
   answering: nothing was done, so the request is sent once more on a
   fresh connection, an upload's body from the start again. */
static int
test_retry_on_fresh_connection (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", 0, 0, 0, 0},
    {NULL, 0, 0, 1, 0}, /* read the request, hang up */
    {"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", 0, 0, 0, 0},
  };
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;
  int mfd = memfd_create ("body", MFD_CLOEXEC);
  const char *second;

  CHECK (mfd >= 0 && write (mfd, "0123456789", 10) == 10 && lseek (mfd, 2, SEEK_SET) == 2);
  CHECK (start_listening (ex, 3) == 0);
  CHECK (get ("/1", NULL, NULL, 16, &resp, &err) == 0);
  req.method = "PUT";
  req.target = "/f";
  req.body_fd = mfd;
  req.body_len = 8;
  CHECK (sbx_http_do (conn, &req, NULL, NULL, 16, &resp, &err) == 0);
  CHECK (resp.status == 201);
  finish ();
  close (mfd);
  CHECK (srv.connections == 2 && srv.nrequests == 3);
  second = strstr (requests (), "PUT /f");
  CHECK (second != NULL);
  CHECK_STR (second, "PUT /f HTTP/1.1\r\nHost: localhost\r\nContent-Length: 8\r\n\r\n23456789"
                     "PUT /f HTTP/1.1\r\nHost: localhost\r\nContent-Length: 8\r\n\r\n23456789");
  cleanup ();
  sbx_http_response_clear (&resp);
  return 0;
}

/* A first request that gets no answer is not retried: it may have been
   acted on. */
static int
test_no_retry_on_first_request (void)
{
  static const struct exchange ex[] = {{NULL, 0, 0, 1, 0}, {"HTTP/1.1 200 OK\r\n\r\n", 0, 0, 1, 0}};
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;

  CHECK (start_listening (ex, 1) == 0);
  CHECK (get ("/x", NULL, NULL, 16, &resp, &err) == -1);
  CHECK (err->kind == SBX_E_UNAVAILABLE);
  sbx_error_free (err);
  finish ();
  CHECK (srv.connections == 1 && srv.nrequests == 1);
  cleanup ();
  sbx_http_response_clear (&resp);
  return 0;
}

/* A file that shrinks while it is uploaded. */
static int
test_upload_shrank (void)
{
  static const struct exchange ex[] = {{NULL, 0, 0, 0, 1}};
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_http_response resp = SBX_HTTP_RESPONSE_INIT;
  sbx_error_t *err = NULL;
  int mfd = memfd_create ("body", MFD_CLOEXEC);

  CHECK (mfd >= 0 && write (mfd, "short", 5) == 5 && lseek (mfd, 0, SEEK_SET) == 0);
  CHECK (start (ex, 1) == 0);
  req.method = "PUT";
  req.target = "/f";
  req.body_fd = mfd;
  req.body_len = 10;
  CHECK (sbx_http_do (conn, &req, NULL, NULL, 16, &resp, &err) == -1);
  CHECK (err->kind == SBX_E_CONFLICT);
  CHECK_STR (err->msg, "the file to upload shrank while it was being sent");
  sbx_error_free (err);
  stop ();
  close (mfd);
  sbx_http_response_clear (&resp);
  return 0;
}

/*============================ API requests ============================= */

/* An API over our socketpair: its own endpoint (which its connection
   borrows), the server as for the other tests. */
static int
start_api (struct sbx_api *api, const struct exchange *ex, size_t n)
{
  if (start (ex, n) < 0)
    return -1;
  memset (api, 0, sizeof *api);
  sbx_http_endpoint_from_unix (&api->ep, "/nonexistent/sbx-test/sbx.sock");
  api->conn = sbx_http_conn_new (&api->ep);
  /* Hand our connection's socket to the API's connection. */
  sbx_http_conn_adopt_fd (api->conn, fcntl (srv_peer_fd, F_DUPFD_CLOEXEC, 3));
  sbx_http_conn_free (conn);
  conn = NULL;
  return 0;
}

/* Hang up and wait for the server (its records stay readable). */
static void
finish_api (struct sbx_api *api)
{
  conn = api->conn;
  api->conn = NULL;
  finish ();
  sbx_api_clear (api);
}

static int
test_api_json (void)
{
  static const struct exchange ex[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{\"id\":\"abc\",\"n\":1.5}", 0, 0, 0, 0},
    {"HTTP/1.1 204 No Content\r\n\r\n", 0, 0, 0, 0},
    {"HTTP/1.1 404 Not Found\r\nContent-Length: 57\r\n\r\n"
     "{\"error\":\"not_found\",\"message\":\"sandbox `x` not found\"}\r\n",
     0, 0, 0, 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{nope", 0, 0, 0, 0},
    {"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n", 0, 0, 0, 0},
  };
  struct sbx_api api;
  sbx_error_t *err = NULL;
  json_t *out = NULL, *body = json_pack ("{s:s, s:f}", "template", "base", "cpus", 0.5);

  CHECK (start_api (&api, ex, 5) == 0);
  CHECK (sbx_api_json (&api, "POST", "/v1/sandboxes", body, &out, &err) == 200);
  CHECK_STR (json_string_value (json_object_get (out, "id")), "abc");
  json_decref (out);
  out = (json_t *) 1;
  CHECK (sbx_api_json (&api, "DELETE", "/v1/sandboxes/abc", NULL, &out, &err) == 204);
  CHECK (out == NULL);
  CHECK (sbx_api_json (&api, "GET", "/v1/sandboxes/x", NULL, &out, &err) == -1);
  CHECK (err->kind == SBX_E_NOT_FOUND);
  CHECK_STR (err->msg, "sandbox `x` not found");
  sbx_error_free (err);
  err = NULL;
  CHECK (sbx_api_json (&api, "GET", "/v1/x", NULL, &out, &err) == -1);
  CHECK (err->kind == SBX_E_SYSTEM && strstr (err->msg, "malformed JSON") != NULL);
  sbx_error_free (err);
  err = NULL;
  /* A unix socket needs no key: no hint about SBX_API_KEY. */
  CHECK (sbx_api_json (&api, "GET", "/v1/x", NULL, NULL, &err) == -1);
  CHECK (err->kind == SBX_E_UNAUTHORIZED);
  CHECK_STR (err->msg, "the daemon answered HTTP 401");
  sbx_error_free (err);
  finish_api (&api);
  CHECK (strncmp (requests (),
                  "POST /v1/sandboxes HTTP/1.1\r\nHost: localhost\r\n"
                  "Content-Type: application/json\r\nContent-Length: 30\r\n\r\n"
                  "{\"template\":\"base\",\"cpus\":0.5}DELETE /v1/sandboxes/abc HTTP/1.1\r\n",
                  165)
         == 0);
  cleanup ();
  json_decref (body);
  return 0;
}

int
main (void)
{
  RUN (test_endpoint_from_url);
  RUN (test_endpoint_rejects);
  RUN (test_endpoint_from_unix_and_env);
  RUN (test_url_escape);
  RUN (test_content_length);
  RUN (test_request_head);
  RUN (test_request_head_unix);
  RUN (test_chunked_with_extensions);
  RUN (test_chunked_byte_by_byte);
  RUN (test_close_delimited);
  RUN (test_cut_short);
  RUN (test_closed_without_answer);
  RUN (test_malformed);
  RUN (test_interim_responses);
  RUN (test_error_bodies);
  RUN (test_max_collect);
  RUN (test_callback_aborts);
  RUN (test_keep_alive);
  RUN (test_no_keep_alive);
  RUN (test_reconnect_after_close);
  RUN (test_retry_on_fresh_connection);
  RUN (test_no_retry_on_first_request);
  RUN (test_upload_shrank);
  RUN (test_api_json);
  return tap_done ();
}
