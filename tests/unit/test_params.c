/* Unit tests for src/server/params.c: strict parsing of request bodies.
 *
 * The sbx_param_* functions work on jansson objects and need no HTTP
 * connection; sbx_req_json needs only a request's body buffer. Every field
 * has one type (sizes, durations and CPU counts may also be strings with
 * units), an absent or null field leaves the output alone, and anything
 * else is a 400 (SBX_E_INVALID) that names the field. The query-string
 * helpers read the MHD connection and are covered by the integration
 * tests instead.
 */
#include <inttypes.h>
#include <math.h>

#include "server/request.h"
#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))
#define SENTINEL UINT64_C (0x5a5a5a5a5a5a5a5a)

/*============================ Helpers ================================== */

/* Parse a JSON text that must be valid (NULs allowed in strings). */
static json_t *
j (const char *text)
{
  json_error_t jerr;
  json_t *v = json_loads (text, JSON_ALLOW_NUL, &jerr);

  if (v == NULL)
    {
      fprintf (stderr, "#   bad test JSON `%s`: %s\n", text, jerr.text);
      abort ();
    }
  return v;
}

/* rc must be -1 with SBX_E_INVALID whose message names `field` (in
   backquotes) when field is non-NULL. */
static int
invalid (int rc, sbx_error_t **err, const char *field)
{
  char quoted[80];
  int ok;

  if (field)
    snprintf (quoted, sizeof quoted, "`%s", field);
  ok = rc == -1 && *err != NULL && (*err)->kind == SBX_E_INVALID
       && (field == NULL || strstr ((*err)->msg, quoted) != NULL);
  if (!ok)
    fprintf (stderr, "#   rc %d, error: kind %d `%s`\n", rc, *err ? (int) (*err)->kind : 0,
             *err ? (*err)->msg : "(none)");
  sbx_error_free (*err);
  *err = NULL;
  return ok ? 0 : -1;
}

#define CHECK_INVALID(call, field)                                             \
  do                                                                           \
    {                                                                          \
      sbx_error_t *err_ = NULL;                                                \
      if (invalid ((call), &err_, field) < 0)                                  \
        {                                                                      \
          fprintf (stderr, "#   %s:%d: %s\n", __FILE__, __LINE__, #call);      \
          return -1;                                                           \
        }                                                                      \
    }                                                                          \
  while (0)

/* A sbx_req with just a body. */
static int
req_json (const char *body, size_t len, json_t **out, sbx_error_t **err)
{
  struct sbx_req *r = calloc (1, sizeof *r);
  int rc;

  if (r == NULL)
    abort ();
  sbx_buf_append (&r->body, body, len);
  r->body.len = len;
  rc = sbx_req_json (r, out, err);
  sbx_buf_free (&r->body);
  free (r);
  return rc;
}

/*============================ sbx_req_json ============================= */

static int
test_req_json (void)
{
  static const char *const bad[] = {
    "[]",
    "[1,2]",
    "null",
    "\"str\"",
    "42",
    "true",
    "{",
    "{\"a\":}",
    "{\"a\":1,}",
    "{'a':1}",
    "{\"a\":1} x",
    "{\"a\":1}{}",
    "{\"a\":1,\"a\":2}",             /* duplicate keys: one meaning per body */
    "{\"a\":{\"b\":1,\"b\":1}}",     /* at any depth */
    "{\"a\":\"x\\u0000y\"}",          /* NUL in a string */
    "{\"a\\u0000b\":1}",              /* NUL in a key */
    "{\"a\":\"\\ud800\"}",            /* a lone surrogate */
    "{\"a\":\"\xff\"}",               /* not UTF-8 */
    "{\"a\":NaN}",
    "{\"a\":1e400}",
    " ",
  };
  sbx_error_t *err = NULL;
  json_t *o = NULL;

  /* No body: an empty object. */
  CHECK (req_json ("", 0, &o, &err) == 0 && err == NULL);
  CHECK (json_is_object (o) && json_object_size (o) == 0);
  json_decref (o);
  o = NULL;
  CHECK (req_json ("{\"a\":1,\"b\":{\"c\":[1,2]}}", 23, &o, &err) == 0);
  CHECK (json_integer_value (json_object_get (o, "a")) == 1);
  json_decref (o);
  o = NULL;
  CHECK (req_json (" \n{ } \n", 7, &o, &err) == 0);
  json_decref (o);
  o = NULL;
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      if (invalid (req_json (bad[i], strlen (bad[i]), &o, &err), &err, NULL) < 0)
        {
          fprintf (stderr, "#   body `%s` accepted\n", bad[i]);
          json_decref (o);
          return -1;
        }
      CHECK (o == NULL);
    }
  /* A raw NUL byte ends the text: what follows is garbage. */
  CHECK (invalid (req_json ("{}\0{}", 5, &o, &err), &err, NULL) == 0);
  /* Errors say where. */
  CHECK (req_json ("{\n\"a\":}", 7, &o, &err) == -1);
  CHECK (strstr (err->msg, "line 2") != NULL);
  sbx_error_free (err);
  return 0;
}

