/* Unit tests for the egress policy (src/egress/policy.c), the address
 * classifier and the proxy's request parser (src/egress/request.c).
 *
 * The classifier is what stands between a sandbox and the host's loopback,
 * the private networks and the cloud's metadata service: every range it
 * must refuse is checked at its edges, and public neighbours must pass. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <sys/uio.h>
#include <unistd.h>

#include "egress/egress.h"
#include "egress/policy.h"
#include "iso/engine.h"
#include "iso/proto.h"
#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

static struct sbx_net_addr
addr (const char *s)
{
  struct sbx_net_addr a;

  memset (&a, 0, sizeof a);
  if (inet_pton (AF_INET, s, a.bytes) == 1)
    a.family = AF_INET;
  else if (inet_pton (AF_INET6, s, a.bytes) == 1)
    a.family = AF_INET6;
  else
    abort ();
  return a;
}

static int
test_entries_canonical (void)
{
  static const char *const cases[][2] = {
      {"*", "*"},
      {"Example.COM", "example.com"},
      {"example.com.", "example.com"},
      {"*.PyPI.org", "*.pypi.org"},
      {"pypi.org:443", "pypi.org:443"},
      {"*.pypi.org:443", "*.pypi.org:443"},
      {"1.2.3.4", "1.2.3.4"},
      {"1.2.3.4:80", "1.2.3.4:80"},
      {"10.0.0.0/8", "10.0.0.0/8"},
      {"0.0.0.0/0", "0.0.0.0/0"},
      {"::1", "::1"},
      {"[::1]:443", "[::1]:443"},
      {"[2001:DB8::1]", "2001:db8::1"},
      {"fd00::/8", "fd00::/8"},
      {"my_host.internal", "my_host.internal"},
  };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_net_entry e;
      sbx_error_t *err = NULL;
      char out[300];
      if (sbx_net_entry_parse (cases[i][0], &e, &err) < 0)
        {
          fprintf (stderr, "#   %s: %s\n", cases[i][0], err->msg);
          return -1;
        }
      sbx_net_entry_format (&e, out, sizeof out);
      CHECK_STR (out, cases[i][1]);
    }
  return 0;
}

static int
test_entries_refused (void)
{
  static const char *const bad[] = {
      "", " ", "exa mple.com", "*.*.com", "*", "**.com", "*example.com", "example.com:0",
      "example.com:65536", "example.com:", "example.com:08", "example.com:-1", "-bad.com",
      "bad-.com", "a..b", ".", "..", "10.0.0.1/8", "10.0.0.0/33", "::/129", "10.0.0.0/",
      "10.0.0.0/08", "10.0.0.0/8:80", "[::1", "[::1]x", "[1.2.3.4]", "1.2.3", "123",
      "1.2.3.4.5", "http://x.com", "x.com/path", "a\tb", "ex\xc3\xa9.com",
      "example.com..", /* found by fuzz_egress: shown as "example.com." */
  };
  char longname[300];
  size_t i;

  for (i = 0; i < ARRAY_SIZE (bad); i++)
    {
      struct sbx_net_entry e;
      sbx_error_t *err = NULL;
      if (i == 4)
        continue; /* "*" is valid; kept in the list to document it */
      if (sbx_net_entry_parse (bad[i], &e, &err) == 0)
        {
          fprintf (stderr, "#   accepted `%s`\n", bad[i]);
          return -1;
        }
      CHECK (err->kind == SBX_E_INVALID);
      sbx_error_free (err);
    }
  memset (longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  {
    struct sbx_net_entry e;
    sbx_error_t *err = NULL;
    CHECK (sbx_net_entry_parse (longname, &e, &err) < 0);
    sbx_error_free (err);
    longname[64] = '\0'; /* one label of 64 */
    err = NULL;
    CHECK (sbx_net_entry_parse (longname, &e, &err) < 0);
    sbx_error_free (err);
    longname[63] = '\0';
    CHECK (sbx_net_entry_parse (longname, &e, NULL) == 0);
  }
  return 0;
}

