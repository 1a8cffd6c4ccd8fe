/* test_service_revoke.c - revoking keys and disabling accounts against
 * the real caches, notification listener, store, settlement and reaper
 * over PostgreSQL and a fake hypervisor: a key lookup that read the
 * database before a revocation (or a disable) was announced must not
 * store its answer after it, and a disabled account loses its keys,
 * sessions and sandboxes (settled, end reason account_disabled).
 *
 * The race is made deterministic by wrapping db_query (-Wl,--wrap, see
 * the Makefile): right after the lookup's query answered, the key is
 * revoked and the test waits until this process's listener has handled
 * the notice; only then does the lookup go on to fill the cache. */
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
#include "base/ttlmap.h"
#include "account/accounts.h"
#include "account/session.h"
#include "sandbox/store.h"
#include "tests/unit/fake_vmm.h"
#include "tests/unit/service_fixture.h"

#define ID_MAX 32
#define WAIT_MS 10000 /* for a notice to be handled, or the reaper to act */
#define POLL_MS 10
#define MARKER "revoke-test-marker"

PGresult *__real_db_query(struct db *db, const char *sql, int nparams, const char *const *params,
    struct err *e);
PGresult *__wrap_db_query(struct db *db, const char *sql, int nparams, const char *const *params,
    struct err *e);

/* What happens between the key lookup's query and its cache insert. */
static struct {
	struct sfx *s;
	void (*between)(struct sfx *s);
	int armed;
	int fired;
} race;

static const char *
str_or_empty(const char *s)
{
	return s ? s : "";
}

PGresult *
__wrap_db_query(struct db *db, const char *sql, int nparams, const char *const *params,
    struct err *e)
{
	PGresult *r = __real_db_query(db, sql, nparams, params, e);

	/* Only the key lookup (acct_resolve_key), and only once. */
	if (race.armed && strstr(str_or_empty(sql), "FROM api_keys k") != NULL) {
		race.armed = 0;
		race.fired = 1;
		race.between(race.s);
	}
	return r;
}

/* Waits until the listener of this process has handled every notice
 * committed so far: notices reach it in commit order, so once a marker
 * sent now has removed its cache entry, the earlier ones were handled. */
static void
wait_notices_handled(struct sfx *s)
{
	struct err e;
	char v[8];
	long long t0 = clock_ms();

	ttl_put(s->app->sessions, MARKER, "1");
	assert_true(ttl_get(s->app->sessions, MARKER, v, sizeof(v)));
	err_clear(&e);
	assert_int_equal(db_exec(s->app->db, "SELECT pg_notify('aas_invalidate', 's:" MARKER "')",
			     0, NULL, NULL, &e),
	    0);
	while (ttl_get(s->app->sessions, MARKER, v, sizeof(v))) {
		if (clock_ms() - t0 > WAIT_MS)
			fail_msg("the notice was not handled in %d ms", WAIT_MS);
		usleep(POLL_MS * 1000);
	}
}

static struct acct_new_key new_key;

static void
revoke_now(struct sfx *s)
{
	struct err e;

	err_clear(&e);
	assert_int_equal(acct_key_revoke(s->app->db, new_key.key_id, &e), 0);
	wait_notices_handled(s);
}

static void
disable_now(struct sfx *s)
{
	struct acct_disabled d;
	struct err e;

	err_clear(&e);
	assert_int_equal(acct_disable(s->app->db, s->account, &d, &e), 0);
	wait_notices_handled(s);
}

/* A lookup whose query ran before `between` revoked the key. */
static void
lookup_across(struct sfx *s, void (*between)(struct sfx *s))
{
	char account[ACCT_ID_LEN + 1];
	struct err e;
	size_t len;

	err_clear(&e);
	assert_int_equal(acct_key_create(s->app->db, s->account, "race", &new_key, &e), 0);
	len = strlen(new_key.key);
	race.s = s;
	race.between = between;
	race.fired = 0;
	race.armed = 1;
	/* This lookup read the database while the key was live: it may
	 * answer, but must not leave the key cached. */
	assert_int_equal(acct_resolve_key_cached(s->app->db, s->app->keys, new_key.key, len,
			     account, &e),
	    0);
	assert_true(race.fired);
	assert_string_equal(account, s->account);
	assert_false(acct_key_cache_peek(s->app->keys, new_key.key, len, account));
	err_clear(&e);
	assert_int_equal(acct_resolve_key_cached(s->app->db, s->app->keys, new_key.key, len,
			     account, &e),
	    -1);
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
}

static void
test_lookup_racing_revoke_is_not_cached(void **state)
{
	lookup_across(*state, revoke_now);
}

static void
test_lookup_racing_disable_is_not_cached(void **state)
{
	lookup_across(*state, disable_now);
}

