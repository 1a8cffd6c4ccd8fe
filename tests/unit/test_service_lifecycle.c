/* test_service_lifecycle.c - a sandbox's life and its money, through
 * tools_invoke and sbx_reconcile, against the real service, store,
 * settlement and reaper over PostgreSQL and a fake hypervisor
 * (fake_vmm.h): extend, destroy, a failed boot, a lost VM, a VM without a
 * row, expiry with nobody asking, a surplus warm VM, and the end reason
 * each of them records. Needs AAS_TEST_DATABASE_URL; each
 * test ends with every account's balance equal to the sum of its ledger
 * (checked in the tear-down). */
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
#include "tests/unit/fake_vmm.h"
#include "tests/unit/service_fixture.h"

#define ID_MAX 32
#define EXPIRY_WAIT_MS 20000 /* the reaper's slack over a 2 s lifetime */
#define POLL_MS 100

#define LOST_AFTER_MS 2500 /* a lost VM ran this long: 3 billed minutes of 1 s */
#define LATER_MS 1500      /* time after the loss that must not be billed */

#define RAN_MS                                                             \
	"SELECT (extract(epoch FROM failed_at - ready_at) * 1000)::bigint" \
	" FROM sandboxes WHERE id = $1"

#define EXPIRES_MS                                               \
	"SELECT (extract(epoch FROM expires_at) * 1000)::bigint" \
	" FROM sandboxes WHERE id = $1"

/* The row's end_reason ("" for NULL). */
static const char *
end_reason(struct sfx *s, const char *id)
{
	static char v[32];

	sfx_text(s, "SELECT end_reason FROM sandboxes WHERE id = $1", id, v, sizeof(v));
	return v;
}

static json_t *
extend(struct sfx *s, const char *id, int minutes)
{
	return sfx_ok(s, s->account, "extend_sandbox",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "minutes", minutes));
}

static struct err
extend_fails(struct sfx *s, const char *id, int minutes, enum err_kind kind)
{
	return sfx_fails(s, s->account, "extend_sandbox",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "minutes", minutes), kind);
}

static json_t *
destroy(struct sfx *s, const char *id)
{
	return sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id));
}

/* ---- extend ---- */

static void
test_extend_charges_and_moves_expiry(void **state)
{
	struct sfx *s = *state;
	long long expires, balance;
	char id[ID_MAX];
	struct err e;
	json_t *r;

	sfx_create(s, 10, id);
	expires = sfx_ll(s, EXPIRES_MS, id);
	r = extend(s, id, 5);
	assert_int_equal(sfx_int(r, "charged"), 5 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_int(r, "minutes_added"), 5);
	balance = SFX_FREE_CREDIT - 15 * SFX_PRICE_SMALL;
	assert_int_equal(sfx_int(r, "balance"), balance);
	json_decref(r);
	assert_int_equal(sfx_balance(s, s->account), balance);
	assert_int_equal(sfx_ll(s, EXPIRES_MS, id), expires + 5 * 60 * 1000);
	assert_int_equal(sfx_ll(s, "SELECT paid_minutes FROM sandboxes WHERE id = $1", id), 15);
	assert_int_equal(sfx_ll(s, "SELECT charged FROM sandboxes WHERE id = $1", id),
	    15 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM ledger WHERE sandbox_id = $1"
			     " AND kind = 'charge'",
			     id),
	    2);

	/* 15 + 16 is past the 30-minute maximum: refused, nothing moves. */
	e = extend_fails(s, id, SFX_MAX_LIFETIME_MIN - 15 + 1, ERR_LIMIT);
	assert_non_null(strstr(e.msg, "at most 30 minutes"));
	assert_int_equal(sfx_balance(s, s->account), balance);
	assert_int_equal(sfx_ll(s, EXPIRES_MS, id), expires + 5 * 60 * 1000);

	/* Up to the maximum exactly is allowed; a minute more is not. */
	json_decref(extend(s, id, SFX_MAX_LIFETIME_MIN - 15));
	extend_fails(s, id, 1, ERR_LIMIT);
	assert_int_equal(sfx_ll(s, "SELECT paid_minutes FROM sandboxes WHERE id = $1", id),
	    SFX_MAX_LIFETIME_MIN);
	assert_int_equal(sfx_ll(s, EXPIRES_MS, id), expires + 20 * 60 * 1000);
	assert_int_equal(sfx_balance(s, s->account),
	    SFX_FREE_CREDIT - SFX_MAX_LIFETIME_MIN * SFX_PRICE_SMALL);

	/* An ended sandbox cannot be extended. */
	json_decref(destroy(s, id));
	balance = sfx_balance(s, s->account);
	extend_fails(s, id, 1, ERR_CONFLICT);
	assert_int_equal(sfx_balance(s, s->account), balance);
}