static int
build (struct sbx_net_policy *p, const char *const *allow, size_t na, const char *const *deny,
       size_t nd)
{
  sbx_error_t *err = NULL;

  if (sbx_net_policy_build (p, allow, na, deny, nd, &err) < 0)
    {
      fprintf (stderr, "#   %s\n", err->msg);
      sbx_error_free (err);
      return -1;
    }
  return 0;
}

static int
test_matching (void)
{
  static const char *const allow[]
      = {"pypi.org", "*.pythonhosted.org", "api.example.com:443", "10.1.0.0/16", "2001:db8::/32"};
  static const char *const deny[] = {"evil.pythonhosted.org", "10.1.2.0/24"};
  struct sbx_net_policy p;
  struct sbx_net_addr a_pub = addr ("93.184.216.34"), a_10 = addr ("10.1.9.9");
  struct sbx_net_addr a_10d = addr ("10.1.2.3"), a_v6 = addr ("2001:db8::5");

  CHECK (build (&p, allow, ARRAY_SIZE (allow), deny, ARRAY_SIZE (deny)) == 0);
  CHECK (sbx_net_decide (&p, "pypi.org", 443, &a_pub) == SBX_NET_ALLOW);
  CHECK (sbx_net_decide (&p, "pypi.org", 80, &a_pub) == SBX_NET_ALLOW);
  CHECK (sbx_net_decide (&p, "www.pypi.org", 443, &a_pub) == SBX_NET_DENY);
  CHECK (sbx_net_decide (&p, "files.pythonhosted.org", 443, &a_pub) == SBX_NET_ALLOW);
  CHECK (sbx_net_decide (&p, "a.b.pythonhosted.org", 443, &a_pub) == SBX_NET_ALLOW);
  CHECK (sbx_net_decide (&p, "pythonhosted.org", 443, &a_pub) == SBX_NET_DENY);
  CHECK (sbx_net_decide (&p, "xpythonhosted.org", 443, &a_pub) == SBX_NET_DENY);
  CHECK (sbx_net_decide (&p, "evil.pythonhosted.org", 443, &a_pub) == SBX_NET_DENY);
  CHECK (sbx_net_decide (&p, "api.example.com", 443, &a_pub) == SBX_NET_ALLOW);
  CHECK (sbx_net_decide (&p, "api.example.com", 80, &a_pub) == SBX_NET_DENY);
  /* Address entries judge the address connected to, names or not. */
  CHECK (sbx_net_decide (&p, NULL, 22, &a_10) == SBX_NET_ALLOW);
  CHECK (sbx_net_decide (&p, "internal.corp", 22, &a_10) == SBX_NET_ALLOW);
  CHECK (sbx_net_decide (&p, NULL, 22, &a_10d) == SBX_NET_DENY);
  CHECK (sbx_net_decide (&p, "pypi.org", 443, &a_10d) == SBX_NET_DENY);
  CHECK (sbx_net_decide (&p, NULL, 443, &a_v6) == SBX_NET_ALLOW);
  CHECK (sbx_net_decide (&p, NULL, 443, &a_pub) == SBX_NET_DENY);
  /* Before resolution. */
  CHECK (sbx_net_precheck (&p, "evil.pythonhosted.org", 443) == SBX_NET_DENY);
  CHECK (sbx_net_precheck (&p, "pypi.org", 443) == SBX_NET_UNDECIDED); /* a range is denied */
  CHECK (sbx_net_precheck (&p, "other.org", 443) == SBX_NET_UNDECIDED); /* ranges allowed */
  sbx_net_policy_free (&p);
  return 0;
}

