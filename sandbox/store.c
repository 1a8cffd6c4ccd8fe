/* store.c - the statements on the sandboxes table: rows, creation and
 * state changes. */
#include "sandbox/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "sandbox/catalog.h"

#define SANDBOX_COLUMNS                                                                                                                          \
	"id, coalesce(name, ''), state, size, accelerator, " STORE_TS("created_at") ", " STORE_TS(                                               \
	    "ready_at") ", " STORE_TS("expires_at") ", " STORE_TS("destroyed_at") ", failure_reason, metadata::text, host_uri, net, end_reason," \
										  " boot, from_snapshot"

void
store_not_found(const char *id, struct err *e)
{
	err_set_at(e, STORE_NO_SANDBOX(id));
}

/* A text column as JSON: null when NULL or empty. */
json_t *
store_text_or_null(const PGresult *r, int row, int col)
{
	const char *v = db_get_text(r, row, col);

	return v == NULL || *v == '\0' ? json_null() : json_string(v);
}

/* An integer column as JSON: null when NULL or unreadable. */
json_t *
store_int_or_null(const PGresult *r, int row, int col)
{
	long long v;
	struct err e;

	err_clear(&e);
	return db_get_ll(r, row, col, &v, &e) == 0 ? json_integer(v) : json_null();
}

int
store_id_host(PGresult *r, char *id, char *host, size_t hn, struct err *e)
{
	int rc = -1;

	if (r == NULL)
		return -1;
	if (PQntuples(r) == 0)
		rc = 0;
	else if (db_get_str(r, 0, 0, id, STORE_ID_LEN + 1, e) == 0 &&
	    db_get_str(r, 0, 1, host, hn, e) == 0)
		rc = 1;
	PQclear(r);
	return rc;
}

