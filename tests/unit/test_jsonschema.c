/* test_jsonschema.c - the JSON Schema subset validator (base/jsonschema.h)
 * keyword by keyword, then the real tool input schemas (service/tools.h). */
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

static json_t *
load(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);

	if (v == NULL)
		fail_msg("test JSON does not load: %s: %s", text, jerr.text);
	return v;
}

/* Validates value against schema (both JSON text) below `path`. */
static int
run_at(const json_t *schema, const char *value, const char *path, struct err *e)
{
	json_t *v = load(value);
	int rc;

	err_clear(e);
	rc = jsv_validate(schema, v, path, e);
	json_decref(v);
	return rc;
}

static void
ok_s(const json_t *schema, const char *value)
{
	struct err e;

	if (run_at(schema, value, "", &e) != 0)
		fail_msg("rejected %s: [%s] %s", value, e.field, e.msg);
	assert_int_equal(e.kind, ERR_NONE);
	assert_string_equal(e.field, "");
}

/* Expects ERR_INVALID naming `field`, with exactly `msg` (or, when msg
 * starts with '~', a message containing the rest). */
static void
bad_s(const json_t *schema, const char *value, const char *field, const char *msg)
{
	struct err e;

	if (run_at(schema, value, "", &e) != -1)
		fail_msg("accepted %s", value);
	if (e.kind != ERR_INVALID)
		fail_msg("%s: kind %s, want invalid_argument (%s)", value, err_kind_name(e.kind),
		    e.msg);
	if (strcmp(e.field, field) != 0)
		fail_msg("%s: field \"%s\", want \"%s\" (%s)", value, e.field, field, e.msg);
	if (msg[0] == '~') {
		if (strstr(e.msg, msg + 1) == NULL)
			fail_msg("%s: message \"%s\" lacks \"%s\"", value, e.msg, msg + 1);
	} else if (strcmp(e.msg, msg) != 0) {
		fail_msg("%s: message \"%s\", want \"%s\"", value, e.msg, msg);
	}
}

static void
ok(const char *schema, const char *value)
{
	json_t *s = load(schema);

	ok_s(s, value);
	json_decref(s);
}

static void
bad(const char *schema, const char *value, const char *field, const char *msg)
{
	json_t *s = load(schema);

	bad_s(s, value, field, msg);
	json_decref(s);
}

/* What "type": "integer" says to a real. */
#define REAL "must be integer, not a number with a fraction part or exponent"

/* ---- keywords ---- */

static void
test_type_simple(void **state)
{
	(void)state;
	ok("{\"type\":\"string\"}", "\"x\"");
	bad("{\"type\":\"string\"}", "5", "arguments", "arguments: must be string, not integer");
	bad("{\"type\":\"string\"}", "null", "arguments", "arguments: must be string, not null");
	ok("{\"type\":\"boolean\"}", "false");
	bad("{\"type\":\"boolean\"}", "0", "arguments", "arguments: must be boolean, not integer");
	ok("{\"type\":\"null\"}", "null");
	ok("{\"type\":\"array\"}", "[]");
	bad("{\"type\":\"array\"}", "{}", "arguments", "arguments: must be array, not object");
	ok("{\"type\":\"object\"}", "{}");
	bad("{\"type\":\"object\"}", "[]", "arguments", "arguments: must be object, not array");
	ok("{\"type\":\"number\"}", "5");
	ok("{\"type\":\"number\"}", "5.5");
	bad("{\"type\":\"number\"}", "\"5\"", "arguments", "arguments: must be number, not string");
	/* Unknown type names match nothing. */
	bad("{\"type\":\"decimal\"}", "5", "arguments", "arguments: must be decimal, not integer");
	/* No type: anything goes. */
	ok("{}", "[1,{\"a\":null}]");
}

static void
test_type_integer(void **state)
{
	static const char s[] = "{\"type\":\"integer\"}";

	(void)state;
	ok(s, "5");
	ok(s, "-3");
	ok(s, "0");
	ok(s, "-0");
	ok(s, "9223372036854775807");
	ok(s, "-9223372036854775807");
	/* A real is refused even when its value is whole: the handlers read
	 * integers with json_integer_value, which gives 0 for a real. */
	bad(s, "5.0", "arguments", "arguments: " REAL);
	bad(s, "0.0", "arguments", "arguments: " REAL);
	bad(s, "-0.0", "arguments", "arguments: " REAL);
	bad(s, "60.0", "arguments", "arguments: " REAL);
	bad(s, "1e3", "arguments", "arguments: " REAL);
	bad(s, "1E3", "arguments", "arguments: " REAL);
	bad(s, "1e+0", "arguments", "arguments: " REAL);
	bad(s, "5.5", "arguments", "arguments: " REAL);
	bad(s, "0.1", "arguments", "arguments: " REAL);
	bad(s, "1e300", "arguments", "arguments: " REAL);
	bad(s, "\"5\"", "arguments", "arguments: must be integer, not string");
	bad(s, "\"60\"", "arguments", "arguments: must be integer, not string");
	bad(s, "true", "arguments", "arguments: must be integer, not boolean");
	bad(s, "null", "arguments", "arguments: must be integer, not null");
	bad(s, "[1]", "arguments", "arguments: must be integer, not array");
}

