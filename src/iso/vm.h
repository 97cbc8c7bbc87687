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
#define SBX_VM_QMP_FD 5               /* QEMU's end of its QMP monitor (relay and QEMU) */
#define SBX_VM_INCOMING_FD 6          /* a restore: the snapshot's file (relay and QEMU) */
#define SBX_VM_SNAPSHOT_FILE "vm.mig" /* in the snapshot's directory of the store */
#define SBX_VM_CA_FD 10               /* the relay: sbx's egress CA certificate (iso/vm_ca.c) */
#define SBX_VM_ROOT_FD 11             /* the read-only root image (iso/vm_image.c), when any */
#define SBX_VM_BOOT_TIMEOUT_MS 90000  /* TCG on a busy host boots in seconds */

/* Build a VM sandbox into box (an "init" that is the relay). */
int sbx_vm_create (struct sbx_engine *eng, const struct sbx_iso_spec *spec,
                   struct sbx_iso_box *box, sbx_error_t **err);

/* iso/vm_qmp.c: greet QEMU's monitor (once, after the boot), and save a
   running VM's memory and disk as tenant's snapshot `name` in the store
   (the vCPUs stop meanwhile; *bytes: the file's size). */
int sbx_vm_qmp_open (int qmp, sbx_error_t **err);
/* Why a restored guest does not answer (QEMU's run state and incoming
   migration status), as " (...)", or "" when QEMU says nothing. */
void sbx_vm_qmp_explain (int qmp, char *out, size_t len);
/* A restore: greet QEMU, wait for its incoming migration, let it run. */
int sbx_vm_restore_go (int qmp, sbx_error_t **err);
int sbx_vm_snapshot_save (const struct sbx_iso_box *box, int store, const char *tenant,
                          const char *name, uint64_t *bytes, sbx_error_t **err);
/* The same save, but the vCPUs stay stopped when it worked: the VM is
   about to end (a hibernation, core/vm_hibernate.c). */
int sbx_vm_hibernate_save (const struct sbx_iso_box *box, int store, const char *tenant,
                           const char *name, uint64_t *bytes, sbx_error_t **err);

/* iso/vm_root.c: open the root image for a new VM (base), or the one a
   VM snapshot recorded (none for a snapshot made before images: -1 and
   no error); box->vm_image gets "KEY SUM". */
int sbx_vm_root_open (const struct sbx_iso_spec *spec, struct sbx_iso_box *box,
                      sbx_error_t **err);
/* iso/vm_root.c: record box's image in a snapshot's directory. */
int sbx_vm_root_record (int dir, const struct sbx_iso_box *box, sbx_error_t **err);
/* iso/vm_ca.c: where the parent finds sbx's egress CA certificate (the
   public copy, egress/tls.h), set once at start; then, for each VM, the
   certificate opened read-only for its relay (-1: none published). */
void sbx_vm_ca_init (const char *state_dir);
int sbx_vm_ca_open (void);
/* iso/vm_confine.c: in QEMU's process, just before its exec: a Landlock
   domain that reads what QEMU needs and writes nothing by path. */
int sbx_vm_confine_qemu (const char *kernel, sbx_error_t **err);

/* The relay's main (sbxd argv[1] == SBX_VM_RELAY_ARG): never returns. */
int sbx_vm_relay_main (int argc, char **argv);

#endif
