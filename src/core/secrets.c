/* sbx: secrets and credential rules (see core/secrets.h). */
#include "core/secrets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/store.h"
#include "egress/policy.h"
#include "util/id.h"

int
sbx_secret_name_valid (const char *name)
{
  size_t i;

  if (name == NULL || name[0] == '\0' || (name[0] >= '0' && name[0] <= '9'))
    return 0;
  for (i = 0; name[i]; i++)
    {
      char c = name[i];
      if (i >= SBX_SECRET_NAME_MAX
          || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
               || c == '_'))
        return 0;
    }
  return 1;
}

int
sbx_secret_value_check (const char *value, size_t len, sbx_error_t **err)
{
  size_t i;

  if (len == 0)
    return sbx_err (err, SBX_E_INVALID, "secret value is empty");
  if (len > SBX_SECRET_VALUE_MAX)
    return sbx_err (err, SBX_E_INVALID, "secret value is %zu bytes; at most %d are allowed", len,
                    SBX_SECRET_VALUE_MAX);
  for (i = 0; i < len; i++)
    {
      unsigned char c = (unsigned char) value[i];
      if (c == '\0')
        return sbx_err (err, SBX_E_INVALID, "secret value contains a NUL byte");
      if (c == '\r' || c == '\n')
        return sbx_err (err, SBX_E_INVALID,
                        "secret value contains CR or LF (it must fit in one HTTP header)");
      if ((c < 0x20 && c != '\t') || c == 0x7f)
        return sbx_err (err, SBX_E_INVALID, "secret value contains a control byte (0x%02x)", c);
    }
  if (value[0] == ' ' || value[0] == '\t' || value[len - 1] == ' ' || value[len - 1] == '\t')
    return sbx_err (err, SBX_E_INVALID,
                    "secret value starts or ends with white space (HTTP would drop it)");
  return 0;
}

static int
name_error (const char *what, const char *name, sbx_error_t **err)
{
  return sbx_err (err, SBX_E_INVALID,
                  "%s `%.80s` is not a secret name (1 to %d of A-Z, a-z, 0-9 and _, not starting"
                  " with a digit)",
                  what, name ? name : "", SBX_SECRET_NAME_MAX);
}

static void
count_one (const char *name, const char *desc, int64_t created, void *arg)
{
  (void) name;
  (void) desc;
  (void) created;
  (*(size_t *) arg)++;
}

int
sbx_secret_create (struct sbx_store *st, const char *tenant, const char *name, const char *value,
                   size_t len, const char *description, int64_t *created_ms, sbx_error_t **err)
{
  struct timespec ts;
  size_t count = 0, i;

  if (!sbx_secret_name_valid (name))
    return name_error ("name", name, err);
  if (sbx_secret_value_check (value, len, err) < 0)
    return -1;
  if (description != NULL)
    {
      if (strlen (description) > SBX_SECRET_DESC_MAX)
        return sbx_err (err, SBX_E_INVALID, "description is longer than %d bytes",
                        SBX_SECRET_DESC_MAX);
      for (i = 0; description[i]; i++)
        if ((unsigned char) description[i] < 0x20 || description[i] == 0x7f)
          return sbx_err (err, SBX_E_INVALID, "description contains a control byte");
    }
  if (sbx_store_secret_list (st, tenant, count_one, &count, err) < 0)
    return -1;
  if (count >= SBX_SECRETS_PER_TENANT)
    return sbx_err (err, SBX_E_LIMIT, "this tenant has %d secrets already; delete some first",
                    SBX_SECRETS_PER_TENANT);
  clock_gettime (CLOCK_REALTIME, &ts);
  *created_ms = (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  return sbx_store_secret_insert (st, tenant, name, value, len, description, *created_ms, err);
}

int
sbx_secret_delete (struct sbx_store *st, const char *tenant, const char *name, sbx_error_t **err)
{
  if (!sbx_secret_name_valid (name))
    return name_error ("name", name, err);
  return sbx_store_secret_delete (st, tenant, name, err);
}

static void
list_one (const char *name, const char *desc, int64_t created, void *arg)
{
  char when[64];
  time_t t = (time_t) (created / 1000);
  struct tm tm;

  gmtime_r (&t, &tm);
  snprintf (when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) (created % 1000));
  json_array_append_new (arg, json_pack ("{s:s, s:s, s:s}", "name", name, "description", desc,
                                         "created_at", when));
}

