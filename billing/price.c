/* price.c - billing arithmetic. */
#include "billing/price.h"

int64_t
bill_minutes_used(int64_t ms, int minute_s)
{
	int64_t minute_ms = (int64_t)minute_s * 1000;

	if (ms <= 0 || minute_s <= 0)
		return 0;
	return (ms + minute_ms - 1) / minute_ms;
}

int64_t
bill_cost(int64_t minutes, int64_t price_per_minute)
{
	if (minutes < 0 || price_per_minute < 0)
		return -1;
	if (price_per_minute != 0 && minutes > INT64_MAX / price_per_minute)
		return -1;
	return minutes * price_per_minute;
}

int64_t
bill_refund_minutes(int64_t paid_minutes, int64_t used_minutes)
{
	if (used_minutes < 0)
		used_minutes = 0;
	return paid_minutes > used_minutes ? paid_minutes - used_minutes : 0;
}

int64_t
bill_affordable_minutes(int64_t balance, int64_t price_per_minute)
{
	if (balance <= 0 || price_per_minute <= 0)
		return 0;
	return balance / price_per_minute;
}
