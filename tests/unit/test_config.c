/* test_config.c - configuration from the environment and the Origin
 * allow-list (server/config.h), through a fake getenv. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/config.h"
#include "base/log.h"

/* ---- the fake environment ---- */

#define MAX_VARS 64
static struct {
	const char *name, *value;
} vars[MAX_VARS];
static size_t n_vars;
static char asked[MAX_VARS * 2][64];
static size_t n_asked;

static const char *
fake_getenv(const char *name)
{
	if (n_asked < sizeof(asked) / sizeof(asked[0]))
		snprintf(asked[n_asked++], sizeof(asked[0]), "%s", name);
	for (size_t i = 0; i < n_vars; i++)
		if (strcmp(vars[i].name, name) == 0)
			return vars[i].value;
	return NULL;
}

static void
env_reset(void)
{
	n_vars = 0;
	n_asked = 0;
}

static void
env_set(const char *name, const char *value)
{
	assert_true(n_vars < MAX_VARS);
	vars[n_vars].name = name;
	vars[n_vars].value = value;
	n_vars++;
}

static int
reset_env(void **state)
{
	(void)state;
	env_reset();
	return 0;
}

static void
load_ok(struct config *cfg)
{
	struct err e;

	err_clear(&e);
	if (config_load(cfg, fake_getenv, &e) != 0)
		fail_msg("config_load failed: [%s] %s", e.field, e.msg);
	assert_int_equal(e.kind, ERR_NONE);
}

/* Loads with one variable set to a bad value and checks the report. */
static void
expect_bad(const char *name, const char *value, const char *msg)
{
	struct config cfg;
	struct err e;

	env_reset();
	env_set(name, value);
	err_clear(&e);
	if (config_load(&cfg, fake_getenv, &e) != -1)
		fail_msg("%s=\"%s\" accepted", name, value);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.field, name);
	/* The message starts with the variable's name. */
	if (strncmp(e.msg, name, strlen(name)) != 0 || e.msg[strlen(name)] != ':')
		fail_msg("%s: message does not name it: %s", name, e.msg);
	/* It does not echo the value (it may be a secret). */
	if (strlen(value) > 2 && strstr(e.msg, value) != NULL)
		fail_msg("%s: message echoes the value: %s", name, e.msg);
	if (msg != NULL)
		assert_string_equal(e.msg, msg);
}

/* ---- defaults and overrides ---- */

/* AAS_GUEST_KERNEL_ARGS reaches a kernel: known test words only. */
static void
test_guest_kernel_args(void **state)
{
	static const char *const bad[] = { "aas.agent_test=nope", "init=/bin/sh",
		"aas.agent_test=flood init=/bin/sh", "aas.agent_test=flood ",
		"aas.agent_test=flood\tx", " aas.agent_test=stall", "aas.agent_test=floodx" };
	struct config cfg;

	(void)state;
	env_set("AAS_GUEST_KERNEL_ARGS", "aas.agent_test=flood");
	load_ok(&cfg);
	assert_string_equal(cfg.guest_kernel_args, "aas.agent_test=flood");
	env_reset();
	load_ok(&cfg);
	assert_string_equal(cfg.guest_kernel_args, "");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad("AAS_GUEST_KERNEL_ARGS", bad[i], NULL);
}

/* AAS_QEMU_UIDS: FIRST-LAST, no system uids, nothing signed tools misread. */
static void
test_qemu_uids(void **state)
{
	static const char *const bad[] = { "", "3000000", "3000000-", "-3000010", "999-2000",
		"3000010-3000000", "1000-70000", "2147483000-2147483647", " 1000-2000",
		"1000-2000 ", "1000--2000", "0x1000-0x2000", "1000-2000-3000" };
	struct config cfg;

	(void)state;
	env_reset();
	load_ok(&cfg);
	assert_int_equal(cfg.qemu_uids.first, 3000000);
	assert_int_equal(cfg.qemu_uids.count, 1024);
	env_reset();
	env_set("AAS_QEMU_UIDS", "1000-1000");
	load_ok(&cfg);
	assert_int_equal(cfg.qemu_uids.first, 1000);
	assert_int_equal(cfg.qemu_uids.count, 1);
	env_reset();
	env_set("AAS_QEMU_UIDS", "100000-165535");
	load_ok(&cfg);
	assert_int_equal(cfg.qemu_uids.count, 65536);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad("AAS_QEMU_UIDS", bad[i], NULL);
}

