/* test_service_hosts.c - placement with admission through create_sandbox:
 * a full host refuses with no_capacity and charges nothing, parallel
 * creates never reserve past a host's limit, draining and an unreachable
 * host. The real service, store and billing over PostgreSQL and the fake
 * hypervisor (fake_vmm.h). Needs AAS_TEST_DATABASE_URL. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/err.h"
#include "sandbox/hosts.h"
#include "sandbox/sandbox.h"
#include "vmm/orch.h"
#include "service/tools.h"
#include "tests/unit/fake_vmm.h"
#include "tests/unit/service_fixture.h"

#define PAR_THREADS 20
#define PAR_FIT 5 /* small sandboxes the host takes */

/* The host reports `memory_mib` of RAM; the row says so at once (the
 * service's own poll would within seconds). */
static void
set_host_memory(struct sfx *s, long long memory_mib)
{
	char mem[32];

	assert_int_equal(fake_host_set(s->host, memory_mib, 64, 0), 0);
	snprintf(mem, sizeof(mem), "%lld", memory_mib);
	{
		const char *p[2] = { s->host, mem };
		struct err e;
		err_clear(&e);
		assert_int_equal(db_exec(s->app->db,
				     "UPDATE hosts SET memory_mib = $2::bigint WHERE uri = $1", 2,
				     p, NULL, &e),
		    0);
	}
}

static json_t *
create(struct sfx *s, struct err *e)
{
	return sfx_call(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i}", "size", "small", "timeout_minutes", 2), e);
}

static void
test_full_host_charges_nothing(void **state)
{
	struct sfx *s = *state;
	char a[32], b[32];
	long long before;
	struct err e;

	set_host_memory(s, 1200); /* two small sandboxes of 512 MiB */
	sfx_create(s, 2, a);
	sfx_create(s, 2, b);
	assert_int_equal(sfx_ll(s,
			     "SELECT sum(reserved_memory_mib) FROM sandboxes WHERE host_uri = $1"
			     " AND state = 'running'",
			     s->host),
	    1024);
	before = sfx_balance(s, s->account);
	err_clear(&e);
	assert_null(create(s, &e));
	assert_int_equal(e.kind, ERR_CAPACITY);
	assert_non_null(strstr(e.msg, "no capacity for size small"));
	assert_int_equal(sfx_balance(s, s->account), before);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM sandboxes WHERE host_uri = $1", s->host),
	    2);
	/* A destroy gives the room back. */
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", a)));
	sfx_create(s, 2, a);
}

/* The booted-image state's throw-away VM is reserved nowhere: the VM
 * layer hears before each cold boot whether one more of its size fits. */
