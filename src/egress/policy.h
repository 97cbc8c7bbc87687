/* sbx: a sandbox's egress policy and the address classifier (docs/egress.md).
 *
 * Used on both sides of the egress channel: the front end validates what a
 * client sends (API, CLI, E2B) with the same parser the egress process uses
 * to rebuild the snapshot it gets with each connection, so the two cannot
 * disagree about what an entry means.
 *
 * Entries, each at most SBX_NET_ENTRY_MAX bytes:
 *   *                    everything public (allow only)
 *   example.com          that host, any port
 *   *.example.com        its subdomains (not example.com itself), any port
 *   NAME:PORT            either of the above on one port
 *   1.2.3.4, ::1         one address; [::1]:443 or 1.2.3.4:443 with a port
 *   10.0.0.0/8, fd00::/8 a range of addresses (no port)
 * Names are lowercased; a trailing dot is dropped. A request is denied when
 * any deny entry matches it, else allowed when an allow entry does. Name
 * entries match the name the client asked for; address entries match the
 * address the proxy connects to (after resolution), so a deny of a range
 * cannot be dodged with a name that resolves into it.
 */
#ifndef SBX_EGRESS_POLICY_H
#define SBX_EGRESS_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define SBX_NET_MAX_ENTRIES 256 /* allow and deny, each */
#define SBX_NET_ENTRY_MAX 260   /* bytes of one entry as written */
#define SBX_NET_NAME_MAX 253    /* a DNS name */

enum sbx_net_kind
{
  SBX_NET_ANY = 1, /* "*" */
  SBX_NET_NAME,    /* exact name */
  SBX_NET_SUFFIX,  /* "*.name": subdomains of name */
  SBX_NET_ADDR,    /* address or range (prefix < full length) */
};

struct sbx_net_addr
{
  int family;       /* AF_INET or AF_INET6 */
  uint8_t bytes[16]; /* network order; 4 used for AF_INET */
};

struct sbx_net_entry
{
  enum sbx_net_kind kind;
  uint16_t port; /* 0: any */
  unsigned prefix; /* SBX_NET_ADDR: bits that must match */
  struct sbx_net_addr addr;
  char name[SBX_NET_NAME_MAX + 1]; /* SBX_NET_NAME, SBX_NET_SUFFIX: lowercase, no trailing dot */
};

struct sbx_net_policy
{
  unsigned nallow, ndeny;
  struct sbx_net_entry *allow, *deny; /* owned */
};

/* Parse one entry. "*" in a deny list denies everything. */
int sbx_net_entry_parse (const char *s, struct sbx_net_entry *e, sbx_error_t **err);
/* Write e in its canonical form (what the API shows); returns the length. */
size_t sbx_net_entry_format (const struct sbx_net_entry *e, char *out, size_t cap);

/* Build a policy from two arrays of strings; every entry checked. */
int sbx_net_policy_build (struct sbx_net_policy *p, const char *const *allow, size_t nallow,
                          const char *const *deny, size_t ndeny, sbx_error_t **err);
void sbx_net_policy_free (struct sbx_net_policy *p);

/* Parse a host as a request names it: an address literal (v6 without
   brackets) fills *addr and returns 1; a valid DNS name is lowercased into
   name (SBX_NET_NAME_MAX + 1 bytes) and returns 0; anything else -1. */
int sbx_net_host_parse (const char *host, size_t len, char *name, struct sbx_net_addr *addr);

enum sbx_net_verdict
{
  SBX_NET_DENY = 0,
  SBX_NET_ALLOW = 1,
  SBX_NET_UNDECIDED = 2, /* only from the pre-check: depends on the address */
};
/* Before resolution: the name alone (host is a lowercase name). DENY when a
   deny name entry matches or no allow entry can ever match this name;
   ALLOW when an allow name entry matches and no deny entry could (no
   address deny entries); UNDECIDED otherwise. */
enum sbx_net_verdict sbx_net_precheck (const struct sbx_net_policy *p, const char *host,
                                       uint16_t port);
/* The final decision for the address the proxy would connect to; host is
   the name asked for, or NULL when the client gave a literal. */
enum sbx_net_verdict sbx_net_decide (const struct sbx_net_policy *p, const char *host,
                                     uint16_t port, const struct sbx_net_addr *addr);

/* Does entry e match host (a lowercase name or NULL) on port, or addr? */
int sbx_net_entry_matches (const struct sbx_net_entry *e, const char *host, uint16_t port,
                           const struct sbx_net_addr *addr);

/* NULL when addr is a public unicast address, else why not ("loopback",
   "private", "link-local", "metadata", ...). IPv4-mapped and NAT64
   addresses are judged by the IPv4 address inside. */
const char *sbx_net_addr_special (const struct sbx_net_addr *addr);
/* Text form of addr (INET6_ADDRSTRLEN). */
void sbx_net_addr_format (const struct sbx_net_addr *addr, char *out, size_t cap);

/* The recipe builds' mirror (--template-mirror): its host (without
   brackets) and port (the scheme's when the URL names none). */
struct sbx_net_mirror
{
  char host[SBX_NET_NAME_MAX + 1];
  uint16_t port;
};
/* 0, or -1 (m's host "") when url is not http(s)://[user@]host[:port]... */
int sbx_net_mirror_parse (const char *url, struct sbx_net_mirror *m);
/* 1 when a request for host:port is the mirror's and special (what
   sbx_net_addr_special said of its address) is a range a mirror may be
   in: anything but a cloud metadata or link-local address, which no
   mirror is and where a host's credentials live. */
int sbx_net_mirror_allows (const struct sbx_net_mirror *m, const char *host, uint16_t port,
                           const char *special);

#endif
