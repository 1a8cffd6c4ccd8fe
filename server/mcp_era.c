/* mcp_era.c - MCP revision 2026-07-28 on the same endpoint as the older
 * ones (mcp_era_): stateless requests whose version, client info and
 * capabilities ride in params._meta, headers that must agree with the
 * body (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*),
 * server/discover, and results marked with resultType. Older revisions
 * keep their sessions and answers unchanged. */
#include <string.h>
#include <strings.h>

#include "base/b64.h"
#include "base/fmt.h"
#include "base/mcpver.h"
#include "base/version.h"
#include "server/mcp_int.h"
#include "base/toolres.h"
#include "service/tasks.h"
#include "service/tools.h"

#define HEADER_VALUE_MAX 512

static json_t *
meta_of(json_t *body)
{
	return json_object_get(json_object_get(body, "params"), "_meta");
}

int
mcp_era_stateless(struct http_req *req, json_t *body)
{
	const char *h = http_header(req, "MCP-Protocol-Version");

	if (json_is_array(body)) {
		size_t i;
		json_t *it;

		json_array_foreach(body, i, it)
			if (json_object_get(meta_of(it), MCP_META_VERSION) != NULL)
				return 1;
		return 0;
	}
	if (json_object_get(meta_of(body), MCP_META_VERSION) != NULL)
		return 1;
	/* The new era's version header without _meta: its rules apply (and
	 * say what is missing). Any other version header is the older
	 * revisions' to judge. */
	return h != NULL && strcmp(h, MCP_VERSION_STATELESS) == 0;
}

/* A 400 with the JSON-RPC error; it carries the request's id when the
 * body has a usable one (every error answers its request). */
static void
refuse_as(struct http_req *req, int status, json_t *body, int code, const char *msg, json_t *data)
{
	json_t *id = json_is_object(body) ? json_object_get(body, "id") : NULL;

	if (!json_is_string(id) && !json_is_integer(id))
		id = NULL;
	http_reply_json(req, status, rpc_error(id, code, msg, data));
}

static void
refuse(struct http_req *req, json_t *body, int code, const char *msg, json_t *data)
{
	refuse_as(req, 400, body, code, msg, data);
}

/* Optional whitespace around a field value is not part of it (RFC 9110
 * 5.5): the value without it, its length in *len. */
static const char *
trim_ows(const char *h, size_t *len)
{
	size_t n = strlen(h);

	while (n > 0 && (*h == ' ' || *h == '\t')) {
		h++;
		n--;
	}
	while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
		n--;
	*len = n;
	return h;
}

/* 1 when header value h (whitespace around it aside) is `want`. */
static int
header_is(const char *h, const char *want)
{
	size_t n;
	const char *v;

	if (h == NULL || want == NULL)
		return 0;
	v = trim_ows(h, &n);
	return strlen(want) == n && memcmp(v, want, n) == 0;
}

/* A header value as sent: plain, or "=?base64?...?=" for bytes a header
 * cannot carry. Decoded into out; -1 when malformed or too long. */
static int
header_value(const char *raw, char *out, size_t n)
{
	size_t len;
	const char *h = trim_ows(raw, &len);

	if (len > 11 && strncmp(h, "=?base64?", 9) == 0 && memcmp(h + len - 2, "?=", 2) == 0) {
		size_t got = 0;
		struct err e;

		err_clear(&e);
		if (b64_decode(h + 9, len - 11, (unsigned char *)out, n - 1, &got, &e) < 0)
			return -1;
		out[got] = '\0';
		return strlen(out) == got ? 0 : -1;
	}
	if (len >= n)
		return -1;
	memcpy(out, h, len);
	out[len] = '\0';
	return 0;
}

/* The value an argument marked x-mcp-header must arrive with. */
static int
param_text(const json_t *v, char *out, size_t n)
{
	if (json_is_string(v))
		return fmt_buf(out, n, "%s", json_string_value(v));
	if (json_is_integer(v))
		return fmt_buf(out, n, "%lld", (long long)json_integer_value(v));
	if (json_is_boolean(v))
		return fmt_buf(out, n, "%s", json_is_true(v) ? "true" : "false");
	return -1;
}

