/* Fuzz target: what the egress proxy parses from a sandbox and a client
 * (docs/egress.md): the request head (egress/request.c) and policy entries
 * (egress/policy.c). Invariants: a parsed request names a host (NUL-
 * terminated, no NUL inside) and a port above 0; a forwarded head ends the
 * head, says `Connection: close` and carries no Proxy-Authorization; a
 * policy entry's canonical form parses again to itself (the API shows
 * what the proxy enforces); the classifier and the matcher never crash.
 */
#include <strings.h>

#include "egress/egress.h"
#include "egress/policy.h"
#include "fuzz.h"

static void
fuzz_request (const uint8_t *data, size_t size)
{
  struct sbx_egress_req r;
  char why[200];

  if (size > SBX_EGRESS_HEAD_MAX)
    return;
  if (sbx_egress_parse ((const char *) data, size, &r, why, sizeof why) < 0)
    {
      FUZZ_ASSERT (memchr (why, '\0', sizeof why) != NULL && why[0] != '\0');
      return;
    }
  FUZZ_ASSERT (r.host[0] != '\0' && memchr (r.host, '\0', sizeof r.host) != NULL);
  FUZZ_ASSERT (r.port > 0);
  if (r.method == SBX_EGRESS_FORWARD)
    {
      FUZZ_ASSERT (r.head != NULL && r.head_len >= 4 && strlen (r.head) == r.head_len);
      FUZZ_ASSERT (memcmp (r.head + r.head_len - 4, "\r\n\r\n", 4) == 0);
      FUZZ_ASSERT (strstr (r.head, "\r\nConnection: close\r\n\r\n") != NULL);
      FUZZ_ASSERT (strcasestr (r.head, "\r\nproxy-authorization:") == NULL);
      free (r.head);
    }
  else
    FUZZ_ASSERT (r.method == SBX_EGRESS_CONNECT && r.head == NULL);
}

static void
fuzz_entry (const uint8_t *data, size_t size)
{
  char s[SBX_NET_ENTRY_MAX + 64], canon[SBX_NET_ENTRY_MAX + 64], again[SBX_NET_ENTRY_MAX + 64];
  struct sbx_net_entry e, e2;
  struct sbx_net_policy p;
  sbx_error_t *err = NULL;
  const char *items[1];

  if (size >= sizeof s)
    size = sizeof s - 1;
  memcpy (s, data, size);
  s[size] = '\0';
  if (fuzz_contract (sbx_net_entry_parse (s, &e, &err), &err, "entry") < 0)
    return;
  sbx_net_entry_format (&e, canon, sizeof canon);
  FUZZ_ASSERT (sbx_net_entry_parse (canon, &e2, NULL) == 0);
  sbx_net_entry_format (&e2, again, sizeof again);
  FUZZ_ASSERT (strcmp (canon, again) == 0);
  items[0] = s;
  FUZZ_ASSERT (sbx_net_policy_build (&p, items, 1, items, 1, NULL) == 0);
  if (e.kind == SBX_NET_ADDR)
    {
      /* An entry denies what it allows. */
      FUZZ_ASSERT (sbx_net_decide (&p, NULL, e.port ? e.port : 1, &e.addr) == SBX_NET_DENY);
      (void) sbx_net_addr_special (&e.addr);
    }
  else if (e.kind == SBX_NET_NAME)
    FUZZ_ASSERT (sbx_net_precheck (&p, e.name, e.port ? e.port : 1) == SBX_NET_DENY);
  sbx_net_policy_free (&p);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* The first byte picks the parser. */
  if (size == 0)
    return 0;
  if (data[0] & 1)
    fuzz_request (data + 1, size - 1);
  else
    fuzz_entry (data + 1, size - 1);
  return 0;
}
