/* http.h - the HTTP front end on libmicrohttpd (http_): epoll thread pool,
 * bounded bodies, routing, deferral of slow work to the worker pool with
 * suspend/resume, one log line per request. */
#ifndef AAS_HTTP_H
#define AAS_HTTP_H

#include <stddef.h>

#include <jansson.h>

#include "base/config.h"
#include "base/err.h"
#include "server/sse.h"
#include "base/work.h"

struct http_server;
struct http_req;

/* A route handler runs on an HTTP thread and must not block: it answers
 * with http_reply_*(), or hands slow work to http_defer(). */
typedef void (*http_handler)(struct http_req *req, void *ctx);
/* Formats an error body for a route (JSON-RPC shape for MCP, REST shape
 * elsewhere). Returns a new reference. */
typedef json_t *(*http_error_fmt)(int status, const char *code, const char *message);

/* What a request needs by way of an API key, known from its method and
 * headers alone, before any byte of its body is read. */
enum http_key_need {
	HTTP_KEY_NONE,     /* the route reads no key: its body is anonymous */
	HTTP_KEY_OPTIONAL, /* without a key it is anonymous; a key sent is checked first */
	HTTP_KEY_REQUIRED, /* without a key: 401 at once; a key sent is checked first */
	HTTP_KEY_REPLIED,  /* the route replied already; the body is never read */
};
/* Runs on the HTTP thread once the headers are in (must not block). */
typedef enum http_key_need (*http_head_fn)(struct http_req *req, void *ctx);

/* A route's path is matched exactly, except that a segment written
 * "{name}" matches any one non-empty segment (http_path_arg reads it).
 * The first route that matches wins. */
struct http_route {
	const char *path;
	http_handler handler;
	void *ctx;
	http_error_fmt error_fmt; /* NULL: {"error":{"code","message"}} */
	long long max_body;       /* largest body; 0: AAS_MAX_BODY_BYTES */
	/* NULL: HTTP_KEY_NONE. An anonymous body (no key, or a route that
	 * reads none) is limited to AAS_MAX_ANON_BODY_BYTES; a key is
	 * resolved (through `auth`, off the HTTP thread on a cache miss)
	 * before the body is read, and an unknown or revoked one gets 401
	 * with the body unread. */
	http_head_fn head;
	const char *max_body_name; /* the setting a 413 names (with max_body) */
	/* The handler runs as soon as the headers are accepted and must defer;
	 * the body then flows to the worker through http_body_stream, with
	 * at most BQ_MAX_BYTES of it held at a time. */
	int stream_body;
};

/* Resolving API keys before request bodies are read. */
#define HTTP_ACCOUNT_MAX 64
struct http_auth {
	/* 1 when a cache resolves the key to its account (no database). */
	int (*peek)(void *ctx, const char *key, size_t keylen, char *account, size_t n);
	/* Resolves the key presented at `path` (may use the database; runs on
	 * a worker thread):
	 * 0, or -1 with `e` (ERR_UNAUTHORIZED: unknown, revoked, disabled). */
	int (*resolve)(void *ctx, const char *path, const char *key, size_t keylen, char *account,
	    size_t n, struct err *e);
	void *ctx;
};

/* Requests whose Host an interceptor claims never reach the routes: they
 * go whole (body unread) to the streaming proxy. */
struct proxy;
struct http_intercept {
	int (*claims)(void *ctx, const char *host);
	void *ctx;
	struct proxy *proxy;
};

/* `icpt` and `auth` may be NULL (without `auth`, keys are left to the
 * handlers and bodies are read first). */
#define HTTP_MAX_PATH_ARGS 4

/* Where a "{name}" segment matched: path + off, len bytes. */
struct http_span {
	size_t off, len;
};

/* Matches a path against a route path. Returns the number of "{name}"
 * segments captured (in order), or -1 when it does not match. Exposed for
 * unit tests. */
int http_path_match(const char *pattern, const char *path, struct http_span *caps, size_t max_caps);

struct http_server *http_new(const struct config *cfg, struct work_pool *work,
    const struct http_route *routes, size_t n_routes, const struct http_intercept *icpt,
    const struct http_auth *auth, struct err *e);
/* The service is stopping: from now on a new request is answered 503
 * (the worker pool may be gone); requests under way go on. */
void http_close(struct http_server *srv);
/* Ends open streams, lets answers under way go out (a few seconds at
 * most), stops the daemon. */
