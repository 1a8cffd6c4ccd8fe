/* proxy.c - streaming reverse proxy (see proxy.h).
 *
 * Locking: each request (struct px) has one mutex guarding its buffers and
 * flags. The HTTP thread parks (suspends) the connection under that mutex
 * when it must wait (buffer full, response not ready, no data yet), and the
 * proxy thread resumes it after changing what it waited for - the pattern
 * sse.c uses. */
#include "server/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/tally.h"
#include "server/proxy_parse.h"
#include "sandbox/preview_cookie.h"

#define PX_BUF (256 * 1024)     /* each direction's buffer */
#define PX_IO (32 * 1024)       /* one read or write */
#define PX_HEAD_MAX (64 * 1024) /* request or response head */
#define PX_MAX_HEADERS PXP_MAX_HEADERS
#define PX_SLICE_MS 250 /* how often waits look at flags */
#define PX_CONNECT_TIMEOUT_MS 5000
#define PX_QUERY_MAX 8192
#define PX_STACK (256 * 1024)
#define PX_RETRY_AFTER "2" /* seconds, on 429 and 503 */

enum park { PARK_NONE, PARK_UPLOAD, PARK_HEAD, PARK_BODY };

struct ring {
	char *buf;
	size_t start, len;
};

struct proxy {
	struct proxy_config cfg;
	char scheme[8];
	pthread_mutex_t lock;
	pthread_cond_t idle; /* signalled when a thread ends */
	size_t active;
	atomic_int stopping;
	struct px *all; /* every live request, for shutdown */
	/* Requests admitted per sandbox ("s:<id>") and per account
	 * ("a:<id>"); each counted request also holds one of the max_conns
	 * thread slots, so the table never needs more than 2 * max_conns
	 * names. */
	struct tally *held;
	pthread_mutex_t closing; /* one proxy_close_* at a time */
};

struct px {
	struct proxy *p;
	struct px *next, *prev;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;
	struct MHD_Connection *conn; /* NULL once the request ended */
	enum park parked;
	atomic_int closed; /* proxy_close_*, or the client left: end both sides */

	/* Whose preview (set with `counted`, under the proxy's lock). */
	char sandbox_id[PREVIEW_ID_MAX + 1];
	char account_id[PREVIEW_ACCOUNT_MAX + 1];
	int counted;
	struct px *close_next; /* on a proxy_close_* list (under p->closing) */

	/* The request, captured when its headers arrived. */
	char method[16];
	char *head; /* request head for the upstream */
	size_t head_len;
	char *host, *token, *cookie, *query;
	int req_body, req_chunked, want_upgrade;

	/* client -> upstream */
	struct ring in;
	int in_done;

	/* The answer: an error page, or the upstream's head. */
	int head_ready;
	int status;
	char *page; /* error page (HTML, or plain text) */
	int page_plain, retry_after;
	char *rhead;                  /* upstream head, split in place */
	size_t rhead_len, rhead_used; /* bytes read; bytes that are head */
	const char *hname[PX_MAX_HEADERS], *hval[PX_MAX_HEADERS];
	size_t n_hdr;
	enum pxp_framing framing;
	long long length;
	int upgrade;
	char set_cookie[320];

	/* upstream -> client */
	struct ring out;
	int out_done, out_err;
	int client_gone;

	/* After a 101. */
	int upgraded;
	MHD_socket csock;
	struct MHD_UpgradeResponseHandle *urh;
	char *extra;
	size_t extra_len;

	int ufd;
	long long last_io;
};

/* ---- small pieces ---- */

static size_t
ring_put(struct ring *r, const char *data, size_t n)
{
	size_t done = 0;

	while (done < n && r->len < PX_BUF) {
		size_t end = (r->start + r->len) % PX_BUF;
		size_t room = end >= r->start ? PX_BUF - end : r->start - end;
		size_t k = n - done < room ? n - done : room;

		if (k > PX_BUF - r->len)
			k = PX_BUF - r->len;
		memcpy(r->buf + end, data + done, k);
		r->len += k;
		done += k;
	}
	return done;
}

static size_t
ring_get(struct ring *r, char *out, size_t n)
{
	size_t done = 0;

	while (done < n && r->len > 0) {
		size_t k = PX_BUF - r->start;
		if (k > r->len)
			k = r->len;
		if (k > n - done)
			k = n - done;
		memcpy(out + done, r->buf + r->start, k);
		r->start = (r->start + k) % PX_BUF;
		r->len -= k;
		done += k;
	}
	if (r->len == 0)
		r->start = 0;
	return done;
}

static int
stopping(struct px *x)
{
	return atomic_load(&x->p->stopping) || atomic_load(&x->closed);
}

/* With x->lock held: the connection to resume if it is parked for one of
 * `mask` (bit per enum park). */
static struct MHD_Connection *
take_park(struct px *x, unsigned mask)
{
	if (x->parked == PARK_NONE || !(mask & (1u << x->parked)) || x->conn == NULL)
		return NULL;
	x->parked = PARK_NONE;
	return x->conn;
}

#define ANY_PARK ((1u << PARK_UPLOAD) | (1u << PARK_HEAD) | (1u << PARK_BODY))

static void
resume(struct MHD_Connection *c)
{
	if (c)
		MHD_resume_connection(c);
}

/* With x->lock held. While the HTTP side is parked, libmicrohttpd does
 * not watch the client's socket, so a client that went away would keep
 * its place (and its sandbox's and account's count) until the idle
 * timeout. A peek, which takes no bytes, sees the end; the request then
 * ends as a closed one does. The connection to resume, or NULL. */
