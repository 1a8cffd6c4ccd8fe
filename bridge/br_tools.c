/* br_tools.c - each forwarded tool is one REST route (docs/rest.md):
 * arguments minus sandbox_id become the JSON body or the query, the
 * answer is the tool's structuredContent. read_file and write_file use
 * the raw-bytes routes; the sync tools run here. */
#include "bridge/br_tools.h"

#include <stdlib.h>
#include <string.h>

#include "bridge/br_catalog.h"
#include "bridge/br_path.h"
#include "bridge/br_remote.h"
#include "bridge/br_sync.h"
#include "base/b64.h"
#include "base/fmt.h"
#include "base/jsonschema.h"
#include "base/toolres.h"
#include "base/utf8.h"

#define HOST_GRACE_S 10 /* the server answers this long after a command's timeout */
#define MARGIN_S 30

enum timeout_class { T_NORMAL, T_CREATE, T_COMMAND, T_WAIT };

typedef json_t *(*tool_fn)(struct br_call *c, const json_t *args, struct err *e);

struct route {
	const char *name;
	const char *method;
	const char *collection; /* first path segment under /v1 */
	int with_id;            /* then the sandbox_id */
	const char *sub;        /* then this segment, or NULL */
	const char *id2;        /* then this argument's value, or NULL */
	const char *sub2;       /* then this segment, or NULL */
	const char *query[4];   /* arguments sent as query parameters */
	int body;               /* arguments (minus sandbox_id) as JSON body */
	enum timeout_class tc;
	tool_fn special; /* handled here instead */
};

static json_t *read_file(struct br_call *c, const json_t *args, struct err *e);
static json_t *write_file(struct br_call *c, const json_t *args, struct err *e);

static const struct route routes[] = {
	{ "create_sandbox", "POST", "sandboxes", 0, NULL, NULL, NULL, { NULL }, 1, T_CREATE, NULL },
	{ "run_command", "POST", "sandboxes", 1, "commands", NULL, NULL, { NULL }, 1, T_COMMAND,
	    NULL },
	{ "write_file", NULL, NULL, 0, NULL, NULL, NULL, { NULL }, 0, T_NORMAL, write_file },
	{ "read_file", NULL, NULL, 0, NULL, NULL, NULL, { NULL }, 0, T_NORMAL, read_file },
	{ "list_files", "GET", "sandboxes", 1, "files", NULL, NULL,
	    { "path", "depth", "limit", NULL }, 0, T_NORMAL, NULL },
	{ "expose_port", "POST", "sandboxes", 1, "ports", NULL, NULL, { NULL }, 1, T_NORMAL, NULL },
	{ "get_sandbox", "GET", "sandboxes", 1, NULL, NULL, NULL, { NULL }, 0, T_NORMAL, NULL },
	{ "list_sandboxes", "GET", "sandboxes", 0, NULL, NULL, NULL,
	    { "state", "limit", "cursor", NULL }, 0, T_NORMAL, NULL },
	{ "extend_sandbox", "POST", "sandboxes", 1, "extend", NULL, NULL, { NULL }, 1, T_NORMAL,
	    NULL },
	{ "destroy_sandbox", "DELETE", "sandboxes", 1, NULL, NULL, NULL, { NULL }, 0, T_CREATE,
	    NULL },
	{ "pause_sandbox", "POST", "sandboxes", 1, "pause", NULL, NULL, { NULL }, 0, T_CREATE,
	    NULL },
	{ "resume_sandbox", "POST", "sandboxes", 1, "resume", NULL, NULL, { NULL }, 0, T_CREATE,
	    NULL },
	{ "snapshot_sandbox", "POST", "sandboxes", 1, "snapshots", NULL, NULL, { NULL }, 1,
	    T_CREATE, NULL },
	{ "list_snapshots", "GET", "snapshots", 0, NULL, NULL, NULL, { NULL }, 0, T_NORMAL, NULL },
	{ "delete_snapshot", "DELETE", "snapshots", 0, NULL, "snapshot_id", NULL, { NULL }, 0,
	    T_NORMAL, NULL },
	{ "get_usage", "GET", "usage", 0, NULL, NULL, NULL, { "limit", "cursor", NULL }, 0,
	    T_NORMAL, NULL },
	{ "get_service_info", "GET", "info", 0, NULL, NULL, NULL, { NULL }, 0, T_NORMAL, NULL },
	{ "get_command", "GET", "sandboxes", 1, "commands", "command_id", NULL,
	    { "stdout_offset", "stderr_offset", "wait_seconds", NULL }, 0, T_WAIT, NULL },
	{ "kill_command", "POST", "sandboxes", 1, "commands", "command_id", "kill", { NULL }, 1,
	    T_NORMAL, NULL },
	{ "sync_to_sandbox", NULL, NULL, 0, NULL, NULL, NULL, { NULL }, 0, T_NORMAL, br_sync_to },
	{ "sync_from_sandbox", NULL, NULL, 0, NULL, NULL, NULL, { NULL }, 0, T_NORMAL,
	    br_sync_from },
};

