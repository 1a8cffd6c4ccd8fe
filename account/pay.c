/* pay.c - recording provider events and crediting paid checkouts (pay_). */
#include <string.h>

#include "base/fmt.h"
#include "billing/ledger.h"
#include "account/pay.h"
#include "account/attempts.h"
#include "account/pay_int.h"

struct apply_ctx {
	const struct pay_provider *p;
	const struct pay_event *ev;
	int *credited;
};

/* The checkout aasd made under this id: its account and amount. 0 with
 * account "" when there is none. */
static int
checkout_of(PGconn *c, const char *provider, const char *id, char *account, long long *amount,
    struct err *e)
{
	const char *p[2] = { provider, id };
	const struct db_col cols[] = { DB_STR(account, ACCT_ID_LEN + 1), DB_LL(amount) };
	PGresult *r;

	account[0] = '\0';
	r = db_conn_query(c,
	    "SELECT account_id, amount FROM payment_checkouts WHERE provider = $1 AND checkout_id = $2",
	    2, p, e);
	return db_take_row_or_none(r, cols, DB_NCOLS(cols), e) < 0 ? -1 : 0;
}

/* The paid checkout whose payment is `intent`: its id, account and the
 * amount credited. 0 with account "" when there is none. */
static int
checkout_paid_by(PGconn *c, const char *provider, const char *intent, char *checkout, char *account,
    long long *amount, struct err *e)
{
	const char *p[2] = { provider, intent };
	const struct db_col cols[] = { DB_STR(checkout, PAY_ID_MAX + 1),
		DB_STR(account, ACCT_ID_LEN + 1), DB_LL(amount) };
	PGresult *r;

	account[0] = '\0';
	r = db_conn_query(c,
	    "SELECT checkout_id, account_id, amount FROM payment_checkouts WHERE provider = $1 "
	    "AND payment_intent = $2 AND paid_at IS NOT NULL",
	    2, p, e);
	return db_take_row_or_none(r, cols, DB_NCOLS(cols), e) < 0 ? -1 : 0;
}

/* A credited checkout is paid: refunds and disputes find it by its
 * payment, and it no longer counts as open. */
static int
paid_mark(PGconn *c, const char *provider, const struct pay_event *ev, struct err *e)
{
	const char *p[3] = { provider, ev->checkout_id,
		ev->payment_intent[0] ? ev->payment_intent : NULL };

	return db_conn_exec(c,
	    "UPDATE payment_checkouts SET paid_at = now(), payment_intent = $3 "
	    "WHERE provider = $1 AND checkout_id = $2",
	    3, p, NULL, e);
}

/* Records the event once (with its account and checkout when it has an
 * account, whose row is locked first as on every money path): 0 with
 * *fresh 1 for its first delivery, or -1 with e set. */
static int
record_event(PGconn *c, const struct apply_ctx *ax, const char *acct, const char *checkout,
    const char *amount, long *fresh, struct err *e)
{
	const struct pay_event *ev = ax->ev;
	const char *p[6] = { ax->p->name, ev->id, ev->kind, NULL, NULL, amount };

	if (acct[0]) {
		const char *pa[1] = { acct };

		if (db_conn_exec(c, "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", 1, pa, NULL,
			e) < 0)
			return -1;
		p[3] = acct;
		p[4] = checkout;
	}
	return db_conn_exec(c,
	    "INSERT INTO payment_events(provider, event_id, kind, account_id, checkout_id, amount) "
	    "VALUES ($1, $2, $3, $4, $5, $6::bigint) ON CONFLICT DO NOTHING",
	    6, p, fresh, e);
}

/* A refund or dispute event: recorded once, with the checkout it names;
 * a first delivery moves the money (account/pay_back.c). */
static int
back_tx(PGconn *c, const struct apply_ctx *ax, struct err *e)
{
	const struct pay_event *ev = ax->ev;
	char checkout[PAY_ID_MAX + 1], acct[ACCT_ID_LEN + 1], amount[24];
	long long credited = 0;
	long fresh = 0;

	if (checkout_paid_by(c, ax->p->name, ev->payment_intent, checkout, acct, &credited, e) < 0)
		return -1;
	if (fmt_err(e, "amount", amount, sizeof(amount), "%lld", ev->amount) < 0 ||
	    record_event(c, ax, acct, checkout, amount, &fresh, e) < 0)
		return -1;
	if (fresh != 1 || acct[0] == '\0')
		return 0; /* seen before, or not a payment of this service */
	return pay_back_apply(c, ax->p->name, ev, acct, checkout, credited, e);
}

