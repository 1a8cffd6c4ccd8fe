/* sandbox_pause.c - pause_sandbox and resume_sandbox, and reconcile's end
 * of a pause or resume whose aasd stopped (docs/sandboxes.md#pause-and-resume).
 *
 * A pause saves the VM's memory into its directory and ends the domain:
 * the host's memory and the sandbox's reservation there are free, its disk
 * and directory stay. Money moves once the VM is saved (the compute minutes
 * not started go back) and when it resumes (storage for the paused minutes,
 * compute until expiry, both in one transaction before the VM starts). */
#include "sandbox/sandbox_int.h"

#include <string.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"
#include "billing/billing.h"
#include "billing/ledger.h"
#include "billing/price.h"
#include "sandbox/catalog.h"
#include "sandbox/hosts.h"
#include "sandbox/place.h"
#include "vmm/guest.h"

/* ---- money ---- */

struct pause_tx {
	struct sbx *s;
	const char *id;
	const char *host; /* resume: where the VM starts again */
	const char *size, *net;
	long long refunded, charged, balance;
	int minutes;
};

/* pausing -> paused: the compute minutes not started go back; from now
 * the sandbox pays storage. */
static int
paused_tx(PGconn *c, void *arg, struct err *e)
{
	struct pause_tx *t = arg;
	int minute_s = t->s->cfg->minute_s;
	struct store_paid paid;
	char account[40];
	int64_t balance, refund = 0, used;

	if (store_account_of(c, t->id, account, sizeof(account), e) < 0 ||
	    bill_lock_balance(c, account, &balance, e) < 0 ||
	    store_lock_paid(c, t->id, account, &paid, e) < 0)
		return -1;
	if (strcmp(paid.state, "pausing") != 0) {
		err_set(e, ERR_CONFLICT, "sandbox %s is %s, not pausing", t->id, paid.state);
		return -1;
	}
	used = bill_minutes_used(paid.ran_ms, minute_s);
	if (used > paid.paid_minutes)
		used = paid.paid_minutes;
	if (bill_pause_refund(c, account, t->id, paid.pauses + 1, paid.paid_minutes - (int)used,
		paid.price, &refund, e) < 0 ||
	    store_conn_mark_paused(c, t->id, (int)used, refund, t->s->cfg->price_storage, e) < 0 ||
	    bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	t->refunded = refund;
	t->balance = balance;
	return 0;
}

/* paused -> resuming: room on its host again (the host rows after the
 * account, before the sandbox row: the lock order), the storage of the
 * paused minutes, and compute until expiry. */
static int
resuming_tx(PGconn *c, void *arg, struct err *e)
{
	struct pause_tx *t = arg;
	int minute_s = t->s->cfg->minute_s;
	const struct cat_size *sz = cat_find(t->size);
	struct place_need need;
	struct store_paid paid;
	char account[40], one[STORE_HOST_MAX + 8], got[STORE_HOST_MAX], tag[24];
	int64_t balance, storage = 0, compute = 0;
	int rc;

	if (sz == NULL) {
		err_set(e, ERR_INTERNAL, "unknown size %s", t->size);
		return -1;
	}
	if (store_account_of(c, t->id, account, sizeof(account), e) < 0 ||
	    bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	need.memory_mib = sz->memory_mib;
	need.vcpus = sz->vcpus;
	if (db_array_literal(t->host, one, sizeof(one)) < 0) {
		err_set(e, ERR_INTERNAL, "host name too long");
		return -1;
	}
	rc = hosts_reserve(c, one, &need, sbx_rule_for(t->s, sbx_net_parse(t->net)), got,
	    sizeof(got), e);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		err_set(e, ERR_CAPACITY,
		    "the host of sandbox %s has no room for it right now; try again in %d s", t->id,
		    HOSTS_RETRY_AFTER_S);
		return -1;
	}
	if (store_lock_paid(c, t->id, account, &paid, e) < 0)
		return -1;
	if (strcmp(paid.state, "paused") != 0) {
		err_set(e, ERR_CONFLICT, "sandbox %s is %s, not paused", t->id, paid.state);
		return -1;
	}
	if (paid.expires_in_ms <= 0) {
		err_set(e, ERR_CONFLICT, "sandbox %s has expired; it is being destroyed", t->id);
		return -1;
	}
	t->minutes = (int)bill_minutes_used(paid.expires_in_ms, minute_s);
	if (fmt_err(e, "ledger tag", tag, sizeof(tag), "r%d", paid.resumes + 1) < 0 ||
	    bill_charge_storage(c, account, t->id, tag,
		bill_minutes_used(paid.storage_ms, minute_s), paid.storage_price, &storage,
		e) < 0 ||
	    bill_charge_resume(c, account, t->id, paid.resumes + 1, t->minutes, paid.price,
		&compute, &balance, e) < 0 ||
	    store_conn_mark_resuming(c, t->id, t->s->instance, t->minutes, compute, storage, e) <
		0 ||
	    bill_lock_balance(c, account, &balance, e) < 0)
		return -1;
	t->charged = compute + storage;
	t->balance = balance;
	return 0;
}

/* resuming -> paused: the VM did not start; what the resume paid for
 * compute goes back (the storage up to then stays paid). */
static int
resume_undo_tx(PGconn *c, void *arg, struct err *e)
{
	struct pause_tx *t = arg;
	struct store_paid paid;
	char account[40];
	int64_t balance;

	if (store_account_of(c, t->id, account, sizeof(account), e) < 0 ||
	    bill_lock_balance(c, account, &balance, e) < 0 ||
	    store_lock_paid(c, t->id, account, &paid, e) < 0)
		return -1;
	if (strcmp(paid.state, "resuming") != 0)
		return 0; /* someone else finished it */
	return bill_resume_refund(c, account, t->id, paid.resumes, paid.resume_minutes,
		   paid.resume_charge, e) < 0 ||
		store_conn_resume_undo(c, t->id, e) < 0 ?
	    -1 :
	    0;
}

/* ---- the two moves ---- */

/* A move whose end could not be recorded (the database failed us) goes
 * to reconcile, which tells from the host where it stands. */
static void
hand_to_reconcile(struct sbx *s, const char *id)
{
	struct err e;

	err_clear(&e);
	if (store_disown(s->db, id, &e) < 0)
		log_warn("sandbox %s: left to reconcile after a restart: %s", id, e.msg);
}

/* A saved VM becomes a paused row; on failure the row stays pausing for
 * reconcile, which sees the saved file and finishes the same way. */
static int
finish_pause(struct sbx *s, const char *id, struct pause_tx *t, struct err *e)
{
	memset(t, 0, sizeof(*t));
	t->s = s;
	t->id = id;
	if (db_tx(s->db, paused_tx, t, e) < 0)
		return -1;
	sbx_expiry_changed(s);
	return 0;
}

/* After a failed restore: back to paused, the compute charge returned. */
static void
undo_resume(struct sbx *s, const char *id)
{
	struct pause_tx t = { .s = s, .id = id };
	struct err e;

	err_clear(&e);
	if (db_tx(s->db, resume_undo_tx, &t, &e) < 0) {
		log_warn("sandbox %s: its failed resume is not undone yet: %s", id, e.msg);
		hand_to_reconcile(s, id);
	}
}

/* The VM runs again: its clock is set, its previews are forwarded to the
 * new QEMU and the row says running. 0, or -1 when the row stopped
 * resuming meanwhile. */
static int
finish_resume(struct sbx *s, const char *id, const char *host, struct err *e)
{
	int ports[SBX_FORWARDS_MAX], host_ports[SBX_FORWARDS_MAX], won = 0;
	struct vm_host *h = orch_host_by_uri(s->orch, host);
	char domain[64];
	struct err ce;
	size_t n;

	/* Before anyone's next command: it stands where it was saved. */
	orch_domain_name(id, domain, sizeof(domain));
	err_clear(&ce);
	if (h == NULL || guest_set_clock(h, domain, &ce) < 0)
		log_warn("sandbox %s: its clock was not set after the resume: %s", id,
		    h ? ce.msg : "host unknown");
	n = sbx_forward_again(s, id, host, ports, host_ports, SBX_FORWARDS_MAX);

	if (store_resume_done(s->db, id, ports, host_ports, n, &won, e) < 0)
		return -1;
	if (!won) {
		err_set(e, ERR_CONFLICT, "sandbox %s stopped resuming meanwhile", id);
		return -1;
	}
	sbx_expiry_changed(s);
	return 0;
}

json_t *
sbx_pause(struct sbx *s, const char *account, const char *id, struct err *e)
{
	char host[STORE_HOST_MAX];
	struct pause_tx t;
	long long t0 = clock_ms(), bytes = 0;
	json_t *out;

	if (store_pause_begin(s->db, id, account, s->instance, host, sizeof(host), e) < 0)
		return NULL;
	if (orch_pause(s->orch, host, id, &bytes, e) < 0) {
		struct err ue;

		log_warn("sandbox %s: pause failed, it runs on: %s", id, e->msg);
		err_clear(&ue);
		if (store_pause_undo(s->db, id, &ue) < 0) {
			log_warn("sandbox %s: %s", id, ue.msg);
			hand_to_reconcile(s, id);
		}
		return NULL;
	}
	if (finish_pause(s, id, &t, e) < 0) {
		log_warn("sandbox %s: saved, not yet recorded as paused: %s", id, e->msg);
		hand_to_reconcile(s, id);
		return NULL;
	}
	log_info("sandbox %s: paused in %lld ms (%lld bytes of memory saved)", id, clock_ms() - t0,
	    bytes);
	out = store_sandbox_json(s->db, account, id, e);
	if (out != NULL) {
		json_object_set_new(out, "refunded", json_integer(t.refunded));
		json_object_set_new(out, "balance", json_integer(t.balance));
		json_object_set_new(out, "memory_bytes", json_integer(bytes));
	}
	return out;
}

json_t *
sbx_resume(struct sbx *s, const char *account, const char *id, struct err *e)
{
	struct store_row row;
	struct pause_tx t;
	long long t0 = clock_ms();
	json_t *out;

	if (store_load(s->db, account, id, &row, e) < 0)
		return NULL;
	if (strcmp(row.state, "paused") != 0) {
		err_set(e, ERR_CONFLICT, "sandbox %s is %s, not paused", id, row.state);
		return NULL;
	}
	memset(&t, 0, sizeof(t));
	t.s = s;
	t.id = id;
	t.host = row.host;
	t.size = row.size;
	t.net = row.net;
	if (db_tx(s->db, resuming_tx, &t, e) < 0)
		return NULL;
	if (orch_resume(s->orch, row.host, id, e) < 0) {
		log_warn("sandbox %s: resume failed, it stays paused: %s", id, e->msg);
		undo_resume(s, id);
		return NULL;
	}
	if (finish_resume(s, id, row.host, e) < 0) {
		log_warn("sandbox %s: running again, not yet recorded: %s", id, e->msg);
		hand_to_reconcile(s, id);
		return NULL;
	}
	log_info("sandbox %s: resumed in %lld ms", id, clock_ms() - t0);
	out = store_sandbox_json(s->db, account, id, e);
	if (out != NULL) {
		json_object_set_new(out, "charged", json_integer(t.charged));
		json_object_set_new(out, "balance", json_integer(t.balance));
	}
	return out;
}

/* ---- reconcile ---- */

void
sbx_reconcile_pause(struct sbx *s, const char *host, const char *id, const char *state, int runs)
{
	struct pause_tx t;
	struct err e;

	err_clear(&e);
	if (strcmp(state, "pausing") == 0) {
		if (!runs && orch_saved(s->orch, id)) {
			/* Saved before its aasd stopped: the pause happened. */
			log_warn("reconcile: sandbox %s was paused by an aasd that stopped", id);
			if (finish_pause(s, id, &t, &e) < 0)
				log_warn("reconcile: sandbox %s: %s", id, e.msg);
		} else if (runs) {
			/* The save did not finish: it runs on. */
			log_warn("reconcile: sandbox %s: its pause did not finish; it runs on", id);
			if (orch_continue(s->orch, host, id, &e) < 0 ||
			    store_pause_undo(s->db, id, &e) < 0)
				log_warn("reconcile: sandbox %s: %s", id, e.msg);
		} else {
			sbx_vm_lost(s, host, id);
		}
	} else if (strcmp(state, "resuming") == 0) {
		if (runs) {
			log_warn("reconcile: sandbox %s was resumed by an aasd that stopped", id);
			if (finish_resume(s, id, host, &e) < 0)
				log_warn("reconcile: sandbox %s: %s", id, e.msg);
		} else if (orch_saved(s->orch, id)) {
			log_warn(
			    "reconcile: sandbox %s: its resume did not finish; it stays paused",
			    id);
			undo_resume(s, id);
		} else {
			sbx_vm_lost(s, host, id);
		}
	}
}
