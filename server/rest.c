/* rest.c - the REST API's HTTP side: method dispatch (405 with Allow),
 * origin and key checks, arguments from path, query and body, deferral to
 * the worker pool, JSON errors. The operations are in rest_ops.c. */
#include "server/rest_int.h"
#include "sandbox/hosts.h"

#include <stdlib.h>
#include <string.h>

#include "account/accounts.h"
#include "server/auth.h"
#include "vmm/guest.h"
#include "server/rest_query.h"
#include "base/fmt.h"
#include "base/utf8.h"

struct rest_job {
	struct rest *r;
	const struct rest_op *op;
};

/* ---- replies ---- */

json_t *
rest_error_json(const char *code, const char *msg, const char *field)
{
	size_t n;
	char *clean = utf8_sanitize(msg, strlen(msg), &n, NULL);
	json_t *body = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message",
	    clean ? clean : "error");

	free(clean);
	if (body && field && *field)
		json_object_set_new(json_object_get(body, "error"), "field", json_string(field));
	return body;
}

static void
reply_error(struct http_req *req, int status, const char *code, const char *msg, const char *field)
{
	http_reply_json(req, status, rest_error_json(code, msg, field));
}

/* The index of `name` among the "{name}" segments of the operation's
 * path, or -1. */
static int
path_param(const struct rest_op *op, const char *name)
{
	size_t n = strlen(name);
	int i = 0;

	for (const char *p = strchr(op->path, '{'); p; p = strchr(p + 1, '{'), i++)
		if (strncmp(p + 1, name, n) == 0 && p[1 + n] == '}')
			return i;
	return -1;
}

static void
reply_err(struct rest_call *c, const struct err *e)
{
	int i = e->field[0] ? path_param(c->op, e->field) : -1;

	/* An id in the path that the operation finds malformed names
	 * nothing: 404, as for one that names nothing of the caller's. */
	if (c->running && e->kind == ERR_INVALID && i >= 0) {
		char value[REST_MAX_PATH_ARG] = "", msg[300];
		http_path_arg(c->req, (size_t)i, value, sizeof(value));
		fmt_cut(msg, sizeof(msg), "%s: no %s '%s' in your account", e->field,
		    strcmp(e->field, "sandbox_id") == 0      ? "sandbox" :
			strcmp(e->field, "snapshot_id") == 0 ? "snapshot" :
							       "such item",
		    value);
		reply_error(c->req, 404, err_kind_name(ERR_NOT_FOUND), msg, e->field);
		return;
	}
	if (e->kind == ERR_CAPACITY) {
		char after[16];
		if (fmt_buf(after, sizeof(after), "%d", HOSTS_RETRY_AFTER_S) == 0)
			http_add_header(c->req, "Retry-After", after);
	}
	reply_error(c->req, err_http_status(e->kind), err_kind_name(e->kind), e->msg, e->field);
}

/* ---- key ---- */

/* Resolves the caller's key into c->cx.account_id; replies 401 (or 503
 * when the database is down) itself and returns -1 otherwise. The HTTP
 * front end has usually resolved it already, before reading the body. */
static int
authenticate(struct rest_call *c, char *account_id)
{
	const char *key, *why;
	size_t keylen;
	struct err e;
	enum auth_found found;

	err_clear(&e);
	if (http_account(c->req) != NULL) {
		if (fmt_err(&e, "account id", account_id, ACCT_ID_LEN + 1, "%s",
			http_account(c->req)) < 0) {
			reply_error(c->req, 500, err_kind_name(ERR_INTERNAL), e.msg, NULL);
			return -1;
		}
		c->cx.account_id = account_id;
		return 0;
	}
	found = auth_extract(http_header(c->req, "Authorization"), http_header(c->req, "x-api-key"),
	    &key, &keylen, &why);
	if (found == AUTH_KEY &&
	    acct_resolve_key_cached(c->r->app->db, c->r->app->keys, key, keylen, account_id, &e) ==
		0) {
		c->cx.account_id = account_id;
		return 0;
	}
	if (found == AUTH_KEY && e.kind != ERR_UNAUTHORIZED) {
		reply_error(c->req, err_http_status(e.kind), err_kind_name(e.kind), e.msg, NULL);
		return -1;
	}
	auth_reply_unauthorized(c->req, found, why, c->r->app->cfg.dashboard_url);
	return -1;
}

/* ---- arguments ---- */

