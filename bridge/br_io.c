/* br_io.c - stdio framing for MCP. */
#include "bridge/br_io.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BR_IN_CHUNK 65536

struct br_in {
	int fd;
	size_t max;
	char *buf;
	size_t cap, start, end; /* unread bytes are buf[start..end) */
	size_t scanned;         /* bytes after start known to hold no newline */
	int skipping;           /* inside an overlong line */
	int eof;
};

struct br_in *
br_in_new(int fd, size_t max_line)
{
	struct br_in *in = calloc(1, sizeof(*in));

	if (in == NULL)
		return NULL;
	in->fd = fd;
	in->max = max_line;
	in->cap = BR_IN_CHUNK;
	in->buf = malloc(in->cap);
	if (in->buf == NULL) {
		free(in);
		return NULL;
	}
	return in;
}

void
br_in_free(struct br_in *in)
{
	if (in == NULL)
		return;
	free(in->buf);
	free(in);
}

/* Room for one more read: unread bytes move to the front, and the buffer
 * grows up to the line limit. */
static int
make_room(struct br_in *in)
{
	if (in->start > 0) {
		memmove(in->buf, in->buf + in->start, in->end - in->start);
		in->end -= in->start;
		in->start = 0;
	}
	if (in->cap - in->end >= BR_IN_CHUNK / 4 || in->cap > in->max)
		return 0;
	size_t cap = in->cap * 2 > in->max + 1 ? in->max + 1 : in->cap * 2;
	if (cap <= in->cap)
		return 0;
	char *nb = realloc(in->buf, cap);
	if (nb == NULL)
		return -1;
	in->buf = nb;
	in->cap = cap;
	return 0;
}

enum br_in_status
br_in_next(struct br_in *in, char **line, size_t *len)
{
	for (;;) {
		char *nl = memchr(in->buf + in->start + in->scanned, '\n',
		    in->end - in->start - in->scanned);
		if (nl != NULL) {
			size_t n = (size_t)(nl - (in->buf + in->start));
			char *l = in->buf + in->start;
			int was_skipping = in->skipping;
			in->start += n + 1;
			in->scanned = 0;
			in->skipping = 0;
			if (was_skipping || n > in->max)
				return BR_IN_TOO_LONG;
			*nl = '\0';
			*line = l;
			*len = n;
			return BR_IN_LINE;
		}
		in->scanned = in->end - in->start;
		if (in->scanned > in->max) {
			/* Drop what we have of an overlong line and keep looking
			 * for its end. */
			in->skipping = 1;
			in->start = in->end;
			in->scanned = 0;
		}
		if (in->eof) {
			if (in->end == in->start && !in->skipping)
				return BR_IN_EOF;
			if (in->skipping) {
				in->skipping = 0;
				in->start = in->end;
				return BR_IN_TOO_LONG;
			}
			/* the last line, unterminated */
			if (make_room(in) < 0 || in->end >= in->cap)
				return BR_IN_ERROR;
			in->buf[in->end] = '\0';
			*line = in->buf + in->start;
			*len = in->end - in->start;
			in->start = in->end;
			in->scanned = 0;
			return BR_IN_LINE;
		}
		if (make_room(in) < 0)
			return BR_IN_ERROR;
		if (in->end == in->cap) {
			/* full at the limit: the line is too long */
			in->skipping = 1;
			in->start = in->end = 0;
			in->scanned = 0;
			continue;
		}
		ssize_t r = read(in->fd, in->buf + in->end, in->cap - in->end);
		if (r < 0) {
			if (errno == EINTR)
				return BR_IN_INTR;
			return BR_IN_ERROR;
		}
		if (r == 0)
			in->eof = 1;
		in->end += (size_t)r;
	}
}

struct br_out {
	int fd;
	int broken;
	pthread_mutex_t lock;
};

struct br_out *
br_out_new(int fd)
{
	struct br_out *out = calloc(1, sizeof(*out));

	if (out == NULL)
		return NULL;
	out->fd = fd;
	pthread_mutex_init(&out->lock, NULL);
	return out;
}

void
br_out_free(struct br_out *out)
{
	if (out == NULL)
		return;
	pthread_mutex_destroy(&out->lock);
	free(out);
}

static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int
br_out_send(struct br_out *out, const json_t *msg)
{
	/* JSON_COMPACT never emits a raw newline: strings escape theirs. */
	char *text = json_dumps(msg, JSON_COMPACT);
	size_t n;
	int rc = -1;

	if (text == NULL)
		return -1;
	n = strlen(text);
	pthread_mutex_lock(&out->lock);
	if (!out->broken) {
		text[n] = '\n'; /* replaces the NUL; the length is known */
		rc = write_all(out->fd, text, n + 1);
		if (rc < 0)
			out->broken = 1;
	}
	pthread_mutex_unlock(&out->lock);
	free(text);
	return rc;
}
