/* test_service_money.c - money under concurrency: many creates, extends
 * and destroys of one account at once, through tools_invoke against the
 * real service, store, settlement and billing over PostgreSQL and the fake
 * hypervisor (fake_vmm.h). No call may end in an internal error (a
 * deadlock that escaped db_tx's retry, a double settlement); afterwards the
 * ledger sums to the balance and every sandbox was charged and settled
 * exactly once. Needs AAS_TEST_DATABASE_URL. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "service/tools.h"
#include "tests/unit/service_fixture.h"

#define MONEY_THREADS 50
#define MONEY_ROUNDS 3
#define MONEY_MAX_LIVE 200 /* AAS_MAX_LIVE_SANDBOXES: above MONEY_THREADS */
#define MONEY_DB_POOL 16   /* connections: enough for lock waits to meet */
#define MONEY_MINUTES 2    /* each sandbox's first paid minutes */
#define ID_MAX 32

/* What one round shares between its threads. */
struct round {
	struct sfx *s;
	pthread_barrier_t start;
	char ids[MONEY_THREADS][ID_MAX]; /* "" until that thread created one */
	pthread_mutex_t lock;            /* guards ids */
	atomic_int ok;
	atomic_int expected;                               /* errors the race explains */
	atomic_int bad;                                    /* any other error */
	char bad_msg[sizeof(((struct err *)0)->msg) + 64]; /* the first of them */
};

struct worker {
	struct round *r;
	int no;
};

static json_t *
call(struct round *r, const char *tool, json_t *args)
{
	static const atomic_int never = 0;
	struct call_ctx cx = {
		.app = r->s->app,
		.account_id = r->s->account,
		.request_id = "money",
		.cancelled = &never,
	};
	struct err e;
	json_t *out;

	err_clear(&e);
	out = tools_invoke(&cx, tool, args, &e);
	json_decref(args);
	if (out != NULL) {
		atomic_fetch_add(&r->ok, 1);
		return out;
	}
	switch (e.kind) {
	case ERR_LIMIT:
	case ERR_PAYMENT:
	case ERR_CONFLICT:
	case ERR_NOT_FOUND:
		atomic_fetch_add(&r->expected, 1);
		break;
	default:
		if (atomic_fetch_add(&r->bad, 1) == 0) {
			pthread_mutex_lock(&r->lock);
			snprintf(r->bad_msg, sizeof(r->bad_msg), "%.32s: %s (%.16s)", tool, e.msg,
			    err_kind_name(e.kind));
			pthread_mutex_unlock(&r->lock);
		}
	}
	return NULL;
}

static void
other_id(struct round *r, int no, char id[ID_MAX])
{
	pthread_mutex_lock(&r->lock);
	snprintf(id, ID_MAX, "%s", r->ids[(no + 1 + no % 7) % MONEY_THREADS]);
	pthread_mutex_unlock(&r->lock);
}

/* Create, extend a neighbour's and its own, destroy its own and a
 * neighbour's: every pair of calls can meet on the account row, a sandbox
 * row or the ledger. */