/* Without a race the key is cached (so the tests above can fail). */
static void
test_lookup_is_cached(void **state)
{
	struct sfx *s = *state;
	char account[ACCT_ID_LEN + 1];
	struct err e;

	err_clear(&e);
	assert_int_equal(acct_key_create(s->app->db, s->account, "plain", &new_key, &e), 0);
	assert_int_equal(acct_resolve_key_cached(s->app->db, s->app->keys, new_key.key,
			     strlen(new_key.key), account, &e),
	    0);
	assert_true(acct_key_cache_peek(s->app->keys, new_key.key, strlen(new_key.key), account));
	revoke_now(s);
	assert_false(acct_key_cache_peek(s->app->keys, new_key.key, strlen(new_key.key), account));
}

static void
wait_state(struct sfx *s, const char *id, const char *want)
{
	char st[16] = "";
	long long t0 = clock_ms();

	while (clock_ms() - t0 < WAIT_MS) {
		sfx_state(s, id, st, sizeof(st));
		if (strcmp(st, want) == 0)
			return;
		usleep(POLL_MS * 1000);
	}
	fail_msg("sandbox %s is %s, not %s, after %d ms", id, st, want, WAIT_MS);
}

static void
test_disable_stops_everything(void **state)
{
	struct sfx *s = *state;
	struct sess_limits lim;
	struct sess_info info;
	struct acct_disabled d;
	long long live;
	struct fake_vm_info vm;
	char id[ID_MAX], other_id[ID_MAX], sess[SESS_ID_LEN + 1], account[ACCT_ID_LEN + 1];
	char v[32];
	struct err e;

	err_clear(&e);
	sfx_create(s, 10, id);
	/* The other account's sandbox lives on. */
	json_t *r = sfx_ok(s, s->other, "create_sandbox",
	    json_pack("{s:i}", "timeout_minutes", 10));
	snprintf(other_id, sizeof(other_id), "%s", sfx_str(r, "sandbox_id"));
	json_decref(r);
	sess_limits_from(&s->app->cfg, &lim);
	assert_int_equal(sess_create(s->app->db, &lim, "2025-06-18", s->account, NULL, "t", "1",
			     sess, &e),
	    0);
	assert_int_equal(sess_lookup_cached(s->app->db, s->app->sessions, &lim, sess, &info, &e),
	    0);
	assert_int_equal(acct_key_create(s->app->db, s->account, "k", &new_key, &e), 0);
	assert_int_equal(acct_resolve_key_cached(s->app->db, s->app->keys, new_key.key,
			     strlen(new_key.key), account, &e),
	    0);

	assert_int_equal(store_disable_account(s->app->db, s->account, &d, &live, &e), 0);
	assert_false(d.already);
	assert_int_equal(d.keys_revoked, 2); /* the first key and this one */
	assert_int_equal(d.sessions_ended, 1);
	assert_int_equal(live, 1);

	/* The reaper, woken by the notice, stops and settles it. */
	wait_state(s, id, "destroyed");
	sfx_text(s, "SELECT end_reason FROM sandboxes WHERE id = $1", id, v, sizeof(v));
	assert_string_equal(v, "account_disabled");
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_false(vm.live);
	assert_int_equal(sfx_ll(s, "SELECT minutes_used FROM sandboxes WHERE id = $1", id), 1);
	assert_int_equal(sfx_ll(s, "SELECT refunded FROM sandboxes WHERE id = $1", id),
	    9 * SFX_PRICE_SMALL);
	assert_int_equal(sfx_balance(s, s->account), SFX_FREE_CREDIT - SFX_PRICE_SMALL);
	sfx_state(s, other_id, v, sizeof(v));
	assert_string_equal(v, "running");

	/* Keys and sessions are gone from the caches and the database. */
	wait_notices_handled(s);
	assert_false(acct_key_cache_peek(s->app->keys, new_key.key, strlen(new_key.key), account));
	assert_int_equal(acct_resolve_key_cached(s->app->db, s->app->keys, new_key.key,
			     strlen(new_key.key), account, &e),
	    -1);
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
	assert_false(sess_cache_peek(s->app->sessions, sess, &info));
	err_clear(&e);
	assert_int_equal(sess_lookup_cached(s->app->db, s->app->sessions, &lim, sess, &info, &e),
	    -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);

	/* A create that got past the key check before the disable. */
	sfx_fails(s, s->account, "create_sandbox", json_pack("{s:i}", "timeout_minutes", 1),
	    ERR_FORBIDDEN);

	/* Enabled again: the old keys stay revoked, a new one works. */
	err_clear(&e);
	assert_int_equal(acct_enable(s->app->db, s->account, &e), 0);
	assert_int_equal(acct_resolve_key(s->app->db, new_key.key, strlen(new_key.key), account,
			     &e),
	    -1);
	err_clear(&e);
	assert_int_equal(acct_key_create(s->app->db, s->account, "after", &new_key, &e), 0);
	assert_int_equal(acct_resolve_key(s->app->db, new_key.key, strlen(new_key.key), account,
			     &e),
	    0);
	json_decref(sfx_ok(s, s->other, "destroy_sandbox",
	    json_pack("{s:s}", "sandbox_id", other_id)));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lookup_is_cached),
		T(test_lookup_racing_revoke_is_not_cached),
		T(test_lookup_racing_disable_is_not_cached),
		T(test_disable_stops_everything),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
