/* sbx: E2B's control plane (E2B_API_URL): create, list, inspect, extend
 * and kill sandboxes, in the shapes the SDK reads (spec/openapi.yml of
 * e2b-dev/E2B; ../shared/docs/e2b-protocol.md section 3). Authenticated
 * with the same API keys as the native API (X-API-Key), scoped to the
 * key's tenant. Errors are {code, message} with a numeric code, which the
 * SDK turns into its error classes (404 NotFoundError, 401
 * AuthenticationError, ...). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/template.h"
#include "iso/snapstore.h"
#include "server/e2b.h"
#include "util/parse.h"

#define TIMEOUT_V1_DEFAULT_S 15  /* infra: SandboxTimeoutDefault for POST /sandboxes */
#define TIMEOUT_V2_DEFAULT_S 300 /* and for POST /v2/sandboxes */
#define LIST_LIMIT_DEFAULT 100
#define LIST_LIMIT_MAX 1000

static const char *
tenant_of (struct sbx_req *r)
{
  return sbx_req_tenant (r) ? sbx_req_tenant (r) : "default";
}

static json_t *
domain_json (void)
{
  const struct sbx_config *cfg = sbx_core_config ();
  return cfg && cfg->domain[0] ? json_string (cfg->domain) : json_null ();
}

/* The Sandbox object of create and connect answers. */
static json_t *
sandbox_json (struct sbx_sandbox *sb)
{
  json_t *o = json_object ();

  json_object_set_new (o, "sandboxID", json_string (sb->id));
  json_object_set_new (o, "templateID", json_string (sb->template_name));
  json_object_set_new (o, "alias", json_string (sb->template_name));
  /* Deprecated, still "required" by the schema. */
  json_object_set_new (o, "clientID", json_string ("sbx"));
  json_object_set_new (o, "envdVersion", json_string (SBX_E2B_ENVD_VERSION));
  json_object_set_new (o, "envdAccessToken", json_string (sb->access_token));
  json_object_set_new (o, "trafficAccessToken", json_string (sb->traffic_token));
  json_object_set_new (o, "domain", domain_json ());
  return o;
}

/* ListedSandbox, from the native description (which is taken under the
   core's lock, so the fields agree with each other); SandboxDetail adds
   the tokens and settings when detail. */
static json_t *
listed_json (json_t *native, struct sbx_sandbox *sb_or_null)
{
  json_t *o = json_object (), *limits = json_object_get (native, "limits");
  double cpus = json_real_value (json_object_get (limits, "cpus"));
  json_int_t mem = json_integer_value (json_object_get (limits, "memory"));
  json_int_t disk = json_integer_value (json_object_get (limits, "disk"));
  int cpu_count = (int) (cpus + 0.999);

  json_object_set (o, "sandboxID", json_object_get (native, "id"));
  json_object_set (o, "templateID", json_object_get (native, "template"));
  json_object_set (o, "alias", json_object_get (native, "template"));
  json_object_set_new (o, "clientID", json_string ("sbx"));
  json_object_set (o, "startedAt", json_object_get (native, "created_at"));
  json_object_set (o, "endAt", json_object_get (native, "expires_at"));
  json_object_set (o, "state", json_object_get (native, "state"));
  json_object_set_new (o, "cpuCount", json_integer (cpu_count < 1 ? 1 : cpu_count));
  json_object_set_new (o, "memoryMB", json_integer (mem / (1024 * 1024)));
  json_object_set_new (o, "diskSizeMB", json_integer (disk / (1024 * 1024)));
  json_object_set_new (o, "envdVersion", json_string (SBX_E2B_ENVD_VERSION));
  json_object_set (o, "metadata", json_object_get (native, "metadata"));
  if (sb_or_null)
    {
      json_object_set_new (o, "envdAccessToken", json_string (sb_or_null->access_token));
      json_object_set_new (o, "domain", domain_json ());
      json_t *net = json_object_get (native, "network");
      json_t *allow = json_object_get (net, "allow"), *v;
      json_t *allow_out = json_array (), *deny_out = json_deep_copy (json_object_get (net, "deny"));
      int internet = 0;
      size_t i;

      /* sbx's policy in E2B's terms (e2b_network): "*" allowed is
         internet access; otherwise everything is denied (ALL_TRAFFIC) but
         what allowOut lists. */
      json_array_foreach (allow, i, v)
      {
        if (strcmp (json_string_value (v), "*") == 0)
          internet = 1;
        else
          json_array_append (allow_out, v);
      }
      if (!internet)
        {
          json_array_clear (deny_out);
          json_array_append_new (deny_out, json_string ("0.0.0.0/0"));
        }
      json_object_set_new (o, "allowInternetAccess", json_boolean (internet));
      json_object_set_new (o, "network",
                           json_pack ("{s:o, s:o}", "allowOut", allow_out, "denyOut", deny_out));
      if (sb_or_null->lifecycle & (SBX_LIFECYCLE_PUBLIC_PORTS | SBX_LIFECYCLE_PRIVATE_EXPLICIT))
        json_object_set_new (json_object_get (o, "network"), "allowPublicTraffic",
                             json_boolean (sb_or_null->lifecycle & SBX_LIFECYCLE_PUBLIC_PORTS));
      if (json_is_string (json_object_get (native, "mask_request_host")))
        json_object_set (json_object_get (o, "network"), "maskRequestHost",
                         json_object_get (native, "mask_request_host"));
      if (json_object_get (net, "rules") != NULL)
        {
          json_t *rules = json_object (), *list;
          const char *host;
          json_object_foreach (json_object_get (net, "rules"), host, list)
          {
            json_t *items = json_array (), *item;
            json_array_foreach (list, i, item)
            {
              json_t *h = json_object_get (item, "headers");
              if (h != NULL)
                json_array_append_new (items,
                                       json_pack ("{s:{s:O}}", "transform", "headers", h));
            }
            json_object_set_new (rules, host, items);
          }
          json_object_set_new (json_object_get (o, "network"), "rules", rules);
        }
      json_t *lc = json_object_get (native, "lifecycle");
      json_object_set_new (o, "lifecycle",
                           json_pack ("{s:O, s:O}", "onTimeout", json_object_get (lc, "on_timeout"),
                                      "autoResume", json_object_get (lc, "auto_resume")));
    }
  return o;
}

