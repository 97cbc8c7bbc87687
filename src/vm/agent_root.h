/* sbx: the guest agent's root filesystem (vm/agent_root.c). */
#ifndef SBX_VM_AGENT_ROOT_H
#define SBX_VM_AGENT_ROOT_H

/* An O_PATH fd of the agent's binary (in the initramfs), or -1. */
extern int sbx_agent_self_fd;

/* After proc, sys and dev are mounted and the virtio modules loaded:
   switch to the root image when the host gave one. NULL, or what failed
   (errno set). */
const char *sbx_agent_root_switch (void);

/* Where to mount the --disk tmpfs (/disk; on an image without it, a
   directory of /dev). */
const char *sbx_agent_disk_dir (void);

/* Make the root read-only (the initramfs), or keep it so (the image). */
int sbx_agent_root_seal (void);
/* Replace the guest's devtmpfs at /dev (every device of the guest, the
   root image's and the host port's nodes among them, writable by the
   guest's root) with the namespace engine's minimal /dev: null, zero,
   full, random, urandom, tty, the fd links, and /dev/shm bound from
   shm_dir on the disk; then read-only. NULL, or what failed. */
const char *sbx_agent_dev_minimal (const char *shm_dir);

#endif
