/* sandbox_snap.c - snapshot_sandbox, list_snapshots, delete_snapshot, the
 * snapshots' expiry, and reconcile's end of a snapshot whose aasd stopped
 * (docs/sandboxes.md#snapshots-and-forks). create_sandbox from_snapshot
 * is in sandbox.c.
 *
 * A snapshot stops the sandbox's VM for the time of a save (its memory) and
 * a copy (its disk), then restores it; the sandbox is 'snapshotting'
 * meanwhile and billed as running. The snapshot's storage for its whole
 * keep_minutes is charged when it is taken and the minutes not begun go
 * back when it is deleted early (docs/billing.md#snapshots). */
#include "sandbox/sandbox_int.h"

#include <string.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"
#include "billing/billing.h"
#include "billing/ledger.h"
#include "billing/price.h"
#include "account/accounts.h"
#include "vmm/guest.h"

/* ---- money ---- */

struct snap_tx {
	struct sbx *s;
	const char *account, *sandbox_id, *name, *host, *size, *net;
	char snap[STORE_SNAP_ID_LEN + 1];
	int keep_minutes;
	long long charged, balance;
	/* The end of one: */
	const char *reason;
	const int *ports, *host_ports;
	size_t nports;
	long long bytes, refunded;
};

/* running -> snapshotting, a 'saving' snapshot, its storage charged. */
static int
begin_tx(PGconn *c, void *arg, struct err *e)
{
	struct snap_tx *t = arg;
	const struct config *cfg = t->s->cfg;
	struct store_snap_new n;
	int64_t balance, cost = 0, after = 0;
	long long count;

	if (bill_lock_balance(c, t->account, &balance, e) < 0 ||
	    acct_check_enabled(c, t->account, e) < 0 ||
	    store_conn_snap_count(c, t->account, &count, e) < 0)
		return -1;
	if (count >= cfg->max_snapshots) {
		err_set(e, ERR_LIMIT,
		    "you already keep %lld snapshots (the limit is %d); delete one first", count,
		    cfg->max_snapshots);
		return -1;
	}
	memcpy(t->snap, "snp-", 4);
	if (key_random_base36(t->snap + 4, 16) < 0) {
		err_set(e, ERR_INTERNAL, "random generator failed");
		return -1;
	}
	/* The lock order: the sandbox row, the snapshot's, then the ledger. */
	if (store_conn_mark_snapshotting(c, t->sandbox_id, t->account, t->s->instance, e) < 0)
		return -1;
	cost = bill_cost(t->keep_minutes, cfg->price_storage);
	memset(&n, 0, sizeof(n));
	n.id = t->snap;
	n.account = t->account;
	n.name = t->name;
	n.sandbox_id = t->sandbox_id;
	n.host = t->host;
	n.size = t->size;
	n.net = t->net;
	n.image = orch_image_id(t->s->orch);
	n.keep_minutes = t->keep_minutes;
	n.storage_price = cfg->price_storage;
	n.charged = cost;
	if (store_conn_snap_insert(c, &n, e) < 0 ||
	    bill_charge_snapshot(c, t->account, t->snap, t->keep_minutes, cfg->price_storage, &cost,
		&after, e) < 0 ||
	    bill_lock_balance(c, t->account, &after, e) < 0)
		return -1;
	t->charged = cost;
	t->balance = after;
	return 0;
}

/* The minutes of `sn` not begun, and what they cost. */
static long long
unused_refund(const struct store_snap *sn, int minute_s, int *minutes)
{
	/* Whole minutes not begun: a begun one is kept. */
	long long left = sn->left_ms / (minute_s * 1000LL);

	if (left > sn->keep_minutes)
		left = sn->keep_minutes;
	*minutes = (int)left;
	return sn->keep_minutes > 0 ? sn->charged * left / sn->keep_minutes : 0;
}

/* A snapshot ends: `reason`, the unused minutes back (all of them when it
 * failed), and the sandbox, when it was snapshotting, running again. */
