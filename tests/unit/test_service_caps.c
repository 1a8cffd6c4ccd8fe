/* test_service_caps.c - every per-account and per-sandbox cap holds under
 * parallel calls: N threads, each on a database connection of its own
 * (AAS_DB_POOL=N), start together against a cap with one place left, and
 * exactly one wins; the others get ERR_LIMIT. Through tools_invoke (and
 * the key and session stores) against PostgreSQL and the fake guest
 * (fake_vmm.h). Needs AAS_TEST_DATABASE_URL. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "account/accounts.h"
#include "account/session.h"
#include "tests/unit/fake_vmm.h"
#include "tests/unit/service_fixture.h"

#define N 8 /* parallel attempts */

struct racer {
	struct sfx *s;
	pthread_barrier_t *go;
	int i;
	const char *sandbox;
	int won;
	enum err_kind kind;
	char msg[sizeof(((struct err *)0)->msg)];
};

typedef int (*attempt_fn)(struct racer *r, struct err *e);

static attempt_fn current;

static void *
run_one(void *arg)
{
	struct racer *r = arg;
	struct err e;

	err_clear(&e);
	pthread_barrier_wait(r->go);
	r->won = current(r, &e) == 0;
	r->kind = e.kind;
	snprintf(r->msg, sizeof(r->msg), "%s", e.msg);
	return NULL;
}

/* Runs fn in N threads at once; fails the test unless exactly one won
 * and every other was refused with ERR_LIMIT. */
static void
race(struct sfx *s, const char *sandbox, attempt_fn fn)
{
	pthread_t th[N];
	struct racer r[N];
	pthread_barrier_t go;
	int won = 0;

	current = fn;
	pthread_barrier_init(&go, NULL, N);
	for (int i = 0; i < N; i++) {
		r[i] = (struct racer){ .s = s, .go = &go, .i = i, .sandbox = sandbox };
		assert_int_equal(pthread_create(&th[i], NULL, run_one, &r[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < N; i++) {
		if (r[i].won) {
			won++;
			continue;
		}
		if (r[i].kind != ERR_LIMIT)
			fail_msg("attempt %d: %s (%s), not ERR_LIMIT", i, r[i].msg,
			    err_kind_name(r[i].kind));
	}
	assert_int_equal(won, 1);
}

static int
setup(void **state)
{
	const struct sfx_opts o = { .max_live = 1,
		.max_ports = 1,
		.max_background = 1,
		.db_pool = N };

	return sfx_open(state, &o);
}

/* A tool call as the fixture's caller; 0 when it succeeded. */
static int
call(struct racer *r, const char *tool, json_t *args, struct err *e)
{
	json_t *out = sfx_call(r->s, r->s->account, tool, args, e);

	json_decref(out);
	return out ? 0 : -1;
}

static int
try_create(struct racer *r, struct err *e)
{
	return call(r, "create_sandbox", json_pack("{s:i}", "timeout_minutes", 5), e);
}

/* AAS_MAX_LIVE_SANDBOXES=1: one of N parallel creates. */
static void
test_live_sandboxes(void **state)
{
	struct sfx *s = *state;

	race(s, NULL, try_create);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE account_id = $1"
			     " AND state NOT IN ('destroyed', 'failed')",
			     s->account),
	    1);
}

static int
try_key(struct racer *r, struct err *e)
{
	struct acct_new_key k;

	return acct_key_create(r->s->app->db, r->s->account, "racer", &k, e);
}

/* ACCT_MAX_LIVE_KEYS: the last key of N made at once. */
static void
test_keys(void **state)
{
	struct sfx *s = *state;
	struct acct_new_key k;
	struct err e;

	err_clear(&e);
	while (sfx_ll(s,
		   "SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL",
		   s->account) < ACCT_MAX_LIVE_KEYS - 1)
		assert_int_equal(acct_key_create(s->app->db, s->account, "filler", &k, &e), 0);
	race(s, NULL, try_key);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM api_keys WHERE account_id = $1"
			     " AND revoked_at IS NULL",
			     s->account),
	    ACCT_MAX_LIVE_KEYS);
}

static int
try_port(struct racer *r, struct err *e)
{
	return call(r, "expose_port",
	    json_pack("{s:s, s:i}", "sandbox_id", r->sandbox, "port", 8000 + r->i), e);
}

/* AAS_MAX_PORTS_PER_SANDBOX=1: N different ports exposed at once. */
static void
test_ports(void **state)
{
	struct sfx *s = *state;
	char id[32];

	sfx_create(s, 5, id);
	race(s, id, try_port);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandbox_ports WHERE sandbox_id = $1", id),
	    1);
}

static int
try_background(struct racer *r, struct err *e)
{
	return call(r, "run_command",
	    json_pack("{s:s, s:s, s:b}", "sandbox_id", r->sandbox, "command", "sleep 30",
		"background", 1),
	    e);
}

/* AAS_MAX_BACKGROUND_PER_SANDBOX=1: N background commands at once. */
static void
test_background(void **state)
{
	struct sfx *s = *state;
	char id[32];

	sfx_create(s, 5, id);
	race(s, id, try_background);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandbox_commands WHERE sandbox_id = $1"
			     " AND background AND state = 'running'",
			     id),
	    1);
}

static int
try_session(struct racer *r, struct err *e)
{
	struct sess_limits lim;
	char id[SESS_ID_LEN + 1];

	sess_limits_from(&r->s->app->cfg, &lim);
	lim.max_per_account = 1;
	return sess_create(r->s->app->db, &lim, "2025-06-18", r->s->account, NULL, "racer", "1", id,
	    e);
}

/* AAS_MAX_SESSIONS_PER_ACCOUNT=1: N initializes with one key at once. */
static void
test_sessions(void **state)
{
	struct sfx *s = *state;

	race(s, NULL, try_session);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM mcp_sessions WHERE account_id = $1",
			     s->account),
	    1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_live_sandboxes, setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_keys, setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_ports, setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_background, setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_sessions, setup, sfx_teardown),
	};
	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
