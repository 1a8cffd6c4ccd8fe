/* billing.c - charges, settlement and usage. */
#include "billing/billing.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keys.h"
#include "billing/ledger.h"
#include "base/log.h"
#include "base/metrics.h"
#include "billing/price.h"

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

int
bill_charge_create(PGconn *c, const char *account, const char *id, const char *size,
    int minutes, int64_t price, struct err *e)
{
	int64_t balance, cost = bill_cost(minutes, price), after;
	char reason[160], key[64], pr[24], mins[16], costs[24];
	const char *p[4];
	PGresult *r;
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
	r = db_conn_query(c, "UPDATE sandboxes SET price_per_minute = $2::bigint,"
	    " paid_minutes = $3::int, charged = $4::bigint WHERE id = $1", 4, p, e);
	if (r == NULL)
		return -1;
	PQclear(r);
	return 0;
}

/* ---- settlement ---- */

struct settle_tx {
	const struct config *cfg;
	const char *id;
	int full_refund;
	struct bill_settlement *out;
	int64_t posted;      /* refund actually written to the ledger */
};

static int
settle_fn(PGconn *c, void *arg, struct err *e)
{
	struct settle_tx *t = arg;
	const char *p[5];
	PGresult *r;
	char account[40], used_s[16], refund_s[24], key[64], reason[160];
	int64_t price, refund;
	int paid, used, settled;
	double ran_s;

	p[0] = t->id;
	r = db_conn_query(c, "SELECT coalesce(account_id::text, ''), paid_minutes, price_per_minute,"
	    " charged, refunded, minutes_used, settled_at IS NOT NULL,"
	    " coalesce(extract(epoch FROM (coalesce(destroyed_at, failed_at, now())"
	    "  - ready_at)), 0)::float8"
	    " FROM sandboxes WHERE id = $1 FOR UPDATE", 1, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		PQclear(r);
		err_set(e, ERR_NOT_FOUND, "no sandbox %s", t->id);
		return -1;
	}
	snprintf(account, sizeof(account), "%s", PQgetvalue(r, 0, 0));
	paid = (int)strtol(PQgetvalue(r, 0, 1), NULL, 10);
	price = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	t->out->charged = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
	settled = strcmp(PQgetvalue(r, 0, 6), "t") == 0;
	ran_s = strtod(PQgetvalue(r, 0, 7), NULL);
	if (settled) {
		t->out->refunded = strtoll(PQgetvalue(r, 0, 4), NULL, 10);
		t->out->minutes_used = (int)strtol(PQgetvalue(r, 0, 5), NULL, 10);
		t->out->already = 1;
		PQclear(r);
		goto balance;
	}
	PQclear(r);
	/* A minute started is a minute billed; never more than was paid. */
	used = t->full_refund ? 0 :
	    (int)bill_minutes_used((int64_t)(ran_s * 1000.0), t->cfg->minute_s);
	if (used > paid)
		used = paid;
	refund = bill_cost(bill_refund_minutes(paid, used), price);
	if (account[0] != '\0' && refund > 0) {
		int posted;
		snprintf(key, sizeof(key), "refund:%s", t->id);
		snprintf(reason, sizeof(reason), "unused %d of %d minutes of sandbox %s%s",
		    paid - used, paid, t->id, t->full_refund ? " (it did not run)" : "");
		if (bill_post(c, account, t->id, "refund", refund, paid - used, reason, key,
		    NULL, &posted, e) < 0)
			return -1;
		t->posted = posted ? refund : 0;
	}
	snprintf(used_s, sizeof(used_s), "%d", used);
	snprintf(refund_s, sizeof(refund_s), "%" PRId64, refund);
	p[0] = t->id;
	p[1] = used_s;
	p[2] = refund_s;
	r = db_conn_query(c, "UPDATE sandboxes SET minutes_used = $2::int, refunded = $3::bigint,"
	    " settled_at = now() WHERE id = $1", 3, p, e);
	if (r == NULL)
		return -1;
	PQclear(r);
	t->out->minutes_used = used;
	t->out->refunded = refund;
balance:
	if (account[0] != '\0') {
		int64_t b;
		if (bill_lock_balance(c, account, &b, e) < 0)
			return -1;
		t->out->balance = b;
	}
	return 0;
}

int
bill_settle(struct db *db, const struct config *cfg, const char *id, int full_refund,
    struct bill_settlement *out, struct err *e)
{
	struct settle_tx t = { cfg, id, full_refund, out, 0 };

