/* sbx: what a file operation in a VM's guest writes to its stdout
 * (vm/agent_fs.c in the guest, core/vm_fs.c on the host; docs/vm.md).
 *
 * The agent runs the operation as a command of a kind of its own (frame
 * SBX_VMF_FILE_OP, vm/wire.h): forked and hardened like any command, as
 * the requested user, but running iso/fs.c in the child instead of an
 * exec. Its stdout is a sequence of records, each struct sbx_vm_fs_rec
 * and then exactly `len` bytes: ENTRY (stat, list) or DATA (read) records, then one END
 * (exit status 0) or one ERROR (exit status 1). The host reads all of it
 * as hostile (the guest is the tenant's): it checks every length, count,
 * type and name, and anything else is a broken guest (503).
 */
#ifndef SBX_VM_FS_WIRE_H
#define SBX_VM_FS_WIRE_H

#include <stdint.h>

/* argv[0] of a file operation; the operation's name is argv[1]:
     stat PATH | list PATH DEPTH MAX | mkdir PATH MODE(octal) PARENTS(0|1)
     move FROM TO OVERWRITE(0|1) | remove PATH RECURSIVE(0|1)
     read PATH MAX (DATA records, at most MAX + 1 bytes in all)
     upload PATH MODE(octal) PARENTS(0|1) (the file is the op's stdin)
     metrics DISK (one METRICS record)
     watch PATH RECURSIVE(0|1): not these records but a directory watch's
       (struct sbx_watch_rec, iso/proto.h), until the host kills it */
#define SBX_VM_FS_ARGV0 "sbx-fs"

/* The most the host reads back: a listing stops there (truncated). */
#define SBX_VM_FS_OUT_MAX (16u << 20)
#define SBX_VM_FS_MSG_MAX 1024 /* bytes of an error's message */
#define SBX_VM_FS_DATA_MAX 65536

enum sbx_vm_fs_tag
{
  SBX_VM_FS_ENTRY = 1, /* sbx_vm_fs_entry + name + path + target (no NULs) */
  SBX_VM_FS_END = 2,   /* sbx_vm_fs_end */
  SBX_VM_FS_ERROR = 3, /* sbx_vm_fs_error + message (no NULs) */
  SBX_VM_FS_DATA = 4,  /* a file's bytes (read), at most SBX_VM_FS_DATA_MAX */
  SBX_VM_FS_METRICS = 5, /* sbx_vm_fs_metrics (metrics), exactly one */
};

/* `metrics DISK`: what the guest's kernel says of its memory, CPU and the
   writable disk mounted at DISK (core/vm_metrics.c reads it). */
struct sbx_vm_fs_metrics
{
  uint64_t mem_total, mem_available; /* bytes, /proc/meminfo */
  uint64_t disk_total, disk_free;    /* bytes, statfs(DISK) */
  uint64_t cpu_busy_ticks, cpu_total_ticks; /* USER_HZ ticks since boot, /proc/stat */
  uint32_t cpus;      /* online CPUs */
  uint32_t processes; /* tasks, /proc/loadavg's fourth field */
};

struct sbx_vm_fs_rec
{
  uint32_t tag;
  uint32_t len; /* bytes after this header */
};

struct sbx_vm_fs_entry
{
  uint32_t type; /* enum sbx_fs_type */
  uint32_t mode; /* permission bits */
  uint32_t uid, gid;
  uint64_t size;
  int64_t mtime_sec;
  uint32_t name_len, path_len, target_len;
  uint32_t reserved;
};

struct sbx_vm_fs_end
{
  uint32_t truncated; /* 0 or 1 */
  uint32_t reserved;
};

struct sbx_vm_fs_error
{
  uint32_t kind;     /* enum sbx_error_kind */
  int32_t sys_errno; /* 0, or the errno the message ends with */
};

#endif
