/* test_service_pay.c - money a payment provider takes back, over
 * PostgreSQL: Stripe webhook deliveries signed with a test secret and
 * applied as aasd applies them. A partial and a full refund take back
 * what is new, a dispute takes its amount and gives it back when its
 * funds are reinstated, a take-back beyond the balance is owed and
 * disables the account, a replayed event changes nothing, and the
 * balance always equals the ledger's sum (also checked by the fixture's
 * tear-down). And the bounds on starting checkouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/db.h"
#include "base/err.h"
#include "base/keys.h"
#include "billing/ledger.h"
#include "account/pay.h"
#include "tests/unit/service_fixture.h"

#define SECRET "whsec_unit"
#define USD 1000000LL

static long long
balance(struct sfx *s)
{
	/* The balance, after checking it is the ledger's sum. */
	assert_int_equal(sfx_ll(s,
			     "SELECT (balance = (SELECT coalesce(sum(amount), 0) FROM ledger "
			     "WHERE account_id = $1))::int FROM accounts WHERE id = $1",
			     s->account),
	    1);
	return sfx_ll(s, "SELECT balance FROM accounts WHERE id = $1", s->account);
}

/* Signs `body` as Stripe does and applies it; *credited as pay_apply. */
static int
deliver(struct sfx *s, const char *body, int *credited)
{
	unsigned char mac[32];
	unsigned int ml = 0;
	char msg[4096], sig[128];
	long long now = (long long)time(NULL);
	struct pay_event ev;
	struct err e;
	int n = snprintf(msg, sizeof(msg), "%lld.%s", now, body);

	assert_non_null(HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), (unsigned char *)msg,
	    (size_t)n, mac, &ml));
	n = snprintf(sig, sizeof(sig), "t=%lld,v1=", now);
	for (unsigned i = 0; i < ml; i++)
		n += snprintf(sig + n, sizeof(sig) - (size_t)n, "%02x", mac[i]);
	err_clear(&e);
	if (pay_stripe.parse(&s->app->cfg, sig, body, strlen(body), now, &ev, &e) < 0)
		fail_msg("parse: %s", e.msg);
	*credited = 0;
	if (pay_apply(s->app->db, &pay_stripe, &ev, credited, &e) < 0)
		fail_msg("apply: %s", e.msg);
	return 0;
}

static void
event_id(char *out, size_t n)
{
	char r[17];

	assert_int_equal(key_random_base36(r, sizeof(r) - 1), 0);
	snprintf(out, n, "evt_%s", r);
}

/* A checkout of `usd` made and paid (payment `pi`); the checkout id into co. */
static void
paid_checkout(struct sfx *s, int usd, const char *pi, char *co, size_t n)
{
	struct pay_checkout c;
	char body[1024], id[32], r[13];
	struct err e;
	int credited;

	assert_int_equal(key_random_base36(r, sizeof(r) - 1), 0);
	snprintf(co, n, "cs_test_%s", r);
	memset(&c, 0, sizeof(c));
	snprintf(c.id, sizeof(c.id), "%s", co);
	err_clear(&e);
	assert_int_equal(pay_checkout_made(s->app->db, &pay_stripe, s->account, &c, usd * USD, &e),
	    0);
	event_id(id, sizeof(id));
	snprintf(body, sizeof(body),
	    "{\"id\":\"%s\",\"type\":\"checkout.session.completed\",\"data\":{\"object\":"
	    "{\"id\":\"%s\",\"payment_status\":\"paid\",\"currency\":\"usd\",\"amount_total\":%d,"
	    "\"payment_intent\":\"%s\",\"metadata\":{\"account_id\":\"%s\"}}}}",
	    id, co, usd * 100, pi, s->account);
	deliver(s, body, &credited);
	assert_int_equal(credited, 1);
}

static void
refund_event(char *body, size_t n, const char *id, const char *pi, int cents)
{
	snprintf(body, n,
	    "{\"id\":\"%s\",\"type\":\"charge.refunded\",\"data\":{\"object\":{\"id\":\"ch_1\","
	    "\"object\":\"charge\",\"currency\":\"usd\",\"amount\":1000,\"amount_refunded\":%d,"
	    "\"payment_intent\":\"%s\"}}}",
	    id, cents, pi);
}

