/* store_port.c - the statements on sandbox_ports, and the preview lookup. */
#include "sandbox/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"

static int
port_row(const PGresult *r, int i, void *elem, struct err *e)
{
	struct store_port *p = elem;

	return db_get_int(r, i, 0, &p->port, e) < 0 || db_get_bool(r, i, 1, &p->public, e) < 0 ||
		db_get_str(r, i, 2, p->created_at, sizeof(p->created_at), e) < 0 ?
	    -1 :
	    0;
}

int
store_ports(struct db *db, const char *sandbox_id, struct store_port **ports, size_t *n,
    struct err *e)
{
	const char *p[1] = { sandbox_id };

	return store_rows(db,
	    "SELECT port, public, " STORE_TS(
		"created_at") " FROM sandbox_ports WHERE sandbox_id = $1 ORDER BY port",
	    1, p, sizeof(**ports), port_row, (void **)ports, n, e);
}

int
store_port_exists(struct db *db, const char *sandbox_id, int port, int *exists, struct err *e)
{
	char port_text[16];
	const char *p[2] = { sandbox_id, port_text };
	PGresult *r;

	if (fmt_err(e, "port", port_text, sizeof(port_text), "%d", port) < 0)
		return -1;
	r = db_query(db, "SELECT 1 FROM sandbox_ports WHERE sandbox_id = $1 AND port = $2::int", 2,
	    p, e);
	if (r == NULL)
		return -1;
	*exists = PQntuples(r) > 0;
	PQclear(r);
	return 0;
}

struct port_tx {
	const char *const *p; /* sandbox, port, public, host port, token hash, cap */
	int cap;
	int *inserted;
};

/* The sandbox row first (its lock serialises the count and the insert of
 * every expose of this sandbox), then the count, then the row. */
static int
port_insert_tx(PGconn *c, void *arg, struct err *e)
{
	struct port_tx *t = arg;
	long long n;
	long found = 0, added = 0;

	*t->inserted = 0;
	if (db_conn_exec(c,
		"SELECT 1 FROM sandboxes WHERE id = $1 AND state = 'running' FOR NO KEY UPDATE", 1,
		t->p, &found, e) < 0)
		return -1;
	if (found != 1)
		return 0;
	if (store_conn_count(c, "SELECT count(*) FROM sandbox_ports WHERE sandbox_id = $1", t->p[0],
		&n, e) < 0)
		return -1;
	if (n >= t->cap) {
		err_set_at(e, ERR_LIMIT, "port",
		    "port: sandbox %s has %lld exposed ports, the most allowed "
		    "(AAS_MAX_PORTS_PER_SANDBOX=%d)",
		    t->p[0], n, t->cap);
		return -1;
	}
	if (db_conn_exec(c,
		"INSERT INTO sandbox_ports(sandbox_id, port, public, host_port, token_hash)"
		" VALUES ($1, $2::int, $3::boolean, $4::int, nullif($5, ''))"
		" ON CONFLICT DO NOTHING",
		5, t->p, &added, e) < 0)
		return -1;
	*t->inserted = added == 1;
	return 0;
}

int
store_port_insert(struct db *db, const char *sandbox_id, int port, int public, int host_port,
    const char *token_hash, int cap, int *inserted, struct err *e)
{
	char port_text[16], hp_text[16];
	const char *p[5] = { sandbox_id, port_text, public ? "true" : "false", hp_text,
		token_hash ? token_hash : "" };
	struct port_tx t = { p, cap, inserted };

	if (fmt_err(e, "port", port_text, sizeof(port_text), "%d", port) < 0 ||
	    fmt_err(e, "port", hp_text, sizeof(hp_text), "%d", host_port) < 0)
		return -1;
	return db_tx(db, port_insert_tx, &t, e);
}

int
store_ports_drop(struct db *db, const char *sandbox_id, struct err *e)
{
	const char *p[1] = { sandbox_id };

	return db_exec(db, "DELETE FROM sandbox_ports WHERE sandbox_id = $1", 1, p, NULL, e);
}

int
store_preview_lookup(struct db *db, const char *sandbox_id, int port, struct store_preview *out,
    int *found, struct err *e)
{
	char port_text[16];
	const char *p[2] = { sandbox_id, port_text };
	PGresult *r;
	int rc = -1;

	*found = 0;
	if (fmt_err(e, "port", port_text, sizeof(port_text), "%d", port) < 0)
		return -1;
	r = db_query(db,
	    "SELECT p.host_port, p.public, coalesce(p.token_hash, ''),"
	    " b.host_uri, a.id, coalesce(h.preview_address, ''), b.state"
	    " FROM sandbox_ports p JOIN sandboxes b ON b.id = p.sandbox_id"
	    " JOIN accounts a ON a.id = b.account_id LEFT JOIN hosts h ON h.uri = b.host_uri"
	    " WHERE p.sandbox_id = $1 AND p.port = $2::int"
	    " AND b.state IN ('running', 'pausing', 'paused', 'resuming')"
	    " AND a.disabled_at IS NULL",
	    2, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		rc = 0;
		goto out;
	}
	if (db_get_int(r, 0, 0, &out->host_port, e) < 0 ||
	    db_get_bool(r, 0, 1, &out->public, e) < 0 ||
	    db_get_str(r, 0, 2, out->token_hash, sizeof(out->token_hash), e) < 0 ||
	    db_get_str(r, 0, 3, out->host, sizeof(out->host), e) < 0 ||
	    db_get_str(r, 0, 4, out->account, sizeof(out->account), e) < 0 ||
	    db_get_str(r, 0, 5, out->address, sizeof(out->address), e) < 0 ||
	    db_get_str(r, 0, 6, out->state, sizeof(out->state), e) < 0)
		goto out;
	*found = 1;
	rc = 0;
out:
	PQclear(r);
	return rc;
}

int
store_port_count(struct db *db, const char *sandbox_id, long long *n, struct err *e)
{
	return store_count(db, "SELECT count(*) FROM sandbox_ports WHERE sandbox_id = $1",
	    sandbox_id, n, e);
}

int
store_conn_ports_rebind(PGconn *c, const char *id, const int *ports, const int *host_ports,
    size_t n, struct err *e)
{
	for (size_t i = 0; i < n; i++) {
		char port[16], hp[16];
		const char *p[3] = { id, port, hp };

		if (fmt_err(e, "port", port, sizeof(port), "%d", ports[i]) < 0 ||
		    fmt_err(e, "port", hp, sizeof(hp), "%d", host_ports[i]) < 0 ||
		    db_conn_exec(c,
			"UPDATE sandbox_ports SET host_port = $3::int"
			" WHERE sandbox_id = $1 AND port = $2::int",
			3, p, NULL, e) < 0)
			return -1;
	}
	return 0;
}
