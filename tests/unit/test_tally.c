/* test_tally.c - the capped per-name counts behind the stream limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/tally.h"

static void
test_cap_per_name(void **state)
{
	struct tally *t = tally_new(16);
	const char *names[2] = { "s:one", "a:acct" };
	const long limits[2] = { 2, 3 };
	size_t which = 99;

	(void)state;
	assert_non_null(t);
	assert_int_equal(tally_take(t, names, limits, 2, &which), 0);
	assert_int_equal(tally_take(t, names, limits, 2, &which), 0);
	/* The session is full: nothing is taken, the account keeps 2. */
	assert_int_equal(tally_take(t, names, limits, 2, &which), -1);
	assert_int_equal(which, 0);
	assert_int_equal(tally_count(t, "s:one"), 2);
	assert_int_equal(tally_count(t, "a:acct"), 2);
	/* Another session of the account: one more, then the account is full. */
	const char *other[2] = { "s:two", "a:acct" };
	assert_int_equal(tally_take(t, other, limits, 2, &which), 0);
	assert_int_equal(tally_take(t, other, limits, 2, &which), -1);
	assert_int_equal(which, 1);
	assert_int_equal(tally_count(t, "s:two"), 1);
	/* A unit given back frees the slot. */
	tally_give(t, names, 2);
	assert_int_equal(tally_count(t, "s:one"), 1);
	assert_int_equal(tally_take(t, other, limits, 2, &which), 0);
	assert_int_equal(tally_count(t, "a:acct"), 3);
	tally_free(t);
}

static void
test_names_leave_at_zero(void **state)
{
	struct tally *t = tally_new(4);
	const char *n1[1] = { "x" };
	const long lim[1] = { 5 };
	size_t which;

	(void)state;
	assert_int_equal(tally_take(t, n1, lim, 1, &which), 0);
	assert_int_equal(tally_names(t), 1);
	tally_give(t, n1, 1);
	assert_int_equal(tally_names(t), 0);
	assert_int_equal(tally_count(t, "x"), 0);
	/* Giving back what was never taken changes nothing. */
	tally_give(t, n1, 1);
	assert_int_equal(tally_names(t), 0);
	tally_free(t);
	tally_free(NULL);
}

static void
test_table_full(void **state)
{
	struct tally *t = tally_new(3);
	const long lim[2] = { 10, 10 };
	char a[16], b[16];
	const char *names[2] = { a, b };
	size_t which;

	(void)state;
	snprintf(a, sizeof(a), "n0");
	snprintf(b, sizeof(b), "n1");
	assert_int_equal(tally_take(t, names, lim, 2, &which), 0);
	/* One new name fits, two do not: all or nothing. */
	snprintf(a, sizeof(a), "n2");
	snprintf(b, sizeof(b), "n3");
	assert_int_equal(tally_take(t, names, lim, 2, &which), -1);
	assert_int_equal(which, 2);
	assert_int_equal(tally_names(t), 2);
	snprintf(b, sizeof(b), "n0");
	assert_int_equal(tally_take(t, names, lim, 2, &which), 0);
	assert_int_equal(tally_names(t), 3);
	/* A name longer than the limit is refused, never truncated. */
	char longname[TALLY_NAME_MAX + 2];
	memset(longname, 'z', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	const char *ln[1] = { longname };
	assert_int_equal(tally_take(t, ln, lim, 1, &which), -1);
	assert_int_equal(which, 1);
	tally_free(t);
}

/* Many names through few home slots: every count survives the removals
 * that shift probe runs back. */
static void
test_many_names_churn(void **state)
{
	enum { N = 200 };
	struct tally *t = tally_new(N);
	const long lim[1] = { 1000 };
	char name[32];
	const char *names[1] = { name };
	size_t which;

	(void)state;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		for (int j = 0; j <= i % 3; j++)
			assert_int_equal(tally_take(t, names, lim, 1, &which), 0);
	}
	assert_int_equal(tally_names(t), N);
	/* Remove every other name entirely. */
	for (int i = 0; i < N; i += 2) {
		snprintf(name, sizeof(name), "k%d", i);
		for (int j = 0; j <= i % 3; j++)
			tally_give(t, names, 1);
	}
	assert_int_equal(tally_names(t), N / 2);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		assert_int_equal(tally_count(t, name), i % 2 ? i % 3 + 1 : 0);
	}
	tally_free(t);
}

/* The preview proxy's use: a request counts under its sandbox ("s:") and
 * its account ("a:"), all or nothing, the sandbox checked first. */
static size_t
admit(struct tally *t, const char *sandbox, const char *account, long scap, long acap)
{
	char s[TALLY_NAME_MAX + 1], a[TALLY_NAME_MAX + 1];
	const long limits[2] = { scap, acap };
	size_t which = 0;

	snprintf(s, sizeof(s), "s:%s", sandbox);
	snprintf(a, sizeof(a), "a:%s", account);
	return tally_take(t, (const char *const[]){ s, a }, limits, 2, &which) == 0 ? 3 : which;
}

static void
test_sandbox_and_account_caps(void **state)
{
	struct tally *t = tally_new(32);
	const char *const rel[2] = { "s:sbx-1", "a:acct" };

	(void)state;
	/* Sandbox cap 2, account cap 3: two sandboxes of one account. */
	assert_int_equal(admit(t, "sbx-1", "acct", 2, 3), 3);
	assert_int_equal(admit(t, "sbx-1", "acct", 2, 3), 3);
	assert_int_equal(admit(t, "sbx-1", "acct", 2, 3), 0); /* the sandbox's cap */
	assert_int_equal(admit(t, "sbx-2", "acct", 2, 3), 3);
	assert_int_equal(admit(t, "sbx-2", "acct", 2, 3), 1); /* the account's cap */
	/* Refused requests took nothing. */
	assert_int_equal(tally_count(t, "s:sbx-2"), 1);
	assert_int_equal(tally_count(t, "a:acct"), 3);
	/* Another account is not affected. */
	assert_int_equal(admit(t, "sbx-3", "other", 2, 3), 3);
	tally_give(t, rel, 2);
	assert_int_equal(admit(t, "sbx-2", "acct", 2, 3), 3);
	assert_int_equal(tally_count(t, "a:acct"), 3);
	tally_free(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cap_per_name),
		cmocka_unit_test(test_names_leave_at_zero),
		cmocka_unit_test(test_table_full),
		cmocka_unit_test(test_many_names_churn),
		cmocka_unit_test(test_sandbox_and_account_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