/* An integer number of seconds in 1..max, or absent (0). */
static int
seconds_param (json_t *o, const char *key, uint64_t *out_s, sbx_error_t **err)
{
  json_t *v = json_object_get (o, key);

  *out_s = 0;
  if (v == NULL || json_is_null (v))
    return 0;
  if (!json_is_integer (v) || json_integer_value (v) <= 0
      || json_integer_value (v) > 10 * 365 * 24 * 3600)
    return sbx_err (err, SBX_E_INVALID, "`%s` must be a whole number of seconds above 0", key);
  *out_s = (uint64_t) json_integer_value (v);
  return 0;
}

/* E2B's lifecycle (autoPause: pause when the lifetime ends; autoResume
   {enabled}: a request to it while paused resumes it, only with
   autoPause, as at E2B) as SBX_LIFECYCLE_* flags. autoPauseMemory false:
   that pause keeps only the files, and the resume boots the sandbox again
   (core/pause_files.c; a VM's keeps its memory, docs/e2b.md); not with
   autoResume, as at E2B. */
static int
e2b_lifecycle (json_t *body, uint32_t *lifecycle, sbx_error_t **err)
{
  json_t *v = json_object_get (body, "autoResume"), *enabled;
  int pause = 0, resume = 0, memory = 1;

  if (sbx_param_bool (body, "autoPause", &pause, err) < 0
      || sbx_param_bool (body, "autoPauseMemory", &memory, err) < 0)
    return -1;
  if (v != NULL && !json_is_null (v))
    {
      static const char *const allowed[] = {"enabled", NULL};
      if (!json_is_object (v) || sbx_params_only (v, allowed, err) < 0)
        return json_is_object (v) ? -1
                                  : sbx_err (err, SBX_E_INVALID,
                                             "autoResume must be an object {\"enabled\": bool}");
      enabled = json_object_get (v, "enabled");
      if (enabled != NULL && !json_is_null (enabled) && !json_is_boolean (enabled))
        return sbx_err (err, SBX_E_INVALID, "autoResume.enabled must be a boolean");
      resume = json_is_true (enabled);
    }
  if (resume && !pause)
    return sbx_err (err, SBX_E_INVALID, "autoResume needs autoPause (onTimeout: pause)");
  if (!memory && resume)
    return sbx_err (err, SBX_E_INVALID,
                    "autoResume cannot go with autoPauseMemory false: a sandbox paused without "
                    "its memory is resumed by connect");
  *lifecycle = (pause ? SBX_LIFECYCLE_PAUSE_ON_TIMEOUT : 0) | (resume ? SBX_LIFECYCLE_AUTO_RESUME : 0)
               | (pause && !memory ? SBX_LIFECYCLE_PAUSE_DROPS_MEMORY : 0);
  return 0;
}

/* E2B's network.allowPublicTraffic as SBX_LIFECYCLE_ flags: true opens
   the sandbox's ports (never its code interpreter nor envd, which need the
   access token) to anyone with the host name, E2B's default, here only
   when asked for; false is sbx's default made explicit (E2B's 403 for a
   missing token). maskRequestHost: the Host header the port proxy sends
   the sandbox's servers ("${PORT}" the port), checked (no header can be
   smuggled after it). */
static int
e2b_public_traffic (json_t *network, uint32_t *lifecycle, const char **mask_host,
                    sbx_error_t **err)
{
  json_t *v = json_is_object (network) ? json_object_get (network, "allowPublicTraffic") : NULL;
  json_t *mask = json_is_object (network) ? json_object_get (network, "maskRequestHost") : NULL;

  if (mask != NULL && !json_is_null (mask))
    {
      if (!json_is_string (mask) || !sbx_mask_host_ok (json_string_value (mask)))
        return sbx_err (err, SBX_E_INVALID,
                        "network.maskRequestHost must be a host[:port] of at most %d letters, "
                        "digits, `.`, `-`, `:` and `${PORT}` (the port asked for)",
                        SBX_MASK_HOST_MAX);
      *mask_host = json_string_value (mask);
    }

  if (v == NULL || json_is_null (v))
    return 0;
  if (!json_is_boolean (v))
    return sbx_err (err, SBX_E_INVALID, "network.allowPublicTraffic must be a boolean");
  *lifecycle |= json_is_true (v) ? SBX_LIFECYCLE_PUBLIC_PORTS : SBX_LIFECYCLE_PRIVATE_EXPLICIT;
  return 0;
}

/* Options sbx cannot honour yet are refused, naming them, rather than
   accepted and quietly ignored. */
static int
refuse_unsupported (json_t *body, sbx_error_t **err)
{
  json_t *v;

  v = json_object_get (body, "mcp");
  if (v != NULL && !json_is_null (v))
    return sbx_err (err, SBX_E_INVALID, "mcp: MCP gateways are not supported by sbx");
  v = json_object_get (body, "volumeMounts");
  if (v != NULL && !json_is_null (v) && !(json_is_array (v) && json_array_size (v) == 0))
    return sbx_err (err, SBX_E_INVALID, "volumeMounts: volumes are not supported by sbx");
  v = json_object_get (body, "iam");
  if (v != NULL && !json_is_null (v))
    return sbx_err (err, SBX_E_INVALID, "iam: workload identity is not supported by sbx");
  return 0; /* network: e2b_network */
}

/* E2B's network.rules ({host: [{transform: {headers: {k: v}}}]}) as sbx's
   ({host: [{headers: {k: v}}]}, core/secrets.h): the values may name sbx
   secrets with ${secret:NAME}. sbx checks the rest (10 domains at most,
   header names, the secrets). *out is NULL (no rules) or new. */
