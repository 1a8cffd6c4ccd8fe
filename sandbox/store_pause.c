/* store_pause.c - the rows of pauses and resumes (schema/018_pause.sql):
 * running -> pausing -> paused -> resuming -> running. The money columns
 * move inside the caller's transaction, after the account row. */
#include "sandbox/store_int.h"

#include <string.h>

#include "base/fmt.h"

void
store_wrong_state(struct db *db, const char *id, const char *account, const char *want,
    struct err *e)
{
	struct store_row row;
	struct err le;

	err_clear(&le);
	if (store_load(db, account, id, &row, &le) < 0) {
		*e = le;
		return;
	}
	err_set(e, ERR_CONFLICT, "sandbox %s is %s, not %s%s", id, row.state, want,
	    store_state_moving(row.state) ? "; try again in a few seconds" : "");
}

int
store_pause_begin(struct db *db, const char *id, const char *account, const char *owner, char *host,
    size_t hn, struct err *e)
{
	const char *p[3] = { id, account, owner };
	char got[STORE_ID_LEN + 1];
	int rc;

	rc = store_id_host(db_query(db,
			       "UPDATE sandboxes SET state = 'pausing', owner = $3,"
			       " paused_at = now()"
			       " WHERE id = $1 AND account_id = $2::uuid AND state = 'running'"
			       " AND NOT in_pool AND moving_to IS NULL RETURNING id, host_uri",
			       3, p, e),
	    got, host, hn, e);
	if (rc == 0)
		store_wrong_state(db, id, account, "running", e);
	return rc == 1 ? 0 : -1;
}

int
store_pause_undo(struct db *db, const char *id, struct err *e)
{
	const char *p[1] = { id };

	return db_exec(db,
	    "UPDATE sandboxes SET state = 'running', owner = NULL, paused_at = NULL"
	    " WHERE id = $1 AND state = 'pausing'",
	    1, p, NULL, e);
}

int
store_disown(struct db *db, const char *id, struct err *e)
{
	const char *p[1] = { id };

	return db_exec(db,
	    "UPDATE sandboxes SET owner = NULL WHERE id = $1 AND state IN ('pausing', 'resuming')",
	    1, p, NULL, e);
}

int
store_conn_mark_paused(PGconn *c, const char *id, int paid_minutes, long long refund,
    long long storage_price, struct err *e)
{
	char mins[16], ref[24], sp[24];
	const char *p[4] = { id, mins, ref, sp };
	long n = 0;

	if (fmt_err(e, "minutes", mins, sizeof(mins), "%d", paid_minutes) < 0 ||
	    fmt_err(e, "amount", ref, sizeof(ref), "%lld", refund) < 0 ||
	    fmt_err(e, "price", sp, sizeof(sp), "%lld", storage_price) < 0 ||
	    db_conn_exec(c,
		"UPDATE sandboxes SET state = 'paused', owner = NULL, pauses = pauses + 1,"
		" paid_minutes = $2::int, refunded = refunded + $3::bigint,"
		" storage_price = $4::bigint, storage_from = paused_at"
		" WHERE id = $1 AND state = 'pausing'",
		4, p, &n, e) < 0)
		return -1;
	if (n != 1) {
		err_set(e, ERR_CONFLICT, "sandbox %s stopped pausing meanwhile", id);
		return -1;
	}
	return 0;
}

int
store_conn_mark_resuming(PGconn *c, const char *id, const char *owner, int minutes,
    long long compute, long long storage, struct err *e)
{
	char mins[16], comp[24], stor[24];
	const char *p[5] = { id, owner, mins, comp, stor };

	if (fmt_err(e, "minutes", mins, sizeof(mins), "%d", minutes) < 0 ||
	    fmt_err(e, "amount", comp, sizeof(comp), "%lld", compute) < 0 ||
	    fmt_err(e, "amount", stor, sizeof(stor), "%lld", storage) < 0)
		return -1;
	return db_conn_exec(c,
	    "UPDATE sandboxes SET state = 'resuming', owner = $2, resumes = resumes + 1,"
	    " paid_minutes = paid_minutes + $3::int,"
	    " charged = charged + $4::bigint + $5::bigint, storage_from = now(),"
	    " resume_charge = $4::bigint, resume_minutes = $3::int"
	    " WHERE id = $1 AND state = 'paused'",
	    5, p, NULL, e);
}

int
store_conn_resume_undo(PGconn *c, const char *id, struct err *e)
{
	const char *p[1] = { id };

	return db_conn_exec(c,
	    "UPDATE sandboxes SET state = 'paused', owner = NULL,"
	    " paid_minutes = paid_minutes - resume_minutes,"
	    " refunded = refunded + resume_charge, resume_charge = 0, resume_minutes = 0"
	    " WHERE id = $1 AND state = 'resuming'",
	    1, p, NULL, e);
}

int
store_resume_done(struct db *db, const char *id, const int *ports, const int *host_ports, size_t n,
    int *won, struct err *e)
{
	const char *p[1] = { id };

	/* The pause ends now: the time since paused_at joins paused_ms. */
	return store_change_rebind(db,
	    "UPDATE sandboxes SET state = 'running', owner = NULL,"
	    " paused_ms = paused_ms + greatest(0,"
	    "  trunc(extract(epoch FROM (now() - paused_at)) * 1000))::bigint,"
	    " paused_at = NULL, storage_from = NULL, resume_charge = 0, resume_minutes = 0"
	    " WHERE id = $1 AND state = 'resuming'",
	    1, p, id, ports, host_ports, n, won, e);
}
