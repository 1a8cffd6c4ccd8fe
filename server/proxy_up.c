/* proxy_up.c - the upstream side of one proxied request, on its own
 * thread: resolve and admit it, connect, send the request with its body,
 * and bring the response (or, after a 101, a WebSocket's bytes) back. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"
#include "base/tally.h"
#include "server/proxy_int.h"
#include "sandbox/preview_cookie.h"

#define PX_CONNECT_TIMEOUT_MS 5000

/* ---- answers when nothing comes back ---- */

static void
px_fail(struct px *x, int status, const char *message)
{
	proxy_px_answer(x, status, 0, message);
}

/* The upstream closed (or reset) without an answer: the resolver's
 * side says why (nothing listening, loopback only, a server that closed,
 * a paused sandbox). */
static void
px_fail_unanswered(struct px *x, const struct preview_route *route)
{
	char msg[320];

	fmt_cut(msg, sizeof(msg),
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

/* After a send or recv that would have blocked: a slice's wait for fd to
 * be ready for `events`. -1 when poll failed; 1 when the proxy stops, the
 * client left or the exchange idled too long; else 0. */
static int
wait_slice(struct px *x, int fd, short events)
{
	struct pollfd pf = { fd, events, 0 };

	if (poll(&pf, 1, PX_SLICE_MS) < 0 && errno != EINTR)
		return -1;
	proxy_client_check(x);
	return proxy_stopping(x) || x->client_gone || proxy_idle_expired(x);
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
		if (wait_slice(x, fd, POLLOUT) != 0)
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
		int st = wait_slice(x, fd, POLLIN);
		if (st != 0)
			return st < 0 ? -1 : -2;
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
		while (x->in.len == 0 && !x->in_done && !x->client_gone && !proxy_stopping(x) &&
		    !proxy_idle_expired(x))
			proxy_timed_wait(x);
		if (x->client_gone || proxy_stopping(x) || (x->in.len == 0 && !x->in_done)) {
			pthread_mutex_unlock(&x->lock);
			goto out;
		}
		n = proxy_ring_get(&x->in, buf, PX_IO);
		done = x->in_done && x->in.len == 0;
		c = proxy_take_park(x, 1u << PARK_UPLOAD);
		pthread_mutex_unlock(&x->lock);
		proxy_resume(c);
		if (n > 0) {
			x->last_io = clock_ms();
			if (x->req_chunked) {
				char size[24];
				if (fmt_buf(size, sizeof(size), "%zx\r\n", n) < 0 ||
				    send_all(x, x->ufd, size, strlen(size)) < 0 ||
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

/* Splits the upstream head (in x->rhead, ending at rhead_used) into the
 * status and headers, and picks the body framing. */
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
			return proxy_idle_expired(x) ? 504 : 499;
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
		while (x->out.len >= PX_BUF && !x->client_gone && !proxy_stopping(x) &&
		    !proxy_idle_expired(x))
			proxy_timed_wait(x);
		if (x->client_gone || proxy_stopping(x) || x->out.len >= PX_BUF) {
			pthread_mutex_unlock(&x->lock);
			return -1;
		}
		k = proxy_ring_put(&x->out, data, n);
		c = proxy_take_park(x, 1u << PARK_BODY);
		pthread_mutex_unlock(&x->lock);
		proxy_resume(c);
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
	c = proxy_take_park(x, 1u << PARK_BODY);
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	proxy_resume(c);
}

/* After a 101: bytes both ways until either side closes or idles. */
static void
pump_upgraded(struct px *x)
{
	char *buf = malloc(PX_IO);
	int cfd;

	pthread_mutex_lock(&x->lock);
	while (!x->upgraded && !x->client_gone && !proxy_stopping(x) && !proxy_idle_expired(x))
		proxy_timed_wait(x);
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
		if (proxy_stopping(x) || proxy_idle_expired(x))
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

/* The names a request is counted under in p->held; -1 when one does not
 * fit a name of the table. */
static int
held_names(const char *sandbox_id, const char *account_id, char names[2][TALLY_NAME_MAX + 1])
{
	if (fmt_buf(names[0], TALLY_NAME_MAX + 1, "s:%s", sandbox_id) < 0 ||
	    fmt_buf(names[1], TALLY_NAME_MAX + 1, "a:%s", account_id) < 0)
		return -1;
	return 0;
}

/* Counts the request against its sandbox's and account's caps; -1 (and
 * the answer given) when either is reached. */
static int
admit(struct px *x, const struct preview_route *route)
{
	struct proxy *p = x->p;
	const long limits[2] = { p->cfg.max_per_sandbox, p->cfg.max_per_account };
	char names[2][TALLY_NAME_MAX + 1], msg[256];
	size_t v = 2; /* as tally_take says a name it cannot count */
	int rc = -1;

	pthread_mutex_lock(&p->lock);
	if (held_names(route->sandbox_id, route->account_id, names) == 0 &&
	    fmt_buf(x->sandbox_id, sizeof(x->sandbox_id), "%s", route->sandbox_id) == 0 &&
	    fmt_buf(x->account_id, sizeof(x->account_id), "%s", route->account_id) == 0)
		rc = tally_take(p->held, (const char *const[]){ names[0], names[1] }, limits, 2,
		    &v);
	if (rc == 0)
		x->counted = 1;
	pthread_mutex_unlock(&p->lock);
	if (rc == 0)
		return 0;
	switch (v) {
	case 0:
		fmt_cut(msg, sizeof(msg),
		    "Too many preview requests to this sandbox at once: at most %d"
		    " (AAS_MAX_PREVIEW_CONNS_PER_SANDBOX). Retry shortly.",
		    p->cfg.max_per_sandbox);
		proxy_px_answer(x, 429, 1, msg);
		break;
	case 1:
		fmt_cut(msg, sizeof(msg),
		    "Too many preview requests to this account's sandboxes at once: at most %d"
		    " (AAS_MAX_PREVIEW_CONNS_PER_ACCOUNT). Retry shortly.",
		    p->cfg.max_per_account);
		proxy_px_answer(x, 429, 1, msg);
		break;
	default:
		proxy_px_answer(x, 503, 1,
		    "The preview proxy cannot count this request; retry shortly.");
		break;
	}
	log_info("preview: request to sandbox %s refused (%s)", route->sandbox_id,
	    v == 0     ? "AAS_MAX_PREVIEW_CONNS_PER_SANDBOX" :
		v == 1 ? "AAS_MAX_PREVIEW_CONNS_PER_ACCOUNT" :
			 "table full");
	return -1;
}

void *
proxy_up_main(void *arg)
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
	if (fmt_buf(x->set_cookie, sizeof(x->set_cookie), "%s", route.set_cookie) < 0)
		x->set_cookie[0] = '\0'; /* a cookie cut would be another cookie: none */
	x->head_ready = 1;
	c = proxy_take_park(x, 1u << PARK_HEAD);
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	proxy_resume(c);
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

		if (held_names(x->sandbox_id, x->account_id, names) == 0) /* as admit made them */
			tally_give(p->held, (const char *const[]){ names[0], names[1] }, 2);
	}
	x->counted = 0;
	pthread_mutex_unlock(&p->lock);
	/* The thread counts as active until its last touch of p: proxy_shutdown
	 * waits for that, and proxy_free may follow it at once. */
	proxy_px_unref(x);
	pthread_mutex_lock(&p->lock);
	p->active--;
	pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}
