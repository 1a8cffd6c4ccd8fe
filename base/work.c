/* work.c - worker thread pool with fair, bounded queues per key. */
#include "base/work.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"

#define WORK_TIMER_MS 100 /* how often waiting jobs are checked for expiry */

struct work_item {
	struct work_item *next;
	void (*fn)(void *);
	void (*expire)(void *);
	void *arg;
	long long queued_ms;
};

/* A key with jobs waiting or running; gone when it has neither. */
struct work_key {
	struct work_key *next;
	char name[WORK_KEY_MAX + 1];
	struct work_item *head, *tail;
	size_t queued;
	size_t running;
};

struct work_pool {
	pthread_mutex_t lock;
	pthread_cond_t ready;
	pthread_cond_t timer_wake;
	struct work_key *keys; /* every live key */
	struct work_key *turn; /* the key whose turn comes next */
	size_t cap, count;     /* jobs waiting, in all keys */
	struct work_limits lim;
	int stopping;
	int n_threads;
	pthread_t *threads;
	pthread_t timer;
	int timer_started;
};

static struct work_key *
key_find(struct work_pool *pool, const char *name)
{
	for (struct work_key *k = pool->keys; k; k = k->next)
		if (strcmp(k->name, name) == 0)
			return k;
	return NULL;
}

