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
 * Built by build.sh: gcc -std=c17 -static -O2 -I<repo> aas-agent.c aproto.c
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "vmm/image/agent_linger.h"
#include "vmm/image/agent_tree.h"
#include "vmm/image/aproto.h"

#define AG_DEFAULT_PORT "/dev/virtio-ports/" AP_PORT_NAME
#define AG_MAX_CHANNELS 256    /* open operations, abandoned ones included */
#define AG_GROUPS_MAX 1024     /* recent process groups SIGNAL{pid} may reach */
#define AG_OUT_SOFT (1u << 20) /* queued output above which nothing new is read */
/* Queue bound: the soft limit, one data frame, and the small control
 * frames (RESULT, EXIT, HELLO) a round of the loop can add. */
#define AG_OUT_CAP (AG_OUT_SOFT + 4 * (AP_HDR_SIZE + AP_MAX_PAYLOAD))
#define AG_IN_CAP (2 * (AP_HDR_SIZE + AP_MAX_PAYLOAD))
#define AG_HUP_POLL_MS 200
#define AG_PTY_MAX_DIM 10000
#define AG_ENV_DEFAULTS 8
#define AG_MSG_MAX 512
/* Debian's bash-static: the same bash, linked statically. */
#define AG_STATIC_BASH "/bin/bash-static"
/* Log bytes a lingering pipe may add to a log that has no bound of its own. */
#define AG_LINGER_LOG_MORE (64u << 20)

static int port_fd = -1;
static int port_is_dev; /* a device path: reopen is never needed, hup is polled */
static int hup;         /* the host is not connected */
static long long hup_check_at;
static uid_t user_uid = 1000;
static gid_t user_gid = 1000;
static const char *user_home = "/home/sandbox";
static char boot_id[64];

static unsigned char in_buf[AG_IN_CAP];
static size_t in_len;
static int in_sync;
static unsigned long long in_scanned; /* bytes skipped looking for AP_SYNC */

static unsigned char *out_buf;
static size_t out_head, out_len; /* queued bytes are [out_head, out_len) */

static unsigned char scratch[AP_MAX_PAYLOAD];
static struct ap_field fields[AP_MAX_FIELDS];

static pid_t groups[AG_GROUPS_MAX];
static size_t groups_next;

enum ch_kind { CH_EXEC = 1, CH_PUT, CH_GET, CH_LIST };

struct chan {
	uint32_t id;
	enum ch_kind kind;
	int abandoned; /* nothing more is sent; a process drains to its logs */
	int root;      /* AP_F_ROOT: as root */
	uint64_t window;
	/* exec */
	pid_t pid;
	int fd[2];   /* stdout, stderr (PTY: the master, -1) */
	int held[2]; /* writer gone, bytes left in the pipe, no window for them */
	int in_fd;   /* stdin pipe or a copy of the PTY master; -1 */
	int pty;     /* master in fd[0] */
	int detach;
	int exited, status, timed_out;
	long long term_at, kill_at, drain_at; /* 0: not armed */
	unsigned char *stdin_buf;             /* at most AP_STDIN_MAX */
	size_t stdin_off, stdin_len;
	int stdin_fin;
	int log_fd[2];
	uint64_t log_kept[2], log_seen[2], log_max;
	char *exit_file;
	/* files */
	int file_fd;
	struct atree *tree;       /* PUT with AP_F_TREE: the archive being unpacked */
	uint64_t pos, left, size; /* GET: next offset, bytes left, whole size; PUT: pos, written */
	int to_end;
	DIR *dir;
};

static struct chan *chans[AG_MAX_CHANNELS];

static void
say(const char *fmt, ...)
{
	char buf[300];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "aas-agent: ");

	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0) {
		/* nowhere to report to */
	}
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- identity for file system calls ---- */

/* File system calls after this act as the sandbox user (or root). The
 * capability to override permissions goes with fsuid 0. */
static void
fs_as(int root)
{
	if (root)
		return;
	if (setgroups(1, &user_gid) < 0)
		say("setgroups: %s", strerror(errno));
	setfsgid(user_gid);
	setfsuid(user_uid);
}

static void
fs_root(void)
{
	setfsuid(0);
	setfsgid(0);
	if (setgroups(0, NULL) < 0)
		say("setgroups: %s", strerror(errno));
}

/* ---- output queue ---- */

static size_t
out_queued(void)
{
	return out_len - out_head;
}

/* Room for n contiguous bytes at the end of the queue; NULL when the
 * queue is at its bound. */
static unsigned char *
out_room(size_t n)
{
	if (out_len + n > AG_OUT_CAP && out_head > 0) {
		memmove(out_buf, out_buf + out_head, out_len - out_head);
		out_len -= out_head;
		out_head = 0;
	}
	if (out_len + n > AG_OUT_CAP)
		return NULL;
	return out_buf + out_len;
}

static void
out_drop(void)
{
	out_head = out_len = 0;
}

static int
send_frame(uint16_t type, uint16_t flags, uint32_t chan, const void *p, size_t n)
{
	struct ap_hdr h = { (uint32_t)n, type, flags, chan };
	unsigned char *o;

	if (hup)
		return 0; /* nobody to send to */
	o = out_room(AP_HDR_SIZE + n);
	if (o == NULL) {
		say("output queue full; frame type %u dropped", type);
		return -1;
	}
	ap_hdr_put(o, &h);
	if (n > 0)
		memcpy(o + AP_HDR_SIZE, p, n);
	out_len += AP_HDR_SIZE + n;
	return 0;
}

static void
send_result(uint32_t chan, int err, const char *fmt, ...)
{
	struct ap_out o = { scratch, 0, 0 };
	char msg[AG_MSG_MAX];
	va_list ap;

	if (err != 0) {
		ap_put_u32(&o, AP_TAG_ERRNO, (uint32_t)err);
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		ap_put_str(&o, AP_TAG_MESSAGE, msg);
	}
	send_frame(AP_T_RESULT, 0, chan, o.buf, o.len);
}

static void
send_hello(uint64_t nonce)
{
	struct ap_out o = { scratch, 0, 0 };
	unsigned char *p;

	if (hup)
		return;
	p = out_room(AP_SYNC_LEN);
	if (p == NULL)
		return;
	memcpy(p, AP_SYNC, AP_SYNC_LEN);
	out_len += AP_SYNC_LEN;
	ap_put_u64(&o, AP_TAG_NONCE, nonce);
	ap_put_u32(&o, AP_TAG_VERSION, AP_VERSION);
	ap_put_str(&o, AP_TAG_BOOT_ID, boot_id);
	send_frame(AP_T_HELLO, 0, 0, o.buf, o.len);
}

/* ---- channels ---- */

static struct chan *
chan_find(uint32_t id)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++)
		if (chans[i] != NULL && !chans[i]->abandoned && chans[i]->id == id)
			return chans[i];
	return NULL;
}

static struct chan *
chan_new(uint32_t id, enum ch_kind kind)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		struct chan *c;

		if (chans[i] != NULL)
			continue;
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			return NULL;
		c->id = id;
		c->kind = kind;
		c->window = AP_WINDOW_INIT;
		c->fd[0] = c->fd[1] = c->in_fd = c->file_fd = -1;
		c->log_fd[0] = c->log_fd[1] = -1;
		c->pid = -1;
		chans[i] = c;
		return c;
	}
	return NULL;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void
chan_free(struct chan *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++)
		if (chans[i] == c)
			chans[i] = NULL;
	if (c->tree != NULL) {
		/* What was unpacked and not moved into place goes. */
		fs_as(c->root);
		atree_free(c->tree);
		fs_root();
	}
	close_fd(&c->fd[0]);
	close_fd(&c->fd[1]);
	close_fd(&c->in_fd);
	close_fd(&c->log_fd[0]);
	close_fd(&c->log_fd[1]);
	close_fd(&c->file_fd);
	if (c->dir != NULL)
		closedir(c->dir);
	free(c->stdin_buf);
	free(c->exit_file);
	free(c);
}

