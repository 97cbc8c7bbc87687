/* sbx CLI: `sbx net ID [SPEC...]`, a sandbox's egress policy
 * (docs/egress.md): shown, or replaced by the SPECs. */
#include <stdio.h>
#include <string.h>

#include "cli/api.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "util/buf.h"
#include "util/cleanup.h"

static void
print_list (const char *what, json_t *arr)
{
  json_t *v;
  size_t i;

  if (json_array_size (arr) == 0)
    return;
  printf ("%s:", what);
  json_array_foreach (arr, i, v)
  printf ("%s%s", i ? "," : " ", json_string_value (v));
  putchar ('\n');
}

int
sbx_cmd_net (int argc, char **argv)
{
  cleanup_error sbx_error_t *e = NULL;
  struct sbx_buf target = SBX_BUF_INIT;
  json_t *network = NULL, *out = NULL, *net;
  struct sbx_api api;
  int i, status = 0;

  for (i = 1; i < argc; i++)
    if (sbx_cli_is_help (argv[i]))
      {
        sbx_cli_help ("net");
        return 0;
      }
  if (argc < 2 || argv[1][0] == '-')
    {
      sbx_cli_usage ("net: expected a sandbox ID");
      return SBX_EXIT_USAGE;
    }
  if (sbx_cli_check_id ("net", argv[1]) != 0)
    return SBX_EXIT_USAGE;
  for (i = 2; i < argc; i++)
    if (sbx_cli_net_spec (&network, argv[i], &e) < 0)
      {
        json_decref (network);
        sbx_cli_message ("%s", e->msg);
        return SBX_EXIT_USAGE;
      }
  if (sbx_api_init (&api, &e) < 0)
    {
      json_decref (network);
      return sbx_cli_fail (NULL, steal_pointer (&e), SBX_EXIT_SBX);
    }
  if (network != NULL)
    {
      /* SPECs replace allow and deny; the credential rules and secrets_env
         stay (they are set through the API). */
      json_t *cur = NULL;
      sbx_api_sandbox_path (&target, argv[1], NULL);
      if (sbx_api_json (&api, "GET", target.data, NULL, &cur, &e) < 0)
        {
          status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
          json_decref (network);
          sbx_buf_free (&target);
          sbx_api_clear (&api);
          return status;
        }
      net = json_object_get (cur, "network");
      if (json_object_get (net, "rules"))
        json_object_set (network, "rules", json_object_get (net, "rules"));
      if (json_object_get (net, "secrets_env"))
        json_object_set (network, "secrets_env", json_object_get (net, "secrets_env"));
      json_decref (cur);
      sbx_buf_reset (&target);
    }
  sbx_api_sandbox_path (&target, argv[1], network ? "/network" : NULL);
  if (sbx_api_json (&api, network ? "PUT" : "GET", target.data, network, &out, &e) < 0)
    status = sbx_cli_fail (&api, steal_pointer (&e), SBX_EXIT_FAILURE);
  else
    {
      net = json_object_get (out, "network");
      if (json_array_size (json_object_get (net, "allow")) == 0)
        printf ("none%s\n", json_array_size (json_object_get (net, "deny")) ? " (deny list kept)"
                                                                             : "");
      print_list ("allow", json_object_get (net, "allow"));
      print_list ("deny", json_object_get (net, "deny"));
      {
        const char *k;
        json_t *v, *hosts = json_array ();
        json_object_foreach (json_object_get (net, "rules"), k, v)
          json_array_append_new (hosts, json_string (k));
        if (json_array_size (hosts) > 0)
          print_list ("rules for", hosts);
        json_decref (hosts);
        json_object_foreach (json_object_get (net, "secrets_env"), k, v)
          printf ("env %s = placeholder of secret %s\n", k,
                  json_string_value (json_object_get (v, "secret")));
      }
    }
  json_decref (out);
  json_decref (network);
  sbx_buf_free (&target);
  sbx_api_clear (&api);
  return status;
}
