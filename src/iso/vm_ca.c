/* sbx: sbx's egress CA certificate for a VM's guest (docs/vm.md "Egress",
 * docs/egress.md "Credentials").
 *
 * The namespace engine binds the public copy (egress/tls.h) into every
 * sandbox. A guest cannot be bound into: the parent opens the certificate
 * (never the key) and passes it to the relay as SBX_VM_CA_FD, the relay
 * sends its bytes in SETUP and the agent makes the guest's read-only copy
 * (vm/agent_ca.c). Every VM gets it at boot, whatever its policy: it is
 * public, and a policy with credential rules may come later (PUT
 * .../network) to a VM that is already running.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/tls.h"
#include "iso/vm.h"
#include "vm/wire.h"

static char ca_path[256];

void
sbx_vm_ca_init (const char *state_dir)
{
  char pub[200];
  sbx_egress_ca_public_dir (state_dir, pub, sizeof pub);
  snprintf (ca_path, sizeof ca_path, "%s/ca.crt", pub);
}

int
sbx_vm_ca_open (void)
{
  struct stat st;
  int fd;

  if (ca_path[0] == '\0')
    return -1;
  fd = open (ca_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  /* The parent's own file (root's, in root's directory); anything else,
     or one too big to be a certificate, is not passed on. */
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != 0 || st.st_size <= 0
      || st.st_size > SBX_VM_CA_MAX)
    {
      close (fd);
      return -1;
    }
  return fd;
}
