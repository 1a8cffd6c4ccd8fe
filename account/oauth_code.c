/* oauth_code.c - OAuth authorization codes: issued when an account
 * consents, redeemed once for a grant and its first tokens (oauth_). */
#include "account/oauth_int.h"

#include <openssl/crypto.h>
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"

#define CODES_PER_ACCOUNT 20 /* unexpired codes at once */

struct code_tx {
	const struct config *cfg;
	const struct oauth_code_req *r;
	const char *hash;
};

static int
code_issue_tx(PGconn *c, void *arg, struct err *e)
{
	struct code_tx *t = arg;
	const struct oauth_code_req *r = t->r;
	char ttl[16];
	const char *p[9] = { t->hash, r->client->id, r->account_id, r->client->name,
		r->redirect_uri, r->challenge, r->resource, r->scope, ttl };
	long long n;
	PGresult *res;

	if (fmt_err(e, "code lifetime", ttl, sizeof(ttl), "%d", t->cfg->oauth_code_ttl_s) < 0 ||
	    oauth_account_lock(c, r->account_id, e) < 0 ||
	    oauth_grants_other(c, r->account_id, r->client->id, &n, e) < 0)
		return -1;
	if (n >= t->cfg->oauth_grants_per_account) {
		err_set_at(e, ERR_LIMIT, "access_denied",
		    "this account has %lld connected applications, the most it may have; disconnect "
		    "one under Connected apps first",
		    n);
		return -1;
	}
	res = db_conn_query(c,
	    "SELECT count(*) FROM oauth_codes WHERE account_id = $1 AND expires_at > now()", 1,
	    &r->account_id, e);
	if (res == NULL || db_get_ll(res, 0, 0, &n, e) < 0) {
		PQclear(res);
		return -1;
	}
	PQclear(res);
	if (n >= CODES_PER_ACCOUNT) {
		err_set_at(e, ERR_LIMIT, "temporarily_unavailable",
		    "too many authorizations under way for this account; try again in a minute");
		return -1;
	}
	/* Used and expired codes are kept ten minutes to recognise a replay. */
	return db_conn_exec(c,
		   "DELETE FROM oauth_codes WHERE expires_at < now() - interval '10 minutes'", 0,
		   NULL, NULL, e) < 0 ||
		db_conn_exec(c,
		    "INSERT INTO oauth_codes(code_hash, client_id, account_id, client_name,"
		    " redirect_uri, code_challenge, resource, scope, expires_at)"
		    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9::int))",
		    9, p, NULL, e) < 0 ?
	    -1 :
	    0;
}

int
oauth_code_issue(struct db *db, const struct config *cfg, const struct oauth_code_req *r,
    char code[OAUTH_CODE_LEN + 1], struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	struct code_tx t = { cfg, r, hash };
	int rc;

	if (!oauth_challenge_valid(r->challenge) || !oauth_scope_ok(r->scope)) {
		err_set_at(e, ERR_INVALID, "invalid_request", "bad code_challenge or scope");
		return -1;
	}
	if (key_random_hex(code, OAUTH_CODE_LEN + 1, OAUTH_CODE_LEN / 2) < 0) {
		err_set(e, ERR_INTERNAL, "no randomness");
		return -1;
	}
	key_hash_hex(code, OAUTH_CODE_LEN, hash, sizeof(hash));
	rc = db_tx(db, code_issue_tx, &t, e);
	if (rc < 0)
		OPENSSL_cleanse(code, OAUTH_CODE_LEN + 1);
	return rc;
}

struct redeem_tx {
	const struct config *cfg;
	const char *hash, *client_id, *redirect_uri, *verifier, *resource;
	struct oauth_tokens *out;
	/* 1: the code was used before (its grant is now revoked); -1: a wrong
	 * try spent it. Both commit, then fail. `why`: the wrong try's OAuth
	 * error (its transaction commits, so db_tx reports nothing). */
	int replay;
	struct err why;
};

/* What redeem_tx reads of a code row besides the texts it compares. */
struct code_row {
	char account[ACCT_ID_LEN + 1], resource[601], scope[OAUTH_SCOPE_MAX + 1];
	int expired, used;
};

/* The code's row, locked: the result (the caller PQclear()s it) with `k`
 * filled, or NULL with `e` set. */
static PGresult *
code_read(PGconn *c, const char *hash, struct code_row *k, struct err *e)
{
	PGresult *r = db_conn_query_row(c,
	    "SELECT account_id, client_id, client_name, redirect_uri, code_challenge, resource,"
	    " scope, expires_at < now(), used_at IS NOT NULL, grant_id"
	    " FROM oauth_codes WHERE code_hash = $1 FOR UPDATE",
	    1, &hash, e, ERR_INVALID, "invalid_grant", "unknown or expired authorization code");

	if (r == NULL)
		return NULL;
	if (db_get_bool(r, 0, 7, &k->expired, e) < 0 || db_get_bool(r, 0, 8, &k->used, e) < 0 ||
	    db_get_str(r, 0, 0, k->account, sizeof(k->account), e) < 0 ||
	    db_get_str(r, 0, 5, k->resource, sizeof(k->resource), e) < 0 ||
	    db_get_str(r, 0, 6, k->scope, sizeof(k->scope), e) < 0) {
		PQclear(r);
		return NULL;
	}
	return r;
}

