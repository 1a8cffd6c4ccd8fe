/* b64.h - standard base64 with padding, RFC 4648 section 4 (b64_): file
 * payloads of the guest agent and the read_file / write_file tools.
 *
 * Decoding is strict: only the 64 letters and '=' as the last one or two
 * characters, length a multiple of 4, zero bits under the padding. No
 * whitespace or line breaks: the guest agent and JSON clients send none,
 * and one accepted form keeps a bad payload from passing as a good one. */
#ifndef AAS_B64_H
#define AAS_B64_H

#include <stddef.h>

#include "base/err.h"

/* Characters that encode n bytes (without the NUL). */
#define B64_ENCODED_LEN(n) (((n) + 2) / 3 * 4)
/* Bytes that n characters decode to at most (padding makes it fewer). */
#define B64_DECODED_MAX(n) ((n) / 4 * 3)
/* The longest input b64_encode takes: its text must fit a size_t. */
#define B64_MAX_RAW ((((size_t)-1) / 4 - 1) * 3)

/* The encoding of `len` bytes as a malloc'd NUL-terminated string; NULL
 * when out of memory or len > B64_MAX_RAW. */
char *b64_encode(const void *in, size_t len);

/* Decodes the `len` characters at `in` into `out`, which holds `cap`
 * bytes, and sets *out_len. Nothing is written past cap. -1 with
 * ERR_INVALID when the text is not base64 as described above, ERR_LIMIT
 * when it decodes to more than cap bytes. */
int b64_decode(const char *in, size_t len, unsigned char *out, size_t cap, size_t *out_len,
    struct err *e) AAS_MUST_CHECK;

#endif
