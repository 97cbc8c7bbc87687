/* sbx: Connect protocol envelopes (see connect_envelope.h). */
#include "server/connect_envelope.h"

#include <string.h>

#define KNOWN_FLAGS (SBX_CONNECT_FLAG_COMPRESSED | SBX_CONNECT_FLAG_END_STREAM)

void
sbx_connect_reader_init (struct sbx_connect_reader *rd, size_t max_message)
{
  memset (rd, 0, sizeof *rd);
  rd->max_message = max_message;
  rd->state = SBX_CONNECT_HEADER;
}

void
sbx_connect_reader_free (struct sbx_connect_reader *rd)
{
  sbx_buf_free (&rd->payload);
}

static int
fail (struct sbx_connect_reader *rd)
{
  rd->state = SBX_CONNECT_FAILED;
  sbx_buf_free (&rd->payload);
  return -1;
}

/* The header is complete: decide on it before any payload is stored. */
static int
check_header (struct sbx_connect_reader *rd, sbx_error_t **err)
{
  const unsigned char *h = rd->header;

  rd->flags = h[0];
  rd->length = (uint32_t) h[1] << 24 | (uint32_t) h[2] << 16 | (uint32_t) h[3] << 8 | h[4];
  if (rd->flags & ~KNOWN_FLAGS)
    return sbx_err (err, SBX_E_INVALID, "Connect envelope %llu has unknown flags 0x%02x",
                    (unsigned long long) rd->messages, rd->flags);
  /* connect-web refuses it too when nothing was negotiated; so do we. */
  if (rd->flags & SBX_CONNECT_FLAG_COMPRESSED)
    return sbx_err (err, SBX_E_INVALID,
                    "Connect envelope %llu is compressed, but no compression was negotiated",
                    (unsigned long long) rd->messages);
  if (rd->length > rd->max_message)
    return sbx_err (err, SBX_E_TOO_LARGE,
                    "Connect message of %lu bytes is larger than the limit of %zu",
                    (unsigned long) rd->length, rd->max_message);
  return 0;
}

int
sbx_connect_read (struct sbx_connect_reader *rd, const void **data, size_t *len,
                  struct sbx_connect_message *msg, sbx_error_t **err)
{
  const unsigned char *p = *data;
  size_t n = *len;

  switch (rd->state)
    {
    case SBX_CONNECT_FAILED:
      return sbx_err (err, SBX_E_INVALID, "the Connect stream already failed");
    case SBX_CONNECT_ENDED:
      if (n == 0)
        return 0;
      sbx_err (err, SBX_E_INVALID, "data after the Connect end-stream envelope");
      return fail (rd);
    case SBX_CONNECT_HEADER:
    case SBX_CONNECT_PAYLOAD:
    default:
      break;
    }
  if (rd->state == SBX_CONNECT_HEADER)
    {
      size_t take = SBX_CONNECT_HEADER_LEN - rd->header_len;
      if (take > n)
        take = n;
      if (take)
        memcpy (rd->header + rd->header_len, p, take);
      rd->header_len += take;
      p += take;
      n -= take;
      *data = p;
      *len = n;
      if (rd->header_len < SBX_CONNECT_HEADER_LEN)
        return 0;
      if (check_header (rd, err) < 0)
        return fail (rd);
      sbx_buf_reset (&rd->payload);
      rd->state = SBX_CONNECT_PAYLOAD;
    }
  {
    size_t want = rd->length - rd->payload.len, take = want < n ? want : n;
    sbx_buf_append (&rd->payload, p, take);
    *data = p + take;
    *len = n - take;
    if (rd->payload.len < rd->length)
      return 0;
  }
  msg->flags = rd->flags;
  msg->end_stream = (rd->flags & SBX_CONNECT_FLAG_END_STREAM) != 0;
  msg->data = rd->payload.data ? rd->payload.data : "";
  msg->len = rd->payload.len;
  rd->messages++;
  rd->header_len = 0;
  rd->state = msg->end_stream ? SBX_CONNECT_ENDED : SBX_CONNECT_HEADER;
  return 1;
}

int
sbx_connect_reader_finish (const struct sbx_connect_reader *rd, sbx_error_t **err)
{
  switch (rd->state)
    {
    case SBX_CONNECT_FAILED:
      return sbx_err (err, SBX_E_INVALID, "the Connect stream already failed");
    case SBX_CONNECT_PAYLOAD:
      return sbx_err (err, SBX_E_INVALID,
                      "the body ended inside a Connect message (%zu of %lu bytes)",
                      rd->payload.len, (unsigned long) rd->length);
    case SBX_CONNECT_HEADER:
      if (rd->header_len > 0)
        return sbx_err (err, SBX_E_INVALID,
                        "the body ended inside a Connect envelope header (%zu of 5 bytes)",
                        rd->header_len);
      return 0;
    case SBX_CONNECT_ENDED:
    default:
      return 0;
    }
}

int
sbx_connect_reader_ended (const struct sbx_connect_reader *rd)
{
  return rd->state == SBX_CONNECT_ENDED;
}

void
sbx_connect_header (unsigned char out[SBX_CONNECT_HEADER_LEN], uint8_t flags, uint32_t len)
{
  out[0] = flags;
  out[1] = (unsigned char) (len >> 24);
  out[2] = (unsigned char) (len >> 16);
  out[3] = (unsigned char) (len >> 8);
  out[4] = (unsigned char) len;
}

int
sbx_connect_encode (struct sbx_buf *out, uint8_t flags, const void *payload, size_t len,
                    sbx_error_t **err)
{
  unsigned char h[SBX_CONNECT_HEADER_LEN];

  if (len > UINT32_MAX)
    return sbx_err (err, SBX_E_TOO_LARGE, "a Connect message holds at most 4 GiB");
  /* We never compress, and a reader refuses unknown bits. */
  if (flags & ~SBX_CONNECT_FLAG_END_STREAM)
    return sbx_err (err, SBX_E_INVALID, "Connect flags 0x%02x are not ours to send", flags);
  sbx_connect_header (h, flags, (uint32_t) len);
  sbx_buf_append (out, h, sizeof h);
  sbx_buf_append (out, payload, len);
  return 0;
}
