/* sbx CLI: `sbx template build|ls|inspect|rm` (docs/templates.md).
 *
 * The daemon's front end cannot read the caller's files, so `build
 * --from-dir` makes a tar of the directory here (with tar(1), into an
 * unnamed memory file) and uploads it; `--from-oci` uploads the archive
 * (`docker save`, `skopeo copy ... oci-archive:`) as it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "util/cleanup.h"
#include "util/parse.h"

/* tar -C dir -cf - . into a memfd; its fd (offset 0), or -1. */
static int
tar_dir (const char *dir)
{
  int fd = memfd_create ("sbx-template", MFD_CLOEXEC), status;
  pid_t pid;

  if (fd < 0)
    return -1;
  pid = fork ();
  if (pid < 0)
    {
      close (fd);
      return -1;
    }
  if (pid == 0)
    {
      static char tar[] = "tar", numeric[] = "--numeric-owner", owner[] = "--owner=0",
                  group[] = "--group=0", dash_c[] = "-C", cf[] = "-cf", dash[] = "-", dot[] = ".";
      char *argv[] = {tar, numeric, owner, group, dash_c, NULL, cf, dash, dot, NULL};
      argv[5] = strdup (dir);
      if (argv[5] == NULL || dup2 (fd, 1) < 0)
        _exit (127);
      execvp ("tar", argv);
      _exit (127);
    }
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      {
        close (fd);
        return -1;
      }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0 || lseek (fd, 0, SEEK_SET) < 0)
    {
      close (fd);
      errno = EIO;
      return -1;
    }
  return fd;
}

/* An upload's progress on a terminal: a line rewritten at each whole
   percent, then what the daemon does with it. */
static void
on_sent (void *ctx, uint64_t sent, uint64_t total)
{
  int *last = ctx;
  int pct = total ? (int) (sent * 100 / total) : 100;

  if (pct == *last)
    return;
  *last = pct;
  fprintf (stderr, "\rsbx: uploaded %.1f of %.1f MB (%d%%)", (double) sent / 1e6,
           (double) total / 1e6, pct);
  if (sent == total)
    fputs ("; the daemon unpacks and checks every entry...\n", stderr);
}

/* While a recipe builds: its newest progress line on stderr, once a
   second (GET /v1/templates/NAME/progress), from a child of ours. */
static pid_t
start_progress (const char *name)
{
  pid_t parent = getpid (), pid = fork ();
  struct sbx_buf target = SBX_BUF_INIT;
  struct sbx_api api;
  char last[512] = "";
  time_t start = time (NULL);

  if (pid != 0)
    return pid;
  if (sbx_api_init (&api, NULL) < 0)
    _exit (0);
  sbx_buf_append (&target, "/v1/templates/", 14);
  sbx_url_escape (&target, name, 0);
  sbx_buf_append (&target, "/progress", 10);
  while (getppid () == parent)
    {
      json_t *answer = NULL;
      sleep (1);
      if (sbx_api_json (&api, "GET", target.data, NULL, &answer, NULL) > 0)
        {
          json_t *tail = json_object_get (answer, "tail");
          const char *line = json_string_value (json_array_get (tail, json_array_size (tail) - 1));
          if (line && strcmp (line, last) != 0)
            {
              fprintf (stderr, "  [%3lds] %.200s\n", (long) (time (NULL) - start), line);
              snprintf (last, sizeof last, "%s", line);
            }
        }
      json_decref (answer);
    }
  _exit (0);
}

static void
print_json (json_t *o)
{
  char *text = json_dumps (o, JSON_INDENT (2) | JSON_SORT_KEYS);
  if (text == NULL)
    sbx_oom ();
  printf ("%s\n", text);
  free (text);
}

