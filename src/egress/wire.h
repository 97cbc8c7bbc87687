/* sbx: the channel from the front end to the egress process.
 *
 * One SOCK_SEQPACKET socketpair made by the privileged parent, which keeps
 * both ends for its whole life: the front end (and every restart of it)
 * gets one, the egress process (and every restart of it) the other. Each
 * packet is one connection a sandbox opened to its proxy address
 * (127.0.0.1:3128 inside), with exactly one descriptor (SCM_RIGHTS): the
 * accepted socket, which belongs to the sandbox's network namespace. The
 * packet carries the sandbox's tenant (its connections count against the
 * tenant's share too: egress/limits.h) and its policy as it was when the
 * connection came:
 * a policy change applies to the next connection. The egress process
 * re-parses every entry (egress/policy.c) and drops a malformed packet
 * with its descriptor.
 *
 * The other way, the egress process sends one REPORT (no descriptor) per
 * connection when it ends, for the audit log (core/audit.h): what was
 * asked, what was decided, the bytes moved. The front end treats it as
 * hostile input (the egress process parses sandbox bytes): exact size,
 * NUL-terminated printable strings, or the report is dropped. Reports are
 * sent without waiting: a front end that does not read costs records
 * (counted and logged by the egress process), never a connection.
 */
#ifndef SBX_EGRESS_WIRE_H
#define SBX_EGRESS_WIRE_H

#include <stdint.h>

#include "egress/policy.h"

#define SBX_EGRESS_MSG_CONN 1
#define SBX_EGRESS_MSG_REPORT 2
#define SBX_EGRESS_ID_MAX 32 /* the sandbox id, NUL-padded */
#define SBX_EGRESS_TENANT_MAX 80 /* its tenant's name, NUL-padded (egress/limits.h) */
/* The tenant recipe builds' connections count under: no tenant can have
   it (core/keys.c allows letters, digits, '_', '.' and '-'). Only their
   connections reach the build mirror whatever its address
   (egress.h build_mirror). */
#define SBX_EGRESS_BUILD_TENANT ":recipe-builds"
#define SBX_EGRESS_CREDS_MAX (48 * 1024) /* the credential strings of one packet */
#define SBX_EGRESS_MSG_MAX                                                                      \
  (sizeof (struct sbx_egress_conn) + 2 * SBX_NET_MAX_ENTRIES * (SBX_NET_ENTRY_MAX + 1)          \
   + SBX_EGRESS_CREDS_MAX)

struct sbx_egress_conn
{
  uint32_t type; /* SBX_EGRESS_MSG_CONN */
  uint32_t len;  /* whole packet */
  char sandbox[SBX_EGRESS_ID_MAX];
  char tenant[SBX_EGRESS_TENANT_MAX];
  uint32_t nallow, ndeny; /* NUL-terminated entries that follow: allow first */
  uint32_t strings_len;
  uint32_t reserved;
  /* Credentials (core/secrets.h), after the deny entries, each a run of
     NUL-terminated strings: nheaders (pattern, header name, value with
     secrets resolved), nswaps (pattern, placeholder, secret value),
     nbroken (pattern, the missing secret's name). */
  uint32_t nheaders, nswaps, nbroken;
  uint32_t reserved2;
};

struct sbx_egress_report
{
  uint32_t type; /* SBX_EGRESS_MSG_REPORT */
  uint32_t len;  /* sizeof (struct sbx_egress_report) */
  char sandbox[SBX_EGRESS_ID_MAX];
  char host[256];    /* as the client named it; "" when it never said */
  char reason[192];  /* why it was refused or failed; "" when it went through */
  uint32_t port;     /* 0 when unknown */
  uint32_t status;   /* the HTTP status the client got from the proxy (200: relayed) */
  uint32_t allowed;  /* 1: the policy let it through (it may still have failed upstream) */
  uint32_t reserved;
  uint64_t bytes_out, bytes_in; /* sandbox -> upstream, upstream -> sandbox */
};

#endif
