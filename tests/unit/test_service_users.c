/* test_service_users.c - self-service accounts over PostgreSQL: sign-up
 * and its verification mail, the free credit granted once (also when two
 * verifications race), login failures up to the lockout, password reset
 * through its single-use link, and dashboard sessions (CSRF, idle and
 * absolute expiry, the per-account maximum, the end on a reset). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/crypto.h>

#include "base/db.h"
#include "base/err.h"
#include "base/keys.h"
#include "base/passwd.h"
#include "account/accounts.h"
#include "account/mailq.h"
#include "account/users.h"
#include "account/websess.h"
#include "tests/unit/service_fixture.h"

#define PASSWORD "correct horse battery staple"

/* This run's client address: earlier runs' events never count here. */
static char run_addr[32];

/* Fast password hashes and small limits, for this test's service. */
static void
tune(struct sfx *s)
{
	s->app->cfg.argon2_t_cost = 1;
	s->app->cfg.argon2_m_kib = 8192;
	s->app->cfg.argon2_lanes = 1;
	s->app->cfg.login_failures = 3;
	s->app->cfg.login_failures_per_address = 100;
	s->app->cfg.signups_per_address = 1000;
	s->app->cfg.mails_per_account = 5;
	s->app->cfg.web_sessions_per_account = 3;
	s->app->cfg.web_idle_s = 3600;
	s->app->cfg.web_absolute_s = 86400;
	s->app->cfg.link_ttl_s = 86400;
	s->app->cfg.free_credit = SFX_FREE_CREDIT;
	s->app->cfg.free_grants_per_network = 1000000;
	s->app->cfg.free_grants_per_domain = 1000000;
}

static void
new_email(char *out, size_t n)
{
	char r[13];

	assert_int_equal(key_random_base36(r, sizeof(r) - 1), 0);
	snprintf(out, n, "User.%s@Example.COM", r);
}

/* A unique client address, so other tests' events never count here. */
static void
new_addr(char *out, size_t n)
{
	char r[9];

	assert_int_equal(key_random_base36(r, sizeof(r) - 1), 0);
	snprintf(out, n, "test-%s", r);
}

/* The code in the newest mail of `account` with `subject_part`. */
static void
mail_code(struct sfx *s, const char *account, const char *subject_part, char code[65])
{
	const char *p[2] = { account, subject_part };
	struct err e;
	PGresult *r;

	err_clear(&e);
	r = db_query(s->app->db,
	    "SELECT substring(body from 'code=([0-9a-f]{64})') FROM mail_outbox "
	    "WHERE account_id = $1 AND strpos(subject, $2) > 0 ORDER BY id DESC LIMIT 1",
	    2, p, &e);
	assert_non_null(r);
	assert_int_equal(PQntuples(r), 1);
	snprintf(code, 65, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	assert_int_equal(strlen(code), 64);
}

static long long
balance(struct sfx *s, const char *account)
{
	return sfx_ll(s, "SELECT balance FROM accounts WHERE id = $1", account);
}

static void
signup(struct sfx *s, char *email, size_t n, char account[ACCT_ID_LEN + 1])
{
	char addr[32];
	struct err e;

	new_email(email, n);
	new_addr(addr, sizeof(addr));
	err_clear(&e);
	assert_int_equal(user_signup(s->app->db, &s->app->cfg, email, PASSWORD, addr, account, &e),
	    0);
}

static void
test_signup_verify_grants_once(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], again[ACCT_ID_LEN + 1], code[65];
	struct err e;
	int granted = 0;

	tune(s);
	signup(s, email, sizeof(email), account);
	/* Stored in lower case, unverified, no credit yet, one mail waiting. */
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM accounts WHERE id = $1 AND email = "
			     "lower(email) AND email_verified_at IS NULL",
			     account),
	    1);
	assert_int_equal(balance(s, account), 0);
	mail_code(s, account, "Verify", code);

	err_clear(&e);
	assert_int_equal(user_verify(s->app->db, &s->app->cfg, code, again, &granted, &e), 0);
	assert_string_equal(again, account);
	assert_int_equal(granted, 1);
	assert_int_equal(balance(s, account), SFX_FREE_CREDIT);

	err_clear(&e);
	assert_int_equal(user_verify(s->app->db, &s->app->cfg, code, again, &granted, &e), -1);
	assert_int_equal(e.kind, ERR_CONFLICT);
	/* A second link (asked for again) cannot grant twice either. */
	err_clear(&e);
	assert_int_equal(user_resend(s->app->db, &s->app->cfg, account, run_addr, &e), -1);
	assert_int_equal(e.kind, ERR_CONFLICT);
	assert_int_equal(balance(s, account), SFX_FREE_CREDIT);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM ledger WHERE account_id = $1", account),
	    1);
}

