/* sbx: streaming readers: turn a command's output buffers into NDJSON
 * lines (start, stdout, stderr, dropped, exit) for an HTTP stream, and
 * release a lossless (BLOCK) buffer as its slowest attached reader
 * consumes it. */
#include <assert.h>
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

/* BLOCK: the buffer keeps what the slowest attached reader has not read
   (its start follows the lowest offset), and reading the pipe resumes
   once that frees room. Core lock held. */
static void
pace_locked (struct sbx_process *p)
{
  int i;

  assert (p->mode == SBX_OUT_BLOCK);
  for (i = 0; i < 2; i++)
    {
      struct sbx_outbuf *o = &p->out[i];
      uint64_t lowest = o->end;
      const struct sbx_reader *r;

      for (r = p->readers; r != NULL; r = r->next_reader)
        if (r->off[i] < lowest)
          lowest = r->off[i];
      if (lowest > o->start)
        {
          o->start = lowest;
          sbx__outbuf_resume (p, i);
        }
    }
}

void
sbx_reader_init (struct sbx_reader *r, struct sbx_process *p, int base64)
{
  int i;

  memset (r, 0, sizeof *r);
  pthread_mutex_lock (&sbx_core.lock);
  p->refs++;
  r->p = p;
  r->base64 = base64;
  /* HEAD and TAIL from the very first byte: what the buffer no longer
     holds is reported as dropped by the first sbx_reader_next. BLOCK from
     what the attached readers still hold, or from where the last reader
     stopped (a reconnect then hears what was dropped meanwhile). */
  for (i = 0; i < 2; i++)
    r->off[i] = p->mode != SBX_OUT_BLOCK ? 0
                : p->readers != NULL     ? p->out[i].start
                                         : p->resume_off[i];
  if (p->mode == SBX_OUT_BLOCK)
    {
      r->next_reader = p->readers;
      p->readers = r;
      p->unpaced = 0;
    }
  pthread_mutex_unlock (&sbx_core.lock);
}

void
sbx_reader_release (struct sbx_reader *r)
{
  struct sbx_process *p = r->p;
  struct sbx_reader **link;
  int i;

  if (p == NULL)
    return;
  pthread_mutex_lock (&sbx_core.lock);
  if (p->mode == SBX_OUT_BLOCK)
    {
      for (link = &p->readers; *link != r; link = &(*link)->next_reader)
        assert (*link != NULL);
      *link = r->next_reader;
      if (p->readers == NULL)
        {
          /* Nobody paces it any more: it runs on unpaced (its newest
             output stays for a reader that attaches later, see
             sbx__process_on_output), and a later reader starts where
             this one stopped. Otherwise a command with a full buffer and
             no reader would never finish. */
          p->unpaced = 1;
          for (i = 0; i < 2; i++)
            {
              struct sbx_outbuf *o = &p->out[i];
              p->resume_off[i] = r->off[i] > o->start ? r->off[i] : o->start;
              o->start = p->resume_off[i];
              sbx__outbuf_resume (p, i);
            }
        }
      else
        pace_locked (p);
    }
  pthread_mutex_unlock (&sbx_core.lock);
  sbx_process_unref (p);
  r->p = NULL;
}

/* Whether sbx_reader_next would give something now. Core lock held. */
static int
has_news_locked (const struct sbx_reader *r)
{
  const struct sbx_process *p = r->p;
  int i, all_read = 1;

  if (!r->sent_start)
    return 1;
  for (i = 0; i < 2; i++)
    {
      if (r->off[i] < p->out[i].end)
        return 1; /* output, or a drop to report */
      if (p->out[i].fd >= 0)
        all_read = 0;
    }
  return !r->sent_exit && p->state == SBX_PROC_DONE && all_read;
}

