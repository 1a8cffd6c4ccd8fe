/* test_utf8.c - replacement of invalid UTF-8 (server/utf8.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/utf8.h"

static void
check(const char *in, size_t len, const char *want, size_t want_bad)
{
	size_t n, bad;
	char *out = utf8_sanitize(in, len, &n, &bad);

	assert_non_null(out);
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));
	assert_int_equal(bad, want_bad);
	free(out);
}

static void
test_valid_passes(void **state)
{
	(void)state;
	check("", 0, "", 0);
	check("plain", 5, "plain", 0);
	check("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80", 15,
	    "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80", 0);
}

static void
test_invalid_replaced(void **state)
{
	(void)state;
	/* "\xFF" "b": a hex escape would otherwise take the b in. */
	/* clang-format off */
	check("a\xFF" "b", 3, "a\xEF\xBF\xBD" "b", 1);
	check("a\0b", 3, "a\xEF\xBF\xBD" "b", 1);                            /* NUL */
	check("\xC3", 1, "\xEF\xBF\xBD", 1);                                 /* cut short */
	check("\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 2);                 /* overlong */
	check("\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 3); /* surrogate */
	check("\xF4\x90\x80\x80", 4,
	    "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 4);          /* > U+10FFFF */
	check("ok\xE2\x82", 4, "ok\xEF\xBF\xBD\xEF\xBF\xBD", 2);             /* truncated at end */
	/* clang-format on */
}

/* A character cut at the end is left for the next piece; nothing else. */
static void
test_whole_len(void **state)
{
	(void)state;
	/* clang-format off */
	assert_int_equal(utf8_whole_len("", 0), 0);
	assert_int_equal(utf8_whole_len("abc", 3), 3);
	assert_int_equal(utf8_whole_len("a\xC3", 2), 1);
	assert_int_equal(utf8_whole_len("a\xC3\xA9", 3), 3);
	assert_int_equal(utf8_whole_len("a\xE2\x82", 3), 1);
	assert_int_equal(utf8_whole_len("a\xE2", 2), 1);
	assert_int_equal(utf8_whole_len("a\xE2\x82\xAC", 4), 4);
	assert_int_equal(utf8_whole_len("\xF0\x9F\x98", 3), 0);
	assert_int_equal(utf8_whole_len("\xF0\x9F\x98\x80", 4), 4);
	assert_int_equal(utf8_whole_len("a\xFF", 2), 2);             /* invalid: not waited for */
	assert_int_equal(utf8_whole_len("\x80\x80\x80\x80", 4), 4); /* no lead byte */
	/* clang-format on */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_passes),
		cmocka_unit_test(test_invalid_replaced),
		cmocka_unit_test(test_whole_len),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
