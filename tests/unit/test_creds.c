/* Unit tests for credentials: secret names and values, rule and
 * secrets_env canonicalization (src/core/secrets.c), and in the egress
 * process the rules a packet carries, which pattern applies to a host and
 * the rewrite of a request head (src/egress/creds.c). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/secrets.h"
#include "egress/creds.h"
#include "tap.h"

#define PH "sbx_placeholder_0123456789abcdef0123456789abcdef"

static int
test_secret_names (void)
{
  CHECK (sbx_secret_name_valid ("OPENAI"));
  CHECK (sbx_secret_name_valid ("_x9"));
  CHECK (sbx_secret_name_valid ("a"));
  CHECK (!sbx_secret_name_valid (""));
  CHECK (!sbx_secret_name_valid (NULL));
  CHECK (!sbx_secret_name_valid ("9A"));
  CHECK (!sbx_secret_name_valid ("A-B"));
  CHECK (!sbx_secret_name_valid ("A B"));
  CHECK (!sbx_secret_name_valid ("A.B"));
  {
    char n[66];
    memset (n, 'A', 64);
    n[64] = '\0';
    CHECK (sbx_secret_name_valid (n));
    n[64] = 'A';
    n[65] = '\0';
    CHECK (!sbx_secret_name_valid (n));
  }
  return 0;
}

static int
value_ok (const char *v, size_t n)
{
  sbx_error_t *err = NULL;
  int rc = sbx_secret_value_check (v, n, &err);
  sbx_error_free (err);
  return rc == 0;
}

static int
test_secret_values (void)
{
  static char big[SBX_SECRET_VALUE_MAX + 1];

  CHECK (value_ok ("sk-abc", 6));
  CHECK (value_ok ("a\tb", 3));
  CHECK (value_ok ("caf\xc3\xa9", 5));
  CHECK (!value_ok ("", 0));
  CHECK (!value_ok ("a\r\nb", 4));
  CHECK (!value_ok ("a\nb", 3));
  CHECK (!value_ok ("a\rb", 3));
  CHECK (!value_ok ("a\0b", 3));
  CHECK (!value_ok ("a\x01", 2));
  CHECK (!value_ok ("a\x7f", 2));
  CHECK (!value_ok (" a", 2));
  CHECK (!value_ok ("a ", 2));
  memset (big, 'x', sizeof big);
  CHECK (value_ok (big, SBX_SECRET_VALUE_MAX));
  CHECK (!value_ok (big, SBX_SECRET_VALUE_MAX + 1));
  return 0;
}

/* Canonical rules of a JSON text; NULL with the error's message in msg. */
static json_t *
canon (const char *text, char *msg, size_t cap)
{
  json_t *in = json_loads (text, 0, NULL), *out = json_object ();
  sbx_error_t *err = NULL;

  msg[0] = '\0';
  if (sbx_rules_canon (in, out, &err) < 0)
    {
      snprintf (msg, cap, "%s", err->msg);
      sbx_error_free (err);
      json_decref (out);
      out = NULL;
    }
  json_decref (in);
  return out;
}

static int
canon_fails (const char *text, const char *expect)
{
  char msg[512];
  json_t *o = canon (text, msg, sizeof msg);

  if (o != NULL)
    {
      json_decref (o);
      fprintf (stderr, "#   accepted: %s\n", text);
      return 0;
    }
  if (strstr (msg, expect) == NULL)
    {
      fprintf (stderr, "#   `%s`: `%s` lacks `%s`\n", text, msg, expect);
      return 0;
    }
  return 1;
}