#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))
#define N_FORWARDED 19 /* the server's tools come first */

int
br_tools_init(struct err *e)
{
	const char *names[N_FORWARDED];

	for (size_t i = 0; i < N_FORWARDED; i++)
		names[i] = routes[i].name;
	if (br_catalog_init(names, N_FORWARDED, e) < 0)
		return -1;
	if (br_catalog_count() != N_ROUTES) {
		err_set(e, ERR_INTERNAL, "bridge catalogue has %zu tools, expected %zu",
		    br_catalog_count(), N_ROUTES);
		br_catalog_cleanup();
		return -1;
	}
	return 0;
}

void
br_tools_cleanup(void)
{
	br_catalog_cleanup();
}

static const struct route *
find(const char *name)
{
	for (size_t i = 0; i < N_ROUTES; i++)
		if (strcmp(routes[i].name, name) == 0)
			return &routes[i];
	return NULL;
}

int
br_tools_exists(const char *name)
{
	return find(name) != NULL;
}

static const char *
sandbox_id(const json_t *args)
{
	return json_string_value(json_object_get(args, "sandbox_id"));
}

static long
timeout_for(const struct br_call *c, const struct route *r, const json_t *args)
{
	const json_t *t = json_object_get(args, "timeout_seconds");

	switch (r->tc) {
	case T_CREATE:
		return c->cfg->create_timeout_s;
	case T_COMMAND:
		if (json_is_true(json_object_get(args, "background")))
			return c->cfg->request_timeout_s;
		return (t ? (long)json_integer_value(t) : 60) + HOST_GRACE_S + MARGIN_S;
	case T_WAIT: {
		const json_t *w = json_object_get(args, "wait_seconds");

		return c->cfg->request_timeout_s + (w ? (long)json_integer_value(w) : 0);
	}
	default:
		return c->cfg->request_timeout_s;
	}
}

static json_t *
forward(struct br_call *c, const struct route *r, const json_t *args, struct err *e)
{
	struct br_url *u = br_api_url(c, r->collection, NULL);
	json_t *body = NULL, *out;
	struct err fe;

	if (r->with_id)
		br_url_seg(u, sandbox_id(args));
	if (r->sub)
		br_url_seg(u, r->sub);
	if (r->id2) {
		const char *id2 = json_string_value(json_object_get(args, r->id2));

		br_url_seg(u, id2 ? id2 : "");
	}
	if (r->sub2)
		br_url_seg(u, r->sub2);
	for (size_t i = 0; r->query[i]; i++)
		br_url_query_json(u, r->query[i], json_object_get(args, r->query[i]));
	if (r->body) {
		body = json_copy((json_t *)args);
		if (body == NULL) {
			br_url_free(u);
			err_set(e, ERR_INTERNAL, "out of memory");
			return NULL;
		}
		json_object_del(body, "sandbox_id");
		if (r->id2)
			json_object_del(body, r->id2);
	}
	err_clear(&fe);
	out = br_api_json(c, r->method, u, body, timeout_for(c, r, args), &fe);
	json_decref(body);
	br_url_free(u);
	/* A server without the route is older than the tool, not missing
	 * the sandbox. */
	if (out == NULL && fe.kind == ERR_NOT_FOUND && strcmp(fe.msg, "no such endpoint") == 0)
		err_set(e, ERR_UNAVAILABLE,
		    "%s is not available on this server yet (its REST API "
		    "has no route for it)",
		    r->name);
	else if (out == NULL)
		*e = fe;
	return out;
}

/* Relative sandbox paths are under the home directory, as the server
 * reports them; -1 with e set when the path does not fit in out. */
static int
abs_path(const char *p, char *out, size_t n, struct err *e)
{
	if (p[0] == '/')
		return fmt_err(e, "path", out, n, "%s", p);
	return fmt_err(e, "path", out, n, "%s/%s", BR_SANDBOX_HOME, p);
}

