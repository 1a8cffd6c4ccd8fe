/* test_work_fair.c - the worker pool's keys: turns across keys, the
 * per-key running and queue limits, and expiry of jobs that wait too long. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"
#include "base/work.h"

/* A gate jobs wait at until the test opens it. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open;
	int inside; /* jobs waiting at the gate now */
};

static struct gate gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

static void
gate_reset(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.open = 0;
	gate.inside = 0;
	pthread_mutex_unlock(&gate.lock);
}

static void
gate_open(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.open = 1;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

static int
gate_inside(void)
{
	int n;

	pthread_mutex_lock(&gate.lock);
	n = gate.inside;
	pthread_mutex_unlock(&gate.lock);
	return n;
}

static void
gated_fn(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&gate.lock);
	gate.inside++;
	while (!gate.open)
		pthread_cond_wait(&gate.cond, &gate.lock);
	gate.inside--;
	pthread_mutex_unlock(&gate.lock);
}

/* Jobs record the order they ran in. */
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static char order[64];
static size_t order_n;
static int expired_n;

static void
record_fn(void *arg)
{
	pthread_mutex_lock(&order_lock);
	if (order_n < sizeof(order) - 1)
		order[order_n++] = *(const char *)arg;
	pthread_mutex_unlock(&order_lock);
}

static void
expire_fn(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&order_lock);
	expired_n++;
	pthread_mutex_unlock(&order_lock);
}

static void
reset_order(void)
{
	pthread_mutex_lock(&order_lock);
	memset(order, 0, sizeof(order));
	order_n = 0;
	expired_n = 0;
	pthread_mutex_unlock(&order_lock);
}

static void
wait_until(int (*cond)(void), int want)
{
	for (int i = 0; i < 500 && cond() != want; i++)
		usleep(10000);
	assert_int_equal(cond(), want);
}

static int
recorded(void)
{
	int n;

	pthread_mutex_lock(&order_lock);
	n = (int)order_n;
	pthread_mutex_unlock(&order_lock);
	return n;
}

/* Five jobs of key a queued before one of key b: b does not wait for all
 * five, it gets the next turn after one of a's. */
static void
test_keys_take_turns(void **state)
{
	static const char a = 'a', b = 'b';
	struct work_pool *pool;
	struct err e;

	(void)state;
	gate_reset();
	reset_order();
	err_clear(&e);
	pool = work_new(1, 64, &e);
	assert_non_null(pool);
	assert_int_equal(work_submit_key(pool, "gate", gated_fn, NULL, NULL), 0);
	wait_until(gate_inside, 1);
	for (int i = 0; i < 5; i++)
		assert_int_equal(work_submit_key(pool, "key-a", record_fn, NULL, (void *)&a), 0);
	assert_int_equal(work_submit_key(pool, "key-b", record_fn, NULL, (void *)&b), 0);
	gate_open();
	wait_until(recorded, 6);
	/* b ran first or second, never behind all of a's. */
	assert_true(order[0] == 'b' || order[1] == 'b');
	work_free(pool);
}

/* A key at its running limit waits while another key's job runs. */
static void
test_per_key_running_limit(void **state)
{
	static const char b = 'b';
	struct work_limits lim = { .per_key_running = 2 };
	struct work_pool *pool;
	struct err e;

	(void)state;
	gate_reset();
	reset_order();
	err_clear(&e);
	pool = work_new(4, 64, &e);
	assert_non_null(pool);
	assert_int_equal(work_set_limits(pool, &lim, &e), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(work_submit_key(pool, "key-a", gated_fn, NULL, NULL), 0);
	wait_until(gate_inside, 2);
	usleep(50000);
	assert_int_equal(gate_inside(), 2); /* never more than 2 of a's */
	assert_int_equal(work_pending(pool), 2);
	/* Two free threads: b runs at once, while a's stay at the gate. */
	assert_int_equal(work_submit_key(pool, "key-b", record_fn, NULL, (void *)&b), 0);
	wait_until(recorded, 1);
	assert_int_equal(gate_inside(), 2);
	gate_open();
	work_free(pool);
	assert_int_equal(gate_inside(), 0);
}

/* A key's queue is bounded; another key still gets in. */
static void
test_per_key_queue_limit(void **state)
{
	static const char b = 'b';
	struct work_limits lim = { .per_key_running = 1, .per_key_queued = 2 };
	struct work_pool *pool;
	struct err e;

	(void)state;
	gate_reset();
	reset_order();
	err_clear(&e);
	pool = work_new(2, 64, &e);
	assert_non_null(pool);
	assert_int_equal(work_set_limits(pool, &lim, &e), 0);
	assert_int_equal(work_submit_key(pool, "key-a", gated_fn, NULL, NULL), 0);
	wait_until(gate_inside, 1);
	assert_int_equal(work_submit_key(pool, "key-a", gated_fn, NULL, NULL), 0);
	assert_int_equal(work_submit_key(pool, "key-a", gated_fn, NULL, NULL), 0);
	assert_int_equal(work_submit_key(pool, "key-a", gated_fn, NULL, NULL), -1);
	assert_int_equal(work_submit_key(pool, "key-b", record_fn, NULL, (void *)&b), 0);
	wait_until(recorded, 1);
	/* Keys longer than WORK_KEY_MAX are refused, not truncated into one. */
	char long_key[WORK_KEY_MAX + 2];
	memset(long_key, 'k', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	assert_int_equal(work_submit_key(pool, long_key, record_fn, NULL, (void *)&b), -1);
	gate_open();
	work_free(pool);
}

/* A job that cannot start within max_wait_ms expires: its expire callback
 * runs, the job never does, and the key's place is freed. */
static void
test_waiting_job_expires(void **state)
{
	static const char a = 'a';
	struct work_limits lim = { .per_key_running = 1, .max_wait_ms = 200 };
	struct work_pool *pool;
	struct err e;
	int expired;

	(void)state;
	gate_reset();
	reset_order();
	err_clear(&e);
	pool = work_new(2, 64, &e);
	assert_non_null(pool);
	assert_int_equal(work_set_limits(pool, &lim, &e), 0);
	assert_int_equal(work_submit_key(pool, "key-a", gated_fn, NULL, NULL), 0);
	wait_until(gate_inside, 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(work_submit_key(pool, "key-a", record_fn, expire_fn, (void *)&a),
		    0);
	for (int i = 0; i < 100; i++) {
		pthread_mutex_lock(&order_lock);
		expired = expired_n;
		pthread_mutex_unlock(&order_lock);
		if (expired == 3)
			break;
		usleep(20000);
	}
	assert_int_equal(expired, 3);
	assert_int_equal(recorded(), 0);
	assert_int_equal(work_pending(pool), 0);
	gate_open();
	work_free(pool);
	assert_int_equal(recorded(), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_take_turns),
		cmocka_unit_test(test_per_key_running_limit),
		cmocka_unit_test(test_per_key_queue_limit),
		cmocka_unit_test(test_waiting_job_expires),
	};

	/* Refusals log a warning each; keep the output readable. */
	log_set_level(LOG_LEVEL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
