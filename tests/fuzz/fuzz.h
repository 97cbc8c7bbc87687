/* sbx fuzz harnesses: shared helpers (see docs/fuzzing.md).
 *
 * Each tests/fuzz/fuzz_<target>.c is a libFuzzer harness built with clang,
 * ASan and UBSan against the daemon's own sources. Besides crashes, a
 * harness checks the invariants the code promises (the error contract,
 * documented bounds, nothing touched outside a root) and aborts when one
 * breaks, so libFuzzer keeps the input that broke it.
 */
#ifndef SBX_TESTS_FUZZ_H
#define SBX_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv);

#define FUZZ_ASSERT(cond)                                                      \
  do                                                                           \
    {                                                                          \
      if (!(cond))                                                             \
        {                                                                      \
          fprintf (stderr, "%s:%d: invariant broken: %s\n", __FILE__,          \
                   __LINE__, #cond);                                           \
          abort ();                                                            \
        }                                                                      \
    }                                                                          \
  while (0)

/* The error contract (util/error.h): -1 with an error, or 0 without one.
   Frees the error; returns rc. */
static inline int
fuzz_contract (int rc, sbx_error_t **err, const char *what)
{
  if (!((rc == 0 && *err == NULL) || (rc == -1 && *err != NULL && (*err)->msg != NULL)))
    {
      fprintf (stderr, "%s: rc %d with error %p (%s)\n", what, rc, (void *) *err,
               *err ? (*err)->msg : "-");
      abort ();
    }
  sbx_error_free (*err);
  *err = NULL;
  return rc;
}
#define FUZZ_CONTRACT(call, errp) fuzz_contract ((call), (errp), #call)

/* A NUL-terminated copy of the input (cut at its first NUL, as C strings
   from the network are). */
static inline char *
fuzz_cstr (const uint8_t *data, size_t size)
{
  char *s = malloc (size + 1);

  if (s == NULL)
    abort ();
  if (size)
    memcpy (s, data, size);
  s[size] = '\0';
  return s;
}

/* Input consumed line by line ('\n'), each line a NUL-terminated string in
   buf; the last line may be unterminated. */
struct fuzz_lines
{
  const uint8_t *p;
  size_t n;
};

static inline int
fuzz_line (struct fuzz_lines *in, char *buf, size_t cap)
{
  size_t i = 0, len;

  if (in->n == 0)
    return 0;
  while (i < in->n && in->p[i] != '\n')
    i++;
  len = i < cap - 1 ? i : cap - 1;
  memcpy (buf, in->p, len);
  buf[len] = '\0';
  in->p += i < in->n ? i + 1 : i;
  in->n -= i < in->n ? i + 1 : i;
  return 1;
}

#endif
