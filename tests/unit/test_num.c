/* test_num.c - the strict decimal parser every text number goes through. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/num.h"

static void
test_accepts_plain_decimals(void **state)
{
	long long v;

	(void)state;
	assert_int_equal(num_parse_ll("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(num_parse_ll("-17", &v), 0);
	assert_int_equal(v, -17);
	assert_int_equal(num_parse_ll("9223372036854775807", &v), 0);
	assert_true(v == LLONG_MAX);
	assert_int_equal(num_parse_ll("-9223372036854775808", &v), 0);
	assert_true(v == LLONG_MIN);
	assert_int_equal(num_parse_ll("007", &v), 0);
	assert_int_equal(v, 7);
}

static void
test_refuses_everything_else(void **state)
{
	static const char *const bad[] = { "", "-", "+5", " 5", "5 ", "\t5", "5\n", "0x10", "1e3",
		"1.0", "60.0", "--1", "- 1", "abc", "9223372036854775808", "-9223372036854775809",
		"99999999999999999999999" };
	long long v = 42;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(num_parse_ll(bad[i], &v), -1);
		assert_int_equal(v, 42); /* untouched on failure */
	}
	assert_int_equal(num_parse_ll(NULL, &v), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepts_plain_decimals),
		cmocka_unit_test(test_refuses_everything_else),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
