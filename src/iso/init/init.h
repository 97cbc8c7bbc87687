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
 * order bubblewrap, nsjail, minijail and crun agree on (docs/security.md
 * section 2, docs/architecture.md's step table), reports READY, and then only
 * spawns the daemon's commands and reaps every process (spawn.c). It is
 * static, single-threaded, and fails closed: any setup error is reported
 * once and ends the sandbox.
 */
#ifndef SBX_INIT_H
#define SBX_INIT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "iso/proto.h"

#define SBX_CTL_FD SBX_INIT_CTL_FD
#define SBX_INIT_MAX_FDS 8 /* descriptors on one message, either way */

/* zygote.c: the loop of zygote mode (never returns). */
__attribute__ ((noreturn)) void init_zygote_main (char *mode_arg);
/* main.c: a sandbox's init, from GO on (never returns). */
__attribute__ ((noreturn)) void init_sandbox_main (void);

/* Report a failed setup step to the daemon and exit. */
__attribute__ ((noreturn)) void init_die (int sys_errno, const char *what);
/* Every signal back to its default (spawn.c): what a command starts with,
   whatever the daemon inherited. */
void init_default_signals (void);
/* Exit because the daemon sent something malformed or went away. */
__attribute__ ((noreturn)) void init_protocol_violation (void);

/* wire.c: messages on the control socket. */
/* Receive one packet into buf (cap bytes) with up to max_fds descriptors.
   Returns the packet length, 0 on EOF; exits on any malformation. */
size_t init_recv (void *buf, size_t cap, int *fds, int max_fds, int *nfds);
/* Send one packet, optionally with descriptors. Returns 0 or -errno. */
int init_send (const void *msg, size_t len, const int *fds, int nfds);
/* The same without blocking: -EAGAIN when the socket is full. */
int init_try_send (const void *msg, size_t len, const int *fds, int nfds);
/* Send a small event (SPAWNED, SPAWN_FAILED, EXITED) without blocking:
   a daemon that is gone or slow must never stop init from reaping. What
   cannot be sent now waits in a queue, in order; a daemon that ATTACHes
   gets the whole state instead (init_drop_events). */
void init_send_event (const void *msg, size_t len);
/* The same with one descriptor (borrowed; -1: none) on the message. */
void init_send_event_fd (const void *msg, size_t len, int fd);
/* 1 while events wait to be sent; init_flush_events sends what it can. */
int init_events_pending (void);
void init_flush_events (void);
void init_drop_events (void);

/* rootfs.c: build the sandbox's root and pivot into it. On return the
   process's root is the new tree; *root_fd and *disk_fd are O_PATH fds of
   "/" and of the writable tmpfs, for the daemon's file operations. */
/* dev_mnt: the sandbox's own /dev, a detached tmpfs the daemon made with
   its device nodes (iso/devnodes.c); root_mnt: a stored template's
   detached overlay to use as "/", or -1. */
void init_build_root (const struct sbx_msg_config *cfg, const unsigned char *plan, int dev_mnt,
                      int root_mnt, int *root_fd, int *disk_fd);
/* 1 when "/" stays writable for root inside: a skeleton without
   SBX_CONFIG_READ_ONLY_ROOT (a stored template's root is read-only). */
int init_root_writable (const struct sbx_msg_config *cfg, int root_mnt);

/* harden.c */
void init_setup_network (void);
void init_set_hostname (const char *name);
/* Drop what init does not need (bounding set, ambient, securebits locked),
   keeping CAP_SETUID, CAP_SETGID and CAP_KILL to run commands as their
   user and signal them. */
void init_drop_privileges (void);
/* Returns the Landlock ABI enforced (0 if disabled by the config).
   root_writable: "/" may be written (init_root_writable). */
uint32_t init_apply_landlock (uint32_t max_abi, int root_writable);
void init_apply_seccomp (const void *prog, size_t len);

/* spawn.c */
void init_handle_spawn (const struct sbx_msg_spawn *msg, size_t len, int *fds, int nfds);
/* Start argv as msg says (user, limits; its stdio the three fds) in a new
   session, with every capability dropped: the one way a command starts
   (SPAWN and sudo). Returns its pid, or -1 with *sys_errno and *stage
   (SBX_STAGE_*) saying what failed before it ran. */
pid_t init_start_command (const struct sbx_msg_spawn *msg, const char *cwd, char **argv, char **envp,
                          const int *fds, int *sys_errno, uint32_t *stage);
void init_handle_signal (const struct sbx_msg_signal *msg, size_t len);
void init_handle_pump (const struct sbx_msg_pump *msg, size_t len, const int *fds, int nfds);
void init_handle_resize (const struct sbx_msg_resize *msg, size_t len);
/* Tell the daemon a request could not start (SPAWN_FAILED). */
void init_send_spawn_failed (uint64_t req_id, int sys_errno, uint32_t stage);

/* watch.c: a directory watch in a helper (SBX_MSG_WATCH). */
void init_handle_watch (const struct sbx_msg_watch *msg, size_t len, const int *fds, int nfds);

/* connect.c: TCP connects to the sandbox's loopback for the daemon's port
   proxy (SBX_MSG_CONNECT), watched in the main loop. */
void init_handle_connect (const struct sbx_msg_connect *msg, size_t len, int nfds);
/* Fill pfd (room for SBX_CONNECT_MAX) with the connects in flight; returns
   how many. */
int init_connect_pollfds (struct pollfd *pfd);
/* After poll: finish the connects whose sockets are ready or whose time is
   up (pfd, n as init_connect_pollfds filled them). */
void init_connect_after_poll (const struct pollfd *pfd, int n);
/* ms until the next connect's deadline, -1 when none is in flight. */
int init_connect_timeout_ms (void);
/* A new daemon (ATTACH): connects for the old one are dropped. */
void init_connect_drop_all (void);

/* egress.c: the proxy listener on 127.0.0.1:SBX_EGRESS_PORT (SBX_MSG_EGRESS). */
void init_egress_listen (void);
/* Fill pfd (room for 1) when the listener should be polled; returns 0 or 1. */
int init_egress_pollfds (struct pollfd *pfd);
void init_egress_after_poll (const struct pollfd *pfd, int n);

/* sudo.c: the sandbox's sudo (iso/proto.h). Listen once Landlock is on;
   fsize_limit: RLIMIT_FSIZE of sudo's commands (the disk's size). */
void init_sudo_listen (uint64_t fsize_limit);
/* Fill pfd (room for 1) while another session may start; 0 or 1. */
int init_sudo_pollfds (struct pollfd *pfd);
void init_sudo_after_poll (const struct pollfd *pfd, int n);
/* A reaped pid that was a sudo session's helper: 1 (its slot is free). */
int init_sudo_reaped (pid_t pid);

/* procs.c: what init started, until the daemon releases it. */
struct init_proc
{
  pid_t pid; /* 0: free */
  uint64_t req_id;
  int is_pump;   /* a files-API helper: forgotten once reaped */
  int is_watch;  /* a directory watcher (is_pump too): killed on ATTACH */
  int exited;
  int wait_status;
  int keep[3];   /* the daemon's ends (SBX_KEEP_* order), -1 when none */
  int pty;       /* the master of its terminal (SBX_SPAWN_PTY), -1 when none */
  uint32_t tag_len;
  char *tag;     /* owned, the daemon's opaque description */
  uint32_t causes;   /* why the daemon signalled it (SBX_SIGNAL_TIMEOUT, _API) */
  int64_t exited_ms; /* when it was reaped (wall clock) */
};
/* NULL when the table is full. */
struct init_proc *init_proc_add (pid_t pid, uint64_t req_id, int is_pump);
/* The entry of a command still running, or NULL. */
struct init_proc *init_proc_running (uint64_t req_id);
void init_proc_forget (struct init_proc *p);
void init_handle_release (const struct sbx_msg_release *m, size_t len);
void init_handle_attach (size_t len, int nfds);
void init_reap (void);

/* main.c: the O_PATH fds of "/" and of the disk, as READY sent them
   (borrowed). */
void init_roots (int *root_fd, int *disk_fd);

#endif
