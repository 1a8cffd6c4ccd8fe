/* test_service_purge.c - the batched purge over PostgreSQL: of every row
 * kind with an expiry, the rows past their retention go and the others
 * stay; a backlog larger than a batch goes in one run; the ledger is never
 * touched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "account/purge.h"
#include "tests/unit/service_fixture.h"

#define BACKLOG 1200 /* expired tasks: more than two batches */
#define STR_BACKLOG "1200"

#define HEX64 "md5(random()::text) || md5(random()::text)"
#define TASK_ID "'task-' || substr(md5(random()::text), 1, 24)"

/* Runs `sql` with $1 = the caller's account (and $2, the same as text). */
static void
run(struct sfx *s, const char *sql)
{
	const char *p[2] = { s->account, s->account };
	struct err e;

	err_clear(&e);
	if (db_exec(s->app->db, sql, strstr(sql, "$2") ? 2 : 1, p, NULL, &e) < 0)
		fail_msg("%.80s: %s", sql, e.msg);
}

/* Rows of every kind: what must go ("old") and what must stay. */
static void
seed(struct sfx *s)
{
	static const char *const rows[] = {
		/* mcp_tasks: a backlog of expired ones, one live. */
		"INSERT INTO mcp_tasks(id, account_id, tool, status, expires_at, result) SELECT " TASK_ID
		", $1, 'run_command', 'completed', now() - interval '1 second', "
		"'{\"content\":[]}' FROM generate_series(1, " STR_BACKLOG ")",
		"INSERT INTO mcp_tasks(id, account_id, tool, status, expires_at) VALUES (" TASK_ID
		", $1, 'get_usage', 'completed', now() + interval '1 hour')",
		/* mcp_sessions: ended, idle (an account's, an anonymous one); live. */
		"INSERT INTO mcp_sessions(id, protocol_version, account_id, client_name, ended_at) "
		"VALUES (" HEX64 ", '2025-11-25', $1, 'old', now())",
		"INSERT INTO mcp_sessions(id, protocol_version, account_id, client_name, last_seen_at) "
		"VALUES (" HEX64 ", '2025-11-25', $1, 'old', now() - interval '2 days')",
		"INSERT INTO mcp_sessions(id, protocol_version, client_name, last_seen_at) VALUES (" HEX64
		", '2025-11-25', 'purge-' || $1, now() - interval '10 minutes')",
		"INSERT INTO mcp_sessions(id, protocol_version, account_id, client_name) VALUES (" HEX64
		", '2025-11-25', $1, 'live')",
		"INSERT INTO mcp_sessions(id, protocol_version, client_name) VALUES (" HEX64
		", '2025-11-25', 'purge-' || $1)",
		/* web_sessions: ended two days ago, idle, too old; ended an hour ago. */
		"INSERT INTO web_sessions(id_hash, account_id, csrf, ended_at) VALUES (" HEX64
		", $1, " HEX64 ", now() - interval '2 days')",
		"INSERT INTO web_sessions(id_hash, account_id, csrf, last_seen_at) VALUES (" HEX64
		", $1, " HEX64 ", now() - interval '3 days')",
		"INSERT INTO web_sessions(id_hash, account_id, csrf, created_at) VALUES (" HEX64
		", $1, " HEX64 ", now() - interval '9 days')",
		"INSERT INTO web_sessions(id_hash, account_id, csrf, ended_at) VALUES (" HEX64
		", $1, " HEX64 ", now() - interval '1 hour')",
		/* email_links: expired two days ago; an hour ago (still says so). */
		"INSERT INTO email_links(token_hash, account_id, purpose, expires_at) VALUES (" HEX64
		", $1, 'verify', now() - interval '2 days')",
		"INSERT INTO email_links(token_hash, account_id, purpose, expires_at) VALUES (" HEX64
		", $1, 'reset', now() - interval '1 hour')",
		/* mail_outbox: sent two days ago, never sent for three; sent now. */
		"INSERT INTO mail_outbox(account_id, to_addr, subject, body, sent_at) VALUES ($1, "
		"'a@b.c', 'old', '', now() - interval '2 days')",
		"INSERT INTO mail_outbox(account_id, to_addr, subject, body, created_at) VALUES ($1, "
		"'a@b.c', 'old', 'x', now() - interval '3 days')",
		"INSERT INTO mail_outbox(account_id, to_addr, subject, body, sent_at) VALUES ($1, "
		"'a@b.c', 'live', '', now())",
		/* auth_events: two days old; an hour. */
		"INSERT INTO auth_events(subject, at) VALUES ('purge:' || $1, now() - interval '2 days')",
		"INSERT INTO auth_events(subject, at) VALUES ('purge:' || $1, now() - interval '1 hour')",
		/* oauth: a grant revoked long ago with nothing under it; one with a
		 * live token; one revoked yesterday; codes and tokens. */
		"INSERT INTO oauth_grants(account_id, client_id, client_name, resource, scope, "
		"revoked_at) VALUES ($1, 'https://purge.test/' || $2, 'old', 'r', 'mcp', "
		"now() - interval '31 days')",
		"WITH g AS (INSERT INTO oauth_grants(account_id, client_id, client_name, resource, "
		"scope, revoked_at) VALUES ($1, 'https://purge.test/' || $2, 'held', 'r', 'mcp', "
		"now() - interval '31 days') RETURNING id) INSERT INTO oauth_tokens(token_hash, "
		"grant_id, kind, resource, expires_at) SELECT " HEX64
		", id, 'refresh', 'r', now() + interval '1 hour' FROM g",
		"WITH g AS (INSERT INTO oauth_grants(account_id, client_id, client_name, resource, "
		"scope, revoked_at) VALUES ($1, 'https://purge.test/' || $2, 'live', 'r', 'mcp', "
		"now() - interval '1 day') RETURNING id) INSERT INTO oauth_tokens(token_hash, "
		"grant_id, kind, resource, expires_at) SELECT " HEX64
		", id, 'access', 'r', now() - interval '1 second' FROM g",
		"INSERT INTO oauth_codes(code_hash, client_id, account_id, client_name, redirect_uri, "
		"code_challenge, resource, scope, expires_at) VALUES (" HEX64
		", 'c', $1, 'old', 'u', repeat('a', 43), 'r', 'mcp', now() - interval '11 minutes')",
		"INSERT INTO oauth_codes(code_hash, client_id, account_id, client_name, redirect_uri, "
		"code_challenge, resource, scope, expires_at) VALUES (" HEX64
		", 'c', $1, 'live', 'u', repeat('a', 43), 'r', 'mcp', now() - interval '5 minutes')",
		/* oauth_clients: registered and fetched two days ago with no grant;
		 * as old but named by a grant; new. */
		"INSERT INTO oauth_clients(client_id, kind, client_name, redirect_uris, created_at) "
		"VALUES ('https://purge.test/' || $1 || '/reg', 'registered', 'old', '[]', "
		"now() - interval '2 days')",
		"INSERT INTO oauth_clients(client_id, kind, client_name, redirect_uris, fetched_at) "
		"VALUES ('https://purge.test/' || $1 || '/doc', 'document', 'old', '[]', "
		"now() - interval '2 days')",
		"INSERT INTO oauth_clients(client_id, kind, client_name, redirect_uris, created_at) "
		"VALUES ('https://purge.test/' || $1, 'registered', 'live', '[]', "
		"now() - interval '2 days')",
		"INSERT INTO oauth_clients(client_id, kind, client_name, redirect_uris) VALUES "
		"('https://purge.test/' || $1 || '/new', 'registered', 'live', '[]')",
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		run(s, rows[i]);
}

struct left {
	const char *what;
	const char *sql; /* a count with $1 = the account */
	long long want;  /* after the purge */
};

static const struct left lefts[] = {
	{ "tasks", "SELECT count(*) FROM mcp_tasks WHERE account_id = $1", 1 },
	{ "account sessions",
	    "SELECT count(*) FROM mcp_sessions WHERE account_id = $1 AND client_name = 'live'", 1 },
	{ "old account sessions",
	    "SELECT count(*) FROM mcp_sessions WHERE account_id = $1 AND client_name = 'old'", 0 },
	{ "anonymous sessions",
	    "SELECT count(*) FROM mcp_sessions WHERE client_name = 'purge-' || $1", 1 },
	{ "web sessions", "SELECT count(*) FROM web_sessions WHERE account_id = $1", 1 },
	{ "e-mail links", "SELECT count(*) FROM email_links WHERE account_id = $1", 1 },
	{ "mail", "SELECT count(*) FROM mail_outbox WHERE account_id = $1", 1 },
	{ "live mail",
	    "SELECT count(*) FROM mail_outbox WHERE account_id = $1 AND subject = 'live'", 1 },
	{ "limit events", "SELECT count(*) FROM auth_events WHERE subject = 'purge:' || $1", 1 },
	{ "grants", "SELECT count(*) FROM oauth_grants WHERE account_id = $1", 2 },
	{ "old grants",
	    "SELECT count(*) FROM oauth_grants WHERE account_id = $1 AND client_name = 'old'", 0 },
	{ "tokens",
	    "SELECT count(*) FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id "
	    "WHERE g.account_id = $1",
	    1 },
	{ "codes", "SELECT count(*) FROM oauth_codes WHERE account_id = $1", 1 },
	{ "live codes",
	    "SELECT count(*) FROM oauth_codes WHERE account_id = $1 AND client_name = 'live'", 1 },
	{ "clients",
	    "SELECT count(*) FROM oauth_clients WHERE client_id LIKE 'https://purge.test/' || $1 || "
	    "'%'",
	    2 },
	{ "old clients",
	    "SELECT count(*) FROM oauth_clients WHERE client_id LIKE 'https://purge.test/' || $1 || "
	    "'%' AND client_name = 'old'",
	    0 },
};

static void
test_purge_every_kind(void **state)
{
	struct sfx *s = *state;
	long long ledger = sfx_ll(s, "SELECT count(*) FROM ledger WHERE account_id = $1",
	    s->account);
	struct purge_counts c;
	struct err e;

	seed(s);
	err_clear(&e);
	assert_int_equal(purge_run(s->app->db, &s->app->cfg, &c, &e), 0);
	for (size_t i = 0; i < sizeof(lefts) / sizeof(lefts[0]); i++) {
		long long n = sfx_ll(s, lefts[i].sql, s->account);

		if (n != lefts[i].want)
			fail_msg("%s: %lld rows left, want %lld", lefts[i].what, n, lefts[i].want);
	}
	/* The backlog went in one run, in batches; every kind deleted some. */
	assert_string_equal(purge_kind_name(0), "mcp_tasks");
	assert_true(c.deleted[0] >= BACKLOG);
	for (int i = 0; i < PURGE_KINDS; i++)
		if (c.deleted[i] == 0)
			fail_msg("purge deleted no %s rows", purge_kind_name(i));
	assert_null(purge_kind_name(PURGE_KINDS));
	/* Accounting stays. */
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM ledger WHERE account_id = $1", s->account),
	    ledger);
	/* A second run finds nothing of this test's. */
	assert_int_equal(purge_run(s->app->db, &s->app->cfg, &c, &e), 0);
	assert_int_equal(sfx_ll(s, lefts[0].sql, s->account), 1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_purge_every_kind),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
