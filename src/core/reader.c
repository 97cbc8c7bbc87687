/* sbx: streaming readers: turn a command's output buffers into NDJSON
 * lines (start, stdout, stderr, dropped, exit) for an HTTP stream, and
 * release a lossless (BLOCK) buffer as the reader consumes it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "util/base64.h"
#include "util/utf8.h"

#define LINE_CHUNK 49152 /* output bytes per NDJSON line */

void
sbx_reader_init (struct sbx_reader *r, struct sbx_process *p, int primary, int base64)
{
  memset (r, 0, sizeof *r);
  pthread_mutex_lock (&sbx_core.lock);
  p->refs++;
  r->p = p;
  r->primary = primary;
  r->base64 = base64;
  /* From the very first byte: what the buffer no longer holds is reported
     as dropped by the first sbx_reader_next. */
  r->off[0] = 0;
  r->off[1] = 0;
  pthread_mutex_unlock (&sbx_core.lock);
}

void
sbx_reader_release (struct sbx_reader *r)
{
  struct sbx_process *p = r->p;
  int i;

  if (p == NULL)
    return;
  pthread_mutex_lock (&sbx_core.lock);
  /* Nobody reads this lossless stream any more (its client went away):
     stop holding the writer back, or a full buffer keeps the pipe full
     and the command never finishes, not even once killed. What it still
     writes is kept as for a background process. */
  if (r->primary && p->mode == SBX_OUT_BLOCK)
    {
      p->mode = SBX_OUT_TAIL;
      for (i = 0; i < 2; i++)
        if (p->out[i].paused && p->out[i].fd >= 0)
          {
            p->out[i].paused = 0;
            sbx__watch_mod (p->out[i].watch, EPOLLIN);
          }
    }
  sbx__process_unref_locked (p);
  pthread_mutex_unlock (&sbx_core.lock);
  r->p = NULL;
}

static void
emit_data (struct sbx_reader *r, struct sbx_buf *out, int idx, const char *data, size_t n, int final)
{
  struct sbx_buf enc = SBX_BUF_INIT;
  json_t *line;
  char *text;

  if (r->base64)
    sbx_base64_encode (&enc, data, n);
  else
    {
      /* Prepend bytes of a character split by the previous chunk. */
      struct sbx_buf joined = SBX_BUF_INIT;
      size_t used;
      sbx_buf_append (&joined, r->utf8_hold[idx], (size_t) r->utf8_hold_len[idx]);
      sbx_buf_append (&joined, data, n);
      used = sbx_utf8_sanitize (&enc, joined.data, joined.len, final);
      r->utf8_hold_len[idx] = (int) (joined.len - used);
      memcpy (r->utf8_hold[idx], joined.data + used, joined.len - used);
      sbx_buf_free (&joined);
    }
  if (enc.len == 0)
    {
      sbx_buf_free (&enc);
      return;
    }
  line = json_pack ("{s:s, s:s%}", "type", idx == 0 ? "stdout" : "stderr", "data", enc.data,
                    enc.len);
  text = json_dumps (line, JSON_COMPACT | JSON_REAL_PRECISION (10));
  if (text == NULL)
    sbx_oom ();
  sbx_buf_append (out, text, strlen (text));
  sbx_buf_append (out, "\n", 1);
  free (text);
  json_decref (line);
  sbx_buf_free (&enc);
}

static void
emit_json_line (struct sbx_buf *out, json_t *o)
{
  char *text = json_dumps (o, JSON_COMPACT | JSON_REAL_PRECISION (10));

  if (text == NULL)
    sbx_oom ();
  sbx_buf_append (out, text, strlen (text));
  sbx_buf_append (out, "\n", 1);
  free (text);
  json_decref (o);
}

int
sbx_reader_next (struct sbx_reader *r, struct sbx_buf *out, int64_t wait_ms)
{
  struct sbx_process *p = r->p;
  struct timespec ts;
  int waited = 0, i, complete = 0;
  char *chunk = malloc (LINE_CHUNK);

  if (chunk == NULL)
    sbx_oom ();
  sbx__abstime (&ts, wait_ms);
  pthread_mutex_lock (&sbx_core.lock);
  for (;;)
    {
      int progress = 0, all_read = 1;
      uint64_t dropped[2] = {0, 0};

      if (!r->sent_start)
        {
          emit_json_line (out, json_pack ("{s:s, s:o}", "type", "start", "pid",
                                          p->pid > 0 ? json_integer (p->pid) : json_null ()));
          r->sent_start = 1;
          progress = 1;
        }
      /* Say what was lost before the output that follows it. */
      for (i = 0; i < 2; i++)
        if (r->off[i] < p->out[i].start)
          {
            dropped[i] = p->out[i].start - r->off[i];
            r->off[i] = p->out[i].start;
          }
      if (dropped[0] || dropped[1])
        {
          emit_json_line (out, json_pack ("{s:s, s:I, s:I}", "type", "dropped", "stdout",
                                          (json_int_t) dropped[0], "stderr", (json_int_t) dropped[1]));
          progress = 1;
        }
      for (i = 0; i < 2; i++)
        {
          struct sbx_outbuf *o = &p->out[i];
          size_t n;
          n = (size_t) (o->end - r->off[i]);
          if (n > LINE_CHUNK)
            n = LINE_CHUNK;
          if (n > 0)
            {
              sbx__outbuf_copy (o, p->mode, r->off[i], chunk, n);
              r->off[i] += n;
              emit_data (r, out, i, chunk, n, 0);
              progress = 1;
              if (r->primary && p->mode == SBX_OUT_BLOCK)
                {
                  o->start = r->off[i];
                  if (o->paused && o->fd >= 0)
                    {
                      o->paused = 0;
                      sbx__watch_mod (o->watch, EPOLLIN);
                    }
                }
            }
          if (r->off[i] < o->end || o->fd >= 0)
            all_read = 0;
        }
      if (progress)
        break;
      if (p->state == SBX_PROC_DONE && all_read)
        {
          json_t *o;
          for (i = 0; i < 2; i++)
            if (r->utf8_hold_len[i])
              emit_data (r, out, i, "", 0, 1);
          o = sbx__process_result_locked (p, 0, 0);
          json_object_set_new (o, "type", json_string ("exit"));
          emit_json_line (out, o);
          r->sent_exit = 1;
          complete = 1;
          break;
        }
      if (waited)
        break;
      if (pthread_cond_timedwait (&p->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
        waited = 1;
    }
  pthread_mutex_unlock (&sbx_core.lock);
  free (chunk);
  return complete;
}
