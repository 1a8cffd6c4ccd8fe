/* proxy_px.c - one proxied request's shared state: its ring buffers, the
 * parking and waking of its HTTP side, its waits, its references, and the
 * error page it answers with when it is not forwarded. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "server/proxy_int.h"

size_t
proxy_ring_put(struct ring *r, const char *data, size_t n)
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

size_t
proxy_ring_get(struct ring *r, char *out, size_t n)
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

int
proxy_stopping(struct px *x)
{
	return atomic_load(&x->p->stopping) || atomic_load(&x->closed);
}

/* With x->lock held: the connection to resume if it is parked for one of
 * `mask` (bit per enum park). */
struct MHD_Connection *
proxy_take_park(struct px *x, unsigned mask)
{
	if (x->parked == PARK_NONE || !(mask & (1u << x->parked)) || x->conn == NULL)
		return NULL;
	x->parked = PARK_NONE;
	return x->conn;
}

void
proxy_resume(struct MHD_Connection *c)
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
	return proxy_take_park(x, PX_ANY_PARK);
}

void
proxy_client_check(struct px *x)
{
	struct MHD_Connection *c;

	pthread_mutex_lock(&x->lock);
	c = client_check_locked(x);
	pthread_mutex_unlock(&x->lock);
	proxy_resume(c);
}

void
proxy_timed_wait(struct px *x)
{
	struct MHD_Connection *c;
	struct timespec ts = clock_cond_deadline(PX_SLICE_MS);

	pthread_cond_timedwait(&x->cond, &x->lock, &ts);
	if ((c = client_check_locked(x)) != NULL) {
		/* Callers look at their conditions again after this. */
		pthread_mutex_unlock(&x->lock);
		proxy_resume(c);
		pthread_mutex_lock(&x->lock);
	}
}

int
proxy_idle_expired(struct px *x)
{
	return clock_ms() - x->last_io > (long long)x->p->cfg.idle_timeout_s * 1000;
}

void
proxy_px_unref(struct px *x)
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
void
proxy_px_answer(struct px *x, int status, int plain, const char *message)
{
	char msg[512], *page = malloc(2048);
	struct MHD_Connection *c;

	if (page && plain) {
		fmt_cut(page, 2048, "%s\n", message);
	} else if (page) {
		html_escape(message, msg, sizeof(msg));
		fmt_cut(page, 2048,
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
	c = proxy_take_park(x, PX_ANY_PARK);
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	free(page);
	proxy_resume(c);
}
