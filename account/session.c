/* session.c - MCP session rows. */
#include "account/session.h"

#include <ctype.h>
#include <string.h>

#include "base/fmt.h"
#include "base/keys.h"

int
sess_id_valid(const char *id)
{
	if (id == NULL || strlen(id) != SESS_ID_LEN)
		return 0;
	for (const char *p = id; *p; p++)
		if (!isxdigit((unsigned char)*p) || isupper((unsigned char)*p))
			return 0;
	return 1;
}

void
sess_limits_from(const struct config *cfg, struct sess_limits *out)
{
	out->idle_s = cfg->session_idle_s;
	out->anon_idle_s = cfg->anon_session_idle_s;
	out->max_anon = cfg->max_anon_sessions;
	out->max_per_account = cfg->max_sessions_per_account;
}

/* What a statement ending or taking sessions (their ids in u) ends with:
 * every aasd drops them from its cache on the notification. */
#define SESS_NOTIFY " SELECT pg_notify('aas_invalidate', 's:' || id) FROM u"

/* ERR_NOT_FOUND for a session id that names no live session; -1, for the
 * caller to return. */
static int
no_session(struct err *e)
{
	err_set(e, ERR_NOT_FOUND, "session not found");
	return -1;
}

struct create_tx {
	const struct sess_limits *lim;
	const char *const *params; /* id, version, account, name, client version, credential */
};

/* Anonymous sessions: the expired and the least recently used beyond the
 * cap go, so a loop of anonymous initializes cannot grow the table. */
static int
trim_anonymous(PGconn *c, const struct sess_limits *lim, struct err *e)
{
	char idle[16], cap[16];
	const char *p[2] = { idle, cap };

	if (fmt_err(e, "idle time", idle, sizeof(idle), "%d", lim->anon_idle_s) < 0 ||
	    fmt_err(e, "count", cap, sizeof(cap), "%d", lim->max_anon > 0 ? lim->max_anon - 1 : 0) <
		0)
		return -1;
	return db_conn_exec(c,
	    "DELETE FROM mcp_sessions WHERE id IN ("
	    " (SELECT id FROM mcp_sessions WHERE account_id IS NULL AND (ended_at IS NOT NULL"
	    "   OR last_seen_at < now() - make_interval(secs => $1::int)) LIMIT 1000)"
	    " UNION ALL"
	    " (SELECT id FROM mcp_sessions WHERE account_id IS NULL"
	    "   ORDER BY last_seen_at DESC OFFSET $2::int LIMIT 1000))",
	    2, p, NULL, e);
}

/* An account's sessions: the ended and expired go; the open ones count. */
static int
check_account(PGconn *c, const struct sess_limits *lim, const char *account, struct err *e)
{
	char idle[16];
	const char *p[2] = { account, idle };
	long long open_n;
	PGresult *r;
	int rc;

	if (fmt_err(e, "idle time", idle, sizeof(idle), "%d", lim->idle_s) < 0)
		return -1;
	/* The account row first, as on every path that counts per account. */
	r = db_conn_query(c, "SELECT id FROM accounts WHERE id = $1 FOR UPDATE", 1, p, e);
	if (r == NULL)
		return -1;
	PQclear(r);
	if (db_conn_exec(c,
		"DELETE FROM mcp_sessions WHERE account_id = $1 AND (ended_at IS NOT NULL"
		" OR last_seen_at < now() - make_interval(secs => $2::int))",
		2, p, NULL, e) < 0)
		return -1;
	rc = db_take_ll(db_conn_query(c, "SELECT count(*) FROM mcp_sessions WHERE account_id = $1",
			    1, p, e),
	    &open_n, e);
	if (rc == 0 && open_n >= lim->max_per_account) {
		err_set(e, ERR_LIMIT,
		    "this account has %lld open MCP sessions, the most allowed "
		    "(AAS_MAX_SESSIONS_PER_ACCOUNT=%d); end unused ones with DELETE /v1/mcp "
		    "or let them idle out",
		    open_n, lim->max_per_account);
		rc = -1;
	}
	return rc;
}

static int
create_fn(PGconn *c, void *arg, struct err *e)
{
	struct create_tx *t = arg;
	const char *account = t->params[2];

	if (account == NULL ? trim_anonymous(c, t->lim, e) < 0 :
			      check_account(c, t->lim, account, e) < 0)
		return -1;
	return db_conn_exec(c,
	    "INSERT INTO mcp_sessions(id, protocol_version, account_id,"
	    " client_name, client_version, credential) VALUES ($1, $2, $3, $4, $5, $6)",
	    6, t->params, NULL, e);
}