/* "number" keeps taking integers and reals alike. */
static void
test_type_number(void **state)
{
	static const char s[] = "{\"type\":\"number\"}";

	(void)state;
	ok(s, "5");
	ok(s, "5.0");
	ok(s, "5.5");
	ok(s, "-0.0");
	ok(s, "1e3");
	ok(s, "1e300");
	bad(s, "\"5\"", "arguments", "arguments: must be number, not string");
	ok("{\"type\":\"number\",\"minimum\":1,\"maximum\":2}", "1.5");
	ok("{\"type\":\"number\",\"minimum\":1,\"maximum\":2}", "2");
	bad("{\"type\":\"number\",\"minimum\":1,\"maximum\":2}", "2.5", "arguments",
	    "arguments: must be at most 2");
	/* Both listed: a real is a number. */
	ok("{\"type\":[\"integer\",\"number\"]}", "2.5");
	ok("{\"type\":[\"number\",\"integer\"]}", "7");
}

static void
test_type_array_of_types(void **state)
{
	static const char s[] = "{\"type\":[\"string\",\"null\"]}";

	(void)state;
	ok(s, "\"x\"");
	ok(s, "null");
	bad(s, "5", "arguments", "arguments: must be string or null, not integer");
	bad(s, "{}", "arguments", "arguments: must be string or null, not object");
	ok("{\"type\":[\"integer\",\"boolean\",\"null\"]}", "true");
	ok("{\"type\":[\"integer\",\"boolean\",\"null\"]}", "3");
	bad("{\"type\":[\"integer\",\"boolean\",\"null\"]}", "1.5", "arguments",
	    "arguments: must be integer or boolean or null, not a number with a fraction "
	    "part or exponent");
	/* The same for a whole-number real, wherever integer stands. */
	ok("{\"type\":[\"null\",\"integer\"]}", "null");
	bad("{\"type\":[\"null\",\"integer\"]}", "60.0", "arguments",
	    "arguments: must be null or integer, not a number with a fraction part or exponent");
	bad("{\"type\":[\"integer\",\"null\"]}", "1e3", "arguments",
	    "arguments: must be integer or null, not a number with a fraction part or exponent");
	/* Without integer among them, a real is just a number. */
	bad("{\"type\":[\"string\",\"null\"]}", "1.0", "arguments",
	    "arguments: must be string or null, not number");
}

static void
test_required(void **state)
{
	static const char s[] = "{\"type\":\"object\",\"required\":[\"sandbox_id\",\"command\"]}";

	(void)state;
	ok(s, "{\"sandbox_id\":\"x\",\"command\":\"y\"}");
	/* null is present. */
	ok(s, "{\"sandbox_id\":null,\"command\":null}");
	bad(s, "{\"command\":\"y\"}", "sandbox_id", "sandbox_id: required field is missing");
	bad(s, "{\"sandbox_id\":\"x\"}", "command", "command: required field is missing");
	/* The first missing one in `required` order is named. */
	bad(s, "{}", "sandbox_id", "sandbox_id: required field is missing");
	/* Nested. */
	bad("{\"type\":\"object\",\"properties\":{\"env\":{\"type\":\"object\","
	    "\"required\":[\"FOO\"]}}}",
	    "{\"env\":{\"BAR\":\"1\"}}", "env.FOO", "env.FOO: required field is missing");
}

static void
test_additional_properties_false(void **state)
{
	static const char s[] = "{\"type\":\"object\",\"properties\":{\"a\":{},"
				"\"b\":{\"type\":\"integer\"}},\"additionalProperties\":false}";

	(void)state;
	ok(s, "{}");
	ok(s, "{\"a\":\"anything\",\"b\":2}");
	bad(s, "{\"a\":1,\"bogus\":2}", "bogus", "bogus: unknown field (the fields are: a, b)");
	bad(s, "{\"bogus\":2,\"a\":1}", "bogus", "bogus: unknown field (the fields are: a, b)");
	/* Case matters. */
	bad(s, "{\"A\":1}", "A", "A: unknown field (the fields are: a, b)");
	/* Known field with a bad value is reported as such. */
	bad(s, "{\"b\":\"2\"}", "b", "b: must be integer, not string");
	/* Absent additionalProperties allows extra fields. */
	ok("{\"type\":\"object\",\"properties\":{\"a\":{}}}", "{\"zzz\":1}");
	ok("{\"type\":\"object\",\"additionalProperties\":true}", "{\"zzz\":1}");
}

static void
test_additional_properties_schema(void **state)
{
	static const char s[] =
	    "{\"type\":\"object\",\"properties\":{\"n\":"
	    "{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}";

	(void)state;
	ok(s, "{\"n\":1,\"FOO\":\"x\",\"BAR\":\"y\"}");
	bad(s, "{\"FOO\":\"x\",\"BAR\":1}", "BAR", "BAR: must be string, not integer");
	/* Declared properties use their own schema, not the additional one. */
	bad(s, "{\"n\":\"1\"}", "n", "n: must be integer, not string");
}

