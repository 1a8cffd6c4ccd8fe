/* billing.c - charges and settlement, inside the caller's transaction. */
#include "billing/billing.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/keys.h"
#include "base/metrics.h"
#include "billing/ledger.h"
#include "billing/price.h"

int
bill_charge_create(PGconn *c, const char *account, const char *id, const char *size,
    int minutes, int64_t price, struct err *e)
{
	int64_t balance, cost = bill_cost(minutes, price), after;
	char reason[160], key[64], pr[24], mins[16], costs[24];
	const char *p[4];
	int posted;

	if (cost < 0) {
		err_set(e, ERR_INTERNAL, "price overflow");
		return -1;
	}
	if (bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	if (balance < cost) {
		err_set(e, ERR_PAYMENT, "not enough credit: your balance is %" PRId64 " micro-USD;"
		    " a %s sandbox costs %" PRId64 " per minute, so %d minutes cost %" PRId64
		    " and your balance buys %" PRId64 " minutes. Ask for fewer timeout_minutes"
		    " or destroy sandboxes you no longer need.", balance, size, price, minutes,
		    cost, bill_affordable_minutes(balance, price));
		return -1;
	}
	snprintf(reason, sizeof(reason), "%s sandbox %s, %d minutes", size, id, minutes);
	snprintf(key, sizeof(key), "charge:create:%s", id);
	if (bill_post(c, account, id, "charge", -cost, minutes, reason, key, &after,
	    &posted, e) < 0)
		return -1;
	snprintf(pr, sizeof(pr), "%" PRId64, price);
	snprintf(mins, sizeof(mins), "%d", minutes);
	snprintf(costs, sizeof(costs), "%" PRId64, cost);
	p[0] = id;
	p[1] = pr;
	p[2] = mins;
	p[3] = costs;
	return db_conn_exec(c, "UPDATE sandboxes SET price_per_minute = $2::bigint,"
	    " paid_minutes = $3::int, charged = $4::bigint WHERE id = $1", 4, p, NULL, e);
}

int
bill_charge_extend(PGconn *c, const char *account, const char *id, int minutes,
    int64_t price, int64_t *charged, int64_t *balance, struct err *e)
{
	char key[64], reason[160], rnd[17], mins[16], costs[24];
	const char *p[3];
	int64_t before, cost = bill_cost(minutes, price);
	int posted;

	if (bill_lock_balance(c, account, &before, e) < 0)
		return -1;
	if (cost < 0 || before < cost) {
		err_set(e, ERR_PAYMENT, "not enough credit: your balance is %" PRId64 " micro-USD;"
		    " %d more minutes cost %" PRId64 " and your balance buys %" PRId64 " minutes",
		    before, minutes, cost, bill_affordable_minutes(before, price));
		return -1;
	}
	/* Every extend is a new charge: a random key, never a replay. */
	if (key_random_hex(rnd, sizeof(rnd), 8) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	snprintf(key, sizeof(key), "charge:extend:%s:%s", id, rnd);
	snprintf(reason, sizeof(reason), "extend sandbox %s by %d minutes", id, minutes);
	if (bill_post(c, account, id, "charge", -cost, minutes, reason, key, balance,
	    &posted, e) < 0)
		return -1;
	snprintf(mins, sizeof(mins), "%d", minutes);
	snprintf(costs, sizeof(costs), "%" PRId64, cost);
	p[0] = id;
	p[1] = mins;
	p[2] = costs;
	if (db_conn_exec(c, "UPDATE sandboxes SET paid_minutes = paid_minutes + $2::int,"
	    " charged = charged + $3::bigint WHERE id = $1", 3, p, NULL, e) < 0)
		return -1;
	*charged = cost;
	return 0;
}

/* ---- settlement ---- */

int
bill_settle_tx(PGconn *c, int minute_s, const char *id, int full_refund,
    struct bill_settlement *out, struct err *e)
{
	const char *p[3] = { id, NULL, NULL };
	char account[40], used_s[16], refund_s[24], key[64], reason[160];
	long long price, ran_ms, charged, refunded;
	int64_t refund;
	int paid, used, settled, rc = -1;
	PGresult *r;

	memset(out, 0, sizeof(*out));
	r = db_conn_query(c, "SELECT coalesce(account_id::text, ''), paid_minutes,"
	    " price_per_minute, charged, refunded, minutes_used, settled_at IS NOT NULL,"
	    " coalesce(trunc(extract(epoch FROM (coalesce(destroyed_at, failed_at, now())"
	    "  - ready_at)) * 1000), 0)::bigint"
	    " FROM sandboxes WHERE id = $1 FOR UPDATE", 1, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		err_set(e, ERR_NOT_FOUND, "no sandbox %s", id);
		goto out;
	}
	if (db_get_str(r, 0, 0, account, sizeof(account), e) < 0 ||
	    db_get_int(r, 0, 1, &paid, e) < 0 ||
	    db_get_ll(r, 0, 2, &price, e) < 0 ||
	    db_get_ll(r, 0, 3, &charged, e) < 0 ||
	    db_get_bool(r, 0, 6, &settled, e) < 0 ||
	    db_get_ll(r, 0, 7, &ran_ms, e) < 0)
		goto out;
	out->charged = charged;
	if (settled) {
		if (db_get_ll(r, 0, 4, &refunded, e) < 0 ||
		    db_get_int_or(r, 0, 5, 0, &out->minutes_used, e) < 0)
			goto out;
		out->refunded = refunded;
		out->already = 1;
		goto balance;
	}
	/* A minute started is a minute billed; never more than was paid. */
	used = full_refund ? 0 : (int)bill_minutes_used(ran_ms, minute_s);
	if (used > paid)
		used = paid;
	refund = bill_cost(bill_refund_minutes(paid, used), price);
	if (refund < 0) {
		err_set(e, ERR_INTERNAL, "refund overflow");
		goto out;
	}
	if (account[0] != '\0' && refund > 0) {
		int posted;
		snprintf(key, sizeof(key), "refund:%s", id);
		snprintf(reason, sizeof(reason), "unused %d of %d minutes of sandbox %s%s",
		    paid - used, paid, id, full_refund ? " (it did not run)" : "");
		if (bill_post(c, account, id, "refund", refund, paid - used, reason, key,
		    NULL, &posted, e) < 0)
			goto out;
		out->refund_posted = posted ? refund : 0;
	}
	snprintf(used_s, sizeof(used_s), "%d", used);
	snprintf(refund_s, sizeof(refund_s), "%" PRId64, refund);
	p[1] = used_s;
	p[2] = refund_s;
	if (db_conn_exec(c, "UPDATE sandboxes SET minutes_used = $2::int, refunded = $3::bigint,"
	    " settled_at = now() WHERE id = $1", 3, p, NULL, e) < 0)
		goto out;
	out->minutes_used = used;
	out->refunded = refund;
balance:
	if (account[0] != '\0' && bill_lock_balance(c, account, &out->balance, e) < 0)
		goto out;
	rc = 0;
out:
	PQclear(r);
	return rc;
}

struct settle_tx {
	int minute_s;
	const char *id;
	int full_refund;
	struct bill_settlement *out;
};

static int
settle_fn(PGconn *c, void *arg, struct err *e)
{
	struct settle_tx *t = arg;

	return bill_settle_tx(c, t->minute_s, t->id, t->full_refund, t->out, e);
}

int
bill_settle(struct db *db, int minute_s, const char *id, int full_refund,
    struct bill_settlement *out, struct err *e)
{
	struct settle_tx t = { minute_s, id, full_refund, out };

	memset(out, 0, sizeof(*out));
	if (db_tx(db, settle_fn, &t, e) < 0)
		return -1;
	/* After the commit: a rolled-back settlement refunded nothing. */
	metrics_credits_refunded(out->refund_posted);
	return 0;
}
