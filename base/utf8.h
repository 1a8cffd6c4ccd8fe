/* utf8.h - making arbitrary bytes safe for JSON text (utf8_). */
#ifndef AAS_UTF8_H
#define AAS_UTF8_H

#include <stddef.h>

/* A NUL-terminated copy of `in` in which every invalid UTF-8 sequence (and
 * NUL) is replaced by U+FFFD. *replaced counts replacements. NULL on OOM. */
char *utf8_sanitize(const char *in, size_t len, size_t *out_len, size_t *replaced);

#endif
