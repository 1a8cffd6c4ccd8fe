/* mcp.c - MCP Streamable HTTP transport: the route, its header checks,
 * and each request's job (the caller is mcp_caller.c, POST answers
 * mcp_post.c, GET streams mcp_stream.c, methods mcp_rpc.c).
 *
 * On the HTTP thread: origin, content type, accept, protocol version and
 * JSON parsing (all cheap). Everything that touches the database (key,
 * session) or runs a tool happens on a worker thread. */
#include "server/mcp_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "account/accounts.h"
#include "server/auth.h"
#include "base/fmt.h"
#include "base/jsonrpc.h"
#include "base/mcpver.h"
#include "account/session.h"
#include "server/mcp_cred.h"

struct mcp *
mcp_new(struct app *app, struct err *e)
{
	struct mcp *m = calloc(1, sizeof(*m));

	if (m == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	m->app = app;
	/* Each stream holds at most two names. */
	m->held = tally_new(2 * MCP_MAX_GET_STREAMS + 2);
	if (m->held == NULL) {
		free(m);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&m->lock, NULL);
	return m;
}

void
mcp_free(struct mcp *m)
{
	if (m == NULL)
		return;
	while (m->streams) {
		struct get_stream *g = m->streams;
		m->streams = g->next;
		sse_finish(g->sse);
		sse_unref(g->sse);
		free(g);
	}
	pthread_mutex_destroy(&m->lock);
	/* Last: a stream's close (above, or when the HTTP daemon stopped)
	 * gives its names back here. */
	tally_free(m->held);
	free(m);
}

json_t *
mcp_error_fmt(int status, const char *code, const char *message)
{
	int rpc = RPC_SERVER_ERROR;

	(void)status;
	if (strcmp(code, "parse_error") == 0)
		rpc = RPC_PARSE_ERROR;
	else if (strcmp(code, "invalid_request") == 0)
		rpc = RPC_INVALID_REQUEST;
	else if (strcmp(code, "session_not_found") == 0)
		rpc = RPC_SESSION_NOT_FOUND;
	return rpc_error(NULL, rpc, message, NULL);
}

/* ---- header predicates ---- */

/* 1 when the parameters [p, end) hold q=0 (the type is refused). */
static int
accept_q_zero(const char *p, const char *end)
{
	while (p < end) {
		while (p < end && (*p == ' ' || *p == ';'))
			p++;
		if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
			p += 2;
			if (p < end && *p == '0') {
				p++;
				if (p < end && *p == '.')
					p++;
				while (p < end && *p == '0')
					p++;
				return p >= end || *p == ';' || *p == ' ';
			}
			return 0;
		}
		while (p < end && *p != ';')
			p++;
	}
	return 0;
}