static void
dispute_event(char *body, size_t n, const char *id, const char *type, const char *dp,
    const char *pi, int cents)
{
	snprintf(body, n,
	    "{\"id\":\"%s\",\"type\":\"%s\",\"data\":{\"object\":{\"id\":\"%s\",\"object\":"
	    "\"dispute\",\"currency\":\"usd\",\"amount\":%d,\"charge\":\"ch_1\","
	    "\"payment_intent\":\"%s\"}}}",
	    id, type, dp, cents, pi);
}

static void
tune(struct sfx *s)
{
	snprintf(s->app->cfg.stripe_webhook_secret, sizeof(s->app->cfg.stripe_webhook_secret), "%s",
	    SECRET);
	snprintf(s->app->cfg.stripe_secret_key, sizeof(s->app->cfg.stripe_secret_key), "sk_unit");
}

static void
pi_new(char *out, size_t n)
{
	char r[13];

	assert_int_equal(key_random_base36(r, sizeof(r) - 1), 0);
	snprintf(out, n, "pi_%s", r);
}

static void
test_refunds_take_back_once(void **state)
{
	struct sfx *s = *state;
	char pi[32], co[64], body[1024], id[32], id2[32];
	long long start;
	int credited;

	tune(s);
	start = balance(s);
	pi_new(pi, sizeof(pi));
	paid_checkout(s, 10, pi, co, sizeof(co));
	assert_int_equal(balance(s), start + 10 * USD);
	/* A partial refund of $3, delivered twice: taken once. */
	event_id(id, sizeof(id));
	refund_event(body, sizeof(body), id, pi, 300);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start + 7 * USD);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start + 7 * USD);
	/* Then in full: Stripe says $10 refunded in all, $7 of it new. */
	event_id(id2, sizeof(id2));
	refund_event(body, sizeof(body), id2, pi, 1000);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start);
	/* An older delivery arriving late moves nothing. */
	event_id(id, sizeof(id));
	refund_event(body, sizeof(body), id, pi, 300);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM ledger WHERE account_id = $1 AND kind = "
			     "'adjustment' AND amount < 0",
			     s->account),
	    2);
	/* A refund of a payment this service never credited moves nothing. */
	event_id(id, sizeof(id));
	refund_event(body, sizeof(body), id, "pi_elsewhere", 1000);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start);
}

static int
spend_tx(PGconn *c, void *arg, struct err *e)
{
	struct sfx *s = arg;
	char key[64];
	int64_t bal;
	int posted;

	snprintf(key, sizeof(key), "test:spend:%s", s->account);
	if (bill_lock_balance(c, s->account, &bal, e) < 0)
		return -1;
	return bill_post(c, s->account, NULL, "charge", -(bal - USD), 1, "spent in a test", key,
	    NULL, &posted, e);
}

static void
test_refund_beyond_balance_is_owed(void **state)
{
	struct sfx *s = *state;
	char pi[32], co[64], body[1024], id[32];
	struct err e;
	int credited;

	tune(s);
	pi_new(pi, sizeof(pi));
	paid_checkout(s, 10, pi, co, sizeof(co));
	err_clear(&e);
	assert_int_equal(db_tx(s->app->db, spend_tx, s, &e), 0); /* $1 left */
	assert_int_equal(balance(s), USD);
	event_id(id, sizeof(id));
	refund_event(body, sizeof(body), id, pi, 1000);
	deliver(s, body, &credited);
	/* $1 from the balance, $9 owed, the account disabled; never below zero. */
	assert_int_equal(balance(s), 0);
	assert_int_equal(sfx_ll(s, "SELECT payment_debt FROM accounts WHERE id = $1", s->account),
	    9 * USD);
	assert_int_equal(
	    sfx_ll(s, "SELECT count(*) FROM accounts WHERE id = $1 AND disabled_at IS NOT NULL",
		s->account),
	    1);
	assert_int_equal(sfx_ll(s,
			     "SELECT count(*) FROM ledger WHERE account_id = $1 AND amount = 0 AND "
			     "strpos(reason, '$9.000000 more than the balance is owed') > 0",
			     s->account),
	    1);
	deliver(s, body, &credited);
	assert_int_equal(sfx_ll(s, "SELECT payment_debt FROM accounts WHERE id = $1", s->account),
	    9 * USD);
}