struct racer {
	struct sfx *s;
	const char *code;
	int rc;
	struct err e;
};

static void *
verify_thread(void *arg)
{
	struct racer *r = arg;
	char account[ACCT_ID_LEN + 1];
	int granted;

	err_clear(&r->e);
	r->rc = user_verify(r->s->app->db, &r->s->app->cfg, r->code, account, &granted, &r->e);
	return NULL;
}

static void
test_verifications_racing_grant_once(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], code1[65], code2[65], addr[32];
	struct racer r[4];
	pthread_t t[4];
	struct err e;
	int ok = 0;

	tune(s);
	signup(s, email, sizeof(email), account);
	mail_code(s, account, "Verify", code1);
	new_addr(addr, sizeof(addr));
	err_clear(&e);
	assert_int_equal(user_resend(s->app->db, &s->app->cfg, account, addr, &e), 0);
	mail_code(s, account, "Verify", code2);
	assert_string_not_equal(code1, code2);
	/* Two threads on each of two links: one grant in all. */
	for (int i = 0; i < 4; i++) {
		r[i].s = s;
		r[i].code = i % 2 ? code1 : code2;
		assert_int_equal(pthread_create(&t[i], NULL, verify_thread, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		if (r[i].rc == 0)
			ok++;
		else
			assert_int_equal(r[i].e.kind, ERR_CONFLICT);
	}
	assert_int_equal(ok, 2); /* each link works once */
	assert_int_equal(balance(s, account), SFX_FREE_CREDIT);
}

static void
test_signup_refuses_bad_input(void **state)
{
	struct sfx *s = *state;
	char email[64], upper[64], account[ACCT_ID_LEN + 1], other[ACCT_ID_LEN + 1];
	struct err e;

	tune(s);
	signup(s, email, sizeof(email), account);
	/* The same address in other letters' case is the same account: the
	 * sign-up answers as for a new one, makes nothing and mails the
	 * owner a notice. */
	for (size_t i = 0; i <= strlen(email); i++)
		upper[i] = (char)(email[i] >= 'a' && email[i] <= 'z' ? email[i] - 32 : email[i]);
	err_clear(&e);
	assert_int_equal(user_signup(s->app->db, &s->app->cfg, upper, PASSWORD, run_addr, other,
			     &e),
	    0);
	assert_string_equal(other, "");
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM accounts WHERE lower(email) = lower($1)",
			     email),
	    1);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM mail_outbox WHERE account_id = $1 AND "
			     "subject = 'Your aas account' AND strpos(body, 'has an account') > 0",
			     account),
	    1);
	err_clear(&e);
	assert_int_equal(user_signup(s->app->db, &s->app->cfg, "fresh-weak@example.com",
			     "password123", run_addr, other, &e),
	    -1);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.field, "password");
	err_clear(&e);
	assert_int_equal(user_signup(s->app->db, &s->app->cfg, "not an address", PASSWORD, run_addr,
			     other, &e),
	    -1);
	assert_string_equal(e.field, "email");
	err_clear(&e);
	assert_int_equal(user_signup(s->app->db, &s->app->cfg, "a@b.c\r\nBcc: x@y.z", PASSWORD,
			     run_addr, other, &e),
	    -1);
	assert_string_equal(e.field, "email");
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM accounts WHERE email = $1",
			     "fresh-weak@example.com"),
	    0);
}

static void
test_signup_limit_per_address(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], addr[32];
	struct err e;

	tune(s);
	s->app->cfg.signups_per_address = 2;
	new_addr(addr, sizeof(addr));
	for (int i = 0; i < 2; i++) {
		new_email(email, sizeof(email));
		err_clear(&e);
		if (user_signup(s->app->db, &s->app->cfg, email, PASSWORD, addr, account, &e) < 0)
			fail_msg("sign-up %d: %s", i, e.msg);
	}
	new_email(email, sizeof(email));
	err_clear(&e);
	assert_int_equal(user_signup(s->app->db, &s->app->cfg, email, PASSWORD, addr, account, &e),
	    -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	assert_non_null(strstr(e.msg, "Try again in"));
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM accounts WHERE lower(email) = lower($1)",
			     email),
	    0);
}

/* The subject the failures of `email` from `addr` are counted under. */
static void
login_pair_subject(const char *email, const char *addr, char *out, size_t n)
{
	char pair[128], hash[KEY_HASH_HEX_LEN + 1];
	size_t i;

	for (i = 0; email[i] && i < 63; i++)
		pair[i] = (char)(email[i] >= 'A' && email[i] <= 'Z' ? email[i] + 32 : email[i]);
	snprintf(pair + i, sizeof(pair) - i, "|%s", addr);
	key_hash_hex(pair, strlen(pair), hash, sizeof(hash));
	snprintf(out, n, "login-from:%s", hash);
}