static void
test_property_names(void **state)
{
	static const char s[] = "{\"type\":\"object\",\"propertyNames\":"
				"{\"pattern\":\"^[A-Z_]+$\",\"maxLength\":4}}";

	(void)state;
	ok(s, "{\"FOO\":1,\"A_B\":2}");
	bad(s, "{\"FOO\":1,\"bar\":2}", "bar", "bar: does not match the pattern ^[A-Z_]+$");
	bad(s, "{\"TOOLONG\":1}", "TOOLONG", "TOOLONG: must be at most 4 characters long");
	/* The name is checked, not the value. */
	ok(s, "{\"FOO\":\"lower-case value\"}");
	/* An empty name is refused too. */
	{
		struct err e;
		json_t *sc = load(s);
		assert_int_equal(run_at(sc, "{\"\":1}", "", &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
		assert_non_null(strstr(e.msg, "does not match the pattern ^[A-Z_]+$"));
		json_decref(sc);
	}
}

/* anyOf: a nullable value as output schemas spell it, one type a branch. */
static void
test_any_of(void **state)
{
	static const char s[] = "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}";

	(void)state;
	ok(s, "3");
	ok(s, "null");
	bad(s, "\"3\"", "arguments", "arguments: must be integer, not string");
	ok("{\"anyOf\":[{\"type\":\"string\",\"enum\":[\"a\"]},{\"type\":\"null\"}]}", "\"a\"");
	bad("{\"anyOf\":[{\"type\":\"string\",\"enum\":[\"a\"]},{\"type\":\"null\"}]}", "\"b\"",
	    "arguments", "arguments: must be one of: a");
}

static void
test_enum(void **state)
{
	static const char s[] = "{\"type\":\"string\",\"enum\":[\"small\",\"medium\",\"large\"]}";

	(void)state;
	ok(s, "\"small\"");
	ok(s, "\"large\"");
	bad(s, "\"huge\"", "arguments", "arguments: must be one of: small, medium, large");
	bad(s, "\"Small\"", "arguments", "arguments: must be one of: small, medium, large");
	bad(s, "\"small \"", "arguments", "arguments: must be one of: small, medium, large");
	/* Non-string members compare by value. */
	ok("{\"enum\":[1,2,null]}", "2");
	ok("{\"enum\":[1,2,null]}", "null");
	/* An integer enum: a real is refused by the type, then by the enum. */
	ok("{\"type\":\"integer\",\"enum\":[1,2]}", "2");
	bad("{\"type\":\"integer\",\"enum\":[1,2]}", "2.0", "arguments", "arguments: " REAL);
	bad("{\"type\":\"integer\",\"enum\":[1,2]}", "3", "arguments",
	    "arguments: must be one of: 1, 2");
	bad("{\"enum\":[1,2]}", "2.0", "arguments", "arguments: must be one of: 1, 2");
	{
		struct err e;
		json_t *sc = load("{\"enum\":[1,2,null]}");
		assert_int_equal(run_at(sc, "3", "", &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
		assert_string_equal(e.field, "arguments");
		json_decref(sc);
	}
}

static void
test_minimum_maximum(void **state)
{
	static const char s[] = "{\"type\":\"integer\",\"minimum\":1,\"maximum\":3600}";

	(void)state;
	ok(s, "1");
	ok(s, "3600");
	ok(s, "60");
	/* The type is checked before the limits, in and out of range. */
	bad(s, "60.0", "arguments", "arguments: " REAL);
	bad(s, "0.0", "arguments", "arguments: " REAL);
	bad(s, "3601.0", "arguments", "arguments: " REAL);
	bad(s, "0", "arguments", "arguments: must be at least 1");
	bad(s, "-1", "arguments", "arguments: must be at least 1");
	bad(s, "3601", "arguments", "arguments: must be at most 3600");
	bad(s, "9223372036854775807", "arguments", "arguments: must be at most 3600");
	bad(s, "-9223372036854775807", "arguments", "arguments: must be at least 1");
	ok("{\"type\":\"number\",\"minimum\":0.5}", "0.5");
	bad("{\"type\":\"number\",\"minimum\":0.5}", "0.4", "arguments",
	    "arguments: must be at least 0.5");
	bad("{\"type\":\"number\",\"maximum\":-2}", "-1.5", "arguments",
	    "arguments: must be at most -2");
}

static void
test_string_length_code_points(void **state)
{
	static const char s[] = "{\"type\":\"string\",\"minLength\":1,\"maxLength\":3}";

	(void)state;
	ok(s, "\"a\"");
	ok(s, "\"abc\"");
	bad(s, "\"\"", "arguments", "arguments: must be at least 1 character long");
	bad(s, "\"abcd\"", "arguments", "arguments: must be at most 3 characters long");
	/* Code points, not bytes. */
	ok("{\"maxLength\":1}", "\"\xc3\xa9\""); /* é, 2 bytes */
	ok("{\"maxLength\":1}", "\"\\u00e9\"");
	ok("{\"maxLength\":1}", "\"\xf0\x9f\x98\x80\"");   /* emoji, 4 bytes */
	ok(s, "\"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\""); /* 3 CJK, 9 bytes */
	bad("{\"maxLength\":1}", "\"\xc3\xa9\xc3\xa9\"", "arguments",
	    "arguments: must be at most 1 character long");
	bad("{\"minLength\":2}", "\"\xc3\xa9\"", "arguments",
	    "arguments: must be at least 2 characters long");
	ok("{\"minLength\":2}", "\"\xc3\xa9\xc3\xa9\"");
}

static void
test_pattern(void **state)
{
	static const char s[] = "{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}";

	(void)state;
	ok(s, "\"abc\"");
	bad(s, "\"abC\"", "arguments", "arguments: does not match the pattern ^[a-z]+$");
	bad(s, "\"\"", "arguments", "arguments: does not match the pattern ^[a-z]+$");
	/* A trailing newline does not satisfy $. */
	bad(s, "\"abc\\n\"", "arguments", "arguments: does not match the pattern ^[a-z]+$");
	/* Patterns are not implicitly anchored. */
	ok("{\"pattern\":\"b\"}", "\"abc\"");
	bad("{\"pattern\":\"^b\"}", "\"abc\"", "arguments",
	    "arguments: does not match the pattern ^b");
	/* Only strings are matched. */
	ok("{\"pattern\":\"^x$\"}", "5");
}

static void
test_bad_pattern_is_internal(void **state)
{
	struct err e;
	json_t *s = load("{\"type\":\"string\",\"pattern\":\"(\"}");

	(void)state;
	assert_int_equal(run_at(s, "\"x\"", "", &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	assert_string_equal(e.msg, "bad pattern in tool schema");
	json_decref(s);
}

static void
test_items(void **state)
{
	static const char s[] = "{\"type\":\"array\",\"minItems\":1,\"maxItems\":3,"
				"\"items\":{\"type\":\"integer\"}}";

	(void)state;
	ok(s, "[1]");
	ok(s, "[1,2,3]");
	bad(s, "[]", "arguments", "arguments: must have at least 1 items");
	bad(s, "[1,2,3,4]", "arguments", "arguments: must have at most 3 items");
	bad(s, "[1,2,\"x\"]", "arguments[2]", "arguments[2]: must be integer, not string");
	bad(s, "[\"x\",2,\"y\"]", "arguments[0]", "arguments[0]: must be integer, not string");
	/* Inside an object, the index follows the property name. */
	bad("{\"type\":\"object\",\"properties\":{\"items\":{\"type\":\"array\","
	    "\"items\":{\"type\":\"string\"}}}}",
	    "{\"items\":[\"a\",\"b\",3]}", "items[2]", "items[2]: must be string, not integer");
}

static void
test_max_properties(void **state)
{
	static const char s[] = "{\"type\":\"object\",\"maxProperties\":2}";

	(void)state;
	ok(s, "{}");
	ok(s, "{\"a\":1,\"b\":2}");
	bad(s, "{\"a\":1,\"b\":2,\"c\":3}", "arguments", "arguments: must have at most 2 entries");
}

static void
test_nested_paths(void **state)
{
	(void)state;
	bad("{\"type\":\"object\",\"properties\":{\"env\":{\"type\":\"object\","
	    "\"additionalProperties\":{\"type\":\"string\",\"maxLength\":3}}}}",
	    "{\"env\":{\"OK\":\"abc\",\"FOO\":\"toolong\"}}", "env.FOO",
	    "env.FOO: must be at most 3 characters long");
	bad("{\"properties\":{\"a\":{\"properties\":{\"list\":{\"items\":"
	    "{\"properties\":{\"x\":{\"type\":\"string\"}}}}}}}}",
	    "{\"a\":{\"list\":[{\"x\":\"ok\"},{\"x\":1}]}}", "a.list[1].x",
	    "a.list[1].x: must be string, not integer");
	bad("{\"properties\":{\"m\":{\"maxProperties\":1}}}", "{\"m\":{\"a\":1,\"b\":2}}", "m",
	    "m: must have at most 1 entries");
	bad("{\"properties\":{\"m\":{\"additionalProperties\":false}}}", "{\"m\":{\"zz\":1}}",
	    "m.zz", "m.zz: unknown field (none are taken here)");
}

static void
test_explicit_base_path(void **state)
{
	json_t *s = load("{\"type\":\"object\",\"properties\":{\"size\":"
			 "{\"type\":\"string\"}},\"required\":[\"name\"]}");
	struct err e;

	(void)state;
	assert_int_equal(run_at(s, "{\"name\":1,\"size\":5}", "params", &e), -1);
	assert_string_equal(e.field, "params.size");
	assert_string_equal(e.msg, "params.size: must be string, not integer");
	assert_int_equal(run_at(s, "{}", "params", &e), -1);
	assert_string_equal(e.field, "params.name");
	assert_int_equal(run_at(s, "[]", "params", &e), -1);
	assert_string_equal(e.field, "params");
	assert_string_equal(e.msg, "params: must be object, not array");
	/* NULL path is the top level. */
	json_t *v = load("{\"size\":5}");
	err_clear(&e);
	assert_int_equal(jsv_validate(s, v, NULL, &e), -1);
	assert_string_equal(e.field, "name");
	json_decref(v);
	json_decref(s);
}

static void
test_nul_refused(void **state)
{
	(void)state;
	bad("{\"type\":\"string\"}", "\"a\\u0000b\"", "arguments",
	    "arguments: must not contain a NUL character");
	bad("{}", "\"\\u0000\"", "arguments", "arguments: must not contain a NUL character");
	bad("{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}}}",
	    "{\"command\":\"ls\\u0000rm -rf\"}", "command", "~NUL");
	bad("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}",
	    "{\"FOO\":\"x\\u0000\"}", "FOO", "FOO: must not contain a NUL character");
	bad("{\"items\":{\"type\":\"string\"}}", "[\"ok\",\"\\u0000\"]", "arguments[1]",
	    "arguments[1]: must not contain a NUL character");
	/* Even where the schema would otherwise accept any length. */
	bad("{\"type\":\"string\",\"maxLength\":100,\"pattern\":\"^a\"}", "\"a\\u0000\"",
	    "arguments", "~NUL");
}

/* The header promises NUL strings are "always refused"; strings below a
 * value with no subschema (extra properties, array items) are not checked. */
static void
test_nul_refused_everywhere(void **state)
{
	struct err e;
	json_t *s;

	(void)state;
	s = load("{\"type\":\"object\"}");
	assert_int_equal(run_at(s, "{\"x\":\"a\\u0000b\"}", "", &e), -1);
	json_decref(s);
	s = load("{\"type\":\"array\"}");
	assert_int_equal(run_at(s, "[\"a\\u0000b\"]", "", &e), -1);
	json_decref(s);
}

static void
test_depth_limit(void **state)
{
	char schema[4096], value[256];
	size_t n;

	(void)state;
	/* Schema and value nested 20 deep: fine. */
	n = 0;
	for (int i = 0; i < 20; i++)
		n += (size_t)snprintf(schema + n, sizeof(schema) - n,
		    "{\"type\":\"array\",\"items\":");
	n += (size_t)snprintf(schema + n, sizeof(schema) - n, "{\"type\":\"integer\"}");
	for (int i = 0; i < 20; i++)
		schema[n++] = '}';
	schema[n] = '\0';
	n = 0;
	for (int i = 0; i < 20; i++)
		value[n++] = '[';
	value[n++] = '1';
	for (int i = 0; i < 20; i++)
		value[n++] = ']';
	value[n] = '\0';
	ok(schema, value);

	/* 40 deep: refused cleanly. */
	n = 0;
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(schema + n, sizeof(schema) - n,
		    "{\"type\":\"array\",\"items\":");
	n += (size_t)snprintf(schema + n, sizeof(schema) - n, "{\"type\":\"integer\"}");
	for (int i = 0; i < 40; i++)
		schema[n++] = '}';
	schema[n] = '\0';
	n = 0;
	for (int i = 0; i < 40; i++)
		value[n++] = '[';
	value[n++] = '1';
	for (int i = 0; i < 40; i++)
		value[n++] = ']';
	value[n] = '\0';
	{
		/* The value 33 levels down is where it stops. */
		char want[256] = "arguments";
		struct err e;
		json_t *sc = load(schema);
		size_t w = strlen(want);
		for (int i = 0; i < 33; i++)
			w += (size_t)snprintf(want + w, sizeof(want) - w, "[0]");
		assert_int_equal(run_at(sc, value, "", &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
		/* The field is the path, cut to the field's size. */
		assert_int_equal(strlen(e.field), sizeof(e.field) - 1);
		assert_memory_equal(e.field, want, sizeof(e.field) - 1);
		snprintf(want + w, sizeof(want) - w, ": is nested too deeply");
		assert_string_equal(e.msg, want);
		json_decref(sc);
	}
}

/* ---- the tool catalogue ---- */

static json_t *catalogue;

static int
setup_tools(void **state)
{
	struct err e;

	(void)state;
	err_clear(&e);
	if (tools_init(&e) != 0) {
		print_error("tools_init: %s\n", e.msg);
		return -1;
	}
	catalogue = tools_list_result();
	return catalogue == NULL ? -1 : 0;
}

static int
teardown_tools(void **state)
{
	(void)state;
	json_decref(catalogue);
	catalogue = NULL;
	tools_cleanup();
	return 0;
}

static const json_t *
tool(const char *name)
{
	const json_t *t;
	size_t i;

	json_array_foreach(json_object_get(catalogue, "tools"), i, t) {
		const char *n = json_string_value(json_object_get(t, "name"));
		if (n != NULL && strcmp(n, name) == 0)
			return t;
	}
	fail_msg("no tool %s in the catalogue", name);
	return NULL;
}

static const json_t *
input_schema(const char *name)
{
	const json_t *s = json_object_get(tool(name), "inputSchema");

	assert_non_null(s);
	return s;
}

#define SBX "\"sandbox_id\":\"sbx-0123456789abcdef\""

static void
test_tools_create_sandbox(void **state)
{
	const json_t *s = input_schema("create_sandbox");

	(void)state;
	ok_s(s, "{}");
	ok_s(s,
	    "{\"size\":\"medium\",\"timeout_minutes\":60,\"name\":\"my-box.1\","
	    "\"metadata\":{\"k\":\"v\"}}");
	bad_s(s, "{\"timeout_minutes\":30.0}", "timeout_minutes", "timeout_minutes: " REAL);
	bad_s(s, "{\"timeout_minutes\":3e1}", "timeout_minutes", "timeout_minutes: " REAL);
	bad_s(s, "{\"size\":\"huge\"}", "size", "size: must be one of: small, medium, large");
	bad_s(s, "{\"size\":1}", "size", "size: must be string, not integer");
	bad_s(s, "{\"timeout_minutes\":0}", "timeout_minutes",
	    "timeout_minutes: must be at least 1");
	bad_s(s, "{\"timeout_minutes\":1441}", "timeout_minutes",
	    "timeout_minutes: must be at most 1440");
	bad_s(s, "{\"timeout_minutes\":2.5}", "timeout_minutes", "timeout_minutes: " REAL);
	bad_s(s, "{\"name\":\"\"}", "name", "name: must be at least 1 character long");
	bad_s(s, "{\"name\":\"-bad\"}", "name", "~name: does not match the pattern");
	bad_s(s, "{\"name\":\"has space\"}", "name", "~name: does not match the pattern");
	bad_s(s, "{\"metadata\":{\"k\":1}}", "metadata.k",
	    "metadata.k: must be string, not integer");
	bad_s(s,
	    "{\"metadata\":{\"a\":\"1\",\"b\":\"1\",\"c\":\"1\",\"d\":\"1\",\"e\":\"1\","
	    "\"f\":\"1\",\"g\":\"1\",\"h\":\"1\",\"i\":\"1\",\"j\":\"1\",\"k\":\"1\",\"l\":\"1\","
	    "\"m\":\"1\",\"n\":\"1\",\"o\":\"1\",\"p\":\"1\",\"q\":\"1\"}}",
	    "metadata", "metadata: must have at most 16 entries");
	bad_s(s, "{\"bogus\":1}", "bogus",
	    "~bogus: unknown field (the fields are: size, timeout_minutes,");
	bad_s(s, "[]", "arguments", "arguments: must be object, not array");
}

static void
test_tools_run_command(void **state)
{
	const json_t *s = input_schema("run_command");

	(void)state;
	ok_s(s, "{" SBX ",\"command\":\"echo hi\"}");
	ok_s(s,
	    "{" SBX ",\"command\":\"env\",\"cwd\":\"/tmp\",\"env\":{\"FOO\":\"bar\","
	    "\"_x1\":\"\"},\"stdin\":\"in\",\"timeout_seconds\":60,\"max_output_bytes\":1024,"
	    "\"background\":false}");
	ok_s(s, "{" SBX ",\"command\":\"x\",\"timeout_seconds\":1}");
	ok_s(s, "{" SBX ",\"command\":\"x\",\"timeout_seconds\":3600}");

	bad_s(s, "{" SBX "}", "command", "command: required field is missing");
	bad_s(s, "{\"command\":\"ls\"}", "sandbox_id", "sandbox_id: required field is missing");
	bad_s(s, "{" SBX ",\"command\":\"\"}", "command",
	    "command: must be at least 1 character long");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"timeout_seconds\":-1}", "timeout_seconds",
	    "timeout_seconds: must be at least 1");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"timeout_seconds\":0}", "timeout_seconds",
	    "timeout_seconds: must be at least 1");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"timeout_seconds\":3601}", "timeout_seconds",
	    "timeout_seconds: must be at most 3600");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"timeout_seconds\":\"60\"}", "timeout_seconds",
	    "timeout_seconds: must be integer, not string");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"background\":\"yes\"}", "background",
	    "background: must be boolean, not string");
	bad_s(s, "{" SBX ",\"command\":\"ls\\u0000\"}", "command",
	    "command: must not contain a NUL character");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"env\":{\"1FOO\":\"x\"}}", "env.1FOO",
	    "~env.1FOO: does not match the pattern");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"env\":{\"FOO-BAR\":\"x\"}}", "env.FOO-BAR",
	    "~does not match the pattern");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"env\":{\"FOO\":1}}", "env.FOO",
	    "env.FOO: must be string, not integer");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"env\":{\"FOO\":\"a\\u0000\"}}", "env.FOO",
	    "env.FOO: must not contain a NUL character");
	bad_s(s, "{" SBX ",\"command\":\"ls\",\"shell\":\"sh\"}", "shell",
	    "~shell: unknown field (the fields are: sandbox_id, command,");
}

