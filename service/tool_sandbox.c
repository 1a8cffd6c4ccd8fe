/* tool_sandbox.c - the sandbox and money tools: each turns its validated
 * arguments into the service's typed request once (parse), runs it, and
 * turns the typed result into the tool's result object. The file tools
 * are in tool_files.c, the argument readers in tool_args.c. */
#include "service/tool_sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox.h"
#include "service/tool_cmd.h"
#include "service/tool_impl.h"
#include "sandbox/usage.h"

#define RUN_DEFAULT_TIMEOUT_S 60
#define RUN_DEFAULT_OUTPUT (256 * 1024)

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
	    tool_arg_int32(args, "timeout_minutes", cx->app->cfg.default_timeout_min, 1, 100000,
		&a->rq.timeout_min, e) < 0 ||
	    tool_arg_str(args, "name", &a->rq.name, e) < 0 ||
	    tool_arg_bool(args, "internet", 1, &a->rq.internet, e) < 0 ||
	    tool_arg_str(args, "from_snapshot", &a->rq.from_snapshot, e) < 0)
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
	struct sbx_progress pg = { tool_progress, cx, cx->cancelled, NULL };
	struct sbx *s = tool_sbx(cx, e);

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

	if (tool_arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
	    tool_arg_need(args, "command", &r->command, e) < 0 ||
	    tool_arg_str(args, "cwd", &r->cwd, e) < 0 ||
	    tool_arg_str(args, "stdin", &r->stdin_data, e) < 0 ||
	    tool_arg_bool(args, "background", 0, &r->background, e) < 0 ||
	    tool_arg_int32(args, "timeout_seconds", r->background ? 0 : RUN_DEFAULT_TIMEOUT_S, 1,
		86400, &r->timeout_s, e) < 0 ||
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
		return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:I, s:s}", "sandbox_id", id,
		    "command_id", res->command_id, "state", "running", "stdout_path",
		    res->stdout_path, "stderr_path", res->stderr_path, "background", 1,
		    "duration_ms", (json_int_t)res->duration_ms, "note",
		    "runs in the background: follow its state and output with get_command "
		    "(wait_seconds waits for news) and stop it with kill_command");
	out = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:b, s:b, s:I, s:I, s:s, s:s,"
			" s:b, s:I, s:b}",
	    "sandbox_id", id, "command_id", res->command_id, "state", res->state, "exit_code",
	    res->ended ? json_integer(res->exit_code) : json_null(), "stdout",
	    tool_text_of(res->out, res->out_len), "stderr", tool_text_of(res->err, res->err_len),
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

/* Progress of a streamed run: its context is the stream. */
static void
stream_progress(void *ctx, double progress, double total, const char *message)
{
	tool_call_progress(((struct tool_stream *)ctx)->cx, progress, total, message);
}

static json_t *
run_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx_run_req *r = req;
	struct tool_stream ts;
	struct sbx_progress pg = { tool_progress, cx, cx->cancelled, NULL };
	struct sbx *s = tool_sbx(cx, e);
	struct sbx_run_res res;
	json_t *out;

	tool_stream_init(&ts, cx);
	if (tool_stream_wanted(cx)) {
		pg.ctx = &ts;
		pg.output = tool_stream_output;
		pg.fn = stream_progress;
	}
	if (s == NULL || sbx_run(s, cx->account_id, r, &pg, &res, e) < 0)
		return NULL;
	tool_stream_end(&ts);
	out = run_result(r->sandbox_id, &res);
	sbx_run_res_clear(&res);
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
	return tool_arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
		tool_arg_str(args, "path", &r->path, e) < 0 ||
		tool_arg_int32(args, "depth", 2, 1, 10, &r->depth, e) < 0 ||
		tool_arg_int32(args, "limit", 500, 1, 5000, &r->limit, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
files_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	return s ? sbx_list_files(s, cx->account_id, req, e) : NULL;
}

static int
expose_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_expose_req *r = req;

	(void)cx;
	return tool_arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
		tool_arg_int32(args, "port", 0, 1, 65535, &r->port, e) < 0 ||
		tool_arg_bool(args, "public", 1, &r->public, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
expose_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

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
	return tool_arg_need(args, "sandbox_id", &((struct id_args *)req)->sandbox_id, e);
}

static json_t *
get_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	return s ? sbx_get(s, cx->account_id, ((struct id_args *)req)->sandbox_id, e) : NULL;
}

static json_t *
destroy_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	return s ? sbx_destroy(s, cx->account_id, ((struct id_args *)req)->sandbox_id, e) : NULL;
}

static json_t *
pause_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	return s ? sbx_pause(s, cx->account_id, ((struct id_args *)req)->sandbox_id, e) : NULL;
}