static int
tmpl_build (struct sbx_api *api, int argc, char **argv)
{
  struct sbx_http_request req = SBX_HTTP_REQUEST_INIT;
  struct sbx_buf target = SBX_BUF_INIT, out = SBX_BUF_INIT;
  cleanup_error sbx_error_t *e = NULL;
  const char *name = NULL, *dir = NULL, *oci = NULL, *recipe = NULL, *fmt;
  int last_pct = -1;
  struct stat st;
  json_t *answer;
  int i, fd, status;

  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i];
      if (sbx_cli_is_help (a))
        {
          sbx_cli_help ("template build");
          return 0;
        }
      if (strcmp (a, "--from-dir") == 0 && i + 1 < argc)
        dir = argv[++i];
      else if (strcmp (a, "--from-oci") == 0 && i + 1 < argc)
        oci = argv[++i];
      else if (strcmp (a, "--from-recipe") == 0 && i + 1 < argc)
        recipe = argv[++i];
      else if (a[0] == '-')
        {
          sbx_cli_usage ("template build: unknown option or missing value `%s`", a);
          return SBX_EXIT_USAGE;
        }
      else if (name == NULL)
        name = a;
      else
        {
          sbx_cli_usage ("template build: unexpected argument `%s`", a);
          return SBX_EXIT_USAGE;
        }
    }
  if (name == NULL || (dir != NULL) + (oci != NULL) + (recipe != NULL) != 1)
    {
      sbx_cli_usage ("template build: expected NAME and one of --from-dir DIR, --from-oci FILE, "
                     "--from-recipe FILE");
      return SBX_EXIT_USAGE;
    }
  /* Before reading or uploading anything (an image may be large). */
  if (!sbx_template_name_spelled_ok (name))
    {
      sbx_cli_usage ("template build: `%.64s` is not a template name (1 to 31 of a-z 0-9 . _ -, "
                     "starting with a letter or digit)",
                     name);
      return SBX_EXIT_USAGE;
    }
  if (dir)
    {
      cleanup_close int probe = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (probe < 0)
        {
          sbx_cli_message ("template build: --from-dir `%s`: %s", dir, strerror (errno));
          return SBX_EXIT_FAILURE;
        }
    }
  if (recipe)
    oci = recipe;
  fmt = dir ? "dir" : recipe ? "recipe" : "oci";
  fd = dir ? tar_dir (dir) : open (oci, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &st) < 0)
    {
      sbx_cli_message ("template build: cannot read `%s`: %s", dir ? dir : oci, strerror (errno));
      if (fd >= 0)
        close (fd);
      return SBX_EXIT_FAILURE;
    }
  if (recipe)
    fprintf (stderr, "sbx: building `%s` from a recipe (debootstrap: minutes unless cached)...\n",
             name);
  else
    fprintf (stderr, "sbx: uploading %.1f MB and building `%s`...\n",
             (double) st.st_size / 1e6, name);
  sbx_buf_printf (&target, "/v1/templates?format=%s&name=", fmt);
  sbx_url_escape (&target, name, 0);
  req.method = "POST";
  req.target = target.data;
  req.content_type = recipe ? "application/json" : "application/x-tar";
  req.body_fd = fd;
  req.body_len = (size_t) st.st_size;
  req.has_body = 1;
  if (!recipe && isatty (STDERR_FILENO))
    {
      req.on_sent = on_sent;
      req.sent_ctx = &last_pct;
    }
  {
    pid_t progress = recipe ? start_progress (name) : -1;
    status = sbx_api_request (api, NULL, &req, NULL, NULL, &out, &e);
    if (progress > 0)
      {
        kill (progress, SIGTERM);
        waitpid (progress, NULL, 0);
      }
  }
  close (fd);
  sbx_buf_free (&target);
  if (status < 0)
    {
      sbx_buf_free (&out);
      return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
    }
  answer = json_loadb (out.data ? out.data : "", out.len, 0, NULL);
  sbx_buf_free (&out);
  printf ("%s: %zu layer%s, %.1f MB\n", name, json_array_size (json_object_get (answer, "layers")),
          json_array_size (json_object_get (answer, "layers")) == 1 ? "" : "s",
          (double) json_integer_value (json_object_get (answer, "size_bytes")) / 1e6);
  json_decref (answer);
  return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
}

static int
tmpl_ls (struct sbx_api *api, int argc, char **argv)
{
  static const char *const header[5] = {"NAME", "SOURCE", "LAYERS", "SIZE", "OWNER"};
  cleanup_error sbx_error_t *e = NULL;
  json_t *answer = NULL, *list;
  char **cells;
  size_t rows, i, n = 0;
  int as_json = argc > 1 && strcmp (argv[1], "--json") == 0;

  if (argc > 1 && !as_json)
    {
      if (sbx_cli_is_help (argv[1]))
        {
          sbx_cli_help ("template ls");
          return 0;
        }
      sbx_cli_usage ("template ls: unexpected argument `%s`", argv[1]);
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_json (api, "GET", "/v1/templates", NULL, &answer, &e) < 0)
    return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
  list = json_object_get (answer, "templates");
  if (as_json)
    {
      print_json (list);
      json_decref (answer);
      return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
    }
  rows = json_array_size (list);
  cells = calloc ((rows + 1) * 5, sizeof *cells);
  if (cells == NULL)
    sbx_oom ();
  for (i = 0; i < 5; i++)
    cells[n++] = strdup (header[i]);
  for (i = 0; i < rows; i++)
    {
      const json_t *t = json_array_get (list, i);
      const char *v;
      char buf[64];
      v = json_string_value (json_object_get (t, "name"));
      cells[n++] = strdup (v ? v : "-");
      v = json_string_value (json_object_get (t, "source"));
      cells[n++] = strdup (v ? v : "-");
      snprintf (buf, sizeof buf, "%zu", json_array_size (json_object_get (t, "layers")));
      cells[n++] = strdup (buf);
      if (json_is_true (json_object_get (t, "builtin")))
        snprintf (buf, sizeof buf, "-");
      else
        snprintf (buf, sizeof buf, "%.1f MB",
                  (double) json_integer_value (json_object_get (t, "size_bytes")) / 1e6);
      cells[n++] = strdup (buf);
      v = json_string_value (json_object_get (t, "owner"));
      cells[n++] = strdup (v ? v : "-");
    }
  for (i = 0; i < n; i++)
    if (cells[i] == NULL)
      sbx_oom ();
  sbx_cli_print_table (5, cells, n);
  for (i = 0; i < n; i++)
    free (cells[i]);
  free (cells);
  json_decref (answer);
  return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
}