static void
test_tools_sandbox_id_shape(void **state)
{
	static const char *const wrong[] = {
		"sbx-123",
		"sbx-0123456789ABCDEF",
		"sbx-0123456789abcdef0",
		"sbx-0123456789abcde",
		"xbx-0123456789abcdef",
		" sbx-0123456789abcdef",
		"sbx-0123456789abcdef ",
		"sbx-0123456789abcdef\\n",
		"sbx_0123456789abcdef",
		"sbx-0123456789abcde-",
		"",
		"SBX-0123456789abcdef",
	};
	static const char *const tools_with_id[] = { "run_command", "get_sandbox",
		"destroy_sandbox", "extend_sandbox", "read_file", "write_file", "list_files",
		"expose_port" };
	char value[200];

	(void)state;
	for (size_t t = 0; t < sizeof(tools_with_id) / sizeof(tools_with_id[0]); t++) {
		const json_t *s = input_schema(tools_with_id[t]);
		const json_t *p = json_object_get(json_object_get(s, "properties"), "sandbox_id");
		/* Each tool names the id through the same resolved schema. */
		assert_string_equal(json_string_value(json_object_get(p, "pattern")),
		    "^sbx-[a-z0-9]{16}$");
		for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
			snprintf(value, sizeof(value), "{\"sandbox_id\":\"%s\"}", wrong[i]);
			/* Validate only the property: the other required fields
			 * differ per tool. */
			struct err e;
			json_t *v = load(value);
			err_clear(&e);
			assert_int_equal(jsv_validate(p, json_object_get(v, "sandbox_id"),
					     "sandbox_id", &e),
			    -1);
			assert_int_equal(e.kind, ERR_INVALID);
			assert_string_equal(e.field, "sandbox_id");
			assert_string_equal(e.msg,
			    "sandbox_id: does not match the pattern ^sbx-[a-z0-9]{16}$ (Sandbox id from create_sandbox.)");
			json_decref(v);
		}
	}
	bad_s(input_schema("get_sandbox"), "{\"sandbox_id\":\"sbx-123\"}", "sandbox_id",
	    "sandbox_id: does not match the pattern ^sbx-[a-z0-9]{16}$ (Sandbox id from create_sandbox.)");
	bad_s(input_schema("get_sandbox"), "{\"sandbox_id\":7}", "sandbox_id",
	    "sandbox_id: must be string, not integer");
	ok_s(input_schema("get_sandbox"), "{\"sandbox_id\":\"sbx-0123456789abcdef\"}");
	ok_s(input_schema("get_sandbox"), "{\"sandbox_id\":\"sbx-zzzzzzzzzzzzzzzz\"}");
}

