/* test_tools_size.c - what tools/list costs a model: the serialised result
 * aasd answers with (tools_list_json, spliced into the reply as it is) and
 * the parts a client hands to the model, each printed and held under its
 * budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "service/tools.h"

/* The whole tools/list result, and name + description + inputSchema
 * summed over the tools (what a model reads in its context). */
#define LIST_BUDGET 24576
#define MODEL_BUDGET 13312

static size_t
dumped_size(const json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	size_t n = text ? strlen(text) : 0;

	free(text);
	return n;
}

static void
test_tools_list_within_budget(void **state)
{
	size_t len, model = 0, out = 0, ann = 0;
	const char *text = tools_list_json(&len);

	(void)state;
	assert_non_null(text);
	for (size_t i = 0; i < tools_count(); i++) {
		model += strlen(tools_name_at(i)) + 2;
		model += dumped_size(tools_field_at(i, "description"));
		model += dumped_size(tools_field_at(i, "inputSchema"));
		out += dumped_size(tools_field_at(i, "outputSchema"));
		ann += dumped_size(tools_field_at(i, "annotations"));
	}
	print_message("tools/list result: %zu bytes (budget %d)\n", len, LIST_BUDGET);
	print_message("name + description + inputSchema: %zu bytes (budget %d)\n", model,
	    MODEL_BUDGET);
	print_message("outputSchema: %zu bytes, annotations: %zu bytes\n", out, ann);
	assert_true(len <= LIST_BUDGET);
	assert_true(model <= MODEL_BUDGET);
}

/* No tool carries an icon (the server has one, in initialize) and no
 * published schema carries a keyword only 2026-07-28 defines. */
static void
test_tools_list_lean(void **state)
{
	size_t len;
	const char *text = tools_list_json(&len);
	json_t *marked = tools_list_result_marked();
	char *mtext = json_dumps(marked, JSON_COMPACT);

	(void)state;
	assert_null(strstr(text, "\"icons\""));
	assert_null(strstr(text, "x-mcp-header"));
	assert_null(strstr(text, "data:image"));
	/* 2026-07-28 still marks sandbox_id for its Mcp-Param header. */
	assert_non_null(strstr(mtext, "\"x-mcp-header\":\"Sandbox-Id\""));
	free(mtext);
	json_decref(marked);
}

/* Every argument of every tool says what it is for. */
static void
test_every_argument_described(void **state)
{
	(void)state;
	for (size_t i = 0; i < tools_count(); i++) {
		const json_t *props = json_object_get(tools_field_at(i, "inputSchema"),
		    "properties");
		const char *key;
		json_t *p;

		json_object_foreach((json_t *)props, key, p) {
			const char *d = json_string_value(json_object_get(p, "description"));
			if (d == NULL || *d == '\0')
				fail_msg("%s.%s has no description", tools_name_at(i), key);
		}
	}
}

/* The Inspector's --strict portability lint: no schema has a type array
 * (nullable values are anyOf branches, one type each). */
static void
no_type_arrays(const json_t *node, const char *tool)
{
	const char *key;
	const json_t *v;
	size_t i;

	if (json_is_array(node)) {
		json_array_foreach(node, i, v)
			no_type_arrays(v, tool);
		return;
	}
	if (!json_is_object(node))
		return;
	json_object_foreach((json_t *)node, key, v) {
		if (strcmp(key, "type") == 0 && json_is_array(v))
			fail_msg("%s: a schema has a type array", tool);
		no_type_arrays(v, tool);
	}
}

static void
test_no_type_arrays(void **state)
{
	(void)state;
	for (size_t i = 0; i < tools_count(); i++) {
		no_type_arrays(tools_field_at(i, "inputSchema"), tools_name_at(i));
		no_type_arrays(tools_field_at(i, "outputSchema"), tools_name_at(i));
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
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tools_cleanup();
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tools_list_within_budget),
		cmocka_unit_test(test_tools_list_lean),
		cmocka_unit_test(test_every_argument_described),
		cmocka_unit_test(test_no_type_arrays),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
