/* store_move.c - the statements of an evacuation: which sandbox moves
 * next, its claim (inside the transaction that reserved room on the new
 * host), and the outcome. */
#include "sandbox/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/utf8.h"

int
store_move_pool_take(struct db *db, const char *hosts, const char *owner, char *id, char *host,
    size_t hn, struct err *e)
{
	const char *p[2] = { hosts, owner };
	PGresult *r;

	r = db_query(db,
	    "UPDATE sandboxes SET state = 'destroying',"
	    " destroying_at = now(), owner = $2, end_reason = 'pool_surplus'"
	    " WHERE id = (SELECT s.id FROM sandboxes s JOIN hosts h ON h.uri = s.host_uri"
	    "  WHERE h.evacuating AND s.in_pool AND s.state = 'running'"
	    "  AND s.host_uri = ANY($1::text[]) LIMIT 1 FOR UPDATE OF s SKIP LOCKED)"
	    " RETURNING id, host_uri",
	    2, p, e);
	return store_id_host(r, id, host, hn, e);
}

int
store_move_next(struct db *db, const char *hosts, struct store_move *out, struct err *e)
{
	const char *p[1] = { hosts };
	PGresult *r;
	int rc = -1;

	r = db_query(db,
	    "SELECT s.id, s.host_uri, s.reserved_memory_mib, s.reserved_vcpus, s.net"
	    " FROM sandboxes s JOIN hosts h ON h.uri = s.host_uri"
	    " WHERE h.evacuating AND s.host_uri = ANY($1::text[]) AND s.state = 'running'"
	    " AND NOT s.in_pool AND s.moving_to IS NULL AND s.move_error IS NULL"
	    " ORDER BY s.created_at LIMIT 1",
	    1, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 0)
		rc = 0;
	else if (db_get_str(r, 0, 0, out->id, sizeof(out->id), e) == 0 &&
	    db_get_str(r, 0, 1, out->host, sizeof(out->host), e) == 0 &&
	    db_get_int(r, 0, 2, &out->reserved_memory_mib, e) == 0 &&
	    db_get_int(r, 0, 3, &out->reserved_vcpus, e) == 0 &&
	    db_get_str(r, 0, 4, out->net, sizeof(out->net), e) == 0)
		rc = 1;
	PQclear(r);
	return rc;
}

int
store_move_claim(PGconn *c, const char *id, const char *from, const char *to, const char *owner,
    int *won, struct err *e)
{
	const char *p[4] = { id, from, to, owner };
	long n = 0;

	if (db_conn_exec(c,
		"UPDATE sandboxes SET moving_to = $3, move_owner = $4"
		" WHERE id = $1 AND host_uri = $2 AND state = 'running' AND moving_to IS NULL",
		4, p, &n, e) < 0)
		return -1;
	*won = n == 1;
	return 0;
}

int
store_move_done(struct db *db, const char *id, const char *to, long long pause_ms, const int *ports,
    const int *host_ports, size_t n, int *won, struct err *e)
{
	char pause[24];
	const char *p[3] = { id, to, pause_ms >= 0 ? pause : NULL };

	if (fmt_err(e, "pause", pause, sizeof(pause), "%lld", pause_ms) < 0)
		return -1;
	return store_change_rebind(db,
	    "UPDATE sandboxes SET moved_from = CASE WHEN host_uri <> $2 THEN host_uri"
	    " ELSE moved_from END, host_uri = $2, moving_to = NULL, move_owner = NULL,"
	    " move_error = NULL, moved_at = now(), move_pause_ms = $3::int"
	    " WHERE id = $1 AND state = 'running'",
	    3, p, id, ports, host_ports, n, won, e);
}

int
store_move_failed(struct db *db, const char *id, const char *why, struct err *e)
{
	char reason[300];
	const char *p[2] = { id, reason };
	size_t n = utf8_whole_len(why, strnlen(why, sizeof(reason) - 1));

	/* Whole characters only: the column is text. */
	memcpy(reason, why, n);
	reason[n] = '\0';
	return db_exec(db,
	    "UPDATE sandboxes SET moving_to = NULL, move_owner = NULL, move_error = $2"
	    " WHERE id = $1",
	    2, p, NULL, e);
}
