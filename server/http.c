/* http.c - libmicrohttpd front end: the server, the callbacks a request
 * goes through, and what a handler reads of its request (replies are
 * http_reply.c, the headers stage http_head.c, work handed to the pool
 * http_defer.c; what they share, server/http_int.h). */
#include "server/http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "base/bq.h"
#include "base/clock.h"
#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"
#include "server/http_int.h"
#include "server/proxy.h"
#include "base/metrics.h"

#define HTTP_MAX_QUERY 16384
#define HTTP_DRAIN_MS 5000 /* how long a stop waits for answers on their way out */

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
		fmt_cut(req->detail + n, sizeof(req->detail) - n, " %s=%s", key, clean);
}

/* ---- libmicrohttpd callbacks ---- */

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	(void)cls;
	err_ignore(fmt_vbuf(line, sizeof(line), fmt, ap)); /* a log line may be cut */
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
	/* Without randomness the id is a stand-in for the logs. */
	if (key_random_hex(req->request_id, sizeof(req->request_id), 8) < 0)
		fmt_cut(req->request_id, sizeof(req->request_id), "0000000000000000");
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
	http_req_free(req);
}

void
http_req_free(struct http_req *req)
{
	http_reply_reset(req);
	for (int i = 0; i < req->n_headers; i++)
		free(req->headers[i].value);
	bq_free(req->in);
	http_lim_body_end(req);
	pthread_mutex_destroy(&req->slock);
	free(req->query);
	free(req->body);
	free(req);
}

void
http_dispatch(struct http_req *req)
{
	if (req->too_large) {
		http_lim_reply_too_large(req);
		return;
	}
	req->route->handler(req, req->route->ctx);
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
		/* A method too long to keep is none the routes know (the
		 * preview proxy passes it on as it came). */
		int method_kept = fmt_buf(req->method, sizeof(req->method), "%s", method) == 0;

		req->headers_seen = 1;
		/* Stopping: the workers may be gone, so nothing new is taken. */
		if (atomic_load(&srv->closing)) {
			http_add_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
			http_reply_error(req, 503, "unavailable",
			    "the service is restarting; retry shortly");
			return http_reply_queue(req);
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
			return http_reply_queue(req);
		}
		if (!method_kept) {
			http_reply_error(req, 501, "not_implemented", "unknown request method");
			return http_reply_queue(req);
		}
		return http_head_reply(srv, req);
	}
	/* Again after a key lookup resumed the connection: libmicrohttpd
	 * then repeats its first call. */
	if (req->head_again)
		return http_head_reply(srv, req);
	if (req->route && req->route->stream_body && req->state == REQ_NEW && !req->streaming)
		http_defer_stream_start(srv, req);
	if (req->streaming)
		return http_defer_stream_body(req, upload_data, upload_data_size);
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
		http_dispatch(req);
		if (req->state == REQ_DEFERRED)
			return http_defer_submit(srv, req);
		return http_reply_queue(req);
	case REQ_READY:
		return http_reply_queue(req);
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
	struct timespec until = clock_cond_deadline(HTTP_DRAIN_MS);

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
