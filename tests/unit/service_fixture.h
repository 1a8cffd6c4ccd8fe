/* service_fixture.h - one sandbox service per test (sfx_), as aasd starts
 * it (tools_init, app_new, sbx_new), over the PostgreSQL database named by
 * AAS_TEST_DATABASE_URL and the fake hypervisor (fake_vmm.h). Every test
 * gets its own hypervisor host URI and its own two accounts, so it sees
 * neither another test's rows nor an earlier run's. Without
 * AAS_TEST_DATABASE_URL the set-up fails (the tests are not skipped);
 * tests/run.sh sets it, and by hand:
 *   sh deploy/devdb.sh start var/test
 *   AAS_TEST_DATABASE_URL=$(sh deploy/devdb.sh url var/test) build/tests/test_service_tools */
#ifndef AAS_SERVICE_FIXTURE_H
#define AAS_SERVICE_FIXTURE_H

#include <stdatomic.h>

#include <jansson.h>

#include "base/err.h"
#include "account/accounts.h"
#include "service/app.h"
#include "service/tools.h"

#define SFX_FREE_CREDIT 200000LL /* micro-USD each test account starts with */
#define SFX_PRICE_SMALL 500LL    /* AAS_PRICE_SMALL in the tests */
#define SFX_PRICE_MEDIUM 2000LL
#define SFX_PRICE_LARGE 8000LL
#define SFX_MAX_LIFETIME_MIN 30
#define SFX_MAX_OUTPUT 1048576LL /* AAS_MAX_OUTPUT_BYTES; not below run_command's default */
#define SFX_PREVIEW_DOMAIN "preview.test"
#define SFX_MAX_PROGRESS 16 /* progress messages kept per test */

/* How a test wants its service. Zero values take the defaults. */
struct sfx_opts {
	int minute_s;         /* AAS_BILLING_MINUTE_S; 0: 60 */
	const char *net;      /* AAS_NET; NULL: "on" (the fake rule is in place) */
	long long max_output; /* AAS_MAX_OUTPUT_BYTES; 0: SFX_MAX_OUTPUT */
	int max_live;         /* AAS_MAX_LIVE_SANDBOXES; 0: the default */
	int db_pool;          /* AAS_DB_POOL; 0: 4 */
	const char *warm;     /* AAS_WARM_POOL; NULL: none */
	int max_ports;        /* AAS_MAX_PORTS_PER_SANDBOX; 0: the default */
	int max_background;   /* AAS_MAX_BACKGROUND_PER_SANDBOX; 0: the default */
	int commands_kept;    /* AAS_MAX_COMMANDS_KEPT; 0: the default */
	int host_down_s;      /* AAS_HOST_DOWN_S; 0: the default */
	long long task_bytes; /* AAS_TASK_BYTES_PER_ACCOUNT; 0: the default */
	long long task_max;   /* AAS_TASK_RESULT_MAX_BYTES; 0: the default */
};

struct sfx {
	struct app *app;
	char host[128];                /* this test's AAS_LIBVIRT_URI */
	char account[ACCT_ID_LEN + 1]; /* the caller */
	char other[ACCT_ID_LEN + 1];   /* another account */
	atomic_int cancel;             /* the caller's notifications/cancelled */
	int progress_n;
	char progress[SFX_MAX_PROGRESS][128];
};

/* cmocka set-ups and the tear-down; the tear-down fails the test when an
 * account's balance is not the sum of its ledger. */
int sfx_setup(void **state);
int sfx_setup_short_minute(void **state); /* AAS_BILLING_MINUTE_S=1 */
int sfx_setup_net_off(void **state);      /* AAS_NET=off */
int sfx_setup_small_output(void **state); /* AAS_MAX_OUTPUT_BYTES=1024 */
int sfx_setup_warm_pool(void **state);    /* AAS_WARM_POOL=small=1 */
int sfx_teardown(void **state);
int sfx_open(void **state, const struct sfx_opts *o);
int sfx_setup_small_caps(void **state); /* 2 ports, 1 background command, 10 kept */

/* Group set-up and tear-down: the tool catalogue, once. */
int sfx_group_setup(void **state);
int sfx_group_teardown(void **state);

/* Calls a tool as `account` through tools_invoke; takes `args` (may be
 * NULL). The result object, or NULL with `e` filled. */
json_t *sfx_call(struct sfx *s, const char *account, const char *tool, json_t *args, struct err *e);
/* The same for calls that must succeed: the test fails otherwise. */
json_t *sfx_ok(struct sfx *s, const char *account, const char *tool, json_t *args);
/* A call that must fail with `kind`; returns the error. */
struct err sfx_fails(struct sfx *s, const char *account, const char *tool, json_t *args,
    enum err_kind kind);
/* A running small sandbox of the caller, created for `minutes`. */
void sfx_create(struct sfx *s, int minutes, char id[32]);

/* One value of a query with one parameter, as text or integer ("" and
 * -1 for SQL NULL; the test fails when there is no row). */
void sfx_text(struct sfx *s, const char *sql, const char *param, char *out, size_t n);
long long sfx_ll(struct sfx *s, const char *sql, const char *param);
/* accounts.balance, and the sum of the account's ledger. */
long long sfx_balance(struct sfx *s, const char *account);
long long sfx_ledger_sum(struct sfx *s, const char *account);
/* The sandbox row's state. */
void sfx_state(struct sfx *s, const char *id, char *out, size_t n);

/* Integer member of a result object (the test fails when it is absent). */
long long sfx_int(const json_t *obj, const char *key);
const char *sfx_str(const json_t *obj, const char *key);

#endif
