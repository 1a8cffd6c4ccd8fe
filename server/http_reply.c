/* http_reply.c - how a handler answers: whole bodies, JSON errors, extra
 * headers, SSE and streamed replies, WebSocket upgrades, and the reply
 * handed to libmicrohttpd. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "base/bq.h"
#include "base/fmt.h"
#include "base/log.h"
#include "server/http_int.h"

#define HTTP_BUSY_RETRY_S 1 /* Retry-After of a busy answer */

struct http_upgrade {
	pthread_mutex_t lock;
	http_upgraded_fn fn;
	void (*drop)(void *ctx);
	void *ctx;
	struct MHD_UpgradeResponseHandle *urh;
	int taken; /* the socket went to fn */
	/* The request holds one reference, fn's side one more once it has the
	 * socket: either may end first (a session can close before MHD
	 * reports the request complete). */
	int refs;
};

static void
upgrade_unref(struct http_upgrade *u)
{
	int left;

	pthread_mutex_lock(&u->lock);
	left = --u->refs;
	pthread_mutex_unlock(&u->lock);
	if (left > 0)
		return;
	pthread_mutex_destroy(&u->lock);
	free(u);
}

/* The request ends: an upgrade that never happened drops its context. */
static void
upgrade_release(struct http_req *req)
{
	struct http_upgrade *u = req->upgrade;
	int taken;

	if (u == NULL)
		return;
	req->upgrade = NULL;
	pthread_mutex_lock(&u->lock);
	taken = u->taken;
	u->taken = taken ? taken : -1; /* -1: too late for the socket */
	pthread_mutex_unlock(&u->lock);
	if (!taken && u->drop)
		u->drop(u->ctx);
	upgrade_unref(u);
}

static void
on_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
    size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct http_upgrade *u = cls;
	int late;

	(void)conn;
	(void)con_cls;
	pthread_mutex_lock(&u->lock);
	late = u->taken < 0;
	u->taken = 1;
	u->urh = urh;
	if (!late)
		u->refs++; /* fn's, dropped by http_upgrade_close */
	pthread_mutex_unlock(&u->lock);
	if (late) {
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	u->fn(u->ctx, (int)sock, extra_in, extra_in_size, u);
}

void
http_upgrade_close(struct http_upgrade *u)
{
	if (u == NULL)
		return;
	MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
	upgrade_unref(u);
}

void
http_reply_reset(struct http_req *req)
{
	free(req->resp_body);
	req->resp_body = NULL;
	req->resp_len = 0;
	if (req->sse) {
		sse_unref(req->sse);
		req->sse = NULL;
	}
	bq_free(req->out);
	req->out = NULL;
	upgrade_release(req);
}

void
http_reply_upgrade(struct http_req *req, http_upgraded_fn fn, void *ctx, void (*drop)(void *ctx))
{
	struct http_upgrade *u = calloc(1, sizeof(*u));

	http_reply_reset(req);
	if (u == NULL) {
		if (drop)
			drop(ctx);
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	pthread_mutex_init(&u->lock, NULL);
	u->refs = 1; /* the request's */
	u->fn = fn;
	u->drop = drop;
	u->ctx = ctx;
	req->upgrade = u;
	req->status = 101;
	req->content_type[0] = '\0';
}

void
http_reply_raw(struct http_req *req, int status, const char *content_type, const char *body,
    size_t len)
{
	http_reply_reset(req);
	req->status = status;
	if (fmt_buf(req->content_type, sizeof(req->content_type), "%s", content_type) < 0) {
		log_warn("http: content type %.40s too long", content_type);
		req->status = 500;
		return;
	}
	if (len > 0) {
		req->resp_body = malloc(len);
		if (req->resp_body == NULL) {
			req->status = 500;
			return;
		}
		memcpy(req->resp_body, body, len);
		req->resp_len = len;
	}
}

void
http_reply_json(struct http_req *req, int status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

	json_decref(body);
	http_reply_reset(req);
	req->status = 500;
	if (fmt_buf(req->content_type, sizeof(req->content_type), "application/json") < 0 ||
	    text == NULL) {
		free(text);
		return;
	}
	req->status = status;
	req->resp_body = text;
	req->resp_len = strlen(text);
}

static json_t *
default_error_fmt(int status, const char *code, const char *message)
{
	(void)status;
	return json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);
}

void
http_reply_error(struct http_req *req, int status, const char *code, const char *message)
{
	http_error_fmt fmt = req->route && req->route->error_fmt ? req->route->error_fmt :
								   default_error_fmt;

	http_reply_json(req, status, fmt(status, code, message));
}

