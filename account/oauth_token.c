/* oauth_token.c - OAuth access and refresh tokens: issued under a grant,
 * refreshed once each, revoked, and resolved to their account (oauth_). */
#include "account/oauth_int.h"

#include <openssl/crypto.h>
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"

#define ACCESS_KEPT 5        /* live access tokens per grant (newest) */
#define USED_REFRESH_KEPT 10 /* used refresh tokens a grant keeps to spot replays */

static int
token_new(PGconn *c, const char *grant_id, const char *kind, const char *resource, int ttl_s,
    char *out, struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1], ttl[16];
	const char *p[5] = { hash, grant_id, kind, resource, ttl };

	memcpy(out, strcmp(kind, "access") == 0 ? OAUTH_ACCESS_PREFIX : OAUTH_REFRESH_PREFIX, 7);
	if (key_random_hex(out + 7, OAUTH_TOKEN_LEN - 6, 32) < 0) {
		err_set(e, ERR_INTERNAL, "no randomness");
		return -1;
	}
	key_hash_hex(out, OAUTH_TOKEN_LEN, hash, sizeof(hash));
	if (fmt_err(e, "token lifetime", ttl, sizeof(ttl), "%d", ttl_s) < 0)
		return -1;
	return db_conn_exec(c,
	    "INSERT INTO oauth_tokens(token_hash, grant_id, kind, resource, expires_at)"
	    " VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::int))",
	    5, p, NULL, e);
}

int
oauth_tokens_issue(PGconn *c, const struct config *cfg, const char *grant_id, const char *resource,
    const char *scope, struct oauth_tokens *out, struct err *e)
{
	char access_kept[16], used_kept[16];
	const char *p[3] = { grant_id, access_kept, used_kept };

	if (fmt_err(e, "count", access_kept, sizeof(access_kept), "%d", ACCESS_KEPT - 1) < 0 ||
	    fmt_err(e, "count", used_kept, sizeof(used_kept), "%d", USED_REFRESH_KEPT) < 0)
		return -1;
	/* A grant holds a bounded number of rows however often it refreshes:
	 * its newest access tokens, its live refresh token and the last few
	 * used ones (to recognise a replay). */
	if (db_conn_exec(c,
		"DELETE FROM oauth_tokens WHERE grant_id = $1 AND (expires_at < now()"
		" OR token_hash IN (SELECT token_hash FROM oauth_tokens WHERE grant_id = $1"
		"  AND kind = 'access' ORDER BY created_at DESC OFFSET $2::int)"
		" OR token_hash IN (SELECT token_hash FROM oauth_tokens WHERE grant_id = $1"
		"  AND kind = 'refresh' AND used_at IS NOT NULL ORDER BY used_at DESC"
		"  OFFSET $3::int))",
		3, p, NULL, e) < 0 ||
	    token_new(c, grant_id, "access", resource, cfg->oauth_access_ttl_s, out->access, e) <
		0 ||
	    token_new(c, grant_id, "refresh", resource, cfg->oauth_refresh_ttl_s, out->refresh, e) <
		0)
		return -1;
	out->expires_in = cfg->oauth_access_ttl_s;
	return fmt_err(e, "scope", out->scope, sizeof(out->scope), "%s", scope);
}

struct refresh_tx {
	const struct config *cfg;
	const char *hash, *client_id, *resource;
	struct oauth_tokens *out;
	int replay;
};

static int
refresh_tx(PGconn *c, void *arg, struct err *e)
{
	struct refresh_tx *t = arg;
	char grant[OAUTH_GRANT_ID_MAX], resource[601], scope[OAUTH_SCOPE_MAX + 1];
	int expired, used, live;
	PGresult *r;

	t->replay = 0;
	r = db_conn_query_row(c,
	    "SELECT t.grant_id, g.client_id, g.resource, g.scope, t.expires_at < now(),"
	    " t.used_at IS NOT NULL, g.revoked_at IS NULL AND a.disabled_at IS NULL"
	    " FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id"
	    " JOIN accounts a ON a.id = g.account_id"
	    " WHERE t.token_hash = $1 AND t.kind = 'refresh' FOR UPDATE OF t",
	    1, &t->hash, e, ERR_INVALID, "invalid_grant", "unknown refresh token");
	if (r == NULL)
		return -1;
	if (db_get_str(r, 0, 0, grant, sizeof(grant), e) < 0 ||
	    db_get_str(r, 0, 2, resource, sizeof(resource), e) < 0 ||
	    db_get_str(r, 0, 3, scope, sizeof(scope), e) < 0 ||
	    db_get_bool(r, 0, 4, &expired, e) < 0 || db_get_bool(r, 0, 5, &used, e) < 0 ||
	    db_get_bool(r, 0, 6, &live, e) < 0 || strcmp(db_get_text(r, 0, 1), t->client_id) != 0) {
		PQclear(r);
		err_set_at(e, ERR_INVALID, "invalid_grant", "unknown refresh token");
		return -1;
	}
	PQclear(r);
	if (used && live) {
		t->replay = 1;
		return oauth_grant_end(c, grant, "refresh_reuse", e);
	}
	if (used || !live || expired) {
		err_set_at(e, ERR_INVALID, "invalid_grant",
		    !live ? "the grant was revoked; authorize again" :
			    "the refresh token has expired or was used; authorize again");
		return -1;
	}
	if (t->resource[0] && strcmp(t->resource, resource) != 0) {
		err_set_at(e, ERR_INVALID, "invalid_target", "resource is not the grant's");
		return -1;
	}
	if (db_conn_exec(c, "UPDATE oauth_tokens SET used_at = now() WHERE token_hash = $1", 1,
		&t->hash, NULL, e) < 0)
		return -1;
	return oauth_tokens_issue(c, t->cfg, grant, resource, scope, t->out, e);
}

