/* agent_linger.c - output pipes a finished command left open, drained into
 * its log (agent_linger.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vmm/image/agent_linger.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define ALINGER_READ (64 * 1024)

struct alinger {
	int fd, log_fd;
	uint64_t kept, max;
	uint64_t seq; /* order of arrival: the oldest goes first when full */
};

static struct alinger pipes[ALINGER_MAX];
static size_t npipes;
static uint64_t next_seq;
static unsigned char rbuf[ALINGER_READ];

static void
drop(size_t i)
{
	close(pipes[i].fd);
	if (pipes[i].log_fd >= 0)
		close(pipes[i].log_fd);
	pipes[i] = pipes[--npipes];
}

void
alinger_add(int fd, int log_fd, uint64_t kept, uint64_t max)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	if (npipes == ALINGER_MAX) {
		size_t oldest = 0;

		for (size_t i = 1; i < npipes; i++)
			if (pipes[i].seq < pipes[oldest].seq)
				oldest = i;
		drop(oldest);
	}
	pipes[npipes++] = (struct alinger){ fd, log_fd, kept, max, next_seq++ };
}

size_t
alinger_fill(struct pollfd *pfd, size_t room)
{
	size_t n = npipes < room ? npipes : room;

	for (size_t i = 0; i < n; i++)
		pfd[i] = (struct pollfd){ pipes[i].fd, POLLIN, 0 };
	return n;
}

/* Appends what the log's bound leaves room for; a log that cannot be
 * written is closed and the rest dropped. */
static void
log_append(struct alinger *l, const unsigned char *p, size_t n)
{
	if (l->log_fd < 0)
		return;
	if (l->max > 0)
		n = l->kept >= l->max ? 0 : (size_t)(n < l->max - l->kept ? n : l->max - l->kept);
	while (n > 0) {
		ssize_t w = write(l->log_fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(l->log_fd);
			l->log_fd = -1;
			return;
		}
		l->kept += (uint64_t)w;
		p += w;
		n -= (size_t)w;
	}
}

void
alinger_ready(int fd, short revents)
{
	size_t i, got = 0;

	for (i = 0; i < npipes && pipes[i].fd != fd; i++)
		;
	if (i == npipes || revents == 0)
		return;
	while (got < ALINGER_BURST) {
		ssize_t r = read(fd, rbuf, sizeof(rbuf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			/* every writer is gone (or the pipe failed) */
			drop(i);
			return;
		}
		log_append(&pipes[i], rbuf, (size_t)r);
		got += (size_t)r;
	}
}

size_t
alinger_count(void)
{
	return npipes;
}