static json_t *
read_file(struct br_call *c, const json_t *args, struct err *e)
{
	const char *enc = json_string_value(json_object_get(args, "encoding"));
	const json_t *off_v = json_object_get(args, "offset");
	const json_t *len_v = json_object_get(args, "length");
	long long offset = off_v ? (long long)json_integer_value(off_v) : 0;
	size_t length = len_v ? (size_t)json_integer_value(len_v) : 1024 * 1024;
	int base64 = enc && strcmp(enc, "base64") == 0;
	char path[4200];
	struct br_resp r;
	json_t *content = NULL, *out = NULL;
	long long total;

	if (abs_path(json_string_value(json_object_get(args, "path")), path, sizeof(path), e) < 0 ||
	    br_remote_get(c, sandbox_id(args), path, offset, length, &r, e) < 0)
		return NULL;
	if (r.len > length) {
		err_set(e, ERR_INTERNAL, "the aas API sent more bytes than asked for");
		goto out;
	}
	if (base64) {
		char *b = b64_encode(r.body, r.len);
		content = b ? json_string(b) : NULL;
		free(b);
	} else {
		size_t n;
		char *clean = utf8_sanitize(r.body, r.len, &n, NULL);
		content = clean ? json_stringn(clean, n) : NULL;
		free(clean);
	}
	if (content == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	/* Without the size header, a short page is the end. */
	total = r.file_size >= 0 ? r.file_size : offset + (long long)r.len;
	out = json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:s, s:o}", "sandbox_id", sandbox_id(args),
	    "path", path, "offset", (json_int_t)offset, "length", (json_int_t)r.len, "total_size",
	    (json_int_t)total, "eof",
	    r.file_size >= 0 ? offset + (long long)r.len >= total : r.len < length, "encoding",
	    base64 ? "base64" : "text", "content", content);
out:
	br_resp_clear(&r);
	return out;
}

/* content_base64 decoded (malloc'd), at most BR_REMOTE_MAX_PUT bytes. */
static unsigned char *
decode_content(const json_t *v, size_t *len, struct err *e)
{
	const char *text = json_string_value(v);
	size_t tlen = json_string_length(v), cap = B64_DECODED_MAX(tlen);
	unsigned char *data;
	struct err be;

	if (cap > BR_REMOTE_MAX_PUT)
		cap = BR_REMOTE_MAX_PUT;
	data = malloc(cap + 1);
	if (data == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	err_clear(&be);
	if (b64_decode(text, tlen, data, cap, len, &be) < 0) {
		if (be.kind == ERR_LIMIT)
			err_set_at(e, ERR_INVALID, "content_base64",
			    "content_base64: at most %u bytes per write", BR_REMOTE_MAX_PUT);
		else
			err_set_field(e, "content_base64", "content_base64: %s", be.msg);
		free(data);
		return NULL;
	}
	return data;
}

static json_t *
write_file(struct br_call *c, const json_t *args, struct err *e)
{
	const json_t *text = json_object_get(args, "content");
	const json_t *b64 = json_object_get(args, "content_base64");
	const json_t *mode = json_object_get(args, "mode");
	const json_t *mp = json_object_get(args, "make_parents");
	unsigned char *data = NULL;
	const void *bytes;
	size_t len;
	struct br_url *u;
	json_t *out;

	if ((text == NULL) == (b64 == NULL)) {
		err_set_field(e, "content", "content / content_base64: give exactly one of them");
		return NULL;
	}
	if (b64) {
		data = decode_content(b64, &len, e);
		if (data == NULL)
			return NULL;
		bytes = data;
	} else {
		bytes = json_string_value(text);
		len = json_string_length(text);
	}
	if (len > BR_REMOTE_MAX_PUT) {
		err_set_at(e, ERR_INVALID, b64 ? "content_base64" : "content",
		    "%s: at most %u bytes per write", b64 ? "content_base64" : "content",
		    BR_REMOTE_MAX_PUT);
		free(data);
		return NULL;
	}
	u = br_api_url(c, "sandboxes", sandbox_id(args), "files", "content", NULL);
	br_url_query_json(u, "path", json_object_get(args, "path"));
	br_url_query_json(u, "mode", mode);
	br_url_query_json(u, "make_parents", mp);
	out = br_api_put_bytes(c, u, bytes, len, c->cfg->request_timeout_s, e);
	br_url_free(u);
	free(data);
	return out;
}

json_t *
br_tools_call(struct br_call *c, const char *name, const json_t *args)
{
	const struct route *r = find(name);
	json_t *empty = NULL, *obj;
	struct err e;

	if (r == NULL)
		return NULL;
	err_clear(&e);
	if (args == NULL)
		args = empty = json_object();
	if (jsv_validate(br_catalog_input_schema(name), args, "", &e) < 0)
		obj = NULL;
	else if (r->special)
		obj = r->special(c, args, &e);
	else
		obj = forward(c, r, args, &e);
	json_decref(empty);
	if (obj == NULL) {
		if (e.kind == ERR_NONE)
			err_set(&e, ERR_INTERNAL, "tool failed");
		return toolres_error(&e);
	}
	return toolres_structured(obj);
}
