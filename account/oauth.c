/* oauth.c - OAuth grants, codes and tokens in PostgreSQL (oauth_). */
#include "account/oauth.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "base/fetch.h"
#include "base/keys.h"
#include "base/log.h"
#include "account/attempts.h"

#define REGISTERED_PREFIX "aas_client_"
#define CODES_PER_ACCOUNT 20 /* unexpired codes at once */
#define DOC_REFETCH_S 300    /* a kept document is used this long */
#define DOCS_PER_HOUR 60     /* document fetches one quota causes an hour */
#define ACCESS_KEPT 5        /* live access tokens per grant (newest) */
#define USED_REFRESH_KEPT 10 /* used refresh tokens a grant keeps to spot replays */

/* ---- limits ---- */

/* One event of `kind`:`value` counted against max per window_s, check
 * and count in one step (att_lock). */
struct limit_tx {
	const char *kind, *value;
	int max, window_s;
	long long retry_s;
	int over;
};

static int
limit_tx(PGconn *c, void *arg, struct err *e)
{
	struct limit_tx *t = arg;
	char subj[ATT_SUBJECT_MAX + 1];
	int over;

	if (att_subject(subj, sizeof(subj), t->kind, t->value) < 0) {
		err_set(e, ERR_INVALID, "limit subject too long");
		return -1;
	}
	if (att_lock(c, subj, e) < 0)
		return -1;
	over = att_over(c, subj, t->max, t->window_s, &t->retry_s, e);
	if (over < 0)
		return -1;
	t->over = over;
	return over ? 0 : att_record(c, subj, e);
}

/* 0 when under the limit (the event is counted), -1 with ERR_LIMIT and
 * `code` as the OAuth error when over it. */
static int
limit_take(struct db *db, const char *kind, const char *value, int max, const char *code,
    const char *what, struct err *e)
{
	struct limit_tx t = { kind, value, max, 3600, 0, 0 };
	char retry[64];

	if (db_tx(db, limit_tx, &t, e) < 0)
		return -1;
	if (!t.over)
		return 0;
	att_retry_text(t.retry_s, retry, sizeof(retry));
	err_set_at(e, ERR_LIMIT, code, "too many %s; try again %s", what, retry);
	return -1;
}

/* ---- clients ---- */

static int
client_from_row(PGresult *r, struct oauth_client *out, struct err *e)
{
	json_t *uris, *u;
	json_error_t je;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (db_get_str(r, 0, 0, out->id, sizeof(out->id), e) < 0 ||
	    db_get_str(r, 0, 1, out->name, sizeof(out->name), e) < 0 ||
	    db_get_str(r, 0, 2, out->uri, sizeof(out->uri), e) < 0)
		return -1;
	out->registered = strcmp(db_get_text(r, 0, 3), "registered") == 0;
	uris = json_loads(db_get_text(r, 0, 4), 0, &je);
	if (!json_is_array(uris)) {
		json_decref(uris);
		err_set(e, ERR_INTERNAL, "a client's redirect_uris are not an array");
		return -1;
	}
	json_array_foreach(uris, i, u)
		if (json_is_string(u) && out->n_redirects < OAUTH_REDIRECTS_MAX)
			snprintf(out->redirects[out->n_redirects++], OAUTH_URI_MAX + 1, "%s",
			    json_string_value(u));
	json_decref(uris);
	return 0;
}

/* The kept row of client_id; 0 found, 1 none (or, for a document, too
 * old to use), -1 error. */
static int
client_load(struct db *db, const char *client_id, struct oauth_client *out, struct err *e)
{
	char age[16];
	const char *p2[2] = { client_id, age };
	PGresult *r;
	int rc = 1;

	snprintf(age, sizeof(age), "%d", DOC_REFETCH_S);
	r = db_query(db,
	    "SELECT client_id, client_name, coalesce(client_uri, ''), kind, redirect_uris::text"
	    " FROM oauth_clients WHERE client_id = $1"
	    " AND (kind = 'registered' OR fetched_at > now() - make_interval(secs => $2::int))",
	    2, p2, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 1)
		rc = client_from_row(r, out, e) < 0 ? -1 : 0;
	PQclear(r);
	return rc;
}

