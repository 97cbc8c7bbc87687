/* sbx: the privileged parent's helper processes.
 *
 * The parent forks helpers for work it must not do in its own address
 * space or credentials: the copier (fork, snapshots), the holder of an
 * id-mapped user namespace, the template extractor, mke2fs for VM images.
 * A helper must not outlive the parent (a daemon killed with -9 left its
 * copier writing on, the source sandbox frozen, and holding the inherited
 * sbxd.lock and host-wide names, so that the next `sbx serve` refused to
 * start until it finished), and must hold nothing of the parent's it does
 * not need: the lock descriptors above all.
 */
#ifndef SBX_ISO_HELPER_H
#define SBX_ISO_HELPER_H

#include <stddef.h>
#include <sys/types.h>

/* fork(). In the child (0 returned): SIGKILL when the forking thread ends
   (PR_SET_PDEATHSIG; every caller waits for its helper on that thread, so
   this is the parent's end), or at once if that already happened; and
   every descriptor closed but 0, 1, 2 and keep[0..nkeep) (at most 16).
   Async-signal-safe in the child, as a fork of a threaded process must
   be. -1 with errno when fork fails. */
pid_t sbx_helper_fork (const int *keep, size_t nkeep);
/* The same, the child keeping every descriptor for now: it needs some
   (a cgroup's) before it can know which to keep, and then calls
   sbx_helper_close_all_but itself. */
pid_t sbx_helper_fork_all (void);

/* Close every descriptor above 2 but keep[0..nkeep) (at most 16, any
   order). Async-signal-safe. */
void sbx_helper_close_all_but (const int *keep, size_t nkeep);

#endif