static void
test_defaults(void **state)
{
	struct config cfg;
	char cwd[1024], want[2048];

	(void)state;
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	load_ok(&cfg);
	assert_string_equal(cfg.listen_host, "127.0.0.1");
	assert_int_equal(cfg.listen_port, 8080);
	assert_string_equal(cfg.public_url, "http://127.0.0.1:8080");
	snprintf(want, sizeof(want), "%s/var", cwd);
	assert_string_equal(cfg.state_dir, want);
	assert_true(cfg.state_dir[0] == '/');
	snprintf(want, sizeof(want), "postgresql:///aas?host=%s/var/run&user=aas", cwd);
	assert_string_equal(cfg.database_url, want);
	/* The service's own sign-up page. */
	assert_string_equal(cfg.dashboard_url, "http://127.0.0.1:8080/signup");
	assert_string_equal(cfg.allowed_origins_raw, "");
	assert_int_equal(cfg.n_allowed_origins, 0);
	assert_int_equal(cfg.log_level, LOG_LEVEL_INFO);
	assert_int_equal(cfg.http_threads, 2);
	assert_int_equal(cfg.workers, 128);
	assert_int_equal(cfg.max_calls_per_account, 8);
	assert_int_equal(cfg.max_queued_per_account, 32);
	assert_int_equal(cfg.queue_wait_s, 30);
	assert_int_equal(cfg.max_body_bytes, 16777216);
	assert_int_equal(cfg.db_pool_size, 8);
	assert_int_equal(cfg.conn_timeout_s, 120);
	assert_int_equal(cfg.session_idle_s, 86400);
	assert_int_equal(cfg.free_credit, 200000);
	assert_int_equal(cfg.price_small, 500);
	assert_int_equal(cfg.price_medium, 2000);
	assert_int_equal(cfg.price_large, 8000);
	assert_int_equal(cfg.max_live_sandboxes, 5);
	assert_int_equal(cfg.max_lifetime_min, 1440);
	assert_int_equal(cfg.default_timeout_min, 30);

	/* Every variable came from the getenv it was given. */
	int saw_listen = 0, saw_public = 0;
	for (size_t i = 0; i < n_asked; i++) {
		assert_memory_equal(asked[i], "AAS_", 4);
		saw_listen |= strcmp(asked[i], "AAS_LISTEN") == 0;
		saw_public |= strcmp(asked[i], "AAS_PUBLIC_URL") == 0;
	}
	assert_true(saw_listen);
	assert_true(saw_public);
}

static void
test_overrides(void **state)
{
	struct config cfg;

	(void)state;
	env_set("AAS_LISTEN", "0.0.0.0:9090");
	env_set("AAS_STATE_DIR", "/srv/aas");
	env_set("AAS_PUBLIC_URL", "https://aas.example.com/");
	env_set("AAS_DASHBOARD_URL", "https://dash.example.com/keys");
	env_set("AAS_LOG_LEVEL", "debug");
	env_set("AAS_HTTP_THREADS", "64");
	env_set("AAS_WORKERS", "1");
	env_set("AAS_MAX_BODY_BYTES", "1024");
	env_set("AAS_FREE_CREDIT", "1000000000000");
	env_set("AAS_PRICE_LARGE", "0");
	env_set("AAS_ALLOWED_ORIGINS", " https://app.example.com , http://localhost:3000/,");
	load_ok(&cfg);
	assert_string_equal(cfg.listen_host, "0.0.0.0");
	assert_int_equal(cfg.listen_port, 9090);
	/* An absolute state dir is kept and used for the derived URL. */
	assert_string_equal(cfg.state_dir, "/srv/aas");
	assert_string_equal(cfg.database_url, "postgresql:///aas?host=/srv/aas/run&user=aas");
	/* Trailing slash dropped. */
	assert_string_equal(cfg.public_url, "https://aas.example.com");
	assert_string_equal(cfg.dashboard_url, "https://dash.example.com/keys");
	assert_int_equal(cfg.log_level, LOG_LEVEL_DEBUG);
	assert_int_equal(cfg.http_threads, 64);
	assert_int_equal(cfg.workers, 1);
	assert_int_equal(cfg.max_body_bytes, 1024);
	assert_int_equal(cfg.free_credit, 1000000000000LL);
	assert_int_equal(cfg.price_large, 0);
	/* Origins trimmed, trailing slash dropped, empty entries skipped. */
	assert_int_equal(cfg.n_allowed_origins, 2);
	assert_string_equal(cfg.allowed_origins[0], "https://app.example.com");
	assert_string_equal(cfg.allowed_origins[1], "http://localhost:3000");
	assert_string_equal(cfg.allowed_origins_raw,
	    " https://app.example.com , http://localhost:3000/,");
}

