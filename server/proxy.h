/* proxy.h - a streaming reverse proxy on libmicrohttpd (proxy_), used for
 * preview URLs. It takes a request over before its body is read: the body
 * flows to the upstream through a bounded buffer (the client is paused
 * while it is full), the response flows back the same way, and a 101
 * answer turns the connection into a two-way byte pipe (WebSocket).
 *
 * Each proxied request has one thread doing the upstream side with
 * blocking, time-bounded I/O; the HTTP threads never wait on it. The number
 * of such requests is capped in all (503 beyond) and, once the resolver
 * named the sandbox and account, per sandbox and per account (429
 * beyond), so one tenant cannot take every slot. Upstreams get HTTP/1.1
 * with "Connection: close": one upstream connection per request. */
#ifndef AAS_PROXY_H
#define AAS_PROXY_H

#include <stddef.h>

#include <microhttpd.h>

#include "base/err.h"
#include "sandbox/preview.h"

struct proxy;
struct px;

/* Runs on the request's proxy thread; may block (database). */
typedef void (*proxy_resolve_fn)(void *ctx, const struct preview_ask *ask,
    struct preview_route *out);
/* Why a resolved upstream closed without answering (the error page's
 * text); runs on the request's proxy thread and may block (the guest). */
typedef void (*proxy_explain_fn)(void *ctx, const struct preview_route *route, char *msg, size_t n);
/* Rewrites the query for the upstream (drops credentials); NULL: as is. */
typedef void (*proxy_query_fn)(const char *query, char *out, size_t n);

struct proxy_config {
	int max_conns;       /* proxied requests at once */
	int max_per_sandbox; /* ... to one sandbox (route.sandbox_id) */
	int max_per_account; /* ... to one account's sandboxes */
	int idle_timeout_s;  /* a direction idle this long ends it */
	const char *scheme;  /* for X-Forwarded-Proto */
	proxy_resolve_fn resolve;
	proxy_explain_fn explain; /* NULL: a generic text */
	proxy_query_fn rewrite_query;
	void *ctx;
};

struct proxy *proxy_new(const struct proxy_config *cfg, struct err *e);
/* Ends every proxied request and waits for their threads. Call before the
 * HTTP daemon stops; proxy_free afterwards. */
void proxy_shutdown(struct proxy *p);
void proxy_free(struct proxy *p);
size_t proxy_active(struct proxy *p);

/* End every proxied request (client and upstream side, WebSockets too) to
 * the sandbox, or to any sandbox of the account; requests still being
 * resolved are not touched (the resolver refuses ended sandboxes and
 * disabled accounts). Safe from any thread and never waits on a request:
 * each request's own thread notices within a fraction of a second and
 * closes both sides. proxy_close_account is what the account-disable path
 * calls ("a:<account_id>" on channel aas_invalidate). The number of
 * requests told to end. */
size_t proxy_close_sandbox(struct proxy *p, const char *sandbox_id);
size_t proxy_close_account(struct proxy *p, const char *account_id);

/* The HTTP front end hands over requests with these. proxy_begin runs when
 * the headers are in (before any body); it returns NULL when memory is
 * short or the proxy is stopping, after which the caller answers 503
 * (a full proxy answers its own 503, naming AAS_PREVIEW_MAX_CONNS).
 * `uri_too_long`: the caller cut the path or dropped the query at its
 * limit; the request is answered 414, never forwarded shortened. */
struct px *proxy_begin(struct proxy *p, struct MHD_Connection *conn, const char *method,
    const char *path, const char *query, int uri_too_long);
/* Called like a libmicrohttpd access handler for every later call of the
 * request; `status` receives the status answered (for the access log). */
enum MHD_Result proxy_on_request(struct px *x, const char *upload_data, size_t *upload_data_size,
    int *status);
/* The request is over (sent, failed, or the client went away). */
void proxy_end(struct px *x);

#endif
