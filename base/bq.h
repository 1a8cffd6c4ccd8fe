/* bq.h - a bounded byte queue (bq_) between one producer and one consumer
 * on different threads, where one side may block (a worker) and the other
 * must not (an HTTP thread). The non-blocking side is told to park when it
 * cannot go on (its `park` callback runs under the queue's lock, so a
 * wake can never precede it) and is woken (`wake`, outside the lock) once
 * the other side made room, added bytes or closed. At most BQ_MAX_BYTES
 * are ever held, whatever flows through. */
#ifndef AAS_BQ_H
#define AAS_BQ_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

#define BQ_CHUNK (256 * 1024) /* a typical transfer unit */
#define BQ_MAX_BYTES (4 * BQ_CHUNK)

/* bq_take's answers besides a byte count. */
#define BQ_PARKED 0
#define BQ_END (-1)    /* the producer finished and everything was taken */
#define BQ_FAILED (-2) /* the producer failed, or the consumer abandoned */

struct bq;
typedef void (*bq_fn)(void *ctx);

/* A queue holding at most `cap` bytes (1..BQ_MAX_BYTES) with one
 * reference. `park`/`wake` (both or neither) act on the non-blocking
 * side. */
struct bq *bq_new(size_t cap, bq_fn park, bq_fn wake, void *ctx, struct err *e);
struct bq *bq_ref(struct bq *q);
/* Drops a reference. NULL is fine. */
void bq_free(struct bq *q);
/* Forgets park/wake (the non-blocking side is gone); a parked side is not
 * woken any more. */
void bq_detach(struct bq *q);

/* ---- blocking side ---- */

/* Waits for bytes: the count (up to n), 0 at the clean end, -1 with e set
 * when the producer failed (its error) or the consumer abandoned. */
ssize_t bq_read(struct bq *q, void *buf, size_t n, struct err *e) AAS_MUST_CHECK;
/* Waits until all n bytes are queued: 0, or -1 with e set once the
 * consumer abandoned (its error) or the producer side closed. */
int bq_write(struct bq *q, const void *p, size_t n, struct err *e) AAS_MUST_CHECK;

/* ---- non-blocking side ---- */

/* Queues what fits of n bytes and returns that count; when not all fit,
 * the caller was parked (*parked = 1) and is woken when there is room.
 * -1 once the consumer abandoned (the bytes are not wanted). */
ssize_t bq_offer(struct bq *q, const void *p, size_t n, int *parked);
/* Takes up to n bytes: the count, BQ_PARKED (nothing yet: the caller was
 * parked and is woken on news), BQ_END or BQ_FAILED. */
ssize_t bq_take(struct bq *q, void *buf, size_t n);

/* ---- either side ---- */

/* The producer is done: `why` NULL for a clean end (the consumer still
 * takes what is queued), else a failure the consumer sees instead of the
 * end. Later calls change nothing. */
void bq_finish(struct bq *q, const struct err *why);
/* The consumer gives up: queued bytes are dropped and the producer's next
 * call fails with `why` (NULL: a generic message). */
void bq_abandon(struct bq *q, const struct err *why);

#endif
