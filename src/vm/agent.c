/* sbx: the guest agent, PID 1 of a microVM sandbox (docs/vm.md).
 *
 * Static, single-threaded, started by the guest kernel from the initramfs
 * the daemon builds (iso/vm.c). It sets the guest up (proc, sys, dev, the
 * virtio modules, a tmpfs of --disk for /home/user and /tmp, the root
 * read-only), then serves the relay on the host over the virtio-serial port
 * named "sbx" (vm/wire.h): runs commands with their output streamed back,
 * feeds their stdin, signals them and reports how they ended.
 *
 * The second wall: every command runs as the user it names (uid 1000 for
 * "user"), with an empty capability bounding set, no_new_privs and the
 * namespace engine's seccomp filter, which the host sends in SETUP. The
 * agent itself is exempt from the guest's OOM killer (a memory bomb loses
 * its own process, not the sandbox).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iso/proto.h"
#include "vm/agent.h"
#include "vm/agent_ca.h"
#include "vm/agent_fs.h"
#include "vm/agent_pty.h"
#include "vm/agent_root.h"
#include "vm/wire.h"

#define MAX_PROCS 256

struct proc
{
  uint64_t id;
  pid_t pid;
  int in, out, err; /* our ends; -1 once closed */
  char *pend;       /* stdin not yet written */
  size_t pend_len;
  int in_eof;       /* close stdin once pend is written */
  int reaped, status;
  int tty; /* on a terminal: in is its master, out a copy (vm/agent_pty.c) */
  int file_op; /* the host's own helper (vm/agent_fs.c), not a command */
};

static struct proc procs[MAX_PROCS];
static int port = -1;
static struct sock_fprog filter;
static uint32_t user_uid = 1000, user_gid = 1000;

static void
die (const char *what)
{
  int e = errno;
  char msg[200];
  int n = snprintf (msg, sizeof msg, "sbx-vm-agent: %s: %s\n", what, strerror (e));
  if (n > 0)
    (void) !write (2, msg, (size_t) n);
  sync ();
  reboot (RB_POWER_OFF);
  _exit (1);
}

