/* sandbox_maint.c - the maintenance thread: heartbeat, host polls,
 * reconcile, warm pool, snapshot expiry. It calls the core
 * (sandbox_core.c) and each feature's part of reconcile; only sandbox.c,
 * which starts the thread, is above it. */
#include "sandbox/sandbox_int.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sandbox/catalog.h"
#include "base/keys.h"
#include "base/log.h"
#include "base/clock.h"
#include "base/num.h"
#include "sandbox/hosts.h"

#define SBX_HEARTBEAT_S 2
#define SBX_OWNER_DEAD_S 10

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

	if (dash == NULL || num_parse_ll(dash + 1, &pid) < 0)
		return 0;
	return pid > 0 && pid <= INT_MAX && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static void
reconcile_domains(struct sbx *s, const char *host, char **ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct err e;
		int live;

		err_clear(&e);
		if (strncmp(ids[i], "sbx-", 4) != 0) {
			if (stale_helper_domain(ids[i]))
				err_ignore(orch_destroy(s->orch, host, ids[i], &e));
			continue;
		}
		if (store_is_live(s->db, ids[i], &live, &e) < 0)
			continue; /* database trouble: decide nothing */
		if (!live && !sbx_tearing_down(s, ids[i])) {
			log_warn("reconcile: VM %s has no live sandbox row; destroying it", ids[i]);
			err_ignore(orch_destroy(s->orch, host, ids[i], &e));
		}
	}
}

static void
reconcile_rows(struct sbx *s, const char *host, char **ids, size_t n)
{
	struct store_host_row *rows = NULL;
	size_t nrows = 0;
	struct err e;

	err_clear(&e);
	if (store_host_rows(s->db, host, s->instance, SBX_OWNER_DEAD_S, &rows, &nrows, &e) < 0)
		return;
	for (size_t i = 0; i < nrows; i++) {
		const char *id = rows[i].id;
		const char *state = rows[i].state;
		char domain[64];

		err_clear(&e);
		orch_domain_name(id, domain, sizeof(domain));
		if (strcmp(state, "running") == 0 && rows[i].moving_to[0]) {
			/* Its VM may be on either host until the move is recorded. */
			if (rows[i].mover_dead)
				sbx_reconcile_move(s, id, rows[i].moving_to, in_list(ids, n, id));
		} else if (strcmp(state, "running") == 0 && in_list(ids, n, id)) {
			char why[SBX_AGENT_WHY_MAX];

			/* A guest can break the protocol between calls (output
			 * nobody asked for): noticed here as well. */
			sbx_end_if_agent_fault(s, id, host, why, sizeof(why));
		} else if (strcmp(state, "running") == 0 && !in_list(ids, n, id)) {
			/* Listed before the row was read: check again. */
			if (orch_vm_exists(s->orch, host, id, &e) == 0)
				sbx_vm_lost(s, host, id);
		} else if ((strcmp(state, "pausing") == 0 || strcmp(state, "resuming") == 0) &&
		    rows[i].owner_dead) {
			int runs = in_list(ids, n, id) ? 1 : orch_vm_exists(s->orch, host, id, &e);

			if (runs >= 0)
				sbx_reconcile_pause(s, host, id, state, runs);
		} else if (strcmp(state, "snapshotting") == 0 && rows[i].owner_dead) {
			sbx_reconcile_snapshot(s, host, id);
		} else if (strcmp(state, "creating") == 0 && rows[i].owner_dead) {
			log_warn("reconcile: sandbox %s was left half-created; failing it", id);
			err_ignore(orch_destroy(s->orch, host, id, &e));
			sbx_mark_failed(s, id, STORE_END_HOST_LOST,
			    "the service stopped while the sandbox was starting");
		} else if (strcmp(state, "destroying") == 0 && rows[i].owner_dead) {
			/* Whoever claimed it recorded why; a row without a
			 * reason was a destroy. */
			err_ignore(sbx_finish_destroy(s, id, host, STORE_END_DESTROYED, &e));
		}
	}
	free(rows);
}

/* A directory whose sandbox ended a while ago (or never had a row) and
 * is not being torn down here. The wait leaves alone a teardown that
 * another aasd sharing the state directory has under way. */
static int
dir_unowned(void *ctx, const char *id)
{
	struct sbx *s = ctx;
	struct err e;
	int ended = 0;

	err_clear(&e);
	if (sbx_tearing_down(s, id) ||
	    store_ended_before(s->db, id, s->cfg->sweep_grace_s, &ended, &e) < 0)
		return 0;
	return ended;
}

int
sbx_reconcile(struct sbx *s, struct err *e)
{
	int rc = 0;

	/* A host that cannot be listed is skipped, not the ones after it;
	 * the first failure is reported. */
	for (size_t i = 0; i < orch_host_count(s->orch); i++) {
		const char *host = orch_host_uri_at(s->orch, i);
		char **ids = NULL;
		size_t n = 0;

		if (orch_list(s->orch, host, &ids, &n, e) < 0) {
			rc = -1;
			continue;
		}
		reconcile_domains(s, host, ids, n);
		reconcile_rows(s, host, ids, n);
		orch_ids_free(ids, n);
	}
	orch_sweep_dirs(s->orch, dir_unowned, s);
	return rc;
}

/* ---- warm pool ---- */

struct pool_tx {
	struct sbx *s;
	struct store_new n;
	char id[SBX_ID_LEN + 1];
	char host[STORE_HOST_MAX];
};

