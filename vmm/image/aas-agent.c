/*
 * aas-agent: the guest's end of the agent protocol (vmm/image/aproto.h).
 *
 * One process, one poll loop, no threads: it reads frames from aasd on the
 * virtio-serial port, runs commands as the sandbox user in their own
 * session with output streamed back under per-channel windows, and moves
 * files with the user's rights (setfsuid/setfsgid around each file system
 * call). Every queue has a named bound; nothing aasd sends can make it
 * crash or grow: a bad request ends its channel with RESULT{errno}, bytes
 * that are not frames put the reader out of sync until the next AP_SYNC.
 *
 *   aas-agent [--port PATH | --fd N] [--uid N --gid N --home DIR]
 *
 * Started and respawned by aas-init. The host side may come and go: while
 * the port reports POLLHUP (nobody connected) processes keep running, the
 * output of their abandoned channels goes only to their log files, and the
 * port is looked at again every AG_HUP_POLL_MS.
 *
 * This file is the start-up and the poll loop; agent_int.h names the other
 * pieces. Built by build.sh: gcc -std=c17 -static -O2 -I<repo> aas-agent.c
 * agent_*.c aproto.c gsys.c
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/image/agent_int.h"
#include "vmm/image/agent_linger.h"
#include "vmm/image/gsys.h"

#define AG_DEFAULT_PORT "/dev/virtio-ports/" AP_PORT_NAME

struct ag_state ag = { .port_fd = -1, .uid = 1000, .gid = 1000, .home = "/home/sandbox" };

/* poll slots: what each one is. */
enum slot_kind { SL_SIG, SL_PORT, SL_OUT, SL_ERR, SL_IN, SL_LINGER };

struct slot {
	enum slot_kind kind;
	struct ag_chan *c;
};

#define AG_SLOTS (2 + 3 * AG_MAX_CHANNELS + ALINGER_MAX)

static struct pollfd pfd[AG_SLOTS];
static struct slot slots[AG_SLOTS];

void
ag_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gsys_vline(STDERR_FILENO, GSYS_LINE_MAX, "aas-agent: ", fmt, ap);
	va_end(ap);
}

void
ag_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int
ag_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void
usage(void)
{
	ag_say("usage: aas-agent [--port PATH | --fd N] [--uid N --gid N --home DIR]");
	exit(2);
}

static long
number(const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0 || v > max)
		usage();
	return v;
}

/* The options into ag; the port's path (used unless --fd gave one). */
static const char *
parse_args(int argc, char **argv)
{
	const char *port = AG_DEFAULT_PORT;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--port") == 0) {
			port = argv[++i];
		} else if (strcmp(argv[i], "--fd") == 0) {
			ag.port_fd = (int)number(argv[++i], INT_MAX);
		} else if (strcmp(argv[i], "--uid") == 0) {
			ag.uid = (uid_t)number(argv[++i], INT_MAX);
		} else if (strcmp(argv[i], "--gid") == 0) {
			ag.gid = (gid_t)number(argv[++i], INT_MAX);
		} else if (strcmp(argv[i], "--home") == 0) {
			ag.home = argv[++i];
		} else {
			usage();
		}
	}
	if (ag.home[0] != '/')
		usage();
	return port;
}

/* SIGCHLD blocked, and read from a signalfd instead: the descriptor, or
 * -1 with errno. */
static int
open_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* Everything before the loop: signals, the port, the output queue and the
 * first HELLO. The SIGCHLD signalfd, or -1 once it has said why not. */
static int
start_up(const char *port)
{
	int sfd, is_dev = 0;

	umask(0);
	signal(SIGPIPE, SIG_IGN);
	sfd = open_signals();
	if (sfd < 0) {
		ag_say("signalfd: %s", strerror(errno));
		return -1;
	}
	if (ag.port_fd < 0) {
		ag.port_fd = open(port, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (ag.port_fd < 0) {
			ag_say("%s: %s", port, strerror(errno));
			return -1;
		}
		is_dev = 1; /* a device path: reopen is never needed, hup is polled */
	} else if (ag_set_nonblock(ag.port_fd) < 0 || fcntl(ag.port_fd, F_SETFD, FD_CLOEXEC) < 0) {
		ag_say("--fd %d: %s", ag.port_fd, strerror(errno));
		return -1;
	}
	if (ag_out_init() < 0) {
		ag_say("out of memory");
		return -1;
	}
	gsys_read_small("/proc/sys/kernel/random/boot_id", ag.boot_id, sizeof(ag.boot_id));
	ag_test_read();
	/* Tells a connected aasd that whatever it had open here is gone. */
	if (!ag_test_silent())
		ag_send_hello(0);
	ag_say("serving %s (version %d)", is_dev ? port : "a descriptor", AP_VERSION);
	return sfd;
}

/* What needs no descriptor: timers, files producing within their windows,
 * frames already read, the host's return. 1 when a file channel did work
 * (poll must not wait then). */
static int
work_ready(long long now)
{
	int busy = 0;

	ag_exec_timers(now);
	/* Files produce whenever their window and the queue allow. */
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		struct ag_chan *c = ag_chans[i];

		if (c == NULL || c->abandoned)
			continue;
		if (c->kind == AG_CH_GET)
			busy |= ag_get_pump(c);
		else if (c->kind == AG_CH_LIST)
			busy |= ag_list_pump(c);
	}
	ag_port_input();
	ag_test_flood();
	ag_port_recheck(now);
	return busy;
}

