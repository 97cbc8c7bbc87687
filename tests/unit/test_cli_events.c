/* Unit tests for src/cli/events.c: exec's stream mode as the CLI reads it.
 *
 * The NDJSON splitter must give the same lines however the stream is cut
 * into chunks (every cut point is tried), hand complete lines over in
 * place, and refuse overlong lines; events decode by the fast path or
 * through JSON to the same result; an exit event maps to the shell-like
 * exit status `sbx run` returns (docs/api.md).
 */
#include "cli/events.h"

#include "cli/cli.h"
#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

/*============================ NDJSON =================================== */

struct lines
{
  struct sbx_buf all;  /* every line, each followed by '|' */
  int n;
  int fail_at;         /* fail on this line (1-based), 0: never */
  const char *chunk;   /* the chunk being fed, to see in-place lines */
  size_t chunk_len;
  int in_place;        /* lines that pointed into the chunk */
};

static int
on_line (void *ctx, const char *line, size_t len, sbx_error_t **err)
{
  struct lines *l = ctx;

  l->n++;
  if (l->chunk && line >= l->chunk && line + len <= l->chunk + l->chunk_len)
    l->in_place++;
  if (l->fail_at == l->n)
    return sbx_err (err, SBX_E_CONFLICT, "stop at line %d", l->n);
  sbx_buf_append (&l->all, line, len);
  sbx_buf_append (&l->all, "|", 1);
  return 0;
}

/* Feed text in chunks cut at the given points, then finish. */
static int
feed_cut (struct sbx_ndjson *nd, const char *text, size_t len, const size_t *cuts, size_t ncuts,
          struct lines *l, sbx_error_t **err)
{
  size_t from = 0;

  for (size_t i = 0; i <= ncuts; i++)
    {
      size_t to = i < ncuts ? cuts[i] : len;
      l->chunk = text + from;
      l->chunk_len = to - from;
      if (sbx_ndjson_feed (nd, text + from, to - from, on_line, l, err) < 0)
        return -1;
      from = to;
    }
  l->chunk = NULL;
  return sbx_ndjson_finish (nd, on_line, l, err);
}

static const char *
got (struct lines *l)
{
  return l->all.data ? l->all.data : "";
}

