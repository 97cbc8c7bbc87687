/* sbx: which E2B plane a request on the daemon's port is for.
 *
 * One port serves the native API, E2B's control plane and every
 * sandbox's data plane (envd, the code interpreter, the sandbox's own
 * ports). The data plane is chosen the way E2B's edge proxy chooses it
 * (infra packages/shared/pkg/proxy/host.go): by the E2b-Sandbox-Id and
 * E2b-Sandbox-Port headers when present, else by a Host of the form
 * PORT-ID.DOMAIN when the daemon was given --domain. Everything else is
 * the API. Pure functions: unit-tested and fuzzed apart from the server.
 */
#ifndef SBX_SERVER_E2B_ROUTE_H
#define SBX_SERVER_E2B_ROUTE_H

#include "util/id.h"

#define SBX_E2B_ENVD_PORT 49983
#define SBX_E2B_CODE_PORT 49999

enum sbx_e2b_plane
{
  SBX_PLANE_API = 0, /* the native API or E2B's control plane */
  SBX_PLANE_ENVD,    /* port 49983: process, filesystem, /files */
  SBX_PLANE_CODE,    /* port 49999: the code interpreter */
  SBX_PLANE_PORT,    /* any other port: proxied into the sandbox */
};

struct sbx_e2b_target
{
  enum sbx_e2b_plane plane;
  char sandbox_id[SBX_ID_LEN + 1];
  unsigned port;
};

/* Decide from the Host header, the two E2B headers (each may be NULL) and
   the daemon's domain ("" or NULL: none). 0 with *t filled; -1 with *why
   (a static message) when the request names a sandbox badly: an id that
   cannot be one, a port out of 1..65535, a header without the other. */
int sbx_e2b_route (const char *host, const char *sandbox_id_header, const char *port_header,
                   const char *domain, struct sbx_e2b_target *t, const char **why);

/* The user of an envd request from its Authorization header ("Basic
   base64(NAME:)"): "user" or "root" into out (16 bytes). NULL header:
   "user". -1 when the header is malformed or names anyone else. */
int sbx_e2b_basic_user (const char *authorization, char out[16]);

#endif