static int
apply_tx(PGconn *c, void *arg, struct err *e)
{
	struct apply_ctx *ax = arg;
	const struct pay_event *ev = ax->ev;
	char amount[24], key[PAY_ID_MAX + 32], reason[PAY_ID_MAX + 64], acct[ACCT_ID_LEN + 1];
	const char *p[2] = { ax->p->name, ev->id };
	long long made = 0;
	long fresh = 0;
	int posted = 0, credit;

	*ax->credited = 0;
	if (ev->action == PAY_REFUND || ev->action == PAY_DISPUTE || ev->action == PAY_REINSTATE)
		return back_tx(c, ax, e);
	if (fmt_err(e, "amount", amount, sizeof(amount), "%lld", ev->amount) < 0)
		return -1;
	acct[0] = '\0';
	if (ev->checkout_id[0] && checkout_of(c, ax->p->name, ev->checkout_id, acct, &made, e) < 0)
		return -1;
	/* Credit only a checkout this service made, for its account and the
	 * amount it asked for, whatever else the event says. */
	credit = ev->paid && acct[0] && strcmp(acct, ev->account) == 0 && made == ev->amount;
	if (record_event(c, ax, acct, ev->checkout_id, amount, &fresh, e) < 0)
		return -1;
	if (fresh != 1 || !credit)
		return 0; /* a delivery seen before, or nothing to credit */
	fmt_cut(reason, sizeof(reason), "credit bought (%s checkout %s)", ax->p->name,
	    ev->checkout_id);
	if (fmt_err(e, "ledger key", key, sizeof(key), "pay:%s:%s", ax->p->name, ev->checkout_id) <
		0 ||
	    bill_post(c, acct, NULL, "grant", made, -1, reason, key, NULL, &posted, e) < 0)
		return -1;
	*ax->credited = posted;
	if (posted &&
	    db_conn_exec(c,
		"UPDATE payment_events SET credited = true WHERE provider = $1 AND event_id = $2",
		2, p, NULL, e) < 0)
		return -1;
	return posted ? paid_mark(c, ax->p->name, ev, e) : 0;
}

int
pay_checkout_made(struct db *db, const struct pay_provider *p, const char *account,
    const struct pay_checkout *co, long long amount, struct err *e)
{
	char am[24];
	const char *pp[4] = { p->name, co->id, account, am };

	if (fmt_err(e, "amount", am, sizeof(am), "%lld", amount) < 0)
		return -1;
	return db_exec(db,
	    "INSERT INTO payment_checkouts(provider, checkout_id, account_id, amount) "
	    "VALUES ($1, $2, $3, $4::bigint)",
	    4, pp, NULL, e);
}

int
pay_apply(struct db *db, const struct pay_provider *p, const struct pay_event *ev, int *credited,
    struct err *e)
{
	struct apply_ctx ax = { p, ev, credited };

	if (ev->account[0] && !acct_id_valid(ev->account)) {
		err_set(e, ERR_INVALID, "the event names no account of this service");
		return -1;
	}
	return db_tx(db, apply_tx, &ax, e);
}

struct allow_ctx {
	const struct config *cfg;
	const char *account;
};

static int
allow_tx(PGconn *c, void *arg, struct err *e)
{
	struct allow_ctx *ax = arg;
	char subject[ATT_SUBJECT_MAX + 1], when[48];
	const char *p[1] = { ax->account };
	long long retry, open = 0;
	int over;

	if (att_subject(subject, sizeof(subject), "checkout", ax->account) < 0 ||
	    att_lock(c, subject, e) < 0)
		return -1;
	over = att_over(c, subject, ax->cfg->checkouts_per_hour, 3600, &retry, e);
	if (over < 0)
		return -1;
	if (over) {
		att_retry_text(retry, when, sizeof(when));
		err_set(e, ERR_LIMIT, "Too many checkouts started. Try again %s.", when);
		return -1;
	}
	/* Stripe keeps an unpaid checkout open for a day. */
	if (db_take_ll(db_conn_query(c,
			   "SELECT count(*) FROM payment_checkouts WHERE account_id = $1"
			   " AND paid_at IS NULL AND created_at > now() - interval '1 day'",
			   1, p, e),
		&open, e) < 0)
		return -1;
	if (open >= ax->cfg->checkouts_open) {
		err_set(e, ERR_LIMIT,
		    "%lld checkouts are open (started and not paid in the last day). Pay one of them, "
		    "or try again tomorrow.",
		    open);
		return -1;
	}
	return att_record(c, subject, e);
}

int
pay_checkout_allowed(struct db *db, const struct config *cfg, const char *account, struct err *e)
{
	struct allow_ctx ax = { cfg, account };

	return db_tx(db, allow_tx, &ax, e);
}