static void
test_spare_room_told_before_a_boot(void **state)
{
	struct sfx *s = *state;
	char a[32], b[32];

	set_host_memory(s, 1200); /* two small sandboxes of 512 MiB */
	fake_spare_said();
	sfx_create(s, 2, a);
	assert_int_equal(fake_spare_said(), 1);
	sfx_create(s, 2, b);
	assert_int_equal(fake_spare_said(), 0);
	json_decref(sfx_ok(s, s->account, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", b)));
	set_host_memory(s, 4096);
	sfx_create(s, 2, b);
	assert_int_equal(fake_spare_said(), 1);
}

static void
test_draining_host(void **state)
{
	struct sfx *s = *state;
	char a[32];
	struct err e;

	err_clear(&e);
	assert_int_equal(hosts_set_draining(s->app->db, s->host, 1, &e), 0);
	assert_null(create(s, &e));
	assert_int_equal(e.kind, ERR_CAPACITY);
	err_clear(&e);
	assert_int_equal(hosts_set_draining(s->app->db, s->host, 0, &e), 0);
	sfx_create(s, 2, a);
	/* A host with a live sandbox is not forgotten. */
	err_clear(&e);
	assert_int_equal(hosts_remove(s->app->db, s->host, &e), -1);
	assert_int_equal(e.kind, ERR_CONFLICT);
	err_clear(&e);
	assert_int_equal(hosts_remove(s->app->db, "no-such-host", &e), -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);
}

struct par {
	struct sfx *s;
	pthread_barrier_t go;
	atomic_int ok, full, other;
};

static void *
par_create(void *arg)
{
	struct par *p = arg;
	struct err e;
	json_t *out;

	err_clear(&e);
	pthread_barrier_wait(&p->go);
	out = create(p->s, &e);
	if (out != NULL)
		atomic_fetch_add(&p->ok, 1);
	else if (e.kind == ERR_CAPACITY)
		atomic_fetch_add(&p->full, 1);
	else
		atomic_fetch_add(&p->other, 1);
	json_decref(out);
	return NULL;
}

static void
test_parallel_creates_stay_within(void **state)
{
	struct sfx *s = *state;
	struct par p = { .s = s };
	pthread_t t[PAR_THREADS];
	long long before;

	set_host_memory(s, PAR_FIT * 512 + 100);
	before = sfx_balance(s, s->account);
	pthread_barrier_init(&p.go, NULL, PAR_THREADS);
	for (int i = 0; i < PAR_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, par_create, &p), 0);
	for (int i = 0; i < PAR_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&p.go);
	assert_int_equal(atomic_load(&p.other), 0);
	assert_int_equal(atomic_load(&p.ok), PAR_FIT);
	assert_int_equal(atomic_load(&p.full), PAR_THREADS - PAR_FIT);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE host_uri = $1"
			     " AND state IN ('creating', 'running')",
			     s->host),
	    PAR_FIT);
	/* Only the five were charged (2 minutes each). */
	assert_int_equal(before - sfx_balance(s, s->account), PAR_FIT * 2 * SFX_PRICE_SMALL);
}

static void
test_unreachable_host(void **state)
{
	struct sfx *s = *state;
	struct orch_host_stats st = { 0 };
	struct err e;
	char text[32];

	err_clear(&e);
	/* The service's own polls fail too from now on. */
	assert_int_equal(fake_host_set(s->host, 0, 0, 1), 0);
	assert_int_equal(hosts_report(s->app->db, s->host, NULL, "connection refused", 60, &e), 0);
	sfx_text(s, "SELECT state FROM hosts WHERE uri = $1", s->host, text, sizeof(text));
	assert_string_equal(text, "degraded");
	/* Still the only host: a degraded host takes sandboxes when no
	 * healthy one can. */
	sfx_create(s, 2, text);
	/* Not seen for longer than the limit: down, and nothing goes there. */
	{
		const char *p[1] = { s->host };
		assert_int_equal(db_exec(s->app->db,
				     "UPDATE hosts SET seen_at = now() - interval '1 hour'"
				     " WHERE uri = $1",
				     1, p, NULL, &e),
		    0);
	}
	/* One failed poll after a long silence of the poller is not enough. */
	assert_int_equal(hosts_report(s->app->db, s->host, NULL, "connection refused", -1, &e), 0);
	sfx_text(s, "SELECT state FROM hosts WHERE uri = $1", s->host, text, sizeof(text));
	assert_string_equal(text, "degraded");
	assert_int_equal(hosts_report(s->app->db, s->host, NULL, "connection refused", 60, &e), 0);
	sfx_text(s, "SELECT state FROM hosts WHERE uri = $1", s->host, text, sizeof(text));
	assert_string_equal(text, "down");
	assert_null(create(s, &e));
	assert_int_equal(e.kind, ERR_CAPACITY);
	/* Back: up again. */
	assert_int_equal(fake_host_set(s->host, 0, 0, 0), 0);
	st.memory_mib = 65536;
	st.vcpus = 64;
	st.free_memory_mib = -1;
	st.cpu_busy = -1;
	st.disk_free_mib = -1;
	err_clear(&e);
	assert_int_equal(hosts_report(s->app->db, s->host, &st, NULL, 60, &e), 0);
	sfx_text(s, "SELECT state FROM hosts WHERE uri = $1", s->host, text, sizeof(text));
	assert_string_equal(text, "up");
}

