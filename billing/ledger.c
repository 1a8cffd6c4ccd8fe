/* ledger.c - append-only credit ledger with a cached balance. */
#include "billing/ledger.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keys.h"

int
bill_lock_balance(PGconn *c, const char *account, int64_t *balance, struct err *e)
{
	const char *p[1] = { account };
	PGresult *r = db_conn_query(c, "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE",
	    1, p, e);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		PQclear(r);
		err_set(e, ERR_NOT_FOUND, "account not found");
		return -1;
	}
	*balance = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return 0;
}

int
bill_post(PGconn *c, const char *account, const char *sandbox, const char *kind,
    int64_t amount, int minutes, const char *reason, const char *key,
    int64_t *balance_after, int *posted, struct err *e)
{
	char amt[24], mins[16];
	const char *p[7];
	int64_t balance;
	PGresult *r;

	*posted = 0;
	if (bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	if (amount < 0 && balance + amount < 0) {
		err_set(e, ERR_PAYMENT, "not enough credit: balance %" PRId64 ", needed %" PRId64,
		    balance, -amount);
		return -1;
	}
	snprintf(amt, sizeof(amt), "%" PRId64, amount);
	snprintf(mins, sizeof(mins), "%d", minutes);
	p[0] = account;
	p[1] = sandbox;
	p[2] = kind;
	p[3] = amt;
	p[4] = minutes >= 0 ? mins : NULL;
	p[5] = reason;
	p[6] = key;
	r = db_conn_query(c, "INSERT INTO ledger(account_id, sandbox_id, kind, amount, minutes,"
	    " reason, idempotency_key) VALUES ($1, $2, $3, $4::bigint, $5::int, $6, $7)"
	    " ON CONFLICT (idempotency_key) DO NOTHING RETURNING id", 7, p, e);
	if (r == NULL)
		return -1;
	*posted = PQntuples(r) == 1;
	PQclear(r);
	if (*posted) {
		const char *q[2] = { account, amt };
		r = db_conn_query(c, "UPDATE accounts SET balance = balance + $2::bigint"
		    " WHERE id = $1 RETURNING balance", 2, q, e);
		if (r == NULL)
			return -1;
		balance = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		PQclear(r);
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
	return bill_post(c, g->account, NULL, "grant", g->amount, -1, g->reason, key,
	    &g->balance, &posted, e);
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

json_t *
bill_entries(struct db *db, const char *account, int limit, int64_t before_id,
    int64_t *next_before, struct err *e)
{
	char lim[16], before[24];
	const char *p[3] = { account, before, lim };
	PGresult *r;
	json_t *arr;
	int n;

	snprintf(lim, sizeof(lim), "%d", limit + 1);
	snprintf(before, sizeof(before), "%" PRId64, before_id > 0 ? before_id : INT64_MAX);
	r = db_query(db, "SELECT id, kind, amount, minutes, reason, sandbox_id,"
	    " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
	    " FROM ledger WHERE account_id = $1 AND id < $2::bigint ORDER BY id DESC LIMIT $3::int",
	    3, p, e);
	if (r == NULL)
		return NULL;
	n = PQntuples(r);
	arr = json_array();
	for (int i = 0; arr && i < n && i < limit; i++)
		json_array_append_new(arr, json_pack("{s:I, s:s, s:I, s:o, s:s, s:o, s:s}",
		    "id", (json_int_t)strtoll(PQgetvalue(r, i, 0), NULL, 10),
		    "kind", PQgetvalue(r, i, 1),
		    "amount", (json_int_t)strtoll(PQgetvalue(r, i, 2), NULL, 10),
		    "minutes", PQgetisnull(r, i, 3) ? json_null() :
		        json_integer(strtol(PQgetvalue(r, i, 3), NULL, 10)),
		    "reason", PQgetvalue(r, i, 4),
		    "sandbox_id", PQgetisnull(r, i, 5) ? json_null() : json_string(PQgetvalue(r, i, 5)),
		    "created_at", PQgetvalue(r, i, 6)));
	*next_before = n > limit ? strtoll(PQgetvalue(r, limit - 1, 0), NULL, 10) : 0;
	PQclear(r);
	return arr;
}