int
oauth_refresh(struct db *db, const struct config *cfg, const char *refresh, const char *client_id,
    const char *resource, struct oauth_tokens *out, struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	struct refresh_tx t = { cfg, hash, client_id, resource, out, 0 };

	memset(out, 0, sizeof(*out));
	if (refresh == NULL || strlen(refresh) != OAUTH_TOKEN_LEN ||
	    strncmp(refresh, OAUTH_REFRESH_PREFIX, 7) != 0) {
		err_set_at(e, ERR_INVALID, "invalid_grant", "unknown refresh token");
		return -1;
	}
	key_hash_hex(refresh, OAUTH_TOKEN_LEN, hash, sizeof(hash));
	if (db_tx(db, refresh_tx, &t, e) < 0)
		return -1;
	if (t.replay) {
		log_info("oauth: a used refresh token came back; its grant is revoked");
		err_set_at(e, ERR_INVALID, "invalid_grant",
		    "the refresh token was used before; the grant is revoked, authorize again");
		memset(out, 0, sizeof(*out));
		return -1;
	}
	return 0;
}

struct revoke_tx {
	const char *hash, *client_id;
};

static int
revoke_tx(PGconn *c, void *arg, struct err *e)
{
	struct revoke_tx *t = arg;
	const char *p[2] = { t->hash, t->client_id };
	char grant[OAUTH_GRANT_ID_MAX];
	int refresh, found;
	const struct db_col cols[] = { DB_STR(grant, sizeof(grant)), DB_BOOL(&refresh) };
	PGresult *r;

	/* The token row first, then its grant: the order refreshing takes. */
	r = db_conn_query(c,
	    "SELECT t.grant_id, t.kind = 'refresh' FROM oauth_tokens t"
	    " JOIN oauth_grants g ON g.id = t.grant_id"
	    " WHERE t.token_hash = $1 AND ($2 = '' OR g.client_id = $2) FOR UPDATE OF t",
	    2, p, e);
	if ((found = db_take_row_or_none(r, cols, DB_NCOLS(cols), e)) <= 0)
		return found;
	/* A refresh token ends its grant; an access token only itself. */
	if (refresh && oauth_grant_end(c, grant, "user", e) < 0)
		return -1;
	return db_conn_exec(c, "DELETE FROM oauth_tokens WHERE token_hash = $1", 1, p, NULL, e);
}

int
oauth_revoke_token(struct db *db, const char *token, const char *client_id, struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	struct revoke_tx t = { hash, client_id ? client_id : "" };
	size_t n = token ? strlen(token) : 0;

	if (n != OAUTH_TOKEN_LEN)
		return 0;
	key_hash_hex(token, n, hash, sizeof(hash));
	return db_tx(db, revoke_tx, &t, e);
}

int
oauth_resolve_access(struct db *db, const char *token, size_t len, const char *resource,
    char account_id[ACCT_ID_LEN + 1], struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	const char *p[1] = { hash };
	int live, rc = -1;
	PGresult *r;

	if (!oauth_access_shaped(token, len)) {
		err_set(e, ERR_UNAUTHORIZED, "invalid access token");
		return -1;
	}
	key_hash_hex(token, len, hash, sizeof(hash));
	/* last_used_at is refreshed at most once a minute per grant. */
	r = db_query_row(db,
	    "WITH t AS (SELECT g.id, g.account_id, t.resource, t.expires_at > now() AS live"
	    "  FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id"
	    "  JOIN accounts a ON a.id = g.account_id"
	    "  WHERE t.token_hash = $1 AND t.kind = 'access' AND g.revoked_at IS NULL"
	    "  AND a.disabled_at IS NULL),"
	    " u AS (UPDATE oauth_grants SET last_used_at = now() WHERE id IN"
	    "  (SELECT id FROM t WHERE live) AND (last_used_at IS NULL"
	    "  OR last_used_at < now() - interval '60 seconds'))"
	    " SELECT account_id, resource, live FROM t",
	    1, p, e, ERR_UNAUTHORIZED, NULL, "invalid or revoked access token");
	OPENSSL_cleanse(hash, sizeof(hash));
	if (r == NULL)
		return -1;
	if (db_get_bool(r, 0, 2, &live, e) < 0) {
		/* e is set */
	} else if (!live) {
		err_set(e, ERR_UNAUTHORIZED, "the access token has expired; refresh it");
	} else if (strcmp(db_get_text(r, 0, 1), resource) != 0) {
		err_set(e, ERR_UNAUTHORIZED, "the access token is for another resource");
	} else {
		rc = db_get_str(r, 0, 0, account_id, ACCT_ID_LEN + 1, e);
	}
	PQclear(r);
	return rc;
}

int
oauth_access_grant(struct db *db, const char *token, size_t len, char grant_id[37], struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	const char *p[1] = { hash };
	PGresult *r;
	int rc;

	key_hash_hex(token, len, hash, sizeof(hash));
	r = db_query_row(db,
	    "SELECT grant_id::text FROM oauth_tokens WHERE token_hash = $1 AND kind = 'access'", 1,
	    p, e, ERR_UNAUTHORIZED, NULL, "invalid access token");
	OPENSSL_cleanse(hash, sizeof(hash));
	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, grant_id, 37, e);
	PQclear(r);
	return rc;
}
