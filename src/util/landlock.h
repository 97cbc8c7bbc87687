/* sbx: Landlock's kernel ABI, defined here in full because the build
 * host's headers may predate the ABIs the running kernel offers. Used by
 * the sandbox's init and by the daemon's unprivileged front end. Values
 * are the kernel's. */
#ifndef SBX_UTIL_LANDLOCK_H
#define SBX_UTIL_LANDLOCK_H

#include <stdint.h>
#include "util/error.h"

struct sbx_landlock_ruleset_attr
{
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct sbx_landlock_path_beneath
{
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__ ((packed));
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)      /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)   /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15)  /* ABI 5 */
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)              /* ABI 6 */
#define LL_MAX_ABI 6 /* the newest ABI whose rights sbx knows */
#define LL_NET_BIND_TCP (1ULL << 0)    /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1) /* ABI 4 */


/* The running kernel's ABI, capped at LL_MAX_ABI; 0 when it has none. */
long sbx_landlock_abi (void);
/* Every filesystem right `abi` knows. */
uint64_t sbx_landlock_fs_rights (long abi);
/* A ruleset (an fd) handling all of those, plus the TCP rights `net`
   (ABI 4) and the scopes `scoped` (ABI 6) where the ABI has them. */
int sbx_landlock_ruleset (long abi, uint64_t net, uint64_t scoped, sbx_error_t **err);
/* Grant `access` (masked to what abi handles) beneath path, or beneath
   the file fd is open on; a missing path is skipped when `optional`. */
int sbx_landlock_allow (int ruleset, long abi, const char *path, uint64_t access, int optional,
                        sbx_error_t **err);
int sbx_landlock_allow_fd (int ruleset, long abi, int fd, uint64_t access, sbx_error_t **err);
int sbx_landlock_enforce (int ruleset, sbx_error_t **err);

#endif
