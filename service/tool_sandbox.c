/* tool_sandbox.c - the sandbox and money tools: each turns its validated
 * arguments into the service's typed request once (parse), runs it, and
 * turns the typed result into the tool's result object. */
#include "service/tool_sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/metrics.h"
#include "base/utf8.h"
#include "service/sandbox.h"
#include "service/tool_impl.h"
#include "service/usage.h"
#include "base/b64.h"
#include "vmm/guest.h"

#define RUN_DEFAULT_TIMEOUT_S 60
#define RUN_DEFAULT_OUTPUT (256 * 1024)
#define READ_DEFAULT_LENGTH (1024 * 1024)
#define READ_MAX_LENGTH (4 * 1024 * 1024)

/* ---- typed readers of validated arguments ---- */

int
tool_arg_int(const json_t *args, const char *name, long long def, long long min, long long max,
    long long *out, struct err *e)
{
	const json_t *v = json_object_get(args, name);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v)) {
		err_set_field(e, name, "%s: must be an integer", name);
		return -1;
	}
	if (json_integer_value(v) < min || json_integer_value(v) > max) {
		err_set_field(e, name, "%s: must be between %lld and %lld", name, min, max);
		return -1;
	}
	*out = json_integer_value(v);
	return 0;
}

int
tool_arg_bool(const json_t *args, const char *name, int def, int *out, struct err *e)
{
	const json_t *v = json_object_get(args, name);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (!json_is_boolean(v)) {
		err_set_field(e, name, "%s: must be true or false", name);
		return -1;
	}
	*out = json_is_true(v);
	return 0;
}

int
tool_arg_str(const json_t *args, const char *name, const char **out, struct err *e)
{
	const json_t *v = json_object_get(args, name);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (!json_is_string(v)) {
		err_set_field(e, name, "%s: must be a string", name);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

static int
arg_int(const json_t *args, const char *name, int def, int min, int max, int *out, struct err *e)
{
	long long v;

	if (tool_arg_int(args, name, def, min, max, &v, e) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

/* A required string the schema already demanded. */
static int
arg_need(const json_t *args, const char *name, const char **out, struct err *e)
{
	if (tool_arg_str(args, name, out, e) < 0)
		return -1;
	if (*out == NULL) {
		err_set_field(e, name, "%s: required", name);
		return -1;
	}
	return 0;
}

static struct sbx *
service(struct call_ctx *cx, struct err *e)
{
	if (cx->app->sbx == NULL)
		err_set(e, ERR_UNAVAILABLE, "this server runs without a VM layer");
	return cx->app->sbx;
}

static void
progress_to_call(void *ctx, double progress, double total, const char *message)
{
	call_progress(ctx, progress, total, message);
}

/* Bytes as JSON text: invalid UTF-8 becomes U+FFFD. */
static json_t *
text_of(const char *data, size_t len)
{
	size_t n;
	char *clean = utf8_sanitize(data ? data : "", data ? len : 0, &n, NULL);
	json_t *j = clean ? json_stringn(clean, n) : NULL;

	free(clean);
	return j ? j : json_string("");
}

/* ---- create_sandbox ---- */

struct create_args {
	struct sbx_create_req rq;
	char *metadata; /* owned JSON text */
};

static int
create_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct create_args *a = req;
	const json_t *meta = json_object_get(args, "metadata");

	if (tool_arg_str(args, "size", &a->rq.size, e) < 0 ||
	    arg_int(args, "timeout_minutes", cx->app->cfg.default_timeout_min, 1, 100000,
		&a->rq.timeout_min, e) < 0 ||
	    tool_arg_str(args, "name", &a->rq.name, e) < 0 ||
	    tool_arg_bool(args, "internet", 1, &a->rq.internet, e) < 0)
		return -1;
	if (meta != NULL) {
		a->metadata = json_dumps(meta, JSON_COMPACT);
		if (a->metadata == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			return -1;
		}
		a->rq.metadata = a->metadata;
	}
	return 0;
}

static void
create_release(void *req)
{
	free(((struct create_args *)req)->metadata);
}

static json_t *
create_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct create_args *a = req;
	struct sbx_progress pg = { progress_to_call, cx, cx->cancelled };
	struct sbx *s = service(cx, e);

	return s ? sbx_create(s, cx->account_id, &a->rq, &pg, e) : NULL;
}

/* ---- run_command ---- */

/* The default kept output, never above what the service allows. */
static long long
run_default_output(const struct call_ctx *cx)
{
	long long cap = cx->app->cfg.max_output_bytes;

	return cap < RUN_DEFAULT_OUTPUT ? cap : RUN_DEFAULT_OUTPUT;
}

static int
run_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_run_req *r = req;
	const json_t *env = json_object_get(args, "env");
	long long max_out;

	if (arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
	    arg_need(args, "command", &r->command, e) < 0 ||
	    tool_arg_str(args, "cwd", &r->cwd, e) < 0 ||
	    tool_arg_str(args, "stdin", &r->stdin_data, e) < 0 ||
	    tool_arg_bool(args, "background", 0, &r->background, e) < 0 ||
	    arg_int(args, "timeout_seconds", r->background ? 0 : RUN_DEFAULT_TIMEOUT_S, 1, 86400,
		&r->timeout_s, e) < 0 ||
	    tool_arg_int(args, "max_output_bytes", run_default_output(cx), 1, 1LL << 40, &max_out,
		e) < 0)
		return -1;
	if (env != NULL && !json_is_object(env)) {
		err_set_field(e, "env", "env: must be an object of strings");
		return -1;
	}
	r->env = env;
	r->stdin_len = r->stdin_data ? json_string_length(json_object_get(args, "stdin")) : 0;
	r->max_output = max_out;
	return 0;
}

static json_t *
run_result(const char *id, const struct sbx_run_res *res)
{
	json_t *out;

	if (res->background)
		return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:I}", "sandbox_id", id,
		    "command_id", res->command_id, "state", "running", "stdout_path",
		    res->stdout_path, "stderr_path", res->stderr_path, "background", 1,
		    "duration_ms", (json_int_t)res->duration_ms);
	out = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:b, s:b, s:I, s:I, s:s, s:s,"
			" s:b, s:I, s:b}",
	    "sandbox_id", id, "command_id", res->command_id, "state", res->state, "exit_code",
	    res->ended ? json_integer(res->exit_code) : json_null(), "stdout",
	    text_of(res->out, res->out_len), "stderr", text_of(res->err, res->err_len),
	    "stdout_truncated", res->out_total > (long long)res->out_len, "stderr_truncated",
	    res->err_total > (long long)res->err_len, "stdout_bytes", (json_int_t)res->out_total,
	    "stderr_bytes", (json_int_t)res->err_total, "stdout_path", res->stdout_path,
	    "stderr_path", res->stderr_path, "timed_out", res->timed_out, "duration_ms",
	    (json_int_t)res->duration_ms, "background", 0);
	if (out && !res->ended)
		json_object_set_new(out, "note",
		    json_string(
			"the guest did not report the end in time; the command may still be running"));
	return out;
}

