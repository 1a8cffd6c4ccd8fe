/* store_money.c - the money columns of sandbox rows, inside the caller's
 * transaction, and the usage report's rows. */
#include "sandbox/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

int
store_account_of(PGconn *c, const char *id, char *account, size_t n, struct err *e)
{
	const char *p[1] = { id };

	return store_only_str(
	    db_conn_query(c, "SELECT coalesce(account_id::text, '') FROM sandboxes WHERE id = $1",
		1, p, e),
	    id, account, n, e);
}

int
store_lock_paid(PGconn *c, const char *id, const char *account, struct store_paid *out,
    struct err *e)
{
	const char *p[2] = { id, account };
	const struct db_col cols[] = { DB_STR(out->account, sizeof(out->account)),
		DB_STR(out->state, sizeof(out->state)), DB_INT(&out->paid_minutes),
		DB_LL(&out->price), DB_LL(&out->charged), DB_LL_OR0(&out->refunded),
		DB_INT_OR0(&out->minutes_used), DB_BOOL(&out->settled), DB_LL(&out->ran_ms),
		DB_LL(&out->life_ms), DB_BOOL(&out->storage_billed), DB_LL(&out->storage_ms),
		DB_LL(&out->storage_price), DB_INT(&out->pauses), DB_INT(&out->resumes),
		DB_LL(&out->resume_charge), DB_INT(&out->resume_minutes),
		DB_LL(&out->expires_in_ms) };
	PGresult *r;

	memset(out, 0, sizeof(*out));
	/* The end is destroyed_at or failed_at, or now. Compute ran from
	 * ready to the end, less the pauses that ended (paused_ms) and the one
	 * under way (from paused_at). */
	r = db_conn_query_row(c,
	    "SELECT coalesce(account_id::text, ''), state, paid_minutes,"
	    " price_per_minute, charged, refunded, minutes_used, settled_at IS NOT NULL,"
	    " greatest(0, coalesce(trunc(extract(epoch FROM"
	    "  (coalesce(destroyed_at, failed_at, now()) - ready_at)) * 1000), 0) - paused_ms"
	    "  - coalesce(trunc(extract(epoch FROM"
	    "  (coalesce(destroyed_at, failed_at, now()) - paused_at)) * 1000), 0))::bigint,"
	    " coalesce(trunc(extract(epoch FROM (expires_at - ready_at)) * 1000), 0)::bigint,"
	    " storage_from IS NOT NULL,"
	    " greatest(0, coalesce(trunc(extract(epoch FROM"
	    "  (coalesce(destroyed_at, failed_at, now()) - storage_from)) * 1000), 0))::bigint,"
	    " storage_price, pauses, resumes, resume_charge, resume_minutes,"
	    " coalesce(trunc(extract(epoch FROM (expires_at - now())) * 1000), 0)::bigint"
	    " FROM sandboxes WHERE id = $1 AND ($2::uuid IS NULL OR account_id = $2::uuid)"
	    " FOR UPDATE",
	    2, p, e, STORE_NO_SANDBOX(id));
	return db_take_row(r, cols, DB_NCOLS(cols), e);
}

int
store_set_paid(PGconn *c, const char *id, long long price, int minutes, long long cost,
    struct err *e)
{
	char pr[24], mins[16], costs[24];
	const char *p[4] = { id, pr, mins, costs };

	if (fmt_err(e, "price", pr, sizeof(pr), "%lld", price) < 0 ||
	    fmt_err(e, "minutes", mins, sizeof(mins), "%d", minutes) < 0 ||
	    fmt_err(e, "amount", costs, sizeof(costs), "%lld", cost) < 0)
		return -1;
	return db_conn_exec(c,
	    "UPDATE sandboxes SET price_per_minute = $2::bigint,"
	    " paid_minutes = $3::int, charged = $4::bigint WHERE id = $1",
	    4, p, NULL, e);
}

