/* pay_back.c - money a payment provider takes back (pay_): refunds and
 * disputes of a paid checkout, taken from the balance through the
 * ledger, and disputes won given back. The balance never goes below
 * zero: what it cannot cover is recorded as the account's debt and the
 * account is disabled (docs/billing.md#refunds-and-disputes). */
#include <inttypes.h>
#include <string.h>

#include "base/fmt.h"
#include "billing/ledger.h"
#include "account/accounts.h"
#include "account/pay_int.h"

struct back {
	PGconn *c;
	const char *provider, *account, *checkout;
	const struct pay_event *ev;
};

static void
usd_text(long long micro, char *out, size_t n)
{
	fmt_cut(out, n, "$%lld.%06lld", micro / 1000000, micro % 1000000);
}

/* A ledger row of `amount` for the event, keyed "<what>:<provider>:<event id>". */
static int
post(const struct back *b, const char *what, long long amount, const char *reason, struct err *e)
{
	char key[PAY_ID_MAX + 64];
	int posted;

	if (fmt_err(e, "ledger key", key, sizeof(key), "%s:%s:%s", what, b->provider, b->ev->id) <
	    0)
		return -1;
	return bill_post(b->c, b->account, NULL, "adjustment", amount, -1, reason, key, NULL,
	    &posted, e);
}

/* Takes `amount` back: from the balance as far as it goes, the rest owed
 * and the account disabled. */
static int
take(const struct back *b, long long amount, const char *what, struct err *e)
{
	char reason[PAY_ID_MAX * 2 + 128], owed[32];
	struct acct_disabled d;
	int64_t balance;
	long long from;
	const char *p[2] = { b->account, owed };

	if (amount <= 0)
		return 0;
	if (bill_lock_balance(b->c, b->account, &balance, e) < 0)
		return -1;
	from = amount < balance ? amount : (long long)balance;
	fmt_cut(reason, sizeof(reason), "%s of %s checkout %s (%s)", what, b->provider, b->checkout,
	    b->ev->ref);
	if (from > 0 && post(b, "back", -from, reason, e) < 0)
		return -1;
	if (amount == from)
		return 0;
	usd_text(amount - from, owed, sizeof(owed));
	fmt_cut(reason, sizeof(reason),
	    "%s of %s checkout %s (%s): %s more than the balance is owed", what, b->provider,
	    b->checkout, b->ev->ref, owed);
	if (fmt_err(e, "amount", owed, sizeof(owed), "%lld", amount - from) < 0 ||
	    post(b, "debt", 0, reason, e) < 0 ||
	    db_conn_exec(b->c,
		"UPDATE accounts SET payment_debt = payment_debt + $2::bigint WHERE id = $1", 2, p,
		NULL, e) < 0)
		return -1;
	return acct_disable_in(b->c, b->account, &d, e);
}

/* Gives `amount` back (a dispute's funds reinstated): its debt first. */
static int
give(const struct back *b, long long amount, struct err *e)
{
	const char *pa[1] = { b->account };
	char reason[PAY_ID_MAX * 2 + 128], n[24];
	const char *p[2] = { b->account, n };
	long long debt = 0, settle;

	if (db_take_ll(db_conn_query(b->c, "SELECT payment_debt FROM accounts WHERE id = $1", 1, pa,
			   e),
		&debt, e) < 0)
		return -1;
	settle = debt < amount ? debt : amount;
	fmt_cut(reason, sizeof(reason), "dispute reinstated for %s checkout %s (%s)", b->provider,
	    b->checkout, b->ev->ref);
	if (fmt_err(e, "amount", n, sizeof(n), "%lld", settle) < 0)
		return -1;
	if (settle > 0 &&
	    (db_conn_exec(b->c,
		 "UPDATE accounts SET payment_debt = payment_debt - $2::bigint WHERE id = $1", 2, p,
		 NULL, e) < 0 ||
		post(b, "settle", 0, reason, e) < 0))
		return -1;
	return amount > settle ? post(b, "reinstate", amount - settle, reason, e) : 0;
}

