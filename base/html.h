/* html.h - putting untrusted text into HTML (html_): escaping for text
 * and quoted attribute values, and the check for a link's target. */
#ifndef AAS_HTML_H
#define AAS_HTML_H

#include <stddef.h>

#include "base/buf.h"

/* Appends the NUL-terminated `s` (NULL: nothing) to `b` with & < > " '
 * written as entities, so it is safe as HTML text and inside a double-
 * or single-quoted attribute value. Other bytes, UTF-8 included, pass
 * unchanged. buf_append's result: 0, or -1 (the buffer has failed). */
int html_escape(struct buf *b, const char *s);
/* html_escape of the `n` bytes at `s`. */
int html_escape_n(struct buf *b, const char *s, size_t n);

/* 1 when `url` is safe as an href (then escaped with html_escape): a path
 * starting with "/" but not "//" or "/\" (both mean another host to a
 * browser), or an absolute "http://" or "https://" URL (scheme in any
 * case); and no control character, space, quote, backquote, backslash,
 * '<' or '>' anywhere. 0 otherwise, for "javascript:" and any other
 * scheme among them. */
int html_attr_url_ok(const char *url);

#endif