static void
test_dispute_and_reinstatement(void **state)
{
	struct sfx *s = *state;
	char pi[32], co[64], body[1024], id[32], dp[32];
	long long start;
	int credited;

	tune(s);
	start = balance(s);
	pi_new(pi, sizeof(pi));
	snprintf(dp, sizeof(dp), "dp_%s", pi + 3);
	paid_checkout(s, 5, pi, co, sizeof(co));
	event_id(id, sizeof(id));
	dispute_event(body, sizeof(body), id, "charge.dispute.created", dp, pi, 500);
	deliver(s, body, &credited);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start);
	/* Its funds withdrawn: the same dispute, nothing more. */
	event_id(id, sizeof(id));
	dispute_event(body, sizeof(body), id, "charge.dispute.funds_withdrawn", dp, pi, 500);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start);
	/* Won: given back once. */
	event_id(id, sizeof(id));
	dispute_event(body, sizeof(body), id, "charge.dispute.funds_reinstated", dp, pi, 500);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start + 5 * USD);
	event_id(id, sizeof(id));
	dispute_event(body, sizeof(body), id, "charge.dispute.funds_reinstated", dp, pi, 500);
	deliver(s, body, &credited);
	assert_int_equal(balance(s), start + 5 * USD);
}

static void
test_checkouts_bounded(void **state)
{
	struct sfx *s = *state;
	struct pay_checkout c;
	struct err e;
	char pi[32], co[64];

	tune(s);
	s->app->cfg.checkouts_per_hour = 4;
	s->app->cfg.checkouts_open = 2;
	for (int i = 0; i < 2; i++) {
		err_clear(&e);
		assert_int_equal(pay_checkout_allowed(s->app->db, &s->app->cfg, s->account, &e), 0);
		memset(&c, 0, sizeof(c));
		snprintf(c.id, sizeof(c.id), "cs_open_%d_%s", i, s->account);
		assert_int_equal(pay_checkout_made(s->app->db, &pay_stripe, s->account, &c, USD,
				     &e),
		    0);
	}
	/* Two open: no third until one is paid. */
	err_clear(&e);
	assert_int_equal(pay_checkout_allowed(s->app->db, &s->app->cfg, s->account, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	assert_non_null(strstr(e.msg, "open"));
	/* Paid ones are not open; the hourly bound still holds. */
	pi_new(pi, sizeof(pi));
	paid_checkout(s, 1, pi, co, sizeof(co));
	pi_new(pi, sizeof(pi));
	paid_checkout(s, 1, pi, co, sizeof(co));
	assert_int_equal(
	    sfx_ll(s,
		"WITH u AS (UPDATE payment_checkouts SET paid_at = now() WHERE "
		"account_id = $1 AND paid_at IS NULL RETURNING 1) SELECT count(*) FROM u",
		s->account),
	    2);
	for (int i = 0; i < 2; i++) {
		err_clear(&e);
		assert_int_equal(pay_checkout_allowed(s->app->db, &s->app->cfg, s->account, &e), 0);
	}
	err_clear(&e);
	assert_int_equal(pay_checkout_allowed(s->app->db, &s->app->cfg, s->account, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	assert_non_null(strstr(e.msg, "Try again in"));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, sfx_setup, sfx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_refunds_take_back_once),
		T(test_refund_beyond_balance_is_owed),
		T(test_dispute_and_reinstatement),
		T(test_checkouts_bounded),
	};

	return cmocka_run_group_tests(tests, sfx_group_setup, sfx_group_teardown);
}
