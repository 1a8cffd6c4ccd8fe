/* test_http_path.c - route path matching with "{name}" segments
 * (http_path_match in server/http.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/http.h"

static int
match(const char *pattern, const char *path)
{
	struct http_span caps[HTTP_MAX_PATH_ARGS];

	return http_path_match(pattern, path, caps, HTTP_MAX_PATH_ARGS);
}

static void
test_exact(void **state)
{
	(void)state;
	assert_int_equal(match("/v1/mcp", "/v1/mcp"), 0);
	assert_int_equal(match("/healthz", "/healthz"), 0);
	assert_int_equal(match("/v1/mcp", "/v1/mcp/"), -1);
	assert_int_equal(match("/v1/mcp", "/v1/mc"), -1);
	assert_int_equal(match("/v1/mcp", "/v1/mcpx"), -1);
	assert_int_equal(match("/v1/mcp", "/V1/mcp"), -1);
	assert_int_equal(match("/v1/mcp", ""), -1);
	assert_int_equal(match("/", "/"), 0);
}

static void
test_captures(void **state)
{
	const char *path = "/v1/sandboxes/sbx-abc/commands/cmd-1";
	struct http_span caps[HTTP_MAX_PATH_ARGS];

	(void)state;
	assert_int_equal(http_path_match("/v1/sandboxes/{sandbox_id}/commands/{command_id}", path,
			     caps, HTTP_MAX_PATH_ARGS),
	    2);
	assert_int_equal(caps[0].off, strlen("/v1/sandboxes/"));
	assert_int_equal(caps[0].len, strlen("sbx-abc"));
	assert_int_equal(caps[1].off, strlen("/v1/sandboxes/sbx-abc/commands/"));
	assert_int_equal(caps[1].len, strlen("cmd-1"));
	assert_int_equal(match("/v1/sandboxes/{id}", "/v1/sandboxes/x"), 1);
	assert_int_equal(match("/v1/sandboxes/{id}/files", "/v1/sandboxes/x/files"), 1);
}

static void
test_segment_rules(void **state)
{
	(void)state;
	/* One whole, non-empty segment; never across a slash. */
	assert_int_equal(match("/v1/sandboxes/{id}", "/v1/sandboxes/"), -1);
	assert_int_equal(match("/v1/sandboxes/{id}", "/v1/sandboxes"), -1);
	assert_int_equal(match("/v1/sandboxes/{id}", "/v1/sandboxes/a/b"), -1);
	assert_int_equal(match("/v1/sandboxes/{id}", "/v1/sandboxes/a/"), -1);
	assert_int_equal(match("/v1/sandboxes/{id}/files", "/v1/sandboxes//files"), -1);
	assert_int_equal(match("/v1/sandboxes/{id}/files", "/v1/sandboxes/a/files/content"), -1);
	assert_int_equal(match("/v1/sandboxes/{id}/files/content",
			     "/v1/sandboxes/a/files/contents"),
	    -1);
	assert_int_equal(match("/v1/sandboxes/{id}/commands/{c}", "/v1/sandboxes/a/files/content"),
	    -1);
	/* Near misses of literal parts. */
	assert_int_equal(match("/v1/sandboxes/{id}", "/v1/sandbox/a"), -1);
	assert_int_equal(match("/v1/sandboxes/{id}", "/v2/sandboxes/a"), -1);
}

static void
test_bad_patterns(void **state)
{
	struct http_span caps[1];

	(void)state;
	/* An unclosed brace matches nothing. */
	assert_int_equal(match("/v1/{id", "/v1/x"), -1);
	/* More captures than room: no match rather than an overflow. */
	assert_int_equal(http_path_match("/{a}/{b}", "/x/y", caps, 1), -1);
	assert_int_equal(http_path_match("/{a}", "/x", caps, 1), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact),
		cmocka_unit_test(test_captures),
		cmocka_unit_test(test_segment_rules),
		cmocka_unit_test(test_bad_patterns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
