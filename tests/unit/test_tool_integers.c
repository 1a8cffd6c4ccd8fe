/* test_tool_integers.c - every integer field of every tool's inputSchema
 * refuses a whole-number real (60.0, the minimum as a real). The fields are
 * found by walking the embedded catalogue, nested objects and arrays too,
 * so a new integer field is covered without touching this file. For each
 * one an otherwise valid argument object is made from the schema itself;
 * it must pass with an integer in the field and fail, naming the field,
 * with a real. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/jsonschema.h"
#include "service/tools.h"

#define TI_MAX_DEPTH 16 /* schema nesting this test follows */
#define TI_MAX_PATH 256 /* as the validator's field paths */

/* One step from a value to its child: a property, or item 0 of an array. */
struct step {
	const char *key;      /* NULL: the array's first item */
	const json_t *schema; /* the child's schema */
};

struct walk {
	const char *tool;
	const json_t *root; /* the tool's inputSchema */
	struct step steps[TI_MAX_DEPTH];
	size_t n;
	size_t fields; /* integer fields checked */
};

static json_t *minimal(const json_t *schema, int depth);

/* The schema's type, or the first of its types that is not null. */
static const char *
schema_type(const json_t *schema)
{
	const json_t *t = json_object_get(schema, "type");
	const json_t *it;
	size_t i;

	if (json_is_string(t))
		return json_string_value(t);
	json_array_foreach(t, i, it) {
		if (json_is_string(it) && strcmp(json_string_value(it), "null") != 0)
			return json_string_value(it);
	}
	return json_is_array(t) ? "null" : NULL;
}

static int
has_type(const json_t *schema, const char *want)
{
	const json_t *t = json_object_get(schema, "type");
	const json_t *it;
	size_t i;

	if (json_is_string(t))
		return strcmp(json_string_value(t), want) == 0;
	json_array_foreach(t, i, it) {
		if (json_is_string(it) && strcmp(json_string_value(it), want) == 0)
			return 1;
	}
	return 0;
}

static int
conforms(const json_t *schema, const json_t *v)
{
	struct err e;

	err_clear(&e);
	return jsv_validate(schema, v, "", &e) == 0;
}

/* A string the schema takes: its default, or the first candidate that
 * passes (lengths and patterns are checked by the validator itself). */
static json_t *
minimal_string(const json_t *schema)
{
	static const char *const candidates[] = {
		"sbx-0123456789abcdef",
		"cmd-0123456789abcdef",
		"snp-0123456789abcdef",
		"a",
		"A",
		"0644",
		"644",
		"/tmp",
		"K",
	};
	const json_t *def = json_object_get(schema, "default");
	json_int_t min = json_integer_value(json_object_get(schema, "minLength"));
	char filled[64];
	json_t *v;

	if (json_is_string(def) && conforms(schema, def))
		return json_incref((json_t *)def);
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		v = json_string(candidates[i]);
		if (v != NULL && conforms(schema, v))
			return v;
		json_decref(v);
	}
	if (min > 0 && (size_t)min < sizeof(filled)) {
		memset(filled, 'a', (size_t)min);
		filled[min] = '\0';
		v = json_string(filled);
		if (v != NULL && conforms(schema, v))
			return v;
		json_decref(v);
	}
	return NULL;
}

/* An integer the schema takes: the first enum member, its minimum, its
 * maximum when that is below 0, else 0. */
static json_int_t
valid_integer(const json_t *schema)
{
	const json_t *en = json_object_get(schema, "enum");
	const json_t *min = json_object_get(schema, "minimum");
	const json_t *max = json_object_get(schema, "maximum");

	if (json_is_integer(json_array_get(en, 0)))
		return json_integer_value(json_array_get(en, 0));
	if (json_is_number(min))
		return (json_int_t)json_number_value(min);
	if (json_is_number(max) && json_number_value(max) < 0)
		return (json_int_t)json_number_value(max);
	return 0;
}

