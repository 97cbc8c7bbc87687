/* sbx CLI: `sbx secret create|ls|rm` (a tenant's secrets, docs/egress.md).
 *
 * A value never comes from argv (other users see it in ps and
 * /proc/PID/cmdline, shells keep it in history): stdin, or --value-file.
 * One trailing newline is dropped (what `echo` and editors add).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "util/cleanup.h"

#define VALUE_READ_MAX (64 * 1024) /* the daemon says what is too long */

static int
read_value (int fd, struct sbx_buf *b)
{
  char chunk[4096];

  for (;;)
    {
      ssize_t n = read (fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -1;
      if (n == 0)
        break;
      sbx_buf_append (b, chunk, (size_t) n);
      explicit_bzero (chunk, sizeof chunk);
      if (b->len > VALUE_READ_MAX)
        break;
    }
  if (b->len > 0 && b->data[b->len - 1] == '\n')
    b->data[--b->len] = '\0';
  if (b->len > 0 && b->data[b->len - 1] == '\r')
    b->data[--b->len] = '\0';
  return 0;
}

static void
wipe (struct sbx_buf *b)
{
  if (b->data)
    explicit_bzero (b->data, b->cap);
  sbx_buf_free (b);
}

static int
secret_create (struct sbx_api *api, int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  const char *name = NULL, *file = NULL, *desc = NULL;
  struct sbx_buf value = SBX_BUF_INIT;
  json_t *body, *answer = NULL, *v;
  int i, fd = 0, status = 0;

  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      if (sbx_cli_is_help (a))
        {
          sbx_cli_help ("secret");
          return 0;
        }
      if (strcmp (a, "--value-file") == 0 && i + 1 < argc)
        file = argv[++i];
      else if (strncmp (a, "--value-file=", 13) == 0)
        file = a + 13;
      else if (strcmp (a, "--description") == 0 && i + 1 < argc)
        desc = argv[++i];
      else if (strncmp (a, "--description=", 14) == 0)
        desc = a + 14;
      else if (strcmp (a, "--value") == 0 || strncmp (a, "--value=", 8) == 0)
        {
          sbx_cli_usage ("secret create: the value is read from stdin or --value-file, never"
                         " from the command line");
          return SBX_EXIT_USAGE;
        }
      else if (a[0] == '-')
        {
          sbx_cli_usage ("secret create: unknown option %s", a);
          return SBX_EXIT_USAGE;
        }
      else if (name == NULL)
        name = a;
      else
        {
          sbx_cli_usage ("secret create: unexpected argument `%s`", a);
          return SBX_EXIT_USAGE;
        }
    }
  if (name == NULL)
    {
      sbx_cli_usage ("secret create: expected a NAME");
      return SBX_EXIT_USAGE;
    }
  if (file != NULL)
    {
      fd = open (file, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        {
          sbx_cli_message ("secret create: cannot open `%s`: %s", file, strerror (errno));
          return SBX_EXIT_FAILURE;
        }
    }
  else if (isatty (0))
    fprintf (stderr, "value of secret %s (then Enter and Ctrl-D): ", name);
  if (read_value (fd, &value) < 0 || value.failed)
    {
      sbx_cli_message ("secret create: cannot read the value: %s", strerror (errno));
      if (fd > 0)
        close (fd);
      wipe (&value);
      return SBX_EXIT_FAILURE;
    }
  if (fd > 0)
    close (fd);
  v = json_stringn_nocheck (value.data ? value.data : "", value.len);
  body = json_pack ("{s:s, s:o}", "name", name, "value", v);
  if (body == NULL)
    {
      wipe (&value);
      sbx_cli_message ("secret create: the name is not valid UTF-8");
      return SBX_EXIT_FAILURE;
    }
  if (desc)
    json_object_set_new (body, "description", json_string (desc));
  if (sbx_api_json (api, "POST", "/v1/secrets", body, &answer, &e) < 0)
    status = sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
  {
    char *p = (char *) (uintptr_t) json_string_value (v);
    if (p)
      explicit_bzero (p, json_string_length (v));
  }
  json_decref (body);
  wipe (&value);
  if (status == 0)
    printf ("%s\n", name);
  json_decref (answer);
  return status == 0 && fflush (stdout) != 0 ? SBX_EXIT_FAILURE : status;
}

static int
secret_ls (struct sbx_api *api, int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  json_t *answer = NULL, *list, *s;
  int i, as_json = 0;
  size_t k, n = 0;
  char **cells;

  for (i = 1; i < argc; i++)
    {
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("secret");
          return 0;
        }
      if (strcmp (argv[i], "--json") == 0)
        as_json = 1;
      else
        {
          sbx_cli_usage ("secret ls: unexpected argument `%s`", argv[i]);
          return SBX_EXIT_USAGE;
        }
    }
  if (sbx_api_json (api, "GET", "/v1/secrets", NULL, &answer, &e) < 0)
    return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
  list = json_object_get (answer, "secrets");
  if (as_json)
    {
      char *text = json_dumps (list, JSON_INDENT (2));
      if (text == NULL)
        sbx_oom ();
      printf ("%s\n", text);
      free (text);
      json_decref (answer);
      return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
    }
  cells = calloc ((json_array_size (list) + 1) * 3, sizeof *cells);
  if (cells == NULL)
    sbx_oom ();
  cells[n++] = strdup ("NAME");
  cells[n++] = strdup ("CREATED");
  cells[n++] = strdup ("DESCRIPTION");
  json_array_foreach (list, k, s)
  {
    const char *f[3] = {"name", "created_at", "description"};
    for (i = 0; i < 3; i++)
      {
        const char *t = json_string_value (json_object_get (s, f[i]));
        cells[n++] = strdup (t && t[0] ? t : "-");
      }
  }
  for (k = 0; k < n; k++)
    if (cells[k] == NULL)
      sbx_oom ();
  sbx_cli_print_table (3, cells, n);
  for (k = 0; k < n; k++)
    free (cells[k]);
  free (cells);
  json_decref (answer);
  return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
}

static int
secret_rm (struct sbx_api *api, int argc, char **argv)
{
  int i, status = 0;

  if (argc < 2)
    {
      sbx_cli_usage ("secret rm: expected a NAME");
      return SBX_EXIT_USAGE;
    }
  for (i = 1; i < argc; i++)
    {
      int rc;
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help ("secret");
          break;
        }
      rc = sbx_cli_delete_named (api, "/v1/secrets/", argv[i]);
      if (rc != 0)
        status = rc;
      if (status == SBX_EXIT_SBX)
        break;
    }
  return status;
}

int
sbx_cmd_secret (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  int (*fn) (struct sbx_api *, int, char **);
  int status;

  if (argc < 2)
    {
      sbx_cli_usage ("secret: expected create, ls or rm");
      return SBX_EXIT_USAGE;
    }
  if (sbx_cli_is_help (argv[1]))
    {
      sbx_cli_help ("secret");
      return 0;
    }
  if (strcmp (argv[1], "create") == 0)
    fn = secret_create;
  else if (strcmp (argv[1], "ls") == 0 || strcmp (argv[1], "list") == 0)
    fn = secret_ls;
  else if (strcmp (argv[1], "rm") == 0 || strcmp (argv[1], "delete") == 0)
    fn = secret_rm;
  else
    {
      sbx_cli_usage ("secret: unknown subcommand `%s` (expected create, ls or rm)", argv[1]);
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  status = fn (&api, argc - 1, argv + 1);
  sbx_api_clear (&api);
  return status;
}