static void
test_login_locks_out(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], got[ACCT_ID_LEN + 1], addr[32], nobody[64];
	char subject[128];
	struct err e;

	tune(s);
	signup(s, email, sizeof(email), account);
	new_addr(addr, sizeof(addr));
	err_clear(&e);
	assert_int_equal(user_login(s->app->db, &s->app->cfg, email, PASSWORD, addr, got, &e), 0);
	assert_string_equal(got, account);
	for (int i = 0; i < 3; i++) {
		err_clear(&e);
		assert_int_equal(user_login(s->app->db, &s->app->cfg, email, "wrong password!",
				     addr, got, &e),
		    -1);
		assert_int_equal(e.kind, ERR_UNAUTHORIZED);
	}
	/* Locked: even the right password waits, and the message says how long. */
	err_clear(&e);
	assert_int_equal(user_login(s->app->db, &s->app->cfg, email, PASSWORD, addr, got, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	assert_non_null(strstr(e.msg, "try again in"));
	/* An unknown address gets the answer a wrong password gets. */
	err_clear(&e);
	new_email(nobody, sizeof(nobody));
	assert_int_equal(user_login(s->app->db, &s->app->cfg, nobody, PASSWORD, addr, got, &e), -1);
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
	assert_string_equal(e.msg, "Wrong e-mail address or password.");
	/* The lockout ends when its failures leave the window. */
	login_pair_subject(email, addr, subject, sizeof(subject));
	assert_int_equal(sfx_ll(s,
			     "WITH u AS (UPDATE auth_events SET at = at - interval '1 day' "
			     "WHERE subject = $1 RETURNING 1) SELECT count(*) FROM u",
			     subject),
	    3);
	err_clear(&e);
	assert_int_equal(user_login(s->app->db, &s->app->cfg, email, PASSWORD, addr, got, &e), 0);
}

/* A reset through `code` from this run's address. */
static int
reset(struct sfx *s, const char *code, const char *password, int revoke_keys,
    char got[ACCT_ID_LEN + 1], struct err *e)
{
	struct user_reset rs = { code, password, run_addr, revoke_keys };

	return user_reset_confirm(s->app->db, &s->app->cfg, &rs, got, e);
}

static void
test_reset_link(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], got[ACCT_ID_LEN + 1], code[65];
	char sid[WSESS_ID_LEN + 1], nobody[64];
	struct wsess ws;
	struct err e;

	tune(s);
	new_email(nobody, sizeof(nobody));
	signup(s, email, sizeof(email), account);
	err_clear(&e);
	assert_int_equal(wsess_create(s->app->db, &s->app->cfg, account, sid, &e), 0);
	/* No mail for an address without an account, and the same answer. */
	assert_int_equal(user_reset_request(s->app->db, &s->app->cfg, nobody, run_addr, &e), 0);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM mail_outbox WHERE to_addr = $1", nobody),
	    0);
	assert_int_equal(user_reset_request(s->app->db, &s->app->cfg, email, run_addr, &e), 0);
	mail_code(s, account, "Reset", code);
	assert_int_equal(user_reset_check(s->app->db, code, &e), 0);
	/* A weak password leaves the link usable. */
	assert_int_equal(reset(s, code, "short", 1, got, &e), -1);
	assert_string_equal(e.field, "password");
	err_clear(&e);
	assert_int_equal(reset(s, code, "a brand new passphrase", 1, got, &e), 0);
	assert_string_equal(got, account);
	/* Used once; the old password and the old sessions are gone. */
	assert_int_equal(reset(s, code, "another new passphrase", 1, got, &e), -1);
	assert_int_equal(e.kind, ERR_CONFLICT);
	err_clear(&e);
	assert_int_equal(user_login(s->app->db, &s->app->cfg, email, PASSWORD, run_addr, got, &e),
	    -1);
	err_clear(&e);
	assert_int_equal(user_login(s->app->db, &s->app->cfg, email, "a brand new passphrase",
			     run_addr, got, &e),
	    0);
	err_clear(&e);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, sid, &ws, &e), -1);
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
	/* Garbage and expired links. */
	err_clear(&e);
	assert_int_equal(user_reset_check(s->app->db, "zz", &e), -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	err_clear(&e);
	assert_int_equal(user_reset_request(s->app->db, &s->app->cfg, email, run_addr, &e), 0);
	mail_code(s, account, "Reset", code);
	assert_int_equal(
	    sfx_ll(s,
		"WITH u AS (UPDATE email_links SET expires_at = now() - interval '1 s' "
		"WHERE account_id = $1 AND purpose = 'reset' AND used_at IS NULL RETURNING 1) "
		"SELECT count(*) FROM u",
		account),
	    1);
	assert_int_equal(user_reset_check(s->app->db, code, &e), -1);
	assert_int_equal(e.kind, ERR_TIMEOUT);
}