static void
test_extend_refused_without_credit(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	long long expires, balance;
	struct err e;
	json_t *r;

	/* A large sandbox for 20 minutes leaves 40000 of 200000. */
	r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i}", "size", "large", "timeout_minutes", 20));
	snprintf(id, sizeof(id), "%s", sfx_str(r, "sandbox_id"));
	json_decref(r);
	balance = sfx_balance(s, s->account);
	assert_int_equal(balance, SFX_FREE_CREDIT - 20 * SFX_PRICE_LARGE);
	expires = sfx_ll(s, EXPIRES_MS, id);
	/* 10 more minutes cost 80000. */
	e = extend_fails(s, id, 10, ERR_PAYMENT);
	assert_non_null(strstr(e.msg, "not enough credit"));
	assert_int_equal(sfx_balance(s, s->account), balance);
	assert_int_equal(sfx_ll(s, EXPIRES_MS, id), expires);
	assert_int_equal(sfx_ll(s, "SELECT paid_minutes FROM sandboxes WHERE id = $1", id), 20);
}

/* ---- destroy ---- */

static void
test_destroy_refunds_unused_minutes_once(void **state)
{
	struct sfx *s = *state;
	const long long after = SFX_FREE_CREDIT - SFX_PRICE_SMALL;
	struct fake_vm_info vm;
	char id[ID_MAX];
	json_t *r, *u;

	sfx_create(s, 10, id);
	/* Within its first minute: one minute used, nine given back. */
	r = destroy(s, id);
	assert_string_equal(sfx_str(r, "state"), "destroyed");
	assert_string_equal(sfx_str(r, "end_reason"), "destroyed");
	assert_int_equal(sfx_int(r, "minutes_used"), 1);
	assert_int_equal(sfx_int(r, "charged"), 10 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_int(r, "refunded"), 9 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_int(r, "balance"), after);
	json_decref(r);
	assert_int_equal(sfx_balance(s, s->account), after);
	assert_int_equal(sfx_ll(s,
			     "SELECT amount FROM ledger WHERE sandbox_id = $1"
			     " AND kind = 'refund'",
			     id),
	    9 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE id = $1"
			     " AND settled_at IS NOT NULL",
			     id),
	    1);
	assert_int_equal(sfx_ll(s, "SELECT refunded FROM sandboxes WHERE id = $1", id),
	    9 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s, "SELECT minutes_used FROM sandboxes WHERE id = $1", id), 1);
	/* The answer came with the VM out of reach; it goes right after. */
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_true(vm.paused);
	assert_int_equal(fake_vm_wait_destroyed(id, 10000), 0);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_false(vm.live);
	assert_int_equal(vm.destroys, 1);

	/* Again: the same answer, no second refund, no second destroy. */
	r = destroy(s, id);
	assert_string_equal(sfx_str(r, "state"), "destroyed");
	assert_int_equal(sfx_int(r, "refunded"), 9 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_int(r, "balance"), after);
	json_decref(r);
	assert_int_equal(sfx_balance(s, s->account), after);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM ledger WHERE sandbox_id = $1"
			     " AND kind = 'refund'",
			     id),
	    1);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_int_equal(vm.destroys, 1);

	/* The usage report shows what it cost. */
	u = sfx_ok(s, s->account, "get_usage", NULL);
	assert_int_equal(sfx_int(json_array_get(json_object_get(u, "sandboxes"), 0), "cost"),
	    SFX_PRICE_SMALL);
	json_decref(u);

	/* A destroyed sandbox runs nothing. */
	sfx_fails(s, s->account, "run_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command", "true"), ERR_CONFLICT);
}