/* A key an object with this schema takes for an undeclared property. */
static const char *
extra_key(const json_t *schema)
{
	static const char *const candidates[] = { "K", "k", "FOO", "x1" };
	const json_t *names = json_object_get(schema, "propertyNames");

	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		json_t *k = json_string(candidates[i]);
		int fits = k != NULL && (names == NULL || conforms(names, k));

		json_decref(k);
		if (fits &&
		    json_object_get(json_object_get(schema, "properties"), candidates[i]) == NULL)
			return candidates[i];
	}
	return NULL;
}

static json_t *
minimal_object(const json_t *schema, int depth)
{
	const json_t *props = json_object_get(schema, "properties");
	const json_t *r;
	size_t i;
	json_t *out = json_object();

	json_array_foreach(json_object_get(schema, "required"), i, r) {
		const char *name = json_string_value(r);
		json_t *v = minimal(json_object_get(props, name), depth + 1);

		if (name == NULL || v == NULL) {
			json_decref(v);
			json_decref(out);
			return NULL;
		}
		json_object_set_new(out, name, v);
	}
	return out;
}

/* The smallest instance the schema takes, derived from the schema alone;
 * NULL when this test cannot make one (the caller fails, naming it). */
static json_t *
minimal(const json_t *schema, int depth)
{
	const json_t *en = json_object_get(schema, "enum");
	const char *t = schema_type(schema);

	if (depth > TI_MAX_DEPTH || !json_is_object(schema))
		return NULL;
	if (json_array_size(en) > 0)
		return json_deep_copy(json_array_get(en, 0));
	if (t == NULL || strcmp(t, "null") == 0)
		return json_null();
	if (strcmp(t, "object") == 0)
		return minimal_object(schema, depth);
	if (strcmp(t, "array") == 0) {
		json_int_t n = json_integer_value(json_object_get(schema, "minItems"));
		json_t *out = json_array();

		for (json_int_t i = 0; out != NULL && i < n; i++) {
			json_t *it = minimal(json_object_get(schema, "items"), depth + 1);
			if (it == NULL) {
				json_decref(out);
				return NULL;
			}
			json_array_append_new(out, it);
		}
		return out;
	}
	if (strcmp(t, "string") == 0)
		return minimal_string(schema);
	if (strcmp(t, "integer") == 0)
		return json_integer(valid_integer(schema));
	if (strcmp(t, "number") == 0)
		return json_real((double)valid_integer(schema));
	if (strcmp(t, "boolean") == 0) {
		const json_t *def = json_object_get(schema, "default");
		return json_is_boolean(def) ? json_incref((json_t *)def) : json_false();
	}
	return NULL;
}

/* The validator's name for the value at the end of the steps. */
static void
field_path(const struct walk *w, char *out, size_t n)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < w->n && len < n; i++) {
		if (w->steps[i].key != NULL)
			len += (size_t)snprintf(out + len, n - len, "%s%s", len ? "." : "",
			    w->steps[i].key);
		else
			len += (size_t)snprintf(out + len, n - len, "%s[0]",
			    len ? "" : "arguments");
	}
}

/* Puts v (stolen) at the end of the steps in root, making the containers
 * on the way from their schemas. 0 or -1. */
static int
put(const struct walk *w, json_t *root, json_t *v)
{
	json_t *cur = root;

	for (size_t i = 0; i < w->n; i++) {
		const struct step *s = &w->steps[i];
		int last = i + 1 == w->n;
		json_t *next;

		if (s->key != NULL) {
			if (last)
				return json_object_set_new(cur, s->key, v);
			next = json_object_get(cur, s->key);
			if (next == NULL) {
				next = minimal(s->schema, 0);
				if (next == NULL || json_object_set_new(cur, s->key, next) < 0)
					goto fail;
			}
		} else {
			if (last)
				return json_array_size(cur) == 0 ? json_array_append_new(cur, v) :
								   json_array_set_new(cur, 0, v);
			if (json_array_size(cur) == 0) {
				json_t *it = minimal(s->schema, 0);
				if (it == NULL || json_array_append_new(cur, it) < 0)
					goto fail;
			}
			next = json_array_get(cur, 0);
		}
		cur = next;
	}
fail:
	json_decref(v);
	return -1;
}

