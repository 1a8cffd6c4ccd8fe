/* tool_args.c - what every tool implementation shares: typed readers of
 * validated arguments, the sandbox service of a call, progress, text. */
#include "service/tool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "sandbox/sandbox.h"

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

int
tool_arg_int32(const json_t *args, const char *name, int def, int min, int max, int *out,
    struct err *e)
{
	long long v;

	if (tool_arg_int(args, name, def, min, max, &v, e) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

/* A required string the schema already demanded. */
int
tool_arg_need(const json_t *args, const char *name, const char **out, struct err *e)
{
	if (tool_arg_str(args, name, out, e) < 0)
		return -1;
	if (*out == NULL) {
		err_set_field(e, name, "%s: required", name);
		return -1;
	}
	return 0;
}

struct sbx *
tool_sbx(struct call_ctx *cx, struct err *e)
{
	if (cx->app->sbx == NULL)
		err_set(e, ERR_UNAVAILABLE, "this server runs without a VM layer");
	return cx->app->sbx;
}

void
tool_progress(void *ctx, double progress, double total, const char *message)
{
	tool_call_progress(ctx, progress, total, message);
}

/* Bytes as JSON text: invalid UTF-8 becomes U+FFFD. */
json_t *
tool_text_of(const char *data, size_t len)
{
	size_t n;
	char *clean = utf8_sanitize(data ? data : "", data ? len : 0, &n, NULL);
	json_t *j = clean ? json_stringn(clean, n) : NULL;

	free(clean);
	return j ? j : json_string("");
}
