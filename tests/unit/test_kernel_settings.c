/* The host's kernel settings (iso/kernel_settings.h): read from a
 * directory laid out as /proc/sys, judged by the recommendation; what
 * cannot be read as one number counts as absent, and nothing there can
 * stall the reader (a FIFO) or lead it elsewhere (a symlink). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iso/kernel_settings.h"
#include "tap.h"

static char root[64];
static int root_fd = -1;

/* Index of a setting by name. */
static size_t
index_of (const char *name)
{
  for (size_t i = 0; i < sbx_kernel_settings_count; i++)
    if (strcmp (sbx_kernel_settings[i].name, name) == 0)
      return i;
  abort ();
}

static int
put (const char *rel, const char *text)
{
  char p[256], dir[256];
  FILE *f;

  snprintf (p, sizeof p, "%s/%s", root, rel);
  /* mkdir -p of its directory */
  snprintf (dir, sizeof dir, "%s", p);
  for (char *slash = dir + strlen (root) + 1; (slash = strchr (slash, '/')) != NULL; slash++)
    {
      *slash = '\0';
      mkdir (dir, 0755);
      *slash = '/';
    }
  f = fopen (p, "w");
  if (f == NULL)
    return -1;
  fputs (text, f);
  return fclose (f);
}

static int
setup (void)
{
  snprintf (root, sizeof root, "/tmp/sbx-test-sysctl-XXXXXX");
  if (mkdtemp (root) == NULL)
    return -1;
  root_fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return root_fd < 0 ? -1 : 0;
}

static void
teardown (void)
{
  char cmd[128];

  close (root_fd);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system (cmd) != 0)
    fprintf (stderr, "# could not remove %s\n", root);
}

/* Every setting as recommended: none weak. */
static int
test_hardened_host (void)
{
  int32_t v[SBX_KERNEL_SETTINGS_MAX];
  char list[512];

  CHECK (put ("kernel/io_uring_disabled", "2\n") == 0);
  CHECK (put ("kernel/unprivileged_bpf_disabled", "2\n") == 0);
  CHECK (put ("vm/unprivileged_userfaultfd", "0\n") == 0);
  CHECK (put ("kernel/perf_event_paranoid", "3\n") == 0);
  CHECK (put ("kernel/dmesg_restrict", "1\n") == 0);
  CHECK (put ("kernel/kptr_restrict", "2\n") == 0);
  CHECK (put ("dev/tty/legacy_tiocsti", "0\n") == 0);
  CHECK (put ("fs/protected_hardlinks", "1\n") == 0);
  CHECK (put ("fs/protected_symlinks", "1\n") == 0);
  sbx_kernel_settings_read (root_fd, v);
  CHECK (v[index_of ("kernel.perf_event_paranoid")] == 3);
  CHECK (sbx_kernel_settings_weak_list (v, list, sizeof list) == 0);
  CHECK_STR (list, "");
  return 0;
}

/* Weak in both directions, and the sentence a warning gives. */
static int
test_weak_values (void)
{
  int32_t v[SBX_KERNEL_SETTINGS_MAX];
  char list[512], line[256];
  size_t kptr = index_of ("kernel.kptr_restrict");

  CHECK (put ("kernel/kptr_restrict", "1\n") == 0);
  CHECK (put ("vm/unprivileged_userfaultfd", "1\n") == 0);
  sbx_kernel_settings_read (root_fd, v);
  CHECK (v[kptr] == 1);
  CHECK (sbx_kernel_setting_weak (kptr, 1));
  CHECK (!sbx_kernel_setting_weak (kptr, 2));
  CHECK (sbx_kernel_setting_weak (index_of ("vm.unprivileged_userfaultfd"), 1));
  CHECK (sbx_kernel_settings_weak_list (v, list, sizeof list) == 2);
  CHECK_STR (list, "vm.unprivileged_userfaultfd, kernel.kptr_restrict");
  sbx_kernel_setting_describe (kptr, 1, line, sizeof line);
  CHECK_STR (line, "kernel.kptr_restrict is 1 (2 or more recommended: it guards kernel pointers"
                   " in /proc)");
  CHECK (put ("kernel/kptr_restrict", "2\n") == 0);
  CHECK (put ("vm/unprivileged_userfaultfd", "0\n") == 0);
  return 0;
}

