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
	const struct db_col cols[] = { DB_INT(&out->host_port), DB_BOOL(&out->public),
		DB_STR(out->token_hash, sizeof(out->token_hash)),
		DB_STR(out->host, sizeof(out->host)), DB_STR(out->account, sizeof(out->account)),
		DB_STR(out->address, sizeof(out->address)),
		DB_STR(out->state, sizeof(out->state)) };
	PGresult *r;
	int rc;

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
	rc = db_take_row_or_none(r, cols, DB_NCOLS(cols), e);
	*found = rc == 1;
	return rc < 0 ? -1 : 0;
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

int
store_conn_change_rebind(PGconn *c, const char *sql, int nparams, const char *const *params,
    const char *id, const int *ports, const int *host_ports, size_t n, int *won, struct err *e)
{
	long changed = 0;

	*won = 0;
	if (db_conn_exec(c, sql, nparams, params, &changed, e) < 0)
		return -1;
	*won = changed == 1;
	return *won && ports ? store_conn_ports_rebind(c, id, ports, host_ports, n, e) : 0;
}

struct change_rebind {
	const char *sql;
	int nparams;
	const char *const *params;
	const char *id;
	const int *ports, *host_ports;
	size_t n;
	int won;
};

static int
change_rebind_tx(PGconn *c, void *arg, struct err *e)
{
	struct change_rebind *x = arg;

	return store_conn_change_rebind(c, x->sql, x->nparams, x->params, x->id, x->ports,
	    x->host_ports, x->n, &x->won, e);
}

int
store_change_rebind(struct db *db, const char *sql, int nparams, const char *const *params,
    const char *id, const int *ports, const int *host_ports, size_t n, int *won, struct err *e)
{
	struct change_rebind x = { sql, nparams, params, id, ports, host_ports, n, 0 };

	if (db_tx(db, change_rebind_tx, &x, e) < 0)
		return -1;
	*won = x.won;
	return 0;
}
