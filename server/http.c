/* http.c - libmicrohttpd front end. */
#include "server/http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "base/bq.h"
#include "base/clock.h"
#include "base/keys.h"
#include "base/log.h"
#include "server/auth.h"
#include "server/http_int.h"
#include "server/proxy.h"
#include "base/metrics.h"

#define HTTP_MAX_QUERY 16384
#define HTTP_BUSY_RETRY_S 1 /* Retry-After of a busy answer */
#define HTTP_DRAIN_MS 5000  /* how long a stop waits for answers on their way out */

/* ---- request accessors ---- */

const char *
http_method(const struct http_req *req)
{
	return req->method;
}

const char *
http_path(const struct http_req *req)
{
	return req->path;
}

const char *
http_header(const struct http_req *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *
http_body(const struct http_req *req, size_t *len)
{
	*len = req->body_len;
	return req->body ? req->body : "";
}

const char *
http_query(const struct http_req *req)
{
	return req->query ? req->query : "";
}

int
http_path_arg(const struct http_req *req, size_t i, char *out, size_t n)
{
	if (i >= req->n_args || req->args[i].len >= n)
		return -1;
	memcpy(out, req->path + req->args[i].off, req->args[i].len);
	out[req->args[i].len] = '\0';
	return 0;
}

int
http_path_match(const char *pattern, const char *path, struct http_span *caps, size_t max_caps)
{
	const char *p = pattern, *s = path;
	size_t n = 0;

	for (;;) {
		if (*p == '{') {
			const char *close = strchr(p, '}');
			size_t len = strcspn(s, "/");

			if (close == NULL || len == 0 || n >= max_caps)
				return -1;
			caps[n].off = (size_t)(s - path);
			caps[n].len = len;
			n++;
			p = close + 1;
			s += len;
			continue;
		}
		if (*p != *s)
			return -1;
		if (*p == '\0')
			return (int)n;
		p++;
		s++;
	}
}

const char *
http_request_id(const struct http_req *req)
{
	return req->request_id;
}

int
http_client_addr(const struct http_req *req, char *out, size_t n)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(req->conn,
	    MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	const void *a;

	if (sa == NULL)
		return -1;
	if (sa->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
	else if (sa->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	else
		return -1;
	return inet_ntop(sa->sa_family, a, out, (socklen_t)n) ? 0 : -1;
}

const char *
http_account(const struct http_req *req)
{
	return req->key_state == KEY_OK ? req->account : NULL;
}

const struct config *
http_config(const struct http_req *req)
{
	return req->srv->cfg;
}

void
http_log_detail(struct http_req *req, const char *key, const char *value)
{
	size_t n = strlen(req->detail);
	char clean[96];
	size_t j = 0;

	/* Values come from clients: keep them printable and short. */
	for (const char *p = value; *p && j < sizeof(clean) - 1; p++)
		clean[j++] = (*p > 0x20 && *p < 0x7f) ? *p : '?';
	clean[j] = '\0';
	if (n < sizeof(req->detail) - 1)
		snprintf(req->detail + n, sizeof(req->detail) - n, " %s=%s", key, clean);
}

/* ---- replies ---- */

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

static void
reset_reply(struct http_req *req)
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

	reset_reply(req);
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
	reset_reply(req);
	req->status = status;
	snprintf(req->content_type, sizeof(req->content_type), "%s", content_type);
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
	reset_reply(req);
	if (text == NULL) {
		req->status = 500;
		snprintf(req->content_type, sizeof(req->content_type), "application/json");
		return;
	}
	req->status = status;
	snprintf(req->content_type, sizeof(req->content_type), "application/json");
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
	if (strlen(value) > HTTP_MAX_HEADER_VALUE || strlen(name) >= sizeof(req->headers[0].name)) {
		log_warn("http: response header %.40s too long, dropped", name);
		return;
	}
	req->headers[req->n_headers].value = strdup(value);
	if (req->headers[req->n_headers].value == NULL) {
		log_warn("http: out of memory, dropping response header %s", name);
		return;
	}
	snprintf(req->headers[req->n_headers].name, sizeof(req->headers[0].name), "%s", name);
	req->n_headers++;
}

struct sse *
http_reply_sse(struct http_req *req, int status)
{
	struct sse *s = sse_new();

	if (s == NULL)
		return NULL;
	reset_reply(req);
	req->status = status;
	snprintf(req->content_type, sizeof(req->content_type), "text/event-stream");
	req->sse = s; /* the request's reference, handed to MHD */
	sse_ref(s);   /* the caller's */
	return s;
}

/* ---- deferral ---- */

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
	char after[16];

	if (d->drop)
		d->drop(d->arg);
	snprintf(after, sizeof(after), "%d", HTTP_BUSY_RETRY_S);
	http_add_header(req, "Retry-After", after);
	http_reply_error(req, 429, "busy",
	    "too many calls of this account are in progress; retry shortly");
	http_send_now(req);
	free(d);
}

void
http_defer_as(struct http_req *req, const char *key, http_deferred_fn fn, void *arg,
    void (*drop)(void *arg))
{
	snprintf(req->work_key, sizeof(req->work_key), "%s", key ? key : "");
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

static void req_free(struct http_req *req);

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
		req_free(req);
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

/* ---- streamed bodies ---- */

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

struct bq *
http_reply_stream(struct http_req *req, int status, const char *content_type, long long length)
{
	struct err e;
	struct bq *q;

	err_clear(&e);
	q = bq_new(BQ_MAX_BYTES, conn_park, conn_wake, req->conn, &e);
	if (q == NULL)
		return NULL;
	reset_reply(req);
	req->status = status;
	snprintf(req->content_type, sizeof(req->content_type), "%s", content_type);
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

/* ---- libmicrohttpd callbacks ---- */

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_debug("mhd: %s", line);
}

/* Called first for every request, with the raw URI: the path is what
 * gets logged; the query string (which could hold a key) is kept apart
 * and never logged. */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct http_req *req = calloc(1, sizeof(*req));
	size_t plen;

	if (req == NULL)
		return NULL;
	req->srv = cls;
	req->conn = conn;
	pthread_mutex_lock(&req->srv->stop_lock);
	req->srv->open_reqs++;
	pthread_mutex_unlock(&req->srv->stop_lock);
	pthread_mutex_init(&req->slock, NULL);
	clock_gettime(CLOCK_MONOTONIC, &req->start);
	hlim_request_begin(req->srv->lim, http_lim_conn(req));
	if (key_random_hex(req->request_id, sizeof(req->request_id), 8) < 0)
		snprintf(req->request_id, sizeof(req->request_id), "0000000000000000");
	plen = strcspn(uri, "?");
	if (plen > HTTP_MAX_PATH) {
		req->path_too_long = 1;
		plen = HTTP_MAX_PATH;
	}
	memcpy(req->path, uri, plen);
	req->path[plen] = '\0';
	if (uri[plen] == '?') {
		/* Kept apart from the path, which is what gets logged. */
		if (strlen(uri + plen + 1) > HTTP_MAX_QUERY)
			req->path_too_long = 1;
		else if ((req->query = strdup(uri + plen + 1)) == NULL)
			req->path_too_long = 1; /* out of memory: refused all the same */
	}
	return req;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct http_req *req = *con_cls;
	struct timespec now;
	double ms;

	(void)cls;
	(void)conn;
	if (req == NULL)
		return;
	pthread_mutex_lock(&req->srv->stop_lock);
	if (--req->srv->open_reqs == 0)
		pthread_cond_broadcast(&req->srv->stop_cond);
	pthread_mutex_unlock(&req->srv->stop_lock);
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		hlim_request_done(req->srv->lim, http_lim_conn(req));
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (double)(now.tv_sec - req->start.tv_sec) * 1e3 +
	    (double)(now.tv_nsec - req->start.tv_nsec) / 1e6;
	log_info("http id=%s method=%s path=%s status=%d dur_ms=%.2f%s%s%s", req->request_id,
	    req->method[0] ? req->method : "-", req->path, req->status, ms, req->detail,
	    req->px ? " preview=1" : "",
	    toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " aborted=1");
	if (req->px)
		proxy_end(req->px);
	/* The route's pattern, never the raw path: no ids in labels. */
	metrics_http_request(req->route ? req->srv->route_metric[req->route - req->srv->routes] :
					  METRICS_ROUTE_UNMATCHED,
	    req->status);
	*con_cls = NULL;
	if (req->streaming) {
		int orphan;
		struct err e;

		/* The work may still read the body: it ends in error, and the
		 * work frees the request when it is done. */
		err_clear(&e);
		err_set(&e, ERR_UNAVAILABLE, "the client went away");
		bq_detach(req->in);
		bq_finish(req->in, &e);
		pthread_mutex_lock(&req->slock);
		orphan = req->orphan = !req->work_done;
		req->conn = NULL;
		pthread_mutex_unlock(&req->slock);
		if (orphan)
			return;
	}
	req_free(req);
}

static void
req_free(struct http_req *req)
{
	reset_reply(req);
	for (int i = 0; i < req->n_headers; i++)
		free(req->headers[i].value);
	bq_free(req->in);
	http_lim_body_end(req);
	pthread_mutex_destroy(&req->slock);
	free(req->query);
	free(req->body);
	free(req);
}

static enum MHD_Result
find_key_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	static const char *const names[] = { "apikey", "api_key", "key", "token", "access_token",
		"x-api-key" };
	int *found = cls;

	(void)kind;
	(void)value;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(key, names[i]) == 0) {
			*found = 1;
			return MHD_NO;
		}
	}
	return MHD_YES;
}

