/* mcp_post.c - a POST's messages answered: a batch, one message, or the
 * answers kept ready (tools/list, get_service_info), and which requests
 * are cheap enough to answer on the HTTP thread. */
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/jsonrpc.h"
#include "base/mcpver.h"
#include "base/metrics.h"
#include "server/auth.h"
#include "server/mcp_int.h"
#include "account/oauth_rules.h"
#include "account/accounts.h"
#include "account/session.h"
#include "service/tools.h"

int
mcp_post_is_initialize(json_t *body)
{
	json_t *method = json_object_get(body, "method");

	return json_is_object(body) && json_object_get(body, "id") != NULL &&
	    json_is_string(method) && strcmp(json_string_value(method), "initialize") == 0;
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
	if (fmt_buf(out, n, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%.*s}", id, (int)result_len,
		result) < 0) {
		free(out);
		free(id);
		return 0;
	}
	http_reply_raw(req, 200, "application/json", out, strlen(out));
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

void
mcp_post_reply(struct http_req *req, struct mcp_job *job, struct call_env *env)
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
		int init = mcp_post_is_initialize(job->body);
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

int
mcp_post_inline(struct http_req *req, struct mcp *m, struct mcp_job *job)
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
