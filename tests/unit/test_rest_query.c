/* test_rest_query.c - REST query strings: parsing, strict integers and
 * typing by a tool's inputSchema (server/rest_query.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/rest_query.h"

static json_t *
parse_ok(const char *qs)
{
	struct err e;
	json_t *q;

	err_clear(&e);
	q = rest_query_parse(qs, &e);
	if (q == NULL)
		fail_msg("[%s]: %s", qs, e.msg);
	return q;
}

static void
parse_fails(const char *qs, const char *field)
{
	struct err e;
	json_t *q;

	err_clear(&e);
	q = rest_query_parse(qs, &e);
	if (q != NULL) {
		json_decref(q);
		fail_msg("[%s] parsed", qs);
	}
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.field, field);
}

static void
expect_str(const json_t *q, const char *name, const char *value)
{
	const char *got = json_string_value(json_object_get(q, name));

	if (got == NULL)
		fail_msg("%s missing", name);
	assert_string_equal(got, value);
}

static void
test_parse_basic(void **state)
{
	json_t *q;

	(void)state;
	q = parse_ok("");
	assert_int_equal(json_object_size(q), 0);
	json_decref(q);
	q = parse_ok(NULL);
	assert_int_equal(json_object_size(q), 0);
	json_decref(q);
	q = parse_ok("limit=5&cursor=abc");
	assert_int_equal(json_object_size(q), 2);
	expect_str(q, "limit", "5");
	expect_str(q, "cursor", "abc");
	json_decref(q);
	/* Empty pieces are skipped; a bare name gets "". */
	q = parse_ok("&a=1&&b&c=&");
	assert_int_equal(json_object_size(q), 3);
	expect_str(q, "a", "1");
	expect_str(q, "b", "");
	expect_str(q, "c", "");
	json_decref(q);
	/* Only the first '=' splits. */
	q = parse_ok("x=a=b");
	expect_str(q, "x", "a=b");
	json_decref(q);
}

static void
test_parse_decoding(void **state)
{
	json_t *q;

	(void)state;
	q = parse_ok("path=%2Fhome%2Fsandbox%2Fa%20b+c%2Bd&n%61me=%C3%A9");
	expect_str(q, "path", "/home/sandbox/a b c+d");
	expect_str(q, "name", "\xC3\xA9");
	json_decref(q);
	q = parse_ok("p=%7e%7E");
	expect_str(q, "p", "~~");
	json_decref(q);
}

static void
test_parse_refusals(void **state)
{
	char many[400] = "";

	(void)state;
	parse_fails("a=1&a=2", "a");
	parse_fails("=1", "query");
	parse_fails("a=%zz", "a");
	parse_fails("a=%4", "a");
	parse_fails("a=%", "a");
	parse_fails("a=x%00y", "a");
	parse_fails("%00=1", "query");
	parse_fails("a=%C3", "a"); /* cut UTF-8 */
	parse_fails("a=%FF", "a");
	for (int i = 0; i < REST_QUERY_MAX_PARAMS + 1; i++) {
		size_t n = strlen(many);
		snprintf(many + n, sizeof(many) - n, "p%d=1&", i);
	}
	parse_fails(many, "query");
}

static void
test_parse_body(void **state)
{
	static const char nul[] = "a=1\0&b=2";
	struct err e;
	json_t *q;

	(void)state;
	err_clear(&e);
	q = rest_query_parse_body("a=1&b=x+y&rest", 9, &e); /* only its first 9 bytes */
	assert_non_null(q);
	assert_string_equal(json_string_value(json_object_get(q, "b")), "x y");
	assert_null(json_object_get(q, "rest"));
	json_decref(q);
	q = rest_query_parse_body(NULL, 0, &e);
	assert_non_null(q);
	assert_int_equal(json_object_size(q), 0);
	json_decref(q);
	assert_null(rest_query_parse_body(nul, sizeof(nul) - 1, &e));
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.field, "form");
}

