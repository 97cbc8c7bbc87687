/* sbx: the code interpreter of template code-interpreter-v1. Its server
 * (share/sbx/code_server.py) runs inside the sandbox as the user, on the
 * sandbox's own 127.0.0.1:49999; the core starts it when the sandbox is
 * built (the pool's builds too, so a sandbox handed out has it warm) and
 * talks to it with plain HTTP/1.0 over a socket its init connects.
 *
 * Everything the server sends is hostile: the head is bounded, lines are
 * bounded, every wait has a deadline. Parsing what the lines say is the
 * caller's (server/routes_code.c validates each before relaying it). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/code.h"
#include "core/internal.h"
#include "core/template.h"
#include "util/log.h"

#define HEAD_MAX (16 * 1024)
#define READY_WAIT_MS 60000 /* importing numpy, pandas, matplotlib on a busy host */
#define LISTEN_WAIT_MS 20000
/* A VM's guest may run emulated (TCG, no KVM): Python's start and the
   imports then take several times as long (docs/vm.md "Code
   interpreter"), so a VM's waits are these times this factor. */
#define VM_WAIT_FACTOR 5

static int64_t
scaled (const struct sbx_sandbox *sb, int64_t ms)
{
  return sb->isolation == SBX_ISOLATION_VM ? ms * VM_WAIT_FACTOR : ms;
}

static int
wait_fd (int fd, short events, int64_t deadline)
{
  for (;;)
    {
      struct pollfd pfd = {fd, events, 0};
      int64_t left = deadline - sbx_mono_ms ();
      int rc;

      if (left <= 0)
        return 0;
      rc = poll (&pfd, 1, left > 1000 ? 1000 : (int) left);
      if (rc > 0)
        return 1;
      if (rc < 0 && errno != EINTR)
        return -1;
    }
}

static int
send_all (int fd, const char *data, size_t len, int64_t deadline, sbx_error_t **err)
{
  while (len)
    {
      ssize_t n = send (fd, data, len, MSG_NOSIGNAL);
      if (n > 0)
        {
          data += n;
          len -= (size_t) n;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd (fd, POLLOUT, deadline) > 0)
        continue;
      return sbx_err (err, SBX_E_BAD_GATEWAY, "the code interpreter does not take the request");
    }
  return 0;
}

/* Read more into c->in: 1 read something, 0 end of file, -1 timeout or error. */
static int
fill (struct sbx_code_conn *c, int64_t deadline)
{
  char chunk[65536];

  for (;;)
    {
      ssize_t n = recv (c->fd, chunk, sizeof chunk, 0);
      if (n > 0)
        {
          sbx_buf_append (&c->in, chunk, (size_t) n);
          return c->in.failed ? -1 : 1;
        }
      if (n == 0)
        {
          c->eof = 1;
          return 0;
        }
      if (errno == EINTR)
        continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd (c->fd, POLLIN, deadline) > 0)
        continue;
      return -1;
    }
}

static int
connect_server (struct sbx_sandbox *sb, int64_t deadline, sbx_error_t **err)
{
  for (;;)
    {
      sbx_error_t *e = NULL;
      int fd = sbx_sandbox_connect_port (sb, SBX_CODE_PORT, &e);

      if (fd >= 0)
        return fd;
      /* Nothing listens yet: a server that is starting (a sandbox built
         on demand). */
      if (e->kind != SBX_E_BAD_GATEWAY || sbx_mono_ms () >= deadline)
        {
          if (e->kind == SBX_E_BAD_GATEWAY)
            {
              sbx_error_free (e);
              return sbx_err (err, SBX_E_BAD_GATEWAY,
                              "the code interpreter does not run in sandbox %s (its template"
                              " must be " SBX_CODE_TEMPLATE ")",
                              sb->id);
            }
          *err = e;
          return -1;
        }
      sbx_error_free (e);
      usleep (20000);
    }
}