/* The tool's minimal arguments with v (stolen) in the field. */
static json_t *
args_with(const struct walk *w, json_t *v)
{
	json_t *args = minimal(w->root, 0);

	if (args == NULL)
		fail_msg("%s: cannot make valid arguments from its inputSchema", w->tool);
	if (put(w, args, v) < 0)
		fail_msg("%s: cannot place a value in the field", w->tool);
	return args;
}

static void
check_field(struct walk *w, const json_t *field_schema)
{
	/* "must be integer, not ..." or, for a type list, "must be integer or
	 * null, not ...". */
	static const char want[] = "not a number with a fraction part or exponent";
	char path[TI_MAX_PATH], msg[TI_MAX_PATH + 16];
	json_int_t good = valid_integer(field_schema);
	const double reals[] = { (double)good, 60.0, 1e3 };
	json_t *args;
	struct err e;

	field_path(w, path, sizeof(path));
	snprintf(msg, sizeof(msg), "%s: must be ", path);

	args = args_with(w, json_integer(good));
	err_clear(&e);
	if (jsv_validate(w->root, args, "", &e) != 0)
		fail_msg("%s: valid arguments refused: [%s] %s", w->tool, e.field, e.msg);
	json_decref(args);

	for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
		args = args_with(w, json_real(reals[i]));
		err_clear(&e);
		if (jsv_validate(w->root, args, "", &e) != -1)
			fail_msg("%s: %s = %.1f accepted", w->tool, path, reals[i]);
		if (e.kind != ERR_INVALID || strcmp(e.field, path) != 0 ||
		    strncmp(e.msg, msg, strlen(msg)) != 0 || strstr(e.msg, "integer") == NULL ||
		    strstr(e.msg, want) == NULL)
			fail_msg("%s: %s = %.1f: kind %s, field \"%s\", message \"%s\"; "
				 "want invalid_argument, \"%s\", \"%s...integer...%s\"",
			    w->tool, path, reals[i], err_kind_name(e.kind), e.field, e.msg, path,
			    msg, want);
		json_decref(args);
	}
	w->fields++;
}

