/* work.h - a fixed pool of threads for slow work (work_), so HTTP threads
 * hand off and never wait. Jobs are queued under a key (the caller's
 * credential): keys take turns, a key may run only so many jobs at once
 * and queue only so many more, and a job that cannot start in time
 * expires, so its caller can answer "busy, retry" instead of waiting. One
 * key's slow work thus never stalls another key's calls for long. */
#ifndef AAS_WORK_H
#define AAS_WORK_H

#include <stddef.h>

#include "base/err.h"

#define WORK_KEY_MAX 64 /* longest key */

struct work_pool;

struct work_limits {
	size_t per_key_running; /* jobs of one key running at once; 0: no limit */
	size_t per_key_queued;  /* jobs of one key waiting; 0: no limit */
	long long max_wait_ms;  /* a job not started this long expires; 0: never */
};

/* `threads` workers and at most `max_queue` waiting jobs in all. */
struct work_pool *work_new(int threads, size_t max_queue, struct err *e);
/* Sets the per-key limits (none until called); starts the expiry timer. */
int work_set_limits(struct work_pool *pool, const struct work_limits *lim,
    struct err *e) AAS_MUST_CHECK;
/* Stops taking jobs, lets queued and running ones finish, joins. */
void work_free(struct work_pool *pool);
/* Queues fn(arg) under `key` ("" or NULL: internal work, never limited
 * per key). When it cannot start within max_wait_ms, expire(arg) runs
 * instead, on the pool's timer thread (fn when expire is NULL). -1 when the
 * pool's queue or the key's is full, the key is longer than WORK_KEY_MAX
 * or the pool is stopping; the caller then answers "busy" itself. */
int work_submit_key(struct work_pool *pool, const char *key, void (*fn)(void *),
    void (*expire)(void *), void *arg);
/* work_submit_key with the internal key. */
int work_submit(struct work_pool *pool, void (*fn)(void *), void *arg);
/* Jobs queued but not started. */
size_t work_pending(struct work_pool *pool);

#endif
