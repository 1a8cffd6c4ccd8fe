/* jsonrpc.c - JSON-RPC 2.0 framing. */
#include "base/jsonrpc.h"

#include <string.h>

#include "base/fmt.h"

json_t *
rpc_parse(const char *body, size_t len, char *msg, size_t msgsz)
{
	json_error_t jerr;
	json_t *v;

	if (len == 0) {
		fmt_cut(msg, msgsz, "Parse error: empty body");
		return NULL;
	}
	/* JSON_ALLOW_NUL: a NUL inside a string is valid JSON; argument
	 * validation rejects it where it matters and names the field. */
	v = json_loadb(body, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
	if (v == NULL) {
		fmt_cut(msg, msgsz, "Parse error: %s (line %d, column %d)", jerr.text, jerr.line,
		    jerr.column);
		return NULL;
	}
	return v;
}

int
rpc_id_valid(const json_t *id)
{
	return id != NULL && (json_is_string(id) || json_is_integer(id));
}

static void
invalid(struct rpc_msg *out, const char *why)
{
	out->kind = RPC_INVALID;
	out->err_code = RPC_INVALID_REQUEST;
	fmt_cut(out->err_msg, sizeof(out->err_msg), "Invalid Request: %s", why);
}

void
rpc_classify(json_t *msg, struct rpc_msg *out)
{
	json_t *ver, *id, *method, *params;
	int has_id;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(msg)) {
		invalid(out, "a message must be a JSON object");
		return;
	}
	id = json_object_get(msg, "id");
	has_id = id != NULL;
	if (rpc_id_valid(id))
		out->id = id;
	ver = json_object_get(msg, "jsonrpc");
	if (!json_is_string(ver) || json_string_length(ver) != 3 ||
	    strcmp(json_string_value(ver), "2.0") != 0) {
		invalid(out, "\"jsonrpc\" must be \"2.0\"");
		return;
	}
	if (has_id && !rpc_id_valid(id)) {
		invalid(out, "\"id\" must be a string or an integer");
		return;
	}
	method = json_object_get(msg, "method");
	if (method == NULL) {
		if (json_object_get(msg, "result") || json_object_get(msg, "error")) {
			if (!has_id) {
				invalid(out, "a response needs an \"id\"");
				return;
			}
			out->kind = RPC_RESPONSE;
			return;
		}
		invalid(out, "missing \"method\"");
		return;
	}
	if (!json_is_string(method) || json_string_length(method) == 0 ||
	    strlen(json_string_value(method)) != json_string_length(method)) {
		invalid(out, "\"method\" must be a non-empty string");
		return;
	}
	params = json_object_get(msg, "params");
	if (params != NULL && !json_is_object(params) && !json_is_array(params)) {
		invalid(out, "\"params\" must be an object or an array");
		return;
	}
	out->method = json_string_value(method);
	out->params = params;
	out->kind = has_id ? RPC_REQUEST : RPC_NOTIFICATION;
}

json_t *
rpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
	    result ? result : json_object());
}

json_t *
rpc_error(json_t *id, int code, const char *message, json_t *data)
{
	json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);

	if (err && data)
		json_object_set_new(err, "data", data);
	else if (data)
		json_decref(data);
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
	    err);
}

json_t *
rpc_notification(const char *method, json_t *params)
{
	return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params",
	    params ? params : json_object());
}

json_t *
rpc_progress(json_t *token, double progress, double total, const char *message)
{
	json_t *params = json_pack("{s:O, s:f}", "progressToken", token, "progress", progress);

	if (params == NULL)
		return NULL;
	if (total > 0)
		json_object_set_new(params, "total", json_real(total));
	if (message)
		json_object_set_new(params, "message", json_string(message));
	return rpc_notification("notifications/progress", params);
}
