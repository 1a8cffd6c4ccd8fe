/* test_rest_openapi.c - the served OpenAPI document against the route
 * table and the tool catalogue (server/rest_openapi.c): request bodies and
 * query parameters are the tools' own schemas, every route is described
 * and nothing else is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/rest_int.h"

static json_t *doc;

/* Follows a "#/a/b" reference (no escapes are used in the document). */
static const json_t *
deref(const json_t *node)
{
	const char *ref = json_string_value(json_object_get(node, "$ref"));
	char buf[256], *tok, *save = NULL;
	const json_t *cur = doc;

	if (ref == NULL)
		return node;
	assert_true(strncmp(ref, "#/", 2) == 0);
	snprintf(buf, sizeof(buf), "%s", ref + 2);
	for (tok = strtok_r(buf, "/", &save); tok && cur; tok = strtok_r(NULL, "/", &save))
		cur = json_object_get(cur, tok);
	if (cur == NULL)
		fail_msg("%s does not resolve", ref);
	return cur;
}

static const json_t *
operation(const struct rest_op *op)
{
	char m[16];
	size_t k;

	for (k = 0; op->method[k] && k < sizeof(m) - 1; k++)
		m[k] = (char)(op->method[k] - 'A' + 'a');
	m[k] = '\0';
	return json_object_get(json_object_get(json_object_get(doc, "paths"), op->path), m);
}

/* What the body schema must be: inputSchema without sandbox_id. */
static json_t *
expected_body(const struct rest_op *op)
{
	json_t *s = json_deep_copy(tools_input_schema(op->tool));
	json_t *req = json_object_get(s, "required"), *keep = json_array();
	size_t i;
	json_t *it;

	/* The path's "{name}" segments are not in the body. */
	for (const char *p = strchr(op->path, '{'); p; p = strchr(p + 1, '{')) {
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)strcspn(p + 1, "}"), p + 1);
		json_object_del(json_object_get(s, "properties"), name);
	}
	json_array_foreach(req, i, it)
		if (json_object_get(json_object_get(s, "properties"), json_string_value(it)))
			json_array_append(keep, it);
	if (json_array_size(keep) > 0)
		json_object_set(s, "required", keep);
	else
		json_object_del(s, "required");
	json_decref(keep);
	return s;
}

static void
test_builds(void **state)
{
	(void)state;
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(doc, "servers"), 0), "url")),
	    "http://aas.test");
}

static void
test_every_route_described(void **state)
{
	size_t n = 0;
	const char *path, *method;
	json_t *item, *op;

	(void)state;
	for (size_t i = 0; i < rest_ops_count; i++)
		if (operation(&rest_ops[i]) == NULL)
			fail_msg("%s %s not in the document", rest_ops[i].method, rest_ops[i].path);
	size_t own = 0;
	json_object_foreach(json_object_get(doc, "paths"), path, item) {
		/* Routes of their own (the terminal's): not in the table. */
		if (json_object_get(item, "x-aas-served-by") != NULL) {
			own++;
			continue;
		}
		json_object_foreach(item, method, op)
			if (strcmp(method, "parameters") != 0)
				n++;
	}
	assert_int_equal(n, rest_ops_count);
	assert_int_equal(own, 2); /* GET .../pty, POST .../pty/ticket */
}

static void
test_bodies_are_tool_arguments(void **state)
{
	(void)state;
	for (size_t i = 0; i < rest_ops_count; i++) {
		const struct rest_op *op = &rest_ops[i];
		const json_t *rb = json_object_get(operation(op), "requestBody");

		if (!(op->flags & REST_JSON_BODY)) {
			if (!(op->flags & REST_RAW_BODY) && rb != NULL)
				fail_msg("%s %s: a body that is not read", op->method, op->path);
			continue;
		}
		const json_t *schema = deref(json_object_get(
		    json_object_get(json_object_get(rb, "content"), "application/json"), "schema"));
		json_t *want = expected_body(op);
		if (!json_equal(schema, want))
			fail_msg("%s %s: body schema is not %s's arguments", op->method, op->path,
			    op->tool);
		json_decref(want);
	}
}

/* run_command's route documents its event stream next to the JSON. */
static void
test_run_documents_event_stream(void **state)
{
	const json_t *ok = NULL, *content;

	(void)state;
	for (size_t i = 0; i < rest_ops_count; i++)
		if (rest_ops[i].tool && strcmp(rest_ops[i].tool, "run_command") == 0)
			ok = json_object_get(json_object_get(operation(&rest_ops[i]), "responses"),
			    "200");
	content = json_object_get(ok, "content");
	assert_non_null(content);
	assert_non_null(json_object_get(content, "application/json"));
	assert_non_null(json_object_get(content, "text/event-stream"));
}