static void
test_sessions(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], sid[4][WSESS_ID_LEN + 1], hash[65];
	struct wsess ws;
	struct err e;

	tune(s);
	signup(s, email, sizeof(email), account);
	for (int i = 0; i < 4; i++) {
		err_clear(&e);
		assert_int_equal(wsess_create(s->app->db, &s->app->cfg, account, sid[i], &e), 0);
	}
	/* At most three per account: the oldest ended. */
	err_clear(&e);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, sid[0], &ws, &e), -1);
	err_clear(&e);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, sid[3], &ws, &e), 0);
	assert_string_equal(ws.account_id, account);
	assert_int_equal(ws.verified, 0);
	assert_true(wsess_csrf_ok(&ws, ws.csrf));
	assert_false(wsess_csrf_ok(&ws, ""));
	assert_false(wsess_csrf_ok(&ws, NULL));
	{
		char bad[WSESS_CSRF_LEN + 1];

		snprintf(bad, sizeof(bad), "%s", ws.csrf);
		bad[10] = bad[10] == 'a' ? 'b' : 'a';
		assert_false(wsess_csrf_ok(&ws, bad));
	}
	/* Idle too long, or too old: ended. */
	key_hash_hex(sid[2], WSESS_ID_LEN, hash, sizeof(hash));
	assert_int_equal(
	    sfx_ll(s,
		"WITH u AS (UPDATE web_sessions SET last_seen_at = now() - interval '2 hours' "
		"WHERE id_hash = $1 RETURNING 1) SELECT count(*) FROM u",
		hash),
	    1);
	err_clear(&e);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, sid[2], &ws, &e), -1);
	key_hash_hex(sid[1], WSESS_ID_LEN, hash, sizeof(hash));
	assert_int_equal(
	    sfx_ll(s,
		"WITH u AS (UPDATE web_sessions SET created_at = now() - interval '2 days' "
		"WHERE id_hash = $1 RETURNING 1) SELECT count(*) FROM u",
		hash),
	    1);
	err_clear(&e);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, sid[1], &ws, &e), -1);
	/* Logout, and ids that are not ids. */
	err_clear(&e);
	assert_int_equal(wsess_end(s->app->db, sid[3], &e), 0);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, sid[3], &ws, &e), -1);
	err_clear(&e);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, "'; DROP TABLE x; --", &ws, &e),
	    -1);
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
}

static void
test_outbox_keeps_mail_without_smtp(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1];
	struct err e;
	json_t *v;
	int sent = -1;

	tune(s);
	signup(s, email, sizeof(email), account);
	v = mailq_pending(s->app->db, 1000, &e);
	assert_non_null(v);
	assert_true(json_array_size(v) >= 1);
	json_decref(v);
	/* A server that is not there: the mail stays, with the reason. */
	err_clear(&e);
	assert_int_equal(db_exec(s->app->db,
			     "UPDATE mail_outbox SET next_attempt_at = now() + interval '1 day' "
			     "WHERE account_id IS DISTINCT FROM $1 AND sent_at IS NULL",
			     1, (const char *const[]){ account }, NULL, &e),
	    0);
	assert_int_equal(mailq_send_due(s->app->db, "smtp://127.0.0.1:1", "aas <a@b.c>", 4, &sent,
			     &e),
	    0);
	assert_int_equal(sent, 0);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM mail_outbox WHERE account_id = $1 "
			     "AND sent_at IS NULL AND attempts = 1 AND last_error LIKE 'smtp:%'",
			     account),
	    1);
}