static enum MHD_Result
queue_reply(struct http_req *req)
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

static const struct http_route *
find_route(struct http_server *srv, struct http_req *req)
{
	for (size_t i = 0; i < srv->n_routes; i++) {
		int n = http_path_match(srv->routes[i].path, req->path, req->args,
		    HTTP_MAX_PATH_ARGS);
		if (n >= 0) {
			req->n_args = (size_t)n;
			return &srv->routes[i];
		}
	}
	return NULL;
}

/* Refusals that need only the request line: a reply, or 0. */
static int
refuse_early(struct http_req *req)
{
	int key_in_url = 0;

	if (req->path_too_long) {
		http_reply_error(req, 414, "uri_too_long", "URI too long");
		return 1;
	}
	MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, find_key_arg, &key_in_url);
	if (key_in_url) {
		http_reply_error(req, 400, "key_in_url",
		    "API keys go in a header (Authorization: Bearer <key> or x-api-key: <key>), "
		    "never in the URL. Remove the key from the query string.");
		return 1;
	}
	if (req->route == NULL) {
		http_reply_error(req, 404, "not_found", "no such endpoint");
		return 1;
	}
	return 0;
}

static void
dispatch(struct http_req *req)
{
	if (req->too_large) {
		http_lim_reply_too_large(req);
		return;
	}
	req->route->handler(req, req->route->ctx);
}

