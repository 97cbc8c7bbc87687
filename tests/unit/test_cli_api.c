/* Unit tests for sbx_api_error_from_body (src/cli/api.c): how the CLI turns
 * a non-2xx answer into the error it prints. The kind comes from the
 * daemon's `error` name (docs/api.md), else from the status; the text from
 * `message`; anything that is not one of our error objects (a proxy's HTML
 * page) is quoted, one line, printable, cut.
 */
#include "cli/api.h"

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))
#define HINT " (set SBX_API_KEY to a key from `sbx key create`)"

static int
check_error (int status, const char *body, size_t len, int hint, enum sbx_error_kind kind,
             const char *msg)
{
  sbx_error_t *err = NULL;
  int rc = sbx_api_error_from_body (status, body, len, hint, &err);
  int ok = rc == -1 && err != NULL && err->kind == kind && strcmp (err->msg, msg) == 0
           && err->sys_errno == 0;

  if (!ok)
    fprintf (stderr, "#   %d `%.*s`: kind %d `%s`, want kind %d `%s`\n", status, (int) len,
             body ? body : "", err ? (int) err->kind : 0, err ? err->msg : "(none)", (int) kind,
             msg);
  sbx_error_free (err);
  return ok ? 0 : -1;
}

#define ERR(status, body, hint, kind, msg)                                    \
  check_error (status, body, sizeof body - 1, hint, kind, msg)

/* Every name the daemon uses, whatever the status says. */
static int
test_error_names (void)
{
  static const struct
  {
    const char *name;
    enum sbx_error_kind kind;
  } names[] = {
    {"invalid_argument", SBX_E_INVALID},   {"unauthorized", SBX_E_UNAUTHORIZED},
    {"forbidden", SBX_E_FORBIDDEN},        {"not_found", SBX_E_NOT_FOUND},
    {"conflict", SBX_E_CONFLICT},          {"too_large", SBX_E_TOO_LARGE},
    {"resource_exhausted", SBX_E_LIMIT},   {"internal", SBX_E_SYSTEM},
    {"unavailable", SBX_E_UNAVAILABLE},
  };

  for (size_t i = 0; i < ARRAY_SIZE (names); i++)
    {
      char body[160];
      int n = snprintf (body, sizeof body, "{\"error\":\"%s\",\"message\":\"why\"}", names[i].name);

      CHECK (check_error (500, body, (size_t) n, 0, names[i].kind, "why") == 0);
      CHECK (check_error (400, body, (size_t) n, 0, names[i].kind, "why") == 0);
      /* The daemon's names are the ones error.c gives its kinds. */
      CHECK_STR (sbx_error_kind_name (names[i].kind), names[i].name);
    }
  return 0;
}

/* No name (or one we do not know): the status decides. */
static int
test_status_kinds (void)
{
  static const struct
  {
    int status;
    enum sbx_error_kind kind;
  } cases[] = {
    {400, SBX_E_INVALID},  {401, SBX_E_UNAUTHORIZED}, {403, SBX_E_FORBIDDEN},
    {404, SBX_E_NOT_FOUND}, {409, SBX_E_CONFLICT},    {413, SBX_E_TOO_LARGE},
    {429, SBX_E_LIMIT},    {503, SBX_E_UNAVAILABLE},  {500, SBX_E_SYSTEM},
    {502, SBX_E_BAD_GATEWAY}, {504, SBX_E_GATEWAY_TIMEOUT}, {501, SBX_E_NOT_IMPLEMENTED},
    {405, SBX_E_INVALID},
    {418, SBX_E_INVALID},  {499, SBX_E_INVALID},      {302, SBX_E_SYSTEM},
    {100, SBX_E_SYSTEM},   {599, SBX_E_SYSTEM},       {0, SBX_E_SYSTEM},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      char msg[64];

      snprintf (msg, sizeof msg, "the daemon answered HTTP %d", cases[i].status);
      CHECK (check_error (cases[i].status, "", 0, 0, cases[i].kind, msg) == 0);
      CHECK (ERR (cases[i].status, "{\"error\":\"new_kind\",\"message\":\"m\"}", 0, cases[i].kind,
                  "m")
             == 0);
    }
  return 0;
}

