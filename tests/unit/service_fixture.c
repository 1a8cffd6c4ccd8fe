/* service_fixture.c - the sandbox service of one test (service_fixture.h). */
#include "tests/unit/service_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/db.h"
#include "base/num.h"
#include "base/jsonschema.h"
#include "base/keys.h"
#include "base/log.h"
#include "base/ttlmap.h"
#include "sandbox/sandbox.h"
#include "tests/unit/fake_vmm.h"

#define SFX_ENV_MAX 24 /* variables a test's configuration sets */
#define SFX_ENV_VALUE_MAX CONFIG_STR_MAX
#define SFX_LISTEN_WAIT_MS 10000 /* for the notification listener to start */

static struct {
	const char *name;
	char value[SFX_ENV_VALUE_MAX];
} env[SFX_ENV_MAX];
static size_t env_n;

static char run_id[9]; /* names this run's hosts and accounts */
static int test_no;

/* The configuration's environment: only what the fixture set, so the
 * caller's AAS_* variables never reach a test. */
static const char *
fixture_getenv(const char *name)
{
	for (size_t i = 0; i < env_n; i++)
		if (strcmp(env[i].name, name) == 0)
			return env[i].value;
	return NULL;
}

static void env_set(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
env_set(const char *name, const char *fmt, ...)
{
	va_list ap;

	assert_true(env_n < SFX_ENV_MAX);
	env[env_n].name = name;
	va_start(ap, fmt);
	vsnprintf(env[env_n].value, sizeof(env[env_n].value), fmt, ap);
	va_end(ap);
	env_n++;
}

int
sfx_group_setup(void **state)
{
	struct err e;

	(void)state;
	err_clear(&e);
	if (key_random_base36(run_id, sizeof(run_id) - 1) < 0)
		return -1;
	if (tools_init(&e) < 0) {
		print_error("tools_init: %s\n", e.msg);
		return -1;
	}
	return 0;
}

int
sfx_group_teardown(void **state)
{
	(void)state;
	tools_cleanup();
	return 0;
}

static void
record_progress(void *sink, double progress, double total, const char *message)
{
	struct sfx *s = sink;

	(void)progress, (void)total;
	if (s->progress_n < SFX_MAX_PROGRESS)
		snprintf(s->progress[s->progress_n++], sizeof(s->progress[0]), "%s", message);
}

static void
sfx_close(struct sfx *s)
{
	if (s == NULL)
		return;
	if (s->app) {
		sbx_free(s->app->sbx);
		s->app->sbx = NULL;
	}
	app_free(s->app);
	free(s);
}

static int
make_account(struct sfx *s, const char *who, char id[ACCT_ID_LEN + 1], struct err *e)
{
	struct acct_new_key key;
	char email[128];

	snprintf(email, sizeof(email), "svctest-%s-%d-%s@example.test", run_id, test_no, who);
	return acct_create(s->app->db, email, SFX_FREE_CREDIT, id, &key, e);
}

/* The app's caches come on once its notification listener runs (app.c);
 * waiting for that means no expiry notice of a test goes out before the
 * listener that wakes the reaper is there. */
static int
wait_listening(struct app *app, struct err *e)
{
	long long t0 = clock_ms();
	char v[8];

	while (clock_ms() - t0 < SFX_LISTEN_WAIT_MS) {
		ttl_put(app->sessions, "sfx-probe", "1");
		if (ttl_get(app->sessions, "sfx-probe", v, sizeof(v))) {
			ttl_del(app->sessions, "sfx-probe");
			return 0;
		}
		usleep(10000);
	}
	err_set(e, ERR_TIMEOUT, "the notification listener did not start in %d ms",
	    SFX_LISTEN_WAIT_MS);
	return -1;
}

int
sfx_open(void **state, const struct sfx_opts *o)
{
	const char *url = getenv("AAS_TEST_DATABASE_URL");
	const char *level = getenv("AAS_LOG_LEVEL");
	struct config cfg;
	struct sfx *s;
	struct err e;

	*state = NULL;
	if (url == NULL || *url == '\0') {
		print_error("AAS_TEST_DATABASE_URL is not set: the sandbox service tests need"
			    " PostgreSQL (tests/run.sh starts one and sets it)\n");
		return -1;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -1;
	atomic_init(&s->cancel, 0);
	err_clear(&e);
	test_no++;
	snprintf(s->host, sizeof(s->host), "fake:///svctest-%s-%d", run_id, test_no);
	env_n = 0;
	env_set("AAS_DATABASE_URL", "%s", url);
	env_set("AAS_LIBVIRT_URI", "%s", s->host);
	env_set("AAS_NET", "%s", o->net ? o->net : "on");
	env_set("AAS_BILLING_MINUTE_S", "%d", o->minute_s > 0 ? o->minute_s : 60);
	/* The tests call sbx_reconcile themselves. */
	env_set("AAS_RECONCILE_S", "0");
	env_set("AAS_PRICE_SMALL", "%lld", SFX_PRICE_SMALL);
	env_set("AAS_PRICE_MEDIUM", "%lld", SFX_PRICE_MEDIUM);
	env_set("AAS_PRICE_LARGE", "%lld", SFX_PRICE_LARGE);
	env_set("AAS_MAX_LIFETIME_MIN", "%d", SFX_MAX_LIFETIME_MIN);
	env_set("AAS_MAX_OUTPUT_BYTES", "%lld", o->max_output > 0 ? o->max_output : SFX_MAX_OUTPUT);
	env_set("AAS_PREVIEW_DOMAIN", "%s", SFX_PREVIEW_DOMAIN);
	env_set("AAS_DB_POOL", "%d", o->db_pool > 0 ? o->db_pool : 4);
	if (o->max_live > 0)
		env_set("AAS_MAX_LIVE_SANDBOXES", "%d", o->max_live);
	if (o->max_ports > 0)
		env_set("AAS_MAX_PORTS_PER_SANDBOX", "%d", o->max_ports);
	if (o->max_background > 0)
		env_set("AAS_MAX_BACKGROUND_PER_SANDBOX", "%d", o->max_background);
	if (o->commands_kept > 0)
		env_set("AAS_MAX_COMMANDS_KEPT", "%d", o->commands_kept);
	if (o->warm)
		env_set("AAS_WARM_POOL", "%s", o->warm);
	if (o->host_down_s > 0)
		env_set("AAS_HOST_DOWN_S", "%d", o->host_down_s);
	if (o->task_bytes > 0)
		env_set("AAS_TASK_BYTES_PER_ACCOUNT", "%lld", o->task_bytes);
	if (o->task_max > 0)
		env_set("AAS_TASK_RESULT_MAX_BYTES", "%lld", o->task_max);
	env_set("AAS_LOG_LEVEL", "%s", level ? level : "warn");
	fake_vmm_reset();
	if (config_load(&cfg, fixture_getenv, &e) < 0)
		goto fail;
	log_set_level((enum log_level)cfg.log_level);
	/* As aasd starts: the app with its notification listener (it wakes
	 * the reaper), then the sandbox service. */
	s->app = app_new(&cfg, APP_CACHES, &e);
	if (s->app == NULL || wait_listening(s->app, &e) < 0)
		goto fail;
	/* Hosts an earlier (perhaps failed) test added for every aasd are
	 * not this test's. */
	if (db_exec(s->app->db,
		"UPDATE hosts SET shared = false WHERE shared AND uri LIKE 'fake%svctest-%'", 0,
		NULL, NULL, &e) < 0)
		goto fail;
	if (app_start_sandboxes(s->app, &e) < 0)
		goto fail;
	if (make_account(s, "a", s->account, &e) < 0 || make_account(s, "b", s->other, &e) < 0)
		goto fail;
	*state = s;
	return 0;
fail:
	print_error("service set-up: %s\n", e.msg);
	sfx_close(s);
	return -1;
}

int
sfx_setup(void **state)
{
	const struct sfx_opts o = { 0 };

	return sfx_open(state, &o);
}

int
sfx_setup_short_minute(void **state)
{
	const struct sfx_opts o = { .minute_s = 1 };

	return sfx_open(state, &o);
}

int
sfx_setup_small_caps(void **state)
{
	const struct sfx_opts o = { .max_ports = 2, .max_background = 1, .commands_kept = 10 };

	return sfx_open(state, &o);
}

int
sfx_setup_small_output(void **state)
{
	const struct sfx_opts o = { .max_output = 1024 };

	return sfx_open(state, &o);
}

int
sfx_setup_warm_pool(void **state)
{
	const struct sfx_opts o = { .warm = "small=1" };

	return sfx_open(state, &o);
}

int
sfx_setup_net_off(void **state)
{
	const struct sfx_opts o = { .net = "off" };

	return sfx_open(state, &o);
}

/* Whatever a test did, each account's balance is the sum of its ledger. */
static int
ledger_agrees(struct sfx *s, const char *account, const char *who)
{
	/* One statement, one snapshot: a refund committing between two reads
	 * (the reaper runs on) must not look like a disagreement. */
	long long diff = sfx_ll(s,
	    "SELECT a.balance - coalesce((SELECT sum(amount) FROM ledger WHERE account_id = a.id), 0) "
	    "FROM accounts a WHERE a.id = $1",
	    account);

	if (diff != 0) {
		print_error("account %s (%s): balance and ledger sum differ by %lld\n", who,
		    account, diff);
		return 0;
	}
	return 1;
}

int
sfx_teardown(void **state)
{
	struct sfx *s = *state;
	int ok;

	if (s == NULL)
		return 0;
	ok = ledger_agrees(s, s->account, "caller") & ledger_agrees(s, s->other, "other");
	sfx_close(s);
	*state = NULL;
	return ok ? 0 : -1;
}

/* ---- calls ---- */

json_t *
sfx_call(struct sfx *s, const char *account, const char *tool, json_t *args, struct err *e)
{
	struct call_ctx cx = {
		.app = s->app,
		.account_id = account,
		.request_id = "svctest",
		.progress = record_progress,
		.progress_sink = s,
		.cancelled = &s->cancel,
	};
	json_t *out = tools_invoke(&cx, tool, args, e);

	json_decref(args);
	return out;
}

json_t *
sfx_ok(struct sfx *s, const char *account, const char *tool, json_t *args)
{
	const json_t *schema = tools_output_schema(tool);
	struct err e;
	json_t *out = sfx_call(s, account, tool, args, &e);

	if (out == NULL)
		fail_msg("%s failed: %s (%s)", tool, e.msg, err_kind_name(e.kind));
	/* What a client is promised: the result matches the outputSchema. */
	err_clear(&e);
	if (schema && jsv_validate(schema, out, "", &e) < 0)
		fail_msg("%s: result does not match its outputSchema: %s", tool, e.msg);
	return out;
}

struct err
sfx_fails(struct sfx *s, const char *account, const char *tool, json_t *args, enum err_kind kind)
{
	struct err e;
	json_t *out = sfx_call(s, account, tool, args, &e);

	if (out != NULL) {
		char *text = json_dumps(out, JSON_COMPACT);
		fail_msg("%s succeeded (%s); expected an error %s", tool, text ? text : "?",
		    err_kind_name(kind));
	}
	if (e.kind != kind)
		fail_msg("%s: error %s (%s); expected %s", tool, err_kind_name(e.kind), e.msg,
		    err_kind_name(kind));
	return e;
}

void
sfx_create(struct sfx *s, int minutes, char id[32])
{
	json_t *r = sfx_ok(s, s->account, "create_sandbox",
	    json_pack("{s:i}", "timeout_minutes", minutes));

	assert_string_equal(sfx_str(r, "state"), "running");
	snprintf(id, 32, "%s", sfx_str(r, "sandbox_id"));
	json_decref(r);
}

/* ---- the database ---- */

void
sfx_text(struct sfx *s, const char *sql, const char *param, char *out, size_t n)
{
	const char *p[1] = { param };
	struct err e;
	PGresult *r;
	const char *v;

	err_clear(&e);
	r = db_query(s->app->db, sql, 1, p, &e);
	if (r == NULL)
		fail_msg("%s: %s", sql, e.msg);
	if (PQntuples(r) != 1) {
		PQclear(r);
		fail_msg("%s ($1 = %s): no row", sql, param);
	}
	v = db_get_text(r, 0, 0);
	snprintf(out, n, "%s", v ? v : "");
	PQclear(r);
}

long long
sfx_ll(struct sfx *s, const char *sql, const char *param)
{
	char text[64];
	long long v;

	sfx_text(s, sql, param, text, sizeof(text));
	if (text[0] == '\0')
		return -1;
	if (num_parse_ll(text, &v) < 0)
		fail_msg("%s: %s is not an integer", sql, text);
	return v;
}

long long
sfx_balance(struct sfx *s, const char *account)
{
	return sfx_ll(s, "SELECT balance FROM accounts WHERE id = $1", account);
}

long long
sfx_ledger_sum(struct sfx *s, const char *account)
{
	return sfx_ll(s, "SELECT coalesce(sum(amount), 0) FROM ledger WHERE account_id = $1",
	    account);
}

void
sfx_state(struct sfx *s, const char *id, char *out, size_t n)
{
	sfx_text(s, "SELECT state FROM sandboxes WHERE id = $1", id, out, n);
}

/* ---- results ---- */

long long
sfx_int(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v))
		fail_msg("result member %s: not an integer", key);
	return json_integer_value(v);
}

const char *
sfx_str(const json_t *obj, const char *key)
{
	const char *v = json_string_value(json_object_get(obj, key));

	if (v == NULL)
		fail_msg("result member %s: not a string", key);
	return v;
}
