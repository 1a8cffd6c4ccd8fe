/* usage.c - the usage report and extending a sandbox's paid lifetime. */
#include "service/usage.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/db.h"
#include "base/metrics.h"
#include "billing/billing.h"
#include "billing/ledger.h"

#define USAGE_TS(col) \
	"to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
#define USAGE_TS_MAX 40     /* "YYYY-MM-DDTHH:MM:SS.mmmZ" with room to spare */
#define USAGE_MAX_LIMIT 100 /* entries per list, as the tool's schema says */

/* ---- get_usage ---- */

struct usage_totals {
	long long balance;
	long long granted;
	long long spent;
	long long today;
	long long month;
};

static int
usage_totals(struct db *db, const char *account, struct usage_totals *t, struct err *e)
{
	const char *p[1] = { account };
	PGresult *r;
	int rc = -1;

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
		return -1;
	if (PQntuples(r) != 1) {
		err_set(e, ERR_NOT_FOUND, "account not found");
		goto out;
	}
	if (db_get_ll(r, 0, 0, &t->balance, e) < 0 || db_get_ll(r, 0, 1, &t->granted, e) < 0 ||
	    db_get_ll(r, 0, 2, &t->spent, e) < 0 || db_get_ll(r, 0, 3, &t->today, e) < 0 ||
	    db_get_ll(r, 0, 4, &t->month, e) < 0)
		goto out;
	rc = 0;
out:
	PQclear(r);
	return rc;
}

/* One row of usage_sandboxes' query as JSON; NULL with `e` set. */
static json_t *
sandbox_json(const PGresult *r, int i, struct err *e)
{
	const char *id = db_get_text(r, i, 0), *size = db_get_text(r, i, 1);
	const char *state = db_get_text(r, i, 2), *created = db_get_text(r, i, 7);
	int has_used = db_get_text(r, i, 4) != NULL;
	long long charged, refunded, used = 0;
	int paid;
	json_t *o;

	if (db_get_int(r, i, 3, &paid, e) < 0 ||
	    (has_used && db_get_ll(r, i, 4, &used, e) < 0) ||
	    db_get_ll(r, i, 5, &charged, e) < 0 || db_get_ll(r, i, 6, &refunded, e) < 0)
		return NULL;
	if (id == NULL || size == NULL || state == NULL || created == NULL) {
		err_set(e, ERR_INTERNAL, "database answer: sandbox row %d lacks a field", i);
		return NULL;
	}
	o = json_pack("{s:s, s:s, s:s, s:i, s:o, s:I, s:I, s:I, s:s}",
	    "sandbox_id", id, "size", size, "state", state, "minutes_paid", paid,
	    "minutes_used", has_used ? json_integer(used) : json_null(),
	    "charged", (json_int_t)charged, "refunded", (json_int_t)refunded,
	    "cost", (json_int_t)(charged - refunded), "created_at", created);
	if (o == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return o;
}

/* The account's newest `limit` sandboxes with what each cost. */
static json_t *
usage_sandboxes(struct db *db, const char *account, int limit, struct err *e)
{
	char lims[16];
	const char *p[2] = { account, lims };
	PGresult *r;
	json_t *arr;
	int ok = 0;

	snprintf(lims, sizeof(lims), "%d", limit);
	r = db_query(db, "SELECT id, size, state, paid_minutes, minutes_used, charged, refunded, "
	    USAGE_TS("created_at") " FROM sandboxes WHERE account_id = $1"
	    " ORDER BY created_at DESC LIMIT $2::int", 2, p, e);
	if (r == NULL)
		return NULL;
	arr = json_array();
	if (arr == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		json_t *o = sandbox_json(r, i, e);
		/* json_array_append_new frees the row when it fails. */
		if (o == NULL || json_array_append_new(arr, o) < 0) {
			err_set(e, ERR_INTERNAL, "out of memory");
			goto out;
		}
	}
	ok = 1;
out:
	PQclear(r);
	if (!ok) {
		json_decref(arr);
		arr = NULL;
	}
	return arr;
}

json_t *
usage_get(struct app *app, const char *account, const struct usage_req *req,
    struct err *e)
{
	struct usage_totals t;
	long long before = 0, free_left;
	int64_t next = 0;
	char nextbuf[24];
	json_t *sandboxes = NULL, *ledger = NULL, *out = NULL;

	if (req->limit < 1 || req->limit > USAGE_MAX_LIMIT) {
		err_set_field(e, "limit", "limit: must be 1 to %d", USAGE_MAX_LIMIT);
		return NULL;
	}
	if (req->cursor && (db_parse_ll(req->cursor, &before) < 0 || before <= 0)) {
		err_set_field(e, "cursor", "cursor: not a cursor from get_usage");
		return NULL;
	}
	if (usage_totals(app->db, account, &t, e) < 0)
		return NULL;
	sandboxes = usage_sandboxes(app->db, account, req->limit, e);
	if (sandboxes == NULL)
		goto out;
	ledger = bill_entries(app->db, account, req->limit, before, &next, e);
	if (ledger == NULL)
		goto out;
	/* Free credit left: what was granted and not yet spent, at most the
	 * balance. */
	free_left = t.granted - t.spent;
	if (free_left > t.balance)
		free_left = t.balance;
	if (free_left < 0)
		free_left = 0;
	snprintf(nextbuf, sizeof(nextbuf), "%" PRId64, next);
	/* json_pack takes both arrays, also when it fails. */
	out = json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:o, s:o, s:o}",
	    "balance", (json_int_t)t.balance, "free_credit_remaining", (json_int_t)free_left,
	    "spend_today", (json_int_t)t.today, "spend_month", (json_int_t)t.month,
	    "currency", "USD", "unit", "micro-USD (1,000,000 = 1 USD)",
	    "sandboxes", sandboxes, "ledger", ledger,
	    "next_cursor", next > 0 ? json_string(nextbuf) : json_null());
	sandboxes = ledger = NULL;
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
out:
	json_decref(sandboxes);
	json_decref(ledger);
	return out;
}