int
store_rows(struct db *db, const char *sql, int nparams, const char *const *params, size_t size,
    store_row_fn read, void **out, size_t *n, struct err *e)
{
	PGresult *r = db_query(db, sql, nparams, params, e);
	unsigned char *v = NULL;
	size_t k = 0;
	int rc = -1, got;

	*out = NULL;
	*n = 0;
	if (r == NULL)
		return -1;
	if (PQntuples(r) > 0 && (v = calloc((size_t)PQntuples(r), size)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		if ((got = read(r, i, v + k * size, e)) < 0)
			goto out;
		if (got == 0)
			k++;
	}
	*out = v;
	*n = k;
	v = NULL;
	rc = 0;
out:
	free(v);
	PQclear(r);
	return rc;
}

int
store_only_str(PGresult *r, const char *id, char *out, size_t n, struct err *e)
{
	int rc = -1;

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		store_not_found(id, e);
	else
		rc = db_get_str(r, 0, 0, out, n, e);
	PQclear(r);
	return rc;
}

json_t *
store_row_json(PGresult *r, store_json_fn conv, struct err *e)
{
	json_t *out;

	if (r == NULL)
		return NULL;
	if ((out = conv(r, 0)) == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	PQclear(r);
	return out;
}

/* ---- reading sandboxes ---- */

int
store_load(struct db *db, const char *account, const char *id, struct store_row *row, struct err *e)
{
	const char *p[2] = { id, account };
	const struct db_col cols[] = { DB_STR(row->id, sizeof(row->id)),
		DB_STR(row->state, sizeof(row->state)), DB_STR(row->size, sizeof(row->size)),
		DB_STR(row->host, sizeof(row->host)), DB_STR(row->net, sizeof(row->net)) };
	PGresult *r;

	if (id == NULL) {
		store_not_found(id, e);
		return -1;
	}
	r = db_query_row(db,
	    account ?
		"SELECT id, state, size, host_uri, net FROM sandboxes WHERE id = $1 AND account_id = $2" :
		"SELECT id, state, size, host_uri, net FROM sandboxes WHERE id = $1",
	    account ? 2 : 1, p, e, STORE_NO_SANDBOX(id));
	return db_take_row(r, cols, DB_NCOLS(cols), e);
}

/* One row of SANDBOX_COLUMNS as the tools' "sandbox" object. */
static json_t *
sandbox_json(const PGresult *r, int i)
{
	const struct cat_size *sz = cat_find(PQgetvalue(r, i, 3));
	json_t *meta = json_loads(PQgetvalue(r, i, 10), 0, NULL);

	return json_pack(
	    "{s:s, s:o, s:s, s:s, s:i, s:i, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:s, s:o}",
	    "sandbox_id", PQgetvalue(r, i, 0), "name", store_text_or_null(r, i, 1), "state",
	    PQgetvalue(r, i, 2), "size", PQgetvalue(r, i, 3), "vcpus", sz ? sz->vcpus : 0,
	    "memory_mib", sz ? sz->memory_mib : 0, "accelerator", store_text_or_null(r, i, 4),
	    "created_at", PQgetvalue(r, i, 5), "ready_at", store_text_or_null(r, i, 6),
	    "expires_at", store_text_or_null(r, i, 7), "destroyed_at", store_text_or_null(r, i, 8),
	    "failure_reason", store_text_or_null(r, i, 9), "end_reason",
	    store_text_or_null(r, i, 13), "metadata", meta ? meta : json_object(), "network",
	    PQgetvalue(r, i, 12), "boot", PQgetvalue(r, i, 14), "from_snapshot",
	    store_text_or_null(r, i, 15));
}

json_t *
store_sandbox_json(struct db *db, const char *account, const char *id, struct err *e)
{
	const char *p[2] = { id, account };
	PGresult *r = db_query_row(db,
	    "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE id = $1 AND account_id = $2", 2, p, e,
	    STORE_NO_SANDBOX(id));

	return store_row_json(r, sandbox_json, e);
}

json_t *
store_list_json(struct db *db, const char *account, const char *state, const char *cursor,
    int limit, struct err *e)
{
	char limbuf[16];
	const char *p[4];
	PGresult *r;
	json_t *arr, *out;
	int n;

	if (fmt_err(e, "limit", limbuf, sizeof(limbuf), "%d", limit + 1) < 0)
		return NULL;
	p[0] = account;
	p[1] = state ? state : "";
	p[2] = cursor ? cursor : "";
	p[3] = limbuf;
	r = db_query(db,
	    "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE account_id = $1"
	    " AND ($2 = '' OR state = $2 OR ($2 = 'live' AND state IN " STORE_ACTIVE_STATES "))"
	    " AND ($3 = '' OR (created_at, id) < (SELECT created_at, id FROM sandboxes"
	    "  WHERE id = $3 AND account_id = $1))"
	    " ORDER BY created_at DESC, id DESC LIMIT $4::int",
	    4, p, e);
	if (r == NULL)
		return NULL;
	n = PQntuples(r);
	arr = json_array();
	for (int i = 0; arr && i < n && i < limit; i++)
		json_array_append_new(arr, sandbox_json(r, i));
	out = json_pack("{s:o, s:o}", "sandboxes", arr, "next_cursor",
	    n > limit ? json_string(PQgetvalue(r, limit - 1, 0)) : json_null());
	PQclear(r);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}

int
store_is_live(struct db *db, const char *id, int *live, struct err *e)
{
	const char *p[1] = { id };
	PGresult *r = db_query(db,
	    "SELECT 1 FROM sandboxes WHERE id = $1 AND state IN " STORE_LIVE_STATES, 1, p, e);

	if (r == NULL)
		return -1;
	*live = PQntuples(r) > 0;
	PQclear(r);
	return 0;
}

int
store_ended_before(struct db *db, const char *id, int seconds, int *ended, struct err *e)
{
	char secs[16];
	const char *p[2] = { id, secs };
	PGresult *r;

	if (fmt_err(e, "seconds", secs, sizeof(secs), "%d", seconds) < 0)
		return -1;
	r = db_query(db,
	    "SELECT state NOT IN " STORE_LIVE_STATES
	    " AND coalesce(destroyed_at, settled_at, created_at)"
	    " < now() - make_interval(secs => $2::int) FROM sandboxes WHERE id = $1",
	    2, p, e);
	if (r == NULL)
		return -1;
	*ended = PQntuples(r) == 0 || strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	return 0;
}

/* ---- creating ---- */

int
store_live_count(PGconn *c, const char *account, long long *live, struct err *e)
{
	const char *p[1] = { account };
	PGresult *r;
	int rc;

	r = db_conn_query(c,
	    "SELECT count(*) FROM sandboxes WHERE account_id = $1"
	    " AND state IN " STORE_ACTIVE_STATES,
	    1, p, e);
	if (r == NULL)
		return -1;
	rc = db_get_ll(r, 0, 0, live, e);
	PQclear(r);
	return rc;
}

struct disable_count {
	const char *account;
	struct acct_disabled *out;
	long long *live;
};

static int
disable_count_tx(PGconn *c, void *arg, struct err *e)
{
	struct disable_count *d = arg;

	/* acct_disable_in locks the account row first, as the money paths do. */
	if (acct_disable_in(c, d->account, d->out, e) < 0)
		return -1;
	return store_live_count(c, d->account, d->live, e);
}

int
store_disable_account(struct db *db, const char *account, struct acct_disabled *out,
    long long *live, struct err *e)
{
	struct disable_count d = { account, out, live };

	*live = 0;
	if (!acct_id_valid(account)) {
		err_set_field(e, "account", "account: not an account id");
		return -1;
	}
	return db_tx(db, disable_count_tx, &d, e);
}

int
store_claim_warm(PGconn *c, const struct store_new *n, char *id, char *host, struct err *e)
{
	char tmo[16], minute[16];
	const char *p[7] = { n->account, n->size, tmo, n->name, n->metadata, minute, n->net };
	PGresult *r;

	if (fmt_err(e, "timeout", tmo, sizeof(tmo), "%d", n->timeout_min) < 0 ||
	    fmt_err(e, "minute", minute, sizeof(minute), "%d", n->minute_s) < 0)
		return -1;
	/* A warm VM no account has touched, claimed in one statement. */
	r = db_conn_query(c,
	    "UPDATE sandboxes SET account_id = $1, in_pool = false, boot = 'pool',"
	    " name = $4, metadata = $5::jsonb, timeout_minutes = $3::int, claimed_at = now(),"
	    " ready_at = now(), expires_at = now() + make_interval(secs => $3::int * $6::int)"
	    " WHERE id = (SELECT id FROM sandboxes WHERE in_pool AND state = 'running'"
	    "  AND size = $2 AND net = $7 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " RETURNING id, host_uri",
	    7, p, e);
	return store_id_host(r, id, host, STORE_HOST_MAX, e);
}

static const char insert_sql[] =
    "INSERT INTO sandboxes(id, account_id, in_pool, name, metadata, size,"
    " host_uri, domain_name, state, owner, timeout_minutes, net, reserved_memory_mib,"
    " reserved_vcpus, boot, from_snapshot)"
    " VALUES ($1, $2::uuid, $2::uuid IS NULL, $3, $4::jsonb, $5, $6, $7, 'creating', $8,"
    " $9::int, $10, $11::int, $12::int, CASE WHEN $13::text IS NULL THEN 'cold'"
    "  ELSE 'snapshot' END, $13)";

#define STORE_INSERT_PARAMS 13

struct insert_buf {
	char tmo[16], mem[16], cpus[16];
};

static int
insert_params(const char *id, const struct store_new *n, struct insert_buf *b, const char **p,
    struct err *e)
{
	if (fmt_err(e, "timeout", b->tmo, sizeof(b->tmo), "%d", n->timeout_min) < 0 ||
	    fmt_err(e, "memory", b->mem, sizeof(b->mem), "%d", n->reserved_memory_mib) < 0 ||
	    fmt_err(e, "vcpus", b->cpus, sizeof(b->cpus), "%d", n->reserved_vcpus) < 0)
		return -1;
	p[0] = id;
	p[1] = n->account;
	p[2] = n->name;
	p[3] = n->metadata ? n->metadata : "{}";
	p[4] = n->size;
	p[5] = n->host;
	p[6] = n->domain;
	p[7] = n->owner;
	p[8] = b->tmo;
	p[9] = n->net;
	p[10] = b->mem;
	p[11] = b->cpus;
	p[12] = n->from_snapshot;
	return 0;
}

int
store_insert_creating(PGconn *c, const char *id, const struct store_new *n, struct err *e)
{
	struct insert_buf b;
	const char *p[STORE_INSERT_PARAMS];

	if (insert_params(id, n, &b, p, e) < 0)
		return -1;
	return db_conn_exec(c, insert_sql, STORE_INSERT_PARAMS, p, NULL, e);
}

int
store_insert_pool(PGconn *c, const char *id, const struct store_new *n, struct err *e)
{
	struct insert_buf b;
	const char *p[STORE_INSERT_PARAMS];

	if (insert_params(id, n, &b, p, e) < 0)
		return -1;
	p[1] = NULL; /* no account: in_pool */
	p[2] = NULL;
	p[3] = "{}";
	return db_conn_exec(c, insert_sql, STORE_INSERT_PARAMS, p, NULL, e);
}

/* ---- state changes ---- */

const char *
store_end_name(enum store_end end)
{
	switch (end) {
	case STORE_END_DESTROYED:
		return "destroyed";
	case STORE_END_EXPIRED:
		return "expired";
	case STORE_END_GUEST_SHUTDOWN:
		return "guest_shutdown";
	case STORE_END_OUT_OF_MEMORY:
		return "out_of_memory";
	case STORE_END_BOOT_FAILED:
		return "boot_failed";
	case STORE_END_HOST_LOST:
		return "host_lost";
	case STORE_END_POOL_SURPLUS:
		return "pool_surplus";
	case STORE_END_ACCOUNT_DISABLED:
		return "account_disabled";
	case STORE_END_AGENT_PROTOCOL:
		return "agent_protocol";
	}
	return "destroyed";
}

int
store_mark_running(struct db *db, const char *id, const char *accel, const char *boot, int minute_s,
    int *won, struct err *e)
{
	char minute[16];
	const char *p[4] = { id, accel, minute, boot };
	long n = 0;

	if (fmt_err(e, "minute", minute, sizeof(minute), "%d", minute_s) < 0)
		return -1;
	/* Expiry counts from readiness; warm VMs get theirs when claimed. */
	if (db_exec(db,
		"UPDATE sandboxes SET state = 'running', ready_at = now(),"
		" accelerator = $2, owner = NULL, boot = coalesce($4, boot),"
		" expires_at = CASE WHEN in_pool THEN NULL"
		"  ELSE now() + make_interval(secs => timeout_minutes * $3::int) END"
		" WHERE id = $1 AND state = 'creating'",
		4, p, &n, e) < 0)
		return -1;
	*won = n == 1;
	return 0;
}

int
store_mark_destroying(struct db *db, const char *id, const char *account, const char *owner,
    enum store_end end, struct err *e)
{
	const char *p[4] = { id, account, owner, store_end_name(end) };
	struct store_row row;
	long n = 0;

	if (db_exec(db,
		"UPDATE sandboxes SET state = 'destroying',"
		" destroying_at = coalesce(destroying_at, now()), owner = $3,"
		" end_reason = coalesce(end_reason, $4)"
		" WHERE id = $1 AND ($2::uuid IS NULL OR account_id = $2::uuid)"
		" AND state IN ('creating', 'running', 'destroying', 'paused')",
		4, p, &n, e) < 0)
		return -1;
	/* A pause, resume or snapshot under way ends first: its aasd owns
	 * the VM. */
	if (n == 0 && store_load(db, account, id, &row, e) == 0 && store_state_moving(row.state)) {
		err_set(e, ERR_CONFLICT, "sandbox %s is %s; try again in a few seconds", id,
		    row.state);
		return -1;
	}
	err_clear(e);
	return 0;
}

/* A sandbox lost with its host ends when the host last answered. */
#define MARK_ENDED_SQL                                                    \
	"UPDATE sandboxes SET state = $2, owner = NULL, in_pool = false," \
	" destroyed_at = CASE WHEN $2 <> 'destroyed' THEN NULL"           \
	"  WHEN $4 = 'host_lost' THEN coalesce(least(now(), greatest("    \
	"   ready_at, (SELECT h.seen_at FROM hosts h"                     \
	"    WHERE h.uri = sandboxes.host_uri))), now())"                 \
	"  ELSE now() END,"                                               \
	" failed_at = CASE WHEN $2 = 'failed' THEN now() END,"            \
	" failure_reason = coalesce($3, failure_reason),"                 \
	" end_reason = coalesce(end_reason, $4)"                          \
	" WHERE id = $1 AND state IN " STORE_LIVE_STATES

int
store_state_moving(const char *state)
{
	return strcmp(state, "pausing") == 0 || strcmp(state, "resuming") == 0 ||
	    strcmp(state, "snapshotting") == 0;
}

int
store_conn_mark_ended(PGconn *c, const char *id, const char *state, enum store_end end,
    const char *reason, struct err *e)
{
	const char *p[4] = { id, state, reason, store_end_name(end) };

	return db_conn_exec(c, MARK_ENDED_SQL, 4, p, NULL, e);
}

int
store_expiry_changed(struct db *db, struct err *e)
{
	return db_exec(db, "SELECT pg_notify('aas_invalidate', 'e:')", 0, NULL, NULL, e);
}

/* One count(*) with the sandbox as its parameter. */
int
store_count(struct db *db, const char *sql, const char *sandbox_id, long long *n, struct err *e)
{
	const char *p[1] = { sandbox_id };

	return db_take_ll(db_query(db, sql, 1, p, e), n, e);
}

int
store_conn_count(PGconn *c, const char *sql, const char *sandbox_id, long long *n, struct err *e)
{
	const char *p[1] = { sandbox_id };

	return db_take_ll(db_conn_query(c, sql, 1, p, e), n, e);
}
