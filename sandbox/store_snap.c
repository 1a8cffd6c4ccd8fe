/* store_snap.c - snapshot rows (schema/019_snapshots.sql) and the
 * sandbox's 'snapshotting' state. In the lock order snapshots come after
 * the sandboxes and before the ledger; every money path on them has
 * locked the account row first. */
#include "sandbox/store_int.h"

#include <string.h>

#include "base/fmt.h"

#define SNAP_COLUMNS                                                                                \
	"id, coalesce(name, ''), sandbox_id, state, size, network, bytes, keep_minutes, " STORE_TS( \
	    "created_at") ", " STORE_TS("expires_at") ", charged"

void
store_snap_not_found(const char *snap, struct err *e)
{
	err_set_at(e, STORE_NO_SNAPSHOT(snap));
}

int
store_conn_snap_count(PGconn *c, const char *account, long long *n, struct err *e)
{
	const char *p[1] = { account };

	return db_take_ll(db_conn_query(c,
			      "SELECT count(*) FROM snapshots WHERE account_id = $1::uuid"
			      " AND state <> 'deleted'",
			      1, p, e),
	    n, e);
}

int
store_conn_mark_snapshotting(PGconn *c, const char *id, const char *account, const char *owner,
    struct err *e)
{
	const char *p[3] = { id, account, owner };
	long n = 0;

	if (db_conn_exec(c,
		"UPDATE sandboxes SET state = 'snapshotting', owner = $3"
		" WHERE id = $1 AND account_id = $2::uuid AND state = 'running'"
		" AND NOT in_pool AND moving_to IS NULL",
		3, p, &n, e) < 0)
		return -1;
	if (n != 1) {
		err_set(e, ERR_CONFLICT,
		    "sandbox %s is not running; only a running sandbox can be"
		    " snapshotted",
		    id);
		return -1;
	}
	return 0;
}

int
store_conn_snap_insert(PGconn *c, const struct store_snap_new *n, struct err *e)
{
	char keep[16], price[24], charged[24];
	const char *p[11] = { n->id, n->account, n->name, n->sandbox_id, n->host, n->size, n->net,
		n->image, keep, price, charged };

	if (fmt_err(e, "minutes", keep, sizeof(keep), "%d", n->keep_minutes) < 0 ||
	    fmt_err(e, "price", price, sizeof(price), "%lld", n->storage_price) < 0 ||
	    fmt_err(e, "amount", charged, sizeof(charged), "%lld", n->charged) < 0)
		return -1;
	return db_conn_exec(c,
	    "INSERT INTO snapshots(id, account_id, name, sandbox_id, host_uri, size, network,"
	    " image, state, keep_minutes, storage_price, charged, expires_at)"
	    " VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8, 'saving', $9::int, $10::bigint,"
	    " $11::bigint, now() + make_interval(mins => $9::int))",
	    11, p, NULL, e);
}

static int
read_snap(const PGresult *r, int i, struct store_snap *out, struct err *e)
{
	memset(out, 0, sizeof(*out));
	return db_get_str(r, i, 0, out->id, sizeof(out->id), e) < 0 ||
		db_get_str(r, i, 1, out->account, sizeof(out->account), e) < 0 ||
		db_get_str(r, i, 2, out->sandbox_id, sizeof(out->sandbox_id), e) < 0 ||
		db_get_str(r, i, 3, out->host, sizeof(out->host), e) < 0 ||
		db_get_str(r, i, 4, out->size, sizeof(out->size), e) < 0 ||
		db_get_str(r, i, 5, out->net, sizeof(out->net), e) < 0 ||
		db_get_str(r, i, 6, out->image, sizeof(out->image), e) < 0 ||
		db_get_str(r, i, 7, out->state, sizeof(out->state), e) < 0 ||
		db_get_int(r, i, 8, &out->keep_minutes, e) < 0 ||
		db_get_ll(r, i, 9, &out->charged, e) < 0 ||
		db_get_ll(r, i, 10, &out->left_ms, e) < 0 ?
	    -1 :
	    0;
}

#define SNAP_ROW                                                                                 \
	"id, account_id::text, sandbox_id, host_uri, size, network, image, state, keep_minutes," \
	" charged, greatest(0, trunc(extract(epoch FROM (expires_at - now())) * 1000))::bigint"

int
store_conn_snap_read(PGconn *c, const char *account, const char *snap, int for_update,
    struct store_snap *out, struct err *e)
{
	const char *p[2] = { snap, account };
	PGresult *r = db_conn_query_row(c,
	    for_update ?
		"SELECT " SNAP_ROW " FROM snapshots WHERE id = $1 AND account_id = $2::uuid"
		" AND state <> 'deleted' FOR UPDATE" :
		"SELECT " SNAP_ROW " FROM snapshots WHERE id = $1 AND account_id = $2::uuid"
		" AND state <> 'deleted'",
	    2, p, e, STORE_NO_SNAPSHOT(snap));
	int rc;

	if (r == NULL)
		return -1;
	rc = read_snap(r, 0, out, e);
	PQclear(r);
	return rc;
}

int
store_snap_saving(struct db *db, const char *sandbox_id, struct store_snap *out, struct err *e)
{
	const char *p[1] = { sandbox_id };
	PGresult *r = db_query(db,
	    "SELECT " SNAP_ROW " FROM snapshots WHERE sandbox_id = $1 AND state = 'saving'"
	    " ORDER BY created_at DESC LIMIT 1",
	    1, p, e);
	int rc;

	if (r == NULL)
		return -1;
	rc = PQntuples(r) == 1 ? (read_snap(r, 0, out, e) < 0 ? -1 : 1) : 0;
	PQclear(r);
	return rc;
}

