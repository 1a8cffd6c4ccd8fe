/* accounts.c - account and key storage. Only SHA-256 hashes of keys
 * reach the database; key text is never logged. */
#include "account/accounts.h"
#include "account/websess.h"

#include <ctype.h>
#include <string.h>

#include <openssl/crypto.h>

#include "billing/ledger.h"
#include "base/fmt.h"
#include "base/log.h"
#include "account/session.h"

int
acct_id_valid(const char *s)
{
	static const int dash_at[] = { 8, 13, 18, 23 };
	size_t d = 0;

	if (s == NULL || strlen(s) != ACCT_ID_LEN)
		return 0;
	for (size_t i = 0; i < ACCT_ID_LEN; i++) {
		if (d < 4 && (int)i == dash_at[d]) {
			if (s[i] != '-')
				return 0;
			d++;
		} else if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) {
			return 0;
		}
	}
	return 1;
}

static int
insert_key(PGconn *c, const char *account_id, const char *name, struct acct_new_key *key,
    struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	const char *params[4];
	PGresult *r;
	int rc;

	if (key_generate(key->key, sizeof(key->key)) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	key_hash_hex(key->key, strlen(key->key), hash, sizeof(hash));
	memcpy(key->prefix, key->key, KEY_DISPLAY_PREFIX_LEN);
	key->prefix[KEY_DISPLAY_PREFIX_LEN] = '\0';
	params[0] = account_id;
	params[1] = hash;
	params[2] = key->prefix;
	params[3] = name ? name : "";
	r = db_conn_query(c,
	    "INSERT INTO api_keys(account_id, key_hash, prefix, name)"
	    " VALUES ($1, $2, $3, $4) RETURNING id",
	    4, params, e);
	OPENSSL_cleanse(hash, sizeof(hash));
	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, key->key_id, sizeof(key->key_id), e);
	PQclear(r);
	return rc;
}

struct create_ctx {
	const char *email;
	long long free_credit;
	const char *key_name;
	char *account_id;
	struct acct_new_key *key;
};

static int
create_tx(PGconn *c, void *arg, struct err *e)
{
	struct create_ctx *cx = arg;
	const char *params[1] = { cx->email };
	PGresult *r;
	int rc;

	r = db_conn_query(c,
	    "INSERT INTO accounts(email, email_verified_at) VALUES ($1, now()) RETURNING id", 1,
	    params, e);
	if (r == NULL) {
		if (e->kind == ERR_CONFLICT)
			fmt_cut(e->msg, sizeof(e->msg), "an account with that e-mail exists");
		return -1;
	}
	rc = db_get_str(r, 0, 0, cx->account_id, ACCT_ID_LEN + 1, e);
	PQclear(r);
	if (rc < 0)
		return -1;
	if (cx->free_credit > 0) {
		char key[64];
		int posted;
		if (fmt_err(e, "ledger key", key, sizeof(key), "grant:signup:%s", cx->account_id) <
			0 ||
		    bill_post(c, cx->account_id, NULL, "grant", cx->free_credit, -1,
			"free credit for new accounts", key, NULL, &posted, e) < 0)
			return -1;
	}
	return insert_key(c, cx->account_id, cx->key_name, cx->key, e);
}

static int
email_valid(const char *email)
{
	const char *at = strchr(email, '@');
	size_t len = strlen(email);

	if (len < 3 || len > 254 || at == NULL || at == email || at[1] == '\0')
		return 0;
	for (const char *p = email; *p; p++)
		if (!isgraph((unsigned char)*p))
			return 0;
	return 1;
}

int
acct_create(struct db *db, const char *email, long long free_credit,
    char account_id[ACCT_ID_LEN + 1], struct acct_new_key *key, struct err *e)
{
	struct create_ctx cx = { email, free_credit, "default", account_id, key };

	if (!email_valid(email)) {
		err_set_field(e, "email", "email: not a valid e-mail address");
		return -1;
	}
	return db_tx(db, create_tx, &cx, e);
}