/* A warm VM's row, placed like any create: the pool takes no room a
 * tenant's create could not have. */
static int
pool_tx_fn(PGconn *c, void *arg, struct err *e)
{
	struct pool_tx *t = arg;

	if (sbx_place(c, t->s, t->n.size, sbx_net_parse(t->n.net), t->host, sizeof(t->host), &t->n,
		e) < 0)
		return -1;
	return store_insert_pool(c, t->id, &t->n, e);
}

static void
refill_pool(struct sbx *s)
{
	for (size_t i = 0; i < cat_count(); i++) {
		const struct cat_size *sz = cat_at(i);
		int want = s->cfg->warm_pool[i];
		enum vm_net net = sbx_net_pool(s);
		char domain[64], hosts[ORCH_MAX_HOSTS * 260], lit[ORCH_MAX_HOSTS * 270];
		long long have, stale;
		struct pool_tx t;
		struct err e;

		err_clear(&e);
		if (sbx_hosts_csv(s, hosts, sizeof(hosts)) < 0 ||
		    db_array_literal(hosts, lit, sizeof(lit)) < 0)
			return;
		/* Warm VMs with another network device than new ones get (the
		 * isolation rule came or went) are surplus. */
		if (store_pool_counts(s->db, sz->name, lit, vm_net_name(net), &have, &stale, &e) <
		    0)
			return;
		if (have > want || stale > 0) {
			/* The pool was made smaller: drop the newest surplus VM. */
			char surplus[SBX_ID_LEN + 1], host[STORE_HOST_MAX];
			if (store_pool_take_surplus(s->db, sz->name, lit, s->instance,
				vm_net_name(net), surplus, host, sizeof(host), &e) == 1) {
				log_info("warm pool: %s VM %s no longer needed", sz->name, surplus);
				err_ignore(sbx_finish_destroy(s, surplus, host,
				    STORE_END_POOL_SURPLUS, &e));
				return;
			}
			continue;
		}
		if (have >= want)
			continue;
		memset(&t, 0, sizeof(t));
		t.s = s;
		memcpy(t.id, "sbx-", 4);
		if (key_random_base36(t.id + 4, 16) < 0)
			return;
		orch_domain_name(t.id, domain, sizeof(domain));
		t.n.size = sz->name;
		t.n.domain = domain;
		t.n.owner = s->instance;
		t.n.timeout_min = 1;
		t.n.net = vm_net_name(net);
		if (db_tx(s->db, pool_tx_fn, &t, &e) < 0) {
			if (e.kind == ERR_CAPACITY)
				log_debug("warm pool: %s", e.msg);
			else
				log_warn("warm pool: %s", e.msg);
			return;
		}
		if (sbx_boot_row(s, t.id, t.host, sz->name, net, NULL, &e) == 0)
			log_info("warm pool: %s VM %s ready (%lld/%d)", sz->name, t.id, have + 1,
			    want);
		return; /* one per round, so the loop keeps its other duties */
	}
}

/* ---- thread ---- */

static void
heartbeat(struct sbx *s)
{
	struct err e;

	err_clear(&e);
	if (store_heartbeat(s->db, s->instance, s->cfg->libvirt_uri, &e) < 0)
		log_warn("heartbeat: %s", e.msg);
}

static void
update_capacity(struct sbx *s)
{
	const char *accel = orch_accel(s->orch);
	long long live, warm[3];
	struct err e;
	json_t *c, *fleet;
	char csv[ORCH_MAX_HOSTS * 260], lit[ORCH_MAX_HOSTS * 270];

	err_clear(&e);
	if (store_capacity(s->db, &live, warm, &e) < 0)
		return;
	c = json_pack("{s:o, s:s, s:I, s:I, s:{s:I, s:I, s:I}}", "accelerator",
	    accel ? json_string(accel) : json_null(), "accelerator_note",
	    orch_accel_reason(s->orch), "hosts", (json_int_t)orch_host_count(s->orch),
	    "live_sandboxes", (json_int_t)live, "warm_pool_ready", "small", (json_int_t)warm[0],
	    "medium", (json_int_t)warm[1], "large", (json_int_t)warm[2]);
	if (c == NULL)
		return;
	/* The fleet in aggregate: what fits now, never which host. */
	err_clear(&e);
	fleet = NULL;
	if (sbx_hosts_csv(s, csv, sizeof(csv)) == 0 && db_array_literal(csv, lit, sizeof(lit)) == 0)
		fleet = hosts_capacity_json(s->db, lit, &e);
	json_object_set_new(c, "room", fleet ? fleet : json_null());
	pthread_mutex_lock(&s->cap_lock);
	json_decref(s->capacity);
	s->capacity = c;
	pthread_mutex_unlock(&s->cap_lock);
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
		if (sbx_hosts_refresh(s, clock_ms()))
			sbx_end_host_lost(s);
		update_capacity(s);
		err_clear(&e);
		if (orch_wait_ready(s->orch, 0, &e) < 0)
			continue;
		if (s->cfg->reconcile_s > 0 && time(NULL) - last_reconcile >= s->cfg->reconcile_s) {
			sbx_net_refresh(s);
			if (sbx_reconcile(s, &e) < 0)
				log_warn("reconcile: %s", e.msg);
			last_reconcile = time(NULL);
		}
		refill_pool(s);
		sbx_snapshots_expire(s);
	} while (!sbx_sleep_or_stop(s, SBX_HEARTBEAT_S));
	return NULL;
}