static int
test_messages (void)
{
  CHECK (ERR (404, "{\"error\":\"not_found\",\"message\":\"sandbox `x` not found\"}", 0,
              SBX_E_NOT_FOUND, "sandbox `x` not found")
         == 0);
  /* A name without a message. */
  CHECK (ERR (409, "{\"error\":\"conflict\"}", 0, SBX_E_CONFLICT, "the daemon answered 409 conflict")
         == 0);
  CHECK (ERR (409, "{\"error\":\"conflict\",\"message\":\"\"}", 0, SBX_E_CONFLICT,
              "the daemon answered 409 conflict")
         == 0);
  CHECK (ERR (409, "{\"error\":\"conflict\",\"message\":5}", 0, SBX_E_CONFLICT,
              "the daemon answered 409 conflict")
         == 0);
  /* A message without a name: the status gives the kind. */
  CHECK (ERR (429, "{\"message\":\"too many sandboxes\"}", 0, SBX_E_LIMIT, "too many sandboxes")
         == 0);
  /* Whatever follows the object (a newline, more) is ignored. */
  CHECK (ERR (403, "{\"error\":\"forbidden\",\"message\":\"no\"}\n\ntrailing", 0, SBX_E_FORBIDDEN,
              "no")
         == 0);
  /* '%' in messages is text. */
  CHECK (ERR (400, "{\"error\":\"invalid_argument\",\"message\":\"100%s %d\"}", 0, SBX_E_INVALID,
              "100%s %d")
         == 0);
  return 0;
}

/* 401 over TCP without a key gets advice; not otherwise. */
static int
test_auth_hint (void)
{
  CHECK (ERR (401, "{\"error\":\"unauthorized\",\"message\":\"missing API key\"}", 1,
              SBX_E_UNAUTHORIZED, "missing API key" HINT)
         == 0);
  CHECK (ERR (401, "{\"error\":\"unauthorized\",\"message\":\"missing API key\"}", 0,
              SBX_E_UNAUTHORIZED, "missing API key")
         == 0);
  CHECK (ERR (401, "{\"error\":\"unauthorized\"}", 1, SBX_E_UNAUTHORIZED,
              "the daemon answered 401 unauthorized" HINT)
         == 0);
  CHECK (ERR (401, "", 1, SBX_E_UNAUTHORIZED, "the daemon answered HTTP 401" HINT) == 0);
  CHECK (ERR (401, "Unauthorized", 1, SBX_E_UNAUTHORIZED,
              "the daemon answered HTTP 401: Unauthorized" HINT)
         == 0);
  CHECK (ERR (403, "{\"error\":\"forbidden\",\"message\":\"admin only\"}", 1, SBX_E_FORBIDDEN,
              "admin only")
         == 0);
  return 0;
}

/* Not our error object: the start of the body, one line, printable. */
static int
test_foreign_bodies (void)
{
  char long_body[300], want[200];

  CHECK (ERR (502, "<html><body>Bad Gateway</body></html>\r\n<p>nginx</p>", 0,
              SBX_E_BAD_GATEWAY,
              "the daemon answered HTTP 502: <html><body>Bad Gateway</body></html>")
         == 0);
  CHECK (ERR (500, "[1,2]", 0, SBX_E_SYSTEM, "the daemon answered HTTP 500: [1,2]") == 0);
  CHECK (ERR (500, "\"just a string\"", 0, SBX_E_SYSTEM,
              "the daemon answered HTTP 500: \"just a string\"")
         == 0);
  CHECK (ERR (400, "{\"error\":", 0, SBX_E_INVALID, "the daemon answered HTTP 400: {\"error\":")
         == 0);
  CHECK (ERR (400, "a\tb\x01" "c\x7f" "d\x1b[31m", 0, SBX_E_INVALID,
              "the daemon answered HTTP 400: a?b?c?d?[31m")
         == 0);
  /* A body that starts with a line break says nothing. */
  CHECK (ERR (503, "\nlater", 0, SBX_E_UNAVAILABLE, "the daemon answered HTTP 503") == 0);
  /* Bytes past the length are not read; a NUL inside is a control byte. */
  CHECK (check_error (500, "abcdef", 3, 0, SBX_E_SYSTEM, "the daemon answered HTTP 500: abc")
         == 0);
  CHECK (check_error (500, "a\0b", 3, 0, SBX_E_SYSTEM, "the daemon answered HTTP 500: a?b") == 0);
  /* Cut at 120 bytes. */
  memset (long_body, 'x', sizeof long_body);
  snprintf (want, sizeof want, "the daemon answered HTTP 500: %.120s", long_body);
  CHECK (check_error (500, long_body, sizeof long_body, 0, SBX_E_SYSTEM, want) == 0);
  /* Non-ASCII bytes are kept (they may be a UTF-8 message). */
  CHECK (ERR (500, "caf\xc3\xa9", 0, SBX_E_SYSTEM, "the daemon answered HTTP 500: caf\xc3\xa9")
         == 0);
  return 0;
}

/* A NULL err is allowed, and the return is always -1. */
static int
test_null_err (void)
{
  CHECK (sbx_api_error_from_body (404, "{}", 2, 0, NULL) == -1);
  CHECK (sbx_api_error_from_body (404, NULL, 0, 1, NULL) == -1);
  return 0;
}

int
main (void)
{
  RUN (test_error_names);
  RUN (test_status_kinds);
  RUN (test_messages);
  RUN (test_auth_hint);
  RUN (test_foreign_bodies);
  RUN (test_null_err);
  return tap_done ();
}
