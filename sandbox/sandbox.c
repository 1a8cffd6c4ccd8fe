/* sandbox.c - the sandbox service: its start and stop (the maintenance and
 * mover threads), and create (from the warm pool or a fresh boot), get,
 * list, destroy. The top of the service's files (sandbox_int.h): a row's
 * boot and end are the core's (sandbox_core.c). */
#include "sandbox/sandbox_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing/billing.h"
#include "billing/ledger.h"
#include "account/accounts.h"
#include "sandbox/reaper.h"
#include "sandbox/catalog.h"
#include "sandbox/hosts.h"
#include "base/keys.h"
#include "base/log.h"
#include "base/metrics.h"
#include "sandbox/settle.h"
#include "billing/price.h"
#include "base/utf8.h"
#include "base/work.h"
#include "sandbox/store.h"

/* The reaper's action for a sandbox it claimed; the claim recorded why
 * (expired, or its account was disabled), which the end keeps. */
static int
reap_destroy(void *ctx, const char *id, const char *host)
{
	struct err e;

	err_clear(&e);
	return sbx_finish_destroy(ctx, id, host, STORE_END_EXPIRED, &e);
}

/* The VM layer, given the part of the daemon's configuration it reads. */
static struct orch *
orch_open(const struct config *cfg, struct err *e)
{
	const struct orch_config oc = {
		.libvirt_uri = cfg->libvirt_uri,
		.virt = cfg->virt == CONFIG_VIRT_KVM ? ORCH_VIRT_KVM :
		    cfg->virt == CONFIG_VIRT_TCG     ? ORCH_VIRT_TCG :
						       ORCH_VIRT_AUTO,
		.image_dir = cfg->image_dir,
		.state_dir = cfg->state_dir,
		.qemu_user = cfg->qemu_user,
		.vm_uid_first = cfg->qemu_uids.first,
		.vm_uid_count = cfg->qemu_uids.count,
		.memory_overhead_mib = cfg->vm_memory_overhead_mib,
		.tb_cache_mib = cfg->tcg_tb_cache_mib,
		.boot_timeout_s = cfg->boot_timeout_s,
		.kvm_probe_timeout_s = cfg->kvm_probe_timeout_s,
		.net_allow = cfg->net_allow,
		.netguard_status = cfg->netguard_status,
		.console_max_bytes = (size_t)cfg->console_max_bytes,
		.bench_port = cfg->bench_port,
		.guest_kernel_args = cfg->guest_kernel_args,
		.boot_snapshots = cfg->boot_snapshots,
	};

	return orch_new(&oc, e);
}

