/* fmt.c - formatting into fixed buffers that says when the text did not
 * fit (see fmt.h); the one place aasd calls vsnprintf for a buffer. */
#include <stdio.h>

#include "base/fmt.h"

int
fmt_vbuf(char *dst, size_t n, const char *fmt, va_list ap)
{
	int len;

	if (dst == NULL || n == 0)
		return -1;
	len = vsnprintf(dst, n, fmt, ap);
	if (len < 0) {
		dst[0] = '\0';
		return -1;
	}
	return (size_t)len < n ? 0 : -1;
}

int
fmt_vlen(const char *fmt, va_list ap)
{
	int len = vsnprintf(NULL, 0, fmt, ap);

	return len < 0 ? -1 : len;
}

int
fmt_buf(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = fmt_vbuf(dst, n, fmt, ap);
	va_end(ap);
	return rc;
}

int
fmt_err(struct err *e, const char *what, char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = fmt_vbuf(dst, n, fmt, ap);
	va_end(ap);
	if (rc < 0)
		err_set(e, ERR_INVALID, "%s too long", what);
	return rc;
}

void
fmt_cut(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_ignore(fmt_vbuf(dst, n, fmt, ap));
	va_end(ap);
}