int
acct_find_by_email(struct db *db, const char *email, char account_id[ACCT_ID_LEN + 1],
    struct err *e)
{
	const char *params[1] = { email };
	PGresult *r = db_query_row(db, "SELECT id FROM accounts WHERE email = $1", 1, params, e,
	    ERR_NOT_FOUND, NULL, "no account with that e-mail");
	int rc;

	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, account_id, ACCT_ID_LEN + 1, e);
	PQclear(r);
	return rc;
}

/* Rows of text columns into an array of objects keyed by column name;
 * NULL columns become JSON null. */
static json_t *
rows_to_json(PGresult *r)
{
	json_t *arr = json_array();

	for (int i = 0; arr && i < PQntuples(r); i++) {
		json_t *o = json_object();
		for (int j = 0; o && j < PQnfields(r); j++) {
			const char *v = db_get_text(r, i, j);
			json_object_set_new(o, PQfname(r, j), v ? json_string(v) : json_null());
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

json_t *
acct_list(struct db *db, struct err *e)
{
	PGresult *r = db_query(db,
	    "SELECT id, email, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS created_at,"
	    " (disabled_at IS NOT NULL)::text AS disabled FROM accounts ORDER BY created_at",
	    0, NULL, e);
	json_t *out;

	if (r == NULL)
		return NULL;
	out = rows_to_json(r);
	PQclear(r);
	return out;
}

struct keycreate_ctx {
	const char *account_id;
	const char *name;
	struct acct_new_key *key;
};

static int
keycreate_tx(PGconn *c, void *arg, struct err *e)
{
	struct keycreate_ctx *kc = arg;
	const char *params[1] = { kc->account_id };
	long found;

	if (db_conn_exec(c, "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", 1, params, &found,
		e) < 0)
		return -1;
	if (found != 1) {
		err_set(e, ERR_NOT_FOUND, "account not found");
		return -1;
	}
	/* Counted under the account's lock: two creates cannot both pass. */
	if (db_conn_exec(c, "SELECT 1 FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL",
		1, params, &found, e) < 0)
		return -1;
	if (found >= ACCT_MAX_LIVE_KEYS) {
		err_set_at(e, ERR_LIMIT, "name",
		    "An account has at most %d live keys; revoke one first.", ACCT_MAX_LIVE_KEYS);
		return -1;
	}
	return insert_key(c, kc->account_id, kc->name, kc->key, e);
}

int
acct_key_create(struct db *db, const char *account_id, const char *name, struct acct_new_key *key,
    struct err *e)
{
	struct keycreate_ctx kc = { account_id, name, key };

	if (!acct_id_valid(account_id)) {
		err_set_field(e, "account", "account: not an account id");
		return -1;
	}
	if (name && strlen(name) > 100) {
		err_set_field(e, "name", "name: at most 100 characters");
		return -1;
	}
	return db_tx(db, keycreate_tx, &kc, e);
}

json_t *
acct_key_list(struct db *db, const char *account_id, struct err *e)
{
	const char *params[1] = { account_id };
	PGresult *r;
	json_t *out;

	if (!acct_id_valid(account_id)) {
		err_set_field(e, "account", "account: not an account id");
		return NULL;
	}
	r = db_query(db,
	    "SELECT id, prefix, name,"
	    " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS created_at,"
	    " to_char(last_used_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS last_used_at,"
	    " to_char(revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS revoked_at"
	    " FROM api_keys WHERE account_id = $1 ORDER BY created_at",
	    1, params, e);
	if (r == NULL)
		return NULL;
	out = rows_to_json(r);
	PQclear(r);
	return out;
}

int
acct_key_revoke(struct db *db, const char *key_id, struct err *e)
{
	return acct_key_revoke_owned(db, NULL, key_id, e);
}

int
acct_key_revoke_owned(struct db *db, const char *account_id, const char *key_id, struct err *e)
{
	const char *params[2] = { key_id, account_id };
	long n;

	if (!acct_id_valid(key_id)) {
		err_set_field(e, "key", "key: not a key id");
		return -1;
	}
	if (db_exec(db,
		"WITH u AS (UPDATE api_keys SET revoked_at = now()"
		" WHERE id = $1 AND ($2::uuid IS NULL OR account_id = $2::uuid)"
		" AND revoked_at IS NULL RETURNING key_hash)"
		" SELECT pg_notify('aas_invalidate', 'k:' || key_hash) FROM u",
		2, params, &n, e) < 0)
		return -1;
	if (n != 1) {
		err_set(e, ERR_NOT_FOUND, "no live key with that id");
		return -1;
	}
	return 0;
}

struct disable_ctx {
	const char *account_id;
	struct acct_disabled *out;
};

static int
disable_tx(PGconn *c, void *arg, struct err *e)
{
	struct disable_ctx *dc = arg;
	const char *params[1] = { dc->account_id };
	PGresult *r;
	int rc;

	/* The account row first, as on every money path. */
	r = db_conn_query_row(c,
	    "SELECT disabled_at IS NOT NULL FROM accounts WHERE id = $1 FOR UPDATE", 1, params, e,
	    ERR_NOT_FOUND, NULL, "account not found");
	if (r == NULL)
		return -1;
	rc = db_get_bool(r, 0, 0, &dc->out->already, e);
	PQclear(r);
	if (rc < 0)
		return -1;
	/* Notifications go out in this order when the transaction commits:
	 * keys, sessions, then the account (whose handler stops sandboxes). */
	if (db_conn_exec(c,
		"UPDATE accounts SET disabled_at = coalesce(disabled_at, now()) WHERE id = $1", 1,
		params, NULL, e) < 0 ||
	    db_conn_exec(c,
		"WITH u AS (UPDATE api_keys SET revoked_at = now()"
		" WHERE account_id = $1 AND revoked_at IS NULL RETURNING key_hash)"
		" SELECT pg_notify('aas_invalidate', 'k:' || key_hash) FROM u",
		1, params, &dc->out->keys_revoked, e) < 0 ||
	    /* OAuth grants end too (their tokens are checked against the
	     * account anyway; this takes them off Connected apps for good). */
	    db_conn_exec(c,
		"UPDATE oauth_grants SET revoked_at = now(), revoke_reason = 'account'"
		" WHERE account_id = $1 AND revoked_at IS NULL",
		1, params, NULL, e) < 0 ||
	    sess_end_account(c, dc->account_id, &dc->out->sessions_ended, e) < 0 ||
	    wsess_end_account(c, dc->account_id, e) < 0)
		return -1;
	return db_conn_exec(c, "SELECT pg_notify('aas_invalidate', 'a:' || $1::text)", 1, params,
	    NULL, e);
}

int
acct_disable(struct db *db, const char *account_id, struct acct_disabled *out, struct err *e)
{
	struct disable_ctx dc = { account_id, out };

	memset(out, 0, sizeof(*out));
	if (!acct_id_valid(account_id)) {
		err_set_field(e, "account", "account: not an account id");
		return -1;
	}
	return db_tx(db, disable_tx, &dc, e);
}

int
acct_disable_in(PGconn *c, const char *account_id, struct acct_disabled *out, struct err *e)
{
	struct disable_ctx dc = { account_id, out };

	memset(out, 0, sizeof(*out));
	return disable_tx(c, &dc, e);
}

int
acct_enable(struct db *db, const char *account_id, struct err *e)
{
	const char *params[1] = { account_id };
	long n;

	if (!acct_id_valid(account_id)) {
		err_set_field(e, "account", "account: not an account id");
		return -1;
	}
	/* A deleted account stays disabled: its owner's data is gone. */
	if (db_exec(db,
		"UPDATE accounts SET disabled_at = NULL WHERE id = $1 AND deleted_at IS NULL", 1,
		params, &n, e) < 0)
		return -1;
	if (n != 1) {
		err_set(e, ERR_NOT_FOUND, "no such account, or it was deleted");
		return -1;
	}
	return 0;
}

int
acct_check_enabled(PGconn *c, const char *account_id, struct err *e)
{
	const char *params[1] = { account_id };
	long n;

	if (db_conn_exec(c, "SELECT 1 FROM accounts WHERE id = $1 AND disabled_at IS NOT NULL", 1,
		params, &n, e) < 0)
		return -1;
	if (n != 0) {
		err_set(e, ERR_FORBIDDEN, "the account is disabled");
		return -1;
	}
	return 0;
}

int
acct_resolve_key(struct db *db, const char *key, size_t keylen, char account_id[ACCT_ID_LEN + 1],
    struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	const char *params[1] = { hash };
	const char *stored;
	PGresult *r;
	int rc;

	if (!key_well_formed(key, keylen)) {
		err_set(e, ERR_UNAUTHORIZED, "invalid API key");
		return -1;
	}
	key_hash_hex(key, keylen, hash, sizeof(hash));
	/* last_used_at is refreshed at most once a minute per key. */
	r = db_query(db,
	    "WITH k AS (SELECT k.id, k.account_id, k.key_hash FROM api_keys k"
	    "  JOIN accounts a ON a.id = k.account_id"
	    "  WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND a.disabled_at IS NULL),"
	    " u AS (UPDATE api_keys SET last_used_at = now() WHERE id IN (SELECT id FROM k)"
	    "  AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds'))"
	    " SELECT account_id, key_hash FROM k",
	    1, params, e);
	if (r == NULL) {
		OPENSSL_cleanse(hash, sizeof(hash));
		return -1;
	}
	stored = PQntuples(r) == 1 ? db_get_text(r, 0, 1) : NULL;
	if (stored == NULL || !key_hash_equal(stored, hash)) {
		err_set(e, ERR_UNAUTHORIZED, "invalid API key");
		rc = -1;
	} else {
		rc = db_get_str(r, 0, 0, account_id, ACCT_ID_LEN + 1, e);
	}
	PQclear(r);
	OPENSSL_cleanse(hash, sizeof(hash));
	return rc;
}

int
acct_key_cache_peek(struct ttl_map *cache, const char *key, size_t keylen,
    char account_id[ACCT_ID_LEN + 1])
{
	char hash[KEY_HASH_HEX_LEN + 1];
	int hit;

	if (cache == NULL || !key_well_formed(key, keylen))
		return 0;
	key_hash_hex(key, keylen, hash, sizeof(hash));
	hit = ttl_get(cache, hash, account_id, ACCT_ID_LEN + 1);
	OPENSSL_cleanse(hash, sizeof(hash));
	return hit;
}

static int
same_account(const char *val, void *ctx)
{
	return strcmp(val, ctx) == 0;
}

void
acct_key_cache_forget_account(struct ttl_map *cache, const char *account_id)
{
	if (cache != NULL)
		ttl_del_matching(cache, same_account, (void *)account_id);
}

int
acct_resolve_key_cached(struct db *db, struct ttl_map *cache, const char *key, size_t keylen,
    char account_id[ACCT_ID_LEN + 1], struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	unsigned long long gen = 0;

	if (acct_key_cache_peek(cache, key, keylen, account_id))
		return 0;
	/* Read before the database: a revocation announced while the query
	 * runs moves the generation on, and the answer is then not kept. */
	if (cache)
		gen = ttl_generation(cache);
	if (acct_resolve_key(db, key, keylen, account_id, e) < 0)
		return -1;
	if (cache) {
		key_hash_hex(key, keylen, hash, sizeof(hash));
		(void)ttl_put_gen(cache, hash, account_id, gen);
		OPENSSL_cleanse(hash, sizeof(hash));
	}
	return 0;
}
