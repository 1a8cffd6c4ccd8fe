/* test_preview_cookie.c - a sandbox's Set-Cookie headers through the
 * preview proxy's filter (sandbox/preview_cookie.h): host-only cookies
 * pass, a cookie for the parent preview domain (cookie tossing onto every
 * other sandbox's preview) or any other domain is refused whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sandbox/preview_cookie.h"

#define HOST "8080-sbx-abc.preview.test"

static void
keeps(const char *in, const char *host, const char *want)
{
	char out[256];

	assert_int_equal(pvc_filter(in, host, out, sizeof(out)), PVC_KEEP);
	assert_string_equal(out, want);
}

static void
drops(const char *in)
{
	char out[256];

	assert_int_equal(pvc_filter(in, HOST ":8080", out, sizeof(out)), PVC_DROP);
}

static void
test_host_only_passes(void **state)
{
	(void)state;
	keeps("sid=1; Path=/; HttpOnly", HOST, "sid=1; Path=/; HttpOnly");
	/* The host's own name, with a port in Host, a leading dot or another
	 * case: the cookie stays, host-only. */
	keeps("sid=1; Domain=" HOST "; Path=/", HOST ":8080", "sid=1; Path=/");
	keeps("sid=1; domain=.8080-SBX-abc.Preview.Test", HOST, "sid=1");
	/* "domain" in the name or value, or a longer attribute name, is no
	 * Domain attribute. */
	keeps("domain=preview.test; Domains=x", HOST, "domain=preview.test; Domains=x");
}

static void
test_parent_and_others_dropped(void **state)
{
	(void)state;
	/* The parent preview domain: every other sandbox's preview would get it. */
	drops("sid=evil; Domain=preview.test; Path=/");
	drops("sid=evil; Path=/; domain=.preview.test");
	drops("sid=evil;DOMAIN = Preview.Test ;HttpOnly");
	/* A sibling preview, the registrable parent, a host that merely ends
	 * like this one, an empty or bare Domain. */
	drops("x=1; Domain=8081-sbx-abc.preview.test");
	drops("x=1; Domain=test");
	drops("x=1; Domain=x" HOST);
	drops("x=1; Domain=");
	drops("x=1; Domain");
	/* One good Domain attribute does not excuse another. */
	drops("x=1; Domain=" HOST "; Domain=preview.test");
}

static void
test_too_long(void **state)
{
	char out[5];

	(void)state;
	assert_int_equal(pvc_filter("x=1; Path=/", HOST, out, sizeof(out)), PVC_TOO_LONG);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_only_passes),
		cmocka_unit_test(test_parent_and_others_dropped),
		cmocka_unit_test(test_too_long),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