static int
client_store(struct db *db, const struct oauth_client *cl, const char *kind, const char *by,
    struct err *e)
{
	json_t *uris = oauth_client_redirects_json(cl);
	char *text = uris ? json_dumps(uris, JSON_COMPACT) : NULL;
	const char *p[6] = { cl->id, kind, cl->name, cl->uri[0] ? cl->uri : NULL, text, by };
	int rc = -1;

	if (text == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	rc = db_exec(db,
	    "INSERT INTO oauth_clients(client_id, kind, client_name, client_uri, redirect_uris,"
	    " registered_by) VALUES ($1, $2, $3, $4, $5::jsonb, $6)"
	    " ON CONFLICT (client_id) DO UPDATE SET client_name = EXCLUDED.client_name,"
	    " client_uri = EXCLUDED.client_uri, redirect_uris = EXCLUDED.redirect_uris,"
	    " fetched_at = now() WHERE oauth_clients.kind = 'document'",
	    6, p, NULL, e);
out:
	free(text);
	json_decref(uris);
	return rc;
}

static int
client_fetch(struct db *db, const struct config *cfg, const char *client_id,
    struct oauth_client *out, struct err *e)
{
	struct fetch_opts o = { OAUTH_DOC_MAX, 5, cfg->oauth_local_documents };
	struct buf body;
	struct err fe;
	json_error_t je;
	json_t *doc = NULL;
	int rc = -1;

	buf_init(&body, OAUTH_DOC_MAX);
	err_clear(&fe);
	if (fetch_get(client_id, &o, &body, &fe) < 0) {
		err_set_at(e, ERR_INVALID, "invalid_client",
		    "the client's metadata document at its client_id URL is unusable: %s", fe.msg);
		goto out;
	}
	doc = json_loadb(body.data ? body.data : "", body.len, JSON_REJECT_DUPLICATES, &je);
	if (doc == NULL) {
		err_set_at(e, ERR_INVALID, "invalid_client",
		    "the client's metadata document is not JSON (line %d: %s)", je.line, je.text);
		goto out;
	}
	if (oauth_client_parse(client_id, doc, out, &fe) < 0) {
		err_set_at(e, ERR_INVALID, "invalid_client", "the client's metadata document: %s",
		    fe.msg);
		goto out;
	}
	/* Copies nobody connected with go after a day. */
	if (db_exec(db,
		"DELETE FROM oauth_clients c WHERE kind = 'document'"
		" AND fetched_at < now() - interval '1 day' AND NOT EXISTS"
		" (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.client_id)",
		0, NULL, NULL, e) < 0)
		goto out;
	rc = client_store(db, out, "document", NULL, e);
out:
	json_decref(doc);
	buf_free(&body);
	return rc;
}

int
oauth_client_find(struct db *db, const struct config *cfg, const char *client_id, const char *quota,
    struct oauth_client *out, struct err *e)
{
	int rc;

