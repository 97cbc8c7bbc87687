/* Fuzz target: the template extractor (iso/tmpl_extract.c), which turns
 * hostile archives into layers on the host.
 *
 * Input: [format u8][archive...]: even a directory tar, odd an OCI image
 * archive. Each input is extracted into a fresh build directory beside an
 * empty sibling. Invariants: the result is 0, -1 or -2, with a message
 * exactly when it failed; nothing appears beside the build directory (the
 * sibling stays empty, the parent holds just the two); no setuid/setgid
 * file and no device node but 0/0 whiteouts inside.
 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fuzz.h"
#include "iso/tmpl.h"

static char top[64];

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st;
  (void) flag;
  (void) ftw;
  remove (path);
  return 0;
}

static int
check_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) path;
  (void) flag;
  (void) ftw;
  FUZZ_ASSERT (!(S_ISREG (st->st_mode) && (st->st_mode & 06000)));
  FUZZ_ASSERT (!S_ISBLK (st->st_mode));
  FUZZ_ASSERT (!S_ISCHR (st->st_mode) || st->st_rdev == makedev (0, 0));
  return 0;
}

static size_t
entries (const char *path)
{
  DIR *d = opendir (path);
  struct dirent *de;
  size_t n = 0;

  FUZZ_ASSERT (d != NULL);
  while ((de = readdir (d)) != NULL)
    if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
      n++;
  closedir (d);
  return n;
}

static void
remove_top (void)
{
  nftw (top, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  (void) argc;
  (void) argv;
  snprintf (top, sizeof top, "/tmp/sbx-fuzz-tmpl-XXXXXX");
  FUZZ_ASSERT (mkdtemp (top) != NULL);
  atexit (remove_top);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sbx_tmpl_limits lim = {1u << 20, 512};
  char build[128], side[128], msg[512];
  int in, dir, rc;

  if (size < 1)
    return 0;
  snprintf (build, sizeof build, "%s/build", top);
  snprintf (side, sizeof side, "%s/side", top);
  FUZZ_ASSERT (mkdir (build, 0700) == 0 && mkdir (side, 0700) == 0);
  in = memfd_create ("in", MFD_CLOEXEC);
  FUZZ_ASSERT (in >= 0);
  FUZZ_ASSERT (write (in, data + 1, size - 1) == (ssize_t) (size - 1));
  dir = open (build, O_PATH | O_DIRECTORY | O_CLOEXEC);
  FUZZ_ASSERT (dir >= 0);
  rc = sbx_tmpl_extract (in, dir, (data[0] & 1) ? SBX_TMPL_OCI : SBX_TMPL_DIR, &lim, msg,
                         sizeof msg);
  FUZZ_ASSERT (rc == 0 || rc == -1 || rc == -2);
  FUZZ_ASSERT ((rc == 0) == (msg[0] == '\0'));
  FUZZ_ASSERT (entries (side) == 0 && entries (top) == 2);
  nftw (build, check_one, 16, FTW_PHYS);
  close (dir);
  close (in);
  nftw (build, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  FUZZ_ASSERT (rmdir (side) == 0);
  return 0;
}
