/* rest_ops.c - the REST operations: each translates between HTTP and a
 * tool (tools_invoke) or the sandbox service, and nothing else. The table
 * at the end is the API; server/openapi.json describes the same routes. */
#include "server/rest_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/agent.h"
#include "vmm/guest.h"
#include "service/sandbox.h"

/* A download without length is read in pages of this size (read_file's
 * default), well below its 4 MiB maximum: each page is one guest agent
 * answer, which must arrive within the agent's 10 s timeout even on a slow
 * (TCG, loaded) guest. */
#define REST_READ_PAGE (1u << 20)
#define REST_READ_MAX (4u << 20)           /* read_file's largest length */
#define REST_MAX_WHOLE_FILE GUEST_MAX_FILE /* a download without length */

json_t *
rest_op_tool(struct rest_call *c, json_t *args, struct err *e)
{
	return tools_invoke(&c->cx, c->op->tool, args, e);
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

	if (id) {
		snprintf(loc, sizeof(loc), "/v1/sandboxes/%s", id);
		http_add_header(c->req, "Location", loc);
	}
	return out;
}

/* A background command is accepted (202), with where to follow it. */
static json_t *
op_run(struct rest_call *c, json_t *args, struct err *e)
{
	json_t *out = rest_op_tool(c, args, e);
	const char *cmd = json_string_value(json_object_get(out, "command_id"));
	const char *id = json_string_value(json_object_get(args, "sandbox_id"));
	char loc[96];

	if (cmd && json_is_true(json_object_get(out, "background"))) {
		c->status = 202;
		snprintf(loc, sizeof(loc), "/v1/sandboxes/%s/commands/%s", id, cmd);
		http_add_header(c->req, "Location", loc);
	}
	return out;
}

static json_t *
op_command_status(struct rest_call *c, json_t *args, struct err *e)
{
	struct sbx *s = rest_sbx(c, e);

	return s ? sbx_command_status(s, c->cx.account_id, args, e) : NULL;
}

static json_t *
op_list_ports(struct rest_call *c, json_t *args, struct err *e)
{
	struct sbx *s = rest_sbx(c, e);

	return s ? sbx_list_ports(s, c->cx.account_id, args, e) : NULL;
}

/* The request body, as write_file's content_base64. */
static json_t *
op_upload(struct rest_call *c, json_t *args, struct err *e)
{
	size_t len;
	const char *body = http_body(c->req, &len);
	char *b64 = agent_b64_encode((const unsigned char *)body, len);
	json_t *v = b64 ? json_string(b64) : NULL;

	free(b64);
	if (v == NULL || json_object_set_new(args, "content_base64", v) < 0) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	return rest_op_tool(c, args, e);
}

/* Appends one read_file page (base64) to buf; sets *total and *eof. */
static int
read_page(struct rest_call *c, json_t *args, char **buf, size_t *len,
    long long *total, int *eof, struct err *e)
{
	json_t *res = tools_invoke(&c->cx, "read_file", args, e);
	const char *text = json_string_value(json_object_get(res, "content"));
	unsigned char *bytes;
	size_t n;
	char *nb;

	if (res == NULL)
		return -1;
	*total = json_integer_value(json_object_get(res, "total_size"));
	*eof = json_is_true(json_object_get(res, "eof"));
	bytes = text ? agent_b64_decode(text, &n) : NULL;
	json_decref(res);
	if (bytes == NULL) {
		err_set(e, ERR_INTERNAL, "read_file returned bad base64");
		return -1;
	}
	nb = n ? realloc(*buf, *len + n) : *buf;
	if (n && nb == NULL) {
		free(bytes);
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (n)
		memcpy(nb + *len, bytes, n);
	*buf = nb;
	*len += n;
	free(bytes);
	return n == 0 ? 1 : 0;
}

/* Raw bytes of a file: one read_file page when length is given, else the
 * rest of the file from offset (up to REST_MAX_WHOLE_FILE). */
static json_t *
op_download(struct rest_call *c, json_t *args, struct err *e)
{
	int whole = json_object_get(args, "length") == NULL;
	long long offset = json_integer_value(json_object_get(args, "offset"));
	long long total = 0;
	char *buf = NULL, hdr[32];
	size_t len = 0;
	int eof = 0, rc;

	json_object_set_new(args, "encoding", json_string("base64"));
	do {
		if (whole) {
			json_object_set_new(args, "offset", json_integer(offset + (long long)len));
			json_object_set_new(args, "length", json_integer(REST_READ_PAGE));
		}
		rc = read_page(c, args, &buf, &len, &total, &eof, e);
		if (rc < 0)
			goto fail;
		if (whole && total - offset > (long long)REST_MAX_WHOLE_FILE) {
			err_set_field(e, "length", "length: the file has %lld bytes after offset %lld,"
			    " more than %u in one response; page with offset and length (at most %u)",
			    total - offset, offset, REST_MAX_WHOLE_FILE, REST_READ_MAX);
			goto fail;
		}
	} while (whole && !eof && rc == 0);
	snprintf(hdr, sizeof(hdr), "%lld", total);
	http_add_header(c->req, "X-AAS-File-Size", hdr);
	snprintf(hdr, sizeof(hdr), "%lld", offset);
	http_add_header(c->req, "X-AAS-Content-Offset", hdr);
	http_reply_raw(c->req, 200, "application/octet-stream", buf ? buf : "", len);
	free(buf);
	c->replied = 1;
	return NULL;
fail:
	free(buf);
	return NULL;
}

static const char *const usage_q[] = { "limit", "cursor", NULL };
static const char *const list_q[] = { "state", "limit", "cursor", NULL };
static const char *const files_q[] = { "path", "depth", "limit", NULL };
static const char *const read_q[] = { "path", "offset", "length", NULL };
static const char *const write_q[] = { "path", "mode", "make_parents", NULL };

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
	{ "POST", SBX "/commands", op_run, "run_command", NULL, REST_JSON_BODY, 200 },
	{ "GET", SBX "/commands/{command_id}", op_command_status, NULL, NULL, 0, 200 },
	{ "GET", SBX "/files", rest_op_tool, "list_files", files_q, 0, 200 },
	{ "GET", SBX "/files/content", op_download, "read_file", read_q, 0, 200 },
	{ "PUT", SBX "/files/content", op_upload, "write_file", write_q, REST_RAW_BODY, 200 },
	{ "POST", SBX "/ports", rest_op_tool, "expose_port", NULL, REST_JSON_BODY, 201 },
	{ "GET", SBX "/ports", op_list_ports, NULL, NULL, 0, 200 },
};

const size_t rest_ops_count = sizeof(rest_ops) / sizeof(rest_ops[0]);
