/* test_jsonrpc.c - JSON-RPC 2.0 parsing, classification and reply shapes
 * (server/jsonrpc.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/jsonrpc.h"

static json_t *
load(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);

	if (v == NULL)
		fail_msg("test JSON does not load: %s: %s", text, jerr.text);
	return v;
}

static int
starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- rpc_parse ---- */

static void
test_parse_valid(void **state)
{
	static const char body[] =
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{}}";
	char msg[200] = "untouched";
	json_t *v;

	(void)state;
	v = rpc_parse(body, strlen(body), msg, sizeof(msg));
	assert_non_null(v);
	assert_true(json_is_object(v));
	assert_string_equal(json_string_value(json_object_get(v, "method")), "ping");
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 1);
	json_decref(v);

	/* A batch (array) parses too. */
	v = rpc_parse("[{\"a\":1},{\"b\":2}]", 17, msg, sizeof(msg));
	assert_non_null(v);
	assert_true(json_is_array(v));
	assert_int_equal(json_array_size(v), 2);
	json_decref(v);
}

static void
test_parse_respects_length(void **state)
{
	static const char body[] = "{\"a\":1}GARBAGE";
	char msg[200];
	json_t *v;

	(void)state;
	/* Only the first `len` bytes are the body. */
	v = rpc_parse(body, 7, msg, sizeof(msg));
	assert_non_null(v);
	assert_int_equal(json_integer_value(json_object_get(v, "a")), 1);
	json_decref(v);
	/* The whole buffer has trailing garbage. */
	v = rpc_parse(body, strlen(body), msg, sizeof(msg));
	assert_null(v);
	assert_true(starts_with(msg, "Parse error: "));
}

static void
test_parse_empty(void **state)
{
	char msg[200] = "";

	(void)state;
	assert_null(rpc_parse("", 0, msg, sizeof(msg)));
	assert_string_equal(msg, "Parse error: empty body");
	/* len 0 wins even when the pointer has data behind it. */
	msg[0] = '\0';
	assert_null(rpc_parse("{}", 0, msg, sizeof(msg)));
	assert_string_equal(msg, "Parse error: empty body");
}

static void
test_parse_malformed(void **state)
{
	static const char *const bad[] = {
		"{",
		"{\"a\":}",
		"{\"a\" 1}",
		"[1,2",
		"{'a':1}",
		"{\"a\":1,}",
		"nul",
		"   ",
		"{\"a\":tru}",
	};
	char msg[200];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msg[0] = '\0';
		json_t *v = rpc_parse(bad[i], strlen(bad[i]), msg, sizeof(msg));
		if (v != NULL)
			fail_msg("parsed malformed body %s", bad[i]);
		assert_true(starts_with(msg, "Parse error: "));
		/* The position is reported. */
		assert_non_null(strstr(msg, "(line 1, column "));
	}
}

static void
test_parse_invalid_utf8(void **state)
{
	static const char *const bad[] = {
		"{\"a\":\"\xff\"}",         /* never valid */
		"{\"a\":\"\xc0\xaf\"}",     /* overlong '/' */
		"{\"a\":\"\xe2\x82\"}",     /* truncated sequence */
		"{\"a\":\"\xed\xa0\x80\"}", /* encoded surrogate */
		"{\"\xff\":1}",             /* in a key */
		"{\"a\":\"\\ud800\"}",      /* lone surrogate escape */
	};
	char msg[200];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msg[0] = '\0';
		json_t *v = rpc_parse(bad[i], strlen(bad[i]), msg, sizeof(msg));
		if (v != NULL)
			fail_msg("accepted invalid UTF-8 case %zu", i);
		assert_true(starts_with(msg, "Parse error: "));
	}
}

static void
test_parse_deep_nesting(void **state)
{
	const size_t n = 100000;
	char *body = malloc(2 * n);
	char msg[200];

	(void)state;
	assert_non_null(body);
	memset(body, '[', n);
	memset(body + n, ']', n);
	/* Unterminated and terminated: both far too deep, neither crashes. */
	msg[0] = '\0';
	assert_null(rpc_parse(body, n, msg, sizeof(msg)));
	assert_true(starts_with(msg, "Parse error: "));
	assert_non_null(strstr(msg, "depth"));
	msg[0] = '\0';
	assert_null(rpc_parse(body, 2 * n, msg, sizeof(msg)));
	assert_true(starts_with(msg, "Parse error: "));
	assert_non_null(strstr(msg, "depth"));
	/* Moderate nesting is fine. */
	memset(body, '[', 100);
	memset(body + 100, ']', 100);
	json_t *v = rpc_parse(body, 200, msg, sizeof(msg));
	assert_non_null(v);
	json_decref(v);
	free(body);
}