void http_free(struct http_server *srv);
/* The port listened on (AAS_LISTEN's, or the one chosen for port 0). */
int http_port(const struct http_server *srv);

/* Request accessors. Header lookup is case-insensitive. */
const char *http_method(const struct http_req *req);
const char *http_path(const struct http_req *req);
const char *http_header(const struct http_req *req, const char *name);
const char *http_body(const struct http_req *req, size_t *len);
/* The raw query string (after '?', still percent-encoded; "" when none).
 * Never logged. */
const char *http_query(const struct http_req *req);
/* Copies the i-th "{name}" segment of the matched route (raw, not
 * decoded). -1 when there is none or it does not fit in n bytes. */
int http_path_arg(const struct http_req *req, size_t i, char *out, size_t n);
const char *http_request_id(const struct http_req *req);
/* The peer's address as text ("127.0.0.1", "::1"); -1 when unknown. */
int http_client_addr(const struct http_req *req, char *out, size_t n);
/* The account the request's API key was resolved to before its body was
 * read; NULL without a key, or on a route that reads none. */
const char *http_account(const struct http_req *req);
/* The configuration the server was started with. */
const struct config *http_config(const struct http_req *req);
/* Appends "key=value" to the request's log line (bounded; never a key). */
void http_log_detail(struct http_req *req, const char *key, const char *value);

/* Replies. Each replaces any earlier reply of the same request. */
void http_reply_json(struct http_req *req, int status, json_t *body); /* steals */
void http_reply_raw(struct http_req *req, int status, const char *content_type, const char *body,
    size_t len);
void http_reply_error(struct http_req *req, int status, const char *code, const char *message);
void http_add_header(struct http_req *req, const char *name, const char *value);
/* Starts an SSE reply; returns the stream with a reference for the caller
 * (sse_unref when done producing). NULL on allocation failure. */
struct sse *http_reply_sse(struct http_req *req, int status);

/* Runs fn(req, arg) on a worker thread while the connection is parked.
 * fn replies with http_reply_*(); the reply is sent when fn returns, or
 * earlier through http_send_now() (after which fn must not touch req). */
typedef void (*http_deferred_fn)(struct http_req *req, void *arg);
/* `drop` (may be NULL) frees arg when the work cannot be queued (503). */
void http_defer(struct http_req *req, http_deferred_fn fn, void *arg, void (*drop)(void *arg));
/* http_defer taking its turn under `key` (an account or an address:
 * auth_work_key): the pool's per-account limits apply, and work that cannot start in time is
 * answered 429 busy with Retry-After (drop frees arg). */
void http_defer_as(struct http_req *req, const char *key, http_deferred_fn fn, void *arg,
    void (*drop)(void *arg));
void http_send_now(struct http_req *req);

/* The body of a stream_body route, for the deferred work (bq_read): it
 * ends with the body, or fails with ERR_LIMIT (field: the route's
 * max_body_name) once the body passes max_body, or when the client went
 * away. The work's reply goes out once the whole body was read (the rest
 * of a body the work did not want is read and dropped). NULL on other
 * routes. */
struct bq *http_body_stream(struct http_req *req);
/* From deferred work: sends the status and headers now (as http_send_now
 * does; req must not be touched after) and returns the queue the body is
 * written into (bq_write), with a reference for the caller, who ends it
 * with bq_finish (an error cuts the body short: the client sees a body
 * shorter than its Content-Length, or unterminated chunks) and bq_free.
 * `length` -1 when unknown. NULL (nothing sent) when out of memory or the
 * content type is too long. */
struct bq *http_reply_stream(struct http_req *req, int status, const char *content_type,
    long long length);

/* Switching protocols: a 101 reply (with the headers added through
 * http_add_header, "Upgrade" among them). Once it is sent, fn gets the
 * connection's socket and the bytes already read past the request (on an
 * HTTP thread: it must not block) and owns the socket until it calls
 * http_upgrade_close(u). When the reply is replaced or the connection
 * ends first, drop(ctx) runs instead (drop may be NULL). */
struct http_upgrade;
typedef void (*http_upgraded_fn)(void *ctx, int fd, const char *extra, size_t extra_len,
    struct http_upgrade *u);
void http_reply_upgrade(struct http_req *req, http_upgraded_fn fn, void *ctx,
    void (*drop)(void *ctx));
/* Gives the socket back to the HTTP server, which closes it. */
void http_upgrade_close(struct http_upgrade *u);

#endif
