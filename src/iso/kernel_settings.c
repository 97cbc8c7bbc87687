/* sbx: the host's kernel settings (kernel_settings.h). */
#include "iso/kernel_settings.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"

const struct sbx_kernel_setting sbx_kernel_settings[] = {
    /* Linux 6.6 brought the switch; before it io_uring is on for all (the
       filter still answers ENOSYS). */
    {"kernel.io_uring_disabled", 2, 1, 1, "io_uring for every process"},
    {"kernel.unprivileged_bpf_disabled", 1, 1, 0, "bpf() for unprivileged processes"},
    {"vm.unprivileged_userfaultfd", 0, 0, 0,
     "userfaultfd for unprivileged processes (a tool to win kernel races)"},
    /* Debian's kernels take 3 (no perf events for the unprivileged at all);
       2 is upstream's strongest. */
    {"kernel.perf_event_paranoid", 2, 1, 0, "perf events of the kernel for the unprivileged"},
    {"kernel.dmesg_restrict", 1, 1, 0, "the kernel log for the unprivileged"},
    {"kernel.kptr_restrict", 2, 1, 0, "kernel pointers in /proc"},
    /* Linux 6.2 brought the switch; before it TIOCSTI always works (the
       filter refuses it in sandboxes). */
    {"dev.tty.legacy_tiocsti", 0, 0, 1, "TIOCSTI, typing into another's terminal"},
    {"fs.protected_hardlinks", 1, 1, 0, "hard links to files one cannot write"},
    {"fs.protected_symlinks", 1, 1, 0, "following others' symlinks in sticky directories"},
};
const size_t sbx_kernel_settings_count =
    sizeof sbx_kernel_settings / sizeof sbx_kernel_settings[0];

_Static_assert (sizeof sbx_kernel_settings / sizeof sbx_kernel_settings[0]
                    <= SBX_KERNEL_SETTINGS_MAX,
                "values[] holds every setting");

/* One decimal number (and a newline), else SBX_SETTING_ABSENT. */
static int32_t
read_setting (int procsys, const char *name)
{
  char path[96], buf[32];
  cleanup_close int fd = -1;
  ssize_t n;
  char *end;
  long v;
  size_t i;

  /* kernel.kptr_restrict lives at kernel/kptr_restrict. */
  if (snprintf (path, sizeof path, "%s", name) >= (int) sizeof path)
    return SBX_SETTING_ABSENT;
  for (i = 0; path[i]; i++)
    if (path[i] == '.')
      path[i] = '/';
  fd = openat (procsys, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return SBX_SETTING_ABSENT;
  n = read (fd, buf, sizeof buf - 1);
  if (n <= 0)
    return SBX_SETTING_ABSENT;
  buf[n] = '\0';
  errno = 0;
  v = strtol (buf, &end, 10);
  if (errno != 0 || end == buf || (*end != '\n' && *end != '\0') || v < INT32_MIN + 1L
      || v > INT32_MAX)
    return SBX_SETTING_ABSENT;
  return (int32_t) v;
}

void
sbx_kernel_settings_read (int procsys, int32_t values[SBX_KERNEL_SETTINGS_MAX])
{
  size_t i;

  for (i = 0; i < SBX_KERNEL_SETTINGS_MAX; i++)
    values[i] = SBX_SETTING_ABSENT;
  for (i = 0; i < sbx_kernel_settings_count; i++)
    values[i] = read_setting (procsys, sbx_kernel_settings[i].name);
}

int
sbx_kernel_setting_weak (size_t i, int32_t value)
{
  const struct sbx_kernel_setting *s;

  assert (i < sbx_kernel_settings_count);
  s = &sbx_kernel_settings[i];
  if (value == SBX_SETTING_ABSENT)
    return !s->absent_is_fine;
  return s->higher_is_stronger ? value < s->recommended : value > s->recommended;
}

void
sbx_kernel_setting_describe (size_t i, int32_t value, char *buf, size_t cap)
{
  const struct sbx_kernel_setting *s = &sbx_kernel_settings[i];
  char is[24];

  assert (i < sbx_kernel_settings_count);
  if (value == SBX_SETTING_ABSENT)
    snprintf (is, sizeof is, "absent");
  else
    snprintf (is, sizeof is, "%d", (int) value);
  snprintf (buf, cap, "%s is %s (%d%s recommended: it guards %s)", s->name, is,
            (int) s->recommended, s->higher_is_stronger ? " or more" : " or less", s->guards);
}

unsigned
sbx_kernel_settings_weak_list (const int32_t values[SBX_KERNEL_SETTINGS_MAX], char *buf, size_t cap)
{
  unsigned n = 0;
  size_t i, len = 0;

  assert (cap > 0);
  buf[0] = '\0';
  for (i = 0; i < sbx_kernel_settings_count; i++)
    if (sbx_kernel_setting_weak (i, values[i]))
      {
        int w = snprintf (buf + len, cap - len, "%s%s", n ? ", " : "", sbx_kernel_settings[i].name);
        if (w > 0 && (size_t) w < cap - len)
          len += (size_t) w;
        n++;
      }
  return n;
}