int
sess_create(struct db *db, const struct sess_limits *lim, const char *protocol_version,
    const char *account_id, const char *credential, const char *client_name,
    const char *client_version, char id[SESS_ID_LEN + 1], struct err *e)
{
	char name[201], version[101];
	const char *params[6];
	struct create_tx t = { lim, params };

	if (key_random_hex(id, SESS_ID_LEN + 1, SESS_ID_LEN / 2) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	/* Client-supplied labels are informational: clip, never refuse. */
	fmt_cut(name, sizeof(name), "%s", client_name ? client_name : "");
	fmt_cut(version, sizeof(version), "%s", client_version ? client_version : "");
	params[0] = id;
	params[1] = protocol_version;
	params[2] = account_id && *account_id ? account_id : NULL;
	params[3] = name;
	params[4] = version;
	params[5] = params[2] && credential && *credential ? credential : NULL;
	return db_tx(db, create_fn, &t, e);
}

static int
adopt_fn(PGconn *c, void *arg, struct err *e)
{
	struct create_tx *t = arg;
	long n = 0;

	/* The account row first (check_account), then the session's. */
	if (check_account(c, t->lim, t->params[1], e) < 0 ||
	    db_conn_exec(c,
		"WITH u AS (UPDATE mcp_sessions SET account_id = $2, credential = $3"
		" WHERE id = $1 AND account_id IS NULL AND ended_at IS NULL RETURNING id)" SESS_NOTIFY,
		3, t->params, &n, e) < 0)
		return -1;
	return n == 1 ? 0 : no_session(e);
}

int
sess_adopt(struct db *db, const struct sess_limits *lim, const char *id, const char *account_id,
    const char *credential, struct err *e)
{
	const char *params[3] = { id, account_id, credential };
	struct create_tx t = { lim, params };

	if (!sess_id_valid(id) || account_id == NULL || credential == NULL || !*credential)
		return no_session(e);
	return db_tx(db, adopt_fn, &t, e);
}

int
sess_lookup(struct db *db, const struct sess_limits *lim, const char *id, struct sess_info *out,
    struct err *e)
{
	char idle[16], anon_idle[16];
	const char *params[3] = { id, idle, anon_idle };
	const struct db_col cols[] = { DB_STR(out->protocol_version, sizeof(out->protocol_version)),
		DB_STR(out->account_id, sizeof(out->account_id)),
		DB_STR(out->credential, sizeof(out->credential)) };
	PGresult *r;

	if (!sess_id_valid(id))
		return no_session(e);
	if (fmt_err(e, "idle time", idle, sizeof(idle), "%d", lim->idle_s) < 0 ||
	    fmt_err(e, "idle time", anon_idle, sizeof(anon_idle), "%d", lim->anon_idle_s) < 0)
		return -1;
	/* last_seen_at moves at most once a minute, so a busy session does
	 * not write a row version per request. */
	r = db_query_row(db,
	    "WITH s AS (SELECT id, protocol_version, account_id, credential, last_seen_at"
	    "  FROM mcp_sessions"
	    "  WHERE id = $1 AND ended_at IS NULL"
	    "  AND last_seen_at > now() - make_interval(secs =>"
	    "   CASE WHEN account_id IS NULL THEN $3::int ELSE $2::int END)),"
	    " u AS (UPDATE mcp_sessions SET last_seen_at = now() WHERE id IN"
	    "  (SELECT id FROM s WHERE last_seen_at < now() - interval '60 seconds'))"
	    " SELECT protocol_version, coalesce(account_id::text, ''), coalesce(credential, '')"
	    " FROM s",
	    3, params, e, ERR_NOT_FOUND, NULL, "session not found");
	return db_take_row(r, cols, DB_NCOLS(cols), e);
}

int
sess_end(struct db *db, const char *id, struct err *e)
{
	const char *params[1] = { id };
	long n;

	if (!sess_id_valid(id))
		return no_session(e);
	if (db_exec(db,
		"WITH u AS (UPDATE mcp_sessions SET ended_at = now()"
		" WHERE id = $1 AND ended_at IS NULL RETURNING id)" SESS_NOTIFY,
		1, params, &n, e) < 0)
		return -1;
	return n == 1 ? 0 : no_session(e);
}

int
sess_end_account(PGconn *c, const char *account_id, long *n, struct err *e)
{
	const char *params[1] = { account_id };

	return db_conn_exec(c,
	    "WITH u AS (UPDATE mcp_sessions SET ended_at = now()"
	    " WHERE account_id = $1 AND ended_at IS NULL RETURNING id)" SESS_NOTIFY,
	    1, params, n, e);
}

/* "version|account|credential" back into *out. */
static int
parse_cached(const char *val, struct sess_info *out)
{
	const char *bar = strchr(val, '|');
	const char *bar2 = bar ? strchr(bar + 1, '|') : NULL;
	size_t vlen, alen;

	if (bar2 == NULL || (vlen = (size_t)(bar - val)) >= sizeof(out->protocol_version) ||
	    (alen = (size_t)(bar2 - bar - 1)) >= sizeof(out->account_id) ||
	    strlen(bar2 + 1) >= sizeof(out->credential))
		return 0;
	memcpy(out->protocol_version, val, vlen);
	out->protocol_version[vlen] = '\0';
	memcpy(out->account_id, bar + 1, alen);
	out->account_id[alen] = '\0';
	return fmt_buf(out->credential, sizeof(out->credential), "%s", bar2 + 1) == 0;
}

int
sess_cache_peek(struct ttl_map *cache, const char *id, struct sess_info *out)
{
	char val[TTL_VAL_MAX + 1];

	return cache != NULL && sess_id_valid(id) && ttl_get(cache, id, val, sizeof(val)) &&
	    parse_cached(val, out);
}

int
sess_lookup_cached(struct db *db, struct ttl_map *cache, const struct sess_limits *lim,
    const char *id, struct sess_info *out, struct err *e)
{
	char val[TTL_VAL_MAX + 1];
	unsigned long long gen = 0;

	if (sess_cache_peek(cache, id, out))
		return 0;
	/* Before the database: an end announced meanwhile keeps the answer out. */
	if (cache)
		gen = ttl_generation(cache);
	if (sess_lookup(db, lim, id, out, e) < 0)
		return -1;
	/* An answer too long to keep whole is not kept. */
	if (cache &&
	    fmt_buf(val, sizeof(val), "%s|%s|%s", out->protocol_version, out->account_id,
		out->credential) == 0)
		(void)ttl_put_gen(cache, id, val, gen);
	return 0;
}