void
http_add_header(struct http_req *req, const char *name, const char *value)
{
	if (req->n_headers >= HTTP_MAX_OUT_HEADERS) {
		log_warn("http: too many response headers, dropping %s", name);
		return;
	}
	if (strlen(value) > HTTP_MAX_HEADER_VALUE ||
	    fmt_buf(req->headers[req->n_headers].name, sizeof(req->headers[0].name), "%s", name) <
		0) {
		log_warn("http: response header %.40s too long, dropped", name);
		return;
	}
	req->headers[req->n_headers].value = strdup(value);
	if (req->headers[req->n_headers].value == NULL) {
		log_warn("http: out of memory, dropping response header %s", name);
		return;
	}
	req->n_headers++;
}

struct sse *
http_reply_sse(struct http_req *req, int status)
{
	struct sse *s;

	if (fmt_buf(req->content_type, sizeof(req->content_type), "text/event-stream") < 0 ||
	    (s = sse_new()) == NULL)
		return NULL;
	http_reply_reset(req);
	req->status = status;
	req->sse = s; /* the request's reference, handed to MHD */
	sse_ref(s);   /* the caller's */
	return s;
}

/* ---- streamed replies ---- */

static void
conn_park(void *ctx)
{
	MHD_suspend_connection(ctx);
}

static void
conn_wake(void *ctx)
{
	MHD_resume_connection(ctx);
}

struct bq *
http_reply_stream(struct http_req *req, int status, const char *content_type, long long length)
{
	struct err e;
	struct bq *q;

	err_clear(&e);
	if (fmt_buf(req->content_type, sizeof(req->content_type), "%s", content_type) < 0) {
		log_warn("http: content type %.40s too long", content_type);
		return NULL;
	}
	q = bq_new(BQ_MAX_BYTES, conn_park, conn_wake, req->conn, &e);
	if (q == NULL)
		return NULL;
	http_reply_reset(req);
	req->status = status;
	req->out = q; /* the response's reference */
	req->out_len = length;
	bq_ref(q); /* the caller's */
	http_send_now(req);
	return q;
}

/* The content reader of a streamed reply, on the HTTP thread: parks the
 * connection while the queue is empty (the writer wakes it). */
static ssize_t
out_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	ssize_t n = bq_take(cls, buf, max);

	(void)pos;
	if (n == BQ_END)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n == BQ_FAILED)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}

/* The reply is over (sent, or the client went away): the writer's next
 * bq_write fails. */
static void
out_free(void *cls)
{
	struct err e;

	err_clear(&e);
	err_set(&e, ERR_UNAVAILABLE, "the client went away");
	bq_detach(cls);
	bq_abandon(cls, &e);
	bq_free(cls);
}

/* ---- to libmicrohttpd ---- */

enum MHD_Result
http_reply_queue(struct http_req *req)
{
	struct MHD_Response *r;
	enum MHD_Result rc;

	if (req->status == 0)
		http_reply_error(req, 500, "internal", "no reply produced");
	if (req->sse) {
		r = sse_response(req->sse, req->conn);
	} else if (req->out) {
		r = MHD_create_response_from_callback(req->out_len < 0 ? MHD_SIZE_UNKNOWN :
									 (uint64_t)req->out_len,
		    BQ_CHUNK / 4, out_reader, req->out, out_free);
		if (r)
			req->out = NULL; /* the response's now */
	} else if (req->upgrade) {
		hlim_exempt(req->srv->lim, http_lim_conn(req));
		r = MHD_create_response_for_upgrade(on_upgraded, req->upgrade);
	} else {
		r = MHD_create_response_from_buffer(req->resp_len, req->resp_body,
		    MHD_RESPMEM_MUST_FREE);
		if (r)
			req->resp_body = NULL; /* MHD owns it now */
	}
	if (r == NULL)
		return MHD_NO;
	/* Answered: whatever is left of the body is not waited for. */
	hlim_request_end(req->srv->lim, http_lim_conn(req));
	if (req->content_type[0])
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, req->content_type);
	if (req->sse) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache, no-transform");
		MHD_add_response_header(r, "X-Accel-Buffering", "no");
	}
	MHD_add_response_header(r, "X-Request-Id", req->request_id);
	for (int i = 0; i < req->n_headers; i++)
		MHD_add_response_header(r, req->headers[i].name, req->headers[i].value);
	rc = MHD_queue_response(req->conn, (unsigned)req->status, r);
	MHD_destroy_response(r);
	req->state = REQ_QUEUED;
	return rc;
}

void
http_reply_busy(struct http_req *req, const char *msg)
{
	char after[16];

	if (fmt_buf(after, sizeof(after), "%d", HTTP_BUSY_RETRY_S) == 0)
		http_add_header(req, "Retry-After", after);
	http_reply_error(req, 429, "busy", msg);
}
