/* sbx: connections to servers inside a sandbox, for the HTTP port proxy
 * (server/proxy.c).
 *
 * The front end cannot connect TCP sockets (no connect in its seccomp
 * filter, Landlock handles TCP connect with no rule) and lives in the
 * host's network namespace, where 127.0.0.1 is the host's. The sandbox's
 * init connects instead (SBX_MSG_CONNECT, iso/init/connect.c) and hands
 * the socket back: a connection inside the sandbox's network namespace,
 * which reaches nothing the sandbox's own code could not.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"

/* Init gives up after SBX_CONNECT_TIMEOUT_MS; this is how long we wait
   for it to say so (a busy init, a full socket) before giving up too. */
#define CONNECT_WAIT_MS (SBX_CONNECT_TIMEOUT_MS + 3000)

int
sbx_sandbox_proxy_acquire (struct sbx_sandbox *sb, sbx_error_t **err)
{
  int rc = 0;

  pthread_mutex_lock (&sbx_core.lock);
  if (sb->state != SBX_SB_RUNNING)
    rc = sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
  else if (sb->proxies >= SBX_PROXY_MAX_PER_SANDBOX)
    rc = sbx_err (err, SBX_E_LIMIT, "sandbox `%s` already has %u proxied requests open", sb->id,
                  (unsigned) SBX_PROXY_MAX_PER_SANDBOX);
  else
    sb->proxies++;
  pthread_mutex_unlock (&sbx_core.lock);
  return rc;
}

void
sbx_sandbox_proxy_release (struct sbx_sandbox *sb)
{
  pthread_mutex_lock (&sbx_core.lock);
  if (sb->proxies > 0)
    sb->proxies--;
  pthread_mutex_unlock (&sbx_core.lock);
}

static void
unlink_connect (struct sbx_sandbox *sb, struct sbx_connect *c)
{
  struct sbx_connect **pp;

  for (pp = &sb->connects; *pp; pp = &(*pp)->next)
    if (*pp == c)
      {
        *pp = c->next;
        return;
      }
}

static int
connect_error (struct sbx_sandbox *sb, unsigned port, int sys_errno, sbx_error_t **err)
{
  switch (sys_errno)
    {
    case ECONNREFUSED:
      return sbx_err (err, SBX_E_BAD_GATEWAY, "nothing listens on port %u in sandbox %s", port,
                      sb->id);
    case ETIMEDOUT:
      return sbx_err (err, SBX_E_GATEWAY_TIMEOUT,
                      "port %u in sandbox %s did not accept the connection in time", port, sb->id);
    case ECANCELED:
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    case EAGAIN:
      return sbx_err (err, SBX_E_LIMIT, "sandbox %s has too many connections being opened",
                      sb->id);
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
      return sbx_err_errno (err, SBX_E_LIMIT, sys_errno, "connect to port %u in sandbox %s",
                            port, sb->id);
    default:
      return sbx_err_errno (err, SBX_E_BAD_GATEWAY, sys_errno,
                            "connect to port %u in sandbox %s", port, sb->id);
    }
}

int
sbx_sandbox_connect_port (struct sbx_sandbox *sb, unsigned port, sbx_error_t **err)
{
  struct sbx_connect *c;
  struct timespec ts;
  int fd, sys_errno, done, flags;

  if (port == 0 || port > 65535)
    return sbx_err (err, SBX_E_INVALID, "port must be 1 to 65535, not %u", port);
  if (sbx_sandbox_awake (sb, err) < 0)
    return -1;
  c = calloc (1, sizeof *c);
  if (c == NULL)
    return sbx_err_oom (err);
  c->fd = -1;
  pthread_mutex_lock (&sbx_core.lock);
  /* POOLED: the pool waits for a template's server (core/code.c). */
  if (sb->state != SBX_SB_RUNNING && sb->state != SBX_SB_POOLED)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      free (c);
      return sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
    }
  c->req_id = ++sb->next_req_id;
  if (sbx_iso_connect (&sb->box, c->req_id, port, err) < 0)
    {
      pthread_mutex_unlock (&sbx_core.lock);
      free (c);
      return -1;
    }
  c->next = sb->connects;
  sb->connects = c;
  sbx__abstime (&ts, CONNECT_WAIT_MS);
  while (!c->done)
    if (pthread_cond_timedwait (&sb->cond, &sbx_core.lock, &ts) == ETIMEDOUT)
      break;
  /* Unlinked before the lock goes: an answer that comes later finds no
     one waiting and closes its socket (sbx__connect_on_event). */
  unlink_connect (sb, c);
  pthread_mutex_unlock (&sbx_core.lock);
  done = c->done;
  fd = c->fd;
  sys_errno = c->sys_errno;
  free (c);
  if (!done)
    return sbx_err (err, SBX_E_GATEWAY_TIMEOUT,
                    "the sandbox %s did not answer the connect to port %u", sb->id, port);
  if (fd < 0)
    return connect_error (sb, port, sys_errno, err);
  /* Non-blocking whatever init left it as (the proxy polls it). */
  flags = fcntl (fd, F_GETFL);
  if (flags < 0 || fcntl (fd, F_SETFL, flags | O_NONBLOCK) < 0)
    {
      int e = errno;
      close (fd);
      return sbx_err_sys (err, e, "fcntl");
    }
  return fd;
}

void
sbx__connect_on_event (struct sbx_sandbox *sb, struct sbx_iso_event *ev)
{
  struct sbx_connect *c;

  /* Nobody waiting (it gave up, or a request of an earlier daemon): the
     socket stays in ev, which the caller closes. */
  for (c = sb->connects; c; c = c->next)
    if (c->req_id == ev->req_id && !c->done)
      {
        if (ev->type == SBX_ISO_CONNECTED)
          {
            c->fd = ev->fd;
            ev->fd = -1;
          }
        else
          c->sys_errno = ev->sys_errno ? ev->sys_errno : EIO;
        c->done = 1;
        pthread_cond_broadcast (&sb->cond);
        return;
      }
}

void
sbx__connect_cancel_all (struct sbx_sandbox *sb)
{
  struct sbx_connect *c;

  for (c = sb->connects; c; c = c->next)
    if (!c->done)
      {
        c->done = 1;
        c->sys_errno = ECANCELED;
      }
  pthread_cond_broadcast (&sb->cond);
}