static json_t *
run_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx_run_req *r = req;
	struct sbx_progress pg = { progress_to_call, cx, cx->cancelled };
	struct sbx *s = service(cx, e);
	struct sbx_run_res res;
	json_t *out;

	if (s == NULL || sbx_run(s, cx->account_id, r, &pg, &res, e) < 0)
		return NULL;
	out = run_result(r->sandbox_id, &res);
	sbx_run_res_clear(&res);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}

/* ---- write_file ---- */

struct write_args {
	struct sbx_write_req rq;
	unsigned char *owned; /* decoded content_base64 */
	int has_content;
};

static int
mode_parse(const char *text, unsigned *mode, struct err *e)
{
	unsigned v = 0;
	size_t n = text ? strlen(text) : 0;

	if (n < 3 || n > 4) {
		err_set_field(e, "mode", "mode: octal permission bits such as \"0644\"");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (text[i] < '0' || text[i] > '7') {
			err_set_field(e, "mode", "mode: octal permission bits such as \"0644\"");
			return -1;
		}
		v = v * 8 + (unsigned)(text[i] - '0');
	}
	*mode = v;
	return 0;
}

static int
write_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct write_args *a = req;
	const json_t *text = json_object_get(args, "content");
	const json_t *b64 = json_object_get(args, "content_base64");
	const char *mode = NULL;

	(void)cx;
	if (arg_need(args, "sandbox_id", &a->rq.sandbox_id, e) < 0 ||
	    arg_need(args, "path", &a->rq.path, e) < 0 ||
	    tool_arg_str(args, "mode", &mode, e) < 0 ||
	    tool_arg_bool(args, "make_parents", 1, &a->rq.make_parents, e) < 0)
		return -1;
	a->rq.mode = 0644;
	if (mode && mode_parse(mode, &a->rq.mode, e) < 0)
		return -1;
	if (text && b64) {
		err_set_field(e, "content", "content / content_base64: give exactly one of them");
		return -1;
	}
	if (text) {
		if (!json_is_string(text)) {
			err_set_field(e, "content", "content: must be a string");
			return -1;
		}
		a->rq.data = (const unsigned char *)json_string_value(text);
		a->rq.len = json_string_length(text);
		a->has_content = 1;
	} else if (b64) {
		size_t len = 0, n = json_is_string(b64) ? json_string_length(b64) : 0;
		size_t cap = B64_DECODED_MAX(n) < GUEST_MAX_FILE ? B64_DECODED_MAX(n) :
								   GUEST_MAX_FILE;
		struct err bad;

		err_clear(&bad);
		/* Decoded into a buffer no larger than one write may be. */
		if (!json_is_string(b64) || (a->owned = malloc(cap + 1)) == NULL ||
		    b64_decode(json_string_value(b64), n, a->owned, cap, &len, &bad) < 0) {
			if (bad.kind == ERR_LIMIT)
				err_set_field(e, "content_base64",
				    "content_base64: at most %u bytes per write", GUEST_MAX_FILE);
			else
				err_set_field(e, "content_base64",
				    "content_base64: not valid base64");
			return -1;
		}
		a->rq.data = a->owned;
		a->rq.len = len;
		a->has_content = 1;
	}
	if (a->rq.len > GUEST_MAX_FILE) {
		const char *f = b64 ? "content_base64" : "content";
		err_set_field(e, f, "%s: at most %u bytes per write", f, GUEST_MAX_FILE);
		return -1;
	}
	return 0;
}

