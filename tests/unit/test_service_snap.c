/* test_service_snap.c - snapshot_sandbox, list_snapshots, delete_snapshot
 * and create_sandbox from_snapshot through tools_invoke and sbx_reconcile,
 * against the real service, store and ledger over PostgreSQL and a fake
 * hypervisor (fake_vmm.h): the money of each, the per-account cap, ids of
 * another account, failures that change nothing, and reconcile ending a
 * snapshot whose aasd stopped. Needs AAS_TEST_DATABASE_URL; the tear-down
 * checks every balance against its ledger. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/db.h"
#include "base/err.h"
#include "sandbox/sandbox.h"
#include "vmm/orch.h"
#include "tests/unit/fake_vmm.h"
#include "tests/unit/service_fixture.h"

#define ID_MAX 32
#define PRICE_STORAGE 20LL /* AAS_PRICE_STORAGE's default */
#define KEEP 60            /* keep_minutes the tests ask for */
#define MAX_SNAPSHOTS 5    /* AAS_MAX_SNAPSHOTS's default */
#define EXPIRY_WAIT_MS 20000
#define POLL_MS 100

static json_t *
snapshot(struct sfx *s, const char *id)
{
	return sfx_ok(s, s->account, "snapshot_sandbox",
	    json_pack("{s:s, s:i, s:s}", "sandbox_id", id, "keep_minutes", KEEP, "name", "t"));
}

static void
expect_state(struct sfx *s, const char *id, const char *want)
{
	char st[16];

	sfx_state(s, id, st, sizeof(st));
	assert_string_equal(st, want);
}

static void
exec_sql(struct sfx *s, const char *sql, const char *id)
{
	const char *p[1] = { id };
	struct err e;

	err_clear(&e);
	assert_int_equal(db_exec(s->app->db, sql, 1, p, NULL, &e), 0);
}

static long long
snap_count(struct sfx *s, const char *account)
{
	return sfx_ll(s,
	    "SELECT count(*) FROM snapshots WHERE account_id = $1::uuid AND state <> 'deleted'",
	    account);
}

static void
test_snapshot_charges_storage_and_runs_on(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX], snap[ID_MAX];
	long long before;
	json_t *r;

	sfx_create(s, 10, id);
	before = sfx_balance(s, s->account);
	r = snapshot(s, id);
	assert_string_equal(sfx_str(r, "state"), "ready");
	assert_string_equal(sfx_str(r, "sandbox_id"), id);
	assert_int_equal(sfx_int(r, "charged"), KEEP * PRICE_STORAGE);
	assert_int_equal(sfx_int(r, "balance"), before - KEEP * PRICE_STORAGE);
	assert_true(sfx_int(r, "bytes") > 0);
	snprintf(snap, sizeof(snap), "%s", sfx_str(r, "snapshot_id"));
	json_decref(r);
	/* The sandbox runs on, and its compute is not touched. */
	expect_state(s, id, "running");
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_true(vm.live);
	r = sfx_ok(s, s->account, "list_snapshots", json_object());
	assert_int_equal(json_array_size(json_object_get(r, "snapshots")), 1);
	assert_int_equal(sfx_int(r, "limit"), MAX_SNAPSHOTS);
	json_decref(r);
	/* Deleted within its first minute: every later minute comes back. */
	r = sfx_ok(s, s->account, "delete_snapshot", json_pack("{s:s}", "snapshot_id", snap));
	assert_int_equal(sfx_int(r, "refunded"), (KEEP - 1) * PRICE_STORAGE);
	json_decref(r);
	assert_int_equal(sfx_balance(s, s->account), before - PRICE_STORAGE);
	assert_int_equal(fake_vmm_counts().snapshot_deletes, 1);
	sfx_fails(s, s->account, "delete_snapshot", json_pack("{s:s}", "snapshot_id", snap),
	    ERR_NOT_FOUND);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id)));
}