static int
end_tx(PGconn *c, void *arg, struct err *e)
{
	struct snap_tx *t = arg;
	struct store_snap sn;
	int64_t balance;
	long long refund;
	int minutes = 0;

	if (bill_lock_balance(c, t->account, &balance, e) < 0)
		return -1;
	if (t->sandbox_id &&
	    store_conn_snap_sandbox_back(c, t->sandbox_id, t->ports, t->host_ports, t->nports, e) <
		0)
		return -1;
	if (store_conn_snap_read(c, t->account, t->snap, 1, &sn, e) < 0) {
		/* Ended by someone else meanwhile: nothing to give back. */
		if (e->kind != ERR_NOT_FOUND)
			return -1;
		err_clear(e);
		return 0;
	}
	if (strcmp(t->reason, "failed") == 0) {
		refund = sn.charged;
		minutes = sn.keep_minutes;
	} else {
		refund = unused_refund(&sn, t->s->cfg->minute_s, &minutes);
	}
	if (bill_snapshot_refund(c, t->account, t->snap, minutes, refund, e) < 0 ||
	    store_conn_snap_end(c, t->snap, t->reason, refund, e) < 0 ||
	    bill_lock_balance(c, t->account, &balance, e) < 0)
		return -1;
	t->refunded = refund;
	t->balance = balance;
	return 0;
}

/* snapshotting -> running with a ready snapshot. */
static int
ready_tx(PGconn *c, void *arg, struct err *e)
{
	struct snap_tx *t = arg;
	int64_t balance;

	return bill_lock_balance(c, t->account, &balance, e) < 0 ||
		store_conn_snap_sandbox_back(c, t->sandbox_id, t->ports, t->host_ports, t->nports,
		    e) < 0 ||
		store_conn_snap_ready(c, t->snap, t->bytes, e) < 0 ?
	    -1 :
	    0;
}

static int
back_tx(PGconn *c, void *arg, struct err *e)
{
	struct snap_tx *t = arg;

	return store_conn_snap_sandbox_back(c, t->sandbox_id, NULL, NULL, 0, e);
}

/* ---- taking one ---- */

/* A VM restored on a new QEMU: its clock set, its previews forwarded to
 * the new QEMU (into t's port lists). */
static void
after_restart(struct sbx *s, const char *id, const char *host, int *ports, int *host_ports,
    struct snap_tx *t)
{
	struct vm_host *h = orch_host_by_uri(s->orch, host);
	char domain[64];
	struct err ce;

	orch_domain_name(id, domain, sizeof(domain));
	err_clear(&ce);
	if (h == NULL || guest_set_clock(h, domain, &ce) < 0)
		log_warn("sandbox %s: its clock was not set after the snapshot: %s", id,
		    h ? ce.msg : "host unknown");
	t->nports = sbx_forward_again(s, id, host, ports, host_ports, SBX_FORWARDS_MAX);
	t->ports = ports;
	t->host_ports = host_ports;
}

/* A smaller saved state restores faster: the guest's clean page cache
 * goes first (about a third of a fresh small sandbox's). Best effort. */
static void
drop_caches(struct sbx *s, const char *id, const char *host)
{
	struct vm_host *h = orch_host_by_uri(s->orch, host);
	char domain[64];
	struct err e;

	orch_domain_name(id, domain, sizeof(domain));
	err_clear(&e);
	if (h != NULL && guest_drop_caches(h, domain, &e) < 0)
		log_debug("sandbox %s: page cache kept: %s", id, e.msg);
}

/* The snapshot failed: money back, the sandbox running (or lost). */
static void
fail_snapshot(struct sbx *s, struct snap_tx *t, int vm_gone)
{
	struct err e;

	t->reason = "failed";
	err_clear(&e);
	if (db_tx(s->db, end_tx, t, &e) < 0) {
		log_warn("sandbox %s: its failed snapshot %s is not undone yet: %s", t->sandbox_id,
		    t->snap, e.msg);
		if (store_snap_disown(s->db, t->sandbox_id, &e) < 0)
			log_warn("sandbox %s: %s", t->sandbox_id, e.msg);
		return;
	}
	if (vm_gone)
		sbx_vm_lost(s, t->host, t->sandbox_id);
}