static json_t *
resume_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	return s ? sbx_resume(s, cx->account_id, ((struct id_args *)req)->sandbox_id, e) : NULL;
}

/* ---- snapshots ---- */

static int
snap_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_snapshot_req *r = req;

	return tool_arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
		tool_arg_str(args, "name", &r->name, e) < 0 ||
		tool_arg_int32(args, "keep_minutes", 0, 1, cx->app->cfg.snapshot_max_keep_min,
		    &r->keep_minutes, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
snap_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	return s ? sbx_snapshot(s, cx->account_id, req, e) : NULL;
}

static int
none_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	(void)cx;
	(void)args;
	(void)req;
	(void)e;
	return 0;
}

static json_t *
snap_list_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	(void)req;
	return s ? sbx_snapshot_list(s, cx->account_id, e) : NULL;
}

struct snap_id_args {
	const char *snapshot_id;
};

static int
snap_id_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	(void)cx;
	return tool_arg_need(args, "snapshot_id", &((struct snap_id_args *)req)->snapshot_id, e);
}

static json_t *
snap_delete_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	return s ?
	    sbx_snapshot_delete(s, cx->account_id, ((struct snap_id_args *)req)->snapshot_id, e) :
	    NULL;
}

static int
list_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct sbx_list_req *r = req;

	(void)cx;
	return tool_arg_str(args, "state", &r->state, e) < 0 ||
		tool_arg_str(args, "cursor", &r->cursor, e) < 0 ||
		tool_arg_int32(args, "limit", 20, 1, 100, &r->limit, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
list_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct sbx *s = tool_sbx(cx, e);

	return s ? sbx_list(s, cx->account_id, req, e) : NULL;
}

/* ---- extend_sandbox, get_usage: money, no VM needed ---- */

static int
extend_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct usage_extend_req *r = req;

	(void)cx;
	return tool_arg_need(args, "sandbox_id", &r->sandbox_id, e) < 0 ||
		tool_arg_int32(args, "minutes", 0, 1, 100000, &r->minutes, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
extend_run(struct call_ctx *cx, void *req, struct err *e)
{
	return usage_extend(cx->app->db, &cx->app->cfg, cx->account_id, req, e);
}

static int
usage_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct usage_req *r = req;

	(void)cx;
	return tool_arg_str(args, "cursor", &r->cursor, e) < 0 ||
		tool_arg_int32(args, "limit", 20, 1, 100, &r->limit, e) < 0 ?
	    -1 :
	    0;
}

static json_t *
usage_run(struct call_ctx *cx, void *req, struct err *e)
{
	return usage_get(cx->app->db, cx->account_id, req, e);
}

_Static_assert(sizeof(struct create_args) <= TOOL_MAX_REQ, "create request too large");
_Static_assert(sizeof(struct sbx_run_req) <= TOOL_MAX_REQ, "run request too large");

const struct tool_impl tool_sandbox_impls[] = {
	{ "create_sandbox", create_parse, create_run, create_release, NULL, 0, 1 },
	{ "run_command", run_parse, run_run, NULL, NULL, 0, 1 },
	{ "write_file", tool_write_parse, tool_write_run, tool_write_release, NULL, 0, 0 },
	{ "read_file", tool_read_parse, tool_read_run, NULL, NULL, 0, 0 },
	{ "list_files", files_parse, files_run, NULL, NULL, 0, 0 },
	{ "expose_port", expose_parse, expose_run, NULL, NULL, 0, 0 },
	{ "get_sandbox", id_parse, get_run, NULL, NULL, 0, 0 },
	{ "list_sandboxes", list_parse, list_run, NULL, NULL, 0, 0 },
	{ "extend_sandbox", extend_parse, extend_run, NULL, NULL, 0, 0 },
	{ "destroy_sandbox", id_parse, destroy_run, NULL, NULL, 0, 1 },
	{ "pause_sandbox", id_parse, pause_run, NULL, NULL, 0, 1 },
	{ "resume_sandbox", id_parse, resume_run, NULL, NULL, 0, 1 },
	{ "snapshot_sandbox", snap_parse, snap_run, NULL, NULL, 0, 1 },
	{ "list_snapshots", none_parse, snap_list_run, NULL, NULL, 0, 0 },
	{ "delete_snapshot", snap_id_parse, snap_delete_run, NULL, NULL, 0, 0 },
	{ "get_usage", usage_parse, usage_run, NULL, NULL, 0, 0 },
};
const size_t tool_sandbox_impls_count = sizeof(tool_sandbox_impls) / sizeof(tool_sandbox_impls[0]);