static void
test_fork_is_a_new_sandbox_of_the_snapshot(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX], snap[ID_MAX], fork[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	json_decref(sfx_ok(s, s->account, "write_file",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "path", "/tmp/a", "content", "one")));
	r = snapshot(s, id);
	snprintf(snap, sizeof(snap), "%s", sfx_str(r, "snapshot_id"));
	json_decref(r);
	/* The source changes after the snapshot; the fork does not see it. */
	json_decref(sfx_ok(s, s->account, "write_file",
	    json_pack("{s:s, s:s, s:s}", "sandbox_id", id, "path", "/tmp/a", "content", "two")));
	/* A size other than the snapshot's is refused. */
	sfx_fails(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:s}", "from_snapshot", snap, "size", "large"), ERR_INVALID);
	r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i}", "from_snapshot", snap, "timeout_minutes", 5));
	assert_string_equal(sfx_str(r, "boot"), "snapshot");
	assert_string_equal(sfx_str(r, "from_snapshot"), snap);
	assert_string_equal(sfx_str(r, "size"), "small");
	snprintf(fork, sizeof(fork), "%s", sfx_str(r, "sandbox_id"));
	json_decref(r);
	assert_int_equal(fake_vm_info(fork, &vm), 0);
	assert_true(vm.live);
	assert_int_equal(fake_vmm_counts().forks, 1);
	assert_int_equal(fake_vmm_counts().identities, 1);
	r = sfx_ok(s, s->account, "read_file",
	    json_pack("{s:s, s:s}", "sandbox_id", fork, "path", "/tmp/a"));
	assert_string_equal(sfx_str(r, "content"), "one");
	json_decref(r);
	/* Billed as any sandbox: five minutes up front. */
	assert_int_equal(sfx_ll(s,
			     "SELECT -sum(amount) FROM ledger WHERE sandbox_id = $1"
			     " AND kind = 'charge'",
			     fork),
	    5 * SFX_PRICE_SMALL);
	/* A cold sandbox says so. */
	r = sfx_ok(s, s->account, "get_sandbox", json_pack("{s:s}", "sandbox_id", id));
	assert_string_equal(sfx_str(r, "boot"), "cold");
	json_decref(r);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id)));
	json_decref(sfx_ok(s, s->account, "destroy_sandbox",
	    json_pack("{s:s}", "sandbox_id", fork)));
	/* The snapshot outlives both. */
	assert_int_equal(snap_count(s, s->account), 1);
}

/* Under AAS_NET=off: a fork has its snapshot's network whatever
 * `internet` says, so a snapshot without one forks with the default, and
 * one with a device (as if taken while networking worked) is refused. */
static void
test_fork_takes_its_snapshots_network(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], snap[ID_MAX], fork[ID_MAX];
	json_t *r;

	r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:i, s:b}", "timeout_minutes", 10, "internet", 0));
	snprintf(id, sizeof(id), "%s", sfx_str(r, "sandbox_id"));
	assert_string_equal(sfx_str(r, "network"), "none");
	json_decref(r);
	r = snapshot(s, id);
	snprintf(snap, sizeof(snap), "%s", sfx_str(r, "snapshot_id"));
	json_decref(r);
	r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i}", "from_snapshot", snap, "timeout_minutes", 5));
	assert_string_equal(sfx_str(r, "network"), "none");
	snprintf(fork, sizeof(fork), "%s", sfx_str(r, "sandbox_id"));
	json_decref(r);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox",
	    json_pack("{s:s}", "sandbox_id", fork)));
	exec_sql(s, "UPDATE snapshots SET network = 'nat' WHERE id = $1", snap);
	sfx_fails(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:b}", "from_snapshot", snap, "internet", 0), ERR_UNAVAILABLE);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id)));
}

static void
test_snapshots_never_cross_accounts(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], snap[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	r = snapshot(s, id);
	snprintf(snap, sizeof(snap), "%s", sfx_str(r, "snapshot_id"));
	json_decref(r);
	sfx_fails(s, s->other, "create_sandbox", json_pack("{s:s}", "from_snapshot", snap),
	    ERR_NOT_FOUND);
	sfx_fails(s, s->other, "delete_snapshot", json_pack("{s:s}", "snapshot_id", snap),
	    ERR_NOT_FOUND);
	sfx_fails(s, s->other, "snapshot_sandbox", json_pack("{s:s}", "sandbox_id", id),
	    ERR_NOT_FOUND);
	r = sfx_ok(s, s->other, "list_snapshots", json_object());
	assert_int_equal(json_array_size(json_object_get(r, "snapshots")), 0);
	json_decref(r);
	assert_int_equal(snap_count(s, s->account), 1);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id)));
}

