/* bq.c - bounded byte queue (see bq.h): a ring of fixed capacity under one
 * mutex, a condition variable for the blocking side, and park/wake
 * callbacks for the side that must not block. */
#include "base/bq.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct bq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;
	unsigned char *ring;
	size_t cap, head, len; /* bytes at [head, head + len) mod cap */
	int finished;          /* the producer is done */
	int abandoned;         /* the consumer is gone */
	struct err why;        /* the failure either side closed with */
	int failed;            /* finished with an error */
	int parked;            /* the non-blocking side waits for a wake */
	bq_fn park, wake;
	void *ctx;
};

struct bq *
bq_new(size_t cap, bq_fn park, bq_fn wake, void *ctx, struct err *e)
{
	struct bq *q;

	if (cap == 0 || cap > BQ_MAX_BYTES || (park == NULL) != (wake == NULL)) {
		err_set(e, ERR_INTERNAL, "bq: capacity %zu outside 1..%d", cap, BQ_MAX_BYTES);
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (q == NULL || (q->ring = malloc(cap)) == NULL) {
		free(q);
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->refs = 1;
	q->cap = cap;
	q->park = park;
	q->wake = wake;
	q->ctx = ctx;
	err_clear(&q->why);
	return q;
}

struct bq *
bq_ref(struct bq *q)
{
	pthread_mutex_lock(&q->lock);
	q->refs++;
	pthread_mutex_unlock(&q->lock);
	return q;
}

void
bq_free(struct bq *q)
{
	int last;

	if (q == NULL)
		return;
	pthread_mutex_lock(&q->lock);
	last = --q->refs == 0;
	pthread_mutex_unlock(&q->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q->ring);
	free(q);
}

void
bq_detach(struct bq *q)
{
	pthread_mutex_lock(&q->lock);
	q->park = q->wake = NULL;
	q->parked = 0;
	pthread_mutex_unlock(&q->lock);
}

/* With the lock held: the wake to call after unlocking, if the
 * non-blocking side is parked. */
static bq_fn
take_wake(struct bq *q, void **ctx)
{
	if (!q->parked || q->wake == NULL)
		return NULL;
	q->parked = 0;
	*ctx = q->ctx;
	return q->wake;
}

static void
unlock_wake(struct bq *q)
{
	void *ctx = NULL;
	bq_fn w = take_wake(q, &ctx);

	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	if (w)
		w(ctx);
}

/* With the lock held: park the non-blocking side. */
static void
park_locked(struct bq *q)
{
	if (q->park == NULL || q->parked)
		return;
	q->parked = 1;
	q->park(q->ctx);
}

static size_t
put_locked(struct bq *q, const unsigned char *p, size_t n)
{
	size_t room = q->cap - q->len, k = n < room ? n : room, done = 0;

	while (done < k) {
		size_t at = (q->head + q->len) % q->cap;
		size_t run = q->cap - at < k - done ? q->cap - at : k - done;
		memcpy(q->ring + at, p + done, run);
		q->len += run;
		done += run;
	}
	return k;
}

static size_t
get_locked(struct bq *q, unsigned char *p, size_t n)
{
	size_t k = n < q->len ? n : q->len, done = 0;

	while (done < k) {
		size_t run = q->cap - q->head < k - done ? q->cap - q->head : k - done;
		memcpy(p + done, q->ring + q->head, run);
		q->head = (q->head + run) % q->cap;
		q->len -= run;
		done += run;
	}
	return k;
}

static void
fail_msg(struct bq *q, struct err *e, const char *fallback)
{
	if (q->why.kind != ERR_NONE)
		*e = q->why;
	else
		err_set(e, ERR_UNAVAILABLE, "%s", fallback);
}

ssize_t
bq_read(struct bq *q, void *buf, size_t n, struct err *e)
{
	ssize_t r;

	pthread_mutex_lock(&q->lock);
	while (q->len == 0 && !q->finished && !q->abandoned)
		pthread_cond_wait(&q->cond, &q->lock);
	if (q->abandoned || (q->len == 0 && q->failed)) {
		fail_msg(q, e, "the transfer was abandoned");
		r = -1;
	} else {
		r = (ssize_t)get_locked(q, buf, n);
	}
	unlock_wake(q);
	return r;
}

int
bq_write(struct bq *q, const void *p, size_t n, struct err *e)
{
	const unsigned char *b = p;
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	while (n > 0) {
		size_t k;

		if (q->abandoned || q->finished) {
			fail_msg(q, e, "the reader went away");
			rc = -1;
			break;
		}
		k = put_locked(q, b, n);
		b += k;
		n -= k;
		if (k > 0) {
			/* Wake the taker before waiting for more room. */
			void *ctx = NULL;
			bq_fn w = take_wake(q, &ctx);
			if (w) {
				pthread_mutex_unlock(&q->lock);
				w(ctx);
				pthread_mutex_lock(&q->lock);
			}
		}
		if (n > 0 && q->len == q->cap && !q->abandoned && !q->finished)
			pthread_cond_wait(&q->cond, &q->lock);
	}
	unlock_wake(q);
	return rc;
}

ssize_t
bq_offer(struct bq *q, const void *p, size_t n, int *parked)
{
	ssize_t r;

	*parked = 0;
	pthread_mutex_lock(&q->lock);
	if (q->abandoned || q->finished) {
		r = -1;
	} else {
		r = (ssize_t)put_locked(q, p, n);
		if ((size_t)r < n) {
			park_locked(q);
			*parked = 1;
		}
	}
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return r;
}

ssize_t
bq_take(struct bq *q, void *buf, size_t n)
{
	ssize_t r;

	pthread_mutex_lock(&q->lock);
	if (q->abandoned) {
		r = BQ_FAILED;
	} else if (q->len > 0) {
		r = (ssize_t)get_locked(q, buf, n);
	} else if (q->finished) {
		r = q->failed ? BQ_FAILED : BQ_END;
	} else {
		park_locked(q);
		r = BQ_PARKED;
	}
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return r;
}

void
bq_finish(struct bq *q, const struct err *why)
{
	pthread_mutex_lock(&q->lock);
	if (!q->finished && !q->abandoned) {
		q->finished = 1;
		if (why && why->kind != ERR_NONE) {
			q->failed = 1;
			q->why = *why;
		}
	}
	unlock_wake(q);
}

void
bq_abandon(struct bq *q, const struct err *why)
{
	pthread_mutex_lock(&q->lock);
	if (!q->abandoned) {
		q->abandoned = 1;
		q->len = 0;
		if (why && why->kind != ERR_NONE && q->why.kind == ERR_NONE)
			q->why = *why;
	}
	unlock_wake(q);
}