static int
test_ndjson_lines (void)
{
  static const struct
  {
    const char *in, *want;
  } cases[] = {
    {"", ""},
    {"a\n", "a|"},
    {"a\nb\n", "a|b|"},
    {"a\nb", "a|b|"},          /* a last line without "\n" is a line */
    {"a\r\nb\r\n", "a|b|"},    /* CRLF */
    {"a\r\nb\r", "a|b|"},
    {"\n\n\r\n\n", ""},        /* empty lines are skipped */
    {"a\n\nb\n\r\n", "a|b|"},
    {"\r", ""},
    {"a\rb\n", "a\rb|"},       /* a CR inside is data */
    {"a\r\r\n", "a\r|"},       /* only one CR is dropped */
    {"{\"type\":\"keepalive\"}\n{\"type\":\"exit\"}\n",
     "{\"type\":\"keepalive\"}|{\"type\":\"exit\"}|"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_ndjson nd = SBX_NDJSON_INIT;
      struct lines l = {SBX_BUF_INIT, 0, 0, NULL, 0, 0};
      sbx_error_t *err = NULL;

      CHECK (feed_cut (&nd, cases[i].in, strlen (cases[i].in), NULL, 0, &l, &err) == 0);
      if (strcmp (got (&l), cases[i].want) != 0)
        {
          fprintf (stderr, "#   `%s`: got `%s`\n", cases[i].in, got (&l));
          return -1;
        }
      sbx_buf_free (&l.all);
      sbx_ndjson_clear (&nd);
    }
  return 0;
}

/* Every way of cutting a stream in two and in three gives the same
   lines; lines that fit in one chunk are never copied. */
static int
test_ndjson_chunk_boundaries (void)
{
  static const char text[] = "{\"type\":\"start\",\"pid\":1}\r\n"
                             "{\"type\":\"stdout\",\"data\":\"aGVsbG8=\"}\n"
                             "\n"
                             "x\n"
                             "{\"type\":\"exit\",\"exit_code\":0}";
  static const char want[] = "{\"type\":\"start\",\"pid\":1}|"
                             "{\"type\":\"stdout\",\"data\":\"aGVsbG8=\"}|"
                             "x|"
                             "{\"type\":\"exit\",\"exit_code\":0}|";
  const size_t len = sizeof text - 1;

  for (size_t a = 0; a <= len; a++)
    for (size_t b = a; b <= len; b += 7)
      {
        struct sbx_ndjson nd = SBX_NDJSON_INIT;
        struct lines l = {SBX_BUF_INIT, 0, 0, NULL, 0, 0};
        sbx_error_t *err = NULL;
        size_t cuts[2] = {a, b};

        CHECK (feed_cut (&nd, text, len, cuts, 2, &l, &err) == 0);
        if (strcmp (got (&l), want) != 0 || l.n != 4)
          {
            fprintf (stderr, "#   cuts %zu,%zu: got `%s`\n", a, b, got (&l));
            return -1;
          }
        CHECK (nd.partial.len == 0);
        sbx_buf_free (&l.all);
        sbx_ndjson_clear (&nd);
      }
  /* One chunk: all in place but the last line, which is only complete at
     the end of the stream. */
  {
    struct sbx_ndjson nd = SBX_NDJSON_INIT;
    struct lines l = {SBX_BUF_INIT, 0, 0, NULL, 0, 0};
    sbx_error_t *err = NULL;
    CHECK (feed_cut (&nd, text, len, NULL, 0, &l, &err) == 0);
    CHECK (l.in_place == 3);
    sbx_buf_free (&l.all);
    sbx_ndjson_clear (&nd);
  }
  return 0;
}

/* One byte at a time. */
static int
test_ndjson_byte_by_byte (void)
{
  static const char text[] = "one\r\ntwo\n\nthree";
  struct sbx_ndjson nd = SBX_NDJSON_INIT;
  struct lines l = {SBX_BUF_INIT, 0, 0, NULL, 0, 0};
  sbx_error_t *err = NULL;

  for (size_t i = 0; i < sizeof text - 1; i++)
    CHECK (sbx_ndjson_feed (&nd, text + i, 1, on_line, &l, &err) == 0);
  CHECK_STR (got (&l), "one|two|");
  CHECK (sbx_ndjson_finish (&nd, on_line, &l, &err) == 0);
  CHECK_STR (got (&l), "one|two|three|");
  /* finish leaves the splitter ready for another stream */
  CHECK (sbx_ndjson_feed (&nd, "again\n", 6, on_line, &l, &err) == 0);
  CHECK (sbx_ndjson_finish (&nd, on_line, &l, &err) == 0);
  CHECK_STR (got (&l), "one|two|three|again|");
  sbx_buf_free (&l.all);
  sbx_ndjson_clear (&nd);
  sbx_ndjson_clear (&nd); /* twice is harmless */
  return 0;
}

/* The limit counts the bytes of a line before its "\n" (a CR included),
   whether it arrives in one chunk or several. */
static int
test_ndjson_max_line (void)
{
  static const struct
  {
    const char *chunks[3];
    int ok;
  } cases[] = {
    {{"12345\n", NULL, NULL}, 1},
    {{"123456\n", NULL, NULL}, 0},
    {{"1234\r\n", NULL, NULL}, 1},
    {{"12345\r\n", NULL, NULL}, 0},
    {{"123", "45\n", NULL}, 1},
    {{"123", "456\n", NULL}, 0},
    {{"123", "456", NULL}, 0},     /* too long before its end is even seen */
    {{"12345", "\n", NULL}, 1},
    {{"12345", "6", NULL}, 0},
    {{"1", "2", "345\n"}, 1},
    {{"12345\n123", "45\n", "12345"}, 1},
    {{"123456", NULL, NULL}, 0},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      struct sbx_ndjson nd = SBX_NDJSON_INIT;
      struct lines l = {SBX_BUF_INIT, 0, 0, NULL, 0, 0};
      sbx_error_t *err = NULL;
      int rc = 0;

      nd.max_line = 5;
      for (int k = 0; k < 3 && cases[i].chunks[k] && rc == 0; k++)
        rc = sbx_ndjson_feed (&nd, cases[i].chunks[k], strlen (cases[i].chunks[k]), on_line, &l,
                              &err);
      if (rc == 0)
        rc = sbx_ndjson_finish (&nd, on_line, &l, &err);
      if (cases[i].ok ? rc != 0 : (rc != -1 || err == NULL || err->kind != SBX_E_TOO_LARGE))
        {
          fprintf (stderr, "#   case %zu: rc %d (%s)\n", i, rc, err ? err->msg : "no error");
          return -1;
        }
      sbx_error_free (err);
      sbx_buf_free (&l.all);
      sbx_ndjson_clear (&nd);
    }
  return 0;
}

/* The default limit is 16 MiB: a line of exactly that passes. */
static int
test_ndjson_default_limit (void)
{
  struct sbx_ndjson nd = SBX_NDJSON_INIT;
  struct lines l = {SBX_BUF_INIT, 0, 0, NULL, 0, 0};
  sbx_error_t *err = NULL;
  char *big = malloc (SBX_NDJSON_MAX_LINE + 2);

  CHECK (big != NULL);
  memset (big, 'x', SBX_NDJSON_MAX_LINE + 1);
  big[SBX_NDJSON_MAX_LINE] = '\n';
  CHECK (sbx_ndjson_feed (&nd, big, 1000, on_line, &l, &err) == 0);
  CHECK (sbx_ndjson_feed (&nd, big + 1000, SBX_NDJSON_MAX_LINE + 1 - 1000, on_line, &l, &err)
         == 0);
  CHECK (l.n == 1 && l.all.len == SBX_NDJSON_MAX_LINE + 1);
  big[SBX_NDJSON_MAX_LINE] = 'x';
  CHECK (sbx_ndjson_feed (&nd, big, SBX_NDJSON_MAX_LINE + 1, on_line, &l, &err) == -1);
  CHECK (err != NULL && err->kind == SBX_E_TOO_LARGE);
  sbx_error_free (err);
  free (big);
  sbx_buf_free (&l.all);
  sbx_ndjson_clear (&nd);
  return 0;
}

/* A callback's failure stops the feed with its error. */
static int
test_ndjson_callback_fails (void)
{
  struct sbx_ndjson nd = SBX_NDJSON_INIT;
  struct lines l = {SBX_BUF_INIT, 0, 2, NULL, 0, 0};
  sbx_error_t *err = NULL;

  CHECK (sbx_ndjson_feed (&nd, "a\nb\nc\n", 6, on_line, &l, &err) == -1);
  CHECK (err != NULL && err->kind == SBX_E_CONFLICT);
  CHECK_STR (err->msg, "stop at line 2");
  CHECK_STR (got (&l), "a|");
  sbx_error_free (err);
  err = NULL;
  /* From the partial line too, and from finish. */
  l.n = 0;
  l.fail_at = 1;
  sbx_buf_reset (&l.all);
  sbx_ndjson_clear (&nd);
  CHECK (sbx_ndjson_feed (&nd, "par", 3, on_line, &l, &err) == 0);
  CHECK (sbx_ndjson_feed (&nd, "tial\n", 5, on_line, &l, &err) == -1);
  sbx_error_free (err);
  err = NULL;
  l.n = 0;
  CHECK (sbx_ndjson_feed (&nd, "last", 4, on_line, &l, &err) == 0);
  CHECK (sbx_ndjson_finish (&nd, on_line, &l, &err) == -1);
  CHECK (nd.partial.len == 0);
  sbx_error_free (err);
  sbx_buf_free (&l.all);
  sbx_ndjson_clear (&nd);
  return 0;
}

/*============================ Events =================================== */

static int
parse (const char *line, enum sbx_event_type *type, struct sbx_buf *data, json_t **obj,
       sbx_error_t **err)
{
  return sbx_event_parse (line, strlen (line), type, data, obj, err);
}

static int
test_event_output (void)
{
  static const struct
  {
    const char *line;
    enum sbx_event_type type;
    const char *data;
    size_t data_len;
  } cases[] = {
    /* The daemon's own shape: the fast path. */
    {"{\"type\":\"stdout\",\"data\":\"aGVsbG8=\"}", SBX_EVENT_STDOUT, "hello", 5},
    {"{\"type\":\"stderr\",\"data\":\"ZXJy\"}", SBX_EVENT_STDERR, "err", 3},
    {"{\"type\":\"stdout\",\"data\":\"\"}", SBX_EVENT_STDOUT, "", 0},
    {"{\"type\":\"stdout\",\"data\":\"AP8A\"}", SBX_EVENT_STDOUT, "\0\xff\0", 3},
    /* Anything else goes through JSON, to the same result. */
    {"{\"type\": \"stdout\", \"data\": \"aGk=\"}", SBX_EVENT_STDOUT, "hi", 2},
    {"{\"data\":\"aGk=\",\"type\":\"stderr\"}", SBX_EVENT_STDERR, "hi", 2},
    {"{\"type\":\"stdout\",\"data\":\"Pz8\\/\"}", SBX_EVENT_STDOUT, "???", 3},
    {"{\"type\":\"stdout\",\"data\":\"aGk=\",\"seq\":4}", SBX_EVENT_STDOUT, "hi", 2},
    {"{\"type\":\"stdout\",\"data\":\"aGk=\",\"x\":\"y\"}", SBX_EVENT_STDOUT, "hi", 2},
    {"{\"type\":\"\\u0073tdout\",\"data\":\"aGk=\"}", SBX_EVENT_STDOUT, "hi", 2},
    {" {\"type\":\"stdout\",\"data\":\"aGk=\"} ", SBX_EVENT_STDOUT, "hi", 2},
  };
  struct sbx_buf data = SBX_BUF_INIT;

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      enum sbx_event_type type = SBX_EVENT_UNKNOWN;
      sbx_error_t *err = NULL;
      json_t *obj = (json_t *) 1;

      /* The data buffer is reused: old content must not survive. */
      sbx_buf_append (&data, "stale", 5);
      if (parse (cases[i].line, &type, &data, &obj, &err) != 0)
        {
          fprintf (stderr, "#   `%s`: %s\n", cases[i].line, err ? err->msg : "?");
          sbx_error_free (err);
          return -1;
        }
      CHECK (type == cases[i].type);
      CHECK (obj == NULL);
      CHECK (data.len == cases[i].data_len);
      CHECK (data.len == 0 || memcmp (data.data, cases[i].data, data.len) == 0);
    }
  sbx_buf_free (&data);
  return 0;
}

