/* sbx: the directory watch helper's work, shared by the namespace engine
   (iso/init/watch.c) and a VM's guest agent (vm/agent_watch.c). */
#ifndef SBX_WATCH_RUN_H
#define SBX_WATCH_RUN_H

#include "iso/proto.h"

/* The helper's stream (struct sbx_watch_rec records) is fd 1. */
#define OUT_FD 1

/* Watch `path` (absolute, resolved as the caller's user) and, with
   is_recursive, its tree: READY, then events until the directory goes or
   the reader does; FAILED with an errno when it cannot start. Never
   returns. */
__attribute__ ((noreturn)) void sbx_watch_run (const char *path, int is_recursive);
/* The helper's limits, set by whoever starts it (init, the guest agent):
   no core, no realtime priority, no file writes, and only the descriptors
   it needs; a FAILED record and exit if one cannot be set. */
void sbx_watch_run_limits (void);
/* One FAILED record, then exit. */
__attribute__ ((noreturn)) void sbx_watch_run_fail (int sys_errno);

#endif
