/* mcp.c - MCP Streamable HTTP transport: headers, sessions, keys, the
 * fast path, batches, GET streams and DELETE (methods are in mcp_rpc.c).
 *
 * On the HTTP thread: origin, content type, accept, protocol version and
 * JSON parsing (all cheap). Everything that touches the database (key,
 * session) or runs a tool happens on a worker thread. */
#include "server/mcp_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "account/accounts.h"
#include "server/auth.h"
#include "server/oauth.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/mcp_version.h"
#include "base/metrics.h"
#include "account/session.h"
#include "server/mcp_cred.h"
#include "account/oauth_rules.h"
#include "service/tools.h"

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

/* 1 when the Accept list names `type` ("a/b"), its major wildcard or any type. */
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

static int
is_initialize_request(json_t *body)
{
	json_t *method = json_object_get(body, "method");

	return json_is_object(body) && json_object_get(body, "id") != NULL &&
	    json_is_string(method) && strcmp(json_string_value(method), "initialize") == 0;
}

/* Resolves the caller's key; replies 401 itself when the key is bad.
 * Returns -1 when a reply was made. */
static int
authenticate(struct http_req *req, struct mcp *m, char *account_id, int *has_account)
{
	const char *key, *why;
	size_t keylen;
	struct err e;
	enum auth_found found;

	*has_account = 0;
	if (http_account(req) != NULL) {
		/* Resolved before the body was read. */
		snprintf(account_id, ACCT_ID_LEN + 1, "%s", http_account(req));
		*has_account = 1;
		return 0;
	}
	found = auth_extract(http_header(req, "Authorization"), http_header(req, "x-api-key"), &key,
	    &keylen, &why);
	if (found == AUTH_NO_KEY)
		return 0;
	err_clear(&e);
	if (found == AUTH_KEY &&
	    auth_resolve(m->app, "/v1/mcp", key, keylen, account_id, ACCT_ID_LEN + 1, &e) == 0) {
		*has_account = 1;
		return 0;
	}
	if (found == AUTH_KEY && e.kind != ERR_UNAUTHORIZED) {
		http_reply_error(req, err_http_status(e.kind), "unavailable", e.msg);
		return -1;
	}
	if (found == AUTH_KEY)
		auth_reply_refused(req, &m->app->cfg, &e);
	else
		auth_reply_unauthorized(req, found, why, NULL);
	return -1;
}

/* 1 when the message (or one in a batch) is a request only a credential
 * may make: a tool other than the anonymous ones, or a task method. */
static int
needs_credential(json_t *body)
{
	const char *method, *tool;
	json_t *x;
	size_t i;

	if (json_is_array(body)) {
		json_array_foreach(body, i, x)
			if (needs_credential(x))
				return 1;
		return 0;
	}
	method = json_string_value(json_object_get(body, "method"));
	if (method == NULL || json_object_get(body, "id") == NULL)
		return 0;
	if (mcp_era_is_task_method(method))
		return 1;
	tool = json_string_value(json_object_get(json_object_get(body, "params"), "name"));
	/* An unknown tool is the caller's error (-32602), known or not. */
	return strcmp(method, "tools/call") == 0 && tool != NULL && tools_find(tool) != NULL &&
	    !tools_is_anonymous(tool);
}

/* Without a credential, a call that needs one is answered 401 with the
 * OAuth challenge, so a client that has only the URL starts authorizing
 * (docs/oauth.md). With OAuth off it stays an isError result. */