	memset(out, 0, sizeof(*out));
	if (db_tx(db, settle_fn, &t, e) < 0)
		return -1;
	/* After the commit: a rolled-back settlement refunded nothing. */
	metrics_credits_refunded(t.posted);
	return 0;
}

/* ---- extend ---- */

struct extend_tx {
	const struct config *cfg;
	const char *account;
	const char *id;
	int minutes;
	int64_t charged;
	int64_t balance;
	char expires[40];
};

static int
extend_fn(PGconn *c, void *arg, struct err *e)
{
	struct extend_tx *t = arg;
	char mins[16], sec[16], max[24], key[64], reason[160], rnd[17];
	const char *p[5];
	PGresult *r;
	int64_t price, balance, cost;
	int posted;
	double lifetime_min;

	/* Account first, then sandbox: the order every transaction takes. */
	if (bill_lock_balance(c, t->account, &balance, e) < 0)
		return -1;
	snprintf(sec, sizeof(sec), "%d", t->cfg->minute_s);
	p[0] = t->id;
	p[1] = t->account;
	p[2] = sec;
	r = db_conn_query(c, "SELECT state, price_per_minute, size,"
	    " extract(epoch FROM (expires_at - ready_at))::float8 / $3::int"
	    " FROM sandboxes WHERE id = $1 AND account_id = $2 FOR UPDATE", 3, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		PQclear(r);
		err_set_at(e, ERR_NOT_FOUND, "sandbox_id",
		    "sandbox_id: no sandbox %s in your account", t->id);
		return -1;
	}
	if (strcmp(PQgetvalue(r, 0, 0), "running") != 0) {
		err_set(e, ERR_CONFLICT, "sandbox %s is %s; only a running sandbox can be extended",
		    t->id, PQgetvalue(r, 0, 0));
		PQclear(r);
		return -1;
	}
	price = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	lifetime_min = strtod(PQgetvalue(r, 0, 3), NULL);
	PQclear(r);
	if (lifetime_min + t->minutes > t->cfg->max_lifetime_min + 0.001) {
		err_set(e, ERR_LIMIT, "a sandbox lives at most %d minutes; this one already has %d,"
		    " so it can be extended by at most %d", t->cfg->max_lifetime_min,
		    (int)(lifetime_min + 0.5), t->cfg->max_lifetime_min - (int)(lifetime_min + 0.5));
		return -1;
	}
	cost = bill_cost(t->minutes, price);
	if (cost < 0 || balance < cost) {
		err_set(e, ERR_PAYMENT, "not enough credit: your balance is %" PRId64 " micro-USD;"
		    " %d more minutes cost %" PRId64 " and your balance buys %" PRId64 " minutes",
		    balance, t->minutes, cost, bill_affordable_minutes(balance, price));
		return -1;
	}
	if (key_random_hex(rnd, sizeof(rnd), 8) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	snprintf(key, sizeof(key), "charge:extend:%s:%s", t->id, rnd);
	snprintf(reason, sizeof(reason), "extend sandbox %s by %d minutes", t->id, t->minutes);
	if (bill_post(c, t->account, t->id, "charge", -cost, t->minutes, reason, key,
	    &t->balance, &posted, e) < 0)
		return -1;
	snprintf(mins, sizeof(mins), "%d", t->minutes);
	snprintf(max, sizeof(max), "%" PRId64, cost);
	p[0] = t->id;
	p[1] = mins;
	p[2] = sec;
	p[3] = max;
	r = db_conn_query(c, "UPDATE sandboxes SET"
	    " expires_at = expires_at + make_interval(secs => $2::int * $3::int),"
	    " paid_minutes = paid_minutes + $2::int, charged = charged + $4::bigint"
	    " WHERE id = $1 RETURNING " TS("expires_at"), 4, p, e);
	if (r == NULL)
		return -1;
	snprintf(t->expires, sizeof(t->expires), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	/* The reaper sleeps until the next expiry; tell it this one moved. */
	r = db_conn_query(c, "SELECT pg_notify('aas_invalidate', 'e:')", 0, NULL, e);
	PQclear(r);
	t->charged = cost;
	return 0;
}

json_t *
bill_extend(struct db *db, const struct config *cfg, const char *account, const char *id,
    int minutes, struct err *e)
{
	struct extend_tx t;

	memset(&t, 0, sizeof(t));
	t.cfg = cfg;
	t.account = account;
	t.id = id;
	t.minutes = minutes;
	if (db_tx(db, extend_fn, &t, e) < 0)
		return NULL;
	metrics_credits_charged(t.charged);
	return json_pack("{s:s, s:s, s:I, s:I, s:i}", "sandbox_id", id, "expires_at", t.expires,
	    "charged", (json_int_t)t.charged, "balance", (json_int_t)t.balance,
	    "minutes_added", minutes);
}

/* ---- usage ---- */

json_t *
bill_usage(struct db *db, const struct config *cfg, const char *account,
    const json_t *args, struct err *e)
{
	const json_t *lim = json_object_get(args, "limit");
	const char *cursor = json_string_value(json_object_get(args, "cursor"));
	int limit = lim ? (int)json_integer_value(lim) : 20;
	int64_t before = 0, next = 0, balance, granted, spent, today, month;
	const char *p[2] = { account, NULL };
	char lims[16];
	PGresult *r;
	json_t *sandboxes, *ledger, *out;

	(void)cfg;
	if (cursor) {
		char *end;
		before = strtoll(cursor, &end, 10);
		if (*end != '\0' || before <= 0) {
			err_set_field(e, "cursor", "cursor: not a cursor from get_usage");
			return NULL;
		}
	}
	r = db_query(db, "SELECT a.balance,"
	    " coalesce(sum(l.amount) FILTER (WHERE l.kind = 'grant'), 0),"
	    " coalesce(-sum(l.amount) FILTER (WHERE l.kind IN ('charge', 'refund')), 0),"
	    " coalesce(-sum(l.amount) FILTER (WHERE l.kind IN ('charge', 'refund')"
	    "  AND l.created_at >= date_trunc('day', now())), 0),"
	    " coalesce(-sum(l.amount) FILTER (WHERE l.kind IN ('charge', 'refund')"
	    "  AND l.created_at >= date_trunc('month', now())), 0)"
	    " FROM accounts a LEFT JOIN ledger l ON l.account_id = a.id"
	    " WHERE a.id = $1 GROUP BY a.balance", 1, p, e);
	if (r == NULL)
		return NULL;
	if (PQntuples(r) != 1) {
		PQclear(r);
		err_set(e, ERR_NOT_FOUND, "account not found");
		return NULL;
	}
	balance = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	granted = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	spent = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	today = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
	month = strtoll(PQgetvalue(r, 0, 4), NULL, 10);
	PQclear(r);

	snprintf(lims, sizeof(lims), "%d", limit);
	p[1] = lims;
	r = db_query(db, "SELECT id, size, state, paid_minutes, minutes_used, charged, refunded, "
	    TS("created_at") " FROM sandboxes WHERE account_id = $1"
	    " ORDER BY created_at DESC LIMIT $2::int", 2, p, e);
	if (r == NULL)
		return NULL;
	sandboxes = json_array();
	for (int i = 0; sandboxes && i < PQntuples(r); i++) {
		int64_t ch = strtoll(PQgetvalue(r, i, 5), NULL, 10);
		int64_t rf = strtoll(PQgetvalue(r, i, 6), NULL, 10);
		json_array_append_new(sandboxes, json_pack("{s:s, s:s, s:s, s:i, s:o, s:I, s:I, s:I, s:s}",
		    "sandbox_id", PQgetvalue(r, i, 0), "size", PQgetvalue(r, i, 1),
		    "state", PQgetvalue(r, i, 2),
		    "minutes_paid", (int)strtol(PQgetvalue(r, i, 3), NULL, 10),
		    "minutes_used", PQgetisnull(r, i, 4) ? json_null() :
		        json_integer(strtol(PQgetvalue(r, i, 4), NULL, 10)),
		    "charged", (json_int_t)ch, "refunded", (json_int_t)rf,
		    "cost", (json_int_t)(ch - rf), "created_at", PQgetvalue(r, i, 7)));
	}
	PQclear(r);
	ledger = bill_entries(db, account, limit, before, &next, e);
	if (ledger == NULL) {
		json_decref(sandboxes);
		return NULL;
	}
	char nextbuf[24];
	snprintf(nextbuf, sizeof(nextbuf), "%" PRId64, next);
	out = json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:o, s:o, s:o}",
	    "balance", (json_int_t)balance,
	    "free_credit_remaining", (json_int_t)(granted - spent > 0 ?
	        (granted - spent < balance ? granted - spent : balance) : 0),
	    "spend_today", (json_int_t)today, "spend_month", (json_int_t)month,
	    "currency", "USD", "unit", "micro-USD (1,000,000 = 1 USD)",
	    "sandboxes", sandboxes, "ledger", ledger,
	    "next_cursor", next > 0 ? json_string(nextbuf) : json_null());
	return out;
}