	if (client_id == NULL || *client_id == '\0' || strlen(client_id) > OAUTH_CLIENT_ID_MAX) {
		err_set_at(e, ERR_INVALID, "invalid_client", "client_id is missing or too long");
		return -1;
	}
	if (strncmp(client_id, REGISTERED_PREFIX, strlen(REGISTERED_PREFIX)) != 0 &&
	    !oauth_client_id_is_url(client_id, cfg->oauth_local_documents)) {
		err_set_at(e, ERR_INVALID, "invalid_client",
		    "client_id must be an https URL of a client metadata document, or an id this "
		    "service registered");
		return -1;
	}
	rc = client_load(db, client_id, out, e);
	if (rc <= 0) {
		if (rc == 0)
			return 0;
		return -1;
	}
	if (strncmp(client_id, REGISTERED_PREFIX, strlen(REGISTERED_PREFIX)) == 0) {
		err_set_at(e, ERR_INVALID, "invalid_client",
		    "no client is registered as client_id");
		return -1;
	}
	/* Each fetch is a request to a URL a stranger chose, on a worker: a
	 * quota (a client address, or an account) makes a bounded number an
	 * hour. */
	if (limit_take(db, "oauth_fetch", quota, DOCS_PER_HOUR, "temporarily_unavailable",
		"client documents fetched", e) < 0)
		return -1;
	return client_fetch(db, cfg, client_id, out, e);
}

int
oauth_client_register(struct db *db, const struct config *cfg, json_t *metadata, const char *addr,
    json_t **reply, struct err *e)
{
	struct oauth_client cl;
	char hex[33];
	json_t *r;

	*reply = NULL;
	if (oauth_client_parse(NULL, metadata, &cl, e) < 0 ||
	    limit_take(db, "oauth_register", addr, cfg->oauth_registrations_per_address,
		"invalid_client_metadata", "clients registered from this address", e) < 0)
		return -1;
	if (key_random_hex(hex, sizeof(hex), 16) < 0) {
		err_set(e, ERR_INTERNAL, "no randomness");
		return -1;
	}
	snprintf(cl.id, sizeof(cl.id), REGISTERED_PREFIX "%s", hex);
	cl.registered = 1;
	/* Registrations never used for a day go: strangers may register. */
	if (db_exec(db,
		"DELETE FROM oauth_clients c WHERE kind = 'registered'"
		" AND created_at < now() - interval '1 day' AND NOT EXISTS"
		" (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.client_id)",
		0, NULL, NULL, e) < 0 ||
	    client_store(db, &cl, "registered", addr, e) < 0)
		return -1;
	r = json_pack("{s:s, s:I, s:s, s:o, s:[ss], s:[s], s:s}", "client_id", cl.id,
	    "client_id_issued_at", (json_int_t)time(NULL), "client_name", cl.name, "redirect_uris",
	    oauth_client_redirects_json(&cl), "grant_types", "authorization_code", "refresh_token",
	    "response_types", "code", "token_endpoint_auth_method", "none");
	if (r && cl.uri[0])
		json_object_set_new(r, "client_uri", json_string(cl.uri));
	if (r == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	*reply = r;
	return 0;
}

/* ---- codes ---- */

struct code_tx {
	const struct config *cfg;
	const struct oauth_code_req *r;
	const char *hash;
};

static int
account_lock(PGconn *c, const char *account_id, struct err *e)
{
	char subj[ATT_SUBJECT_MAX + 1];

	if (att_subject(subj, sizeof(subj), "oauth", account_id) < 0) {
		err_set(e, ERR_INTERNAL, "account id too long");
		return -1;
	}
	return att_lock(c, subj, e);
}

/* How many live grants the account has for clients other than client_id. */
static int
grants_other(PGconn *c, const char *account_id, const char *client_id, long long *n, struct err *e)
{
	const char *p[2] = { account_id, client_id };
	PGresult *r = db_conn_query(c,
	    "SELECT count(*) FROM oauth_grants WHERE account_id = $1 AND client_id <> $2"
	    " AND revoked_at IS NULL",
	    2, p, e);
	int rc;

	if (r == NULL)
		return -1;
	rc = db_get_ll(r, 0, 0, n, e);
	PQclear(r);
	return rc;
}

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

	snprintf(ttl, sizeof(ttl), "%d", t->cfg->oauth_code_ttl_s);
	if (account_lock(c, r->account_id, e) < 0 ||
	    grants_other(c, r->account_id, r->client->id, &n, e) < 0)
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

/* ---- tokens ---- */

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
	snprintf(ttl, sizeof(ttl), "%d", ttl_s);
	return db_conn_exec(c,
	    "INSERT INTO oauth_tokens(token_hash, grant_id, kind, resource, expires_at)"
	    " VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::int))",
	    5, p, NULL, e);
}

/* A new access and refresh token under the grant; the grant's expired
 * tokens go. */
static int
tokens_issue(PGconn *c, const struct config *cfg, const char *grant_id, const char *resource,
    const char *scope, struct oauth_tokens *out, struct err *e)
{
	char access_kept[16], used_kept[16];
	const char *p[3] = { grant_id, access_kept, used_kept };

	snprintf(access_kept, sizeof(access_kept), "%d", ACCESS_KEPT - 1);
	snprintf(used_kept, sizeof(used_kept), "%d", USED_REFRESH_KEPT);
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
	snprintf(out->scope, sizeof(out->scope), "%s", scope);
	return 0;
}

static int
grant_revoke_in(PGconn *c, const char *grant_id, const char *reason, struct err *e)
{
	const char *p[2] = { grant_id, reason };

	return db_conn_exec(c,
	    "UPDATE oauth_grants SET revoked_at = now(), revoke_reason = $2"
	    " WHERE id = $1 AND revoked_at IS NULL",
	    2, p, NULL, e);
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

static int
redeem_tx(PGconn *c, void *arg, struct err *e)
{
	struct redeem_tx *t = arg;
	char account[ACCT_ID_LEN + 1], grant[64], resource[601], scope[OAUTH_SCOPE_MAX + 1];
	const char *used_grant;
	int expired, used;
	PGresult *r;

	t->replay = 0;
	err_clear(&t->why);
	r = db_conn_query(c,
	    "SELECT account_id, client_id, client_name, redirect_uri, code_challenge, resource,"
	    " scope, expires_at < now(), used_at IS NOT NULL, grant_id"
	    " FROM oauth_codes WHERE code_hash = $1 FOR UPDATE",
	    1, &t->hash, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		PQclear(r);
		err_set_at(e, ERR_INVALID, "invalid_grant",
		    "unknown or expired authorization code");
		return -1;
	}
	if (db_get_bool(r, 0, 7, &expired, e) < 0 || db_get_bool(r, 0, 8, &used, e) < 0 ||
	    db_get_str(r, 0, 0, account, sizeof(account), e) < 0 ||
	    db_get_str(r, 0, 5, resource, sizeof(resource), e) < 0 ||
	    db_get_str(r, 0, 6, scope, sizeof(scope), e) < 0) {
		PQclear(r);
		return -1;
	}
	if (used) {
		used_grant = db_get_text(r, 0, 9);
		t->replay = 1;
		snprintf(grant, sizeof(grant), "%s", used_grant ? used_grant : "");
		PQclear(r);
		/* Someone else may hold the code: what it gave is taken back. */
		return grant[0] ? grant_revoke_in(c, grant, "code_reuse", e) : 0;
	}
	if (expired || strcmp(db_get_text(r, 0, 1), t->client_id) != 0 ||
	    strcmp(db_get_text(r, 0, 3), t->redirect_uri) != 0 ||
	    !oauth_pkce_ok(t->verifier, db_get_text(r, 0, 4))) {
		const char *why = expired ?
		    "the authorization code has expired" :
		    strcmp(db_get_text(r, 0, 1), t->client_id) != 0 ?
		    "the authorization code was issued to another client" :
		    strcmp(db_get_text(r, 0, 3), t->redirect_uri) != 0 ?
		    "redirect_uri is not the one of the authorization request" :
		    "code_verifier does not match the code_challenge";

		PQclear(r);
		/* A wrong try spends the code: it cannot be guessed at. */
		if (db_conn_exec(c, "UPDATE oauth_codes SET used_at = now() WHERE code_hash = $1",
			1, &t->hash, NULL, e) < 0)
			return -1;
		t->replay = -1;
		err_set_at(&t->why, ERR_INVALID, "invalid_grant", "%s", why);
		return 0;
	}
	if (t->resource[0] && strcmp(t->resource, resource) != 0) {
		PQclear(r);
		err_set_at(e, ERR_INVALID, "invalid_target",
		    "resource is not the one of the authorization request");
		return -1;
	}
	{
		const char *p[5] = { account, t->client_id, db_get_text(r, 0, 2), resource, scope };
		long n_live = 0;
		long long others = 0;
		PGresult *g;

		/* The account row before any grant (as disabling takes them),
		 * and a disabled account gets nothing. */
		if (db_conn_exec(c,
			"SELECT 1 FROM accounts WHERE id = $1 AND disabled_at IS NULL FOR KEY SHARE",
			1, p, &n_live, e) < 0) {
			PQclear(r);
			return -1;
		}
		if (n_live != 1) {
			PQclear(r);
			err_set_at(e, ERR_INVALID, "invalid_grant", "the account is disabled");
			return -1;
		}
		if (account_lock(c, account, e) < 0 ||
		    grants_other(c, account, t->client_id, &others, e) < 0) {
			PQclear(r);
			return -1;
		}
		if (others >= t->cfg->oauth_grants_per_account) {
			PQclear(r);
			err_set_at(e, ERR_INVALID, "invalid_grant",
			    "the account has as many connected applications as it may");
			return -1;
		}
		if (db_conn_exec(c,
			"UPDATE oauth_grants SET revoked_at = now(), revoke_reason = 'user'"
			" WHERE account_id = $1 AND client_id = $2 AND revoked_at IS NULL",
			2, p, NULL, e) < 0) {
			PQclear(r);
			return -1;
		}
		/* One grant per account and client: a new consent replaces the old. */
		g = db_conn_query(c,
		    "INSERT INTO oauth_grants(account_id, client_id, client_name, resource, scope)"
		    " VALUES ($1, $2, $3, $4, $5) RETURNING id",
		    5, p, e);
		PQclear(r);
		if (g == NULL || db_get_str(g, 0, 0, grant, sizeof(grant), e) < 0) {
			PQclear(g);
			return -1;
		}
		PQclear(g);
	}
	{
		const char *p[2] = { t->hash, grant };

		if (db_conn_exec(c,
			"UPDATE oauth_codes SET used_at = now(), grant_id = $2 WHERE code_hash = $1",
			2, p, NULL, e) < 0)
			return -1;
	}
	return tokens_issue(c, t->cfg, grant, resource, scope, t->out, e);
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
	char grant[64], resource[601], scope[OAUTH_SCOPE_MAX + 1];
	int expired, used, live;
	PGresult *r;

	t->replay = 0;
	r = db_conn_query(c,
	    "SELECT t.grant_id, g.client_id, g.resource, g.scope, t.expires_at < now(),"
	    " t.used_at IS NOT NULL, g.revoked_at IS NULL AND a.disabled_at IS NULL"
	    " FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id"
	    " JOIN accounts a ON a.id = g.account_id"
	    " WHERE t.token_hash = $1 AND t.kind = 'refresh' FOR UPDATE OF t",
	    1, &t->hash, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1 || db_get_str(r, 0, 0, grant, sizeof(grant), e) < 0 ||
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
		return grant_revoke_in(c, grant, "refresh_reuse", e);
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
	return tokens_issue(c, t->cfg, grant, resource, scope, t->out, e);
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
	char grant[64];
	int refresh;
	PGresult *r;

	/* The token row first, then its grant: the order refreshing takes. */
	r = db_conn_query(c,
	    "SELECT t.grant_id, t.kind = 'refresh' FROM oauth_tokens t"
	    " JOIN oauth_grants g ON g.id = t.grant_id"
	    " WHERE t.token_hash = $1 AND ($2 = '' OR g.client_id = $2) FOR UPDATE OF t",
	    2, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		PQclear(r);
		return 0;
	}
	if (db_get_str(r, 0, 0, grant, sizeof(grant), e) < 0 ||
	    db_get_bool(r, 0, 1, &refresh, e) < 0) {
		PQclear(r);
		return -1;
	}
	PQclear(r);
	/* A refresh token ends its grant; an access token only itself. */
	if (refresh && grant_revoke_in(c, grant, "user", e) < 0)
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
	r = db_query(db,
	    "WITH t AS (SELECT g.id, g.account_id, t.resource, t.expires_at > now() AS live"
	    "  FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id"
	    "  JOIN accounts a ON a.id = g.account_id"
	    "  WHERE t.token_hash = $1 AND t.kind = 'access' AND g.revoked_at IS NULL"
	    "  AND a.disabled_at IS NULL),"
	    " u AS (UPDATE oauth_grants SET last_used_at = now() WHERE id IN"
	    "  (SELECT id FROM t WHERE live) AND (last_used_at IS NULL"
	    "  OR last_used_at < now() - interval '60 seconds'))"
	    " SELECT account_id, resource, live FROM t",
	    1, p, e);
	OPENSSL_cleanse(hash, sizeof(hash));
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		err_set(e, ERR_UNAUTHORIZED, "invalid or revoked access token");
	} else if (db_get_bool(r, 0, 2, &live, e) < 0) {
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
	int rc = -1;

	key_hash_hex(token, len, hash, sizeof(hash));
	r = db_query(db,
	    "SELECT grant_id::text FROM oauth_tokens WHERE token_hash = $1 AND kind = 'access'", 1,
	    p, e);
	OPENSSL_cleanse(hash, sizeof(hash));
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		err_set(e, ERR_UNAUTHORIZED, "invalid access token");
	else
		rc = db_get_str(r, 0, 0, grant_id, 37, e);
	PQclear(r);
	return rc;
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
