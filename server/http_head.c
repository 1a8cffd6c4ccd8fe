/* http_head.c - a request's headers stage, before any byte of its body:
 * the route, the refusals that need no body, the body limit, and the API
 * key (looked up on a worker while the connection is parked). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "base/work.h"
#include "server/auth.h"
#include "server/http_int.h"

/* ---- the route ---- */

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

/* After the lookup: read the body, or answer with it unread. */
static enum head_next
key_outcome(struct http_server *srv, struct http_req *req)
{
	switch (req->key_state) {
	case KEY_OK:
		return HEAD_READ_BODY;
	case KEY_BUSY:
		/* The lookup took the client address's turn. */
		http_reply_busy(req,
		    "too many requests from this address are waiting; retry shortly");
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
enum MHD_Result
http_head_reply(struct http_server *srv, struct http_req *req)
{
	switch (head(srv, req)) {
	case HEAD_READ_BODY:
		if (http_lim_body_begin(req) < 0)
			return http_reply_queue(req);
		return MHD_YES;
	case HEAD_WAIT:
		return MHD_YES;
	case HEAD_REPLY:
		return http_reply_queue(req);
	}
	return MHD_NO;
}
