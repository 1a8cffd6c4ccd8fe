/* test_fmt.c - the checked formatter: a text that does not fit is
 * reported (or cut only where asked), and the buffer always ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/fmt.h"

static void
test_fits_exactly(void **state)
{
	char b[6];

	(void)state;
	assert_int_equal(fmt_buf(b, sizeof(b), "%s-%d", "ab", 12), 0);
	assert_string_equal(b, "ab-12");
	assert_int_equal(fmt_buf(b, sizeof(b), "%s", ""), 0);
	assert_string_equal(b, "");
}

static void
test_one_byte_over_is_reported_and_ends(void **state)
{
	char b[6];

	(void)state;
	memset(b, 'x', sizeof(b));
	assert_int_equal(fmt_buf(b, sizeof(b), "%s", "abcdef"), -1);
	assert_string_equal(b, "abcde");
	assert_int_equal(fmt_buf(b, 1, "%d", 7), -1);
	assert_string_equal(b, "");
	assert_int_equal(fmt_buf(b, 0, "%d", 7), -1);
	assert_int_equal(fmt_buf(NULL, 4, "%d", 7), -1);
}

static void
test_err_names_what_did_not_fit(void **state)
{
	struct err e;
	char b[4];

	(void)state;
	err_clear(&e);
	assert_int_equal(fmt_err(&e, "path", b, sizeof(b), "%s", "abc"), 0);
	assert_int_equal(e.kind, ERR_NONE);
	assert_int_equal(fmt_err(&e, "path", b, sizeof(b), "/%s", "abc"), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.msg, "path too long");
}

static void
test_cut_keeps_the_front(void **state)
{
	char b[5];

	(void)state;
	fmt_cut(b, sizeof(b), "%s %s", "hello", "world");
	assert_string_equal(b, "hell");
	fmt_cut(b, sizeof(b), "%d", 42);
	assert_string_equal(b, "42");
}

static int
vlen(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = fmt_vlen(fmt, ap);
	va_end(ap);
	return n;
}

static void
test_vlen_measures_the_whole_text(void **state)
{
	(void)state;
	assert_int_equal(vlen("%s-%d", "ab", 12), 5);
	assert_int_equal(vlen("%s", ""), 0);
	assert_int_equal(vlen("%600d", 1), 600);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits_exactly),
		cmocka_unit_test(test_one_byte_over_is_reported_and_ends),
		cmocka_unit_test(test_err_names_what_did_not_fit),
		cmocka_unit_test(test_cut_keeps_the_front),
		cmocka_unit_test(test_vlen_measures_the_whole_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
