/* pty_sess.c - one terminal session over its upgraded socket.
 *
 * The upgrade hands the socket to a thread of its own that reads client
 * frames into terminal input, resizes and pings, while a second thread
 * relays the terminal's output as binary frames. Whoever ends it first
 * (the shell's exit, the client's close, a protocol error, idleness, the
 * sandbox ending) records why; the closing frame says so. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <jansson.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"
#include "server/pty_int.h"
#include "service/app.h"
#include "vmm/guest.h"

#define PTY_POLL_MS 200        /* how often the threads look at the stop flag */
#define PTY_SEND_TIMEOUT_S 30  /* a client that takes no output this long is gone */
#define PTY_END_GRACE_MS 10000 /* for the end's notice after the guest connection failed */

/* Records why the session ends (the first reason wins) and stops it. */
void
pty_sess_end(struct pty_sess *s, int code, const char *reason)
{
	pthread_mutex_lock(&s->wlock);
	if (s->end_code == 0) {
		s->end_code = code;
		fmt_cut(s->end_reason, sizeof(s->end_reason), "%s", reason);
	}
	pthread_mutex_unlock(&s->wlock);
	atomic_store(&s->stop, 1);
}

static int
send_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* One server frame; a failed write ends the session. */
static int
sess_send(struct pty_sess *s, enum ws_op op, const void *data, size_t len)
{
	size_t cap = len + WS_MAX_HEADER, n;
	uint8_t *f = malloc(cap);
	int rc = -1;

	if (f == NULL)
		goto out;
	n = ws_encode(op, data, len, f, cap);
	pthread_mutex_lock(&s->wlock);
	if (n > 0 && !s->close_sent)
		rc = send_all(s->fd, f, n);
	pthread_mutex_unlock(&s->wlock);
out:
	free(f);
	if (rc < 0)
		pty_sess_end(s, WS_CLOSE_GOING_AWAY, "client gone");
	return rc;
}

/* The closing frame, once. */
static void
sess_send_close(struct pty_sess *s)
{
	uint8_t f[WS_MAX_HEADER + WS_MAX_CONTROL];
	size_t n;

	pthread_mutex_lock(&s->wlock);
	if (!s->close_sent) {
		n = ws_encode_close(s->end_code ? s->end_code : WS_CLOSE_NORMAL, s->end_reason, f,
		    sizeof(f));
		if (n > 0)
			(void)send_all(s->fd, f, n);
		s->close_sent = 1;
	}
	pthread_mutex_unlock(&s->wlock);
}

/* The terminal's output to the client, until the shell ends or the
 * session stops. */
static void *
sess_output(void *arg)
{
	struct pty_sess *s = arg;
	struct err e;

	while (!atomic_load(&s->stop)) {
		const char *data = NULL;
		size_t len = 0;
		int code = 0, rc;

		err_clear(&e);
		rc = guest_pty_read(s->g, clock_ms() + 1000, &s->stop, &data, &len, &code, &e);
		if (rc == 1 && len > 0) {
			atomic_store(&s->last_ms, clock_ms());
			(void)sess_send(s, WS_OP_BINARY, data, len);
		} else if (rc == 2) {
			char why[32];
			fmt_cut(why, sizeof(why), "exit %d", code);
			pty_sess_end(s, WS_CLOSE_NORMAL, why);
		} else if (rc < 0) {
			/* A destroy closes the agent connection before the
			 * sandbox's end is announced (pty_close_sandbox), which
			 * names the reason better: give it a moment. */
			for (int i = 0;
			     i < PTY_END_GRACE_MS / PTY_POLL_MS && !atomic_load(&s->stop); i++)
				nanosleep(&(struct timespec){ .tv_nsec = PTY_POLL_MS * 1000000L },
				    NULL);
			log_warn("pty: sandbox %s: %s", s->sandbox_id, e.msg);
			pty_sess_end(s, WS_CLOSE_ERROR, "sandbox unavailable");
		}
	}
	return NULL;
}

/* A text message: a control message ({"type":"resize",...}) or input. */
static void
sess_text(struct pty_sess *s, const struct ws_msg *m)
{
	json_t *j = m->len > 0 && m->data[0] == '{' ?
	    json_loadb((const char *)m->data, m->len, 0, NULL) :
	    NULL;
	const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;
	struct err e;

	err_clear(&e);
	if (type == NULL) {
		if (guest_pty_write(s->g, m->data, m->len, &e) < 0)
			pty_sess_end(s, WS_CLOSE_ERROR, "sandbox unavailable");
	} else if (strcmp(type, "resize") == 0) {
		json_int_t r = json_integer_value(json_object_get(j, "rows"));
		json_int_t c = json_integer_value(json_object_get(j, "cols"));

		if (r < 1 || c < 1 || r > GUEST_PTY_MAX_DIM || c > GUEST_PTY_MAX_DIM)
			pty_sess_end(s, WS_CLOSE_POLICY, "resize: rows and cols from 1 to 1000");
		else if (guest_pty_resize(s->g, (unsigned)r, (unsigned)c, &e) < 0)
			pty_sess_end(s, WS_CLOSE_ERROR, "sandbox unavailable");
	} else {
		pty_sess_end(s, WS_CLOSE_POLICY, "unknown message type");
	}
	json_decref(j);
}

