/* sbx: snapshots of a VM's memory and disk through QEMU's migration
 * (docs/vm.md "Snapshots"), in the privileged parent.
 *
 * Each VM's QEMU has a QMP monitor on a socketpair whose other end only
 * the parent holds (box->qmp). A save stops the vCPUs, hands QEMU a file
 * the parent opened in the snapshot store (getfd over SCM_RIGHTS, then
 * `migrate fd:NAME`: no path, no shell, no exec in QEMU), waits for the
 * migration to complete and lets the vCPUs go on. The guest's disk is a
 * tmpfs in its RAM, so the file holds both. A restore is a new QEMU with
 * the same machine and `-incoming fd:N` on that file (iso/vm.c).
 *
 * QEMU is as hostile as the guest that may own it: what it says is read
 * one bounded line at a time, with a deadline, and only `return`, `error`
 * and the migration's `status` are looked at.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "iso/snapstore.h"
#include "iso/vm.h"
#include "util/cleanup.h"

#define QMP_LINE_MAX 65536
#define QMP_REPLY_MS 10000      /* a command's answer */
#define QMP_MIGRATE_MS 300000   /* a whole save, under TCG on a busy host */
#define QMP_POLL_MS 20

static long long
mono_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line (a JSON object) from QEMU, byte by byte: what follows it stays
   in the socket for the next read. */
