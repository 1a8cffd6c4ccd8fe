/* test_bq.c - the bounded byte queue between an HTTP thread (never
 * blocks: parks and is woken) and a worker (blocks). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/bq.h"

/* The non-blocking side's park and wake, counted. */
struct side {
	pthread_mutex_t lock;
	int parks, wakes;
};

static void
on_park(void *ctx)
{
	struct side *s = ctx;
	s->parks++; /* under the queue's lock */
}

static void
on_wake(void *ctx)
{
	struct side *s = ctx;
	pthread_mutex_lock(&s->lock);
	s->wakes++;
	pthread_mutex_unlock(&s->lock);
}

static int
wakes(struct side *s)
{
	int n;
	pthread_mutex_lock(&s->lock);
	n = s->wakes;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void
test_capacity_bounds(void **state)
{
	struct err e;

	(void)state;
	assert_null(bq_new(0, NULL, NULL, NULL, &e));
	assert_null(bq_new(BQ_MAX_BYTES + 1, NULL, NULL, NULL, &e));
	assert_null(bq_new(16, on_park, NULL, NULL, &e));
	struct bq *q = bq_new(BQ_MAX_BYTES, NULL, NULL, NULL, &e);
	assert_non_null(q);
	bq_free(q);
	bq_free(NULL);
}

/* An offer takes what fits and parks the offerer; a read wakes it. */
static void
test_offer_parks_at_capacity(void **state)
{
	struct side s = { PTHREAD_MUTEX_INITIALIZER, 0, 0 };
	struct err e;
	struct bq *q = bq_new(10, on_park, on_wake, &s, &e);
	char buf[32];
	int parked;

	(void)state;
	assert_int_equal(bq_offer(q, "abcdefgh", 8, &parked), 8);
	assert_int_equal(parked, 0);
	assert_int_equal(bq_offer(q, "ijklmnop", 8, &parked), 2);
	assert_int_equal(parked, 1);
	assert_int_equal(s.parks, 1);
	assert_int_equal(wakes(&s), 0);
	/* Full: nothing more is taken, and no second park. */
	assert_int_equal(bq_offer(q, "k", 1, &parked), 0);
	assert_int_equal(s.parks, 1);
	assert_int_equal(bq_read(q, buf, 4, &e), 4);
	assert_memory_equal(buf, "abcd", 4);
	assert_int_equal(wakes(&s), 1);
	/* Wraps around the ring in order. */
	assert_int_equal(bq_offer(q, "klmn", 4, &parked), 4);
	assert_int_equal(bq_read(q, buf, sizeof(buf), &e), 10);
	assert_memory_equal(buf, "efghijklmn", 10);
	bq_finish(q, NULL);
	assert_int_equal(bq_read(q, buf, sizeof(buf), &e), 0);
	bq_free(q);
}

/* A take with nothing parks; a write wakes; the end and a failure are
 * told apart. */
static void
test_take_end_and_failure(void **state)
{
	struct side s = { PTHREAD_MUTEX_INITIALIZER, 0, 0 };
	struct err e, why;
	struct bq *q = bq_new(8, on_park, on_wake, &s, &e);
	char buf[8];

	(void)state;
	assert_int_equal(bq_take(q, buf, sizeof(buf)), BQ_PARKED);
	assert_int_equal(s.parks, 1);
	assert_int_equal(bq_write(q, "xy", 2, &e), 0);
	assert_int_equal(wakes(&s), 1);
	assert_int_equal(bq_take(q, buf, sizeof(buf)), 2);
	bq_finish(q, NULL);
	assert_int_equal(wakes(&s), 1); /* not parked: no wake */
	assert_int_equal(bq_take(q, buf, sizeof(buf)), BQ_END);
	bq_free(q);

	q = bq_new(8, on_park, on_wake, &s, &e);
	assert_int_equal(bq_write(q, "ab", 2, &e), 0);
	err_clear(&why);
	err_set(&why, ERR_LIMIT, "too much");
	bq_finish(q, &why);
	/* What was queued still comes, then the failure. */
	assert_int_equal(bq_take(q, buf, sizeof(buf)), 2);
	assert_int_equal(bq_take(q, buf, sizeof(buf)), BQ_FAILED);
	bq_free(q);
}

/* The consumer abandoning fails the producer's next call with its
 * reason, and wakes a parked offerer. */
static void
test_abandon_from_consumer(void **state)
{
	struct side s = { PTHREAD_MUTEX_INITIALIZER, 0, 0 };
	struct err e, why;
	struct bq *q = bq_new(4, on_park, on_wake, &s, &e);
	int parked;

	(void)state;
	assert_int_equal(bq_offer(q, "abcdef", 6, &parked), 4);
	assert_int_equal(parked, 1);
	err_clear(&e);
	err_clear(&why);
	err_set(&why, ERR_INVALID, "no such directory");
	bq_abandon(q, &why);
	assert_int_equal(wakes(&s), 1);
	assert_int_equal(bq_offer(q, "ef", 2, &parked), -1);
	assert_int_equal(bq_write(q, "x", 1, &e), -1);
	assert_string_equal(e.msg, "no such directory");
	bq_free(q);
}

/* The producer failing ends a blocked reader with its error. */
struct reader_arg {
	struct bq *q;
	ssize_t got;
	struct err e;
};

static void *
reader_main(void *p)
{
	struct reader_arg *a = p;
	char buf[16];

	err_clear(&a->e);
	a->got = bq_read(a->q, buf, sizeof(buf), &a->e);
	return NULL;
}

static void
test_close_from_producer_wakes_reader(void **state)
{
	struct reader_arg a;
	struct err e, why;
	pthread_t t;

	(void)state;
	a.q = bq_new(16, NULL, NULL, NULL, &e);
	assert_int_equal(pthread_create(&t, NULL, reader_main, &a), 0);
	usleep(20000); /* the reader blocks on an empty queue */
	err_clear(&why);
	err_set_at(&why, ERR_LIMIT, "AAS_MAX_FILE_BYTES", "request body larger than 1 bytes");
	bq_finish(a.q, &why);
	pthread_join(t, NULL);
	assert_int_equal(a.got, -1);
	assert_int_equal(a.e.kind, ERR_LIMIT);
	assert_string_equal(a.e.field, "AAS_MAX_FILE_BYTES");
	bq_free(a.q);
}

/* A writer blocked on a full queue goes on as the other side takes, and
 * stops when it abandons; the queue never holds more than its capacity. */
struct writer_arg {
	struct bq *q;
	size_t total;
	int rc;
	struct err e;
};

static void *
writer_main(void *p)
{
	struct writer_arg *a = p;
	static char block[1000];

	err_clear(&a->e);
	memset(block, 'z', sizeof(block));
	for (a->rc = 0; a->rc == 0 && a->total < 100000; a->total += sizeof(block))
		a->rc = bq_write(a->q, block, sizeof(block), &a->e);
	return NULL;
}

static void
test_writer_blocks_and_resumes(void **state)
{
	struct side s = { PTHREAD_MUTEX_INITIALIZER, 0, 0 };
	struct writer_arg a;
	struct err e;
	pthread_t t;
	char buf[4096];
	size_t got = 0;

	(void)state;
	a.q = bq_new(3000, on_park, on_wake, &s, &e);
	a.total = 0;
	assert_int_equal(pthread_create(&t, NULL, writer_main, &a), 0);
	while (got < 50000) {
		ssize_t n = bq_take(a.q, buf, sizeof(buf));
		assert_true(n == BQ_PARKED || (n > 0 && n <= 3000));
		if (n > 0)
			got += (size_t)n;
		else
			while (wakes(&s) < s.parks)
				usleep(100); /* parked: the writer wakes us */
	}
	bq_abandon(a.q, NULL);
	pthread_join(t, NULL);
	assert_int_equal(a.rc, -1);
	assert_true(a.total < 100000);
	assert_int_equal(a.e.kind, ERR_UNAVAILABLE);
	bq_free(a.q);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capacity_bounds),
		cmocka_unit_test(test_offer_parks_at_capacity),
		cmocka_unit_test(test_take_end_and_failure),
		cmocka_unit_test(test_abandon_from_consumer),
		cmocka_unit_test(test_close_from_producer_wakes_reader),
		cmocka_unit_test(test_writer_blocks_and_resumes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