int
store_add_paid(PGconn *c, const char *id, int minutes, long long cost, int minute_s, char *expires,
    size_t n, struct err *e)
{
	char mins[16], costs[24], sec[16];
	const char *p[4] = { id, mins, costs, sec };
	PGresult *r;

	if (fmt_err(e, "minutes", mins, sizeof(mins), "%d", minutes) < 0 ||
	    fmt_err(e, "amount", costs, sizeof(costs), "%lld", cost) < 0 ||
	    fmt_err(e, "minute", sec, sizeof(sec), "%d", minute_s) < 0)
		return -1;
	r = db_conn_query(c,
	    "UPDATE sandboxes SET paid_minutes = paid_minutes + $2::int,"
	    " charged = charged + $3::bigint,"
	    " expires_at = expires_at + make_interval(secs => $2::int * $4::int)"
	    " WHERE id = $1 RETURNING " STORE_TS("expires_at"),
	    4, p, e);
	return store_only_str(r, id, expires, n, e);
}

int
store_mark_settled(PGconn *c, const char *id, int used, long long refund, long long storage,
    struct err *e)
{
	char used_s[16], refund_s[24], storage_s[24];
	const char *p[4] = { id, used_s, refund_s, storage_s };

	if (fmt_err(e, "minutes", used_s, sizeof(used_s), "%d", used) < 0 ||
	    fmt_err(e, "amount", refund_s, sizeof(refund_s), "%lld", refund) < 0 ||
	    fmt_err(e, "amount", storage_s, sizeof(storage_s), "%lld", storage) < 0)
		return -1;
	return db_conn_exec(c,
	    "UPDATE sandboxes SET minutes_used = $2::int,"
	    " refunded = refunded + $3::bigint, charged = charged + $4::bigint,"
	    " storage_from = NULL, settled_at = now() WHERE id = $1",
	    4, p, NULL, e);
}

int
store_expiry_changed_tx(PGconn *c, struct err *e)
{
	return db_conn_exec(c, "SELECT pg_notify('aas_invalidate', 'e:')", 0, NULL, NULL, e);
}

/* One row of store_usage_json's query; NULL with `e` set. */
static json_t *
usage_row_json(const PGresult *r, int i, struct err *e)
{
	const char *id = db_get_text(r, i, 0), *size = db_get_text(r, i, 1);
	const char *state = db_get_text(r, i, 2), *created = db_get_text(r, i, 7);
	int has_used = db_get_text(r, i, 4) != NULL;
	long long charged, refunded, used = 0;
	int paid;
	json_t *o;

	if (db_get_int(r, i, 3, &paid, e) < 0 || (has_used && db_get_ll(r, i, 4, &used, e) < 0) ||
	    db_get_ll(r, i, 5, &charged, e) < 0 || db_get_ll(r, i, 6, &refunded, e) < 0)
		return NULL;
	if (id == NULL || size == NULL || state == NULL || created == NULL) {
		err_set(e, ERR_INTERNAL, "database answer: sandbox row %d lacks a field", i);
		return NULL;
	}
	o = json_pack("{s:s, s:s, s:s, s:i, s:o, s:I, s:I, s:I, s:s}", "sandbox_id", id, "size",
	    size, "state", state, "minutes_paid", paid, "minutes_used",
	    has_used ? json_integer(used) : json_null(), "charged", (json_int_t)charged, "refunded",
	    (json_int_t)refunded, "cost", (json_int_t)(charged - refunded), "created_at", created);
	if (o == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return o;
}

json_t *
store_usage_json(struct db *db, const char *account, int limit, struct err *e)
{
	char lims[16];
	const char *p[2] = { account, lims };
	PGresult *r;
	json_t *arr;
	int ok = 0;

	if (fmt_err(e, "limit", lims, sizeof(lims), "%d", limit) < 0)
		return NULL;
	r = db_query(db,
	    "SELECT id, size, state, paid_minutes, minutes_used, charged, refunded, " STORE_TS(
		"created_at") " FROM sandboxes WHERE account_id = $1"
			      " ORDER BY created_at DESC LIMIT $2::int",
	    2, p, e);
	if (r == NULL)
		return NULL;
	arr = json_array();
	if (arr == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		json_t *o = usage_row_json(r, i, e);
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
