/* session.c - MCP session rows. */
#include "service/session.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

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

int
sess_create(struct db *db, const char *protocol_version, const char *account_id,
    const char *client_name, const char *client_version, char id[SESS_ID_LEN + 1], struct err *e)
{
	char name[201], version[101];
	const char *params[5];

	if (key_random_hex(id, SESS_ID_LEN + 1, SESS_ID_LEN / 2) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	/* Client-supplied labels are informational: clip, never refuse. */
	snprintf(name, sizeof(name), "%s", client_name ? client_name : "");
	snprintf(version, sizeof(version), "%s", client_version ? client_version : "");
	params[0] = id;
	params[1] = protocol_version;
	params[2] = account_id && *account_id ? account_id : NULL;
	params[3] = name;
	params[4] = version;
	return db_exec(db,
	    "INSERT INTO mcp_sessions(id, protocol_version, account_id,"
	    " client_name, client_version) VALUES ($1, $2, $3, $4, $5)",
	    5, params, NULL, e);
}

int
sess_lookup(struct db *db, const char *id, int idle_s, struct sess_info *out, struct err *e)
{
	char idle[16];
	const char *params[2] = { id, idle };
	PGresult *r;
	int rc = -1;

	if (!sess_id_valid(id)) {
		err_set(e, ERR_NOT_FOUND, "session not found");
		return -1;
	}
	snprintf(idle, sizeof(idle), "%d", idle_s);
	/* last_seen_at moves at most once a minute, so a busy session does
	 * not write a row version per request. */
	r = db_query(db,
	    "WITH s AS (SELECT id, protocol_version, account_id, last_seen_at FROM mcp_sessions"
	    "  WHERE id = $1 AND ended_at IS NULL"
	    "  AND last_seen_at > now() - make_interval(secs => $2::int)),"
	    " u AS (UPDATE mcp_sessions SET last_seen_at = now() WHERE id IN"
	    "  (SELECT id FROM s WHERE last_seen_at < now() - interval '60 seconds'))"
	    " SELECT protocol_version, coalesce(account_id::text, '') FROM s",
	    2, params, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		err_set(e, ERR_NOT_FOUND, "session not found");
	else if (db_get_str(r, 0, 0, out->protocol_version, sizeof(out->protocol_version), e) ==
		0 &&
	    db_get_str(r, 0, 1, out->account_id, sizeof(out->account_id), e) == 0)
		rc = 0;
	PQclear(r);
	return rc;
}

int
sess_end(struct db *db, const char *id, struct err *e)
{
	const char *params[1] = { id };
	long n;

	if (!sess_id_valid(id)) {
		err_set(e, ERR_NOT_FOUND, "session not found");
		return -1;
	}
	if (db_exec(db,
		"WITH u AS (UPDATE mcp_sessions SET ended_at = now()"
		" WHERE id = $1 AND ended_at IS NULL RETURNING id)"
		" SELECT pg_notify('aas_invalidate', 's:' || id) FROM u",
		1, params, &n, e) < 0)
		return -1;
	if (n != 1) {
		err_set(e, ERR_NOT_FOUND, "session not found");
		return -1;
	}
	return 0;
}

static int
parse_cached(const char *val, struct sess_info *out)
{
	const char *bar = strchr(val, '|');
	size_t vlen;

	if (bar == NULL || (vlen = (size_t)(bar - val)) >= sizeof(out->protocol_version))
		return 0;
	memcpy(out->protocol_version, val, vlen);
	out->protocol_version[vlen] = '\0';
	snprintf(out->account_id, sizeof(out->account_id), "%s", bar + 1);
	return 1;
}

int
sess_cache_peek(struct ttl_map *cache, const char *id, struct sess_info *out)
{
	char val[TTL_VAL_MAX + 1];

	return cache != NULL && sess_id_valid(id) && ttl_get(cache, id, val, sizeof(val)) &&
	    parse_cached(val, out);
}

int
sess_lookup_cached(struct db *db, struct ttl_map *cache, const char *id, int idle_s,
    struct sess_info *out, struct err *e)
{
	char val[TTL_VAL_MAX + 1];

	if (sess_cache_peek(cache, id, out))
		return 0;
	if (sess_lookup(db, id, idle_s, out, e) < 0)
		return -1;
	if (cache) {
		snprintf(val, sizeof(val), "%s|%s", out->protocol_version, out->account_id);
		ttl_put(cache, id, val);
	}
	return 0;
}
