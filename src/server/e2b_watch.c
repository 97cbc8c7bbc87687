/* sbx: E2B's directory watches: the WatchDir stream and the polled trio
 * CreateWatcher / GetWatcherEvents / RemoveWatcher, on the core's
 * in-sandbox inotify watches (core/watch.c). Event names are relative to
 * the watched directory, as envd's (filepath.Rel: the directory itself is
 * "."). E2B has no event for lost events: a watch that overflowed ends
 * with resource_exhausted rather than carry on with a silent gap. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "priv/host.h"
#include "server/e2b.h"
#include "util/id.h"

#define DRAIN_MAX 256          /* events per stream step */
#define GET_EVENTS_MAX 4096    /* events per GetWatcherEvents answer */
#define POLLED_WATCHERS_MAX 1024 /* across sandboxes; each sandbox has its own 64 */

static const char *
event_type_name (int type)
{
  switch (type)
    {
    case SBX_WATCH_CREATE:
      return "EVENT_TYPE_CREATE";
    case SBX_WATCH_WRITE:
      return "EVENT_TYPE_WRITE";
    case SBX_WATCH_REMOVE:
      return "EVENT_TYPE_REMOVE";
    case SBX_WATCH_RENAME:
      return "EVENT_TYPE_RENAME";
    case SBX_WATCH_CHMOD:
      return "EVENT_TYPE_CHMOD";
    default:
      return NULL;
    }
}

struct watch_opts
{
  char path[SBX_FS_PATH_MAX];
  int recursive, include_entry;
  /* A copy: a polled watcher outlives the request that made it. */
  char user[16];
};

/* The files API's own temporaries (iso/fs.c): an upload is an unnamed
   O_TMPFILE, which inotify reports as "#INODE", then linked under a hidden
   name and renamed over its target. Not the user's files. */
static int
upload_temporary (const char *name)
{
  const char *leaf = strrchr (name, '/');

  leaf = leaf ? leaf + 1 : name;
  if (leaf[0] == '#' && leaf[1] != '\0' && strspn (leaf + 1, "0123456789") == strlen (leaf + 1))
    return 1;
  return strncmp (leaf, ".sbx-upload-", 12) == 0;
}

/* FilesystemEvent of ev; NULL for an overflow (no such E2B event), and
   *skip for an event of the files API's temporaries. */
static json_t *
event_json (struct sbx_req *r, const struct watch_opts *o, const struct sbx_watch_event *ev,
            int *skip)
{
  const char *type = event_type_name (ev->type);
  json_t *e;

  *skip = 0;
  if (type != NULL && upload_temporary (ev->name))
    {
      *skip = 1;
      return NULL;
    }
  if (type == NULL)
    return NULL;
  e = json_pack ("{s:s, s:s}", "name", ev->name[0] ? ev->name : ".", "type", type);
  if (e == NULL)
    {
      /* A name that is not UTF-8: as the files API, say so, keep going. */
      e = json_pack ("{s:s, s:s}", "name", "\xef\xbf\xbd", "type", type);
    }
  if (o->include_entry && ev->type != SBX_WATCH_REMOVE && ev->type != SBX_WATCH_RENAME)
    {
      struct sbx_fs_ctx ctx;
      struct sbx_fs_entry *ent = malloc (sizeof *ent);
      char full[SBX_FS_PATH_MAX];

      ctx.root = -1;
      if (ent != NULL
          && (size_t) snprintf (full, sizeof full, "%s/%s", o->path, ev->name) < sizeof full
          && sbx_sandbox_fs_open (r->sb, o->user, &ctx, NULL) == 0)
        {
          /* The file may be gone already: then there is no entry. */
          if (sbx_host_fs_stat (&ctx, full, ent, NULL) == 0)
            json_object_set_new (e, "entry", sbx_e2b_entry_json (ent));
          sbx_sandbox_fs_close (&ctx);
        }
      free (ent);
    }
  return e;
}

static int
parse_watch (struct sbx_req *r, json_t *msg, struct watch_opts *o, sbx_error_t **err)
{
  static const char *const fields[]
      = {"path", "recursive", "includeEntry", "allowNetworkMounts", "include_entry",
         "allow_network_mounts", NULL};
  const char *path = NULL;
  int net = 0;

  memset (o, 0, sizeof *o);
  snprintf (o->user, sizeof o->user, "%s", sbx_e2b_user (r));
  if (sbx_params_only (msg, fields, err) < 0 || sbx_param_string (msg, "path", &path, err) < 0
      || sbx_param_bool (msg, "recursive", &o->recursive, err) < 0
      || sbx_param_bool (msg, "includeEntry", &o->include_entry, err) < 0
      || sbx_param_bool (msg, "include_entry", &o->include_entry, err) < 0
      || sbx_param_bool (msg, "allowNetworkMounts", &net, err) < 0
      || sbx_param_bool (msg, "allow_network_mounts", &net, err) < 0)
    return -1;
  /* A sandbox has no network mounts: the flag changes nothing. */
  return sbx_e2b_path (r, o->user, path, o->path, err);
}