struct sbx *
sbx_new(const struct sbx_env *env, struct err *e)
{
	struct sbx *s = calloc(1, sizeof(*s));

	if (s == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	s->env = *env;
	s->cfg = env->cfg;
	s->db = env->db;
	atomic_init(&s->stop, 0);
	atomic_init(&s->calls_stop, 0);
	pthread_mutex_init(&s->wake_lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	pthread_mutex_init(&s->cap_lock, NULL);
	pthread_mutex_init(&s->teardown_lock, NULL);
	if (key_random_hex(s->instance, sizeof(s->instance), 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		goto fail;
	}
	s->orch = orch_open(s->cfg, e);
	if (s->orch == NULL)
		goto fail;
	/* Before any VM boots: a network device only behind the rule. */
	if (sbx_net_init(s, e) < 0)
		goto fail;
	if (orch_net_rule_hash(s->orch, s->net_rule, sizeof(s->net_rule)) < 0) {
		err_set(e, ERR_INTERNAL, "the isolation rule does not fit its buffer");
		goto fail;
	}
	if (sbx_hosts_init(s, e) < 0)
		goto fail;
	s->teardown = work_new(SBX_TEARDOWN_THREADS, SBX_TEARDOWN_MAX, e);
	if (s->teardown == NULL)
		goto fail;
	{
		char csv[ORCH_MAX_HOSTS * 260];
		if (sbx_hosts_csv(s, csv, sizeof(csv)) < 0) {
			err_set(e, ERR_INVALID, "host list too long");
			goto fail;
		}
		s->reaper = reap_new(s->db, csv, s->instance, reap_destroy, s, e);
	}
	if (s->reaper == NULL)
		goto fail;
	atomic_store(s->env.reaper, s->reaper);
	if (pthread_create(&s->maint, NULL, sbx_maint_main, s) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start the sandbox maintenance thread");
		goto fail;
	}
	s->maint_started = 1;
	if (pthread_create(&s->mover, NULL, sbx_move_main, s) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start the sandbox mover thread");
		goto fail;
	}
	s->mover_started = 1;
	return s;
fail:
	sbx_free(s);
	return NULL;
}

void
sbx_stop_calls(struct sbx *s)
{
	if (s)
		atomic_store(&s->calls_stop, 1);
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
	if (s->mover_started)
		pthread_join(s->mover, NULL);
	if (s->reaper) {
		atomic_store(s->env.reaper, NULL);
		reap_free(s->reaper);
	}
	/* VMs of sandboxes destroyed just before the stop go first. */
	work_free(s->teardown);
	orch_free(s->orch);
	json_decref(s->capacity);
	pthread_mutex_destroy(&s->cap_lock);
	pthread_mutex_destroy(&s->teardown_lock);
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

/* ---- create ---- */

struct create_tx {
	struct sbx *s;
	struct store_new n;
	const char *size_asked; /* NULL: the default */
	char id[SBX_ID_LEN + 1];
	char host[STORE_HOST_MAX];
	char domain[64];
	int claimed;
	int64_t price;
	enum vm_net net;
	int net_ok;        /* a fork: networking can give a device now */
	char net_why[300]; /* and why not */
};

/* The ledger charge and the row's price, in the create transaction. */
static int
charge(PGconn *c, struct create_tx *t, struct err *e)
{
	if (bill_charge_create(c, t->n.account, t->id, t->n.size, t->n.timeout_min, t->price, e) <
	    0)
		return -1;
	return store_set_paid(c, t->id, t->price, t->n.timeout_min,
	    bill_cost(t->n.timeout_min, t->price), e);
}

/* A fork: on its snapshot's host, of its size and network. */
static int
fork_tx(PGconn *c, struct create_tx *t, struct err *e)
{
	const struct config *cfg = t->s->cfg;
	const struct cat_size *sz;
	struct store_snap sn;
	const char *snap = t->n.from_snapshot;

	if (store_conn_snap_read(c, t->n.account, snap, 0, &sn, e) < 0) {
		if (e->kind == ERR_NOT_FOUND) {
			err_clear(e);
			err_set_at(e, ERR_NOT_FOUND, "from_snapshot",
			    "from_snapshot: no snapshot %.40s in your account", snap);
		}
		return -1;
	}
	if (strcmp(sn.state, "ready") != 0) {
		err_set(e, ERR_CONFLICT,
		    "snapshot %s is still being taken; try again in a few"
		    " seconds",
		    snap);
		return -1;
	}
	if (strcmp(sn.image, orch_image_id(t->s->orch)) != 0) {
		err_set(e, ERR_CONFLICT,
		    "snapshot %s was taken on a guest image this service no"
		    " longer runs; it cannot start (delete it and take a new one)",
		    snap);
		return -1;
	}
	if ((sz = cat_find(sn.size)) == NULL) {
		err_set(e, ERR_INTERNAL, "snapshot %s has an unknown size %s", snap, sn.size);
		return -1;
	}
	if (t->size_asked && strcmp(t->size_asked, sz->name) != 0) {
		err_set_field(e, "size",
		    "size: snapshot %s is %s; a sandbox started from it is"
		    " too (leave size out)",
		    snap, sz->name);
		return -1;
	}
	t->n.size = sz->name;
	t->price = cat_price(cfg, sz);
	t->net = sbx_net_parse(sn.net);
	t->n.net = vm_net_name(t->net);
	if (t->net != VM_NET_NONE && !t->net_ok) {
		err_set_at(e, ERR_UNAVAILABLE, "from_snapshot",
		    "from_snapshot: snapshot %s has a network device, and sandbox networking is"
		    " unavailable on this server (%s)",
		    snap, t->net_why);
		return -1;
	}
	memcpy(t->id, "sbx-", 4);
	if (key_random_base36(t->id + 4, 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	orch_domain_name(t->id, t->domain, sizeof(t->domain));
	if (sbx_place_in(c, t->s, sn.host, sz->name, t->net, t->host, sizeof(t->host), &t->n, e) <
	    0) {
		if (e->kind == ERR_CAPACITY) {
			err_clear(e);
			err_set(e, ERR_CAPACITY,
			    "the host of snapshot %s has no room right now; try"
			    " again in %d s",
			    snap, HOSTS_RETRY_AFTER_S);
		}
		return -1;
	}
	t->n.domain = t->domain;
	if (store_insert_creating(c, t->id, &t->n, e) < 0)
		return -1;
	return charge(c, t, e);
}

static int
create_tx_fn(PGconn *c, void *arg, struct err *e)
{
	struct create_tx *t = arg;
	const struct config *cfg = t->s->cfg;
	long long live;
	int64_t balance;
	int claimed;

	/* The account row first, as on every money path: two creates of one
	 * account never interleave their count and insert. */
	if (bill_lock_balance(c, t->n.account, &balance, e) < 0 ||
	    /* A create that passed the key check before a disable. */
	    acct_check_enabled(c, t->n.account, e) < 0 ||
	    store_live_count(c, t->n.account, &live, e) < 0)
		return -1;
	if (live >= cfg->max_live_sandboxes) {
		err_set(e, ERR_LIMIT,
		    "you already have %lld live sandboxes (the limit is %d);"
		    " destroy one first",
		    live, cfg->max_live_sandboxes);
		return -1;
	}
	if (t->n.from_snapshot)
		return fork_tx(c, t, e);
	claimed = store_claim_warm(c, &t->n, t->id, t->host, e);
	if (claimed < 0)
		return -1;
	if (claimed) {
		t->claimed = 1;
		return charge(c, t, e);
	}
	/* Cold: the row exists before its VM does. */
	memcpy(t->id, "sbx-", 4);
	if (key_random_base36(t->id + 4, 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	orch_domain_name(t->id, t->domain, sizeof(t->domain));
	if (sbx_place(c, t->s, t->n.size, t->net, t->host, sizeof(t->host), &t->n, e) < 0) {
		/* Only hosts without a confirmed isolation rule have room: a
		 * sandbox that asked for no internet starts there without a
		 * network device (it says so), one that asked for it waits. */
		if (e->kind != ERR_CAPACITY || t->net != VM_NET_ISOLATED)
			return -1;
		err_clear(e);
		if (sbx_place(c, t->s, t->n.size, VM_NET_NONE, t->host, sizeof(t->host), &t->n, e) <
		    0)
			return -1;
		t->net = VM_NET_NONE;
		t->n.net = vm_net_name(VM_NET_NONE);
	}
	t->n.domain = t->domain;
	if (store_insert_creating(c, t->id, &t->n, e) < 0)
		return -1;
	/* Charged up front, in the transaction that makes the row. */
	return charge(c, t, e);
}

json_t *
sbx_create(struct sbx *s, const char *account, const struct sbx_create_req *req,
    const struct sbx_progress *pg, struct err *e)
{
	const struct config *cfg = s->cfg;
	const struct cat_size *size = cat_find(req->size ? req->size : "small");
	struct create_tx t;

	memset(&t, 0, sizeof(t));
	t.s = s;
	t.n.account = account;
	t.n.name = req->name;
	t.n.metadata = req->metadata ? req->metadata : "{}";
	t.n.owner = s->instance;
	t.n.minute_s = cfg->minute_s;
	t.n.timeout_min = req->timeout_min > 0 ? req->timeout_min : cfg->default_timeout_min;
	if (t.n.timeout_min > cfg->max_lifetime_min) {
		err_set_field(e, "timeout_minutes",
		    "timeout_minutes: at most %d (the maximum lifetime)", cfg->max_lifetime_min);
		return NULL;
	}
	if (size == NULL) {
		err_set_field(e, "size", "size: no size %.32s", req->size);
		return NULL;
	}
	t.n.size = size->name;
	t.size_asked = req->size;
	t.n.from_snapshot = req->from_snapshot;
	t.price = cat_price(cfg, size);
	/* A fork has its snapshot's network, whatever `internet` says
	 * (fork_tx): asked here, outside the transaction, whether a device can
	 * be given now. */
	if (req->from_snapshot)
		t.net_ok = sbx_net_available(s, t.net_why, sizeof(t.net_why));
	else if (sbx_net_for(s, req->internet, &t.net, e) < 0)
		return NULL;
	t.n.net = vm_net_name(t.net);
	if (orch_wait_ready(s->orch, 60000, e) < 0)
		return NULL;
	if (db_tx(s->db, create_tx_fn, &t, e) < 0)
		return NULL;
	/* Counted once committed: a rolled-back create charged nothing. */
	metrics_credits_charged(bill_cost(t.n.timeout_min, t.price));
	if (t.claimed) {
		if (pg && pg->fn)
			pg->fn(pg->ctx, 4, 4, "ready (pre-booted VM)");
		log_info("sandbox %s: claimed from the warm pool", t.id);
		sbx_expiry_changed(s);
	} else if (sbx_boot_row_from(s, t.id, t.host, t.n.size, t.net, req->from_snapshot, pg, e) <
	    0) {
		return NULL;
	}
	return store_sandbox_json(s->db, account, t.id, e);
}

/* ---- get / list ---- */

json_t *
sbx_get(struct sbx *s, const char *account, const char *id, struct err *e)
{
	struct store_row row;
	json_t *out, *cmds;
	struct vm_stats st;
	struct err ignore;

	if (store_load(s->db, account, id, &row, e) < 0)
		return NULL;
	if (strcmp(row.state, "running") == 0)
		sbx_refresh_commands(s, id, row.host);
	out = store_sandbox_json(s->db, account, id, e);
	if (out == NULL)
		return NULL;
	err_clear(&ignore);
	if (strcmp(row.state, "running") == 0 &&
	    orch_vm_stats(s->orch, row.host, id, &st, &ignore) == 0)
		json_object_set_new(out, "usage",
		    json_pack("{s:I, s:I, s:I}", "cpu_time_ms",
			(json_int_t)(st.cpu_time_ns / 1000000), "memory_kib",
			(json_int_t)st.memory_kib, "host_rss_kib", (json_int_t)st.rss_kib));
	cmds = store_cmd_recent_json(s->db, id, e);
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
	if (req->cursor &&
	    (strlen(req->cursor) != SBX_ID_LEN || strncmp(req->cursor, "sbx-", 4) != 0)) {
		err_set_field(e, "cursor", "cursor: not a cursor from list_sandboxes");
		return NULL;
	}
	return store_list_json(s->db, account, req->state, req->cursor,
	    req->limit > 0 ? req->limit : 20, e);
}

/* ---- destroy ---- */

json_t *
sbx_destroy(struct sbx *s, const char *account, const char *id, struct err *e)
{
	struct store_row row;

	if (store_load(s->db, account, id, &row, e) < 0)
		return NULL;
	/* Destroyed and failed sandboxes have nothing left to destroy. */
	if (strcmp(row.state, "destroyed") != 0 && strcmp(row.state, "failed") != 0) {
		if (store_mark_destroying(s->db, id, account, s->instance, STORE_END_DESTROYED, e) <
		    0)
			return NULL;
		if (sbx_destroy_detached(s, id, row.host, STORE_END_DESTROYED, e) < 0)
			return NULL;
	}
	json_t *out = store_sandbox_json(s->db, account, id, e);
	struct bill_settlement st;
	if (out && settle_sandbox(s->db, s->cfg->minute_s, id, 0, &st, e) == 0) {
		json_object_set_new(out, "minutes_used", json_integer(st.minutes_used));
		json_object_set_new(out, "charged", json_integer(st.charged));
		json_object_set_new(out, "refunded", json_integer(st.refunded));
		json_object_set_new(out, "balance", json_integer(st.balance));
	}
	return out;
}