/* ---- extend_sandbox ---- */

struct extend_tx {
	int minute_s;
	int max_lifetime_min;
	const char *account;
	const char *id;
	int minutes;
	int64_t charged;
	int64_t balance;
	char expires[USAGE_TS_MAX];
};

static int
extend_fn(PGconn *c, void *arg, struct err *e)
{
	struct extend_tx *t = arg;
	char mins[16], sec[16];
	const char *p[3] = { t->id, t->account, NULL };
	const char *state;
	long long price, life_ms;
	double lifetime_min;
	int64_t balance;
	PGresult *r;
	int rc = -1;

	/* Account first, then sandbox: the order every transaction takes. */
	if (bill_lock_balance(c, t->account, &balance, e) < 0)
		return -1;
	r = db_conn_query(c, "SELECT state, price_per_minute,"
	    " coalesce(trunc(extract(epoch FROM (expires_at - ready_at)) * 1000), 0)::bigint"
	    " FROM sandboxes WHERE id = $1 AND account_id = $2 FOR UPDATE", 2, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		err_set_at(e, ERR_NOT_FOUND, "sandbox_id",
		    "sandbox_id: no sandbox %s in your account", t->id);
		goto out;
	}
	state = db_get_text(r, 0, 0);
	if (state == NULL || strcmp(state, "running") != 0) {
		err_set(e, ERR_CONFLICT, "sandbox %s is %s; only a running sandbox can be extended",
		    t->id, state ? state : "in no state");
		goto out;
	}
	if (db_get_ll(r, 0, 1, &price, e) < 0 || db_get_ll(r, 0, 2, &life_ms, e) < 0)
		goto out;
	PQclear(r);
	r = NULL;
	lifetime_min = (double)life_ms / (t->minute_s * 1000.0);
	if (lifetime_min + t->minutes > t->max_lifetime_min + 0.001) {
		err_set(e, ERR_LIMIT, "a sandbox lives at most %d minutes; this one already has %d,"
		    " so it can be extended by at most %d", t->max_lifetime_min,
		    (int)(lifetime_min + 0.5), t->max_lifetime_min - (int)(lifetime_min + 0.5));
		goto out;
	}
	if (bill_charge_extend(c, t->account, t->id, t->minutes, price, &t->charged,
	    &t->balance, e) < 0)
		goto out;
	snprintf(mins, sizeof(mins), "%d", t->minutes);
	snprintf(sec, sizeof(sec), "%d", t->minute_s);
	p[1] = mins;
	p[2] = sec;
	r = db_conn_query(c, "UPDATE sandboxes SET"
	    " expires_at = expires_at + make_interval(secs => $2::int * $3::int)"
	    " WHERE id = $1 RETURNING " USAGE_TS("expires_at"), 3, p, e);
	if (r == NULL || db_get_str(r, 0, 0, t->expires, sizeof(t->expires), e) < 0)
		goto out;
	/* The reaper sleeps until the next expiry; tell it this one moved. */
	if (db_conn_exec(c, "SELECT pg_notify('aas_invalidate', 'e:')", 0, NULL, NULL, e) < 0)
		goto out;
	rc = 0;
out:
	PQclear(r);
	return rc;
}

json_t *
usage_extend(struct app *app, const char *account, const struct usage_extend_req *req,
    struct err *e)
{
	struct extend_tx t;
	json_t *out;

	if (req->sandbox_id == NULL) {
		err_set_field(e, "sandbox_id", "sandbox_id: required");
		return NULL;
	}
	if (req->minutes < 1) {
		err_set_field(e, "minutes", "minutes: must be at least 1");
		return NULL;
	}
	memset(&t, 0, sizeof(t));
	t.minute_s = app->cfg.minute_s;
	t.max_lifetime_min = app->cfg.max_lifetime_min;
	t.account = account;
	t.id = req->sandbox_id;
	t.minutes = req->minutes;
	if (db_tx(app->db, extend_fn, &t, e) < 0)
		return NULL;
	/* After the commit: a rolled-back extend charged nothing. */
	metrics_credits_charged(t.charged);
	out = json_pack("{s:s, s:s, s:I, s:I, s:i}", "sandbox_id", req->sandbox_id,
	    "expires_at", t.expires, "charged", (json_int_t)t.charged,
	    "balance", (json_int_t)t.balance, "minutes_added", req->minutes);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}