/* ---- WatchDir (stream) --------------------------------------------------- */

struct watch_stream
{
  struct sbx_req *req;
  struct sbx_watch *w;
  struct watch_opts o;
  int started;
};

static int
watch_next (void *ctx, struct sbx_buf *out, int64_t wait_ms, sbx_error_t **err)
{
  struct watch_stream *ws = ctx;
  struct sbx_watch_event *ev = malloc (sizeof *ev);
  int i, rc = 0, skip;

  if (ev == NULL)
    return -1;
  if (!ws->started)
    {
      ws->started = 1;
      /* The SDK wants start first: the watch is in place by now. */
      if (sbx_connect_append (out, json_pack ("{s:{}}", "start")) < 0)
        rc = -1;
      wait_ms = 0;
    }
  for (i = 0; rc == 0 && i < DRAIN_MAX; i++)
    {
      int got = sbx_watch_next (ws->w, ev, i == 0 ? wait_ms : 0);
      json_t *e;
      if (got == 0)
        break;
      if (got < 0)
        {
          rc = 1; /* the directory went away, or the sandbox */
          break;
        }
      e = event_json (ws->req, &ws->o, ev, &skip);
      if (skip)
        continue;
      if (e == NULL)
        {
          rc = sbx_err (err, SBX_E_LIMIT,
                        "events were lost (the watch fell behind); watch again");
          break;
        }
      if (sbx_connect_append (out, json_pack ("{s:o}", "filesystem", e)) < 0)
        rc = -1;
    }
  free (ev);
  return rc;
}

static void
watch_release (void *ctx, int completed)
{
  struct watch_stream *ws = ctx;

  (void) completed;
  sbx_watch_stop (ws->w);
  free (ws);
}

static const struct sbx_connect_stream_ops watch_ops = {
    .next = watch_next,
    .release = watch_release,
    .keepalive_json = "{\"keepalive\":{}}",
    .wait = NULL, /* the watch is this stream's alone */
};

void
sbx_route_fs_rpc_watch_dir (struct sbx_req *r)
{
  struct watch_stream *ws = calloc (1, sizeof *ws);
  sbx_error_t *err = NULL;
  json_t *msg = NULL;

  if (ws == NULL)
    sbx_err_oom (&err);
  if (err || sbx_connect_stream_request (r, &msg, &err) < 0
      || parse_watch (r, msg, &ws->o, &err) < 0
      || (ws->w = sbx_watch_start (r->sb, ws->o.path, ws->o.recursive, ws->o.user, &err))
             == NULL)
    {
      free (ws);
      json_decref (msg);
      sbx_connect_reply_stream_err (r, err);
      return;
    }
  json_decref (msg);
  ws->req = r;
  sbx_connect_reply_stream (r, &watch_ops, ws);
}

/* ---- the polled watchers ------------------------------------------------- */

struct watcher
{
  struct watcher *next;
  char id[SBX_ID_LEN + 1];
  char sandbox[SBX_ID_LEN + 1];
  struct sbx_watch *w;
  struct watch_opts o;
  int busy; /* a request is using it: not freed under it */
};

static pthread_mutex_t watchers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct watcher *watchers;
static unsigned watcher_count;

/* Drop watchers whose sandbox is gone (their watch ended with it). */
static void
sweep_locked (void)
{
  struct watcher **pp = &watchers;

  while (*pp)
    {
      struct watcher *w = *pp;
      struct sbx_sandbox *sb = w->busy ? NULL : sbx_sandbox_get (NULL, w->sandbox, NULL);
      if (w->busy || sb != NULL)
        {
          if (sb)
            sbx_sandbox_unref (sb);
          pp = &w->next;
          continue;
        }
      *pp = w->next;
      watcher_count--;
      sbx_watch_stop (w->w);
      free (w);
    }
}

/* The watcher of this sandbox with the request's watcherId, marked busy. */
static struct watcher *
take_watcher (struct sbx_req *r, json_t *msg, sbx_error_t **err)
{
  static const char *const fields[] = {"watcherId", "watcher_id", NULL};
  const char *id = NULL, *id2 = NULL;
  struct watcher *w;

  if (sbx_params_only (msg, fields, err) < 0 || sbx_param_string (msg, "watcherId", &id, err) < 0
      || sbx_param_string (msg, "watcher_id", &id2, err) < 0)
    return NULL;
  if (id == NULL)
    id = id2;
  if (id == NULL)
    return sbx_err (err, SBX_E_INVALID, "`watcherId` is required"), NULL;
  pthread_mutex_lock (&watchers_lock);
  for (w = watchers; w; w = w->next)
    if (strcmp (w->id, id) == 0 && strcmp (w->sandbox, r->sb->id) == 0 && !w->busy)
      {
        w->busy = 1;
        break;
      }
  pthread_mutex_unlock (&watchers_lock);
  if (w == NULL)
    sbx_err (err, SBX_E_NOT_FOUND, "watcher `%.32s` not found", id);
  return w;
}

