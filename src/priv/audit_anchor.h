/* sbx: the audit log's anchor, kept by the root parent.
 *
 * The chain of the log (core/audit.h) shows a record edited, removed or
 * reordered in the middle, but not the last records cut off: what is
 * left is a valid chain. So the front end tells the parent, after each
 * sync of the log, the seq and hash of the last record; the parent keeps
 * the highest in STATE/audit-anchor/head (root's file in a root 0755
 * directory: the front end, whose account owns the log, cannot write it)
 * and `sbx audit verify` checks the log still reaches it, with that very
 * record. A head that goes back is refused. When the anchor is missing
 * while the log has records (removed, or a state from before anchors),
 * it is remade from the log as it is, and says so for good: verify
 * reports it, and the front end records it in the log.
 *
 * The file, text: "sbx audit anchor 1\nseq N\nhash HEX\n" and, once
 * remade, "remade SEQ TIME\n".
 */
#ifndef SBX_PRIV_AUDIT_ANCHOR_H
#define SBX_PRIV_AUDIT_ANCHOR_H

#include <stdint.h>

#include "util/error.h"

#define SBX_AUDIT_ANCHOR_DIR "audit-anchor"
#define SBX_AUDIT_ANCHOR_FILE "head"

/* Open (or make) the anchor of state_dir's log. *remade: 0, or the seq
   it was remade at plus one. */
int sbx_audit_anchor_open (const char *state_dir, uint64_t *remade, sbx_error_t **err);

/* The log's last synced record is seq with hash: kept when it is past the
   anchor. 0 kept or already there; -1 refused (it goes back, or its hash
   differs at the same seq), logged. */
int sbx_audit_anchor_advance (uint64_t seq, const unsigned char hash[32]);

#endif
