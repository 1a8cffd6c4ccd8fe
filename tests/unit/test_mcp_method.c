/* test_mcp_method.c - one MCP message over an endpoint's method table
 * (base/mcpmeth.h): errors, responses, notifications, cancellation,
 * the method a request names, and "Method not found". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/mcpmeth.h"

/* What the table's functions saw. */
struct seen {
	int seen;
	int cancelled;
	json_int_t cancelled_id;
	const char *called; /* the entry that answered */
	char method[64];    /* the method it answered */
};

static json_t *
load(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

	if (v == NULL)
		fail_msg("test JSON does not load: %s: %s", text, jerr.text);
	return v;
}

static json_t *
answer(void *ctx, struct rpc_msg *msg, const char *entry)
{
	struct seen *s = ctx;

	s->called = entry;
	snprintf(s->method, sizeof(s->method), "%s", msg->method);
	return rpc_result(msg->id, json_string(entry));
}

static json_t *
m_list(void *ctx, struct rpc_msg *msg)
{
	json_t *bad = mcpmeth_one_page(msg);

	return bad ? bad : answer(ctx, msg, "list");
}

static json_t *
m_tasks(void *ctx, struct rpc_msg *msg)
{
	return answer(ctx, msg, "tasks");
}

static json_t *
m_queued(void *ctx, struct rpc_msg *msg)
{
	json_decref(answer(ctx, msg, "queued"));
	return NULL; /* answered later, as a queued call is */
}

static void
on_seen(void *ctx, const struct rpc_msg *msg)
{
	(void)msg;
	((struct seen *)ctx)->seen++;
}

static void
on_cancel(void *ctx, json_t *request_id)
{
	struct seen *s = ctx;

	s->cancelled++;
	s->cancelled_id = json_integer_value(request_id);
}

static const struct mcpmeth table[] = {
	{ "ping", mcpmeth_ping },
	{ "tools/list", m_list },
	{ "tools/call", m_queued },
	{ "tasks/", m_tasks },
};

static const struct mcpmeth_set endpoint = {
	.table = table,
	.n = sizeof(table) / sizeof(table[0]),
	.seen = on_seen,
	.cancel = on_cancel,
};

/* Handles `text` and returns the answer (NULL for none). */
static json_t *
handle(struct seen *s, const char *text)
{
	json_t *raw = load(text), *out;

	out = mcpmeth_handle(&endpoint, s, raw);
	json_decref(raw);
	return out;
}

static int
error_code(const json_t *out)
{
	return (int)json_integer_value(json_object_get(json_object_get(out, "error"), "code"));
}

static void
test_request_to_its_method(void **state)
{
	struct seen s = { 0 };
	json_t *out = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}");

	(void)state;
	assert_non_null(out);
	assert_string_equal(s.called, "list");
	assert_int_equal(s.seen, 1);
	assert_int_equal(json_integer_value(json_object_get(out, "id")), 7);
	assert_string_equal(json_string_value(json_object_get(out, "result")), "list");
	json_decref(out);
}

static void
test_prefix_names_every_method_under_it(void **state)
{
	struct seen s = { 0 };
	json_t *out = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\"}");

	(void)state;
	assert_string_equal(s.called, "tasks");
	assert_string_equal(s.method, "tasks/get");
	json_decref(out);
	/* A name without the slash names the one method only. */
	memset(&s, 0, sizeof(s));
	out = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list2\"}");
	assert_null(s.called);
	assert_int_equal(error_code(out), RPC_METHOD_NOT_FOUND);
	json_decref(out);
}

static void
test_method_not_found(void **state)
{
	struct seen s = { 0 };
	json_t *out = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"initialize\"}");

	(void)state;
	assert_int_equal(error_code(out), RPC_METHOD_NOT_FOUND);
	assert_string_equal(json_string_value(json_object_get(json_object_get(out, "error"),
				"message")),
	    "Method not found: initialize");
	assert_string_equal(json_string_value(json_object_get(out, "id")), "x");
	assert_int_equal(s.seen, 1);
	json_decref(out);
}

static void
test_answer_sent_otherwise(void **state)
{
	struct seen s = { 0 };

	(void)state;
	assert_null(handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\"}"));
	assert_string_equal(s.called, "queued");
}

static void
test_ping_and_one_page(void **state)
{
	struct seen s = { 0 };
	json_t *out = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");

	(void)state;
	assert_true(json_is_object(json_object_get(out, "result")));
	assert_int_equal(json_object_size(json_object_get(out, "result")), 0);
	json_decref(out);
	out = handle(&s,
	    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\","
	    "\"params\":{\"cursor\":\"next\"}}");
	assert_null(s.called);
	assert_int_equal(error_code(out), RPC_INVALID_PARAMS);
	json_decref(out);
}

static void
test_invalid_and_response(void **state)
{
	struct seen s = { 0 };
	json_t *out = handle(&s, "{\"jsonrpc\":\"1.0\",\"id\":4,\"method\":\"ping\"}");

	(void)state;
	assert_int_equal(error_code(out), RPC_INVALID_REQUEST);
	json_decref(out);
	assert_null(handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}"));
	/* Neither is a message the endpoint looks at. */
	assert_int_equal(s.seen, 0);
	assert_null(s.called);
}

static void
test_notifications_and_cancel(void **state)
{
	struct seen s = { 0 };

	(void)state;
	assert_null(handle(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
	assert_int_equal(s.cancelled, 0);
	assert_null(handle(&s,
	    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
	    "\"params\":{\"requestId\":9}}"));
	assert_int_equal(s.cancelled, 1);
	assert_int_equal(s.cancelled_id, 9);
	/* A requestId that is no id cancels nothing. */
	assert_null(handle(&s,
	    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
	    "\"params\":{\"requestId\":[1]}}"));
	assert_int_equal(s.cancelled, 1);
	assert_int_equal(s.seen, 3);
	assert_null(s.called);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_to_its_method),
		cmocka_unit_test(test_prefix_names_every_method_under_it),
		cmocka_unit_test(test_method_not_found),
		cmocka_unit_test(test_answer_sent_otherwise),
		cmocka_unit_test(test_ping_and_one_page),
		cmocka_unit_test(test_invalid_and_response),
		cmocka_unit_test(test_notifications_and_cancel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