/* Missing: weak unless the kernel lacks the interface (or always guards
   it) without the switch; io_uring_disabled came with 6.6. */
static int
test_absent (void)
{
  int32_t v[SBX_KERNEL_SETTINGS_MAX];
  char list[512], line[256];
  char p[256];
  size_t uring = index_of ("kernel.io_uring_disabled");

  snprintf (p, sizeof p, "%s/kernel/io_uring_disabled", root);
  CHECK (unlink (p) == 0);
  snprintf (p, sizeof p, "%s/kernel/dmesg_restrict", root);
  CHECK (unlink (p) == 0);
  sbx_kernel_settings_read (root_fd, v);
  CHECK (v[uring] == SBX_SETTING_ABSENT);
  CHECK (!sbx_kernel_setting_weak (uring, SBX_SETTING_ABSENT));
  CHECK (sbx_kernel_settings_weak_list (v, list, sizeof list) == 1);
  CHECK_STR (list, "kernel.dmesg_restrict");
  sbx_kernel_setting_describe (index_of ("kernel.dmesg_restrict"), SBX_SETTING_ABSENT, line,
                               sizeof line);
  CHECK (strncmp (line, "kernel.dmesg_restrict is absent (1 or more", 42) == 0);
  /* Unreadable (no /proc/sys at all): every one that must exist is weak. */
  sbx_kernel_settings_read (-1, v);
  CHECK (sbx_kernel_settings_weak_list (v, list, sizeof list) == 7);
  CHECK (put ("kernel/io_uring_disabled", "2\n") == 0);
  CHECK (put ("kernel/dmesg_restrict", "1\n") == 0);
  return 0;
}

/* Not one number: absent (so weak where that matters). A FIFO does not
   stall the read; a symlink is not followed. */
static int
test_hostile_files (void)
{
  static const char *const bad[] = {"", "abc\n", "2 2\n", "2x\n", "99999999999999999999\n",
                                    "-2147483648\n"};
  int32_t v[SBX_KERNEL_SETTINGS_MAX];
  size_t dmesg = index_of ("kernel.dmesg_restrict");
  char p[256], target[256];

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      CHECK (put ("kernel/dmesg_restrict", bad[i]) == 0);
      sbx_kernel_settings_read (root_fd, v);
      CHECK (v[dmesg] == SBX_SETTING_ABSENT);
      CHECK (sbx_kernel_setting_weak (dmesg, v[dmesg]));
    }
  snprintf (p, sizeof p, "%s/kernel/dmesg_restrict", root);
  CHECK (unlink (p) == 0);
  CHECK (mkfifo (p, 0644) == 0);
  {
    /* A writer holds it open: a blocking read would wait for ever. */
    int w = open (p, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    CHECK (w >= 0);
    sbx_kernel_settings_read (root_fd, v);
    CHECK (v[dmesg] == SBX_SETTING_ABSENT);
    close (w);
  }
  CHECK (unlink (p) == 0);
  snprintf (target, sizeof target, "%s/one", root);
  CHECK (put ("one", "1\n") == 0);
  CHECK (symlink (target, p) == 0);
  sbx_kernel_settings_read (root_fd, v);
  CHECK (v[dmesg] == SBX_SETTING_ABSENT);
  CHECK (unlink (p) == 0);
  CHECK (put ("kernel/dmesg_restrict", "1\n") == 0);
  sbx_kernel_settings_read (root_fd, v);
  CHECK (v[dmesg] == 1);
  return 0;
}

int
main (void)
{
  if (setup () < 0)
    {
      printf ("Bail out! cannot make a temporary directory\n");
      return 1;
    }
  RUN (test_hardened_host);
  RUN (test_weak_values);
  RUN (test_absent);
  RUN (test_hostile_files);
  teardown ();
  return tap_done ();
}
