/* test_work_sse.c - the worker pool (server/work.h) and SSE streams without
 * a client connection (server/sse.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "server/sse.h"
#include "base/work.h"

#define DEADLINE_S 10

/* ---- a completion counter with a deadline ---- */

struct done {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int n;
};

static void
done_init(struct done *d)
{
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->n = 0;
}

static void
done_destroy(struct done *d)
{
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
}

static void
done_add(struct done *d)
{
	pthread_mutex_lock(&d->lock);
	d->n++;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* Waits until at least `want`; returns the count reached. */
static int
done_wait(struct done *d, int want)
{
	struct timespec until;
	int n, rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += DEADLINE_S;
	pthread_mutex_lock(&d->lock);
	while (d->n < want && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&d->cond, &d->lock, &until);
	n = d->n;
	pthread_mutex_unlock(&d->lock);
	return n;
}

static int
done_get(struct done *d)
{
	int n;

	pthread_mutex_lock(&d->lock);
	n = d->n;
	pthread_mutex_unlock(&d->lock);
	return n;
}

/* ---- a latch a job can block on ---- */

struct latch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open;
};

static void
latch_init(struct latch *l)
{
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->open = 0;
}

static void
latch_destroy(struct latch *l)
{
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
}

static void
latch_open(struct latch *l)
{
	pthread_mutex_lock(&l->lock);
	l->open = 1;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static void
latch_wait(struct latch *l)
{
	pthread_mutex_lock(&l->lock);
	while (!l->open)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
}

/* ---- work pool ---- */

#define N_JOBS 2000

struct count_ctx {
	atomic_int runs[N_JOBS];
	struct done done;
};

struct count_job {
	struct count_ctx *ctx;
	int index;
};

static void
count_fn(void *arg)
{
	struct count_job *j = arg;

	atomic_fetch_add(&j->ctx->runs[j->index], 1);
	done_add(&j->ctx->done);
}

static void
test_pool_runs_each_job_once(void **state)
{
	static struct count_ctx ctx;
	static struct count_job jobs[N_JOBS];
	struct work_pool *pool;
	struct err e;

	(void)state;
	err_clear(&e);
	for (int i = 0; i < N_JOBS; i++)
		atomic_init(&ctx.runs[i], 0);
	done_init(&ctx.done);
	pool = work_new(4, N_JOBS, &e);
	assert_non_null(pool);
	assert_int_equal(e.kind, ERR_NONE);
	for (int i = 0; i < N_JOBS; i++) {
		jobs[i].ctx = &ctx;
		jobs[i].index = i;
		assert_int_equal(work_submit(pool, count_fn, &jobs[i]), 0);
	}
	assert_int_equal(done_wait(&ctx.done, N_JOBS), N_JOBS);
	assert_int_equal(work_pending(pool), 0);
	work_free(pool);
	/* Nothing ran twice (or late). */
	assert_int_equal(done_get(&ctx.done), N_JOBS);
	for (int i = 0; i < N_JOBS; i++)
		if (atomic_load(&ctx.runs[i]) != 1)
			fail_msg("job %d ran %d times", i, atomic_load(&ctx.runs[i]));
	done_destroy(&ctx.done);
}

/* Many producers at once, as the HTTP threads are. */
struct producer {
	struct work_pool *pool;
	struct count_job *jobs;
	int first, n;
	int refused;
};

static void *
produce(void *p)
{
	struct producer *pr = p;

	for (int i = pr->first; i < pr->first + pr->n; i++)
		if (work_submit(pr->pool, count_fn, &pr->jobs[i]) != 0)
			pr->refused++;
	return NULL;
}

static void
test_pool_concurrent_submitters(void **state)
{
	static struct count_ctx ctx;
	static struct count_job jobs[N_JOBS];
	struct producer pr[4];
	pthread_t th[4];
	struct work_pool *pool;
	struct err e;

	(void)state;
	err_clear(&e);
	for (int i = 0; i < N_JOBS; i++) {
		atomic_init(&ctx.runs[i], 0);
		jobs[i].ctx = &ctx;
		jobs[i].index = i;
	}
	done_init(&ctx.done);
	pool = work_new(3, N_JOBS, &e);
	assert_non_null(pool);
	for (int t = 0; t < 4; t++) {
		pr[t] = (struct producer){ pool, jobs, t * (N_JOBS / 4), N_JOBS / 4, 0 };
		assert_int_equal(pthread_create(&th[t], NULL, produce, &pr[t]), 0);
	}
	for (int t = 0; t < 4; t++) {
		pthread_join(th[t], NULL);
		assert_int_equal(pr[t].refused, 0);
	}
	assert_int_equal(done_wait(&ctx.done, N_JOBS), N_JOBS);
	work_free(pool);
	for (int i = 0; i < N_JOBS; i++)
		assert_int_equal(atomic_load(&ctx.runs[i]), 1);
	done_destroy(&ctx.done);
}

struct block_ctx {
	struct latch latch;
	struct done started;
	struct done finished;
};

static void
blocking_fn(void *arg)
{
	struct block_ctx *b = arg;

	done_add(&b->started);
	latch_wait(&b->latch);
	done_add(&b->finished);
}

static void
quick_fn(void *arg)
{
	struct block_ctx *b = arg;

	done_add(&b->finished);
}

static void
test_pool_rejects_when_full(void **state)
{
	struct block_ctx b;
	struct work_pool *pool;
	struct err e;

	(void)state;
	err_clear(&e);
	latch_init(&b.latch);
	done_init(&b.started);
	done_init(&b.finished);
	pool = work_new(1, 2, &e);
	assert_non_null(pool);

	/* The only worker is busy... */
	assert_int_equal(work_submit(pool, blocking_fn, &b), 0);
	assert_int_equal(done_wait(&b.started, 1), 1);
	assert_int_equal(work_pending(pool), 0);
	/* ... so two jobs fill the queue and the third is refused. */
	assert_int_equal(work_submit(pool, quick_fn, &b), 0);
	assert_int_equal(work_submit(pool, quick_fn, &b), 0);
	assert_int_equal(work_pending(pool), 2);
	assert_int_equal(work_submit(pool, quick_fn, &b), -1);
	assert_int_equal(work_submit(pool, quick_fn, &b), -1);
	assert_int_equal(work_pending(pool), 2);
	assert_int_equal(done_get(&b.finished), 0);

	/* Draining makes room again. */
	latch_open(&b.latch);
	assert_int_equal(done_wait(&b.finished, 3), 3);
	assert_int_equal(work_submit(pool, quick_fn, &b), 0);
	assert_int_equal(done_wait(&b.finished, 4), 4);
	work_free(pool);
	/* The refused jobs never ran. */
	assert_int_equal(done_get(&b.finished), 4);
	assert_int_equal(done_get(&b.started), 1);
	latch_destroy(&b.latch);
	done_destroy(&b.started);
	done_destroy(&b.finished);
}

static void *
open_later(void *p)
{
	struct latch *l = p;
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	latch_open(l);
	return NULL;
}

static void
test_pool_free_drains_queue(void **state)
{
	struct block_ctx b;
	struct work_pool *pool;
	pthread_t opener;
	struct err e;

	(void)state;
	err_clear(&e);
	latch_init(&b.latch);
	done_init(&b.started);
	done_init(&b.finished);
	pool = work_new(1, 8, &e);
	assert_non_null(pool);
	assert_int_equal(work_submit(pool, blocking_fn, &b), 0);
	assert_int_equal(done_wait(&b.started, 1), 1);
	for (int i = 0; i < 5; i++)
		assert_int_equal(work_submit(pool, quick_fn, &b), 0);
	assert_int_equal(work_pending(pool), 5);
	/* work_free stops the pool while 5 jobs wait; they still run. */
	assert_int_equal(pthread_create(&opener, NULL, open_later, &b.latch), 0);
	work_free(pool);
	assert_int_equal(done_get(&b.finished), 6);
	pthread_join(opener, NULL);
	latch_destroy(&b.latch);
	done_destroy(&b.started);
	done_destroy(&b.finished);
}

static void
test_pool_bad_arguments(void **state)
{
	struct err e;

	(void)state;
	err_clear(&e);
	assert_null(work_new(0, 10, &e));
	assert_int_equal(e.kind, ERR_INTERNAL);
	assert_string_equal(e.msg, "cannot create worker pool");
	err_clear(&e);
	assert_null(work_new(-1, 10, &e));
	assert_int_equal(e.kind, ERR_INTERNAL);
	err_clear(&e);
	assert_null(work_new(1, 0, &e));
	assert_int_equal(e.kind, ERR_INTERNAL);
	/* A NULL err is fine too. */
	assert_null(work_new(0, 0, NULL));
}

static void
test_pool_free_null(void **state)
{
	(void)state;
	work_free(NULL);
	/* And an idle pool stops promptly. */
	struct err e;
	err_clear(&e);
	struct work_pool *pool = work_new(8, 4, &e);
	assert_non_null(pool);
	assert_int_equal(work_pending(pool), 0);
	work_free(pool);
}

/* ---- SSE ---- */

static void
test_sse_lifecycle(void **state)
{
	static const char msg[] = "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}";
	struct sse *s;

	(void)state;
	s = sse_new();
	assert_non_null(s);
	assert_int_equal(sse_closed(s), 0);
	assert_int_equal(sse_send_message(s, msg, strlen(msg)), 0);
	assert_int_equal(sse_send_message(s, msg, strlen(msg)), 0);
	assert_int_equal(sse_send_comment(s, "keep-alive"), 0);
	/* Not registered until a response reads it. */
	assert_int_equal(sse_open_count(), 0);
	sse_finish(s);
	/* Finished: nothing more is accepted. */
	assert_int_equal(sse_send_message(s, msg, strlen(msg)), -1);
	assert_int_equal(sse_send_comment(s, "late"), -1);
	sse_finish(s); /* twice is harmless */
	assert_int_equal(sse_closed(s), 0);
	sse_unref(s);
	sse_unref(NULL);
	/* Nothing to keep alive or finish; must return. */
	sse_keepalive_all(15);
	sse_finish_all();
}

static void
count_close(void *arg)
{
	(*(int *)arg)++;
}

/* A stream never handed to libmicrohttpd still runs its close callback,
 * once, when the last reference goes; a second callback is ignored. */
static void
test_sse_on_close_once(void **state)
{
	struct sse *s = sse_new();
	int closed = 0, other = 0;

	(void)state;
	assert_non_null(s);
	sse_on_close(s, count_close, &closed);
	sse_on_close(s, count_close, &other);
	sse_ref(s);
	sse_finish(s);
	sse_unref(s);
	assert_int_equal(closed, 0);
	sse_unref(s);
	assert_int_equal(closed, 1);
	assert_int_equal(other, 0);
}

static void
test_sse_refcount(void **state)
{
	struct sse *s = sse_new();

	(void)state;
	assert_non_null(s);
	sse_ref(s);
	sse_ref(s);
	sse_unref(s);
	sse_unref(s);
	/* Still alive with the last reference. */
	assert_int_equal(sse_send_message(s, "{}", 2), 0);
	sse_unref(s);
}

static void
test_sse_refuses_newline(void **state)
{
	struct sse *s = sse_new();

	(void)state;
	assert_non_null(s);
	assert_int_equal(sse_send_message(s, "{\"a\":\n1}", 8), -1);
	assert_int_equal(sse_send_message(s, "\n", 1), -1);
	assert_int_equal(sse_send_message(s, "{}\n", 3), -1);
	/* A newline after `len` is not part of the message. */
	assert_int_equal(sse_send_message(s, "{}\n", 2), 0);
	/* A refused message does not end the stream. */
	assert_int_equal(sse_send_message(s, "{\"a\":1}", 7), 0);
	/* An escaped newline inside JSON is fine. */
	assert_int_equal(sse_send_message(s, "{\"a\":\"x\\ny\"}", 12), 0);
	assert_int_equal(sse_send_message(s, "", 0), 0);
	sse_finish(s);
	sse_unref(s);
}

/* SSE also ends lines at a lone CR; a raw CR in the data would split
 * the event just as a LF does, but only LF is refused. */
static void
test_sse_refuses_carriage_return(void **state)
{
	struct sse *s;

	(void)state;
	s = sse_new();
	assert_non_null(s);
	assert_int_equal(sse_send_message(s, "{}\rdata: x", 10), -1);
	sse_unref(s);
}

/* Named events count in the unsent bytes like messages; a name with a
 * line end is refused. sse_pending is what a slow client owes. */
static void
test_sse_events_and_pending(void **state)
{
	struct sse *s = sse_new();
	size_t want;

	(void)state;
	assert_non_null(s);
	assert_int_equal(sse_pending(s), 0);
	assert_int_equal(sse_send_event(s, "stdout", "{\"text\":\"hi\"}", 13), 0);
	want = strlen("event: stdout\ndata: {\"text\":\"hi\"}\n\n");
	assert_int_equal(sse_pending(s), want);
	assert_int_equal(sse_send_message(s, "{}", 2), 0);
	want += strlen("event: message\ndata: {}\n\n");
	assert_int_equal(sse_pending(s), want);
	assert_int_equal(sse_send_event(s, "a\nb", "{}", 2), -1);
	assert_int_equal(sse_send_event(s, "result", "{\n}", 3), -1);
	assert_int_equal(sse_pending(s), want);
	sse_finish(s);
	sse_unref(s);
}

/* A client more than SSE_MAX_PROGRESS_BACKLOG behind has progress dropped
 * and counted; the stream itself goes on (a result still fits). */
static void
test_sse_gate_drops_when_behind(void **state)
{
	const size_t chunk = 256u << 10;
	char *big = malloc(chunk);
	struct sse *s = sse_new();
	struct sse_gate g = { 0, 0 };
	double p = 0;

	(void)state;
	assert_non_null(big);
	assert_non_null(s);
	memset(big, 'a', chunk);
	/* No reader: everything sent stays pending. */
	while (sse_pending(s) <= SSE_MAX_PROGRESS_BACKLOG) {
		assert_int_equal(sse_gate_pass(s, &g, ++p), 1);
		assert_int_equal(sse_send_message(s, big, chunk), 0);
	}
	assert_int_equal(g.dropped, 0);
	assert_int_equal(sse_gate_pass(s, &g, ++p), 0);
	assert_int_equal(sse_gate_pass(s, &g, ++p), 0);
	assert_int_equal(g.dropped, 2);
	assert_true(g.dropped_at == p);
	assert_int_equal(sse_send_message(s, big, chunk), 0);
	sse_finish(s);
	sse_unref(s);
	free(big);
}

static void
test_sse_buffer_limit(void **state)
{
	const size_t chunk = 1u << 20;
	const size_t overhead = strlen("event: message\ndata: ") + strlen("\n\n");
	char *big = malloc(chunk);
	struct sse *s = sse_new();
	size_t sent = 0;
	int ok = 0;

	(void)state;
	assert_non_null(big);
	assert_non_null(s);
	memset(big, 'a', chunk);
	/* No reader: 1 MiB messages fit until the buffer limit. */
	while (sse_send_message(s, big, chunk) == 0) {
		ok++;
		sent += chunk + overhead;
		assert_true(ok <= (int)(SSE_MAX_BUFFER / chunk));
	}
	assert_int_equal(ok, (int)(SSE_MAX_BUFFER / (chunk + overhead)));
	assert_int_equal(ok, (int)(SSE_MAX_BUFFER >> 20) - 1);
	assert_true(sent <= SSE_MAX_BUFFER);
	/* Overflow fails the stream: even a small message is refused now. */
	assert_int_equal(sse_send_message(s, "{}", 2), -1);
	assert_int_equal(sse_send_comment(s, "x"), -1);
	sse_finish(s);
	sse_unref(s);

	/* A single message larger than the limit is refused outright. */
	s = sse_new();
	assert_non_null(s);
	char *huge = malloc(SSE_MAX_BUFFER);
	assert_non_null(huge);
	memset(huge, 'b', SSE_MAX_BUFFER);
	assert_int_equal(sse_send_message(s, huge, SSE_MAX_BUFFER), -1);
	assert_int_equal(sse_send_message(s, "{}", 2), -1);
	sse_unref(s);
	free(huge);
	free(big);
}

static void
test_sse_response_without_connection(void **state)
{
	struct MHD_Response *r;
	struct sse *s = sse_new();
	size_t before = sse_open_count();

	(void)state;
	assert_non_null(s);
	r = sse_response(s, NULL);
	assert_non_null(r);
	/* Registered while the response exists. */
	assert_int_equal(sse_open_count(), before + 1);
	assert_int_equal(sse_send_message(s, "{}", 2), 0);
	/* The response holds its own reference: freeing it closes the stream
	 * but leaves ours valid. */
	MHD_destroy_response(r);
	assert_int_equal(sse_open_count(), before);
	assert_int_equal(sse_closed(s), 1);
	assert_int_equal(sse_send_message(s, "{}", 2), -1);
	sse_unref(s);

	/* finish_all reaches a registered stream. */
	s = sse_new();
	assert_non_null(s);
	r = sse_response(s, NULL);
	assert_non_null(r);
	sse_finish_all();
	assert_int_equal(sse_send_message(s, "{}", 2), -1);
	/* A fresh stream is not idle: keep-alive writes nothing and returns. */
	sse_keepalive_all(15);
	/* The producer may drop its reference first. */
	sse_unref(s);
	assert_int_equal(sse_open_count(), before + 1);
	MHD_destroy_response(r);
	assert_int_equal(sse_open_count(), before);
}

struct sse_producer {
	struct sse *s;
	int ok;
};

static void *
sse_produce(void *p)
{
	struct sse_producer *pr = p;

	for (int i = 0; i < 1000; i++)
		if (sse_send_message(pr->s, "{\"n\":1}", 7) == 0)
			pr->ok++;
	return NULL;
}

static void
test_sse_concurrent_producers(void **state)
{
	struct sse_producer pr[4];
	pthread_t th[4];
	struct sse *s = sse_new();

	(void)state;
	assert_non_null(s);
	for (int i = 0; i < 4; i++) {
		pr[i] = (struct sse_producer){ s, 0 };
		sse_ref(s);
		assert_int_equal(pthread_create(&th[i], NULL, sse_produce, &pr[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(pr[i].ok, 1000);
		sse_unref(s);
	}
	sse_finish(s);
	sse_unref(s);
}

static int
quiet(void **state)
{
	(void)state;
	/* work_submit logs a warning per refusal; keep the output readable. */
	log_set_level(LOG_LEVEL_ERROR);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_runs_each_job_once),
		cmocka_unit_test(test_pool_concurrent_submitters),
		cmocka_unit_test(test_pool_rejects_when_full),
		cmocka_unit_test(test_pool_free_drains_queue),
		cmocka_unit_test(test_pool_bad_arguments),
		cmocka_unit_test(test_pool_free_null),
		cmocka_unit_test(test_sse_lifecycle),
		cmocka_unit_test(test_sse_refcount),
		cmocka_unit_test(test_sse_on_close_once),
		cmocka_unit_test(test_sse_refuses_newline),
		cmocka_unit_test(test_sse_refuses_carriage_return),
		cmocka_unit_test(test_sse_events_and_pending),
		cmocka_unit_test(test_sse_gate_drops_when_behind),
		cmocka_unit_test(test_sse_buffer_limit),
		cmocka_unit_test(test_sse_response_without_connection),
		cmocka_unit_test(test_sse_concurrent_producers),
	};

	return cmocka_run_group_tests(tests, quiet, NULL);
}
