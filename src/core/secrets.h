/* sbx: secrets per tenant and the credential rules of a network policy
 * (docs/egress.md, Credentials).
 *
 * A secret is a name and a value a tenant stores through the API; the
 * value is never returned, never put into a sandbox, never audited. A
 * sandbox's policy refers to secrets by name in two ways:
 *
 *   "rules": {"api.example.com": [{"headers": {"Authorization": "Bearer ${secret:OPENAI}"},
 *                                   "placeholders": ["OPENAI"]}]}
 *   "secrets_env": {"OPENAI_API_KEY": "OPENAI"}
 *
 * rules: for a host pattern (a name or *.domain, optionally :PORT; at most
 * SBX_RULES_MAX_DOMAINS), headers the egress proxy sets on requests to it
 * (a client's header of the same name is replaced), whose values may use
 * ${secret:NAME}; and the secrets whose placeholders it swaps in that
 * host's request headers. secrets_env: an environment variable every
 * command gets, holding the secret's placeholder (sbx_placeholder_ and 32
 * hex digits, fixed for the sandbox), never its value.
 *
 * The canonical form (what the API shows and the store keeps) writes
 * secrets_env as {"VAR": {"secret": "NAME", "placeholder": "sbx_..."}}.
 */
#ifndef SBX_CORE_SECRETS_H
#define SBX_CORE_SECRETS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/error.h"

#define SBX_SECRET_NAME_MAX 64
#define SBX_SECRET_VALUE_MAX 4096
#define SBX_SECRET_DESC_MAX 256
#define SBX_SECRETS_PER_TENANT 256
#define SBX_RULES_MAX_DOMAINS 10 /* E2B's limit */
#define SBX_RULES_MAX_ITEMS 4    /* per domain */
#define SBX_RULES_MAX_HEADERS 16 /* per item */
#define SBX_RULE_HEADER_NAME_MAX 64
#define SBX_RULE_HEADER_VALUE_MAX 1024 /* as written, before ${secret:...} */
#define SBX_SECRETS_ENV_MAX 16
/* The credential strings of one egress packet (egress/wire.h
   SBX_EGRESS_CREDS_MAX, less room for the placeholders' swaps). */
#define SBX_RULES_RESOLVED_MAX (32 * 1024)
#define SBX_PLACEHOLDER_PREFIX "sbx_placeholder_"
#define SBX_PLACEHOLDER_LEN (16 + 32)

struct sbx_store;

/* 1 when name is [A-Za-z_][A-Za-z0-9_]{0,63}. */
int sbx_secret_name_valid (const char *name);
/* 0, or -1 with a 400 saying why: 1..SBX_SECRET_VALUE_MAX bytes, no NUL, no
   CR or LF, no other control bytes but tab (it goes into a header). */
int sbx_secret_value_check (const char *value, size_t len, sbx_error_t **err);

int sbx_secret_create (struct sbx_store *st, const char *tenant, const char *name,
                       const char *value, size_t len, const char *description,
                       int64_t *created_ms, sbx_error_t **err);
int sbx_secret_delete (struct sbx_store *st, const char *tenant, const char *name,
                       sbx_error_t **err);
/* [{"name", "description", "created_at"}], never a value. */
json_t *sbx_secret_list (struct sbx_store *st, const char *tenant, sbx_error_t **err);

/* Canonical rules and secrets_env of a policy as a client sent them (no
   store access: names are checked for shape here, for existence by
   sbx_network_bind). Adds "rules" / "secrets_env" to out when present. */
int sbx_rules_canon (json_t *in, json_t *out, sbx_error_t **err);
/* Before a policy is put in force for tenant's sandbox: every secret it
   names exists for tenant (404 names the first missing), and every
   secrets_env entry has a placeholder (kept from old, the policy in force,
   when it binds the same secret, else new). */
int sbx_network_bind (struct sbx_store *st, const char *tenant, json_t *canon, json_t *old,
                      sbx_error_t **err);

/* The egress packet's credential part (egress/wire.h): header triples,
   swap triples, broken pairs, values resolved now. The caller wipes b. */
int sbx_rules_resolve (struct sbx_store *st, const char *tenant, json_t *network,
                       struct sbx_buf *b, uint32_t *nheaders, uint32_t *nswaps,
                       uint32_t *nbroken);

#endif