int
sbx_reader_wait (struct sbx_reader *r, int64_t wait_ms)
{
  struct sbx_process *p = r->p;
  struct timespec ts;
  int news;

  sbx__abstime (&ts, wait_ms);
  pthread_mutex_lock (&sbx_core.lock);
  while (!(news = has_news_locked (r)))
    if (pthread_cond_timedwait (&p->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
      {
        news = has_news_locked (r);
        break;
      }
  pthread_mutex_unlock (&sbx_core.lock);
  return news;
}

static int emit_json_line (struct sbx_buf *out, json_t *o);

/* Each emit_* returns -1 when memory ran out (the line is then missing). */
static int
emit_data (struct sbx_reader *r, struct sbx_buf *out, int idx, const char *data, size_t n, int final)
{
  struct sbx_buf enc = SBX_BUF_INIT;
  json_t *line;

  if (r->base64)
    sbx_base64_encode (&enc, data, n);
  else
    {
      /* Prepend bytes of a character split by the previous chunk. */
      struct sbx_buf joined = SBX_BUF_INIT;
      size_t used;
      sbx_buf_append (&joined, r->utf8_hold[idx], (size_t) r->utf8_hold_len[idx]);
      sbx_buf_append (&joined, data, n);
      if (joined.failed)
        {
          sbx_buf_free (&joined);
          return -1;
        }
      used = sbx_utf8_sanitize (&enc, joined.data, joined.len, final);
      r->utf8_hold_len[idx] = (int) (joined.len - used);
      memcpy (r->utf8_hold[idx], joined.data + used, joined.len - used);
      sbx_buf_free (&joined);
    }
  if (enc.failed)
    {
      sbx_buf_free (&enc);
      return -1;
    }
  if (enc.len == 0)
    {
      sbx_buf_free (&enc);
      return 0;
    }
  line = json_pack ("{s:s, s:s%}", "type", idx == 0 ? "stdout" : "stderr", "data", enc.data,
                    enc.len);
  sbx_buf_free (&enc);
  return emit_json_line (out, line);
}

static int
emit_json_line (struct sbx_buf *out, json_t *o)
{
  char *text = o ? json_dumps (o, JSON_COMPACT | JSON_REAL_PRECISION (10)) : NULL;

  json_decref (o);
  if (text == NULL)
    return -1;
  sbx_buf_append (out, text, strlen (text));
  sbx_buf_append (out, "\n", 1);
  free (text);
  return out->failed ? -1 : 0;
}

int
sbx_reader_next (struct sbx_reader *r, struct sbx_buf *out, int64_t wait_ms)
{
  struct sbx_process *p = r->p;
  struct timespec ts;
  int waited = 0, i, complete = 0;
  char *chunk = malloc (LINE_CHUNK);

  if (chunk == NULL)
    return -1;
  sbx_json_alloc_reset ();
  sbx__abstime (&ts, wait_ms);
  pthread_mutex_lock (&sbx_core.lock);
  for (;;)
    {
      int progress = 0, all_read = 1;
      uint64_t dropped[2] = {0, 0};

      if (!r->sent_start)
        {
          if (emit_json_line (out, json_pack ("{s:s, s:o}", "type", "start", "pid",
                                              p->pid > 0 ? json_integer (p->pid) : json_null ()))
              < 0)
            goto oom;
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
          if (emit_json_line (out, json_pack ("{s:s, s:I, s:I}", "type", "dropped", "stdout",
                                              (json_int_t) dropped[0], "stderr",
                                              (json_int_t) dropped[1]))
              < 0)
            goto oom;
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
              if (emit_data (r, out, i, chunk, n, 0) < 0)
                goto oom;
              progress = 1;
              if (p->mode == SBX_OUT_BLOCK)
                pace_locked (p);
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
              if (emit_data (r, out, i, "", 0, 1) < 0)
                goto oom;
          o = sbx__process_result_locked (p, 0, 0);
          json_object_set_new (o, "type", json_string ("exit"));
          if (emit_json_line (out, o) < 0 || sbx_json_alloc_failed ())
            goto oom;
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
  return sbx_json_alloc_failed () ? -1 : complete;
oom:
  pthread_mutex_unlock (&sbx_core.lock);
  free (chunk);
  return -1;
}
