/* store.c - the statements on the sandbox tables. */
#include "service/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/catalog.h"

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

#define SANDBOX_COLUMNS \
	"id, coalesce(name, ''), state, size, accelerator, " \
	TS("created_at") ", " TS("ready_at") ", " TS("expires_at") ", " \
	TS("destroyed_at") ", failure_reason, metadata::text, host_uri, net"

#define COMMAND_COLUMNS \
	"id, command, background, state, exit_code, stdout_path, stderr_path, " \
	TS("started_at") ", " TS("ended_at")

#define COMMAND_TEXT_MAX 200 /* characters of a command shown in lists */

static void
not_found(const char *id, struct err *e)
{
	err_set_at(e, ERR_NOT_FOUND, "sandbox_id", "sandbox_id: no sandbox %.40s in your account",
	    id ? id : "");
}

/* A text column as JSON: null when NULL or empty. */
static json_t *
nullable(const PGresult *r, int row, int col)
{
	const char *v = db_get_text(r, row, col);

	return v == NULL || *v == '\0' ? json_null() : json_string(v);
}

/* An integer column as JSON: null when NULL or unreadable. */
static json_t *
int_or_null(const PGresult *r, int row, int col)
{
	long long v;
	struct err e;

	err_clear(&e);
	return db_get_ll(r, row, col, &v, &e) == 0 ? json_integer(v) : json_null();
}

/* ---- reading sandboxes ---- */

int
store_load(struct db *db, const char *account, const char *id, struct store_row *row,
    struct err *e)
{
	const char *p[2] = { id, account };
	PGresult *r;
	int rc = -1;

	if (id == NULL) {
		not_found(id, e);
		return -1;
	}
	r = db_query(db, account ?
	    "SELECT id, state, size, host_uri, net FROM sandboxes WHERE id = $1 AND account_id = $2" :
	    "SELECT id, state, size, host_uri, net FROM sandboxes WHERE id = $1",
	    account ? 2 : 1, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		not_found(id, e);
		goto out;
	}
	if (db_get_str(r, 0, 0, row->id, sizeof(row->id), e) < 0 ||
	    db_get_str(r, 0, 1, row->state, sizeof(row->state), e) < 0 ||
	    db_get_str(r, 0, 2, row->size, sizeof(row->size), e) < 0 ||
	    db_get_str(r, 0, 3, row->host, sizeof(row->host), e) < 0 ||
	    db_get_str(r, 0, 4, row->net, sizeof(row->net), e) < 0)
		goto out;
	rc = 0;
out:
	PQclear(r);
	return rc;
}

/* One row of SANDBOX_COLUMNS as the tools' "sandbox" object. */
static json_t *
sandbox_json(const PGresult *r, int i)
{
	const struct cat_size *sz = cat_find(PQgetvalue(r, i, 3));
	json_t *meta = json_loads(PQgetvalue(r, i, 10), 0, NULL);

	return json_pack("{s:s, s:o, s:s, s:s, s:i, s:i, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:s}",
	    "sandbox_id", PQgetvalue(r, i, 0),
	    "name", nullable(r, i, 1),
	    "state", PQgetvalue(r, i, 2),
	    "size", PQgetvalue(r, i, 3),
	    "vcpus", sz ? sz->vcpus : 0,
	    "memory_mib", sz ? sz->memory_mib : 0,
	    "accelerator", nullable(r, i, 4),
	    "created_at", PQgetvalue(r, i, 5),
	    "ready_at", nullable(r, i, 6),
	    "expires_at", nullable(r, i, 7),
	    "destroyed_at", nullable(r, i, 8),
	    "failure_reason", nullable(r, i, 9),
	    "metadata", meta ? meta : json_object(),
	    "network", PQgetvalue(r, i, 12));
}