int
sbx_code_open (struct sbx_sandbox *sb, const char *method, const char *path, const char *body,
               size_t body_len, struct sbx_code_conn *c, sbx_error_t **err)
{
  struct sbx_buf req = SBX_BUF_INIT;
  int64_t ready_ms = sbx_core.cfg.code_start_ms ? (int64_t) sbx_core.cfg.code_start_ms
                                                 : READY_WAIT_MS;
  int64_t deadline = sbx_mono_ms () + scaled (sb, ready_ms);
  char *end, *sp;
  unsigned status;

  memset (c, 0, sizeof *c);
  c->fd = -1;
  c->fd = connect_server (sb, sbx_mono_ms () + scaled (sb, 3000), err);
  if (c->fd < 0)
    return -1;
  sbx_buf_printf (&req,
                  "%s %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\n\r\n",
                  method, path, SBX_CODE_PORT, body_len);
  if (body_len)
    sbx_buf_append (&req, body, body_len);
  if (req.failed)
    {
      sbx_buf_free (&req);
      sbx_code_close (c);
      return sbx_err_oom (err);
    }
  if (send_all (c->fd, req.data, req.len, deadline, err) < 0)
    {
      sbx_buf_free (&req);
      sbx_code_close (c);
      return -1;
    }
  sbx_buf_free (&req);
  /* The head: "HTTP/1.x NNN ...\r\n...\r\n\r\n". */
  for (;;)
    {
      int rc;
      end = c->in.len ? memmem (c->in.data, c->in.len, "\r\n\r\n", 4) : NULL;
      if (end != NULL)
        break;
      if (c->in.len > HEAD_MAX)
        goto bad;
      rc = fill (c, deadline);
      if (rc < 0 && !c->in.failed && sbx_mono_ms () >= deadline)
        {
          sbx_code_close (c);
          return sbx_err (err, SBX_E_GATEWAY_TIMEOUT,
                          "the code interpreter in sandbox %s did not answer in time", sb->id);
        }
      if (rc <= 0)
        goto bad;
    }
  if ((size_t) (end - c->in.data) > HEAD_MAX || c->in.len < 12
      || (memcmp (c->in.data, "HTTP/1.0 ", 9) != 0 && memcmp (c->in.data, "HTTP/1.1 ", 9) != 0))
    goto bad;
  sp = c->in.data + 9;
  if (sp[0] < '1' || sp[0] > '5' || sp[1] < '0' || sp[1] > '9' || sp[2] < '0' || sp[2] > '9'
      || (sp[3] != ' ' && sp[3] != '\r'))
    goto bad;
  status = (unsigned) ((sp[0] - '0') * 100 + (sp[1] - '0') * 10 + (sp[2] - '0'));
  c->status = status;
  sbx_buf_consume (&c->in, (size_t) (end + 4 - c->in.data));
  return 0;
bad:
  sbx_code_close (c);
  return sbx_err (err, SBX_E_BAD_GATEWAY, "the code interpreter in sandbox %s broke HTTP",
                  sb->id);
}

int
sbx_code_line (struct sbx_code_conn *c, const char **line, size_t *len, size_t max,
               int64_t wait_ms)
{
  int64_t deadline = sbx_mono_ms () + wait_ms;
  size_t scanned = 0;

  if (c->consume)
    {
      sbx_buf_consume (&c->in, c->consume);
      c->consume = 0;
    }
  for (;;)
    {
      char *nl = c->in.len > scanned ? memchr (c->in.data + scanned, '\n', c->in.len - scanned)
                                     : NULL;
      int rc;

      if (nl != NULL)
        {
          *line = c->in.data;
          *len = (size_t) (nl - c->in.data);
          c->consume = *len + 1;
          return *len > max ? SBX_CODE_TOO_LONG : SBX_CODE_LINE;
        }
      scanned = c->in.len;
      if (c->in.len > max)
        return SBX_CODE_TOO_LONG;
      if (c->eof)
        return c->in.len ? SBX_CODE_BROKEN : SBX_CODE_EOF;
      rc = fill (c, deadline);
      if (rc < 0)
        return c->in.failed || sbx_mono_ms () < deadline ? SBX_CODE_BROKEN : SBX_CODE_TIMEOUT;
    }
}

