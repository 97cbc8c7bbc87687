/* sbx: sandbox egress policies, and connections to the egress process
 * (docs/egress.md).
 *
 * A policy is kept as canonical JSON on the sandbox (and in its record):
 * every entry rewritten by egress/policy.c, so what the API shows is what
 * the proxy enforces. Each connection a sandbox opens to its proxy
 * address arrives here from the event loop (SBX_ISO_EGRESS) and goes to
 * the egress process with a snapshot of the policy as it is now: a change
 * applies to the next connection, and none in flight.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/audit.h"
#include "core/internal.h"
#include "core/secrets.h"
#include "egress/policy.h"
#include "egress/wire.h"
#include "util/buf.h"
#include "util/log.h"

static int
canon_list (json_t *in, const char *key, json_t *out, sbx_error_t **err)
{
  json_t *arr = json_object_get (in, key), *v, *canon = json_array ();
  struct sbx_net_entry e;
  char text[SBX_NET_ENTRY_MAX + 64];
  size_t i, j;

  if (canon == NULL)
    return sbx_err_oom (err);
  json_object_set_new (out, key, canon);
  if (arr == NULL || json_is_null (arr))
    return 0;
  if (!json_is_array (arr))
    return sbx_err (err, SBX_E_INVALID, "network.%s must be an array of strings", key);
  if (json_array_size (arr) > SBX_NET_MAX_ENTRIES)
    return sbx_err (err, SBX_E_INVALID, "network.%s has %zu entries; at most %d are allowed", key,
                    json_array_size (arr), SBX_NET_MAX_ENTRIES);
  json_array_foreach (arr, i, v)
  {
    int dup = 0;
    if (!json_is_string (v))
      return sbx_err (err, SBX_E_INVALID, "network.%s[%zu] must be a string", key, i);
    if (sbx_net_entry_parse (json_string_value (v), &e, err) < 0)
      return sbx_err_wrap (err, "network.%s[%zu]", key, i);
    sbx_net_entry_format (&e, text, sizeof text);
    for (j = 0; j < json_array_size (canon) && !dup; j++)
      dup = strcmp (json_string_value (json_array_get (canon, j)), text) == 0;
    if (!dup && json_array_append_new (canon, json_string (text)) < 0)
      return sbx_err_oom (err);
  }
  return 0;
}

int
sbx_network_canon (json_t *in, json_t **out, sbx_error_t **err)
{
  const char *k;
  json_t *v, *o;

  *out = NULL;
  if (in == NULL || json_is_null (in))
    return 0;
  if (!json_is_object (in))
    return sbx_err (err, SBX_E_INVALID,
                    "network must be an object: {\"allow\": [...], \"deny\": [...]}");
  json_object_foreach (in, k, v)
  {
    if (strcmp (k, "allow") != 0 && strcmp (k, "deny") != 0 && strcmp (k, "rules") != 0
        && strcmp (k, "secrets_env") != 0)
      return sbx_err (err, SBX_E_INVALID,
                      "network: unknown field `%.64s` (allow, deny, rules, secrets_env)", k);
  }
  o = json_object ();
  if (o == NULL)
    return sbx_err_oom (err);
  if (canon_list (in, "allow", o, err) < 0 || canon_list (in, "deny", o, err) < 0
      || sbx_rules_canon (in, o, err) < 0)
    {
      json_decref (o);
      return -1;
    }
  if (json_array_size (json_object_get (o, "allow")) == 0
      && json_array_size (json_object_get (o, "deny")) == 0
      && json_object_get (o, "rules") == NULL && json_object_get (o, "secrets_env") == NULL)
    {
      json_decref (o);
      return 0;
    }
  *out = o;
  return 0;
}

int
sbx__network_allows_any (json_t *network)
{
  return network != NULL && json_array_size (json_object_get (network, "allow")) > 0;
}

int
sbx_sandbox_set_network (struct sbx_sandbox *sb, json_t *canon, sbx_error_t **err)
{
  char *text;
  json_t *copy, *old, *now;
  int rc;

  /* Secrets named must be the sandbox's tenant's; placeholders are kept
     while the same variable names the same secret. */
  pthread_mutex_lock (&sbx_core.lock);
  now = json_incref (sb->network);
  pthread_mutex_unlock (&sbx_core.lock);
  rc = sbx_network_bind (sbx_core.store, sb->tenant, canon, now, err);
  json_decref (now);
  if (rc < 0)
    return -1;
  text = canon ? json_dumps (canon, JSON_COMPACT) : strdup ("");
  copy = canon ? json_deep_copy (canon) : NULL;

  if (text == NULL || (canon && copy == NULL))
    {
      free (text);
      json_decref (copy);
      return sbx_err_oom (err);
    }
  pthread_mutex_lock (&sbx_core.lock);
  rc = sb->state == SBX_SB_RUNNING ? 0
                                   : sbx_err (err, SBX_E_NOT_FOUND, "sandbox `%s` not found", sb->id);
  pthread_mutex_unlock (&sbx_core.lock);
  if (rc == 0)
    rc = sbx_store_sandbox_set_network (sbx_core.store, sb->id, text, err);
  free (text);
  if (rc < 0)
    {
      json_decref (copy);
      return -1;
    }
  pthread_mutex_lock (&sbx_core.lock);
  old = sb->network;
  sb->network = copy;
  pthread_mutex_unlock (&sbx_core.lock);
  json_decref (old);
  return 0;
}

