/* br_b64.h - standard base64 with padding (br_b64_). */
#ifndef AAS_BR_B64_H
#define AAS_BR_B64_H

#include <stddef.h>

/* A NUL-terminated encoding; NULL on OOM. */
char *br_b64_encode(const unsigned char *in, size_t len);
/* The bytes (NUL-terminated for convenience); NULL when the text is not
 * canonical padded base64 (length a multiple of 4) or on OOM. */
unsigned char *br_b64_decode(const char *in, size_t len, size_t *out_len);

#endif
