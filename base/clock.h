/* clock.h - the monotonic clock in milliseconds, for deadlines and
 * durations (never for wall-clock times), and the deadline of a wait on a
 * condition variable. */
#ifndef AAS_CLOCK_H
#define AAS_CLOCK_H

#include <time.h>

static inline long long
clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The time ms milliseconds from now on the clock pthread_cond_timedwait
 * reads (CLOCK_REALTIME, a condition variable's default): a deadline for
 * such a wait, not a wall-clock time to show or keep. */
static inline struct timespec
clock_cond_deadline(long long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* Sleeps ms milliseconds, whatever signals arrive meanwhile. */
static inline void
clock_sleep_ms(long long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

#endif
