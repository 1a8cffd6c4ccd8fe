/* sandbox_maint.c - booting and destroying sandbox VMs, and the
 * maintenance thread: heartbeat, reconcile, warm pool. */
#include "sandbox/sandbox_int.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/guest.h"
#include "billing/billing.h"
#include "sandbox/catalog.h"
#include "base/keys.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/clock.h"
#include "base/work.h"
#include "base/num.h"
#include "sandbox/hosts.h"
#include "sandbox/settle.h"

#define SBX_HEARTBEAT_S 2
#define SBX_OWNER_DEAD_S 10

void
sbx_expiry_changed(struct sbx *s)
{
	struct err e;

	/* Every aasd's reaper sleeps until the nearest expiry; wake them. */
	err_clear(&e);
	if (store_expiry_changed(s->db, &e) < 0)
		log_warn("cannot wake the expiry reapers: %s", e.msg);
}

/* A sandbox that failed to boot, or whose VM stopped, ends as failed for
 * `end` and is settled once, whoever gets here first: in full when it
 * never became ready, else up to now, when the end was seen. */
static void
mark_failed(struct sbx *s, const char *id, enum store_end end, const char *reason)
{
	int never_ready = end == STORE_END_BOOT_FAILED || end == STORE_END_HOST_LOST;
	struct bill_settlement st;
	struct err e;

	err_clear(&e);
	if (settle_end(s->db, s->cfg->minute_s, id, "failed", end, reason, never_ready, &st, &e) <
	    0)
		log_error("sandbox %s: cannot record its failure and settle: %s", id, e.msg);
	sbx_ended(s, id);
}

static void
boot_progress(void *ctx, double progress, double total, const char *message)
{
	const struct sbx_progress *pg = ctx;

	if (pg && pg->fn)
		pg->fn(pg->ctx, progress, total, message);
}

int
sbx_boot_row(struct sbx *s, const char *id, const char *host, const char *size, enum vm_net net,
    const struct sbx_progress *pg, struct err *e)
{
	return sbx_boot_row_from(s, id, host, size, net, NULL, pg, e);
}

/* A VM from snapshot `snap`: restored, then given an identity of its own
 * before anyone's first command. */
static int
boot_from_snapshot(struct sbx *s, const char *id, const char *host, const char *snap,
    const struct sbx_progress *pg, struct err *e)
{
	struct vm_host *h;
	char domain[64];
	struct err ignore;

	if (orch_boot_snapshot(s->orch, host, id, snap, boot_progress, (void *)pg, e) < 0)
		return -1;
	orch_domain_name(id, domain, sizeof(domain));
	h = orch_host_by_uri(s->orch, host);
	if (h == NULL || guest_new_identity(h, domain, e) < 0) {
		if (h == NULL)
			err_set(e, ERR_UNAVAILABLE, "host %s is gone", host);
		err_clear(&ignore);
		orch_destroy(s->orch, host, id, &ignore);
		return -1;
	}
	return 0;
}

int
sbx_boot_row_from(struct sbx *s, const char *id, const char *host, const char *size,
    enum vm_net net, const char *snap, const struct sbx_progress *pg, struct err *e)
{
	const struct cat_size *sz = cat_find(size);
	enum orch_booted how = ORCH_BOOTED_COLD;
	const char *accel;
	double t0;
	int won = 0;

	if (sz == NULL) {
		err_set(e, ERR_INTERNAL, "unknown size %s", size);
		mark_failed(s, id, STORE_END_BOOT_FAILED, e->msg);
		return -1;
	}
	/* The rule may have gone since the create was accepted. */
	if (net != VM_NET_NONE && !sbx_net_available(s, NULL, 0)) {
		err_set(e, ERR_UNAVAILABLE, "sandbox networking became unavailable");
		mark_failed(s, id, STORE_END_BOOT_FAILED, e->msg);
		return -1;
	}
	sbx_host_storage(s, host);
	if (snap == NULL && s->cfg->boot_snapshots)
		sbx_host_spare(s, host, sz);
	t0 = metrics_now();
	if (snap ? boot_from_snapshot(s, id, host, snap, pg, e) < 0 :
		   orch_boot(s->orch, host, id, net, sz->vcpus, sz->memory_mib, boot_progress,
		       (void *)pg, &how, e) < 0) {
		metrics_boot(0, 0);
		log_warn("sandbox %s: boot failed: %s", id, e->msg);
		mark_failed(s, id, STORE_END_BOOT_FAILED, e->msg);
		return -1;
	}
	metrics_boot(1, metrics_now() - t0);
	accel = orch_accel(s->orch);
	if (store_mark_running(s->db, id, accel ? accel : "tcg",
		how == ORCH_BOOTED_SNAPSHOT ? "image_snapshot" : NULL, s->cfg->minute_s, &won,
		e) < 0)
		won = 0;
	if (!won) {
		/* Destroyed while booting (or the database failed us): no VM
		 * may outlive its row's intent. */
		struct err ignore;
		err_clear(&ignore);
		sbx_finish_destroy(s, id, host, STORE_END_DESTROYED, &ignore);
		err_set(e, ERR_CONFLICT, "sandbox %s was destroyed while it was starting", id);
		return -1;
	}
	log_info("sandbox %s: running on %s", id, host);
	sbx_expiry_changed(s);
	return 0;
}