/* ---- failures ---- */

static void
test_boot_failure_refunds_in_full(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], st[16];

	fake_vmm_fail_boots(1);
	sfx_fails(s, s->account, "create_sandbox", json_pack("{s:i}", "timeout_minutes", 10),
	    ERR_UNAVAILABLE);
	assert_int_equal(fake_vmm_counts().boot_failures, 1);
	/* The row that was made failed and gave everything back. */
	sfx_text(s, "SELECT id FROM sandboxes WHERE account_id = $1", s->account, id, sizeof(id));
	sfx_state(s, id, st, sizeof(st));
	assert_string_equal(st, "failed");
	assert_string_equal(end_reason(s, id), "boot_failed");
	assert_int_equal(sfx_ll(s, "SELECT minutes_used FROM sandboxes WHERE id = $1", id), 0);
	assert_int_equal(sfx_ll(s, "SELECT refunded FROM sandboxes WHERE id = $1", id),
	    10 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_ll(s, "SELECT sum(amount) FROM ledger WHERE sandbox_id = $1", id), 0);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT);

	/* The next boot works. */
	sfx_create(s, 10, id);
}

/* Billed minutes of one second (AAS_BILLING_MINUTE_S=1): a VM that stops
 * on its own after N started minutes is charged N, up to when reconcile
 * saw it gone, and later time adds nothing. */
static void
test_lost_vm_is_billed_until_seen(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], st[16], reason[200];
	long long ran_ms, used;
	struct err e;
	json_t *r;

	sfx_create(s, SFX_MAX_LIFETIME_MIN, id);
	usleep(LOST_AFTER_MS * 1000);
	assert_int_equal(fake_vm_lose(id), 0);
	/* Until reconcile looks, the row says running but the guest is gone. */
	sfx_fails(s, s->account, "run_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command", "true"), ERR_UNAVAILABLE);

	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	sfx_state(s, id, st, sizeof(st));
	assert_string_equal(st, "failed");
	sfx_text(s, "SELECT failure_reason FROM sandboxes WHERE id = $1", id, reason,
	    sizeof(reason));
	assert_non_null(strstr(reason, "stopped unexpectedly"));
	assert_string_equal(end_reason(s, id), "guest_shutdown");
	/* Charged for every minute started between ready and the loss. */
	ran_ms = sfx_ll(s, RAN_MS, id);
	assert_true(ran_ms >= LOST_AFTER_MS);
	used = (ran_ms + 999) / 1000;
	assert_true(used >= LOST_AFTER_MS / 1000 + 1);
	assert_true(used < SFX_MAX_LIFETIME_MIN);
	assert_int_equal(sfx_ll(s, "SELECT minutes_used FROM sandboxes WHERE id = $1", id), used);
	assert_int_equal(sfx_ll(s, "SELECT refunded FROM sandboxes WHERE id = $1", id),
	    (SFX_MAX_LIFETIME_MIN - used) * SFX_PRICE_SMALL);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - used * SFX_PRICE_SMALL);
	r = sfx_ok(s, s->account, "get_sandbox", json_pack("{s:s}", "sandbox_id", id));
	assert_string_equal(sfx_str(r, "state"), "failed");
	assert_string_equal(sfx_str(r, "end_reason"), "guest_shutdown");
	assert_non_null(strstr(sfx_str(r, "console_tail"), "fake console"));
	json_decref(r);

	/* Once, and no later than the loss: time passing, a second pass and a
	 * destroy add nothing. */
	usleep(LATER_MS * 1000);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	r = destroy(s, id);
	assert_string_equal(sfx_str(r, "state"), "failed");
	assert_string_equal(sfx_str(r, "end_reason"), "guest_shutdown");
	assert_int_equal(sfx_int(r, "minutes_used"), used);
	assert_int_equal(sfx_int(r, "refunded"), (SFX_MAX_LIFETIME_MIN - used) * SFX_PRICE_SMALL);
	json_decref(r);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM ledger WHERE sandbox_id = $1"
			     " AND kind = 'refund'",
			     id),
	    1);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - used * SFX_PRICE_SMALL);
}