static int
tmpl_each (struct sbx_api *api, int argc, char **argv, const char *method, const char *what)
{
  struct sbx_buf target = SBX_BUF_INIT;
  int i, status = 0, named = 0;

  if (argc < 2)
    {
      sbx_cli_usage ("template %s: expected a template NAME", what);
      return SBX_EXIT_USAGE;
    }
  for (i = 1; i < argc; i++)
    {
      cleanup_error sbx_error_t *e = NULL;
      json_t *answer = NULL;
      if (sbx_cli_is_help (argv[i]))
        {
          sbx_cli_help (strcmp (what, "rm") == 0 ? "template rm" : "template inspect");
          break;
        }
      /* inspect prints JSON anyway; --json is taken as every other command takes it */
      if (strcmp (what, "inspect") == 0 && strcmp (argv[i], "--json") == 0)
        continue;
      named++;
      sbx_buf_reset (&target);
      sbx_buf_append (&target, "/v1/templates/", 14);
      sbx_url_escape (&target, argv[i], 0);
      if (sbx_api_json (api, method, target.data, NULL, &answer, &e) < 0)
        {
          status = sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
          if (status == SBX_EXIT_SBX)
            break;
          continue;
        }
      if (answer)
        print_json (answer);
      json_decref (answer);
    }
  sbx_buf_free (&target);
  if (named == 0 && status == 0 && i == argc)
    {
      sbx_cli_usage ("template %s: expected a template NAME", what);
      return SBX_EXIT_USAGE;
    }
  return status;
}

static int
tmpl_inspect (struct sbx_api *api, int argc, char **argv)
{
  return tmpl_each (api, argc, argv, "GET", "inspect");
}

static int
tmpl_rm (struct sbx_api *api, int argc, char **argv)
{
  return tmpl_each (api, argc, argv, "DELETE", "rm");
}

/* `template cache` (what the recipe build cache holds) and `template
   prune` (empty it): the administrator's. */
static int
tmpl_cache (struct sbx_api *api, int argc, char **argv, int prune)
{
  cleanup_error sbx_error_t *e = NULL;
  json_t *answer = NULL;
  int as_json = argc > 1 && strcmp (argv[1], "--json") == 0;
  json_int_t entries, bytes;

  if (argc > 2 || (argc > 1 && !as_json))
    {
      if (sbx_cli_is_help (argv[1]))
        {
          sbx_cli_help ("template");
          return 0;
        }
      sbx_cli_usage ("template %s: unexpected argument `%s`", prune ? "prune" : "cache",
                     argv[argc > 2 ? 2 : 1]);
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_json (api, prune ? "DELETE" : "GET", "/v1/template-cache", NULL, &answer, &e) < 0)
    return sbx_cli_fail (api, steal_pointer (&e), SBX_EXIT_FAILURE);
  if (as_json)
    print_json (answer);
  else
    {
      entries = json_integer_value (json_object_get (answer, "entries"));
      bytes = json_integer_value (json_object_get (answer, "bytes"));
      printf ("%s%lld cached recipe build%s, %.1f MB\n", prune ? "removed " : "",
              (long long) entries, entries == 1 ? "" : "s", (double) bytes / 1e6);
    }
  json_decref (answer);
  return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
}

static int
tmpl_cache_show (struct sbx_api *api, int argc, char **argv)
{
  return tmpl_cache (api, argc, argv, 0);
}

static int
tmpl_prune (struct sbx_api *api, int argc, char **argv)
{
  return tmpl_cache (api, argc, argv, 1);
}

int
sbx_cmd_template (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_api api;
  int (*fn) (struct sbx_api *, int, char **);
  const char *sub;
  int status;

  if (argc < 2)
    {
      sbx_cli_usage ("template: expected build, ls, inspect, rm, cache or prune");
      return SBX_EXIT_USAGE;
    }
  sub = argv[1];
  if (sbx_cli_is_help (sub))
    {
      sbx_cli_help ("template");
      return 0;
    }
  if (strcmp (sub, "build") == 0)
    fn = tmpl_build;
  else if (strcmp (sub, "ls") == 0 || strcmp (sub, "list") == 0)
    fn = tmpl_ls;
  else if (strcmp (sub, "inspect") == 0)
    fn = tmpl_inspect;
  else if (strcmp (sub, "rm") == 0 || strcmp (sub, "delete") == 0)
    fn = tmpl_rm;
  else if (strcmp (sub, "cache") == 0)
    fn = tmpl_cache_show;
  else if (strcmp (sub, "prune") == 0)
    fn = tmpl_prune;
  else
    {
      sbx_cli_usage ("template: unknown subcommand `%s` (expected build, ls, inspect, rm, cache "
                     "or prune)",
                     sub);
      return SBX_EXIT_USAGE;
    }
  if (sbx_api_init (&api, &e) < 0)
    return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
  status = fn (&api, argc - 1, argv + 1);
  sbx_api_clear (&api);
  return status;
}
