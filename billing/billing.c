/* billing.c - charges and settlement, inside the caller's transaction. */
#include "billing/billing.h"

#include <inttypes.h>
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "billing/ledger.h"
#include "billing/price.h"

int
bill_charge_create(PGconn *c, const char *account, const char *id, const char *size, int minutes,
    int64_t price, struct err *e)
{
	int64_t balance, cost = bill_cost(minutes, price), after;
	char reason[160], key[64];
	int posted;

	if (cost < 0) {
		err_set(e, ERR_INTERNAL, "price overflow");
		return -1;
	}
	if (bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	if (balance < cost) {
		err_set(e, ERR_PAYMENT,
		    "not enough credit: your balance is %" PRId64 " micro-USD;"
		    " a %s sandbox costs %" PRId64 " per minute, so %d minutes cost %" PRId64
		    " and your balance buys %" PRId64 " minutes. Ask for fewer timeout_minutes"
		    " or destroy sandboxes you no longer need.",
		    balance, size, price, minutes, cost, bill_affordable_minutes(balance, price));
		return -1;
	}
	fmt_cut(reason, sizeof(reason), "%s sandbox %s, %d minutes", size, id, minutes);
	if (fmt_err(e, "ledger key", key, sizeof(key), "charge:create:%s", id) < 0)
		return -1;
	if (bill_post(c, account, id, "charge", -cost, minutes, reason, key, &after, &posted, e) <
	    0)
		return -1;
	return 0;
}

/* What a charge the balance must cover is for: its refusal says so. */
enum cover_for { FOR_EXTEND, FOR_RESUME, FOR_SNAPSHOT };

/* *cost of `minutes` at `price`, the account's balance locked: 0 when the
 * balance covers it, else -1 with ERR_PAYMENT (or the lock's error). */
static int
lock_covered(PGconn *c, const char *account, int minutes, int64_t price, enum cover_for what,
    int64_t *cost, struct err *e)
{
	int64_t before;

	*cost = bill_cost(minutes, price);
	if (bill_lock_balance(c, account, &before, e) < 0)
		return -1;
	if (*cost >= 0 && before >= *cost)
		return 0;
	if (what == FOR_EXTEND)
		err_set(e, ERR_PAYMENT,
		    "not enough credit: your balance is %" PRId64 " micro-USD;"
		    " %d more minutes cost %" PRId64 " and your balance buys %" PRId64 " minutes",
		    before, minutes, *cost, bill_affordable_minutes(before, price));
	else if (what == FOR_RESUME)
		err_set(e, ERR_PAYMENT,
		    "not enough credit: your balance is %" PRId64 " micro-USD; the %d minutes"
		    " until this sandbox expires cost %" PRId64 " and your balance buys %" PRId64
		    " minutes",
		    before, minutes, *cost, bill_affordable_minutes(before, price));
	else
		err_set(e, ERR_PAYMENT,
		    "not enough credit: your balance is %" PRId64 " micro-USD and keeping a"
		    " snapshot %d minutes costs %" PRId64,
		    before, minutes, *cost);
	return -1;
}

int
bill_charge_extend(PGconn *c, const char *account, const char *id, int minutes, int64_t price,
    int64_t *charged, int64_t *balance, struct err *e)
{
	char key[64], reason[160], rnd[17];
	int64_t cost;
	int posted;

	if (lock_covered(c, account, minutes, price, FOR_EXTEND, &cost, e) < 0)
		return -1;
	/* Every extend is a new charge: a random key, never a replay. */
	if (key_random_hex(rnd, sizeof(rnd), 8) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	if (fmt_err(e, "ledger key", key, sizeof(key), "charge:extend:%s:%s", id, rnd) < 0)
		return -1;
	fmt_cut(reason, sizeof(reason), "extend sandbox %s by %d minutes", id, minutes);
	if (bill_post(c, account, id, "charge", -cost, minutes, reason, key, balance, &posted, e) <
	    0)
		return -1;
	*charged = cost;
	return 0;
}

/* ---- settlement ---- */

int
bill_refund_tx(PGconn *c, const char *account, const char *id, const struct bill_use *u,
    int minute_s, struct bill_settlement *out, struct err *e)
{
	char key[64], reason[160];
	int64_t used, refund;

	/* A minute started is a minute billed; never more than was paid. */
	used = u->full_refund ? 0 : bill_minutes_used(u->ran_ms, minute_s);
	if (used > u->paid_minutes)
		used = u->paid_minutes;
	if (used < 0)
		used = 0;
	refund = bill_cost(bill_refund_minutes(u->paid_minutes, used), u->price);
	if (refund < 0) {
		err_set(e, ERR_INTERNAL, "refund overflow");
		return -1;
	}
	out->minutes_used = (int)used;
	out->refunded = refund;
	out->refund_posted = 0;
	if (account != NULL && account[0] != '\0' && refund > 0) {
		int posted;
		if (fmt_err(e, "ledger key", key, sizeof(key), "refund:%s", id) < 0)
			return -1;
		fmt_cut(reason, sizeof(reason), "unused %d of %d minutes of sandbox %s%s",
		    u->paid_minutes - (int)used, u->paid_minutes, id,
		    u->full_refund ? " (it did not run)" : "");
		if (bill_post(c, account, id, "refund", refund, u->paid_minutes - (int)used, reason,
			key, NULL, &posted, e) < 0)
			return -1;
		out->refund_posted = posted ? refund : 0;
	}
	return 0;
}

/* ---- pauses ---- */

int
bill_pause_refund(PGconn *c, const char *account, const char *id, int pause, int minutes,
    int64_t price, int64_t *refund, struct err *e)
{
	char key[64], reason[160];
	int posted;

	*refund = bill_cost(minutes, price);
	if (*refund < 0) {
		err_set(e, ERR_INTERNAL, "refund overflow");
		return -1;
	}
	if (*refund == 0)
		return 0;
	if (fmt_err(e, "ledger key", key, sizeof(key), "refund:pause:%s:%d", id, pause) < 0)
		return -1;
	fmt_cut(reason, sizeof(reason), "sandbox %s paused: %d unused minutes of compute", id,
	    minutes);
	return bill_post(c, account, id, "refund", *refund, minutes, reason, key, NULL, &posted, e);
}

int
bill_charge_storage(PGconn *c, const char *account, const char *id, const char *tag,
    int64_t minutes, int64_t price, int64_t *cost, struct err *e)
{
	char key[80], reason[160];
	int64_t balance;
	int posted;

	*cost = bill_cost(minutes, price);
	if (*cost < 0) {
		err_set(e, ERR_INTERNAL, "price overflow");
		return -1;
	}
	if (bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	/* Billed for time already past: never refused, never below zero. */
	if (*cost > balance)
		*cost = balance;
	if (*cost == 0)
		return 0;
	if (fmt_err(e, "ledger key", key, sizeof(key), "charge:storage:%s:%s", id, tag) < 0)
		return -1;
	fmt_cut(reason, sizeof(reason), "sandbox %s paused: storage, %" PRId64 " min", id, minutes);
	return bill_post(c, account, id, "charge", -*cost,
	    minutes > INT32_MAX ? INT32_MAX : (int)minutes, reason, key, NULL, &posted, e);
}

int
bill_charge_resume(PGconn *c, const char *account, const char *id, int resume, int minutes,
    int64_t price, int64_t *cost, int64_t *balance, struct err *e)
{
	char key[64], reason[160];
	int posted;

	if (lock_covered(c, account, minutes, price, FOR_RESUME, cost, e) < 0)
		return -1;
	if (fmt_err(e, "ledger key", key, sizeof(key), "charge:resume:%s:%d", id, resume) < 0)
		return -1;
	fmt_cut(reason, sizeof(reason), "resume sandbox %s for %d minutes", id, minutes);
	return bill_post(c, account, id, "charge", -*cost, minutes, reason, key, balance, &posted,
	    e);
}

int
bill_resume_refund(PGconn *c, const char *account, const char *id, int resume, int minutes,
    int64_t amount, struct err *e)
{
	char key[64], reason[160];
	int posted;

	if (amount <= 0)
		return 0;
	if (fmt_err(e, "ledger key", key, sizeof(key), "refund:resume:%s:%d", id, resume) < 0)
		return -1;
	fmt_cut(reason, sizeof(reason), "sandbox %s could not resume: %d minutes back", id,
	    minutes);
	return bill_post(c, account, id, "refund", amount, minutes, reason, key, NULL, &posted, e);
}

int
bill_charge_snapshot(PGconn *c, const char *account, const char *snap, int minutes, int64_t price,
    int64_t *cost, int64_t *balance, struct err *e)
{
	char key[64], reason[160];
	int posted;

	if (lock_covered(c, account, minutes, price, FOR_SNAPSHOT, cost, e) < 0)
		return -1;
	if (*cost == 0)
		return bill_lock_balance(c, account, balance, e);
	if (fmt_err(e, "ledger key", key, sizeof(key), "charge:snapshot:%s", snap) < 0)
		return -1;
	fmt_cut(reason, sizeof(reason), "snapshot %s: storage, %d min", snap, minutes);
	return bill_post(c, account, NULL, "charge", -*cost, minutes, reason, key, balance, &posted,
	    e);
}

int
bill_snapshot_refund(PGconn *c, const char *account, const char *snap, int minutes, int64_t amount,
    struct err *e)
{
	char key[64], reason[160];
	int posted;

	if (amount <= 0)
		return 0;
	if (fmt_err(e, "ledger key", key, sizeof(key), "refund:snapshot:%s", snap) < 0)
		return -1;
	fmt_cut(reason, sizeof(reason), "snapshot %s ended early: %d minutes back", snap, minutes);
	return bill_post(c, account, NULL, "refund", amount, minutes, reason, key, NULL, &posted,
	    e);
}