static void
put_watcher (struct watcher *w, int remove)
{
  struct watcher **pp;

  pthread_mutex_lock (&watchers_lock);
  w->busy = 0;
  if (remove)
    for (pp = &watchers; *pp; pp = &(*pp)->next)
      if (*pp == w)
        {
          *pp = w->next;
          watcher_count--;
          break;
        }
  pthread_mutex_unlock (&watchers_lock);
  if (remove)
    {
      sbx_watch_stop (w->w);
      free (w);
    }
}

void
sbx_route_fs_rpc_create_watcher (struct sbx_req *r)
{
  struct watcher *w = calloc (1, sizeof *w);
  sbx_error_t *err = NULL;
  json_t *msg = NULL;

  if (w == NULL)
    sbx_err_oom (&err);
  if (err || sbx_connect_unary_request (r, &msg, &err) < 0
      || parse_watch (r, msg, &w->o, &err) < 0)
    goto fail;
  pthread_mutex_lock (&watchers_lock);
  sweep_locked ();
  if (watcher_count >= POLLED_WATCHERS_MAX)
    {
      pthread_mutex_unlock (&watchers_lock);
      sbx_err (&err, SBX_E_LIMIT, "too many watchers on this daemon");
      goto fail;
    }
  watcher_count++; /* reserved */
  pthread_mutex_unlock (&watchers_lock);
  w->w = sbx_watch_start (r->sb, w->o.path, w->o.recursive, w->o.user, &err);
  pthread_mutex_lock (&watchers_lock);
  if (w->w == NULL)
    {
      watcher_count--;
      pthread_mutex_unlock (&watchers_lock);
      goto fail;
    }
  sbx_random_id (w->id, SBX_ID_LEN);
  memcpy (w->sandbox, r->sb->id, sizeof w->sandbox);
  w->next = watchers;
  watchers = w;
  pthread_mutex_unlock (&watchers_lock);
  json_decref (msg);
  sbx_connect_reply_ok (r, json_pack ("{s:s}", "watcherId", w->id));
  return;
fail:
  free (w);
  json_decref (msg);
  sbx_connect_reply_err (r, err);
}

void
sbx_route_fs_rpc_get_watcher_events (struct sbx_req *r)
{
  struct sbx_watch_event *ev = malloc (sizeof *ev);
  sbx_error_t *err = NULL;
  json_t *msg = NULL, *events = json_array ();
  struct watcher *w = NULL;
  int i, ended = 0, lost = 0, skip;

  if (ev == NULL)
    sbx_err_oom (&err);
  if (err || sbx_connect_unary_request (r, &msg, &err) < 0
      || (w = take_watcher (r, msg, &err)) == NULL)
    goto fail;
  for (i = 0; i < GET_EVENTS_MAX; i++)
    {
      int got = sbx_watch_next (w->w, ev, 0);
      json_t *e;
      if (got <= 0)
        {
          ended = got < 0;
          break;
        }
      e = event_json (r, &w->o, ev, &skip);
      if (skip)
        continue;
      if (e == NULL)
        {
          lost = 1;
          break;
        }
      json_array_append_new (events, e);
    }
  if (lost)
    {
      /* The caller cannot tell a gap from quiet: the watcher is over. */
      put_watcher (w, 1);
      sbx_err (&err, SBX_E_LIMIT, "events were lost (the watcher fell behind); create it again");
      goto fail;
    }
  put_watcher (w, ended && json_array_size (events) == 0);
  json_decref (msg);
  free (ev);
  sbx_connect_reply_ok (r, json_pack ("{s:o}", "events", events));
  return;
fail:
  json_decref (events);
  json_decref (msg);
  free (ev);
  sbx_connect_reply_err (r, err);
}

void
sbx_route_fs_rpc_remove_watcher (struct sbx_req *r)
{
  sbx_error_t *err = NULL;
  json_t *msg = NULL;
  struct watcher *w = NULL;

  if (sbx_connect_unary_request (r, &msg, &err) < 0
      || (w = take_watcher (r, msg, &err)) == NULL)
    sbx_connect_reply_err (r, err);
  else
    {
      put_watcher (w, 1);
      sbx_connect_reply_ok (r, json_object ());
    }
  json_decref (msg);
}

/* At shutdown: every polled watcher goes. */
void
sbx_e2b_watchers_free (void)
{
  pthread_mutex_lock (&watchers_lock);
  while (watchers)
    {
      struct watcher *w = watchers;
      watchers = w->next;
      sbx_watch_stop (w->w);
      free (w);
    }
  watcher_count = 0;
  pthread_mutex_unlock (&watchers_lock);
}