int
store_conn_snap_end(PGconn *c, const char *snap, const char *reason, long long refunded,
    struct err *e)
{
	char ref[24];
	const char *p[3] = { snap, reason, ref };

	if (fmt_err(e, "amount", ref, sizeof(ref), "%lld", refunded) < 0)
		return -1;
	return db_conn_exec(c,
	    "UPDATE snapshots SET state = 'deleted', deleted_at = now(), end_reason = $2,"
	    " refunded = refunded + $3::bigint WHERE id = $1 AND state <> 'deleted'",
	    3, p, NULL, e);
}

int
store_conn_snap_sandbox_back(PGconn *c, const char *sandbox_id, const int *ports,
    const int *host_ports, size_t n, struct err *e)
{
	const char *p[1] = { sandbox_id };
	int won;

	return store_conn_change_rebind(c,
	    "UPDATE sandboxes SET state = 'running', owner = NULL"
	    " WHERE id = $1 AND state = 'snapshotting'",
	    1, p, sandbox_id, ports, host_ports, n, &won, e);
}

int
store_conn_snap_ready(PGconn *c, const char *snap, long long bytes, struct err *e)
{
	char b[24];
	const char *p[2] = { snap, b };
	long n = 0;

	if (fmt_err(e, "bytes", b, sizeof(b), "%lld", bytes) < 0 ||
	    db_conn_exec(c,
		"UPDATE snapshots SET state = 'ready', ready_at = now(), bytes = $2::bigint"
		" WHERE id = $1 AND state = 'saving'",
		2, p, &n, e) < 0)
		return -1;
	if (n != 1) {
		err_set(e, ERR_CONFLICT, "snapshot %s is no longer being taken", snap);
		return -1;
	}
	return 0;
}

int
store_snap_disown(struct db *db, const char *sandbox_id, struct err *e)
{
	const char *p[1] = { sandbox_id };

	return db_exec(db,
	    "UPDATE sandboxes SET owner = NULL WHERE id = $1 AND state = 'snapshotting'", 1, p,
	    NULL, e);
}

/* One row of SNAP_COLUMNS as the tools' "snapshot" object. */
static json_t *
snap_json(const PGresult *r, int i)
{
	long long bytes = 0, charged = 0;
	int keep = 0;
	struct err ignore;

	err_clear(&ignore);
	err_ignore(db_get_ll(r, i, 6, &bytes, &ignore));
	err_ignore(db_get_int(r, i, 7, &keep, &ignore));
	err_ignore(db_get_ll(r, i, 10, &charged, &ignore));
	return json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:I, s:i, s:s, s:s, s:I}", "snapshot_id",
	    PQgetvalue(r, i, 0), "name", store_text_or_null(r, i, 1), "sandbox_id",
	    PQgetvalue(r, i, 2), "state", PQgetvalue(r, i, 3), "size", PQgetvalue(r, i, 4),
	    "network", PQgetvalue(r, i, 5), "bytes", (json_int_t)bytes, "keep_minutes", keep,
	    "created_at", PQgetvalue(r, i, 8), "expires_at", PQgetvalue(r, i, 9), "charged",
	    (json_int_t)charged);
}

json_t *
store_snap_json(struct db *db, const char *account, const char *snap, struct err *e)
{
	const char *p[2] = { snap, account };
	PGresult *r = db_query_row(db,
	    "SELECT " SNAP_COLUMNS " FROM snapshots WHERE id = $1 AND account_id = $2::uuid", 2, p,
	    e, STORE_NO_SNAPSHOT(snap));

	return store_row_json(r, snap_json, e);
}

json_t *
store_snap_list_json(struct db *db, const char *account, struct err *e)
{
	const char *p[1] = { account };
	PGresult *r = db_query(db,
	    "SELECT " SNAP_COLUMNS " FROM snapshots WHERE account_id = $1::uuid"
	    " AND state <> 'deleted' ORDER BY created_at DESC, id DESC LIMIT 1000",
	    1, p, e);
	json_t *arr;

	if (r == NULL)
		return NULL;
	arr = json_array();
	for (int i = 0; arr != NULL && i < PQntuples(r); i++)
		json_array_append_new(arr, snap_json(r, i));
	PQclear(r);
	if (arr == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return arr;
}

int
store_snap_due(struct db *db, struct store_snap_due *due, size_t max, size_t *n, struct err *e)
{
	char lim[16];
	const char *p[1] = { lim };
	PGresult *r;
	int rc = 0;

	*n = 0;
	if (fmt_err(e, "limit", lim, sizeof(lim), "%zu", max) < 0)
		return -1;
	r = db_query(db,
	    "SELECT id, account_id::text FROM snapshots WHERE state = 'ready'"
	    " AND expires_at <= now() ORDER BY expires_at LIMIT $1::int",
	    1, p, e);
	if (r == NULL)
		return -1;
	for (int i = 0; i < PQntuples(r) && *n < max; i++) {
		if (db_get_str(r, i, 0, due[*n].id, sizeof(due[*n].id), e) < 0 ||
		    db_get_str(r, i, 1, due[*n].account, sizeof(due[*n].account), e) < 0) {
			rc = -1;
			break;
		}
		(*n)++;
	}
	PQclear(r);
	return rc;
}
