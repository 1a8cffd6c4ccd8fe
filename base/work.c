/* work.c - worker thread pool over a ring buffer. */
#include "base/work.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/log.h"

struct work_item {
	void (*fn)(void *);
	void *arg;
};

struct work_pool {
	pthread_mutex_t lock;
	pthread_cond_t ready;
	struct work_item *ring;
	size_t cap, head, count;
	int stopping;
	int n_threads;
	pthread_t *threads;
};

static void *
worker_main(void *p)
{
	struct work_pool *pool = p;

	for (;;) {
		struct work_item it;

		pthread_mutex_lock(&pool->lock);
		while (pool->count == 0 && !pool->stopping)
			pthread_cond_wait(&pool->ready, &pool->lock);
		if (pool->count == 0) {
			pthread_mutex_unlock(&pool->lock);
			return NULL;
		}
		it = pool->ring[pool->head];
		pool->head = (pool->head + 1) % pool->cap;
		pool->count--;
		pthread_mutex_unlock(&pool->lock);
		it.fn(it.arg);
	}
}

struct work_pool *
work_new(int threads, size_t max_queue, struct err *e)
{
	struct work_pool *pool = calloc(1, sizeof(*pool));

	if (pool == NULL || threads < 1 || max_queue < 1)
		goto fail;
	pool->ring = calloc(max_queue, sizeof(*pool->ring));
	pool->threads = calloc((size_t)threads, sizeof(*pool->threads));
	if (pool->ring == NULL || pool->threads == NULL)
		goto fail;
	pool->cap = max_queue;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->ready, NULL);
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
	if (pool) {
		free(pool->ring);
		free(pool->threads);
		free(pool);
	}
	err_set(e, ERR_INTERNAL, "cannot create worker pool");
	return NULL;
}

void
work_free(struct work_pool *pool)
{
	if (pool == NULL)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stopping = 1;
	pthread_cond_broadcast(&pool->ready);
	pthread_mutex_unlock(&pool->lock);
	for (int i = 0; i < pool->n_threads; i++)
		pthread_join(pool->threads[i], NULL);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->ready);
	free(pool->ring);
	free(pool->threads);
	free(pool);
}

int
work_submit(struct work_pool *pool, void (*fn)(void *), void *arg)
{
	int rc = -1;

	pthread_mutex_lock(&pool->lock);
	if (!pool->stopping && pool->count < pool->cap) {
		pool->ring[(pool->head + pool->count) % pool->cap] = (struct work_item){ fn, arg };
		pool->count++;
		pthread_cond_signal(&pool->ready);
		rc = 0;
	}
	pthread_mutex_unlock(&pool->lock);
	if (rc < 0)
		log_warn("work: queue full (%zu jobs)", pool->cap);
	return rc;
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
