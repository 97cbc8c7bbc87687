/* sbx: the daemon's side of the control-socket packets (iso/proto.h). */
#ifndef SBX_ISO_WIRE_H
#define SBX_ISO_WIRE_H

#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

#define SBX_ISO_MAX_FDS 8 /* descriptors on one packet, either way */

/* Send one packet with up to SBX_ISO_MAX_FDS descriptors; flags are
   sendmsg's (MSG_NOSIGNAL is added). Returns 0 or -errno. */
int sbx__sendmsg (int fd, const void *p, size_t len, const int *fds, int nfds, int flags);
/* Send one packet without blocking, with nfds (<= SBX_ISO_MAX_FDS)
   descriptors. A full socket is SBX_E_UNAVAILABLE. */
int sbx__iso_send (int fd, const void *p, size_t len, const int *fds, int nfds,
                   sbx_error_t **err);
/* Receive one packet with up to max_fds descriptors; on any malformation
   (truncation, other control messages, too many fds) every fd is closed
   and errno is EPROTO. Returns the length, 0 on EOF, -1 with errno. */
ssize_t sbx__iso_recv (int fd, void *buf, size_t cap, int *fds, int max_fds, int *nfds,
                       int flags);

/* 1 when fd is the master of a pseudo-terminal (what opening ptmx gives):
   a descriptor a sandbox's init hands us as one must be nothing else. */
int sbx__iso_is_pty_master (int fd);

#endif