/*============================ sbx_params_only ========================== */

static int
test_params_only (void)
{
  static const char *const allowed[] = {"cmd", "env", "timeout", NULL};
  static const char *const none[] = {NULL};
  sbx_error_t *err = NULL;
  json_t *o;

  o = j ("{}");
  CHECK (sbx_params_only (o, allowed, &err) == 0);
  CHECK (sbx_params_only (o, none, &err) == 0);
  json_decref (o);
  o = j ("{\"cmd\":\"ls\",\"timeout\":5}");
  CHECK (sbx_params_only (o, allowed, &err) == 0 && err == NULL);
  CHECK_INVALID (sbx_params_only (o, none, &err_), "cmd");
  json_decref (o);
  o = j ("{\"cmd\":\"ls\",\"cmdx\":1}");
  CHECK_INVALID (sbx_params_only (o, allowed, &err_), "cmdx");
  json_decref (o);
  o = j ("{\"CMD\":1}"); /* case matters */
  CHECK_INVALID (sbx_params_only (o, allowed, &err_), "CMD");
  json_decref (o);
  o = j ("{\"\":1}");
  CHECK_INVALID (sbx_params_only (o, allowed, &err_), "");
  json_decref (o);
  /* "cmd\0evil" is not "cmd". */
  o = json_object ();
  CHECK (json_object_setn_new (o, "cmd\0evil", 8, json_integer (1)) == 0);
  CHECK_INVALID (sbx_params_only (o, allowed, &err_), "cmd");
  json_decref (o);
  /* A long unknown name is quoted, cut. */
  {
    char name[300], text[320];
    memset (name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    snprintf (text, sizeof text, "{\"%s\":1}", name);
    o = j (text);
    CHECK (sbx_params_only (o, allowed, &err) == -1);
    CHECK (strlen (err->msg) < 120);
    sbx_error_free (err);
    json_decref (o);
  }
  return 0;
}

/*============================ Scalars ================================== */

static int
test_param_string (void)
{
  sbx_error_t *err = NULL;
  const char *s = "untouched";
  json_t *o = j ("{\"a\":\"text\",\"e\":\"\",\"n\":null,\"i\":1,\"b\":true,\"o\":{},"
                 "\"l\":[\"x\"],\"z\":\"x\\u0000y\",\"u\":\"\xc3\xa9\"}");

  CHECK (sbx_param_string (o, "missing", &s, &err) == 0);
  CHECK_STR (s, "untouched");
  CHECK (sbx_param_string (o, "n", &s, &err) == 0);
  CHECK_STR (s, "untouched");
  CHECK (sbx_param_string (o, "a", &s, &err) == 0 && err == NULL);
  CHECK_STR (s, "text");
  CHECK (sbx_param_string (o, "e", &s, &err) == 0);
  CHECK_STR (s, "");
  CHECK (sbx_param_string (o, "u", &s, &err) == 0);
  CHECK_STR (s, "\xc3\xa9");
  s = "untouched";
  CHECK_INVALID (sbx_param_string (o, "i", &s, &err_), "i");
  CHECK_INVALID (sbx_param_string (o, "b", &s, &err_), "b");
  CHECK_INVALID (sbx_param_string (o, "o", &s, &err_), "o");
  CHECK_INVALID (sbx_param_string (o, "l", &s, &err_), "l");
  CHECK_INVALID (sbx_param_string (o, "z", &s, &err_), "z");
  CHECK_STR (s, "untouched");
  json_decref (o);
  /* Built with json_stringn: an embedded NUL. */
  o = json_object ();
  json_object_set_new (o, "cmd", json_stringn ("ls\0rm -rf /", 11));
  CHECK_INVALID (sbx_param_string (o, "cmd", &s, &err_), "cmd");
  json_object_set_new (o, "cmd", json_stringn ("ls\0", 3));
  CHECK_INVALID (sbx_param_string (o, "cmd", &s, &err_), "cmd");
  json_object_set_new (o, "cmd", json_stringn ("ls", 2));
  CHECK (sbx_param_string (o, "cmd", &s, &err) == 0);
  CHECK_STR (s, "ls");
  json_decref (o);
  return 0;
}

static int
test_param_bool (void)
{
  sbx_error_t *err = NULL;
  int v = 7;
  json_t *o = j ("{\"t\":true,\"f\":false,\"n\":null,\"one\":1,\"zero\":0,\"s\":\"true\",\"r\":1.0}");

  CHECK (sbx_param_bool (o, "missing", &v, &err) == 0 && v == 7);
  CHECK (sbx_param_bool (o, "n", &v, &err) == 0 && v == 7);
  CHECK (sbx_param_bool (o, "t", &v, &err) == 0 && v == 1);
  CHECK (sbx_param_bool (o, "f", &v, &err) == 0 && v == 0);
  v = 7;
  CHECK_INVALID (sbx_param_bool (o, "one", &v, &err_), "one");
  CHECK_INVALID (sbx_param_bool (o, "zero", &v, &err_), "zero");
  CHECK_INVALID (sbx_param_bool (o, "s", &v, &err_), "s");
  CHECK_INVALID (sbx_param_bool (o, "r", &v, &err_), "r");
  CHECK (v == 7);
  json_decref (o);
  return 0;
}

static int
test_param_uint (void)
{
  sbx_error_t *err = NULL;
  uint64_t v = SENTINEL;
  json_t *o = j ("{\"zero\":0,\"n\":42,\"max\":9223372036854775807,\"neg\":-1,\"min\":"
                 "-9223372036854775808,\"real\":1.0,\"s\":\"5\",\"b\":true,\"null\":null}");

  CHECK (sbx_param_uint (o, "missing", &v, &err) == 0 && v == SENTINEL);
  CHECK (sbx_param_uint (o, "null", &v, &err) == 0 && v == SENTINEL);
  CHECK (sbx_param_uint (o, "zero", &v, &err) == 0 && v == 0);
  CHECK (sbx_param_uint (o, "n", &v, &err) == 0 && v == 42);
  CHECK (sbx_param_uint (o, "max", &v, &err) == 0 && v == (uint64_t) INT64_MAX);
  v = SENTINEL;
  CHECK_INVALID (sbx_param_uint (o, "neg", &v, &err_), "neg");
  CHECK_INVALID (sbx_param_uint (o, "min", &v, &err_), "min");
  CHECK_INVALID (sbx_param_uint (o, "real", &v, &err_), "real");
  CHECK_INVALID (sbx_param_uint (o, "s", &v, &err_), "s");
  CHECK_INVALID (sbx_param_uint (o, "b", &v, &err_), "b");
  CHECK (v == SENTINEL);
  json_decref (o);
  return 0;
}

/*============================ Sizes, durations, CPUs =================== */

static int
test_param_size (void)
{
  static const struct
  {
    const char *json;
    uint64_t want;
  } good[] = {
    {"1", 1},
    {"536870912", 512ULL << 20},
    {"9223372036854775807", (uint64_t) INT64_MAX},
    {"\"512M\"", 512ULL << 20},
    {"\"1.5G\"", 3ULL << 29},
    {"\"64k\"", 65536},
    {"\"1KiB\"", 1024},
    {"\"18446744073709551615\"", UINT64_MAX}, /* beyond a JSON integer */
    {"\"1\"", 1},
  };
  static const char *const bad[] = {
    "0", "-1", "-9223372036854775808", "1.5", "1.0", "true", "{}", "[]", "\"\"", "\"0\"",
    "\"0K\"", "\"0.0001K\"", "\"1X\"", "\"-1\"", "\" 1\"", "\"1.5\"", "\"16E\"",
    "\"99999999999999999999\"", "\"x\\u0000\"",
  };
  sbx_error_t *err = NULL;

  for (size_t i = 0; i < ARRAY_SIZE (good); i++)
    {
      char text[128];
      json_t *o;
      uint64_t v = SENTINEL;

      snprintf (text, sizeof text, "{\"memory\":%s}", good[i].json);
      o = j (text);
      CHECK (sbx_param_size (o, "memory", &v, &err) == 0 && err == NULL);
      if (v != good[i].want)
        {
          fprintf (stderr, "#   %s: got %" PRIu64 "\n", good[i].json, v);
          return -1;
        }
      json_decref (o);
    }
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      char text[128];
      json_t *o;
      uint64_t v = SENTINEL;

      snprintf (text, sizeof text, "{\"memory\":%s}", bad[i]);
      o = j (text);
      /* (A string that parses to zero has been written; the error is what
         the caller acts on.) */
      if (invalid (sbx_param_size (o, "memory", &v, &err), &err, "memory") < 0)
        {
          fprintf (stderr, "#   %s: accepted or output touched\n", bad[i]);
          json_decref (o);
          return -1;
        }
      json_decref (o);
    }
  {
    json_t *o = j ("{\"memory\":null}");
    uint64_t v = SENTINEL;
    CHECK (sbx_param_size (o, "memory", &v, &err) == 0 && v == SENTINEL);
    CHECK (sbx_param_size (o, "disk", &v, &err) == 0 && v == SENTINEL);
    json_decref (o);
  }
  return 0;
}

