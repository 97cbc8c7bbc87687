/* sbx: the microVM engine's host side, in the privileged parent
 * (docs/vm.md).
 *
 * A VM sandbox is, to the rest of the daemon, a box like any other: a
 * cgroup, a "init" process with a pidfd, and a SEQPACKET control socket
 * that speaks iso/proto.h. Its "init" is the relay (iso/vm_relay.c): the
 * daemon binary re-executed as an unprivileged uid of its own (the
 * sandbox's uid_base, which maps no namespace here), inside the sandbox's
 * cgroup, that starts QEMU and turns proto.h messages and the daemon's
 * pipes into frames on a virtio-serial port (vm/wire.h). Destroying it is
 * the namespace engine's destroy: kill the relay, then everything left in
 * the cgroup (QEMU), then remove the cgroup.
 *
 * The guest boots from the Debian kernel unpacked by scripts/install-deps.sh
 * into the VM directory and an initramfs built here once, in a sealed
 * memfd: our agent as /init, busybox and the four virtio modules.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iso/engine.h"
#include "iso/snapstore.h"
#include "iso/vm.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/file.h"
#include "util/log.h"

extern const char sbx_vm_agent_blob[];
extern const char sbx_vm_agent_blob_end[];

static const char *const modules[]
    = {"virtio_ring", "virtio", "virtio_mmio", "virtio_console", "virtio_blk"};
static const char *const applets[]
    = {"sh",    "cat",  "echo", "ls",   "id",    "head",  "tail", "dd",    "sleep", "wc",
       "env",   "true", "false", "mkdir", "rm",  "grep",  "sed",  "nc",    "printf", "test",
       "kill",  "ps",   "free",  "uname", "touch", "cp",  "mv",   "stat",  "seq",  "yes",
       "sha256sum", "base64", "awk", "tr", "pwd", "hostname", "date", "sort", "uniq", "od"};

static pthread_mutex_t initrd_lock = PTHREAD_MUTEX_INITIALIZER;
static int initrd_fd = -1;


/* ---- the initramfs (cpio "newc") ------------------------------------- */

static int
cpio_entry (struct sbx_buf *b, const char *name, unsigned mode, const void *data, size_t len,
            sbx_error_t **err)
{
  static unsigned ino = 1;
  char hdr[111];
  size_t nlen = strlen (name) + 1;
  static const char zeros[4];

  snprintf (hdr, sizeof hdr, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
            ino++, mode, 0u, 0u, 1u, 0u, (unsigned) len, 0u, 0u, 0u, 0u, (unsigned) nlen, 0u);
  sbx_buf_append (b, hdr, 110);
  sbx_buf_append (b, name, nlen);
  sbx_buf_append (b, zeros, (4 - b->len % 4) % 4);
  if (len)
    sbx_buf_append (b, data, len);
  sbx_buf_append (b, zeros, (4 - b->len % 4) % 4);
  return b->failed ? sbx_err_oom (err) : 0;
}

