/* tools.c - tool catalogue and dispatch. */
#include "service/tools.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/embed.h"
#include "base/jsonschema.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/toolres.h"
#include "service/tool_cmd.h"
#include "service/tool_impl.h"

/* A catalogue entry: the published definition and its implementation. */
struct tool {
	const struct tool_impl *impl;
	size_t index; /* in the catalogue */
};

/* A call whose key rule and arguments were checked: the typed request. */
struct tool_call {
	const struct tool *tool;
	json_t *args; /* kept: the request borrows its strings */
	int prepared; /* parse ran: release applies */
	_Alignas(max_align_t) unsigned char req[TOOL_MAX_REQ];
};

#define N_TOOLS 19
static struct tool catalogue_tools[N_TOOLS];

/* {"tools": [...]} with $refs resolved: `catalogue` as 2026-07-28 lists
 * it (its x-mcp-header marks), `published` as the session revisions list
 * it, without them. The marks are read from `catalogue` alone. */
static json_t *catalogue;
static json_t *published;
static char *list_json;
static size_t list_json_len;

static const struct tool_impl *
find_impl(const char *name)
{
	for (size_t i = 0; i < tool_sandbox_impls_count; i++)
		if (strcmp(tool_sandbox_impls[i].name, name) == 0)
			return &tool_sandbox_impls[i];
	if (strcmp(tool_get_command_impl.name, name) == 0)
		return &tool_get_command_impl;
	if (strcmp(tool_kill_command_impl.name, name) == 0)
		return &tool_kill_command_impl;
	return strcmp(tool_info_impl.name, name) == 0 ? &tool_info_impl : NULL;
}

void
tool_call_progress(struct call_ctx *cx, double progress, double total, const char *message)
{
	if (cx->progress)
		cx->progress(cx->progress_sink, progress, total, message);
}

/* A copy of the catalogue without the x-mcp-header marks: only
 * 2026-07-28 defines them, and older clients would pass them on to a
 * model as they are. */
static json_t *
without_header_marks(const json_t *cat)
{
	json_t *copy = json_deep_copy(cat), *t, *prop;
	const char *key;
	size_t i;

	json_array_foreach(json_object_get(copy, "tools"), i, t) {
		json_t *props = json_object_get(json_object_get(t, "inputSchema"), "properties");

		json_object_foreach(props, key, prop)
			json_object_del(prop, "x-mcp-header");
	}
	return copy;
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
	if (resolved == NULL || json_array_size(resolved) != N_TOOLS) {
		err_set(e, ERR_INTERNAL, "tools.json: bad $ref or tool count");
		goto out;
	}
	for (size_t i = 0; i < N_TOOLS; i++) {
		const char *name = json_string_value(json_object_get(json_array_get(resolved, i),
		    "name"));
		if (name == NULL || (catalogue_tools[i].impl = find_impl(name)) == NULL) {
			err_set(e, ERR_INTERNAL, "tools.json: tool %zu (%s) has no implementation",
			    i, name ? name : "?");
			goto out;
		}
		catalogue_tools[i].index = i;
	}
	catalogue = json_pack("{s:o}", "tools", resolved);
	resolved = NULL;
	published = catalogue ? without_header_marks(catalogue) : NULL;
	list_json = published ? json_dumps(published, JSON_COMPACT) : NULL;
	if (list_json == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	list_json_len = strlen(list_json);
	for (size_t i = 0; i < N_TOOLS; i++)
		metrics_tool_label(catalogue_tools[i].impl->name);
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
	json_decref(published);
	published = NULL;
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
	return json_incref(published);
}

json_t *
tools_list_result_marked(void)
{
	return json_incref(catalogue);
}

size_t
tools_count(void)
{
	return N_TOOLS;
}

static const json_t *
tool_at(size_t i)
{
	return json_array_get(json_object_get(published, "tools"), i);
}

static const json_t *
marked_tool_at(size_t i)
{
	return json_array_get(json_object_get(catalogue, "tools"), i);
}

const char *
tools_name_at(size_t i)
{
	return i < N_TOOLS && catalogue_tools[i].impl ? catalogue_tools[i].impl->name : NULL;
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
	return i < N_TOOLS ? json_object_get(tool_at(i), field) : NULL;
}

const struct tool *
tools_find(const char *name)
{
	for (size_t i = 0; name && i < N_TOOLS; i++)
		if (catalogue_tools[i].impl && strcmp(catalogue_tools[i].impl->name, name) == 0)
			return &catalogue_tools[i];
	return NULL;
}

const char *
tool_name(const struct tool *t)
{
	return t->impl->name;
}

int
tool_is_long(const struct tool *t)
{
	return t->impl->long_running;
}

int
tools_is_anonymous(const char *name)
{
	const struct tool *t = tools_find(name);

	return t != NULL && t->impl->anonymous;
}

char *
tool_cached_result(const struct tool *t, struct app *app, size_t *len)
{
	return t->impl->cached ? t->impl->cached(app, len) : NULL;
}

const json_t *
tool_input_schema(const struct tool *t)
{
	return json_object_get(marked_tool_at(t->index), "inputSchema");
}

const json_t *
tools_input_schema(const char *name)
{
	const struct tool *t = tools_find(name);

	return t ? tool_input_schema(t) : NULL;
}

const json_t *
tools_output_schema(const char *name)
{
	const struct tool *t = tools_find(name);

	return t ? json_object_get(tool_at(t->index), "outputSchema") : NULL;
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
	    *dash ? "Get a key at " :
		    "Keys are issued by the operator of this service "
		    "(aasctl key create).",
	    dash, *dash ? "." : "");
}