static void *
work(void *arg)
{
	struct worker *w = arg;
	struct round *r = w->r;
	char mine[ID_MAX] = "", theirs[ID_MAX];
	json_t *out;

	pthread_barrier_wait(&r->start);
	out = call(r, "create_sandbox", json_pack("{s:i}", "timeout_minutes", MONEY_MINUTES));
	if (out != NULL) {
		snprintf(mine, sizeof(mine), "%s",
		    json_string_value(json_object_get(out, "sandbox_id")));
		json_decref(out);
		pthread_mutex_lock(&r->lock);
		snprintf(r->ids[w->no], ID_MAX, "%s", mine);
		pthread_mutex_unlock(&r->lock);
	}
	other_id(r, w->no, theirs);
	if (theirs[0] != '\0')
		json_decref(call(r, "extend_sandbox",
		    json_pack("{s:s, s:i}", "sandbox_id", theirs, "minutes", 1)));
	if (mine[0] != '\0') {
		json_decref(call(r, "extend_sandbox",
		    json_pack("{s:s, s:i}", "sandbox_id", mine, "minutes", 1)));
		json_decref(call(r, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", mine)));
	}
	other_id(r, w->no, theirs);
	if (theirs[0] != '\0')
		json_decref(call(r, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", theirs)));
	return NULL;
}

static void
run_round(struct sfx *s, int round)
{
	pthread_t threads[MONEY_THREADS];
	struct worker w[MONEY_THREADS];
	struct round r;

	memset(&r, 0, sizeof(r));
	r.s = s;
	pthread_mutex_init(&r.lock, NULL);
	assert_int_equal(pthread_barrier_init(&r.start, NULL, MONEY_THREADS), 0);
	for (int i = 0; i < MONEY_THREADS; i++) {
		w[i].r = &r;
		w[i].no = i;
		assert_int_equal(pthread_create(&threads[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < MONEY_THREADS; i++)
		pthread_join(threads[i], NULL);
	pthread_barrier_destroy(&r.start);
	pthread_mutex_destroy(&r.lock);
	print_message("round %d: %d calls succeeded, %d refused as the race explains\n", round,
	    atomic_load(&r.ok), atomic_load(&r.expected));
	if (atomic_load(&r.bad) > 0)
		fail_msg("round %d: %d calls failed; the first: %s", round, atomic_load(&r.bad),
		    r.bad_msg);
	/* Every thread got its sandbox: the limits were not what stopped it. */
	for (int i = 0; i < MONEY_THREADS; i++)
		assert_true(r.ids[i][0] != '\0');
}

/* Per sandbox of the account: 1 when its row and the ledger disagree. */
#define MISSETTLED                                                                                \
	"SELECT count(*) FROM sandboxes s WHERE s.account_id = $1 AND ("                          \
	" s.state NOT IN ('destroyed', 'failed') OR s.settled_at IS NULL"                         \
	" OR s.charged <> -(SELECT coalesce(sum(amount), 0) FROM ledger l"                        \
	"   WHERE l.sandbox_id = s.id AND l.kind = 'charge')"                                     \
	" OR s.refunded <> (SELECT coalesce(sum(amount), 0) FROM ledger l"                        \
	"   WHERE l.sandbox_id = s.id AND l.kind = 'refund')"                                     \
	" OR (SELECT count(*) FROM ledger l WHERE l.sandbox_id = s.id AND l.kind = 'refund') > 1" \
	" OR s.refunded <> (s.paid_minutes - s.minutes_used) * s.price_per_minute)"

static void
test_parallel_money_on_one_account(void **state)
{
	struct sfx *s = *state;

	for (int round = 1; round <= MONEY_ROUNDS; round++) {
		run_round(s, round);
		assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandboxes WHERE account_id = $1",
				     s->account),
		    round * MONEY_THREADS);
		assert_int_equal(sfx_ll(s, MISSETTLED, s->account), 0);
		assert_int_equal(sfx_ledger_sum(s, s->account), sfx_balance(s, s->account));
	}
	/* What was kept is what was used: one started minute a sandbox. */
	assert_int_equal(sfx_balance(s, s->account),
	    SFX_FREE_CREDIT -
		sfx_ll(s,
		    "SELECT sum(minutes_used * price_per_minute) FROM sandboxes"
		    " WHERE account_id = $1",
		    s->account));
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE account_id = $1"
			     " AND end_reason = 'destroyed'",
			     s->account),
	    MONEY_ROUNDS * MONEY_THREADS);
}

static int
setup_money(void **state)
{
	const struct sfx_opts o = { .max_live = MONEY_MAX_LIVE, .db_pool = MONEY_DB_POOL };

	return sfx_open(state, &o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_parallel_money_on_one_account, setup_money,
		    sfx_teardown),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