static int
refuse_anonymous(struct http_req *req, struct mcp *m, json_t *body)
{
	const struct config *cfg = &m->app->cfg;
	char challenge[CONFIG_STR_MAX + 120], msg[CONFIG_STR_MAX + 400];
	json_t *id = json_is_object(body) ? json_object_get(body, "id") : NULL;

	if (!cfg->oauth || !needs_credential(body))
		return 0;
	oauth_http_challenge(cfg, challenge, sizeof(challenge));
	http_add_header(req, "WWW-Authenticate", challenge);
	snprintf(msg, sizeof(msg),
	    "this call needs a credential: an API key sent as 'Authorization: Bearer <key>' or "
	    "'x-api-key: <key>' (get one at %s: sign up, then Dashboard, API keys), or an OAuth "
	    "access token (an MCP client that supports OAuth gets one through the authorization "
	    "server the WWW-Authenticate header names)",
	    cfg->dashboard_url);
	/* The request's own id, so the client matches the answer to it; a
	 * batch has none. */
	http_reply_json(req, 401,
	    rpc_error(id && rpc_id_valid(id) ? id : NULL, RPC_SERVER_ERROR, msg, NULL));
	return -1;
}

/* Replies for a session that cannot be used: 503 when the database did not
 * answer, the limit's status, else 404 as for an unknown session (so a
 * session of another credential is never confirmed). */
static void
reply_session_refused(struct http_req *req, const struct err *e)
{
	if (e->kind == ERR_UNAVAILABLE || e->kind == ERR_TIMEOUT || e->kind == ERR_INTERNAL)
		http_reply_error(req, 503, "unavailable", e->msg);
	else if (e->kind == ERR_LIMIT)
		http_reply_error(req, err_http_status(e->kind), "limit", e->msg);
	else
		http_reply_error(req, 404, "session_not_found",
		    "Session not found or ended; send initialize again");
}

/* A session carries no authority of its own: it is used only with the
 * credential it is bound to. An anonymous one is bound to the first
 * credential that uses it (its anonymous GET streams end then). */
static int
load_session(struct http_req *req, struct mcp *m, struct mcp_job *job, struct call_env *env,
    int has_account)
{
	struct sess_limits lim;
	struct err e;

	err_clear(&e);
	sess_limits_from(&m->app->cfg, &lim);
	if (sess_lookup_cached(m->app->db, m->app->sessions, &lim, job->session, &env->sess, &e) <
	    0) {
		reply_session_refused(req, &e);
		return -1;
	}
	if (has_account && env->sess.account_id[0] == '\0') {
		if (sess_adopt(m->app->db, &lim, job->session, env->account_id, env->credential,
			&e) < 0) {
			reply_session_refused(req, &e);
			return -1;
		}
		if (m->app->sessions)
			ttl_del(m->app->sessions, job->session);
		mcp_close_session(m, job->session);
		snprintf(env->sess.account_id, sizeof(env->sess.account_id), "%s", env->account_id);
		snprintf(env->sess.credential, sizeof(env->sess.credential), "%s", env->credential);
	} else if (!mcp_cred_may_use(&env->sess, env->account_id, env->credential)) {
		reply_session_refused(req, &e);
		return -1;
	}
	env->session_id = job->session;
	return 0;
}

/* Replies {"jsonrpc":"2.0","id":<id>,"result":<result>} from a result
 * already serialised. */
static int
reply_spliced(struct http_req *req, json_t *id_value, const char *result, size_t result_len)
{
	char *id = json_dumps(id_value, JSON_COMPACT | JSON_ENCODE_ANY);
	size_t n;
	char *out;

	if (id == NULL)
		return 0;
	n = sizeof("{\"jsonrpc\":\"2.0\",\"id\":,\"result\":}") + strlen(id) + result_len;
	out = malloc(n);
	if (out == NULL) {
		free(id);
		return 0;
	}
	n = (size_t)snprintf(out, n, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%.*s}", id,
	    (int)result_len, result);
	http_reply_raw(req, 200, "application/json", out, n);
	free(out);
	free(id);
	return 1;
}

/* The two most frequent requests have answers that (nearly) never change:
 * tools/list, and get_service_info without arguments or progress. They are
 * answered from text serialised once, with the request id spliced in. */