static int
test_param_duration (void)
{
  static const struct
  {
    const char *json;
    uint64_t want;
  } good[] = {
    {"30", 30000},
    {"1", 1000},
    {"0.5", 500},
    {"0.0015", 2},   /* rounded to the millisecond */
    {"0.0014", 1},
    {"0.0001", 1},   /* positive, so at least 1 ms */
    {"1e-9", 1},
    {"1e9", 1000000000000ULL},
    {"86400", 86400000},
    {"\"500ms\"", 500},
    {"\"10s\"", 10000},
    {"\"5m\"", 300000},
    {"\"2h\"", 7200000},
    {"\"1.5s\"", 1500},
    {"\"300\"", 300000},
    {"\"0.001s\"", 1},
  };
  static const char *const bad[] = {
    "0",      "-1",    "-0.5",    "1000000001", "1e10",      "true",  "\"\"",
    "\"0\"",  "\"0s\"", "\"0ms\"", "\"0.0001s\"", "\"1d\"",   "\"5M\"", "\"-1s\"",
    "\"1 s\"", "{}",   "[30]",    "\"1s\\u0000\"",
  };
  sbx_error_t *err = NULL;

  for (size_t i = 0; i < ARRAY_SIZE (good); i++)
    {
      char text[128];
      json_t *o;
      uint64_t v = SENTINEL;

      snprintf (text, sizeof text, "{\"timeout\":%s}", good[i].json);
      o = j (text);
      CHECK (sbx_param_duration (o, "timeout", &v, &err) == 0 && err == NULL);
      if (v != good[i].want)
        {
          fprintf (stderr, "#   %s: got %" PRIu64 "\n", good[i].json, v);
          return -1;
        }
      json_decref (o);
    }
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      char text[128];
      json_t *o;
      uint64_t v = SENTINEL;

      snprintf (text, sizeof text, "{\"timeout\":%s}", bad[i]);
      o = j (text);
      if (invalid (sbx_param_duration (o, "timeout", &v, &err), &err, "timeout") < 0)
        {
          fprintf (stderr, "#   %s: accepted\n", bad[i]);
          json_decref (o);
          return -1;
        }
      json_decref (o);
    }
  /* Far past the limit (1e9 s). */
  {
    json_t *o = json_object ();
    uint64_t v = SENTINEL;
    json_object_set_new (o, "timeout", json_real (1e300));
    CHECK_INVALID (sbx_param_duration (o, "timeout", &v, &err_), "timeout");
    CHECK (v == SENTINEL);
    json_decref (o);
  }
  return 0;
}

