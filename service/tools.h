/* tools.h - the tool catalogue (from tools.json, embedded) and dispatch
 * of tools/call: schema validation, auth rule, handler, result shape. */
#ifndef AAS_TOOLS_H
#define AAS_TOOLS_H

#include <stdatomic.h>
#include <stddef.h>

#include <jansson.h>

#include "service/app.h"
#include "base/err.h"

/* What a tool handler may use while it runs. */
struct call_ctx {
	struct app *app;
	const char *account_id;      /* NULL when the caller sent no key */
	const char *request_id;      /* for log lines */
	/* Progress sink; a no-op when the client asked for none. */
	void (*progress)(void *sink, double progress, double total,
	    const char *message);
	void *progress_sink;
	const atomic_int *cancelled; /* set by notifications/cancelled */
	int internal;                /* the service's own call: not counted in metrics */
};

void call_progress(struct call_ctx *cx, double progress, double total,
    const char *message);
int call_cancelled(const struct call_ctx *cx);

/* Loads and checks the embedded catalogue; once, at start. */
int tools_init(struct err *e);
void tools_cleanup(void);

/* The tools/list result, serialised once. */
const char *tools_list_json(size_t *len);
json_t *tools_list_result(void);             /* new reference */
size_t tools_count(void);
const char *tools_name_at(size_t i);
const char *tools_title_at(size_t i);
const char *tools_description_at(size_t i);
/* A member of the i-th tool's published object ("inputSchema",
 * "outputSchema", "annotations", ...), $refs resolved; NULL if absent. */
const json_t *tools_field_at(size_t i, const char *field);

/* 1 when a tool of that name exists. */
int tools_exists(const char *name);
/* 1 when the tool may run for long (answer as a stream). */
int tools_is_long(const char *name);
/* 1 when the tool works without a key. */
int tools_is_anonymous(const char *name);

/* The tool's inputSchema / outputSchema ($refs resolved); borrowed, NULL
 * for an unknown tool. */
const json_t *tools_input_schema(const char *name);
const json_t *tools_output_schema(const char *name);

/* Runs a tool for any front end (MCP, REST): checks the key rule and the
 * arguments against the tool's inputSchema (args NULL means {}), then
 * runs its handler. Returns the result object (structuredContent), or
 * NULL with `e` filled: ERR_NOT_FOUND for an unknown tool,
 * ERR_UNAUTHORIZED without a key, ERR_INVALID naming the field, or the
 * handler's own error. Clears `e` first. */
json_t *tools_invoke(struct call_ctx *cx, const char *name, const json_t *args,
    struct err *e);

/* Runs a tool (tools_invoke) and returns the CallToolResult object. Unknown tools return
 * NULL (the caller answers a JSON-RPC -32602). Argument, auth and business
 * errors come back as results with isError true. */
json_t *tools_call(struct call_ctx *cx, const char *name, const json_t *args);

/* The checks tools_call makes before running a tool (key, arguments).
 * Returns an isError CallToolResult when one fails, NULL when the call may
 * proceed; lets the transport answer such errors at once, unstreamed. */
json_t *tools_precheck(const struct call_ctx *cx, const char *name,
    const json_t *args);

/* A CallToolResult for an error, naming the field when there is one. */
json_t *tools_error_result(const struct err *e);

#endif