json_t *
sbx_snapshot(struct sbx *s, const char *account, const struct sbx_snapshot_req *req, struct err *e)
{
	const struct config *cfg = s->cfg;
	int ports[SBX_FORWARDS_MAX], host_ports[SBX_FORWARDS_MAX], restarted = 0;
	struct store_row row;
	struct snap_tx t;
	long long t0 = clock_ms();
	struct err ve;
	json_t *out;

	if (cfg->max_snapshots == 0) {
		err_set(e, ERR_UNAVAILABLE, "snapshots are turned off on this service");
		return NULL;
	}
	if (req->keep_minutes > cfg->snapshot_max_keep_min) {
		err_set_field(e, "keep_minutes", "keep_minutes: at most %d",
		    cfg->snapshot_max_keep_min);
		return NULL;
	}
	if (store_load(s->db, account, req->sandbox_id, &row, e) < 0)
		return NULL;
	if (strcmp(row.state, "running") != 0) {
		store_wrong_state(s->db, req->sandbox_id, account, "running", e);
		return NULL;
	}
	memset(&t, 0, sizeof(t));
	t.s = s;
	t.account = account;
	t.sandbox_id = req->sandbox_id;
	t.name = req->name;
	t.host = row.host;
	t.size = row.size;
	t.net = row.net;
	t.keep_minutes = req->keep_minutes > 0 ? req->keep_minutes : cfg->snapshot_keep_min;
	if (db_tx(s->db, begin_tx, &t, e) < 0)
		return NULL;
	drop_caches(s, req->sandbox_id, row.host);
	if (orch_snapshot(s->orch, row.host, req->sandbox_id, t.snap, &t.bytes, &restarted, e) <
	    0) {
		log_warn("sandbox %s: snapshot %s failed: %s", req->sandbox_id, t.snap, e->msg);
		if (restarted)
			after_restart(s, req->sandbox_id, row.host, ports, host_ports, &t);
		err_clear(&ve);
		fail_snapshot(s, &t,
		    !restarted && orch_vm_exists(s->orch, row.host, req->sandbox_id, &ve) == 0);
		return NULL;
	}
	after_restart(s, req->sandbox_id, row.host, ports, host_ports, &t);
	if (db_tx(s->db, ready_tx, &t, e) < 0) {
		log_warn("sandbox %s: snapshot %s taken, not yet recorded: %s", req->sandbox_id,
		    t.snap, e->msg);
		if (store_snap_disown(s->db, req->sandbox_id, &ve) < 0)
			log_warn("sandbox %s: %s", req->sandbox_id, ve.msg);
		return NULL;
	}
	log_info("sandbox %s: snapshot %s taken in %lld ms (%lld bytes)", req->sandbox_id, t.snap,
	    clock_ms() - t0, t.bytes);
	out = store_snap_json(s->db, account, t.snap, e);
	if (out != NULL)
		json_object_set_new(out, "balance", json_integer(t.balance));
	return out;
}

/* ---- listing and deleting ---- */

json_t *
sbx_snapshot_list(struct sbx *s, const char *account, struct err *e)
{
	json_t *arr = store_snap_list_json(s->db, account, e);

	return arr ? json_pack("{s:o, s:i}", "snapshots", arr, "limit", s->cfg->max_snapshots) :
		     NULL;
}

/* Ends snapshot `snap` of `account` for `reason` and removes its files. */
static int
end_snapshot(struct sbx *s, const char *account, const char *snap, const char *reason,
    struct snap_tx *t, struct err *e)
{
	memset(t, 0, sizeof(*t));
	t->s = s;
	t->account = account;
	t->reason = reason;
	if (fmt_err(e, "snapshot id", t->snap, sizeof(t->snap), "%s", snap) < 0 ||
	    db_tx(s->db, end_tx, t, e) < 0)
		return -1;
	/* The row says deleted first: a fork never starts from a file
	 * going away. */
	orch_snapshot_delete(s->orch, snap);
	return 0;
}