static void
test_email_change(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], other_email[64], other[ACCT_ID_LEN + 1];
	char fresh[64], code[65], got[ACCT_ID_LEN + 1];
	struct err e;

	tune(s);
	signup(s, email, sizeof(email), account);
	signup(s, other_email, sizeof(other_email), other);
	new_email(fresh, sizeof(fresh));
	err_clear(&e);
	assert_int_equal(user_email_change_request(s->app->db, &s->app->cfg, account, "wrong one!!",
			     fresh, run_addr, &e),
	    -1);
	assert_string_equal(e.field, "current");
	err_clear(&e);
	assert_int_equal(user_email_change_request(s->app->db, &s->app->cfg, account, PASSWORD,
			     other_email, run_addr, &e),
	    -1);
	assert_int_equal(e.kind, ERR_CONFLICT);
	err_clear(&e);
	assert_int_equal(user_email_change_request(s->app->db, &s->app->cfg, account, PASSWORD,
			     fresh, run_addr, &e),
	    0);
	/* Nothing changes before the new address answers; the old one is told. */
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM accounts WHERE id = $1 AND email = lower(email) "
			     "AND email <> 'x' AND strpos(email, 'user.') = 1",
			     account),
	    1);
	mail_code(s, account, "Confirm your new", code);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM mail_outbox WHERE account_id = $1 "
			     "AND subject LIKE '%is changing'",
			     account),
	    1);
	err_clear(&e);
	assert_int_equal(user_email_change_confirm(s->app->db, &s->app->cfg, code, got, &e), 0);
	assert_string_equal(got, account);
	for (char *p = fresh; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM accounts WHERE email = $1", fresh), 1);
	err_clear(&e);
	assert_int_equal(user_login(s->app->db, &s->app->cfg, fresh, PASSWORD, run_addr, got, &e),
	    0);
	err_clear(&e);
	assert_int_equal(user_email_change_confirm(s->app->db, &s->app->cfg, code, got, &e), -1);
	assert_int_equal(e.kind, ERR_CONFLICT);
}

static void
wait_destroyed(struct sfx *s, const char *id)
{
	char st[16] = "";

	for (int i = 0; i < 1000; i++) {
		sfx_state(s, id, st, sizeof(st));
		if (strcmp(st, "destroyed") == 0)
			return;
		usleep(10 * 1000);
	}
	fail_msg("sandbox %s is %s, not destroyed, after 10 s", id, st);
}

static void
test_delete_account(void **state)
{
	struct sfx *s = *state;
	char hash[PW_ENCODED_MAX], id[32], old_email[256], again[ACCT_ID_LEN + 1], v[32];
	const struct pw_params pp = { 1, 8192, 1 };
	struct err e;

	tune(s);
	/* The fixture's account (made by the operator) gets a password. */
	err_clear(&e);
	assert_int_equal(pw_hash(&pp, PASSWORD, strlen(PASSWORD), hash, sizeof(hash), &e), 0);
	assert_int_equal(db_exec(s->app->db, "UPDATE accounts SET password_hash = $2 WHERE id = $1",
			     2, (const char *const[]){ s->account, hash }, NULL, &e),
	    0);
	sfx_text(s, "SELECT email FROM accounts WHERE id = $1", s->account, old_email,
	    sizeof(old_email));
	sfx_create(s, 10, id);
	err_clear(&e);
	assert_int_equal(user_delete(s->app->db, &s->app->cfg, s->account, "not it at all",
			     run_addr, &e),
	    -1);
	assert_string_equal(e.field, "current");
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM accounts WHERE id = $1 AND deleted_at IS NULL "
			     "AND disabled_at IS NULL",
			     s->account),
	    1);
	err_clear(&e);
	assert_int_equal(user_delete(s->app->db, &s->app->cfg, s->account, PASSWORD, run_addr, &e),
	    0);
	/* Its sandbox stops and is settled; its keys are revoked. */
	wait_destroyed(s, id);
	sfx_text(s, "SELECT end_reason FROM sandboxes WHERE id = $1", id, v, sizeof(v));
	assert_string_equal(v, "account_disabled");
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM api_keys WHERE account_id = $1 "
			     "AND revoked_at IS NULL",
			     s->account),
	    0);
	/* No personal data left; the ledger stays and still adds up. */
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM accounts WHERE id = $1 AND password_hash IS "
			     "NULL AND email = 'deleted-' || id || '@deleted.invalid'",
			     s->account),
	    1);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM ledger WHERE account_id = $1", s->account),
	    3);
	/* The address is free for a new account. */
	err_clear(&e);
	assert_int_equal(user_signup(s->app->db, &s->app->cfg, old_email, PASSWORD, run_addr, again,
			     &e),
	    0);
	assert_string_not_equal(again, s->account);
}

/* One mailbox gets the free credit once: deleting the account and signing
 * up again with the same address grants nothing more. */
static void
test_free_credit_once_per_address(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], again[ACCT_ID_LEN + 1], code[65];
	struct err e;
	int granted = -1;

	tune(s);
	signup(s, email, sizeof(email), account);
	mail_code(s, account, "Verify", code);
	err_clear(&e);
	assert_int_equal(user_verify(s->app->db, &s->app->cfg, code, again, &granted, &e), 0);
	assert_int_equal(granted, 1);
	assert_int_equal(user_delete(s->app->db, &s->app->cfg, account, PASSWORD, run_addr, &e), 0);
	err_clear(&e);
	assert_int_equal(user_signup(s->app->db, &s->app->cfg, email, PASSWORD, run_addr, again,
			     &e),
	    0);
	mail_code(s, again, "Verify", code);
	assert_int_equal(user_verify(s->app->db, &s->app->cfg, code, again, &granted, &e), 0);
	assert_int_equal(granted, 0);
	assert_int_equal(balance(s, again), 0);
}

