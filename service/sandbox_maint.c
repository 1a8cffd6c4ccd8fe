/* sandbox_maint.c - booting and destroying sandbox VMs, and the
 * maintenance thread: heartbeat, reconcile, warm pool. */
#include "service/sandbox_int.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/agent.h"
#include "billing/billing.h"
#include "service/catalog.h"
#include "base/keys.h"
#include "base/log.h"
#include "base/metrics.h"

#define SBX_HEARTBEAT_S 2
#define SBX_OWNER_DEAD_S 10

void
sbx_expiry_changed(struct sbx *s)
{
	struct err e;
	PGresult *r;

	/* Every aasd's reaper sleeps until the nearest expiry; wake them. */
	err_clear(&e);
	r = db_query(s->app->db, "SELECT pg_notify('aas_invalidate', 'e:')", 0, NULL, &e);
	PQclear(r);
}

/* A sandbox that failed to boot, or that the service lost, is refunded in
 * full; the settlement happens once whoever gets here first. */
static void
mark_failed(struct sbx *s, const char *id, const char *reason)
{
	const char *p[2] = { id, reason };
	struct bill_settlement st;
	struct err e;
	PGresult *r;

	err_clear(&e);
	r = db_query(s->app->db, "UPDATE sandboxes SET state = 'failed', failed_at = now(),"
	    " failure_reason = $2, owner = NULL, in_pool = false"
	    " WHERE id = $1 AND state IN ('creating', 'running', 'destroying')", 2, p, &e);
	if (r == NULL)
		log_error("sandbox %s: cannot record failure: %s", id, e.msg);
	PQclear(r);
	if (bill_settle(s->app->db, s->app->cfg.minute_s, id, 1, &st, &e) < 0)
		log_error("sandbox %s: settlement failed: %s", id, e.msg);
}

static void
boot_progress(void *ctx, double progress, double total, const char *message)
{
	const struct sbx_progress *pg = ctx;

	if (pg && pg->fn)
		pg->fn(pg->ctx, progress, total, message);
}

int
sbx_boot_row(struct sbx *s, const char *id, const char *host, const char *size,
    enum vm_net net, const struct sbx_progress *pg, struct err *e)
{
	const struct cat_size *sz = cat_find(size);
	const char *accel;
	PGresult *r;
	double t0;
	int won;

	if (sz == NULL) {
		err_set(e, ERR_INTERNAL, "unknown size %s", size);
		mark_failed(s, id, e->msg);
		return -1;
	}
	/* The rule may have gone since the create was accepted. */
	if (net != VM_NET_NONE && !sbx_net_available(s, NULL, 0)) {
		err_set(e, ERR_UNAVAILABLE, "sandbox networking became unavailable");
		mark_failed(s, id, e->msg);
		return -1;
	}
	t0 = metrics_now();
	if (orch_boot(s->orch, host, id, net, sz->vcpus, sz->memory_mib, boot_progress,
	    (void *)pg, e) < 0) {
		metrics_boot(0, 0);
		log_warn("sandbox %s: boot failed: %s", id, e->msg);
		mark_failed(s, id, e->msg);
		return -1;
	}
	metrics_boot(1, metrics_now() - t0);
	accel = orch_accel(s->orch);
	char minute[16];
	snprintf(minute, sizeof(minute), "%d", s->app->cfg.minute_s);
	const char *q[3] = { id, accel ? accel : "tcg", minute };
	/* Expiry counts from readiness; warm VMs get theirs when claimed. */
	r = db_query(s->app->db, "UPDATE sandboxes SET state = 'running', ready_at = now(),"
	    " accelerator = $2, owner = NULL,"
	    " expires_at = CASE WHEN in_pool THEN NULL"
	    "  ELSE now() + make_interval(secs => timeout_minutes * $3::int) END"
	    " WHERE id = $1 AND state = 'creating' RETURNING id", 3, q, e);
	won = r != NULL && PQntuples(r) == 1;
	PQclear(r);
	if (!won) {
		/* Destroyed while booting (or the database failed us): no VM
		 * may outlive its row's intent. */
		struct err ignore;
		err_clear(&ignore);
		sbx_finish_destroy(s, id, host, "destroyed", NULL, &ignore);
		err_set(e, ERR_CONFLICT, "sandbox %s was destroyed while it was starting", id);
		return -1;
	}
	log_info("sandbox %s: running on %s", id, host);
	sbx_expiry_changed(s);
	return 0;
}

