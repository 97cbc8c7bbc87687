/* sbx: Connect protocol envelopes (connect+json streaming bodies).
 *
 * A streaming Connect body is a sequence of envelopes:
 *
 *   [flags u8][length u32, big-endian][length bytes of payload]
 *
 * Flag 0x02 marks the end-stream envelope (the last one of a response);
 * flag 0x01 marks a compressed payload, which is refused: sbx never
 * negotiates a compression. Any other flag bit is refused too.
 *
 * The reader is incremental: feed it the body in whatever chunks it
 * arrives (an MHD upload callback, a socket), and it hands back one whole
 * message at a time. A message longer than the reader's limit is refused
 * from its header, before anything is allocated for it. The writer side is
 * two functions: a header for payloads sent separately, and a whole
 * envelope appended to a buffer.
 *
 *   struct sbx_connect_reader rd;
 *   struct sbx_connect_message m;
 *   sbx_connect_reader_init (&rd, 1 << 20);
 *   while (chunk) {
 *     const void *p = chunk; size_t n = chunk_len;
 *     while ((rc = sbx_connect_read (&rd, &p, &n, &m, &err)) == 1)
 *       handle (m.end_stream, m.data, m.len);
 *     if (rc < 0) fail;
 *   }
 *   if (sbx_connect_reader_finish (&rd, &err) < 0) fail; // cut short
 *   sbx_connect_reader_free (&rd);
 */
#ifndef SBX_SERVER_CONNECT_ENVELOPE_H
#define SBX_SERVER_CONNECT_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/error.h"

#define SBX_CONNECT_FLAG_COMPRESSED 0x01u
#define SBX_CONNECT_FLAG_END_STREAM 0x02u
#define SBX_CONNECT_HEADER_LEN 5

enum sbx_connect_state
{
  SBX_CONNECT_HEADER,  /* collecting the 5 header bytes */
  SBX_CONNECT_PAYLOAD, /* collecting `length` payload bytes */
  SBX_CONNECT_ENDED,   /* the end-stream envelope was read: nothing may follow */
  SBX_CONNECT_FAILED,  /* a protocol error was reported; every later call fails */
};

struct sbx_connect_reader
{
  size_t max_message; /* largest payload accepted, in bytes */
  enum sbx_connect_state state;
  unsigned char header[SBX_CONNECT_HEADER_LEN];
  size_t header_len; /* header bytes collected so far */
  uint8_t flags;     /* of the envelope being read */
  uint32_t length;   /* of the envelope being read */
  struct sbx_buf payload; /* owned */
  uint64_t messages;      /* whole envelopes read so far */
};

/* One decoded envelope. data points into the reader (NUL-terminated, for
   JSON parsers) and stays valid until the next call on the reader. */
struct sbx_connect_message
{
  uint8_t flags;
  int end_stream; /* flags & SBX_CONNECT_FLAG_END_STREAM */
  const char *data;
  size_t len;
};

void sbx_connect_reader_init (struct sbx_connect_reader *rd, size_t max_message);
void sbx_connect_reader_free (struct sbx_connect_reader *rd);

/* Consume bytes from (*data, *len), advancing both, until one envelope is
   complete. Returns 1 with *msg filled (bytes after it are left in *data
   for the next call), 0 when every byte was consumed and the envelope is
   still incomplete, -1 on a protocol error (err set: unknown or
   compression flag, message over the limit, bytes after the end-stream
   envelope); after an error the reader refuses everything. */
int sbx_connect_read (struct sbx_connect_reader *rd, const void **data, size_t *len,
                      struct sbx_connect_message *msg, sbx_error_t **err);

/* At the end of the body: -1 (err set) when an envelope was cut short or
   the reader had failed, else 0. Whether an end-stream envelope was seen is
   sbx_connect_reader_ended (a request body has none; a response must). */
int sbx_connect_reader_finish (const struct sbx_connect_reader *rd, sbx_error_t **err);
int sbx_connect_reader_ended (const struct sbx_connect_reader *rd);

/* The 5-byte header of an envelope carrying len payload bytes. */
void sbx_connect_header (unsigned char out[SBX_CONNECT_HEADER_LEN], uint8_t flags, uint32_t len);

/* Append a whole envelope to out; -1 (err set) when len does not fit the
   32-bit length or flags has bits other than end-stream. */
int sbx_connect_encode (struct sbx_buf *out, uint8_t flags, const void *payload, size_t len,
                        sbx_error_t **err);

#endif
