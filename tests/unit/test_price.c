/* test_price.c - billing arithmetic (billing/price.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "billing/price.h"

static void
test_minutes_used_rounds_up(void **state)
{
	(void)state;
	assert_int_equal(bill_minutes_used(0, 60), 0);
	assert_int_equal(bill_minutes_used(-5, 60), 0);
	assert_int_equal(bill_minutes_used(1, 60), 1); /* 1 ms starts a minute */
	assert_int_equal(bill_minutes_used(59999, 60), 1);
	assert_int_equal(bill_minutes_used(60000, 60), 1); /* exactly one minute */
	assert_int_equal(bill_minutes_used(60001, 60), 2);
	assert_int_equal(bill_minutes_used(3600000, 60), 60);
	assert_int_equal(bill_minutes_used(2999, 3), 1); /* short test minutes */
	assert_int_equal(bill_minutes_used(3001, 3), 2);
	assert_int_equal(bill_minutes_used(1000, 0), 0);
}

static void
test_refunds_at_every_boundary(void **state)
{
	(void)state;
	/* Paid 10 minutes: used 0..12 minutes. */
	for (int used = 0; used <= 12; used++)
		assert_int_equal(bill_refund_minutes(10, used), used >= 10 ? 0 : 10 - used);
	assert_int_equal(bill_refund_minutes(0, 0), 0);
	assert_int_equal(bill_refund_minutes(5, -1), 5);
	/* Destroyed 61 s after ready with 30 paid: 2 used, 28 back. */
	assert_int_equal(bill_refund_minutes(30, bill_minutes_used(61000, 60)), 28);
}

static void
test_cost_and_prices_per_size(void **state)
{
	(void)state;
	assert_int_equal(bill_cost(30, 500), 15000);   /* small, default price */
	assert_int_equal(bill_cost(30, 2000), 60000);  /* medium */
	assert_int_equal(bill_cost(30, 8000), 240000); /* large */
	assert_int_equal(bill_cost(0, 8000), 0);
	assert_int_equal(bill_cost(7, 0), 0);
	assert_int_equal(bill_cost(-1, 500), -1);
	assert_int_equal(bill_cost(INT64_MAX / 2, 3), -1);
}

static void
test_affordable_minutes(void **state)
{
	(void)state;
	assert_int_equal(bill_affordable_minutes(200000, 500), 400);
	assert_int_equal(bill_affordable_minutes(2499, 500), 4);
	assert_int_equal(bill_affordable_minutes(2500, 500), 5);
	assert_int_equal(bill_affordable_minutes(0, 500), 0);
	assert_int_equal(bill_affordable_minutes(-10, 500), 0);
	assert_int_equal(bill_affordable_minutes(100, 0), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_minutes_used_rounds_up),
		cmocka_unit_test(test_refunds_at_every_boundary),
		cmocka_unit_test(test_cost_and_prices_per_size),
		cmocka_unit_test(test_affordable_minutes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
