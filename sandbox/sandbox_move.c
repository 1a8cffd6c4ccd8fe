/* sandbox_move.c - evacuating hosts: the sandboxes of a host the operator
 * evacuates move, one at a time, to the host with the most headroom by
 * live migration, keeping their processes, files, id, expiry and preview
 * URLs; warm VMs there are dropped (the pool refills elsewhere). And
 * reconcile's end of a move whose aasd stopped. */
#include "sandbox/sandbox_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fmt.h"
#include "base/log.h"
#include "sandbox/hosts.h"
#include "sandbox/place.h"

/* Sandboxes one maintenance round moves at most: the round's other work
 * (heartbeat, reconcile, the pool) waits meanwhile. */
#define SBX_MOVES_PER_ROUND 4

struct move_tx {
	struct sbx *s;
	const struct store_move *m;
	const char *uris;
	char to[STORE_HOST_MAX];
	int found, won;
};

/* The new host is reserved like a create's, in the transaction that marks
 * the sandbox as moving there: the host rows first, then the sandbox row. */
static int
move_tx_fn(PGconn *c, void *arg, struct err *e)
{
	struct move_tx *t = arg;
	struct place_need need = { t->m->reserved_memory_mib, t->m->reserved_vcpus };
	int rc = hosts_reserve(c, t->uris, &need, sbx_rule_for(t->s, sbx_net_parse(t->m->net)),
	    t->to, sizeof(t->to), e);

	if (rc <= 0) {
		t->found = 0;
		return rc;
	}
	t->found = 1;
	return store_move_claim(c, t->m->id, t->m->host, t->to, t->s->instance, &t->won, e);
}

/* This aasd's hosts other than `except`, as a text[] literal. */
static int
other_hosts(struct sbx *s, const char *except, char *lit, size_t n)
{
	char csv[ORCH_MAX_HOSTS * 260];
	size_t len = 0;

	csv[0] = '\0';
	for (size_t i = 0; i < orch_host_count(s->orch); i++) {
		const char *u = orch_host_uri_at(s->orch, i);

		if (strcmp(u, except) == 0)
			continue;
		if (fmt_buf(csv + len, sizeof(csv) - len, "%s%s", len ? "," : "", u) < 0)
			return -1;
		len += strlen(csv + len);
	}
	return db_array_literal(csv, lit, n);
}

/* Moves one sandbox: 1 moved, 0 not (recorded on its row), -1 nowhere to
 * look (database trouble). */
static int
move_one(struct sbx *s, const struct store_move *m)
{
	char lit[ORCH_MAX_HOSTS * 270];
	int ports[SBX_FORWARDS_MAX], host_ports[SBX_FORWARDS_MAX], won = 0;
	struct move_tx t = { .s = s, .m = m, .uris = lit };
	long long t0 = clock_ms(), pause = -1;
	struct err e;
	size_t np;

	err_clear(&e);
	if (other_hosts(s, m->host, lit, sizeof(lit)) < 0)
		return -1;
	if (db_tx(s->db, move_tx_fn, &t, &e) < 0) {
		log_warn("evacuate: sandbox %s: %s", m->id, e.msg);
		return -1;
	}
	if (!t.found) {
		err_ignore(store_move_failed(s->db, m->id,
		    "no other host has room for it (for a sandbox with a network device: none with the isolation rule recorded)",
		    &e));
		log_warn("evacuate: sandbox %s stays on %s: no other host has room", m->id,
		    m->host);
		return 0;
	}
	if (!t.won)
		return 0; /* it ended, or moved, meanwhile */
	log_info("evacuate: moving sandbox %s from %s to %s", m->id, m->host, t.to);
	if (orch_migrate(s->orch, m->host, t.to, m->id, &pause, &e) < 0) {
		struct err ignore;

		err_clear(&ignore);
		log_warn("evacuate: sandbox %s stays on %s: %s", m->id, m->host, e.msg);
		if (store_move_failed(s->db, m->id, e.msg, &ignore) < 0)
			log_warn("evacuate: sandbox %s: %s", m->id, ignore.msg);
		return 0;
	}
	np = sbx_forward_again(s, m->id, t.to, ports, host_ports, SBX_FORWARDS_MAX);
	err_clear(&e);
	if (store_move_done(s->db, m->id, t.to, pause, ports, host_ports, np, &won, &e) < 0) {
		/* Its row still says moving: reconcile finds where it is. */
		log_warn("evacuate: sandbox %s moved but not recorded: %s", m->id, e.msg);
		return 0;
	}
	if (!won) {
		/* Destroyed (or expired) during the move: the VM that arrived
		 * is nobody's. */
		log_warn("evacuate: sandbox %s ended while it moved; destroying its VM on %s",
		    m->id, t.to);
		err_clear(&e);
		err_ignore(orch_destroy(s->orch, t.to, m->id, &e));
		return 0;
	}
	log_info("evacuate: sandbox %s now on %s (%lld ms; the guest paused %lld ms)", m->id, t.to,
	    clock_ms() - t0, pause);
	return 1;
}

void
sbx_evacuate_round(struct sbx *s)
{
	char csv[ORCH_MAX_HOSTS * 260], lit[ORCH_MAX_HOSTS * 270];
	struct err e;

	if (sbx_hosts_csv(s, csv, sizeof(csv)) < 0 || db_array_literal(csv, lit, sizeof(lit)) < 0)
		return;
	for (int i = 0; i < SBX_MOVES_PER_ROUND && !atomic_load(&s->stop); i++) {
		char id[SBX_ID_LEN + 1], host[STORE_HOST_MAX];

		err_clear(&e);
		if (store_move_pool_take(s->db, lit, s->instance, id, host, sizeof(host), &e) != 1)
			break;
		log_info("evacuate: warm VM %s on %s dropped", id, host);
		err_ignore(sbx_finish_destroy(s, id, host, STORE_END_POOL_SURPLUS, &e));
	}
	for (int i = 0; i < SBX_MOVES_PER_ROUND && !atomic_load(&s->stop); i++) {
		struct store_move m;

		err_clear(&e);
		if (store_move_next(s->db, lit, &m, &e) != 1 || move_one(s, &m) < 0)
			break;
	}
}

/* A move whose aasd stopped: the sandbox is where its VM is. Still on
 * its old host, the move did not happen; only on `to`, it did (its previews are
 * gone with the old QEMU); on neither, it was lost as any VM is (the next
 * round finds it). */
void
sbx_reconcile_move(struct sbx *s, const char *id, const char *to, int here)
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

void *
sbx_move_main(void *arg)
{
	struct sbx *s = arg;
	struct err e;

	do {
		err_clear(&e);
		if (orch_wait_ready(s->orch, 0, &e) == 0)
			sbx_evacuate_round(s);
	} while (!sbx_sleep_or_stop(s, SBX_MOVE_POLL_S));
	return NULL;
}
