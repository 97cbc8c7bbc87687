/* sbx: credentials in the egress process: the rules a connection's packet
 * carries (egress/wire.h, core/secrets.h) and the rewrite of a request
 * head that applies them.
 *
 * A connection's host picks at most one rule pattern, the most specific
 * that matches (an exact name before *.domain, a longer domain before a
 * shorter one, one with a port before one without). Its headers are set
 * (a client's header of the same name is dropped first) and its
 * placeholders are swapped for their secrets in the values of the
 * request's header lines. A placeholder sent to any other host goes as
 * the client wrote it: it is worth nothing there. Pure functions, unit
 * tested (tests/unit/test_creds.c) and fuzzed (tests/fuzz/fuzz_creds.c).
 */
#ifndef SBX_EGRESS_CREDS_H
#define SBX_EGRESS_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include "egress/policy.h"

struct sbx_egress_cred
{
  struct sbx_net_entry pattern;
  const char *pattern_text; /* canonical, as in the policy */
  const char *a;            /* header name / placeholder / missing secret */
  const char *b;            /* header value / secret value / NULL */
  size_t blen;
};

struct sbx_egress_creds
{
  unsigned nheaders, nswaps, nbroken;
  struct sbx_egress_cred *headers, *swaps, *broken;
  char *strings; /* owned copy; wiped at free */
  size_t strings_len;
};

/* Rebuild from a packet's strings (n bytes, exactly the counted strings);
   -1 when malformed. */
int sbx_egress_creds_parse (const char *s, size_t n, uint32_t nheaders, uint32_t nswaps,
                            uint32_t nbroken, struct sbx_egress_creds *c);
void sbx_egress_creds_free (struct sbx_egress_creds *c);

/* The pattern whose rules apply to host:port (lowercase name), or NULL. */
const char *sbx_egress_creds_match (const struct sbx_egress_creds *c, const char *host,
                                    uint16_t port);
/* The secret missing for pattern (its rules cannot be applied), or NULL. */
const char *sbx_egress_creds_broken (const struct sbx_egress_creds *c, const char *pattern);

/* A request head (request line, header lines, CRLF CRLF; len bytes) with
   pattern's rules applied, the client's hop-by-hop headers dropped and
   `Connection: close` (one request per upstream connection, so every
   request gets the rules), malloc'ed into *out; -1 when out of memory or
   the head is malformed (a NUL, a control byte, a line that is not
   `token: value`). */
int sbx_egress_rewrite (const char *head, size_t len, const struct sbx_egress_creds *c,
                        const char *pattern, char **out, size_t *out_len);

#endif