static int
e2b_rules (json_t *rules, json_t **out, sbx_error_t **err)
{
  const char *host;
  json_t *list;

  *out = NULL;
  if (rules == NULL || json_is_null (rules))
    return 0;
  if (!json_is_object (rules))
    return sbx_err (err, SBX_E_INVALID,
                    "network.rules must be an object: {host: [{transform: {headers: {...}}}]}");
  if (json_object_size (rules) == 0)
    return 0;
  *out = json_object ();
  json_object_foreach (rules, host, list)
  {
    json_t *items = json_array (), *item;
    size_t i;
    json_object_set_new (*out, host, items);
    if (!json_is_array (list))
      goto bad;
    json_array_foreach (list, i, item)
    {
      const char *k;
      json_t *v, *headers;
      if (!json_is_object (item))
        goto bad;
      json_object_foreach (item, k, v)
      {
        if (strcmp (k, "transform") != 0)
          {
            json_decref (*out);
            *out = NULL;
            return sbx_err (err, SBX_E_INVALID,
                            "network.rules.%.80s[%zu]: unknown field `%.64s` (transform)", host,
                            i, k);
          }
      }
      headers = json_object_get (json_object_get (item, "transform"), "headers");
      if (headers == NULL)
        goto bad;
      json_array_append_new (items, json_pack ("{s:O}", "headers", headers));
    }
  }
  return 0;
bad:
  json_decref (*out);
  *out = NULL;
  return sbx_err (err, SBX_E_INVALID,
                  "network.rules.%.80s must be [{\"transform\": {\"headers\": {...}}}]", host);
}

/* E2B's network settings as an sbx policy (docs/e2b.md, docs/egress.md).
   E2B: the internet is open unless allow_internet_access is false or
   denyOut holds ALL_TRAFFIC (0.0.0.0/0), and allowOut then lists the
   exceptions. sbx: nothing unless allowed, deny wins. So:
     - closed (false, or ALL_TRAFFIC denied): allow = allowOut, no deny;
     - open: allow = "*", deny = denyOut (an allowOut is then a 400, as
       at E2B, where it needs ALL_TRAFFIC denied);
   and open means allow_internet_access true, or, when it is absent, a
   `network` object given at all (E2B's default); with neither (a bare
   create) the sandbox has no network, sbx's default. Per-host rules and
   an egress proxy of the client's own come later: 400. *canon is NULL
   (none) or new. */
static int
e2b_network (json_t *internet_flag, json_t *network, json_t **canon, sbx_error_t **err)
{
  json_t *allow_out = NULL, *deny_out = NULL, *v, *policy, *empty, *native_rules = NULL;
  int open, all_denied = 0, rc;
  size_t i;

  *canon = NULL;
  if (internet_flag != NULL && json_is_null (internet_flag))
    internet_flag = NULL;
  if (internet_flag != NULL && !json_is_boolean (internet_flag))
    return sbx_err (err, SBX_E_INVALID, "`allow_internet_access` must be a boolean");
  if (network != NULL && json_is_null (network))
    network = NULL;
  if (network != NULL)
    {
      json_t *rules = json_object_get (network, "rules");
      json_t *proxy = json_object_get (network, "egressProxy");
      if (!json_is_object (network))
        return sbx_err (err, SBX_E_INVALID, "`network` must be an object");
      if (proxy != NULL && !json_is_null (proxy))
        return sbx_err (err, SBX_E_INVALID,
                        "network: egressProxy is not supported by this sbx yet"
                        " (allowOut, denyOut and rules are)");
      if (e2b_rules (rules, &native_rules, err) < 0)
        return -1;
      allow_out = json_object_get (network, "allowOut");
      deny_out = json_object_get (network, "denyOut");
      if (allow_out != NULL && json_is_null (allow_out))
        allow_out = NULL;
      if (deny_out != NULL && json_is_null (deny_out))
        deny_out = NULL;
      if ((allow_out != NULL && !json_is_array (allow_out))
          || (deny_out != NULL && !json_is_array (deny_out)))
        return sbx_err (err, SBX_E_INVALID, "network.allowOut and denyOut must be arrays");
      json_array_foreach (deny_out, i, v)
      {
        if (json_is_string (v) && strcmp (json_string_value (v), "0.0.0.0/0") == 0)
          all_denied = 1;
      }
    }
  /* Neither said: sbx's default (no network), or E2B's (the internet)
     where the operator chose it (--e2b-open-internet). */
  if (internet_flag != NULL)
    open = json_is_true (internet_flag);
  else if (network != NULL)
    open = 1;
  else
    {
      const struct sbx_config *cfg = sbx_core_config ();
      open = cfg != NULL && cfg->e2b_open_internet;
    }
  if (all_denied)
    open = 0;
  /* As E2B: allowOut means something only once everything is denied. */
  if (open && json_array_size (allow_out) > 0)
    return sbx_err (err, SBX_E_INVALID,
                    "network.allowOut needs denyOut to hold ALL_TRAFFIC (0.0.0.0/0) or"
                    " allow_internet_access false: the internet is open otherwise");
  empty = json_array ();
  if (open)
    policy = json_pack ("{s:[s], s:O}", "allow", "*", "deny", deny_out ? deny_out : empty);
  else
    policy = json_pack ("{s:O, s:[]}", "allow", allow_out ? allow_out : empty, "deny");
  json_decref (empty);
  if (policy == NULL)
    {
      json_decref (native_rules);
      return sbx_err_oom (err);
    }
  if (native_rules != NULL)
    json_object_set_new (policy, "rules", native_rules);
  rc = sbx_network_canon (policy, canon, err);
  json_decref (policy);
  /* Errors name sbx's lists: allow is allowOut (or "*"), deny denyOut. */
  return rc;
}