/* Frees a key that has nothing waiting or running. Under the lock. */
static void
key_release(struct work_pool *pool, struct work_key *k)
{
	struct work_key **pp;

	if (k->queued > 0 || k->running > 0)
		return;
	for (pp = &pool->keys; *pp && *pp != k; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = k->next;
	if (pool->turn == k)
		pool->turn = k->next;
	free(k);
}

/* The unnamed key (internal work) is never limited per key. */
static int
key_may_run(const struct work_pool *pool, const struct work_key *k)
{
	return k->queued > 0 &&
	    (k->name[0] == '\0' || pool->lim.per_key_running == 0 ||
		k->running < pool->lim.per_key_running);
}

/* The next job by turns across keys, or NULL. Under the lock. */
static struct work_item *
take_next(struct work_pool *pool, struct work_key **owner)
{
	struct work_key *start = pool->turn ? pool->turn : pool->keys;
	struct work_key *k = start;
	struct work_item *it;

	if (k == NULL)
		return NULL;
	do {
		if (key_may_run(pool, k)) {
			it = k->head;
			k->head = it->next;
			if (k->head == NULL)
				k->tail = NULL;
			k->queued--;
			k->running++;
			pool->count--;
			pool->turn = k->next ? k->next : pool->keys;
			*owner = k;
			return it;
		}
		k = k->next ? k->next : pool->keys;
	} while (k != start);
	return NULL;
}

static void *
worker_main(void *p)
{
	struct work_pool *pool = p;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		struct work_key *k = NULL;
		struct work_item *it = take_next(pool, &k);

		if (it == NULL) {
			if (pool->stopping && pool->count == 0)
				break;
			pthread_cond_wait(&pool->ready, &pool->lock);
			continue;
		}
		pthread_mutex_unlock(&pool->lock);
		it->fn(it->arg);
		free(it);
		pthread_mutex_lock(&pool->lock);
		k->running--;
		/* A key at its running limit may take a turn again; while the
		 * pool stops, idle workers must see the queue run dry. */
		if (pool->stopping)
			pthread_cond_broadcast(&pool->ready);
		else if (k->queued > 0)
			pthread_cond_signal(&pool->ready);
		key_release(pool, k);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

/* Moves every job that waited longer than max_wait_ms onto `out`. Under
 * the lock. */
static void
collect_expired(struct work_pool *pool, long long now, struct work_item **out)
{
	struct work_key *k = pool->keys;

	while (k) {
		struct work_key *next = k->next;
		struct work_item **pp = &k->head, *last = NULL;

		while (*pp) {
			struct work_item *it = *pp;
			if (now - it->queued_ms < pool->lim.max_wait_ms) {
				last = it;
				pp = &it->next;
				continue;
			}
			*pp = it->next;
			k->queued--;
			pool->count--;
			it->next = *out;
			*out = it;
		}
		k->tail = last;
		key_release(pool, k);
		k = next;
	}
}

static void *
timer_main(void *p)
{
	struct work_pool *pool = p;

	pthread_mutex_lock(&pool->lock);
	while (!pool->stopping) {
		struct work_item *expired = NULL;
		struct timespec ts = clock_cond_deadline(WORK_TIMER_MS);

		pthread_cond_timedwait(&pool->timer_wake, &pool->lock, &ts);
		if (pool->stopping)
			break;
		collect_expired(pool, clock_ms(), &expired);
		pthread_mutex_unlock(&pool->lock);
		while (expired) {
			struct work_item *it = expired;
			expired = it->next;
			if (it->expire)
				it->expire(it->arg);
			else
				it->fn(it->arg);
			free(it);
		}
		pthread_mutex_lock(&pool->lock);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

struct work_pool *
work_new(int threads, size_t max_queue, struct err *e)
{
	struct work_pool *pool = calloc(1, sizeof(*pool));

	if (pool == NULL || threads < 1 || max_queue < 1)
		goto fail;
	pool->threads = calloc((size_t)threads, sizeof(*pool->threads));
	if (pool->threads == NULL)
		goto fail;
	pool->cap = max_queue;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->ready, NULL);
	pthread_cond_init(&pool->timer_wake, NULL);
	for (int i = 0; i < threads; i++) {
		if (pthread_create(&pool->threads[i], NULL, worker_main, pool) != 0) {
			work_free(pool);
			err_set(e, ERR_INTERNAL, "cannot start worker threads");
			return NULL;
		}
		pool->n_threads++;
	}
	return pool;
fail:
	if (pool)
		free(pool->threads);
	free(pool);
	err_set(e, ERR_INTERNAL, "cannot create worker pool");
	return NULL;
}

int
work_set_limits(struct work_pool *pool, const struct work_limits *lim, struct err *e)
{
	pthread_mutex_lock(&pool->lock);
	pool->lim = *lim;
	if (lim->max_wait_ms > 0 && !pool->timer_started) {
		if (pthread_create(&pool->timer, NULL, timer_main, pool) != 0) {
			pthread_mutex_unlock(&pool->lock);
			err_set(e, ERR_INTERNAL, "cannot start the work queue timer");
			return -1;
		}
		pool->timer_started = 1;
	}
	pthread_mutex_unlock(&pool->lock);
	return 0;
}

void
work_free(struct work_pool *pool)
{
	if (pool == NULL)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stopping = 1;
	pthread_cond_broadcast(&pool->ready);
	pthread_cond_broadcast(&pool->timer_wake);
	pthread_mutex_unlock(&pool->lock);
	if (pool->timer_started)
		pthread_join(pool->timer, NULL);
	/* Waiting jobs still run: each was promised an answer. */
	for (int i = 0; i < pool->n_threads; i++)
		pthread_join(pool->threads[i], NULL);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->ready);
	pthread_cond_destroy(&pool->timer_wake);
	free(pool->threads);
	free(pool);
}

int
work_submit_key(struct work_pool *pool, const char *key, void (*fn)(void *), void (*expire)(void *),
    void *arg)
{
	struct work_item *it = calloc(1, sizeof(*it));
	struct work_key *k;
	const char *why = NULL;

	if (it == NULL)
		return -1;
	it->fn = fn;
	it->expire = expire;
	it->arg = arg;
	it->queued_ms = clock_ms();
	if (key == NULL)
		key = "";
	if (strlen(key) > WORK_KEY_MAX) {
		free(it);
		return -1;
	}
	pthread_mutex_lock(&pool->lock);
	k = key_find(pool, key);
	if (pool->stopping)
		why = "stopping";
	else if (pool->count >= pool->cap)
		why = "queue full";
	else if (k && key[0] && pool->lim.per_key_queued > 0 &&
	    k->queued >= pool->lim.per_key_queued)
		why = "this key's queue is full";
	else if (k == NULL && (k = calloc(1, sizeof(*k))) != NULL) {
		/* A new key, named and linked. */
		memcpy(k->name, key, strlen(key));
		k->next = pool->keys;
		pool->keys = k;
	} else if (k == NULL) {
		why = "out of memory";
	}
	if (why) {
		pthread_mutex_unlock(&pool->lock);
		free(it);
		log_warn("work: job refused: %s", why);
		return -1;
	}
	if (k->tail)
		k->tail->next = it;
	else
		k->head = it;
	k->tail = it;
	k->queued++;
	pool->count++;
	pthread_cond_signal(&pool->ready);
	pthread_mutex_unlock(&pool->lock);
	return 0;
}

int
work_submit(struct work_pool *pool, void (*fn)(void *), void *arg)
{
	return work_submit_key(pool, "", fn, NULL, arg);
}

size_t
work_pending(struct work_pool *pool)
{
	size_t n;

	pthread_mutex_lock(&pool->lock);
	n = pool->count;
	pthread_mutex_unlock(&pool->lock);
	return n;
}
