/* achan_fixture.c - the agent protocol tests' shared set-up
 * (tests/unit/achan_fixture.h). */
#include "tests/unit/achan_fixture.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "vmm/vm.h"

int
afx_events(void)
{
	static int started;
	struct err e;

	if (started)
		return 0;
	signal(SIGPIPE, SIG_IGN);
	err_clear(&e);
	if (vm_events_start(NULL, &e) < 0)
		return -1;
	started = 1;
	return 0;
}

struct achan *
afx_open(int *peer, struct err *e)
{
	struct achan *c;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		err_set(e, ERR_INTERNAL, "socketpair: %s", strerror(errno));
		return NULL;
	}
	c = achan_open_fd(sv[0], e);
	if (c == NULL) {
		close(sv[1]);
		return NULL;
	}
	*peer = sv[1];
	return c;
}

/* Moves exactly n bytes between p and fd, in the direction `out` says. */
static int
move_all(int fd, unsigned char *b, size_t n, int out)
{
	while (n > 0) {
		ssize_t r = out ? write(fd, b, n) : read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

int
afx_readn(int fd, void *p, size_t n)
{
	return move_all(fd, p, n, 0);
}

int
afx_writen(int fd, const void *p, size_t n)
{
	return move_all(fd, (unsigned char *)p, n, 1); /* only read from */
}

int
afx_sink(void *ctx, const void *buf, size_t n, struct err *e)
{
	(void)ctx;
	(void)buf;
	(void)n;
	(void)e;
	return 0;
}

/* Forks bin on fd 3 of its own, with the home and user the image gives
 * it: the pid, or -1. */
static pid_t
agent_spawn(const char *bin, const char *home, int fd)
{
	pid_t pid = fork();

	if (pid == 0) {
		dup2(fd, 3);
		execl(bin, bin, "--fd", "3", "--uid", "65534", "--gid", "65534", "--home", home,
		    (char *)NULL);
		_exit(127);
	}
	return pid;
}

int
afx_agent_start(struct afx_agent *g, const char *bin, const char *tmpl, struct err *e)
{
	int sv[2];

	g->pid = -1;
	g->c = NULL;
	snprintf(g->home, sizeof(g->home), "%s", tmpl);
	if (mkdtemp(g->home) == NULL) {
		err_set(e, ERR_INTERNAL, "mkdtemp %s: %s", tmpl, strerror(errno));
		g->home[0] = '\0';
		return -1;
	}
	if (chown(g->home, 65534, 65534) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		err_set(e, ERR_INTERNAL, "agent home or socketpair: %s", strerror(errno));
		afx_agent_stop(g);
		return -1;
	}
	g->pid = agent_spawn(bin, g->home, sv[1]);
	close(sv[1]);
	if (g->pid < 0) {
		err_set(e, ERR_INTERNAL, "fork: %s", strerror(errno));
		close(sv[0]);
		afx_agent_stop(g);
		return -1;
	}
	g->c = achan_open_fd(sv[0], e);
	if (g->c == NULL || achan_wait_ready(g->c, clock_ms() + 5000, e) < 0) {
		afx_agent_stop(g);
		return -1;
	}
	return 0;
}

void
afx_agent_stop(struct afx_agent *g)
{
	char cmd[128];

	achan_free(g->c);
	g->c = NULL;
	if (g->pid > 0) {
		kill(g->pid, SIGKILL);
		waitpid(g->pid, NULL, 0);
	}
	g->pid = -1;
	if (g->home[0] == '\0')
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g->home);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", g->home);
	g->home[0] = '\0';
}
