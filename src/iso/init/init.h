/* sbx-init: PID 1 of every sandbox.
 *
 * The daemon runs this program once, from a sealed memfd (CVE-2019-5736:
 * /proc/1/exe must not lead to a host binary the sandbox could rewrite), as
 * the "zygote" (zygote.c). The zygote clones every sandbox's PID 1 into
 * fresh user, mount, pid, net, ipc and uts namespaces; the daemon writes
 * its id maps and puts it in its cgroup. Nothing of the daemon's memory is
 * ever in a sandbox: the zygote is a fresh static process.
 *
 * init builds the root (rootfs.c), locks itself down (harden.c) in the
 * consensus order of docs/isolation.md, reports READY, and then only
 * spawns the daemon's commands and reaps every process (spawn.c). It is
 * static, single-threaded, and fails closed: any setup error is reported
 * once and ends the sandbox.
 */
#ifndef SBX_INIT_H
#define SBX_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "iso/proto.h"

#define SBX_CTL_FD SBX_INIT_CTL_FD

/* zygote.c: the loop of zygote mode (never returns). */
__attribute__ ((noreturn)) void init_zygote_main (char *mode_arg);
/* main.c: a sandbox's init, from GO on (never returns). */
__attribute__ ((noreturn)) void init_sandbox_main (void);

/* Report a failed setup step to the daemon and exit. */
__attribute__ ((noreturn)) void init_die (int sys_errno, const char *what);
/* Exit because the daemon sent something malformed or went away. */
__attribute__ ((noreturn)) void init_protocol_violation (void);

/* wire.c: messages on the control socket. */
/* Receive one packet into buf (cap bytes) with up to max_fds descriptors.
   Returns the packet length, 0 on EOF; exits on any malformation. */
size_t init_recv (void *buf, size_t cap, int *fds, int max_fds, int *nfds);
/* Send one packet, optionally with descriptors. Returns 0 or -errno. */
int init_send (const void *msg, size_t len, const int *fds, int nfds);

/* rootfs.c: build the sandbox's root and pivot into it. On return the
   process's root is the new tree; *root_fd and *disk_fd are O_PATH fds of
   "/" and of the writable tmpfs, for the daemon's file operations. */
void init_build_root (const struct sbx_msg_config *cfg, const unsigned char *plan,
                      int *root_fd, int *disk_fd);

/* harden.c */
void init_setup_network (void);
void init_set_hostname (const char *name);
/* Drop what init does not need (bounding set, ambient, securebits locked),
   keeping CAP_SETUID, CAP_SETGID and CAP_KILL to run commands as their
   user and signal them. */
void init_drop_privileges (void);
/* Returns the Landlock ABI enforced (0 if disabled by the config). */
uint32_t init_apply_landlock (uint32_t max_abi);
void init_apply_seccomp (const void *prog, size_t len);

/* spawn.c */
void init_handle_spawn (const struct sbx_msg_spawn *msg, size_t len, const int *fds, int nfds);
void init_handle_signal (const struct sbx_msg_signal *msg, size_t len);
void init_handle_pump (const struct sbx_msg_pump *msg, size_t len, const int *fds, int nfds);
void init_reap (void);

#endif