static int
reply_precomputed(struct http_req *req, struct mcp *m, json_t *body)
{
	struct rpc_msg msg;
	const struct tool *tool;
	const char *list, *name;
	json_t *args;
	size_t len;
	char *text;
	double t0;
	int ok;

	rpc_classify(body, &msg);
	if (msg.kind != RPC_REQUEST)
		return 0;
	if (strcmp(msg.method, "tools/list") == 0 &&
	    json_object_get(msg.params, "cursor") == NULL) {
		list = tools_list_json(&len);
		http_log_detail(req, "rpc", "tools/list");
		metrics_mcp_message("tools/list");
		return reply_spliced(req, msg.id, list, len);
	}
	if (strcmp(msg.method, "tools/call") != 0)
		return 0;
	name = json_string_value(json_object_get(msg.params, "name"));
	args = json_object_get(msg.params, "arguments");
	if ((tool = tools_find(name)) == NULL ||
	    (args != NULL && !(json_is_object(args) && json_object_size(args) == 0)) ||
	    json_object_get(msg.params, "_meta") != NULL)
		return 0;
	t0 = metrics_now();
	/* Only a tool that keeps a cached answer has one. */
	text = tool_cached_result(tool, m->app, &len);
	if (text == NULL)
		return 0;
	http_log_detail(req, "rpc", "tools/call");
	http_log_detail(req, "tool", name);
	metrics_mcp_message("tools/call");
	metrics_tool_duration(name, metrics_now() - t0);
	metrics_tool_call(name, ERR_NONE);
	ok = reply_spliced(req, msg.id, text, len);
	free(text);
	return ok;
}

static void
reply_post(struct http_req *req, struct mcp_job *job, struct call_env *env)
{
	char new_session[SESS_ID_LEN + 1] = "";
	json_t *out = NULL;
	int streamed = 0;

	if (json_is_array(job->body)) {
		size_t i;
		json_t *it;

		if (strcmp(env->sess.protocol_version, MCP_VERSION_BATCH) != 0) {
			http_reply_error(req, 400, "invalid_request",
			    "JSON-RPC batches are not supported in this protocol version");
			return;
		}
		if (json_array_size(job->body) == 0 || json_array_size(job->body) > MCP_MAX_BATCH) {
			http_reply_error(req, 400, "invalid_request",
			    "a batch must hold 1 to 64 messages");
			return;
		}
		env->in_batch = 1;
		out = json_array();
		json_array_foreach(job->body, i, it) {
			json_t *r = mcp_handle_message(env, it, NULL, &streamed);
			if (r)
				json_array_append_new(out, r);
		}
		if (json_array_size(out) == 0) {
			json_decref(out);
			out = NULL;
		}
	} else if (!env->stateless && reply_precomputed(req, env->m, job->body)) {
		return;
	} else {
		int init = is_initialize_request(job->body);
		out = mcp_handle_message(env, job->body, init ? new_session : NULL, &streamed);
		if (streamed)
			return;
	}
	if (out == NULL) {
		http_reply_raw(req, 202, "", "", 0);
		return;
	}
	if (new_session[0])
		http_add_header(req, "Mcp-Session-Id", new_session);
	/* A malformed message gets 400; method-level errors ride on 200. */
	int status = 200;
	json_t *err = json_object_get(out, "error");
	int code = (int)json_integer_value(json_object_get(err, "code"));
	if (err && (code == RPC_INVALID_REQUEST || code == RPC_PARSE_ERROR))
		status = 400;
	else if (err && env->stateless && code == RPC_METHOD_NOT_FOUND)
		status = 404; /* 2026-07-28: an unknown method is 404 */
	else if (err && env->stateless && code == RPC_MISSING_CAPABILITY)
		status = 400; /* 2026-07-28: a capability the request needs is missing */
	http_reply_json(req, status, out);
}

/* What one open GET stream holds in m->held; given back when it closes. */
struct stream_hold {
	struct tally *held;
	char session[TALLY_NAME_MAX + 1];
	char account[TALLY_NAME_MAX + 1];
};

static void
stream_release(void *arg)
{
	struct stream_hold *h = arg;
	const char *names[2] = { h->session, h->account };

	tally_give(h->held, names, 2);
	free(h);
}

