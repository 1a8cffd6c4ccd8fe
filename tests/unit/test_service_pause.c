/* test_service_pause.c - pause_sandbox and resume_sandbox through
 * tools_invoke and sbx_reconcile, against the real service, store and
 * settlement over PostgreSQL and a fake hypervisor (fake_vmm.h): the money
 * of each move, failures that change nothing, a paused sandbox's end, and
 * reconcile finishing a move whose aasd stopped. Needs
 * AAS_TEST_DATABASE_URL; the tear-down checks every balance against its
 * ledger. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/db.h"
#include "base/err.h"
#include "sandbox/sandbox.h"
#include "vmm/orch.h"
#include "tests/unit/fake_vmm.h"
#include "tests/unit/service_fixture.h"

#define ID_MAX 32
#define PRICE_STORAGE 20LL /* AAS_PRICE_STORAGE's default */
#define EXPIRY_WAIT_MS 20000
#define POLL_MS 100

static json_t *
call(struct sfx *s, const char *tool, const char *id)
{
	return sfx_ok(s, s->account, tool, json_pack("{s:s}", "sandbox_id", id));
}

static void
fails(struct sfx *s, const char *account, const char *tool, const char *id, enum err_kind kind)
{
	sfx_fails(s, account, tool, json_pack("{s:s}", "sandbox_id", id), kind);
}

static void
expect_state(struct sfx *s, const char *id, const char *want)
{
	char st[16];

	sfx_state(s, id, st, sizeof(st));
	assert_string_equal(st, want);
}

static long long
keyed(struct sfx *s, const char *id, const char *prefix)
{
	char like[64];
	const char *p[2] = { id, like };
	long long n = -1;
	PGresult *r;
	struct err e;

	snprintf(like, sizeof(like), "%s%%", prefix);
	err_clear(&e);
	r = db_query(s->app->db,
	    "SELECT coalesce(sum(amount), 0) FROM ledger WHERE sandbox_id = $1"
	    " AND idempotency_key LIKE $2",
	    2, p, &e);
	assert_non_null(r);
	assert_int_equal(db_get_ll(r, 0, 0, &n, &e), 0);
	PQclear(r);
	return n;
}

static void
exec_sql(struct sfx *s, const char *sql, const char *id)
{
	const char *p[1] = { id };
	struct err e;

	err_clear(&e);
	assert_int_equal(db_exec(s->app->db, sql, 1, p, NULL, &e), 0);
}

static void
test_pause_refunds_resume_charges(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	r = call(s, "pause_sandbox", id);
	assert_string_equal(sfx_str(r, "state"), "paused");
	/* Within its first minute: one minute of compute kept, nine back. */
	assert_int_equal(sfx_int(r, "refunded"), 9 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_int(r, "balance"), SFX_FREE_CREDIT - SFX_PRICE_SMALL);
	assert_true(sfx_int(r, "memory_bytes") > 0);
	json_decref(r);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_false(vm.live);
	assert_true(vm.saved);
	/* Paused: nothing runs, a second pause is refused, the state shows. */
	fails(s, s->account, "pause_sandbox", id, ERR_CONFLICT);
	sfx_fails(s, s->account, "run_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command", "true"), ERR_CONFLICT);
	r = call(s, "get_sandbox", id);
	assert_string_equal(sfx_str(r, "state"), "paused");
	json_decref(r);
	/* Still live: listed as such, and counted against the account's cap. */
	r = sfx_ok(s, s->account, "list_sandboxes", json_pack("{s:s}", "state", "live"));
	assert_int_equal(json_array_size(json_object_get(r, "sandboxes")), 1);
	json_decref(r);

	r = call(s, "resume_sandbox", id);
	assert_string_equal(sfx_str(r, "state"), "running");
	/* Compute until expiry (ten started minutes) and a minute of storage. */
	assert_int_equal(sfx_int(r, "charged"), 10 * SFX_PRICE_SMALL + PRICE_STORAGE);
	json_decref(r);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_true(vm.live);
	assert_false(vm.saved);
	fails(s, s->account, "resume_sandbox", id, ERR_CONFLICT);

	/* It ran under a minute in all: one minute of compute and one of
	 * storage is what it cost. */
	r = call(s, "destroy_sandbox", id);
	assert_int_equal(sfx_int(r, "minutes_used"), 1);
	assert_int_equal(sfx_int(r, "charged") - sfx_int(r, "refunded"),
	    SFX_PRICE_SMALL + PRICE_STORAGE);
	json_decref(r);
	assert_int_equal(sfx_balance(s, s->account),
	    SFX_FREE_CREDIT - SFX_PRICE_SMALL - PRICE_STORAGE);
}

static void
test_failed_pause_changes_nothing(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX];

	sfx_create(s, 10, id);
	fake_vmm_fail_pauses(1);
	fails(s, s->account, "pause_sandbox", id, ERR_UNAVAILABLE);
	expect_state(s, id, "running");
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_true(vm.live);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - 10 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM ledger WHERE sandbox_id = $1", id), 1);
	/* Another account's sandbox does not exist for it. */
	fails(s, s->other, "pause_sandbox", id, ERR_NOT_FOUND);
	fails(s, s->other, "resume_sandbox", id, ERR_NOT_FOUND);
	expect_state(s, id, "running");
}