void
sbx_route_e2b_create (struct sbx_req *r)
{
  static const char *const allowed[]
      = {"templateID", "timeout",   "metadata",     "envVars", "allow_internet_access",
         "autoPause",  "autoPauseMemory", "autoResume", "mcp",  "network",
         "secure",     "volumeMounts", "iam",        NULL};
  struct sbx_create_opts opts;
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb;
  json_t *body = NULL;
  uint64_t timeout_s = 0;
  int v2 = strcmp (r->segs[0], "v2") == 0, flag = 0;

  memset (&opts, 0, sizeof opts);
  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_string (body, "templateID", &opts.template_name, &err) < 0
      || seconds_param (body, "timeout", &timeout_s, &err) < 0
      || sbx_param_string_map (body, "metadata", 64, 128, 1024, 64 * 1024, 0, &opts.metadata,
                               &err)
             < 0
      || sbx_param_string_map (body, "envVars", 256, 256, 128 * 1024, 128 * 1024, 1, &opts.env,
                               &err)
             < 0
      || sbx_param_bool (body, "allow_internet_access", &flag, &err) < 0
      || sbx_param_bool (body, "secure", &flag, &err) < 0
      || e2b_lifecycle (body, &opts.lifecycle, &err) < 0
      || e2b_public_traffic (json_object_get (body, "network"), &opts.lifecycle, &opts.mask_host,
                             &err)
             < 0
      || refuse_unsupported (body, &err) < 0
      || e2b_network (json_object_get (body, "allow_internet_access"),
                      json_object_get (body, "network"), &opts.network, &err)
             < 0)
    goto fail;
  if (opts.template_name == NULL)
    {
      sbx_err (&err, SBX_E_INVALID, "`templateID` is required");
      goto fail;
    }
  if (!sbx_template_usable (tenant_of (r), opts.template_name)
      && sbx_snapshot_name_valid (opts.template_name))
    {
      /* A snapshot's id is a templateID at E2B: start from it. */
      json_t *found = sbx_snapshot_list (tenant_of (r), opts.template_name, NULL);
      if (json_array_size (found) == 1)
        {
          opts.snapshot = opts.template_name;
          opts.template_name = NULL;
        }
      json_decref (found);
    }
  if (opts.snapshot == NULL && !sbx_template_usable (tenant_of (r), opts.template_name))
    {
      sbx_err (&err, SBX_E_NOT_FOUND,
               "template `%.64s` not found (built in: `base` and `code-interpreter-v1`; others: "
               "sbx template ls)",
               opts.template_name);
      goto fail;
    }
  opts.timeout_ms
      = (timeout_s ? timeout_s : (v2 ? TIMEOUT_V2_DEFAULT_S : TIMEOUT_V1_DEFAULT_S)) * 1000;
  sb = sbx_sandbox_create (tenant_of (r), &opts, &err);
  json_decref (opts.network);
  opts.network = NULL;
  if (sb == NULL)
    goto fail;
  snprintf (r->audit_sandbox, sizeof r->audit_sandbox, "%s", sb->id);
  sbx_reply_json (r, 201, sandbox_json (sb));
  if (r->out_of_memory || r->queue_failed)
    sbx_sandbox_kill (sb, "sandbox killed", NULL); /* nobody learnt its id */
  sbx_sandbox_unref (sb);
  json_decref (body);
  return;
fail:
  json_decref (opts.network);
  json_decref (body);
  sbx_reply_error (r, err);
}

/* PUT /sandboxes/{id}/network: SandboxNetworkUpdateConfig, the whole
   setting (an omitted field is cleared); the next connection of the
   sandbox is judged by it. */
void
sbx_route_e2b_network (struct sbx_req *r)
{
  static const char *const allowed[]
      = {"allowOut", "denyOut", "rules", "egressProxy", "allow_internet_access", NULL};
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = NULL;
  json_t *body = NULL, *canon = NULL, *net = NULL;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0)
    goto fail;
  net = json_deep_copy (body);
  if (net == NULL)
    {
      sbx_err_oom (&err);
      goto fail;
    }
  json_object_del (net, "allow_internet_access");
  if (e2b_network (json_object_get (body, "allow_internet_access"), net, &canon, &err) < 0)
    goto fail;
  sb = sbx_req_sandbox (r, 1, &err);
  if (sb == NULL || sbx_sandbox_set_network (sb, canon, &err) < 0)
    goto fail;
  sbx_reply_empty (r, 204);
  sbx_sandbox_unref (sb);
  json_decref (net);
  json_decref (canon);
  json_decref (body);
  return;
fail:
  if (sb)
    sbx_sandbox_unref (sb);
  json_decref (net);
  json_decref (canon);
  json_decref (body);
  sbx_reply_error (r, err);
}

/* ---- list ---------------------------------------------------------------- */

/* Undo application/x-www-form-urlencoded ('+' and %XX) in place; -1 on a
   bad escape or a NUL. */
static int
form_decode (char *s)
{
  char *o = s;

  for (; *s; s++)
    {
      if (*s == '+')
        *o++ = ' ';
      else if (*s == '%')
        {
          unsigned v = 0;
          int i;
          for (i = 1; i <= 2; i++)
            {
              char c = s[i];
              v <<= 4;
              if (c >= '0' && c <= '9')
                v |= (unsigned) (c - '0');
              else if (c >= 'a' && c <= 'f')
                v |= (unsigned) (c - 'a' + 10);
              else if (c >= 'A' && c <= 'F')
                v |= (unsigned) (c - 'A' + 10);
              else
                return -1;
            }
          if (v == 0)
            return -1;
          *o++ = (char) v;
          s += 2;
        }
      else
        *o++ = *s;
    }
  *o = '\0';
  return 0;
}

/* The SDK's metadata filter: "k=v&k2=v2", itself form-encoded. */
static int
parse_metadata_filter (const char *q, json_t *filter, sbx_error_t **err)
{
  char *copy, *save = NULL, *pair;
  int rc = 0;

  if (strlen (q) > 64 * 1024)
    return sbx_err (err, SBX_E_INVALID, "the metadata filter is too long");
  copy = strdup (q);
  if (copy == NULL)
    return sbx_err_oom (err);
  for (pair = strtok_r (copy, "&", &save); pair; pair = strtok_r (NULL, "&", &save))
    {
      char *eq = strchr (pair, '=');
      json_t *v;
      if (eq == NULL)
        {
          rc = sbx_err (err, SBX_E_INVALID, "metadata filters look like key=value");
          break;
        }
      *eq = '\0';
      if (form_decode (pair) < 0 || form_decode (eq + 1) < 0 || pair[0] == '\0'
          || (v = json_string (eq + 1)) == NULL)
        {
          rc = sbx_err (err, SBX_E_INVALID, "a metadata filter is not valid UTF-8 key=value");
          break;
        }
      json_object_set_new (filter, pair, v);
    }
  free (copy);
  return rc;
}

