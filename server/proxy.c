/* proxy.c - streaming reverse proxy (see proxy.h): requests taken over
 * from the HTTP front end and answered back to it, the caps on them, and
 * their end by sandbox or account (the pieces: server/proxy_int.h). */
#include "server/proxy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"
#include "base/tally.h"
#include "server/proxy_int.h"

#define PX_STACK (256 * 1024)
#define PX_RETRY_AFTER "2" /* seconds, on 429 and 503 */

/* ---- HTTP side ---- */

static ssize_t
px_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct px *x = cls;
	ssize_t n;

	(void)pos;
	pthread_mutex_lock(&x->lock);
	n = (ssize_t)proxy_ring_get(&x->out, buf, max);
	if (n > 0) {
		pthread_cond_broadcast(&x->cond);
	} else if (x->out_done) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else if (x->out_err || proxy_stopping(x)) {
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
	proxy_px_unref(cls);
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

static int
header_is(const char *name, const char *want)
{
	return strcasecmp(name, want) == 0;
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
			proxy_px_unref(x);
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
	if (proxy_stopping(x))
		return MHD_NO;
	pthread_mutex_lock(&x->lock);
	if (*upload_data_size > 0) {
		if (x->head_ready || !x->req_body) {
			*upload_data_size = 0; /* answered already: drop the rest */
		} else {
			size_t n = proxy_ring_put(&x->in, upload_data, *upload_data_size);
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
	proxy_px_unref(x);
}

/* ---- a request taken over ---- */

static char *
dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
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
	proxy_px_answer(x, status, plain, message);
	return x;
}

static struct px *
px_new(struct proxy *p, struct MHD_Connection *conn, const char *query)
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
	x = px_new(p, conn, query);
	if (x == NULL)
		return NULL;
	if (fmt_buf(x->method, sizeof(x->method), "%s", method) < 0)
		return px_answer_now(x, 501, 0,
		    "The request method is too long for the preview proxy.");
	if (uri_too_long || (query && strlen(query) >= PX_QUERY_MAX))
		/* Never forwarded cut short: refused whole. */
		return px_answer_now(x, 414, 0,
		    "The address (path or query) is too long for the preview proxy.");
	if ((st = proxy_head_framing(conn)) != 0)
		return px_answer_now(x, st, 0,
		    st == 400 ? "The request has both Transfer-Encoding and Content-Length;"
				" send one of them." :
				"The request's Transfer-Encoding is not supported; send the"
				" body with Content-Length or Transfer-Encoding: chunked.");
	if (proxy_head_build(x, conn, path, query) < 0)
		return px_answer_now(x, 431, 0,
		    "The request's headers or query are too large or malformed.");
	pthread_mutex_lock(&p->lock);
	if (p->active >= (size_t)p->cfg.max_conns) {
		pthread_mutex_unlock(&p->lock);
		log_warn("preview: %d requests in flight (AAS_PREVIEW_MAX_CONNS); refusing one",
		    p->cfg.max_conns);
		fmt_cut(msg, sizeof(msg),
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
	started = pthread_create(&t, &attr, proxy_up_main, x) == 0;
	pthread_attr_destroy(&attr);
	if (!started) {
		pthread_mutex_lock(&p->lock);
		p->active--;
		pthread_mutex_unlock(&p->lock);
		x->refs = 1;
		proxy_px_answer(x, 503, 1, "The preview proxy is out of threads; retry shortly.");
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
		c = proxy_take_park(x, PX_ANY_PARK);
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
		proxy_resume(c);
		proxy_px_unref(x);
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
	if (fmt_err(e, "preview scheme", p->scheme, sizeof(p->scheme), "%s",
		cfg->scheme ? cfg->scheme : "http") < 0) {
		free(p);
		return NULL;
	}
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
		c = proxy_take_park(x, PX_ANY_PARK);
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
		proxy_resume(c);
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
