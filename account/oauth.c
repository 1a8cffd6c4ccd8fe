/* oauth.c - OAuth grants: an account's connected applications, made when
 * a code is redeemed, counted, listed and revoked (oauth_). The clients
 * are in oauth_client.c, codes in oauth_code.c, tokens in oauth_token.c. */
#include "account/oauth_int.h"

#include <stdio.h>
#include <string.h>

#include "account/attempts.h"

int
oauth_account_lock(PGconn *c, const char *account_id, struct err *e)
{
	char subj[ATT_SUBJECT_MAX + 1];

	if (att_subject(subj, sizeof(subj), "oauth", account_id) < 0) {
		err_set(e, ERR_INTERNAL, "account id too long");
		return -1;
	}
	return att_lock(c, subj, e);
}

int
oauth_grants_other(PGconn *c, const char *account_id, const char *client_id, long long *n,
    struct err *e)
{
	const char *p[2] = { account_id, client_id };

	return db_take_ll(db_conn_query(c,
			      "SELECT count(*) FROM oauth_grants WHERE account_id = $1"
			      " AND client_id <> $2 AND revoked_at IS NULL",
			      2, p, e),
	    n, e);
}

int
oauth_grant_new(PGconn *c, const struct oauth_grant_req *g, int max, char grant[OAUTH_GRANT_ID_MAX],
    struct err *e)
{
	const char *p[5] = { g->account_id, g->client_id, g->client_name, g->resource, g->scope };
	long n_live = 0;
	long long others = 0;
	PGresult *r;

	/* The account row before any grant (as disabling takes them), and a
	 * disabled account gets nothing. */
	if (db_conn_exec(c,
		"SELECT 1 FROM accounts WHERE id = $1 AND disabled_at IS NULL FOR KEY SHARE", 1, p,
		&n_live, e) < 0)
		return -1;
	if (n_live != 1) {
		err_set_at(e, ERR_INVALID, "invalid_grant", "the account is disabled");
		return -1;
	}
	if (oauth_account_lock(c, g->account_id, e) < 0 ||
	    oauth_grants_other(c, g->account_id, g->client_id, &others, e) < 0)
		return -1;
	if (others >= max) {
		err_set_at(e, ERR_INVALID, "invalid_grant",
		    "the account has as many connected applications as it may");
		return -1;
	}
	if (db_conn_exec(c,
		"UPDATE oauth_grants SET revoked_at = now(), revoke_reason = 'user'"
		" WHERE account_id = $1 AND client_id = $2 AND revoked_at IS NULL",
		2, p, NULL, e) < 0)
		return -1;
	/* One grant per account and client: a new consent replaces the old. */
	r = db_conn_query(c,
	    "INSERT INTO oauth_grants(account_id, client_id, client_name, resource, scope)"
	    " VALUES ($1, $2, $3, $4, $5) RETURNING id",
	    5, p, e);
	if (r == NULL || db_get_str(r, 0, 0, grant, OAUTH_GRANT_ID_MAX, e) < 0) {
		PQclear(r);
		return -1;
	}
	PQclear(r);
	return 0;
}

int
oauth_grant_end(PGconn *c, const char *grant_id, const char *reason, struct err *e)
{
	const char *p[2] = { grant_id, reason };

	return db_conn_exec(c,
	    "UPDATE oauth_grants SET revoked_at = now(), revoke_reason = $2"
	    " WHERE id = $1 AND revoked_at IS NULL",
	    2, p, NULL, e);
}

json_t *
oauth_grants_list(struct db *db, const char *account_id, struct err *e)
{
	const char *p[1] = { account_id };
	PGresult *r = db_query(db,
	    "SELECT id, client_id, client_name, to_char(created_at AT TIME ZONE 'UTC',"
	    " 'YYYY-MM-DD HH24:MI'), coalesce(to_char(last_used_at AT TIME ZONE 'UTC',"
	    " 'YYYY-MM-DD HH24:MI'), '') FROM oauth_grants"
	    " WHERE account_id = $1 AND revoked_at IS NULL ORDER BY created_at DESC",
	    1, p, e);
	json_t *a;

	if (r == NULL)
		return NULL;
	a = json_array();
	for (int i = 0; a != NULL && i < PQntuples(r); i++)
		if (json_array_append_new(a,
			json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", db_get_text(r, i, 0),
			    "client_id", db_get_text(r, i, 1), "client_name", db_get_text(r, i, 2),
			    "created", db_get_text(r, i, 3), "last_used", db_get_text(r, i, 4))) <
		    0) {
			json_decref(a);
			a = NULL;
		}
	PQclear(r);
	if (a == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return a;
}

int
oauth_grant_revoke(struct db *db, const char *account_id, const char *grant_id, struct err *e)
{
	const char *p[2] = { grant_id, account_id };
	long n = 0;

	if (!acct_id_valid(grant_id)) {
		err_set(e, ERR_NOT_FOUND, "no such connected application");
		return -1;
	}
	if (db_exec(db,
		"UPDATE oauth_grants SET revoked_at = now(), revoke_reason = 'user'"
		" WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL",
		2, p, &n, e) < 0)
		return -1;
	if (n == 0) {
		err_set(e, ERR_NOT_FOUND, "no such connected application");
		return -1;
	}
	return 0;
}