/* A sandbox whose VM is gone or out of reach: billing stops with the end,
 * in one transaction (unused whole minutes go back, all of them when it
 * never became ready), and its forwards go. `how` ends the log line. */
static int
settle_destroyed(struct sbx *s, const char *id, enum store_end end, const char *reason,
    const char *how, struct err *e)
{
	struct bill_settlement st;

	if (settle_end(s->db, s->cfg->minute_s, id, "destroyed", end, reason, 0, &st, e) < 0)
		return -1;
	log_info("sandbox %s: destroyed (%s)%s", id, store_end_name(end), how);
	sbx_ended(s, id);
	sbx_ports_drop(s, id);
	return 0;
}

static int
finish_destroy(struct sbx *s, const char *id, const char *host, enum store_end end,
    const char *reason, struct err *e)
{
	if (orch_destroy(s->orch, host, id, e) < 0) {
		/* The row stays 'destroying'; reconcile finishes it later. */
		log_warn("sandbox %s: destroy failed: %s", id, e->msg);
		return -1;
	}
	/* Its forwards went with the VM. */
	return settle_destroyed(s, id, end, reason, "", e);
}

int
sbx_finish_destroy(struct sbx *s, const char *id, const char *host, enum store_end end,
    struct err *e)
{
	return finish_destroy(s, id, host, end, NULL, e);
}

/* ---- teardown after the answer ---- */

struct teardown {
	struct sbx *s;
	char id[SBX_ID_LEN + 1];
	char host[STORE_HOST_MAX];
	long long answered_ms;
};

/* Takes a slot for id; 0 when every slot is taken. */
static int
tearing_add(struct sbx *s, const char *id)
{
	int ok = 0;

	pthread_mutex_lock(&s->teardown_lock);
	for (size_t i = 0; i < SBX_TEARDOWN_MAX && !ok; i++)
		if (s->tearing[i][0] == '\0') {
			snprintf(s->tearing[i], sizeof(s->tearing[i]), "%s", id);
			ok = 1;
		}
	pthread_mutex_unlock(&s->teardown_lock);
	return ok;
}

static void
tearing_remove(struct sbx *s, const char *id)
{
	pthread_mutex_lock(&s->teardown_lock);
	for (size_t i = 0; i < SBX_TEARDOWN_MAX; i++)
		if (strcmp(s->tearing[i], id) == 0)
			s->tearing[i][0] = '\0';
	pthread_mutex_unlock(&s->teardown_lock);
}

int
sbx_tearing_down(struct sbx *s, const char *id)
{
	int found = 0;

	pthread_mutex_lock(&s->teardown_lock);
	for (size_t i = 0; i < SBX_TEARDOWN_MAX && !found; i++)
		found = strcmp(s->tearing[i], id) == 0;
	pthread_mutex_unlock(&s->teardown_lock);
	return found;
}

int
sbx_teardowns(struct sbx *s)
{
	int n = 0;

	pthread_mutex_lock(&s->teardown_lock);
	for (size_t i = 0; i < SBX_TEARDOWN_MAX; i++)
		n += s->tearing[i][0] != '\0';
	pthread_mutex_unlock(&s->teardown_lock);
	return n;
}

static void
teardown_main(void *arg)
{
	struct teardown *t = arg;
	struct err e;

	err_clear(&e);
	/* On failure the domain outlives its row; reconcile destroys it. */
	if (orch_destroy(t->s->orch, t->host, t->id, &e) < 0)
		log_warn("sandbox %s: its VM stays until reconcile: %s", t->id, e.msg);
	else
		log_info("sandbox %s: VM torn down %lld ms after the answer", t->id,
		    clock_ms() - t->answered_ms);
	tearing_remove(t->s, t->id);
	free(t);
}

int
sbx_destroy_detached(struct sbx *s, const char *id, const char *host, enum store_end end,
    struct err *e)
{
	struct teardown *t = calloc(1, sizeof(*t));
	int rc;

