/* test_auth.c - API key extraction from Authorization / x-api-key
 * (server/auth.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/auth.h"

struct got {
	enum auth_found rc;
	const char *key;
	size_t len;
	const char *why;
};

static struct got
extract(const char *authorization, const char *x_api_key)
{
	struct got g;

	/* Garbage first: the function must set every output. */
	g.key = (const char *)&g;
	g.len = 12345;
	g.why = (const char *)&g;
	g.rc = auth_extract(authorization, x_api_key, &g.key, &g.len, &g.why);
	return g;
}

static void
expect_key(const char *authorization, const char *x_api_key, const char *base, size_t off,
    size_t len)
{
	struct got g = extract(authorization, x_api_key);

	if (g.rc != AUTH_KEY)
		fail_msg("[%s] [%s]: rc %d, why %s", authorization ? authorization : "NULL",
		    x_api_key ? x_api_key : "NULL", (int)g.rc, g.why ? g.why : "NULL");
	/* The key points into the header value itself, blanks excluded. */
	assert_ptr_equal(g.key, base + off);
	assert_int_equal(g.len, len);
	assert_null(g.why);
}

static void
expect_malformed(const char *authorization, const char *x_api_key, const char *why)
{
	struct got g = extract(authorization, x_api_key);

	if (g.rc != AUTH_MALFORMED)
		fail_msg("[%s] [%s]: rc %d, want AUTH_MALFORMED",
		    authorization ? authorization : "NULL", x_api_key ? x_api_key : "NULL",
		    (int)g.rc);
	assert_null(g.key);
	assert_int_equal(g.len, 0);
	assert_non_null(g.why);
	if (why != NULL)
		assert_string_equal(g.why, why);
}

static void
test_bearer_forms(void **state)
{
	static const char a1[] = "Bearer KEY";
	static const char a2[] = "bearer KEY";
	static const char a3[] = "BEARER   KEY  ";
	static const char a4[] = "\tBearer\tKEY\t";
	static const char a5[] = "  bEaReR \t aas_sk_abc \t ";
	static const char a6[] = "Bearer K";

	(void)state;
	expect_key(a1, NULL, a1, 7, 3);
	expect_key(a2, NULL, a2, 7, 3);
	expect_key(a3, NULL, a3, 9, 3);
	expect_key(a4, NULL, a4, 8, 3);
	expect_key(a5, NULL, a5, 11, 10);
	expect_key(a6, NULL, a6, 7, 1);

	/* The extracted bytes are the key. */
	struct got g = extract(a5, NULL);
	assert_int_equal(g.len, strlen("aas_sk_abc"));
	assert_memory_equal(g.key, "aas_sk_abc", g.len);
}

static void
test_x_api_key_alone(void **state)
{
	static const char x1[] = "KEY";
	static const char x2[] = "  KEY \t";
	static const char x3[] = "\t\taas_sk_xyz";

	(void)state;
	expect_key(NULL, x1, x1, 0, 3);
	expect_key(NULL, x2, x2, 2, 3);
	expect_key(NULL, x3, x3, 2, 10);
}

static void
test_both_agree(void **state)
{
	static const char a[] = "Bearer  KEY";
	static const char x[] = " KEY ";

	(void)state;
	/* Equal keys: accepted, taken from the Authorization header. */
	expect_key(a, x, a, 8, 3);
}

static void
test_both_disagree(void **state)
{
	(void)state;
	expect_malformed("Bearer KEY1", "KEY2", "Authorization and x-api-key carry different keys");
	/* A prefix of the other is still different. */
	expect_malformed("Bearer KEY", "KEY1", "Authorization and x-api-key carry different keys");
	expect_malformed("Bearer KEY1", "KEY", "Authorization and x-api-key carry different keys");
	/* Keys are case-sensitive even though the scheme is not. */
	expect_malformed("Bearer key", "KEY", "Authorization and x-api-key carry different keys");
}

static void
test_bad_authorization(void **state)
{
	static const char *const bad[] = {
		"Basic abc",
		"Basic dXNlcjpwYXNz",
		"Token KEY",
		"BearerKEY",
		"Bearer",
		"bearer",
		"Bearer ",
		"Bearer \t ",
		"",
		"   ",
		"KEY",
		"Bear KEY",
		"Bearer-KEY",
		"Bearer:KEY",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct got g = extract(bad[i], NULL);
		if (g.rc != AUTH_MALFORMED)
			fail_msg("Authorization [%s] accepted", bad[i]);
		assert_null(g.key);
		assert_int_equal(g.len, 0);
		assert_non_null(g.why);
		/* The reason names the header. */
		assert_non_null(strstr(g.why, "Authorization"));
	}
	/* ... and never echoes the credentials. */
	struct got g = extract("Basic dXNlcjpwYXNz", NULL);
	assert_null(strstr(g.why, "dXNlcjpwYXNz"));
	g = extract("Bearer secret1", "secret2");
	assert_int_equal(g.rc, AUTH_MALFORMED);
	assert_null(strstr(g.why, "secret"));
	expect_malformed("Basic abc", NULL, "the Authorization header must be 'Bearer <key>'");
	/* A bad Authorization is refused even when x-api-key is fine. */
	expect_malformed("Basic abc", "KEY", "the Authorization header must be 'Bearer <key>'");
}

static void
test_empty_x_api_key(void **state)
{
	(void)state;
	expect_malformed(NULL, "", "the x-api-key header is empty");
	expect_malformed(NULL, "   ", "the x-api-key header is empty");
	expect_malformed(NULL, " \t ", "the x-api-key header is empty");
	/* Even next to a good bearer key. */
	expect_malformed("Bearer KEY", "", "the x-api-key header is empty");
}

static void
test_no_key(void **state)
{
	struct got g;

	(void)state;
	g = extract(NULL, NULL);
	assert_int_equal(g.rc, AUTH_NO_KEY);
	assert_null(g.key);
	assert_int_equal(g.len, 0);
	assert_null(g.why);
}

static void
test_bearer_without_key_says_so(void **state)
{
	struct got g;

	(void)state;
	g = extract("Bearer   ", NULL);
	assert_int_equal(g.rc, AUTH_MALFORMED);
	assert_string_equal(g.why, "the Authorization header has no key after 'Bearer'");
	g = extract("bearer", NULL);
	assert_int_equal(g.rc, AUTH_MALFORMED);
	assert_string_equal(g.why, "the Authorization header has no key after 'Bearer'");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bearer_forms),
		cmocka_unit_test(test_x_api_key_alone),
		cmocka_unit_test(test_both_agree),
		cmocka_unit_test(test_both_disagree),
		cmocka_unit_test(test_bad_authorization),
		cmocka_unit_test(test_empty_x_api_key),
		cmocka_unit_test(test_no_key),
		cmocka_unit_test(test_bearer_without_key_says_so),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
