/* store_maint.c - expiry claims, reconcile, the warm pool, capacity and
 * heartbeats. */
#include "sandbox/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

static int
due_row(const PGresult *r, int i, void *elem, struct err *e)
{
	struct store_due *d = elem;
	struct err bad;

	(void)e;
	/* A row that cannot be read is left to reconcile. */
	err_clear(&bad);
	return db_get_str(r, i, 0, d->id, sizeof(d->id), &bad) < 0 ||
		db_get_str(r, i, 1, d->host, sizeof(d->host), &bad) < 0 ||
		db_get_str(r, i, 2, d->end_reason, sizeof(d->end_reason), &bad) < 0 ?
	    1 :
	    0;
}

int
store_claim_due(struct db *db, const char *hosts, const char *owner, int max,
    struct store_due **due, size_t *n, struct err *e)
{
	char maxs[16];
	const char *p[3] = { hosts, owner, maxs };

	if (fmt_err(e, "count", maxs, sizeof(maxs), "%d", max) < 0)
		return -1;
	return store_rows(db,
	    "UPDATE sandboxes SET state = 'destroying',"
	    " destroying_at = now(), owner = $2, end_reason = CASE WHEN EXISTS"
	    "  (SELECT 1 FROM accounts a WHERE a.id = sandboxes.account_id"
	    "   AND a.disabled_at IS NOT NULL) THEN 'account_disabled' ELSE 'expired' END"
	    " WHERE id IN (SELECT s.id FROM sandboxes s"
	    "  LEFT JOIN accounts a ON a.id = s.account_id AND a.disabled_at IS NOT NULL"
	    "  WHERE s.state IN ('running', 'paused') AND NOT s.in_pool"
	    "  AND (s.expires_at <= now() OR a.id IS NOT NULL) AND s.host_uri = ANY($1::text[])"
	    "  ORDER BY s.expires_at LIMIT $3::int FOR UPDATE OF s SKIP LOCKED)"
	    " RETURNING id, host_uri, end_reason",
	    3, p, sizeof(**due), due_row, (void **)due, n, e);
}

int
store_claim_host_lost(struct db *db, const char *hosts, const char *owner, struct store_due **due,
    size_t *n, struct err *e)
{
	const char *p[2] = { hosts, owner };

	return store_rows(db,
	    "UPDATE sandboxes SET state = 'destroying', destroying_at = coalesce(destroying_at,"
	    " now()), owner = $2, end_reason = coalesce(end_reason, 'host_lost')"
	    " WHERE id IN (SELECT s.id FROM sandboxes s JOIN hosts h ON h.uri = s.host_uri"
	    "  WHERE h.state = 'down' AND s.host_uri = ANY($1::text[])"
	    "  AND s.state IN " STORE_LIVE_STATES
	    "  ORDER BY s.id LIMIT 200 FOR UPDATE OF s SKIP LOCKED)"
	    " RETURNING id, host_uri, end_reason",
	    2, p, sizeof(**due), due_row, (void **)due, n, e);
}

int
store_next_expiry_ms(struct db *db, const char *hosts, long long none, long long *ms, struct err *e)
{
	const char *p[1] = { hosts };
	PGresult *r;
	int rc;

	r = db_query(db,
	    "SELECT ceil(extract(epoch FROM (min(expires_at) - now())) * 1000)"
	    "::bigint FROM sandboxes WHERE state IN ('running', 'paused') AND NOT in_pool"
	    " AND host_uri = ANY($1::text[])",
	    1, p, e);
	if (r == NULL)
		return -1;
	/* NULL: nothing runs there. */
	rc = db_get_ll_or(r, 0, 0, none, ms, e);
	PQclear(r);
	return rc;
}

int
store_count_live(struct db *db, long long counts[3], struct err *e)
{
	static const char *const states[] = { "creating", "running", "destroying" };
	PGresult *r;
	int rc = 0;

	memset(counts, 0, 3 * sizeof(counts[0]));
	/* The partial index on live states keeps this cheap however many
	 * destroyed rows the table holds. */
	r = db_query(db,
	    "SELECT state, count(*) FROM sandboxes"
	    " WHERE state IN ('creating', 'running', 'destroying') GROUP BY state",
	    0, NULL, e);
	if (r == NULL)
		return -1;
	for (int i = 0; rc == 0 && i < PQntuples(r); i++) {
		const char *state = db_get_text(r, i, 0);
		for (int k = 0; state && k < 3; k++)
			if (strcmp(state, states[k]) == 0 && db_get_ll(r, i, 1, &counts[k], e) < 0)
				rc = -1;
	}
	PQclear(r);
	return rc;
}