/* A guest whose kernel stopped for lack of memory says so on its console. */
static void
test_lost_vm_out_of_memory(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	struct err e;
	json_t *r;

	sfx_create(s, 10, id);
	assert_int_equal(fake_vm_set_console(id,
			     "Kernel panic - not syncing: Out of memory and no killable"
			     " processes...\n"),
	    0);
	assert_int_equal(fake_vm_lose(id), 0);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	assert_string_equal(end_reason(s, id), "out_of_memory");
	r = sfx_ok(s, s->account, "list_sandboxes", NULL);
	assert_string_equal(sfx_str(json_array_get(json_object_get(r, "sandboxes"), 0),
				"end_reason"),
	    "out_of_memory");
	json_decref(r);
	/* Within its first minute: that minute is charged. */
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - SFX_PRICE_SMALL);
}

/* A VM the host stopped at its memory limit (guest memory plus QEMU's
 * overhead) ends as out_of_memory too, with its own reason, and is
 * settled once. */
static void
test_lost_vm_memory_limit(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], why[256];
	struct err e;

	sfx_create(s, 10, id);
	assert_int_equal(fake_vm_lose_oom(id), 0);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	assert_string_equal(end_reason(s, id), "out_of_memory");
	sfx_text(s, "SELECT failure_reason FROM sandboxes WHERE id = $1", id, why, sizeof(why));
	if (strstr(why, "more memory on its host") == NULL)
		fail_msg("failure_reason: %s", why);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM ledger WHERE sandbox_id = $1"
			     " AND kind = 'refund'",
			     id),
	    1);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - SFX_PRICE_SMALL);
}

/* A guest whose agent broke the protocol: the call that sees it fails
 * with a message naming the end, the sandbox is destroyed as
 * agent_protocol with the reason kept, and it is settled once (a second
 * call and a reconcile change nothing). */
static void
test_agent_fault_ends_sandbox(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], st[16], why[256];
	struct err e;
	long long after;

	sfx_create(s, 10, id);
	assert_int_equal(fake_vm_set_agent_fault(id, "frame of 131073 bytes"), 0);
	e = sfx_fails(s, s->account, "run_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command", "true"), ERR_UNAVAILABLE);
	if (strstr(e.msg, "agent_protocol") == NULL)
		fail_msg("%s", e.msg);
	sfx_state(s, id, st, sizeof(st));
	assert_string_equal(st, "destroyed");
	assert_string_equal(end_reason(s, id), "agent_protocol");
	sfx_text(s, "SELECT failure_reason FROM sandboxes WHERE id = $1", id, why, sizeof(why));
	assert_non_null(strstr(why, "frame of 131073 bytes"));
	after = sfx_balance(s, s->account);
	assert_int_equal(after, sfx_ledger_sum(s, s->account));
	/* Within its first minute: that minute is charged, the rest refunded. */
	assert_int_equal(after, SFX_FREE_CREDIT - SFX_PRICE_SMALL);
	sfx_fails(s, s->account, "read_file",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "path", "/etc/hostname"), ERR_CONFLICT);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	assert_int_equal(sfx_balance(s, s->account), after);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM ledger WHERE sandbox_id = $1"
			     " AND kind = 'refund'",
			     id),
	    1);
}

