/* rest_int.h - what the REST API's files (rest.c, rest_ops.c,
 * rest_openapi.c) share; not a public interface. */
#ifndef AAS_REST_INT_H
#define AAS_REST_INT_H

#include "server/rest.h"
#include "service/tools.h"

#define REST_MAX_PATHS 24
#define REST_MAX_PATH_ARG 128 /* longest {name} segment we look up */
#define REST_MAX_OPS 32

enum rest_flags {
	REST_ANON = 1,      /* no key; answered on the HTTP thread (no database) */
	REST_JSON_BODY = 2, /* the body is the tool's arguments minus path ones */
	REST_RAW_BODY = 4,  /* the body is raw bytes, up to the write_file limit */
};

struct rest_call;

/* Runs one operation, on a worker thread (on the HTTP thread for
 * REST_ANON) after the key was checked. `args` holds the query parameters
 * (typed by op->tool's inputSchema), the JSON body and the path's
 * "{name}" segments under their names. Returns the JSON reply (status
 * c->status, else op->status), or NULL: an error in `e`, or nothing when
 * the operation replied itself (c->replied). */
typedef json_t *(*rest_op_fn)(struct rest_call *c, json_t *args, struct err *e);

struct rest_op {
	const char *method;
	const char *path; /* route pattern, e.g. /v1/sandboxes/{sandbox_id} */
	rest_op_fn fn;
	const char *tool;         /* the tool it runs, whose schema types the query; or NULL */
	const char *const *query; /* query parameters accepted, NULL-terminated; NULL: none */
	unsigned flags;
	int status; /* on success */
};

/* The operation table (rest_ops.c); the OpenAPI document must list
 * exactly these paths and methods, or aasd does not start. */
extern const struct rest_op rest_ops[];
extern const size_t rest_ops_count;

struct rest_path {
	struct rest *r;
	const char *path;
	char allow[64]; /* the Allow header for a 405 */
};

struct rest {
	struct app *app;
	char *openapi; /* the served document */
	size_t openapi_len;
	struct rest_path paths[REST_MAX_PATHS];
	/* The tool of each operation (rest_ops order), found once at start. */
	const struct tool *tools[REST_MAX_OPS];
	struct http_route routes[REST_MAX_PATHS];
	size_t n_paths;
};

struct rest_call {
	struct rest *r;
	struct http_req *req;
	const struct rest_op *op;
	const struct tool *tool; /* op's tool, or NULL */
	struct call_ctx cx;
	int status; /* overrides op->status when set */
	int replied;
	int running; /* the arguments were built; the op runs */
};

/* The error body {"error": {code, message, field?}} (new reference). */
json_t *rest_error_json(const char *code, const char *msg, const char *field);
/* The generic operation: runs c->op->tool with `args`. */
json_t *rest_op_tool(struct rest_call *c, json_t *args, struct err *e);
/* The sandbox service, or NULL with ERR_UNAVAILABLE. */
struct sbx *rest_sbx(struct rest_call *c, struct err *e);

/* The served OpenAPI document: server/openapi.json (embedded) with
 * `servers` set to `public_url` and components.schemas.<tool>_arguments
 * (inputSchema without sandbox_id) and <tool>_result (outputSchema) taken
 * from the tool catalogue, so they cannot drift. Fails when a $ref does
 * not resolve or the paths and methods differ from rest_ops. Returns the
 * parsed document (new reference). */
json_t *rest_openapi_build(const char *public_url, struct err *e);

#endif
