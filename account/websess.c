/* websess.c - dashboard sessions in PostgreSQL (wsess_). */
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "account/websess.h"

int
wsess_create(struct db *db, const struct config *cfg, const char *account,
    char id[WSESS_ID_LEN + 1], struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1], csrf[WSESS_CSRF_LEN + 1], keep[16];
	const char *p[3] = { hash, account, csrf };
	const char *pk[2] = { account, keep };

	if (key_random_hex(id, WSESS_ID_LEN + 1, WSESS_ID_LEN / 2) < 0 ||
	    key_random_hex(csrf, sizeof(csrf), WSESS_CSRF_LEN / 2) < 0) {
		err_set(e, ERR_INTERNAL, "no randomness");
		return -1;
	}
	key_hash_hex(id, WSESS_ID_LEN, hash, sizeof(hash));
	if (fmt_err(e, "count", keep, sizeof(keep), "%d", cfg->web_sessions_per_account) < 0 ||
	    db_exec(db, "INSERT INTO web_sessions(id_hash, account_id, csrf) VALUES ($1, $2, $3)",
		3, p, NULL, e) < 0)
		return -1;
	return db_exec(db,
	    "UPDATE web_sessions SET ended_at = now() WHERE ended_at IS NULL AND account_id = $1 "
	    "AND id_hash NOT IN (SELECT id_hash FROM web_sessions WHERE ended_at IS NULL "
	    "  AND account_id = $1 ORDER BY created_at DESC LIMIT $2::int)",
	    2, pk, NULL, e);
}

static int
id_ok(const char *id)
{
	if (strlen(id) != WSESS_ID_LEN)
		return 0;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

int
wsess_resolve(struct db *db, const struct config *cfg, const char *id, struct wsess *out,
    struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1], idle[16], abs[16];
	const char *p[3] = { hash, idle, abs };
	const struct db_col cols[] = { DB_STR(out->account_id, sizeof(out->account_id)),
		DB_STR(out->csrf, sizeof(out->csrf)), DB_STR(out->email, sizeof(out->email)),
		DB_BOOL(&out->verified), DB_LL(&out->balance) };
	PGresult *r;

	memset(out, 0, sizeof(*out));
	if (!id_ok(id)) {
		err_set(e, ERR_UNAUTHORIZED, "not logged in");
		return -1;
	}
	key_hash_hex(id, WSESS_ID_LEN, hash, sizeof(hash));
	if (fmt_err(e, "idle time", idle, sizeof(idle), "%d", cfg->web_idle_s) < 0 ||
	    fmt_err(e, "session lifetime", abs, sizeof(abs), "%d", cfg->web_absolute_s) < 0)
		return -1;
	/* Marks it used only when the mark is a minute old: most requests
	 * then read and write nothing else. */
	r = db_query_row(db,
	    "WITH s AS (SELECT w.id_hash, w.account_id, w.csrf, w.last_seen_at FROM web_sessions w "
	    "  JOIN accounts a ON a.id = w.account_id "
	    "  WHERE w.id_hash = $1 AND w.ended_at IS NULL AND a.disabled_at IS NULL "
	    "  AND w.last_seen_at > now() - make_interval(secs => $2::int) "
	    "  AND w.created_at > now() - make_interval(secs => $3::int)), "
	    "u AS (UPDATE web_sessions SET last_seen_at = now() WHERE id_hash = "
	    "  (SELECT id_hash FROM s WHERE last_seen_at < now() - interval '1 minute')) "
	    "SELECT s.account_id, s.csrf, a.email, a.email_verified_at IS NOT NULL, a.balance "
	    "FROM s JOIN accounts a ON a.id = s.account_id",
	    3, p, e, ERR_UNAUTHORIZED, NULL, "not logged in, or the session ended");
	return db_take_row(r, cols, DB_NCOLS(cols), e);
}

int
wsess_end(struct db *db, const char *id, struct err *e)
{
	char hash[KEY_HASH_HEX_LEN + 1];
	const char *p[1] = { hash };

	if (!id_ok(id))
		return 0;
	key_hash_hex(id, WSESS_ID_LEN, hash, sizeof(hash));
	return db_exec(db,
	    "UPDATE web_sessions SET ended_at = now() WHERE id_hash = $1 AND ended_at IS NULL", 1,
	    p, NULL, e);
}

int
wsess_end_account(PGconn *c, const char *account, struct err *e)
{
	const char *p[1] = { account };

	return db_conn_exec(c,
	    "UPDATE web_sessions SET ended_at = now() WHERE account_id = $1 AND ended_at IS NULL",
	    1, p, NULL, e);
}

int
wsess_csrf_ok(const struct wsess *s, const char *token)
{
	unsigned char diff = 0;

	if (token == NULL || strlen(token) != WSESS_CSRF_LEN || s->csrf[0] == '\0')
		return 0;
	for (size_t i = 0; i < WSESS_CSRF_LEN; i++)
		diff |= (unsigned char)(token[i] ^ s->csrf[i]);
	return diff == 0;
}
