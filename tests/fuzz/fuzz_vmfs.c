/* Fuzz target: a VM file operation's answer (core/vm_fs_parse.c), which a
 * hostile guest writes (vm/fs_wire.h, docs/vm.md "Files").
 *
 * Input: [exit code u8 (mod 3)][max entries u8][depth u8 (mod 17)][flags u8:
 * 1 data allowed][records...], parsed with root "/home/user". Invariants:
 *   - the error contract; a failure's kind is the guest's (a kind the file
 *     operations give) or SBX_E_UNAVAILABLE (out of format);
 *   - every entry passed on has names without NUL within their arrays, a
 *     type and mode in range, at most max of them; those the list check
 *     accepts have a plain name (no '/', not "." or "..") and a path under
 *     the root ending in that name;
 *   - DATA: only when allowed, and data_len <= the records' bytes;
 *   - success only with exit code 0, the guest's error only with 1.
 */
#include "fuzz.h"

#include "core/internal.h"

static size_t max_seen;
static int max_allowed;

static int
check_entry (struct sbx_fs_entry *e, void *arg)
{
  (void) arg;
  FUZZ_ASSERT (memchr (e->name, '\0', sizeof e->name) != NULL);
  FUZZ_ASSERT (memchr (e->path, '\0', sizeof e->path) != NULL);
  FUZZ_ASSERT (memchr (e->target, '\0', sizeof e->target) != NULL);
  FUZZ_ASSERT (e->name[0] != '\0' && e->path[0] == '/');
  FUZZ_ASSERT (e->type <= SBX_FS_OTHER && e->mode <= 07777);
  FUZZ_ASSERT (e->type == SBX_FS_SYMLINK || e->target[0] == '\0');
  if (sbx__vm_fs_listed_ok (e, "/home/user", 3))
    {
      size_t pl = strlen (e->path), nl = strlen (e->name);
      FUZZ_ASSERT (strchr (e->name, '/') == NULL);
      FUZZ_ASSERT (strcmp (e->name, ".") != 0 && strcmp (e->name, "..") != 0);
      FUZZ_ASSERT (strncmp (e->path, "/home/user/", 11) == 0);
      FUZZ_ASSERT (pl > nl && strcmp (e->path + pl - nl, e->name) == 0
                   && e->path[pl - nl - 1] == '/');
      FUZZ_ASSERT (strstr (e->path, "/../") == NULL && strstr (e->path, "//") == NULL);
    }
  max_seen++;
  FUZZ_ASSERT ((int) max_seen <= max_allowed);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sbx_vm_fs_answer a;
  sbx_error_t *err = NULL;
  int truncated = -1, rc, data_ok;

  if (size < 4)
    return 0;
  memset (&a, 0, sizeof a);
  a.exit_code = data[0] % 3;
  max_allowed = data[1];
  data_ok = data[3] & 1;
  a.len = size - 4;
  a.data = malloc (a.len ? a.len : 1);
  if (a.data == NULL)
    abort ();
  memcpy (a.data, data + 4, a.len);
  max_seen = 0;
  rc = sbx__vm_fs_parse (&a, (size_t) max_allowed, check_entry, NULL, &truncated, data_ok, &err);
  FUZZ_ASSERT (rc == 0 || rc == -1);
  FUZZ_ASSERT (a.data_len <= a.len);
  FUZZ_ASSERT (data_ok || a.data_len == 0);
  if (rc == 0)
    {
      FUZZ_ASSERT (a.exit_code == 0 && (truncated == 0 || truncated == 1));
      FUZZ_ASSERT (err == NULL);
    }
  else
    {
      FUZZ_ASSERT (err != NULL);
      FUZZ_ASSERT (err->kind == SBX_E_UNAVAILABLE || a.exit_code == 1);
      FUZZ_ASSERT (err->kind == SBX_E_UNAVAILABLE || err->kind == SBX_E_INVALID
                   || err->kind == SBX_E_FORBIDDEN || err->kind == SBX_E_NOT_FOUND
                   || err->kind == SBX_E_CONFLICT || err->kind == SBX_E_TOO_LARGE
                   || err->kind == SBX_E_SYSTEM);
      sbx_error_free (err);
    }
  free (a.data);
  return 0;
}
