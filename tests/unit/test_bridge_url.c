/* test_bridge_url.c - AAS_BASE_URL to the API base, URL building, and the
 * bridge's configuration (bridge/br_url.h, bridge/br_config.h). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/br_config.h"
#include "bridge/br_url.h"

static void
base_ok(const char *in, const char *want, int want_v1)
{
	char out[256];
	int v1 = -1;
	struct err e;

	err_clear(&e);
	assert_int_equal(br_url_base(in, out, sizeof(out), &v1, &e), 0);
	assert_string_equal(out, want);
	assert_int_equal(v1, want_v1);
}

static void
base_bad(const char *in)
{
	char out[256];
	int v1;
	struct err e;

	err_clear(&e);
	assert_int_equal(br_url_base(in, out, sizeof(out), &v1, &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_non_null(strstr(e.msg, "AAS_BASE_URL"));
}

static void
test_base_adds_v1(void **state)
{
	(void)state;
	base_ok("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1", 0);
	base_ok("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1", 0);
	base_ok("https://api.example.com", "https://api.example.com/v1", 0);
	base_ok("http://[::1]:8080", "http://[::1]:8080/v1", 0);
}

static void
test_base_with_v1_kept_once(void **state)
{
	(void)state;
	base_ok("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1", 1);
	base_ok("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1", 1);
	base_ok("https://h/v1//", "https://h/v1", 1);
}

static void
test_base_refused(void **state)
{
	(void)state;
	base_bad("");
	base_bad("127.0.0.1:8080");
	base_bad("ftp://host");
	base_bad("http://");
	base_bad("http:///v1");
	base_bad("http://host/api");
	base_bad("http://host/v1/mcp");
	base_bad("http://host/v2");
	base_bad("http://user:pw@host");
	base_bad("http://host?x=1");
	base_bad("http://host#frag");
	base_bad("http://ho st");
}

static void
test_base_too_long(void **state)
{
	char out[16];
	int v1;
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(br_url_base("http://a-long-host-name", out, sizeof(out), &v1, &e), -1);
}

static void
test_build_escapes(void **state)
{
	struct br_url *u = br_url_new("http://h/v1");
	struct err e;

	(void)state;
	err_clear(&e);
	br_url_seg(u, "sandboxes");
	br_url_seg(u, "sbx-0123456789abcdef");
	br_url_seg(u, "files");
	br_url_seg(u, "a/b ?#");
	br_url_query(u, "path", "/home/sandbox/x y+z&w=1/é");
	br_url_query(u, "depth", "3");
	br_url_query(u, "skip", NULL);
	assert_string_equal(br_url_str(u, &e),
	    "http://h/v1/sandboxes/sbx-0123456789abcdef/files/"
	    "a%2Fb%20%3F%23?path=%2Fhome%2Fsandbox%2Fx%20y%2Bz%26w%3D1%2F%C3%A9&depth=3");
	br_url_free(u);
}

static void
test_build_query_json(void **state)
{
	struct br_url *u = br_url_new("http://h/v1");
	json_t *n = json_integer(42), *t = json_true(), *s = json_string("run ning"),
	       *o = json_object();
	struct err e;

	(void)state;
	err_clear(&e);
	br_url_seg(u, "sandboxes");
	br_url_query_json(u, "limit", n);
	br_url_query_json(u, "make_parents", t);
	br_url_query_json(u, "state", s);
	br_url_query_json(u, "ignored", o);
	br_url_query_json(u, "absent", NULL);
	br_url_query_ll(u, "offset", LLONG_MIN);
	assert_string_equal(br_url_str(u, &e),
	    "http://h/v1/sandboxes?limit=42&make_parents=true&state=run%20ning"
	    "&offset=-9223372036854775808");
	br_url_free(u);
	json_decref(n);
	json_decref(t);
	json_decref(s);
	json_decref(o);
}

static void
test_build_overflow_is_sticky(void **state)
{
	struct br_url *u = br_url_new("http://h/v1");
	char *big = malloc(BR_URL_MAX);
	struct err e;

	(void)state;
	memset(big, '/', BR_URL_MAX - 1);
	big[BR_URL_MAX - 1] = '\0';
	err_clear(&e);
	br_url_query(u, "path", big); /* each '/' takes three bytes */
	br_url_query(u, "x", "1");
	assert_null(br_url_str(u, &e));
	assert_int_equal(e.kind, ERR_INVALID);
	br_url_free(u);
	br_url_free(NULL);
	free(big);
}

/* ---- configuration ---- */

static const char *const *env_table;

static const char *
table_get(const char *name)
{
	for (size_t i = 0; env_table[i]; i += 2)
		if (strcmp(env_table[i], name) == 0)
			return env_table[i + 1];
	return NULL;
}

static void
test_config_needs_key(void **state)
{
	static const char *const t[] = { "AAS_BASE_URL", "http://h", NULL };
	struct br_config c;
	struct err e;

	(void)state;
	env_table = t;
	err_clear(&e);
	assert_int_equal(br_config_load(&c, table_get, &e), -1);
	assert_non_null(strstr(e.msg, "AAS_API_KEY is not set"));
}

static void
test_config_defaults(void **state)
{
	static const char *const t[] = { "AAS_API_KEY", "aas_sk_abc", NULL };
	struct br_config c;
	struct err e;

	(void)state;
	env_table = t;
	err_clear(&e);
	assert_int_equal(br_config_load(&c, table_get, &e), 0);
	assert_string_equal(c.base_url, BR_DEFAULT_BASE_URL "/v1");
	assert_string_equal(c.api_key, "aas_sk_abc");
	assert_int_equal(c.connect_timeout_s, 10);
	assert_int_equal(c.create_timeout_s, 300);
	assert_int_equal(c.max_response_bytes, 64LL << 20);
	assert_int_equal(c.base_had_v1, 0);
}

static void
test_config_bad_values(void **state)
{
	static const char *const newline_key[] = { "AAS_API_KEY", "aas_sk_a\r\nX-Evil: 1", NULL };
	static const char *const bad_timeout[] = { "AAS_API_KEY", "k", "AAS_CONNECT_TIMEOUT_S",
		"10s", NULL };
	static const char *const zero[] = { "AAS_API_KEY", "k", "AAS_REQUEST_TIMEOUT_S", "0",
		NULL };
	struct br_config c;
	struct err e;

	(void)state;
	env_table = newline_key;
	err_clear(&e);
	assert_int_equal(br_config_load(&c, table_get, &e), -1);
	assert_null(strstr(e.msg, "aas_sk_a")); /* the key is never shown */
	env_table = bad_timeout;
	err_clear(&e);
	assert_int_equal(br_config_load(&c, table_get, &e), -1);
	assert_non_null(strstr(e.msg, "AAS_CONNECT_TIMEOUT_S"));
	env_table = zero;
	err_clear(&e);
	assert_int_equal(br_config_load(&c, table_get, &e), -1);
	assert_non_null(strstr(e.msg, "AAS_REQUEST_TIMEOUT_S"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base_adds_v1),
		cmocka_unit_test(test_base_with_v1_kept_once),
		cmocka_unit_test(test_base_refused),
		cmocka_unit_test(test_base_too_long),
		cmocka_unit_test(test_build_escapes),
		cmocka_unit_test(test_build_query_json),
		cmocka_unit_test(test_build_overflow_is_sticky),
		cmocka_unit_test(test_config_needs_key),
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test(test_config_bad_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
