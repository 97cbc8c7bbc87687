/* sbx: what the guest agent's parts share (vm/agent.c, vm/agent_net.c). */
#ifndef SBX_VM_AGENT_H
#define SBX_VM_AGENT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/wire.h"

/* agent.c: power the guest off, saying why (errno) on the console. */
void agent_die (const char *what) __attribute__ ((noreturn));
/* agent.c: one frame to the host, header then a and b (blocking). */
void agent_send_frame (uint32_t type, uint64_t id, const void *a, size_t alen, const void *b,
                       size_t blen);

/* agent_net.c: egress streams (docs/vm.md "Egress"). */
#define AGENT_NET_MAX_POLLFDS (1 + SBX_VM_CONN_MAX)
/* Bring lo up and listen on 127.0.0.1:SBX_EGRESS_PORT (before any command
   runs, so none can take the port). */
void agent_net_setup (void);
int agent_net_pollfds (struct pollfd *pf);
void agent_net_after_poll (const struct pollfd *pf, int n);
/* A SBX_VMF_CONN_* frame from the host (payload: f->len bytes). */
void agent_net_frame (const struct sbx_vm_frame *f, const char *payload);
/* A new relay took over (PING after a restore): the streams were the old
   relay's, each ends (its client sees the connection close). */
void agent_net_reset_all (void);

#endif