static int
sess_messages(struct pty_sess *s)
{
	struct ws_msg m;
	int code = 0, rc;
	struct err e;

	while ((rc = ws_rx_next(s->rx, &m, &code)) == 1 && !atomic_load(&s->stop)) {
		atomic_store(&s->last_ms, clock_ms());
		err_clear(&e);
		switch (m.op) {
		case WS_OP_BINARY:
			if (guest_pty_write(s->g, m.data, m.len, &e) < 0)
				pty_sess_end(s, WS_CLOSE_ERROR, "sandbox unavailable");
			break;
		case WS_OP_TEXT:
			sess_text(s, &m);
			break;
		case WS_OP_PING:
			(void)sess_send(s, WS_OP_PONG, m.data, m.len);
			break;
		case WS_OP_CLOSE:
			pty_sess_end(s, WS_CLOSE_NORMAL, "closed by the client");
			break;
		default:
			break;
		}
	}
	if (rc < 0)
		pty_sess_end(s, code, "protocol error");
	return rc;
}

static void
hub_remove(struct pty_sess *s)
{
	struct pty_hub *p = s->hub;

	pthread_mutex_lock(&p->lock);
	for (struct pty_sess **pp = &p->sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	p->n_open--;
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
}

static void
sess_free(struct pty_sess *s)
{
	if (s == NULL)
		return;
	guest_pty_free(s->g);
	ws_rx_free(s->rx);
	pthread_mutex_destroy(&s->wlock);
	free(s);
}

/* The client's frames, until the session stops; then the teardown. */
static void *
sess_main(void *arg)
{
	struct pty_sess *s = arg;
	long long idle_ms = (long long)s->hub->app->cfg.pty_idle_s * 1000;
	pthread_t out;
	int have_out = pthread_create(&out, NULL, sess_output, s) == 0;

	if (!have_out)
		pty_sess_end(s, WS_CLOSE_ERROR, "out of threads");
	while (!atomic_load(&s->stop)) {
		struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
		int n = poll(&pfd, 1, PTY_POLL_MS);

		if (clock_ms() - atomic_load(&s->last_ms) > idle_ms) {
			pty_sess_end(s, WS_CLOSE_NORMAL, "idle (AAS_PTY_IDLE_S)");
			break;
		}
		if (n <= 0)
			continue;
		uint8_t buf[16384];
		size_t room = ws_rx_room(s->rx);
		ssize_t k = recv(s->fd, buf, room < sizeof(buf) ? room : sizeof(buf), 0);

		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0) {
			pty_sess_end(s, WS_CLOSE_GOING_AWAY, "client gone");
			break;
		}
		(void)ws_rx_push(s->rx, buf, (size_t)k);
		(void)sess_messages(s);
	}
	if (have_out)
		pthread_join(out, NULL);
	sess_send_close(s);
	log_info("pty: sandbox %s closed: %d %s", s->sandbox_id, s->end_code, s->end_reason);
	http_upgrade_close(s->u);
	hub_remove(s);
	sess_free(s); /* closing the channel hangs the shell up */
	return NULL;
}

/* The socket is ours (on an HTTP thread: only start the thread). */
void
pty_sess_upgraded(void *ctx, int fd, const char *extra, size_t extra_len, struct http_upgrade *u)
{
	struct pty_sess *s = ctx;
	struct pty_hub *p = s->hub;
	struct timeval tv = { .tv_sec = PTY_SEND_TIMEOUT_S };
	int fl = fcntl(fd, F_GETFL);
	pthread_attr_t attr;
	pthread_t t;

	s->fd = fd;
	s->u = u;
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (extra_len > 0 && ws_rx_push(s->rx, extra, extra_len) != extra_len)
		pty_sess_end(s, WS_CLOSE_TOO_BIG, "frame too large");
	atomic_store(&s->last_ms, clock_ms());
	pthread_mutex_lock(&p->lock);
	s->next = p->sessions;
	p->sessions = s;
	if (p->stopping)
		pty_sess_end(s, WS_CLOSE_GOING_AWAY, "server stopping");
	pthread_mutex_unlock(&p->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, sess_main, s) != 0) {
		log_warn("pty: no thread for a session");
		pty_sess_end(s, WS_CLOSE_ERROR, "out of threads");
		sess_send_close(s);
		http_upgrade_close(u);
		hub_remove(s);
		sess_free(s);
	}
	pthread_attr_destroy(&attr);
}

/* The upgrade never happened: the slot and the shell go. */
void
pty_sess_drop(void *ctx)
{
	struct pty_sess *s = ctx;

	pthread_mutex_lock(&s->hub->lock);
	s->hub->n_open--;
	pthread_cond_broadcast(&s->hub->gone);
	pthread_mutex_unlock(&s->hub->lock);
	sess_free(s);
}

static void
close_matching(struct pty_hub *p, const char *sandbox_id, const char *account, const char *why)
{
	pthread_mutex_lock(&p->lock);
	for (struct pty_sess *s = p->sessions; s; s = s->next)
		if ((sandbox_id && strcmp(s->sandbox_id, sandbox_id) == 0) ||
		    (account && strcmp(s->account, account) == 0))
			pty_sess_end(s, WS_CLOSE_GOING_AWAY, why);
	pthread_mutex_unlock(&p->lock);
}

void
pty_close_sandbox(struct pty_hub *p, const char *sandbox_id)
{
	if (p)
		close_matching(p, sandbox_id, NULL, "sandbox ended");
}

void
pty_close_account(struct pty_hub *p, const char *account_id)
{
	if (p)
		close_matching(p, NULL, account_id, "account disabled");
}