/* The page token: "STARTED_S.ID" of the last sandbox of the previous
   page (sandboxes are listed by start time, ids break ties). */
static int
parse_page_token (const char *t, int64_t *created, char *id, sbx_error_t **err)
{
  char *end;
  long long ms;

  if (t == NULL || t[0] == '\0')
    return 0;
  ms = strtoll (t, &end, 10);
  if (end == t || *end != '.' || ms < 0 || !sbx_id_valid (end + 1))
    return sbx_err (err, SBX_E_INVALID, "`nextToken` is not a token this server gave");
  *created = ms;
  memcpy (id, end + 1, SBX_ID_LEN + 1);
  return 0;
}

/* An RFC 3339 time in UTC, with or without a fraction ("...:11Z",
   "...:11.042Z", "...:11.042+00:00"), in ms since the epoch; -1 when it is
   not one. */
static int64_t
parse_utc_ms (const char *t)
{
  struct tm tm;
  char *end;
  int64_t ms = 0, scale = 100;

  memset (&tm, 0, sizeof tm);
  if (t == NULL || (end = strptime (t, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
    return -1;
  if (*end == '.')
    for (end++; *end >= '0' && *end <= '9'; end++, scale /= 10)
      ms += scale ? (*end - '0') * scale : 0;
  if (strcmp (end, "Z") != 0 && strcmp (end, "+00:00") != 0)
    return -1;
  return (int64_t) timegm (&tm) * 1000 + ms;
}

/* When a listed sandbox started, in ms (the native description's
   created_at). */
static int64_t
started_ms (json_t *native)
{
  int64_t ms = parse_utc_ms (json_string_value (json_object_get (native, "created_at")));
  return ms < 0 ? 0 : ms;
}

/* Listing order: start time, then id (stable across pages). */
static int
compare_listed (const void *a, const void *b)
{
  json_t *x = *(json_t *const *) a, *y = *(json_t *const *) b;
  int64_t sx = started_ms (x), sy = started_ms (y);

  if (sx != sy)
    return sx < sy ? -1 : 1;
  return strcmp (json_string_value (json_object_get (x, "id")),
                 json_string_value (json_object_get (y, "id")));
}

static int
template_is (json_t *native, const char *name)
{
  const char *t = json_string_value (json_object_get (native, "template"));
  return t != NULL && strcmp (t, name) == 0;
}

static int
after_token (json_t *native, int64_t started, const char *id, int desc)
{
  int64_t s = started_ms (native);
  int cmp = s < started ? -1 : s > started ? 1 : strcmp (json_string_value (json_object_get (native, "id")), id);
  return desc ? cmp < 0 : cmp > 0;
}

static int
state_wanted (json_t *native, int running, int paused)
{
  const char *s = json_string_value (json_object_get (native, "state"));

  return s && strcmp (s, "paused") == 0 ? paused : running;
}

void
sbx_route_e2b_list (struct sbx_req *r)
{
  int v2 = strcmp (r->segs[0], "v2") == 0;
  const char *q_meta = sbx_req_query (r, "metadata"), *q_state = sbx_req_query (r, "state");
  const char *q_limit = sbx_req_query (r, "limit"), *q_order = sbx_req_query (r, "order");
  const char *q_template = sbx_req_query (r, "template");
  const char *q_after = sbx_req_query (r, "startedAfter");
  json_t *filter = json_object (), *all = NULL, *out = json_array (), *native, **sorted = NULL;
  sbx_error_t *err = NULL;
  char token_id[SBX_ID_LEN + 1] = "", next[64] = "";
  int64_t token_started = -1, after_ms = -1;
  long limit = v2 ? LIST_LIMIT_DEFAULT : LIST_LIMIT_MAX;
  int desc = 0, want_running = 1, want_paused = 1;
  size_t i, n, count = 0;

  if (q_meta && parse_metadata_filter (q_meta, filter, &err) < 0)
    goto fail;
  if (q_state)
    {
      /* "running,paused" */
      char copy[64], *save = NULL, *s;
      if (strlen (q_state) >= sizeof copy)
        {
          sbx_err (&err, SBX_E_INVALID, "`state` must be running and/or paused");
          goto fail;
        }
      snprintf (copy, sizeof copy, "%s", q_state);
      want_running = want_paused = 0;
      for (s = strtok_r (copy, ",", &save); s; s = strtok_r (NULL, ",", &save))
        if (strcmp (s, "running") == 0)
          want_running = 1;
        else if (strcmp (s, "paused") == 0)
          want_paused = 1;
        else
          {
            sbx_err (&err, SBX_E_INVALID, "`state` must be running and/or paused, not `%.32s`", s);
            goto fail;
          }
    }
  if (q_limit)
    {
      char *end;
      limit = strtol (q_limit, &end, 10);
      if (*q_limit == '\0' || *end != '\0' || limit < 1 || limit > LIST_LIMIT_MAX)
        {
          sbx_err (&err, SBX_E_INVALID, "`limit` must be 1..%d", LIST_LIMIT_MAX);
          goto fail;
        }
    }
  if (q_order && strcmp (q_order, "asc") != 0 && strcmp (q_order, "desc") != 0)
    {
      sbx_err (&err, SBX_E_INVALID, "`order` must be asc or desc");
      goto fail;
    }
  /* Newest first unless asked otherwise, as E2B lists. */
  desc = !(q_order && strcmp (q_order, "asc") == 0);
  if (q_after && (after_ms = parse_utc_ms (q_after)) < 0)
    {
      sbx_err (&err, SBX_E_INVALID, "`startedAfter` must be an RFC 3339 time in UTC");
      goto fail;
    }
  if (parse_page_token (sbx_req_query (r, "nextToken"), &token_started, token_id, &err) < 0)
    goto fail;

  all = sbx_sandbox_list (sbx_req_tenant (r), filter);
  n = json_array_size (all);
  sorted = n ? calloc (n, sizeof *sorted) : NULL;
  if (n && sorted == NULL)
    {
      json_decref (all);
      sbx_err_oom (&err);
      goto fail;
    }
  for (i = 0; i < n; i++)
    sorted[i] = json_array_get (all, i);
  if (n)
    qsort (sorted, n, sizeof *sorted, compare_listed);
  for (i = 0; i < n && (long) count < limit; i++)
    {
      native = sorted[desc ? n - 1 - i : i];
      if (q_template && !template_is (native, q_template))
        continue;
      if (!state_wanted (native, want_running, want_paused))
        continue;
      if (after_ms >= 0 && started_ms (native) < after_ms)
        continue;
      if (token_id[0] && !after_token (native, token_started, token_id, desc))
        continue;
      json_array_append_new (out, listed_json (native, NULL));
      count++;
      if ((long) count == limit)
        {
          /* A next page exists when anything is left after this one. */
          size_t j;
          for (j = i + 1; j < n; j++)
            {
              json_t *rest = sorted[desc ? n - 1 - j : j];
              if ((!q_template || template_is (rest, q_template))
                  && state_wanted (rest, want_running, want_paused)
                  && (after_ms < 0 || started_ms (rest) >= after_ms))
                {
                  snprintf (next, sizeof next, "%lld.%s", (long long) started_ms (native),
                            json_string_value (json_object_get (native, "id")));
                  break;
                }
            }
        }
    }
  free (sorted);
  json_decref (all);
  json_decref (filter);
  if (!v2)
    {
      sbx_reply_json (r, 200, out);
      return;
    }
  {
    char *text = json_dumps (out, JSON_COMPACT);
    struct MHD_Response *resp;
    json_decref (out);
    if (text == NULL)
      {
        sbx_reply_error (r, NULL);
        return;
      }
    resp = MHD_create_response_from_buffer (strlen (text), text, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL)
      {
        free (text);
        sbx_reply_error (r, NULL);
        return;
      }
    MHD_add_response_header (resp, "Content-Type", "application/json");
    if (next[0])
      MHD_add_response_header (resp, "X-Next-Token", next);
    sbx_reply_response (r, 200, resp);
  }
  return;
fail:
  json_decref (filter);
  json_decref (out);
  sbx_reply_error (r, err);
}

/* ---- one sandbox ---------------------------------------------------------- */

void
sbx_route_e2b_get (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = sbx_req_sandbox (r, 1, &err);
  json_t *native;

  if (sb == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  native = sbx_sandbox_json (sb);
  sbx_reply_json (r, 200, listed_json (native, sb));
  json_decref (native);
  sbx_sandbox_unref (sb);
}

void
sbx_route_e2b_kill (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  struct sbx_sandbox *sb = sbx_req_sandbox (r, 1, &err);

  if (sb == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  sbx_sandbox_kill (sb, "sandbox killed", NULL);
  sbx_sandbox_unref (sb);
  sbx_reply_empty (r, 204);
}

/* The sandbox of segment seg and the seconds of a body field. */
static struct sbx_sandbox *
sandbox_and_seconds (struct sbx_req *r, int seg, const char *field, int required,
                     uint64_t *seconds, sbx_error_t **err)
{
  static const char *const allowed[] = {"timeout", "duration", "memory", NULL};
  json_t *body = NULL;
  struct sbx_sandbox *sb = NULL;

  if (sbx_req_json (r, &body, err) < 0 || sbx_params_only (body, allowed, err) < 0
      || seconds_param (body, field, seconds, err) < 0)
    goto out;
  if (*seconds == 0 && required)
    {
      sbx_err (err, SBX_E_INVALID, "`%s` is required", field);
      goto out;
    }
  sb = sbx_req_sandbox (r, seg, err);
out:
  json_decref (body);
  return sb;
}

void
sbx_route_e2b_timeout (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  uint64_t s = 0;
  struct sbx_sandbox *sb = sandbox_and_seconds (r, 1, "timeout", 1, &s, &err);

  /* E2B's setTimeout replaces the deadline, measured from now (it may
     shorten it). */
  if (sb == NULL || sbx_sandbox_set_timeout (sb, s * 1000, &err) < 0)
    sbx_reply_error (r, err);
  else
    sbx_reply_empty (r, 204);
  if (sb)
    sbx_sandbox_unref (sb);
}

/* Connect and refresh only ever extend the deadline. */
static int
extend (struct sbx_sandbox *sb, uint64_t seconds, sbx_error_t **err)
{
  if ((int64_t) seconds * 1000 > sbx_sandbox_expires_ms (sb) - sbx_now_ms ())
    return sbx_sandbox_set_timeout (sb, seconds * 1000, err);
  return 0;
}

void
sbx_route_e2b_connect (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  uint64_t s = 0;
  int v2 = strcmp (r->segs[0], "v2") == 0;
  struct sbx_sandbox *sb = sandbox_and_seconds (r, v2 ? 2 : 1, "timeout", !v2, &s, &err);

  if (sb != NULL && sbx_sandbox_is_paused (sb))
    {
      /* Connect resumes a paused sandbox (201), with the lifetime asked
         for (or what it had left). A concurrent resume may win: then it
         runs, as asked. */
      if (sbx_sandbox_resume (sb, s * 1000, &err) < 0 && err->kind == SBX_E_CONFLICT)
        {
          sbx_error_free (err);
          err = NULL;
        }
      if (err)
        sbx_reply_error (r, err);
      else
        sbx_reply_json (r, 201, sandbox_json (sb));
    }
  else if (sb == NULL || (s > 0 && extend (sb, s, &err) < 0))
    sbx_reply_error (r, err);
  else
    sbx_reply_json (r, 200, sandbox_json (sb)); /* 200: it was running */
  if (sb)
    sbx_sandbox_unref (sb);
}

/* POST /sandboxes/{id}/pause {"memory"?}: 204; 409 when already paused.
   A namespace sandbox is frozen (its memory stays resident), or with
   memory false its files are kept and its processes end, and connect
   boots it again (core/pause_files.c); a VM is hibernated, as E2B's pause
   persists one: its memory goes to a file and its QEMU ends, and connect
   restores it, whatever `memory` says (its disk lives in its memory). */
void
sbx_route_e2b_pause (struct sbx_req *r)
{
  static const char *const allowed[] = {"memory", NULL};
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  cleanup_json json_t *body = NULL;
  int memory = 1;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_bool (body, "memory", &memory, &err) < 0)
    goto fail;
  sb = sbx_req_sandbox (r, 1, &err);
  if (sb == NULL
      || (sb->isolation == SBX_ISOLATION_VM ? sbx_sandbox_hibernate (sb, &err)
          : memory                          ? sbx_sandbox_pause (sb, &err)
                                            : sbx_sandbox_pause_files (sb, -1, &err))
             < 0)
    goto fail;
  sbx_reply_empty (r, 204);
  return;
fail:
  sbx_reply_error (r, err);
}

/* POST /sandboxes/{id}/fork {"timeout"?, "count"?}: 201
   [{"sandbox": Sandbox}...]; all or nothing (an error is the answer's
   status, not an item). Processes are not carried (docs/e2b.md), but
   a VM's are (its memory, docs/vm.md). */
void
sbx_route_e2b_fork (struct sbx_req *r)
{
  static const char *const allowed[] = {"timeout", "count", NULL};
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  struct sbx_fork_result res;
  cleanup_json json_t *body = NULL;
  json_t *arr;
  uint64_t s = 0, count = 1;
  unsigned i;

  memset (&res, 0, sizeof res);
  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || seconds_param (body, "timeout", &s, &err) < 0
      || sbx_param_uint (body, "count", &count, &err) < 0)
    goto fail;
  if (json_object_get (body, "count") == NULL || json_is_null (json_object_get (body, "count")))
    count = 1;
  if (count < 1 || count > SBX_FORK_MAX)
    {
      sbx_err (&err, SBX_E_INVALID, "count must be 1 to %d", SBX_FORK_MAX);
      goto fail;
    }
  sb = sbx_req_sandbox (r, 1, &err);
  if (sb == NULL || sbx_sandbox_fork (sb, (unsigned) count, s * 1000, &res, &err) < 0)
    goto fail;
  arr = json_array ();
  for (i = 0; i < res.n; i++)
    json_array_append_new (arr, json_pack ("{s:o}", "sandbox", sandbox_json (res.sb[i])));
  sbx_reply_json (r, 201, arr);
  if (r->out_of_memory || r->queue_failed)
    for (i = 0; i < res.n; i++)
      sbx_sandbox_kill (res.sb[i], "sandbox killed", NULL);
  sbx_fork_result_release (&res);
  return;
fail:
  sbx_reply_error (r, err);
}

/* ---- snapshots: E2B's are templates (a snapshot's id is a templateID) ---- */

static json_t *
e2b_snapshot_json (json_t *native)
{
  return json_pack ("{s:O, s:[O], s:O, s:O}", "snapshotID", json_object_get (native, "name"),
                    "names", json_object_get (native, "name"), "sandboxID",
                    json_object_get (native, "source"), "createdAt",
                    json_object_get (native, "created_at"));
}

/* POST /sandboxes/{id}/snapshots {"name"?}: 201 {snapshotID, names}. */
void
sbx_route_e2b_snapshot_create (struct sbx_req *r)
{
  static const char *const allowed[] = {"name", NULL};
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  cleanup_json json_t *body = NULL;
  json_t *snap;
  const char *name = NULL;
  char gen[32];

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || sbx_param_string (body, "name", &name, &err) < 0)
    goto fail;
  if (name == NULL)
    {
      char hex[17];
      sbx_random_hex (hex, 8);
      snprintf (gen, sizeof gen, "snap-%s", hex);
      name = gen;
    }
  sb = sbx_req_sandbox (r, 1, &err);
  if (sb == NULL || (snap = sbx_snapshot_create (sb, name, &err)) == NULL)
    goto fail;
  sbx_reply_json (r, 201, e2b_snapshot_json (snap));
  json_decref (snap);
  return;
fail:
  sbx_reply_error (r, err);
}

/* GET /snapshots?sandboxID=&name=: the tenant's, [{snapshotID, names, ...}]. */
void
sbx_route_e2b_snapshot_list (struct sbx_req *r)
{
  const char *q_sandbox = sbx_req_query (r, "sandboxID"), *q_name = sbx_req_query (r, "name");
  sbx_error_t *err = NULL;
  json_t *all = sbx_snapshot_list (tenant_of (r), NULL, &err), *out, *v;
  size_t i;

  if (all == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  out = json_array ();
  json_array_foreach (all, i, v)
  {
    if (q_sandbox && strcmp (q_sandbox, json_string_value (json_object_get (v, "source"))) != 0)
      continue;
    if (q_name && strcmp (q_name, json_string_value (json_object_get (v, "name"))) != 0)
      continue;
    json_array_append_new (out, e2b_snapshot_json (v));
  }
  json_decref (all);
  sbx_reply_json (r, 200, out);
}

/* DELETE /templates/{id}: deletes a snapshot (sbx's templates are built in). */
void
sbx_route_e2b_template_delete (struct sbx_req *r)
{
  sbx_error_t *err = NULL;

  if (sbx_snapshot_delete (tenant_of (r), r->segs[1], &err) < 0)
    sbx_reply_error (r, err);
  else
    sbx_reply_empty (r, 204);
}

/* GET /templates/aliases/{alias} (the SDK's Template.exists): 200
   {"templateID", "public"} for a template or snapshot the caller may start
   from; 403 for another tenant's, as E2B answers for another team's (the
   names are one namespace: a build of that name would be refused anyway);
   404 for none. */
void
sbx_route_e2b_template_alias (struct sbx_req *r)
{
  const char *alias = r->segs[2];
  int everyone = 0, whose = sbx_template_lookup (tenant_of (r), alias, &everyone);

  if (whose < 0 && sbx_snapshot_name_valid (alias))
    {
      json_t *mine = sbx_snapshot_list (tenant_of (r), alias, NULL);
      json_t *any = json_array_size (mine) ? NULL : sbx_snapshot_list (NULL, alias, NULL);
      whose = json_array_size (mine) ? 1 : json_array_size (any) ? 0 : -1;
      json_decref (mine);
      json_decref (any);
    }
  if (whose < 0)
    sbx_reply_errorf (r, SBX_E_NOT_FOUND, "template `%.64s` not found", alias);
  else if (whose == 0)
    sbx_reply_errorf (r, SBX_E_FORBIDDEN, "template `%.64s` is another tenant's", alias);
  else
    sbx_reply_json (r, 200, json_pack ("{s:s,s:b}", "templateID", alias, "public", everyone));
}

/* POST /sandboxes/{id}/resume {"timeout"?, "autoPause"?} (deprecated at
   E2B, connect replaces it): 201 Sandbox; 409 when it is not paused. */
void
sbx_route_e2b_resume (struct sbx_req *r)
{
  static const char *const allowed[] = {"timeout", "autoPause", NULL};
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = NULL;
  cleanup_json json_t *body = NULL;
  uint64_t s = 0;
  int auto_pause = 0;

  if (sbx_req_json (r, &body, &err) < 0 || sbx_params_only (body, allowed, &err) < 0
      || seconds_param (body, "timeout", &s, &err) < 0
      || sbx_param_bool (body, "autoPause", &auto_pause, &err) < 0)
    goto fail;
  sb = sbx_req_sandbox (r, 1, &err);
  if (sb == NULL || sbx_sandbox_resume (sb, s * 1000, &err) < 0)
    goto fail;
  sbx_reply_json (r, 201, sandbox_json (sb));
  return;
fail:
  sbx_reply_error (r, err);
}

void
sbx_route_e2b_refresh (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  uint64_t s = 0;
  struct sbx_sandbox *sb = sandbox_and_seconds (r, 1, "duration", 0, &s, &err);

  if (sb == NULL || (s > 0 && extend (sb, s, &err) < 0))
    sbx_reply_error (r, err);
  else
    sbx_reply_empty (r, 204);
  if (sb)
    sbx_sandbox_unref (sb);
}

static json_t *
e2b_sample (const struct sbx_metrics_sample *s)
{
  json_t *o = json_object ();
  int cpu_count = (int) (s->cpus + 0.999);

  json_object_set_new (o, "timestamp", sbx_json_time (s->ms));
  json_object_set_new (o, "timestampUnix", json_integer (s->ms / 1000));
  json_object_set_new (o, "cpuCount", json_integer (cpu_count < 1 ? 1 : cpu_count));
  json_object_set_new (o, "cpuUsedPct", json_real (s->cpu_used_pct));
  json_object_set_new (o, "memUsed", json_integer (s->mem_used));
  json_object_set_new (o, "memTotal", json_integer (s->mem_total));
  json_object_set_new (o, "memCache", json_integer (0));
  json_object_set_new (o, "diskUsed", json_integer (s->disk_used));
  json_object_set_new (o, "diskTotal", json_integer (s->disk_total));
  return o;
}

/* GET /sandboxes/{id}/metrics[?start=S&end=S]: the samples kept (one per
   SBX_METRICS_INTERVAL_MS while it runs, core/metrics_history.c) in the
   range, oldest first, and one of now when the range covers now (give or
   take a 5 s bucket, as E2B's are: the SDK rounds its times to seconds);
   without a range every kept sample and now's. */
void
sbx_route_e2b_metrics (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  cleanup_sandbox struct sbx_sandbox *sb = sbx_req_sandbox (r, 1, &err);
  struct sbx_metrics_sample *kept = NULL, now_sample;
  int64_t now = sbx_now_ms ();
  uint64_t start_s = 0, end_s = UINT64_MAX;
  const char *q_start = sbx_req_query (r, "start"), *q_end = sbx_req_query (r, "end");
  int64_t from_ms, to_ms;
  size_t n = 0, i;
  json_t *arr;

  if (sb == NULL)
    {
      sbx_reply_error (r, err);
      return;
    }
  if ((q_start && sbx_parse_uint64 (q_start, &start_s, &err) < 0)
      || (q_end && sbx_parse_uint64 (q_end, &end_s, &err) < 0) || start_s > end_s
      || (q_start && start_s > INT64_MAX / 1000))
    {
      sbx_error_free (err);
      sbx_reply_errorf (r, SBX_E_INVALID,
                        "`start` and `end` must be Unix times in seconds, start <= end");
      return;
    }
  from_ms = (int64_t) start_s * 1000 - 5000;
  to_ms = end_s >= (uint64_t) INT64_MAX / 1000 ? INT64_MAX : (int64_t) end_s * 1000 + 5999;
  if (sbx_sandbox_metrics_history (sb, from_ms, to_ms, &kept, &n, &err) < 0)
    {
      sbx_reply_error (r, err);
      return;
    }
  arr = json_array ();
  for (i = 0; i < n; i++)
    json_array_append_new (arr, e2b_sample (&kept[i]));
  free (kept);
  if (now >= from_ms && now <= to_ms)
    {
      if (sbx_sandbox_metrics_now (sb, &now_sample, &err) < 0)
        {
          /* Paused without its memory (or hibernated): no figure of now;
             what was kept stands. */
          if (err->kind != SBX_E_CONFLICT || json_array_size (arr) == 0)
            {
              json_decref (arr);
              sbx_reply_error (r, err);
              return;
            }
          sbx_error_free (err);
        }
      else
        json_array_append_new (arr, e2b_sample (&now_sample));
    }
  sbx_reply_json (r, 200, arr);
}

void
sbx_route_e2b_health (struct sbx_req *r)
{
  sbx_reply_json (r, 200, json_pack ("{s:s}", "status", "ok"));
}