static int
test_event_other_types (void)
{
  static const struct
  {
    const char *line;
    enum sbx_event_type type;
  } cases[] = {
    {"{\"type\":\"start\",\"pid\":12}", SBX_EVENT_START},
    {"{\"type\":\"exit\",\"exit_code\":0}", SBX_EVENT_EXIT},
    {"{\"type\":\"keepalive\"}", SBX_EVENT_KEEPALIVE},
    {"{\"type\":\"dropped\",\"bytes\":100}", SBX_EVENT_DROPPED},
    {"{\"type\":\"future\"}", SBX_EVENT_UNKNOWN},
    {"{\"type\":\"STDOUT\",\"data\":\"aGk=\"}", SBX_EVENT_UNKNOWN},
    {"{\"type\":1}", SBX_EVENT_UNKNOWN},
    {"{\"type\":null}", SBX_EVENT_UNKNOWN},
    {"{}", SBX_EVENT_UNKNOWN},
  };
  struct sbx_buf data = SBX_BUF_INIT;

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      enum sbx_event_type type = SBX_EVENT_STDOUT;
      sbx_error_t *err = NULL;
      json_t *obj = NULL;

      CHECK (parse (cases[i].line, &type, &data, &obj, &err) == 0 && err == NULL);
      CHECK (type == cases[i].type);
      CHECK (json_is_object (obj)); /* the caller's to release */
      if (type == SBX_EVENT_START)
        CHECK (json_integer_value (json_object_get (obj, "pid")) == 12);
      json_decref (obj);
    }
  sbx_buf_free (&data);
  return 0;
}

