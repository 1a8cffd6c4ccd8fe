/* price.h - billing arithmetic (bill_). Integer micro-USD only; a minute
 * started is a minute billed. Pure functions, unit-tested. */
#ifndef AAS_PRICE_H
#define AAS_PRICE_H

#include <stdint.h>

/* Minutes billed for `ms` milliseconds of use, with minutes of `minute_s`
 * seconds: every started minute counts; no use at all is zero minutes. */
int64_t bill_minutes_used(int64_t ms, int minute_s);

/* Cost of `minutes` at `price_per_minute`; -1 when it would overflow. */
int64_t bill_cost(int64_t minutes, int64_t price_per_minute);

/* Whole minutes paid for but not used (never negative). */
int64_t bill_refund_minutes(int64_t paid_minutes, int64_t used_minutes);

/* How many minutes a balance buys at a price (0 when the price is 0 and
 * nothing is charged: callers treat a zero price as free). */
int64_t bill_affordable_minutes(int64_t balance, int64_t price_per_minute);

#endif