/* ---- the API key, before the body ---- */

/* On a worker: resolves the request's key while its connection is parked,
 * then resumes it (the headers stage runs again and reads the result). */
static void
key_lookup_main(void *p)
{
	struct http_req *req = p;
	struct http_server *srv = req->srv;
	const char *key, *why;
	size_t keylen;

	err_clear(&req->key_err);
	if (auth_extract(http_header(req, "Authorization"), http_header(req, "x-api-key"), &key,
		&keylen, &why) == AUTH_KEY &&
	    srv->auth.resolve(srv->auth.ctx, http_path(req), key, keylen, req->account,
		sizeof(req->account), &req->key_err) == 0)
		req->key_state = KEY_OK;
	else
		req->key_state = KEY_REFUSED;
	hlim_resume(srv->lim, http_lim_conn(req));
	MHD_resume_connection(req->conn);
}

/* The lookup waited too long for a worker (the key had too much running). */
static void
key_lookup_expire(void *p)
{
	struct http_req *req = p;

	req->key_state = KEY_BUSY;
	hlim_resume(req->srv->lim, http_lim_conn(req));
	MHD_resume_connection(req->conn);
}

static void
reply_busy(struct http_req *req, const char *msg)
{
	char after[16];

	snprintf(after, sizeof(after), "%d", HTTP_BUSY_RETRY_S);
	http_add_header(req, "Retry-After", after);
	http_reply_error(req, 429, "busy", msg);
}

/* After the lookup: read the body, or answer with it unread. */
static enum head_next
key_outcome(struct http_server *srv, struct http_req *req)
{
	switch (req->key_state) {
	case KEY_OK:
		return HEAD_READ_BODY;
	case KEY_BUSY:
		/* The lookup took the client address's turn. */
		reply_busy(req, "too many requests from this address are waiting; retry shortly");
		return HEAD_REPLY;
	case KEY_REFUSED:
		if (req->key_err.kind == ERR_UNAUTHORIZED || req->key_err.kind == ERR_NONE)
			auth_reply_refused(req, srv->cfg, &req->key_err);
		else
			http_reply_error(req, err_http_status(req->key_err.kind), "unavailable",
			    req->key_err.msg);
		return HEAD_REPLY;
	case KEY_UNCHECKED:
	case KEY_LOOKING:
		break;
	}
	http_reply_error(req, 500, "internal", "API key check lost");
	return HEAD_REPLY;
}