	if (t == NULL || s->teardown == NULL || !tearing_add(s, id)) {
		free(t);
		return finish_destroy(s, id, host, end, NULL, e);
	}
	if (orch_detach(s->orch, host, id, e) < 0) {
		log_warn("sandbox %s: cannot pause its VM (%s); destroying it first", id, e->msg);
		tearing_remove(s, id);
		free(t);
		err_clear(e);
		return finish_destroy(s, id, host, end, NULL, e);
	}
	/* Out of reach: billing stops now, as it would once the VM is gone. */
	rc = settle_destroyed(s, id, end, NULL, "; its VM goes in the background", e);
	/* The VM goes either way; a row left destroying is reconcile's. */
	t->s = s;
	snprintf(t->id, sizeof(t->id), "%s", id);
	snprintf(t->host, sizeof(t->host), "%s", host);
	t->answered_ms = clock_ms();
	if (work_submit(s->teardown, teardown_main, t) < 0)
		teardown_main(t);
	return rc;
}

/* A guest that broke the agent protocol cannot be trusted with another
 * call: its sandbox is destroyed, settled once whoever notices first, and
 * the reason kept on its row. 1 when that was the case. */
static int
end_if_agent_fault(struct sbx *s, const char *id, const char *host, char *why, size_t n)
{
	struct err e;

	if (!orch_agent_fault(s->orch, host, id, why, n))
		return 0;
	log_warn("sandbox %s: ending it: %s", id, why);
	err_clear(&e);
	/* Claimed before its VM goes: reconcile would otherwise take a
	 * running row without a domain for a VM that stopped on its own. */
	if (store_mark_destroying(s->db, id, NULL, s->instance, STORE_END_AGENT_PROTOCOL, &e) < 0 ||
	    finish_destroy(s, id, host, STORE_END_AGENT_PROTOCOL, why, &e) < 0)
		log_warn("sandbox %s: cannot end it yet: %s", id, e.msg);
	return 1;
}

int
sbx_guest_failed(struct sbx *s, const char *id, const char *host, struct err *e)
{
	char why[SBX_AGENT_WHY_MAX];

	struct store_row row;
	struct err le;

	if (e->kind == ERR_UNAVAILABLE && end_if_agent_fault(s, id, host, why, sizeof(why))) {
		err_clear(e);
		err_set(e, ERR_UNAVAILABLE,
		    "sandbox %s ended (agent_protocol): its guest agent broke the protocol (%s); "
		    "create a new one",
		    id, why);
		return -1;
	}
	/* A pause or a destroy closes the agent's channel under a call that
	 * began while the sandbox ran: the call lost a race, the service is
	 * fine. */
	err_clear(&le);
	if (e->kind == ERR_UNAVAILABLE && store_load(s->db, NULL, id, &row, &le) == 0 &&
	    strcmp(row.state, "running") != 0) {
		err_clear(e);
		err_set(e, ERR_CONFLICT, "sandbox %s became %s while the call ran; %s", id,
		    row.state,
		    strcmp(row.state, "pausing") == 0 || strcmp(row.state, "paused") == 0 ?
			"resume_sandbox, then try again" :
			strcmp(row.state, "snapshotting") == 0 ? "try again in a few seconds" :
								 "it no longer runs");
	}
	return -1;
}

/* ---- background command state ---- */

int
sbx_poll_command(struct sbx *s, struct vm_host *h, const char *domain, const char *cmd_id, long pid)
{
	int code = -1, ended;
	struct err e;

	err_clear(&e);
	ended = guest_run_poll(h, domain, cmd_id, pid, &code, &e);
	if (ended < 0 && e.kind == ERR_NOT_FOUND) {
		/* The guest no longer knows it: the outcome is unknown. */
		err_clear(&e);
		(void)store_cmd_end(s->db, cmd_id, "failed", -1, 1, &e);
		return 1;
	}
	if (ended == 1) {
		err_clear(&e);
		(void)store_cmd_end(s->db, cmd_id, code == 124 ? "timed_out" : "exited", code, 1,
		    &e);
	}
	return ended;
}

void
sbx_refresh_commands(struct sbx *s, const char *id, const char *host)
{
	struct vm_host *h = orch_host_by_uri(s->orch, host);
	struct store_cmd_pid *cmds = NULL;
	size_t n = 0;
	char domain[64];
	struct err e;

	err_clear(&e);
	if (h == NULL || store_cmd_running(s->db, id, &cmds, &n, &e) < 0)
		return;
	orch_domain_name(id, domain, sizeof(domain));
	for (size_t i = 0; i < n; i++)
		(void)sbx_poll_command(s, h, domain, cmds[i].id, cmds[i].pid);
	free(cmds);
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
				orch_destroy(s->orch, host, ids[i], &e);
			continue;
		}
		if (store_is_live(s->db, ids[i], &live, &e) < 0)
			continue; /* database trouble: decide nothing */
		if (!live && !sbx_tearing_down(s, ids[i])) {
			log_warn("reconcile: VM %s has no live sandbox row; destroying it", ids[i]);
			orch_destroy(s->orch, host, ids[i], &e);
		}
	}
}

