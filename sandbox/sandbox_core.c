/* sandbox_core.c - the life of a sandbox's row and VM: boot, failure,
 * destroy and settlement, the ended hook, the teardown queue, and the end
 * of sandboxes whose VM, guest agent or host is gone. Ports, commands,
 * pause, snapshots, moves, maintenance and create call into it; it calls
 * none of them, only the network state (sandbox_net.c) and the hosts
 * (sandbox_hosts.c) below it. They decide when; this file says how. */
#include "sandbox/sandbox_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/guest.h"
#include "billing/billing.h"
#include "sandbox/catalog.h"
#include "base/fmt.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/clock.h"
#include "base/work.h"
#include "sandbox/settle.h"

/* ---- what every piece uses ---- */

void
sbx_ended(struct sbx *s, const char *id)
{
	if (s->env.ended)
		s->env.ended(s->env.ctx, id);
}

void
sbx_expiry_changed(struct sbx *s)
{
	struct err e;

	/* Every aasd's reaper sleeps until the nearest expiry; wake them. */
	err_clear(&e);
	if (store_expiry_changed(s->db, &e) < 0)
		log_warn("cannot wake the expiry reapers: %s", e.msg);
}

void
sbx_ports_drop(struct sbx *s, const char *id)
{
	struct err e;

	err_clear(&e);
	if (store_ports_drop(s->db, id, &e) < 0)
		log_warn("sandbox %s: cannot forget its ports: %s", id, e.msg);
}

struct vm_host *
sbx_running(struct sbx *s, const char *account, const char *id, struct store_row *row, char *domain,
    size_t dn, struct err *e)
{
	struct vm_host *h;

	if (store_load(s->db, account, id, row, e) < 0)
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

/* ---- boot ---- */

/* A sandbox that failed to boot, or whose VM stopped, ends as failed for
 * `end` and is settled once, whoever gets here first: in full when it
 * never became ready, else up to now, when the end was seen. */
void
sbx_mark_failed(struct sbx *s, const char *id, enum store_end end, const char *reason)
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
		err_ignore(orch_destroy(s->orch, host, id, &ignore));
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
		sbx_mark_failed(s, id, STORE_END_BOOT_FAILED, e->msg);
		return -1;
	}
	/* The rule may have gone since the create was accepted. */
	if (net != VM_NET_NONE && !sbx_net_available(s, NULL, 0)) {
		err_set(e, ERR_UNAVAILABLE, "sandbox networking became unavailable");
		sbx_mark_failed(s, id, STORE_END_BOOT_FAILED, e->msg);
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
		sbx_mark_failed(s, id, STORE_END_BOOT_FAILED, e->msg);
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
		err_ignore(sbx_finish_destroy(s, id, host, STORE_END_DESTROYED, &ignore));
		err_set(e, ERR_CONFLICT, "sandbox %s was destroyed while it was starting", id);
		return -1;
	}
	log_info("sandbox %s: running on %s", id, host);
	sbx_expiry_changed(s);
	return 0;
}

/* ---- the end ---- */

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
	sbx_mark_failed(s, id, end, why);
	err_clear(&e);
	err_ignore(orch_destroy(s->orch, host, id, &e));
}

/* Ends the live sandboxes of this aasd's hosts that are down: the VM
 * cannot be reached, so the row ends without it, billed up to the last
 * time its host answered. When the host comes back, reconcile destroys
 * the domains no live row claims and removes their files. */
void
sbx_end_host_lost(struct sbx *s)
{
	char csv[ORCH_MAX_HOSTS * 260], lit[ORCH_MAX_HOSTS * 270];
	struct store_due *lost = NULL;
	size_t n = 0;
	struct err e;

	err_clear(&e);
	if (sbx_hosts_csv(s, csv, sizeof(csv)) < 0 || db_array_literal(csv, lit, sizeof(lit)) < 0)
		return;
	if (store_claim_host_lost(s->db, lit, s->instance, &lost, &n, &e) < 0) {
		log_warn("hosts: %s", e.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct bill_settlement st;
		err_clear(&e);
		log_warn("sandbox %s: its host %s is down; ending it (host_lost)", lost[i].id,
		    lost[i].host);
		sbx_ports_drop(s, lost[i].id);
		if (settle_end(s->db, s->cfg->minute_s, lost[i].id, "destroyed",
			STORE_END_HOST_LOST, "its host stopped answering", 0, &st, &e) < 0)
			log_warn("sandbox %s: %s", lost[i].id, e.msg);
		else
			sbx_ended(s, lost[i].id);
	}
	free(lost);
}

/* A guest that broke the agent protocol cannot be trusted with another
 * call: its sandbox is destroyed, settled once whoever notices first, and
 * the reason kept on its row. 1 when that was the case. */
int
sbx_end_if_agent_fault(struct sbx *s, const char *id, const char *host, char *why, size_t n)
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

	if (e->kind == ERR_UNAVAILABLE && sbx_end_if_agent_fault(s, id, host, why, sizeof(why))) {
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
	for (size_t i = 0; i < SBX_TEARDOWN_MAX; i++)
		if (s->tearing[i][0] == '\0') {
			ok = fmt_buf(s->tearing[i], sizeof(s->tearing[i]), "%s", id) == 0;
			if (!ok) /* an id that does not fit takes no slot */
				s->tearing[i][0] = '\0';
			break;
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

	/* An id or host that does not fit is torn down before the answer. */
	if (t == NULL || s->teardown == NULL || fmt_buf(t->id, sizeof(t->id), "%s", id) < 0 ||
	    fmt_buf(t->host, sizeof(t->host), "%s", host) < 0 || !tearing_add(s, id)) {
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
	t->answered_ms = clock_ms();
	if (work_submit(s->teardown, teardown_main, t) < 0)
		teardown_main(t);
	return rc;
}