/* ---- maintenance ---- */

static int
host_row(const PGresult *r, int i, void *elem, struct err *e)
{
	struct store_host_row *h = elem;

	return db_get_str(r, i, 0, h->id, sizeof(h->id), e) < 0 ||
		db_get_str(r, i, 1, h->state, sizeof(h->state), e) < 0 ||
		db_get_bool(r, i, 2, &h->owner_dead, e) < 0 ||
		db_get_str(r, i, 3, h->moving_to, sizeof(h->moving_to), e) < 0 ||
		db_get_bool(r, i, 4, &h->mover_dead, e) < 0 ?
	    -1 :
	    0;
}

int
store_host_rows(struct db *db, const char *host, const char *self, int dead_s,
    struct store_host_row **rows, size_t *n, struct err *e)
{
	char dead[16];
	const char *p[3] = { host, dead, self };

	if (fmt_err(e, "seconds", dead, sizeof(dead), "%d", dead_s) < 0)
		return -1;
	return store_rows(db,
	    "SELECT s.id, s.state,"
	    " (s.owner IS NULL OR i.heartbeat_at IS NULL"
	    "  OR i.heartbeat_at < now() - make_interval(secs => $2::int)),"
	    " coalesce(s.moving_to, ''),"
	    " (m.id IS DISTINCT FROM $3 AND (m.heartbeat_at IS NULL"
	    "  OR m.heartbeat_at < now() - make_interval(secs => $2::int)))"
	    " FROM sandboxes s LEFT JOIN aasd_instances i ON i.id = s.owner"
	    " LEFT JOIN aasd_instances m ON m.id = s.move_owner"
	    " WHERE s.host_uri = $1 AND s.state IN " STORE_LIVE_STATES,
	    3, p, sizeof(**rows), host_row, (void **)rows, n, e);
}

int
store_pool_counts(struct db *db, const char *size, const char *hosts, const char *net,
    long long *have, long long *stale, struct err *e)
{
	const char *p[3] = { size, hosts, net };
	PGresult *r;
	int rc = -1;

	r = db_query(db,
	    "SELECT count(*) FILTER (WHERE net = $3),"
	    " count(*) FILTER (WHERE net <> $3 AND state = 'running') FROM sandboxes"
	    " WHERE in_pool AND state IN ('creating', 'running') AND size = $1"
	    " AND host_uri = ANY($2::text[])",
	    3, p, e);
	if (r == NULL)
		return -1;
	if (db_get_ll(r, 0, 0, have, e) == 0 && db_get_ll(r, 0, 1, stale, e) == 0)
		rc = 0;
	PQclear(r);
	return rc;
}

int
store_pool_take_surplus(struct db *db, const char *size, const char *hosts, const char *owner,
    const char *net, char *id, char *host, size_t hn, struct err *e)
{
	const char *p[4] = { size, hosts, owner, net };
	PGresult *r;

	r = db_query(db,
	    "UPDATE sandboxes SET state = 'destroying',"
	    " destroying_at = now(), owner = $3, end_reason = 'pool_surplus'"
	    " WHERE id = (SELECT id FROM sandboxes"
	    "  WHERE in_pool AND state = 'running' AND size = $1 AND host_uri = ANY($2::text[])"
	    "  ORDER BY (net = $4), created_at DESC LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " RETURNING id, host_uri",
	    4, p, e);
	return store_id_host(r, id, host, hn, e);
}

int
store_capacity(struct db *db, long long *live, long long warm[3], struct err *e)
{
	PGresult *r;
	int rc = -1;

	r = db_query(db,
	    "SELECT"
	    " count(*) FILTER (WHERE NOT in_pool AND state IN ('creating', 'running')),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'small'),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'medium'),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'large')"
	    " FROM sandboxes WHERE state IN ('creating', 'running')",
	    0, NULL, e);
	if (r == NULL)
		return -1;
	if (db_get_ll(r, 0, 0, live, e) == 0 && db_get_ll(r, 0, 1, &warm[0], e) == 0 &&
	    db_get_ll(r, 0, 2, &warm[1], e) == 0 && db_get_ll(r, 0, 3, &warm[2], e) == 0)
		rc = 0;
	PQclear(r);
	return rc;
}

int
store_heartbeat(struct db *db, const char *instance, const char *uris, struct err *e)
{
	const char *p[2] = { instance, uris };

	return db_exec(db,
	    "INSERT INTO aasd_instances(id, host_uris) VALUES ($1, $2)"
	    " ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()",
	    2, p, NULL, e);
}
