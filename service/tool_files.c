/* tool_files.c - write_file and read_file: JSON arguments (text or base64)
 * into typed requests, and the same requests filled with raw bytes for the
 * REST file routes. */
#include "service/tool_sandbox.h"

#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "base/fmt.h"
#include "base/metrics.h"
#include "sandbox/sandbox.h"
#include "service/tool_impl.h"
#include "vmm/guest.h"

#define READ_DEFAULT_LENGTH (1024 * 1024)
#define READ_MAX_LENGTH (4 * 1024 * 1024)

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

int
tool_write_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct write_args *a = req;
	const json_t *text = json_object_get(args, "content");
	const json_t *b64 = json_object_get(args, "content_base64");
	const char *mode = NULL;

	(void)cx;
	if (tool_arg_need(args, "sandbox_id", &a->rq.sandbox_id, e) < 0 ||
	    tool_arg_need(args, "path", &a->rq.path, e) < 0 ||
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

void
tool_write_release(void *req)
{
	free(((struct write_args *)req)->owned);
}

static json_t *
write_result(const char *id, const struct sbx_write_res *res, struct err *e)
{
	char mode[8];

	if (fmt_err(e, "file mode", mode, sizeof(mode), "%04o", res->mode) < 0)
		return NULL;
	return json_pack("{s:s, s:s, s:I, s:s}", "sandbox_id", id, "path", res->path,
	    "bytes_written", (json_int_t)res->bytes, "mode", mode);
}

json_t *
tool_write_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct write_args *a = req;
	struct sbx *s = tool_sbx(cx, e);
	struct sbx_write_res res;

	if (!a->has_content) {
		err_set_field(e, "content", "content / content_base64: give exactly one of them");
		return NULL;
	}
	if (s == NULL || sbx_write_file(s, cx->account_id, &a->rq, &res, e) < 0)
		return NULL;
	return write_result(a->rq.sandbox_id, &res, e);
}

/* ---- read_file ---- */

struct read_args {
	struct sbx_read_req rq;
	int base64;
};

int
tool_read_parse(const struct call_ctx *cx, const json_t *args, void *req, struct err *e)
{
	struct read_args *a = req;
	const char *enc = NULL;
	long long len;

	(void)cx;
	if (tool_arg_need(args, "sandbox_id", &a->rq.sandbox_id, e) < 0 ||
	    tool_arg_need(args, "path", &a->rq.path, e) < 0 ||
	    tool_arg_int(args, "offset", 0, 0, (1LL << 62), &a->rq.offset, e) < 0 ||
	    tool_arg_int(args, "length", READ_DEFAULT_LENGTH, 1, READ_MAX_LENGTH, &len, e) < 0 ||
	    tool_arg_str(args, "encoding", &enc, e) < 0)
		return -1;
	a->rq.length = (size_t)len;
	a->base64 = enc && strcmp(enc, "base64") == 0;
	return 0;
}

json_t *
tool_read_run(struct call_ctx *cx, void *req, struct err *e)
{
	struct read_args *a = req;
	struct sbx *s = tool_sbx(cx, e);
	struct sbx_read_res res;
	json_t *content, *out = NULL;

	if (s == NULL || sbx_read_file(s, cx->account_id, &a->rq, &res, e) < 0)
		return NULL;
	if (a->base64) {
		char *b = b64_encode(res.data, res.len);
		content = b ? json_string(b) : NULL;
		free(b);
	} else {
		content = tool_text_of((const char *)res.data, res.len);
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

_Static_assert(sizeof(struct write_args) <= TOOL_MAX_REQ, "write request too large");
_Static_assert(sizeof(struct read_args) <= TOOL_MAX_REQ, "read request too large");

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
tool_write_file_stream(struct call_ctx *cx, const struct tool *t, const json_t *args,
    guest_read_fn read, void *ctx, uint64_t max_bytes, json_t **result, struct err *e)
{
	struct tool_call *c;
	struct write_args *a;
	struct sbx_write_res res;
	double t0 = metrics_now();
	struct sbx *s;

	*result = NULL;
	if ((t = file_tool(t, "write_file", e)) == NULL ||
	    (c = tools_prepare(cx, t, args, e)) == NULL)
		return -1;
	a = tool_call_req(c);
	if (a->has_content)
		err_set_field(e, "content", "content: the body is the content");
	else if ((s = tool_sbx(cx, e)) != NULL &&
	    sbx_write_stream(s, cx->account_id, &a->rq, read, ctx, max_bytes, &res, e) == 0)
		*result = write_result(a->rq.sandbox_id, &res, e);
	tools_count_call(cx, "write_file", t0, *result ? ERR_NONE : e->kind);
	tool_call_free(c);
	return *result ? 0 : -1;
}

int
tool_read_file_stream(struct call_ctx *cx, const struct tool *t, const json_t *args,
    long long max_bytes, sbx_read_start_fn start, guest_write_fn write, void *ctx, struct err *e)
{
	struct tool_call *c;
	struct read_args *a;
	double t0 = metrics_now();
	struct sbx *s;
	int rc = -1;

	if ((t = file_tool(t, "read_file", e)) == NULL ||
	    (c = tools_prepare(cx, t, args, e)) == NULL)
		return -1;
	a = tool_call_req(c);
	if (json_object_get(args, "length") == NULL)
		a->rq.length = 0;
	if ((s = tool_sbx(cx, e)) != NULL)
		rc = sbx_read_stream(s, cx->account_id, &a->rq, max_bytes, start, write, ctx, e);
	tools_count_call(cx, "read_file", t0, rc == 0 ? ERR_NONE : e->kind);
	tool_call_free(c);
	return rc;
}