/* The checkout's refunded and disputed amounts, its row locked. */
static int
checkout_lock(const struct back *b, long long *refunded, long long *disputed, struct err *e)
{
	const char *p[2] = { b->provider, b->checkout };
	PGresult *r;
	int rc;

	r = db_conn_query(b->c,
	    "SELECT refunded, disputed FROM payment_checkouts WHERE provider = $1 AND "
	    "checkout_id = $2 FOR UPDATE",
	    2, p, e);
	if (r == NULL)
		return -1;
	rc = db_get_ll(r, 0, 0, refunded, e) < 0 || db_get_ll(r, 0, 1, disputed, e) < 0 ? -1 : 0;
	PQclear(r);
	return rc;
}

static int
checkout_set(const struct back *b, const char *column_sql, long long v, struct err *e)
{
	char n[24];
	const char *p[3] = { b->provider, b->checkout, n };

	if (fmt_err(e, "amount", n, sizeof(n), "%lld", v) < 0)
		return -1;
	return db_conn_exec(b->c, column_sql, 3, p, NULL, e);
}

/* A dispute's row: made once (*fresh 1, with the amount it takes), or
 * marked reinstated once (*fresh 1, with the amount it took). */
static int
dispute_row(const struct back *b, long long amount, long long *taken, int *fresh, struct err *e)
{
	char n[24];
	const char *p[4] = { b->provider, b->ev->ref, b->checkout, n };
	PGresult *r;
	int rc = 0;

	*fresh = 0;
	if (fmt_err(e, "amount", n, sizeof(n), "%lld", amount) < 0)
		return -1;
	r = b->ev->action == PAY_DISPUTE ?
	    db_conn_query(b->c,
		"INSERT INTO payment_disputes(provider, dispute_id, checkout_id, amount) "
		"VALUES ($1, $2, $3, $4::bigint) ON CONFLICT DO NOTHING RETURNING amount",
		4, p, e) :
	    db_conn_query(b->c,
		"UPDATE payment_disputes SET reinstated = true WHERE provider = $1 AND "
		"dispute_id = $2 AND checkout_id = $3 AND NOT reinstated RETURNING amount",
		3, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 1) {
		*fresh = 1;
		rc = db_get_ll(r, 0, 0, taken, e);
	}
	PQclear(r);
	return rc;
}

int
pay_back_apply(PGconn *c, const char *provider, const struct pay_event *ev, const char *account,
    const char *checkout, long long credited, struct err *e)
{
	struct back b = { c, provider, account, checkout, ev };
	long long refunded, disputed, room, amount = 0;
	int fresh;

	if (checkout_lock(&b, &refunded, &disputed, e) < 0)
		return -1;
	room = credited - refunded - disputed;
	if (room < 0)
		room = 0;
	if (ev->action == PAY_REFUND) {
		/* Stripe says how much is refunded in all: only the news moves. */
		long long total = ev->amount < credited ? ev->amount : credited;

		if (total <= refunded)
			return 0;
		amount = total - refunded < room ? total - refunded : room;
		if (checkout_set(&b,
			"UPDATE payment_checkouts SET refunded = $3::bigint WHERE provider = $1 AND "
			"checkout_id = $2",
			total, e) < 0)
			return -1;
		return take(&b, amount, "refund", e);
	}
	if (ev->action == PAY_DISPUTE) {
		if (dispute_row(&b, ev->amount < room ? ev->amount : room, &amount, &fresh, e) < 0)
			return -1;
		if (!fresh)
			return 0;
		return checkout_set(&b,
			   "UPDATE payment_checkouts SET disputed = disputed + $3::bigint "
			   "WHERE provider = $1 AND checkout_id = $2",
			   amount, e) < 0 ?
		    -1 :
		    take(&b, amount, "dispute", e);
	}
	if (dispute_row(&b, 0, &amount, &fresh, e) < 0)
		return -1;
	if (!fresh)
		return 0;
	return checkout_set(&b,
		   "UPDATE payment_checkouts SET disputed = greatest(disputed - $3::bigint, 0) "
		   "WHERE provider = $1 AND checkout_id = $2",
		   amount, e) < 0 ?
	    -1 :
	    give(&b, amount, e);
}