/* get_command meets the broken agent: the same end. */
static void
test_agent_fault_seen_by_get_command(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], cmd[64];
	struct err e;
	json_t *r;

	sfx_create(s, 10, id);
	r = sfx_ok(s, s->account, "run_command",
	    json_pack("{s:s, s:s, s:b}", "sandbox_id", id, "command", "sleep 30", "background", 1));
	snprintf(cmd, sizeof(cmd), "%s", sfx_str(r, "command_id"));
	json_decref(r);
	assert_int_equal(fake_vm_set_agent_fault(id, "unknown channel 9"), 0);
	e = sfx_fails(s, s->account, "get_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command_id", cmd), ERR_UNAVAILABLE);
	if (strstr(e.msg, "agent_protocol") == NULL)
		fail_msg("%s", e.msg);
	assert_string_equal(end_reason(s, id), "agent_protocol");
	assert_int_equal(sfx_balance(s, s->account), sfx_ledger_sum(s, s->account));
}

/* The same noticed by reconcile when no call was made. */
static void
test_agent_fault_seen_by_reconcile(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX];
	struct err e;

	sfx_create(s, 10, id);
	assert_int_equal(fake_vm_set_agent_fault(id, "data beyond the window"), 0);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	assert_string_equal(end_reason(s, id), "agent_protocol");
	assert_int_equal(sfx_balance(s, s->account), sfx_ledger_sum(s, s->account));
}

/* A row left 'creating' by an instance that stopped (no owner) is failed
 * as host_lost and refunded in full: it never became ready. */
static void
test_half_created_is_host_lost(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX], st[16];
	struct err e;

	sfx_create(s, 10, id);
	assert_int_equal(sfx_ll(s,
			     "UPDATE sandboxes SET state = 'creating', ready_at = NULL,"
			     " expires_at = NULL, owner = NULL WHERE id = $1 RETURNING 1",
			     id),
	    1);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	sfx_state(s, id, st, sizeof(st));
	assert_string_equal(st, "failed");
	assert_string_equal(end_reason(s, id), "host_lost");
	assert_true(sfx_ll(s,
			"SELECT count(*) FROM sandboxes WHERE id = $1 AND failed_at IS NOT NULL",
			id) == 1);
	assert_int_equal(sfx_ll(s, "SELECT refunded FROM sandboxes WHERE id = $1", id),
	    10 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT);
}

/* A warm VM the pool no longer wants (booted with another network device
 * than new ones get) is destroyed as pool_surplus. */
static void
test_pool_surplus(void **state)
{
	struct sfx *s = *state;
	char id[ID_MAX] = "", st[16] = "";
	long long t0 = clock_ms();

	while (clock_ms() - t0 < EXPIRY_WAIT_MS && id[0] == '\0') {
		if (sfx_ll(s, "SELECT count(*) FROM sandboxes WHERE host_uri = $1 AND in_pool",
			s->host) > 0)
			sfx_text(s, "SELECT id FROM sandboxes WHERE host_uri = $1 AND in_pool",
			    s->host, id, sizeof(id));
		else
			usleep(POLL_MS * 1000);
	}
	assert_true(id[0] != '\0');
	assert_int_equal(sfx_ll(s,
			     "UPDATE sandboxes SET net = CASE net WHEN 'nat' THEN 'none'"
			     " ELSE 'nat' END WHERE id = $1 RETURNING 1",
			     id),
	    1);
	t0 = clock_ms();
	while (clock_ms() - t0 < EXPIRY_WAIT_MS) {
		sfx_state(s, id, st, sizeof(st));
		if (strcmp(st, "destroyed") == 0)
			break;
		usleep(POLL_MS * 1000);
	}
	assert_string_equal(st, "destroyed");
	assert_string_equal(end_reason(s, id), "pool_surplus");
}

/* No sandbox ends without a reason: the database refuses it. */
static void
test_ended_row_needs_a_reason(void **state)
{
	struct sfx *s = *state;
	const char *p[1];
	char id[ID_MAX];
	struct err e;
	PGresult *r;

	sfx_create(s, 10, id);
	p[0] = id;
	err_clear(&e);
	r = db_query(s->app->db,
	    "UPDATE sandboxes SET state = 'destroyed', destroyed_at = now() WHERE id = $1", 1, p,
	    &e);
	assert_null(r);
	assert_int_equal(e.kind, ERR_INVALID);
	err_clear(&e);
	r = db_query(s->app->db, "UPDATE sandboxes SET end_reason = 'bored' WHERE id = $1", 1, p,
	    &e);
	assert_null(r);
	assert_int_equal(e.kind, ERR_INVALID);
	json_decref(destroy(s, id));
}

