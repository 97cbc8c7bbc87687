/* sbx: the microVM engine (iso/vm.c, iso/vm_relay.c, vm/agent.c;
 * docs/vm.md). */
#ifndef SBX_ISO_VM_H
#define SBX_ISO_VM_H

#include "iso/engine.h"
#include "util/error.h"

#define SBX_VM_DIR_DEFAULT "/usr/local/lib/sbx/vm"
#define SBX_VM_QEMU "/usr/bin/qemu-system-x86_64"
#define SBX_VM_RELAY_ARG "__vm-relay" /* argv[1] of the daemon run as a relay */
#define SBX_VM_INITRD_FD 4            /* the sealed initramfs, in the relay and QEMU */
#define SBX_VM_SERIAL_FD 3            /* QEMU's end of the virtio-serial stream */
#define SBX_VM_BOOT_TIMEOUT_MS 90000  /* TCG on a busy host boots in seconds */

/* Build a VM sandbox into box (an "init" that is the relay). */
int sbx_vm_create (struct sbx_engine *eng, const struct sbx_iso_spec *spec,
                   struct sbx_iso_box *box, sbx_error_t **err);

/* The relay's main (sbxd argv[1] == SBX_VM_RELAY_ARG): never returns. */
int sbx_vm_relay_main (int argc, char **argv);

#endif
