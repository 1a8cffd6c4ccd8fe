/* agent_exec.c - a command the agent started, until its EXIT: its output
 * read within the window into frames and logs, its stdin written, its
 * timers, the signals it may be sent, and its end (agent_int.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "vmm/image/agent_int.h"
#include "vmm/image/agent_linger.h"
#include "vmm/image/gsys.h"

#define AG_GROUPS_MAX 1024 /* recent process groups SIGNAL{pid} may reach */
/* Log bytes a lingering pipe may add to a log that has no bound of its own. */
#define AG_LINGER_LOG_MORE (64u << 20)

static pid_t groups[AG_GROUPS_MAX];
static size_t groups_next;

void
ag_group_remember(pid_t pgid)
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

int
ag_group_kill(pid_t pgid, int sig)
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
log_write(struct ag_chan *c, int which, const unsigned char *p, size_t n)
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
			ag_say("log write: %s", strerror(errno));
			ag_close_fd(&c->log_fd[which]);
			return;
		}
		c->log_kept[which] += (uint64_t)w;
		p += w;
		keep -= (size_t)w;
	}
}

static int
exit_code(const struct ag_chan *c, int *sig)
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
exec_linger(struct ag_chan *c)
{
	for (int i = 0; i < 2; i++) {
		uint64_t max = c->log_max ? c->log_max : c->log_kept[i] + AG_LINGER_LOG_MORE;

		if (c->fd[i] < 0 || c->pty) {
			ag_close_fd(&c->fd[i]);
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
exec_finish(struct ag_chan *c)
{
	int sig, code = exit_code(c, &sig);

	if (!c->abandoned && !c->detach) {
		/* Pipes still open were given up on (AP_DRAIN_MS). */
		for (int i = 0; i < 2; i++)
			if (c->fd[i] >= 0)
				ag_send_frame(i == 0 ? AP_T_STDOUT : AP_T_STDERR, AP_F_FIN, c->id,
				    NULL, 0);
	}
	exec_linger(c);
	if (c->exit_file != NULL) {
		int fd = open(c->exit_file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		    0644);
		char line[32];

		if (fd < 0 || gsys_fmt(line, sizeof(line), "%d %d\n", code, sig) < 0 ||
		    write(fd, line, strlen(line)) != (ssize_t)strlen(line))
			ag_say("exit file %s: %s", c->exit_file, strerror(errno));
		if (fd >= 0) {
			if (fchown(fd, c->root ? 0 : ag.uid, c->root ? 0 : ag.gid) < 0) {
				/* ownership is a courtesy */
			}
			close(fd);
		}
	}
	if (!c->abandoned) {
		struct ap_out o = { ag_scratch, 0, 0 };

		ap_put_u32(&o, AP_TAG_CODE, (uint32_t)code);
		ap_put_u32(&o, AP_TAG_SIGNAL, (uint32_t)sig);
		ag_send_frame(AP_T_EXIT, 0, c->id, o.buf, o.len);
	}
	ag_chan_free(c);
}

static int
exec_done(const struct ag_chan *c)
{
	return c->exited && c->fd[0] < 0 && c->fd[1] < 0;
}

int
ag_exec_may_read(const struct ag_chan *c)
{
	if (c->abandoned || c->detach || ag.hup)
		return 1;
	return c->window > 0 && ag_out_queued() < AG_OUT_SOFT;
}

static void
exec_eof(struct ag_chan *c, int i)
{
	if (!c->abandoned && !c->detach && !ag.hup)
		ag_send_frame(i == 0 ? AP_T_STDOUT : AP_T_STDERR, AP_F_FIN, c->id, NULL, 0);
	ag_close_fd(&c->fd[i]);
	if (c->pty)
		ag_close_fd(&c->in_fd);
}

/* Output i of c reported a hang-up while it may not be read: end of file
 * when nothing is left in it (a window used up to the last byte must
 * still see the end), else it waits for the window. */
void
ag_exec_hangup(struct ag_chan *c, int i)
{
	int left = 0;

	if (ioctl(c->fd[i], FIONREAD, &left) == 0 && left == 0)
		exec_eof(c, i);
	else
		c->held[i] = 1;
}

void
ag_exec_read(struct ag_chan *c, int i)
{
	int stream = c->abandoned || c->detach || ag.hup ? 0 : 1;
	size_t want = AP_MAX_PAYLOAD;
	unsigned char *dst = ag_scratch;
	ssize_t r;

	if (stream) {
		if (want > c->window)
			want = (size_t)c->window;
		dst = ag_out_room(AP_HDR_SIZE + want);
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
		ag_out_add(AP_HDR_SIZE + (size_t)r);
		c->window -= (uint64_t)r;
	}
}

/* Gives aasd back credit for n bytes of stdin the process took (or that
 * were dropped), so it may send more (aproto.h, flow control). */
static void
stdin_credit(struct ag_chan *c, size_t n)
{
	struct ap_out o = { ag_scratch, 0, 0 };

	if (n == 0 || c->abandoned)
		return;
	ap_put_u64(&o, AP_TAG_SIZE, n);
	ag_send_frame(AP_T_WINDOW, 0, c->id, o.buf, o.len);
}

void
ag_exec_write_stdin(struct ag_chan *c)
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
			ag_close_fd(&c->in_fd);
			break;
		}
		c->stdin_off += (size_t)w;
		taken += (size_t)w;
	}
	stdin_credit(c, taken + (c->stdin_len - c->stdin_off));
	c->stdin_off = c->stdin_len = 0;
	if (c->stdin_fin && !c->pty)
		ag_close_fd(&c->in_fd);
}