static void
test_explicit_database_url(void **state)
{
	struct config cfg;

	(void)state;
	env_set("AAS_DATABASE_URL", "postgresql://u@db.internal/aas");
	env_set("AAS_STATE_DIR", "rel/dir");
	load_ok(&cfg);
	assert_string_equal(cfg.database_url, "postgresql://u@db.internal/aas");
	/* A relative state dir is made absolute against the cwd. */
	char cwd[1024], want[2048];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "%s/rel/dir", cwd);
	assert_string_equal(cfg.state_dir, want);
}

static void
test_log_levels(void **state)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	struct config cfg;

	(void)state;
	for (int i = 0; i < 4; i++) {
		env_reset();
		env_set("AAS_LOG_LEVEL", names[i]);
		load_ok(&cfg);
		assert_int_equal(cfg.log_level, i);
	}
}

static void
test_listen_ipv6(void **state)
{
	struct config cfg;

	(void)state;
	env_set("AAS_LISTEN", "[::1]:9000");
	load_ok(&cfg);
	assert_string_equal(cfg.listen_host, "::1");
	assert_int_equal(cfg.listen_port, 9000);
	assert_string_equal(cfg.public_url, "http://[::1]:9000");

	env_reset();
	env_set("AAS_LISTEN", "[fe80::1:2]:1");
	load_ok(&cfg);
	assert_string_equal(cfg.listen_host, "fe80::1:2");
	assert_int_equal(cfg.listen_port, 1);
	assert_string_equal(cfg.public_url, "http://[fe80::1:2]:1");

	env_reset();
	env_set("AAS_LISTEN", "localhost:65535");
	load_ok(&cfg);
	assert_string_equal(cfg.listen_host, "localhost");
	assert_int_equal(cfg.listen_port, 65535);
	assert_string_equal(cfg.public_url, "http://localhost:65535");
}

/* ---- bad values ---- */