/* A used code came back. Someone else may hold the code: what it gave is
 * taken back. */
static int
code_replayed(PGconn *c, const PGresult *r, struct err *e)
{
	const char *grant = db_get_text(r, 0, 9);

	return grant && grant[0] ? oauth_grant_end(c, grant, "code_reuse", e) : 0;
}

/* Why the token request does not match its code, or NULL when it does. */
static const char *
code_mismatch(const struct redeem_tx *t, const PGresult *r, int expired)
{
	if (expired)
		return "the authorization code has expired";
	if (strcmp(db_get_text(r, 0, 1), t->client_id) != 0)
		return "the authorization code was issued to another client";
	if (strcmp(db_get_text(r, 0, 3), t->redirect_uri) != 0)
		return "redirect_uri is not the one of the authorization request";
	if (!oauth_pkce_ok(t->verifier, db_get_text(r, 0, 4)))
		return "code_verifier does not match the code_challenge";
	return NULL;
}

/* A wrong try spends the code: it cannot be guessed at. The transaction
 * commits, so the try's error waits in t->why. */
static int
code_spend(PGconn *c, struct redeem_tx *t, const char *why, struct err *e)
{
	if (db_conn_exec(c, "UPDATE oauth_codes SET used_at = now() WHERE code_hash = $1", 1,
		&t->hash, NULL, e) < 0)
		return -1;
	t->replay = -1;
	err_set_at(&t->why, ERR_INVALID, "invalid_grant", "%s", why);
	return 0;
}

/* The code matches: its grant (in place of the account's old one with the
 * client), the code marked used by it, and the grant's first tokens. */
static int
code_grant(PGconn *c, const struct redeem_tx *t, const PGresult *r, const struct code_row *k,
    struct err *e)
{
	struct oauth_grant_req g = { k->account, t->client_id, db_get_text(r, 0, 2), k->resource,
		k->scope };
	char grant[OAUTH_GRANT_ID_MAX];
	const char *p[2] = { t->hash, grant };

	if (t->resource[0] && strcmp(t->resource, k->resource) != 0) {
		err_set_at(e, ERR_INVALID, "invalid_target",
		    "resource is not the one of the authorization request");
		return -1;
	}
	if (oauth_grant_new(c, &g, t->cfg->oauth_grants_per_account, grant, e) < 0 ||
	    db_conn_exec(c,
		"UPDATE oauth_codes SET used_at = now(), grant_id = $2 WHERE code_hash = $1", 2, p,
		NULL, e) < 0)
		return -1;
	return oauth_tokens_issue(c, t->cfg, grant, k->resource, k->scope, t->out, e);
}

static int
redeem_tx(PGconn *c, void *arg, struct err *e)
{
	struct redeem_tx *t = arg;
	struct code_row k;
	const char *why;
	PGresult *r;
	int rc;

	t->replay = 0;
	err_clear(&t->why);
	r = code_read(c, t->hash, &k, e);
	if (r == NULL)
		return -1;
	if (k.used) {
		t->replay = 1;
		rc = code_replayed(c, r, e);
	} else if ((why = code_mismatch(t, r, k.expired)) != NULL) {
		rc = code_spend(c, t, why, e);
	} else {
		rc = code_grant(c, t, r, &k, e);
	}
	PQclear(r);
	return rc;
}

int
oauth_code_redeem(struct db *db, const struct config *cfg, const char *code, const char *client_id,
    const char *redirect_uri, const char *verifier, const char *resource, struct oauth_tokens *out,
    struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	struct redeem_tx t = { cfg, hash, client_id, redirect_uri, verifier, resource, out, 0,
		{ 0 } };

	memset(out, 0, sizeof(*out));
	if (code == NULL || strlen(code) != OAUTH_CODE_LEN) {
		err_set_at(e, ERR_INVALID, "invalid_grant",
		    "unknown or expired authorization code");
		return -1;
	}
	key_hash_hex(code, OAUTH_CODE_LEN, hash, sizeof(hash));
	if (db_tx(db, redeem_tx, &t, e) < 0)
		return -1;
	if (t.replay == 1) {
		log_info("oauth: an authorization code was used twice; its grant is revoked");
		err_set_at(e, ERR_INVALID, "invalid_grant",
		    "the authorization code was used before; the tokens it gave are revoked");
		return -1;
	}
	if (t.replay == -1) {
		*e = t.why;
		return -1;
	}
	return 0;
}
