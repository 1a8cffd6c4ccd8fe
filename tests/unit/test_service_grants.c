/* test_service_grants.c - the free credit of verified sign-ups over
 * PostgreSQL: at most AAS_FREE_GRANTS_PER_NETWORK a day from one network
 * and AAS_FREE_GRANTS_PER_DOMAIN a day at one e-mail domain (the account
 * is made, the grant withheld), once per mailbox however its address is
 * spelt (+tags, gmail's dots). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/db.h"
#include "base/err.h"
#include "base/keys.h"
#include "account/users.h"
#include "account/users_int.h"
#include "tests/unit/service_fixture.h"

#define PASSWORD "correct horse battery staple"

static void
tune(struct sfx *s)
{
	s->app->cfg.argon2_t_cost = 1;
	s->app->cfg.argon2_m_kib = 8192;
	s->app->cfg.argon2_lanes = 1;
	s->app->cfg.signups_per_address = 1000;
	s->app->cfg.mails_per_account = 5;
	s->app->cfg.link_ttl_s = 86400;
	s->app->cfg.free_credit = SFX_FREE_CREDIT;
	s->app->cfg.free_grants_per_network = 1000000;
	s->app->cfg.free_grants_per_domain = 1000000;
}

static void
rnd(char *out, size_t n)
{
	assert_int_equal(key_random_base36(out, n - 1), 0);
}

/* Signs up `email` from `addr` and follows its verification link; the
 * verification's *granted. */
static int
signup_verified(struct sfx *s, const char *email, const char *addr)
{
	char account[ACCT_ID_LEN + 1], got[ACCT_ID_LEN + 1], code[65];
	const char *p[1] = { account };
	struct err e;
	PGresult *r;
	int granted = 0;

	err_clear(&e);
	if (user_signup(s->app->db, &s->app->cfg, email, PASSWORD, addr, account, &e) < 0)
		fail_msg("sign-up of %s: %s", email, e.msg);
	assert_string_not_equal(account, "");
	r = db_query(s->app->db,
	    "SELECT substring(body from 'code=([0-9a-f]{64})') FROM mail_outbox "
	    "WHERE account_id = $1 AND strpos(subject, 'Verify') > 0 ORDER BY id DESC LIMIT 1",
	    1, p, &e);
	assert_non_null(r);
	assert_int_equal(PQntuples(r), 1);
	snprintf(code, sizeof(code), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	err_clear(&e);
	if (user_verify(s->app->db, &s->app->cfg, code, got, &granted, &e) < 0)
		fail_msg("verification of %s: %s", email, e.msg);
	return granted;
}

/* Grants in the ledger to accounts whose address ends in `tail`. */
static long long
grants(struct sfx *s, const char *tail)
{
	return sfx_ll(s,
	    "SELECT count(*) FROM ledger l JOIN accounts a ON a.id = l.account_id "
	    "WHERE l.kind = 'grant' AND right(a.email, length($1)) = $1",
	    tail);
}

static void
test_grants_per_network(void **state)
{
	struct sfx *s = *state;
	char tag[9], email[80], addr[48], tail[32];
	unsigned char b[2];

	tune(s);
	s->app->cfg.free_grants_per_network = 3;
	rnd(tag, sizeof(tag));
	b[0] = (unsigned char)tag[0]; /* a /24 of this run's own */
	b[1] = (unsigned char)tag[1];
	snprintf(tail, sizeof(tail), "-%s@example.com", tag);
	/* Four addresses of one /24: the fourth verified account gets none. */
	for (int i = 0; i < 4; i++) {
		snprintf(email, sizeof(email), "n%d%s", i, tail);
		snprintf(addr, sizeof(addr), "10.%u.%u.%d", b[0], b[1], 10 + i);
		assert_int_equal(signup_verified(s, email, addr), i < 3 ? 1 : -1);
	}
	assert_int_equal(grants(s, tail), 3);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM accounts WHERE right(email, length($1)) = $1",
			     tail),
	    4);
	/* Another network still gets its own. */
	snprintf(email, sizeof(email), "other%s", tail);
	snprintf(addr, sizeof(addr), "10.%u.%u.10", b[0], (b[1] + 1) % 256);
	assert_int_equal(signup_verified(s, email, addr), 1);
	/* IPv6: one /48 is one network. */
	s->app->cfg.free_grants_per_network = 1;
	snprintf(email, sizeof(email), "v6a%s", tail);
	snprintf(addr, sizeof(addr), "2001:db8:%x::/64", b[0] * 256 + b[1]);
	assert_int_equal(signup_verified(s, email, addr), 1);
	snprintf(email, sizeof(email), "v6b%s", tail);
	snprintf(addr, sizeof(addr), "2001:db8:%x:77::/64", b[0] * 256 + b[1]);
	assert_int_equal(signup_verified(s, email, addr), -1);
}

