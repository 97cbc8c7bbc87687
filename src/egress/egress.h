/* sbx: the egress process (`sbxd --egress`), the only way out of a
 * sandbox (docs/egress.md, docs/security.md 2.17). */
#ifndef SBX_EGRESS_EGRESS_H
#define SBX_EGRESS_EGRESS_H

#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

struct sbx_egress_opts
{
  int allow_private;          /* tests only: loopback and private destinations allowed */
  uint64_t max_bytes;         /* per sandbox, both ways, over the process's life; 0: none */
  unsigned max_conns;         /* per sandbox at once */
  unsigned max_total;         /* all sandboxes at once */
  unsigned max_tenant;        /* one tenant's sandboxes at once */
  uint64_t idle_ms;           /* a relay silent both ways this long is closed */
  const char *state_dir;      /* the CA in STATE/egress-ca (egress/tls.h); NULL: none */
  const char *upstream_ca;    /* tests: a PEM file trusted for upstreams besides the system's */
  /* --template-mirror's URL: recipe builds' connections (tenant
     SBX_EGRESS_BUILD_TENANT) to its host and port are let through whatever
     its address range but a cloud metadata address. The administrator
     named it; an apt cache on the host or the LAN is a usual mirror, and
     no sandbox's policy gains anything. NULL: none. */
  const char *build_mirror;
};

void sbx_egress_opts_defaults (struct sbx_egress_opts *o);

/* Runs until the channel's other end is gone or SIGTERM; returns the exit
   status. Drops to uid:gid and confines itself first. */
int sbx_egress_main (const struct sbx_egress_opts *o, int channel, uid_t uid, gid_t gid);

/* egress/drop.c: no capabilities, uid:gid, NNP, Landlock (read-only name
   resolution files), seccomp (inet sockets, connect; no exec, no mount). */
int sbx_egress_drop (uid_t uid, gid_t gid, sbx_error_t **err);

/* egress/request.c: the head of a client's request. */
enum sbx_egress_method
{
  SBX_EGRESS_CONNECT = 1,
  SBX_EGRESS_FORWARD, /* absolute-form http:// request */
};
#define SBX_EGRESS_HEAD_MAX (16 * 1024)
struct sbx_egress_req
{
  enum sbx_egress_method method;
  char host[256]; /* as written, without brackets; NUL-terminated */
  uint16_t port;
  /* FORWARD: the head to send upstream (origin-form target, hop-by-hop
     headers gone, Connection: close), malloc'ed. */
  char *head;
  size_t head_len;
};
/* Parse head (len bytes ending with CRLF CRLF). 0, or -1 with a reason
   for the 400 in why. */
int sbx_egress_parse (const char *head, size_t len, struct sbx_egress_req *r, char *why,
                      size_t why_cap);

#endif
