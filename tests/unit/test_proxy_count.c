/* test_proxy_count.c - the preview proxy's per-sandbox and per-account
 * request counts (server/proxy_count.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/proxy_count.h"

static void
test_cap_and_release(void **state)
{
	struct pxc *t = pxc_new(8);

	(void)state;
	assert_non_null(t);
	assert_int_equal(pxc_take(t, "sbx-a", 2), 0);
	assert_int_equal(pxc_take(t, "sbx-a", 2), 0);
	assert_int_equal(pxc_take(t, "sbx-a", 2), 1); /* at the cap: unchanged */
	assert_int_equal(pxc_count(t, "sbx-a"), 2);
	assert_int_equal(pxc_take(t, "sbx-b", 2), 0); /* another key is not affected */
	pxc_give(t, "sbx-a");
	assert_int_equal(pxc_take(t, "sbx-a", 2), 0); /* a slot came back */
	pxc_give(t, "sbx-a");
	pxc_give(t, "sbx-a");
	assert_int_equal(pxc_count(t, "sbx-a"), 0);
	assert_int_equal(pxc_keys(t), 1); /* a key at zero is gone */
	pxc_give(t, "sbx-a");             /* giving back more than taken: no effect */
	assert_int_equal(pxc_count(t, "sbx-a"), 0);
	assert_int_equal(pxc_take(t, "", 2), -1);
	pxc_free(t);
	pxc_free(NULL);
}

static void
test_bounded(void **state)
{
	struct pxc *t = pxc_new(3);
	char key[PXC_KEY_MAX + 2];

	(void)state;
	assert_int_equal(pxc_take(t, "a", 5), 0);
	assert_int_equal(pxc_take(t, "b", 5), 0);
	assert_int_equal(pxc_take(t, "c", 5), 0);
	assert_int_equal(pxc_take(t, "d", 5), -1); /* full: max_keys keys */
	assert_int_equal(pxc_take(t, "a", 5), 0);  /* a known key still counts */
	pxc_give(t, "b");
	assert_int_equal(pxc_take(t, "d", 5), 0);
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	assert_int_equal(pxc_take(t, key, 5), -1); /* too long */
	pxc_free(t);
}

/* Many keys in and out, against a plain array: deletion keeps every
 * remaining key findable (probe runs stay whole). */
static void
test_churn(void **state)
{
	enum { N = 200 };
	struct pxc *t = pxc_new(N);
	int want[N] = { 0 };
	unsigned seed = 7;

	(void)state;
	for (int round = 0; round < 20000; round++) {
		char key[16];
		int k;

		seed = seed * 1103515245u + 12345u;
		k = (int)((seed >> 8) % N);
		snprintf(key, sizeof(key), "sbx-%d", k);
		if ((seed >> 20) & 1) {
			int rc = pxc_take(t, key, 3);
			assert_int_equal(rc, want[k] >= 3 ? 1 : 0);
			if (rc == 0)
				want[k]++;
		} else {
			pxc_give(t, key);
			if (want[k] > 0)
				want[k]--;
		}
	}
	size_t keys = 0;
	for (int k = 0; k < N; k++) {
		char key[16];
		snprintf(key, sizeof(key), "sbx-%d", k);
		assert_int_equal(pxc_count(t, key), want[k]);
		keys += want[k] > 0;
	}
	assert_int_equal(pxc_keys(t), keys);
	pxc_free(t);
}

static void
test_admit(void **state)
{
	struct pxc *s = pxc_new(16), *a = pxc_new(16);

	(void)state;
	/* Sandbox cap 2, account cap 3: two sandboxes of one account. */
	assert_int_equal(pxc_admit(s, a, "sbx-1", "acct", 2, 3), PXC_OK);
	assert_int_equal(pxc_admit(s, a, "sbx-1", "acct", 2, 3), PXC_OK);
	assert_int_equal(pxc_admit(s, a, "sbx-1", "acct", 2, 3), PXC_SANDBOX_CAP);
	assert_int_equal(pxc_admit(s, a, "sbx-2", "acct", 2, 3), PXC_OK);
	assert_int_equal(pxc_admit(s, a, "sbx-2", "acct", 2, 3), PXC_ACCOUNT_CAP);
	/* Refused requests took nothing. */
	assert_int_equal(pxc_count(s, "sbx-2"), 1);
	assert_int_equal(pxc_count(a, "acct"), 3);
	/* Another account is not affected. */
	assert_int_equal(pxc_admit(s, a, "sbx-3", "other", 2, 3), PXC_OK);
	pxc_release(s, a, "sbx-1", "acct");
	assert_int_equal(pxc_admit(s, a, "sbx-2", "acct", 2, 3), PXC_OK);
	assert_int_equal(pxc_admit(s, a, "", "acct", 2, 3), PXC_FULL);
	assert_int_equal(pxc_count(a, "acct"), 3);
	pxc_free(s);
	pxc_free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cap_and_release),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_admit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
