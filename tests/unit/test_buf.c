/* test_buf.c - bounded buffers: growth, the maximum, failure sticks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"

static void
test_append_grows_and_terminates(void **state)
{
	struct buf b;
	char chunk[1000];

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	buf_init(&b, 1 << 20);
	for (int i = 0; i < 100; i++)
		assert_int_equal(buf_append(&b, chunk, sizeof(chunk)), 0);
	assert_int_equal(b.len, 100000);
	assert_int_equal(b.data[b.len], '\0');
	assert_int_equal(strlen(b.data), 100000);
	buf_free(&b);
	buf_free(&b);
	buf_free(NULL);
}

static void
test_exact_maximum_fits(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b, 10);
	assert_int_equal(buf_append(&b, "0123456789", 10), 0);
	assert_int_equal(b.len, 10);
	assert_string_equal(b.data, "0123456789");
	buf_free(&b);
}

static void
test_past_maximum_fails_and_sticks(void **state)
{
	struct buf b;
	size_t len = 99;

	(void)state;
	buf_init(&b, 10);
	assert_int_equal(buf_append(&b, "01234", 5), 0);
	assert_int_equal(buf_append(&b, "567890", 6), -1);
	assert_true(b.failed);
	assert_null(b.data);
	/* Later appends fail too: no half message. */
	assert_int_equal(buf_append(&b, "a", 1), -1);
	assert_int_equal(buf_printf(&b, "%d", 1), -1);
	assert_null(buf_steal(&b, &len));
	assert_int_equal(len, 0);
}

static void
test_printf_and_steal(void **state)
{
	struct buf b;
	size_t len;
	char *s;

	(void)state;
	buf_init(&b, 64);
	assert_int_equal(buf_printf(&b, "%s=%d", "a", 42), 0);
	assert_int_equal(buf_printf(&b, ";%s", "b"), 0);
	s = buf_steal(&b, &len);
	assert_string_equal(s, "a=42;b");
	assert_int_equal(len, 6);
	assert_null(b.data);
	free(s);
	/* Over the maximum in one formatted piece. */
	assert_int_equal(buf_printf(&b, "%100s", "x"), -1);
}

static void
test_empty_steal_and_zero_append(void **state)
{
	struct buf b;
	size_t len = 5;
	char *s;

	(void)state;
	buf_init(&b, 8);
	assert_null(buf_steal(&b, &len));
	assert_int_equal(len, 0);
	assert_int_equal(buf_append(&b, "", 0), 0);
	s = buf_steal(&b, &len);
	assert_non_null(s);
	assert_string_equal(s, "");
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_grows_and_terminates),
		cmocka_unit_test(test_exact_maximum_fits),
		cmocka_unit_test(test_past_maximum_fails_and_sticks),
		cmocka_unit_test(test_printf_and_steal),
		cmocka_unit_test(test_empty_steal_and_zero_append),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