static void
test_tools_other_schemas(void **state)
{
	(void)state;
	ok_s(input_schema("write_file"), "{" SBX ",\"path\":\"a.txt\",\"mode\":\"0755\"}");
	ok_s(input_schema("write_file"), "{" SBX ",\"path\":\"a.txt\",\"mode\":\"644\"}");
	bad_s(input_schema("write_file"), "{" SBX ",\"path\":\"a\",\"mode\":\"0855\"}", "mode",
	    "~mode: does not match the pattern");
	bad_s(input_schema("write_file"), "{" SBX ",\"path\":\"a\",\"mode\":\"07555\"}", "mode",
	    "~mode: does not match the pattern");
	bad_s(input_schema("write_file"), "{" SBX ",\"path\":\"\"}", "path",
	    "path: must be at least 1 character long");
	bad_s(input_schema("write_file"), "{" SBX "}", "path", "path: required field is missing");
	bad_s(input_schema("read_file"), "{" SBX ",\"path\":\"f\",\"encoding\":\"hex\"}",
	    "encoding", "encoding: must be one of: text, base64");
	bad_s(input_schema("read_file"), "{" SBX ",\"path\":\"f\",\"offset\":-1}", "offset",
	    "offset: must be at least 0");
	bad_s(input_schema("expose_port"), "{" SBX ",\"port\":0}", "port",
	    "port: must be at least 1");
	bad_s(input_schema("expose_port"), "{" SBX ",\"port\":65536}", "port",
	    "port: must be at most 65535");
	ok_s(input_schema("expose_port"), "{" SBX ",\"port\":8080,\"public\":false}");
	ok_s(input_schema("list_sandboxes"), "{\"state\":\"live\",\"limit\":100}");
	bad_s(input_schema("list_sandboxes"), "{\"state\":\"zombie\"}", "state",
	    "state: must be one of: creating, running, pausing, paused, resuming, destroying,"
	    " destroyed, failed, live");
	bad_s(input_schema("extend_sandbox"), "{" SBX ",\"minutes\":0}", "minutes",
	    "minutes: must be at least 1");
	ok_s(input_schema("extend_sandbox"), "{" SBX ",\"minutes\":60}");
	bad_s(input_schema("extend_sandbox"), "{" SBX ",\"minutes\":60.0}", "minutes",
	    "minutes: " REAL);
	bad_s(input_schema("get_usage"), "{\"limit\":1.0}", "limit", "limit: " REAL);
	bad_s(input_schema("read_file"), "{" SBX ",\"path\":\"f\",\"offset\":0.0}", "offset",
	    "offset: " REAL);
	ok_s(input_schema("get_usage"), "{}");
	ok_s(input_schema("get_service_info"), "{}");
	bad_s(input_schema("get_service_info"), "{\"x\":1}", "x",
	    "x: unknown field (none are taken here)");
}