static int
test_event_malformed (void)
{
  static const char *const bad[] = {
    "",
    "not json",
    "{\"type\":\"stdout\",\"data\":\"aGk=\"",     /* cut short */
    "[\"stdout\"]",
    "\"stdout\"",
    "null",
    "{\"type\":\"stdout\",\"data\":\"@@@@\"}",    /* not base64 */
    "{\"type\":\"stdout\",\"data\":\"aGk\"}",     /* unpadded */
    "{\"type\":\"stderr\",\"data\":\"aG k=\"}",
    "{\"type\":\"stdout\",\"data\":5}",
    "{\"type\":\"stdout\",\"data\":null}",
    "{\"type\":\"stdout\"}",
    "{\"type\":\"stdout\",\"data\":\"aGk=\"} x",
  };
  struct sbx_buf data = SBX_BUF_INIT;

  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      enum sbx_event_type type;
      sbx_error_t *err = NULL;
      json_t *obj = NULL;

      if (parse (bad[i], &type, &data, &obj, &err) != -1 || err == NULL
          || err->kind != SBX_E_SYSTEM)
        {
          fprintf (stderr, "#   `%s` accepted\n", bad[i]);
          return -1;
        }
      CHECK (obj == NULL);
      CHECK (strstr (err->msg, "malformed") != NULL);
      sbx_error_free (err);
    }
  sbx_buf_free (&data);
  return 0;
}

/* Not NUL-terminated: only `len` bytes are read. */
static int
test_event_counted (void)
{
  static const char stream[] = "{\"type\":\"stdout\",\"data\":\"aGk=\"}{\"type\":\"exit\"}";
  struct sbx_buf data = SBX_BUF_INIT;
  enum sbx_event_type type;
  sbx_error_t *err = NULL;
  json_t *obj = NULL;

  CHECK (sbx_event_parse (stream, 31, &type, &data, &obj, &err) == 0);
  CHECK (type == SBX_EVENT_STDOUT && data.len == 2 && memcmp (data.data, "hi", 2) == 0);
  CHECK (sbx_event_parse (stream + 31, 15, &type, &data, &obj, &err) == 0);
  CHECK (type == SBX_EVENT_EXIT);
  json_decref (obj);
  sbx_buf_free (&data);
  return 0;
}