static int
test_param_cpus (void)
{
  static const struct
  {
    const char *json;
    uint32_t want;
  } good[] = {
    {"0.5", 500},       {"2", 2000},          {"1", 1000},         {"4096", 4096000},
    {"0.001", 1},       {"0.0005", 1},        {"0.1", 100},        {"1.5", 1500},
    {"1.2345", 1235},   /* numbers round to the nearest thousandth */
    {"\"1.2345\"", 1234}, /* strings truncate (util/parse.c) */
    {"\"0.5\"", 500},   {"\"2\"", 2000},      {"\"0.001\"", 1},    {"\".25\"", 250},
  };
  static const char *const bad[] = {
    "0",       "-1",        "-0.5",     "0.0004",  "4096.001", "4097",   "1e9",
    "true",    "\"\"",      "\"0\"",    "\"0.0001\"", "\"abc\"", "\"1 \"", "\"-1\"",
    "\"1.\"",  "{}",        "\"4294967.296\"", "\"1\\u0000\"",
  };
  sbx_error_t *err = NULL;

  for (size_t i = 0; i < ARRAY_SIZE (good); i++)
    {
      char text[128];
      json_t *o;
      uint32_t v = 0x5a5a5a5a;

      snprintf (text, sizeof text, "{\"cpus\":%s}", good[i].json);
      o = j (text);
      CHECK (sbx_param_cpus (o, "cpus", &v, &err) == 0 && err == NULL);
      if (v != good[i].want)
        {
          fprintf (stderr, "#   %s: got %u\n", good[i].json, v);
          return -1;
        }
      json_decref (o);
    }
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      char text[128];
      json_t *o;
      uint32_t v = 0x5a5a5a5a;

      snprintf (text, sizeof text, "{\"cpus\":%s}", bad[i]);
      o = j (text);
      if (invalid (sbx_param_cpus (o, "cpus", &v, &err), &err, "cpus") < 0)
        {
          fprintf (stderr, "#   %s: accepted as %u\n", bad[i], v);
          json_decref (o);
          return -1;
        }
      json_decref (o);
    }
  {
    json_t *o = j ("{\"cpus\":null}");
    uint32_t v = 77;
    CHECK (sbx_param_cpus (o, "cpus", &v, &err) == 0 && v == 77);
    CHECK (sbx_param_cpus (o, "other", &v, &err) == 0 && v == 77);
    json_decref (o);
  }
  return 0;
}