json_t *
sbx_secret_list (struct sbx_store *st, const char *tenant, sbx_error_t **err)
{
  json_t *a = json_array ();

  if (a == NULL)
    {
      sbx_err_oom (err);
      return NULL;
    }
  if (sbx_store_secret_list (st, tenant, list_one, a, err) < 0)
    {
      json_decref (a);
      return NULL;
    }
  return a;
}

/* ---- rules ------------------------------------------------------------- */

static int
is_tchar (unsigned char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
         || (c != '\0' && strchr ("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Headers a rule may not set: they frame the message or belong to the
   proxy; setting them would let a rule smuggle requests. */
static int
reserved_header (const char *name)
{
  static const char *const names[]
      = {"host",    "content-length", "transfer-encoding", "connection", "keep-alive",
         "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "trailer",
         "upgrade", "expect", NULL};
  size_t i;

  for (i = 0; names[i]; i++)
    if (strcasecmp (names[i], name) == 0)
      return 1;
  return 0;
}

/* Call fn for every ${secret:NAME} in a header template; -1 (err) when one
   is malformed. */
static int
template_refs (const char *v, int (*fn) (const char *name, size_t n, void *arg), void *arg,
               sbx_error_t **err)
{
  const char *p = v;

  while ((p = strstr (p, "${")) != NULL)
    {
      const char *end = strchr (p, '}');
      char name[SBX_SECRET_NAME_MAX + 1];
      size_t n;
      if (strncmp (p + 2, "secret:", 7) != 0 || end == NULL)
        return sbx_err (err, SBX_E_INVALID,
                        "`${` in a header value must start `${secret:NAME}` (a literal `${` is"
                        " not allowed)");
      n = (size_t) (end - (p + 9));
      if (n == 0 || n > SBX_SECRET_NAME_MAX)
        return sbx_err (err, SBX_E_INVALID, "`${secret:...}` names no valid secret");
      memcpy (name, p + 9, n);
      name[n] = '\0';
      if (!sbx_secret_name_valid (name))
        return name_error ("${secret:...}", name, err);
      if (fn && fn (name, n, arg) < 0)
        return -1;
      p = end + 1;
    }
  return 0;
}

static int
canon_headers (json_t *h, const char *where, json_t *out, sbx_error_t **err)
{
  const char *k;
  json_t *v;

  if (!json_is_object (h))
    return sbx_err (err, SBX_E_INVALID, "%s.headers must be an object of strings", where);
  if (json_object_size (h) == 0 || json_object_size (h) > SBX_RULES_MAX_HEADERS)
    return sbx_err (err, SBX_E_INVALID, "%s.headers must have 1 to %d headers", where,
                    SBX_RULES_MAX_HEADERS);
  json_object_foreach (h, k, v)
  {
    const char *s = json_string_value (v);
    size_t i, len;
    if (k[0] == '\0' || strlen (k) > SBX_RULE_HEADER_NAME_MAX)
      return sbx_err (err, SBX_E_INVALID, "%s.headers: a header name must be 1 to %d bytes",
                      where, SBX_RULE_HEADER_NAME_MAX);
    for (i = 0; k[i]; i++)
      if (!is_tchar ((unsigned char) k[i]))
        return sbx_err (err, SBX_E_INVALID, "%s.headers: `%.64s` is not a valid header name",
                        where, k);
    if (reserved_header (k))
      return sbx_err (err, SBX_E_INVALID, "%s.headers: a rule may not set `%s`", where, k);
    if (s == NULL)
      return sbx_err (err, SBX_E_INVALID, "%s.headers.%s must be a string", where, k);
    len = json_string_length (v);
    if (len > SBX_RULE_HEADER_VALUE_MAX || strlen (s) != len)
      return sbx_err (err, SBX_E_INVALID,
                      "%s.headers.%s must be at most %d bytes with no NUL", where, k,
                      SBX_RULE_HEADER_VALUE_MAX);
    for (i = 0; i < len; i++)
      if (((unsigned char) s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f)
        return sbx_err (err, SBX_E_INVALID,
                        "%s.headers.%s contains a control byte (CR, LF...)", where, k);
    if (template_refs (s, NULL, NULL, err) < 0)
      return sbx_err_wrap (err, "%s.headers.%s", where, k);
    json_object_set_new (out, k, json_string (s));
  }
  return 0;
}

static int
canon_names (json_t *a, const char *where, json_t **out, sbx_error_t **err)
{
  json_t *v;
  size_t i;

  if (!json_is_array (a) || json_array_size (a) > SBX_SECRETS_ENV_MAX)
    return sbx_err (err, SBX_E_INVALID, "%s must be an array of at most %d secret names", where,
                    SBX_SECRETS_ENV_MAX);
  *out = json_array ();
  json_array_foreach (a, i, v)
  {
    if (!sbx_secret_name_valid (json_string_value (v)))
      return name_error (where, json_string_value (v), err);
    json_array_append (*out, v);
  }
  return 0;
}

static int
canon_rules (json_t *rules, json_t *out, sbx_error_t **err)
{
  const char *host;
  json_t *list;

  if (!json_is_object (rules))
    return sbx_err (err, SBX_E_INVALID,
                    "network.rules must be an object: {\"HOST\": [{\"headers\": {...}}]}");
  if (json_object_size (rules) > SBX_RULES_MAX_DOMAINS)
    return sbx_err (err, SBX_E_INVALID, "network.rules has %zu domains; at most %d are allowed",
                    json_object_size (rules), SBX_RULES_MAX_DOMAINS);
  json_object_foreach (rules, host, list)
  {
    struct sbx_net_entry e;
    char canon_host[SBX_NET_ENTRY_MAX + 64], where[SBX_NET_ENTRY_MAX + 128];
    json_t *items, *item;
    size_t i;

    if (sbx_net_entry_parse (host, &e, err) < 0)
      return sbx_err_wrap (err, "network.rules");
    if (e.kind != SBX_NET_NAME && e.kind != SBX_NET_SUFFIX)
      return sbx_err (err, SBX_E_INVALID,
                      "network.rules: `%.80s` must be a host name or *.domain (rules apply to"
                      " names, which TLS certificates carry)",
                      host);
    sbx_net_entry_format (&e, canon_host, sizeof canon_host);
    if (json_object_get (out, canon_host) != NULL)
      return sbx_err (err, SBX_E_INVALID, "network.rules: `%s` is given twice", canon_host);
    if (!json_is_array (list) || json_array_size (list) == 0
        || json_array_size (list) > SBX_RULES_MAX_ITEMS)
      return sbx_err (err, SBX_E_INVALID, "network.rules.%s must be an array of 1 to %d rules",
                      canon_host, SBX_RULES_MAX_ITEMS);
    items = json_array ();
    json_object_set_new (out, canon_host, items);
    json_array_foreach (list, i, item)
    {
      const char *k;
      json_t *v, *c = json_object ();
      snprintf (where, sizeof where, "network.rules.%s[%zu]", canon_host, i);
      json_array_append_new (items, c);
      if (!json_is_object (item))
        return sbx_err (err, SBX_E_INVALID, "%s must be an object", where);
      json_object_foreach (item, k, v)
      {
        if (strcmp (k, "headers") == 0)
          {
            json_t *h = json_object ();
            json_object_set_new (c, "headers", h);
            if (canon_headers (v, where, h, err) < 0)
              return -1;
          }
        else if (strcmp (k, "placeholders") == 0)
          {
            json_t *names = NULL;
            int rc = canon_names (v, "placeholders", &names, err);
            if (names)
              json_object_set_new (c, "placeholders", names);
            if (rc < 0)
              return sbx_err_wrap (err, "%s", where);
          }
        else
          return sbx_err (err, SBX_E_INVALID, "%s: unknown field `%.64s` (headers, placeholders)",
                          where, k);
      }
      if (json_object_size (c) == 0)
        return sbx_err (err, SBX_E_INVALID, "%s has neither headers nor placeholders", where);
    }
  }
  return 0;
}

static int
placeholder_valid (const char *s)
{
  size_t i, n = strlen (SBX_PLACEHOLDER_PREFIX);

  if (s == NULL || strlen (s) != SBX_PLACEHOLDER_LEN || strncmp (s, SBX_PLACEHOLDER_PREFIX, n) != 0)
    return 0;
  for (i = n; s[i]; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

static int
canon_env (json_t *env, json_t *out, sbx_error_t **err)
{
  const char *k;
  json_t *v;

  if (!json_is_object (env) || json_object_size (env) > SBX_SECRETS_ENV_MAX)
    return sbx_err (err, SBX_E_INVALID,
                    "network.secrets_env must be an object of at most %d {\"VAR\": \"SECRET\"}",
                    SBX_SECRETS_ENV_MAX);
  json_object_foreach (env, k, v)
  {
    const char *secret = json_string_value (v), *ph = NULL;
    json_t *o;
    /* The variable name: what a shell takes. */
    if (!sbx_secret_name_valid (k))
      return sbx_err (err, SBX_E_INVALID,
                      "network.secrets_env: `%.64s` is not an environment variable name", k);
    if (json_is_object (v))
      {
        const char *f;
        json_t *fv;
        json_object_foreach (v, f, fv)
        {
          if (strcmp (f, "secret") != 0 && strcmp (f, "placeholder") != 0)
            return sbx_err (err, SBX_E_INVALID,
                            "network.secrets_env.%s: unknown field `%.64s` (secret, placeholder)",
                            k, f);
        }
        secret = json_string_value (json_object_get (v, "secret"));
        ph = json_string_value (json_object_get (v, "placeholder"));
        if (json_object_get (v, "placeholder") && !placeholder_valid (ph))
          return sbx_err (err, SBX_E_INVALID,
                          "network.secrets_env.%s.placeholder must be %s and 32 hex digits", k,
                          SBX_PLACEHOLDER_PREFIX);
      }
    if (!sbx_secret_name_valid (secret))
      return name_error ("network.secrets_env: secret", secret, err);
    o = json_pack ("{s:s}", "secret", secret);
    if (ph)
      json_object_set_new (o, "placeholder", json_string (ph));
    json_object_set_new (out, k, o);
  }
  return 0;
}

int
sbx_rules_canon (json_t *in, json_t *out, sbx_error_t **err)
{
  json_t *rules = json_object_get (in, "rules"), *env = json_object_get (in, "secrets_env");

  if (rules != NULL && !json_is_null (rules))
    {
      json_t *c = json_object ();
      json_object_set_new (out, "rules", c);
      if (canon_rules (rules, c, err) < 0)
        return -1;
      if (json_object_size (c) == 0)
        json_object_del (out, "rules");
    }
  if (env != NULL && !json_is_null (env))
    {
      json_t *c = json_object ();
      json_object_set_new (out, "secrets_env", c);
      if (canon_env (env, c, err) < 0)
        return -1;
      if (json_object_size (c) == 0)
        json_object_del (out, "secrets_env");
    }
  return 0;
}

/* ---- binding to a tenant ----------------------------------------------- */

static void wipe_buf (struct sbx_buf *b);

struct exists_ctx
{
  struct sbx_store *st;
  const char *tenant;
};

static int
secret_exists (const char *name, size_t n, void *arg)
{
  struct exists_ctx *c = arg;
  sbx_error_t *e = NULL;
  char *value = NULL;
  size_t len = 0;
  int rc;

  (void) n;
  rc = sbx_store_secret_get (c->st, c->tenant, name, &value, &len, &e);
  if (value)
    {
      explicit_bzero (value, len);
      free (value);
    }
  if (rc == 0)
    return 0;
  sbx_error_free (e);
  return -1;
}

static int
need (struct exists_ctx *c, const char *name, const char *where, sbx_error_t **err)
{
  if (secret_exists (name, strlen (name), c) == 0)
    return 0;
  return sbx_err (err, SBX_E_INVALID, "%s: secret `%s` does not exist (create it first)", where,
                  name);
}

struct ref_ctx
{
  struct exists_ctx *c;
  const char *where;
  sbx_error_t **err;
};

static int
need_ref (const char *name, size_t n, void *arg)
{
  struct ref_ctx *r = arg;
  (void) n;
  return need (r->c, name, r->where, r->err);
}

int
sbx_network_bind (struct sbx_store *st, const char *tenant, json_t *canon, json_t *old,
                  sbx_error_t **err)
{
  struct exists_ctx c = {st, tenant};
  json_t *rules = json_object_get (canon, "rules"), *env = json_object_get (canon, "secrets_env");
  json_t *old_env = json_object_get (old, "secrets_env"), *list, *v;
  const char *host, *k;

  if (canon == NULL)
    return 0;
  json_object_foreach (rules, host, list)
  {
    json_t *item;
    size_t i;
    json_array_foreach (list, i, item)
    {
      json_t *h = json_object_get (item, "headers"), *names = json_object_get (item, "placeholders");
      char where[400];
      const char *hk;
      json_t *hv;
      size_t j;
      snprintf (where, sizeof where, "network.rules.%s[%zu]", host, i);
      json_object_foreach (h, hk, hv)
      {
        struct ref_ctx r = {&c, where, err};
        if (template_refs (json_string_value (hv), need_ref, &r, err) < 0)
          return -1;
      }
      json_array_foreach (names, j, v)
      {
        if (need (&c, json_string_value (v), where, err) < 0)
          return -1;
      }
    }
  }
  json_object_foreach (env, k, v)
  {
    const char *secret = json_string_value (json_object_get (v, "secret"));
    json_t *prev = json_object_get (old_env, k);
    if (need (&c, secret, "network.secrets_env", err) < 0)
      return -1;
    if (json_object_get (v, "placeholder"))
      continue;
    if (prev && json_is_string (json_object_get (prev, "placeholder"))
        && strcmp (json_string_value (json_object_get (prev, "secret")), secret) == 0)
      json_object_set (v, "placeholder", json_object_get (prev, "placeholder"));
    else
      {
        char ph[SBX_PLACEHOLDER_LEN + 1];
        memcpy (ph, SBX_PLACEHOLDER_PREFIX, strlen (SBX_PLACEHOLDER_PREFIX));
        sbx_random_hex (ph + strlen (SBX_PLACEHOLDER_PREFIX), 16);
        ph[SBX_PLACEHOLDER_LEN] = '\0';
        json_object_set_new (v, "placeholder", json_string (ph));
      }
  }
  if (rules != NULL)
    {
      /* What each connection will carry to the egress process, with the
         values as they are now (a secret cannot change, only go). */
      struct sbx_buf b = SBX_BUF_INIT;
      uint32_t nh, ns, nb;
      int rc = sbx_rules_resolve (st, tenant, canon, &b, &nh, &ns, &nb);
      size_t len = b.len;
      wipe_buf (&b);
      if (rc < 0)
        return sbx_err_oom (err);
      if (len > SBX_RULES_RESOLVED_MAX)
        return sbx_err (err, SBX_E_INVALID,
                        "network.rules: the headers with their secrets come to %zu bytes; at most"
                        " %d are allowed",
                        len, SBX_RULES_RESOLVED_MAX);
    }
  return 0;
}

/* ---- resolution for the egress process --------------------------------- */

static void
put (struct sbx_buf *b, const char *s, size_t n)
{
  sbx_buf_append (b, s, n);
  sbx_buf_append (b, "", 1);
}

/* tmpl with every ${secret:NAME} replaced into out; -1 with *missing set
   to the first secret that does not exist. */
static int
expand (struct sbx_store *st, const char *tenant, const char *tmpl, struct sbx_buf *out,
        char *missing, size_t cap)
{
  const char *p = tmpl, *ref;

  while ((ref = strstr (p, "${secret:")) != NULL)
    {
      const char *end = strchr (ref, '}');
      char name[SBX_SECRET_NAME_MAX + 1], *value = NULL;
      size_t n = end ? (size_t) (end - ref - 9) : 0, len = 0;
      sbx_error_t *e = NULL;
      if (end == NULL || n == 0 || n > SBX_SECRET_NAME_MAX)
        return -1;
      sbx_buf_append (out, p, (size_t) (ref - p));
      memcpy (name, ref + 9, n);
      name[n] = '\0';
      if (sbx_store_secret_get (st, tenant, name, &value, &len, &e) < 0)
        {
          sbx_error_free (e);
          snprintf (missing, cap, "%s", name);
          return -1;
        }
      sbx_buf_append (out, value, len);
      explicit_bzero (value, len);
      free (value);
      p = end + 1;
    }
  sbx_buf_append (out, p, strlen (p));
  return 0;
}

static void
wipe_buf (struct sbx_buf *b)
{
  if (b->data)
    explicit_bzero (b->data, b->cap);
  sbx_buf_free (b);
}

int
sbx_rules_resolve (struct sbx_store *st, const char *tenant, json_t *network, struct sbx_buf *b,
                   uint32_t *nheaders, uint32_t *nswaps, uint32_t *nbroken)
{
  json_t *rules = json_object_get (network, "rules"), *env = json_object_get (network, "secrets_env");
  json_t *list;
  const char *host;
  struct sbx_buf hdrs = SBX_BUF_INIT, swaps = SBX_BUF_INIT, broken = SBX_BUF_INIT;
  int rc = 0;

  *nheaders = *nswaps = *nbroken = 0;
  json_object_foreach (rules, host, list)
  {
    json_t *item;
    size_t i;
    char missing[SBX_SECRET_NAME_MAX + 1] = "";
    struct sbx_buf h = SBX_BUF_INIT, s = SBX_BUF_INIT;
    uint32_t nh = 0, ns = 0;

    json_array_foreach (list, i, item)
    {
      const char *hk;
      json_t *hv, *names = json_object_get (item, "placeholders"), *nv;
      size_t j;
      json_object_foreach (json_object_get (item, "headers"), hk, hv)
      {
        struct sbx_buf val = SBX_BUF_INIT;
        if (missing[0] == '\0'
            && expand (st, tenant, json_string_value (hv), &val, missing, sizeof missing) == 0)
          {
            put (&h, host, strlen (host));
            put (&h, hk, strlen (hk));
            put (&h, val.data ? val.data : "", val.len);
            nh++;
          }
        wipe_buf (&val);
      }
      json_array_foreach (names, j, nv)
      {
        const char *secret = json_string_value (nv), *k;
        json_t *ev;
        char *value = NULL;
        size_t len = 0;
        sbx_error_t *e = NULL;
        if (missing[0] != '\0')
          break;
        if (sbx_store_secret_get (st, tenant, secret, &value, &len, &e) < 0)
          {
            sbx_error_free (e);
            snprintf (missing, sizeof missing, "%s", secret);
            break;
          }
        /* Every placeholder of that secret in this sandbox. */
        json_object_foreach (env, k, ev)
        {
          const char *ph = json_string_value (json_object_get (ev, "placeholder"));
          if (ph == NULL || strcmp (json_string_value (json_object_get (ev, "secret")), secret) != 0)
            continue;
          put (&s, host, strlen (host));
          put (&s, ph, strlen (ph));
          put (&s, value, len);
          ns++;
        }
        explicit_bzero (value, len);
        free (value);
      }
    }
    if (missing[0] != '\0')
      {
        put (&broken, host, strlen (host));
        put (&broken, missing, strlen (missing));
        (*nbroken)++;
      }
    else
      {
        sbx_buf_append (&hdrs, h.data, h.len);
        sbx_buf_append (&swaps, s.data, s.len);
        *nheaders += nh;
        *nswaps += ns;
      }
    wipe_buf (&h);
    wipe_buf (&s);
  }
  sbx_buf_append (b, hdrs.data, hdrs.len);
  sbx_buf_append (b, swaps.data, swaps.len);
  sbx_buf_append (b, broken.data, broken.len);
  if (hdrs.failed || swaps.failed || broken.failed)
    rc = -1;
  wipe_buf (&hdrs);
  wipe_buf (&swaps);
  wipe_buf (&broken);
  return rc;
}
