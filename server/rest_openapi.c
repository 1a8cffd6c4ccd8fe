/* rest_openapi.c - the served OpenAPI document: the hand-written
 * server/openapi.json plus the tool schemas, checked against the routes. */
#include "server/rest_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/embed.h"
#include "base/fmt.h"

#define REF_MAX_DEPTH 64

static const char *const http_methods[] = {
	"get",
	"put",
	"post",
	"delete",
	"patch",
	"head",
	"options",
	"trace",
};

/* inputSchema without the ids the REST API takes from the path. */
static json_t *
arguments_schema(const json_t *input)
{
	static const char *const in_path[] = { "sandbox_id", "command_id", "snapshot_id" };
	json_t *s = json_deep_copy(input);
	json_t *req = json_object_get(s, "required");
	size_t i;
	json_t *it;

	for (size_t k = 0; k < sizeof(in_path) / sizeof(in_path[0]); k++) {
		json_object_del(json_object_get(s, "properties"), in_path[k]);
		json_array_foreach(req, i, it) {
			if (strcmp(json_string_value(it), in_path[k]) == 0) {
				json_array_remove(req, i);
				break;
			}
		}
	}
	if (req && json_array_size(req) == 0)
		json_object_del(s, "required");
	return s;
}

static int
add_tool_schemas(json_t *schemas, struct err *e)
{
	for (size_t i = 0; i < tools_count(); i++) {
		const char *name = tools_name_at(i);
		char key_in[96], key_out[96];
		json_t *in = arguments_schema(tools_input_schema(name));
		json_t *out = json_deep_copy(tools_output_schema(name));

		if (fmt_buf(key_in, sizeof(key_in), "%s_arguments", name) < 0 ||
		    fmt_buf(key_out, sizeof(key_out), "%s_result", name) < 0) {
			json_decref(in);
			json_decref(out);
			err_set(e, ERR_INTERNAL, "rest: tool name %s too long for a schema name",
			    name);
			return -1;
		}
		if (in == NULL || json_object_set_new(schemas, key_in, in) < 0) {
			json_decref(out);
			goto oom;
		}
		if (out == NULL || json_object_set_new(schemas, key_out, out) < 0)
			goto oom;
	}
	return 0;
oom:
	err_set(e, ERR_INTERNAL, "out of memory");
	return -1;
}

/* Resolves a local JSON pointer ("#/a/b~1c"); NULL when it names nothing. */
static const json_t *
resolve_pointer(const json_t *doc, const char *ref)
{
	const json_t *node = doc;
	const char *p;

	if (strncmp(ref, "#/", 2) != 0)
		return NULL;
	p = ref + 2;
	while (node) {
		char tok[128];
		size_t n = strcspn(p, "/"), j = 0;

		for (size_t i = 0; i < n && j < sizeof(tok) - 1; i++) {
			if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
				tok[j++] = p[i + 1] == '0' ? '~' : '/';
				i++;
			} else {
				tok[j++] = p[i];
			}
		}
		tok[j] = '\0';
		if (json_is_array(node)) {
			char *end;
			long idx = strtol(tok, &end, 10);
			node = (*tok && *end == '\0' && idx >= 0) ?
			    json_array_get(node, (size_t)idx) :
			    NULL;
		} else {
			node = json_object_get(node, tok);
		}
		if (p[n] == '\0')
			return node;
		p += n + 1;
	}
	return NULL;
}

static int
check_refs(const json_t *doc, const json_t *node, int depth, struct err *e)
{
	const char *key;
	json_t *val;
	size_t i;

	if (depth > REF_MAX_DEPTH) {
		err_set(e, ERR_INTERNAL, "openapi.json: nested too deeply");
		return -1;
	}
	if (json_is_array(node)) {
		json_array_foreach(node, i, val)
			if (check_refs(doc, val, depth + 1, e) < 0)
				return -1;
		return 0;
	}
	json_object_foreach((json_t *)node, key, val) {
		if (strcmp(key, "$ref") == 0 &&
		    (!json_is_string(val) ||
			resolve_pointer(doc, json_string_value(val)) == NULL)) {
			err_set(e, ERR_INTERNAL, "openapi.json: $ref %s does not resolve",
			    json_is_string(val) ? json_string_value(val) : "(not a string)");
			return -1;
		}
		if (check_refs(doc, val, depth + 1, e) < 0)
			return -1;
	}
	return 0;
}