static void
test_parse_nul_in_string(void **state)
{
	static const char body[] =
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"s\":\"a\\u0000b\"}}";
	char msg[200];
	json_t *v, *s;

	(void)state;
	v = rpc_parse(body, strlen(body), msg, sizeof(msg));
	assert_non_null(v);
	s = json_object_get(json_object_get(v, "params"), "s");
	assert_true(json_is_string(s));
	assert_int_equal(json_string_length(s), 3);
	assert_memory_equal(json_string_value(s), "a\0b", 3);
	json_decref(v);
}

static void
test_parse_small_msg_buffer(void **state)
{
	char msg[8];

	(void)state;
	memset(msg, 'X', sizeof(msg));
	assert_null(rpc_parse("{", 1, msg, sizeof(msg)));
	/* Truncated, but terminated within the buffer. */
	assert_string_equal(msg, "Parse e");
}

/* JSON-RPC 2.0: -32700 is for invalid JSON; `1` is valid JSON and should
 * come back parsed so that rpc_classify answers -32600. */
static void
test_parse_scalar_is_json(void **state)
{
	char msg[200];
	json_t *v;

	(void)state;
	v = rpc_parse("1", 1, msg, sizeof(msg));
	assert_non_null(v);
	json_decref(v);
}

/* ---- rpc_classify ---- */

static void
classify_text(const char *text, json_t **holder, struct rpc_msg *out)
{
	*holder = load(text);
	memset(out, 0x5a, sizeof(*out));
	rpc_classify(*holder, out);
}

static void
expect_invalid(const char *text, const char *why)
{
	json_t *m;
	struct rpc_msg r;

	classify_text(text, &m, &r);
	if (r.kind != RPC_INVALID)
		fail_msg("not invalid: %s (kind %d)", text, (int)r.kind);
	assert_int_equal(r.err_code, RPC_INVALID_REQUEST);
	if (why != NULL && strcmp(r.err_msg, why) != 0)
		fail_msg("%s: got \"%s\", want \"%s\"", text, r.err_msg, why);
	assert_null(r.method);
	assert_null(r.params);
	json_decref(m);
}

static void
test_classify_request(void **state)
{
	json_t *m;
	struct rpc_msg r;

	(void)state;
	classify_text("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\","
		      "\"params\":{\"cursor\":\"c\"}}",
	    &m, &r);
	assert_int_equal(r.kind, RPC_REQUEST);
	assert_ptr_equal(r.id, json_object_get(m, "id"));
	assert_int_equal(json_integer_value(r.id), 7);
	assert_string_equal(r.method, "tools/list");
	assert_ptr_equal(r.params, json_object_get(m, "params"));
	assert_int_equal(r.err_code, 0);
	assert_string_equal(r.err_msg, "");
	json_decref(m);

	/* String id, array params. */
	classify_text("{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"m\","
		      "\"params\":[1,2]}",
	    &m, &r);
	assert_int_equal(r.kind, RPC_REQUEST);
	assert_string_equal(json_string_value(r.id), "abc");
	assert_true(json_is_array(r.params));
	json_decref(m);

	/* No params at all; negative and 0 ids; an empty string id. */
	static const char *const ok[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"m\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":-5,\"method\":\"m\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"m\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":\"\",\"method\":\"m\"}",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		classify_text(ok[i], &m, &r);
		if (r.kind != RPC_REQUEST)
			fail_msg("not a request: %s", ok[i]);
		assert_non_null(r.id);
		assert_null(r.params);
		assert_string_equal(r.method, "m");
		json_decref(m);
	}
}