static int
in_list(const char *const *list, const char *name)
{
	for (; list && *list; list++)
		if (strcmp(*list, name) == 0)
			return 1;
	return 0;
}

static int
is_required(const char *tool, const char *name)
{
	size_t i;
	json_t *it;

	json_array_foreach(json_object_get(tools_input_schema(tool), "required"), i, it)
		if (strcmp(json_string_value(it), name) == 0)
			return 1;
	return 0;
}

static void
test_query_parameters_are_tool_properties(void **state)
{
	(void)state;
	for (size_t i = 0; i < rest_ops_count; i++) {
		const struct rest_op *op = &rest_ops[i];
		const json_t *params = json_object_get(operation(op), "parameters");
		size_t n = 0, j;
		json_t *p;

		json_array_foreach(params, j, p) {
			const json_t *pp = deref(p);
			const char *name = json_string_value(json_object_get(pp, "name"));

			if (strcmp(json_string_value(json_object_get(pp, "in")), "query") != 0)
				continue;
			n++;
			if (!in_list(op->query, name))
				fail_msg("%s %s: query %s is not accepted", op->method, op->path,
				    name);
			if (op->tool == NULL) {
				/* Its own parameter (a tree's path): typed as a string. */
				assert_string_equal(json_string_value(json_object_get(
							deref(json_object_get(pp, "schema")),
							"type")),
				    "string");
				continue;
			}
			const json_t *want = json_object_get(
			    json_object_get(tools_input_schema(op->tool), "properties"), name);
			if (!json_equal(deref(json_object_get(pp, "schema")), want))
				fail_msg("%s %s: query %s differs from the tool's", op->method,
				    op->path, name);
			assert_int_equal(json_is_true(json_object_get(pp, "required")),
			    is_required(op->tool, name));
		}
		for (const char *const *q = op->query; q && *q; q++)
			n--;
		if (n != 0)
			fail_msg("%s %s: query parameters differ", op->method, op->path);
	}
}

static void
test_path_parameters(void **state)
{
	(void)state;
	for (size_t i = 0; i < rest_ops_count; i++) {
		const struct rest_op *op = &rest_ops[i];
		const json_t *item = json_object_get(json_object_get(doc, "paths"), op->path);

		for (const char *b = strchr(op->path, '{'); b; b = strchr(b + 1, '{')) {
			size_t len = strcspn(b + 1, "}"), j;
			json_t *p;
			int found = 0;

			json_array_foreach(json_object_get(item, "parameters"), j, p) {
				const json_t *pp = deref(p);
				const char *name = json_string_value(json_object_get(pp, "name"));
				if (strlen(name) == len && strncmp(name, b + 1, len) == 0 &&
				    strcmp(json_string_value(json_object_get(pp, "in")), "path") ==
					0)
					found = 1;
			}
			if (!found)
				fail_msg("%s: path parameter %.*s undescribed", op->path, (int)len,
				    b + 1);
		}
	}
}

static void
test_results_are_tool_outputs(void **state)
{
	(void)state;
	for (size_t i = 0; i < tools_count(); i++) {
		char key[96];
		snprintf(key, sizeof(key), "%s_result", tools_name_at(i));
		assert_true(json_equal(json_object_get(json_object_get(json_object_get(doc,
									   "components"),
							   "schemas"),
					   key),
		    tools_output_schema(tools_name_at(i))));
	}
}

static int
setup(void **state)
{
	struct err e;

	(void)state;
	err_clear(&e);
	if (tools_init(&e) != 0) {
		print_error("tools_init: %s\n", e.msg);
		return -1;
	}
	doc = rest_openapi_build("http://aas.test", &e);
	if (doc == NULL)
		print_error("rest_openapi_build: %s\n", e.msg);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	json_decref(doc);
	tools_cleanup();
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_builds),
		cmocka_unit_test(test_every_route_described),
		cmocka_unit_test(test_bodies_are_tool_arguments),
		cmocka_unit_test(test_run_documents_event_stream),
		cmocka_unit_test(test_query_parameters_are_tool_properties),
		cmocka_unit_test(test_path_parameters),
		cmocka_unit_test(test_results_are_tool_outputs),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