/* Lines the guest kernel prints when it stops for lack of memory (with
 * panic_on_oom, or with no process left to kill). The guest's own OOM
 * killer ending one process leaves the VM running: nothing ends then. */
static const char *const oom_marks[] = {
	"not syncing: Out of memory",
	"Out of memory and no killable processes",
	"System is deadlocked on memory",
};

#define SBX_CONSOLE_SCAN 4096 /* bytes of console read to tell why a VM stopped */

/* Why a running VM stopped on its own, and the failure_reason to keep:
 * out_of_memory when the host stopped it at its memory limit or its
 * console says its kernel ran out, else guest_shutdown (a crash or a
 * power-off from inside). */
static enum store_end
lost_vm_end(struct sbx *s, const char *id, const char **why)
{
	char *tail;
	enum store_end end = STORE_END_GUEST_SHUTDOWN;

	*why = "the VM stopped unexpectedly (crash, power-off from inside, or host restart)";
	if (orch_vm_out_of_memory(s->orch, id)) {
		*why = "the VM used more memory on its host than its size allows (guest memory "
		       "plus QEMU's own, AAS_VM_MEMORY_OVERHEAD_MIB) and was stopped";
		return STORE_END_OUT_OF_MEMORY;
	}
	tail = orch_console_tail(s->orch, id, SBX_CONSOLE_SCAN);
	for (size_t i = 0; tail && i < sizeof(oom_marks) / sizeof(oom_marks[0]); i++)
		if (strstr(tail, oom_marks[i]) != NULL) {
			end = STORE_END_OUT_OF_MEMORY;
			*why = "the guest ran out of memory and its kernel stopped";
		}
	free(tail);
	return end;
}

void
sbx_vm_lost(struct sbx *s, const char *host, const char *id)
{
	const char *why;
	enum store_end end = lost_vm_end(s, id, &why);
	struct err e;

	log_warn("reconcile: sandbox %s lost its VM (%s)", id, store_end_name(end));
	mark_failed(s, id, end, why);
	err_clear(&e);
	orch_destroy(s->orch, host, id, &e);
}

/* A move whose aasd stopped: the sandbox is where its VM is. Still on
 * its old host, the move did not happen; only on `to`, it did (its previews are
 * gone with the old QEMU); on neither, it was lost as any VM is (the next
 * round finds it). */
static void
settle_dead_move(struct sbx *s, const char *id, const char *to, int here)
{
	int there = 0, won = 0;
	struct err e;

	err_clear(&e);
	if (!here) {
		there = orch_host_by_uri(s->orch, to) != NULL ?
		    orch_vm_exists(s->orch, to, id, &e) :
		    -1;
		if (there < 0)
			return; /* only an aasd that reaches both can tell */
	}
	if (there == 1) {
		log_warn("reconcile: sandbox %s was moved to %s by an aasd that stopped", id, to);
		sbx_ports_drop(s, id);
		if (store_move_done(s->db, id, to, -1, NULL, NULL, 0, &won, &e) < 0)
			log_warn("reconcile: sandbox %s: %s", id, e.msg);
	} else if (store_move_failed(s->db, id, "the aasd moving it stopped", &e) < 0) {
		log_warn("reconcile: sandbox %s: %s", id, e.msg);
	}
}

static void
reconcile_rows(struct sbx *s, const char *host, char **ids, size_t n)
{
	struct store_host_row *rows = NULL;
	size_t nrows = 0;
	struct err e;

	err_clear(&e);
	if (store_host_rows(s->db, host, SBX_OWNER_DEAD_S, &rows, &nrows, &e) < 0)
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
				settle_dead_move(s, id, rows[i].moving_to, in_list(ids, n, id));
		} else if (strcmp(state, "running") == 0 && in_list(ids, n, id)) {
			char why[SBX_AGENT_WHY_MAX];

			/* A guest can break the protocol between calls (output
			 * nobody asked for): noticed here as well. */
			end_if_agent_fault(s, id, host, why, sizeof(why));
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
			orch_destroy(s->orch, host, id, &e);
			mark_failed(s, id, STORE_END_HOST_LOST,
			    "the service stopped while the sandbox was starting");
		} else if (strcmp(state, "destroying") == 0 && rows[i].owner_dead) {
			/* Whoever claimed it recorded why; a row without a
			 * reason was a destroy. */
			sbx_finish_destroy(s, id, host, STORE_END_DESTROYED, &e);
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
				sbx_finish_destroy(s, surplus, host, STORE_END_POOL_SURPLUS, &e);
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

int
sbx_sleep_or_stop(struct sbx *s, int seconds)
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
		sbx_hosts_refresh(s, clock_ms());
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