static struct MHD_Connection *
client_check_locked(struct px *x)
{
	const union MHD_ConnectionInfo *ci;
	char b;
	ssize_t r;

	if (x->parked == PARK_NONE || x->conn == NULL || atomic_load(&x->closed))
		return NULL;
	ci = MHD_get_connection_info(x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci == NULL)
		return NULL;
	r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
		return NULL;
	atomic_store(&x->closed, 1);
	pthread_cond_broadcast(&x->cond);
	return take_park(x, ANY_PARK);
}

static void
client_check(struct px *x)
{
	struct MHD_Connection *c;

	pthread_mutex_lock(&x->lock);
	c = client_check_locked(x);
	pthread_mutex_unlock(&x->lock);
	resume(c);
}

static void
timed_wait(struct px *x)
{
	struct MHD_Connection *c;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += PX_SLICE_MS * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&x->cond, &x->lock, &ts);
	if ((c = client_check_locked(x)) != NULL) {
		/* Callers look at their conditions again after this. */
		pthread_mutex_unlock(&x->lock);
		resume(c);
		pthread_mutex_lock(&x->lock);
	}
}

static int
idle_expired(struct px *x)
{
	return clock_ms() - x->last_io > (long long)x->p->cfg.idle_timeout_s * 1000;
}

static void
px_unref(struct px *x)
{
	struct proxy *p = x->p;
	int last;

	pthread_mutex_lock(&x->lock);
	last = --x->refs == 0;
	pthread_mutex_unlock(&x->lock);
	if (!last)
		return;
	pthread_mutex_lock(&p->lock);
	if (x->prev)
		x->prev->next = x->next;
	else
		p->all = x->next;
	if (x->next)
		x->next->prev = x->prev;
	pthread_mutex_unlock(&p->lock);
	if (x->ufd >= 0)
		close(x->ufd);
	free(x->in.buf);
	free(x->out.buf);
	free(x->head);
	free(x->host);
	free(x->token);
	free(x->cookie);
	free(x->query);
	free(x->page);
	free(x->rhead);
	free(x->extra);
	pthread_cond_destroy(&x->cond);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* ---- the answer ---- */

static void
html_escape(const char *in, char *out, size_t n)
{
	size_t j = 0;

	for (const char *p = in; *p && j + 6 < n; p++) {
		const char *rep = *p == '<' ? "&lt;" :
		    *p == '>'               ? "&gt;" :
		    *p == '&'               ? "&amp;" :
		    *p == '"'               ? "&quot;" :
					      NULL;
		if (rep) {
			memcpy(out + j, rep, strlen(rep));
			j += strlen(rep);
		} else {
			out[j++] = *p;
		}
	}
	out[j] = '\0';
}

static const char *
reason(int status)
{
	switch (status) {
	case 401:
		return "Private preview";
	case 403:
		return "Not allowed";
	case 404:
		return "No such preview";
	case 414:
		return "Address too long";
	case 429:
		return "Too many preview requests";
	case 431:
		return "Request headers too large";
	case 502:
		return "Nothing answering yet";
	case 503:
		return "Not available right now";
	case 504:
		return "The sandbox did not answer in time";
	default:
		return "Preview error";
	}
}

/* Decides the answer (an HTML error page, or with `plain` a text one
 * with Retry-After) and wakes the HTTP side. */
static void
px_answer(struct px *x, int status, int plain, const char *message)
{
	char msg[512], *page = malloc(2048);
	struct MHD_Connection *c;

	if (page && plain) {
		snprintf(page, 2048, "%s\n", message);
	} else if (page) {
		html_escape(message, msg, sizeof(msg));
		snprintf(page, 2048,
		    "<!doctype html>\n<html><head><meta charset=\"utf-8\">"
		    "<title>%d %s</title></head>\n<body style=\"font-family:sans-serif;"
		    "max-width:40em;margin:4em auto;line-height:1.5\">\n<h1>%s</h1>\n<p>%s</p>\n"
		    "<p style=\"color:#777\">aas sandbox preview</p>\n</body></html>\n",
		    status, reason(status), reason(status), msg);
	}
	pthread_mutex_lock(&x->lock);
	if (!x->head_ready) {
		x->status = status;
		x->page = page;
		x->page_plain = plain;
		x->retry_after = status == 429 || status == 503;
		page = NULL;
		x->head_ready = 1;
	} else {
		/* Too late for a page: the response is under way. */
		x->out_err = 1;
	}
	c = take_park(x, ANY_PARK);
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	free(page);
	resume(c);
}

static void
px_fail(struct px *x, int status, const char *message)
{
	px_answer(x, status, 0, message);
}

/* The upstream closed (or reset) without an answer: the resolver's
 * side says why (nothing listening, loopback only, a server that closed,
 * a paused sandbox). */
static void
px_fail_unanswered(struct px *x, const struct preview_route *route)
{
	char msg[320];

	snprintf(msg, sizeof(msg),
	    "Nothing is answering on this port inside the sandbox yet. Start a server"
	    " listening on 0.0.0.0, then reload.");
	if (x->p->cfg.explain)
		x->p->cfg.explain(x->p->cfg.ctx, route, msg, sizeof(msg));
	px_fail(x, 502, msg);
}

/* ---- upstream I/O (proxy thread) ---- */

static int
connect_upstream(const char *address, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	struct pollfd pf;
	int err = 0;
	socklen_t len = sizeof(err);

	if (fd < 0)
		return -1;
	if (inet_pton(AF_INET, address, &sa.sin_addr) != 1)
		goto fail;
	sa.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno != EINPROGRESS)
			goto fail;
		pf.fd = fd;
		pf.events = POLLOUT;
		if (poll(&pf, 1, PX_CONNECT_TIMEOUT_MS) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)
			goto fail;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
fail:
	close(fd);
	return -1;
}

