/* test_mcp_headers.c - the MCP transport's header predicates and protocol
 * versions (server/mcp.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/mcpver.h"
#include "server/mcp.h"

#define JSON "application/json"
#define SSE "text/event-stream"

static void
yes(const char *accept, const char *type)
{
	if (!mcp_accepts(accept, type))
		fail_msg("Accept [%s] should accept %s", accept ? accept : "(null)", type);
}

static void
no(const char *accept, const char *type)
{
	if (mcp_accepts(accept, type))
		fail_msg("Accept [%s] should not accept %s", accept ? accept : "(null)", type);
}

static void
test_accepts_both(void **state)
{
	(void)state;
	yes("application/json, text/event-stream", JSON);
	yes("application/json, text/event-stream", SSE);
	yes("text/event-stream,application/json", JSON);
	yes("text/event-stream,application/json", SSE);
	yes("  application/json  ,\ttext/event-stream\t", SSE);
	yes("text/html, application/xml, application/json", JSON);
	/* Media types are case-insensitive. */
	yes("Application/JSON, TEXT/Event-Stream", JSON);
	yes("Application/JSON, TEXT/Event-Stream", SSE);
}

static void
test_accepts_single(void **state)
{
	(void)state;
	yes("application/json", JSON);
	no("application/json", SSE);
	yes("text/event-stream", SSE);
	no("text/event-stream", JSON);
}

static void
test_accepts_params(void **state)
{
	(void)state;
	yes("application/json;q=0.9, text/event-stream;q=0.8", JSON);
	yes("application/json;q=0.9, text/event-stream;q=0.8", SSE);
	yes("application/json ; charset=utf-8", JSON);
	yes("text/event-stream; q=1, application/json; q=0.5", JSON);
	no("application/json;q=0.9", SSE);
	/* Parameters are not part of the type. */
	no("text/plain;type=application/json", JSON);
}

static void
test_accepts_wildcards(void **state)
{
	(void)state;
	yes("*/*", JSON);
	yes("*/*", SSE);
	yes("text/html, */*;q=0.1", SSE);
	yes("application/*", JSON);
	no("application/*", SSE);
	yes("text/*", SSE);
	no("text/*", JSON);
	yes("application/*, text/*", JSON);
	yes("application/*, text/*", SSE);
	/* Not wildcards. */
	no("*", JSON);
	no("application", JSON);
	no("application/", JSON);
	no("*/json", JSON);
	no("app/*", JSON);
	no("applicationx/*", JSON);
	/* Same length as a wildcard, but not one. */
	no("application/x", JSON);
	no("text/e", SSE);
}

static void
test_accepts_missing(void **state)
{
	(void)state;
	no(NULL, JSON);
	no(NULL, SSE);
	no("", JSON);
	no("   ", JSON);
	no(",,", JSON);
	no("text/html", JSON);
	no("text/html, application/xml", SSE);
	/* Near misses. */
	no("application/jsonx", JSON);
	no("application/json-seq", JSON);
	no("application/jso", JSON);
	no("xapplication/json", JSON);
	no("text/event-streams", SSE);
	no("text/event", SSE);
	/* Empty entries around a real one are skipped. */
	yes(", ,application/json,", JSON);
}

static void
test_content_type(void **state)
{
	(void)state;
	assert_true(mcp_content_type_is_json("application/json"));
	assert_true(mcp_content_type_is_json("application/json; charset=utf-8"));
	assert_true(mcp_content_type_is_json("application/json;charset=UTF-8"));
	assert_true(mcp_content_type_is_json("Application/JSON"));
	assert_true(mcp_content_type_is_json("APPLICATION/JSON; charset=utf-8"));
	assert_true(mcp_content_type_is_json(" application/json"));
	assert_true(mcp_content_type_is_json("application/json ; charset=utf-8"));

	assert_false(mcp_content_type_is_json("application/jsonx"));
	assert_false(mcp_content_type_is_json("application/json-patch+json"));
	assert_false(mcp_content_type_is_json("application/jso"));
	assert_false(mcp_content_type_is_json("text/plain"));
	assert_false(mcp_content_type_is_json("text/json"));
	assert_false(mcp_content_type_is_json("application/x-www-form-urlencoded"));
	assert_false(mcp_content_type_is_json("multipart/form-data; boundary=x"));
	assert_false(mcp_content_type_is_json(""));
	assert_false(mcp_content_type_is_json(NULL));
}

static void
test_versions(void **state)
{
	(void)state;
	assert_int_equal(mcpver_count(), 3);
	/* Newest first. */
	assert_string_equal(mcpver_at(0), "2025-11-25");
	assert_string_equal(mcpver_at(1), "2025-06-18");
	assert_string_equal(mcpver_at(2), "2025-03-26");
	assert_null(mcpver_at(3));
	assert_null(mcpver_at((size_t)-1));
	for (size_t i = 0; i < mcpver_count(); i++) {
		const char *v = mcpver_at(i);
		assert_true(mcpver_supported(v));
		if (i > 0)
			assert_true(strcmp(mcpver_at(i - 1), v) > 0);
	}

	assert_true(mcpver_supported("2025-11-25"));
	assert_true(mcpver_supported("2025-06-18"));
	assert_true(mcpver_supported("2025-03-26"));
	assert_false(mcpver_supported("2024-11-05"));
	assert_false(mcpver_supported("2025-06-19"));
	assert_false(mcpver_supported(""));
	assert_false(mcpver_supported("2025-06-18 "));
	assert_false(mcpver_supported(" 2025-06-18"));
	assert_false(mcpver_supported("2025-06"));
	assert_false(mcpver_supported("2025-06-180"));
}

static void
test_accepts_q_zero_refuses(void **state)
{
	(void)state;
	assert_false(mcp_accepts("application/json;q=0, text/event-stream", "application/json"));
	assert_false(mcp_accepts("application/json; q=0.000", "application/json"));
	assert_true(mcp_accepts("application/json;q=0, text/event-stream", "text/event-stream"));
	assert_true(mcp_accepts("application/json;q=0.5", "application/json"));
	assert_true(mcp_accepts("application/json;q=1", "application/json"));
	assert_false(mcp_accepts("*/*;q=0", "application/json"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepts_both),
		cmocka_unit_test(test_accepts_single),
		cmocka_unit_test(test_accepts_params),
		cmocka_unit_test(test_accepts_wildcards),
		cmocka_unit_test(test_accepts_missing),
		cmocka_unit_test(test_content_type),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_accepts_q_zero_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