/*============================ String maps ============================== */

/* A map: at most 3 entries, keys <= 4 bytes, values <= 5, total <= 20
   (key + value + 2 per entry, as "K=V\0" plus a pointer's worth). */
static int
map (json_t *o, int env, json_t **out, sbx_error_t **err)
{
  return sbx_param_string_map (o, "env", 3, 4, 5, 20, env, out, err);
}

static int
test_string_map (void)
{
  sbx_error_t *err = NULL;
  json_t *out = NULL, *o;

  o = j ("{\"env\":{\"A\":\"1\",\"BB\":\"22\",\"CCCC\":\"4444\"}}"); /* 4 + 6 + 10 */
  CHECK (map (o, 1, &out, &err) == 0 && err == NULL);
  CHECK (out == json_object_get (o, "env")); /* borrowed, not copied */
  json_decref (o);

  /* Absent and null: nothing set. */
  out = NULL;
  o = j ("{\"env\":null}");
  CHECK (map (o, 1, &out, &err) == 0 && out == NULL);
  json_decref (o);
  o = j ("{}");
  CHECK (map (o, 1, &out, &err) == 0 && out == NULL);
  json_decref (o);
  /* Empty object. */
  o = j ("{\"env\":{}}");
  CHECK (map (o, 1, &out, &err) == 0 && json_object_size (out) == 0);
  json_decref (o);
  return 0;
}

