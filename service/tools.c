/* tools.c - tool catalogue and dispatch. */
#include "service/tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/embed.h"
#include "base/jsonschema.h"
#include "base/log.h"
#include "base/metrics.h"
#include "service/tool_info.h"
#include "service/tool_sandbox.h"

typedef json_t *(*tool_fn)(struct call_ctx *cx, const json_t *args,
    struct err *e);

struct tool_impl {
	const char *name;
	tool_fn fn;          /* NULL: not served by this build yet */
	unsigned anonymous : 1;
	unsigned long_running : 1;
};

static const struct tool_impl impls[] = {
	{ "create_sandbox", tool_create_sandbox, 0, 1 },
	{ "run_command", tool_run_command, 0, 1 },
	{ "write_file", tool_write_file, 0, 0 },
	{ "read_file", tool_read_file, 0, 0 },
	{ "list_files", tool_list_files, 0, 0 },
	{ "expose_port", tool_expose_port, 0, 0 },
	{ "get_sandbox", tool_get_sandbox, 0, 0 },
	{ "list_sandboxes", tool_list_sandboxes, 0, 0 },
	{ "extend_sandbox", tool_extend_sandbox, 0, 0 },
	{ "destroy_sandbox", tool_destroy_sandbox, 0, 1 },
	{ "get_usage", tool_get_usage, 0, 0 },
	{ "get_service_info", tool_info_get_service_info, 1, 0 },
};

#define N_IMPLS (sizeof(impls) / sizeof(impls[0]))

static json_t *catalogue;       /* {"tools": [...]} with $refs resolved */
static char *list_json;
static size_t list_json_len;

void
call_progress(struct call_ctx *cx, double progress, double total,
    const char *message)
{
	if (cx->progress)
		cx->progress(cx->progress_sink, progress, total, message);
}

int
call_cancelled(const struct call_ctx *cx)
{
	return cx->cancelled != NULL && atomic_load(cx->cancelled);
}

int
tools_init(struct err *e)
{
	json_error_t jerr;
	json_t *raw = NULL, *tools, *resolved = NULL;
	int rc = -1;

	if (embed_tools_count != 1) {
		err_set(e, ERR_INTERNAL, "tool catalogue missing");
		return -1;
	}
	raw = json_loadb(embed_tools[0].data, embed_tools[0].len, 0, &jerr);
	if (raw == NULL) {
		err_set(e, ERR_INTERNAL, "tools.json: %s (line %d)", jerr.text, jerr.line);
		goto out;
	}
	tools = json_object_get(raw, "tools");
	resolved = jsv_resolve_refs(tools, json_object_get(raw, "$defs"));
	if (resolved == NULL || json_array_size(resolved) != N_IMPLS) {
		err_set(e, ERR_INTERNAL, "tools.json: bad $ref or tool count");
		goto out;
	}
	for (size_t i = 0; i < N_IMPLS; i++) {
		const char *name = json_string_value(json_object_get(
		    json_array_get(resolved, i), "name"));
		if (name == NULL || strcmp(name, impls[i].name) != 0) {
			err_set(e, ERR_INTERNAL, "tools.json: tool %zu is not %s", i,
			    impls[i].name);
			goto out;
		}
	}
	catalogue = json_pack("{s:o}", "tools", resolved);
	resolved = NULL;
	list_json = json_dumps(catalogue, JSON_COMPACT);
	if (catalogue == NULL || list_json == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	list_json_len = strlen(list_json);
	for (size_t i = 0; i < N_IMPLS; i++)
		metrics_tool_label(impls[i].name);
	rc = 0;
out:
	json_decref(raw);
	json_decref(resolved);
	return rc;
}

void
tools_cleanup(void)
{
	json_decref(catalogue);
	catalogue = NULL;
	free(list_json);
	list_json = NULL;
}

const char *
tools_list_json(size_t *len)
{
	*len = list_json_len;
	return list_json;
}

json_t *
tools_list_result(void)
{
	return json_incref(catalogue);
}

size_t
tools_count(void)
{
	return N_IMPLS;
}

static const json_t *
tool_at(size_t i)
{
	return json_array_get(json_object_get(catalogue, "tools"), i);
}

const char *
tools_name_at(size_t i)
{
	return impls[i].name;
}

const char *
tools_title_at(size_t i)
{
	return json_string_value(json_object_get(tool_at(i), "title"));
}

const char *
tools_description_at(size_t i)
{
	return json_string_value(json_object_get(tool_at(i), "description"));
}

const json_t *
tools_field_at(size_t i, const char *field)
{
	return i < N_IMPLS ? json_object_get(tool_at(i), field) : NULL;
}

static int
find_impl(const char *name)
{
	for (size_t i = 0; i < N_IMPLS; i++)
		if (strcmp(impls[i].name, name) == 0)
			return (int)i;
	return -1;
}

int
tools_exists(const char *name)
{
	return find_impl(name) >= 0;
}

int
tools_is_long(const char *name)
{
	int i = find_impl(name);
	return i >= 0 && impls[i].long_running;
}

int
tools_is_anonymous(const char *name)
{
	int i = find_impl(name);
	return i >= 0 && impls[i].anonymous;
}

static json_t *
text_result(const char *text, int is_error)
{
	json_t *res = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text",
	    "text", text);

	if (res && is_error)
		json_object_set_new(res, "isError", json_true());
	return res;
}