static int group_kill(pid_t pgid, int sig);

/* Nothing more goes to aasd on c: a file operation ends, a process runs
 * on with its output drained into its logs, a terminal is hung up. */
static void
chan_abandon(struct chan *c)
{
	if (c->kind != CH_EXEC) {
		chan_free(c);
		return;
	}
	c->abandoned = 1;
	if (c->pty && !c->exited) {
		/* A terminal nobody reads is gone: hang its shell up (closing
		 * the master alone signals only the foreground group). */
		(void)group_kill(c->pid, SIGHUP);
		(void)group_kill(c->pid, SIGCONT);
		close_fd(&c->fd[0]);
	}
	close_fd(&c->in_fd);
	free(c->stdin_buf);
	c->stdin_buf = NULL;
	c->stdin_len = c->stdin_off = 0;
}

static void
abandon_all(void)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++)
		if (chans[i] != NULL && !chans[i]->abandoned)
			chan_abandon(chans[i]);
}

/* A request on c was refused after it started: tell aasd, then forget. */
static void
chan_fail(struct chan *c, int err, const char *msg)
{
	send_result(c->id, err, "%s", msg);
	chan_abandon(c);
}

/* ---- port ---- */

static void
port_reset(void)
{
	in_len = 0;
	in_sync = 0;
	in_scanned = 0;
	out_drop();
}

static void
enter_hup(void)
{
	if (!hup)
		say("host disconnected");
	hup = 1;
	hup_check_at = now_ms() + AG_HUP_POLL_MS;
	port_reset();
	abandon_all();
}

static void
port_write(void)
{
	while (out_queued() > 0) {
		ssize_t w = write(port_fd, out_buf + out_head, out_queued());

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				enter_hup();
			return;
		}
		out_head += (size_t)w;
	}
	out_head = out_len = 0;
}

/* ---- processes ---- */

static void
group_remember(pid_t pgid)
{
	groups[groups_next] = pgid;
	groups_next = (groups_next + 1) % AG_GROUPS_MAX;
}

static int
group_known(pid_t pgid)
{
	for (size_t i = 0; i < AG_GROUPS_MAX; i++)
		if (groups[i] == pgid && pgid > 1)
			return 1;
	return 0;
}

/* Signals the group of a process the agent started (never 0, 1 or -1). */
static int
group_kill(pid_t pgid, int sig)
{
	if (pgid <= 1) {
		errno = ESRCH;
		return -1;
	}
	return kill(-pgid, sig);
}

static int
valid_signal(uint32_t sig)
{
	return sig >= 1 && sig <= 64;
}

static void
log_write(struct chan *c, int which, const unsigned char *p, size_t n)
{
	size_t keep = n;

	if (c->log_fd[which] < 0)
		return;
	c->log_seen[which] += n;
	if (c->log_max > 0) {
		uint64_t room = c->log_kept[which] >= c->log_max ? 0 :
								   c->log_max - c->log_kept[which];
		if (keep > room)
			keep = (size_t)room;
	}
	while (keep > 0) {
		ssize_t w = write(c->log_fd[which], p, keep);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			say("log write: %s", strerror(errno));
			close_fd(&c->log_fd[which]);
			return;
		}
		c->log_kept[which] += (uint64_t)w;
		p += w;
		keep -= (size_t)w;
	}
}

static int
exit_code(const struct chan *c, int *sig)
{
	*sig = 0;
	if (c->timed_out)
		return 124;
	if (WIFEXITED(c->status))
		return WEXITSTATUS(c->status);
	if (WIFSIGNALED(c->status)) {
		*sig = WTERMSIG(c->status);
		return 128 + *sig;
	}
	return 255;
}

/* Pipes of c that something the command started still holds go on being
 * drained into its logs (agent_linger.h); a terminal's master is closed,
 * which hangs up what is left on it. */
static void
exec_linger(struct chan *c)
{
	for (int i = 0; i < 2; i++) {
		uint64_t max = c->log_max ? c->log_max : c->log_kept[i] + AG_LINGER_LOG_MORE;

		if (c->fd[i] < 0 || c->pty) {
			close_fd(&c->fd[i]);
			continue;
		}
		alinger_add(c->fd[i], c->log_fd[i], c->log_kept[i], max);
		c->fd[i] = -1;
		c->log_fd[i] = -1;
	}
}

/* The process has ended and its output is drained (or given up on):
 * exit file, EXIT, and the channel is gone. */
static void
exec_finish(struct chan *c)
{
	int sig, code = exit_code(c, &sig);

	if (!c->abandoned && !c->detach) {
		/* Pipes still open were given up on (AP_DRAIN_MS). */
		for (int i = 0; i < 2; i++)
			if (c->fd[i] >= 0)
				send_frame(i == 0 ? AP_T_STDOUT : AP_T_STDERR, AP_F_FIN, c->id,
				    NULL, 0);
	}
	exec_linger(c);
	if (c->exit_file != NULL) {
		int fd = open(c->exit_file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		    0644);
		char line[32];
		int n = snprintf(line, sizeof(line), "%d %d\n", code, sig);

		if (fd < 0 || write(fd, line, (size_t)n) != n)
			say("exit file %s: %s", c->exit_file, strerror(errno));
		if (fd >= 0) {
			if (fchown(fd, c->root ? 0 : user_uid, c->root ? 0 : user_gid) < 0) {
				/* ownership is a courtesy */
			}
			close(fd);
		}
	}
	if (!c->abandoned) {
		struct ap_out o = { scratch, 0, 0 };

		ap_put_u32(&o, AP_TAG_CODE, (uint32_t)code);
		ap_put_u32(&o, AP_TAG_SIGNAL, (uint32_t)sig);
		send_frame(AP_T_EXIT, 0, c->id, o.buf, o.len);
	}
	chan_free(c);
}

static int
exec_done(const struct chan *c)
{
	return c->exited && c->fd[0] < 0 && c->fd[1] < 0;
}

/* Whether output of c may be read now. */
static int
exec_may_read(const struct chan *c)
{
	if (c->abandoned || c->detach || hup)
		return 1;
	return c->window > 0 && out_queued() < AG_OUT_SOFT;
}

static void
exec_eof(struct chan *c, int i)
{
	if (!c->abandoned && !c->detach && !hup)
		send_frame(i == 0 ? AP_T_STDOUT : AP_T_STDERR, AP_F_FIN, c->id, NULL, 0);
	close_fd(&c->fd[i]);
	if (c->pty)
		close_fd(&c->in_fd);
}

/* Output i of c reported a hang-up while it may not be read: end of file
 * when nothing is left in it (a window used up to the last byte must
 * still see the end), else it waits for the window. */
static void
exec_hangup(struct chan *c, int i)
{
	int left = 0;

	if (ioctl(c->fd[i], FIONREAD, &left) == 0 && left == 0)
		exec_eof(c, i);
	else
		c->held[i] = 1;
}

/* One read from output i of c: to aasd within the window, and to the log. */
static void
exec_read(struct chan *c, int i)
{
	int stream = c->abandoned || c->detach || hup ? 0 : 1;
	size_t want = AP_MAX_PAYLOAD;
	unsigned char *dst = scratch;
	ssize_t r;

	if (stream) {
		if (want > c->window)
			want = (size_t)c->window;
		dst = out_room(AP_HDR_SIZE + want);
		if (dst == NULL)
			return;
		dst += AP_HDR_SIZE;
	}
	r = read(c->fd[i], dst, want);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		/* EOF, or EIO from a PTY master once no one holds the terminal */
		exec_eof(c, i);
		return;
	}
	log_write(c, i, dst, (size_t)r);
	if (stream) {
		struct ap_hdr h = { (uint32_t)r, i == 0 ? AP_T_STDOUT : AP_T_STDERR, 0, c->id };

		ap_hdr_put(dst - AP_HDR_SIZE, &h);
		out_len += AP_HDR_SIZE + (size_t)r;
		c->window -= (uint64_t)r;
	}
}