/* "%g" prints 4194304 as 4.1943e+06, which is not the limit. */
static void
test_tools_large_limit_message(void **state)
{
	(void)state;
	bad_s(input_schema("run_command"),
	    "{" SBX ",\"command\":\"ls\",\"max_output_bytes\":4194305}", "max_output_bytes",
	    "max_output_bytes: must be at most 4194304");
}

static int
contains_key(const json_t *node, const char *key)
{
	const char *k;
	const json_t *v;
	size_t i;

	if (json_is_object(node)) {
		json_object_foreach((json_t *)node, k, v) {
			if (strcmp(k, key) == 0 || contains_key(v, key))
				return 1;
		}
	} else if (json_is_array(node)) {
		json_array_foreach(node, i, v)
			if (contains_key(v, key))
				return 1;
	}
	return 0;
}

static void
test_tools_self_contained(void **state)
{
	const json_t *tools = json_object_get(catalogue, "tools");
	const json_t *t;
	size_t i, len;
	const char *text;

	(void)state;
	assert_true(json_is_array(tools));
	assert_int_equal(json_array_size(tools), tools_count());
	assert_false(contains_key(catalogue, "$ref"));
	assert_false(contains_key(catalogue, "$defs"));
	text = tools_list_json(&len);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	assert_null(strstr(text, "$ref"));
	assert_null(strstr(text, "#/$defs"));

	json_array_foreach(tools, i, t) {
		const char *name = json_string_value(json_object_get(t, "name"));
		const json_t *in = json_object_get(t, "inputSchema");
		const json_t *props = json_object_get(in, "properties");
		const json_t *r;
		size_t j;

		assert_non_null(name);
		assert_string_equal(name, tools_name_at(i));
		assert_false(contains_key(t, "$ref"));
		/* Every input schema is a strict object schema... */
		assert_string_equal(json_string_value(json_object_get(in, "type")), "object");
		if (!json_is_false(json_object_get(in, "additionalProperties")))
			fail_msg("%s: inputSchema allows unknown fields", name);
		/* ... whose required fields are declared, with a type. */
		json_array_foreach(json_object_get(in, "required"), j, r) {
			const json_t *p = json_object_get(props, json_string_value(r));
			if (p == NULL || json_object_get(p, "type") == NULL)
				fail_msg("%s: required %s not declared with a type", name,
				    json_string_value(r));
		}
	}
	/* A $ref with siblings: the definition plus the sibling. */
	const json_t *path = json_object_get(json_object_get(input_schema("list_files"),
						 "properties"),
	    "path");
	assert_string_equal(json_string_value(json_object_get(path, "type")), "string");
	assert_int_equal(json_integer_value(json_object_get(path, "minLength")), 1);
	assert_string_equal(json_string_value(json_object_get(path, "default")), "/home/sandbox");
	/* A resolved output schema. */
	const json_t *out = json_object_get(tool("get_sandbox"), "outputSchema");
	assert_string_equal(json_string_value(json_object_get(out, "type")), "object");
	assert_non_null(json_object_get(json_object_get(out, "properties"), "sandbox_id"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_type_simple),
		cmocka_unit_test(test_type_integer),
		cmocka_unit_test(test_type_number),
		cmocka_unit_test(test_type_array_of_types),
		cmocka_unit_test(test_required),
		cmocka_unit_test(test_additional_properties_false),
		cmocka_unit_test(test_additional_properties_schema),
		cmocka_unit_test(test_property_names),
		cmocka_unit_test(test_enum),
		cmocka_unit_test(test_any_of),
		cmocka_unit_test(test_minimum_maximum),
		cmocka_unit_test(test_string_length_code_points),
		cmocka_unit_test(test_pattern),
		cmocka_unit_test(test_bad_pattern_is_internal),
		cmocka_unit_test(test_items),
		cmocka_unit_test(test_max_properties),
		cmocka_unit_test(test_nested_paths),
		cmocka_unit_test(test_explicit_base_path),
		cmocka_unit_test(test_nul_refused),
		cmocka_unit_test(test_nul_refused_everywhere),
		cmocka_unit_test(test_depth_limit),
		/* The real catalogue, loaded once by the group setup. */
		cmocka_unit_test(test_tools_create_sandbox),
		cmocka_unit_test(test_tools_run_command),
		cmocka_unit_test(test_tools_sandbox_id_shape),
		cmocka_unit_test(test_tools_other_schemas),
		cmocka_unit_test(test_tools_large_limit_message),
		cmocka_unit_test(test_tools_self_contained),
	};

	/* One group, so the runner's summary counts every test. */
	return cmocka_run_group_tests(tests, setup_tools, teardown_tools);
}
