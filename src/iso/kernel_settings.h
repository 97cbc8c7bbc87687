/* sbx: the host's kernel settings docs/security.md recommends (section
 * "Deploying", 2), read once at the daemon's start.
 *
 * They are a second wall: each guards a kernel interface that the
 * sandbox's seccomp filter already closes (io_uring, bpf, userfaultfd,
 * perf events, TIOCSTI) or that leaks what helps a kernel exploit (kernel
 * pointers, the kernel log), or the host's own link protections. A weak
 * one is a warning at start and a line in GET /v1/info (administrators);
 * `sbx serve --require-hardened-host` refuses to start instead.
 */
#ifndef SBX_ISO_KERNEL_SETTINGS_H
#define SBX_ISO_KERNEL_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define SBX_SETTING_ABSENT INT32_MIN /* this kernel has no such setting */

struct sbx_kernel_setting
{
  const char *name;        /* sysctl's name, "kernel.kptr_restrict" */
  int32_t recommended;     /* the weakest value that is not weak */
  int higher_is_stronger;  /* 1: recommended or more; 0: recommended or less */
  int absent_is_fine;      /* a kernel without it lacks the interface, or guards it always */
  const char *guards;      /* what it closes, for the warning */
};

/* The settings, in a fixed order (values are passed in that order). */
extern const struct sbx_kernel_setting sbx_kernel_settings[];
extern const size_t sbx_kernel_settings_count;
#define SBX_KERNEL_SETTINGS_MAX 16

/* Reads each setting under procsys (an fd of /proc/sys) into values[i]
   (SBX_SETTING_ABSENT when missing or unreadable as a number). */
void sbx_kernel_settings_read (int procsys, int32_t values[SBX_KERNEL_SETTINGS_MAX]);

/* 1 when value is weak for setting i. */
int sbx_kernel_setting_weak (size_t i, int32_t value);

/* "kernel.kptr_restrict is 0 (2 or more recommended: kernel pointers in
   /proc)": what a warning says about setting i. */
void sbx_kernel_setting_describe (size_t i, int32_t value, char *buf, size_t cap);

/* The weak ones' names, comma-separated, into buf; how many. */
unsigned sbx_kernel_settings_weak_list (const int32_t values[SBX_KERNEL_SETTINGS_MAX], char *buf,
                                        size_t cap);

#endif