/* Gives aasd back credit for n bytes of stdin the process took (or that
 * were dropped), so it may send more (aproto.h, flow control). */
static void
stdin_credit(struct chan *c, size_t n)
{
	struct ap_out o = { scratch, 0, 0 };

	if (n == 0 || c->abandoned)
		return;
	ap_put_u64(&o, AP_TAG_SIZE, n);
	send_frame(AP_T_WINDOW, 0, c->id, o.buf, o.len);
}

static void
exec_write_stdin(struct chan *c)
{
	size_t taken = 0;

	while (c->in_fd >= 0 && c->stdin_len > c->stdin_off) {
		ssize_t w = write(c->in_fd, c->stdin_buf + c->stdin_off,
		    c->stdin_len - c->stdin_off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			stdin_credit(c, taken);
			return;
		}
		if (w < 0) {
			/* the reader is gone: nothing more can be delivered */
			close_fd(&c->in_fd);
			break;
		}
		c->stdin_off += (size_t)w;
		taken += (size_t)w;
	}
	stdin_credit(c, taken + (c->stdin_len - c->stdin_off));
	c->stdin_off = c->stdin_len = 0;
	if (c->stdin_fin && !c->pty)
		close_fd(&c->in_fd);
}

static void
on_child(pid_t pid, int status)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		struct chan *c = chans[i];

		if (c == NULL || c->kind != CH_EXEC || c->pid != pid || c->exited)
			continue;
		c->exited = 1;
		c->status = status;
		c->term_at = c->kill_at = 0;
		c->drain_at = now_ms() + AP_DRAIN_MS;
		return;
	}
}

static void
reap(int sfd)
{
	struct signalfd_siginfo si;
	int status;
	pid_t pid;

	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		on_child(pid, status);
}

/* Timers of exec channels: timeout, kill, drain. */
static void
exec_timers(long long now)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		struct chan *c = chans[i];

		if (c == NULL || c->kind != CH_EXEC)
			continue;
		if (c->term_at > 0 && now >= c->term_at) {
			c->term_at = 0;
			c->timed_out = 1;
			group_kill(c->pid, SIGTERM);
			group_kill(c->pid, SIGCONT);
			c->kill_at = now + AP_KILL_GRACE_S * 1000;
		}
		if (c->kill_at > 0 && now >= c->kill_at) {
			c->kill_at = 0;
			group_kill(c->pid, SIGKILL);
		}
		if (c->exited && c->drain_at > 0 && now >= c->drain_at) {
			/* Output held back by the window is not given up on: only a
			 * pipe that stays open with nothing to read is. */
			if (!exec_may_read(c) && (c->fd[0] >= 0 || c->fd[1] >= 0)) {
				c->drain_at = now + AP_DRAIN_MS;
				continue;
			}
			/* What is left holds the pipes: they linger. */
			exec_finish(c);
			continue;
		}
		if (exec_done(c))
			exec_finish(c);
	}
}

static long long
exec_next_timer(void)
{
	long long t = 0;

	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		const struct chan *c = chans[i];
		long long v[3];

		if (c == NULL || c->kind != CH_EXEC)
			continue;
		v[0] = c->term_at;
		v[1] = c->kill_at;
		v[2] = c->exited ? c->drain_at : 0;
		for (int k = 0; k < 3; k++)
			if (v[k] > 0 && (t == 0 || v[k] < t))
				t = v[k];
	}
	return t;
}

static int
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Opens a log or exit file as root: never through a symbolic link, and
 * only a regular file. */