json_t *
store_sandbox_json(struct db *db, const char *account, const char *id, struct err *e)
{
	const char *p[2] = { id, account };
	PGresult *r = db_query(db, "SELECT " SANDBOX_COLUMNS
	    " FROM sandboxes WHERE id = $1 AND account_id = $2", 2, p, e);
	json_t *out = NULL;

	if (r == NULL)
		return NULL;
	if (PQntuples(r) != 1)
		not_found(id, e);
	else if ((out = sandbox_json(r, 0)) == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	PQclear(r);
	return out;
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

	snprintf(limbuf, sizeof(limbuf), "%d", limit + 1);
	p[0] = account;
	p[1] = state ? state : "";
	p[2] = cursor ? cursor : "";
	p[3] = limbuf;
	r = db_query(db, "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE account_id = $1"
	    " AND ($2 = '' OR state = $2 OR ($2 = 'live' AND state IN ('creating', 'running')))"
	    " AND ($3 = '' OR (created_at, id) < (SELECT created_at, id FROM sandboxes"
	    "  WHERE id = $3 AND account_id = $1))"
	    " ORDER BY created_at DESC, id DESC LIMIT $4::int", 4, p, e);
	if (r == NULL)
		return NULL;
	n = PQntuples(r);
	arr = json_array();
	for (int i = 0; arr && i < n && i < limit; i++)
		json_array_append_new(arr, sandbox_json(r, i));
	out = json_pack("{s:o, s:o}", "sandboxes", arr,
	    "next_cursor", n > limit ? json_string(PQgetvalue(r, limit - 1, 0)) : json_null());
	PQclear(r);
	if (out == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return out;
}

int
store_is_live(struct db *db, const char *id, int *live, struct err *e)
{
	const char *p[1] = { id };
	PGresult *r = db_query(db, "SELECT 1 FROM sandboxes WHERE id = $1"
	    " AND state IN ('creating', 'running', 'destroying')", 1, p, e);

	if (r == NULL)
		return -1;
	*live = PQntuples(r) > 0;
	PQclear(r);
	return 0;
}

/* ---- creating ---- */

int
store_lock_account_live(PGconn *c, const char *account, long long *live, struct err *e)
{
	const char *p[1] = { account };
	PGresult *r;
	int rc;

	/* The account row first: the one lock order of every money path. */
	r = db_conn_query(c, "SELECT id FROM accounts WHERE id = $1 FOR UPDATE", 1, p, e);
	if (r == NULL)
		return -1;
	PQclear(r);
	r = db_conn_query(c, "SELECT count(*) FROM sandboxes WHERE account_id = $1"
	    " AND state IN ('creating', 'running')", 1, p, e);
	if (r == NULL)
		return -1;
	rc = db_get_ll(r, 0, 0, live, e);
	PQclear(r);
	return rc;
}

int
store_claim_warm(PGconn *c, const struct store_new *n, char *id, char *host, struct err *e)
{
	char tmo[16], minute[16];
	const char *p[7] = { n->account, n->size, tmo, n->name, n->metadata, minute, n->net };
	PGresult *r;
	int rc = -1;

	snprintf(tmo, sizeof(tmo), "%d", n->timeout_min);
	snprintf(minute, sizeof(minute), "%d", n->minute_s);
	/* A warm VM no account has touched, claimed in one statement. */
	r = db_conn_query(c, "UPDATE sandboxes SET account_id = $1, in_pool = false,"
	    " name = $4, metadata = $5::jsonb, timeout_minutes = $3::int, claimed_at = now(),"
	    " ready_at = now(), expires_at = now() + make_interval(secs => $3::int * $6::int)"
	    " WHERE id = (SELECT id FROM sandboxes WHERE in_pool AND state = 'running'"
	    "  AND size = $2 AND net = $7 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " RETURNING id, host_uri", 7, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 0)
		rc = 0;
	else if (db_get_str(r, 0, 0, id, STORE_ID_LEN + 1, e) == 0 &&
	    db_get_str(r, 0, 1, host, STORE_HOST_MAX, e) == 0)
		rc = 1;
	PQclear(r);
	return rc;
}

static const char insert_sql[] =
    "INSERT INTO sandboxes(id, account_id, in_pool, name, metadata, size,"
    " host_uri, domain_name, state, owner, timeout_minutes, net)"
    " VALUES ($1, $2::uuid, $2::uuid IS NULL, $3, $4::jsonb, $5, $6, $7, 'creating', $8,"
    " $9::int, $10)";

static void
insert_params(const char *id, const struct store_new *n, char *tmo, size_t tn,
    const char **p)
{
	snprintf(tmo, tn, "%d", n->timeout_min);
	p[0] = id;
	p[1] = n->account;
	p[2] = n->name;
	p[3] = n->metadata ? n->metadata : "{}";
	p[4] = n->size;
	p[5] = n->host;
	p[6] = n->domain;
	p[7] = n->owner;
	p[8] = tmo;
	p[9] = n->net;
}

int
store_insert_creating(PGconn *c, const char *id, const struct store_new *n, struct err *e)
{
	char tmo[16];
	const char *p[10];

	insert_params(id, n, tmo, sizeof(tmo), p);
	return db_conn_exec(c, insert_sql, 10, p, NULL, e);
}

int
store_insert_pool(struct db *db, const char *id, const struct store_new *n, struct err *e)
{
	char tmo[16];
	const char *p[10];

	insert_params(id, n, tmo, sizeof(tmo), p);
	p[1] = NULL;          /* no account: in_pool */
	p[2] = NULL;
	p[3] = "{}";
	return db_exec(db, insert_sql, 10, p, NULL, e);
}

/* ---- state changes ---- */

int
store_mark_running(struct db *db, const char *id, const char *accel, int minute_s, int *won,
    struct err *e)
{
	char minute[16];
	const char *p[3] = { id, accel, minute };
	long n = 0;

	snprintf(minute, sizeof(minute), "%d", minute_s);
	/* Expiry counts from readiness; warm VMs get theirs when claimed. */
	if (db_exec(db, "UPDATE sandboxes SET state = 'running', ready_at = now(),"
	    " accelerator = $2, owner = NULL,"
	    " expires_at = CASE WHEN in_pool THEN NULL"
	    "  ELSE now() + make_interval(secs => timeout_minutes * $3::int) END"
	    " WHERE id = $1 AND state = 'creating'", 3, p, &n, e) < 0)
		return -1;
	*won = n == 1;
	return 0;
}

int
store_mark_destroying(struct db *db, const char *id, const char *account, const char *owner,
    struct err *e)
{
	const char *p[3] = { id, account, owner };

	return db_exec(db, "UPDATE sandboxes SET state = 'destroying',"
	    " destroying_at = coalesce(destroying_at, now()), owner = $3"
	    " WHERE id = $1 AND account_id = $2"
	    " AND state IN ('creating', 'running', 'destroying')", 3, p, NULL, e);
}

int
store_mark_ended(struct db *db, const char *id, const char *state, const char *reason,
    struct err *e)
{
	const char *p[3] = { id, state, reason };

	return db_exec(db, "UPDATE sandboxes SET state = $2, owner = NULL, in_pool = false,"
	    " destroyed_at = CASE WHEN $2 = 'destroyed' THEN now() END,"
	    " failed_at = CASE WHEN $2 = 'failed' THEN now() END,"
	    " failure_reason = coalesce($3, failure_reason)"
	    " WHERE id = $1 AND state IN ('creating', 'running', 'destroying')", 3, p, NULL, e);
}

int
store_expiry_changed(struct db *db, struct err *e)
{
	return db_exec(db, "SELECT pg_notify('aas_invalidate', 'e:')", 0, NULL, NULL, e);
}

/* ---- commands ---- */

int
store_cmd_insert(struct db *db, const char *cmd_id, const char *sandbox_id,
    const char *command, int background, const char *out_path, const char *err_path,
    struct err *e)
{
	const char *p[6] = { cmd_id, sandbox_id, command, background ? "t" : "f", out_path,
		err_path };

	return db_exec(db, "INSERT INTO sandbox_commands(id, sandbox_id, command,"
	    " background, state, stdout_path, stderr_path)"
	    " VALUES ($1, $2, $3, $4::boolean, 'running', $5, $6)", 6, p, NULL, e);
}

int
store_cmd_set_pid(struct db *db, const char *cmd_id, long pid, struct err *e)
{
	char pids[24];
	const char *p[2] = { cmd_id, pids };

	snprintf(pids, sizeof(pids), "%ld", pid);
	return db_exec(db, "UPDATE sandbox_commands SET guest_pid = $2::bigint WHERE id = $1",
	    2, p, NULL, e);
}

int
store_cmd_end(struct db *db, const char *cmd_id, const char *state, int code,
    int only_running, struct err *e)
{
	char codes[16];
	const char *p[3] = { cmd_id, state, codes };

	snprintf(codes, sizeof(codes), "%d", code);
	if (only_running)
		return db_exec(db, "UPDATE sandbox_commands SET state = $2, ended_at = now(),"
		    " exit_code = CASE WHEN $2 = 'failed' THEN NULL ELSE $3::int END"
		    " WHERE id = $1 AND state = 'running'", 3, p, NULL, e);
	return db_exec(db, "UPDATE sandbox_commands SET state = $2, ended_at = now(),"
	    " exit_code = CASE WHEN $2 = 'running' THEN NULL ELSE $3::int END"
	    " WHERE id = $1", 3, p, NULL, e);
}

int
store_cmd_running(struct db *db, const char *sandbox_id, struct store_cmd_pid **cmds,
    size_t *n, struct err *e)
{
	const char *p[1] = { sandbox_id };
	PGresult *r = db_query(db, "SELECT id, guest_pid FROM sandbox_commands"
	    " WHERE sandbox_id = $1 AND state = 'running' AND guest_pid IS NOT NULL", 1, p, e);
	struct store_cmd_pid *v = NULL;
	size_t k = 0;
	int rc = -1;

	*cmds = NULL;
	*n = 0;
	if (r == NULL)
		return -1;
	if (PQntuples(r) > 0 && (v = calloc((size_t)PQntuples(r), sizeof(*v))) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		long long pid;
		if (db_get_str(r, i, 0, v[k].id, sizeof(v[k].id), e) < 0 ||
		    db_get_ll(r, i, 1, &pid, e) < 0)
			goto out;
		if (pid <= 0 || pid > 0x7fffffff)
			continue;
		v[k++].pid = (long)pid;
	}
	*cmds = v;
	*n = k;
	v = NULL;
	rc = 0;
out:
	free(v);
	PQclear(r);
	return rc;
}

/* One row of COMMAND_COLUMNS; the command text cut to `cut` characters. */
static json_t *
command_json(const PGresult *r, int i, size_t cut)
{
	const char *cmd = PQgetvalue(r, i, 1);
	size_t len = strlen(cmd);
	json_t *cmdj = json_stringn(cmd, len > cut ? cut : len);

	return json_pack("{s:s, s:o, s:b, s:s, s:o, s:s, s:s, s:s, s:o}",
	    "command_id", PQgetvalue(r, i, 0),
	    "command", cmdj ? cmdj : json_string("?"),
	    "background", strcmp(PQgetvalue(r, i, 2), "t") == 0,
	    "state", PQgetvalue(r, i, 3),
	    "exit_code", int_or_null(r, i, 4),
	    "stdout_path", PQgetvalue(r, i, 5),
	    "stderr_path", PQgetvalue(r, i, 6),
	    "started_at", PQgetvalue(r, i, 7),
	    "ended_at", nullable(r, i, 8));
}

json_t *
store_cmd_recent_json(struct db *db, const char *sandbox_id, struct err *e)
{
	char lim[16];
	const char *p[2] = { sandbox_id, lim };
	PGresult *r;
	json_t *arr;

	snprintf(lim, sizeof(lim), "%d", STORE_RECENT_COMMANDS);
	r = db_query(db, "SELECT " COMMAND_COLUMNS " FROM sandbox_commands"
	    " WHERE sandbox_id = $1 ORDER BY started_at DESC LIMIT $2::int", 2, p, e);
	if (r == NULL)
		return NULL;
	arr = json_array();
	for (int i = 0; arr && i < PQntuples(r); i++)
		json_array_append_new(arr, command_json(r, i, COMMAND_TEXT_MAX));
	PQclear(r);
	if (arr == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return arr;
}

json_t *
store_cmd_json(struct db *db, const char *sandbox_id, const char *cmd_id, struct err *e)
{
	const char *p[2] = { cmd_id, sandbox_id };
	PGresult *r = db_query(db, "SELECT " COMMAND_COLUMNS " FROM sandbox_commands"
	    " WHERE id = $1 AND sandbox_id = $2", 2, p, e);
	json_t *out = NULL;

	if (r == NULL)
		return NULL;
	if (PQntuples(r) != 1)
		err_set_at(e, ERR_NOT_FOUND, "command_id", "command_id: no command %s in %s",
		    cmd_id, sandbox_id);
	else if ((out = command_json(r, 0, (size_t)-1)) == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	PQclear(r);
	return out;
}

/* ---- exposed ports ---- */

int
store_ports(struct db *db, const char *sandbox_id, struct store_port **ports, size_t *n,
    struct err *e)
{
	const char *p[1] = { sandbox_id };
	PGresult *r = db_query(db, "SELECT port, public, " TS("created_at")
	    " FROM sandbox_ports WHERE sandbox_id = $1 ORDER BY port", 1, p, e);
	struct store_port *v = NULL;
	int rc = -1;

	*ports = NULL;
	*n = 0;
	if (r == NULL)
		return -1;
	if (PQntuples(r) > 0 && (v = calloc((size_t)PQntuples(r), sizeof(*v))) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++)
		if (db_get_int(r, i, 0, &v[i].port, e) < 0 ||
		    db_get_bool(r, i, 1, &v[i].public, e) < 0 ||
		    db_get_str(r, i, 2, v[i].created_at, sizeof(v[i].created_at), e) < 0)
			goto out;
	*ports = v;
	*n = (size_t)PQntuples(r);
	v = NULL;
	rc = 0;
out:
	free(v);
	PQclear(r);
	return rc;
}

int
store_port_exists(struct db *db, const char *sandbox_id, int port, int *exists,
    struct err *e)
{
	char port_text[16];
	const char *p[2] = { sandbox_id, port_text };
	PGresult *r;

	snprintf(port_text, sizeof(port_text), "%d", port);
	r = db_query(db, "SELECT 1 FROM sandbox_ports WHERE sandbox_id = $1 AND port = $2::int",
	    2, p, e);
	if (r == NULL)
		return -1;
	*exists = PQntuples(r) > 0;
	PQclear(r);
	return 0;
}

int
store_port_insert(struct db *db, const char *sandbox_id, int port, int public, int host_port,
    const char *token_hash, int *inserted, struct err *e)
{
	char port_text[16], hp_text[16];
	const char *p[5] = { sandbox_id, port_text, public ? "true" : "false", hp_text,
		token_hash ? token_hash : "" };
	long n = 0;

	snprintf(port_text, sizeof(port_text), "%d", port);
	snprintf(hp_text, sizeof(hp_text), "%d", host_port);
	if (db_exec(db, "INSERT INTO sandbox_ports(sandbox_id, port, public, host_port,"
	    " token_hash) SELECT $1, $2::int, $3::boolean, $4::int, nullif($5, '')"
	    " WHERE EXISTS (SELECT 1 FROM sandboxes WHERE id = $1 AND state = 'running')"
	    " ON CONFLICT DO NOTHING", 5, p, &n, e) < 0)
		return -1;
	*inserted = n == 1;
	return 0;
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
	snprintf(port_text, sizeof(port_text), "%d", port);
	r = db_query(db, "SELECT p.host_port, p.public, coalesce(p.token_hash, ''),"
	    " b.host_uri FROM sandbox_ports p JOIN sandboxes b ON b.id = p.sandbox_id"
	    " WHERE p.sandbox_id = $1 AND p.port = $2::int AND b.state = 'running'", 2, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		rc = 0;
		goto out;
	}
	if (db_get_int(r, 0, 0, &out->host_port, e) < 0 ||
	    db_get_bool(r, 0, 1, &out->public, e) < 0 ||
	    db_get_str(r, 0, 2, out->token_hash, sizeof(out->token_hash), e) < 0 ||
	    db_get_str(r, 0, 3, out->host, sizeof(out->host), e) < 0)
		goto out;
	*found = 1;
	rc = 0;
out:
	PQclear(r);
	return rc;
}

/* ---- money on a sandbox row ---- */

int
store_account_of(PGconn *c, const char *id, char *account, size_t n, struct err *e)
{
	const char *p[1] = { id };
	PGresult *r = db_conn_query(c, "SELECT coalesce(account_id::text, '') FROM sandboxes"
	    " WHERE id = $1", 1, p, e);
	int rc = -1;

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		not_found(id, e);
	else
		rc = db_get_str(r, 0, 0, account, n, e);
	PQclear(r);
	return rc;
}

int
store_lock_paid(PGconn *c, const char *id, const char *account, struct store_paid *out,
    struct err *e)
{
	const char *p[2] = { id, account };
	PGresult *r;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	r = db_conn_query(c, "SELECT coalesce(account_id::text, ''), state, paid_minutes,"
	    " price_per_minute, charged, refunded, minutes_used, settled_at IS NOT NULL,"
	    " coalesce(trunc(extract(epoch FROM (coalesce(destroyed_at, failed_at, now())"
	    "  - ready_at)) * 1000), 0)::bigint,"
	    " coalesce(trunc(extract(epoch FROM (expires_at - ready_at)) * 1000), 0)::bigint"
	    " FROM sandboxes WHERE id = $1 AND ($2::uuid IS NULL OR account_id = $2::uuid)"
	    " FOR UPDATE", 2, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		not_found(id, e);
		goto out;
	}
	if (db_get_str(r, 0, 0, out->account, sizeof(out->account), e) < 0 ||
	    db_get_str(r, 0, 1, out->state, sizeof(out->state), e) < 0 ||
	    db_get_int(r, 0, 2, &out->paid_minutes, e) < 0 ||
	    db_get_ll(r, 0, 3, &out->price, e) < 0 ||
	    db_get_ll(r, 0, 4, &out->charged, e) < 0 ||
	    db_get_ll_or(r, 0, 5, 0, &out->refunded, e) < 0 ||
	    db_get_int_or(r, 0, 6, 0, &out->minutes_used, e) < 0 ||
	    db_get_bool(r, 0, 7, &out->settled, e) < 0 ||
	    db_get_ll(r, 0, 8, &out->ran_ms, e) < 0 ||
	    db_get_ll(r, 0, 9, &out->life_ms, e) < 0)
		goto out;
	rc = 0;
out:
	PQclear(r);
	return rc;
}

int
store_set_paid(PGconn *c, const char *id, long long price, int minutes, long long cost,
    struct err *e)
{
	char pr[24], mins[16], costs[24];
	const char *p[4] = { id, pr, mins, costs };

	snprintf(pr, sizeof(pr), "%lld", price);
	snprintf(mins, sizeof(mins), "%d", minutes);
	snprintf(costs, sizeof(costs), "%lld", cost);
	return db_conn_exec(c, "UPDATE sandboxes SET price_per_minute = $2::bigint,"
	    " paid_minutes = $3::int, charged = $4::bigint WHERE id = $1", 4, p, NULL, e);
}

int
store_add_paid(PGconn *c, const char *id, int minutes, long long cost, int minute_s,
    char *expires, size_t n, struct err *e)
{
	char mins[16], costs[24], sec[16];
	const char *p[4] = { id, mins, costs, sec };
	PGresult *r;
	int rc = -1;

	snprintf(mins, sizeof(mins), "%d", minutes);
	snprintf(costs, sizeof(costs), "%lld", cost);
	snprintf(sec, sizeof(sec), "%d", minute_s);
	r = db_conn_query(c, "UPDATE sandboxes SET paid_minutes = paid_minutes + $2::int,"
	    " charged = charged + $3::bigint,"
	    " expires_at = expires_at + make_interval(secs => $2::int * $4::int)"
	    " WHERE id = $1 RETURNING " TS("expires_at"), 4, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		not_found(id, e);
	else
		rc = db_get_str(r, 0, 0, expires, n, e);
	PQclear(r);
	return rc;
}

int
store_mark_settled(PGconn *c, const char *id, int used, long long refund, struct err *e)
{
	char used_s[16], refund_s[24];
	const char *p[3] = { id, used_s, refund_s };

	snprintf(used_s, sizeof(used_s), "%d", used);
	snprintf(refund_s, sizeof(refund_s), "%lld", refund);
	return db_conn_exec(c, "UPDATE sandboxes SET minutes_used = $2::int,"
	    " refunded = $3::bigint, settled_at = now() WHERE id = $1", 3, p, NULL, e);
}

int
store_expiry_changed_tx(PGconn *c, struct err *e)
{
	return db_conn_exec(c, "SELECT pg_notify('aas_invalidate', 'e:')", 0, NULL, NULL, e);
}

/* One row of store_usage_json's query; NULL with `e` set. */
static json_t *
usage_row_json(const PGresult *r, int i, struct err *e)
{
	const char *id = db_get_text(r, i, 0), *size = db_get_text(r, i, 1);
	const char *state = db_get_text(r, i, 2), *created = db_get_text(r, i, 7);
	int has_used = db_get_text(r, i, 4) != NULL;
	long long charged, refunded, used = 0;
	int paid;
	json_t *o;

	if (db_get_int(r, i, 3, &paid, e) < 0 ||
	    (has_used && db_get_ll(r, i, 4, &used, e) < 0) ||
	    db_get_ll(r, i, 5, &charged, e) < 0 || db_get_ll(r, i, 6, &refunded, e) < 0)
		return NULL;
	if (id == NULL || size == NULL || state == NULL || created == NULL) {
		err_set(e, ERR_INTERNAL, "database answer: sandbox row %d lacks a field", i);
		return NULL;
	}
	o = json_pack("{s:s, s:s, s:s, s:i, s:o, s:I, s:I, s:I, s:s}",
	    "sandbox_id", id, "size", size, "state", state, "minutes_paid", paid,
	    "minutes_used", has_used ? json_integer(used) : json_null(),
	    "charged", (json_int_t)charged, "refunded", (json_int_t)refunded,
	    "cost", (json_int_t)(charged - refunded), "created_at", created);
	if (o == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	return o;
}

json_t *
store_usage_json(struct db *db, const char *account, int limit, struct err *e)
{
	char lims[16];
	const char *p[2] = { account, lims };
	PGresult *r;
	json_t *arr;
	int ok = 0;

	snprintf(lims, sizeof(lims), "%d", limit);
	r = db_query(db, "SELECT id, size, state, paid_minutes, minutes_used, charged, refunded, "
	    TS("created_at") " FROM sandboxes WHERE account_id = $1"
	    " ORDER BY created_at DESC LIMIT $2::int", 2, p, e);
	if (r == NULL)
		return NULL;
	arr = json_array();
	if (arr == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		json_t *o = usage_row_json(r, i, e);
		/* json_array_append_new frees the row when it fails. */
		if (o == NULL || json_array_append_new(arr, o) < 0) {
			err_set(e, ERR_INTERNAL, "out of memory");
			goto out;
		}
	}
	ok = 1;
out:
	PQclear(r);
	if (!ok) {
		json_decref(arr);
		arr = NULL;
	}
	return arr;
}

/* ---- expiry ---- */

int
store_claim_due(struct db *db, const char *hosts, const char *owner, int max,
    struct store_due **due, size_t *n, struct err *e)
{
	char maxs[16];
	const char *p[3] = { hosts, owner, maxs };
	struct store_due *v = NULL;
	size_t k = 0;
	PGresult *r;
	int rc = -1;

	*due = NULL;
	*n = 0;
	snprintf(maxs, sizeof(maxs), "%d", max);
	r = db_query(db, "UPDATE sandboxes SET state = 'destroying',"
	    " destroying_at = now(), owner = $2"
	    " WHERE id IN (SELECT id FROM sandboxes WHERE state = 'running' AND NOT in_pool"
	    "  AND expires_at <= now() AND host_uri = ANY($1::text[])"
	    "  ORDER BY expires_at LIMIT $3::int FOR UPDATE SKIP LOCKED)"
	    " RETURNING id, host_uri", 3, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) > 0 && (v = calloc((size_t)PQntuples(r), sizeof(*v))) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		struct err bad;

		/* A row that cannot be read is left to reconcile. */
		err_clear(&bad);
		if (db_get_str(r, i, 0, v[k].id, sizeof(v[k].id), &bad) == 0 &&
		    db_get_str(r, i, 1, v[k].host, sizeof(v[k].host), &bad) == 0)
			k++;
	}
	*due = v;
	*n = k;
	v = NULL;
	rc = 0;
out:
	free(v);
	PQclear(r);
	return rc;
}

int
store_next_expiry_ms(struct db *db, const char *hosts, long long none, long long *ms,
    struct err *e)
{
	const char *p[1] = { hosts };
	PGresult *r;
	int rc;

	r = db_query(db, "SELECT ceil(extract(epoch FROM (min(expires_at) - now())) * 1000)"
	    "::bigint FROM sandboxes WHERE state = 'running' AND NOT in_pool"
	    " AND host_uri = ANY($1::text[])", 1, p, e);
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
	r = db_query(db, "SELECT state, count(*) FROM sandboxes"
	    " WHERE state IN ('creating', 'running', 'destroying') GROUP BY state", 0, NULL, e);
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

int
store_host_rows(struct db *db, const char *host, int dead_s, struct store_host_row **rows,
    size_t *n, struct err *e)
{
	char dead[16];
	const char *p[2] = { host, dead };
	struct store_host_row *v = NULL;
	PGresult *r;
	int rc = -1;

	*rows = NULL;
	*n = 0;
	snprintf(dead, sizeof(dead), "%d", dead_s);
	r = db_query(db, "SELECT s.id, s.state,"
	    " (s.owner IS NULL OR i.heartbeat_at IS NULL"
	    "  OR i.heartbeat_at < now() - make_interval(secs => $2::int))"
	    " FROM sandboxes s LEFT JOIN aasd_instances i ON i.id = s.owner"
	    " WHERE s.host_uri = $1 AND s.state IN ('creating', 'running', 'destroying')",
	    2, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) > 0 && (v = calloc((size_t)PQntuples(r), sizeof(*v))) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++)
		if (db_get_str(r, i, 0, v[i].id, sizeof(v[i].id), e) < 0 ||
		    db_get_str(r, i, 1, v[i].state, sizeof(v[i].state), e) < 0 ||
		    db_get_bool(r, i, 2, &v[i].owner_dead, e) < 0)
			goto out;
	*rows = v;
	*n = (size_t)PQntuples(r);
	v = NULL;
	rc = 0;
out:
	free(v);
	PQclear(r);
	return rc;
}

int
store_pool_counts(struct db *db, const char *size, const char *host, const char *net,
    long long *have, long long *stale, struct err *e)
{
	const char *p[3] = { size, host, net };
	PGresult *r;
	int rc = -1;

	r = db_query(db, "SELECT count(*) FILTER (WHERE net = $3),"
	    " count(*) FILTER (WHERE net <> $3 AND state = 'running') FROM sandboxes"
	    " WHERE in_pool AND state IN ('creating', 'running') AND size = $1"
	    " AND host_uri = $2", 3, p, e);
	if (r == NULL)
		return -1;
	if (db_get_ll(r, 0, 0, have, e) == 0 && db_get_ll(r, 0, 1, stale, e) == 0)
		rc = 0;
	PQclear(r);
	return rc;
}

int
store_pool_take_surplus(struct db *db, const char *size, const char *host, const char *owner,
    const char *net, char *id, struct err *e)
{
	const char *p[4] = { size, host, owner, net };
	PGresult *r;
	int rc = -1;

	r = db_query(db, "UPDATE sandboxes SET state = 'destroying',"
	    " destroying_at = now(), owner = $3 WHERE id = (SELECT id FROM sandboxes"
	    "  WHERE in_pool AND state = 'running' AND size = $1 AND host_uri = $2"
	    "  ORDER BY (net = $4), created_at DESC LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " RETURNING id", 4, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 0)
		rc = 0;
	else if (db_get_str(r, 0, 0, id, STORE_ID_LEN + 1, e) == 0)
		rc = 1;
	PQclear(r);
	return rc;
}

int
store_capacity(struct db *db, long long *live, long long warm[3], struct err *e)
{
	PGresult *r;
	int rc = -1;

	r = db_query(db, "SELECT"
	    " count(*) FILTER (WHERE NOT in_pool AND state IN ('creating', 'running')),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'small'),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'medium'),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'large')"
	    " FROM sandboxes WHERE state IN ('creating', 'running')", 0, NULL, e);
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

	return db_exec(db, "INSERT INTO aasd_instances(id, host_uris) VALUES ($1, $2)"
	    " ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()", 2, p, NULL, e);
}
