/* buf.h - a growable byte buffer with a maximum (buf_), for anything
 * whose size a client, a guest or a file decides. An append that would
 * pass the maximum fails and frees the buffer, so a caller never carries
 * on with half a message. The contents stay NUL-terminated. */
#ifndef AAS_BUF_H
#define AAS_BUF_H

#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max; /* most bytes it may hold */
	int failed; /* an append failed: the buffer is empty and stays so */
};

/* An empty buffer that may grow to `max` bytes. */
void buf_init(struct buf *b, size_t max);
/* Frees the contents; the buffer is empty and usable again. NULL is safe. */
void buf_free(struct buf *b);
/* 0, or -1 (too large, out of memory, or an earlier failure). */
int buf_append(struct buf *b, const void *data, size_t n);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Takes the contents (malloc'd, NUL-terminated; NULL when empty or
 * failed) and leaves the buffer empty. */
char *buf_steal(struct buf *b, size_t *len);

#endif
