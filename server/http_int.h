/* http_int.h - the HTTP front end's request and server, shared by the
 * files of the front end (http.c, http_reply.c, http_head.c, http_defer.c,
 * http_limits.c) and nothing else. */
#ifndef AAS_HTTP_INT_H
#define AAS_HTTP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <microhttpd.h>

#include "base/bq.h"
#include "server/hlim.h"
#include "server/http.h"

#define HTTP_MAX_PATH 1024
#define HTTP_MAX_CONNECTIONS 4096
#define HTTP_MAX_OUT_HEADERS 12

enum req_state { REQ_NEW, REQ_DEFERRED, REQ_READY, REQ_QUEUED };
/* The API key of a request, checked before its body is read. */
enum key_state { KEY_UNCHECKED, KEY_LOOKING, KEY_OK, KEY_REFUSED, KEY_BUSY };
/* What the headers stage decided. */
enum head_next { HEAD_READ_BODY, HEAD_WAIT, HEAD_REPLY };

/* A response header; values are copied (a Location or a CSP may be a few
 * KiB) up to HTTP_MAX_HEADER_VALUE. */
#define HTTP_MAX_HEADER_VALUE 8192
struct out_header {
	char name[48];
	char *value;
};

struct http_req {
	struct http_server *srv;
	struct MHD_Connection *conn;
	const struct http_route *route;
	enum req_state state;
	char method[16];
	char path[HTTP_MAX_PATH + 1];
	int path_too_long;
	char *query;   /* raw, NULL when the URI has none; never logged */
	struct px *px; /* set when the preview proxy took the request */
	struct http_span args[HTTP_MAX_PATH_ARGS];
	size_t n_args;
	long long max_body;
	const char *max_body_name; /* the setting a 413 names; NULL: none */
	char request_id[17];
	struct timespec start;
	int headers_seen;
	int head_again; /* the next call repeats the headers stage (key looked up) */
	enum key_state key_state;
	char account[HTTP_ACCOUNT_MAX + 1]; /* when key_state is KEY_OK */
	struct err key_err;                 /* when KEY_REFUSED */
	char *body;
	size_t body_len, body_cap;
	int too_large;
	/* body bytes held against the owner's AAS_MAX_BODY_BUFFER_PER_ACCOUNT */
	char body_owner[HLIM_NAME_MAX + 1];
	long long body_held;
	int over_budget; /* too_large because of the owner's budget */
	/* reply */
	int status;
	char content_type[64];
	char *resp_body;
	size_t resp_len;
	struct sse *sse;
	struct http_upgrade *upgrade; /* a 101 reply; NULL once MHD gave it the socket */
	struct out_header headers[HTTP_MAX_OUT_HEADERS];
	int n_headers;
	char detail[256];
	/* deferred work */
	http_deferred_fn fn;
	void *arg;
	void (*drop)(void *arg);
	struct deferred *deferred;
	char work_key[WORK_KEY_MAX + 1]; /* whose turn the work takes ("": internal) */
	/* stream_body routes: the body flows to the work through `in` while
	 * it runs; `slock` orders the end of the body, the end of the work
	 * and the client going away. */
	struct bq *in;
	int streaming; /* the work was handed the body */
	int in_done;   /* the body ended, failed or is dropped from here on */
	pthread_mutex_t slock;
	int work_done;  /* the work replied (under slock) */
	int reply_wait; /* parked until the work replies (under slock) */
	int orphan;     /* the connection ended first; the work frees req */
	/* a streamed reply (http_reply_stream) */
	struct bq *out;
	long long out_len;
};

/* A job on the worker pool. It outlives the request when the reply went
 * out early (an SSE stream the job keeps writing), so the job never looks
 * at the request after handing it back. */
struct deferred {
	struct http_req *req;
	http_deferred_fn fn;
	void *arg;
	void (*drop)(void *arg);
	int sent;
};

struct http_server {
	struct MHD_Daemon *daemon;
	const struct config *cfg;
	struct work_pool *work;
	const struct http_route *routes;
	size_t n_routes;
	int *route_metric; /* metrics label index of each route */
	pthread_t ticker;
	int ticker_started;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	int stopping;
	/* Requests not yet reported complete (stop_lock); http_free lets
	 * them finish, within HTTP_DRAIN_MS, before the daemon stops. */
	int open_reqs;
	atomic_int closing; /* http_close: new requests are answered 503 */
	struct http_intercept icpt;
	int has_icpt;
	struct http_auth auth;
	int has_auth;
	struct hlim *lim; /* connections per address, arrival deadlines, body budgets */
};

/* ---- http.c ---- */

/* Frees a request whose connection and work are both done with it. */
void http_req_free(struct http_req *req);
/* Runs the route's handler on a request whose body is in (or answers
 * 413 for one over its limit). */
void http_dispatch(struct http_req *req);

/* ---- http_reply.c ---- */

/* Drops whatever reply the request holds (body, stream, upgrade). */
void http_reply_reset(struct http_req *req);
/* Hands the request's reply to libmicrohttpd (a 500 when there is none). */
enum MHD_Result http_reply_queue(struct http_req *req);
/* Answers 429 "busy" with `msg` and a Retry-After. */
void http_reply_busy(struct http_req *req, const char *msg);

/* ---- http_head.c ---- */

/* Runs the headers stage and answers libmicrohttpd for it: reads the
 * body next, waits for the key's lookup, or replies at once. */
enum MHD_Result http_head_reply(struct http_server *srv, struct http_req *req);

/* ---- http_defer.c ---- */

/* The handler deferred its work (req->state REQ_DEFERRED): parks the
 * connection and hands the work to the pool, or replies 500 or 429. */
enum MHD_Result http_defer_submit(struct http_server *srv, struct http_req *req);
/* A stream_body route as its body begins: runs the handler and hands its
 * work to the pool at once (req->streaming), or leaves the request an
 * ordinary one that drops its body (req->state REQ_READY). */
void http_defer_stream_start(struct http_server *srv, struct http_req *req);
/* One call with body bytes of a streamed request (none: the body ended);
 * the answer for libmicrohttpd. */
enum MHD_Result http_defer_stream_body(struct http_req *req, const char *data, size_t *size);

/* ---- http_limits.c ---- */

/* The connection-level limits of `srv` (hlim) fed from libmicrohttpd:
 * its accept policy and connection notifications. */
enum MHD_Result http_lim_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void http_lim_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode toe);
/* The limits' entry of the request's connection (NULL: none). */
struct hlim_conn *http_lim_conn(const struct http_req *req);
/* Once the head is accepted (the credential resolved): refuses a body
 * whose Content-Length passes the route's limit, and holds its bytes
 * against the owner's budget (the Content-Length, or BQ_MAX_BYTES at most
 * for a streamed body): 0, or -1 after replying 413. */
int http_lim_body_begin(struct http_req *req);
/* Appends `n` body bytes, holding room for them in the owner's budget:
 * 0; -1 when the body passed the route's limit or the budget (it is
 * dropped, too_large is set and the reply will be 413); -2 out of memory. */
int http_lim_body_append(struct http_req *req, const char *data, size_t n);
/* Gives back what the request holds. */
void http_lim_body_end(struct http_req *req);
/* Answers 413 for a body over its limit (the one it passed). */
void http_lim_reply_too_large(struct http_req *req);

#endif
