/* work.h - a fixed pool of threads for slow work, with a bounded queue, so
 * HTTP threads hand off and never wait (work_). */
#ifndef AAS_WORK_H
#define AAS_WORK_H

#include <stddef.h>

#include "base/err.h"

struct work_pool;

struct work_pool *work_new(int threads, size_t max_queue, struct err *e);
/* Stops taking jobs, lets queued and running ones finish, joins. */
void work_free(struct work_pool *pool);
/* Queues fn(arg). -1 when the queue is full or the pool is stopping; the
 * caller then answers "busy" itself. */
int work_submit(struct work_pool *pool, void (*fn)(void *), void *arg);
/* Jobs queued but not started. */
size_t work_pending(struct work_pool *pool);

#endif
