/* utf8.h - UTF-8 text: arbitrary bytes made safe for JSON text, and measured (utf8_). */
#ifndef AAS_UTF8_H
#define AAS_UTF8_H

#include <stddef.h>

/* A NUL-terminated copy of `in` in which every invalid UTF-8 sequence (and
 * NUL) is replaced by U+FFFD. *replaced counts replacements. NULL on OOM. */
char *utf8_sanitize(const char *in, size_t len, size_t *out_len, size_t *replaced);

/* The length of `in` without a multi-byte character cut off at its end
 * (a lead byte followed by fewer continuation bytes than it announces),
 * so that the rest can follow with the next piece: at most 3 bytes less
 * than len. Invalid bytes are not judged here (utf8_sanitize does). */
size_t utf8_whole_len(const char *in, size_t len);

/* Characters (code points, not bytes) in the `len` bytes of valid UTF-8
 * text at s: its lead bytes. */
size_t utf8_chars(const char *s, size_t len);

#endif
