/* Unit tests for src/util/error.c: the one error contract (error.h).
 *
 * Constructors return -1, allocate an error the caller owns, replace (and
 * free) any error already there, and do nothing with a NULL err; kinds map
 * to fixed HTTP statuses and names at the API edge; wrap prefixes context;
 * move transfers ownership.
 */
#include "util/error.h"

#include <errno.h>
#include <limits.h>

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

static int
test_kind_mapping (void)
{
  static const struct
  {
    enum sbx_error_kind kind;
    int status;
    const char *name;
  } map[] = {
    {SBX_E_INVALID, 400, "invalid_argument"},
    {SBX_E_UNAUTHORIZED, 401, "unauthorized"},
    {SBX_E_FORBIDDEN, 403, "forbidden"},
    {SBX_E_NOT_FOUND, 404, "not_found"},
    {SBX_E_CONFLICT, 409, "conflict"},
    {SBX_E_TOO_LARGE, 413, "too_large"},
    {SBX_E_LIMIT, 429, "resource_exhausted"},
    {SBX_E_SYSTEM, 500, "internal"},
    {SBX_E_UNAVAILABLE, 503, "unavailable"},
    {SBX_E_BAD_GATEWAY, 502, "bad_gateway"},
    {SBX_E_GATEWAY_TIMEOUT, 504, "gateway_timeout"},
    {SBX_E_NOT_IMPLEMENTED, 501, "not_implemented"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (map); i++)
    {
      CHECK (sbx_error_kind_http_status (map[i].kind) == map[i].status);
      CHECK_STR (sbx_error_kind_name (map[i].kind), map[i].name);
    }
  /* The enum is dense from 1: twelve kinds, all listed above. */
  CHECK (SBX_E_INVALID == 1 && SBX_E_UNAVAILABLE == 9 && SBX_E_LAST == 12);
  /* Anything else is an internal error, never a success or a crash. */
  CHECK (sbx_error_kind_http_status ((enum sbx_error_kind) 0) == 500);
  CHECK (sbx_error_kind_http_status ((enum sbx_error_kind) 13) == 500);
  CHECK (sbx_error_kind_http_status ((enum sbx_error_kind) -1) == 500);
  CHECK_STR (sbx_error_kind_name ((enum sbx_error_kind) 0), "internal");
  CHECK_STR (sbx_error_kind_name ((enum sbx_error_kind) 1000), "internal");
  return 0;
}

static int
test_err_constructs (void)
{
  sbx_error_t *err = NULL;

  CHECK (sbx_err (&err, SBX_E_NOT_FOUND, "sandbox `%s` not found", "abc") == -1);
  CHECK (err != NULL);
  CHECK (err->kind == SBX_E_NOT_FOUND);
  CHECK (err->sys_errno == 0);
  CHECK_STR (err->msg, "sandbox `abc` not found");
  sbx_error_free (err);
  return 0;
}

/* A second error replaces the first, which is freed (LeakSanitizer would
   see it otherwise). */
static int
test_err_replaces (void)
{
  sbx_error_t *err = NULL;

  sbx_err (&err, SBX_E_INVALID, "first");
  sbx_err (&err, SBX_E_CONFLICT, "second %d", 2);
  CHECK (err->kind == SBX_E_CONFLICT);
  CHECK_STR (err->msg, "second 2");
  sbx_err_sys (&err, ENOENT, "third");
  CHECK_STR (err->msg, "third: No such file or directory");
  sbx_error_free (err);
  return 0;
}

static int
test_null_err (void)
{
  CHECK (sbx_err (NULL, SBX_E_INVALID, "ignored %s", "x") == -1);
  CHECK (sbx_err_sys (NULL, EIO, "ignored") == -1);
  CHECK (sbx_err_errno (NULL, SBX_E_NOT_FOUND, ENOENT, "ignored") == -1);
  CHECK (sbx_err_wrap (NULL, "ignored") == -1);
  {
    sbx_error_t *none = NULL;
    CHECK (sbx_err_wrap (&none, "nothing to wrap") == -1);
    CHECK (none == NULL);
  }
  sbx_error_free (NULL);
  return 0;
}

/* System errors: the errno is kept and its text appended; running out of
   a resource is a capacity limit (429), anything else internal (500). */
static int
test_err_sys_kinds (void)
{
  static const struct
  {
    int e;
    enum sbx_error_kind kind;
  } cases[] = {
    {EMFILE, SBX_E_LIMIT}, {ENFILE, SBX_E_LIMIT},  {EAGAIN, SBX_E_LIMIT},
    {ENOSPC, SBX_E_LIMIT}, {ENOMEM, SBX_E_LIMIT},  {EIO, SBX_E_SYSTEM},
    {ENOENT, SBX_E_SYSTEM}, {EACCES, SBX_E_SYSTEM}, {EINVAL, SBX_E_SYSTEM},
    {EPERM, SBX_E_SYSTEM}, {EDQUOT, SBX_E_SYSTEM},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      sbx_error_t *err = NULL;
      char want[256];

      CHECK (sbx_err_sys (&err, cases[i].e, "open `%s`", "/x") == -1);
      CHECK (err->kind == cases[i].kind);
      CHECK (err->sys_errno == cases[i].e);
      snprintf (want, sizeof want, "open `/x`: %s", strerror (cases[i].e));
      CHECK_STR (err->msg, want);
      sbx_error_free (err);
    }
  return 0;
}

static int
test_err_errno (void)
{
  sbx_error_t *err = NULL;

  CHECK (sbx_err_errno (&err, SBX_E_NOT_FOUND, ENOENT, "stat `%s`", "/a") == -1);
  CHECK (err->kind == SBX_E_NOT_FOUND);
  CHECK (err->sys_errno == ENOENT);
  CHECK_STR (err->msg, "stat `/a`: No such file or directory");
  /* errno 0: no suffix. */
  CHECK (sbx_err_errno (&err, SBX_E_FORBIDDEN, 0, "plain") == -1);
  CHECK (err->sys_errno == 0);
  CHECK_STR (err->msg, "plain");
  sbx_error_free (err);
  return 0;
}

static int
test_wrap (void)
{
  sbx_error_t *err = NULL;

  sbx_err_sys (&err, EACCES, "open `%s`", "f");
  CHECK (sbx_err_wrap (&err, "upload %d", 7) == -1);
  CHECK_STR (err->msg, "upload 7: open `f`: Permission denied");
  CHECK (sbx_err_wrap (&err, "sandbox `%s`", "s1") == -1);
  CHECK_STR (err->msg, "sandbox `s1`: upload 7: open `f`: Permission denied");
  /* Wrapping keeps the kind and errno. */
  CHECK (err->kind == SBX_E_SYSTEM && err->sys_errno == EACCES);
  sbx_error_free (err);
  return 0;
}

/* Messages are copied, any length, and '%' in arguments is data. */
static int
test_message_contents (void)
{
  sbx_error_t *err = NULL;
  char *big = malloc (100001);

  CHECK (big != NULL);
  memset (big, 'm', 100000);
  big[100000] = '\0';
  sbx_err (&err, SBX_E_TOO_LARGE, "%s", big);
  CHECK (strlen (err->msg) == 100000);
  free (big);
  sbx_err (&err, SBX_E_INVALID, "`%s`", "%s%n%d");
  CHECK_STR (err->msg, "`%s%n%d`");
  sbx_err (&err, SBX_E_INVALID, "%s", "");
  CHECK_STR (err->msg, "");
  sbx_error_free (err);
  return 0;
}

static int
test_move (void)
{
  sbx_error_t *a = NULL, *b = NULL, *kept;

  sbx_err (&a, SBX_E_INVALID, "a");
  kept = a;
  sbx_error_move (&b, &a);
  CHECK (a == NULL);
  CHECK (b == kept);
  CHECK_STR (b->msg, "a");

  /* Moving over an existing error frees it. */
  sbx_err (&a, SBX_E_CONFLICT, "c");
  sbx_error_move (&b, &a);
  CHECK (a == NULL);
  CHECK (b->kind == SBX_E_CONFLICT);
  CHECK_STR (b->msg, "c");

  /* Moving NULL clears the destination. */
  sbx_error_move (&b, &a);
  CHECK (a == NULL && b == NULL);
  return 0;
}

static int
cleanup_scope (void)
{
  cleanup_error sbx_error_t *err = NULL;

  sbx_err (&err, SBX_E_SYSTEM, "freed at the end of the scope");
  return err != NULL ? 0 : -1;
}

static int
test_cleanup_attribute (void)
{
  cleanup_error sbx_error_t *none = NULL;

  CHECK (none == NULL);
  CHECK (cleanup_scope () == 0);
  return 0; /* LeakSanitizer checks that both scopes released their errors */
}

/* The contract's one-line failure: `return sbx_err (...)` gives -1. */
static int
fails_like_a_library (sbx_error_t **err)
{
  return sbx_err (err, SBX_E_UNAVAILABLE, "shutting down");
}

static int
test_call_site_idiom (void)
{
  sbx_error_t *err = NULL;

  CHECK (fails_like_a_library (&err) < 0);
  CHECK (sbx_error_kind_http_status (err->kind) == 503);
  CHECK_STR (sbx_error_kind_name (err->kind), "unavailable");
  sbx_error_free (err);
  return 0;
}

/* Memory for an error ran out: the shared static one stands in. It is
   never freed or changed, and maps to 503. */
static int
test_out_of_memory (void)
{
  sbx_error_t *err = NULL, *first;

  CHECK (sbx_err (&err, SBX_E_INVALID, "bad") == -1);
  CHECK (sbx_err_oom (&err) == -1); /* replaces (and frees) what was there */
  first = err;
  CHECK (err->kind == SBX_E_UNAVAILABLE && err->sys_errno == ENOMEM);
  CHECK_STR (err->msg, "out of memory");
  CHECK (sbx_err_wrap (&err, "context %d", 1) == -1);
  CHECK_STR (err->msg, "out of memory"); /* shared: never rewritten */
  sbx_error_free (err);                  /* a no-op */
  err = NULL;
  CHECK (sbx_err_oom (&err) == -1 && err == first);
  CHECK_STR (err->msg, "out of memory");
  CHECK (sbx_error_kind_http_status (err->kind) == 503);
  sbx_error_free (err);
  CHECK (sbx_err_oom (NULL) == -1);
  return 0;
}

int
main (void)
{
  RUN (test_kind_mapping);
  RUN (test_err_constructs);
  RUN (test_err_replaces);
  RUN (test_null_err);
  RUN (test_err_sys_kinds);
  RUN (test_err_errno);
  RUN (test_wrap);
  RUN (test_message_contents);
  RUN (test_move);
  RUN (test_cleanup_attribute);
  RUN (test_call_site_idiom);
  RUN (test_out_of_memory);
  return tap_done ();
}
