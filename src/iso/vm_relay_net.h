/* sbx: the VM relay's egress streams (iso/vm_relay_net.c, docs/vm.md
 * "Egress"). */
#ifndef SBX_ISO_VM_RELAY_NET_H
#define SBX_ISO_VM_RELAY_NET_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "vm/wire.h"

/* ctl: the control socket to the daemon (each stream's socket goes there as
   an SBX_MSG_EGRESS); to_guest: the relay's queue of frames for the port,
   which the streams' frames join. */
void sbx_vm_net_init (int ctl, struct sbx_buf *to_guest);
/* Whether a frame type is a stream's (SBX_VMF_CONN_*, 32-47). */
int sbx_vm_net_is_frame (uint32_t type);
/* One frame of a stream from the guest, whole (f->len bytes at payload).
   -1 with *why when the guest broke the protocol (the relay then ends the
   VM), or the relay ran out of memory. */
int sbx_vm_net_frame (const struct sbx_vm_frame *f, const char *payload, const char **why);
/* The streams' sockets to poll, at most SBX_VM_CONN_MAX in pf; they are not
   read while more than `serial_pending` allows (the port is the bottleneck). */
int sbx_vm_net_pollfds (struct pollfd *pf, size_t serial_pending);
/* After poll: the n entries filled by sbx_vm_net_pollfds. -1 with *why on
   running out of memory. */
int sbx_vm_net_after_poll (const struct pollfd *pf, int n, const char **why);
/* The port proxy's SBX_MSG_CONNECT: a stream the host opens to the guest's
   127.0.0.1:port. The answer goes to the daemon later (or now, when no
   stream is free: EAGAIN), as a namespace init's. -1 on running out of
   memory. */
int sbx_vm_net_connect (uint64_t req_id, uint32_t port);
/* Answers ETIMEDOUT to the CONNECTs the guest left unanswered past
   SBX_VM_CONNECT_TIMEOUT_MS and resets their streams; call at least once a
   second. -1 on running out of memory. */
int sbx_vm_net_tick (void);
/* Streams open now (tests). */
int sbx_vm_net_open_count (void);
/* Close every stream and forget every id, as at the relay's start (the
   fuzz harness, between inputs). */
void sbx_vm_net_forget_all (void);

#endif