static void
write_release(void *req)
{
	free(((struct write_args *)req)->owned);
}

static json_t *
write_result(const char *id, const struct sbx_write_res *res)
{
	char mode[8];

	snprintf(mode, sizeof(mode), "%04o", res->mode);
	return json_pack("{s:s, s:s, s:I, s:s}", "sandbox_id", id, "path", res->path,
	    "bytes_written", (json_int_t)res->bytes, "mode", mode);
}

static json_t *
write_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct write_args *a = req;
	struct sbx *s = service(cx, e);
	struct sbx_write_res res;

	if (!a->has_content) {
		err_set_field(e, "content", "content / content_base64: give exactly one of them");
		return NULL;
	}
	if (s == NULL || sbx_write_file(s, cx->account_id, &a->rq, &res, e) < 0)
		return NULL;
	return write_result(a->rq.sandbox_id, &res);
}

/* ---- read_file ---- */

struct read_args {
	struct sbx_read_req rq;
	int base64;
};

static int
read_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct read_args *a = req;
	const char *enc = NULL;
	long long len;

	(void)cx;
	if (arg_need(args, "sandbox_id", &a->rq.sandbox_id, e) < 0 ||
	    arg_need(args, "path", &a->rq.path, e) < 0 ||
	    tool_arg_int(args, "offset", 0, 0, (1LL << 62), &a->rq.offset, e) < 0 ||
	    tool_arg_int(args, "length", READ_DEFAULT_LENGTH, 1, READ_MAX_LENGTH, &len, e) < 0 ||
	    tool_arg_str(args, "encoding", &enc, e) < 0)
		return -1;
	a->rq.length = (size_t)len;
	a->base64 = enc && strcmp(enc, "base64") == 0;
	return 0;
}

static json_t *
read_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct read_args *a = req;
	struct sbx *s = service(cx, e);
	struct sbx_read_res res;
	json_t *content, *out = NULL;

	if (s == NULL || sbx_read_file(s, cx->account_id, &a->rq, &res, e) < 0)
		return NULL;
	if (a->base64) {
		char *b = b64_encode(res.data, res.len);
		content = b ? json_string(b) : NULL;
		free(b);
	} else {
		content = text_of((const char *)res.data, res.len);
	}
	if (content != NULL)
		out = json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:s, s:o}", "sandbox_id",
		    a->rq.sandbox_id, "path", res.path, "offset", (json_int_t)res.offset, "length",
		    (json_int_t)res.len, "total_size", (json_int_t)res.total, "eof",
		    res.offset + (long long)res.len >= res.total, "encoding",
		    a->base64 ? "base64" : "text", "content", content);
	sbx_read_res_clear(&res);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}

