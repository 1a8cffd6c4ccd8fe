/* ledger.c - append-only credit ledger with a cached balance. */
#include "billing/ledger.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"

int
bill_lock_balance(PGconn *c, const char *account, int64_t *balance, struct err *e)
{
	const char *p[1] = { account };
	PGresult *r = db_conn_query_row(c, "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE",
	    1, p, e, ERR_NOT_FOUND, NULL, "account not found");
	long long v;
	int rc = -1;

	if (r == NULL)
		return -1;
	if (db_get_ll(r, 0, 0, &v, e) == 0) {
		*balance = v;
		rc = 0;
	}
	PQclear(r);
	return rc;
}

int
bill_post(PGconn *c, const char *account, const char *sandbox, const char *kind, int64_t amount,
    int minutes, const char *reason, const char *key, int64_t *balance_after, int *posted,
    struct err *e)
{
	char amt[24], mins[16];
	const char *p[7];
	int64_t balance;
	long inserted;

	*posted = 0;
	if (bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	if (amount < 0 && balance + amount < 0) {
		err_set(e, ERR_PAYMENT, "not enough credit: balance %" PRId64 ", needed %" PRId64,
		    balance, -amount);
		return -1;
	}
	if (fmt_err(e, "ledger amount", amt, sizeof(amt), "%" PRId64, amount) < 0 ||
	    fmt_err(e, "ledger minutes", mins, sizeof(mins), "%d", minutes) < 0)
		return -1;
	p[0] = account;
	p[1] = sandbox;
	p[2] = kind;
	p[3] = amt;
	p[4] = minutes >= 0 ? mins : NULL;
	p[5] = reason;
	p[6] = key;
	if (db_conn_exec(c,
		"INSERT INTO ledger(account_id, sandbox_id, kind, amount, minutes,"
		" reason, idempotency_key) VALUES ($1, $2, $3, $4::bigint, $5::int, $6, $7)"
		" ON CONFLICT (idempotency_key) DO NOTHING",
		7, p, &inserted, e) < 0)
		return -1;
	*posted = inserted == 1;
	if (*posted) {
		const char *q[2] = { account, amt };
		PGresult *r;
		long long v;
		int rc;
		r = db_conn_query(c,
		    "UPDATE accounts SET balance = balance + $2::bigint"
		    " WHERE id = $1 RETURNING balance",
		    2, q, e);
		if (r == NULL)
			return -1;
		rc = db_get_ll(r, 0, 0, &v, e);
		PQclear(r);
		if (rc < 0)
			return -1;
		balance = v;
	}
	if (balance_after)
		*balance_after = balance;
	return 0;
}

struct grant_tx {
	const char *account;
	int64_t amount;
	const char *reason;
	int64_t balance;
};

static int
grant_fn(PGconn *c, void *arg, struct err *e)
{
	struct grant_tx *g = arg;
	char key[48] = "grant:";
	int posted;

	if (key_random_hex(key + 6, sizeof(key) - 6, 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	return bill_post(c, g->account, NULL, "grant", g->amount, -1, g->reason, key, &g->balance,
	    &posted, e);
}

int
bill_grant(struct db *db, const char *account, int64_t amount, const char *reason,
    int64_t *balance_after, struct err *e)
{
	struct grant_tx g = { account, amount, reason, 0 };

	if (amount <= 0) {
		err_set_field(e, "amount", "amount: must be a positive number of micro-USD");
		return -1;
	}
	if (reason == NULL || *reason == '\0' || strlen(reason) > 500) {
		err_set_field(e, "reason", "reason: 1 to 500 characters");
		return -1;
	}
	if (db_tx(db, grant_fn, &g, e) < 0)
		return -1;
	*balance_after = g.balance;
	return 0;
}

void
bill_entries_free(struct bill_entry *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].reason);
	free(v);
}

/* One row of bill_entries' query; -1 with `e` set. */
static int
entry_read(const PGresult *r, int i, struct bill_entry *o, struct err *e)
{
	const char *reason = db_get_text(r, i, 4);

	o->has_minutes = db_get_text(r, i, 3) != NULL;
	if (db_get_ll(r, i, 0, &o->id, e) < 0 || db_get_ll(r, i, 2, &o->amount, e) < 0 ||
	    (o->has_minutes && db_get_ll(r, i, 3, &o->minutes, e) < 0) ||
	    db_get_str(r, i, 1, o->kind, sizeof(o->kind), e) < 0 ||
	    db_get_str(r, i, 5, o->sandbox_id, sizeof(o->sandbox_id), e) < 0 ||
	    db_get_str(r, i, 6, o->created_at, sizeof(o->created_at), e) < 0)
		return -1;
	if (reason == NULL || o->created_at[0] == '\0') {
		err_set(e, ERR_INTERNAL, "database answer: ledger entry %lld lacks a field", o->id);
		return -1;
	}
	if ((o->reason = strdup(reason)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	return 0;
}

int
bill_entries(struct db *db, const char *account, int limit, int64_t before_id,
    struct bill_entry **entries, size_t *count, int64_t *next_before, struct err *e)
{
	char lim[16], before[24];
	const char *p[3] = { account, before, lim };
	struct bill_entry *v = NULL;
	long long next = 0;
	size_t k = 0;
	PGresult *r;
	int n, rc = -1;

	*entries = NULL;
	*count = 0;
	if (fmt_err(e, "ledger page size", lim, sizeof(lim), "%d", limit + 1) < 0 ||
	    fmt_err(e, "ledger position", before, sizeof(before), "%" PRId64,
		before_id > 0 ? before_id : INT64_MAX) < 0)
		return -1;
	r = db_query(db,
	    "SELECT id, kind, amount, minutes, reason, sandbox_id,"
	    " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
	    " FROM ledger WHERE account_id = $1 AND id < $2::bigint ORDER BY id DESC LIMIT $3::int",
	    3, p, e);
	if (r == NULL)
		return -1;
	n = PQntuples(r);
	if (n > 0 && (v = calloc((size_t)n, sizeof(*v))) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (; (int)k < n && (int)k < limit; k++)
		if (entry_read(r, (int)k, &v[k], e) < 0) {
			k++;
			goto out;
		}
	/* One row more than asked for means there is a next page. */
	if (n > limit && db_get_ll(r, limit - 1, 0, &next, e) < 0)
		goto out;
	*next_before = next;
	*entries = v;
	*count = k;
	v = NULL;
	rc = 0;
out:
	bill_entries_free(v, k);
	PQclear(r);
	return rc;
}
