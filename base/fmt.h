/* fmt.h - formatting into fixed buffers (fmt_): every formatted string in
 * aasd goes through here, so a text that does not fit is either reported
 * to the caller, who must look (fmt_buf), or cut on purpose where a cut
 * copy is what is wanted (fmt_cut: log lines, messages for people). */
#ifndef AAS_FMT_H
#define AAS_FMT_H

#include <stdarg.h>
#include <stddef.h>

#include "base/err.h"

/* Formats into dst (n bytes, n > 0; always NUL-terminated): 0 when the
 * whole text fit, -1 when it did not (dst then holds a cut copy) or the
 * format failed (dst then holds ""). */
int fmt_buf(char *dst, size_t n, const char *fmt, ...) AAS_MUST_CHECK
    __attribute__((format(printf, 3, 4)));
/* fmt_buf with a va_list. */
int fmt_vbuf(char *dst, size_t n, const char *fmt, va_list ap) AAS_MUST_CHECK
    __attribute__((format(printf, 3, 0)));
/* The length the text would have (not counting the NUL), or -1 when the
 * format failed: for sizing a growing buffer before formatting into it. */
int fmt_vlen(const char *fmt, va_list ap) AAS_MUST_CHECK __attribute__((format(printf, 1, 0)));
/* fmt_buf that also fills e (ERR_INVALID, "<what> too long") when the
 * text did not fit: for values built from what a client sent. */
int fmt_err(struct err *e, const char *what, char *dst, size_t n, const char *fmt,
    ...) AAS_MUST_CHECK __attribute__((format(printf, 5, 6)));
/* As fmt_buf, where a cut copy is acceptable: text for people whose end
 * may go (a log line, a message, a label). Never for a path, an id, a
 * name, SQL, a URL or anything parsed again. */
void fmt_cut(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
