/* mcp_caller.c - who calls the MCP endpoint: its key or token, whether a
 * call may be made without one, and the session it may use. */
#include <string.h>

#include "base/fmt.h"
#include "base/jsonrpc.h"
#include "server/auth.h"
#include "server/mcp_cred.h"
#include "server/mcp_int.h"
#include "server/authsrv.h"
#include "account/accounts.h"
#include "account/session.h"
#include "service/tools.h"

/* Resolves the caller's key; replies 401 itself when the key is bad.
 * Returns -1 when a reply was made. */
int
mcp_caller_auth(struct http_req *req, struct mcp *m, char *account_id, int *has_account)
{
	const char *key, *why;
	size_t keylen;
	struct err e;
	enum auth_found found;

	*has_account = 0;
	err_clear(&e);
	if (http_account(req) != NULL) {
		/* Resolved before the body was read. */
		if (fmt_err(&e, "account id", account_id, ACCT_ID_LEN + 1, "%s",
			http_account(req)) < 0) {
			http_reply_error(req, 500, "internal", e.msg);
			return -1;
		}
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
int
mcp_caller_refuse_anonymous(struct http_req *req, struct mcp *m, json_t *body)
{
	const struct config *cfg = &m->app->cfg;
	char challenge[CONFIG_STR_MAX + 120], msg[CONFIG_STR_MAX + 400];
	json_t *id = json_is_object(body) ? json_object_get(body, "id") : NULL;

	if (!cfg->oauth || !needs_credential(body))
		return 0;
	http_add_header(req, "WWW-Authenticate",
	    authsrv_challenge(cfg, challenge, sizeof(challenge)) == 0 ? challenge : "Bearer");
	fmt_cut(msg, sizeof(msg),
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
void
mcp_caller_session_refused(struct http_req *req, const struct err *e)
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
int
mcp_caller_session(struct http_req *req, struct mcp *m, struct mcp_job *job, struct call_env *env,
    int has_account)
{
	struct sess_limits lim;
	struct err e;

	err_clear(&e);
	sess_limits_from(&m->app->cfg, &lim);
	if (sess_lookup_cached(m->app->db, m->app->sessions, &lim, job->session, &env->sess, &e) <
	    0) {
		mcp_caller_session_refused(req, &e);
		return -1;
	}
	if (has_account && env->sess.account_id[0] == '\0') {
		if (sess_adopt(m->app->db, &lim, job->session, env->account_id, env->credential,
			&e) < 0) {
			mcp_caller_session_refused(req, &e);
			return -1;
		}
		if (m->app->sessions)
			ttl_del(m->app->sessions, job->session);
		mcp_close_session(m, job->session);
		if (fmt_err(&e, "account id", env->sess.account_id, sizeof(env->sess.account_id),
			"%s", env->account_id) < 0 ||
		    fmt_err(&e, "credential", env->sess.credential, sizeof(env->sess.credential),
			"%s", env->credential) < 0) {
			mcp_caller_session_refused(req, &e);
			return -1;
		}
	} else if (!mcp_cred_may_use(&env->sess, env->account_id, env->credential)) {
		mcp_caller_session_refused(req, &e);
		return -1;
	}
	env->session_id = job->session;
	return 0;
}