static void
append_list (struct sbx_buf *b, json_t *arr, uint32_t *count)
{
  json_t *v;
  size_t i;

  json_array_foreach (arr, i, v)
  {
    const char *s = json_string_value (v);
    if (s == NULL)
      continue;
    sbx_buf_append (b, s, strlen (s) + 1);
    (*count)++;
  }
}

static void
wipe (struct sbx_buf *b)
{
  if (b->data)
    explicit_bzero (b->data, b->cap);
  sbx_buf_free (b);
}

void
sbx__egress_on_event (struct sbx_sandbox *sb, struct sbx_iso_event *ev)
{
  struct sbx_egress_conn m;
  struct sbx_buf b = SBX_BUF_INIT;
  struct msghdr mh;
  struct iovec iov[2];
  char cbuf[CMSG_SPACE (sizeof (int))];
  struct cmsghdr *cm;
  int fd = ev->fd;

  ev->fd = -1;
  if (fd < 0)
    return;
  /* A sandbox whose policy allows nothing has no egress: its connections
     go nowhere, not even to the egress process, where they would count
     against everyone's room (issue 16). Reset (SO_LINGER 0), the same
     answer whatever the client sent or will send. */
  if (sbx_core.cfg.egress_fd < 0 || !sbx__network_allows_any (sb->network))
    {
      struct linger reset = {1, 0};
      setsockopt (fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      close (fd);
      return;
    }
  memset (&m, 0, sizeof m);
  m.type = SBX_EGRESS_MSG_CONN;
  snprintf (m.sandbox, sizeof m.sandbox, "%s", sb->id);
  snprintf (m.tenant, sizeof m.tenant, "%s", sb->tenant[0] ? sb->tenant : "default");
  /* The policy as it is now (the loop holds the core's lock). */
  if (sb->network != NULL)
    {
      append_list (&b, json_object_get (sb->network, "allow"), &m.nallow);
      append_list (&b, json_object_get (sb->network, "deny"), &m.ndeny);
      /* Credentials, resolved now (a deleted secret shows as broken): only
         in this packet, wiped here once sent. */
      if (json_object_get (sb->network, "rules") != NULL
          && sbx_rules_resolve (sbx_core.store, sb->tenant, sb->network, &b, &m.nheaders,
                                &m.nswaps, &m.nbroken)
                 < 0)
        b.failed = 1;
    }
  if (b.failed || b.len > SBX_EGRESS_MSG_MAX - sizeof m)
    {
      wipe (&b);
      close (fd);
      return;
    }
  m.strings_len = (uint32_t) b.len;
  m.len = (uint32_t) (sizeof m + b.len);
  iov[0].iov_base = &m;
  iov[0].iov_len = sizeof m;
  iov[1].iov_base = b.data;
  iov[1].iov_len = b.len;
  memset (&mh, 0, sizeof mh);
  mh.msg_iov = iov;
  mh.msg_iovlen = b.len ? 2 : 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  cm = CMSG_FIRSTHDR (&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN (sizeof (int));
  memcpy (CMSG_DATA (cm), &fd, sizeof fd);
  /* Never block the loop: an egress process that does not keep up (or is
     restarting with a full channel) costs this connection, nothing else. */
  if (sendmsg (sbx_core.cfg.egress_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
    sbx_debug ("sandbox %s: egress connection dropped: %s", sb->id, strerror (errno));
  close (fd);
  wipe (&b);
}

/* A NUL-terminated string of printable ASCII filling at most cap bytes. */
static int
printable (const char *s, size_t cap)
{
  size_t i;

  for (i = 0; i < cap && s[i] != '\0'; i++)
    if ((unsigned char) s[i] < 0x20 || (unsigned char) s[i] > 0x7e)
      return 0;
  return i < cap;
}

static int
id_shaped (const char *s, size_t cap)
{
  size_t i;

  for (i = 0; i < cap && s[i] != '\0'; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
      return 0;
  return i > 0 && i < cap;
}

/* The event loop holds the core's lock. */
static const char *
tenant_of_locked (const char *sandbox)
{
  struct sbx_sandbox *sb;

  for (sb = sbx_core.sandboxes; sb; sb = sb->next)
    if (strcmp (sb->id, sandbox) == 0)
      return sb->tenant;
  return NULL;
}

void
sbx__egress_on_reports (void)
{
  struct sbx_egress_report r;
  int n;

  /* Bounded per wakeup, like init events. */
  for (n = 0; n < 256; n++)
    {
      /* One byte more than a report: a longer packet shows as such. */
      char buf[sizeof r + 1];
      ssize_t got = recv (sbx_core.cfg.egress_fd, buf, sizeof buf, MSG_DONTWAIT);

      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        return;
      memcpy (&r, buf, got < (ssize_t) sizeof r ? (size_t) got : sizeof r);
      if (got != (ssize_t) sizeof r || r.type != SBX_EGRESS_MSG_REPORT || r.len != sizeof r
          || !id_shaped (r.sandbox, sizeof r.sandbox) || !printable (r.host, sizeof r.host)
          || !printable (r.reason, sizeof r.reason) || r.port > 65535 || r.allowed > 1
          || r.status < 100 || r.status > 599 || r.reserved != 0)
        {
          sbx_warn ("egress: a malformed report from the egress process (dropped)");
          continue;
        }
      sbx_audit_egress (r.sandbox, r.host, r.port, r.allowed ? "allow" : "deny",
                        r.reason[0] ? r.reason : NULL, r.bytes_out, r.bytes_in);
      sbx_counters_egress (tenant_of_locked (r.sandbox), r.allowed, r.bytes_out, r.bytes_in);
    }
}
