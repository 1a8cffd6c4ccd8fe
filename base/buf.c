/* buf.c - bounded growable buffers. */
#include "base/buf.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

#define BUF_FIRST 256

void
buf_init(struct buf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
}

void
buf_free(struct buf *b)
{
	if (b == NULL)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static int
fail(struct buf *b)
{
	buf_free(b);
	b->failed = 1;
	return -1;
}

/* Room for `need` more bytes and a NUL. */
static int
reserve(struct buf *b, size_t need)
{
	size_t want, cap;
	char *p;

	if (b->failed || need > b->max - b->len)
		return fail(b);
	want = b->len + need + 1;
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : BUF_FIRST;
	while (cap < want)
		cap = cap > (size_t)-1 / 2 ? want : cap * 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	if ((p = realloc(b->data, cap)) == NULL)
		return fail(b);
	b->data = p;
	b->cap = cap;
	return 0;
}

int
buf_append(struct buf *b, const void *data, size_t n)
{
	if (reserve(b, n) < 0)
		return -1;
	if (n > 0)
		memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = fmt_vlen(fmt, ap);
	va_end(ap);
	if (n < 0 || reserve(b, (size_t)n) < 0)
		return n < 0 ? fail(b) : -1;
	va_start(ap, fmt);
	rc = fmt_vbuf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return fail(b);
	b->len += (size_t)n;
	return 0;
}

char *
buf_steal(struct buf *b, size_t *len)
{
	char *p = b->failed ? NULL : b->data;

	if (len)
		*len = p ? b->len : 0;
	if (p == NULL)
		free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}