static void
test_classify_notification(void **state)
{
	json_t *m;
	struct rpc_msg r;

	(void)state;
	classify_text("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, &r);
	assert_int_equal(r.kind, RPC_NOTIFICATION);
	assert_null(r.id);
	assert_string_equal(r.method, "notifications/initialized");
	assert_null(r.params);
	json_decref(m);

	classify_text("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
		      "\"params\":{\"requestId\":3}}",
	    &m, &r);
	assert_int_equal(r.kind, RPC_NOTIFICATION);
	assert_null(r.id);
	assert_int_equal(json_integer_value(json_object_get(r.params, "requestId")), 3);
	json_decref(m);
}

static void
test_classify_response(void **state)
{
	json_t *m;
	struct rpc_msg r;

	(void)state;
	classify_text("{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}", &m, &r);
	assert_int_equal(r.kind, RPC_RESPONSE);
	assert_int_equal(json_integer_value(r.id), 4);
	assert_null(r.method);
	json_decref(m);

	classify_text("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":"
		      "{\"code\":-1,\"message\":\"no\"}}",
	    &m, &r);
	assert_int_equal(r.kind, RPC_RESPONSE);
	assert_string_equal(json_string_value(r.id), "x");
	assert_null(r.method);
	json_decref(m);

	/* A result without an id cannot be matched to anything. */
	expect_invalid("{\"jsonrpc\":\"2.0\",\"result\":{}}",
	    "Invalid Request: a response needs an \"id\"");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"error\":{\"code\":1,\"message\":\"m\"}}",
	    "Invalid Request: a response needs an \"id\"");
}

static void
test_classify_bad_version(void **state)
{
	static const char *const bad[] = {
		"{\"id\":1,\"method\":\"m\"}",
		"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"m\"}",
		"{\"jsonrpc\":\"2.00\",\"id\":1,\"method\":\"m\"}",
		"{\"jsonrpc\":2.0,\"id\":1,\"method\":\"m\"}",
		"{\"jsonrpc\":2,\"id\":1,\"method\":\"m\"}",
		"{\"jsonrpc\":null,\"id\":1,\"method\":\"m\"}",
		"{\"jsonrpc\":\"\",\"id\":1,\"method\":\"m\"}",
		"{\"jsonrpc\":\" 2.0\",\"id\":1,\"method\":\"m\"}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_invalid(bad[i], "Invalid Request: \"jsonrpc\" must be \"2.0\"");
}

/* "2.0\u00002" is not "2.0", but strcmp stops at the NUL (the method check
 * guards against exactly this; the version check does not). */
static void
test_classify_version_with_nul(void **state)
{
	(void)state;
	expect_invalid("{\"jsonrpc\":\"2.0\\u0000x\",\"id\":1,\"method\":\"m\"}",
	    "Invalid Request: \"jsonrpc\" must be \"2.0\"");
}

static void
test_classify_not_object(void **state)
{
	static const char *const bad[] = { "[]", "[{\"jsonrpc\":\"2.0\"}]", "1", "\"s\"", "null",
		"true" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_invalid(bad[i], "Invalid Request: a message must be a JSON object");
	/* NULL (nothing parsed) is not an object either. */
	struct rpc_msg r;
	rpc_classify(NULL, &r);
	assert_int_equal(r.kind, RPC_INVALID);
	assert_int_equal(r.err_code, RPC_INVALID_REQUEST);
	assert_null(r.id);
}

static void
test_classify_bad_ids(void **state)
{
	static const char *const ids[] = { "null", "1.5", "1.0", "true", "false", "{}", "{\"a\":1}",
		"[]", "[1]" };
	char text[200];

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		json_t *m;
		struct rpc_msg r;

		snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"m\"}",
		    ids[i]);
		classify_text(text, &m, &r);
		if (r.kind != RPC_INVALID)
			fail_msg("id %s accepted", ids[i]);
		assert_int_equal(r.err_code, RPC_INVALID_REQUEST);
		assert_string_equal(r.err_msg,
		    "Invalid Request: \"id\" must be a string or an integer");
		/* An unusable id is never handed back. */
		assert_null(r.id);
		json_decref(m);

		/* Same for responses. */
		snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}",
		    ids[i]);
		classify_text(text, &m, &r);
		assert_int_equal(r.kind, RPC_INVALID);
		assert_null(r.id);
		json_decref(m);
	}
}