/* The poll entries of this round: the signalfd, the port while the host
 * is there, the commands' pipes, the lingering pipes. How many. */
static int
fill_poll(int sfd)
{
	int n = 0;

	pfd[n] = (struct pollfd){ sfd, POLLIN, 0 };
	slots[n++] = (struct slot){ SL_SIG, NULL };
	if (!ag.hup) {
		pfd[n] = (struct pollfd){ ag.port_fd, ag_port_events(), 0 };
		slots[n++] = (struct slot){ SL_PORT, NULL };
	}
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		struct ag_chan *c = ag_chans[i];

		if (c == NULL || c->kind != AG_CH_EXEC)
			continue;
		for (int k = 0; k < 2; k++) {
			/* Without a window only a hang-up is watched for. */
			short ev = ag_exec_may_read(c) ? POLLIN : 0;

			if (c->fd[k] < 0 || (ev == 0 && c->held[k]))
				continue;
			pfd[n] = (struct pollfd){ c->fd[k], ev, 0 };
			slots[n++] = (struct slot){ k == 0 ? SL_OUT : SL_ERR, c };
		}
		if (c->in_fd >= 0 && c->stdin_len > c->stdin_off) {
			pfd[n] = (struct pollfd){ c->in_fd, POLLOUT, 0 };
			slots[n++] = (struct slot){ SL_IN, c };
		}
	}
	for (size_t k = alinger_fill(pfd + n, AG_SLOTS - (size_t)n); k > 0; k--)
		slots[n++] = (struct slot){ SL_LINGER, NULL };
	return n;
}

/* How long poll may wait: until the next timer or look at the port (a
 * minute at most), not at all when busy. */
static int
poll_timeout(long long now, int busy)
{
	long long next = ag_exec_next_timer(), recheck = ag_port_recheck_at();
	int timeout = -1;

	if (recheck > 0 && (next == 0 || recheck < next))
		next = recheck;
	if (next > 0)
		timeout = next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
	if (busy)
		timeout = 0;
	return timeout;
}

/* What poll reported on slot i. */
static void
slot_ready(int i, int sfd)
{
	struct ag_chan *c = slots[i].c;
	short re = pfd[i].revents;
	int w = slots[i].kind == SL_ERR;

	/* A channel may have ended by an earlier slot's work. */
	if (re == 0 || (c != NULL && !ag_chan_live(c)))
		return;
	switch (slots[i].kind) {
	case SL_SIG:
		ag_reap(sfd);
		break;
	case SL_PORT:
		ag_port_ready(re);
		break;
	case SL_OUT:
	case SL_ERR:
		if (c->fd[w] != pfd[i].fd)
			break;
		if (ag_exec_may_read(c))
			ag_exec_read(c, w);
		else if (re & (POLLHUP | POLLERR))
			ag_exec_hangup(c, w);
		break;
	case SL_IN:
		if (c->in_fd == pfd[i].fd)
			ag_exec_write_stdin(c);
		break;
	case SL_LINGER:
		alinger_ready(pfd[i].fd, re);
		break;
	}
}

int
main(int argc, char **argv)
{
	const char *port = parse_args(argc, argv);
	int sfd = start_up(port);

	if (sfd < 0)
		return 1;
	for (;;) {
		long long now = gsys_now_ms();
		int busy = work_ready(now);
		int n = fill_poll(sfd);

		if (poll(pfd, (nfds_t)n, poll_timeout(now, busy)) < 0) {
			if (errno != EINTR)
				ag_say("poll: %s", strerror(errno));
			continue;
		}
		for (int i = 0; i < n; i++)
			slot_ready(i, sfd);
		if (!ag.hup && ag_out_queued() > 0)
			ag_port_write();
		ag_exec_timers(gsys_now_ms());
	}
}