static void
test_failed_resume_gives_compute_back(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];

	sfx_create(s, 10, id);
	json_decref(call(s, "pause_sandbox", id));
	fake_vmm_fail_resumes(1);
	fails(s, s->account, "resume_sandbox", id, ERR_UNAVAILABLE);
	expect_state(s, id, "paused");
	/* Its compute charge came back; the storage up to then stays paid. */
	assert_int_equal(keyed(s, id, "charge:resume:"), -10 * SFX_PRICE_SMALL);
	assert_int_equal(keyed(s, id, "refund:resume:"), 10 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_balance(s, s->account),
	    SFX_FREE_CREDIT - SFX_PRICE_SMALL - PRICE_STORAGE);
	json_decref(call(s, "resume_sandbox", id));
	expect_state(s, id, "running");
	json_decref(call(s, "destroy_sandbox", id));
}

static void
test_destroy_paused_charges_its_storage(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	json_decref(call(s, "pause_sandbox", id));
	r = call(s, "destroy_sandbox", id);
	assert_string_equal(sfx_str(r, "state"), "destroyed");
	assert_int_equal(sfx_int(r, "minutes_used"), 1);
	json_decref(r);
	assert_int_equal(keyed(s, id, "charge:storage:"), -PRICE_STORAGE);
	assert_int_equal(sfx_balance(s, s->account),
	    SFX_FREE_CREDIT - SFX_PRICE_SMALL - PRICE_STORAGE);
	assert_int_equal(fake_vm_wait_destroyed(id, 10000), 0);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_false(vm.live);
	fails(s, s->account, "resume_sandbox", id, ERR_CONFLICT);
}

static void
test_paused_sandbox_expires(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], st[16] = "";
	long long t0;

	/* Minutes of one second: paused right away, it still ends on time. */
	sfx_create(s, 2, id);
	json_decref(call(s, "pause_sandbox", id));
	t0 = clock_ms();
	while (clock_ms() - t0 < EXPIRY_WAIT_MS) {
		sfx_state(s, id, st, sizeof(st));
		if (strcmp(st, "destroyed") == 0)
			break;
		usleep(POLL_MS * 1000);
	}
	assert_string_equal(st, "destroyed");
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE id = $1"
			     " AND end_reason = 'expired' AND settled_at IS NOT NULL",
			     id),
	    1);
	/* Compute for the minutes it ran before the pause, never more. */
	assert_true(sfx_ll(s, "SELECT minutes_used FROM sandboxes WHERE id = $1", id) <= 2);
}

/* A pause whose aasd stopped after the VM was saved: reconcile records it
 * (with its refund) once its owner is silent. */
static void
test_reconcile_finishes_a_pause(void **state)
{
	struct sfx *s = *state;
	long long bytes = 0;
	char id[ID_MAX];
	struct err e;

	sfx_create(s, 10, id);
	err_clear(&e);
	assert_int_equal(orch_pause(NULL, s->host, id, &bytes, &e), 0);
	exec_sql(s,
	    "UPDATE sandboxes SET state = 'pausing', owner = NULL, paused_at = now()"
	    " WHERE id = $1",
	    id);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	expect_state(s, id, "paused");
	assert_int_equal(keyed(s, id, "refund:pause:"), 9 * SFX_PRICE_SMALL);
	/* Again: nothing more. */
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	assert_int_equal(keyed(s, id, "refund:pause:"), 9 * SFX_PRICE_SMALL);
	json_decref(call(s, "destroy_sandbox", id));
}

/* A pause whose save never finished: the VM runs on. */
static void
test_reconcile_undoes_an_unfinished_pause(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	struct err e;

	sfx_create(s, 10, id);
	exec_sql(s,
	    "UPDATE sandboxes SET state = 'pausing', owner = NULL, paused_at = now()"
	    " WHERE id = $1",
	    id);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	expect_state(s, id, "running");
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM ledger WHERE sandbox_id = $1", id), 1);
	json_decref(call(s, "destroy_sandbox", id));
}

/* A resume whose aasd stopped: running when the VM was restored, paused
 * (its compute back) when not. */
static void
test_reconcile_finishes_or_undoes_a_resume(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], id2[ID_MAX];
	struct err e;

	sfx_create(s, 10, id);
	sfx_create(s, 10, id2);
	json_decref(call(s, "pause_sandbox", id));
	json_decref(call(s, "pause_sandbox", id2));
	err_clear(&e);
	/* id: restored before the stop; id2: not. */
	assert_int_equal(orch_resume(NULL, s->host, id, &e), 0);
	exec_sql(s, "UPDATE sandboxes SET state = 'resuming', owner = NULL WHERE id = $1", id);
	exec_sql(s,
	    "UPDATE sandboxes SET state = 'resuming', owner = NULL, resumes = resumes + 1"
	    " WHERE id = $1",
	    id2);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	expect_state(s, id, "running");
	expect_state(s, id2, "paused");
	assert_int_equal(sfx_ll(s, "SELECT (paused_ms >= 0)::int FROM sandboxes WHERE id = $1", id),
	    1);
	json_decref(call(s, "destroy_sandbox", id));
	json_decref(call(s, "destroy_sandbox", id2));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_pause_refunds_resume_charges),
		T(test_failed_pause_changes_nothing),
		T(test_failed_resume_gives_compute_back),
		T(test_destroy_paused_charges_its_storage),
		cmocka_unit_test_setup_teardown(test_paused_sandbox_expires, sfx_setup_short_minute,
		    sfx_teardown),
		T(test_reconcile_finishes_a_pause),
		T(test_reconcile_undoes_an_unfinished_pause),
		T(test_reconcile_finishes_or_undoes_a_resume),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
