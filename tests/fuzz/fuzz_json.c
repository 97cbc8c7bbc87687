/* Fuzz target: JSON request bodies, through the functions the handlers
 * use (server/params.c, and the body parsers of routes_*.c).
 *
 * The first byte picks the body's route; the rest is the body:
 *   0 POST /v1/sandboxes          sbx_create_opts_parse
 *   1 POST .../exec               sbx_exec_request_parse
 *   2 POST .../processes          the same, background
 *   3 POST .../files/mkdir        sbx_mkdir_request_parse
 *   4 POST .../files/move         sbx_move_request_parse
 *   5 POST .../processes/N/signal sbx_signal_request_parse
 *   6 POST .../timeout, keys,     sbx_params_only + duration / string,
 *     .../processes/N/resize      sbx_resize_request_parse
 *   7 any object                  every sbx_param_* on every key
 * Checked: the error contract (an error iff failure, always 400), the
 * bounds each parser promises on success, and no leak (LeakSanitizer).
 */
#include <math.h>

#include "fuzz.h"
#include "iso/fs.h"
#include "server/request.h"

/* An object of at most max strings without NUL (a checked string map). */
static void
check_map (json_t *m, size_t max, int env)
{
  const char *k;
  json_t *v;

  if (m == NULL)
    return;
  FUZZ_ASSERT (json_is_object (m) && json_object_size (m) <= max);
  json_object_foreach (m, k, v)
  {
    FUZZ_ASSERT (json_is_string (v));
    FUZZ_ASSERT (strlen (json_string_value (v)) == json_string_length (v));
    FUZZ_ASSERT (k[0] != '\0');
    if (env)
      FUZZ_ASSERT (strchr (k, '=') == NULL);
  }
}

static void
check_plain (const char *s)
{
  /* A borrowed string of the body: it must be readable to its NUL. */
  if (s)
    FUZZ_ASSERT (strlen (s) < SBX_JSON_BODY_MAX);
}

static void
create_body (json_t *body)
{
  struct sbx_create_opts o;
  sbx_error_t *err = NULL;

  if (FUZZ_CONTRACT (sbx_create_opts_parse (body, &o, &err), &err) < 0)
    return;
  check_plain (o.template_name);
  check_plain (o.user);
  check_map (o.env, 256, 1);
  check_map (o.metadata, 64, 0);
  /* 0 means "the default"; anything given is positive and in range. */
  if (json_object_get (body, "pids") && !json_is_null (json_object_get (body, "pids")))
    FUZZ_ASSERT (o.limits.pids > 0 && (json_int_t) o.limits.pids
                                          == json_integer_value (json_object_get (body, "pids")));
  if (json_is_number (json_object_get (body, "cpus")))
    FUZZ_ASSERT (o.limits.cpu_milli > 0 && o.limits.cpu_milli <= 4096000);
  if (json_object_get (body, "memory") && !json_is_null (json_object_get (body, "memory")))
    FUZZ_ASSERT (o.limits.memory_bytes > 0);
  if (json_object_get (body, "timeout") && !json_is_null (json_object_get (body, "timeout")))
    FUZZ_ASSERT (o.timeout_ms > 0);
}

static void
exec_body (const char *data, size_t len, int background)
{
  struct sbx_exec_request e;
  sbx_error_t *err = NULL;
  size_t i;

  if (FUZZ_CONTRACT (sbx_exec_request_parse (data, len, background, &e, &err), &err) == 0)
    {
      FUZZ_ASSERT (e.opts.argv != NULL && e.opts.argv[0] != NULL && e.opts.argv[0][0] != '\0');
      for (i = 0; e.opts.argv[i]; i++)
        FUZZ_ASSERT (i <= 4096);
      FUZZ_ASSERT (e.opts.cwd == NULL || (e.opts.cwd[0] == '/' && strlen (e.opts.cwd) < 4096));
      FUZZ_ASSERT (e.opts.out_cap > 0 && e.opts.out_cap <= 64ULL * 1024 * 1024);
      FUZZ_ASSERT (e.opts.background == background);
      FUZZ_ASSERT (background ? e.opts.mode == SBX_OUT_TAIL
                              : e.opts.mode == (e.stream ? SBX_OUT_BLOCK : SBX_OUT_HEAD));
      FUZZ_ASSERT (e.opts.stdin_len == e.stdin_bytes.len);
      check_map (e.opts.env, 256, 1);
      /* A terminal has a size in range; none has no size. */
      FUZZ_ASSERT (e.opts.pty ? e.opts.pty_cols >= 1 && e.opts.pty_cols <= 1000
                                    && e.opts.pty_rows >= 1 && e.opts.pty_rows <= 1000
                              : e.opts.pty_cols == 0 && e.opts.pty_rows == 0);
    }
  sbx_exec_request_free (&e);
}

