/* rest_ops.c - the REST operations: each translates between HTTP and a
 * tool (tools_run) or the sandbox service, and nothing else. The table
 * at the end is the API; server/openapi.json describes the same routes. */
#include "server/rest_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bq.h"
#include "base/fmt.h"
#include "base/metrics.h"
#include "sandbox/sandbox.h"
#include "vmm/guest.h"
#include "service/tool_sandbox.h"

json_t *
rest_op_tool(struct rest_call *c, json_t *args, struct err *e)
{
	return tools_run(&c->cx, c->tool, args, e);
}

struct sbx *
rest_sbx(struct rest_call *c, struct err *e)
{
	if (c->r->app->sbx == NULL)
		err_set(e, ERR_UNAVAILABLE, "this server runs without a VM layer");
	return c->r->app->sbx;
}

static json_t *
op_openapi(struct rest_call *c, json_t *args, struct err *e)
{
	(void)args;
	(void)e;
	http_reply_raw(c->req, 200, "application/json", c->r->openapi, c->r->openapi_len);
	c->replied = 1;
	return NULL;
}

static json_t *
op_create(struct rest_call *c, json_t *args, struct err *e)
{
	json_t *out = rest_op_tool(c, args, e);
	const char *id = json_string_value(json_object_get(out, "sandbox_id"));
	char loc[64];

	/* Without a Location that fits, the body still names the sandbox. */
	if (id && fmt_buf(loc, sizeof(loc), "/v1/sandboxes/%s", id) == 0)
		http_add_header(c->req, "Location", loc);
	return out;
}

/* ---- run_command as an event stream ---- */

struct run_events {
	struct sse *sse;
	struct sse_gate gate; /* events left out while the client was behind */
};

static void
send_event(struct sse *sse, const char *event, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;

	if (text)
		sse_send_event(sse, event, text, strlen(text));
	free(text);
	json_decref(data);
}

static void
send_dropped(struct run_events *ev)
{
	if (ev->gate.dropped == 0)
		return;
	send_event(ev->sse, "dropped", json_pack("{s:I}", "events", (json_int_t)ev->gate.dropped));
	ev->gate.dropped = 0;
}

/* cx.output: one stdout or stderr event per piece of text. */
static void
events_output(void *sink, int fd, const char *text, size_t len, double sent)
{
	struct run_events *ev = sink;

	/* A slow client: drop rather than queue without bound. */
	if (!sse_gate_pass(ev->sse, &ev->gate, sent))
		return;
	send_dropped(ev);
	send_event(ev->sse, fd == 2 ? "stderr" : "stdout", json_pack("{s:s%}", "text", text, len));
}

/* A stream only for a client that asks for one and not for JSON: one
 * that takes both (as MCP clients send) gets the plain answer. */
static int
wants_events(struct rest_call *c)
{
	const char *accept = http_header(c->req, "Accept");

	return accept != NULL && strcasestr(accept, "text/event-stream") != NULL &&
	    strcasestr(accept, "application/json") == NULL;
}

/* The checks of the plain call are answered as plain errors; once the
 * arguments are accepted the reply is a stream and the outcome its last
 * event. */
