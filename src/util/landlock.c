/* sbx: building a Landlock domain, shared by the daemon's unprivileged
 * processes (front end, egress), template extraction and QEMU. The
 * kernel documentation's pattern: handle every right the running ABI
 * knows, so nothing is allowed merely for being new, then grant paths. */
#include "util/landlock.h"
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "util/cleanup.h"

long
sbx_landlock_abi (void)
{
  long abi = syscall (SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  if (abi < 1)
    return 0;
  return abi > LL_MAX_ABI ? LL_MAX_ABI : abi;
}

uint64_t
sbx_landlock_fs_rights (long abi)
{
  uint64_t all = (LL_FS_MAKE_SYM << 1) - 1;
  if (abi >= 2)
    all |= LL_FS_REFER;
  if (abi >= 3)
    all |= LL_FS_TRUNCATE;
  if (abi >= 5)
    all |= LL_FS_IOCTL_DEV;
  return all;
}

int
sbx_landlock_ruleset (long abi, uint64_t net, uint64_t scoped, sbx_error_t **err)
{
  struct sbx_landlock_ruleset_attr attr = {0};
  size_t attr_size = offsetof (struct sbx_landlock_ruleset_attr, handled_access_net);
  int ruleset;

  attr.handled_access_fs = sbx_landlock_fs_rights (abi);
  if (abi >= 4 && (net || scoped))
    {
      attr.handled_access_net = net;
      attr_size = offsetof (struct sbx_landlock_ruleset_attr, scoped);
    }
  if (abi >= 6 && scoped)
    {
      attr.scoped = scoped;
      attr_size = sizeof attr;
    }
  ruleset = (int) syscall (SYS_landlock_create_ruleset, &attr, attr_size, 0);
  if (ruleset < 0)
    return sbx_err_sys (err, errno, "landlock_create_ruleset");
  return ruleset;
}

int
sbx_landlock_allow_fd (int ruleset, long abi, int fd, uint64_t access, sbx_error_t **err)
{
  struct sbx_landlock_path_beneath rule;
  struct stat st;

  rule.allowed_access = access & sbx_landlock_fs_rights (abi);
  /* A rule on a file takes only the rights a file has (else EINVAL). */
  if (fstat (fd, &st) < 0)
    return sbx_err_sys (err, errno, "fstat");
  if (!S_ISDIR (st.st_mode))
    rule.allowed_access &= LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE
                           | LL_FS_IOCTL_DEV;
  rule.parent_fd = fd;
  if (syscall (SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0) < 0)
    return sbx_err_sys (err, errno, "landlock_add_rule");
  return 0;
}

int
sbx_landlock_allow (int ruleset, long abi, const char *path, uint64_t access, int optional,
                    sbx_error_t **err)
{
  cleanup_close int fd = open (path, O_PATH | O_CLOEXEC);

  if (fd < 0)
    return optional && errno == ENOENT ? 0 : sbx_err_sys (err, errno, "open `%s`", path);
  if (sbx_landlock_allow_fd (ruleset, abi, fd, access, NULL) < 0)
    return sbx_err_sys (err, errno, "landlock rule for `%s`", path);
  return 0;
}

int
sbx_landlock_enforce (int ruleset, sbx_error_t **err)
{
  if (syscall (SYS_landlock_restrict_self, ruleset, 0) < 0)
    return sbx_err_sys (err, errno, "landlock_restrict_self");
  return 0;
}