/* Waits up to `ms` for the sandbox's state to be `want`. */
static int
state_within(struct sfx *s, const char *id, const char *want, int ms)
{
	char st[32];

	for (int i = 0; i < ms / 50; i++) {
		sfx_state(s, id, st, sizeof(st));
		if (strcmp(st, want) == 0)
			return 1;
		usleep(50000);
	}
	return 0;
}

static void
test_lost_host_ends_its_sandboxes(void **state)
{
	struct sfx *s = *state;
	struct fake_vm_info vm;
	char id[32], text[64];
	long long used;
	struct err e;

	sfx_create(s, 30, id); /* 30 s paid: one billed minute is a second here */
	usleep(3500 * 1000);   /* the host answers polls (every second) meanwhile */
	assert_int_equal(fake_host_set(s->host, 0, 0, 1), 0);
	/* Down AAS_HOST_DOWN_S (3 s) after it last answered: the sandbox ends. */
	assert_true(state_within(s, id, "destroyed", 10000));
	sfx_text(s, "SELECT end_reason FROM sandboxes WHERE id = $1", id, text, sizeof(text));
	assert_string_equal(text, "host_lost");
	sfx_text(s, "SELECT state FROM hosts WHERE uri = $1", s->host, text, sizeof(text));
	assert_string_equal(text, "down");
	/* Billed up to the last answer, not to the moment it was noticed. */
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes b JOIN hosts h ON h.uri = b.host_uri"
			     " WHERE b.id = $1 AND b.destroyed_at = h.seen_at"
			     " AND b.destroyed_at > b.ready_at",
			     id),
	    1);
	used = sfx_ll(s, "SELECT minutes_used FROM sandboxes WHERE id = $1", id);
	assert_true(used >= 2 && used <= 5);
	assert_int_equal(sfx_ll(s, "SELECT refunded FROM sandboxes WHERE id = $1", id),
	    (30 - used) * SFX_PRICE_SMALL);
	/* Its reservation is gone with it. */
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE host_uri = $1"
			     " AND state IN ('creating', 'running', 'destroying')",
			     s->host),
	    0);
	/* Nothing is placed on a down host. */
	err_clear(&e);
	assert_null(create(s, &e));
	assert_int_equal(e.kind, ERR_CAPACITY);
	/* It comes back: its leftover VM is destroyed, nobody bills it. */
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_true(vm.live);
	assert_int_equal(fake_host_set(s->host, 0, 0, 0), 0);
	err_clear(&e);
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_false(vm.live);
}

/* Waits up to `ms` for a query with one parameter to count 1. */
static int
one_within(struct sfx *s, const char *sql, const char *param, int ms)
{
	for (int i = 0; i < ms / 50; i++) {
		if (sfx_ll(s, sql, param) == 1)
			return 1;
		usleep(50000);
	}
	return 0;
}

/* A second host, added as an operator would (every aasd opens it), and
 * polled by the service. */
static void
add_host(struct sfx *s, const char *uri)
{
	struct hosts_options o = { 0 };
	struct err e;

	err_clear(&e);
	json_decref(hosts_add(s->app->db, uri, &o, &e));
	assert_int_equal(e.kind, ERR_NONE);
	assert_true(one_within(s,
	    "SELECT count(*) FROM hosts WHERE uri = $1 AND seen_at IS NOT NULL", uri, 10000));
}

/* Later tests' services do not open it. */
static void
forget_host(struct sfx *s, const char *uri)
{
	const char *p[1] = { uri };
	struct err e;

	err_clear(&e);
	assert_int_equal(db_exec(s->app->db, "UPDATE hosts SET shared = false WHERE uri = $1", 1, p,
			     NULL, &e),
	    0);
}