static void
write_all (int fd, const void *p, size_t n)
{
  const char *c = p;
  while (n > 0)
    {
      ssize_t w = write (fd, c, n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        die ("write to the host");
      c += w;
      n -= (size_t) w;
    }
}

static void
send_frame (uint32_t type, uint64_t id, const void *a, size_t alen, const void *b, size_t blen)
{
  struct sbx_vm_frame f = {type, (uint32_t) (alen + blen), id};
  write_all (port, &f, sizeof f);
  if (alen)
    write_all (port, a, alen);
  if (blen)
    write_all (port, b, blen);
}

/* For the agent's other parts (vm/agent.h). */
void
agent_die (const char *what)
{
  die (what);
  __builtin_unreachable ();
}

void
agent_send_frame (uint32_t type, uint64_t id, const void *a, size_t alen, const void *b,
                  size_t blen)
{
  send_frame (type, id, a, alen, b, blen);
}

static void
read_all (int fd, void *p, size_t n)
{
  char *c = p;
  while (n > 0)
    {
      ssize_t r = read (fd, c, n);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        die ("read from the host");
      c += r;
      n -= (size_t) r;
    }
}

static void
load_module (const char *name)
{
  char path[128];
  snprintf (path, sizeof path, "/lib/modules/%s.ko", name);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    die (path);
  if (syscall (SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
    die (path);
  close (fd);
}

/* The port's device: /dev/vportNpM whose sysfs name is "sbx". */
static int
open_port (void)
{
  for (int tries = 0; tries < 500; tries++)
    {
      for (int dev = 0; dev < 4; dev++)
        for (int p = 1; p < 4; p++)
          {
            char path[96], name[32] = "";
            snprintf (path, sizeof path, "/sys/class/virtio-ports/vport%dp%d/name", dev, p);
            int fd = open (path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
              continue;
            ssize_t n = read (fd, name, sizeof name - 1);
            close (fd);
            if (n > 0 && strncmp (name, "sbx\n", 4) == 0)
              {
                snprintf (path, sizeof path, "/dev/vport%dp%d", dev, p);
                fd = open (path, O_RDWR | O_CLOEXEC);
                if (fd >= 0)
                  return fd;
              }
          }
      usleep (10000); /* the port appears once the driver probed it */
    }
  errno = ENODEV;
  die ("no virtio-serial port named sbx");
  return -1;
}

static void
setup (void)
{
  struct sbx_vm_frame f;
  struct sbx_vm_setup s;
  char opts[96];
  int fd;

  if (mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    die ("mount /proc");
  if (mount ("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) < 0)
    die ("mount /sys");
  if (mount ("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, NULL) < 0)
    die ("mount /dev");
  fd = open ("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0)
    {
      (void) !write (fd, "-1000", 5);
      close (fd);
    }
  load_module ("virtio_ring");
  load_module ("virtio");
  load_module ("virtio_mmio");
  load_module ("virtio_console");
  {
    const char *failed = sbx_agent_root_switch (); /* the root image, if any */
    if (failed)
      die (failed);
  }
  port = open_port ();

  read_all (port, &f, sizeof f);
  if (f.type != SBX_VMF_SETUP || f.len < sizeof s || f.len > SBX_VM_FRAME_MAX)
    {
      errno = EPROTO;
      die ("the first frame is not SETUP");
    }
  read_all (port, &s, sizeof s);
  if (s.ca_len > SBX_VM_CA_MAX || s.seccomp_len + s.ca_len != f.len - sizeof s
      || s.seccomp_len % sizeof (struct sock_filter) != 0 || s.seccomp_len == 0)
    {
      errno = EPROTO;
      die ("SETUP's filter");
    }
  filter.len = (unsigned short) (s.seccomp_len / sizeof (struct sock_filter));
  filter.filter = malloc (s.seccomp_len);
  if (filter.filter == NULL)
    die ("malloc");
  read_all (port, filter.filter, s.seccomp_len);
  char *ca = malloc (s.ca_len + 1);
  if (ca == NULL)
    die ("malloc");
  read_all (port, ca, s.ca_len);
  user_uid = s.user_uid;
  user_gid = s.user_gid;

  /* One tmpfs of --disk holds everything writable. */
  snprintf (opts, sizeof opts, "size=%llu,mode=0755", (unsigned long long) s.disk_bytes);
  /* Where it is mounted: /disk, or a directory of /dev on an image
     without one (a stored template's). */
  char d_home[64], d_tmp[64], d_shm[64];
  const char *disk = sbx_agent_disk_dir ();
  snprintf (d_home, sizeof d_home, "%s/home", disk);
  snprintf (d_tmp, sizeof d_tmp, "%s/tmp", disk);
  snprintf (d_shm, sizeof d_shm, "%s/shm", disk);
  if (mount ("disk", disk, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    die ("mount the disk tmpfs");
  if (mkdir (d_home, 0755) < 0 || mkdir (d_tmp, 01777) < 0 || mkdir (d_shm, 01777) < 0
      || chmod (d_tmp, 01777) < 0 || chmod (d_shm, 01777) < 0
      || chown (d_home, user_uid, user_gid) < 0)
    die ("make the disk's directories");
  if (mount (d_home, "/home/user", NULL, MS_BIND, NULL) < 0
      || mount (d_tmp, "/tmp", NULL, MS_BIND, NULL) < 0)
    die ("bind the disk");
  {
    const char *failed = sbx_agent_dev_minimal (d_shm);
    if (failed)
      die (failed);
  }
  sethostname ("sandbox", 7);
  {
    /* sbx's egress CA where commands' SSL_CERT_FILE... point (vm/agent_ca.c);
       before the seal, which an initramfs root needs. */
    const char *failed = sbx_agent_ca_install (ca, s.ca_len);
    if (failed)
      die (failed);
    free (ca);
  }
  /* The root (the image, or the initramfs) is read-only from here on. */
  if (sbx_agent_root_seal () < 0)
    die ("remount / read-only");
  agent_net_setup (); /* lo and the egress listener, before any command */
  send_frame (SBX_VMF_HELLO, 0, NULL, 0, NULL, 0);
}

static struct proc *
find (uint64_t id)
{
  for (int i = 0; i < MAX_PROCS; i++)
    if (procs[i].pid > 0 && procs[i].id == id)
      return &procs[i];
  return NULL;
}

static void
fail_spawn (uint64_t id, int err, uint32_t stage)
{
  struct
  {
    int32_t e;
    uint32_t stage;
  } m = {err, stage};
  send_frame (SBX_VMF_SPAWN_FAILED, id, &m, sizeof m, NULL, 0);
}

/* In the child: the command's walls, then exec. Reports errno and stage
   on `st` (close-on-exec) when something fails. */
static void
child (int st, const struct sbx_vm_spawn *s, const char *cwd, char **argv, char **envp,
       int file_op)
{
  uint32_t stage = SBX_STAGE_SETUP;
  int fd;

  setsid ();
  fd = open ("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0)
    {
      (void) !write (fd, "0", 1);
      close (fd);
    }
  for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
    if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      goto fail;
  {
    struct rlimit nofile = {s->rlimit_nofile, s->rlimit_nofile};
    struct rlimit fsize = {s->rlimit_fsize, s->rlimit_fsize};
    if ((s->rlimit_nofile && setrlimit (RLIMIT_NOFILE, &nofile) < 0)
        || (s->rlimit_fsize && setrlimit (RLIMIT_FSIZE, &fsize) < 0))
      goto fail;
  }
  if (setgroups (0, NULL) < 0 || setresgid (s->gid, s->gid, s->gid) < 0
      || setresuid (s->uid, s->uid, s->uid) < 0)
    goto fail;
  {
    /* uid 0 ("user": "root") keeps its capabilities across setresuid:
       clear them (for uid 1000 they are gone already). */
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset (d, 0, sizeof d);
    if (syscall (SYS_capset, &h, d) < 0)
      goto fail;
  }
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    goto fail;
  stage = SBX_STAGE_CHDIR;
  if (chdir (cwd) < 0)
    goto fail;
  stage = SBX_STAGE_SETUP;
  if (syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &filter) < 0)
    goto fail;
  stage = SBX_STAGE_EXEC;
  if (file_op) /* behind the same walls, in our code (vm/agent_fs.c) */
    {
      close (st);
      sbx_agent_fs_run ((int) s->argc, argv);
    }
  execvpe (argv[0], argv, envp); /* PATH: the agent's own, /bin */
fail:
  {
    int32_t m[2] = {errno, (int32_t) stage};
    (void) !write (st, m, sizeof m);
  }
  _exit (127);
}

static void
spawn (uint64_t id, char *payload, size_t len, int file_op, const struct sbx_vm_pty *tty)
{
  struct sbx_vm_spawn s;
  struct proc *p = NULL;
  char *strs, *end, **argv, **envp, *cwd;
  int in[2], out[2], err[2], st[2];
  pid_t pid;

  if (len <= sizeof s) /* at least cwd's NUL after the header */
    goto broken;
  memcpy (&s, payload, sizeof s);
  strs = payload + sizeof s;
  end = payload + len;
  if (s.argc == 0 || s.argc > SBX_SPAWN_MAX_ARGS || s.envc > SBX_SPAWN_MAX_ENV
      || end[-1] != '\0' || find (id) != NULL)
    goto broken;
  argv = calloc (s.argc + 1, sizeof *argv);
  envp = calloc (s.envc + 1, sizeof *envp);
  if (argv == NULL || envp == NULL)
    die ("calloc");
  cwd = strs;
  strs += strlen (strs) + 1;
  for (uint32_t i = 0; i < s.argc + s.envc; i++)
    {
      if (strs >= end)
        goto broken;
      if (i < s.argc)
        argv[i] = strs;
      else
        envp[i - s.argc] = strs;
      strs += strlen (strs) + 1;
    }
  if (strs != end)
    goto broken;
  for (int i = 0; i < MAX_PROCS && p == NULL; i++)
    if (procs[i].pid == 0)
      p = &procs[i];
  if (p == NULL)
    {
      fail_spawn (id, EAGAIN, SBX_STAGE_FORK);
      goto out;
    }
  if (tty != NULL)
    {
      /* in[1]: the master, ours; in[0]: the slave, the command's; out[0]
         a copy of the master to read (polled apart from in[1]). */
      int r = sbx_agent_pty_open (s.uid, tty, &in[1], &in[0]);
      if (r < 0)
        {
          fail_spawn (id, -r, SBX_STAGE_PTY);
          goto out;
        }
      if ((out[0] = fcntl (in[1], F_DUPFD_CLOEXEC, 3)) < 0)
        die ("dup the master");
      out[1] = err[0] = err[1] = -1;
    }
  else if (pipe2 (in, O_CLOEXEC) < 0 || pipe2 (out, O_CLOEXEC) < 0
           || pipe2 (err, O_CLOEXEC) < 0)
    die ("pipe2");
  if (pipe2 (st, O_CLOEXEC) < 0)
    die ("pipe2");
  pid = fork ();
  if (pid < 0)
    {
      fail_spawn (id, errno, SBX_STAGE_FORK);
      close (in[0]), close (in[1]), close (out[0]), close (out[1]);
      close (err[0]), close (err[1]), close (st[0]), close (st[1]); /* -1s: EBADF */
      goto out;
    }
  if (pid == 0)
    {
      sigset_t none;
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      if (tty != NULL)
        {
          int32_t m[2] = {sbx_agent_pty_stdio (in[0]), SBX_STAGE_PTY};
          if (m[0] != 0)
            {
              (void) !write (st[1], m, sizeof m);
              _exit (127);
            }
        }
      else if (dup2 (in[0], 0) < 0 || dup2 (out[1], 1) < 0 || dup2 (err[1], 2) < 0)
        _exit (127);
      child (st[1], &s, cwd, argv, envp, file_op);
    }
  close (in[0]), close (out[1]), close (err[1]), close (st[1]); /* -1s: EBADF */
  {
    int32_t m[2];
    ssize_t n = read (st[0], m, sizeof m);
    close (st[0]);
    if (n == (ssize_t) sizeof m)
      {
        waitpid (pid, NULL, 0);
        close (in[1]), close (out[0]), close (err[0]);
        fail_spawn (id, m[0], (uint32_t) m[1]);
        goto out;
      }
  }
  fcntl (in[1], F_SETFL, O_NONBLOCK);
  memset (p, 0, sizeof *p);
  p->id = id;
  p->pid = pid;
  p->file_op = file_op;
  p->in = in[1];
  p->out = out[0];
  p->err = err[0];
  p->tty = tty != NULL;
  {
    int32_t m = pid;
    send_frame (SBX_VMF_SPAWNED, id, &m, sizeof m, NULL, 0);
  }
out:
  free (argv);
  free (envp);
  return;
broken:
  errno = EPROTO;
  die ("a malformed SPAWN");
}

static void
flush_stdin (struct proc *p)
{
  while (p->in >= 0 && p->pend_len > 0)
    {
      ssize_t w = write (p->in, p->pend, p->pend_len);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        return;
      if (w < 0) /* EPIPE: the command closed its stdin */
        {
          p->pend_len = 0;
          break;
        }
      memmove (p->pend, p->pend + w, p->pend_len - (size_t) w);
      p->pend_len -= (size_t) w;
    }
  if (p->in >= 0 && p->in_eof && p->pend_len == 0)
    {
      close (p->in);
      p->in = -1;
    }
}

/* Once the command has exited, what it wrote is in the pipe: read exactly
   that much more (FIONREAD) and close it, so that a process it left behind
   holding the pipe (`sleep 1000 &`) cannot keep the command running. The
   namespace engine does the same (core/process.c sbx__outbuf_start_drain).
   Non-blocking: a read never waits for the one left behind. */
static void
drain_exited (struct proc *p, int *fd, uint32_t type)
{
  static char chunk[SBX_VM_CHUNK];
  int pending = 0;

  if (fcntl (*fd, F_SETFL, O_NONBLOCK) == 0 && ioctl (*fd, FIONREAD, &pending) == 0)
    while (pending > 0)
      {
        size_t want = (size_t) pending < sizeof chunk ? (size_t) pending : sizeof chunk;
        ssize_t n = read (*fd, chunk, want);
        if (n < 0 && errno == EINTR)
          continue;
        if (n <= 0)
          break;
        send_frame (type, p->id, chunk, (size_t) n, NULL, 0);
        pending -= (int) n;
      }
  close (*fd);
  *fd = -1;
}

static void
maybe_done (struct proc *p)
{
  if (!p->reaped)
    return;
  /* A command ends when its main process exits, not when the last holder
     of its stdout or stderr closes it. */
  if (p->out >= 0 && !p->tty)
    drain_exited (p, &p->out, SBX_VMF_STDOUT);
  if (p->err >= 0)
    drain_exited (p, &p->err, SBX_VMF_STDERR);
  if (p->out >= 0)
    {
      /* A terminal ends with its command, not when its slave closes. */
      sbx_agent_pty_drain (p->out, p->id);
      close (p->out);
      p->out = -1;
    }
  int32_t st = p->status;
  send_frame (SBX_VMF_EXITED, p->id, &st, sizeof st, NULL, 0);
  if (p->in >= 0)
    close (p->in);
  free (p->pend);
  memset (p, 0, sizeof *p);
}

static void
host_frame (void)
{
  static char *buf;
  struct sbx_vm_frame f;
  struct proc *p;

  read_all (port, &f, sizeof f);
  if (f.len > SBX_VM_FRAME_MAX)
    {
      errno = EPROTO;
      die ("a frame too large");
    }
  if (buf == NULL && (buf = malloc (SBX_VM_FRAME_MAX + 1)) == NULL)
    die ("malloc");
  read_all (port, buf, f.len);
  switch (f.type)
    {
    case SBX_VMF_SPAWN:
    case SBX_VMF_FILE_OP:
      spawn (f.id, buf, f.len, f.type == SBX_VMF_FILE_OP, NULL);
      break;
    case SBX_VMF_SPAWN_PTY:
    case SBX_VMF_RESIZE:
      {
        struct sbx_vm_pty t;
        if (f.len < sizeof t || (f.type == SBX_VMF_RESIZE && f.len != sizeof t))
          goto broken;
        memcpy (&t, buf, sizeof t);
        if (sbx_agent_pty_check (&t) < 0)
          goto broken;
        if (f.type == SBX_VMF_SPAWN_PTY)
          spawn (f.id, buf + sizeof t, f.len - sizeof t, 0, &t);
        else if ((p = find (f.id)) != NULL && p->tty && p->in >= 0)
          sbx_agent_pty_resize (p->in, &t); /* else it ended meanwhile */
        break;
      }
    case SBX_VMF_STDIN:
      p = find (f.id);
      if (p == NULL || p->in < 0 || p->in_eof)
        break; /* it ended meanwhile */
      if (f.len == 0)
        p->in_eof = !p->tty; /* the master is the output too */
      else
        {
          char *n = realloc (p->pend, p->pend_len + f.len);
          if (n == NULL)
            die ("realloc");
          p->pend = n;
          memcpy (p->pend + p->pend_len, buf, f.len);
          p->pend_len += f.len;
        }
      flush_stdin (p);
      break;
    case SBX_VMF_SIGNAL:
      {
        uint32_t signo;
        if (f.len != sizeof signo)
          goto broken;
        memcpy (&signo, buf, sizeof signo);
        p = find (f.id);
        if (p != NULL && !p->reaped && signo > 0 && signo < 65)
          kill (-p->pid, (int) signo);
        break;
      }
    case SBX_VMF_PING:
      /* A relay for this guest restored from a snapshot: the answer marks
         where its stream starts (the old relay may have got half a frame). */
      agent_net_reset_all ();
      /* The old relay's file operations (a directory watch runs until
         killed) serve no one now; commands run on (docs/vm.md). */
      for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i].pid > 0 && procs[i].file_op && !procs[i].reaped)
          kill (-procs[i].pid, SIGKILL);
      send_frame (SBX_VMF_HELLO, f.id, NULL, 0, NULL, 0);
      break;
    case SBX_VMF_CONN_OPEN:
    case SBX_VMF_CONN_DATA:
    case SBX_VMF_CONN_CLOSE:
    case SBX_VMF_CONN_RESET:
    case SBX_VMF_CONN_ACK:
    case SBX_VMF_CONN_CONNECT:
      agent_net_frame (&f, buf);
      break;
    default:
      goto broken;
    }
  return;
broken:
  errno = EPROTO;
  die ("a malformed frame");
}

static void
pump_out (struct proc *p, int *fd, uint32_t type)
{
  static char chunk[SBX_VM_CHUNK];
  ssize_t n = read (*fd, chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) /* EAGAIN: a terminal's master */
    return;
  if (n <= 0)
    {
      close (*fd);
      *fd = -1;
      maybe_done (p);
      return;
    }
  send_frame (type, p->id, chunk, (size_t) n, NULL, 0);
}

int
main (void)
{
  sigset_t mask;
  int sfd;

  setenv ("PATH", "/bin", 1);
  sigemptyset (&mask);
  sigaddset (&mask, SIGCHLD);
  sigaddset (&mask, SIGPIPE);
  sigprocmask (SIG_BLOCK, &mask, NULL);
  sfd = signalfd (-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0)
    die ("signalfd");
  setup ();

  for (;;)
    {
      struct pollfd pf[2 + 3 * MAX_PROCS + AGENT_NET_MAX_POLLFDS];
      struct proc *who[2 + 3 * MAX_PROCS];
      int n = 0, net0, nnet;

      pf[n++] = (struct pollfd){port, POLLIN, 0};
      pf[n++] = (struct pollfd){sfd, POLLIN, 0};
      for (int i = 0; i < MAX_PROCS; i++)
        {
          struct proc *p = &procs[i];
          if (p->pid == 0)
            continue;
          if (p->out >= 0)
            who[n] = p, pf[n++] = (struct pollfd){p->out, POLLIN, 0};
          if (p->err >= 0)
            who[n] = p, pf[n++] = (struct pollfd){p->err, POLLIN, 0};
          if (p->in >= 0 && p->pend_len > 0)
            who[n] = p, pf[n++] = (struct pollfd){p->in, POLLOUT, 0};
        }
      net0 = n;
      nnet = agent_net_pollfds (pf + net0);
      n += nnet;
      if (poll (pf, (nfds_t) n, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          die ("poll");
        }
      if (pf[0].revents & (POLLIN | POLLHUP | POLLERR))
        host_frame ();
      if (pf[1].revents & POLLIN)
        {
          struct signalfd_siginfo si;
          while (read (sfd, &si, sizeof si) == (ssize_t) sizeof si)
            ;
          for (;;)
            {
              int status;
              pid_t pid = waitpid (-1, &status, WNOHANG);
              if (pid <= 0)
                break;
              for (int i = 0; i < MAX_PROCS; i++)
                if (procs[i].pid == pid && !procs[i].reaped)
                  {
                    procs[i].reaped = 1;
                    procs[i].status = status;
                    maybe_done (&procs[i]);
                  }
            }
        }
      /* The fds polled may have been closed by a frame above: recheck. */
      for (int k = 2; k < net0; k++)
        {
          struct proc *p = who[k];
          if (pf[k].revents == 0 || p->pid == 0)
            continue;
          if (pf[k].fd == p->out && p->out >= 0)
            pump_out (p, &p->out, SBX_VMF_STDOUT);
          else if (pf[k].fd == p->err && p->err >= 0)
            pump_out (p, &p->err, SBX_VMF_STDERR);
          else if (pf[k].fd == p->in && p->in >= 0)
            flush_stdin (p);
        }
      agent_net_after_poll (pf + net0, nnet);
    }
}
