/* sbx: the daemon's side of directory watches (SBX_MSG_WATCH): the request
 * to init, and the parser of the records its helper writes into the pipe.
 *
 * The helper runs as the sandbox's user, next to code that is hostile by
 * assumption: its records are checked like anything else from a sandbox.
 * Exact lengths, known types in a fixed order (READY or FAILED first),
 * names that are relative paths without NUL, "", "." or ".." components.
 * Anything else ends the watch.
 */
#include <errno.h>
#include <string.h>

#include "iso/engine.h"
#include "iso/wire.h"
#include "util/buf.h"

int
sbx_iso_watch (struct sbx_iso_box *box, uint64_t req_id, uint32_t uid, uint32_t gid,
               int recursive, const char *path, int write_fd, sbx_error_t **err)
{
  struct sbx_msg_watch m;
  struct sbx_buf packet = SBX_BUF_INIT;
  size_t len = path ? strlen (path) : 0;
  int rc;

  if (len == 0 || path[0] != '/' || len >= SBX_WATCH_PATH_MAX)
    return sbx_err (err, SBX_E_INVALID, "the path to watch must be absolute and shorter than %d bytes",
                    SBX_WATCH_PATH_MAX);
  memset (&m, 0, sizeof m);
  m.hdr.type = SBX_MSG_WATCH;
  m.hdr.len = (uint32_t) (sizeof m + len);
  m.req_id = req_id;
  m.uid = uid;
  m.gid = gid;
  m.flags = recursive ? SBX_WATCH_RECURSIVE : 0;
  m.path_len = (uint32_t) len;
  sbx_buf_append (&packet, &m, sizeof m);
  sbx_buf_append (&packet, path, len);
  rc = packet.failed ? sbx_err_oom (err)
                     : sbx__iso_send (box->ctl, packet.data, packet.len, &write_fd, 1, err);
  sbx_buf_free (&packet);
  return rc;
}

/* A relative path made of names: no NUL, no leading or trailing '/', no
   empty, "." or ".." component. Empty means the watched directory. */
static int
name_ok (const char *s, size_t n)
{
  size_t i, start = 0;

  if (n == 0)
    return 1;
  for (i = 0; i <= n; i++)
    {
      if (i < n && s[i] == '\0')
        return 0;
      if (i == n || s[i] == '/')
        {
          size_t c = i - start;
          if (c == 0 || (c == 1 && s[start] == '.')
              || (c == 2 && s[start] == '.' && s[start + 1] == '.'))
            return 0;
          start = i + 1;
        }
    }
  return 1;
}

static int
take_record (struct sbx_iso_watch_parser *p, const struct sbx_watch_rec *h,
             const unsigned char *body, void (*cb) (void *, const struct sbx_iso_watch_rec *),
             void *arg)
{
  struct sbx_iso_watch_rec rec;

  memset (&rec, 0, sizeof rec);
  rec.type = h->type;
  switch (p->state)
    {
    case 0:
      if (h->type == SBX_WREC_READY && h->len == 0)
        p->state = 1;
      else if (h->type == SBX_WREC_FAILED && h->len == sizeof (int32_t))
        {
          int32_t e;
          memcpy (&e, body, sizeof e);
          if (e <= 0 || e >= 4096)
            return -1;
          rec.sys_errno = e;
          p->state = 2;
        }
      else
        return -1;
      break;
    case 1:
      switch (h->type)
        {
        case SBX_WREC_CREATE:
        case SBX_WREC_WRITE:
          /* About an entry: there is always a name. */
          if (h->len == 0)
            return -1;
          break;
        case SBX_WREC_REMOVE:
        case SBX_WREC_RENAME:
        case SBX_WREC_CHMOD:
          break;
        case SBX_WREC_OVERFLOW:
          if (h->len != 0)
            return -1;
          break;
        default:
          return -1;
        }
      if (!name_ok ((const char *) body, h->len))
        return -1;
      rec.name = (const char *) body;
      rec.len = h->len;
      break;
    default:
      /* Nothing follows FAILED. */
      return -1;
    }
  cb (arg, &rec);
  return 0;
}

int
sbx_iso_watch_feed (struct sbx_iso_watch_parser *p, const void *data, size_t n,
                    void (*cb) (void *arg, const struct sbx_iso_watch_rec *rec), void *arg)
{
  const unsigned char *d = data;
  struct sbx_watch_rec h;

  while (n > 0)
    {
      size_t need, take;

      if (p->hold_len > 0)
        {
          /* The rest of a record that a read cut. */
          if (p->hold_len < sizeof h)
            {
              take = sizeof h - p->hold_len < n ? sizeof h - p->hold_len : n;
              memcpy (p->hold + p->hold_len, d, take);
              p->hold_len += take;
              d += take;
              n -= take;
              if (p->hold_len < sizeof h)
                return 0;
            }
          memcpy (&h, p->hold, sizeof h);
          if (h.len > SBX_WATCH_NAME_MAX)
            return -1;
          need = sizeof h + h.len;
          take = need - p->hold_len < n ? need - p->hold_len : n;
          memcpy (p->hold + p->hold_len, d, take);
          p->hold_len += take;
          d += take;
          n -= take;
          if (p->hold_len < need)
            return 0;
          p->hold_len = 0;
          if (take_record (p, &h, p->hold + sizeof h, cb, arg) < 0)
            return -1;
          continue;
        }
      if (n < sizeof h)
        {
          memcpy (p->hold, d, n);
          p->hold_len = n;
          return 0;
        }
      memcpy (&h, d, sizeof h);
      if (h.len > SBX_WATCH_NAME_MAX)
        return -1;
      need = sizeof h + h.len;
      if (n < need)
        {
          memcpy (p->hold, d, n);
          p->hold_len = n;
          return 0;
        }
      if (take_record (p, &h, d + sizeof h, cb, arg) < 0)
        return -1;
      d += need;
      n -= need;
    }
  return 0;
}