void
tools_count_call(const struct call_ctx *cx, const char *name, double t0, enum err_kind kind)
{
	if (cx->internal)
		return;
	if (t0 > 0)
		metrics_tool_duration(name, metrics_now() - t0);
	metrics_tool_call(name, kind);
}

struct tool_call *
tools_prepare(const struct call_ctx *cx, const struct tool *t, const json_t *args, struct err *e)
{
	struct tool_call *c = NULL;

	if (t == NULL) {
		err_set(e, ERR_NOT_FOUND, "unknown tool");
		return NULL;
	}
	if (!t->impl->anonymous && cx->account_id == NULL) {
		no_key_error(cx, t->impl->name, e);
		goto fail;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	c->tool = t;
	c->args = args ? json_incref((json_t *)args) : json_object();
	if (c->args == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	/* Validated once, then turned into the typed request once. */
	if (jsv_validate(tool_input_schema(t), c->args, "", e) < 0)
		goto fail;
	c->prepared = 1;
	if (t->impl->parse(cx, c->args, c->req, e) < 0)
		goto fail;
	return c;
fail:
	/* Counted here: a refused call never runs. */
	tools_count_call(cx, t->impl->name, 0, e->kind);
	tool_call_free(c);
	return NULL;
}

void *
tool_call_req(struct tool_call *c)
{
	return c->req;
}

void
tool_call_free(struct tool_call *c)
{
	if (c == NULL)
		return;
	if (c->prepared && c->tool->impl->release)
		c->tool->impl->release(c->req);
	json_decref(c->args);
	free(c);
}

json_t *
tool_call_run(struct call_ctx *cx, struct tool_call *c, struct err *e)
{
	json_t *obj = c->tool->impl->run(cx, c->req, e);

	if (obj == NULL && e->kind == ERR_NONE)
		err_set(e, ERR_INTERNAL, "tool failed");
	return obj;
}

json_t *
tools_run(struct call_ctx *cx, const struct tool *t, const json_t *args, struct err *e)
{
	struct tool_call *c;
	double t0 = metrics_now();
	json_t *obj;

	err_clear(e);
	c = tools_prepare(cx, t, args, e);
	if (c == NULL)
		return NULL;
	obj = tool_call_run(cx, c, e);
	tools_count_call(cx, tool_name(t), t0, obj ? ERR_NONE : e->kind);
	tool_call_free(c);
	return obj;
}

json_t *
tools_invoke(struct call_ctx *cx, const char *name, const json_t *args, struct err *e)
{
	const struct tool *t = tools_find(name);

	err_clear(e);
	if (t == NULL) {
		err_set(e, ERR_NOT_FOUND, "unknown tool %.100s", name);
		return NULL;
	}
	return tools_run(cx, t, args, e);
}

json_t *
tools_call_prepared(struct call_ctx *cx, struct tool_call *c)
{
	double t0 = metrics_now();
	json_t *obj;
	struct err e;

	err_clear(&e);
	obj = tool_call_run(cx, c, &e);
	tools_count_call(cx, tool_name(c->tool), t0, obj ? ERR_NONE : e.kind);
	return obj ? toolres_structured(obj) : toolres_error(&e);
}
