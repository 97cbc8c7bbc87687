/* sbx: the byte stream between the VM relay (host, vm/relay.c) and the
 * guest agent (vm/agent.c), over one virtio-serial port.
 *
 * A stream, not packets: every frame is struct sbx_vm_frame followed by
 * exactly `len` payload bytes. Either side that reads a frame of an unknown
 * type, a len over SBX_VM_FRAME_MAX or a payload that breaks its format
 * treats the peer as broken (the relay then kills the VM; the agent powers
 * it off). Ids are the daemon's req_ids. No descriptors cross this wire:
 * the relay copies bytes between the daemon's pipes and these frames.
 */
#ifndef SBX_VM_WIRE_H
#define SBX_VM_WIRE_H

#include <stdint.h>

#define SBX_VM_FRAME_MAX (256 * 1024)
#define SBX_VM_CHUNK 32768 /* output and input travel in frames of at most this */

enum sbx_vm_frame_type
{
  /* host -> guest */
  SBX_VMF_SETUP = 1,  /* sbx_vm_setup + seccomp program (struct sock_filter[]) + the
                         egress CA's certificate (PEM, ca_len bytes; vm/agent_ca.c) */
  SBX_VMF_SPAWN = 2,  /* sbx_vm_spawn + cwd\0 argv...\0 env...\0 */
  SBX_VMF_STDIN = 3,  /* bytes; an empty payload is end of file */
  SBX_VMF_SIGNAL = 4, /* uint32 signo (to the command's process group) */
  SBX_VMF_PING = 5,   /* empty: answered by a HELLO with the same id (a relay
                         that takes over a restored guest finds the start of
                         a frame in the stream by it) */
  /* host -> guest, terminals (vm/agent_pty.c, docs/vm.md "Terminals") */
  SBX_VMF_RESIZE = 6,    /* sbx_vm_pty: the new size of the command's terminal; no
                            answer (the relay answers the daemon) */
  SBX_VMF_SPAWN_PTY = 7, /* sbx_vm_pty, then as SPAWN: the command on a new terminal,
                            whose output comes as STDOUT (never STDERR) and whose
                            input is STDIN (an empty one is ignored: a terminal has
                            no end of file but ^D) */
  /* host -> guest, the files API (48-63) */
  SBX_VMF_FILE_OP = 48, /* as SPAWN, argv[0] SBX_VM_FS_ARGV0: the child runs a file
                           operation itself (vm/agent_fs.c, vm/fs_wire.h), no exec */
  /* guest -> host */
  SBX_VMF_HELLO = 16,       /* empty: the agent is up and set up */
  SBX_VMF_SPAWNED = 17,     /* int32 pid */
  SBX_VMF_SPAWN_FAILED = 18, /* int32 errno, uint32 stage */
  SBX_VMF_STDOUT = 19,      /* bytes */
  SBX_VMF_STDERR = 20,      /* bytes */
  SBX_VMF_EXITED = 21,      /* int32 wait status; after all its output */
  SBX_VMF_SETUP_FAILED = 22, /* int32 errno, then a message */
  /* Egress streams (32-47; vm/agent_net.c, iso/vm_relay_net.c): one per
     connection a command opens to the guest's 127.0.0.1:3128. The id is
     the stream's, chosen by the agent, each new one above the last. */
  SBX_VMF_CONN_OPEN = 32,  /* guest -> host, empty: a new stream */
  SBX_VMF_CONN_DATA = 33,  /* both ways: 1..SBX_VM_CHUNK bytes, within the window */
  SBX_VMF_CONN_CLOSE = 34, /* both ways, empty: the sender sends no more (half-close) */
  SBX_VMF_CONN_RESET = 35, /* both ways, empty: the stream is gone, both directions */
  SBX_VMF_CONN_ACK = 36,   /* both ways: uint32 bytes of DATA the sender consumed */
  /* Host-opened streams (the port proxy, docs/vm.md "Port proxy"): the
     relay's ids have SBX_VM_CONN_HOST_BIT set, each new one above the
     last; the agent connects to the guest's 127.0.0.1:port and answers
     once. Then DATA, CLOSE, RESET and ACK as above. */
  SBX_VMF_CONN_CONNECT = 37,        /* host -> guest: uint32 port (1..65535) */
  SBX_VMF_CONN_CONNECTED = 38,      /* guest -> host, empty: connected */
  SBX_VMF_CONN_CONNECT_FAILED = 39, /* guest -> host: int32 errno; the stream is gone */
};

/* Flow control per stream and direction: at most this many DATA bytes not
   yet ACKed. A receiver holds at most this much for a stream that does not
   drain, so one stuck connection never holds up the port (commands' output,
   other streams). A peer that sends past it is broken. A receiver may
   hold back the ACK of less than 16 KiB (the relay does, so that 1-byte
   frames do not cost an ACK each): a sender never waits for it, having
   the rest of the window. */
#define SBX_VM_CONN_WINDOW (256 * 1024)
/* Streams open at once (the egress proxy's own limit per sandbox). */
#define SBX_VM_CONN_MAX 64
/* In the id of every stream the host opens, never in one the guest opens. */
#define SBX_VM_CONN_HOST_BIT (1ull << 63)
/* A CONNECT the guest has not answered in this long is answered
   CONNECT_FAILED ETIMEDOUT to the daemon and its stream reset (under the
   front end's own wait, core/ports.c). */
#define SBX_VM_CONNECT_TIMEOUT_MS 3000

struct sbx_vm_frame
{
  uint32_t type;
  uint32_t len; /* payload bytes that follow */
  uint64_t id;  /* the command's req_id, 0 when none */
};

struct sbx_vm_setup
{
  uint64_t disk_bytes; /* size of the writable tmpfs (/home/user, /tmp) */
  uint32_t user_uid, user_gid;
  uint32_t seccomp_len; /* bytes of the filter after this struct */
  uint32_t ca_len; /* bytes of sbx's egress CA certificate after the filter; 0: none */
};
#define SBX_VM_CA_MAX (16 * 1024) /* a PEM certificate; more is a broken peer */

/* A terminal's size: columns and rows 1..SBX_PTY_MAX (iso/proto.h). */
struct sbx_vm_pty
{
  uint16_t cols, rows;
  uint32_t reserved; /* 0 */
};

#define SBX_VM_MAX_STRINGS (1000 * 1024)
struct sbx_vm_spawn
{
  uint32_t uid, gid;
  uint32_t argc, envc;
  uint64_t rlimit_nofile, rlimit_fsize;
};

#endif