/* The path's "{name}" segments into args, as strings. */
static int
path_args(struct rest_call *c, json_t *args, struct err *e)
{
	size_t i = 0;

	for (const char *p = strchr(c->op->path, '{'); p; p = strchr(p + 1, '{'), i++) {
		char name[32], value[REST_MAX_PATH_ARG];
		size_t n = strcspn(p + 1, "}");
		json_t *v;

		if (fmt_buf(name, sizeof(name), "%.*s", (int)n, p + 1) < 0) {
			err_set(e, ERR_INTERNAL, "rest: path parameter %.*s too long", (int)n,
			    p + 1);
			return -1;
		}
		if (http_path_arg(c->req, i, value, sizeof(value)) < 0 ||
		    (v = json_string(value)) == NULL) {
			/* Too long or not text: it names nothing we have. */
			err_set_at(e, ERR_NOT_FOUND, name, "%s: no such %s", name, name);
			return -1;
		}
		json_object_set_new(args, name, v);
	}
	return 0;
}

/* The JSON body's members into args (an empty body is {}). */
static int
body_args(struct rest_call *c, json_t *args, struct err *e)
{
	size_t len;
	const char *body = http_body(c->req, &len);
	json_error_t jerr;
	json_t *obj;
	const char *key;
	json_t *val;
	int rc = -1;

	if (len == 0)
		return 0;
	obj = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (obj == NULL) {
		err_set_field(e, "body", "body: not valid JSON: %s (line %d, column %d)", jerr.text,
		    jerr.line, jerr.column);
		return -1;
	}
	if (!json_is_object(obj)) {
		err_set_field(e, "body", "body: must be a JSON object");
		goto out;
	}
	json_object_foreach(obj, key, val) {
		if (path_param(c->op, key) >= 0 || json_object_get(args, key)) {
			err_set_field(e, key, "%.60s: given in the path; leave it out of the body",
			    key);
			goto out;
		}
	}
	json_object_update(args, obj);
	rc = 0;
out:
	json_decref(obj);
	return rc;
}

static json_t *
build_args(struct rest_call *c, struct err *e)
{
	const json_t *schema = c->tool ? tool_input_schema(c->tool) : NULL;
	json_t *q = rest_query_parse(http_query(c->req), e), *args;

	if (q == NULL)
		return NULL;
	args = rest_query_args(q, c->op->query, schema, e);
	json_decref(q);
	if (args == NULL)
		return NULL;
	if (path_args(c, args, e) < 0 ||
	    ((c->op->flags & REST_JSON_BODY) && body_args(c, args, e) < 0)) {
		json_decref(args);
		return NULL;
	}
	return args;
}

/* ---- running an operation ---- */

static void
run_op(struct http_req *req, void *arg)
{
	struct rest_job *job = arg;
	char account_id[ACCT_ID_LEN + 1] = "";
	struct rest_call c;
	struct err e;
	json_t *args = NULL, *out;

	memset(&c, 0, sizeof(c));
	c.r = job->r;
	c.req = req;
	c.op = job->op;
	c.tool = job->r->tools[job->op - rest_ops];
	c.cx.app = job->r->app;
	c.cx.request_id = http_request_id(req);
	err_clear(&e);
	if (!(c.op->flags & REST_ANON) && authenticate(&c, account_id) < 0)
		goto out;
	if ((args = build_args(&c, &e)) == NULL) {
		reply_err(&c, &e);
		goto out;
	}
	c.running = 1;
	out = c.op->fn(&c, args, &e);
	if (out != NULL)
		http_reply_json(req, c.status ? c.status : c.op->status, out);
	else if (!c.replied)
		reply_err(&c, &e);
out:
	json_decref(args);
	free(job);
}

static void
job_drop(void *arg)
{
	free(arg);
}

static const struct rest_op *
find_op(const struct rest_path *rp, const char *method)
{
	for (size_t i = 0; i < rest_ops_count; i++)
		if (strcmp(rest_ops[i].path, rp->path) == 0 &&
		    strcmp(rest_ops[i].method, method) == 0)
			return &rest_ops[i];
	return NULL;
}

/* 405 for a method the path does not have, 403 for a foreign Origin:
 * replies and returns NULL; otherwise the operation. */
static const struct rest_op *
accept_op(struct http_req *req, const struct rest_path *rp)
{
	const struct rest_op *op = find_op(rp, http_method(req));

	if (op == NULL) {
		char msg[96];
		fmt_cut(msg, sizeof(msg), "method not allowed here; use %s", rp->allow);
		http_add_header(req, "Allow", rp->allow);
		reply_error(req, 405, "method_not_allowed", msg, NULL);
		return NULL;
	}
	/* DNS-rebinding protection, as for MCP. */
	if (!config_origin_allowed(&rp->r->app->cfg, http_header(req, "Origin"))) {
		reply_error(req, 403, err_kind_name(ERR_FORBIDDEN), "Origin not allowed", NULL);
		return NULL;
	}
	return op;
}

