/* tool_impl.h - what a tool is to the dispatcher (tools.c): how its
 * validated JSON arguments become a typed request, once, and how the
 * request runs. Shared by the files that implement tools; not a public
 * interface (front ends use tools.h). */
#ifndef AAS_TOOL_IMPL_H
#define AAS_TOOL_IMPL_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "service/tools.h"

#define TOOL_MAX_REQ 256 /* bytes of the largest typed request */

struct tool_impl {
	const char *name;
	/* Fills `req` (TOOL_MAX_REQ bytes, zeroed) from arguments the schema
	 * accepted; strings may point into `args`, which outlives the call.
	 * -1 with `e` naming the field when a value is refused. */
	int (*parse)(const struct call_ctx *cx, const json_t *args, void *req, struct err *e);
	/* Runs the request; the tool's result object or NULL with `e`. */
	json_t *(*run)(struct call_ctx *cx, void *req, struct err *e);
	/* Frees what parse allocated inside `req`; NULL when nothing. */
	void (*release)(void *req);
	/* The whole CallToolResult of a call without arguments, as text, when
	 * the tool can answer it from a cache (malloc'd); NULL: no cache. */
	char *(*cached)(struct app *app, size_t *len);
	unsigned anonymous : 1;    /* works without a key */
	unsigned long_running : 1; /* may take long: answer as a stream */
};

/* The sandbox and money tools (tool_sandbox.c) and get_service_info
 * (tool_info.c). */
extern const struct tool_impl tool_sandbox_impls[];
extern const size_t tool_sandbox_impls_count;
extern const struct tool_impl tool_info_impl;

/* Typed readers of validated arguments: each refuses a value of the wrong
 * JSON type or out of range with an ERR_INVALID naming the field, so a
 * handler never reads a real as an integer. */
int tool_arg_int(const json_t *args, const char *name, long long def, long long min, long long max,
    long long *out, struct err *e) AAS_MUST_CHECK;
int tool_arg_bool(const json_t *args, const char *name, int def, int *out,
    struct err *e) AAS_MUST_CHECK;
/* NULL when absent; -1 when present and not a string. */
int tool_arg_str(const json_t *args, const char *name, const char **out,
    struct err *e) AAS_MUST_CHECK;
/* tool_arg_int into an int. */
int tool_arg_int32(const json_t *args, const char *name, int def, int min, int max, int *out,
    struct err *e) AAS_MUST_CHECK;
/* A string the schema requires: -1 naming the field when absent. */
int tool_arg_need(const json_t *args, const char *name, const char **out,
    struct err *e) AAS_MUST_CHECK;

struct sbx;
/* The sandbox service, or NULL with ERR_UNAVAILABLE (no VM layer). */
struct sbx *tool_sbx(struct call_ctx *cx, struct err *e);
/* A progress callback forwarding to the call's sink (ctx is the call). */
void tool_progress(void *ctx, double progress, double total, const char *message);
/* Bytes as JSON text: invalid UTF-8 becomes U+FFFD; "" when out of memory. */
json_t *tool_text_of(const char *data, size_t len);

/* write_file and read_file (tool_files.c). */
int tool_write_parse(const struct call_ctx *cx, const json_t *args, void *req,
    struct err *e) AAS_MUST_CHECK;
json_t *tool_write_run(struct call_ctx *cx, void *req, struct err *e);
void tool_write_release(void *req);
int tool_read_parse(const struct call_ctx *cx, const json_t *args, void *req,
    struct err *e) AAS_MUST_CHECK;
json_t *tool_read_run(struct call_ctx *cx, void *req, struct err *e);

#endif
