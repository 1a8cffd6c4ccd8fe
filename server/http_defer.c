/* http_defer.c - the front end's work handed to the worker pool: deferred
 * handlers, their replies sent from a worker, and bodies streamed to the
 * work while it runs (stream_body routes). */
#include <pthread.h>
#include <stdlib.h>

#include <microhttpd.h>

#include "base/bq.h"
#include "base/fmt.h"
#include "base/work.h"
#include "server/http_int.h"

static void
deferred_main(void *p)
{
	struct deferred *d = p;

	d->fn(d->req, d->arg);
	if (!d->sent)
		http_send_now(d->req);
	free(d);
}

/* The job waited too long for a worker (its key had too much running):
 * it never runs, and the client is told to retry. On the pool's timer. */
static void
deferred_expire(void *p)
{
	struct deferred *d = p;
	struct http_req *req = d->req;

	if (d->drop)
		d->drop(d->arg);
	http_reply_busy(req, "too many calls of this account are in progress; retry shortly");
	http_send_now(req);
	free(d);
}

void
http_defer_as(struct http_req *req, const char *key, http_deferred_fn fn, void *arg,
    void (*drop)(void *arg))
{
	/* A key too long is refused, never cut into another's turn. */
	if (fmt_buf(req->work_key, sizeof(req->work_key), "%s", key ? key : "") < 0) {
		if (drop)
			drop(arg);
		http_reply_error(req, 500, "internal", "work key too long");
		return;
	}
	http_defer(req, fn, arg, drop);
}

void
http_defer(struct http_req *req, http_deferred_fn fn, void *arg, void (*drop)(void *arg))
{
	req->fn = fn;
	req->arg = arg;
	req->drop = drop;
	req->state = REQ_DEFERRED;
}

/* The work of a streamed body ended: the HTTP thread sends the reply
 * once the body is in (or now, when it waits for it). */
static void
stream_work_done(struct http_req *req)
{
	struct MHD_Connection *resume = NULL;
	int orphan;

	bq_abandon(req->in, NULL); /* the rest of the body is dropped */
	pthread_mutex_lock(&req->slock);
	req->work_done = 1;
	orphan = req->orphan;
	if (req->reply_wait) {
		req->reply_wait = 0;
		resume = req->conn;
	}
	pthread_mutex_unlock(&req->slock);
	if (orphan)
		http_req_free(req);
	else if (resume)
		MHD_resume_connection(resume);
}

void
http_send_now(struct http_req *req)
{
	struct MHD_Connection *conn = req->conn;

	if (req->deferred) {
		req->deferred->sent = 1;
		req->deferred = NULL;
	}
	if (req->streaming) {
		stream_work_done(req);
		return;
	}
	req->state = REQ_READY;
	/* After this the HTTP thread owns req again (and may free it). */
	MHD_resume_connection(conn);
}

/* The pool would not take the work: its argument goes, and the caller is
 * told to retry. */
static void
reply_pool_busy(struct http_req *req)
{
	if (req->drop)
		req->drop(req->arg);
	http_reply_busy(req,
	    "too many calls are waiting (for this account, or in all); retry shortly");
}

/* The job of the handler's deferred work, or NULL when memory is short
 * (its argument is dropped then, and the reply is a 500). */
static struct deferred *
deferred_new(struct http_req *req)
{
	struct deferred *d = calloc(1, sizeof(*d));

	if (d == NULL) {
		if (req->drop)
			req->drop(req->arg);
		http_reply_error(req, 500, "internal", "out of memory");
		return NULL;
	}
	d->req = req;
	d->fn = req->fn;
	d->arg = req->arg;
	d->drop = req->drop;
	req->deferred = d;
	return d;
}

