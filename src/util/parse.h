/* sbx: parsers for the values users type: sizes, durations, CPU counts.
 * Shared by the CLI and the API so both accept exactly the same spellings. */
#ifndef SBX_UTIL_PARSE_H
#define SBX_UTIL_PARSE_H

#include <stdint.h>

#include "util/error.h"

/* "512M", "1G", "64k", "1048576", "1.5G" -> bytes. Suffixes K M G T (powers
   of 1024), optionally followed by "i" and/or "B"; case-insensitive. */
int sbx_parse_size (const char *s, uint64_t *out, sbx_error_t **err);

/* "300" (seconds), "500ms", "10s", "5m", "2h", "1.5s" -> milliseconds. */
int sbx_parse_duration_ms (const char *s, uint64_t *out, sbx_error_t **err);

/* "1", "0.5", "2.25" -> thousandths of a CPU (millicpus). */
int sbx_parse_cpus (const char *s, uint32_t *out_milli, sbx_error_t **err);

/* A plain non-negative decimal integer, no sign, no spaces. */
int sbx_parse_uint64 (const char *s, uint64_t *out, sbx_error_t **err);

/* Render a byte count the way users write it ("512M", "1G", "1536K"). */
void sbx_format_size (uint64_t bytes, char *buf, unsigned len);

#endif