static int
test_precheck_without_ranges (void)
{
  static const char *const allow[] = {"pypi.org", "*.example.com:443"};
  static const char *const deny[] = {"bad.example.com"};
  static const char *const star[] = {"*"};
  struct sbx_net_policy p;

  CHECK (build (&p, allow, 2, deny, 1) == 0);
  CHECK (sbx_net_precheck (&p, "pypi.org", 443) == SBX_NET_ALLOW);
  CHECK (sbx_net_precheck (&p, "a.example.com", 443) == SBX_NET_ALLOW);
  CHECK (sbx_net_precheck (&p, "a.example.com", 80) == SBX_NET_DENY);
  CHECK (sbx_net_precheck (&p, "bad.example.com", 443) == SBX_NET_DENY);
  CHECK (sbx_net_precheck (&p, "evil.com", 443) == SBX_NET_DENY);
  sbx_net_policy_free (&p);
  /* None: nothing passes, not even an address. */
  CHECK (build (&p, NULL, 0, NULL, 0) == 0);
  {
    struct sbx_net_addr a = addr ("1.1.1.1");
    CHECK (sbx_net_precheck (&p, "pypi.org", 443) == SBX_NET_DENY);
    CHECK (sbx_net_decide (&p, NULL, 443, &a) == SBX_NET_DENY);
  }
  sbx_net_policy_free (&p);
  /* "*" with a deny of everything: deny wins. */
  CHECK (build (&p, star, 1, star, 1) == 0);
  CHECK (sbx_net_precheck (&p, "pypi.org", 443) == SBX_NET_DENY);
  sbx_net_policy_free (&p);
  return 0;
}

static int
test_policy_limits (void)
{
  const char **many = calloc (SBX_NET_MAX_ENTRIES + 1, sizeof *many);
  struct sbx_net_policy p;
  sbx_error_t *err = NULL;
  size_t i;

  CHECK (many != NULL);
  for (i = 0; i <= SBX_NET_MAX_ENTRIES; i++)
    many[i] = "example.com";
  CHECK (sbx_net_policy_build (&p, many, SBX_NET_MAX_ENTRIES, NULL, 0, NULL) == 0);
  sbx_net_policy_free (&p);
  CHECK (sbx_net_policy_build (&p, many, SBX_NET_MAX_ENTRIES + 1, NULL, 0, &err) < 0);
  CHECK (strstr (err->msg, "at most") != NULL);
  sbx_error_free (err);
  err = NULL;
  many[3] = "bad host";
  CHECK (sbx_net_policy_build (&p, NULL, 0, many, 4, &err) < 0);
  CHECK (strstr (err->msg, "network.deny[3]") != NULL);
  sbx_error_free (err);
  free (many);
  return 0;
}