static void
on_child(pid_t pid, int status)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		struct ag_chan *c = ag_chans[i];

		if (c == NULL || c->kind != AG_CH_EXEC || c->pid != pid || c->exited)
			continue;
		c->exited = 1;
		c->status = status;
		c->term_at = c->kill_at = 0;
		c->drain_at = gsys_now_ms() + AP_DRAIN_MS;
		return;
	}
}

void
ag_reap(int sfd)
{
	struct signalfd_siginfo si;
	int status;
	pid_t pid;

	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		on_child(pid, status);
}

void
ag_exec_timers(long long now)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		struct ag_chan *c = ag_chans[i];

		if (c == NULL || c->kind != AG_CH_EXEC)
			continue;
		if (c->term_at > 0 && now >= c->term_at) {
			c->term_at = 0;
			c->timed_out = 1;
			ag_group_kill(c->pid, SIGTERM);
			ag_group_kill(c->pid, SIGCONT);
			c->kill_at = now + AP_KILL_GRACE_S * 1000;
		}
		if (c->kill_at > 0 && now >= c->kill_at) {
			c->kill_at = 0;
			ag_group_kill(c->pid, SIGKILL);
		}
		if (c->exited && c->drain_at > 0 && now >= c->drain_at) {
			/* Output held back by the window is not given up on: only a
			 * pipe that stays open with nothing to read is. */
			if (!ag_exec_may_read(c) && (c->fd[0] >= 0 || c->fd[1] >= 0)) {
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

long long
ag_exec_next_timer(void)
{
	long long t = 0;

	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		const struct ag_chan *c = ag_chans[i];
		long long v[3];

		if (c == NULL || c->kind != AG_CH_EXEC)
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

/* STDIN on c: queued (at most AP_STDIN_MAX waiting) and written while the
 * process takes it; dropped, and credited, when it has no stdin. */
static void
exec_stdin(struct ag_chan *c, const struct ap_hdr *h, const unsigned char *p)
{
	if (c->stdin_fin) {
		ag_chan_fail(c, EINVAL, "stdin already closed");
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
			ag_chan_fail(c, ENOBUFS, "more than AP_STDIN_MAX bytes of stdin waiting");
			return;
		}
		if (c->stdin_buf == NULL) {
			c->stdin_buf = malloc(AP_STDIN_MAX);
			if (c->stdin_buf == NULL) {
				ag_chan_fail(c, ENOMEM, "out of memory");
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
	ag_exec_write_stdin(c);
}

/* RESIZE of c's terminal; a size out of bounds is ignored. */
static void
exec_resize(struct ag_chan *c, size_t nf)
{
	const struct ap_field *fr = ap_find(ag_fields, nf, AP_TAG_ROWS);
	const struct ap_field *fc = ap_find(ag_fields, nf, AP_TAG_COLS);
	struct winsize ws;

	if (!c->pty || c->fd[0] < 0 || fr == NULL || fc == NULL || ap_u32(fr) == 0 ||
	    ap_u32(fc) == 0 || ap_u32(fr) > AG_PTY_MAX_DIM || ap_u32(fc) > AG_PTY_MAX_DIM)
		return;
	memset(&ws, 0, sizeof(ws));
	ws.ws_row = (unsigned short)ap_u32(fr);
	ws.ws_col = (unsigned short)ap_u32(fc);
	ioctl(c->fd[0], TIOCSWINSZ, &ws);
}

void
ag_exec_frame(struct ag_chan *c, const struct ap_hdr *h, const unsigned char *p, size_t nf)
{
	const struct ap_field *f;

	switch (h->type) {
	case AP_T_STDIN:
		exec_stdin(c, h, p);
		return;
	case AP_T_SIGNAL:
		f = ap_find(ag_fields, nf, AP_TAG_SIGNAL);
		if (f != NULL && valid_signal(ap_u32(f)))
			ag_group_kill(c->pid, (int)ap_u32(f));
		return;
	case AP_T_RESIZE:
		exec_resize(c, nf);
		return;
	default:
		ag_chan_fail(c, EINVAL, "unexpected frame on a command's channel");
	}
}

void
ag_signal_new(uint32_t id, size_t nf)
{
	const struct ap_field *fp = ap_find(ag_fields, nf, AP_TAG_PID);
	const struct ap_field *fs = ap_find(ag_fields, nf, AP_TAG_SIGNAL);
	pid_t pid;
	uint32_t sig;

	if (fp == NULL || fs == NULL || !valid_signal(ap_u32(fs))) {
		ag_send_result(id, EINVAL, "SIGNAL needs PID and a signal number");
		return;
	}
	pid = (pid_t)ap_u32(fp);
	sig = ap_u32(fs);
	if (ap_u32(fp) > INT_MAX || !group_known(pid)) {
		ag_send_result(id, EPERM, "not a process group this agent started");
		return;
	}
	if (ag_group_kill(pid, (int)sig) < 0) {
		ag_send_result(id, errno, "kill: %s", strerror(errno));
		return;
	}
	ag_send_result(id, 0, NULL);
}
