/* sandbox.c - sandbox lifecycle: create (from the warm pool or a fresh
 * boot), get, list, destroy. */
#include "service/sandbox_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing/billing.h"
#include "service/reaper.h"
#include "service/catalog.h"
#include "base/keys.h"
#include "base/log.h"
#include "base/metrics.h"
#include "billing/price.h"
#include "base/utf8.h"

#define SBX_COLUMNS \
	"id, coalesce(name, ''), state, size, accelerator, " \
	SBX_TS("created_at") ", " SBX_TS("ready_at") ", " SBX_TS("expires_at") ", " \
	SBX_TS("destroyed_at") ", failure_reason, metadata::text, host_uri, net"

/* The reaper's action for an expired sandbox it claimed. */
static int
reap_destroy(void *ctx, const char *id, const char *host)
{
	struct err e;

	err_clear(&e);
	return sbx_finish_destroy(ctx, id, host, "destroyed", NULL, &e);
}

struct sbx *
sbx_new(struct app *app, struct err *e)
{
	struct sbx *s = calloc(1, sizeof(*s));

	if (s == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	s->app = app;
	atomic_init(&s->stop, 0);
	pthread_mutex_init(&s->wake_lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	pthread_mutex_init(&s->cap_lock, NULL);
	if (key_random_hex(s->instance, sizeof(s->instance), 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		goto fail;
	}
	s->orch = orch_new(&app->cfg, e);
	if (s->orch == NULL)
		goto fail;
	/* Before any VM boots: a network device only behind the rule. */
	if (sbx_net_init(s, e) < 0)
		goto fail;
	s->reaper = reap_new(app->db, app->cfg.libvirt_uri, s->instance, reap_destroy, s, e);
	if (s->reaper == NULL)
		goto fail;
	atomic_store(&app->reaper, s->reaper);
	if (pthread_create(&s->maint, NULL, sbx_maint_main, s) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start the sandbox maintenance thread");
		goto fail;
	}
	s->maint_started = 1;
	return s;
fail:
	sbx_free(s);
	return NULL;
}

void
sbx_free(struct sbx *s)
{
	if (s == NULL)
		return;
	if (s->maint_started) {
		pthread_mutex_lock(&s->wake_lock);
		atomic_store(&s->stop, 1);
		pthread_cond_broadcast(&s->wake);
		pthread_mutex_unlock(&s->wake_lock);
		pthread_join(s->maint, NULL);
	}
	if (s->reaper) {
		atomic_store(&s->app->reaper, NULL);
		reap_free(s->reaper);
	}
	orch_free(s->orch);
	json_decref(s->capacity);
	pthread_mutex_destroy(&s->cap_lock);
	pthread_mutex_destroy(&s->wake_lock);
	pthread_cond_destroy(&s->wake);
	free(s);
}

json_t *
sbx_capacity(struct sbx *s)
{
	json_t *c;

	pthread_mutex_lock(&s->cap_lock);
	c = s->capacity ? json_deep_copy(s->capacity) : NULL;
	pthread_mutex_unlock(&s->cap_lock);
	if (c == NULL) {
		const char *accel = orch_accel(s->orch);
		c = json_pack("{s:o, s:I}", "accelerator", accel ? json_string(accel) : json_null(),
		    "hosts", (json_int_t)orch_host_count(s->orch));
	}
	return c;
}

struct orch *
sbx_orch(struct sbx *s)
{
	return s->orch;
}

int
sbx_load(struct sbx *s, const char *account, const char *id, struct sbx_row *row,
    struct err *e)
{
	const char *params[2] = { id, account };
	PGresult *r;

	r = db_query(s->app->db, account ?
	    "SELECT id, state, size, host_uri, net FROM sandboxes WHERE id = $1 AND account_id = $2" :
	    "SELECT id, state, size, host_uri, net FROM sandboxes WHERE id = $1",
	    account ? 2 : 1, params, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		PQclear(r);
		err_set_at(e, ERR_NOT_FOUND, "sandbox_id",
		    "sandbox_id: no sandbox %s in your account", id);
		return -1;
	}
	snprintf(row->id, sizeof(row->id), "%s", PQgetvalue(r, 0, 0));
	snprintf(row->state, sizeof(row->state), "%s", PQgetvalue(r, 0, 1));
	snprintf(row->size, sizeof(row->size), "%s", PQgetvalue(r, 0, 2));
	snprintf(row->host, sizeof(row->host), "%s", PQgetvalue(r, 0, 3));
	snprintf(row->net, sizeof(row->net), "%s", PQgetvalue(r, 0, 4));
	PQclear(r);
	return 0;
}

struct vm_host *
sbx_running(struct sbx *s, const char *account, const char *id, struct sbx_row *row,
    char *domain, size_t dn, struct err *e)
{
	struct vm_host *h;

	if (sbx_load(s, account, id, row, e) < 0)
		return NULL;
	if (strcmp(row->state, "running") != 0) {
		err_set(e, ERR_CONFLICT, "sandbox %s is %s, not running%s", id, row->state,
		    strcmp(row->state, "creating") == 0 ? " yet" : "; create a new one");
		return NULL;
	}
	h = orch_host_by_uri(s->orch, row->host);
	if (h == NULL)
		err_set(e, ERR_UNAVAILABLE, "the sandbox's host is not served by this instance");
	orch_domain_name(id, domain, dn);
	return h;
}

static json_t *
nullable(PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) || *PQgetvalue(r, row, col) == '\0' ?
	    json_null() : json_string(PQgetvalue(r, row, col));
}

/* An exit code column: null while unknown (or unreadable). */
json_t *
sbx_exit_code_json(const PGresult *r, int row, int col)
{
	long long v;
	struct err e;

	err_clear(&e);
	return db_get_ll(r, row, col, &v, &e) == 0 ? json_integer(v) : json_null();
}

/* One row of SBX_COLUMNS as the tools' "sandbox" object. */
static json_t *
row_to_json(PGresult *r, int i)
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
sbx_row_json(struct sbx *s, const char *account, const char *id, struct err *e)
{
	const char *params[2] = { id, account };
	PGresult *r = db_query(s->app->db, "SELECT " SBX_COLUMNS
	    " FROM sandboxes WHERE id = $1 AND account_id = $2", 2, params, e);
	json_t *out;

	if (r == NULL)
		return NULL;
	if (PQntuples(r) != 1) {
		PQclear(r);
		err_set_at(e, ERR_NOT_FOUND, "sandbox_id",
		    "sandbox_id: no sandbox %s in your account", id);
		return NULL;
	}
	out = row_to_json(r, 0);
	PQclear(r);
	return out;
}

/* ---- create ---- */

struct create_tx {
	struct sbx *s;
	const char *account;
	const char *size;
	int timeout_min;
	const char *name;
	char *metadata;
	char id[SBX_ID_LEN + 1];
	char host[512];
	int claimed;
	int64_t price;
	enum vm_net net;
};

static int
create_tx_fn(PGconn *c, void *arg, struct err *e)
{
	struct create_tx *t = arg;
	const struct config *cfg = &t->s->app->cfg;
	char tmo[16], minute[16], domain[64];
	const char *p[8];
	const char *net = vm_net_name(t->net);
	PGresult *r;
	long long live;
	int rc;

	/* One create at a time per account: the live count and the insert
	 * cannot interleave with another create's. */
	p[0] = t->account;
	r = db_conn_query(c, "SELECT count(*) FROM sandboxes WHERE account_id ="
	    " (SELECT id FROM accounts WHERE id = $1 FOR UPDATE)"
	    " AND state IN ('creating', 'running')", 1, p, e);
	if (r == NULL)
		return -1;
	rc = db_get_ll(r, 0, 0, &live, e);
	PQclear(r);
	if (rc < 0)
		return -1;
	if (live >= cfg->max_live_sandboxes) {
		err_set(e, ERR_LIMIT, "you already have %lld live sandboxes (the limit is %d);"
		    " destroy one first", live, cfg->max_live_sandboxes);
		return -1;
	}
	snprintf(tmo, sizeof(tmo), "%d", t->timeout_min);
	snprintf(minute, sizeof(minute), "%d", cfg->minute_s);
	/* A warm VM no account has touched, claimed in one statement. */
	p[0] = t->account;
	p[1] = t->size;
	p[2] = tmo;
	p[3] = t->name;
	p[4] = t->metadata;
	p[5] = minute;
	p[6] = net;
	r = db_conn_query(c, "UPDATE sandboxes SET account_id = $1, in_pool = false,"
	    " name = $4, metadata = $5::jsonb, timeout_minutes = $3::int, claimed_at = now(),"
	    " ready_at = now(), expires_at = now() + make_interval(secs => $3::int * $6::int)"
	    " WHERE id = (SELECT id FROM sandboxes WHERE in_pool AND state = 'running'"
	    "  AND size = $2 AND net = $7 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " RETURNING id, host_uri", 7, p, e);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 1) {
		snprintf(t->id, sizeof(t->id), "%s", PQgetvalue(r, 0, 0));
		snprintf(t->host, sizeof(t->host), "%s", PQgetvalue(r, 0, 1));
		t->claimed = 1;
		PQclear(r);
		return bill_charge_create(c, t->account, t->id, t->size, t->timeout_min,
		    t->price, e);
	}
	PQclear(r);
	/* Cold: the row exists before its VM does. */
	memcpy(t->id, "sbx-", 4);
	if (key_random_base36(t->id + 4, 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	orch_domain_name(t->id, domain, sizeof(domain));
	snprintf(t->host, sizeof(t->host), "%s", orch_pick_host(t->s->orch));
	p[0] = t->id;
	p[1] = t->account;
	p[2] = t->name;
	p[3] = t->metadata;
	p[4] = t->size;
	p[5] = t->host;
	p[6] = domain;
	p[7] = tmo;
	r = db_conn_query(c, "INSERT INTO sandboxes(id, account_id, name, metadata, size,"
	    " host_uri, domain_name, state, owner, timeout_minutes, net)"
	    " VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, 'creating', $9, $8::int, $10)",
	    10, (const char *[]){ p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
	    t->s->instance, net }, e);
	if (r == NULL)
		return -1;
	PQclear(r);
	/* Charged up front, in the transaction that makes the row. */
	return bill_charge_create(c, t->account, t->id, t->size, t->timeout_min, t->price, e);
}

json_t *
sbx_create(struct sbx *s, const char *account, const struct sbx_create_req *req,
    const struct sbx_progress *pg, struct err *e)
{
	const struct config *cfg = &s->app->cfg;
	struct create_tx t;
	json_t *out = NULL;

	memset(&t, 0, sizeof(t));
	t.s = s;
	t.account = account;
	t.size = req->size ? req->size : "small";
	t.timeout_min = req->timeout_min > 0 ? req->timeout_min : cfg->default_timeout_min;
	if (t.timeout_min > cfg->max_lifetime_min) {
		err_set_field(e, "timeout_minutes", "timeout_minutes: at most %d (the maximum lifetime)",
		    cfg->max_lifetime_min);
		return NULL;
	}
	if (cat_find(t.size) == NULL) {
		err_set_field(e, "size", "size: no size %.32s", t.size);
		return NULL;
	}
	t.name = req->name;
	t.price = cat_price(cfg, cat_find(t.size));
	t.metadata = strdup(req->metadata ? req->metadata : "{}");
	if (t.metadata == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (sbx_net_for(s, req->internet, &t.net, e) < 0)
		goto out;
	if (orch_wait_ready(s->orch, 60000, e) < 0)
		goto out;
	if (db_tx(s->app->db, create_tx_fn, &t, e) < 0)
		goto out;
	/* Counted once committed: a rolled-back create charged nothing. */
	metrics_credits_charged(bill_cost(t.timeout_min, t.price));
	if (t.claimed) {
		if (pg && pg->fn)
			pg->fn(pg->ctx, 4, 4, "ready (pre-booted VM)");
		log_info("sandbox %s: claimed from the warm pool", t.id);
		sbx_expiry_changed(s);
	} else if (sbx_boot_row(s, t.id, t.host, t.size, t.net, pg, e) < 0) {
		goto out;
	}
	out = sbx_row_json(s, account, t.id, e);
out:
	free(t.metadata);
	return out;
}

/* ---- get / list ---- */

static json_t *
commands_json(struct sbx *s, const char *id, struct err *e)
{
	const char *p[1] = { id };
	PGresult *r = db_query(s->app->db,
	    "SELECT id, command, background, state, exit_code, stdout_path, stderr_path, "
	    SBX_TS("started_at") ", " SBX_TS("ended_at")
	    " FROM sandbox_commands WHERE sandbox_id = $1 ORDER BY started_at DESC LIMIT 20",
	    1, p, e);
	json_t *arr;

	if (r == NULL)
		return NULL;
	arr = json_array();
	for (int i = 0; arr && i < PQntuples(r); i++) {
		const char *cmd = PQgetvalue(r, i, 1);
		json_t *cmdj = json_stringn(cmd, strlen(cmd) > 200 ? 200 : strlen(cmd));
		json_array_append_new(arr, json_pack("{s:s, s:o, s:b, s:s, s:o, s:s, s:s, s:s, s:o}",
		    "command_id", PQgetvalue(r, i, 0),
		    "command", cmdj ? cmdj : json_string("?"),
		    "background", strcmp(PQgetvalue(r, i, 2), "t") == 0,
		    "state", PQgetvalue(r, i, 3),
		    "exit_code", sbx_exit_code_json(r, i, 4),
		    "stdout_path", PQgetvalue(r, i, 5),
		    "stderr_path", PQgetvalue(r, i, 6),
		    "started_at", PQgetvalue(r, i, 7),
		    "ended_at", nullable(r, i, 8)));
	}
	PQclear(r);
	return arr;
}

json_t *
sbx_get(struct sbx *s, const char *account, const char *id, struct err *e)
{
	struct sbx_row row;
	json_t *out, *cmds;
	struct vm_stats st;
	char domain[64];
	struct err ignore;

	if (sbx_load(s, account, id, &row, e) < 0)
		return NULL;
	if (strcmp(row.state, "running") == 0)
		sbx_refresh_commands(s, id, row.host);
	out = sbx_row_json(s, account, id, e);
	if (out == NULL)
		return NULL;
	err_clear(&ignore);
	orch_domain_name(id, domain, sizeof(domain));
	struct vm_host *h = orch_host_by_uri(s->orch, row.host);
	if (strcmp(row.state, "running") == 0 && h &&
	    vm_stats(h, domain, &st, &ignore) == 0)
		json_object_set_new(out, "usage", json_pack("{s:I, s:I, s:I}",
		    "cpu_time_ms", (json_int_t)(st.cpu_time_ns / 1000000),
		    "memory_kib", (json_int_t)st.memory_kib,
		    "host_rss_kib", (json_int_t)st.rss_kib));
	cmds = commands_json(s, id, e);
	json_object_set_new(out, "commands", cmds ? cmds : json_array());
	json_t *ports = sbx_ports_json(s, id, e);
	json_object_set_new(out, "ports", ports ? ports : json_array());
	if (strcmp(row.state, "failed") == 0) {
		char *tail = orch_console_tail(s->orch, id, 4096);
		if (tail) {
			size_t n;
			char *clean = utf8_sanitize(tail, strlen(tail), &n, NULL);
			if (clean)
				json_object_set_new(out, "console_tail", json_string(clean));
			free(clean);
			free(tail);
		}
	}
	return out;
}

json_t *
sbx_list(struct sbx *s, const char *account, const struct sbx_list_req *req, struct err *e)
{
	const char *state = req->state;
	const char *cursor = req->cursor;
	int limit = req->limit > 0 ? req->limit : 20;
	char limbuf[16];
	const char *p[4];
	PGresult *r;
	json_t *arr, *out;
	int n;

	if (cursor && (strlen(cursor) != SBX_ID_LEN || strncmp(cursor, "sbx-", 4) != 0)) {
		err_set_field(e, "cursor", "cursor: not a cursor from list_sandboxes");
		return NULL;
	}
	snprintf(limbuf, sizeof(limbuf), "%d", limit + 1);
	p[0] = account;
	p[1] = state ? state : "";
	p[2] = cursor ? cursor : "";
	p[3] = limbuf;
	r = db_query(s->app->db, "SELECT " SBX_COLUMNS " FROM sandboxes WHERE account_id = $1"
	    " AND ($2 = '' OR state = $2 OR ($2 = 'live' AND state IN ('creating', 'running')))"
	    " AND ($3 = '' OR (created_at, id) < (SELECT created_at, id FROM sandboxes"
	    "  WHERE id = $3 AND account_id = $1))"
	    " ORDER BY created_at DESC, id DESC LIMIT $4::int", 4, p, e);
	if (r == NULL)
		return NULL;
	n = PQntuples(r);
	arr = json_array();
	for (int i = 0; arr && i < n && i < limit; i++)
		json_array_append_new(arr, row_to_json(r, i));
	out = json_pack("{s:o, s:o}", "sandboxes", arr,
	    "next_cursor", n > limit ? json_string(PQgetvalue(r, limit - 1, 0)) : json_null());
	PQclear(r);
	return out;
}

/* ---- destroy ---- */

json_t *
sbx_destroy(struct sbx *s, const char *account, const char *id, struct err *e)
{
	const char *p[3] = { id, account, s->instance };
	struct sbx_row row;
	PGresult *r;

	if (sbx_load(s, account, id, &row, e) < 0)
		return NULL;
	/* Destroyed and failed sandboxes have nothing left to destroy. */
	if (strcmp(row.state, "destroyed") != 0 && strcmp(row.state, "failed") != 0) {
		r = db_query(s->app->db, "UPDATE sandboxes SET state = 'destroying',"
		    " destroying_at = coalesce(destroying_at, now()), owner = $3"
		    " WHERE id = $1 AND account_id = $2"
		    " AND state IN ('creating', 'running', 'destroying')", 3, p, e);
		if (r == NULL)
			return NULL;
		PQclear(r);
		if (sbx_finish_destroy(s, id, row.host, "destroyed", NULL, e) < 0)
			return NULL;
	}
	json_t *out = sbx_row_json(s, account, id, e);
	struct bill_settlement st;
	if (out && bill_settle(s->app->db, s->app->cfg.minute_s, id,
	    strcmp(row.state, "failed") == 0 || strcmp(row.state, "creating") == 0, &st, e) == 0) {
		json_object_set_new(out, "minutes_used", json_integer(st.minutes_used));
		json_object_set_new(out, "charged", json_integer(st.charged));
		json_object_set_new(out, "refunded", json_integer(st.refunded));
		json_object_set_new(out, "balance", json_integer(st.balance));
	}
	return out;
}
