/* fcopy.c - file copies for saved VM state and disks. */
#include "base/fcopy.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define FCOPY_CHUNK (1 << 16)

int
fcopy_write(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int
fcopy_fd(int in, int out)
{
	char buf[FCOPY_CHUNK];

	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);

		if (n == 0)
			return 0;
		if (n > 0 || errno == EINTR)
			continue;
		/* Not across these file systems: the plain way. */
		if (errno != EXDEV && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINVAL)
			return -1;
		break;
	}
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -1 : 0;
		if (fcopy_write(out, buf, (size_t)n) < 0)
			return -1;
	}
}

int
fcopy_path(const char *src, const char *dst, mode_t mode, struct err *e)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;

	if (in < 0) {
		err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL, "cannot open %s: %s",
		    src, strerror(errno));
		return -1;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (out < 0) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", dst, strerror(errno));
		goto out;
	}
	if (fcopy_fd(in, out) < 0 || close(out) < 0) {
		err_set(e, ERR_INTERNAL, "cannot copy %s to %s: %s", src, dst, strerror(errno));
		out = -1;
		unlink(dst);
		goto out;
	}
	out = -1;
	rc = 0;
out:
	if (out >= 0)
		close(out);
	close(in);
	return rc;
}