static void
test_cap_and_failures_change_nothing(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	long long before;
	struct err e;

	sfx_create(s, 10, id);
	for (int i = 0; i < MAX_SNAPSHOTS; i++)
		json_decref(snapshot(s, id));
	before = sfx_balance(s, s->account);
	e = sfx_fails(s, s->account, "snapshot_sandbox", json_pack("{s:s}", "sandbox_id", id),
	    ERR_LIMIT);
	assert_non_null(strstr(e.msg, "delete one first"));
	exec_sql(s, "UPDATE snapshots SET state = 'deleted' WHERE account_id = $1::uuid",
	    s->account);
	/* A save that fails: the money back, the sandbox running. */
	fake_vmm_fail_snapshots(1);
	sfx_fails(s, s->account, "snapshot_sandbox", json_pack("{s:s}", "sandbox_id", id),
	    ERR_UNAVAILABLE);
	assert_int_equal(sfx_balance(s, s->account), before);
	expect_state(s, id, "running");
	assert_int_equal(snap_count(s, s->account), 0);
	/* Only a running sandbox: a paused one is refused. */
	json_decref(sfx_ok(s, s->account, "pause_sandbox", json_pack("{s:s}", "sandbox_id", id)));
	sfx_fails(s, s->account, "snapshot_sandbox", json_pack("{s:s}", "sandbox_id", id),
	    ERR_CONFLICT);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id)));
}

static void
test_snapshot_expires(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], snap[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	r = snapshot(s, id);
	snprintf(snap, sizeof(snap), "%s", sfx_str(r, "snapshot_id"));
	json_decref(r);
	exec_sql(s, "UPDATE snapshots SET expires_at = now() WHERE id = $1", snap);
	/* The maintenance thread ends it within a round or two. */
	for (int waited = 0; snap_count(s, s->account) > 0 && waited < EXPIRY_WAIT_MS;
	     waited += POLL_MS)
		usleep(POLL_MS * 1000);
	assert_int_equal(snap_count(s, s->account), 0);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM snapshots WHERE id = $1"
			     " AND end_reason = 'expired'",
			     snap),
	    1);
	/* Expired in full: nothing comes back. */
	assert_int_equal(sfx_ll(s, "SELECT refunded FROM snapshots WHERE id = $1", snap), 0);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id)));
}

/* A snapshot whose aasd stopped: kept when its files are whole, given back
 * when not; the sandbox runs either way. */
static void
test_reconcile_ends_a_snapshot(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], snap[ID_MAX];
	long long before;
	struct err e;
	json_t *r;

	sfx_create(s, 10, id);
	r = snapshot(s, id);
	snprintf(snap, sizeof(snap), "%s", sfx_str(r, "snapshot_id"));
	json_decref(r);
	/* As if its aasd stopped before recording it. */
	exec_sql(s, "UPDATE snapshots SET state = 'saving' WHERE id = $1", snap);
	exec_sql(s, "UPDATE sandboxes SET state = 'snapshotting', owner = NULL WHERE id = $1", id);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	expect_state(s, id, "running");
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM snapshots WHERE id = $1"
			     " AND state = 'ready'",
			     snap),
	    1);
	/* Its files gone before the stop: failed, charged nothing. */
	before = sfx_balance(s, s->account);
	orch_snapshot_delete(NULL, snap);
	exec_sql(s, "UPDATE snapshots SET state = 'saving' WHERE id = $1", snap);
	exec_sql(s, "UPDATE sandboxes SET state = 'snapshotting', owner = NULL WHERE id = $1", id);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	expect_state(s, id, "running");
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM snapshots WHERE id = $1"
			     " AND end_reason = 'failed'",
			     snap),
	    1);
	assert_int_equal(sfx_balance(s, s->account), before + KEEP * PRICE_STORAGE);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id)));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_snapshot_charges_storage_and_runs_on),
		T(test_fork_is_a_new_sandbox_of_the_snapshot),
		T(test_snapshots_never_cross_accounts),
		T(test_cap_and_failures_change_nothing),
		T(test_snapshot_expires),
		T(test_reconcile_ends_a_snapshot),
		cmocka_unit_test_setup_teardown(test_fork_takes_its_snapshots_network,
		    sfx_setup_net_off, sfx_teardown),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