static int
is_method(const char *key)
{
	for (size_t i = 0; i < sizeof(http_methods) / sizeof(http_methods[0]); i++)
		if (strcmp(key, http_methods[i]) == 0)
			return 1;
	return 0;
}

static const struct rest_op *
find_op(const char *path, const char *method_lc)
{
	for (size_t i = 0; i < rest_ops_count; i++) {
		const char *m = rest_ops[i].method;
		size_t k = 0;

		if (strcmp(rest_ops[i].path, path) != 0)
			continue;
		while (m[k] && method_lc[k] && tolower((unsigned char)m[k]) == method_lc[k])
			k++;
		if (m[k] == '\0' && method_lc[k] == '\0')
			return &rest_ops[i];
	}
	return NULL;
}

/* The document's paths and methods are exactly the operation table's
 * (paths marked "x-aas-served-by" have routes of their own, such as the
 * terminal's WebSocket in server/pty.c). */
static int
check_paths(const json_t *doc, struct err *e)
{
	const json_t *paths = json_object_get(doc, "paths");
	const char *path, *method;
	json_t *item, *op;
	size_t n = 0;

	json_object_foreach((json_t *)paths, path, item) {
		if (json_object_get(item, "x-aas-served-by") != NULL)
			continue;
		json_object_foreach(item, method, op) {
			if (!is_method(method))
				continue;
			if (find_op(path, method) == NULL) {
				err_set(e, ERR_INTERNAL, "openapi.json: %s %s is not a route",
				    method, path);
				return -1;
			}
			n++;
		}
	}
	for (size_t i = 0; i < rest_ops_count; i++) {
		char lc[16];
		size_t k;

		for (k = 0; rest_ops[i].method[k] && k < sizeof(lc) - 1; k++)
			lc[k] = (char)tolower((unsigned char)rest_ops[i].method[k]);
		lc[k] = '\0';
		if (json_object_get(json_object_get(paths, rest_ops[i].path), lc) == NULL) {
			err_set(e, ERR_INTERNAL, "openapi.json: route %s %s is missing",
			    rest_ops[i].method, rest_ops[i].path);
			return -1;
		}
	}
	if (n != rest_ops_count) {
		err_set(e, ERR_INTERNAL, "openapi.json: %zu operations for %zu routes", n,
		    rest_ops_count);
		return -1;
	}
	return 0;
}

json_t *
rest_openapi_build(const char *public_url, struct err *e)
{
	json_error_t jerr;
	json_t *doc, *components, *schemas;

	if (embed_openapi_count != 1) {
		err_set(e, ERR_INTERNAL, "openapi.json missing");
		return NULL;
	}
	doc = json_loadb(embed_openapi[0].data, embed_openapi[0].len, JSON_REJECT_DUPLICATES,
	    &jerr);
	if (doc == NULL) {
		err_set(e, ERR_INTERNAL, "openapi.json: %s (line %d)", jerr.text, jerr.line);
		return NULL;
	}
	components = json_object_get(doc, "components");
	schemas = json_object_get(components, "schemas");
	if (!json_is_object(schemas)) {
		err_set(e, ERR_INTERNAL, "openapi.json: components.schemas missing");
		goto fail;
	}
	if (json_object_set_new(doc, "servers",
		json_pack("[{s:s, s:s}]", "url", public_url, "description", "this service")) < 0 ||
	    add_tool_schemas(schemas, e) < 0)
		goto fail;
	if (check_refs(doc, doc, 0, e) < 0 || check_paths(doc, e) < 0)
		goto fail;
	return doc;
fail:
	err_set(e, ERR_INTERNAL, "out of memory");
	json_decref(doc);
	return NULL;
}