/* Takes a stream slot of the session and of the account (`account` NULL:
 * the shared anonymous one). Returns the hold, or NULL after replying 429
 * (or 500). */
static struct stream_hold *
stream_take(struct http_req *req, struct mcp *m, const char *session, const char *account)
{
	const struct config *cfg = &m->app->cfg;
	struct stream_hold *h = calloc(1, sizeof(*h));
	const long limits[2] = { cfg->max_streams_per_session, cfg->max_streams_per_account };
	const char *names[2];
	char msg[200], after[16];
	size_t which = 0;

	if (h == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		return NULL;
	}
	h->held = m->held;
	snprintf(h->session, sizeof(h->session), "s:%s", session);
	if (account)
		snprintf(h->account, sizeof(h->account), "a:%s", account);
	else
		snprintf(h->account, sizeof(h->account), "anon");
	names[0] = h->session;
	names[1] = h->account;
	if (tally_take(m->held, names, limits, 2, &which) == 0)
		return h;
	free(h);
	if (which == 0)
		snprintf(msg, sizeof(msg),
		    "this session already has %d open GET streams "
		    "(AAS_MAX_STREAMS_PER_SESSION); close one first",
		    cfg->max_streams_per_session);
	else if (which == 1)
		snprintf(msg, sizeof(msg),
		    "%s already has %d open GET streams (AAS_MAX_STREAMS_PER_ACCOUNT); "
		    "close one first",
		    account ? "this account" : "the sessions without an API key together",
		    cfg->max_streams_per_account);
	else
		snprintf(msg, sizeof(msg), "too many open streams; retry shortly");
	snprintf(after, sizeof(after), "%d", MCP_STREAM_RETRY_S);
	http_add_header(req, "Retry-After", after);
	http_reply_error(req, 429, "too_many_streams", msg);
	return NULL;
}