static void
test_bad_listen(void **state)
{
	static const char *const bad[] = {
		"127.0.0.1",
		"localhost",
		"127.0.0.1:",
		":8080",
		"127.0.0.1:0",
		"127.0.0.1:70000",
		"127.0.0.1:65536",
		"127.0.0.1:-1",
		"127.0.0.1:80x",
		"127.0.0.1: 80",
		"127.0.0.1:80 ",
		"[::1]",
		"[::1]:",
		"[]:80",
		"[::1:80",
		"",
		"a-very-long-host-name-that-does-not-fit-in-sixty-four-bytes.example.com:80",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad("AAS_LISTEN", bad[i],
		    "AAS_LISTEN: invalid value; expected host:port with port 1-65535");
}

static void
test_bad_ints(void **state)
{
	static const char *const bad[] = { "abc", "0", "1000", "65", "-1", " 5", "5 ", "\t5", "",
		"5.0", "0x10", "1e1", "99999999999999999999999" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad("AAS_HTTP_THREADS", bad[i],
		    "AAS_HTTP_THREADS: invalid value; expected an integer from 1 to 64");
	expect_bad("AAS_MAX_BODY_BYTES", "1023",
	    "AAS_MAX_BODY_BYTES: invalid value; expected an integer from 1024 to 268435456");
	expect_bad("AAS_MAX_BODY_BYTES", "268435457", NULL);
	expect_bad("AAS_MAX_BODY_BYTES", " 2048", NULL);
	expect_bad("AAS_WORKERS", "1025",
	    "AAS_WORKERS: invalid value; expected an integer from 1 to 1024");
	expect_bad("AAS_CONN_TIMEOUT_S", "4", NULL);
	expect_bad("AAS_FREE_CREDIT", "-1", NULL);
	expect_bad("AAS_PRICE_SMALL", "100000001", NULL);
	expect_bad("AAS_SESSION_IDLE_S", "59", NULL);
	expect_bad("AAS_MAX_LIFETIME_MIN", "43201", NULL);
	/* In range at the bounds. */
	struct config cfg;
	env_reset();
	env_set("AAS_HTTP_THREADS", "1");
	env_set("AAS_MAX_BODY_BYTES", "268435456");
	load_ok(&cfg);
	assert_int_equal(cfg.http_threads, 1);
	assert_int_equal(cfg.max_body_bytes, 268435456);
}

static void
test_topups_and_smtp(void **state)
{
	static const char *const bad[] = { "0", "1001", "5,", ",5", "5,,10", "5;10", "5 ,10",
		"1,2,3,4,5,6,7,8,9", "99999999999" };
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad("AAS_TOPUP_USD", bad[i], NULL);
	expect_bad("AAS_SMTP_URL", "http://mail.example", NULL);
	expect_bad("AAS_MAIL_FROM", "no address here", NULL);
	expect_bad("AAS_MAIL_FROM", "aas <a@b.c>\r\nBcc: x@y.z", NULL);
	env_reset();
	env_set("AAS_TOPUP_USD", "1,20,1000");
	env_set("AAS_SMTP_URL", "smtp://127.0.0.1:2525");
	load_ok(&cfg);
	assert_int_equal(cfg.n_topups, 3);
	assert_int_equal(cfg.topups[0], 1);
	assert_int_equal(cfg.topups[1], 20);
	assert_int_equal(cfg.topups[2], 1000);
	env_reset();
	env_set("AAS_TOPUP_USD", ""); /* none offered: no top-up form */
	load_ok(&cfg);
	assert_int_equal(cfg.n_topups, 0);
	env_reset();
	load_ok(&cfg);
	assert_int_equal(cfg.n_topups, 3); /* 5, 10, 25 */
	assert_int_equal(cfg.topups[2], 25);
}

static void
test_bad_log_level(void **state)
{
	(void)state;
	expect_bad("AAS_LOG_LEVEL", "loud",
	    "AAS_LOG_LEVEL: invalid value; expected one of error, warn, info, debug");
	expect_bad("AAS_LOG_LEVEL", "", NULL);
	expect_bad("AAS_LOG_LEVEL", "info ", NULL);
	expect_bad("AAS_LOG_LEVEL", "3", NULL);
}

static void
test_bad_public_url(void **state)
{
	static const char *const bad[] = { "ftp://x", "x", "aas.example.com", "http//x",
		"http://a b", "https://x\t", "javascript:alert(1)", "HTTP//x" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad("AAS_PUBLIC_URL", bad[i],
		    "AAS_PUBLIC_URL: invalid value; expected an http:// or https:// URL");
}

/* A host with an unbalanced ']' or a stray ':' (unbracketed) is taken
 * as is and yields a malformed public URL, e.g. "::1]:80" -> host "::1]",
 * public_url "http://[::1]]:80"; "127.0.0.1:80:90" -> host "127.0.0.1:80",
 * public_url "http://[127.0.0.1:80]:90". */
static void
test_listen_malformed_host(void **state)
{
	(void)state;
	expect_bad("AAS_LISTEN", "::1]:80", NULL);
	expect_bad("AAS_LISTEN", "a]:1", NULL);
	expect_bad("AAS_LISTEN", "127.0.0.1:80:90", NULL);
}

/* "http://" has no host; it is accepted and then the slash stripping
 * leaves public_url = "http:". */
static void
test_public_url_without_host(void **state)
{
	(void)state;
	expect_bad("AAS_PUBLIC_URL", "http:///nohost", NULL);
}

static void
test_bad_origins(void **state)
{
	char many[1024];
	size_t n = 0;

	(void)state;
	expect_bad("AAS_ALLOWED_ORIGINS", "https://ok.example,not-a-url",
	    "AAS_ALLOWED_ORIGINS: invalid value; expected comma-separated http(s) "
	    "origins (at most 16)");
	expect_bad("AAS_ALLOWED_ORIGINS", "ftp://files.example", NULL);
	expect_bad("AAS_ALLOWED_ORIGINS", "localhost:3000", NULL);
	expect_bad("AAS_ALLOWED_ORIGINS", "https://a.example https://b.example", NULL);
	/* 17 entries is one too many; 16 fit. */
	for (int i = 0; i < 17; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%shttp://h%d.example",
		    i ? "," : "", i);
	expect_bad("AAS_ALLOWED_ORIGINS", many, NULL);
	*strrchr(many, ',') = '\0';
	struct config cfg;
	env_reset();
	env_set("AAS_ALLOWED_ORIGINS", many);
	load_ok(&cfg);
	assert_int_equal(cfg.n_allowed_origins, 16);
	assert_string_equal(cfg.allowed_origins[15], "http://h15.example");
}

static void
test_first_bad_value_reported(void **state)
{
	struct config cfg;
	struct err e;

	(void)state;
	env_set("AAS_LISTEN", "nope");
	env_set("AAS_HTTP_THREADS", "0");
	err_clear(&e);
	assert_int_equal(config_load(&cfg, fake_getenv, &e), -1);
	assert_string_equal(e.field, "AAS_LISTEN");
}

/* ---- origins ---- */

static void
test_origin_default_list(void **state)
{
	static const char *const allowed[] = {
		"http://localhost",
		"http://localhost:3000",
		"https://localhost:8443",
		"http://127.0.0.1",
		"http://127.0.0.1:8080",
		"http://[::1]:8080",
		"http://[::1]",
		"http://LOCALHOST:3000",
	};
	static const char *const refused[] = {
		"http://evil.example",
		"http://localhost.evil.com",
		"http://localhost:80x",
		"http://localhost:",
		"http://127.0.0.1.evil.com",
		"http://127.0.0.10",
		"http://[::1].evil",
		"http://127.0.0.100",
		"http://localhost99",
		"ftp://localhost",
		"localhost:3000",
		"null",
		"http://localhost/",
		"http://localhost:3000/path",
		"http://evil.example#localhost",
		"http://localhost@evil.example",
		"https://aas.example.com",
	};
	struct config cfg;

	(void)state;
	load_ok(&cfg);
	assert_true(config_origin_allowed(&cfg, NULL));
	assert_true(config_origin_allowed(&cfg, ""));
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (!config_origin_allowed(&cfg, allowed[i]))
			fail_msg("refused %s", allowed[i]);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (config_origin_allowed(&cfg, refused[i]))
			fail_msg("allowed %s", refused[i]);
}

static void
test_origin_default_includes_public_url(void **state)
{
	struct config cfg;

	(void)state;
	env_set("AAS_PUBLIC_URL", "https://aas.example.com/");
	load_ok(&cfg);
	assert_true(config_origin_allowed(&cfg, "https://aas.example.com"));
	assert_true(config_origin_allowed(&cfg, "https://AAS.example.com"));
	assert_false(config_origin_allowed(&cfg, "http://aas.example.com"));
	assert_false(config_origin_allowed(&cfg, "https://aas.example.com.evil"));
	assert_false(config_origin_allowed(&cfg, "https://aas.example.co"));
	/* Loopback still allowed by default. */
	assert_true(config_origin_allowed(&cfg, "http://localhost:3000"));
}

static void
test_origin_explicit_list(void **state)
{
	struct config cfg;

	(void)state;
	env_set("AAS_PUBLIC_URL", "https://aas.example.com");
	env_set("AAS_ALLOWED_ORIGINS", "https://app.example.com, http://localhost:3000/");
	load_ok(&cfg);
	assert_true(config_origin_allowed(&cfg, NULL));
	assert_true(config_origin_allowed(&cfg, ""));
	assert_true(config_origin_allowed(&cfg, "https://app.example.com"));
	assert_true(config_origin_allowed(&cfg, "HTTPS://APP.EXAMPLE.COM"));
	assert_true(config_origin_allowed(&cfg, "http://localhost:3000"));
	/* The list replaces the defaults. */
	assert_false(config_origin_allowed(&cfg, "http://localhost:5173"));
	assert_false(config_origin_allowed(&cfg, "http://127.0.0.1"));
	assert_false(config_origin_allowed(&cfg, "https://aas.example.com"));
	assert_false(config_origin_allowed(&cfg, "https://app.example.com.evil"));
	assert_false(config_origin_allowed(&cfg, "http://app.example.com"));
	assert_false(config_origin_allowed(&cfg, "https://evil.example"));

	/* "*" allows every origin. */
	env_reset();
	env_set("AAS_ALLOWED_ORIGINS", "https://a.example,*");
	load_ok(&cfg);
	assert_true(config_origin_allowed(&cfg, "https://evil.example"));
	assert_true(config_origin_allowed(&cfg, "null"));
}

/* ---- documentation table ---- */

struct table_seen {
	int n;
	int listen_ok;
	char names[8192]; /* " NAME" each */
	char helps[65536];
};

static void
emit(const char *name, const char *def, const char *help, void *ctx)
{
	struct table_seen *t = ctx;

	assert_non_null(name);
	assert_non_null(def);
	assert_non_null(help);
	assert_memory_equal(name, "AAS_", 4);
	assert_true(strlen(help) > 0);
	if (strcmp(name, "AAS_LISTEN") == 0 && strcmp(def, "127.0.0.1:8080") == 0)
		t->listen_ok = 1;
	t->n++;
	snprintf(t->names + strlen(t->names), sizeof(t->names) - strlen(t->names), " %s ", name);
	snprintf(t->helps + strlen(t->helps), sizeof(t->helps) - strlen(t->helps), "%s\n", help);
}

static void
test_print_table(void **state)
{
	static struct table_seen t;
	struct config cfg;
	size_t documented = 0;

	(void)state;
	memset(&t, 0, sizeof(t));
	config_print_table(emit, &t);
	assert_true(t.listen_ok);
	/* Every documented variable is read by config_load, and only those,
	 * besides the old names a help gives ("Old name: X"). */
	load_ok(&cfg);
	for (size_t i = 0; i < n_asked; i++) {
		char word[80], old[96];

		snprintf(word, sizeof(word), " %s ", asked[i]);
		snprintf(old, sizeof(old), "Old name: %s.", asked[i]);
		if (strstr(t.names, word))
			documented++;
		else
			assert_non_null(strstr(t.helps, old));
	}
	assert_int_equal((size_t)t.n, documented);
}

/* A renamed setting still takes its old name; the new name wins. */
static void
test_old_names(void **state)
{
	struct config cfg;

	(void)state;
	env_set("AAS_MAX_CALLS_PER_KEY", "3");
	env_set("AAS_MAX_QUEUED_PER_KEY", "5");
	load_ok(&cfg);
	assert_int_equal(cfg.max_calls_per_account, 3);
	assert_int_equal(cfg.max_queued_per_account, 5);
	env_set("AAS_MAX_CALLS_PER_ACCOUNT", "4");
	load_ok(&cfg);
	assert_int_equal(cfg.max_calls_per_account, 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_qemu_uids, reset_env),
		cmocka_unit_test_setup(test_defaults, reset_env),
		cmocka_unit_test_setup(test_overrides, reset_env),
		cmocka_unit_test_setup(test_explicit_database_url, reset_env),
		cmocka_unit_test_setup(test_log_levels, reset_env),
		cmocka_unit_test_setup(test_listen_ipv6, reset_env),
		cmocka_unit_test_setup(test_bad_listen, reset_env),
		cmocka_unit_test_setup(test_listen_malformed_host, reset_env),
		cmocka_unit_test_setup(test_bad_ints, reset_env),
		cmocka_unit_test_setup(test_topups_and_smtp, reset_env),
		cmocka_unit_test_setup(test_bad_log_level, reset_env),
		cmocka_unit_test_setup(test_bad_public_url, reset_env),
		cmocka_unit_test_setup(test_public_url_without_host, reset_env),
		cmocka_unit_test_setup(test_bad_origins, reset_env),
		cmocka_unit_test_setup(test_first_bad_value_reported, reset_env),
		cmocka_unit_test_setup(test_origin_default_list, reset_env),
		cmocka_unit_test_setup(test_origin_default_includes_public_url, reset_env),
		cmocka_unit_test_setup(test_origin_explicit_list, reset_env),
		cmocka_unit_test_setup(test_print_table, reset_env),
		cmocka_unit_test_setup(test_old_names, reset_env),
		cmocka_unit_test_setup(test_guest_kernel_args, reset_env),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
