/* usage.c - the usage report and extending a sandbox's paid lifetime. */
#include "sandbox/usage.h"

#include <inttypes.h>
#include <string.h>

#include "base/db.h"
#include "base/fmt.h"
#include "base/metrics.h"
#include "base/num.h"
#include "billing/billing.h"
#include "billing/ledger.h"
#include "sandbox/store.h"

#define USAGE_TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
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
	const struct db_col cols[] = { DB_LL(&t->balance), DB_LL(&t->granted), DB_LL(&t->spent),
		DB_LL(&t->today), DB_LL(&t->month) };
	PGresult *r;

	r = db_query_row(db,
	    "SELECT a.balance,"
	    " coalesce(sum(l.amount) FILTER (WHERE l.kind = 'grant'), 0),"
	    " coalesce(-sum(l.amount) FILTER (WHERE l.kind IN ('charge', 'refund')), 0),"
	    " coalesce(-sum(l.amount) FILTER (WHERE l.kind IN ('charge', 'refund')"
	    "  AND l.created_at >= date_trunc('day', now())), 0),"
	    " coalesce(-sum(l.amount) FILTER (WHERE l.kind IN ('charge', 'refund')"
	    "  AND l.created_at >= date_trunc('month', now())), 0)"
	    " FROM accounts a LEFT JOIN ledger l ON l.account_id = a.id"
	    " WHERE a.id = $1 GROUP BY a.balance",
	    1, p, e, ERR_NOT_FOUND, NULL, "account not found");
	return db_take_row(r, cols, DB_NCOLS(cols), e);
}