static void
test_classify_bad_method(void **state)
{
	static const char *const bad[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":null}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":[\"m\"]}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":{}}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\\u0000x\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":true}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_invalid(bad[i], "Invalid Request: \"method\" must be a non-empty string");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1}", "Invalid Request: missing \"method\"");
	expect_invalid("{\"jsonrpc\":\"2.0\"}", "Invalid Request: missing \"method\"");
}

static void
test_classify_bad_params(void **state)
{
	static const char *const bad[] = { "1", "\"x\"", "true", "null", "2.5" };
	char text[200];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
		    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":%s}", bad[i]);
		expect_invalid(text, "Invalid Request: \"params\" must be an object or an array");
		snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":%s}",
		    bad[i]);
		expect_invalid(text, "Invalid Request: \"params\" must be an object or an array");
	}
}

static void
test_classify_invalid_keeps_usable_id(void **state)
{
	static const char *const cases[] = {
		"{\"id\":42,\"method\":\"m\"}", /* no jsonrpc */
		"{\"jsonrpc\":\"1.0\",\"id\":42,\"method\":\"m\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":42}", /* no method */
		"{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"m\",\"params\":3}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *m;
		struct rpc_msg r;

		classify_text(cases[i], &m, &r);
		if (r.kind != RPC_INVALID)
			fail_msg("not invalid: %s", cases[i]);
		assert_ptr_equal(r.id, json_object_get(m, "id"));
		assert_int_equal(json_integer_value(r.id), 42);
		json_decref(m);
	}
	/* A string id is kept too. */
	json_t *m;
	struct rpc_msg r;
	classify_text("{\"jsonrpc\":\"3.0\",\"id\":\"req-1\",\"method\":\"m\"}", &m, &r);
	assert_int_equal(r.kind, RPC_INVALID);
	assert_string_equal(json_string_value(r.id), "req-1");
	json_decref(m);
}

static void
test_id_valid(void **state)
{
	json_t *v;

	(void)state;
	assert_false(rpc_id_valid(NULL));
	v = json_integer(1);
	assert_true(rpc_id_valid(v));
	json_decref(v);
	v = json_string("a");
	assert_true(rpc_id_valid(v));
	json_decref(v);
	v = json_real(1.0);
	assert_false(rpc_id_valid(v));
	json_decref(v);
	assert_false(rpc_id_valid(json_null()));
	assert_false(rpc_id_valid(json_true()));
	v = json_object();
	assert_false(rpc_id_valid(v));
	json_decref(v);
	v = json_array();
	assert_false(rpc_id_valid(v));
	json_decref(v);
}

/* ---- replies ---- */

static void
assert_json(json_t *got, const char *want_text)
{
	json_t *want = load(want_text);

	assert_non_null(got);
	if (!json_equal(got, want)) {
		char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
		fail_msg("got %s, want %s", g ? g : "?", want_text);
	}
	json_decref(want);
}

static void
test_result_shape(void **state)
{
	json_t *id = json_integer(7), *r;
	char *text;

	(void)state;
	r = rpc_result(id, json_pack("{s:i}", "n", 1));
	assert_json(r, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"n\":1}}");
	/* The id is borrowed (the reply holds its own reference). */
	assert_int_equal(id->refcount, 2);
	text = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(text, "{\"id\":7,\"jsonrpc\":\"2.0\",\"result\":{\"n\":1}}");
	free(text);
	json_decref(r);
	assert_int_equal(id->refcount, 1);
	json_decref(id);

	/* Missing id becomes null; missing result becomes {}. */
	r = rpc_result(NULL, NULL);
	assert_json(r, "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}");
	json_decref(r);

	id = json_string("abc");
	r = rpc_result(id, json_array());
	assert_json(r, "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"result\":[]}");
	json_decref(r);
	json_decref(id);
}