static int
open_log(const char *path, uid_t uid, gid_t gid, char *msg, size_t mn)
{
	struct stat st;
	int fd = open(path,
	    O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);

	if (fd < 0) {
		snprintf(msg, mn, "log %.300s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(msg, mn, "log %.300s: not a regular file", path);
		close(fd);
		errno = EINVAL;
		return -1;
	}
	if (fchown(fd, uid, gid) < 0) {
		/* ownership is a courtesy */
	}
	return fd;
}

struct spawn {
	const char *path; /* what is executed; argv[0] is what the program sees */
	char **argv;
	char **envp;
	const char *cwd;
	int root, pty;
	const char *slave;
	int in, out, err; /* child ends; -1 with a PTY */
	int report;       /* write end of the error pipe */
	unsigned rows, cols;
};

struct spawn_err {
	int stage; /* index into spawn_stages */
	int err;
};

static const char *const spawn_stages[] = { "setsid", "terminal", "identity", "cwd", "exec" };

static void
spawn_fail(const struct spawn *s, int stage)
{
	struct spawn_err se = { stage, errno };

	if (write(s->report, &se, sizeof(se)) < 0) {
		/* the parent sees the child exit instead */
	}
	_exit(127);
}

static void
spawn_child(const struct spawn *s)
{
	extern char **environ;
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (setsid() < 0)
		spawn_fail(s, 0);
	if (s->pty) {
		int t = open(s->slave, O_RDWR);

		if (t < 0 || ioctl(t, TIOCSCTTY, 0) < 0)
			spawn_fail(s, 1);
		if (!s->root && fchown(t, user_uid, -1) < 0)
			spawn_fail(s, 1);
		if (dup2(t, 0) < 0 || dup2(t, 1) < 0 || dup2(t, 2) < 0)
			spawn_fail(s, 1);
		if (t > 2)
			close(t);
	} else if (dup2(s->in, 0) < 0 || dup2(s->out, 1) < 0 || dup2(s->err, 2) < 0) {
		spawn_fail(s, 1);
	}
	if (s->root) {
		if (setgroups(0, NULL) < 0)
			spawn_fail(s, 2);
	} else if (setgroups(1, &user_gid) < 0 || setresgid(user_gid, user_gid, user_gid) < 0 ||
	    setresuid(user_uid, user_uid, user_uid) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		/* No set-ID program or file capability can lift it again. */
		spawn_fail(s, 2);
	}
	if (chdir(s->cwd) < 0) {
		/* As a shell would: the command fails with 126 and says why. */
		dprintf(2, "aas-agent: cannot enter %s: %s\n", s->cwd, strerror(errno));
		_exit(126);
	}
	umask(022);
	environ = s->envp;
	execvp(s->path, s->argv);
	spawn_fail(s, 4);
}

/* A command names /bin/bash. Under TCG most of bash's start is the dynamic
 * loader's (47 ms against 9 ms for the static build here), so commands start
 * the static build of the same bash, with argv[0], $0 and $BASH unchanged. A
 * terminal keeps the packaged bash: it starts once, and interactively. */
static const char *
exec_path(char *const *argv, int pty)
{
	if (!pty && strcmp(argv[0], "/bin/bash") == 0 && access(AG_STATIC_BASH, X_OK) == 0)
		return AG_STATIC_BASH;
	return argv[0];
}

/* Adds "NAME=value" to env (replacing an entry of the same name). */
static int
env_set(char **env, size_t *n, size_t max, char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t nl;

	if (eq == NULL || eq == kv)
		return -1;
	nl = (size_t)(eq - kv) + 1;
	for (size_t i = 0; i < *n; i++)
		if (strncmp(env[i], kv, nl) == 0) {
			env[i] = kv;
			return 0;
		}
	if (*n >= max)
		return -1;
	env[(*n)++] = kv;
	return 0;
}

static char *
str_dup_field(const struct ap_field *f)
{
	char *s = malloc(f->n + 1);

	if (s != NULL)
		ap_str(f, s, f->n + 1);
	return s;
}

static char *
fmt_dup(const char *fmt, ...)
{
	char buf[AP_MAX_STRING + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return strdup(buf);
}

static void
free_strv(char **v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int
field_abs_path(const struct ap_field *f, char *out, size_t n)
{
	return f == NULL || ap_str(f, out, n) < 0 || out[0] != '/' ? -1 : 0;
}

static void
do_exec(uint32_t id, uint16_t flags, size_t nf)
{
	int root = (flags & AP_F_ROOT) != 0, pty = (flags & AP_F_PTY) != 0;
	const struct ap_field *f;
	char **argv = NULL, **owned = NULL, **envp = NULL;
	size_t argc = 0, nowned = 0, nenv = 0, nmax = 0;
	char cwd[AP_MAX_STRING + 1], msg[AG_MSG_MAX], slave[128];
	int p_in[2] = { -1, -1 }, p_out[2] = { -1, -1 }, p_err[2] = { -1, -1 };
	int rep[2] = { -1, -1 }, master = -1, err = 0;
	struct spawn sp;
	struct spawn_err se;
	struct chan *c = NULL;
	const char *home = root ? "/root" : user_home;
	const char *uname = root ? "root" : "sandbox";
	unsigned rows = 24, cols = 80;
	pid_t pid;

	msg[0] = '\0';
	c = chan_new(id, CH_EXEC);
	if (c == NULL) {
		send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		return;
	}
	c->detach = (flags & AP_F_DETACH) != 0;
	c->pty = pty;
	c->root = root;
	/* Every string is copied: argv, env and the paths outlive the payload. */
	nmax = nf + AG_ENV_DEFAULTS;
	argv = calloc(nf + 1, sizeof(*argv));
	envp = calloc(nmax + 1, sizeof(*envp));
	owned = calloc(nmax + 1, sizeof(*owned));
	if (argv == NULL || envp == NULL || owned == NULL) {
		err = ENOMEM;
		snprintf(msg, sizeof(msg), "out of memory");
		goto out;
	}
	owned[nowned++] = fmt_dup("HOME=%s", home);
	owned[nowned++] = fmt_dup("USER=%s", uname);
	owned[nowned++] = fmt_dup("LOGNAME=%s", uname);
	owned[nowned++] = fmt_dup("SHELL=/bin/bash");
	owned[nowned++] = root ? fmt_dup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
					 "/sbin:/bin") :
				 fmt_dup("PATH=%s/.local/bin:/usr/local/bin:/usr/bin:/bin", home);
	owned[nowned++] = fmt_dup("LANG=C.UTF-8");
	owned[nowned++] = fmt_dup(pty ? "TERM=xterm-256color" : "TERM=dumb");
	for (size_t i = 0; i < nowned; i++)
		if (owned[i] == NULL || env_set(envp, &nenv, nmax, owned[i]) < 0) {
			err = ENOMEM;
			snprintf(msg, sizeof(msg), "out of memory");
			goto out;
		}
	snprintf(cwd, sizeof(cwd), "%s", home);
	for (size_t i = 0; i < nf; i++) {
		f = &fields[i];
		switch (f->tag) {
		case AP_TAG_ARG:
		case AP_TAG_ENV: {
			char *s = str_dup_field(f);

			if (s == NULL) {
				err = ENOMEM;
				snprintf(msg, sizeof(msg), "out of memory");
				goto out;
			}
			owned[nowned++] = s;
			if (f->tag == AP_TAG_ARG) {
				argv[argc++] = s;
			} else if (env_set(envp, &nenv, nmax, s) < 0) {
				err = EINVAL;
				snprintf(msg, sizeof(msg), "bad environment entry");
				goto out;
			}
			break;
		}
		case AP_TAG_CWD:
			if (field_abs_path(f, cwd, sizeof(cwd)) < 0) {
				err = EINVAL;
				snprintf(msg, sizeof(msg), "cwd must be an absolute path");
				goto out;
			}
			break;
		case AP_TAG_TIMEOUT_S:
			if (ap_u32(f) > 0)
				c->term_at = now_ms() + (long long)ap_u32(f) * 1000;
			break;
		case AP_TAG_ROWS:
			rows = ap_u32(f);
			break;
		case AP_TAG_COLS:
			cols = ap_u32(f);
			break;
		case AP_TAG_LOG_MAX:
			c->log_max = ap_u64(f);
			break;
		case AP_TAG_LOG_OUT:
		case AP_TAG_LOG_ERR: {
			char path[AP_MAX_STRING + 1];
			int w = f->tag == AP_TAG_LOG_ERR;

			if (field_abs_path(f, path, sizeof(path)) < 0) {
				err = EINVAL;
				snprintf(msg, sizeof(msg), "log paths must be absolute");
				goto out;
			}
			close_fd(&c->log_fd[w]);
			c->log_fd[w] = open_log(path, root ? 0 : user_uid, root ? 0 : user_gid, msg,
			    sizeof(msg));
			if (c->log_fd[w] < 0) {
				err = errno;
				goto out;
			}
			break;
		}
		case AP_TAG_EXIT_FILE:
			free(c->exit_file);
			c->exit_file = str_dup_field(f);
			if (c->exit_file == NULL || c->exit_file[0] != '/') {
				err = EINVAL;
				snprintf(msg, sizeof(msg), "exit file must be an absolute path");
				goto out;
			}
			break;
		default:
			break; /* fields of other requests mean nothing here */
		}
	}
	if (argc == 0) {
		err = EINVAL;
		snprintf(msg, sizeof(msg), "no program (ARG)");
		goto out;
	}
	if (pty && (rows == 0 || cols == 0 || rows > AG_PTY_MAX_DIM || cols > AG_PTY_MAX_DIM)) {
		err = EINVAL;
		snprintf(msg, sizeof(msg), "bad terminal size %ux%u", rows, cols);
		goto out;
	}

	memset(&sp, 0, sizeof(sp));
	if (pty) {
		struct winsize ws = { (unsigned short)rows, (unsigned short)cols, 0, 0 };

		master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
		    ptsname_r(master, slave, sizeof(slave)) != 0 ||
		    ioctl(master, TIOCSWINSZ, &ws) < 0) {
			err = errno;
			snprintf(msg, sizeof(msg), "terminal: %s", strerror(errno));
			goto out;
		}
		sp.slave = slave;
		sp.in = sp.out = sp.err = -1;
	} else {
		if (pipe2(p_out, O_CLOEXEC) < 0 || pipe2(p_err, O_CLOEXEC) < 0) {
			err = errno;
			snprintf(msg, sizeof(msg), "pipe: %s", strerror(errno));
			goto out;
		}
		if (flags & AP_F_STDIN) {
			if (pipe2(p_in, O_CLOEXEC) < 0) {
				err = errno;
				snprintf(msg, sizeof(msg), "pipe: %s", strerror(errno));
				goto out;
			}
		} else {
			p_in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (p_in[0] < 0) {
				err = errno;
				snprintf(msg, sizeof(msg), "/dev/null: %s", strerror(errno));
				goto out;
			}
		}
		sp.in = p_in[0];
		sp.out = p_out[1];
		sp.err = p_err[1];
	}
	if (pipe2(rep, O_CLOEXEC) < 0) {
		err = errno;
		snprintf(msg, sizeof(msg), "pipe: %s", strerror(errno));
		goto out;
	}
	sp.path = exec_path(argv, pty);
	sp.argv = argv;
	sp.envp = envp;
	sp.cwd = cwd;
	sp.root = root;
	sp.pty = pty;
	sp.report = rep[1];
	sp.rows = rows;
	sp.cols = cols;
	pid = fork();
	if (pid < 0) {
		err = errno;
		snprintf(msg, sizeof(msg), "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		spawn_child(&sp);
	close_fd(&rep[1]);
	/* The child reports a failure before exec, or the pipe closes on exec. */
	for (;;) {
		ssize_t r = read(rep[0], &se, sizeof(se));

		if (r < 0 && errno == EINTR)
			continue;
		if (r == (ssize_t)sizeof(se)) {
			int st;

			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			err = se.err;
			snprintf(msg, sizeof(msg), "%s: %s",
			    spawn_stages[se.stage >= 0 && se.stage < 5 ? se.stage : 4],
			    strerror(se.err));
			goto out;
		}
		break;
	}
	c->pid = pid;
	group_remember(pid);
	if (pty) {
		c->fd[0] = master;
		master = -1;
		c->in_fd = dup(c->fd[0]);
		if (c->in_fd >= 0)
			fcntl(c->in_fd, F_SETFD, FD_CLOEXEC);
	} else {
		c->fd[0] = p_out[0];
		c->fd[1] = p_err[0];
		p_out[0] = p_err[0] = -1;
		if (flags & AP_F_STDIN) {
			c->in_fd = p_in[1];
			p_in[1] = -1;
		}
	}
	for (int i = 0; i < 2; i++)
		if (c->fd[i] >= 0)
			set_nonblock(c->fd[i]);
	if (c->in_fd >= 0)
		set_nonblock(c->in_fd);
	{
		struct ap_out o = { scratch, 0, 0 };

		ap_put_u32(&o, AP_TAG_PID, (uint32_t)pid);
		send_frame(AP_T_STARTED, 0, id, o.buf, o.len);
	}
	c = NULL;
out:
	close_fd(&rep[0]);
	close_fd(&rep[1]);
	for (int i = 0; i < 2; i++) {
		close_fd(&p_in[i]);
		close_fd(&p_out[i]);
		close_fd(&p_err[i]);
	}
	close_fd(&master);
	free_strv(owned, nowned);
	free(argv);
	free(envp);
	if (c != NULL) {
		send_result(id, err != 0 ? err : EINVAL, "%s", msg);
		chan_free(c);
	}
}

static void
do_signal_new(uint32_t id, size_t nf)
{
	const struct ap_field *fp = ap_find(fields, nf, AP_TAG_PID);
	const struct ap_field *fs = ap_find(fields, nf, AP_TAG_SIGNAL);
	pid_t pid;
	uint32_t sig;

	if (fp == NULL || fs == NULL || !valid_signal(ap_u32(fs))) {
		send_result(id, EINVAL, "SIGNAL needs PID and a signal number");
		return;
	}
	pid = (pid_t)ap_u32(fp);
	sig = ap_u32(fs);
	if (ap_u32(fp) > INT_MAX || !group_known(pid)) {
		send_result(id, EPERM, "not a process group this agent started");
		return;
	}
	if (group_kill(pid, (int)sig) < 0) {
		send_result(id, errno, "kill: %s", strerror(errno));
		return;
	}
	send_result(id, 0, NULL);
}

/* ---- files ---- */

static uint32_t
ftype(mode_t m)
{
	if (S_ISREG(m))
		return AP_FT_FILE;
	if (S_ISDIR(m))
		return AP_FT_DIR;
	if (S_ISLNK(m))
		return AP_FT_LINK;
	return AP_FT_OTHER;
}

static void
put_stat(struct ap_out *o, const struct stat *st)
{
	ap_put_u32(o, AP_TAG_TYPE, ftype(st->st_mode));
	ap_put_u64(o, AP_TAG_SIZE, (uint64_t)st->st_size);
	ap_put_u32(o, AP_TAG_MODE, (uint32_t)(st->st_mode & 07777));
	ap_put_u64(o, AP_TAG_MTIME,
	    (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec);
}

/* The request's PATH: absolute, or a RESULT is sent and -1 returned. */
static int
req_path(uint32_t id, size_t nf, char *path, size_t n)
{
	if (field_abs_path(ap_find(fields, nf, AP_TAG_PATH), path, n) < 0) {
		send_result(id, EINVAL, "PATH must be an absolute path");
		return -1;
	}
	return 0;
}

/* mkdir -p of path's parent directories. */
static int
make_parents(const char *path)
{
	char p[AP_MAX_STRING + 1];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return 0;
}

/* A PUT of a tar stream to unpack into the directory `path`. */
static void
put_tree(uint32_t id, int root, const char *path)
{
	char msg[ATREE_MSG_MAX];
	struct atree *t;
	struct chan *c = chan_new(id, CH_PUT);

	if (c == NULL) {
		send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		return;
	}
	c->root = root;
	fs_as(root);
	t = atree_new(path, msg, sizeof(msg));
	fs_root();
	if (t == NULL) {
		send_result(id, errno, "%s", msg);
		chan_free(c);
		return;
	}
	c->tree = t;
	c->size = 0;
}

static void
tree_data(struct chan *c, uint16_t flags, const unsigned char *p, size_t n)
{
	char msg[ATREE_MSG_MAX];
	uint64_t members = 0;
	int rc;

	fs_as(c->root);
	rc = atree_feed(c->tree, p, n, msg, sizeof(msg));
	if (rc == 0 && (flags & AP_F_FIN))
		rc = atree_commit(c->tree, &members, msg, sizeof(msg));
	fs_root();
	c->size += n;
	if (rc < 0) {
		send_result(c->id, errno ? errno : EIO, "%s", msg);
		chan_free(c);
		return;
	}
	if (flags & AP_F_FIN) {
		struct ap_out o = { scratch, 0, 0 };

		ap_put_u64(&o, AP_TAG_SIZE, c->size);
		send_frame(AP_T_RESULT, 0, c->id, o.buf, o.len);
		chan_free(c);
	}
}

static void
do_put(uint32_t id, uint16_t flags, size_t nf)
{
	int root = (flags & AP_F_ROOT) != 0;
	char path[AP_MAX_STRING + 1];
	const struct ap_field *fm = ap_find(fields, nf, AP_TAG_MODE);
	const struct ap_field *fo = ap_find(fields, nf, AP_TAG_OFFSET);
	mode_t mode = fm != NULL ? (mode_t)(ap_u32(fm) & (root ? 07777 : 0777)) : 0644;
	int oflags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat st;
	struct chan *c;
	int fd, err = 0;
	const char *what = "open";

	if (req_path(id, nf, path, sizeof(path)) < 0)
		return;
	if (flags & AP_F_TREE) {
		put_tree(id, root, path);
		return;
	}
	if (fo != NULL && ap_u64(fo) > (uint64_t)LLONG_MAX) {
		send_result(id, EINVAL, "offset out of range");
		return;
	}
	if (flags & AP_F_TRUNC)
		oflags |= O_TRUNC;
	if (flags & AP_F_EXCL)
		oflags |= O_EXCL;
	c = chan_new(id, CH_PUT);
	if (c == NULL) {
		send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		return;
	}
	fs_as(root);
	if ((flags & AP_F_PARENTS) && make_parents(path) < 0) {
		err = errno;
		what = "make parents";
		fd = -1;
	} else {
		fd = open(path, oflags, mode);
		if (fd < 0)
			err = errno;
	}
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		err = EINVAL;
		what = "not a regular file";
		close_fd(&fd);
	}
	if (fd >= 0 && fm != NULL && (st.st_mode & 07777) != mode && fchmod(fd, mode) < 0) {
		err = errno;
		what = "chmod";
		close_fd(&fd);
	}
	fs_root();
	if (fd < 0) {
		send_result(id, err, "%s %.300s: %s", what, path, strerror(err));
		chan_free(c);
		return;
	}
	c->file_fd = fd;
	c->pos = fo != NULL ? ap_u64(fo) : 0;
	c->size = 0;
}

static void
put_data(struct chan *c, uint16_t flags, const unsigned char *p, size_t n)
{
	if (c->tree != NULL) {
		tree_data(c, flags, p, n);
		return;
	}
	while (n > 0) {
		ssize_t w = pwrite(c->file_fd, p, n, (off_t)c->pos);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int err = w < 0 ? errno : EIO;

			send_result(c->id, err, "write: %s", strerror(err));
			chan_free(c);
			return;
		}
		p += w;
		n -= (size_t)w;
		c->pos += (uint64_t)w;
		c->size += (uint64_t)w;
	}
	if (flags & AP_F_FIN) {
		struct ap_out o = { scratch, 0, 0 };

		ap_put_u64(&o, AP_TAG_SIZE, c->size);
		send_frame(AP_T_RESULT, 0, c->id, o.buf, o.len);
		chan_free(c);
	}
}

static void
do_get(uint32_t id, uint16_t flags, size_t nf)
{
	char path[AP_MAX_STRING + 1];
	const struct ap_field *fo = ap_find(fields, nf, AP_TAG_OFFSET);
	const struct ap_field *fl = ap_find(fields, nf, AP_TAG_LENGTH);
	struct stat st;
	struct chan *c;
	int fd, err = 0;

	if (req_path(id, nf, path, sizeof(path)) < 0)
		return;
	fs_as(flags & AP_F_ROOT);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		err = errno;
	fs_root();
	if (fd < 0) {
		send_result(id, err, "open %.300s: %s", path, strerror(err));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = EINVAL;
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
			err = EISDIR;
		send_result(id, err, "%.300s: not a regular file", path);
		close(fd);
		return;
	}
	c = chan_new(id, CH_GET);
	if (c == NULL) {
		send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		close(fd);
		return;
	}
	c->file_fd = fd;
	c->size = (uint64_t)st.st_size;
	c->pos = fo != NULL ? ap_u64(fo) : 0;
	c->left = fl != NULL ? ap_u64(fl) : 0;
	c->to_end = c->left == 0;
}

/* Sends the next part of a GET within the window; 1 when it did work. */
static int
get_pump(struct chan *c)
{
	size_t want = AP_MAX_PAYLOAD;
	unsigned char *dst;
	ssize_t r;

	if (c->window == 0 || out_queued() >= AG_OUT_SOFT)
		return 0;
	if (want > c->window)
		want = (size_t)c->window;
	if (!c->to_end && want > c->left)
		want = (size_t)c->left;
	if (c->pos > (uint64_t)LLONG_MAX)
		want = 0;
	dst = want > 0 ? out_room(AP_HDR_SIZE + want) : NULL;
	if (want > 0 && dst == NULL)
		return 0;
	r = want > 0 ? pread(c->file_fd, dst + AP_HDR_SIZE, want, (off_t)c->pos) : 0;
	if (r < 0 && errno == EINTR)
		return 1;
	if (r < 0) {
		int err = errno;

		send_result(c->id, err, "read: %s", strerror(err));
		chan_free(c);
		return 1;
	}
	if (r == 0) {
		struct ap_out o = { scratch, 0, 0 };

		ap_put_u64(&o, AP_TAG_SIZE, c->size);
		send_frame(AP_T_RESULT, 0, c->id, o.buf, o.len);
		chan_free(c);
		return 1;
	}
	{
		struct ap_hdr h = { (uint32_t)r, AP_T_DATA, 0, c->id };

		ap_hdr_put(dst, &h);
	}
	out_len += AP_HDR_SIZE + (size_t)r;
	c->window -= (uint64_t)r;
	c->pos += (uint64_t)r;
	if (!c->to_end)
		c->left -= (uint64_t)r;
	if (!c->to_end && c->left == 0) {
		struct ap_out o = { scratch, 0, 0 };

		ap_put_u64(&o, AP_TAG_SIZE, c->size);
		send_frame(AP_T_RESULT, 0, c->id, o.buf, o.len);
		chan_free(c);
	}
	return 1;
}

static void
do_stat(uint32_t id, uint16_t flags, size_t nf)
{
	char path[AP_MAX_STRING + 1];
	struct ap_out o = { scratch, 0, 0 };
	struct stat st;
	int r, err;

	if (req_path(id, nf, path, sizeof(path)) < 0)
		return;
	fs_as(flags & AP_F_ROOT);
	r = lstat(path, &st);
	err = errno;
	fs_root();
	if (r < 0) {
		send_result(id, err, "stat %.300s: %s", path, strerror(err));
		return;
	}
	put_stat(&o, &st);
	ap_put_u32(&o, AP_TAG_UID, (uint32_t)st.st_uid);
	ap_put_u32(&o, AP_TAG_GID, (uint32_t)st.st_gid);
	send_frame(AP_T_RESULT, 0, id, o.buf, o.len);
}

static void
do_list(uint32_t id, uint16_t flags, size_t nf)
{
	char path[AP_MAX_STRING + 1];
	struct chan *c;
	DIR *d;
	int err;

	if (req_path(id, nf, path, sizeof(path)) < 0)
		return;
	fs_as(flags & AP_F_ROOT);
	d = opendir(path);
	err = errno;
	fs_root();
	if (d == NULL) {
		send_result(id, err, "opendir %.300s: %s", path, strerror(err));
		return;
	}
	c = chan_new(id, CH_LIST);
	if (c == NULL) {
		send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		closedir(d);
		return;
	}
	c->dir = d;
	c->root = (flags & AP_F_ROOT) != 0;
}

/* Sends the next entry of a LIST within the window; 1 when it did work. */
static int
list_pump(struct chan *c)
{
	struct ap_out o = { scratch, 0, 0 };
	struct dirent *e;
	struct stat st;
	long here;
	int r;

	if (out_queued() >= AG_OUT_SOFT)
		return 0;
	here = telldir(c->dir);
	errno = 0;
	e = readdir(c->dir);
	if (e == NULL) {
		if (errno != 0)
			send_result(c->id, errno, "readdir: %s", strerror(errno));
		else
			send_frame(AP_T_RESULT, 0, c->id, NULL, 0);
		chan_free(c);
		return 1;
	}
	if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
		return 1;
	fs_as(c->root);
	r = fstatat(dirfd(c->dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW);
	fs_root();
	if (r < 0)
		return 1; /* gone since readdir */
	ap_put_str(&o, AP_TAG_NAME, e->d_name);
	put_stat(&o, &st);
	if (o.len > c->window) {
		seekdir(c->dir, here); /* again once aasd grants more */
		return 0;
	}
	c->window -= o.len;
	send_frame(AP_T_ENTRY, 0, c->id, o.buf, o.len);
	return 1;
}

/* ---- frames from aasd ---- */

static void
on_exec_frame(struct chan *c, const struct ap_hdr *h, const unsigned char *p, size_t nf)
{
	const struct ap_field *f;

	switch (h->type) {
	case AP_T_STDIN:
		if (c->stdin_fin) {
			chan_fail(c, EINVAL, "stdin already closed");
			return;
		}
		if (c->in_fd < 0) {
			/* no stdin stream, or the reader is gone: bytes are dropped */
			c->stdin_fin = (h->flags & AP_F_FIN) != 0;
			stdin_credit(c, h->len);
			return;
		}
		if (h->len > 0) {
			if (c->stdin_len - c->stdin_off + h->len > AP_STDIN_MAX) {
				chan_fail(c, ENOBUFS,
				    "more than AP_STDIN_MAX bytes of stdin waiting");
				return;
			}
			if (c->stdin_buf == NULL) {
				c->stdin_buf = malloc(AP_STDIN_MAX);
				if (c->stdin_buf == NULL) {
					chan_fail(c, ENOMEM, "out of memory");
					return;
				}
			}
			if (c->stdin_off > 0) {
				memmove(c->stdin_buf, c->stdin_buf + c->stdin_off,
				    c->stdin_len - c->stdin_off);
				c->stdin_len -= c->stdin_off;
				c->stdin_off = 0;
			}
			memcpy(c->stdin_buf + c->stdin_len, p, h->len);
			c->stdin_len += h->len;
		}
		if (h->flags & AP_F_FIN)
			c->stdin_fin = 1;
		exec_write_stdin(c);
		return;
	case AP_T_SIGNAL:
		f = ap_find(fields, nf, AP_TAG_SIGNAL);
		if (f != NULL && valid_signal(ap_u32(f)))
			group_kill(c->pid, (int)ap_u32(f));
		return;
	case AP_T_RESIZE: {
		const struct ap_field *fr = ap_find(fields, nf, AP_TAG_ROWS);
		const struct ap_field *fc = ap_find(fields, nf, AP_TAG_COLS);
		struct winsize ws;

		if (!c->pty || c->fd[0] < 0 || fr == NULL || fc == NULL || ap_u32(fr) == 0 ||
		    ap_u32(fc) == 0 || ap_u32(fr) > AG_PTY_MAX_DIM || ap_u32(fc) > AG_PTY_MAX_DIM)
			return;
		memset(&ws, 0, sizeof(ws));
		ws.ws_row = (unsigned short)ap_u32(fr);
		ws.ws_col = (unsigned short)ap_u32(fc);
		ioctl(c->fd[0], TIOCSWINSZ, &ws);
		return;
	}
	default:
		chan_fail(c, EINVAL, "unexpected frame on a command's channel");
	}
}

static int
is_data(uint16_t type)
{
	return type == AP_T_STDIN || type == AP_T_DATA;
}

/* ---- test modes ----
 * aas.agent_test=MODE on the kernel command line (aasd's
 * AAS_GUEST_KERNEL_ARGS, for tests only) makes this agent misbehave after
 * the handshake, so that aasd's handling of a hostile guest can be shown
 * with the real image: oversize (a header above AP_MAX_PAYLOAD), garbage
 * (malformed fields and an unknown frame type), flood (output beyond the
 * granted window), silent (no handshake answer), stall (no answer to any
 * request). */
enum test_mode { TM_NONE, TM_OVERSIZE, TM_GARBAGE, TM_FLOOD, TM_SILENT, TM_STALL };

#define AG_CMDLINE_MAX 4096

static enum test_mode test_mode;
static uint32_t flood_chan; /* TM_FLOOD: the EXEC channel being flooded */

static void
read_test_mode(void)
{
	static const char *const names[] = { "", "oversize", "garbage", "flood", "silent",
		"stall" };
	static char line[AG_CMDLINE_MAX];
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, line, sizeof(line) - 1) : -1;
	const char *m;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	line[n] = '\0';
	m = strstr(line, "aas.agent_test=");
	if (m == NULL)
		return;
	m += strlen("aas.agent_test=");
	for (size_t i = 1; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t l = strlen(names[i]);

		if (strncmp(m, names[i], l) == 0 && (m[l] == '\0' || m[l] == ' ' || m[l] == '\n'))
			test_mode = (enum test_mode)i;
	}
	if (test_mode != TM_NONE)
		say("TEST MODE %s: this agent misbehaves on purpose", names[test_mode]);
}

/* Queues a frame header as is (its length may be a lie). */
static void
test_raw_header(uint32_t len, uint16_t type, uint32_t chan)
{
	struct ap_hdr h = { len, type, 0, chan };
	unsigned char *o = out_room(AP_HDR_SIZE);

	if (o == NULL)
		return;
	ap_hdr_put(o, &h);
	out_len += AP_HDR_SIZE;
}

/* 1 when the frame was taken by the test mode. */
static int
test_frame(const struct ap_hdr *h)
{
	static const unsigned char bad_fields[] = { AP_TAG_ERRNO, 0xff, 0xff, 0xff, 0xff, 1 };
	struct ap_out o = { scratch, 0, 0 };

	if (test_mode == TM_SILENT)
		return 1;
	if (h->chan == 0 || chan_find(h->chan) != NULL)
		return 0;
	switch (test_mode) {
	case TM_STALL:
		return 1;
	case TM_OVERSIZE:
		test_raw_header(AP_MAX_PAYLOAD + 1, AP_T_RESULT, h->chan);
		return 1;
	case TM_GARBAGE:
		send_frame(AP_T_RESULT, 0, h->chan, bad_fields, sizeof(bad_fields));
		send_frame(0x7e, 0, h->chan, bad_fields, sizeof(bad_fields));
		return 1;
	case TM_FLOOD:
		if (h->type != AP_T_EXEC)
			return 0;
		ap_put_u32(&o, AP_TAG_PID, 1);
		send_frame(AP_T_STARTED, 0, h->chan, o.buf, o.len);
		flood_chan = h->chan;
		return 1;
	default:
		return 0;
	}
}

/* TM_FLOOD: output frames whatever the window, as fast as the port takes
 * them. */
static void
test_flood(void)
{
	static unsigned char junk[AP_MAX_PAYLOAD];

	if (flood_chan == 0 || hup)
		return;
	if (junk[0] == 0)
		memset(junk, 'x', sizeof(junk));
	while (out_queued() < AG_OUT_SOFT)
		if (send_frame(AP_T_STDOUT, 0, flood_chan, junk, sizeof(junk)) < 0)
			break;
}

static void
on_frame(const struct ap_hdr *h, const unsigned char *p)
{
	struct chan *c;
	size_t nf = 0;
	int parsed;

	if (test_mode != TM_NONE && test_frame(h))
		return;

	parsed = is_data(h->type) ? 0 : ap_parse(p, h->len, fields, AP_MAX_FIELDS, &nf);
	if (h->chan == 0) {
		if (h->type == AP_T_HELLO && parsed == 0) {
			const struct ap_field *fn = ap_find(fields, nf, AP_TAG_NONCE);

			/* A new connection: what was open belongs to the old one. */
			abandon_all();
			out_drop();
			send_hello(fn != NULL ? ap_u64(fn) : 0);
		} else if (h->type == AP_T_PING && h->len <= 64) {
			send_frame(AP_T_PONG, 0, 0, p, h->len);
		}
		return; /* nothing else is meaningful on channel 0 */
	}
	c = chan_find(h->chan);
	if (c != NULL) {
		if (h->type == AP_T_CLOSE) {
			chan_abandon(c);
			return;
		}
		if (parsed < 0) {
			chan_fail(c, EINVAL, "malformed frame");
			return;
		}
		if (h->type == AP_T_WINDOW) {
			const struct ap_field *fs = ap_find(fields, nf, AP_TAG_SIZE);
			uint64_t add = fs != NULL ? ap_u64(fs) : 0;

			/* More than fits in 2^40 bytes outstanding is nonsense. */
			if (fs == NULL || add > (1ull << 40) - c->window) {
				chan_fail(c, EINVAL, "bad WINDOW");
				return;
			}
			c->window += add;
			return;
		}
		if (c->kind == CH_EXEC) {
			on_exec_frame(c, h, p, nf);
		} else if (c->kind == CH_PUT && h->type == AP_T_DATA) {
			put_data(c, h->flags, p, h->len);
		} else {
			chan_fail(c, EINVAL, "unexpected frame on this channel");
		}
		return;
	}
	/* A new channel: only a request opens one; anything else is for a
	 * channel that has ended (aasd may not know yet) and is dropped. */
	switch (h->type) {
	case AP_T_EXEC:
	case AP_T_PUT:
	case AP_T_GET:
	case AP_T_STAT:
	case AP_T_LIST:
	case AP_T_SIGNAL:
		break;
	default:
		return;
	}
	if (parsed < 0) {
		send_result(h->chan, EINVAL, "malformed request");
		return;
	}
	switch (h->type) {
	case AP_T_EXEC:
		do_exec(h->chan, h->flags, nf);
		break;
	case AP_T_PUT:
		do_put(h->chan, h->flags, nf);
		break;
	case AP_T_GET:
		do_get(h->chan, h->flags, nf);
		break;
	case AP_T_STAT:
		do_stat(h->chan, h->flags, nf);
		break;
	case AP_T_LIST:
		do_list(h->chan, h->flags, nf);
		break;
	default:
		do_signal_new(h->chan, nf);
		break;
	}
}

/* Frames in in_buf, as many as are whole and while the output has room. */
static void
process_input(void)
{
	size_t pos = 0;

	while (pos < in_len) {
		struct ap_hdr h;

		if (!in_sync) {
			const unsigned char *s = memmem(in_buf + pos, in_len - pos, AP_SYNC,
			    AP_SYNC_LEN);

			if (s == NULL) {
				size_t keep = in_len - pos < AP_SYNC_LEN - 1 ? in_len - pos :
									       AP_SYNC_LEN - 1;

				in_scanned += in_len - pos - keep;
				pos = in_len - keep;
				break;
			}
			in_scanned += (size_t)(s - (in_buf + pos));
			pos = (size_t)(s - in_buf) + AP_SYNC_LEN;
			in_sync = 1;
			continue;
		}
		if (in_len - pos < AP_HDR_SIZE)
			break;
		if (ap_hdr_get(in_buf + pos, &h) < 0) {
			/* Not a frame: skip to the next AP_SYNC (from here, as a
			 * SYNC in the stream reads as an oversized header). */
			in_sync = 0;
			continue;
		}
		if (in_len - pos < AP_HDR_SIZE + h.len || out_queued() >= AG_OUT_SOFT)
			break;
		on_frame(&h, in_buf + pos + AP_HDR_SIZE);
		pos += AP_HDR_SIZE + h.len;
	}
	if (in_scanned > AP_SYNC_SCAN_MAX) {
		/* aasd gives up on a guest by then; the agent keeps looking. */
		say("out of sync for %llu bytes", in_scanned);
		in_scanned = 0;
	}
	if (pos > 0) {
		memmove(in_buf, in_buf + pos, in_len - pos);
		in_len -= pos;
	}
}

static void
port_read(void)
{
	while (in_len < AG_IN_CAP) {
		ssize_t r = read(port_fd, in_buf + in_len, AG_IN_CAP - in_len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			enter_hup();
			return;
		}
		in_len += (size_t)r;
		process_input();
		if (out_queued() >= AG_OUT_SOFT)
			return;
	}
}

/* ---- main loop ---- */

static void
usage(void)
{
	say("usage: aas-agent [--port PATH | --fd N] [--uid N --gid N --home DIR]");
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

static void
read_boot_id(void)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, boot_id, sizeof(boot_id) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	while (n > 0 && (boot_id[n - 1] == '\n' || boot_id[n - 1] == ' '))
		n--;
	boot_id[n] = '\0';
}

/* poll slots: what each one is. */
enum slot_kind { SL_SIG, SL_PORT, SL_OUT, SL_ERR, SL_IN, SL_LINGER };

struct slot {
	enum slot_kind kind;
	struct chan *c;
};

#define AG_SLOTS (2 + 3 * AG_MAX_CHANNELS + ALINGER_MAX)

int
main(int argc, char **argv)
{
	static struct pollfd pfd[AG_SLOTS];
	static struct slot slots[AG_SLOTS];
	const char *port = AG_DEFAULT_PORT;
	sigset_t set;
	int sfd;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--port") == 0) {
			port = argv[++i];
		} else if (strcmp(argv[i], "--fd") == 0) {
			port_fd = (int)number(argv[++i], INT_MAX);
		} else if (strcmp(argv[i], "--uid") == 0) {
			user_uid = (uid_t)number(argv[++i], INT_MAX);
		} else if (strcmp(argv[i], "--gid") == 0) {
			user_gid = (gid_t)number(argv[++i], INT_MAX);
		} else if (strcmp(argv[i], "--home") == 0) {
			user_home = argv[++i];
		} else {
			usage();
		}
	}
	if (user_home[0] != '/')
		usage();
	umask(0);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0) {
		say("signalfd: %s", strerror(errno));
		return 1;
	}
	if (port_fd < 0) {
		port_fd = open(port, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (port_fd < 0) {
			say("%s: %s", port, strerror(errno));
			return 1;
		}
		port_is_dev = 1;
	} else if (set_nonblock(port_fd) < 0 || fcntl(port_fd, F_SETFD, FD_CLOEXEC) < 0) {
		say("--fd %d: %s", port_fd, strerror(errno));
		return 1;
	}
	out_buf = malloc(AG_OUT_CAP);
	if (out_buf == NULL) {
		say("out of memory");
		return 1;
	}
	read_boot_id();
	read_test_mode();
	/* Tells a connected aasd that whatever it had open here is gone. */
	if (test_mode != TM_SILENT)
		send_hello(0);
	say("serving %s (version %d)", port_is_dev ? port : "a descriptor", AP_VERSION);

	for (;;) {
		long long now = now_ms(), next;
		int timeout = -1, busy = 0, n = 0, r;

		exec_timers(now);
		/* Files produce whenever their window and the queue allow. */
		for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
			struct chan *c = chans[i];

			if (c == NULL || c->abandoned)
				continue;
			if (c->kind == CH_GET)
				busy |= get_pump(c);
			else if (c->kind == CH_LIST)
				busy |= list_pump(c);
		}
		if (!hup && in_len > 0)
			process_input();
		if (test_mode == TM_FLOOD)
			test_flood();
		if (hup && now >= hup_check_at) {
			struct pollfd one = { port_fd, POLLIN, 0 };

			if (poll(&one, 1, 0) >= 0 && !(one.revents & POLLHUP)) {
				say("host connected");
				hup = 0;
			} else {
				hup_check_at = now + AG_HUP_POLL_MS;
			}
		}

		pfd[n] = (struct pollfd){ sfd, POLLIN, 0 };
		slots[n++] = (struct slot){ SL_SIG, NULL };
		if (!hup) {
			short ev = 0;

			if (in_len < AG_IN_CAP && out_queued() < AG_OUT_SOFT)
				ev |= POLLIN;
			if (out_queued() > 0)
				ev |= POLLOUT;
			pfd[n] = (struct pollfd){ port_fd, ev, 0 };
			slots[n++] = (struct slot){ SL_PORT, NULL };
		}
		for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
			struct chan *c = chans[i];

			if (c == NULL || c->kind != CH_EXEC)
				continue;
			for (int k = 0; k < 2; k++) {
				/* Without a window only a hang-up is watched for. */
				short ev = exec_may_read(c) ? POLLIN : 0;

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
		next = exec_next_timer();
		if (hup && (next == 0 || hup_check_at < next))
			next = hup_check_at;
		if (next > 0)
			timeout = next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
		if (busy)
			timeout = 0;
		r = poll(pfd, (nfds_t)n, timeout);
		if (r < 0) {
			if (errno != EINTR)
				say("poll: %s", strerror(errno));
			continue;
		}
		for (int i = 0; i < n; i++) {
			struct chan *c = slots[i].c;
			short re = pfd[i].revents;

			if (re == 0)
				continue;
			/* A channel may have ended by an earlier slot's work. */
			if (c != NULL) {
				int live = 0;

				for (size_t k = 0; k < AG_MAX_CHANNELS; k++)
					live |= chans[k] == c;
				if (!live)
					continue;
			}
			switch (slots[i].kind) {
			case SL_SIG:
				reap(sfd);
				break;
			case SL_PORT:
				if (re & POLLOUT)
					port_write();
				if (!hup && (re & POLLIN))
					port_read();
				else if (!hup && (re & (POLLHUP | POLLERR)))
					enter_hup();
				if (!hup)
					port_write();
				break;
			case SL_OUT:
			case SL_ERR: {
				int w = slots[i].kind == SL_ERR;

				if (c->fd[w] != pfd[i].fd)
					break;
				if (exec_may_read(c))
					exec_read(c, w);
				else if (re & (POLLHUP | POLLERR))
					exec_hangup(c, w);
				break;
			}
			case SL_IN:
				if (c->in_fd == pfd[i].fd)
					exec_write_stdin(c);
				break;
			case SL_LINGER:
				alinger_ready(pfd[i].fd, re);
				break;
			}
		}
		if (!hup && out_queued() > 0)
			port_write();
		exec_timers(now_ms());
	}
}