int
sbx_finish_destroy(struct sbx *s, const char *id, const char *host,
    const char *final_state, const char *reason, struct err *e)
{
	const char *p[3] = { id, final_state, reason };
	PGresult *r;

	if (orch_destroy(s->orch, host, id, e) < 0) {
		/* The row stays 'destroying'; reconcile finishes it later. */
		log_warn("sandbox %s: destroy failed: %s", id, e->msg);
		return -1;
	}
	r = db_query(s->app->db, "UPDATE sandboxes SET state = $2, owner = NULL, in_pool = false,"
	    " destroyed_at = CASE WHEN $2 = 'destroyed' THEN now() END,"
	    " failed_at = CASE WHEN $2 = 'failed' THEN now() END,"
	    " failure_reason = coalesce($3, failure_reason)"
	    " WHERE id = $1 AND state IN ('creating', 'running', 'destroying')", 3, p, e);
	if (r == NULL)
		return -1;
	PQclear(r);
	log_info("sandbox %s: %s", id, final_state);
	/* Its forwards went with the VM. */
	sbx_ports_drop(s, id);
	/* Billing stops here: unused whole minutes go back. */
	struct bill_settlement st;
	if (bill_settle(s->app->db, s->app->cfg.minute_s, id, strcmp(final_state, "failed") == 0,
	    &st, e) < 0)
		return -1;
	return 0;
}

/* ---- background command state ---- */

void
sbx_refresh_commands(struct sbx *s, const char *id, const char *host)
{
	const char *p[1] = { id };
	struct vm_host *h = orch_host_by_uri(s->orch, host);
	char domain[64];
	struct err e;
	PGresult *r;

	if (h == NULL)
		return;
	err_clear(&e);
	orch_domain_name(id, domain, sizeof(domain));
	r = db_query(s->app->db, "SELECT id, guest_pid FROM sandbox_commands"
	    " WHERE sandbox_id = $1 AND state = 'running' AND guest_pid IS NOT NULL", 1, p, &e);
	for (int i = 0; r && i < PQntuples(r); i++) {
		struct agent_exec_status st;
		long long pid;

		err_clear(&e);
		if (db_get_ll(r, i, 1, &pid, &e) < 0 || pid <= 0 || pid > LONG_MAX)
			continue;
		if (agent_exec_status(h, domain, (long)pid, &st, &e) < 0) {
			/* The agent forgot it (restarted): the outcome is unknown. */
			const char *q[1] = { PQgetvalue(r, i, 0) };
			if (strstr(e.msg, "Invalid parameter") || strstr(e.msg, "PID")) {
				PGresult *u = db_query(s->app->db, "UPDATE sandbox_commands SET"
				    " state = 'failed', ended_at = now() WHERE id = $1", 1, q, &e);
				PQclear(u);
			}
			continue;
		}
		if (st.exited) {
			int code = st.signal ? 128 + st.signal : st.exit_code;
			char codes[16];
			const char *q[3] = { PQgetvalue(r, i, 0), codes,
				code == 124 ? "timed_out" : "exited" };
			snprintf(codes, sizeof(codes), "%d", code);
			PGresult *u = db_query(s->app->db, "UPDATE sandbox_commands SET state = $3,"
			    " exit_code = $2::int, ended_at = now() WHERE id = $1 AND state = 'running'",
			    3, q, &e);
			PQclear(u);
		}
		agent_exec_status_clear(&st);
	}
	PQclear(r);
}

/* ---- reconcile ---- */

static int
in_list(char **ids, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return 1;
	return 0;
}

/* Start-up helper domains (warm-up, KVM probe) carry the pid that made
 * them; one whose process is gone is left over from a crash. */
static int
stale_helper_domain(const char *id)
{
	const char *dash = strrchr(id, '-');
	long long pid = 0;

	if (dash == NULL || db_parse_ll(dash + 1, &pid) < 0)
		return 0;
	return pid > 0 && pid <= INT_MAX && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static void
reconcile_domains(struct sbx *s, const char *host, char **ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *p[2] = { ids[i], NULL };
		struct err e;
		PGresult *r;
		int orphan;

		err_clear(&e);
		if (strncmp(ids[i], "sbx-", 4) != 0) {
			if (stale_helper_domain(ids[i]))
				orch_destroy(s->orch, host, ids[i], &e);
			continue;
		}
		r = db_query(s->app->db, "SELECT state FROM sandboxes WHERE id = $1"
		    " AND state IN ('creating', 'running', 'destroying')", 1, p, &e);
		if (r == NULL)
			continue;   /* database trouble: decide nothing */
		orphan = PQntuples(r) == 0;
		PQclear(r);
		if (orphan) {
			log_warn("reconcile: VM %s has no live sandbox row; destroying it", ids[i]);
			orch_destroy(s->orch, host, ids[i], &e);
		}
	}
}