/* Once the headers are in, before any byte of the body: the route, the
 * refusals that need no body, the body limit, and the API key (resolved
 * here from the cache, or on a worker while the connection is parked:
 * HEAD_WAIT, and this runs again when it resumes). */
static enum head_next
head(struct http_server *srv, struct http_req *req)
{
	enum http_key_need need = HTTP_KEY_NONE;
	const char *key, *why;
	enum auth_found found;
	size_t keylen;
	char wkey[AUTH_WORK_KEY_LEN + 1];

	if (req->head_again) {
		req->head_again = 0;
		return key_outcome(srv, req);
	}
	req->route = find_route(srv, req);
	if (refuse_early(req))
		return HEAD_REPLY;
	if (req->route->head)
		need = req->route->head(req, req->route->ctx);
	if (need == HTTP_KEY_REPLIED)
		return HEAD_REPLY;
	if (req->route->max_body > 0) {
		req->max_body = req->route->max_body;
		req->max_body_name = req->route->max_body_name;
	} else {
		req->max_body = srv->cfg->max_body_bytes;
		req->max_body_name = "AAS_MAX_BODY_BYTES";
	}
	found = auth_extract(http_header(req, "Authorization"), http_header(req, "x-api-key"), &key,
	    &keylen, &why);
	if (need == HTTP_KEY_NONE || (need == HTTP_KEY_OPTIONAL && found == AUTH_NO_KEY)) {
		/* Anonymous: a small body. */
		if (req->max_body > srv->cfg->max_anon_body_bytes) {
			req->max_body = srv->cfg->max_anon_body_bytes;
			req->max_body_name = "AAS_MAX_ANON_BODY_BYTES";
		}
	} else if (found != AUTH_KEY) {
		auth_reply_unauthorized(req, found, why, srv->cfg->dashboard_url);
		return HEAD_REPLY;
	}
	if (need == HTTP_KEY_NONE || found != AUTH_KEY || !srv->has_auth)
		return HEAD_READ_BODY;
	if (srv->auth.peek(srv->auth.ctx, key, keylen, req->account, sizeof(req->account))) {
		req->key_state = KEY_OK;
		return HEAD_READ_BODY;
	}
	/* A database lookup: never on this thread. Park first, then hand
	 * off, so the worker's resume cannot precede the suspend. */
	/* Whose it is is not known yet: the lookup takes the address's turn. */
	auth_work_key_addr(req, wkey, sizeof(wkey));
	req->key_state = KEY_LOOKING;
	req->head_again = 1;
	hlim_pause(srv->lim, http_lim_conn(req));
	MHD_suspend_connection(req->conn);
	if (work_submit_key(srv->work, wkey, key_lookup_main, key_lookup_expire, req) < 0) {
		req->key_state = KEY_BUSY;
		hlim_resume(srv->lim, http_lim_conn(req));
		MHD_resume_connection(req->conn);
	}
	return HEAD_WAIT;
}

/* Runs the headers stage and answers libmicrohttpd for it. */
static enum MHD_Result
head_reply(struct http_server *srv, struct http_req *req)
{
	switch (head(srv, req)) {
	case HEAD_READ_BODY:
		if (http_lim_body_begin(req) < 0)
			return queue_reply(req);
		return MHD_YES;
	case HEAD_WAIT:
		return MHD_YES;
	case HEAD_REPLY:
		return queue_reply(req);
	}
	return MHD_NO;
}

/* Hands the work to a worker as the body begins (a stream_body route).
 * When the handler replies at once or the work cannot be queued, the
 * request goes on as an ordinary one that drops its body. */
/* The pool would not take the work: its argument goes, and the caller is
 * told to retry. */
static void
reply_pool_busy(struct http_req *req)
{
	if (req->drop)
		req->drop(req->arg);
	reply_busy(req, "too many calls are waiting (for this account, or in all); retry shortly");
}