/* tools/call: every argument whose schema carries x-mcp-header must come
 * with the same value in Mcp-Param-<name>. */
static int
check_params(struct http_req *req, json_t *body, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	const json_t *schema = name ? tools_input_schema(name) : NULL;
	json_t *args = json_object_get(params, "arguments");
	const char *key;
	json_t *prop;

	json_object_foreach((json_t *)json_object_get(schema, "properties"), key, prop) {
		const char *hname = json_string_value(json_object_get(prop, "x-mcp-header"));
		json_t *v = json_object_get(args, key);
		char full[128], want[HEADER_VALUE_MAX], got[HEADER_VALUE_MAX], msg[200];
		const char *h;

		if (hname == NULL || v == NULL || json_is_null(v))
			continue;
		/* A name too long for a header is a header never sent. */
		h = fmt_buf(full, sizeof(full), "Mcp-Param-%s", hname) == 0 ?
		    http_header(req, full) :
		    NULL;
		if (h == NULL || param_text(v, want, sizeof(want)) < 0 ||
		    header_value(h, got, sizeof(got)) < 0 || strcmp(want, got) != 0) {
			fmt_cut(msg, sizeof(msg), "Header mismatch: %s %s the argument %s", full,
			    h ? "does not match" : "is missing for", key);
			refuse(req, body, RPC_HEADER_MISMATCH, msg, NULL);
			return -1;
		}
	}
	return 0;
}

int
mcp_era_check(struct http_req *req, json_t *body)
{
	const char *hv = http_header(req, "MCP-Protocol-Version");
	const char *hm = http_header(req, "Mcp-Method");
	const char *hn = http_header(req, "Mcp-Name");
	json_t *meta = meta_of(body);
	const char *version, *method, *name = NULL;
	char got[HEADER_VALUE_MAX], msg[200];

	if (json_is_array(body)) {
		refuse(req, body, RPC_INVALID_REQUEST,
		    "Invalid Request: a 2026-07-28 body is one request or notification, not a batch",
		    NULL);
		return -1;
	}
	version = json_string_value(json_object_get(meta, MCP_META_VERSION));
	/* Both there and different: the header disagrees with the body. */
	if (version != NULL && hv != NULL && !header_is(hv, version)) {
		refuse(req, body, RPC_HEADER_MISMATCH,
		    "Header mismatch: MCP-Protocol-Version must equal the _meta protocol version",
		    NULL);
		return -1;
	}
	if (version == NULL && hv != NULL && header_is(hv, MCP_VERSION_STATELESS))
		version = MCP_VERSION_STATELESS;
	if (version == NULL || strcmp(version, MCP_VERSION_STATELESS) != 0) {
		json_t *supported = json_array();

		json_array_append_new(supported, json_string(MCP_VERSION_STATELESS));
		for (size_t i = 0; i < mcpver_count(); i++)
			json_array_append_new(supported, json_string(mcpver_at(i)));
		refuse(req, body, RPC_UNSUPPORTED_VERSION,
		    "Unsupported protocol version (the _meta protocol version and MCP-Protocol-Version)",
		    json_pack("{s:o,s:s?}", "supported", supported, "requested", version));
		return -1;
	}
	method = json_string_value(json_object_get(body, "method"));
	if (hv == NULL || !header_is(hv, version)) {
		refuse(req, body, RPC_HEADER_MISMATCH,
		    "Header mismatch: MCP-Protocol-Version must equal the _meta protocol version",
		    NULL);
		return -1;
	}
	if (hm == NULL || method == NULL || !header_is(hm, method)) {
		refuse(req, body, RPC_HEADER_MISMATCH,
		    hm == NULL ? "Header mismatch: Mcp-Method is required" :
				 "Header mismatch: Mcp-Method must equal the body's method",
		    NULL);
		return -1;
	}
	if (json_object_get(body, "id") == NULL)
		return 0; /* a notification: the revision sets no more header rules */
	if (strcmp(method, "initialize") == 0) {
		/* Gone in this revision (server/discover replaces it). */
		refuse_as(req, 404, body, RPC_METHOD_NOT_FOUND,
		    "Method not found: initialize is not part of 2026-07-28; use server/discover",
		    NULL);
		return -1;
	}
	if (!json_is_string(json_object_get(meta, MCP_META_VERSION)) ||
	    !json_is_object(json_object_get(meta, MCP_META_CAPS))) {
		refuse(req, body, RPC_INVALID_PARAMS,
		    "Invalid params: _meta must carry " MCP_META_VERSION " and " MCP_META_CAPS,
		    NULL);
		return -1;
	}
	if (strcmp(method, "tools/call") == 0)
		name = json_string_value(json_object_get(json_object_get(body, "params"), "name"));
	else if (strncmp(method, "tasks/", 6) == 0)
		name = json_string_value(json_object_get(json_object_get(body, "params"),
		    "taskId"));
	if (name != NULL) {
		if (hn == NULL || header_value(hn, got, sizeof(got)) < 0 ||
		    strcmp(got, name) != 0) {
			fmt_cut(msg, sizeof(msg), "Header mismatch: Mcp-Name %s",
			    hn ? "must equal params.name (params.taskId)" :
				 "is required for tools/call and tasks/*");
			refuse(req, body, RPC_HEADER_MISMATCH, msg, NULL);
			return -1;
		}
		if (strcmp(method, "tools/call") == 0)
			return check_params(req, body, json_object_get(body, "params"));
	}
	return 0;
}