static json_t *
run_streamed(struct rest_call *c, json_t *args, struct err *e)
{
	struct run_events ev = { NULL, { 0, 0 } };
	struct tool_call *call;
	double t0 = metrics_now();
	json_t *out;
	struct err re;

	if ((call = tools_prepare(&c->cx, c->tool, args, e)) == NULL)
		return NULL;
	if ((ev.sse = http_reply_sse(c->req, 200)) == NULL) {
		tool_call_free(call);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	http_add_header(c->req, "Cache-Control", "no-store");
	c->replied = 1;
	http_send_now(c->req);
	c->req = NULL;
	c->cx.output = events_output;
	c->cx.progress_sink = &ev;
	err_clear(&re);
	out = tool_call_run(&c->cx, call, &re);
	tools_count_call(&c->cx, tool_name(c->tool), t0, out ? ERR_NONE : re.kind);
	send_dropped(&ev);
	if (out != NULL) {
		send_event(ev.sse, "result", out);
	} else {
		json_t *err = rest_error_json(err_kind_name(re.kind), re.msg, re.field);

		send_event(ev.sse, "error",
		    err ? json_pack("{s:i, s:o}", "status", err_http_status(re.kind), "error",
			      json_incref(json_object_get(err, "error"))) :
			  NULL);
		json_decref(err);
	}
	sse_finish(ev.sse);
	sse_unref(ev.sse);
	tool_call_free(call);
	return NULL;
}

/* A background command is accepted (202), with where to follow it. */
static json_t *
op_run(struct rest_call *c, json_t *args, struct err *e)
{
	json_t *out;
	const char *cmd;
	const char *id = json_string_value(json_object_get(args, "sandbox_id"));
	char loc[96];

	if (wants_events(c))
		return run_streamed(c, args, e);
	out = rest_op_tool(c, args, e);
	cmd = json_string_value(json_object_get(out, "command_id"));
	if (cmd && json_is_true(json_object_get(out, "background"))) {
		c->status = 202;
		if (fmt_buf(loc, sizeof(loc), "/v1/sandboxes/%s/commands/%s", id, cmd) == 0)
			http_add_header(c->req, "Location", loc);
	}
	return out;
}

/* get_command plus the command's record (text, times); once the sandbox
 * no longer runs, the record alone with null sizes. */
static json_t *
op_command(struct rest_call *c, json_t *args, struct err *e)
{
	struct sbx *s = rest_sbx(c, e);
	const char *id = json_string_value(json_object_get(args, "sandbox_id"));
	const char *cmd = json_string_value(json_object_get(args, "command_id"));
	json_t *out, *rec;

	if (s == NULL)
		return NULL;
	out = rest_op_tool(c, args, e);
	if (out == NULL && e->kind == ERR_CONFLICT) {
		err_clear(e);
		return sbx_command_status(s, c->cx.account_id, id, cmd, e);
	}
	if (out == NULL)
		return NULL;
	rec = sbx_command_record(s, c->cx.account_id, id, cmd, e);
	if (rec == NULL) {
		json_decref(out);
		return NULL;
	}
	json_object_update_missing(out, rec);
	json_decref(rec);
	return out;
}

static json_t *
op_list_ports(struct rest_call *c, json_t *args, struct err *e)
{
	struct sbx *s = rest_sbx(c, e);

	return s ? sbx_list_ports(s, c->cx.account_id,
		       json_string_value(json_object_get(args, "sandbox_id")), e) :
		   NULL;
}

/* ---- files streamed both ways (at most AAS_MAX_FILE_BYTES) ---- */

/* Fills the agent's frame when the body has that much, so a body that
 * arrives in small pieces still travels in full frames. */
static ssize_t
body_read(void *ctx, void *buf, size_t n, struct err *e)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = bq_read(ctx, (char *)buf + got, n - got, e);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* A streamed body that passed AAS_MAX_FILE_BYTES part way is answered 413
 * like one whose length said so. Returns NULL (the operation's answer). */
static json_t *
reply_too_large(struct rest_call *c, const struct err *e)
{
	if (e->kind == ERR_LIMIT && strcmp(e->field, "AAS_MAX_FILE_BYTES") == 0) {
		http_reply_json(c->req, 413,
		    rest_error_json("payload_too_large", e->msg, "AAS_MAX_FILE_BYTES"));
		c->replied = 1;
	}
	return NULL;
}

/* The request body flows into the guest as it arrives. */
static json_t *
op_upload(struct rest_call *c, json_t *args, struct err *e)
{
	struct bq *in = http_body_stream(c->req);
	json_t *out;

	if (in == NULL) {
		err_set(e, ERR_INTERNAL, "upload route without a streamed body");
		return NULL;
	}
	if (tool_write_file_stream(&c->cx, c->tool, args, body_read, in,
		(uint64_t)c->r->app->cfg.max_file_bytes, &out, e) == 0)
		return out;
	return reply_too_large(c, e);
}

struct download {
	struct rest_call *c;
	struct bq *out;
};

/* The answer's headers go out; its body follows through d->out. */
static int
download_open(struct download *d, const char *type, long long length, struct err *e)
{
	d->out = http_reply_stream(d->c->req, 200, type, length);
	if (d->out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	d->c->replied = 1;
	d->c->req = NULL; /* the HTTP thread's again */
	return 0;
}

/* The size is known: the headers go out with Content-Length. */
static int
download_start(void *ctx, const struct sbx_read_res *res, struct err *e)
{
	struct download *d = ctx;
	char size[32], off[32];

	if (fmt_err(e, "file size", size, sizeof(size), "%lld", res->total) < 0 ||
	    fmt_err(e, "offset", off, sizeof(off), "%lld", res->offset) < 0)
		return -1;
	http_add_header(d->c->req, "X-AAS-File-Size", size);
	http_add_header(d->c->req, "X-AAS-Content-Offset", off);
	return download_open(d, "application/octet-stream", (long long)res->len, e);
}

static int
download_write(void *ctx, const void *buf, size_t n, struct err *e)
{
	struct download *d = ctx;

	return bq_write(d->out, buf, n, e);
}

/* Raw bytes of a file: one page when length is given, else the rest of
 * the file from offset (up to AAS_MAX_FILE_BYTES), streamed. An error
 * after the headers ends the body short of its Content-Length. */
static json_t *
op_download(struct rest_call *c, json_t *args, struct err *e)
{
	struct download d = { c, NULL };
	int rc = tool_read_file_stream(&c->cx, c->tool, args, c->r->app->cfg.max_file_bytes,
	    download_start, download_write, &d, e);

	if (d.out == NULL)
		return NULL;
	bq_finish(d.out, rc < 0 ? e : NULL);
	bq_free(d.out);
	return NULL;
}

/* ---- trees: a directory as one tar stream ---- */

static const char *
arg_str(const json_t *args, const char *key)
{
	return json_string_value(json_object_get(args, key));
}

static json_t *
tree_json(const char *id, const struct sbx_tree_res *res)
{
	return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "sandbox_id", id, "path", res->path,
	    "files", (json_int_t)res->files, "directories", (json_int_t)res->dirs, "symlinks",
	    (json_int_t)res->symlinks, "hardlinks", (json_int_t)res->hardlinks, "bytes",
	    (json_int_t)res->bytes);
}

/* The body, a tar stream, is unpacked into ?path= as it arrives; nothing
 * changes there unless all of it was good. */
static json_t *
op_tree_put(struct rest_call *c, json_t *args, struct err *e)
{
	struct bq *in = http_body_stream(c->req);
	struct sbx *s = rest_sbx(c, e);
	const char *id = arg_str(args, "sandbox_id");
	struct sbx_tree_res res;

	if (s == NULL)
		return NULL;
	if (in == NULL) {
		err_set(e, ERR_INTERNAL, "tree route without a streamed body");
		return NULL;
	}
	if (sbx_tree_put(s, c->cx.account_id, id, arg_str(args, "path"), body_read, in,
		(uint64_t)c->r->app->cfg.max_file_bytes, (uint64_t)c->r->app->cfg.max_tree_entries,
		&res, e) < 0)
		return reply_too_large(c, e);
	return tree_json(id, &res);
}

/* No size ahead: the tar stream goes out chunked. */
static int
tree_dl_start(void *ctx, struct err *e)
{
	return download_open(ctx, "application/x-tar", -1, e);
}

/* ?path= (default: the home) as a tar stream. An error once bytes went
 * out ends the chunked body without its last chunk. */
static json_t *
op_tree_get(struct rest_call *c, json_t *args, struct err *e)
{
	struct download d = { c, NULL };
	struct sbx *s = rest_sbx(c, e);
	struct sbx_tree_res res;
	int rc;

	if (s == NULL)
		return NULL;
	rc = sbx_tree_get(s, c->cx.account_id, arg_str(args, "sandbox_id"), arg_str(args, "path"),
	    arg_str(args, "exclude"), (uint64_t)c->r->app->cfg.max_file_bytes, tree_dl_start,
	    download_write, &d, &res, e);
	if (d.out == NULL)
		return NULL;
	bq_finish(d.out, rc < 0 ? e : NULL);
	bq_free(d.out);
	return NULL;
}

static const char *const usage_q[] = { "limit", "cursor", NULL };
static const char *const list_q[] = { "state", "limit", "cursor", NULL };
static const char *const files_q[] = { "path", "depth", "limit", NULL };
static const char *const read_q[] = { "path", "offset", "length", NULL };
static const char *const write_q[] = { "path", "mode", "make_parents", NULL };
static const char *const tree_q[] = { "path", NULL };
static const char *const tree_get_q[] = { "path", "exclude", NULL };
static const char *const cmd_q[] = { "stdout_offset", "stderr_offset", "wait_seconds", NULL };

#define SBX "/v1/sandboxes/{sandbox_id}"

/* Method, path, operation, tool, query parameters, flags, success status.
 * A new tool route is usually a line with rest_op_tool. */
const struct rest_op rest_ops[] = {
	{ "GET", "/v1/info", rest_op_tool, "get_service_info", NULL, REST_ANON, 200 },
	{ "GET", "/v1/openapi.json", op_openapi, NULL, NULL, REST_ANON, 200 },
	{ "GET", "/v1/usage", rest_op_tool, "get_usage", usage_q, 0, 200 },
	{ "POST", "/v1/sandboxes", op_create, "create_sandbox", NULL, REST_JSON_BODY, 201 },
	{ "GET", "/v1/sandboxes", rest_op_tool, "list_sandboxes", list_q, 0, 200 },
	{ "GET", SBX, rest_op_tool, "get_sandbox", NULL, 0, 200 },
	{ "DELETE", SBX, rest_op_tool, "destroy_sandbox", NULL, 0, 200 },
	{ "POST", SBX "/extend", rest_op_tool, "extend_sandbox", NULL, REST_JSON_BODY, 200 },
	{ "POST", SBX "/pause", rest_op_tool, "pause_sandbox", NULL, 0, 200 },
	{ "POST", SBX "/resume", rest_op_tool, "resume_sandbox", NULL, 0, 200 },
	{ "POST", SBX "/snapshots", rest_op_tool, "snapshot_sandbox", NULL, REST_JSON_BODY, 201 },
	{ "GET", "/v1/snapshots", rest_op_tool, "list_snapshots", NULL, 0, 200 },
	{ "DELETE", "/v1/snapshots/{snapshot_id}", rest_op_tool, "delete_snapshot", NULL, 0, 200 },
	{ "POST", SBX "/commands", op_run, "run_command", NULL, REST_JSON_BODY, 200 },
	{ "GET", SBX "/commands/{command_id}", op_command, "get_command", cmd_q, 0, 200 },
	{ "POST", SBX "/commands/{command_id}/kill", rest_op_tool, "kill_command", NULL,
	    REST_JSON_BODY, 200 },
	{ "GET", SBX "/files", rest_op_tool, "list_files", files_q, 0, 200 },
	{ "GET", SBX "/files/content", op_download, "read_file", read_q, 0, 200 },
	{ "PUT", SBX "/files/content", op_upload, "write_file", write_q, REST_RAW_BODY, 200 },
	{ "GET", SBX "/tree", op_tree_get, NULL, tree_get_q, 0, 200 },
	{ "PUT", SBX "/tree", op_tree_put, NULL, tree_q, REST_RAW_BODY, 200 },
	{ "POST", SBX "/ports", rest_op_tool, "expose_port", NULL, REST_JSON_BODY, 201 },
	{ "GET", SBX "/ports", op_list_ports, NULL, NULL, 0, 200 },
};

const size_t rest_ops_count = sizeof(rest_ops) / sizeof(rest_ops[0]);
