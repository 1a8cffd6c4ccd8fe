/* gsys.c - what the guest's own programs share: formatted text, console
 * lines, the clock, small kernel files (vmm/image/gsys.h). Compiled into
 * aas-init and aas-agent alike; the one place they call vsnprintf. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vmm/image/gsys.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
gsys_vfmt(char *dst, size_t n, const char *fmt, va_list ap)
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
gsys_fmt(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = gsys_vfmt(dst, n, fmt, ap);
	va_end(ap);
	return rc;
}

void
gsys_vcut(char *dst, size_t n, const char *fmt, va_list ap)
{
	if (gsys_vfmt(dst, n, fmt, ap) < 0) {
		/* a cut copy is what the caller asked for */
	}
}

void
gsys_cut(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gsys_vcut(dst, n, fmt, ap);
	va_end(ap);
}

void
gsys_vline(int fd, size_t cap, const char *head, const char *fmt, va_list ap)
{
	char buf[GSYS_LINE_MAX];
	size_t n;

	if (cap > sizeof(buf))
		cap = sizeof(buf);
	/* The head and the text end a byte early: the newline goes there. */
	gsys_cut(buf, cap - 1, "%s", head);
	n = strlen(buf);
	gsys_vcut(buf + n, cap - 1 - n, fmt, ap);
	n += strlen(buf + n);
	buf[n++] = '\n';
	if (write(fd, buf, n) < 0) {
		/* nowhere left to report to */
	}
}

long long
gsys_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

ssize_t
gsys_read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n < 0) {
		buf[0] = '\0';
		return -1;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return n;
}

void
gsys_cmdline(const char *key, char *out, size_t n)
{
	char line[GSYS_CMDLINE_MAX];
	const char *p;

	out[0] = '\0';
	if (gsys_read_small("/proc/cmdline", line, sizeof(line)) <= 0)
		return;
	p = strstr(line, key);
	if (p == NULL)
		return;
	p += strlen(key);
	if (gsys_fmt(out, n, "%.*s", (int)strcspn(p, " \n"), p) < 0)
		out[0] = '\0';
}
