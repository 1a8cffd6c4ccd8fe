/* clock.h - the monotonic clock in milliseconds, for deadlines and
 * durations (never for wall-clock times). */
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

/* Sleeps ms milliseconds, whatever signals arrive meanwhile. */
static inline void
clock_sleep_ms(long long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

#endif