/* The headers stage of every REST path: the refusals above before the
 * body, and whether the operation needs a key. */
static enum http_key_need
head(struct http_req *req, void *ctx)
{
	const struct rest_op *op = accept_op(req, ctx);

	if (op == NULL)
		return HTTP_KEY_REPLIED;
	return (op->flags & REST_ANON) ? HTTP_KEY_NONE : HTTP_KEY_REQUIRED;
}

/* Route handler for every REST path (ctx: its struct rest_path). */
static void
handle(struct http_req *req, void *ctx)
{
	struct rest_path *rp = ctx;
	const struct rest_op *op;
	struct rest_job *job;

	if ((op = accept_op(req, rp)) == NULL)
		return;
	http_log_detail(req, "op", op->tool ? op->tool : op->path);
	job = malloc(sizeof(*job));
	if (job == NULL) {
		reply_error(req, 500, err_kind_name(ERR_INTERNAL), "out of memory", NULL);
		return;
	}
	job->r = rp->r;
	job->op = op;
	if (op->flags & REST_ANON) {
		run_op(req, job);
	} else {
		auth_defer(req, run_op, job, job_drop);
	}
}

/* ---- set-up ---- */

static int
add_routes(struct rest *r, struct err *e)
{
	if (rest_ops_count > REST_MAX_OPS) {
		err_set(e, ERR_INTERNAL, "rest: more than %d operations", REST_MAX_OPS);
		return -1;
	}
	for (size_t i = 0; i < rest_ops_count; i++) {
		const struct rest_op *op = &rest_ops[i];
		struct rest_path *rp = NULL;
		size_t n;

		if (op->tool && (r->tools[i] = tools_find(op->tool)) == NULL) {
			err_set(e, ERR_INTERNAL, "rest: %s %s runs unknown tool %s", op->method,
			    op->path, op->tool);
			return -1;
		}

		for (size_t j = 0; j < r->n_paths && rp == NULL; j++)
			if (strcmp(r->paths[j].path, op->path) == 0)
				rp = &r->paths[j];
		if (rp == NULL) {
			if (r->n_paths >= REST_MAX_PATHS) {
				err_set(e, ERR_INTERNAL, "rest: more than %d paths",
				    REST_MAX_PATHS);
				return -1;
			}
			rp = &r->paths[r->n_paths];
			rp->r = r;
			rp->path = op->path;
			r->routes[r->n_paths] = (struct http_route){
				.path = op->path,
				.handler = handle,
				.ctx = rp,
				.head = head,
			};
			/* JSON arguments, never file content (that streams); at
			 * most AAS_MAX_BODY_BYTES all the same. */
			if (r->app->cfg.max_json_body_bytes < r->app->cfg.max_body_bytes) {
				r->routes[r->n_paths].max_body = r->app->cfg.max_json_body_bytes;
				r->routes[r->n_paths].max_body_name = "AAS_MAX_JSON_BODY_BYTES";
			}
			r->n_paths++;
		}
		n = strlen(rp->allow);
		if (fmt_buf(rp->allow + n, sizeof(rp->allow) - n, "%s%s", n ? ", " : "",
			op->method) < 0) {
			err_set(e, ERR_INTERNAL, "rest: the methods of %s do not fit Allow",
			    op->path);
			return -1;
		}
		if (op->flags & REST_RAW_BODY) {
			struct http_route *rt = &r->routes[rp - r->paths];
			rt->max_body = r->app->cfg.max_file_bytes;
			rt->max_body_name = "AAS_MAX_FILE_BYTES";
			rt->stream_body = 1;
		}
	}
	return 0;
}

struct rest *
rest_new(struct app *app, struct err *e)
{
	struct rest *r = calloc(1, sizeof(*r));
	json_t *doc = NULL;

	if (r == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	r->app = app;
	if (add_routes(r, e) < 0)
		goto fail;
	doc = rest_openapi_build(app->cfg.public_url, e);
	if (doc == NULL)
		goto fail;
	r->openapi = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (r->openapi == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	r->openapi_len = strlen(r->openapi);
	return r;
fail:
	rest_free(r);
	return NULL;
}

void
rest_free(struct rest *r)
{
	if (r == NULL)
		return;
	free(r->openapi);
	free(r);
}

const struct http_route *
rest_routes(const struct rest *r, size_t *n)
{
	*n = r->n_paths;
	return r->routes;
}
