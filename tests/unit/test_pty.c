/* test_pty.c - terminal tickets: one use, for one sandbox and account,
 * until they expire; forged or malformed ones are refused; one account's
 * flood of tickets pushes out only its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/pty.h"
#include "server/pty_ticket.h"
#include "service/app.h"

#define ACCT "11111111-2222-3333-4444-555555555555"
#define OTHER "99999999-8888-7777-6666-555555555555"
#define SBX "sbx-one"
#define NOW 1800000000LL

static struct app app;

static int
setup(void **state)
{
	app.cfg.pty_ticket_ttl_s = 60;
	*state = pty_new(&app, &(struct err){ 0 });
	return *state ? 0 : -1;
}

static int
teardown(void **state)
{
	pty_free(*state);
	return 0;
}

static int
redeem(struct pty_hub *p, const char *t, const char *sbx, long long now, char *acct)
{
	struct err e;

	err_clear(&e);
	acct[0] = '\0';
	if (pty_ticket_redeem(p, t, sbx, now, acct, 64, &e) == 0)
		return 0;
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
	return -1;
}

static void
issue(struct pty_hub *p, char *t)
{
	struct err e;

	err_clear(&e);
	assert_int_equal(pty_ticket_issue(p, ACCT, SBX, NOW, t, &e), 0);
}

static void
test_once_for_its_account(void **state)
{
	char t[PTY_TICKET_MAX], acct[64];

	issue(*state, t);
	assert_int_equal(redeem(*state, t, SBX, NOW + 1, acct), 0);
	assert_string_equal(acct, ACCT);
	assert_int_equal(redeem(*state, t, SBX, NOW + 1, acct), -1);
}

static void
test_at_the_expiry_and_after(void **state)
{
	char t[PTY_TICKET_MAX], u[PTY_TICKET_MAX], acct[64];

	issue(*state, t);
	issue(*state, u);
	assert_int_equal(redeem(*state, t, SBX, NOW + 61, acct), -1);
	assert_int_equal(redeem(*state, u, SBX, NOW + 60, acct), 0);
}

static void
test_other_sandbox_refused(void **state)
{
	char t[PTY_TICKET_MAX], acct[64];

	issue(*state, t);
	assert_int_equal(redeem(*state, t, "sbx-two", NOW, acct), -1);
	/* A failed try does not use it up. */
	assert_int_equal(redeem(*state, t, SBX, NOW, acct), 0);
}

static void
test_forged_refused(void **state)
{
	char t[PTY_TICKET_MAX], f[PTY_TICKET_MAX + 8], acct[64];
	size_t n;
	long long exp;

	issue(*state, t);
	n = strlen(t);
	/* The mac's last digit changed. */
	snprintf(f, sizeof(f), "%s", t);
	f[n - 1] = f[n - 1] == '0' ? '1' : '0';
	assert_int_equal(redeem(*state, f, SBX, NOW, acct), -1);
	/* A later expiry with the same nonce and mac. */
	assert_int_equal(sscanf(t, "%lld", &exp), 1);
	snprintf(f, sizeof(f), "%lld%s", exp + 1000, strchr(t, '.'));
	assert_int_equal(redeem(*state, f, SBX, NOW, acct), -1);
	/* Shapes that are no ticket. */
	const char *const bad[] = { "", ".", "..", "1.2.3", "x.y.z", t + 1,
		"-1.00000000000000000000000000000000."
		"0000000000000000000000000000000000000000000000000000000000000000" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(redeem(*state, bad[i], SBX, NOW, acct), -1);
	/* The genuine one still works. */
	assert_int_equal(redeem(*state, t, SBX, NOW, acct), 0);
}

static void
test_other_process_refused(void **state)
{
	struct pty_hub *other = pty_new(&app, &(struct err){ 0 });
	char t[PTY_TICKET_MAX], acct[64];

	issue(other, t);
	assert_int_equal(redeem(*state, t, SBX, NOW, acct), -1);
	pty_free(other);
}

/* One account minting tickets in a loop pushes out only its own: another
 * account's ticket, issued before the flood, still opens its terminal. */
static void
test_flood_evicts_only_its_own(void **state)
{
	char theirs[PTY_TICKET_MAX], first[PTY_TICKET_MAX], last[PTY_TICKET_MAX], acct[64];
	struct err e;

	err_clear(&e);
	assert_int_equal(pty_ticket_issue(*state, OTHER, "sbx-theirs", NOW, theirs, &e), 0);
	issue(*state, first);
	for (int i = 0; i < 2 * PTY_TICKETS_MAX; i++)
		issue(*state, last);
	assert_int_equal(redeem(*state, theirs, "sbx-theirs", NOW + 1, acct), 0);
	assert_string_equal(acct, OTHER);
	assert_int_equal(redeem(*state, last, SBX, NOW + 1, acct), 0);
	assert_int_equal(redeem(*state, first, SBX, NOW + 1, acct), -1);
}

/* The account's share holds across its sandboxes: a flood spread over
 * many sandboxes of one account leaves its other tickets' room alone. */
static void
test_share_per_account(void **state)
{
	char theirs[PTY_TICKET_MAX], t[PTY_TICKET_MAX], sbx[32], acct[64];
	struct err e;

	err_clear(&e);
	assert_int_equal(pty_ticket_issue(*state, OTHER, "sbx-theirs", NOW, theirs, &e), 0);
	for (int i = 0; i < 2 * PTY_TICKETS_MAX; i++) {
		snprintf(sbx, sizeof(sbx), "sbx-%d", i);
		assert_int_equal(pty_ticket_issue(*state, ACCT, sbx, NOW, t, &e), 0);
	}
	assert_int_equal(redeem(*state, t, sbx, NOW + 1, acct), 0);
	assert_int_equal(redeem(*state, theirs, "sbx-theirs", NOW + 1, acct), 0);
}

/* A sandbox id longer than a ticket holds is refused whole, never cut,
 * both past the text the mac is made over and just past the table's. */
static void
test_long_sandbox_refused(void **state)
{
	char t[PTY_TICKET_MAX], sbx[300];
	struct err e;

	memset(sbx, 'x', sizeof(sbx) - 1);
	sbx[sizeof(sbx) - 1] = '\0';
	err_clear(&e);
	assert_int_equal(pty_ticket_issue(*state, ACCT, sbx, NOW, t, &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	sbx[PTK_SANDBOX_MAX + 1] = '\0';
	err_clear(&e);
	assert_int_equal(pty_ticket_issue(*state, ACCT, sbx, NOW, t, &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	sbx[PTK_SANDBOX_MAX] = '\0';
	assert_int_equal(pty_ticket_issue(*state, ACCT, sbx, NOW, t, &e), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_once_for_its_account, setup, teardown),
		cmocka_unit_test_setup_teardown(test_at_the_expiry_and_after, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_sandbox_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forged_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_process_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flood_evicts_only_its_own, setup, teardown),
		cmocka_unit_test_setup_teardown(test_share_per_account, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_sandbox_refused, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