/*============================ Exit statuses ============================ */

static int
test_exit_status (void)
{
  static const struct
  {
    const char *event;
    int status;
    const char *msg;
  } cases[] = {
    {"{\"exit_code\":0}", 0, ""},
    {"{\"exit_code\":3}", 3, ""},
    {"{\"exit_code\":255}", 255, ""},
    {"{\"exit_code\":256}", 0, ""},   /* the low 8 bits, like a shell */
    {"{\"exit_code\":-1}", 255, ""},
    {"{\"exit_code\":1,\"reason\":\"\"}", 1, ""},
    {"{\"exit_code\":1,\"reason\":\"something\"}", 1, "something"},
    /* Could not start: "CMD: reason", like a shell. */
    {"{\"exit_code\":127,\"reason\":\"command not found\"}", 127, "mycmd: command not found"},
    {"{\"exit_code\":126,\"reason\":\"permission denied\"}", 126, "mycmd: permission denied"},
    {"{\"exit_code\":127}", 127, ""},
    /* Timed out: 124, like timeout(1). */
    {"{\"timed_out\":true,\"exit_code\":null,\"signal\":\"SIGKILL\"}", 124, "timed out"},
    {"{\"timed_out\":true,\"reason\":\"timed out after 5s\"}", 124, "timed out after 5s"},
    {"{\"timed_out\":true,\"oom_killed\":true}", 124, "timed out"},
    {"{\"timed_out\":true,\"exit_code\":0}", 124, "timed out"},
    /* Killed: 137 (128 + SIGKILL), whatever killed it. */
    {"{\"oom_killed\":true,\"exit_code\":null}", 137, "killed: out of memory"},
    {"{\"oom_killed\":true,\"reason\":\"memory limit 512M\"}", 137, "memory limit 512M"},
    {"{\"oom_killed\":true,\"exit_code\":0}", 137, "killed: out of memory"},
    {"{\"exit_code\":null,\"signal\":\"SIGTERM\"}", 137, "killed by SIGTERM"},
    {"{\"signal\":\"SIGSEGV\"}", 137, "killed by SIGSEGV"},
    {"{\"exit_code\":null}", 137, "killed"},
    {"{}", 137, "killed"},
    {"{\"reason\":\"the sandbox died\"}", 137, "the sandbox died"},
    {"{\"reason\":\"the sandbox died\",\"signal\":\"SIGKILL\"}", 137, "the sandbox died"},
    /* Not booleans and not integers do not count. */
    {"{\"timed_out\":\"yes\",\"exit_code\":2}", 2, ""},
    {"{\"timed_out\":1,\"oom_killed\":false,\"exit_code\":2}", 2, ""},
    {"{\"exit_code\":1.0}", 137, "killed"},
    {"{\"exit_code\":\"1\"}", 137, "killed"},
  };
  struct sbx_buf msg = SBX_BUF_INIT;

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      json_t *ev = json_loads (cases[i].event, 0, NULL);
      int status;

      CHECK (ev != NULL);
      sbx_buf_append (&msg, "stale", 5);
      status = sbx_exit_status (ev, "mycmd", &msg);
      if (status != cases[i].status || strcmp (msg.data ? msg.data : "", cases[i].msg) != 0)
        {
          fprintf (stderr, "#   %s: %d `%s`, want %d `%s`\n", cases[i].event, status,
                   msg.data ? msg.data : "", cases[i].status, cases[i].msg);
          json_decref (ev);
          return -1;
        }
      json_decref (ev);
    }
  CHECK (SBX_EXIT_TIMEOUT == 124 && SBX_EXIT_KILLED == 137);
  sbx_buf_free (&msg);
  return 0;
}

int
main (void)
{
  RUN (test_ndjson_lines);
  RUN (test_ndjson_chunk_boundaries);
  RUN (test_ndjson_byte_by_byte);
  RUN (test_ndjson_max_line);
  RUN (test_ndjson_default_limit);
  RUN (test_ndjson_callback_fails);
  RUN (test_event_output);
  RUN (test_event_other_types);
  RUN (test_event_malformed);
  RUN (test_event_counted);
  RUN (test_exit_status);
  return tap_done ();
}
