/* Unit tests for QEMU's Landlock domain (src/iso/vm_confine.c): in a test
 * child, the same call QEMU's process makes before its exec, then what a
 * compromised QEMU would try: read host files outside /usr, write
 * anywhere, connect over TCP, signal the daemon. Each with its errno. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iso/vm.h"
#include "tap.h"
#include "util/landlock.h"

static int
open_errno (const char *path, int flags)
{
  int fd = open (path, flags | O_CLOEXEC, 0600);
  if (fd >= 0)
    {
      close (fd);
      return 0;
    }
  return errno;
}

/* In the confined child: what a compromised QEMU would try. */
static int
probe (const char *kernel)
{
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons (9)};
  int sock;

  CHECK (sbx_vm_confine_qemu (kernel, NULL) == 0);
  CHECK (open_errno ("/usr/bin/env", O_RDONLY) == 0);
  CHECK (open_errno ("/etc/ld.so.cache", O_RDONLY) == 0);
  CHECK (open_errno ("/proc/self/status", O_RDONLY) == 0);
  CHECK (open_errno ("/dev/null", O_WRONLY) == 0);
  CHECK (open_errno (kernel, O_RDONLY) == 0);
  /* World-readable host files outside what QEMU needs. */
  CHECK (open_errno ("/etc/passwd", O_RDONLY) == EACCES);
  CHECK (open_errno ("/etc/hostname", O_RDONLY) == EACCES);
  CHECK (open_errno ("/proc/1/status", O_RDONLY) == EACCES);
  CHECK (open_errno ("/tmp", O_RDONLY | O_DIRECTORY) == EACCES);
  /* No write by path: not in /tmp, not to the kernel it reads, not in /usr. */
  CHECK (open_errno ("/tmp/sbx-test-qemu-write", O_WRONLY | O_CREAT | O_EXCL) == EACCES);
  CHECK (mkdir ("/tmp/sbx-test-qemu-dir", 0700) < 0 && errno == EACCES);
  CHECK (open_errno (kernel, O_WRONLY) == EACCES);
  CHECK (unlink (kernel) < 0 && errno == EACCES);
  CHECK (open_errno ("/usr/bin/env", O_WRONLY) == EACCES);
  /* No TCP: connect is refused by the domain before any packet. */
  sock = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK (sock >= 0);
  sin.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  CHECK (connect (sock, (struct sockaddr *) &sin, sizeof sin) < 0 && errno == EACCES);
  close (sock);
  /* Signals stay in the domain: the test (its parent) is outside. */
  CHECK (kill (getppid (), 0) < 0 && errno == EPERM);
  return 0;
}

static int
test_qemu_domain (void)
{
  char kernel[] = "/tmp/sbx-test-vmlinuz-XXXXXX";
  int fd, status = -1;
  pid_t pid;

  if (sbx_landlock_abi () < 6)
    return 77;
  fd = mkstemp (kernel);
  CHECK (fd >= 0);
  close (fd);
  /* A child of its own: the domain cannot be left, and the test must
     remove its file afterwards. */
  pid = fork ();
  if (pid == 0)
    _exit (probe (kernel) == 0 ? 0 : 1);
  if (pid > 0)
    waitpid (pid, &status, 0);
  unlink (kernel);
  CHECK (pid > 0 && WIFEXITED (status) && WEXITSTATUS (status) == 0);
  return 0;
}

int
main (void)
{
  RUN (test_qemu_domain);
  return tap_done ();
}
