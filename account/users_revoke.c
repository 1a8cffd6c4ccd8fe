/* users_revoke.c - what a password reset or change ends (user_): the
 * account's OAuth grants and, when asked, its API keys. Called inside
 * the caller's transaction with the account row locked first (its grant
 * and key rows come after it, as in acct_disable). */
#include "account/users_int.h"

int
user_grants_end(PGconn *c, const char *account, struct err *e)
{
	const char *p[1] = { account };

	/* Access and refresh tokens are checked against their grant on every
	 * use (never cached): both stop working at the commit. */
	return db_conn_exec(c,
	    "UPDATE oauth_grants SET revoked_at = now(), revoke_reason = 'password'"
	    " WHERE account_id = $1 AND revoked_at IS NULL",
	    1, p, NULL, e);
}

int
user_keys_end(PGconn *c, const char *account, long *n, struct err *e)
{
	const char *p[1] = { account };

	/* Every aasd drops the keys from its cache on the notification. */
	return db_conn_exec(c,
	    "WITH u AS (UPDATE api_keys SET revoked_at = now()"
	    " WHERE account_id = $1 AND revoked_at IS NULL RETURNING key_hash)"
	    " SELECT pg_notify('aas_invalidate', 'k:' || key_hash) FROM u",
	    1, p, n, e);
}