/* A password change voids the address-change links asked for under the
 * old one (someone who knew it cannot move the account later). */
static void
test_password_change_voids_links(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], fresh[64], code[65], got[ACCT_ID_LEN + 1];
	struct err e;

	tune(s);
	signup(s, email, sizeof(email), account);
	new_email(fresh, sizeof(fresh));
	err_clear(&e);
	assert_int_equal(user_email_change_request(s->app->db, &s->app->cfg, account, PASSWORD,
			     fresh, run_addr, &e),
	    0);
	mail_code(s, account, "Confirm your new", code);
	assert_int_equal(user_password_change(s->app->db, &s->app->cfg, account, PASSWORD,
			     "a wholly new passphrase", run_addr, &e),
	    0);
	err_clear(&e);
	assert_int_equal(user_email_change_confirm(s->app->db, &s->app->cfg, code, got, &e), -1);
	assert_int_equal(e.kind, ERR_CONFLICT);
	/* Still at its first address. */
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM accounts WHERE email = lower($1)", email),
	    1);
}

struct guesser {
	struct sfx *s;
	const char *email;
	struct err e;
};

static void *
guess_thread(void *arg)
{
	struct guesser *g = arg;
	char got[ACCT_ID_LEN + 1];

	err_clear(&g->e);
	err_ignore(user_login(g->s->app->db, &g->s->app->cfg, g->email, "a wrong guess!", run_addr,
	    got, &g->e));
	return NULL;
}

/* Guesses sent at once cannot all pass the count: each is counted before
 * its slow check. */
