/* br_api.c - REST requests for tool calls. */
#include "bridge/br_api.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int
br_call_cancelled(const struct br_call *c)
{
	return c->cancel != NULL && atomic_load(c->cancel);
}

void
br_call_progress(struct br_call *c, double done, double total, const char *message)
{
	if (c->progress)
		c->progress(c->sink, done, total, message);
}

struct br_url *
br_api_url(const struct br_call *c, ...)
{
	struct br_url *u = br_url_new(br_http_base(c->http));
	const char *seg;
	va_list ap;

	va_start(ap, c);
	while ((seg = va_arg(ap, const char *)) != NULL)
		br_url_seg(u, seg);
	va_end(ap);
	return u;
}

static json_t *
parse_object(const struct br_resp *r, struct err *e)
{
	json_error_t jerr;
	json_t *j = json_loadb(r->body, r->len, 0, &jerr);

	if (!json_is_object(j)) {
		json_decref(j);
		err_set(e, ERR_INTERNAL,
		    "the aas API answered HTTP %ld with something other "
		    "than a JSON object",
		    r->status);
		return NULL;
	}
	return j;
}

static json_t *
send_json(struct br_call *c, const struct br_req *q, struct err *e)
{
	struct br_resp r;
	json_t *out = NULL;

	if (br_http_do(c->http, q, &r, e) == 0)
		out = parse_object(&r, e);
	br_resp_clear(&r);
	return out;
}

json_t *
br_api_json(struct br_call *c, const char *method, const struct br_url *u, const json_t *body,
    long timeout_s, struct err *e)
{
	struct br_req q = { .method = method,
		.content_type = "application/json",
		.timeout_s = timeout_s,
		.cancel = c->cancel };
	char *text = NULL;
	json_t *out;

	if ((q.url = br_url_str(u, e)) == NULL)
		return NULL;
	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT);
		if (text == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			return NULL;
		}
		q.body = text;
		q.body_len = strlen(text);
	}
	out = send_json(c, &q, e);
	free(text);
	return out;
}

json_t *
br_api_put_bytes(struct br_call *c, const struct br_url *u, const void *data, size_t len,
    long timeout_s, struct err *e)
{
	struct br_req q = { .method = "PUT",
		.body = data ? data : "",
		.body_len = len,
		.content_type = "application/octet-stream",
		.timeout_s = timeout_s,
		.cancel = c->cancel };

	if ((q.url = br_url_str(u, e)) == NULL)
		return NULL;
	return send_json(c, &q, e);
}

json_t *
br_api_put_stream(struct br_call *c, const struct br_url *u, const char *content_type,
    ssize_t (*read)(void *ctx, void *buf, size_t n, struct err *e), void *ctx, long timeout_s,
    struct err *e)
{
	struct br_req q = { .method = "PUT",
		.content_type = content_type,
		.timeout_s = timeout_s,
		.cancel = c->cancel,
		.read = read,
		.read_ctx = ctx };

	if ((q.url = br_url_str(u, e)) == NULL)
		return NULL;
	return send_json(c, &q, e);
}

int
br_api_get_bytes(struct br_call *c, const struct br_url *u, long timeout_s, struct br_resp *r,
    struct err *e)
{
	struct br_req q = { .method = "GET", .timeout_s = timeout_s, .cancel = c->cancel };

	memset(r, 0, sizeof(*r));
	if ((q.url = br_url_str(u, e)) == NULL)
		return -1;
	return br_http_do(c->http, &q, r, e);
}

int
br_api_get_stream(struct br_call *c, const struct br_url *u, long timeout_s,
    int (*write)(void *ctx, const void *p, size_t n, struct err *e), void *ctx, struct err *e)
{
	struct br_req q = { .method = "GET",
		.timeout_s = timeout_s,
		.cancel = c->cancel,
		.write = write,
		.write_ctx = ctx };
	struct br_resp r;
	int rc;

	if ((q.url = br_url_str(u, e)) == NULL)
		return -1;
	rc = br_http_do(c->http, &q, &r, e);
	br_resp_clear(&r);
	return rc;
}