/* A VM that cannot be put out of reach is destroyed before the answer,
 * as every destroy was before teardowns moved after it. */
static void
test_destroy_waits_when_vm_cannot_pause(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX];
	json_t *r;

	sfx_create(s, 10, id);
	fake_vmm_fail_detaches(1);
	r = destroy(s, id);
	assert_string_equal(sfx_str(r, "state"), "destroyed");
	assert_int_equal(sfx_int(r, "refunded"), 9 * SFX_PRICE_SMALL);
	json_decref(r);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_false(vm.paused);
	assert_false(vm.live);
	assert_int_equal(vm.destroys, 1);
}

static void
test_reconcile_destroys_vm_without_row(void **state)
{
	static const char orphan[] = "sbx-0rphan0000000000";
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX], st[16];
	struct err e;

	sfx_create(s, 10, id);
	assert_int_equal(fake_vm_add_orphan(orphan), 0);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	assert_true(fake_vmm_counts().lists >= 1);
	assert_int_equal(fake_vm_info(orphan, &vm), 0);
	assert_false(vm.live);
	/* The sandbox with a row is left alone. */
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_true(vm.live);
	sfx_state(s, id, st, sizeof(st));
	assert_string_equal(st, "running");
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - 10 * SFX_PRICE_SMALL);
}

/* ---- expiry ---- */

static void
test_expiry_destroys_and_settles(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[ID_MAX], st[16] = "";
	long long t0;

	/* Billed minutes of one second (AAS_BILLING_MINUTE_S=1): two minutes
	 * of life, then the reaper ends it without anyone asking. */
	sfx_create(s, 2, id);
	t0 = clock_ms();
	while (clock_ms() - t0 < EXPIRY_WAIT_MS) {
		sfx_state(s, id, st, sizeof(st));
		if (strcmp(st, "destroyed") == 0)
			break;
		usleep(POLL_MS * 1000);
	}
	assert_string_equal(st, "destroyed");
	assert_string_equal(end_reason(s, id), "expired");
	assert_true(sfx_ll(s,
			"SELECT (extract(epoch FROM destroyed_at - ready_at) * 1000)::bigint"
			" FROM sandboxes WHERE id = $1",
			id) >= 2000);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_false(vm.live);
	assert_int_equal(vm.destroys, 1);
	/* Settled: it used what it paid for, so nothing comes back. */
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE id = $1"
			     " AND settled_at IS NOT NULL",
			     id),
	    1);
	assert_int_equal(sfx_ll(s, "SELECT minutes_used FROM sandboxes WHERE id = $1", id), 2);
	assert_int_equal(sfx_ll(s, "SELECT refunded FROM sandboxes WHERE id = $1", id), 0);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - 2 * SFX_PRICE_SMALL);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_extend_charges_and_moves_expiry),
		T(test_extend_refused_without_credit),
		T(test_destroy_refunds_unused_minutes_once),
		T(test_boot_failure_refunds_in_full),
		cmocka_unit_test_setup_teardown(test_lost_vm_is_billed_until_seen,
		    sfx_setup_short_minute, sfx_teardown),
		T(test_lost_vm_out_of_memory),
		T(test_lost_vm_memory_limit),
		T(test_half_created_is_host_lost),
		T(test_agent_fault_ends_sandbox),
		T(test_agent_fault_seen_by_reconcile),
		T(test_agent_fault_seen_by_get_command),
		T(test_ended_row_needs_a_reason),
		cmocka_unit_test_setup_teardown(test_pool_surplus, sfx_setup_warm_pool,
		    sfx_teardown),
		T(test_reconcile_destroys_vm_without_row),
		T(test_destroy_waits_when_vm_cannot_pause),
		cmocka_unit_test_setup_teardown(test_expiry_destroys_and_settles,
		    sfx_setup_short_minute, sfx_teardown),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
