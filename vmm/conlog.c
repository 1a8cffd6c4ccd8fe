/* conlog.c - a VM's serial console in a file of bounded size. */
#include "vmm/conlog.h"

#include "base/fcopy.h"
#include "base/fmt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONLOG_COPY_CHUNK (64 * 1024)
#define CONLOG_PATH_MAX 1024

struct conlog {
	int fd;
	size_t max;
	size_t size;
	char path[CONLOG_PATH_MAX];
	char tmp[CONLOG_PATH_MAX + 8];
};

/* Copies [off, off+n) of `from` to the end of `to`. */
static int
copy_range(int from, off_t off, size_t n, int to)
{
	char buf[CONLOG_COPY_CHUNK];

	while (n > 0) {
		size_t want = n < sizeof(buf) ? n : sizeof(buf);
		ssize_t r = pread(from, buf, want, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || fcopy_write(to, buf, (size_t)r) < 0)
			return -1;
		off += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Replaces the file with the newest max/2 bytes of its content followed
 * by data[0..n). On failure the file is emptied, so the bound holds. */
static int
compact(struct conlog *l, const char *data, size_t n, struct err *e)
{
	size_t keep = l->max / 2, from_data = n < keep ? n : keep;
	size_t from_file = keep - from_data;
	int fd;

	if (from_file > l->size)
		from_file = l->size;
	unlink(l->tmp);
	fd = open(l->tmp, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0)
		goto fail;
	if (copy_range(l->fd, (off_t)(l->size - from_file), from_file, fd) < 0 ||
	    fcopy_write(fd, data + (n - from_data), from_data) < 0 || rename(l->tmp, l->path) < 0) {
		close(fd);
		unlink(l->tmp);
		goto fail;
	}
	close(l->fd);
	l->fd = fd;
	l->size = from_file + from_data;
	return 0;
fail:
	err_set(e, ERR_INTERNAL, "console log %s: %s", l->path, strerror(errno));
	if (ftruncate(l->fd, 0) == 0)
		l->size = 0;
	return -1;
}

struct conlog *
conlog_open(const char *path, size_t max, struct err *e)
{
	struct conlog *l;
	struct stat sb;

	if (max < CONLOG_MIN_BYTES || max > CONLOG_MAX_BYTES) {
		err_set(e, ERR_INVALID, "console log: bound %zu out of range", max);
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	l->max = max;
	if (fmt_buf(l->path, sizeof(l->path), "%s", path) < 0 ||
	    fmt_buf(l->tmp, sizeof(l->tmp), "%s.new", path) < 0) {
		err_set(e, ERR_INVALID, "console log: path too long");
		free(l);
		return NULL;
	}
	l->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (l->fd < 0 || fstat(l->fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		err_set(e, ERR_INTERNAL, "console log %s: %s", path,
		    l->fd < 0 ? strerror(errno) : "not a regular file");
		if (l->fd >= 0)
			close(l->fd);
		free(l);
		return NULL;
	}
	l->size = (size_t)sb.st_size;
	if (l->size > l->max && compact(l, "", 0, e) < 0) {
		conlog_close(l);
		return NULL;
	}
	return l;
}

int
conlog_append(struct conlog *l, const void *data, size_t n, struct err *e)
{
	if (n == 0)
		return 0;
	if (l->size <= l->max && n <= l->max - l->size) {
		if (fcopy_write(l->fd, data, n) == 0) {
			l->size += n;
			return 0;
		}
		err_set(e, ERR_INTERNAL, "console log %s: %s", l->path, strerror(errno));
		/* A partial write leaves the size unknown: start again. */
		if (ftruncate(l->fd, 0) == 0)
			l->size = 0;
		return -1;
	}
	return compact(l, data, n, e);
}

size_t
conlog_size(const struct conlog *l)
{
	return l->size;
}

void
conlog_close(struct conlog *l)
{
	if (l == NULL)
		return;
	if (l->fd >= 0)
		close(l->fd);
	free(l);
}

char *
conlog_tail(const char *path, size_t max)
{
	struct stat sb;
	char *buf = NULL;
	size_t len = 0;
	off_t off = 0;
	int fd;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		goto out;
	if (sb.st_size > (off_t)max)
		off = sb.st_size - (off_t)max;
	buf = malloc(max + 1);
	if (buf == NULL)
		goto out;
	while (len < max) {
		ssize_t r = pread(fd, buf + len, max - len, off + (off_t)len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			buf = NULL;
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
out:
	close(fd);
	return buf;
}
