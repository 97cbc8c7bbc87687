/* sbx: sbx's egress CA in the guest (vm/agent_ca.c). */
#ifndef SBX_VM_AGENT_CA_H
#define SBX_VM_AGENT_CA_H

#include <stddef.h>

/* At boot, before any command and before the root is sealed: put the CA
   certificate (pem, len bytes; 0: nothing to do) and the bundle (the
   image's /etc/ssl/certs/ca-certificates.crt, then the certificate) at
   SBX_SANDBOX_CA_CERT and SBX_SANDBOX_CA_BUNDLE, read-only. NULL, or what
   failed (errno set). */
const char *sbx_agent_ca_install (const char *pem, size_t len);

#endif