static void
test_evacuation_moves_sandboxes(void **state)
{
	struct sfx *s = *state;
	char b[160], id[32], stay[32], url[512], text[600];
	struct fake_vm_info vm;
	json_t *r;
	struct err e;

	snprintf(b, sizeof(b), "%s-b", s->host);
	add_host(s, b);
	err_clear(&e);
	assert_int_equal(hosts_set_draining(s->app->db, b, 1, &e), 0);
	sfx_create(s, 30, stay);
	sfx_create(s, 30, id);
	r = sfx_ok(s, s->account, "expose_port",
	    json_pack("{s:s, s:i}", "sandbox_id", id, "port", 8080));
	snprintf(url, sizeof(url), "%s", json_string_value(json_object_get(r, "url")));
	json_decref(r);
	long long old_port = sfx_ll(s, "SELECT host_port FROM sandbox_ports WHERE sandbox_id = $1",
	    id);
	long long balance = sfx_balance(s, s->account);

	/* B drains: nowhere to go. Both stay, running, with the reason. */
	assert_int_equal(hosts_evacuate(s->app->db, s->host, &e), 0);
	assert_true(one_within(s,
	    "SELECT count(*) FROM sandboxes WHERE id = $1 AND move_error LIKE 'no other host%'", id,
	    10000));
	sfx_state(s, id, text, sizeof(text));
	assert_string_equal(text, "running");
	/* Evacuating drains the host: creates go elsewhere or nowhere. */
	err_clear(&e);
	assert_null(create(s, &e));
	assert_int_equal(e.kind, ERR_CAPACITY);

	/* Room on B; one move fails (the VM stays), the other goes. */
	err_clear(&e);
	assert_int_equal(hosts_set_draining(s->app->db, b, 0, &e), 0);
	fake_migrate_fail(1);
	assert_int_equal(hosts_evacuate(s->app->db, s->host, &e), 0);
	assert_true(one_within(s, "SELECT count(*) FROM hosts WHERE name = $1 AND evacuating",
	    s->host, 1000));
	for (int i = 0; i < 200; i++) {
		json_t *st = hosts_evacuation_json(s->app->db, s->host, &e);
		assert_non_null(st);
		int done = json_integer_value(json_object_get(st, "waiting")) == 0 &&
		    json_integer_value(json_object_get(st, "moving")) == 0;
		if (done) {
			assert_int_equal(json_integer_value(json_object_get(st, "moved")), 1);
			assert_int_equal(json_integer_value(json_object_get(st,
					     "longest_pause_ms")),
			    FAKE_MOVE_PAUSE_MS);
			assert_int_equal(json_array_size(json_object_get(st, "not_moved")), 1);
			json_decref(st);
			break;
		}
		json_decref(st);
		usleep(50000);
	}
	assert_int_equal(fake_vmm_counts().migrations, 1);
	/* The first created was tried first, and its move failed. */
	sfx_text(s, "SELECT host_uri FROM sandboxes WHERE id = $1", id, text, sizeof(text));
	assert_string_equal(text, b);
	assert_int_equal(fake_vm_info(id, &vm), 0);
	assert_string_equal(vm.host, b);
	assert_true(vm.live);
	sfx_text(s, "SELECT coalesce(move_error, '') FROM sandboxes WHERE id = $1", stay, text,
	    sizeof(text));
	assert_non_null(strstr(text, "migration of"));
	sfx_text(s, "SELECT host_uri FROM sandboxes WHERE id = $1", stay, text, sizeof(text));
	assert_string_equal(text, s->host);
	/* The moved one: same id and URL, a new forward on B, its reservation
	 * there; nothing charged for the move. */
	assert_int_equal(vm.forwards, 1);
	assert_true(sfx_ll(s, "SELECT host_port FROM sandbox_ports WHERE sandbox_id = $1", id) !=
	    old_port);
	r = sfx_ok(s, s->account, "get_sandbox", json_pack("{s:s}", "sandbox_id", id));
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(r, "ports"), 0), "url")),
	    url);
	json_decref(r);
	assert_int_equal(sfx_ll(s,
			     "SELECT coalesce(sum(reserved_memory_mib), 0) FROM sandboxes"
			     " WHERE host_uri = $1 AND state = 'running'",
			     b),
	    512);
	assert_int_equal(sfx_balance(s, s->account), balance);
	/* Calls reach it on its new host. */
	json_decref(sfx_ok(s, s->account, "run_command",
	    json_pack("{s:s, s:s}", "sandbox_id", id, "command", "true")));
	/* Undrain ends the evacuation. */
	assert_int_equal(hosts_set_draining(s->app->db, s->host, 0, &e), 0);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM hosts WHERE uri = $1 AND evacuating",
			     s->host),
	    0);
	forget_host(s, b);
}