static void
test_parallel_guesses_counted(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1];
	struct guesser g[8];
	pthread_t t[8];
	int wrong = 0;

	tune(s);
	signup(s, email, sizeof(email), account);
	for (int i = 0; i < 8; i++) {
		g[i].s = s;
		g[i].email = email;
		assert_int_equal(pthread_create(&t[i], NULL, guess_thread, &g[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		if (g[i].e.kind == ERR_UNAUTHORIZED)
			wrong++;
		else
			assert_true(g[i].e.kind == ERR_LIMIT || g[i].e.kind == ERR_UNAVAILABLE);
	}
	assert_true(wrong <= 3);
}

/* A live OAuth grant of the account (its id into `grant`). */
static void
grant_new(struct sfx *s, const char *account, char grant[ACCT_ID_LEN + 1])
{
	const char *p[1] = { account };
	struct err e;
	PGresult *r;

	err_clear(&e);
	r = db_query(s->app->db,
	    "INSERT INTO oauth_grants(account_id, client_id, client_name, resource, scope) "
	    "VALUES ($1, 'https://app.example/c', 'app', 'http://127.0.0.1/v1/mcp', 'mcp') "
	    "RETURNING id",
	    1, p, &e);
	assert_non_null(r);
	snprintf(grant, ACCT_ID_LEN + 1, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
}

static long long
grant_live(struct sfx *s, const char *grant)
{
	return sfx_ll(s, "SELECT count(*) FROM oauth_grants WHERE id = $1 AND revoked_at IS NULL",
	    grant);
}

/* Wrong current passwords are counted as failed logins: past the limit
 * the check is refused without a hash, the right password too, while
 * another account logs in from another client. Also true for the
 * address change and the deletion, which check it the same way. */
static void
test_current_password_limited(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], other[64], other_id[ACCT_ID_LEN + 1];
	char addr[32], got[ACCT_ID_LEN + 1], fresh[64];
	struct err e;

	tune(s);
	signup(s, email, sizeof(email), account);
	signup(s, other, sizeof(other), other_id);
	new_addr(addr, sizeof(addr));
	new_email(fresh, sizeof(fresh));
	for (int i = 0; i < s->app->cfg.login_failures; i++) {
		err_clear(&e);
		assert_int_equal(user_password_change(s->app->db, &s->app->cfg, account,
				     "a wrong guess!", "a wholly new passphrase", addr, &e),
		    -1);
		assert_int_equal(e.kind, ERR_INVALID);
		assert_string_equal(e.field, "current");
	}
	err_clear(&e);
	assert_int_equal(user_password_change(s->app->db, &s->app->cfg, account, "a wrong guess!",
			     "a wholly new passphrase", addr, &e),
	    -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	/* The right one learns nothing, on every form that checks it. */
	err_clear(&e);
	assert_int_equal(user_password_change(s->app->db, &s->app->cfg, account, PASSWORD,
			     "a wholly new passphrase", addr, &e),
	    -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	err_clear(&e);
	assert_int_equal(user_email_change_request(s->app->db, &s->app->cfg, account, PASSWORD,
			     fresh, addr, &e),
	    -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	err_clear(&e);
	assert_int_equal(user_delete(s->app->db, &s->app->cfg, account, PASSWORD, addr, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	/* The password stayed; another account is not held up. */
	err_clear(&e);
	assert_int_equal(user_login(s->app->db, &s->app->cfg, other, PASSWORD, run_addr, got, &e),
	    0);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM accounts WHERE id = $1 AND deleted_at IS "
			     "NULL",
			     account),
	    1);
}

/* A reset ends every session and OAuth grant and, when asked, every API
 * key (at once); a change ends the sessions and grants and keeps the
 * keys. */
static void
test_reset_and_change_revoke(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], code[65], got[ACCT_ID_LEN + 1];
	char grant[ACCT_ID_LEN + 1], sid[WSESS_ID_LEN + 1];
	struct acct_new_key nk;
	struct wsess ws;
	struct err e;

	tune(s);
	signup(s, email, sizeof(email), account);
	err_clear(&e);
	assert_int_equal(acct_key_create(s->app->db, account, "laptop", &nk, &e), 0);
	/* Kept: the box unchecked. */
	grant_new(s, account, grant);
	assert_int_equal(user_reset_request(s->app->db, &s->app->cfg, email, run_addr, &e), 0);
	mail_code(s, account, "Reset", code);
	assert_int_equal(reset(s, code, "a brand new passphrase", 0, got, &e), 0);
	assert_int_equal(grant_live(s, grant), 0);
	assert_int_equal(acct_resolve_key(s->app->db, nk.key, strlen(nk.key), got, &e), 0);
	/* Revoked: the box checked. */
	grant_new(s, account, grant);
	assert_int_equal(wsess_create(s->app->db, &s->app->cfg, account, sid, &e), 0);
	assert_int_equal(user_reset_request(s->app->db, &s->app->cfg, email, run_addr, &e), 0);
	mail_code(s, account, "Reset", code);
	assert_int_equal(reset(s, code, "another new passphrase", 1, got, &e), 0);
	assert_int_equal(grant_live(s, grant), 0);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, sid, &ws, &e), -1);
	err_clear(&e);
	assert_int_equal(acct_resolve_key(s->app->db, nk.key, strlen(nk.key), got, &e), -1);
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
	/* A change: grants and sessions end, a new key stays. */
	err_clear(&e);
	assert_int_equal(acct_key_create(s->app->db, account, "laptop", &nk, &e), 0);
	grant_new(s, account, grant);
	assert_int_equal(wsess_create(s->app->db, &s->app->cfg, account, sid, &e), 0);
	assert_int_equal(user_password_change(s->app->db, &s->app->cfg, account,
			     "another new passphrase", "a third new passphrase", run_addr, &e),
	    0);
	assert_int_equal(grant_live(s, grant), 0);
	assert_int_equal(wsess_resolve(s->app->db, &s->app->cfg, sid, &ws, &e), -1);
	err_clear(&e);
	assert_int_equal(acct_resolve_key(s->app->db, nk.key, strlen(nk.key), got, &e), 0);
	OPENSSL_cleanse(&nk, sizeof(nk));
}

/* Checking a verification or address-change link (what a GET does)
 * changes nothing; following it does. */
static void
test_link_check_changes_nothing(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], code[65], got[ACCT_ID_LEN + 1];
	struct err e;
	int granted;

	tune(s);
	signup(s, email, sizeof(email), account);
	mail_code(s, account, "Verify", code);
	err_clear(&e);
	assert_int_equal(user_link_check(s->app->db, code, "verify", &e), 0);
	assert_int_equal(user_link_check(s->app->db, code, "verify", &e), 0);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM accounts WHERE id = $1 AND "
			     "email_verified_at IS NULL",
			     account),
	    1);
	/* A link of one purpose is not one of another. */
	assert_int_equal(user_link_check(s->app->db, code, "email", &e), -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	err_clear(&e);
	assert_int_equal(user_verify(s->app->db, &s->app->cfg, code, got, &granted, &e), 0);
	assert_int_equal(user_link_check(s->app->db, code, "verify", &e), -1);
	assert_int_equal(e.kind, ERR_CONFLICT);
}