enum MHD_Result
http_defer_submit(struct http_server *srv, struct http_req *req)
{
	struct deferred *d = deferred_new(req);

	if (d == NULL)
		return http_reply_queue(req);
	/* Park first, then hand off: the worker's resume can never precede
	 * the suspend. */
	MHD_suspend_connection(req->conn);
	if (work_submit_key(srv->work, req->work_key, deferred_main, deferred_expire, d) < 0) {
		req->deferred = NULL;
		free(d);
		reply_pool_busy(req);
		req->state = REQ_READY;
		MHD_resume_connection(req->conn);
	}
	return MHD_YES;
}

/* ---- streamed bodies ---- */

/* A streamed body's queue is full: the connection is parked, and the
 * time it waits for the work is not the client's. */
static void
body_park(void *ctx)
{
	struct http_req *req = ctx;

	hlim_pause(req->srv->lim, http_lim_conn(req));
	MHD_suspend_connection(req->conn);
}

static void
body_wake(void *ctx)
{
	struct http_req *req = ctx;

	hlim_resume(req->srv->lim, http_lim_conn(req));
	MHD_resume_connection(req->conn);
}

struct bq *
http_body_stream(struct http_req *req)
{
	return req->in;
}

/* Hands the work to a worker as the body begins (a stream_body route).
 * When the handler replies at once or the work cannot be queued, the
 * request goes on as an ordinary one that drops its body. */
void
http_defer_stream_start(struct http_server *srv, struct http_req *req)
{
	struct deferred *d;
	struct err e;

	err_clear(&e);
	req->in = bq_new(BQ_MAX_BYTES, body_park, body_wake, req, &e);
	if (req->in == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		req->state = REQ_READY;
		return;
	}
	http_dispatch(req);
	if (req->state != REQ_DEFERRED) {
		req->state = REQ_READY;
		return;
	}
	if ((d = deferred_new(req)) == NULL) {
		req->state = REQ_READY;
		return;
	}
	req->streaming = 1;
	if (work_submit_key(srv->work, req->work_key, deferred_main, deferred_expire, d) < 0) {
		req->streaming = 0;
		req->deferred = NULL;
		free(d);
		reply_pool_busy(req);
		req->state = REQ_READY;
	}
}

/* A streamed body on the HTTP thread: into the queue while the work
 * reads it (parked while the queue is full), then the work's reply. */
enum MHD_Result
http_defer_stream_body(struct http_req *req, const char *data, size_t *size)
{
	if (*size > 0) {
		size_t n = *size;
		ssize_t r;
		int parked;

		if (req->in_done) {
			*size = 0; /* not wanted any more: dropped */
			return MHD_YES;
		}
		if (req->body_len + n > (size_t)req->max_body) {
			struct err e;
			err_clear(&e);
			err_set_at(&e, ERR_LIMIT, req->max_body_name ? req->max_body_name : "",
			    "request body larger than %lld bytes (%s)", req->max_body,
			    req->max_body_name ? req->max_body_name : "the route's limit");
			bq_finish(req->in, &e);
			req->in_done = 1;
			*size = 0;
			return MHD_YES;
		}
		hlim_request_bytes(req->srv->lim, http_lim_conn(req), n);
		r = bq_offer(req->in, data, n, &parked);
		if (r < 0) {
			req->in_done = 1;
			*size = 0;
			return MHD_YES;
		}
		req->body_len += (size_t)r;
		*size -= (size_t)r;
		return MHD_YES;
	}
	hlim_request_end(req->srv->lim, http_lim_conn(req));
	if (!req->in_done) {
		bq_finish(req->in, NULL);
		req->in_done = 1;
	}
	pthread_mutex_lock(&req->slock);
	if (!req->work_done) {
		/* Parked under the lock: the work's resume follows it. */
		req->reply_wait = 1;
		MHD_suspend_connection(req->conn);
		pthread_mutex_unlock(&req->slock);
		return MHD_YES;
	}
	pthread_mutex_unlock(&req->slock);
	req->streaming = 0;
	req->state = REQ_READY;
	return http_reply_queue(req);
}