/* ---- list_files, expose_port ---- */

static int
files_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_files_req *r = req;

	(void)cx;
	return arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
		tool_arg_str(args, "path", &r->path, e) < 0 ||
		arg_int(args, "depth", 2, 1, 10, &r->depth, e) < 0 ||
		arg_int(args, "limit", 500, 1, 5000, &r->limit, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
files_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = service(cx, e);

	return s ? sbx_list_files(s, cx->account_id, req, e) : NULL;
}

static int
expose_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_expose_req *r = req;

	(void)cx;
	return arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
		arg_int(args, "port", 0, 1, 65535, &r->port, e) < 0 ||
		tool_arg_bool(args, "public", 1, &r->public, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
expose_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = service(cx, e);

	return s ? sbx_expose_port(s, cx->account_id, req, e) : NULL;
}

/* ---- get, list, destroy ---- */

struct id_args {
	const char *sandbox_id;
};

static int
id_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	(void)cx;
	return arg_need(args, "sandbox_id", &((struct id_args *)req)->sandbox_id, e);
}

static json_t *
get_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = service(cx, e);

	return s ? sbx_get(s, cx->account_id, ((struct id_args *)req)->sandbox_id, e) : NULL;
}

static json_t *
destroy_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = service(cx, e);

	return s ? sbx_destroy(s, cx->account_id, ((struct id_args *)req)->sandbox_id, e) : NULL;
}

static int
list_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_list_req *r = req;

	(void)cx;
	return tool_arg_str(args, "state", &r->state, e) < 0 ||
		tool_arg_str(args, "cursor", &r->cursor, e) < 0 ||
		arg_int(args, "limit", 20, 1, 100, &r->limit, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
list_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = service(cx, e);

	return s ? sbx_list(s, cx->account_id, req, e) : NULL;
}

/* ---- extend_sandbox, get_usage: money, no VM needed ---- */

