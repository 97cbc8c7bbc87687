/* sbx: parsers for the values users type: sizes, durations, CPU counts.
 * Shared by the CLI and the API so both accept exactly the same spellings. */
#ifndef SBX_UTIL_PARSE_H
#define SBX_UTIL_PARSE_H

#include <stdint.h>

#include "util/error.h"

/* "512M", "1G", "64k", "1048576", "1.5G" -> bytes. Suffixes K M G T (powers
   of 1024), optionally followed by "i" and/or "B"; case-insensitive. */
int sbx_parse_size (const char *s, uint64_t *out, sbx_error_t **err);

/* "300" (seconds), "500ms", "10s", "5m", "2h", "1.5s", and components
   largest unit first, each once ("1m30s", "1h30m", "2m0.5s") ->
   milliseconds. */
int sbx_parse_duration_ms (const char *s, uint64_t *out, sbx_error_t **err);

/* "1", "0.5", "2.25" -> thousandths of a CPU (millicpus). */
int sbx_parse_cpus (const char *s, uint32_t *out_milli, sbx_error_t **err);

/* A plain non-negative decimal integer, no sign, no spaces. */
int sbx_parse_uint64 (const char *s, uint64_t *out, sbx_error_t **err);

/* A template name's spelling: [a-z0-9][a-z0-9._-]{0,30} (the store also
   refuses the built-in names, iso/tmpl_store.c). 1 if it is one. */
int sbx_template_name_spelled_ok (const char *name);

/* Render a byte count the way users write it ("512M", "1G", "1536K"). */
void sbx_format_size (uint64_t bytes, char *buf, unsigned len);

/* A bound for a message: exact when it is a whole number of its largest
   unit, else that unit to a tenth, rounded down for a maximum and up for
   a minimum (round_up), so the value shown is one the user may type
   ("23.5G" for a maximum of 24683664K). */
void sbx_format_size_bound (uint64_t bytes, int round_up, char *buf, unsigned len);

/* Milliseconds as the duration parser reads them back ("24h", "1m30s",
   "1500ms" is "1s500ms"). */
void sbx_format_duration_ms (uint64_t ms, char *buf, unsigned len);

/* 1 for a Host header value the port proxy may send in place of the
   client's (E2B's maskRequestHost): 1..SBX_MASK_HOST_MAX bytes of letters,
   digits, `.`, `-`, `:`, `[`, `]` and the placeholder `${PORT}`; nothing
   else, so no header can be smuggled in after it (CR, LF, spaces). */
#define SBX_MASK_HOST_MAX 253
int sbx_mask_host_ok (const char *s);
/* s (sbx_mask_host_ok) with each `${PORT}` replaced by port. */
void sbx_mask_host_render (const char *s, unsigned port, char *buf, unsigned len);

#endif
