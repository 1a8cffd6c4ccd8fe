/* test_ttlmap.c - the lookup cache: expiry, its bound, and the generation
 * that keeps an answer read before an invalidation out of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/ttlmap.h"

static void
test_put_gen_stores_when_nothing_was_removed(void **state)
{
	struct ttl_map *m = ttl_new(10, 60);
	unsigned long long g;
	char v[TTL_VAL_MAX + 1];

	(void)state;
	g = ttl_generation(m);
	ttl_put(m, "other", "x"); /* adding does not invalidate */
	assert_int_equal(ttl_put_gen(m, "k", "acct", g), 1);
	assert_true(ttl_get(m, "k", v, sizeof(v)));
	assert_string_equal(v, "acct");
	ttl_free(m);
}

static void
test_put_gen_refused_after_any_removal(void **state)
{
	struct ttl_map *m = ttl_new(10, 60);
	unsigned long long g;
	char v[TTL_VAL_MAX + 1];

	(void)state;
	/* The lookup began, then its key was invalidated (not even cached). */
	g = ttl_generation(m);
	ttl_del(m, "k");
	assert_int_equal(ttl_put_gen(m, "k", "acct", g), 0);
	assert_false(ttl_get(m, "k", v, sizeof(v)));
	/* A clear, a disable and an enable (the listener came back). */
	g = ttl_generation(m);
	ttl_clear(m);
	assert_int_equal(ttl_put_gen(m, "k", "acct", g), 0);
	g = ttl_generation(m);
	ttl_set_enabled(m, 0);
	ttl_set_enabled(m, 1);
	assert_int_equal(ttl_put_gen(m, "k", "acct", g), 0);
	assert_int_equal(ttl_put_gen(m, "k", "acct", ttl_generation(m)), 1);
	ttl_free(m);
}

static int
is_a(const char *val, void *ctx)
{
	return strcmp(val, ctx) == 0;
}

static void
test_del_matching_removes_by_value(void **state)
{
	struct ttl_map *m = ttl_new(10, 60);
	unsigned long long g;
	char v[TTL_VAL_MAX + 1];

	(void)state;
	ttl_put(m, "k1", "a");
	ttl_put(m, "k2", "b");
	ttl_put(m, "k3", "a");
	g = ttl_generation(m);
	ttl_del_matching(m, is_a, "a");
	assert_false(ttl_get(m, "k1", v, sizeof(v)));
	assert_false(ttl_get(m, "k3", v, sizeof(v)));
	assert_true(ttl_get(m, "k2", v, sizeof(v)));
	assert_int_equal(ttl_count(m), 1);
	assert_int_equal(ttl_put_gen(m, "k1", "a", g), 0);
	ttl_free(m);
}

/* Nothing is cut: a key or value too long for an entry is not stored, and
 * a value the caller has no room for is a miss. */
static void
test_too_long_is_never_cut(void **state)
{
	struct ttl_map *m = ttl_new(10, 60);
	char key[TTL_KEY_MAX + 2], val[TTL_VAL_MAX + 2], v[TTL_VAL_MAX + 1], small[4];

	(void)state;
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	memset(val, 'v', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	ttl_put(m, key, "a");
	assert_int_equal(ttl_put_gen(m, "k", val, ttl_generation(m)), 0);
	assert_int_equal(ttl_count(m), 0);
	key[TTL_KEY_MAX] = '\0';
	val[TTL_VAL_MAX] = '\0';
	ttl_put(m, key, val);
	assert_true(ttl_get(m, key, v, sizeof(v)));
	assert_string_equal(v, val);
	ttl_put(m, "k", "acct");
	assert_false(ttl_get(m, "k", small, sizeof(small)));
	assert_true(ttl_get(m, "k", v, sizeof(v)));
	ttl_free(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_gen_stores_when_nothing_was_removed),
		cmocka_unit_test(test_put_gen_refused_after_any_removal),
		cmocka_unit_test(test_del_matching_removes_by_value),
		cmocka_unit_test(test_too_long_is_never_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