static void
stream_start(struct http_server *srv, struct http_req *req)
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
	dispatch(req);
	if (req->state != REQ_DEFERRED) {
		req->state = REQ_READY;
		return;
	}
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		if (req->drop)
			req->drop(req->arg);
		http_reply_error(req, 500, "internal", "out of memory");
		req->state = REQ_READY;
		return;
	}
	d->req = req;
	d->fn = req->fn;
	d->arg = req->arg;
	d->drop = req->drop;
	req->deferred = d;
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
static enum MHD_Result
stream_body(struct http_req *req, const char *data, size_t *size)
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
	return queue_reply(req);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct http_server *srv = cls;
	struct http_req *req = *con_cls;

	(void)url;
	(void)version;
	if (req == NULL)
		return MHD_NO;
	if (req->px)
		return proxy_on_request(req->px, upload_data, upload_data_size, &req->status);
	if (!req->headers_seen) {
		const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_HOST);
		req->headers_seen = 1;
		snprintf(req->method, sizeof(req->method), "%s", method);
		/* Stopping: the workers may be gone, so nothing new is taken. */
		if (atomic_load(&srv->closing)) {
			http_add_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
			http_reply_error(req, 503, "unavailable",
			    "the service is restarting; retry shortly");
			return queue_reply(req);
		}
		/* Preview hosts first: their traffic never meets the routes. */
		if (srv->has_icpt && host && srv->icpt.claims(srv->icpt.ctx, host)) {
			req->px = proxy_begin(srv->icpt.proxy, conn, method, req->path, req->query,
			    req->path_too_long);
			if (req->px) {
				/* The proxy streams and bounds what it carries. */
				hlim_exempt(srv->lim, http_lim_conn(req));
				return MHD_YES;
			}
			static const char busy[] = "preview proxy busy; retry shortly\n";
			http_reply_raw(req, 503, "text/plain; charset=utf-8", busy,
			    sizeof(busy) - 1);
			return queue_reply(req);
		}
		return head_reply(srv, req);
	}
	/* Again after a key lookup resumed the connection: libmicrohttpd
	 * then repeats its first call. */
	if (req->head_again)
		return head_reply(srv, req);
	if (req->route && req->route->stream_body && req->state == REQ_NEW && !req->streaming)
		stream_start(srv, req);
	if (req->streaming)
		return stream_body(req, upload_data, upload_data_size);
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (req->too_large || req->state != REQ_NEW)
			return MHD_YES;
		if (http_lim_body_append(req, upload_data, n) == -2)
			return MHD_NO;
		return MHD_YES;
	}
	hlim_request_end(srv->lim, http_lim_conn(req)); /* the body is in */
	switch (req->state) {
	case REQ_NEW:
		dispatch(req);
		if (req->state == REQ_DEFERRED) {
			struct deferred *d = calloc(1, sizeof(*d));
			if (d == NULL) {
				if (req->drop)
					req->drop(req->arg);
				http_reply_error(req, 500, "internal", "out of memory");
				return queue_reply(req);
			}
			d->req = req;
			d->fn = req->fn;
			d->arg = req->arg;
			d->drop = req->drop;
			req->deferred = d;
			/* Park first, then hand off: the worker's resume can
			 * never precede the suspend. */
			MHD_suspend_connection(conn);
			if (work_submit_key(srv->work, req->work_key, deferred_main,
				deferred_expire, d) < 0) {
				req->deferred = NULL;
				free(d);
				reply_pool_busy(req);
				req->state = REQ_READY;
				MHD_resume_connection(conn);
			}
			return MHD_YES;
		}
		return queue_reply(req);
	case REQ_READY:
		return queue_reply(req);
	case REQ_DEFERRED:
	case REQ_QUEUED:
		return MHD_YES;
	}
	return MHD_NO;
}

/* ---- server ---- */

static void *
ticker_main(void *p)
{
	struct http_server *srv = p;
	struct timespec ts;

	pthread_mutex_lock(&srv->stop_lock);
	while (!srv->stopping) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&srv->stop_cond, &srv->stop_lock, &ts);
		if (srv->stopping)
			break;
		pthread_mutex_unlock(&srv->stop_lock);
		sse_keepalive_all(srv->cfg->sse_keepalive_s);
		hlim_sweep(srv->lim, clock_ms());
		pthread_mutex_lock(&srv->stop_lock);
	}
	pthread_mutex_unlock(&srv->stop_lock);
	return NULL;
}

static int
resolve_listen(const struct config *cfg, struct sockaddr_storage *ss, socklen_t *sslen,
    struct err *e)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	int rc;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(cfg->listen_host, NULL, &hints, &res);
	if (rc != 0 || res == NULL) {
		err_set_field(e, "AAS_LISTEN", "AAS_LISTEN: cannot resolve %s: %s",
		    cfg->listen_host, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)cfg->listen_port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)cfg->listen_port);
	freeaddrinfo(res);
	return 0;
}

