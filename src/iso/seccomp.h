/* sbx: the sandbox's syscall policy.
 *
 * The daemon compiles the policy once at start (libseccomp) into a classic
 * BPF program and hands the bytes to every sandbox's init, which sets
 * no_new_privs and loads them with seccomp(SECCOMP_SET_MODE_FILTER). The
 * policy itself (tables and the reasons behind each entry) is in seccomp.c.
 */
#ifndef SBX_ISO_SECCOMP_H
#define SBX_ISO_SECCOMP_H

#include <stddef.h>

#include "util/error.h"

/* Compile the sandbox filter for the native architecture into a classic BPF
   program (an array of struct sock_filter). *prog is malloc'd, *len is its
   size in bytes. Called once at daemon start; the bytes are sent to every
   sandbox's init, which loads them with seccomp(SECCOMP_SET_MODE_FILTER). */
int sbx_seccomp_build (void **prog, size_t *len, sbx_error_t **err)
    __attribute__ ((warn_unused_result, nonnull (1, 2)));

#endif
