/* sbx-init: the processes init started, kept until the daemon lets go.
 *
 * A command's entry outlives the command: after it exits, init keeps its
 * exit status and the daemon's ends of its pipes until the daemon sends
 * RELEASE, so that a daemon that died and came back (ATTACH) still learns
 * how the command ended and can read what is left in its pipes. Helpers
 * of the files API (PUMP) are forgotten as soon as they are reaped.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "iso/init/init.h"

#define MAX_TRACKED 4096

static struct init_proc procs[MAX_TRACKED];

void
init_proc_forget (struct init_proc *p)
{
  int i;

  for (i = 0; i < 3; i++)
    if (p->keep[i] >= 0)
      close (p->keep[i]);
  if (p->pty >= 0)
    close (p->pty);
  free (p->tag);
  memset (p, 0, sizeof *p);
}

struct init_proc *
init_proc_add (pid_t pid, uint64_t req_id, int is_pump)
{
  int i;

  for (i = 0; i < MAX_TRACKED; i++)
    if (procs[i].pid == 0)
      {
        memset (&procs[i], 0, sizeof procs[i]);
        procs[i].pid = pid;
        procs[i].req_id = req_id;
        procs[i].is_pump = is_pump;
        procs[i].keep[0] = procs[i].keep[1] = procs[i].keep[2] = -1;
        procs[i].pty = -1;
        return &procs[i];
      }
  return NULL;
}

struct init_proc *
init_proc_running (uint64_t req_id)
{
  int i;

  for (i = 0; i < MAX_TRACKED; i++)
    if (procs[i].pid != 0 && !procs[i].exited && procs[i].req_id == req_id)
      return &procs[i];
  return NULL;
}

void
init_handle_release (const struct sbx_msg_release *m, size_t len)
{
  int i;

  if (len != sizeof *m || (m->what != SBX_RELEASE_STDIN && m->what != SBX_RELEASE_ALL))
    init_protocol_violation ();
  for (i = 0; i < MAX_TRACKED; i++)
    if (procs[i].pid != 0 && !procs[i].is_pump && procs[i].req_id == m->req_id)
      {
        if (m->what == SBX_RELEASE_ALL)
          init_proc_forget (&procs[i]);
        else if (procs[i].keep[0] >= 0)
          {
            /* The API closed stdin: the command must see EOF. (A
               terminal's master stays: it is the output too.) */
            close (procs[i].keep[0]);
            procs[i].keep[0] = -1;
          }
        return;
      }
  /* Unknown: already released, or never tracked (the spawn failed). */
}

void
init_reap (void)
{
  int status, i;
  pid_t pid;

  /* Reap everything: our commands, sudo's sessions and every orphan
     re-parented to us. */
  while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
    for (i = init_sudo_reaped (pid) ? MAX_TRACKED : 0; i < MAX_TRACKED; i++)
      if (procs[i].pid == pid && !procs[i].exited)
        {
          struct sbx_msg_exited m;
          memset (&m, 0, sizeof m);
          m.hdr.type = SBX_MSG_EXITED;
          m.hdr.len = sizeof m;
          m.req_id = procs[i].req_id;
          m.pid = pid;
          m.wait_status = status;
          if (procs[i].is_pump)
            init_proc_forget (&procs[i]);
          else
            {
              struct timespec now;
              clock_gettime (CLOCK_REALTIME, &now);
              procs[i].exited = 1;
              procs[i].wait_status = status;
              procs[i].exited_ms = (int64_t) now.tv_sec * 1000 + now.tv_nsec / 1000000;
            }
          init_send_event (&m, sizeof m);
          break;
        }
}

/* A new daemon: everything it needs to carry on, in one ordered answer.
   Sent blocking: the daemon is reading it right now. */
void
init_handle_attach (size_t len, int nfds)
{
  static unsigned char buf[sizeof (struct sbx_msg_proc) + SBX_TAG_MAX];
  struct sbx_msg_roots roots;
  struct sbx_msg_attach_end end;
  int fds[2], i;
  uint32_t count = 0;

  if (len != sizeof (struct sbx_msg_hdr) || nfds != 0)
    init_protocol_violation ();
  /* Whatever was waiting for the old daemon is in the answer; its
     connects in flight are nobody's now. */
  init_drop_events ();
  /* A watcher's only reader was the daemon that went away: nobody can
     take its stream over, so it ends (its EXITED goes to the new daemon,
     which knows no such request and ignores it). */
  for (i = 0; i < MAX_TRACKED; i++)
    if (procs[i].pid != 0 && procs[i].is_watch && !procs[i].exited)
      kill (procs[i].pid, SIGKILL);
  init_connect_drop_all ();
  memset (&roots, 0, sizeof roots);
  roots.hdr.type = SBX_MSG_ROOTS;
  roots.hdr.len = sizeof roots;
  roots.version = SBX_PROTO_VERSION;
  init_roots (&fds[0], &fds[1]);
  if (init_send (&roots, sizeof roots, fds, 2) < 0)
    init_protocol_violation ();
  for (i = 0; i < MAX_TRACKED; i++)
    {
      struct sbx_msg_proc *m = (struct sbx_msg_proc *) buf;
      int kept[4], nkept = 0, k;
      if (procs[i].pid == 0 || procs[i].is_pump)
        continue;
      memset (m, 0, sizeof *m);
      m->hdr.type = SBX_MSG_PROC;
      m->hdr.len = (uint32_t) (sizeof *m + procs[i].tag_len);
      m->req_id = procs[i].req_id;
      m->pid = procs[i].pid;
      m->state = procs[i].exited ? SBX_ATTACHED_EXITED : SBX_ATTACHED_RUNNING;
      m->wait_status = procs[i].wait_status;
      for (k = 0; k < 3; k++)
        if (procs[i].keep[k] >= 0)
          {
            m->keep_mask |= 1u << k;
            kept[nkept++] = procs[i].keep[k];
          }
      /* A command on a terminal has no kept pipe ends: its master is all. */
      if (procs[i].pty >= 0)
        {
          m->keep_mask |= SBX_KEEP_PTY;
          kept[nkept++] = procs[i].pty;
        }
      m->tag_len = procs[i].tag_len;
      m->causes = procs[i].causes;
      m->exited_ms = procs[i].exited_ms;
      if (procs[i].tag_len)
        memcpy (m + 1, procs[i].tag, procs[i].tag_len);
      if (init_send (m, m->hdr.len, kept, nkept) < 0)
        init_protocol_violation ();
      count++;
    }
  memset (&end, 0, sizeof end);
  end.hdr.type = SBX_MSG_ATTACH_END;
  end.hdr.len = sizeof end;
  end.count = count;
  if (init_send (&end, sizeof end, NULL, 0) < 0)
    init_protocol_violation ();
}