static int
test_classifier (void)
{
  static const char *const special[][2] = {
      {"127.0.0.1", "loopback"},        {"127.255.255.255", "loopback"},
      {"10.0.0.0", "private"},          {"10.255.255.255", "private"},
      {"172.16.0.1", "private"},        {"172.31.255.255", "private"},
      {"192.168.1.1", "private"},       {"169.254.169.254", "metadata"},
      {"169.254.0.1", "link-local"},    {"100.64.0.1", "shared (CGNAT)"},
      {"100.127.255.255", "shared (CGNAT)"}, {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "unspecified"},       {"224.0.0.1", "multicast"},
      {"239.255.255.255", "multicast"}, {"255.255.255.255", "reserved"},
      {"240.0.0.1", "reserved"},        {"192.0.2.1", "documentation"},
      {"198.18.0.1", "benchmarking"},   {"::1", "loopback"},
      {"::", "unspecified"},            {"fe80::1", "link-local"},
      {"febf::1", "link-local"},        {"fc00::1", "private (ULA)"},
      {"fdff::1", "private (ULA)"},     {"fd00:ec2::254", "metadata"},
      {"ff02::1", "multicast"},         {"::ffff:127.0.0.1", "loopback"},
      {"::ffff:169.254.169.254", "metadata"}, {"::ffff:10.0.0.1", "private"},
      {"64:ff9b::10.0.0.1", "private"}, {"64:ff9b::7f00:1", "loopback"},
      {"::127.0.0.1", "IPv4-compatible"}, {"2002:7f00:1::", "6to4"},
      {"2001:0:1::", "Teredo"},         {"2001:db8::1", "documentation"},
      {"fec0::1", "site-local"},
      /* SIIT's IPv4-translated form and the local-use NAT64 prefix. */
      {"::ffff:0:127.0.0.1", "loopback"}, {"::ffff:0:a9fe:a9fe", "metadata"},
      {"64:ff9b:1::10.0.0.1", "private"}, {"64:ff9b:1:2::7f00:1", "loopback"},
      {"64:ff9b:1::808:808", "local NAT64"},
  };
  static const char *const public_[] = {
      "1.1.1.1",      "8.8.8.8",        "9.255.255.255", "11.0.0.0",   "100.63.255.255",
      "100.128.0.0",  "172.15.255.255", "172.32.0.0",    "192.167.255.255", "192.169.0.0",
      "169.253.255.255", "169.255.0.0", "223.255.255.255", "126.255.255.255", "128.0.0.0",
      "2606:4700::1111", "2a00:1450::1", "::ffff:1.1.1.1", "64:ff9b::808:808", "fe00::1",
  };
  size_t i;

  for (i = 0; i < ARRAY_SIZE (special); i++)
    {
      struct sbx_net_addr a = addr (special[i][0]);
      const char *why = sbx_net_addr_special (&a);
      if (why == NULL || strcmp (why, special[i][1]) != 0)
        {
          fprintf (stderr, "#   %s: `%s`, expected `%s`\n", special[i][0], why ? why : "public",
                   special[i][1]);
          return -1;
        }
    }
  for (i = 0; i < ARRAY_SIZE (public_); i++)
    {
      struct sbx_net_addr a = addr (public_[i]);
      const char *why = sbx_net_addr_special (&a);
      if (why != NULL)
        {
          fprintf (stderr, "#   %s: `%s`, expected public\n", public_[i], why);
          return -1;
        }
    }
  return 0;
}

static int
parse_ok (const char *head, struct sbx_egress_req *r)
{
  char why[200];

  if (sbx_egress_parse (head, strlen (head), r, why, sizeof why) < 0)
    {
      fprintf (stderr, "#   refused: %s\n", why);
      return -1;
    }
  return 0;
}

static int
test_parse_connect (void)
{
  struct sbx_egress_req r;

  CHECK (parse_ok ("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", &r) == 0);
  CHECK (r.method == SBX_EGRESS_CONNECT);
  CHECK_STR (r.host, "pypi.org");
  CHECK (r.port == 443);
  CHECK (r.head == NULL);
  CHECK (parse_ok ("CONNECT [2001:db8::1]:8443 HTTP/1.0\r\n\r\n", &r) == 0);
  CHECK_STR (r.host, "2001:db8::1");
  CHECK (r.port == 8443);
  return 0;
}

static int
test_parse_forward (void)
{
  struct sbx_egress_req r;

  CHECK (parse_ok ("POST http://Example.com:8080/a/b?c=d#frag HTTP/1.1\r\n"
                   "Host: wrong.example\r\n"
                   "Proxy-Authorization: Basic c2VjcmV0\r\n"
                   "Proxy-Connection: keep-alive\r\n"
                   "Connection: keep-alive, X-Hop\r\n"
                   "X-Hop: 1\r\n"
                   "Keep-Alive: 5\r\n"
                   "Upgrade: websocket\r\n"
                   "Content-Length: 3\r\n"
                   "X-Keep:  v  \r\n\r\n",
                   &r)
         == 0);
  CHECK (r.method == SBX_EGRESS_FORWARD);
  CHECK_STR (r.host, "Example.com");
  CHECK (r.port == 8080);
  CHECK_STR (r.head, "POST /a/b?c=d HTTP/1.1\r\nHost: Example.com:8080\r\n"
                     "Content-Length: 3\r\nX-Keep: v\r\nConnection: close\r\n\r\n");
  free (r.head);
  CHECK (parse_ok ("GET http://example.com HTTP/1.1\r\n\r\n", &r) == 0);
  CHECK (r.port == 80);
  CHECK_STR (r.head, "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n");
  free (r.head);
  CHECK (parse_ok ("GET http://example.com?q HTTP/1.1\r\n\r\n", &r) == 0);
  CHECK_STR (r.head, "GET /?q HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n");
  free (r.head);
  CHECK (parse_ok ("GET http://[::1]:81/x HTTP/1.1\r\n\r\n", &r) == 0);
  CHECK_STR (r.host, "::1");
  CHECK (r.port == 81);
  free (r.head);
  return 0;
}