static json_t *
read_line (int fd, int timeout_ms, sbx_error_t **err)
{
  static __thread char line[QMP_LINE_MAX];
  long long end = mono_ms () + timeout_ms;
  size_t n = 0;

  for (;;)
    {
      struct pollfd p = {fd, POLLIN, 0};
      long long left = end - mono_ms ();
      ssize_t r;
      char c;

      if (left <= 0)
        return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: QEMU did not answer"), NULL;
      if (poll (&p, 1, (int) left) < 0 && errno != EINTR)
        return sbx_err_sys (err, errno, "poll QEMU's monitor"), NULL;
      r = recv (fd, &c, 1, MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      if (r <= 0)
        return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: QEMU's monitor closed"), NULL;
      if (c != '\n')
        {
          if (n == sizeof line)
            return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: QEMU sent a line too long"),
                   NULL;
          line[n++] = c;
          continue;
        }
      if (n == 0 || (n == 1 && line[0] == '\r'))
        continue;
      json_t *j = json_loadb (line, n, 0, NULL);
      if (!json_is_object (j))
        {
          json_decref (j);
          return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: QEMU sent what is not QMP"),
                 NULL;
        }
      return j;
    }
}

/* Send one command (with fd, when >= 0) and return its `return` value;
   events met on the way are skipped. */
static json_t *
command (int q, const char *json, int fd, sbx_error_t **err)
{
  char cbuf[CMSG_SPACE (sizeof (int))];
  union
  {
    const char *c;
    void *m;
  } u = {json}; /* sendmsg's iovec is not const; it is never written */
  struct iovec iov = {u.m, strlen (json)};
  struct msghdr mh = {0};
  long long end = mono_ms () + QMP_REPLY_MS;

  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (fd >= 0)
    {
      struct cmsghdr *c;
      memset (cbuf, 0, sizeof cbuf);
      mh.msg_control = cbuf;
      mh.msg_controllen = sizeof cbuf;
      c = CMSG_FIRSTHDR (&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN (sizeof (int));
      memcpy (CMSG_DATA (c), &fd, sizeof fd);
    }
  if (sendmsg (q, &mh, MSG_NOSIGNAL) != (ssize_t) iov.iov_len)
    {
      /* QEMU ended before the command: a restore from a damaged file can
         end it that fast. The same answer as a monitor that closes while
         we wait for its reply (read_line), not an internal error. */
      if (errno == EPIPE || errno == ECONNRESET)
        return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: QEMU's monitor closed"), NULL;
      return sbx_err_sys (err, errno, "write to QEMU's monitor"), NULL;
    }
  for (;;)
    {
      long long left = end - mono_ms ();
      json_t *j = read_line (q, left > 0 ? (int) left : 0, err), *v;
      if (j == NULL)
        return NULL;
      if ((v = json_object_get (j, "return")) != NULL)
        {
          json_incref (v);
          json_decref (j);
          return v;
        }
      if ((v = json_object_get (j, "error")) != NULL)
        {
          const char *d = json_string_value (json_object_get (v, "desc"));
          sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: QEMU: %.200s", d ? d : "an error");
          json_decref (j);
          return NULL;
        }
      json_decref (j); /* an event */
    }
}

static int
simple (int q, const char *json, sbx_error_t **err)
{
  json_t *r = command (q, json, -1, err);
  json_decref (r);
  return r ? 0 : -1;
}

int
sbx_vm_qmp_open (int q, sbx_error_t **err)
{
  json_t *g = read_line (q, QMP_REPLY_MS, err);
  int ok = g && json_object_get (g, "QMP") != NULL;

  json_decref (g);
  if (g == NULL)
    return -1;
  if (!ok)
    return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: QEMU's monitor did not greet");
  return simple (q, "{\"execute\":\"qmp_capabilities\"}", err);
}

struct save
{
  int qmp;
  uint64_t bytes;
  sbx_error_t **err;
  const struct sbx_iso_box *box;
};

/* Wait for the migration to end: 0 when completed. */
static int
wait_migration (int q, sbx_error_t **err)
{
  long long end = mono_ms () + QMP_MIGRATE_MS;

  while (mono_ms () < end)
    {
      json_t *r = command (q, "{\"execute\":\"query-migrate\"}", -1, err);
      const char *st;
      if (r == NULL)
        return -1;
      st = json_string_value (json_object_get (r, "status"));
      if (st && strcmp (st, "completed") == 0)
        {
          json_decref (r);
          return 0;
        }
      if (st && (strcmp (st, "failed") == 0 || strcmp (st, "cancelled") == 0))
        {
          const char *d = json_string_value (json_object_get (r, "error-desc"));
          sbx_err (err, SBX_E_SYSTEM, "isolation vm: the migration failed: %.200s",
                   d ? d : st);
          json_decref (r);
          return -1;
        }
      json_decref (r);
      poll (NULL, 0, QMP_POLL_MS);
    }
  simple (q, "{\"execute\":\"migrate_cancel\"}", NULL);
  return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: the migration did not end within %d s",
                  QMP_MIGRATE_MS / 1000);
}

static int
fill_vm (int dir, void *arg)
{
  struct save *s = arg;
  cleanup_close int fd = openat (dir, SBX_VM_SNAPSHOT_FILE,
                                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  struct stat st;
  int rc;

  if (fd < 0)
    return sbx_err_sys (s->err, errno, "make the snapshot's file");
  /* No bandwidth cap (QEMU's default is 32 MiB/s: for a stopped guest
     that is only waiting). */
  if (simple (s->qmp,
              "{\"execute\":\"migrate-set-parameters\","
              "\"arguments\":{\"max-bandwidth\":1099511627776}}",
              s->err)
      < 0)
    return -1;
  {
    json_t *r = command (s->qmp,
                         "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"sbxsnap\"}}", fd,
                         s->err);
    if (r == NULL)
      return -1;
    json_decref (r);
  }
  rc = simple (s->qmp, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:sbxsnap\"}}",
               s->err);
  if (rc == 0)
    rc = wait_migration (s->qmp, s->err);
  if (rc == 0 && (fsync (fd) < 0 || fstat (fd, &st) < 0))
    rc = sbx_err_sys (s->err, errno, "write the snapshot's file");
  if (rc == 0)
    s->bytes = (uint64_t) st.st_size;
  /* The root image it runs on: a restore attaches the same bytes. */
  if (rc == 0)
    rc = sbx_vm_root_record (dir, s->box, s->err);
  return rc;
}

static int
save (const struct sbx_iso_box *box, int store, const char *tenant, const char *name,
      int stay_stopped, uint64_t *bytes, sbx_error_t **err)
{
  struct save s = {box->qmp, 0, err, box};
  int rc;

  if (box->qmp < 0)
    return sbx_err (err, SBX_E_INVALID, "not a VM sandbox");
  /* The vCPUs stop for a consistent image; they go on afterwards
     whatever happened (but after a hibernation's save that worked: the
     guest ends then, as it was saved). */
  if (simple (box->qmp, "{\"execute\":\"stop\"}", err) < 0)
    return -1;
  rc = sbx_snapstore_save_with (store, tenant, name, fill_vm, &s, err);
  if (!(stay_stopped && rc == 0)
      && simple (box->qmp, "{\"execute\":\"cont\"}", rc < 0 ? NULL : err) < 0 && rc == 0)
    rc = -1;
  *bytes = s.bytes;
  return rc;
}

int
sbx_vm_snapshot_save (const struct sbx_iso_box *box, int store, const char *tenant,
                      const char *name, uint64_t *bytes, sbx_error_t **err)
{
  return save (box, store, tenant, name, 0, bytes, err);
}

int
sbx_vm_hibernate_save (const struct sbx_iso_box *box, int store, const char *tenant,
                       const char *name, uint64_t *bytes, sbx_error_t **err)
{
  return save (box, store, tenant, name, 1, bytes, err);
}

void
sbx_vm_qmp_explain (int q, char *out, size_t len)
{
  sbx_error_t *e = NULL;
  json_t *st = NULL, *mig = NULL;
  const char *s = NULL, *m = NULL, *d = NULL;

  out[0] = '\0';
  if (sbx_vm_qmp_open (q, &e) == 0 && (st = command (q, "{\"execute\":\"query-status\"}", -1, &e))
      && (mig = command (q, "{\"execute\":\"query-migrate\"}", -1, &e)))
    {
      s = json_string_value (json_object_get (st, "status"));
      m = json_string_value (json_object_get (mig, "status"));
      d = json_string_value (json_object_get (mig, "error-desc"));
      snprintf (out, len, " (QEMU: %.40s, migration %.40s%s%.160s)", s ? s : "?", m ? m : "none",
                d ? ": " : "", d ? d : "");
    }
  json_decref (st);
  json_decref (mig);
  sbx_error_free (e);
}

int
sbx_vm_restore_go (int q, sbx_error_t **err)
{
  /* The source was stopped for its save, and that run state travels with
     the memory: the copy waits, paused, until told to go on. */
  if (sbx_vm_qmp_open (q, err) < 0 || wait_migration (q, err) < 0)
    return -1;
  return simple (q, "{\"execute\":\"cont\"}", err);
}