static int
test_string_map_limits (void)
{
  static const char *const bad[] = {
    "[]",
    "\"A=1\"",
    "1",
    "{\"A\":\"1\",\"B\":\"1\",\"C\":\"1\",\"D\":\"1\"}", /* 4 entries */
    "{\"AAAAA\":\"1\"}",                                 /* key of 5 */
    "{\"A\":\"666666\"}",                                /* value of 6 */
    "{\"\":\"1\"}",                                      /* empty key */
    "{\"A\":1}",
    "{\"A\":null}",
    "{\"A\":true}",
    "{\"A\":[\"1\"]}",
    "{\"A\":{}}",
    "{\"A\":\"1\\u0000\"}",
    /* 3 entries within the per-entry limits, 11 + 10 + 4 = 25 > 20 in all */
    "{\"AAAA\":\"55555\",\"BBBB\":\"4444\",\"C\":\"1\"}",
  };
  sbx_error_t *err = NULL;
  json_t *out = NULL, *o;

  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      char text[160];
      snprintf (text, sizeof text, "{\"env\":%s}", bad[i]);
      o = j (text);
      out = NULL;
      if (invalid (map (o, 0, &out, &err), &err, "env") < 0 || out != NULL)
        {
          fprintf (stderr, "#   %s: accepted\n", bad[i]);
          json_decref (o);
          return -1;
        }
      json_decref (o);
    }
  /* Exactly at the total: 11 + 9 = 20. */
  o = j ("{\"env\":{\"AAAA\":\"55555\",\"BBBB\":\"333\"}}");
  CHECK (map (o, 0, &out, &err) == 0);
  json_decref (o);
  /* A key with a NUL inside. */
  o = json_object ();
  out = json_object ();
  json_object_setn_new (out, "A\0B", 3, json_string ("1"));
  json_object_set_new (o, "env", out);
  out = NULL;
  CHECK_INVALID (map (o, 0, &out, &err_), "env");
  json_decref (o);
  /* A value with a NUL built by json_stringn. */
  o = json_object ();
  out = json_object ();
  json_object_set_new (out, "A", json_stringn ("1\0" "2", 3));
  json_object_set_new (o, "env", out);
  out = NULL;
  CHECK_INVALID (map (o, 0, &out, &err_), "env");
  json_decref (o);
  return 0;
}

/* Environment names: no '=' (execve would split there), not empty;
   other maps (metadata) may have '=' in keys. */