static void
walk(struct walk *w, const json_t *schema)
{
	const json_t *props = json_object_get(schema, "properties");
	const json_t *addl = json_object_get(schema, "additionalProperties");
	const json_t *items = json_object_get(schema, "items");
	const char *key;
	const json_t *sub;

	if (!json_is_object(schema))
		return;
	if (has_type(schema, "integer"))
		check_field(w, schema);
	if (w->n == TI_MAX_DEPTH) {
		if (props || json_is_object(addl) || items)
			fail_msg("%s: inputSchema nested deeper than %d", w->tool, TI_MAX_DEPTH);
		return;
	}
	json_object_foreach((json_t *)props, key, sub) {
		w->steps[w->n++] = (struct step){ key, sub };
		walk(w, sub);
		w->n--;
	}
	if (json_is_object(addl)) {
		const char *k = extra_key(schema);

		if (k == NULL)
			fail_msg("%s: no key fits its propertyNames", w->tool);
		w->steps[w->n++] = (struct step){ k, addl };
		walk(w, addl);
		w->n--;
	}
	if (json_is_object(items)) {
		w->steps[w->n++] = (struct step){ NULL, items };
		walk(w, items);
		w->n--;
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

/* The generator itself, on schemas where the answer is known. */
static void
test_minimal_instances(void **state)
{
	static const struct {
		const char *schema, *want;
	} cases[] = {
		{ "{\"type\":\"integer\",\"minimum\":5}", "5" },
		{ "{\"type\":\"integer\",\"maximum\":-2}", "-2" },
		{ "{\"type\":\"integer\"}", "0" },
		{ "{\"type\":[\"integer\",\"null\"],\"minimum\":1}", "1" },
		{ "{\"type\":\"string\",\"enum\":[\"b\",\"a\"]}", "\"b\"" },
		{ "{\"type\":\"string\",\"pattern\":\"^sbx-[a-z0-9]{16}$\"}",
		    "\"sbx-0123456789abcdef\"" },
		{ "{\"type\":\"string\",\"minLength\":3,\"pattern\":\"^a+$\"}", "\"aaa\"" },
		{ "{\"type\":\"string\",\"default\":\"zz\"}", "\"zz\"" },
		{ "{\"type\":\"boolean\",\"default\":true}", "true" },
		{ "{\"type\":\"array\",\"minItems\":2,\"items\":{\"type\":\"integer\"}}", "[0,0]" },
		{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":3},"
		  "\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
		    "{\"a\":3}" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *s = json_loads(cases[i].schema, 0, NULL);
		json_t *want = json_loads(cases[i].want, JSON_DECODE_ANY, NULL);
		json_t *got;

		assert_non_null(s);
		assert_non_null(want);
		got = minimal(s, 0);
		if (got == NULL || !json_equal(got, want))
			fail_msg("minimal(%s) is not %s", cases[i].schema, cases[i].want);
		assert_true(conforms(s, got));
		json_decref(got);
		json_decref(want);
		json_decref(s);
	}
}

/* The walk reaches a nested field and names it as the validator does. */
static void
test_walk_nested(void **state)
{
	json_t *s =
	    json_loads("{\"type\":\"object\",\"properties\":{"
		       "\"top\":{\"type\":\"integer\",\"minimum\":1},"
		       "\"box\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},"
		       "\"required\":[\"n\"]},"
		       "\"list\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":"
		       "{\"port\":{\"type\":[\"integer\",\"null\"],\"maximum\":9}}}},"
		       "\"env\":{\"type\":\"object\",\"propertyNames\":{\"pattern\":\"^[A-Z]+$\"},"
		       "\"additionalProperties\":{\"type\":\"integer\"}}},"
		       "\"required\":[\"top\"],\"additionalProperties\":false}",
		0, NULL);
	struct walk w = { .tool = "nested", .root = s };
	json_t *args;
	char path[TI_MAX_PATH];

	(void)state;
	assert_non_null(s);
	walk(&w, s);
	assert_int_equal(w.fields, 4);
	/* The path names of the steps. */
	w.steps[0] = (struct step){ "list",
		json_object_get(json_object_get(s, "properties"), "list") };
	w.steps[1] = (struct step){ NULL, json_object_get(w.steps[0].schema, "items") };
	w.steps[2] = (struct step){ "port", NULL };
	w.n = 3;
	field_path(&w, path, sizeof(path));
	assert_string_equal(path, "list[0].port");
	args = args_with(&w, json_integer(4));
	assert_true(conforms(s, args));
	json_decref(args);
	json_decref(s);
}

static void
test_every_integer_field_refuses_reals(void **state)
{
	size_t total = 0, tools_with = 0;

	(void)state;
	assert_true(tools_count() > 0);
	for (size_t i = 0; i < tools_count(); i++) {
		const char *name = tools_name_at(i);
		const json_t *schema = tools_input_schema(name);
		struct walk w = { .tool = name, .root = schema };
		json_t *args;

		assert_non_null(name);
		assert_non_null(schema);
		/* The minimal arguments alone are valid. */
		args = minimal(schema, 0);
		if (args == NULL || !conforms(schema, args))
			fail_msg("%s: the arguments made from its schema are refused", name);
		json_decref(args);
		walk(&w, schema);
		print_message("%s: %zu integer field(s)\n", name, w.fields);
		total += w.fields;
		tools_with += w.fields > 0;
	}
	print_message("walked %zu integer fields in %zu of %zu tools\n", total, tools_with,
	    tools_count());
	/* A walk that finds nothing tests nothing. */
	if (total == 0)
		fail_msg("no integer field in any tool's inputSchema: the walk is broken");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_minimal_instances),
		cmocka_unit_test(test_walk_nested),
		cmocka_unit_test(test_every_integer_field_refuses_reals),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
