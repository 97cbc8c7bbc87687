/* sbx: TLS in the egress proxy, for hosts with credential rules only
 * (docs/egress.md, Credentials; docs/security.md).
 *
 * The privileged parent makes a CA once per state directory
 * (STATE/egress-ca: ca.key 0600 root, ca.crt 0644), and at every start
 * publishes what sandboxes may see in a root-owned directory their init can
 * bind from (sbx_egress_ca_public_dir: /run/sbx/egress-ca/DIGEST, ca.crt and
 * bundle.crt = the host's bundle + ca.crt), removed when it stops. Sandboxes
 * see them read-only at SBX_SANDBOX_CA_CERT and SBX_SANDBOX_CA_BUNDLE; the
 * host's trust store is not changed.
 *
 * The egress process loads everything it needs before it confines itself
 * (Landlock then lets it open no file): the CA key and certificate, the
 * system trust store (a file, read whole), an optional test CA; it makes
 * one key for the leaf certificates it issues (cached per host).
 */
#ifndef SBX_EGRESS_TLS_H
#define SBX_EGRESS_TLS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define SBX_EGRESS_CA_DIR "egress-ca"
#define SBX_SANDBOX_CA_BUNDLE "/etc/ssl/sbx-ca-bundle.crt"
#define SBX_SANDBOX_CA_CERT "/etc/ssl/sbx-ca.crt"

/* In the parent, as root: the CA (made if absent), published. */
int sbx_egress_ca_ensure (const char *state_dir, sbx_error_t **err);
void sbx_egress_ca_unpublish (const char *state_dir);
/* The published directory of state_dir's CA (a digest of the path). */
void sbx_egress_ca_public_dir (const char *state_dir, char *out, size_t cap);

/* In the egress process, before it drops: upstream_ca NULL or a PEM file
   the upstream trust gets besides the system's (tests). */
int sbx_egress_tls_init (const char *state_dir, const char *upstream_ca, sbx_error_t **err);
int sbx_egress_tls_ready (void);

typedef struct ssl_st sbx_ssl;

/* TLS to the upstream on fd (connected), verifying its certificate for
   host; NULL with the reason in why. */
sbx_ssl *sbx_egress_tls_connect (int fd, const char *host, char *why, size_t cap);
/* TLS to the sandbox's client on fd, as host (a leaf issued by the CA);
   NULL when the handshake failed. */
sbx_ssl *sbx_egress_tls_accept (int fd, const char *host);
void sbx_egress_tls_close (sbx_ssl *s);

#endif
