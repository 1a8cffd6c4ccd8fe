/* pay.c - recording provider events and crediting paid checkouts (pay_). */
#include <stdio.h>
#include <string.h>

#include "billing/ledger.h"
#include "service/pay.h"

struct apply_ctx {
	const struct pay_provider *p;
	const struct pay_event *ev;
	int *credited;
};

static int
apply_tx(PGconn *c, void *arg, struct err *e)
{
	struct apply_ctx *ax = arg;
	const struct pay_event *ev = ax->ev;
	char amount[24], key[PAY_ID_MAX + 32], reason[PAY_ID_MAX + 64];
	const char *acct = ev->account[0] ? ev->account : NULL;
	const char *p[6] = { ax->p->name, ev->id, ev->kind, acct,
		ev->checkout_id[0] ? ev->checkout_id : NULL, amount };
	long found = 0, fresh = 0;
	int posted = 0;

	*ax->credited = 0;
	snprintf(amount, sizeof(amount), "%lld", ev->amount);
	if (acct != NULL) {
		const char *pa[1] = { acct };

		/* The account first, as on every money path. */
		if (db_conn_exec(c, "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", 1, pa,
			&found, e) < 0)
			return -1;
		if (found != 1)
			p[3] = NULL; /* recorded, never credited */
	}
	if (db_conn_exec(c,
		"INSERT INTO payment_events(provider, event_id, kind, account_id, checkout_id, amount) "
		"VALUES ($1, $2, $3, $4, $5, $6::bigint) ON CONFLICT DO NOTHING",
		6, p, &fresh, e) < 0)
		return -1;
	if (fresh != 1 || !ev->paid || p[3] == NULL || ev->amount <= 0 || !ev->checkout_id[0])
		return 0; /* a delivery seen before, or nothing to credit */
	snprintf(key, sizeof(key), "pay:%s:%s", ax->p->name, ev->checkout_id);
	snprintf(reason, sizeof(reason), "credit bought (%s checkout %s)", ax->p->name,
	    ev->checkout_id);
	if (bill_post(c, acct, NULL, "grant", ev->amount, -1, reason, key, NULL, &posted, e) < 0)
		return -1;
	*ax->credited = posted;
	if (posted &&
	    db_conn_exec(c,
		"UPDATE payment_events SET credited = true WHERE provider = $1 AND event_id = $2",
		2, p, NULL, e) < 0)
		return -1;
	return 0;
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