/* 1 when the Accept list names `type` ("a/b"), its major wildcard or any type. */
int
mcp_accepts(const char *accept, const char *type)
{
	const char *slash = strchr(type, '/');
	size_t major = slash ? (size_t)(slash - type) : strlen(type);
	const char *p = accept;

	if (accept == NULL)
		return 0;
	while (*p) {
		size_t len;
		const char *semi, *comma = strchr(p, ',');
		const char *end = comma ? comma : p + strlen(p);

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		semi = memchr(p, ';', (size_t)(end - p));
		len = (size_t)((semi ? semi : end) - p);
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (semi && accept_q_zero(semi + 1, end))
			goto next;
		if ((len == strlen(type) && strncasecmp(p, type, len) == 0) ||
		    (len == 3 && strncmp(p, "*/*", 3) == 0) ||
		    (len == major + 2 && strncasecmp(p, type, major) == 0 && p[major] == '/' &&
			p[major + 1] == '*'))
			return 1;
next:
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	return 0;
}

int
mcp_content_type_is_json(const char *ct)
{
	size_t n = strlen("application/json");

	if (ct == NULL)
		return 0;
	while (*ct == ' ')
		ct++;
	return strncasecmp(ct, "application/json", n) == 0 &&
	    (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* ---- request flow ---- */

static void job_free(struct mcp_job *job);

static void
job_drop(void *arg)
{
	job_free(arg);
}

static void
job_free(struct mcp_job *job)
{
	if (job == NULL)
		return;
	json_decref(job->body);
	free(job);
}

static void
mcp_process(struct http_req *req, void *arg)
{
	struct mcp_job *job = arg;
	struct mcp *m = job->m;
	struct call_env env;
	char account_id[ACCT_ID_LEN + 1] = "";
	int has_account;
	struct err e;

	memset(&env, 0, sizeof(env));
	env.m = m;
	env.req = req;
	env.stateless = job->stateless;
	if (mcp_caller_auth(req, m, account_id, &has_account) < 0)
		goto out;
	env.account_id = has_account ? account_id : NULL;
	err_clear(&e);
	if (has_account && !job->stateless && mcp_cred_id(m->app, req, env.credential, &e) < 0) {
		mcp_caller_session_refused(req, &e);
		goto out;
	}
	if (!has_account && job->kind == JOB_POST &&
	    mcp_caller_refuse_anonymous(req, m, job->body) < 0)
		goto out;
	if (job->has_session && mcp_caller_session(req, m, job, &env, has_account) < 0)
		goto out;
	switch (job->kind) {
	case JOB_POST:
		mcp_post_reply(req, job, &env);
		break;
	case JOB_GET:
		/* The key's account, else the session's owner, else anonymous. */
		mcp_stream_open(req, m, job->session,
		    env.account_id             ? env.account_id :
			env.sess.account_id[0] ? env.sess.account_id :
						 NULL);
		break;
	case JOB_DELETE:
		err_clear(&e);
		if (sess_end(m->app->db, job->session, &e) < 0) {
			http_reply_error(req, 404, "session_not_found", "Session not found");
			break;
		}
		/* Here at once; other aasd processes hear of it by notification. */
		if (m->app->sessions)
			ttl_del(m->app->sessions, job->session);
		mcp_close_session(m, job->session);
		http_reply_raw(req, 200, "", "", 0);
		break;
	}
out:
	job_free(job);
}

static int
check_protocol_header(struct http_req *req)
{
	const char *v = http_header(req, "MCP-Protocol-Version");
	char msg[160];

	if (v == NULL || mcpver_supported(v))
		return 0;
	fmt_cut(msg, sizeof(msg),
	    "Bad Request: unsupported MCP-Protocol-Version; "
	    "supported: %s, %s, %s",
	    mcpver_at(0), mcpver_at(1), mcpver_at(2));
	http_reply_error(req, 400, "bad_request", msg);
	return -1;
}

static struct mcp_job *
new_job(struct mcp *m, int kind, struct http_req *req, int need_session)
{
	const char *sid = http_header(req, "Mcp-Session-Id");
	struct mcp_job *job;

	if (need_session && (sid == NULL || *sid == '\0')) {
		http_reply_error(req, 400, "bad_request",
		    "Bad Request: Mcp-Session-Id header is required; send initialize first");
		return NULL;
	}
	job = calloc(1, sizeof(*job));
	if (job == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		return NULL;
	}
	if (need_session &&
	    (!sess_id_valid(sid) || fmt_buf(job->session, sizeof(job->session), "%s", sid) < 0)) {
		free(job);
		http_reply_error(req, 404, "session_not_found",
		    "Session not found or ended; send initialize again");
		return NULL;
	}
	job->m = m;
	job->kind = kind;
	job->has_session = need_session != 0;
	return job;
}

static void
handle_post(struct http_req *req, struct mcp *m)
{
	const char *body;
	size_t len;
	json_t *parsed;
	char msg[200];
	struct mcp_job *job;
	int stateless;

	if (!mcp_content_type_is_json(http_header(req, "Content-Type"))) {
		http_reply_error(req, 415, "unsupported_media_type",
		    "Unsupported Media Type: Content-Type must be application/json");
		return;
	}
	if (!mcp_accepts(http_header(req, "Accept"), "application/json") ||
	    !mcp_accepts(http_header(req, "Accept"), "text/event-stream")) {
		http_reply_error(req, 406, "not_acceptable",
		    "Not Acceptable: Accept must list application/json and text/event-stream");
		return;
	}
	body = http_body(req, &len);
	parsed = rpc_parse(body, len, msg, sizeof(msg));
	if (parsed == NULL) {
		http_reply_error(req, 400, "parse_error", msg);
		return;
	}
	stateless = mcp_era_stateless(req, parsed);
	if (stateless ? mcp_era_check(req, parsed) < 0 : check_protocol_header(req) < 0) {
		json_decref(parsed);
		return;
	}
	/* The stateless revision has no session: any Mcp-Session-Id is ignored. */
	job = new_job(m, JOB_POST, req, !stateless && !mcp_post_is_initialize(parsed));
	if (job == NULL) {
		json_decref(parsed);
		return;
	}
	job->body = parsed;
	job->stateless = stateless;
	if (mcp_post_inline(req, m, job))
		mcp_process(req, job);
	else
		auth_defer(req, mcp_process, job, job_drop);
}

enum http_key_need
mcp_head(struct http_req *req, void *ctx)
{
	struct mcp *m = ctx;
	const char *method = http_method(req);

	/* DNS-rebinding protection: a browser page from elsewhere. */
	if (!config_origin_allowed(&m->app->cfg, http_header(req, "Origin"))) {
		http_reply_error(req, 403, "forbidden", "Forbidden: Origin not allowed");
		return HTTP_KEY_REPLIED;
	}
	if (strcmp(method, "POST") != 0 && strcmp(method, "GET") != 0 &&
	    strcmp(method, "DELETE") != 0) {
		http_add_header(req, "Allow", "GET, POST, DELETE");
		http_reply_error(req, 405, "method_not_allowed", "Method Not Allowed");
		return HTTP_KEY_REPLIED;
	}
	return HTTP_KEY_OPTIONAL;
}

void
mcp_handle(struct http_req *req, void *ctx)
{
	struct mcp *m = ctx;
	const char *method = http_method(req);
	struct mcp_job *job;

	/* DNS-rebinding protection: a browser page from elsewhere. */
	if (!config_origin_allowed(&m->app->cfg, http_header(req, "Origin"))) {
		http_reply_error(req, 403, "forbidden", "Forbidden: Origin not allowed");
		return;
	}
	if (strcmp(method, "POST") == 0) {
		handle_post(req, m);
		return;
	}
	if ((strcmp(method, "GET") == 0 || strcmp(method, "DELETE") == 0) &&
	    http_header(req, "MCP-Protocol-Version") != NULL &&
	    strcmp(http_header(req, "MCP-Protocol-Version"), MCP_VERSION_STATELESS) == 0) {
		/* 2026-07-28 is POST only: there is no session to stream or end. */
		http_add_header(req, "Allow", "POST");
		http_reply_error(req, 405, "method_not_allowed",
		    "Method Not Allowed: protocol version 2026-07-28 uses POST only");
		return;
	}
	if (strcmp(method, "GET") == 0) {
		if (!mcp_accepts(http_header(req, "Accept"), "text/event-stream")) {
			http_reply_error(req, 406, "not_acceptable",
			    "Not Acceptable: Accept must list text/event-stream");
			return;
		}
		if (check_protocol_header(req) < 0)
			return;
		if ((job = new_job(m, JOB_GET, req, 1)) != NULL)
			auth_defer(req, mcp_process, job, job_drop);
		return;
	}
	if (strcmp(method, "DELETE") == 0) {
		if (check_protocol_header(req) < 0)
			return;
		if ((job = new_job(m, JOB_DELETE, req, 1)) != NULL)
			auth_defer(req, mcp_process, job, job_drop);
		return;
	}
	http_add_header(req, "Allow", "GET, POST, DELETE");
	http_reply_error(req, 405, "method_not_allowed", "Method Not Allowed");
}
