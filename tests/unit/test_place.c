/* test_place.c - host choice: admission by reservation, headroom, live
 * use, degraded hosts last. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sandbox/place.h"

static struct place_host
host(long long mem, int cpus, long long rmem, long long rcpu)
{
	struct place_host h = { .memory_mib = mem,
		.vcpus = cpus,
		.memory_overcommit = 1,
		.cpu_overcommit = 4,
		.reserved_memory_mib = rmem,
		.reserved_vcpus = rcpu,
		.free_memory_mib = -1,
		.cpu_busy = -1 };
	return h;
}

static void
test_fits_by_reservation(void **state)
{
	struct place_need small = { 512, 1 };
	struct place_host h = host(1024, 1, 0, 0);

	(void)state;
	assert_true(place_fits(&h, &small));
	h.reserved_memory_mib = 512;
	assert_true(place_fits(&h, &small)); /* exactly full */
	h.reserved_memory_mib = 513;
	assert_false(place_fits(&h, &small));
	h = host(1 << 20, 1, 0, 4); /* vCPUs: 1 CPU x 4 */
	assert_false(place_fits(&h, &small));
	h.cpu_overcommit = 5;
	assert_true(place_fits(&h, &small));
	h = host(0, 4, 0, 0); /* never seen */
	assert_false(place_fits(&h, &small));
	assert_true(place_score(&h, &small) < 0);
}

static void
test_most_headroom_wins(void **state)
{
	struct place_need small = { 512, 1 };
	struct place_host hs[3] = { host(8192, 4, 4096, 2), host(8192, 4, 1024, 1),
		host(8192, 4, 8000, 1) };

	(void)state;
	assert_int_equal(place_choose(hs, 3, &small), 1);
	hs[1].reserved_memory_mib = 4096;
	hs[1].reserved_vcpus = 2;
	assert_int_equal(place_choose(hs, 3, &small), 0); /* a tie: the first */
	hs[0].reserved_memory_mib = 8192;
	hs[1].reserved_memory_mib = 8192;
	assert_int_equal(place_choose(hs, 3, &small), -1); /* the third is 192 MiB short */
	assert_int_equal(place_choose(hs, 0, &small), -1);
}

static void
test_live_use_counts(void **state)
{
	struct place_need small = { 512, 1 };
	struct place_host hs[2] = { host(16384, 8, 0, 0), host(16384, 8, 0, 0) };

	(void)state;
	/* Same reservations; the first has less memory really free. */
	hs[0].free_memory_mib = 2048;
	hs[1].free_memory_mib = 12000;
	assert_int_equal(place_choose(hs, 2, &small), 1);
	/* And the second's CPUs are far busier: memory still weighs more. */
	hs[1].cpu_busy = 0.9;
	hs[0].cpu_busy = 0.1;
	assert_int_equal(place_choose(hs, 2, &small), 1);
	/* Equal memory: the idler host. */
	hs[0].free_memory_mib = 12000;
	assert_int_equal(place_choose(hs, 2, &small), 0);
}

static void
test_degraded_last(void **state)
{
	struct place_need small = { 512, 1 };
	struct place_host hs[2] = { host(65536, 32, 0, 0), host(2048, 1, 1024, 2) };

	(void)state;
	hs[0].degraded = 1;
	assert_int_equal(place_choose(hs, 2, &small), 1);
	hs[1].reserved_memory_mib = 2048; /* the healthy one is full */
	assert_int_equal(place_choose(hs, 2, &small), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits_by_reservation),
		cmocka_unit_test(test_most_headroom_wins),
		cmocka_unit_test(test_live_use_counts),
		cmocka_unit_test(test_degraded_last),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
