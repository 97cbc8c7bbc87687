/* sbx: the guest's own view of its resources, for the metrics routes
 * (docs/vm.md, Metrics). Run as a file operation (agent_fs.c), behind the
 * command's walls: everything it reads is world-readable in the guest. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "vm/agent_fs.h"

static int
slurp (const char *path, char *buf, size_t cap)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return -1;
  n = read (fd, buf, cap - 1);
  close (fd);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return 0;
}

/* "Name:   123 kB" in /proc/meminfo, in bytes. */
static uint64_t
meminfo (const char *text, const char *name)
{
  const char *p = strstr (text, name);
  return p ? strtoull (p + strlen (name), NULL, 10) * 1024 : 0;
}

int
sbx_agent_metrics (const char *disk, struct sbx_vm_fs_metrics *m, sbx_error_t **err)
{
  static char buf[16384];
  unsigned long long v[10] = {0};
  struct statfs sfs;
  const char *p;
  long cpus;
  int i;

  memset (m, 0, sizeof *m);
  if (slurp ("/proc/meminfo", buf, sizeof buf) < 0)
    return sbx_err_sys (err, errno, "read /proc/meminfo");
  m->mem_total = meminfo (buf, "MemTotal:");
  m->mem_available = meminfo (buf, "MemAvailable:");
  if (statfs (disk, &sfs) < 0)
    return sbx_err_sys (err, errno, "statfs %s", disk);
  m->disk_total = (uint64_t) sfs.f_blocks * (uint64_t) sfs.f_bsize;
  m->disk_free = (uint64_t) sfs.f_bfree * (uint64_t) sfs.f_bsize;
  /* "cpu  user nice system idle iowait irq softirq steal guest guest_nice" */
  if (slurp ("/proc/stat", buf, sizeof buf) < 0 || strncmp (buf, "cpu ", 4) != 0)
    return sbx_err_sys (err, errno ? errno : EIO, "read /proc/stat");
  p = buf + 4;
  for (i = 0; i < 8; i++)
    {
      char *end;
      v[i] = strtoull (p, &end, 10);
      p = end;
      m->cpu_total_ticks += v[i];
    }
  m->cpu_busy_ticks = m->cpu_total_ticks - v[3] - v[4]; /* not idle, not waiting for I/O */
  cpus = sysconf (_SC_NPROCESSORS_ONLN);
  m->cpus = cpus > 0 ? (uint32_t) cpus : 1;
  if (slurp ("/proc/loadavg", buf, sizeof buf) == 0 && (p = strchr (buf, '/')) != NULL)
    m->processes = (uint32_t) strtoul (p + 1, NULL, 10);
  return 0;
}