/* An aasd that stopped in the middle of a move: reconcile finds the VM. */
static void
test_move_of_a_stopped_aasd(void **state)
{
	struct sfx *s = *state;
	char b[160], moved[32], stayed[32], text[600];
	struct fake_vm_info vm;
	long long pause;
	struct err e;

	snprintf(b, sizeof(b), "%s-b", s->host);
	add_host(s, b);
	err_clear(&e);
	assert_int_equal(hosts_set_draining(s->app->db, b, 1, &e), 0);
	sfx_create(s, 30, moved);
	sfx_create(s, 30, stayed);
	{
		const char *p[2] = { b, s->host };
		err_clear(&e);
		/* Claimed by an instance that never beats: dead at once. */
		assert_int_equal(db_exec(s->app->db,
				     "UPDATE sandboxes SET moving_to = $1,"
				     " move_owner = 'ffffffffffffffffffffffffffffffff'"
				     " WHERE host_uri = $2 AND state = 'running'",
				     2, p, NULL, &e),
		    0);
	}
	/* One VM made it to B before that aasd stopped. */
	err_clear(&e);
	assert_int_equal(orch_migrate(NULL, s->host, b, moved, &pause, &e), 0);
	/* While its mover lives (here: is not known dead), nothing is decided;
	 * this one's is dead: settled by where the VM is. */
	assert_int_equal(sbx_reconcile(s->app->sbx, &e), 0);
	sfx_text(s, "SELECT host_uri FROM sandboxes WHERE id = $1", moved, text, sizeof(text));
	assert_string_equal(text, b);
	sfx_text(s, "SELECT host_uri FROM sandboxes WHERE id = $1", stayed, text, sizeof(text));
	assert_string_equal(text, s->host);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM sandboxes WHERE moving_to IS NOT NULL"
			     " AND $1::text IS NOT NULL",
			     s->host),
	    0);
	sfx_state(s, moved, text, sizeof(text));
	assert_string_equal(text, "running");
	sfx_state(s, stayed, text, sizeof(text));
	assert_string_equal(text, "running");
	assert_int_equal(fake_vm_info(moved, &vm), 0);
	assert_true(vm.live);
	forget_host(s, b);
}

/* A host whose isolation rule aasd cannot check itself takes sandboxes
 * with a network device only once its operator recorded the very rule. */