static void
reconcile_rows(struct sbx *s, const char *host, char **ids, size_t n)
{
	char dead[16];
	const char *p[2] = { host, dead };
	struct err e;
	PGresult *r;

	err_clear(&e);
	snprintf(dead, sizeof(dead), "%d", SBX_OWNER_DEAD_S);
	r = db_query(s->app->db, "SELECT s.id, s.state,"
	    " (s.owner IS NULL OR i.heartbeat_at IS NULL"
	    "  OR i.heartbeat_at < now() - make_interval(secs => $2::int))::text"
	    " FROM sandboxes s LEFT JOIN aasd_instances i ON i.id = s.owner"
	    " WHERE s.host_uri = $1 AND s.state IN ('creating', 'running', 'destroying')",
	    2, p, &e);
	for (int i = 0; r && i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		const char *state = PQgetvalue(r, i, 1);
		int owner_dead = strcmp(PQgetvalue(r, i, 2), "true") == 0;
		struct vm_host *h = orch_host_by_uri(s->orch, host);
		char domain[64];

		err_clear(&e);
		orch_domain_name(id, domain, sizeof(domain));
		if (strcmp(state, "running") == 0 && !in_list(ids, n, id)) {
			/* Listed before the row was read: check again. */
			if (h && vm_exists(h, domain, &e) == 0) {
				log_warn("reconcile: sandbox %s lost its VM", id);
				mark_failed(s, id, "the VM stopped unexpectedly (crash, power-off"
				    " from inside, or host restart)");
				orch_destroy(s->orch, host, id, &e);
			}
		} else if (strcmp(state, "creating") == 0 && owner_dead) {
			log_warn("reconcile: sandbox %s was left half-created; failing it", id);
			orch_destroy(s->orch, host, id, &e);
			mark_failed(s, id, "the service stopped while the sandbox was starting");
		} else if (strcmp(state, "destroying") == 0 && owner_dead) {
			sbx_finish_destroy(s, id, host, "destroyed", NULL, &e);
		}
	}
	PQclear(r);
}

int
sbx_reconcile(struct sbx *s, struct err *e)
{
	for (size_t i = 0; i < orch_host_count(s->orch); i++) {
		const char *host = orch_host_uri_at(s->orch, i);
		char **ids = NULL;
		size_t n = 0;

		if (orch_list(s->orch, host, &ids, &n, e) < 0)
			return -1;
		reconcile_domains(s, host, ids, n);
		reconcile_rows(s, host, ids, n);
		vm_names_free(ids, n);
	}
	return 0;
}

/* ---- warm pool ---- */

static void
refill_pool(struct sbx *s)
{
	for (size_t i = 0; i < cat_count(); i++) {
		const struct cat_size *sz = cat_at(i);
		int want = s->app->cfg.warm_pool[i];
		const char *host = orch_pick_host(s->orch);
		enum vm_net net = sbx_net_pool(s);
		char id[SBX_ID_LEN + 1] = "sbx-", domain[64];
		const char *p[6];
		struct err e;
		PGresult *r;
		long have;

		err_clear(&e);
		p[0] = sz->name;
		p[1] = host;
		p[2] = vm_net_name(net);
		/* Warm VMs with another network device than new ones get (the
		 * isolation rule came or went) are surplus. */
		r = db_query(s->app->db, "SELECT count(*) FILTER (WHERE net = $3),"
		    " count(*) FILTER (WHERE net <> $3 AND state = 'running') FROM sandboxes"
		    " WHERE in_pool AND state IN ('creating', 'running') AND size = $1"
		    " AND host_uri = $2", 3, p, &e);
		if (r == NULL)
			return;
		long long have_n = 0, stale = 0;
		int bad = db_get_ll(r, 0, 0, &have_n, &e) < 0 || db_get_ll(r, 0, 1, &stale, &e) < 0;
		PQclear(r);
		if (bad)
			return;
		have = (long)have_n;
		if (have > want || stale > 0) {
			/* The pool was made smaller: drop the newest surplus VM. */
			const char *q[4] = { sz->name, host, s->instance, vm_net_name(net) };
			r = db_query(s->app->db, "UPDATE sandboxes SET state = 'destroying',"
			    " destroying_at = now(), owner = $3 WHERE id = (SELECT id FROM sandboxes"
			    "  WHERE in_pool AND state = 'running' AND size = $1 AND host_uri = $2"
			    "  ORDER BY (net = $4), created_at DESC LIMIT 1 FOR UPDATE SKIP LOCKED)"
			    " RETURNING id", 4, q, &e);
			if (r != NULL && PQntuples(r) == 1) {
				char surplus[SBX_ID_LEN + 1];
				snprintf(surplus, sizeof(surplus), "%s", PQgetvalue(r, 0, 0));
				PQclear(r);
				log_info("warm pool: %s VM %s no longer needed", sz->name, surplus);
				sbx_finish_destroy(s, surplus, host, "destroyed", NULL, &e);
				return;
			}
			PQclear(r);
			continue;
		}
		if (have >= want)
			continue;
		if (key_random_base36(id + 4, 16) < 0)
			return;
		orch_domain_name(id, domain, sizeof(domain));
		p[0] = id;
		p[1] = sz->name;
		p[2] = host;
		p[3] = domain;
		p[4] = s->instance;
		p[5] = vm_net_name(net);
		r = db_query(s->app->db, "INSERT INTO sandboxes(id, in_pool, size, host_uri,"
		    " domain_name, state, owner, timeout_minutes, net)"
		    " VALUES ($1, true, $2, $3, $4, 'creating', $5, 1, $6)", 6, p, &e);
		if (r == NULL)
			return;
		PQclear(r);
		if (sbx_boot_row(s, id, host, sz->name, net, NULL, &e) == 0)
			log_info("warm pool: %s VM %s ready (%ld/%d)", sz->name, id, have + 1, want);
		return;   /* one per round, so the loop keeps its other duties */
	}
}