static int
read_whole (int dir, const char *name, struct sbx_buf *out, size_t max, sbx_error_t **err)
{
  cleanup_close int fd = openat (dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  char chunk[65536];
  ssize_t n;

  if (fd < 0)
    return sbx_err_sys (err, errno, "open %s", name);
  while ((n = read (fd, chunk, sizeof chunk)) > 0)
    {
      if (out->len + (size_t) n > max)
        return sbx_err (err, SBX_E_SYSTEM, "%s is larger than %zu bytes", name, max);
      sbx_buf_append (out, chunk, (size_t) n);
      if (out->failed)
        return sbx_err_oom (err);
    }
  if (n < 0)
    return sbx_err_sys (err, errno, "read %s", name);
  return 0;
}

static int
is_elf (const struct sbx_buf *b)
{
  return b->len > 64 && memcmp (b->data, "\177ELF", 4) == 0;
}

/* Check the kernel is a bzImage (its "HdrS" boot header at 0x202). */
static int
check_kernel (int dir, const char *path, sbx_error_t **err)
{
  cleanup_close int fd = openat (dir, "vmlinuz", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  char magic[4];

  if (fd < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE,
                    "isolation vm: no guest kernel at %s/vmlinuz (%s); scripts/install-deps.sh "
                    "installs it",
                    path, strerror (errno));
  if (pread (fd, magic, 4, 0x202) != 4 || memcmp (magic, "HdrS", 4) != 0)
    return sbx_err (err, SBX_E_UNAVAILABLE,
                    "isolation vm: the guest kernel %s/vmlinuz is corrupt (not a bzImage)", path);
  return 0;
}

static int
build_initrd (int dir, const char *path, sbx_error_t **err)
{
  struct sbx_buf b = SBX_BUF_INIT, f = SBX_BUF_INIT;
  static const char *const dirs[] = {"bin", "dev", "proc", "sys", "tmp", "home", "home/user",
                                     "disk", "lib", "lib/modules", "etc", "root"};
  static const char passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
                               "user:x:1000:1000:user:/home/user:/bin/sh\n";
  static const char group[] = "root:x:0:\nuser:x:1000:\n";
  /* The API's `cmd` runs /bin/bash -c; the guest's shell is busybox's ash. */
  static const char bash[] = "#!/bin/sh\nexec /bin/sh \"$@\"\n";
  int fd = -1;

  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (cpio_entry (&b, dirs[i], 040755, NULL, 0, err) < 0)
      goto fail;
  if (cpio_entry (&b, "init", 0100755, sbx_vm_agent_blob,
                  (size_t) (sbx_vm_agent_blob_end - sbx_vm_agent_blob), err)
          < 0
      || cpio_entry (&b, "etc/passwd", 0100644, passwd, sizeof passwd - 1, err) < 0
      || cpio_entry (&b, "etc/group", 0100644, group, sizeof group - 1, err) < 0
      || cpio_entry (&b, "bin/bash", 0100755, bash, sizeof bash - 1, err) < 0)
    goto fail;
  if (read_whole (dir, "busybox", &f, 8 << 20, err) < 0 || !is_elf (&f))
    {
      sbx_error_free (*err), *err = NULL;
      sbx_err (err, SBX_E_UNAVAILABLE,
               "isolation vm: %s/busybox is missing or corrupt; scripts/install-deps.sh "
               "installs it",
               path);
      goto fail;
    }
  if (cpio_entry (&b, "bin/busybox", 0100755, f.data, f.len, err) < 0)
    goto fail;
  for (size_t i = 0; i < sizeof applets / sizeof applets[0]; i++)
    {
      char name[64];
      snprintf (name, sizeof name, "bin/%s", applets[i]);
      if (cpio_entry (&b, name, 0120777, "busybox", 7, err) < 0)
        goto fail;
    }
  for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++)
    {
      char name[96];
      sbx_buf_free (&f);
      snprintf (name, sizeof name, "modules/%s.ko", modules[i]);
      if (read_whole (dir, name, &f, 16 << 20, err) < 0 || !is_elf (&f))
        {
          sbx_error_free (*err), *err = NULL;
          sbx_err (err, SBX_E_UNAVAILABLE,
                   "isolation vm: the guest module %s/%s is missing or corrupt; "
                   "scripts/install-deps.sh installs it",
                   path, name);
          goto fail;
        }
      snprintf (name, sizeof name, "lib/modules/%s.ko", modules[i]);
      if (cpio_entry (&b, name, 0100644, f.data, f.len, err) < 0)
        goto fail;
    }
  if (cpio_entry (&b, "TRAILER!!!", 0, NULL, 0, err) < 0)
    goto fail;

  fd = memfd_create ("sbx-vm-initrd", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || write (fd, b.data, b.len) != (ssize_t) b.len
      || sbx_seal_memfd (fd, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
    {
      sbx_err_sys (err, errno, "write the initramfs");
      goto fail;
    }
  sbx_buf_free (&b);
  sbx_buf_free (&f);
  if (fd <= SBX_VM_ROOT_FD) /* see above_targets */
    {
      int n = fcntl (fd, F_DUPFD_CLOEXEC, SBX_VM_ROOT_FD + 1);
      close (fd);
      fd = n;
      if (fd < 0)
        {
          sbx_err_sys (err, errno, "fcntl");
          goto fail;
        }
    }
  initrd_fd = fd;
  return 0;
fail:
  if (fd >= 0)
    close (fd);
  sbx_buf_free (&b);
  sbx_buf_free (&f);
  return -1;
}

/* The guest's files, checked at every create (a kernel replaced or removed
   since is a clear error, not a VM that never answers). */
static int
prepare (const char *path, sbx_error_t **err)
{
  cleanup_close int dir = open (path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int rc;

  if (dir < 0)
    return sbx_err (err, SBX_E_UNAVAILABLE,
                    "isolation vm: no VM directory %s (%s); scripts/install-deps.sh makes it", path,
                    strerror (errno));
  if (check_kernel (dir, path, err) < 0)
    return -1;
  pthread_mutex_lock (&initrd_lock);
  rc = initrd_fd >= 0 ? 0 : build_initrd (dir, path, err);
  pthread_mutex_unlock (&initrd_lock);
  return rc;
}

/* ---- create ------------------------------------------------------------- */

/* Move fd above the numbers the child dup2s onto (3 to 11), so that no
   dup2 there overwrites another source. */
static int
above_targets (int *fd)
{
  int n;
  if (*fd < 0 || *fd > SBX_VM_ROOT_FD)
    return 0;
  n = fcntl (*fd, F_DUPFD_CLOEXEC, SBX_VM_ROOT_FD + 1);
  if (n < 0)
    return -1;
  close (*fd);
  *fd = n;
  return 0;
}

#define VM_OVERHEAD_BYTES (320ull << 20) /* QEMU, its TCG code cache, the relay */
#define VM_PIDS 256                       /* QEMU's threads count as pids */

static int
wait_ready (int ctl, int pidfd, int timeout_ms, sbx_error_t **err)
{
  union
  {
    struct sbx_msg_hdr hdr;
    struct sbx_msg_ready ready;
    struct sbx_msg_failure fail;
  } m;
  /* The relay's pidfd too: a relay (or QEMU) that dies while booting is
     an error now, not after the timeout. Its last words, if any, are
     queued on ctl before it exits, so ctl is read first. */
  struct pollfd pfd[2] = {{ctl, POLLIN, 0}, {pidfd, POLLIN, 0}};
  ssize_t n;
  int r;

  do
    r = poll (pfd, 2, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r == 0)
    return sbx_err (err, SBX_E_UNAVAILABLE,
                    "isolation vm: the guest did not start within %d s (kernel or initramfs "
                    "broken?)",
                    timeout_ms / 1000);
  n = recv (ctl, &m, sizeof m, MSG_DONTWAIT);
  if (n == (ssize_t) sizeof m.ready && m.hdr.type == SBX_MSG_READY && m.hdr.len == sizeof m.ready)
    return 0;
  if (n == (ssize_t) sizeof m.fail && m.hdr.type == SBX_MSG_SETUP_FAILED)
    {
      m.fail.what[sizeof m.fail.what - 1] = '\0';
      return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: %s%s%s", m.fail.what,
                      m.fail.sys_errno ? ": " : "",
                      m.fail.sys_errno ? strerror (m.fail.sys_errno) : "");
    }
  return sbx_err (err, SBX_E_UNAVAILABLE, "isolation vm: the VM ended while starting");
}

int
sbx_vm_create (struct sbx_engine *eng, const struct sbx_iso_spec *spec, struct sbx_iso_box *box,
               sbx_error_t **err)
{
  const char *dir = eng->vm_dir[0] ? eng->vm_dir : SBX_VM_DIR_DEFAULT;
  struct sbx_cgroup_limits cl = spec->limits;
  cleanup_close int child_end = -1, exe = -1, devnull = -1, qmp_end = -1, incoming = -1;
  cleanup_close int root_img = -1; /* the read-only root image (iso/vm_root.c) */
  cleanup_close int ca_cert = -1;  /* sbx's egress CA certificate (iso/vm_ca.c) */
  char a_mem[32], a_cpus[16], a_disk[32], a_uid[16];
  char kernel[600], initrd[64];
  int sv[2], qv[2], go[2] = {-1, -1};
  unsigned cpus;
  gid_t kvm_gid = (gid_t) -1;
  struct group *gr;
  pid_t pid;

  sbx_iso_box_init (box);
  box->uid_base = spec->uid_base;
  if (prepare (dir, err) < 0)
    return -1;
  cl.memory_bytes += VM_OVERHEAD_BYTES;
  if (cl.pids < VM_PIDS)
    cl.pids = VM_PIDS;
  if (sbx_cgroup_create (&eng->cgroups, spec->name, &cl, &box->cg, err) < 0)
    return -1;
  exe = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  devnull = open ("/dev/null", O_RDWR | O_CLOEXEC);
  if (exe < 0 || devnull < 0)
    {
      sbx_err_sys (err, errno, "open /proc/self/exe");
      goto fail;
    }
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 || pipe2 (go, O_CLOEXEC) < 0)
    {
      sbx_err_sys (err, errno, "socketpair");
      goto fail;
    }
  box->ctl = sv[0];
  child_end = sv[1];
  /* QEMU's monitor: its other end is ours only (snapshots, iso/vm_qmp.c). */
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qv) < 0)
    {
      sbx_err_sys (err, errno, "socketpair");
      goto fail;
    }
  box->qmp = qv[0];
  qmp_end = qv[1];
  /* A restore: the guest's memory from the store, opened here (the relay
     and QEMU cannot reach the store). */
  if (spec->snapshot != NULL)
    {
      incoming = sbx_snapstore_open_file (spec->snapshot_store, spec->snapshot_tenant,
                                          spec->snapshot, SBX_VM_SNAPSHOT_FILE, err);
      if (incoming < 0)
        goto fail;
    }
  root_img = sbx_vm_root_open (spec, box, err);
  if (root_img < 0 && err != NULL && *err != NULL)
    goto fail;
  ca_cert = sbx_vm_ca_open (); /* none: the guest trusts its image's roots only */
  cpus = (spec->limits.cpu_milli + 999) / 1000;
  if (cpus < 1)
    cpus = 1;
  snprintf (a_mem, sizeof a_mem, "%llu", (unsigned long long) (spec->limits.memory_bytes >> 20));
  snprintf (a_cpus, sizeof a_cpus, "%u", cpus);
  snprintf (a_disk, sizeof a_disk, "%llu", (unsigned long long) spec->disk_bytes);
  snprintf (a_uid, sizeof a_uid, "%u", (unsigned) spec->uid_base);
  snprintf (kernel, sizeof kernel, "%s/vmlinuz", dir);
  snprintf (initrd, sizeof initrd, "/proc/self/fd/%d", SBX_VM_INITRD_FD);
  if (above_targets (&exe) < 0 || above_targets (&devnull) < 0 || above_targets (&child_end) < 0
      || above_targets (&qmp_end) < 0 || above_targets (&incoming) < 0
      || above_targets (&go[0]) < 0 || above_targets (&root_img) < 0
      || above_targets (&ca_cert) < 0)
    {
      sbx_err_sys (err, errno, "fcntl");
      goto fail;
    }
  gr = getgrnam ("kvm"); /* before fork: not async-signal-safe */
  if (gr != NULL)
    kvm_gid = gr->gr_gid;

  {
    static char a_name[] = "sbx-vm-relay", a_relay[] = SBX_VM_RELAY_ARG, a_qemu[] = SBX_VM_QEMU;
    static char path_env[] = "PATH=/usr/bin:/bin";
    static char a_boot[] = "boot", a_restore[] = "restore";
    char *argv[] = {a_name, a_relay, a_qemu, kernel, initrd, a_mem, a_cpus, a_disk, a_uid,
                    incoming >= 0 ? a_restore : a_boot, NULL};
    char *envp[] = {path_env, NULL};
    uid_t uid = spec->uid_base;

    pid = fork ();
    if (pid < 0)
      {
        sbx_err_sys (err, errno, "fork");
        goto fail;
      }
    if (pid == 0)
      {
        /* Async-signal-safe calls only: the parent is multi-threaded. */
        char c;
        if (read (go[0], &c, 1) != 1)
          _exit (127);
        if (dup2 (child_end, SBX_INIT_CTL_FD) < 0 || dup2 (initrd_fd, SBX_VM_INITRD_FD) < 0
            || dup2 (qmp_end, SBX_VM_QMP_FD) < 0 || dup2 (devnull, 0) < 0)
          _exit (127);
        if (incoming >= 0 && dup2 (incoming, SBX_VM_INCOMING_FD) < 0)
          _exit (127);
        if (root_img >= 0 && dup2 (root_img, SBX_VM_ROOT_FD) < 0)
          _exit (127);
        if (ca_cert >= 0 && dup2 (ca_cert, SBX_VM_CA_FD) < 0)
          _exit (127);
        /* A pooled VM boots at low priority, QEMU's threads inherit it;
           a create that takes it renices the cgroup's tasks back. */
        if (spec->background && setpriority (PRIO_PROCESS, 0, 10) < 0)
          _exit (127);
        if (setgroups (kvm_gid != (gid_t) -1 ? 1 : 0, &kvm_gid) < 0
            || setresgid (uid, uid, uid) < 0 || setresuid (uid, uid, uid) < 0
            || prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
          _exit (127);
        fexecve (exe, argv, envp);
        _exit (127);
      }
  }
  close_and_reset (&go[0]);
  box->pid = pid;
  box->pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
  if (box->pidfd < 0)
    {
      sbx_err_sys (err, errno, "pidfd_open");
      kill (pid, SIGKILL);
      goto fail;
    }
  if (sbx_cgroup_attach (&eng->cgroups, &box->cg, pid, err) < 0)
    goto fail;
  if (write (go[1], "g", 1) != 1)
    {
      sbx_err_sys (err, errno, "release the relay");
      goto fail;
    }
  close_and_reset (&go[1]);
  close_and_reset (&child_end);
  close_and_reset (&qmp_end);
  close_and_reset (&incoming);
  close_and_reset (&root_img);
  close_and_reset (&ca_cert);
  if (spec->snapshot != NULL && sbx_vm_restore_go (box->qmp, err) < 0)
    {
      sbx_err_wrap (err, "isolation vm: restoring snapshot `%s`", spec->snapshot);
      goto fail;
    }
  if (wait_ready (box->ctl, box->pidfd, SBX_VM_BOOT_TIMEOUT_MS, err) < 0)
    {
      char why[300];
      if (spec->snapshot != NULL)
        {
          sbx_vm_qmp_explain (box->qmp, why, sizeof why);
          sbx_err_wrap (err, "isolation vm: restoring snapshot `%s`%s", spec->snapshot, why);
        }
      goto fail;
    }
  if (spec->snapshot == NULL && sbx_vm_qmp_open (box->qmp, err) < 0)
    goto fail;
  if (fcntl (box->ctl, F_SETFL, O_NONBLOCK) < 0)
    {
      sbx_err_sys (err, errno, "fcntl");
      goto fail;
    }
  return 0;
fail:
  if (go[0] >= 0)
    close (go[0]);
  if (go[1] >= 0)
    close (go[1]);
  sbx_iso_destroy (eng, box, NULL);
  return -1;
}
