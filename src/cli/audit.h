/* sbx CLI: reading the audit log (audit.c; the format is docs/audit.md). */
#ifndef SBX_CLI_AUDIT_H
#define SBX_CLI_AUDIT_H

#include <stddef.h>
#include <stdint.h>

/* The log's files in chain order: audit.log.N by N, then audit.log. */
struct sbx_audit_files
{
  char **names; /* owned */
  size_t n;
  unsigned first_index; /* N of the oldest rotated file; 0 when none */
};
/* -1 with msg when dir cannot be read. */
int sbx_audit_files (const char *dir, struct sbx_audit_files *f, char *msg, size_t cap);
void sbx_audit_files_free (struct sbx_audit_files *f);

struct sbx_audit_verdict
{
  uint64_t records;   /* verified */
  uint64_t first_seq; /* of the first one */
  uint64_t last_seq;
  int trimmed;        /* the oldest files were removed */
  char file[64];      /* of the last verified record */
  unsigned long line;
  char message[1024]; /* "ok: ...", the first break, or the error */
};
/* Check every record of the log in dir (STATE/audit): each line whole and
   canonical, seq one more than the one before, prev the SHA-256 of the
   line before; and when anchor is not NULL (STATE/audit-anchor/head, the
   parent's: priv/audit_anchor.h), that the log still reaches the record
   the daemon last synced, with that very hash (the end not cut). 0 when
   it holds; 1 at the first break (message says where); -1 when it could
   not be read. */
int sbx_audit_verify (const char *dir, const char *anchor, struct sbx_audit_verdict *v);

/* SHA-256 through the system's libcrypto (dlopen on first use). -1 when
   it cannot be loaded. */
int sbx_cli_sha256 (const void *p, size_t n, unsigned char out[32]);

#endif