json_t *
sbx_snapshot_delete(struct sbx *s, const char *account, const char *snap, struct err *e)
{
	struct snap_tx t;
	json_t *out;

	/* Another account's id, or one already deleted: not found. */
	out = store_snap_json(s->db, account, snap, e);
	if (out == NULL)
		return NULL;
	if (strcmp(json_string_value(json_object_get(out, "state")), "deleted") == 0) {
		json_decref(out);
		store_snap_not_found(snap, e);
		return NULL;
	}
	if (strcmp(json_string_value(json_object_get(out, "state")), "saving") == 0) {
		json_decref(out);
		err_set(e, ERR_CONFLICT,
		    "snapshot %s is still being taken; try again in a few"
		    " seconds",
		    snap);
		return NULL;
	}
	json_decref(out);
	if (end_snapshot(s, account, snap, "deleted", &t, e) < 0)
		return NULL;
	log_info("snapshot %s: deleted (%lld micro-USD back)", snap, t.refunded);
	return json_pack("{s:s, s:b, s:I, s:I}", "snapshot_id", snap, "deleted", 1, "refunded",
	    (json_int_t)t.refunded, "balance", (json_int_t)t.balance);
}

#define SNAP_EXPIRE_BATCH 32

void
sbx_snapshots_expire(struct sbx *s)
{
	struct store_snap_due due[SNAP_EXPIRE_BATCH];
	struct snap_tx t;
	struct err e;
	size_t n = 0;

	err_clear(&e);
	if (store_snap_due(s->db, due, SNAP_EXPIRE_BATCH, &n, &e) < 0) {
		log_warn("snapshots: cannot list expired ones: %s", e.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		err_clear(&e);
		if (end_snapshot(s, due[i].account, due[i].id, "expired", &t, &e) < 0)
			log_warn("snapshot %s: not expired yet: %s", due[i].id, e.msg);
		else
			log_info("snapshot %s: expired", due[i].id);
	}
}

/* ---- reconcile ---- */

void
sbx_reconcile_snapshot(struct sbx *s, const char *host, const char *id)
{
	int ports[SBX_FORWARDS_MAX], host_ports[SBX_FORWARDS_MAX], kept = 0, restarted = 0;
	struct store_snap sn;
	struct snap_tx t;
	struct err e;
	int rc;

	err_clear(&e);
	memset(&t, 0, sizeof(t));
	t.s = s;
	t.sandbox_id = id;
	t.host = host;
	rc = store_snap_saving(s->db, id, &sn, &e);
	if (rc < 0) {
		log_warn("reconcile: sandbox %s: %s", id, e.msg);
		return;
	}
	if (rc == 0) {
		/* No snapshot under way (each move records both rows at once). */
		if (db_tx(s->db, back_tx, &t, &e) < 0)
			log_warn("reconcile: sandbox %s: %s", id, e.msg);
		return;
	}
	t.account = sn.account;
	if (fmt_err(&e, "snapshot id", t.snap, sizeof(t.snap), "%s", sn.id) < 0) {
		log_warn("reconcile: sandbox %s: %s", id, e.msg);
		return;
	}
	if (orch_snapshot_recover(s->orch, host, id, sn.id, &kept, &restarted, &e) < 0) {
		if (e.kind == ERR_NOT_FOUND) {
			fail_snapshot(s, &t, 1);
			return;
		}
		log_warn("reconcile: sandbox %s: snapshot %s: %s", id, sn.id, e.msg);
		return;
	}
	log_warn("reconcile: sandbox %s: snapshot %s by an aasd that stopped %s", id, sn.id,
	    kept ? "was whole" : "did not finish");
	if (restarted)
		after_restart(s, id, host, ports, host_ports, &t);
	if (!kept) {
		fail_snapshot(s, &t, 0);
		return;
	}
	orch_snapshot_whole(s->orch, sn.id, &t.bytes);
	if (db_tx(s->db, ready_tx, &t, &e) < 0)
		log_warn("reconcile: sandbox %s: %s", id, e.msg);
}