static int
test_string_map_env_names (void)
{
  static const char *const bad_env[] = {"=", "A=", "=A", "A=B"};
  static const char *const ok_env[] = {"A", "a_b", "1X", "A.B", "A-B", "A B", "\xc3\xa9"};
  sbx_error_t *err = NULL;
  json_t *out, *o;

  for (size_t i = 0; i < ARRAY_SIZE (bad_env); i++)
    {
      o = json_object ();
      out = json_object ();
      json_object_set_new (out, bad_env[i], json_string ("v"));
      json_object_set_new (o, "env", out);
      out = NULL;
      CHECK_INVALID (map (o, 1, &out, &err_), "env");
      CHECK (out == NULL);
      CHECK (map (o, 0, &out, &err) == 0 && out != NULL);
      json_decref (o);
    }
  for (size_t i = 0; i < ARRAY_SIZE (ok_env); i++)
    {
      o = json_object ();
      out = json_object ();
      json_object_set_new (out, ok_env[i], json_string ("v"));
      json_object_set_new (o, "env", out);
      out = NULL;
      CHECK (map (o, 1, &out, &err) == 0 && out != NULL);
      json_decref (o);
    }
  /* The real limits of POST /sandboxes' env: 256 entries, keys of 256,
     values and total of 128 KiB. */
  {
    char *big = malloc (128 * 1024 + 2);
    CHECK (big != NULL);
    memset (big, 'v', 128 * 1024 + 1);
    big[128 * 1024] = '\0';
    o = json_object ();
    out = json_object ();
    json_object_set_new (out, "K", json_string (big));
    json_object_set_new (o, "env", out);
    out = NULL;
    /* 1 + 131072 + 2 > 128 KiB in all */
    CHECK_INVALID (sbx_param_string_map (o, "env", 256, 256, 128 * 1024, 128 * 1024, 1, &out,
                                         &err_),
                   "env");
    big[128 * 1024 - 3] = '\0';
    json_object_set_new (json_object_get (o, "env"), "K", json_string (big));
    CHECK (sbx_param_string_map (o, "env", 256, 256, 128 * 1024, 128 * 1024, 1, &out, &err)
           == 0);
    json_decref (o);
    free (big);
  }
  return 0;
}

/*============================ Terminals ================================ */

/* `pty`: absent or null is no terminal; otherwise exactly {"cols", "rows"},
   each an integer 1..1000; a resize body is the same object at the top. */
static int
test_param_pty (void)
{
  static const char *const bad[] = {
    "{\"pty\":0}",
    "{\"pty\":true}",
    "{\"pty\":false}",
    "{\"pty\":\"80x24\"}",
    "{\"pty\":[80,24]}",
    "{\"pty\":{}}",
    "{\"pty\":{\"cols\":80}}",
    "{\"pty\":{\"rows\":24}}",
    "{\"pty\":{\"cols\":0,\"rows\":24}}",
    "{\"pty\":{\"cols\":80,\"rows\":0}}",
    "{\"pty\":{\"cols\":1001,\"rows\":24}}",
    "{\"pty\":{\"cols\":80,\"rows\":1001}}",
    "{\"pty\":{\"cols\":70000,\"rows\":24}}",
    "{\"pty\":{\"cols\":65616,\"rows\":24}}",          /* 80 + 2^16 */
    "{\"pty\":{\"cols\":4294967376,\"rows\":24}}",     /* 80 + 2^32 */
    "{\"pty\":{\"cols\":9223372036854775807,\"rows\":24}}",
    "{\"pty\":{\"cols\":-1,\"rows\":24}}",
    "{\"pty\":{\"cols\":-4294967216,\"rows\":24}}",    /* 80 - 2^32 */
    "{\"pty\":{\"cols\":\"80\",\"rows\":24}}",
    "{\"pty\":{\"cols\":80.0,\"rows\":24}}",
    "{\"pty\":{\"cols\":1e2,\"rows\":24}}",
    "{\"pty\":{\"cols\":true,\"rows\":24}}",
    "{\"pty\":{\"cols\":null,\"rows\":24}}",
    "{\"pty\":{\"cols\":80,\"rows\":24,\"x\":1}}",
    "{\"pty\":{\"cols\":80,\"rows\":24,\"Cols\":1}}",
    "{\"pty\":{\"cols\":{\"a\":1},\"rows\":24}}",
  };
  sbx_error_t *err = NULL;
  unsigned cols = 7, rows = 7;
  int pty = 0;
  json_t *o;

  /* Absent and null: no terminal, nothing touched. */
  o = j ("{}");
  CHECK (sbx_param_pty (o, "pty", &pty, &cols, &rows, &err) == 0 && err == NULL);
  CHECK (pty == 0 && cols == 7 && rows == 7);
  json_decref (o);
  o = j ("{\"pty\":null}");
  CHECK (sbx_param_pty (o, "pty", &pty, &cols, &rows, &err) == 0 && pty == 0);
  json_decref (o);
  o = j ("{\"pty\":{\"rows\":24,\"cols\":80}}");
  CHECK (sbx_param_pty (o, "pty", &pty, &cols, &rows, &err) == 0);
  CHECK (pty == 1 && cols == 80 && rows == 24);
  json_decref (o);
  pty = 0;
  o = j ("{\"pty\":{\"cols\":1,\"rows\":1000}}");
  CHECK (sbx_param_pty (o, "pty", &pty, &cols, &rows, &err) == 0);
  CHECK (pty == 1 && cols == 1 && rows == 1000);
  json_decref (o);
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      pty = 0;
      o = j (bad[i]);
      if (invalid (sbx_param_pty (o, "pty", &pty, &cols, &rows, &err), &err, "pty") < 0
          || pty != 0)
        {
          fprintf (stderr, "#   `%s` accepted\n", bad[i]);
          json_decref (o);
          return -1;
        }
      /* The same object as a resize body. */
      if (json_is_object (json_object_get (o, "pty"))
          && sbx_resize_request_parse (json_object_get (o, "pty"), &cols, &rows, &err) == 0)
        {
          fprintf (stderr, "#   resize `%s` accepted\n", bad[i]);
          json_decref (o);
          return -1;
        }
      sbx_error_free (err);
      err = NULL;
      json_decref (o);
    }
  /* Resize errors name the field. */
  o = j ("{\"cols\":80,\"rows\":0}");
  CHECK_INVALID (sbx_resize_request_parse (o, &cols, &rows, &err_), "rows");
  json_decref (o);
  o = j ("{\"cols\":80,\"rows\":24,\"extra\":1}");
  CHECK_INVALID (sbx_resize_request_parse (o, &cols, &rows, &err_), "extra");
  json_decref (o);
  o = j ("{\"cols\":1000,\"rows\":3}");
  CHECK (sbx_resize_request_parse (o, &cols, &rows, &err) == 0 && cols == 1000 && rows == 3);
  json_decref (o);
  return 0;
}

