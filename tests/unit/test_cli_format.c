/* Unit tests for src/cli/format.c: `--format TEMPLATE` of sbx ls and
 * sbx inspect (fields by key, case-insensitive, nested; json; escapes;
 * missing fields; malformed templates refused).
 */
#include "cli/format.h"

#include <string.h>

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

static const char *const SANDBOX
    = "{\"id\": \"abc\", \"state\": \"paused\", \"timeout\": 1.5, \"n\": 7, \"ok\": true,"
      " \"gone\": null, \"limits\": {\"memory\": 512, \"cpus\": 0.5},"
      " \"metadata\": {\"Team\": \"red\"}, \"tags\": [1, 2]}";

static int
test_render (void)
{
  static const struct
  {
    const char *tmpl, *want;
  } cases[] = {
    {"{{.id}}", "abc"},
    {"{{.ID}} {{.State}}", "abc paused"},
    {"{{ .id }}", "abc"},
    {"{{.limits.memory}}/{{.limits.cpus}}", "512/0.5"},
    {"{{.metadata.team}}", "red"},
    {"{{.timeout}} {{.n}} {{.ok}} [{{.gone}}]", "1.5 7 true []"},
    {"{{.tags}}", "[1,2]"},
    {"{{json .limits}}", "{\"memory\":512,\"cpus\":0.5}"},
    {"{{json .id}}", "\"abc\""},
    {"{{.nope}} {{.limits.nope}} {{.id.deeper}}", "<no value> <no value> <no value>"},
    {"a\\tb\\nc\\\\d\\x", "a\tb\nc\\d\\x"},
    {"plain", "plain"},
    {"", ""},
    {"{ {.id}} }}", "{ {.id}} }}"},
  };

  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      json_t *o = json_loads (SANDBOX, 0, NULL);
      struct sbx_buf out = SBX_BUF_INIT;
      sbx_error_t *err = NULL;
      CHECK (o != NULL);
      CHECK (sbx_cli_format_check (cases[i].tmpl, &err) == 0);
      CHECK (sbx_cli_format_render (cases[i].tmpl, o, &out, &err) == 0);
      sbx_buf_append (&out, "", 1);
      if (strcmp (out.data, cases[i].want) != 0)
        {
          fprintf (stderr, "#   `%s` gave `%s`, want `%s`\n", cases[i].tmpl, out.data,
                   cases[i].want);
          return -1;
        }
      sbx_buf_free (&out);
      json_decref (o);
    }
  return 0;
}

static int
test_malformed (void)
{
  static const char *const bad[] = {
    "{{.id", "{{}}", "{{ }}", "{{id}}", "{{json}}", "{{json id}}", "{{.a b}}", "x {{.a}} {{",
    "{{.id | upper}}", "{{range .}}",
  };

  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      sbx_error_t *err = NULL;
      if (sbx_cli_format_check (bad[i], &err) != -1 || err == NULL
          || strstr (err->msg, "--format") == NULL)
        {
          fprintf (stderr, "#   `%s` was not refused\n", bad[i]);
          return -1;
        }
      sbx_error_free (err);
    }
  return 0;
}

int
main (void)
{
  RUN (test_render);
  RUN (test_malformed);
  return tap_done ();
}