static int
test_rules_canon (void)
{
  char msg[512];
  json_t *o = canon ("{\"rules\": {\"API.Example.com.\": [{\"headers\": {\"Authorization\":"
                     " \"Bearer ${secret:K}\"}, \"placeholders\": [\"K\"]}]},"
                     " \"secrets_env\": {\"KEY\": \"K\", \"K2\": {\"secret\": \"K\","
                     " \"placeholder\": \"" PH "\"}}}",
                     msg, sizeof msg);
  char *text;

  CHECK (o != NULL);
  text = json_dumps (o, JSON_COMPACT | JSON_SORT_KEYS);
  CHECK_STR (text, "{\"rules\":{\"api.example.com\":[{\"headers\":{\"Authorization\":"
                   "\"Bearer ${secret:K}\"},\"placeholders\":[\"K\"]}]},"
                   "\"secrets_env\":{\"K2\":{\"placeholder\":\"" PH "\",\"secret\":\"K\"},"
                   "\"KEY\":{\"secret\":\"K\"}}}");
  free (text);
  json_decref (o);
  CHECK (canon_fails ("{\"rules\": []}", "must be an object"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{\"headers\": {\"X\": \"${secret:}\"}}]}}",
                      "names no valid secret"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{\"headers\": {\"X\": \"${oops\"}}]}}", "${"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{\"headers\": {\"X\": \"${secret:A\"}}]}}", "${"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{\"headers\": {\"X Y\": \"v\"}}]}}",
                      "not a valid header name"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{\"headers\": {\"transfer-encoding\": \"v\"}}]}}",
                      "may not set"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{\"headers\": {\"X\": \"a\\nb\"}}]}}",
                      "control byte"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{\"headers\": {}}]}}", "1 to 16 headers"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{}]}}", "neither headers nor placeholders"));
  CHECK (canon_fails ("{\"rules\": {\"1.2.3.4\": [{\"headers\": {\"X\": \"v\"}}]}}",
                      "host name or *.domain"));
  CHECK (canon_fails ("{\"rules\": {\"*\": [{\"headers\": {\"X\": \"v\"}}]}}",
                      "host name or *.domain"));
  CHECK (canon_fails ("{\"rules\": {\"a.com\": [{\"headers\": {\"X\": \"v\"}}],"
                      " \"A.com\": [{\"headers\": {\"X\": \"v\"}}]}}",
                      "given twice"));
  CHECK (canon_fails ("{\"rules\": {\"a\": [1], \"b\": [1], \"c\": [1], \"d\": [1], \"e\": [1],"
                      " \"f\": [1], \"g\": [1], \"h\": [1], \"i\": [1], \"j\": [1], \"k\": [1]}}",
                      "at most 10"));
  CHECK (canon_fails ("{\"secrets_env\": {\"A\": \"bad-name\"}}", "not a secret name"));
  CHECK (canon_fails ("{\"secrets_env\": {\"A\": {\"secret\": \"K\", \"placeholder\": \"x\"}}}",
                      "placeholder must be"));
  CHECK (canon_fails ("{\"secrets_env\": {\"1A\": \"K\"}}", "environment variable"));
  return 0;
}

/* A packet's credential strings: headers for api.example.com and
   *.example.com, a swap for api.example.com, a broken *.broken.com. */
static int
make_creds (struct sbx_egress_creds *c)
{
  static const char s[] = "api.example.com\0Authorization\0Bearer SECRET1\0"
                          "*.example.com\0X-Wild\0w\0"
                          "api.example.com\0" PH "\0SECRET2\0"
                          "*.broken.com\0GONE\0";
  return sbx_egress_creds_parse (s, sizeof s - 1, 2, 1, 1, c);
}

static int
test_creds_parse_and_match (void)
{
  struct sbx_egress_creds c;
  static const char trailing[] = "a.com\0X\0v\0junk";
  static const char shortp[] = "a.com\0X\0";
  static const char badpat[] = "10.0.0.0/8\0X\0v\0";

  CHECK (make_creds (&c) == 0);
  CHECK_STR (sbx_egress_creds_match (&c, "api.example.com", 443), "api.example.com");
  CHECK_STR (sbx_egress_creds_match (&c, "www.example.com", 443), "*.example.com");
  CHECK (sbx_egress_creds_match (&c, "example.com", 443) == NULL);
  CHECK (sbx_egress_creds_match (&c, "api.example.com.evil.com", 443) == NULL);
  CHECK (sbx_egress_creds_match (&c, "evilexample.com", 443) == NULL);
  CHECK (sbx_egress_creds_match (&c, NULL, 443) == NULL);
  CHECK_STR (sbx_egress_creds_broken (&c, sbx_egress_creds_match (&c, "x.broken.com", 80)),
             "GONE");
  CHECK (sbx_egress_creds_broken (&c, "api.example.com") == NULL);
  sbx_egress_creds_free (&c);
  CHECK (sbx_egress_creds_parse (trailing, sizeof trailing - 1, 1, 0, 0, &c) < 0);
  CHECK (sbx_egress_creds_parse (shortp, sizeof shortp - 1, 1, 0, 0, &c) < 0);
  CHECK (sbx_egress_creds_parse (badpat, sizeof badpat - 1, 1, 0, 0, &c) < 0);
  CHECK (sbx_egress_creds_parse ("", 0, 0, 0, 0, &c) == 0);
  sbx_egress_creds_free (&c);
  return 0;
}

static int
test_rewrite (void)
{
  struct sbx_egress_creds c;
  static const char head[] = "GET /v1 HTTP/1.1\r\nHost: api.example.com\r\n"
                             "authorization: Bearer mine\r\nX-Key: k=" PH ";" PH "\r\n"
                             "Connection: keep-alive\r\nProxy-Authorization: x\r\n\r\n";
  char *out = NULL;
  size_t n = 0;

  CHECK (make_creds (&c) == 0);
  CHECK (sbx_egress_rewrite (head, sizeof head - 1, &c, "api.example.com", &out, &n) == 0);
  CHECK (strlen (out) == n);
  CHECK_STR (out, "GET /v1 HTTP/1.1\r\nHost: api.example.com\r\n"
                  "X-Key: k=SECRET2;SECRET2\r\n"
                  "Authorization: Bearer SECRET1\r\nConnection: close\r\n\r\n");
  free (out);
  /* Another pattern: its headers, no swap of the api's placeholder. */
  CHECK (sbx_egress_rewrite (head, sizeof head - 1, &c, "*.example.com", &out, &n) == 0);
  CHECK_STR (out, "GET /v1 HTTP/1.1\r\nHost: api.example.com\r\n"
                  "authorization: Bearer mine\r\nX-Key: k=" PH ";" PH "\r\n"
                  "X-Wild: w\r\nConnection: close\r\n\r\n");
  free (out);
  CHECK (sbx_egress_rewrite ("GET / HTTP/1.1\r\nX\r\n\r\n", 21, &c, "*.example.com", &out, &n)
         < 0);
  CHECK (sbx_egress_rewrite ("GET / HTTP/1.1\r\n Folded: x\r\n\r\n", 31, &c, "*.example.com",
                             &out, &n)
         < 0);
  CHECK (sbx_egress_rewrite ("GET / HTTP/1.1\r\nA: b\nc\r\n\r\n", 26, &c, "*.example.com", &out,
                             &n)
         < 0);
  CHECK (sbx_egress_rewrite ("GET / HTTP/1.1\r\n\r\n", 17, &c, "*.example.com", &out, &n) < 0);
  CHECK (sbx_egress_rewrite ("GARBAGE\r\n\r\n", 11, &c, "*.example.com", &out, &n) < 0);
  CHECK (sbx_egress_rewrite ("GET  / HTTP/1.1\r\n\r\n", 19, &c, "*.example.com", &out, &n) < 0);
  CHECK (sbx_egress_rewrite ("GET / HTTP/2.0\r\n\r\n", 18, &c, "*.example.com", &out, &n) < 0);
  CHECK (sbx_egress_rewrite ("GET /\x01 HTTP/1.1\r\n\r\n", 20, &c, "*.example.com", &out, &n)
         < 0);
  CHECK (out == NULL);
  CHECK (sbx_egress_rewrite ("GET / HTTP/1.1\r\n\r\n", 18, &c, "*.example.com", &out, &n) == 0);
  CHECK_STR (out, "GET / HTTP/1.1\r\nX-Wild: w\r\nConnection: close\r\n\r\n");
  free (out);
  out = NULL;
  CHECK (out == NULL);
  sbx_egress_creds_free (&c);
  return 0;
}

int
main (void)
{
  RUN (test_secret_names);
  RUN (test_secret_values);
  RUN (test_rules_canon);
  RUN (test_creds_parse_and_match);
  RUN (test_rewrite);
  return tap_done ();
}