static void
test_grants_per_domain(void **state)
{
	struct sfx *s = *state;
	char tag[9], email[80], addr[48], tail[48];

	tune(s);
	s->app->cfg.free_grants_per_domain = 2;
	rnd(tag, sizeof(tag));
	snprintf(tail, sizeof(tail), "@corp-%s.example", tag);
	for (int i = 0; i < 3; i++) {
		snprintf(email, sizeof(email), "d%d%s", i, tail);
		snprintf(addr, sizeof(addr), "test-%s-%d", tag, i);
		assert_int_equal(signup_verified(s, email, addr), i < 2 ? 1 : -1);
	}
	assert_int_equal(grants(s, tail), 2);
}

/* One gmail mailbox under three spellings gets one grant; gmail is not
 * counted per domain. */
static void
test_grants_per_mailbox(void **state)
{
	struct sfx *s = *state;
	char tag[9], email[80], addr[48], canon[80];
	struct err e;

	tune(s);
	s->app->cfg.free_grants_per_domain = 1;
	rnd(tag, sizeof(tag));
	err_clear(&e);
	assert_int_equal(user_email_canon("a.b.c+x@googlemail.com", canon, sizeof(canon), &e), 0);
	assert_string_equal(canon, "abc@gmail.com");
	assert_int_equal(user_email_canon("first.last+news@example.org", canon, sizeof(canon), &e),
	    0);
	assert_string_equal(canon, "first.last@example.org");
	/* A mailbox that does not fit is refused, not counted under a cut name. */
	assert_int_equal(user_email_canon("first.last@example.org", canon, 16, &e), -1);
	assert_string_equal(e.msg, "e-mail address too long");
	err_clear(&e);
	assert_int_equal(user_email_canon("abc@gmail.com", canon, 3, &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	snprintf(email, sizeof(email), "g.%s@gmail.com", tag);
	snprintf(addr, sizeof(addr), "test-%s-1", tag);
	assert_int_equal(signup_verified(s, email, addr), 1);
	snprintf(email, sizeof(email), "g%s+more@gmail.com", tag);
	snprintf(addr, sizeof(addr), "test-%s-2", tag);
	assert_int_equal(signup_verified(s, email, addr), 0);
	snprintf(email, sizeof(email), "g.%s.x@googlemail.com", tag);
	snprintf(addr, sizeof(addr), "test-%s-3", tag);
	assert_int_equal(signup_verified(s, email, addr), 1); /* another mailbox, no domain count */
}

/* The network a sign-up counts under; an address too long for one is
 * refused rather than counted under a cut name. */
static void
test_grants_signup_net(void **state)
{
	char net[USER_ADDR_MAX + 1], addr[USER_ADDR_MAX + 2];
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(user_signup_net("192.0.2.7", net, sizeof(net), &e), 0);
	assert_string_equal(net, "192.0.2.0/24");
	assert_int_equal(user_signup_net("2001:db8:1:2:3::/64", net, sizeof(net), &e), 0);
	assert_string_equal(net, "2001:db8:1::/48");
	memset(addr, 'a', sizeof(addr) - 1);
	addr[sizeof(addr) - 1] = '\0';
	assert_int_equal(user_signup_net(addr, net, sizeof(net), &e), -1);
	assert_string_equal(e.msg, "client address too long");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_grants_per_network),
		T(test_grants_per_domain),
		T(test_grants_per_mailbox),
		cmocka_unit_test(test_grants_signup_net),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
