/* settle.c - the settlement transaction. */
#include "sandbox/settle.h"

#include <string.h>

#include "base/metrics.h"
#include "billing/ledger.h"
#include "billing/price.h"
#include "sandbox/store.h"

struct settle_tx {
	int minute_s;
	const char *id;
	int full_refund;
	struct bill_settlement *out;
	const char *end_state; /* NULL: the row has ended already */
	enum store_end end;
	const char *reason;
};

static int
settle_fn(PGconn *c, void *arg, struct err *e)
{
	struct settle_tx *t = arg;
	struct bill_settlement *out = t->out;
	struct store_paid paid;
	struct bill_use use;
	char account[40];
	int64_t balance, storage = 0;

	memset(out, 0, sizeof(*out));
	if (store_account_of(c, t->id, account, sizeof(account), e) < 0)
		return -1;
	/* The account first: the lock order of every money path. */
	if (account[0] != '\0' && bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	if (t->end_state && store_conn_mark_ended(c, t->id, t->end_state, t->end, t->reason, e) < 0)
		return -1;
	if (store_lock_paid(c, t->id, NULL, &paid, e) < 0)
		return -1;
	if (strcmp(paid.account, account) != 0) {
		/* A warm VM was claimed between the two reads. */
		err_set(e, ERR_CONFLICT, "sandbox %s changed hands while it was settled; retry",
		    t->id);
		return -1;
	}
	out->charged = paid.charged;
	if (paid.settled) {
		out->minutes_used = paid.minutes_used;
		out->refunded = paid.refunded;
		out->already = 1;
	} else {
		use.paid_minutes = paid.paid_minutes;
		use.price = paid.price;
		use.ran_ms = paid.ran_ms;
		use.full_refund = t->full_refund;
		if (bill_refund_tx(c, account, t->id, &use, t->minute_s, out, e) < 0)
			return -1;
		/* Ended while paused: the storage since the pause (or the last
		 * resume that failed) is due. */
		if (paid.storage_billed && account[0] != '\0' &&
		    bill_charge_storage(c, account, t->id, "end",
			bill_minutes_used(paid.storage_ms, t->minute_s), paid.storage_price,
			&storage, e) < 0)
			return -1;
		if (store_mark_settled(c, t->id, out->minutes_used, out->refunded, storage, e) < 0)
			return -1;
		out->charged += storage;
		out->refunded += paid.refunded;
	}
	if (account[0] != '\0' && bill_lock_balance(c, account, &out->balance, e) < 0)
		return -1;
	return 0;
}

int
settle_sandbox(struct db *db, int minute_s, const char *id, int full_refund,
    struct bill_settlement *out, struct err *e)
{
	struct settle_tx t = { minute_s, id, full_refund, out, NULL, 0, NULL };

	memset(out, 0, sizeof(*out));
	if (db_tx(db, settle_fn, &t, e) < 0)
		return -1;
	/* After the commit: a rolled-back settlement refunded nothing. */
	metrics_credits_refunded(out->refund_posted);
	return 0;
}

int
settle_end(struct db *db, int minute_s, const char *id, const char *state, enum store_end end,
    const char *reason, int full_refund, struct bill_settlement *out, struct err *e)
{
	struct settle_tx t = { minute_s, id, full_refund, out, state, end, reason };

	memset(out, 0, sizeof(*out));
	if (db_tx(db, settle_fn, &t, e) < 0)
		return -1;
	metrics_credits_refunded(out->refund_posted);
	return 0;
}