static void
test_isolation_rule_per_host(void **state)
{
	struct sfx *s = *state;
	char far[160], a[32], b[32], text[600];
	struct hosts_options o = { 0 };
	json_t *r;
	struct err e;

	/* Not this machine's: more headroom than the local host, no rule. */
	snprintf(far, sizeof(far), "fake+ssh://far.example/%s", s->host + strlen("fake:///"));
	add_host(s, far);
	set_host_memory(s, 1200); /* two small sandboxes locally */
	sfx_create(s, 2, a);
	sfx_create(s, 2, b);
	sfx_text(s, "SELECT string_agg(DISTINCT host_uri, ',') FROM sandboxes WHERE id IN ($1)", a,
	    text, sizeof(text));
	assert_string_equal(text, s->host);
	sfx_text(s, "SELECT host_uri FROM sandboxes WHERE id = $1", b, text, sizeof(text));
	assert_string_equal(text, s->host);
	/* Local host full: internet is refused, not placed on `far`. */
	e = sfx_fails(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i, s:b}", "size", "small", "timeout_minutes", 2, "internet", 1),
	    ERR_CAPACITY);
	assert_non_null(strstr(e.msg,
	    "with a network device right now: the hosts that can isolate"));
	/* No internet asked: it starts there, without a network device. */
	r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i, s:b}", "size", "small", "timeout_minutes", 2, "internet", 0));
	assert_string_equal(json_string_value(json_object_get(r, "network")), "none");
	sfx_text(s, "SELECT host_uri FROM sandboxes WHERE id = $1",
	    json_string_value(json_object_get(r, "sandbox_id")), text, sizeof(text));
	assert_string_equal(text, far);
	json_decref(r);
	/* Another rule than aasd's (an old one, other users) is no rule. */
	o.isolation_rule = "1111111111111111111111111111111111111111111111111111111111111111";
	err_clear(&e);
	json_decref(hosts_add(s->app->db, far, &o, &e));
	assert_int_equal(e.kind, ERR_NONE);
	sfx_fails(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i, s:b}", "size", "small", "timeout_minutes", 2, "internet", 1),
	    ERR_CAPACITY);
	/* A malformed one is refused and changes nothing. */
	o.isolation_rule = "not-a-hash";
	assert_null(hosts_add(s->app->db, far, &o, &e));
	assert_int_equal(e.kind, ERR_INVALID);
	/* The operator installed this rule there: networked sandboxes go. */
	o.isolation_rule = FAKE_NET_RULE_HASH;
	err_clear(&e);
	json_decref(hosts_add(s->app->db, far, &o, &e));
	assert_int_equal(e.kind, ERR_NONE);
	r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:s, s:i, s:b}", "size", "small", "timeout_minutes", 2, "internet", 1));
	assert_string_equal(json_string_value(json_object_get(r, "network")), "nat");
	sfx_text(s, "SELECT host_uri FROM sandboxes WHERE id = $1",
	    json_string_value(json_object_get(r, "sandbox_id")), text, sizeof(text));
	assert_string_equal(text, far);
	json_decref(r);
	forget_host(s, far);
}

static int
setup_evac(void **state)
{
	const struct sfx_opts o = { .host_down_s = 3 };
	return sfx_open(state, &o);
}

static int
setup_lost(void **state)
{
	const struct sfx_opts o = { .minute_s = 1, .host_down_s = 3 };
	return sfx_open(state, &o);
}

static int
setup_par(void **state)
{
	const struct sfx_opts o = { .max_live = 50, .db_pool = 8 };
	return sfx_open(state, &o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_full_host_charges_nothing, sfx_setup,
		    sfx_teardown),
		cmocka_unit_test_setup_teardown(test_draining_host, sfx_setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_spare_room_told_before_a_boot, sfx_setup,
		    sfx_teardown),
		cmocka_unit_test_setup_teardown(test_parallel_creates_stay_within, setup_par,
		    sfx_teardown),
		cmocka_unit_test_setup_teardown(test_unreachable_host, sfx_setup, sfx_teardown),
		cmocka_unit_test_setup_teardown(test_lost_host_ends_its_sandboxes, setup_lost,
		    sfx_teardown),
		cmocka_unit_test_setup_teardown(test_evacuation_moves_sandboxes, setup_evac,
		    sfx_teardown),
		cmocka_unit_test_setup_teardown(test_move_of_a_stopped_aasd, setup_evac,
		    sfx_teardown),
		cmocka_unit_test_setup_teardown(test_isolation_rule_per_host, setup_evac,
		    sfx_teardown),
	};
	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