int
sbx_code_body (struct sbx_code_conn *c, size_t max, int64_t wait_ms, sbx_error_t **err)
{
  int64_t deadline = sbx_mono_ms () + wait_ms;

  while (!c->eof)
    {
      if (c->in.len > max)
        return sbx_err (err, SBX_E_BAD_GATEWAY, "the code interpreter's answer is too large");
      if (fill (c, deadline) < 0)
        return sbx_err (err, SBX_E_GATEWAY_TIMEOUT, "the code interpreter did not answer in time");
    }
  if (c->in.len > max)
    return sbx_err (err, SBX_E_BAD_GATEWAY, "the code interpreter's answer is too large");
  return 0;
}

void
sbx_code_close (struct sbx_code_conn *c)
{
  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
  sbx_buf_free (&c->in);
}

int
sbx__code_start (struct sbx_sandbox *sb, sbx_error_t **err)
{
  static char python[] = "/usr/bin/python3", script[] = SBX_CODE_SERVER_PATH;
  char *argv[] = {python, script, NULL};
  struct sbx_exec_opts o;
  struct sbx_process *p;
  struct sbx_code_conn c;
  int64_t start = sbx_mono_ms (), deadline = start + scaled (sb, LISTEN_WAIT_MS);
  int rc;

  memset (&o, 0, sizeof o);
  o.argv = argv;
  o.user = "user";
  o.mode = SBX_OUT_TAIL; /* its log: never blocks it */
  o.out_cap = 16 * 1024;
  o.background = 1;
  o.user_tag = "sbx-code-interpreter";
  p = sbx_process_start (sb, &o, err);
  if (p == NULL)
    return -1;
  /* Wait until it listens, then until it is warm (GET /health answers once
     the interpreter and the default context are up). */
  for (;;)
    {
      sbx_error_t *e = NULL;
      int exited;

      pthread_mutex_lock (&sbx_core.lock);
      exited = p->exited || p->state == SBX_PROC_DONE;
      pthread_mutex_unlock (&sbx_core.lock);
      if (exited)
        {
          sbx_process_unref (p);
          return sbx_err (err, SBX_E_SYSTEM, "the code interpreter server exited at start");
        }
      rc = sbx_code_open (sb, "GET", "/health", NULL, 0, &c, &e);
      if (rc == 0)
        break;
      if (e->kind != SBX_E_BAD_GATEWAY || sbx_mono_ms () >= deadline)
        {
          sbx_process_unref (p);
          *err = e;
          return -1;
        }
      sbx_error_free (e);
      usleep (20000);
    }
  rc = c.status == 200 ? 0 : -1;
  sbx_code_close (&c);
  if (rc == 0 && sb->isolation == SBX_ISOLATION_VM)
    sbx_info ("sandbox %s: the code interpreter is ready in the VM after %lld ms", sb->id,
              (long long) (sbx_mono_ms () - start));
  sbx_process_unref (p);
  if (rc < 0)
    return sbx_err (err, SBX_E_SYSTEM, "the code interpreter did not start (status %u)",
                    c.status);
  return 0;
}

int
sbx__code_set_env (struct sbx_sandbox *sb, sbx_error_t **err)
{
  struct sbx_code_conn c;
  json_t *msg;
  char *body;
  int rc;

  pthread_mutex_lock (&sbx_core.lock);
  msg = json_pack ("{s:O}", "env", sb->env);
  pthread_mutex_unlock (&sbx_core.lock);
  body = msg ? json_dumps (msg, JSON_COMPACT) : NULL;
  json_decref (msg);
  if (body == NULL)
    return sbx_err_oom (err);
  rc = sbx_code_open (sb, "POST", "/env", body, strlen (body), &c, err);
  free (body);
  if (rc < 0)
    return -1;
  rc = c.status == 200 ? 0
                       : sbx_err (err, SBX_E_SYSTEM,
                                  "the code interpreter refused the sandbox's environment (%u)",
                                  c.status);
  sbx_code_close (&c);
  return rc;
}