static int
test_parse_refused (void)
{
  static const char *const bad[] = {
      "GET http://x/ HTTP/1.1\r\n",               /* incomplete */
      "garbage\r\n\r\n",
      "GET  http://x/ HTTP/1.1\r\n\r\n",
      "GET http://x/ HTTP/1.1 \r\n\r\n",
      "GET http://x/ HTTP/2.0\r\n\r\n",
      "GET http://x/ http/1.1\r\n\r\n",
      "G(T http://x/ HTTP/1.1\r\n\r\n",
      "GET /x HTTP/1.1\r\n\r\n",
      "GET https://x/ HTTP/1.1\r\n\r\n",
      "GET ftp://x/ HTTP/1.1\r\n\r\n",
      "GET http:///x HTTP/1.1\r\n\r\n",
      "GET http://u:p@x/ HTTP/1.1\r\n\r\n",
      "GET http://x:0/ HTTP/1.1\r\n\r\n",
      "GET http://x:65536/ HTTP/1.1\r\n\r\n",
      "GET http://x:/ HTTP/1.1\r\n\r\n",
      "GET http://[::1/ HTTP/1.1\r\n\r\n",
      "GET http://x/\x01 HTTP/1.1\r\n\r\n",
      "CONNECT x HTTP/1.1\r\n\r\n",
      "CONNECT :443 HTTP/1.1\r\n\r\n",
      "CONNECT x:443x HTTP/1.1\r\n\r\n",
      "GET http://x/ HTTP/1.1\r\n folded\r\n\r\n",
      "GET http://x/ HTTP/1.1\r\nNo-Colon\r\n\r\n",
      "GET http://x/ HTTP/1.1\r\n: empty-name\r\n\r\n",
      "GET http://x/ HTTP/1.1\r\nBad Name: v\r\n\r\n",
      "GET http://x/ HTTP/1.1\r\nX: a\x01b\r\n\r\n",
      "GET http://x/ HTTP/1.1\r\nConnection: a\r\nConnection: b\r\n\r\n",
      "GET http://x/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
  };
  char big[8192];
  size_t i;

  for (i = 0; i < ARRAY_SIZE (bad); i++)
    {
      struct sbx_egress_req r;
      char why[200] = "";
      if (sbx_egress_parse (bad[i], strlen (bad[i]), &r, why, sizeof why) == 0)
        {
          fprintf (stderr, "#   accepted case %zu\n", i);
          free (r.head);
          return -1;
        }
      CHECK (why[0] != '\0');
    }
  /* More than 100 header lines. */
  {
    size_t n = (size_t) snprintf (big, sizeof big, "GET http://x/ HTTP/1.1\r\n");
    struct sbx_egress_req r;
    char why[200];
    for (i = 0; i < 101; i++)
      n += (size_t) snprintf (big + n, sizeof big - n, "X-%zu: v\r\n", i);
    n += (size_t) snprintf (big + n, sizeof big - n, "\r\n");
    CHECK (sbx_egress_parse (big, n, &r, why, sizeof why) < 0);
    /* A NUL inside. */
    memcpy (big, "GET http://x/ HTTP/1.1\r\nX: a\0b\r\n\r\n", 35);
    CHECK (sbx_egress_parse (big, 35, &r, why, sizeof why) < 0);
  }
  return 0;
}