static void
test_error_shape(void **state)
{
	json_t *id = json_string("q1"), *r;

	(void)state;
	r = rpc_error(id, RPC_METHOD_NOT_FOUND, "Method not found", NULL);
	assert_json(r,
	    "{\"jsonrpc\":\"2.0\",\"id\":\"q1\",\"error\":"
	    "{\"code\":-32601,\"message\":\"Method not found\"}}");
	assert_null(json_object_get(json_object_get(r, "error"), "data"));
	assert_null(json_object_get(r, "result"));
	json_decref(r);
	assert_int_equal(id->refcount, 1);
	json_decref(id);

	r = rpc_error(NULL, RPC_PARSE_ERROR, "Parse error: x", json_pack("{s:s}", "detail", "d"));
	assert_json(r,
	    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":"
	    "{\"code\":-32700,\"message\":\"Parse error: x\",\"data\":{\"detail\":\"d\"}}}");
	json_decref(r);

	/* Codes as the spec numbers them. */
	assert_int_equal(RPC_PARSE_ERROR, -32700);
	assert_int_equal(RPC_INVALID_REQUEST, -32600);
	assert_int_equal(RPC_METHOD_NOT_FOUND, -32601);
	assert_int_equal(RPC_INVALID_PARAMS, -32602);
	assert_int_equal(RPC_INTERNAL_ERROR, -32603);
}

static void
test_notification_shape(void **state)
{
	json_t *r;

	(void)state;
	r = rpc_notification("notifications/progress",
	    json_pack("{s:s, s:i}", "progressToken", "t", "progress", 3));
	assert_json(r,
	    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
	    "\"params\":{\"progressToken\":\"t\",\"progress\":3}}");
	assert_null(json_object_get(r, "id"));
	json_decref(r);

	r = rpc_notification("notifications/tools/list_changed", NULL);
	assert_json(r,
	    "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/tools/list_changed\",\"params\":{}}");
	json_decref(r);
}

/* A progress notification carries its total and message only when given
 * (a total above 0, a message not NULL). */
static void
test_progress_shape(void **state)
{
	json_t *token = json_string("t"), *r;

	(void)state;
	r = rpc_progress(token, 1.5, 0, NULL);
	assert_json(r,
	    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
	    "\"params\":{\"progressToken\":\"t\",\"progress\":1.5}}");
	json_decref(r);
	r = rpc_progress(token, 2, 4, "half");
	assert_json(r,
	    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
	    "\"params\":{\"progressToken\":\"t\",\"progress\":2.0,\"total\":4.0,"
	    "\"message\":\"half\"}}");
	json_decref(r);
	json_decref(token);
}

/* A reply built here classifies back as what it is. */
static void
test_roundtrip(void **state)
{
	json_t *id = json_integer(11), *r;
	struct rpc_msg m;

	(void)state;
	r = rpc_result(id, NULL);
	rpc_classify(r, &m);
	assert_int_equal(m.kind, RPC_RESPONSE);
	assert_int_equal(json_integer_value(m.id), 11);
	json_decref(r);

	r = rpc_error(id, RPC_INTERNAL_ERROR, "boom", NULL);
	rpc_classify(r, &m);
	assert_int_equal(m.kind, RPC_RESPONSE);
	json_decref(r);

	r = rpc_notification("x/y", NULL);
	rpc_classify(r, &m);
	assert_int_equal(m.kind, RPC_NOTIFICATION);
	assert_string_equal(m.method, "x/y");
	json_decref(r);
	json_decref(id);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_valid),
		cmocka_unit_test(test_parse_respects_length),
		cmocka_unit_test(test_parse_empty),
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_parse_invalid_utf8),
		cmocka_unit_test(test_parse_deep_nesting),
		cmocka_unit_test(test_parse_nul_in_string),
		cmocka_unit_test(test_parse_small_msg_buffer),
		cmocka_unit_test(test_parse_scalar_is_json),
		cmocka_unit_test(test_classify_request),
		cmocka_unit_test(test_classify_notification),
		cmocka_unit_test(test_classify_response),
		cmocka_unit_test(test_classify_bad_version),
		cmocka_unit_test(test_classify_version_with_nul),
		cmocka_unit_test(test_classify_not_object),
		cmocka_unit_test(test_classify_bad_ids),
		cmocka_unit_test(test_classify_bad_method),
		cmocka_unit_test(test_classify_bad_params),
		cmocka_unit_test(test_classify_invalid_keeps_usable_id),
		cmocka_unit_test(test_id_valid),
		cmocka_unit_test(test_result_shape),
		cmocka_unit_test(test_error_shape),
		cmocka_unit_test(test_notification_shape),
		cmocka_unit_test(test_progress_shape),
		cmocka_unit_test(test_roundtrip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