static void
open_get_stream(struct http_req *req, struct mcp *m, const char *session, const char *account)
{
	struct get_stream *g = calloc(1, sizeof(*g));
	struct stream_hold *hold;
	struct sse *s;

	pthread_mutex_lock(&m->lock);
	/* Drop streams whose clients are gone before counting. */
	for (struct get_stream **pp = &m->streams; *pp;) {
		if (sse_closed((*pp)->sse)) {
			struct get_stream *dead = *pp;
			*pp = dead->next;
			sse_unref(dead->sse);
			free(dead);
			m->n_streams--;
		} else {
			pp = &(*pp)->next;
		}
	}
	int full = m->n_streams >= MCP_MAX_GET_STREAMS;
	pthread_mutex_unlock(&m->lock);
	if (g == NULL || full) {
		free(g);
		http_reply_error(req, 503, "busy", "too many open streams");
		return;
	}
	if ((hold = stream_take(req, m, session, account)) == NULL) {
		free(g);
		return;
	}
	s = http_reply_sse(req, 200);
	if (s == NULL) {
		stream_release(hold);
		free(g);
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	/* However the stream ends, its slots come back. */
	sse_on_close(s, stream_release, hold);
	http_add_header(req, "Mcp-Session-Id", session);
	snprintf(g->session, sizeof(g->session), "%s", session);
	snprintf(g->account, sizeof(g->account), "%s", account ? account : "");
	g->sse = s;
	pthread_mutex_lock(&m->lock);
	g->next = m->streams;
	m->streams = g;
	m->n_streams++;
	pthread_mutex_unlock(&m->lock);
}

/* Ends the streams whose session (or account) is `id`. */
static void
close_streams_where(struct mcp *m, const char *id, int by_account)
{
	pthread_mutex_lock(&m->lock);
	for (struct get_stream **pp = &m->streams; *pp;) {
		const char *v = by_account ? (*pp)->account : (*pp)->session;
		if (strcmp(v, id) == 0) {
			struct get_stream *g = *pp;
			*pp = g->next;
			sse_finish(g->sse);
			sse_unref(g->sse);
			free(g);
			m->n_streams--;
		} else {
			pp = &(*pp)->next;
		}
	}
	pthread_mutex_unlock(&m->lock);
}

void
mcp_close_session(struct mcp *m, const char *session_id)
{
	if (*session_id)
		close_streams_where(m, session_id, 0);
}

void
mcp_close_account(struct mcp *m, const char *account_id)
{
	if (*account_id)
		close_streams_where(m, account_id, 1);
}

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
	if (authenticate(req, m, account_id, &has_account) < 0)
		goto out;
	env.account_id = has_account ? account_id : NULL;
	err_clear(&e);
	if (has_account && !job->stateless && mcp_cred_id(m->app, req, env.credential, &e) < 0) {
		reply_session_refused(req, &e);
		goto out;
	}
	if (!has_account && job->kind == JOB_POST && refuse_anonymous(req, m, job->body) < 0)
		goto out;
	if (job->has_session && load_session(req, m, job, &env, has_account) < 0)
		goto out;
	switch (job->kind) {
	case JOB_POST:
		reply_post(req, job, &env);
		break;
	case JOB_GET:
		/* The key's account, else the session's owner, else anonymous. */
		open_get_stream(req, m, job->session,
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

	if (v == NULL || mcp_version_supported(v))
		return 0;
	snprintf(msg, sizeof(msg),
	    "Bad Request: unsupported MCP-Protocol-Version; "
	    "supported: %s, %s, %s",
	    mcp_version_at(0), mcp_version_at(1), mcp_version_at(2));
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
	if (need_session && !sess_id_valid(sid)) {
		http_reply_error(req, 404, "session_not_found",
		    "Session not found or ended; send initialize again");
		return NULL;
	}
	job = calloc(1, sizeof(*job));
	if (job == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		return NULL;
	}
	job->m = m;
	job->kind = kind;
	if (need_session) {
		snprintf(job->session, sizeof(job->session), "%s", sid);
		job->has_session = 1;
	}
	return job;
}

/* Work that needs neither the database nor a tool that takes time is
 * answered on the HTTP thread: the common ping / tools/list /
 * get_service_info traffic of a known session with a known key. */
static int
cheap_message(json_t *body)
{
	const char *method = json_string_value(json_object_get(body, "method"));
	json_t *params = json_object_get(body, "params");
	const char *tool;

	if (!json_is_object(body) || method == NULL)
		return 0;
	if (json_object_get(body, "id") == NULL)
		return strncmp(method, "notifications/", 14) == 0;
	if (strcmp(method, "ping") == 0 || strcmp(method, "tools/list") == 0)
		return 1;
	tool = json_string_value(json_object_get(params, "name"));
	return strcmp(method, "tools/call") == 0 && tool != NULL && tools_is_anonymous(tool) &&
	    json_object_get(json_object_get(params, "_meta"), "progressToken") == NULL;
}

static int
can_run_inline(struct http_req *req, struct mcp *m, struct mcp_job *job)
{
	struct sess_info si;
	const char *key, *why;
	size_t keylen;
	char account_id[ACCT_ID_LEN + 1];

	if (!job->has_session || !cheap_message(job->body) ||
	    !sess_cache_peek(m->app->sessions, job->session, &si))
		return 0;
	switch (auth_extract(http_header(req, "Authorization"), http_header(req, "x-api-key"), &key,
	    &keylen, &why)) {
	case AUTH_NO_KEY:
	case AUTH_MALFORMED:
		return 1;
	case AUTH_KEY:
		/* Binding an anonymous session and a token's grant need the
		 * database. */
		if (si.account_id[0] == '\0' || oauth_access_shaped(key, keylen))
			return 0;
		return http_account(req) != NULL ||
		    acct_key_cache_peek(m->app->keys, key, keylen, account_id);
	}
	return 0;
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
	job = new_job(m, JOB_POST, req, !stateless && !is_initialize_request(parsed));
	if (job == NULL) {
		json_decref(parsed);
		return;
	}
	job->body = parsed;
	job->stateless = stateless;
	if (can_run_inline(req, m, job))
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