static void
test_int(void **state)
{
	long long v = 42;

	(void)state;
	assert_int_equal(rest_query_int("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(rest_query_int("17", &v), 0);
	assert_int_equal(v, 17);
	assert_int_equal(rest_query_int("-3", &v), 0);
	assert_int_equal(v, -3);
	assert_int_equal(rest_query_int("9223372036854775807", &v), 0);
	assert_true(v == 9223372036854775807LL);
	v = 42;
	assert_int_equal(rest_query_int("", &v), -1);
	assert_int_equal(rest_query_int("-", &v), -1);
	assert_int_equal(rest_query_int("+1", &v), -1);
	assert_int_equal(rest_query_int(" 1", &v), -1);
	assert_int_equal(rest_query_int("1 ", &v), -1);
	assert_int_equal(rest_query_int("1x", &v), -1);
	assert_int_equal(rest_query_int("0x10", &v), -1);
	assert_int_equal(rest_query_int("1e3", &v), -1);
	assert_int_equal(rest_query_int("1.0", &v), -1);
	assert_int_equal(rest_query_int("--1", &v), -1);
	assert_int_equal(rest_query_int("9223372036854775808", &v), -1);
	assert_int_equal(rest_query_int(NULL, &v), -1);
	assert_int_equal(v, 42);
}

static const char *const allowed[] = { "limit", "cursor", "flag", "state", NULL };

static json_t *
schema(void)
{
	return json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:[ss]}}}", "type", "object",
	    "properties", "limit", "type", "integer", "cursor", "type", "string", "flag", "type",
	    "boolean", "state", "type", "null", "string");
}

static json_t *
args_of(const char *qs, struct err *e)
{
	json_t *q, *s = schema(), *a;

	err_clear(e);
	q = rest_query_parse(qs, e);
	assert_non_null(q);
	a = rest_query_args(q, allowed, s, e);
	json_decref(q);
	json_decref(s);
	return a;
}

static void
test_args_typed(void **state)
{
	struct err e;
	json_t *a;

	(void)state;
	a = args_of("limit=20&cursor=7&flag=true&state=live", &e);
	assert_non_null(a);
	assert_true(json_is_integer(json_object_get(a, "limit")));
	assert_int_equal(json_integer_value(json_object_get(a, "limit")), 20);
	/* A string property stays a string even when it looks like a number. */
	expect_str(a, "cursor", "7");
	assert_true(json_is_true(json_object_get(a, "flag")));
	expect_str(a, "state", "live");
	json_decref(a);
	a = args_of("flag=false", &e);
	assert_true(json_is_false(json_object_get(a, "flag")));
	json_decref(a);
}

static void
test_args_refusals(void **state)
{
	struct err e;
	json_t *a;

	(void)state;
	a = args_of("limit=abc", &e);
	assert_null(a);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.field, "limit");
	assert_non_null(strstr(e.msg, "not an integer"));
	a = args_of("limit=", &e);
	assert_null(a);
	assert_string_equal(e.field, "limit");
	a = args_of("limit=5.5", &e);
	assert_null(a);
	a = args_of("flag=1", &e);
	assert_null(a);
	assert_string_equal(e.field, "flag");
	a = args_of("flag=TRUE", &e);
	assert_null(a);
	a = args_of("other=1", &e);
	assert_null(a);
	assert_string_equal(e.field, "other");
	assert_non_null(strstr(e.msg, "unknown query parameter"));
}

static void
test_args_none_allowed(void **state)
{
	struct err e;
	json_t *q, *a;

	(void)state;
	err_clear(&e);
	q = rest_query_parse("x=1", &e);
	a = rest_query_args(q, NULL, NULL, &e);
	assert_null(a);
	assert_string_equal(e.field, "x");
	json_decref(q);
	q = rest_query_parse("", &e);
	a = rest_query_args(q, NULL, NULL, &e);
	assert_non_null(a);
	assert_int_equal(json_object_size(a), 0);
	json_decref(a);
	json_decref(q);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_basic),
		cmocka_unit_test(test_parse_decoding),
		cmocka_unit_test(test_parse_refusals),
		cmocka_unit_test(test_parse_body),
		cmocka_unit_test(test_int),
		cmocka_unit_test(test_args_typed),
		cmocka_unit_test(test_args_refusals),
		cmocka_unit_test(test_args_none_allowed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
