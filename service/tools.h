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
	const char *account_id; /* NULL when the caller sent no key */
	const char *request_id; /* for log lines */
	/* Progress sink; a no-op when the client asked for none. */
	void (*progress)(void *sink, double progress, double total, const char *message);
	void *progress_sink;
	/* A running command's output for a front end that carries it apart
	 * from progress (REST events), to the same sink: whole characters of
	 * valid UTF-8, at most TOOLS_OUTPUT_CHUNK bytes, fd 1 or 2, with the
	 * bytes sent so far as `sent`. NULL: it goes out as progress messages
	 * "stdout: <text>" / "stderr: <text>" (when there is a progress sink). */
	void (*output)(void *sink, int fd, const char *text, size_t len, double sent);
	const atomic_int *cancelled; /* set by notifications/cancelled */
	int internal;                /* the service's own call: not counted in metrics */
};

#define TOOLS_OUTPUT_CHUNK 8192 /* bytes of output text per notification */

/* Passes a progress notice to the call's sink, when it has one. */
void tool_call_progress(struct call_ctx *cx, double progress, double total, const char *message);

/* Loads and checks the embedded catalogue; once, at start. */
int tools_init(struct err *e) AAS_MUST_CHECK;
void tools_cleanup(void);

/* The tools/list result of the session revisions, serialised once; its
 * input schemas carry no x-mcp-header marks. */
const char *tools_list_json(size_t *len);
json_t *tools_list_result(void); /* new reference */
/* The 2026-07-28 tools/list result: the same, with each argument that a
 * client copies into an Mcp-Param-<Name> header marked x-mcp-header. */
json_t *tools_list_result_marked(void); /* new reference */
size_t tools_count(void);
const char *tools_name_at(size_t i);
const char *tools_title_at(size_t i);
const char *tools_description_at(size_t i);
/* A member of the i-th tool's published object ("inputSchema",
 * "outputSchema", "annotations", ...), $refs resolved; NULL if absent. */
const json_t *tools_field_at(size_t i, const char *field);

/* A catalogue entry, found by name once per call. NULL: no such tool. */
struct tool;
const struct tool *tools_find(const char *name);
const char *tool_name(const struct tool *t);
/* The tool may run for long: a front end answers it as a stream. */
int tool_is_long(const struct tool *t);
/* The tool of that name works without a key. */
int tools_is_anonymous(const char *name);
/* A call without arguments may be answered from this cached text (the
 * whole CallToolResult, malloc'd); NULL when the tool keeps no cache. */
char *tool_cached_result(const struct tool *t, struct app *app, size_t *len);

/* The short guide for agents: initialize's instructions and
 * get_service_info's guide (static text). */
const char *tool_guide(void);

/* The tool's inputSchema (with its x-mcp-header marks) / outputSchema
 * ($refs resolved); borrowed. */
const json_t *tool_input_schema(const struct tool *t);
const json_t *tools_input_schema(const char *name);
const json_t *tools_output_schema(const char *name);

/* A call whose key rule and arguments were checked and converted into the
 * tool's typed request, once. tools_prepare returns NULL with `e` set
 * (ERR_UNAUTHORIZED without a key, ERR_INVALID naming the field) and
 * counts the refusal; args NULL means {}. */
struct tool_call;
struct tool_call *tools_prepare(const struct call_ctx *cx, const struct tool *t, const json_t *args,
    struct err *e);
/* Runs it: the result object (structuredContent) or NULL with `e`. */
json_t *tool_call_run(struct call_ctx *cx, struct tool_call *c, struct err *e);
/* Runs it and returns the CallToolResult (isError for failures), counted. */
json_t *tools_call_prepared(struct call_ctx *cx, struct tool_call *c);
void tool_call_free(struct tool_call *c);
/* The request inside a prepared call, for the tool implementations. */
void *tool_call_req(struct tool_call *c);
/* Counts a call in the metrics (not the service's own, cx->internal);
 * t0 from metrics_now(), or 0 for a call refused before it ran. */
void tools_count_call(const struct call_ctx *cx, const char *name, double t0, enum err_kind kind);

/* A tool found beforehand, in one step: tools_prepare, tool_call_run,
 * counted. Clears `e` first. */
json_t *tools_run(struct call_ctx *cx, const struct tool *t, const json_t *args, struct err *e);

/* Runs a tool for any front end in one step: tools_find, tools_prepare,
 * tool_call_run. Returns the result object, or NULL with `e` filled:
 * ERR_NOT_FOUND for an unknown tool, or as tools_prepare and the tool.
 * Clears `e` first. */
json_t *tools_invoke(struct call_ctx *cx, const char *name, const json_t *args, struct err *e);

#endif