static json_t *
server_info(void)
{
	return json_pack("{s:s,s:s,s:s}", "name", "aas", "title", "Sandbox as a Service", "version",
	    AAS_VERSION);
}

json_t *
mcp_era_result(json_t *result)
{
	json_t *meta;

	if (!json_is_object(result))
		return result;
	json_object_set_new(result, "resultType", json_string("complete"));
	meta = json_object_get(result, "_meta");
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(result, "_meta", meta);
	}
	json_object_set_new(meta, MCP_META_SERVER, server_info());
	return result;
}

json_t *
mcp_era_discover(void)
{
	json_t *versions = json_array();

	json_array_append_new(versions, json_string(MCP_VERSION_STATELESS));
	for (size_t i = 0; i < mcpver_count(); i++)
		json_array_append_new(versions, json_string(mcpver_at(i)));
	return mcp_era_result(json_pack("{s:o,s:{s:{s:b},s:{s:{}}},s:s,s:i,s:s}",
	    "supportedVersions", versions, "capabilities", "tools", "listChanged", 0, "extensions",
	    MCP_EXT_TASKS, "instructions", mcp_instructions(), "ttlMs", MCP_LIST_TTL_MS,
	    "cacheScope", "public"));
}

json_t *
mcp_era_tools_list(void)
{
	json_t *cat = tools_list_result_marked();
	json_t *list = json_deep_copy(cat);

	json_decref(cat);

	/* The catalogue is the same for everyone: shared caches may keep it. */
	json_object_set_new(list, "ttlMs", json_integer(MCP_LIST_TTL_MS));
	json_object_set_new(list, "cacheScope", json_string("public"));
	return mcp_era_result(list);
}

/* ---- tasks ---- */

static int
opted_in(json_t *params)
{
	json_t *caps = json_object_get(json_object_get(params, "_meta"), MCP_META_CAPS);

	return json_object_get(json_object_get(caps, "extensions"), MCP_EXT_TASKS) != NULL;
}

int
mcp_era_wants_task(json_t *params, const char *tool, json_t *args)
{
	if (!opted_in(params))
		return 0;
	if (strcmp(tool, "create_sandbox") == 0)
		return 1;
	return strcmp(tool, "run_command") == 0 &&
	    !json_is_true(json_object_get(args, "background"));
}

