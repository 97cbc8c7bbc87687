/* sbx: watching a directory of a sandbox: GET .../files/watch answers an
 * NDJSON stream of events until the client hangs up or the directory is
 * gone. The watch itself runs inside the sandbox (core/watch.c). */
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "util/utf8.h"

#define KEEPALIVE_MS 10000
#define POLL_SLICE_MS 1000
/* Lines gathered per read of the stream once events are flowing. */
#define BATCH_BYTES (32 * 1024)

static const char *
type_name (int type)
{
  switch (type)
    {
    case SBX_WATCH_CREATE:
      return "create";
    case SBX_WATCH_WRITE:
      return "write";
    case SBX_WATCH_REMOVE:
      return "remove";
    case SBX_WATCH_RENAME:
      return "rename";
    case SBX_WATCH_CHMOD:
      return "chmod";
    case SBX_WATCH_OVERFLOW:
      return "overflow";
    default:
      return NULL;
    }
}

void
sbx_watch_event_line (struct sbx_buf *out, const struct sbx_watch_event *ev)
{
  struct sbx_buf name = SBX_BUF_INIT;
  const char *type = type_name (ev->type);
  json_t *o;
  char *s = NULL;

  if (type == NULL)
    return;
  o = json_object ();
  if (o == NULL || json_object_set_new (o, "type", json_string (type)) < 0)
    goto out;
  if (ev->type != SBX_WATCH_OVERFLOW)
    {
      /* File names are bytes: invalid UTF-8 shows as U+FFFD. */
      sbx_utf8_sanitize (&name, ev->name, strnlen (ev->name, sizeof ev->name), 1);
      if (name.failed
          || json_object_set_new (o, "name", json_stringn (name.data ? name.data : "", name.len))
                 < 0)
        goto out;
    }
  s = json_dumps (o, JSON_COMPACT);
out:
  if (s)
    {
      sbx_buf_append (out, s, strlen (s));
      sbx_buf_append (out, "\n", 1);
    }
  else
    out->failed = 1; /* a line that cannot be made: the stream cannot go on */
  free (s);
  json_decref (o);
  sbx_buf_free (&name);
}

struct watch_stream
{
  struct sbx_watch *w; /* owned */
  struct sbx_req *req; /* valid while MHD calls us */
  struct sbx_buf pending;
  int done;
  int64_t idle_ms;
  struct sbx_watch_event ev;
};

static ssize_t
watch_read (void *cls, uint64_t pos, char *buf, size_t max)
{
  struct watch_stream *s = cls;
  size_t n;

  (void) pos;
  while (s->pending.len == 0)
    {
      int rc;
      if (s->done)
        return MHD_CONTENT_READER_END_OF_STREAM;
      rc = sbx_watch_next (s->w, &s->ev, POLL_SLICE_MS);
      /* Take what else is there now, up to a batch, in one write. */
      while (rc == 1)
        {
          sbx_watch_event_line (&s->pending, &s->ev);
          if (s->pending.len >= BATCH_BYTES || s->pending.failed)
            break;
          rc = sbx_watch_next (s->w, &s->ev, 0);
        }
      if (rc < 0)
        s->done = 1; /* after what is pending */
      if (s->pending.failed)
        return MHD_CONTENT_READER_END_WITH_ERROR;
      if (s->pending.len)
        {
          s->idle_ms = 0;
          break;
        }
      if (s->done)
        continue;
      if (sbx_req_client_gone (s->req))
        return MHD_CONTENT_READER_END_WITH_ERROR;
      s->idle_ms += POLL_SLICE_MS;
      if (s->idle_ms >= KEEPALIVE_MS)
        {
          static const char keepalive[] = "{\"type\":\"keepalive\"}\n";
          sbx_buf_append (&s->pending, keepalive, sizeof keepalive - 1);
          if (s->pending.failed)
            return MHD_CONTENT_READER_END_WITH_ERROR;
          s->idle_ms = 0;
        }
    }
  n = s->pending.len < max ? s->pending.len : max;
  memcpy (buf, s->pending.data, n);
  sbx_buf_consume (&s->pending, n);
  return (ssize_t) n;
}

static void
watch_free (void *cls)
{
  struct watch_stream *s = cls;

  /* The client hung up, or the stream ended: the helper goes. */
  sbx_watch_stop (s->w);
  sbx_buf_free (&s->pending);
  free (s);
}

void
sbx_route_file_watch (struct sbx_req *r)
{
  const char *path = sbx_req_query (r, "path");
  char abs[SBX_FS_PATH_MAX];
  struct sbx_sandbox *sb = NULL;
  struct watch_stream *s = NULL;
  struct MHD_Response *resp;
  sbx_error_t *err = NULL;
  int recursive = 0;

  if (path == NULL || path[0] == '\0')
    {
      sbx_reply_errorf (r, SBX_E_INVALID, "the `path` query parameter is required");
      return;
    }
  if (sbx_query_bool (r, "recursive", &recursive, &err) < 0
      || sbx_fs_normalize (path, abs, sizeof abs, &err) < 0
      || (sb = sbx_req_sandbox (r, 2, &err)) == NULL)
    goto fail;
  s = calloc (1, sizeof *s);
  if (s == NULL)
    {
      sbx_err_oom (&err);
      goto fail;
    }
  s->w = sbx_watch_start (sb, abs, recursive, sbx_req_query (r, "user"), &err);
  if (s->w == NULL)
    goto fail;
  s->req = r;
  resp = MHD_create_response_from_callback (MHD_SIZE_UNKNOWN, 32 * 1024, watch_read, s, watch_free);
  if (resp == NULL)
    {
      sbx_err_oom (&err);
      goto fail;
    }
  MHD_add_response_header (resp, "Content-Type", "application/x-ndjson");
  sbx_reply_response (r, 200, resp);
  sbx_sandbox_unref (sb); /* the watch holds its own */
  return;
fail:
  if (s)
    {
      sbx_watch_stop (s->w);
      free (s);
    }
  if (sb)
    sbx_sandbox_unref (sb);
  sbx_reply_error (r, err);
}