/* One packet with descriptors, as a (hostile) init would send it. */
static void
send_packet (int fd, const void *msg, size_t len, const int *fds, int nfds)
{
  char cbuf[CMSG_SPACE (sizeof (int) * 4)];
  struct iovec iov = {(void *) (uintptr_t) msg, len};
  struct msghdr mh;

  memset (&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (nfds > 0)
    {
      struct cmsghdr *cm;
      mh.msg_control = cbuf;
      mh.msg_controllen = CMSG_SPACE (sizeof (int) * (size_t) nfds);
      cm = CMSG_FIRSTHDR (&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN (sizeof (int) * (size_t) nfds);
      memcpy (CMSG_DATA (cm), fds, sizeof (int) * (size_t) nfds);
    }
  if (sendmsg (fd, &mh, 0) < 0)
    abort ();
}

/* A connected TCP socket pair on the loopback (the test's namespace). */
static int
tcp_pair (int *a, int *b)
{
  struct sockaddr_in sa;
  socklen_t sl = sizeof sa;
  int l = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  memset (&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (l < 0 || bind (l, (struct sockaddr *) &sa, sizeof sa) < 0 || listen (l, 1) < 0
      || getsockname (l, (struct sockaddr *) &sa, &sl) < 0)
    return -1;
  *a = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (*a < 0 || connect (*a, (struct sockaddr *) &sa, sizeof sa) < 0)
    return -1;
  *b = accept4 (l, NULL, NULL, SOCK_CLOEXEC);
  close (l);
  return *b < 0 ? -1 : 0;
}

/* SBX_MSG_EGRESS from init: exactly one descriptor, a connected TCP
   socket, the exact size, zero reserved words; anything else is init
   breaking the protocol (the caller then kills the sandbox). */
static int
test_init_egress_message (void)
{
  struct sbx_msg_egress m;
  struct sbx_iso_box box;
  struct sbx_iso_event ev;
  sbx_error_t *err = NULL;
  int sv[2], a, b, p[2], listener;
  struct
  {
    struct sbx_msg_egress m;
    char extra[4];
  } longer;

  static char open_before[256];

  for (int fd = 0; fd < 256; fd++)
    open_before[fd] = fcntl (fd, F_GETFD) >= 0;
  CHECK (tcp_pair (&a, &b) == 0);
  CHECK (pipe2 (p, O_CLOEXEC) == 0);
  listener = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK (listener >= 0 && listen (listener, 1) == 0);
  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_EGRESS;
  m.hdr.len = sizeof m;

  /* Good. */
  CHECK (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
  sbx_iso_box_init (&box);
  box.ctl = sv[0];
  send_packet (sv[1], &m, sizeof m, &a, 1);
  CHECK (sbx_iso_next_event (&box, 0, &ev, &err) == 1);
  CHECK (ev.type == SBX_ISO_EGRESS && ev.fd >= 0);
  close (ev.fd);
  CHECK (sbx_iso_next_event (&box, 0, &ev, &err) == 0);

  /* Bad, each on a fresh socket (a broken init is not read further). */
  for (int i = 0; i < 6; i++)
    {
      int fds[2] = {a, b};
      close (sv[0]);
      close (sv[1]);
      CHECK (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
      box.ctl = sv[0];
      m.reserved[0] = 0;
      switch (i)
        {
        case 0: /* no descriptor */
          send_packet (sv[1], &m, sizeof m, NULL, 0);
          break;
        case 1: /* two */
          send_packet (sv[1], &m, sizeof m, fds, 2);
          break;
        case 2: /* a pipe */
          send_packet (sv[1], &m, sizeof m, &p[0], 1);
          break;
        case 3: /* a listening socket */
          send_packet (sv[1], &m, sizeof m, &listener, 1);
          break;
        case 4: /* reserved set */
          m.reserved[0] = 1;
          send_packet (sv[1], &m, sizeof m, &a, 1);
          break;
        default: /* longer than the message */
          memset (&longer, 0, sizeof longer);
          longer.m = m;
          longer.m.hdr.len = sizeof longer;
          send_packet (sv[1], &longer, sizeof longer, &a, 1);
          break;
        }
      if (sbx_iso_next_event (&box, 0, &ev, &err) != -1)
        {
          fprintf (stderr, "#   case %d accepted\n", i);
          return -1;
        }
      CHECK (err != NULL && strstr (err->msg, "protocol") != NULL);
      sbx_error_free (err);
      err = NULL;
    }
  close (sv[0]);
  close (sv[1]);
  close (a);
  close (b);
  close (p[0]);
  close (p[1]);
  close (listener);
  /* Nothing of what was refused stays open here: the descriptors that
     came with bad packets were closed. */
  for (int fd = 3; fd < 256; fd++)
    CHECK ((fcntl (fd, F_GETFD) >= 0) == open_before[fd]);
  return 0;
}

/* The recipe builds' mirror: parsed from --template-mirror's URL, and
   reached whatever its range but metadata and link-local, on its port. */
static int
test_build_mirror (void)
{
  static const struct
  {
    const char *url, *host;
    unsigned port;
  } good[] = {
      {"http://deb.debian.org/debian", "deb.debian.org", 80},
      {"https://deb.debian.org/debian", "deb.debian.org", 443},
      {"http://127.0.0.1:3142/debian", "127.0.0.1", 3142},
      {"http://user:pw@mirror.lan:8080", "mirror.lan", 8080},
      {"http://[fd00::5]:9999/d", "fd00::5", 9999},
      {"http://[fd00::5]/d", "fd00::5", 80},
  };
  static const char *const bad[] = {
      "ftp://deb.debian.org/", "http:///debian", "http://host:/d", "http://host:0/",
      "http://host:65536/", "http://host:8x/", "http://[fd00::5/", "http://[fd00::5]x/",
      "deb.debian.org",
  };
  struct sbx_net_mirror m;
  size_t i;

  for (i = 0; i < ARRAY_SIZE (good); i++)
    {
      CHECK (sbx_net_mirror_parse (good[i].url, &m) == 0);
      CHECK_STR (m.host, good[i].host);
      CHECK (m.port == good[i].port);
    }
  for (i = 0; i < ARRAY_SIZE (bad); i++)
    {
      CHECK (sbx_net_mirror_parse (bad[i], &m) == -1);
      CHECK (m.host[0] == '\0');
      CHECK (!sbx_net_mirror_allows (&m, "", 80, "private"));
    }
  CHECK (sbx_net_mirror_parse ("http://Mirror.LAN:3142/debian", &m) == 0);
  CHECK (sbx_net_mirror_allows (&m, "mirror.lan", 3142, "private"));
  CHECK (sbx_net_mirror_allows (&m, "MIRROR.lan", 3142, "loopback"));
  CHECK (sbx_net_mirror_allows (&m, "mirror.lan", 3142, "documentation"));
  CHECK (!sbx_net_mirror_allows (&m, "mirror.lan", 3142, "metadata"));
  CHECK (!sbx_net_mirror_allows (&m, "mirror.lan", 3142, "link-local"));
  CHECK (!sbx_net_mirror_allows (&m, "mirror.lan", 80, "private"));
  CHECK (!sbx_net_mirror_allows (&m, "mirror.lan.evil", 3142, "private"));
  CHECK (!sbx_net_mirror_allows (&m, "other.lan", 3142, "private"));
  return 0;
}

int
main (void)
{
  RUN (test_entries_canonical);
  RUN (test_entries_refused);
  RUN (test_matching);
  RUN (test_precheck_without_ranges);
  RUN (test_policy_limits);
  RUN (test_classifier);
  RUN (test_parse_connect);
  RUN (test_parse_forward);
  RUN (test_parse_refused);
  RUN (test_init_egress_message);
  RUN (test_build_mirror);
  return tap_done ();
}