/* Writes all of buf to a non-blocking fd; -1 on error, stop or idle. */
static int
send_all(struct px *x, int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			buf += w;
			n -= (size_t)w;
			x->last_io = clock_ms();
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		struct pollfd pf = { fd, POLLOUT, 0 };
		if (poll(&pf, 1, PX_SLICE_MS) < 0 && errno != EINTR)
			return -1;
		client_check(x);
		if (stopping(x) || x->client_gone || idle_expired(x))
			return -1;
	}
	return 0;
}

/* Reads what is there (waiting in slices): >0 bytes, 0 at EOF, -1 on
 * error, -2 when stopped or idle too long. */
static ssize_t
recv_some(struct px *x, int fd, char *buf, size_t n)
{
	for (;;) {
		ssize_t r = recv(fd, buf, n, MSG_DONTWAIT);
		if (r >= 0) {
			if (r > 0)
				x->last_io = clock_ms();
			return r;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, PX_SLICE_MS) < 0 && errno != EINTR)
			return -1;
		client_check(x);
		if (stopping(x) || x->client_gone || idle_expired(x))
			return -2;
	}
}

/* Client body to the upstream, re-chunked when the client chunked it. */
static int
pump_request(struct px *x)
{
	char *buf = malloc(PX_IO + 16);
	int rc = -1;

	if (buf == NULL)
		return -1;
	for (;;) {
		struct MHD_Connection *c;
		size_t n;
		int done;

		pthread_mutex_lock(&x->lock);
		while (x->in.len == 0 && !x->in_done && !x->client_gone && !stopping(x) &&
		    !idle_expired(x))
			timed_wait(x);
		if (x->client_gone || stopping(x) || (x->in.len == 0 && !x->in_done)) {
			pthread_mutex_unlock(&x->lock);
			goto out;
		}
		n = ring_get(&x->in, buf, PX_IO);
		done = x->in_done && x->in.len == 0;
		c = take_park(x, 1u << PARK_UPLOAD);
		pthread_mutex_unlock(&x->lock);
		resume(c);
		if (n > 0) {
			x->last_io = clock_ms();
			if (x->req_chunked) {
				char size[24];
				int l = snprintf(size, sizeof(size), "%zx\r\n", n);
				if (send_all(x, x->ufd, size, (size_t)l) < 0 ||
				    send_all(x, x->ufd, buf, n) < 0 ||
				    send_all(x, x->ufd, "\r\n", 2) < 0)
					goto out;
			} else if (send_all(x, x->ufd, buf, n) < 0) {
				goto out;
			}
		}
		if (done) {
			if (x->req_chunked && send_all(x, x->ufd, "0\r\n\r\n", 5) < 0)
				goto out;
			break;
		}
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

static int
header_is(const char *name, const char *want)
{
	return strcasecmp(name, want) == 0;
}

/* Splits the upstream head (in x->rhead, ending at rhead_used) into the
 * status and headers, and picks the body framing. */
/* A sandbox's cookies stay on its own preview host: a Set-Cookie whose
 * Domain names another (the parent preview domain above all) is left out,
 * the others lose their Domain attribute (sandbox/preview_cookie.h). The
 * values point into x->rhead, which the proxy owns; a kept value is never
 * longer than it was, so it is rewritten in place. */
static int
filter_cookies(struct px *x)
{
	size_t k = 0;

	for (size_t i = 0; i < x->n_hdr; i++) {
		char *v = (char *)x->hval[i];
		size_t n = strlen(v) + 1;
		char *tmp;
		enum pvc_verdict d = PVC_KEEP;

		if (strcasecmp(x->hname[i], "set-cookie") == 0) {
			if ((tmp = malloc(n)) == NULL)
				return -1;
			d = pvc_filter(v, x->host, tmp, n);
			if (d == PVC_KEEP)
				memcpy(v, tmp, strlen(tmp) + 1);
			free(tmp);
			if (d == PVC_TOO_LONG)
				return -1;
			if (d == PVC_DROP)
				log_debug("preview %s: a Set-Cookie for another domain left out",
				    x->host ? x->host : "?");
		}
		if (d == PVC_KEEP) {
			x->hname[k] = x->hname[i];
			x->hval[k++] = x->hval[i];
		}
	}
	x->n_hdr = k;
	return 0;
}

static int
parse_head(struct px *x)
{
	struct pxp_resp r;

	if (pxp_parse_head(x->rhead, x->rhead_used, x->method, x->want_upgrade, &r) < 0)
		return -1;
	x->status = r.status;
	x->n_hdr = r.n_hdr;
	memcpy(x->hname, r.hname, r.n_hdr * sizeof(r.hname[0]));
	memcpy(x->hval, r.hval, r.n_hdr * sizeof(r.hval[0]));
	x->framing = r.framing;
	x->length = r.length;
	x->upgrade = r.upgrade;
	return filter_cookies(x);
}

/* 0 with the head parsed; otherwise the status to answer. */
static int
read_head(struct px *x)
{
	x->rhead = malloc(PX_HEAD_MAX + 1);
	if (x->rhead == NULL)
		return 500;
	for (;;) {
		ssize_t r = recv_some(x, x->ufd, x->rhead + x->rhead_len,
		    PX_HEAD_MAX - x->rhead_len);
		char *end;

		if (r == -2)
			return idle_expired(x) ? 504 : 499;
		if (r < 0 || (r == 0 && x->rhead_len == 0))
			return 502; /* closed without a word: nothing listens */
		if (r == 0)
			return 502;
		x->rhead_len += (size_t)r;
		x->rhead[x->rhead_len] = '\0';
		end = strstr(x->rhead, "\r\n\r\n");
		while (end) {
			x->rhead_used = (size_t)(end - x->rhead) + 4;
			if (parse_head(x) < 0)
				return 502;
			if (x->status >= 200 || x->status == 101)
				return 0;
			/* An interim answer (100 Continue, 103): not ours to pass on. */
			memmove(x->rhead, x->rhead + x->rhead_used, x->rhead_len - x->rhead_used);
			x->rhead_len -= x->rhead_used;
			x->rhead[x->rhead_len] = '\0';
			x->rhead_used = 0;
			x->n_hdr = 0;
			x->length = -1;
			end = strstr(x->rhead, "\r\n\r\n");
		}
		if (x->rhead_len >= PX_HEAD_MAX)
			return 502;
	}
}

/* Hands decoded body bytes to the client side, waiting while its buffer
 * is full. */
static int
put_out(struct px *x, const char *data, size_t n)
{
	while (n > 0) {
		struct MHD_Connection *c;
		size_t k;

		pthread_mutex_lock(&x->lock);
		while (x->out.len >= PX_BUF && !x->client_gone && !stopping(x) && !idle_expired(x))
			timed_wait(x);
		if (x->client_gone || stopping(x) || x->out.len >= PX_BUF) {
			pthread_mutex_unlock(&x->lock);
			return -1;
		}
		k = ring_put(&x->out, data, n);
		c = take_park(x, 1u << PARK_BODY);
		pthread_mutex_unlock(&x->lock);
		resume(c);
		x->last_io = clock_ms();
		data += k;
		n -= k;
	}
	return 0;
}

static int
put_out_cb(void *cls, const char *data, size_t n)
{
	return put_out(cls, data, n);
}

/* Feeds upstream bytes through the framing; 1 when the body is complete,
 * 0 for more, -1 on a malformed body or a client gone. */
static int
feed(struct px *x, struct pxp_dechunk *d, const char *buf, size_t n)
{
	if (x->framing == PXP_FRAME_EOF)
		return put_out(x, buf, n) < 0 ? -1 : 0;
	if (x->framing == PXP_FRAME_LENGTH) {
		size_t k = (unsigned long long)n < d->left ? n : (size_t)d->left;
		if (put_out(x, buf, k) < 0)
			return -1;
		d->left -= k;
		return d->left == 0;
	}
	return pxp_dechunk(d, buf, n, put_out_cb, x);
}

static void
pump_response(struct px *x)
{
	struct pxp_dechunk d = { PXP_CH_SIZE, 0, 0 };
	char *buf = NULL;
	int done = 0;
	struct MHD_Connection *c;

	if (x->framing == PXP_FRAME_NONE)
		goto finish;
	if (x->framing == PXP_FRAME_LENGTH)
		d.left = (unsigned long long)x->length;
	if (x->framing == PXP_FRAME_LENGTH && d.left == 0) {
		done = 1;
		goto finish;
	}
	done = feed(x, &d, x->rhead + x->rhead_used, x->rhead_len - x->rhead_used);
	buf = malloc(PX_IO);
	while (done == 0 && buf) {
		ssize_t r = recv_some(x, x->ufd, buf, PX_IO);
		if (r == 0) {
			done = x->framing == PXP_FRAME_EOF ? 1 : -1;
			break;
		}
		if (r < 0) {
			done = -1;
			break;
		}
		done = feed(x, &d, buf, (size_t)r);
	}
finish:
	free(buf);
	pthread_mutex_lock(&x->lock);
	if (x->framing == PXP_FRAME_NONE || done == 1)
		x->out_done = 1;
	else
		x->out_err = 1;
	c = take_park(x, 1u << PARK_BODY);
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	resume(c);
}

/* After a 101: bytes both ways until either side closes or idles. */
static void
pump_upgraded(struct px *x)
{
	char *buf = malloc(PX_IO);
	int cfd;

	pthread_mutex_lock(&x->lock);
	while (!x->upgraded && !x->client_gone && !stopping(x) && !idle_expired(x))
		timed_wait(x);
	cfd = x->upgraded ? x->csock : -1;
	pthread_mutex_unlock(&x->lock);
	if (cfd < 0 || buf == NULL)
		goto out;
	x->last_io = clock_ms();
	/* What either side sent early belongs to the other. */
	if (send_all(x, x->ufd, x->extra ? x->extra : "", x->extra_len) < 0 ||
	    send_all(x, cfd, x->rhead + x->rhead_used, x->rhead_len - x->rhead_used) < 0)
		goto out;
	for (;;) {
		struct pollfd pf[2] = { { cfd, POLLIN, 0 }, { x->ufd, POLLIN, 0 } };
		int n = poll(pf, 2, PX_SLICE_MS);

		if (n < 0 && errno != EINTR)
			break;
		if (stopping(x) || idle_expired(x))
			break;
		if (n <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r = recv(pf[i].fd, buf, PX_IO, MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
				goto out;
			if (r > 0) {
				x->last_io = clock_ms();
				if (send_all(x, pf[1 - i].fd, buf, (size_t)r) < 0)
					goto out;
			}
		}
	}
out:
	free(buf);
	pthread_mutex_lock(&x->lock);
	if (x->urh) {
		MHD_upgrade_action(x->urh, MHD_UPGRADE_ACTION_CLOSE);
		x->urh = NULL;
	}
	pthread_mutex_unlock(&x->lock);
}

/* The names a request is counted under in p->held. */
static void
held_names(const char *sandbox_id, const char *account_id, char names[2][TALLY_NAME_MAX + 1])
{
	snprintf(names[0], TALLY_NAME_MAX + 1, "s:%s", sandbox_id);
	snprintf(names[1], TALLY_NAME_MAX + 1, "a:%s", account_id);
}

/* Counts the request against its sandbox's and account's caps; -1 (and
 * the answer given) when either is reached. */
static int
admit(struct px *x, const struct preview_route *route)
{
	struct proxy *p = x->p;
	const long limits[2] = { p->cfg.max_per_sandbox, p->cfg.max_per_account };
	char names[2][TALLY_NAME_MAX + 1], msg[256];
	size_t v = 0;
	int rc;

	held_names(route->sandbox_id, route->account_id, names);
	pthread_mutex_lock(&p->lock);
	rc = tally_take(p->held, (const char *const[]){ names[0], names[1] }, limits, 2, &v);
	if (rc == 0) {
		snprintf(x->sandbox_id, sizeof(x->sandbox_id), "%s", route->sandbox_id);
		snprintf(x->account_id, sizeof(x->account_id), "%s", route->account_id);
		x->counted = 1;
	}
	pthread_mutex_unlock(&p->lock);
	if (rc == 0)
		return 0;
	switch (v) {
	case 0:
		snprintf(msg, sizeof(msg),
		    "Too many preview requests to this sandbox at once: at most %d"
		    " (AAS_MAX_PREVIEW_CONNS_PER_SANDBOX). Retry shortly.",
		    p->cfg.max_per_sandbox);
		px_answer(x, 429, 1, msg);
		break;
	case 1:
		snprintf(msg, sizeof(msg),
		    "Too many preview requests to this account's sandboxes at once: at most %d"
		    " (AAS_MAX_PREVIEW_CONNS_PER_ACCOUNT). Retry shortly.",
		    p->cfg.max_per_account);
		px_answer(x, 429, 1, msg);
		break;
	default:
		px_answer(x, 503, 1, "The preview proxy cannot count this request; retry shortly.");
		break;
	}
	log_info("preview: request to sandbox %s refused (%s)", route->sandbox_id,
	    v == 0     ? "AAS_MAX_PREVIEW_CONNS_PER_SANDBOX" :
		v == 1 ? "AAS_MAX_PREVIEW_CONNS_PER_ACCOUNT" :
			 "table full");
	return -1;
}

static void *
px_main(void *arg)
{
	struct px *x = arg;
	struct proxy *p = x->p;
	struct preview_route route;
	struct preview_ask ask = { x->host, x->token, x->cookie, x->query };
	struct MHD_Connection *c;
	int st;

	memset(&route, 0, sizeof(route));
	p->cfg.resolve(p->cfg.ctx, &ask, &route);
	if (route.status != 0) {
		px_fail(x, route.status, route.message);
		goto out;
	}
	if (admit(x, &route) < 0)
		goto out;
	x->ufd = connect_upstream(route.upstream_address, route.upstream_port);
	if (x->ufd < 0) {
		px_fail(x, 502,
		    "The sandbox's port could not be reached. If the sandbox was"
		    " just destroyed, this preview is gone.");
		goto out;
	}
	x->last_io = clock_ms();
	if (send_all(x, x->ufd, x->head, x->head_len) < 0 || pump_request(x) < 0) {
		if (!x->client_gone)
			px_fail_unanswered(x, &route);
		goto out;
	}
	st = read_head(x);
	if (st == 504)
		px_fail(x, 504, "The server in the sandbox did not answer in time.");
	else if (st != 0)
		px_fail_unanswered(x, &route);
	if (st != 0)
		goto out;
	pthread_mutex_lock(&x->lock);
	snprintf(x->set_cookie, sizeof(x->set_cookie), "%s", route.set_cookie);
	x->head_ready = 1;
	c = take_park(x, 1u << PARK_HEAD);
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	resume(c);
	if (x->upgrade)
		pump_upgraded(x);
	else
		pump_response(x);
out:
	/* The upstream hears the end now, not when the client side lets go. */
	if (x->ufd >= 0)
		shutdown(x->ufd, SHUT_RDWR);
	pthread_mutex_lock(&p->lock);
	if (x->counted) {
		char names[2][TALLY_NAME_MAX + 1];

		held_names(x->sandbox_id, x->account_id, names);
		tally_give(p->held, (const char *const[]){ names[0], names[1] }, 2);
	}
	x->counted = 0;
	pthread_mutex_unlock(&p->lock);
	/* The thread counts as active until its last touch of p: proxy_shutdown
	 * waits for that, and proxy_free may follow it at once. */
	px_unref(x);
	pthread_mutex_lock(&p->lock);
	p->active--;
	pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- HTTP side ---- */

static ssize_t
px_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct px *x = cls;
	ssize_t n;

	(void)pos;
	pthread_mutex_lock(&x->lock);
	n = (ssize_t)ring_get(&x->out, buf, max);
	if (n > 0) {
		pthread_cond_broadcast(&x->cond);
	} else if (x->out_done) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else if (x->out_err || stopping(x)) {
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else {
		x->parked = PARK_BODY;
		MHD_suspend_connection(x->conn);
	}
	pthread_mutex_unlock(&x->lock);
	return n;
}

static void
px_reader_free(void *cls)
{
	px_unref(cls);
}

static void
px_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
    size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct px *x = cls;

	(void)conn;
	(void)con_cls;
	pthread_mutex_lock(&x->lock);
	if (extra_in_size > 0) {
		x->extra = malloc(extra_in_size);
		if (x->extra) {
			memcpy(x->extra, extra_in, extra_in_size);
			x->extra_len = extra_in_size;
		}
	}
	x->csock = sock;
	x->urh = urh;
	x->upgraded = 1;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

static enum MHD_Result
queue_answer(struct px *x, int *status)
{
	struct MHD_Response *r;
	enum MHD_Result rc;
	uint64_t size;

	if (x->page) {
		r = MHD_create_response_from_buffer(strlen(x->page), x->page,
		    MHD_RESPMEM_MUST_COPY);
		if (r == NULL)
			return MHD_NO;
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
		    x->page_plain ? "text/plain; charset=utf-8" : "text/html; charset=utf-8");
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
		if (x->retry_after)
			MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, PX_RETRY_AFTER);
		if (x->status == 401)
			MHD_add_response_header(r, "WWW-Authenticate", "x-aas-preview-token");
	} else if (x->upgrade) {
		r = MHD_create_response_for_upgrade(px_upgraded, x);
		if (r == NULL)
			return MHD_NO;
		for (size_t i = 0; i < x->n_hdr; i++)
			if (!header_is(x->hname[i], "connection"))
				MHD_add_response_header(r, x->hname[i], x->hval[i]);
	} else {
		pthread_mutex_lock(&x->lock);
		x->refs++; /* the response's */
		pthread_mutex_unlock(&x->lock);
		size = x->framing == PXP_FRAME_LENGTH || x->framing == PXP_FRAME_NONE ?
		    (uint64_t)(x->length > 0 ? x->length : 0) :
		    MHD_SIZE_UNKNOWN;
		r = MHD_create_response_from_callback(size, PX_IO, px_reader, x, px_reader_free);
		if (r == NULL) {
			px_unref(x);
			return MHD_NO;
		}
		for (size_t i = 0; i < x->n_hdr; i++)
			if (!pxp_hop_by_hop(x->hname[i]))
				MHD_add_response_header(r, x->hname[i], x->hval[i]);
		if (x->set_cookie[0])
			MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, x->set_cookie);
	}
	*status = x->status;
	rc = MHD_queue_response(x->conn, (unsigned)x->status, r);
	MHD_destroy_response(r);
	return rc;
}

enum MHD_Result
proxy_on_request(struct px *x, const char *upload_data, size_t *upload_data_size, int *status)
{
	if (stopping(x))
		return MHD_NO;
	pthread_mutex_lock(&x->lock);
	if (*upload_data_size > 0) {
		if (x->head_ready || !x->req_body) {
			*upload_data_size = 0; /* answered already: drop the rest */
		} else {
			size_t n = ring_put(&x->in, upload_data, *upload_data_size);
			if (n > 0)
				pthread_cond_broadcast(&x->cond);
			*upload_data_size -= n;
			if (*upload_data_size > 0) {
				x->parked = PARK_UPLOAD;
				MHD_suspend_connection(x->conn);
			}
		}
		pthread_mutex_unlock(&x->lock);
		return MHD_YES;
	}
	if (!x->in_done) {
		x->in_done = 1;
		pthread_cond_broadcast(&x->cond);
	}
	if (!x->head_ready) {
		x->parked = PARK_HEAD;
		MHD_suspend_connection(x->conn);
		pthread_mutex_unlock(&x->lock);
		return MHD_YES;
	}
	pthread_mutex_unlock(&x->lock);
	return queue_answer(x, status);
}

void
proxy_end(struct px *x)
{
	if (x == NULL)
		return;
	pthread_mutex_lock(&x->lock);
	x->client_gone = 1;
	x->conn = NULL;
	x->parked = PARK_NONE;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	px_unref(x);
}

/* ---- request head for the upstream ---- */

struct head_buf {
	struct px *x;
	char *buf;
	size_t len;
	int overflow;
	int chunked; /* the client chunked its body: its Content-Length stays here */
	const char *xff;
};

static void
head_add(struct head_buf *h, const char *a, const char *b, const char *c, const char *d)
{
	const char *parts[4] = { a, b, c, d };

	for (int i = 0; i < 4; i++) {
		size_t l = parts[i] ? strlen(parts[i]) : 0;
		if (h->len + l + 1 > PX_HEAD_MAX) {
			h->overflow = 1;
			return;
		}
		memcpy(h->buf + h->len, parts[i] ? parts[i] : "", l);
		h->len += l;
	}
}

static enum MHD_Result
copy_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct head_buf *h = cls;
	int forward;

	(void)kind;
	if (value == NULL)
		value = "";
	forward = pxp_header_check(key, value);
	if (forward < 0) {
		h->overflow = 1;
		return MHD_NO;
	}
	if (strcasecmp(key, "x-forwarded-for") == 0)
		h->xff = value;
	/* A chunked body goes up re-chunked, so the upstream sees one framing
	 * (a request with both was refused before this; kept as a second
	 * line). */
	if (forward == 0 || (h->chunked && strcasecmp(key, "content-length") == 0))
		return MHD_YES;
	head_add(h, key, ": ", value, "\r\n");
	return MHD_YES;
}