/* exec and processes bodies carry it into the options. */
static int
test_exec_request_pty (void)
{
  static const char body[] = "{\"cmd\":\"tty\",\"pty\":{\"cols\":132,\"rows\":43}}";
  static const char bad[] = "{\"cmd\":\"tty\",\"pty\":{\"cols\":132,\"rows\":-43}}";
  struct sbx_exec_request e;
  sbx_error_t *err = NULL;

  for (int background = 0; background < 2; background++)
    {
      CHECK (sbx_exec_request_parse (body, strlen (body), background, &e, &err) == 0);
      CHECK (e.opts.pty == 1 && e.opts.pty_cols == 132 && e.opts.pty_rows == 43);
      sbx_exec_request_free (&e);
      CHECK (sbx_exec_request_parse ("{\"cmd\":\"tty\"}", 13, background, &e, &err) == 0);
      CHECK (e.opts.pty == 0 && e.opts.pty_cols == 0 && e.opts.pty_rows == 0);
      sbx_exec_request_free (&e);
      CHECK_INVALID (sbx_exec_request_parse (bad, strlen (bad), background, &e, &err_),
                     "pty.rows");
      sbx_exec_request_free (&e);
    }
  return 0;
}

int
main (void)
{
  RUN (test_req_json);
  RUN (test_params_only);
  RUN (test_param_string);
  RUN (test_param_bool);
  RUN (test_param_uint);
  RUN (test_param_size);
  RUN (test_param_duration);
  RUN (test_param_cpus);
  RUN (test_string_map);
  RUN (test_string_map_limits);
  RUN (test_string_map_env_names);
  RUN (test_param_pty);
  RUN (test_exec_request_pty);
  return tap_done ();
}