static json_t *
error_of(json_t *id, const struct err *e)
{
	int code = e->kind == ERR_INVALID || e->kind == ERR_NOT_FOUND ? RPC_INVALID_PARAMS :
	    e->kind == ERR_INTERNAL                                   ? RPC_INTERNAL_ERROR :
									RPC_SERVER_ERROR;

	return rpc_error(id, code, e->msg, NULL);
}

json_t *
mcp_era_task_call(struct call_env *env, struct rpc_msg *msg, const struct tool *tool, json_t *args)
{
	struct tasks *t = atomic_load(&env->m->app->tasks);
	struct call_ctx cx;
	struct tool_call *call;
	char id[TASK_ID_LEN + 1];
	json_t *task;
	struct err e;

	memset(&cx, 0, sizeof(cx));
	cx.app = env->m->app;
	cx.account_id = env->account_id;
	cx.request_id = env->req ? http_request_id(env->req) : "-";
	err_clear(&e);
	/* The key and the arguments are checked now, not in the task. */
	if ((call = tools_prepare(&cx, tool, args, &e)) == NULL)
		return rpc_result(msg->id, mcp_era_result(toolres_error(&e)));
	if (t == NULL || env->account_id == NULL) {
		tool_call_free(call);
		err_set(&e, ERR_UNAVAILABLE, "tasks are not available here");
		return error_of(msg->id, &e);
	}
	if (tasks_start(t, env->account_id, tool_name(tool), call, id, &e) < 0) {
		tool_call_free(call);
		return error_of(msg->id, &e);
	}
	if ((task = tasks_get(t, env->account_id, id, &e)) == NULL)
		return error_of(msg->id, &e);
	task = mcp_era_result(task);
	json_object_set_new(task, "resultType", json_string("task"));
	return rpc_result(msg->id, task);
}

json_t *
mcp_era_task_method(struct call_env *env, struct rpc_msg *msg)
{
	struct tasks *t = atomic_load(&env->m->app->tasks);
	const char *id = json_string_value(json_object_get(msg->params, "taskId"));
	json_t *task;
	struct err e;

	err_clear(&e);
	/* tasks/result and tasks/list are gone from the extension. */
	if (!mcp_era_is_task_method(msg->method)) {
		char text[200];

		fmt_cut(text, sizeof(text), "Method not found: %.120s", msg->method);
		return rpc_error(msg->id, RPC_METHOD_NOT_FOUND, text, NULL);
	}
	if (!opted_in(msg->params))
		return rpc_error(msg->id, RPC_MISSING_CAPABILITY,
		    "tasks/* needs the client capability extensions." MCP_EXT_TASKS,
		    json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions",
			MCP_EXT_TASKS));
	if (t == NULL || env->account_id == NULL) {
		err_set_field(&e, "taskId", "no such task (tasks belong to an API key's account)");
		return error_of(msg->id, &e);
	}
	if (strcmp(msg->method, "tasks/get") == 0) {
		task = tasks_get(t, env->account_id, id, &e);
		return task ? rpc_result(msg->id, mcp_era_result(task)) : error_of(msg->id, &e);
	}
	if (strcmp(msg->method, "tasks/cancel") == 0)
		return tasks_cancel(t, env->account_id, id, &e) < 0 ?
		    error_of(msg->id, &e) :
		    rpc_result(msg->id, mcp_era_result(json_object()));
	if (strcmp(msg->method, "tasks/update") == 0) {
		if ((task = tasks_get(t, env->account_id, id, &e)) == NULL)
			return error_of(msg->id, &e);
		json_decref(task);
		return rpc_error(msg->id, RPC_INVALID_PARAMS,
		    "this task asks for no input: tasks/update has nothing to give it", NULL);
	}
	return rpc_error(msg->id, RPC_INTERNAL_ERROR, "task method without a handler", NULL);
}

int
mcp_era_is_task_method(const char *method)
{
	return method != NULL &&
	    (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/cancel") == 0 ||
		strcmp(method, "tasks/update") == 0);
}