struct http_server *
http_new(const struct config *cfg, struct work_pool *work, const struct http_route *routes,
    size_t n_routes, const struct http_intercept *icpt, const struct http_auth *auth, struct err *e)
{
	struct http_server *srv = calloc(1, sizeof(*srv));
	struct sockaddr_storage ss;
	socklen_t sslen;
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
	    MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE;

	if (srv == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (icpt) {
		srv->icpt = *icpt;
		srv->has_icpt = 1;
	}
	if (auth) {
		srv->auth = *auth;
		srv->has_auth = 1;
	}
	srv->cfg = cfg;
	srv->work = work;
	srv->routes = routes;
	srv->n_routes = n_routes;
	pthread_mutex_init(&srv->stop_lock, NULL);
	pthread_cond_init(&srv->stop_cond, NULL);
	srv->route_metric = calloc(n_routes ? n_routes : 1, sizeof(*srv->route_metric));
	if (srv->route_metric == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n_routes; i++)
		srv->route_metric[i] = metrics_route_label(routes[i].path);
	if ((srv->lim = hlim_new(&(struct hlim_limits){
		 .max_conns_per_addr = cfg->max_conns_per_addr,
		 .recv_s = cfg->request_recv_s,
		 .min_recv_rate = cfg->min_recv_rate,
		 .idle_s = cfg->conn_timeout_s,
		 .body_per_owner = cfg->max_body_buffer_per_account,
		 .max_conns = HTTP_MAX_CONNECTIONS,
	     })) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	if (resolve_listen(cfg, &ss, &sslen, e) < 0)
		goto fail;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* One option and its values a line. */
	/* clang-format off */
	srv->daemon = MHD_start_daemon(flags, (uint16_t)cfg->listen_port, http_lim_accept, srv,
	    on_request, srv,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->http_threads,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->conn_timeout_s,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
	    MHD_OPTION_NOTIFY_CONNECTION, http_lim_notify, srv,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
	    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
	    MHD_OPTION_END);
	/* clang-format on */
	if (srv->daemon == NULL) {
		err_set_field(e, "AAS_LISTEN", "AAS_LISTEN: cannot listen on %s:%d (in use?)",
		    cfg->listen_host, cfg->listen_port);
		goto fail;
	}
	if (pthread_create(&srv->ticker, NULL, ticker_main, srv) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start keep-alive thread");
		goto fail;
	}
	srv->ticker_started = 1;
	return srv;
fail:
	http_free(srv);
	return NULL;
}

void
http_close(struct http_server *srv)
{
	if (srv)
		atomic_store(&srv->closing, 1);
}

/* Answers already produced (a worker's last reply among them) go out
 * before the connections are closed: waits, at most HTTP_DRAIN_MS, for
 * every open request to be reported complete. */
static void
drain(struct http_server *srv)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HTTP_DRAIN_MS / 1000;
	until.tv_nsec += (long)(HTTP_DRAIN_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&srv->stop_lock);
	while (srv->open_reqs > 0)
		if (pthread_cond_timedwait(&srv->stop_cond, &srv->stop_lock, &until) != 0)
			break;
	if (srv->open_reqs > 0)
		log_warn("http: stopping with %d requests still open", srv->open_reqs);
	pthread_mutex_unlock(&srv->stop_lock);
}

int
http_port(const struct http_server *srv)
{
	const union MHD_DaemonInfo *i = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);

	return i ? (int)i->port : -1;
}

void
http_free(struct http_server *srv)
{
	if (srv == NULL)
		return;
	if (srv->ticker_started) {
		pthread_mutex_lock(&srv->stop_lock);
		srv->stopping = 1;
		pthread_cond_signal(&srv->stop_cond);
		pthread_mutex_unlock(&srv->stop_lock);
		pthread_join(srv->ticker, NULL);
	}
	if (srv->daemon) {
		sse_finish_all();
		if (srv->has_icpt)
			proxy_shutdown(srv->icpt.proxy);
		drain(srv);
		MHD_stop_daemon(srv->daemon);
	}
	pthread_mutex_destroy(&srv->stop_lock);
	pthread_cond_destroy(&srv->stop_cond);
	hlim_free(srv->lim);
	free(srv->route_metric);
	free(srv);
}
