/* gsys.c - what the guest's own programs share: console lines, the clock,
 * small kernel files (vmm/image/gsys.h). Compiled into aas-init and
 * aas-agent alike. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vmm/image/gsys.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void
gsys_vline(int fd, size_t cap, const char *head, const char *fmt, va_list ap)
{
	char buf[GSYS_LINE_MAX];
	int n;

	if (cap > sizeof(buf))
		cap = sizeof(buf);
	n = snprintf(buf, cap, "%s", head);
	n += vsnprintf(buf + n, cap - (size_t)n - 1, fmt, ap);
	if (n > (int)cap - 2)
		n = (int)cap - 2;
	buf[n++] = '\n';
	if (write(fd, buf, (size_t)n) < 0) {
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
	snprintf(out, n, "%.*s", (int)strcspn(p, " \n"), p);
}