json_t *
usage_ledger_json(struct db *db, const char *account, int limit, int64_t before_id,
    int64_t *next_before, struct err *e)
{
	struct bill_entry *v;
	size_t n;
	json_t *arr;

	if (bill_entries(db, account, limit, before_id, &v, &n, next_before, e) < 0)
		return NULL;
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		json_t *o = json_pack("{s:I, s:s, s:I, s:o, s:s, s:o, s:s}", "id",
		    (json_int_t)v[i].id, "kind", v[i].kind, "amount", (json_int_t)v[i].amount,
		    "minutes", v[i].has_minutes ? json_integer(v[i].minutes) : json_null(),
		    "reason", v[i].reason, "sandbox_id",
		    v[i].sandbox_id[0] ? json_string(v[i].sandbox_id) : json_null(), "created_at",
		    v[i].created_at);
		/* json_array_append_new frees the entry when it fails. */
		if (o == NULL || json_array_append_new(arr, o) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
	bill_entries_free(v, n);
	if (arr == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return arr;
}

json_t *
usage_daily_json(struct db *db, const char *account, int days, struct err *e)
{
	char nd[16];
	const char *p[2] = { account, nd };
	json_t *out;
	PGresult *r;

	if (days < 1 || days > 366) {
		err_set_field(e, "days", "days: 1 to 366");
		return NULL;
	}
	if (fmt_err(e, "days", nd, sizeof(nd), "%d", days) < 0)
		return NULL;
	r = db_query(db,
	    "WITH d AS (SELECT generate_series(date_trunc('day', now() AT TIME ZONE 'UTC') "
	    "  - make_interval(days => $2::int - 1), date_trunc('day', now() AT TIME ZONE 'UTC'), "
	    "  interval '1 day') AS day) "
	    "SELECT to_char(d.day, 'YYYY-MM-DD'), coalesce(-sum(l.amount), 0) "
	    "FROM d LEFT JOIN ledger l ON l.account_id = $1 AND l.kind IN ('charge', 'refund') "
	    "  AND l.created_at >= d.day AT TIME ZONE 'UTC' "
	    "  AND l.created_at < (d.day + interval '1 day') AT TIME ZONE 'UTC' "
	    "GROUP BY d.day ORDER BY d.day",
	    2, p, e);
	if (r == NULL)
		return NULL;
	out = json_array();
	for (int i = 0; out != NULL && i < PQntuples(r); i++) {
		long long spent;

		if (db_get_ll(r, i, 1, &spent, e) < 0) {
			json_decref(out);
			out = NULL;
			break;
		}
		json_array_append_new(out,
		    json_pack("{s:s,s:I}", "day", PQgetvalue(r, i, 0), "spent", (json_int_t)spent));
	}
	PQclear(r);
	return out;
}

json_t *
usage_get(struct db *db, const char *account, const struct usage_req *req, struct err *e)
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
	if (req->cursor && (num_parse_ll(req->cursor, &before) < 0 || before <= 0)) {
		err_set_field(e, "cursor", "cursor: not a cursor from get_usage");
		return NULL;
	}
	if (usage_totals(db, account, &t, e) < 0)
		return NULL;
	sandboxes = store_usage_json(db, account, req->limit, e);
	if (sandboxes == NULL)
		goto out;
	ledger = usage_ledger_json(db, account, req->limit, before, &next, e);
	if (ledger == NULL)
		goto out;
	/* Free credit left: what was granted and not yet spent, at most the
	 * balance. */
	free_left = t.granted - t.spent;
	if (free_left > t.balance)
		free_left = t.balance;
	if (free_left < 0)
		free_left = 0;
	if (fmt_err(e, "cursor", nextbuf, sizeof(nextbuf), "%" PRId64, next) < 0)
		goto out;
	/* json_pack takes both arrays, also when it fails. */
	out = json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:o, s:o, s:o}", "balance",
	    (json_int_t)t.balance, "free_credit_remaining", (json_int_t)free_left, "spend_today",
	    (json_int_t)t.today, "spend_month", (json_int_t)t.month, "currency", "USD", "unit",
	    "micro-USD (1,000,000 = 1 USD)", "sandboxes", sandboxes, "ledger", ledger,
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
	struct store_paid paid;
	long long price, life_ms;
	double lifetime_min;
	int64_t balance;

	/* Account first, then sandbox: the order every transaction takes. */
	if (bill_lock_balance(c, t->account, &balance, e) < 0)
		return -1;
	if (store_lock_paid(c, t->id, t->account, &paid, e) < 0)
		return -1;
	if (strcmp(paid.state, "running") != 0) {
		err_set(e, ERR_CONFLICT, "sandbox %s is %s; only a running sandbox can be extended",
		    t->id, paid.state);
		return -1;
	}
	price = paid.price;
	life_ms = paid.life_ms;
	lifetime_min = (double)life_ms / (t->minute_s * 1000.0);
	if (lifetime_min + t->minutes > t->max_lifetime_min + 0.001) {
		err_set(e, ERR_LIMIT,
		    "a sandbox lives at most %d minutes; this one already has %d,"
		    " so it can be extended by at most %d",
		    t->max_lifetime_min, (int)(lifetime_min + 0.5),
		    t->max_lifetime_min - (int)(lifetime_min + 0.5));
		return -1;
	}
	if (bill_charge_extend(c, t->account, t->id, t->minutes, price, &t->charged, &t->balance,
		e) < 0)
		return -1;
	if (store_add_paid(c, t->id, t->minutes, t->charged, t->minute_s, t->expires,
		sizeof(t->expires), e) < 0)
		return -1;
	/* The reaper sleeps until the next expiry; tell it this one moved. */
	if (store_expiry_changed_tx(c, e) < 0)
		return -1;
	return 0;
}

json_t *
usage_extend(struct db *db, const struct config *cfg, const char *account,
    const struct usage_extend_req *req, struct err *e)
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
	t.minute_s = cfg->minute_s;
	t.max_lifetime_min = cfg->max_lifetime_min;
	t.account = account;
	t.id = req->sandbox_id;
	t.minutes = req->minutes;
	if (db_tx(db, extend_fn, &t, e) < 0)
		return NULL;
	/* After the commit: a rolled-back extend charged nothing. */
	metrics_credits_charged(t.charged);
	out = json_pack("{s:s, s:s, s:I, s:I, s:i}", "sandbox_id", req->sandbox_id, "expires_at",
	    t.expires, "charged", (json_int_t)t.charged, "balance", (json_int_t)t.balance,
	    "minutes_added", req->minutes);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}
