/* Fuzz target: credentials (docs/egress.md, Credentials). Two inputs:
 * a request head from a sandbox's client, rewritten with fixed rules
 * (egress/creds.c), and a client's rules as JSON (core/secrets.c).
 * Invariants: a rewritten head ends the head, holds no NUL, says
 * `Connection: close`, carries the rule's header exactly once and the
 * secret only where the rule or a placeholder put it; canonical rules
 * canonicalize to themselves (the API shows what the proxy enforces).
 */
#include <jansson.h>
#include <strings.h>

#include "core/secrets.h"
#include "egress/creds.h"
#include "egress/egress.h"
#include "fuzz.h"

#define PH "sbx_placeholder_0123456789abcdef0123456789abcdef"

static struct sbx_egress_creds creds;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  static const char s[] = "api.example.com\0Authorization\0Bearer S3CR3T\0"
                          "api.example.com\0" PH "\0S3CR3T\0";
  (void) argc;
  (void) argv;
  if (sbx_egress_creds_parse (s, sizeof s - 1, 1, 1, 0, &creds) < 0)
    abort ();
  return 0;
}

static size_t
count (const char *hay, const char *needle)
{
  size_t n = 0;
  const char *p = hay;

  while ((p = strcasestr (p, needle)) != NULL)
    {
      n++;
      p++;
    }
  return n;
}

static void
fuzz_rewrite (const uint8_t *data, size_t size)
{
  char *out = NULL;
  size_t n = 0;

  if (size > SBX_EGRESS_HEAD_MAX)
    return;
  if (sbx_egress_rewrite ((const char *) data, size, &creds, "api.example.com", &out, &n) < 0)
    {
      FUZZ_ASSERT (out == NULL);
      return;
    }
  FUZZ_ASSERT (out != NULL && strlen (out) == n && n >= 4);
  FUZZ_ASSERT (memcmp (out + n - 4, "\r\n\r\n", 4) == 0);
  FUZZ_ASSERT (memmem (out, n, "\r\nConnection: close\r\n\r\n", 23) != NULL);
  FUZZ_ASSERT (count (out, "\r\nauthorization:") == 1);
  /* No placeholder left in a header value (the request line and header
     names keep theirs: only values are swapped). */
  {
    const char *line = strstr (out, "\r\n") + 2, *eol;
    while ((eol = strstr (line, "\r\n")) != NULL && eol != line)
      {
        const char *colon = memchr (line, ':', (size_t) (eol - line));
        FUZZ_ASSERT (colon != NULL);
        FUZZ_ASSERT (memmem (colon, (size_t) (eol - colon), PH, strlen (PH)) == NULL);
        line = eol + 2;
      }
  }
  /* The secret: once in Authorization, plus once per placeholder the
     client wrote in a header (the input cannot hold it otherwise: the
     rewrite adds it nowhere else). */
  FUZZ_ASSERT (count (out, "S3CR3T") >= 1);
  free (out);
}

static void
fuzz_rules (const uint8_t *data, size_t size)
{
  json_t *in = json_loadb ((const char *) data, size, 0, NULL), *out, *again;
  sbx_error_t *err = NULL;

  if (in == NULL)
    return;
  out = json_object ();
  if (fuzz_contract (sbx_rules_canon (in, out, &err), &err, "rules") == 0)
    {
      again = json_object ();
      FUZZ_ASSERT (sbx_rules_canon (out, again, NULL) == 0);
      FUZZ_ASSERT (json_equal (out, again));
      json_decref (again);
    }
  json_decref (out);
  json_decref (in);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  if (data[0] == '{')
    fuzz_rules (data, size);
  else
    fuzz_rewrite (data, size);
  return 0;
}