/* ---- thread ---- */

static void
heartbeat(struct sbx *s)
{
	const char *p[2] = { s->instance, s->app->cfg.libvirt_uri };
	struct err e;
	PGresult *r;

	err_clear(&e);
	r = db_query(s->app->db, "INSERT INTO aasd_instances(id, host_uris) VALUES ($1, $2)"
	    " ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()", 2, p, &e);
	PQclear(r);
}

static void
update_capacity(struct sbx *s)
{
	const char *accel = orch_accel(s->orch);
	struct err e;
	PGresult *r;
	json_t *c;

	err_clear(&e);
	r = db_query(s->app->db, "SELECT"
	    " count(*) FILTER (WHERE NOT in_pool AND state IN ('creating', 'running')),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'small'),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'medium'),"
	    " count(*) FILTER (WHERE in_pool AND state = 'running' AND size = 'large')"
	    " FROM sandboxes WHERE state IN ('creating', 'running')", 0, NULL, &e);
	if (r == NULL)
		return;
	long long n[4];
	for (int i = 0; i < 4; i++)
		if (db_get_ll(r, 0, i, &n[i], &e) < 0) {
			PQclear(r);
			return;
		}
	c = json_pack("{s:o, s:s, s:I, s:I, s:{s:I, s:I, s:I}}",
	    "accelerator", accel ? json_string(accel) : json_null(),
	    "accelerator_note", orch_accel_reason(s->orch),
	    "hosts", (json_int_t)orch_host_count(s->orch),
	    "live_sandboxes", (json_int_t)n[0],
	    "warm_pool_ready",
	    "small", (json_int_t)n[1], "medium", (json_int_t)n[2], "large", (json_int_t)n[3]);
	PQclear(r);
	if (c == NULL)
		return;
	pthread_mutex_lock(&s->cap_lock);
	json_decref(s->capacity);
	s->capacity = c;
	pthread_mutex_unlock(&s->cap_lock);
}

static int
sleep_or_stop(struct sbx *s, int seconds)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	pthread_mutex_lock(&s->wake_lock);
	while (!atomic_load(&s->stop))
		if (pthread_cond_timedwait(&s->wake, &s->wake_lock, &ts) != 0)
			break;
	pthread_mutex_unlock(&s->wake_lock);
	return atomic_load(&s->stop);
}

void *
sbx_maint_main(void *arg)
{
	struct sbx *s = arg;
	time_t last_reconcile = 0;
	struct err e;

	heartbeat(s);
	do {
		heartbeat(s);
		update_capacity(s);
		err_clear(&e);
		if (orch_wait_ready(s->orch, 0, &e) < 0)
			continue;
		if (s->app->cfg.reconcile_s > 0 &&
		    time(NULL) - last_reconcile >= s->app->cfg.reconcile_s) {
			sbx_net_refresh(s);
			if (sbx_reconcile(s, &e) < 0)
				log_warn("reconcile: %s", e.msg);
			last_reconcile = time(NULL);
		}
		refill_pool(s);
	} while (!sleep_or_stop(s, SBX_HEARTBEAT_S));
	return NULL;
}