static double
login_ms(struct sfx *s, const char *email, const char *addr, struct err *e)
{
	char got[ACCT_ID_LEN + 1];
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	err_clear(e);
	assert_int_equal(user_login(s->app->db, &s->app->cfg, email, "wrong password!", addr, got,
			     e),
	    -1);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

/* An attacker failing 100 times from one address locks only that address
 * out of the e-mail: its owner logs in from another. A wrong password and
 * an unknown e-mail answer alike, in about the same time. */
static void
test_login_lockout_spares_owner(void **state)
{
	struct sfx *s = *state;
	char email[64], account[ACCT_ID_LEN + 1], got[ACCT_ID_LEN + 1], evil[32], home[32];
	char nobody[64], known_msg[512];
	double known = 0, unknown = 0;
	struct err e;
	int limited = 0;

	tune(s);
	s->app->cfg.login_failures = 5;
	s->app->cfg.login_failures_per_email = 100;
	signup(s, email, sizeof(email), account);
	new_addr(evil, sizeof(evil));
	new_addr(home, sizeof(home));
	for (int i = 0; i < 100; i++) {
		err_clear(&e);
		assert_int_equal(user_login(s->app->db, &s->app->cfg, email, "wrong password!",
				     evil, got, &e),
		    -1);
		assert_true(e.kind == ERR_UNAUTHORIZED || e.kind == ERR_LIMIT);
		limited += e.kind == ERR_LIMIT;
	}
	assert_int_equal(limited, 95);
	err_clear(&e);
	if (user_login(s->app->db, &s->app->cfg, email, PASSWORD, home, got, &e) < 0)
		fail_msg("the owner is locked out: %s", e.msg);
	assert_string_equal(got, account);

	new_email(nobody, sizeof(nobody));
	for (int i = 0; i < 3; i++) {
		known += login_ms(s, email, home, &e);
		snprintf(known_msg, sizeof(known_msg), "%s", e.msg);
		assert_int_equal(e.kind, ERR_UNAUTHORIZED);
		unknown += login_ms(s, nobody, home, &e);
		assert_int_equal(e.kind, ERR_UNAUTHORIZED);
		assert_string_equal(e.msg, known_msg);
	}
	print_message("login: wrong password %.1f ms, unknown e-mail %.1f ms (3 each)\n", known,
	    unknown);
	assert_true(unknown * 3 > known && known * 3 > unknown);
}

static double
signup_ms(struct sfx *s, const char *email, const char *addr, char account[ACCT_ID_LEN + 1])
{
	struct timespec a, b;
	struct err e;

	clock_gettime(CLOCK_MONOTONIC, &a);
	err_clear(&e);
	if (user_signup(s->app->db, &s->app->cfg, email, PASSWORD, addr, account, &e) < 0)
		fail_msg("sign-up of %s: %s", email, e.msg);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

/* A sign-up with a taken address answers as one with a new address, in
 * about the same time (both hash the password), and makes nothing. */
static void
test_signup_taken_answers_alike(void **state)
{
	struct sfx *s = *state;
	char email[64], fresh[64], account[ACCT_ID_LEN + 1], got[ACCT_ID_LEN + 1], addr[32];
	double taken = 0, new_ms = 0;

	tune(s);
	s->app->cfg.argon2_m_kib = 32768; /* a hash that dominates, as in production */
	signup(s, email, sizeof(email), account);
	new_addr(addr, sizeof(addr));
	for (int i = 0; i < 3; i++) {
		new_email(fresh, sizeof(fresh));
		new_ms += signup_ms(s, fresh, addr, got);
		assert_string_not_equal(got, "");
		taken += signup_ms(s, email, addr, got);
		assert_string_equal(got, "");
	}
	print_message("sign-up: new address %.1f ms, taken address %.1f ms (3 each)\n", new_ms,
	    taken);
	assert_true(taken * 3 > new_ms && new_ms * 3 > taken);
	assert_int_equal(sfx_ll(s, "SELECT count(*) FROM accounts WHERE lower(email) = lower($1)",
			     email),
	    1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	new_addr(run_addr, sizeof(run_addr));
	const struct CMUnitTest tests[] = {
		T(test_signup_verify_grants_once),
		T(test_verifications_racing_grant_once),
		T(test_signup_refuses_bad_input),
		T(test_signup_taken_answers_alike),
		T(test_signup_limit_per_address),
		T(test_login_locks_out),
		T(test_login_lockout_spares_owner),
		T(test_reset_link),
		T(test_sessions),
		T(test_outbox_keeps_mail_without_smtp),
		T(test_email_change),
		T(test_delete_account),
		T(test_free_credit_once_per_address),
		T(test_password_change_voids_links),
		T(test_parallel_guesses_counted),
		T(test_current_password_limited),
		T(test_reset_and_change_revoke),
		T(test_link_check_changes_nothing),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
