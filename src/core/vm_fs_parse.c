/* sbx: a VM file operation's answer, read as hostile (core/vm_fs.c,
 * vm/fs_wire.h, docs/vm.md "Files"). Pure functions of the bytes, so that
 * tests/fuzz/fuzz_vmfs.c can throw anything at them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "util/cleanup.h"
#include "vm/fs_wire.h"

int
sbx__vm_fs_broken (const char *what, sbx_error_t **err)
{
  return sbx_err (err, SBX_E_UNAVAILABLE, "the VM's agent answered a file operation out of "
                                          "format (%s)",
                  what);
}

static int
has_nul (const char *s, size_t n)
{
  return memchr (s, '\0', n) != NULL;
}

/* The error the guest reported, checked: a kind the file operations can
   give, an errno in range, a message without NULs. */
static int
guest_error (const char *p, size_t n, sbx_error_t **err)
{
  struct sbx_vm_fs_error m;
  size_t ml;

  if (n < sizeof m)
    return sbx__vm_fs_broken ("a short error", err);
  memcpy (&m, p, sizeof m);
  ml = n - sizeof m;
  if (ml == 0 || ml > SBX_VM_FS_MSG_MAX || has_nul (p + sizeof m, ml) || m.sys_errno < 0
      || m.sys_errno > 4095)
    return sbx__vm_fs_broken ("an error's message", err);
  switch (m.kind)
    {
    case SBX_E_INVALID:
    case SBX_E_FORBIDDEN:
    case SBX_E_NOT_FOUND:
    case SBX_E_CONFLICT:
    case SBX_E_TOO_LARGE:
    case SBX_E_SYSTEM:
      break;
    default:
      return sbx__vm_fs_broken ("an error's kind", err);
    }
  /* The message already ends with strerror: no second one. */
  sbx_err (err, (enum sbx_error_kind) m.kind, "%.*s", (int) ml, p + sizeof m);
  if (*err)
    (*err)->sys_errno = m.sys_errno;
  return -1;
}

/* One ENTRY's payload into *e; the path's own checks are the caller's. */
static int
parse_entry (const char *p, size_t n, struct sbx_fs_entry *e, sbx_error_t **err)
{
  struct sbx_vm_fs_entry w;
  const char *name, *path, *target;

  if (n < sizeof w)
    return sbx__vm_fs_broken ("a short entry", err);
  memcpy (&w, p, sizeof w);
  if (w.name_len == 0 || w.name_len >= sizeof e->name || w.path_len == 0
      || w.path_len >= sizeof e->path || w.target_len >= sizeof e->target
      || (size_t) w.name_len + w.path_len + w.target_len != n - sizeof w)
    return sbx__vm_fs_broken ("an entry's lengths", err);
  if (w.type > SBX_FS_OTHER || w.mode > 07777 || w.uid > 65535 || w.gid > 65535
      || w.size > INT64_MAX || (w.type != SBX_FS_SYMLINK && w.target_len != 0))
    return sbx__vm_fs_broken ("an entry's fields", err);
  name = p + sizeof w;
  path = name + w.name_len;
  target = path + w.path_len;
  if (has_nul (name, w.name_len) || has_nul (path, w.path_len)
      || has_nul (target, w.target_len) || path[0] != '/')
    return sbx__vm_fs_broken ("an entry's names", err);
  memset (e, 0, sizeof *e);
  e->type = (enum sbx_fs_type) w.type;
  e->mode = w.mode;
  e->uid = w.uid;
  e->gid = w.gid;
  e->size = w.size;
  e->mtime_sec = w.mtime_sec;
  memcpy (e->name, name, w.name_len);
  memcpy (e->path, path, w.path_len);
  memcpy (e->target, target, w.target_len);
  return 0;
}

/* A listed entry's name is one plain name, and its path the listed
   directory's, then directories at most depth - 1 deep, then the name. */
int
sbx__vm_fs_listed_ok (const struct sbx_fs_entry *e, const char *root, int depth)
{
  size_t rl = strcmp (root, "/") == 0 ? 0 : strlen (root);
  const char *rest, *c;
  int parts = 0;

  if (strchr (e->name, '/') || strcmp (e->name, ".") == 0 || strcmp (e->name, "..") == 0)
    return 0;
  if (strncmp (e->path, root, rl) != 0 || e->path[rl] != '/')
    return 0;
  rest = e->path + rl + 1;
  for (c = rest;; c++)
    if (*c == '/' || *c == '\0')
      {
        size_t len = (size_t) (c - rest);
        if (len == 0 || (len == 1 && rest[0] == '.') || (len == 2 && rest[0] == '.' && rest[1] == '.'))
          return 0;
        parts++;
        if (*c == '\0')
          return parts <= depth && strcmp (rest, e->name) == 0;
        rest = c + 1;
      }
}

/* Walk the records: ENTRYs to fn (at most max), then END (exit 0) or
   ERROR (exit 1), and nothing after. */
int
sbx__vm_fs_parse (struct sbx_vm_fs_answer *a, size_t max, int (*fn) (struct sbx_fs_entry *e, void *arg), void *arg,
       int *truncated, int data_ok, sbx_error_t **err)
{
  cleanup_free struct sbx_fs_entry *e = malloc (sizeof *e);
  size_t off = 0, count = 0;

  if (e == NULL)
    return sbx_err_oom (err);
  while (off < a->len)
    {
      struct sbx_vm_fs_rec h;
      const char *p;
      if (a->len - off < sizeof h)
        return sbx__vm_fs_broken ("a short record", err);
      memcpy (&h, a->data + off, sizeof h);
      off += sizeof h;
      if (h.len > a->len - off)
        return sbx__vm_fs_broken ("a record's length", err);
      p = a->data + off;
      off += h.len;
      switch (h.tag)
        {
        case SBX_VM_FS_DATA:
          /* Moved down over the headers: the answer becomes the file. */
          if (!data_ok || h.len == 0 || h.len > SBX_VM_FS_DATA_MAX)
            return sbx__vm_fs_broken ("data", err);
          memmove (a->data + a->data_len, p, h.len);
          a->data_len += h.len;
          break;
        case SBX_VM_FS_ENTRY:
          if (++count > max || parse_entry (p, h.len, e, err) < 0)
            return count > max ? sbx__vm_fs_broken ("too many entries", err) : -1;
          if (fn (e, arg) < 0)
            return -1;
          break;
        case SBX_VM_FS_END:
          {
            struct sbx_vm_fs_end m;
            if (h.len != sizeof m || off != a->len || a->exit_code != 0)
              return sbx__vm_fs_broken ("the end", err);
            memcpy (&m, p, sizeof m);
            if (m.truncated > 1)
              return sbx__vm_fs_broken ("the end", err);
            if (truncated)
              *truncated = (int) m.truncated;
            return 0;
          }
        case SBX_VM_FS_ERROR:
          if (off != a->len || a->exit_code != 1 || count != 0 || a->data_len != 0)
            return sbx__vm_fs_broken ("an error", err);
          return guest_error (p, h.len, err);
        default:
          return sbx__vm_fs_broken ("a record's tag", err);
        }
    }
  return sbx__vm_fs_broken ("no end", err);
}