static int
extend_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct usage_extend_req *r = req;

	(void)cx;
	return arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
		arg_int(args, "minutes", 0, 1, 100000, &r->minutes, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
extend_run(struct call_ctx *cx, void *req, struct err *e)
{
	return usage_extend(cx->app, cx->account_id, req, e);
}

static int
usage_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct usage_req *r = req;

	(void)cx;
	return tool_arg_str(args, "cursor", &r->cursor, e) < 0 ||
		arg_int(args, "limit", 20, 1, 100, &r->limit, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
usage_run(struct call_ctx *cx, void *req, struct err *e)
{
	return usage_get(cx->app, cx->account_id, req, e);
}

_Static_assert(sizeof(struct create_args) <= TOOL_MAX_REQ, "create request too large");
_Static_assert(sizeof(struct sbx_run_req) <= TOOL_MAX_REQ, "run request too large");
_Static_assert(sizeof(struct write_args) <= TOOL_MAX_REQ, "write request too large");
_Static_assert(sizeof(struct read_args) <= TOOL_MAX_REQ, "read request too large");

const struct tool_impl tool_sandbox_impls[] = {
	{ "create_sandbox", create_parse, create_run, create_release, NULL, 0, 1 },
	{ "run_command", run_parse, run_run, NULL, NULL, 0, 1 },
	{ "write_file", write_parse, write_run, write_release, NULL, 0, 0 },
	{ "read_file", read_parse, read_run, NULL, NULL, 0, 0 },
	{ "list_files", files_parse, files_run, NULL, NULL, 0, 0 },
	{ "expose_port", expose_parse, expose_run, NULL, NULL, 0, 0 },
	{ "get_sandbox", id_parse, get_run, NULL, NULL, 0, 0 },
	{ "list_sandboxes", list_parse, list_run, NULL, NULL, 0, 0 },
	{ "extend_sandbox", extend_parse, extend_run, NULL, NULL, 0, 0 },
	{ "destroy_sandbox", id_parse, destroy_run, NULL, NULL, 0, 1 },
	{ "get_usage", usage_parse, usage_run, NULL, NULL, 0, 0 },
};
const size_t tool_sandbox_impls_count = sizeof(tool_sandbox_impls) / sizeof(tool_sandbox_impls[0]);

/* ---- raw file bytes for the REST routes ---- */

/* The tool named, when `t` is not it: a route table that runs another
 * tool on a file route is a programming error, refused. */
static const struct tool *
file_tool(const struct tool *t, const char *name, struct err *e)
{
	if (t == NULL)
		t = tools_find(name);
	if (t == NULL || strcmp(tool_name(t), name) != 0) {
		err_set(e, ERR_INTERNAL, "%s route without its tool", name);
		return NULL;
	}
	return t;
}

int
tools_write_file_raw(struct call_ctx *cx, const struct tool *t, const json_t *args,
    const void *data, size_t len, json_t **result, struct err *e)
{
	struct tool_call *c;
	struct write_args *a;
	double t0 = metrics_now();

	*result = NULL;
	if ((t = file_tool(t, "write_file", e)) == NULL ||
	    (c = tools_prepare(cx, t, args, e)) == NULL)
		return -1;
	a = tool_call_req(c);
	if (a->has_content) {
		err_set_field(e, "content", "content: the body is the content");
	} else if (len > GUEST_MAX_FILE) {
		err_set_field(e, "content", "content: at most %u bytes per write", GUEST_MAX_FILE);
	} else {
		a->rq.data = data;
		a->rq.len = len;
		a->has_content = 1;
		*result = tool_call_run(cx, c, e);
	}
	tools_count_call(cx, "write_file", t0, *result ? ERR_NONE : e->kind);
	tool_call_free(c);
	return *result ? 0 : -1;
}

/* Appends one page read at rq->offset to `acc`; sets the file's size and
 * whether the page reached its end. */
static int
read_append(struct sbx *s, const char *account, struct sbx_read_req *rq, struct buf *acc,
    struct sbx_read_res *res, int *eof, struct err *e)
{
	struct sbx_read_res page;
	int rc;

	if (sbx_read_file(s, account, rq, &page, e) < 0)
		return -1;
	res->total = page.total;
	memcpy(res->path, page.path, sizeof(res->path));
	*eof = page.len == 0 || page.offset + (long long)page.len >= page.total;
	rc = buf_append(acc, page.data, page.len);
	sbx_read_res_clear(&page);
	if (rc < 0)
		err_set_field(e, "length",
		    "length: more than %zu bytes in one response; page with"
		    " offset and length (at most %u)",
		    acc->max, READ_MAX_LENGTH);
	return rc;
}

int
tools_read_file_raw(struct call_ctx *cx, const struct tool *t, const json_t *args, size_t whole_max,
    struct sbx_read_res *res, struct err *e)
{
	struct tool_call *c;
	int whole = json_object_get(args, "length") == NULL;
	struct read_args *a;
	double t0 = metrics_now();
	struct sbx *s;
	struct buf acc;
	int rc = -1, eof = 0;

	memset(res, 0, sizeof(*res));
	buf_init(&acc, 0);
	if ((t = file_tool(t, "read_file", e)) == NULL ||
	    (c = tools_prepare(cx, t, args, e)) == NULL)
		return -1;
	a = tool_call_req(c);
	s = service(cx, e);
	if (s == NULL)
		goto out;
	res->offset = a->rq.offset;
	if (!whole) {
		rc = sbx_read_file(s, cx->account_id, &a->rq, res, e);
		goto out;
	}
	/* The rest of the file in pages of read_file's default length: each
	 * page is one guest answer, which must arrive within the agent's
	 * timeout even on a slow guest. */
	buf_init(&acc, whole_max);
	a->rq.length = READ_DEFAULT_LENGTH;
	do {
		a->rq.offset = res->offset + (long long)acc.len;
		if (read_append(s, cx->account_id, &a->rq, &acc, res, &eof, e) < 0)
			goto out;
		if (res->total - res->offset > (long long)whole_max) {
			err_set_field(e, "length",
			    "length: the file has %lld bytes after offset %lld,"
			    " more than %zu in one response; page with offset and length (at most %u)",
			    res->total - res->offset, res->offset, whole_max, READ_MAX_LENGTH);
			goto out;
		}
	} while (!eof);
	res->data = (unsigned char *)buf_steal(&acc, &res->len);
	rc = 0;
out:
	buf_free(&acc);
	if (rc < 0)
		sbx_read_res_clear(res);
	tools_count_call(cx, "read_file", t0, rc == 0 ? ERR_NONE : e->kind);
	tool_call_free(c);
	return rc;
}