static void
files_body (json_t *body, int move)
{
  char abs[SBX_FS_PATH_MAX];
  const char *from, *to;
  sbx_error_t *err = NULL;
  uint32_t mode;
  int flag;

  memset (abs, 0x5a, sizeof abs);
  if (move)
    {
      if (FUZZ_CONTRACT (sbx_move_request_parse (body, &from, &to, abs, &flag, &err), &err) < 0)
        return;
      /* `from` is checked by sbx_fs_move itself (an empty one is a 400 there). */
      FUZZ_ASSERT (from && to && to[0]);
    }
  else
    {
      if (FUZZ_CONTRACT (sbx_mkdir_request_parse (body, abs, &mode, &flag, &err), &err) < 0)
        return;
      FUZZ_ASSERT (mode <= 0777);
    }
  FUZZ_ASSERT (memchr (abs, '\0', sizeof abs) != NULL && abs[0] == '/');
  FUZZ_ASSERT (flag == 0 || flag == 1);
}

static void
signal_body (json_t *body)
{
  sbx_error_t *err = NULL;
  json_t *sig = json_object_get (body, "signal");
  int signo = 0;

  if (FUZZ_CONTRACT (sbx_signal_request_parse (body, &signo, &err), &err) < 0)
    return;
  FUZZ_ASSERT (signo >= 1 && signo <= 31);
  /* A number is taken as it is, never wrapped into range. */
  if (json_is_integer (sig))
    FUZZ_ASSERT (json_integer_value (sig) == signo);
}

static void
small_bodies (json_t *body)
{
  static const char *const timeout_fields[] = {"timeout", NULL};
  static const char *const key_fields[] = {"tenant", NULL};
  sbx_error_t *err = NULL;
  const char *tenant = NULL;
  uint64_t ms = 0;
  unsigned cols = 0, rows = 0;

  if (FUZZ_CONTRACT (sbx_params_only (body, timeout_fields, &err), &err) == 0
      && FUZZ_CONTRACT (sbx_param_duration (body, "timeout", &ms, &err), &err) == 0
      && json_object_get (body, "timeout") && !json_is_null (json_object_get (body, "timeout")))
    FUZZ_ASSERT (ms > 0);
  if (FUZZ_CONTRACT (sbx_params_only (body, key_fields, &err), &err) == 0)
    FUZZ_CONTRACT (sbx_param_string (body, "tenant", &tenant, &err), &err);
  check_plain (tenant);
  if (FUZZ_CONTRACT (sbx_resize_request_parse (body, &cols, &rows, &err), &err) == 0)
    FUZZ_ASSERT (cols >= 1 && cols <= 1000 && rows >= 1 && rows <= 1000
                 && json_object_size (body) == 2);
}

/* Every typed getter on every key: each either fails or gives a value of
   its promised range. */
static void
every_param (json_t *body)
{
  const char *k;
  json_t *v;

  json_object_foreach (body, k, v)
  {
    sbx_error_t *err = NULL;
    const char *s = NULL;
    uint64_t u = 0;
    uint32_t milli = 0;
    json_t *map = NULL;
    int b = -1, pty = 0;
    unsigned cols = 0, rows = 0;

    (void) v;
    if (FUZZ_CONTRACT (sbx_param_string (body, k, &s, &err), &err) == 0)
      check_plain (s);
    if (FUZZ_CONTRACT (sbx_param_bool (body, k, &b, &err), &err) == 0)
      FUZZ_ASSERT (b == -1 || b == 0 || b == 1);
    u = 0;
    if (FUZZ_CONTRACT (sbx_param_size (body, k, &u, &err), &err) == 0 && !json_is_null (v))
      FUZZ_ASSERT (u > 0);
    u = 0;
    if (FUZZ_CONTRACT (sbx_param_duration (body, k, &u, &err), &err) == 0 && !json_is_null (v))
      FUZZ_ASSERT (u > 0);
    if (FUZZ_CONTRACT (sbx_param_cpus (body, k, &milli, &err), &err) == 0 && !json_is_null (v))
      FUZZ_ASSERT (milli > 0);
    FUZZ_CONTRACT (sbx_param_uint (body, k, &u, &err), &err);
    if (FUZZ_CONTRACT (sbx_param_string_map (body, k, 8, 16, 32, 64, 1, &map, &err), &err) == 0)
      check_map (map, 8, 1);
    if (FUZZ_CONTRACT (sbx_param_pty (body, k, &pty, &cols, &rows, &err), &err) == 0)
      FUZZ_ASSERT (pty ? cols >= 1 && cols <= 1000 && rows >= 1 && rows <= 1000
                       : json_is_null (v) && cols == 0 && rows == 0);
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *body_text;
  sbx_error_t *err = NULL;
  json_t *body = NULL;
  size_t len;
  int kind;

  if (size == 0)
    return 0;
  kind = data[0] & 7;
  body_text = (const char *) data + 1;
  len = size - 1;
  if (kind == 1 || kind == 2)
    {
      exec_body (body_text, len, kind == 2);
      return 0;
    }
  if (FUZZ_CONTRACT (sbx_json_body (body_text, len, &body, &err), &err) < 0)
    return 0;
  FUZZ_ASSERT (json_is_object (body));
  switch (kind)
    {
    case 0:
      create_body (body);
      break;
    case 3:
    case 4:
      files_body (body, kind == 4);
      break;
    case 5:
      signal_body (body);
      break;
    case 6:
      small_bodies (body);
      break;
    default:
      every_param (body);
      break;
    }
  json_decref (body);
  return 0;
}