static char *
dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int
build_head(struct px *x, struct MHD_Connection *conn, const char *path, const char *query)
{
	struct head_buf h = { x, malloc(PX_HEAD_MAX), 0, 0, 0, NULL };
	const union MHD_ConnectionInfo *ci;
	const char *conn_hdr, *upgrade_hdr, *te, *cl;
	char ip[INET6_ADDRSTRLEN] = "unknown", q[PX_QUERY_MAX];

	if (h.buf == NULL)
		return -1;
	q[0] = '\0';
	if (query && *query) {
		if (x->p->cfg.rewrite_query)
			x->p->cfg.rewrite_query(query, q, sizeof(q));
		else
			snprintf(q, sizeof(q), "%s", query);
	}
	head_add(&h, x->method, " ", path, q[0] ? "?" : "");
	head_add(&h, q, " HTTP/1.1\r\n", "Host: ", x->host);
	head_add(&h, "\r\n", NULL, NULL, NULL);
	/* One framing to the upstream: a chunked body leaves chunked again,
	 * and never with a Content-Length (see framing_check). */
	te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
	h.chunked = te && strcasestr(te, "chunked") != NULL;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, copy_header, &h);
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr) {
		if (ci->client_addr->sa_family == AF_INET)
			inet_ntop(AF_INET,
			    &((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr,
			    ip, sizeof(ip));
		else if (ci->client_addr->sa_family == AF_INET6)
			inet_ntop(AF_INET6,
			    &((const struct sockaddr_in6 *)(const void *)ci->client_addr)
				 ->sin6_addr,
			    ip, sizeof(ip));
	}
	head_add(&h, "X-Forwarded-For: ", h.xff ? h.xff : "", h.xff ? ", " : "", ip);
	head_add(&h, "\r\nX-Forwarded-Host: ", x->host, "\r\nX-Forwarded-Proto: ", x->p->scheme);
	head_add(&h, "\r\n", NULL, NULL, NULL);
	conn_hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connection");
	upgrade_hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Upgrade");
	x->want_upgrade = conn_hdr && upgrade_hdr && strcasestr(conn_hdr, "upgrade") &&
	    !strpbrk(upgrade_hdr, "\r\n");
	if (x->want_upgrade)
		head_add(&h, "Connection: Upgrade\r\nUpgrade: ", upgrade_hdr, "\r\n", NULL);
	else
		head_add(&h, "Connection: close\r\n", NULL, NULL, NULL);
	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
	if (h.chunked) {
		/* The body arrives de-chunked; it leaves chunked again. */
		x->req_chunked = 1;
		x->req_body = 1;
		head_add(&h, "Transfer-Encoding: chunked\r\n", NULL, NULL, NULL);
	} else if (cl && strcmp(cl, "0") != 0) {
		x->req_body = 1;
	}
	head_add(&h, "\r\n", NULL, NULL, NULL);
	if (h.overflow) {
		free(h.buf);
		return -1;
	}
	x->head = h.buf;
	x->head_len = h.len;
	return 0;
}

/* Adds x to the live list (for shutdown and proxy_close_*). */
static void
px_link(struct proxy *p, struct px *x)
{
	pthread_mutex_lock(&p->lock);
	x->next = p->all;
	if (p->all)
		p->all->prev = x;
	p->all = x;
	pthread_mutex_unlock(&p->lock);
}

/* A request answered at once, without a thread or an upstream. */
static struct px *
px_answer_now(struct px *x, int status, int plain, const char *message)
{
	x->refs = 1; /* the HTTP request's */
	px_link(x->p, x);
	px_answer(x, status, plain, message);
	return x;
}

/* What the client's body framing allows: 0, or the status to refuse
 * with. RFC 9112 (6.1, 6.3): both Transfer-Encoding and Content-Length
 * may be a smuggling attempt, so a proxy does not pass such a request on;
 * a transfer coding other than chunked is not understood here. */
static int
framing_check(struct MHD_Connection *conn)
{
	const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");

	if (te == NULL)
		return 0;
	if (cl != NULL)
		return 400;
	return strcasecmp(te, "chunked") == 0 ? 0 : 501;
}

static struct px *
px_new(struct proxy *p, struct MHD_Connection *conn, const char *method, const char *query)
{
	struct px *x = calloc(1, sizeof(*x));

	if (x == NULL)
		return NULL;
	x->p = p;
	x->conn = conn;
	x->ufd = -1;
	x->csock = MHD_INVALID_SOCKET;
	x->length = -1;
	x->refs = 2; /* the HTTP request's and the thread's */
	x->last_io = clock_ms();
	atomic_init(&x->closed, 0);
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	snprintf(x->method, sizeof(x->method), "%s", method);
	x->host = dup_or_null(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"));
	x->token = dup_or_null(MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    "x-aas-preview-token"));
	x->cookie = dup_or_null(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Cookie"));
	x->query = dup_or_null(query);
	if (x->host == NULL || (query && x->query == NULL)) {
		free(x->host);
		free(x->token);
		free(x->cookie);
		free(x->query);
		pthread_cond_destroy(&x->cond);
		pthread_mutex_destroy(&x->lock);
		free(x);
		return NULL;
	}
	return x;
}

struct px *
proxy_begin(struct proxy *p, struct MHD_Connection *conn, const char *method, const char *path,
    const char *query, int uri_too_long)
{
	struct px *x;
	pthread_attr_t attr;
	pthread_t t;
	char msg[192];
	int started, st;

	if (atomic_load(&p->stopping))
		return NULL;
	x = px_new(p, conn, method, query);
	if (x == NULL)
		return NULL;
	if (uri_too_long || (query && strlen(query) >= PX_QUERY_MAX))
		/* Never forwarded cut short: refused whole. */
		return px_answer_now(x, 414, 0,
		    "The address (path or query) is too long for the preview proxy.");
	if ((st = framing_check(conn)) != 0)
		return px_answer_now(x, st, 0,
		    st == 400 ? "The request has both Transfer-Encoding and Content-Length;"
				" send one of them." :
				"The request's Transfer-Encoding is not supported; send the"
				" body with Content-Length or Transfer-Encoding: chunked.");
	if (build_head(x, conn, path, query) < 0)
		return px_answer_now(x, 431, 0,
		    "The request's headers or query are too large or malformed.");
	pthread_mutex_lock(&p->lock);
	if (p->active >= (size_t)p->cfg.max_conns) {
		pthread_mutex_unlock(&p->lock);
		log_warn("preview: %d requests in flight (AAS_PREVIEW_MAX_CONNS); refusing one",
		    p->cfg.max_conns);
		snprintf(msg, sizeof(msg),
		    "The preview proxy is busy: %d requests in flight (AAS_PREVIEW_MAX_CONNS)."
		    " Retry shortly.",
		    p->cfg.max_conns);
		return px_answer_now(x, 503, 1, msg);
	}
	p->active++;
	pthread_mutex_unlock(&p->lock);
	x->in.buf = malloc(PX_BUF);
	x->out.buf = malloc(PX_BUF);
	if (x->in.buf == NULL || x->out.buf == NULL) {
		pthread_mutex_lock(&p->lock);
		p->active--;
		pthread_mutex_unlock(&p->lock);
		return px_answer_now(x, 503, 1,
		    "The preview proxy is short of memory; retry shortly.");
	}
	px_link(p, x);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PX_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	started = pthread_create(&t, &attr, px_main, x) == 0;
	pthread_attr_destroy(&attr);
	if (!started) {
		pthread_mutex_lock(&p->lock);
		p->active--;
		pthread_mutex_unlock(&p->lock);
		x->refs = 1;
		px_answer(x, 503, 1, "The preview proxy is out of threads; retry shortly.");
	}
	return x;
}

/* Ends the counted requests whose sandbox (or account) is `id`. */
static size_t
close_where(struct proxy *p, int by_account, const char *id)
{
	struct px *list = NULL, *x;
	size_t n = 0;

	if (p == NULL || id == NULL || id[0] == '\0')
		return 0;
	pthread_mutex_lock(&p->closing);
	pthread_mutex_lock(&p->lock);
	for (x = p->all; x; x = x->next) {
		if (!x->counted || strcmp(by_account ? x->account_id : x->sandbox_id, id) != 0)
			continue;
		pthread_mutex_lock(&x->lock);
		if (x->refs > 0) { /* not on its way out: hold it while we work */
			x->refs++;
			x->close_next = list;
			list = x;
		}
		pthread_mutex_unlock(&x->lock);
	}
	pthread_mutex_unlock(&p->lock);
	while ((x = list) != NULL) {
		struct MHD_Connection *c;

		list = x->close_next;
		atomic_store(&x->closed, 1);
		pthread_mutex_lock(&x->lock);
		c = take_park(x, ANY_PARK);
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
		resume(c);
		px_unref(x);
		n++;
	}
	pthread_mutex_unlock(&p->closing);
	if (n > 0)
		log_info("preview: closing %zu request(s) of %s %s", n,
		    by_account ? "account" : "sandbox", id);
	return n;
}

size_t
proxy_close_sandbox(struct proxy *p, const char *sandbox_id)
{
	return close_where(p, 0, sandbox_id);
}

size_t
proxy_close_account(struct proxy *p, const char *account_id)
{
	return close_where(p, 1, account_id);
}

/* ---- the proxy ---- */

struct proxy *
proxy_new(const struct proxy_config *cfg, struct err *e)
{
	struct proxy *p = calloc(1, sizeof(*p));

	if (p == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	p->cfg = *cfg;
	snprintf(p->scheme, sizeof(p->scheme), "%s", cfg->scheme ? cfg->scheme : "http");
	p->held = tally_new(2 * (size_t)cfg->max_conns);
	if (p->held == NULL) {
		free(p);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&p->closing, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->idle, NULL);
	atomic_init(&p->stopping, 0);
	return p;
}

void
proxy_shutdown(struct proxy *p)
{
	if (p == NULL)
		return;
	atomic_store(&p->stopping, 1);
	pthread_mutex_lock(&p->lock);
	for (struct px *x = p->all; x; x = x->next) {
		struct MHD_Connection *c;

		pthread_mutex_lock(&x->lock);
		c = take_park(x, ANY_PARK);
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
		resume(c);
	}
	/* Threads notice within a slice and end. */
	while (p->active > 0)
		pthread_cond_wait(&p->idle, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

void
proxy_free(struct proxy *p)
{
	if (p == NULL)
		return;
	pthread_cond_destroy(&p->idle);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->closing);
	tally_free(p->held);
	free(p);
}

size_t
proxy_active(struct proxy *p)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->active;
	pthread_mutex_unlock(&p->lock);
	return n;
}