json_t *
tools_error_result(const struct err *e)
{
	char text[700];

	snprintf(text, sizeof(text), "Error (%s): %s", err_kind_name(e->kind),
	    e->msg);
	return text_result(text, 1);
}

static json_t *
structured_result(json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT);
	json_t *res = NULL;

	if (text != NULL)
		res = text_result(text, 0);
	free(text);
	if (res)
		json_object_set(res, "structuredContent", obj);
	json_decref(obj);
	return res;
}

static void
no_key_error(const struct call_ctx *cx, const char *name, struct err *e)
{
	const char *dash = cx->app->cfg.dashboard_url;

	err_set(e, ERR_UNAUTHORIZED,
	    "%s needs an API key. Send it on every request in the header "
	    "'Authorization: Bearer <key>' or 'x-api-key: <key>' (never in the URL). "
	    "%s%s%s",
	    name,
	    *dash ? "Get a key at " : "Keys are issued by the operator of this service "
	    "(aasctl key create).",
	    dash, *dash ? "." : "");
}

/* The key rule, the arguments and whether this build serves the tool. */
static int
check_call(const struct call_ctx *cx, int i, const json_t *args, struct err *e)
{
	if (!impls[i].anonymous && cx->account_id == NULL) {
		no_key_error(cx, impls[i].name, e);
		return -1;
	}
	if (jsv_validate(json_object_get(tool_at((size_t)i), "inputSchema"), args,
	    "", e) < 0)
		return -1;
	if (impls[i].fn == NULL) {
		err_set(e, ERR_UNAVAILABLE, "%s is not available on this server yet",
		    impls[i].name);
		return -1;
	}
	return 0;
}

const json_t *
tools_input_schema(const char *name)
{
	int i = find_impl(name);

	return i < 0 ? NULL : json_object_get(tool_at((size_t)i), "inputSchema");
}

const json_t *
tools_output_schema(const char *name)
{
	int i = find_impl(name);

	return i < 0 ? NULL : json_object_get(tool_at((size_t)i), "outputSchema");
}

json_t *
tools_precheck(const struct call_ctx *cx, const char *name, const json_t *args)
{
	int i = find_impl(name);
	json_t *empty = NULL;
	struct err e;
	int rc;

	if (i < 0)
		return NULL;
	err_clear(&e);
	if (args == NULL)
		args = empty = json_object();
	rc = check_call(cx, i, args, &e);
	json_decref(empty);
	if (rc == 0)
		return NULL;
	/* Counted here: a refused call never reaches tools_invoke's count. */
	if (!cx->internal)
		metrics_tool_call(name, e.kind);
	return tools_error_result(&e);
}

json_t *
tools_invoke(struct call_ctx *cx, const char *name, const json_t *args,
    struct err *e)
{
	int i = find_impl(name);
	json_t *empty = NULL, *obj = NULL;
	double t0 = metrics_now();

	err_clear(e);
	if (i < 0) {
		err_set(e, ERR_NOT_FOUND, "unknown tool %.100s", name);
		return NULL;
	}
	if (args == NULL)
		args = empty = json_object();
	if (check_call(cx, i, args, e) == 0) {
		obj = impls[i].fn(cx, args, e);
		if (obj == NULL && e->kind == ERR_NONE)
			err_set(e, ERR_INTERNAL, "tool failed");
	}
	json_decref(empty);
	if (!cx->internal) {
		metrics_tool_duration(name, metrics_now() - t0);
		metrics_tool_call(name, obj ? ERR_NONE : e->kind);
	}
	return obj;
}

json_t *
tools_call(struct call_ctx *cx, const char *name, const json_t *args)
{
	json_t *obj;
	struct err e;

	if (!tools_exists(name))
		return NULL;
	obj = tools_invoke(cx, name, args, &e);
	return obj ? structured_result(obj) : tools_error_result(&e);
}
