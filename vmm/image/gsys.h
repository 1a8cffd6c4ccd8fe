/* gsys.h - what the guest's own programs share (gsys_): aas-init and
 * aas-agent format text, write their console lines, read the clock and
 * read small kernel files the same way. Plain C over Linux calls, no
 * state. */
#ifndef AAS_GSYS_H
#define AAS_GSYS_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#define GSYS_LINE_MAX 300     /* a console line, the newline included */
#define GSYS_CMDLINE_MAX 4096 /* bytes of /proc/cmdline looked at */

/* Formats into dst (n bytes, n > 0; always NUL-terminated): 0 when the
 * whole text fit, -1 when it did not (dst then holds a cut copy) or the
 * format failed (dst then holds ""). The guest's fmt_buf (base/fmt.h),
 * as its programs link nothing of base/. */
int gsys_fmt(char *dst, size_t n, const char *fmt, ...)
    __attribute__((warn_unused_result, format(printf, 3, 4)));
/* gsys_fmt with a va_list. */
int gsys_vfmt(char *dst, size_t n, const char *fmt, va_list ap)
    __attribute__((warn_unused_result, format(printf, 3, 0)));
/* As gsys_fmt, where a cut copy is acceptable: text for people whose end
 * may go (a console line, a message to aasd). Never for a path, a name
 * or anything parsed again. */
void gsys_cut(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* gsys_cut with a va_list. */
void gsys_vcut(char *dst, size_t n, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Writes `head`, fmt with ap and a newline to fd as one line, cut to fit
 * `cap` bytes (at most GSYS_LINE_MAX); a failed write is ignored, as
 * there is nowhere left to report it. */
void gsys_vline(int fd, size_t cap, const char *head, const char *fmt, va_list ap);

/* The monotonic clock in milliseconds. */
long long gsys_now_ms(void);

/* One read of at most cap - 1 bytes of the file at path into buf, without
 * the newlines and spaces that end it, and NUL-terminated. The length, or
 * -1 (buf then holds "") when the file cannot be opened or read. */
ssize_t gsys_read_small(const char *path, char *buf, size_t cap);

/* The value of `key` (say "aas.net=") on the kernel command line, up to
 * the next space or newline, into out; "" when it is not there or does
 * not fit n. */
void gsys_cmdline(const char *key, char *out, size_t n);

#endif
