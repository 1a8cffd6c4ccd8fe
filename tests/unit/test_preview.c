/* test_preview.c - preview host names and signed URLs (sandbox/preview.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sandbox/preview.h"

static void
test_host_names(void **state)
{
	char label[64], id[40];
	int port = 0;

	(void)state;
	assert_int_equal(preview_under_domain("8000-sbx-abc.localhost:8080", "localhost:8080",
			     label, sizeof(label)),
	    1);
	assert_string_equal(label, "8000-sbx-abc");
	assert_int_equal(preview_parse_label(label, &port, id, sizeof(id)), 0);
	assert_int_equal(port, 8000);
	assert_string_equal(id, "sbx-abc");
	/* Case folds; the API host itself and other hosts are not previews. */
	assert_int_equal(preview_under_domain("8000-SBX-ABC.LocalHost:8080", "localhost:8080",
			     label, sizeof(label)),
	    1);
	assert_string_equal(label, "8000-sbx-abc");
	assert_int_equal(preview_under_domain("localhost:8080", "localhost:8080", label,
			     sizeof(label)),
	    0);
	assert_int_equal(preview_under_domain("127.0.0.1:8080", "localhost:8080", label,
			     sizeof(label)),
	    0);
	assert_int_equal(preview_under_domain("xlocalhost:8080", "localhost:8080", label,
			     sizeof(label)),
	    0);
	assert_int_equal(preview_under_domain("8000-a.localhost:9090", "localhost:8080", label,
			     sizeof(label)),
	    0);
	assert_int_equal(preview_under_domain(NULL, "localhost:8080", label, sizeof(label)), 0);
	/* Deeper names are under the domain but name no port. */
	assert_int_equal(preview_under_domain("a.8000-x.localhost:8080", "localhost:8080", label,
			     sizeof(label)),
	    1);
	assert_string_equal(label, "");
	/* Labels that are not <port>-<id>. */
	const char *bad[] = { "", "sbx-abc", "0-sbx", "08000-sbx", "65536-sbx", "80a-sbx", "8000-",
		"8000-sbx_abc", "123456-sbx", "8000-sbx.x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (preview_parse_label(bad[i], &port, id, sizeof(id)) == 0)
			fail_msg("accepted label '%s'", bad[i]);
	assert_int_equal(preview_parse_label("65535-s", &port, id, sizeof(id)), 0);
	assert_int_equal(port, 65535);
}

static void
test_urls_and_signatures(void **state)
{
	char url[128], sig[65], exp[16];
	const char *hash = "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b";

	(void)state;
	assert_int_equal(preview_url("https", "preview.example.com", "sbx-a", 3000, url,
			     sizeof(url)),
	    0);
	assert_string_equal(url, "https://3000-sbx-a.preview.example.com/");
	assert_int_equal(preview_url("http", "d", "sbx-a", 3000, url, 10), -1);
	assert_int_equal(preview_sign(hash, "sbx-a", 3000, 2000000000LL, sig, sizeof(sig)), 0);
	assert_int_equal(strlen(sig), 64);
	assert_true(preview_sig_valid(hash, "sbx-a", 3000, "2000000000", sig, 1000));
	/* Another port, sandbox, expiry or key does not verify. */
	assert_false(preview_sig_valid(hash, "sbx-a", 3001, "2000000000", sig, 1000));
	assert_false(preview_sig_valid(hash, "sbx-b", 3000, "2000000000", sig, 1000));
	assert_false(preview_sig_valid(hash, "sbx-a", 3000, "2000000001", sig, 1000));
	assert_false(preview_sig_valid("00", "sbx-a", 3000, "2000000000", sig, 1000));
	/* Expired, malformed. */
	assert_false(preview_sig_valid(hash, "sbx-a", 3000, "2000000000", sig, 2000000001));
	assert_false(preview_sig_valid(hash, "sbx-a", 3000, "2e9", sig, 1000));
	assert_false(preview_sig_valid(hash, "sbx-a", 3000, "2000000000", "abc", 1000));
	assert_false(preview_sig_valid(hash, "sbx-a", 3000, NULL, sig, 1000));
	snprintf(exp, sizeof(exp), "%d", 5);
	assert_int_equal(preview_sign(hash, "sbx-a", 1, 5, sig, sizeof(sig)), 0);
	assert_true(preview_sig_valid(hash, "sbx-a", 1, exp, sig, 5));
}

static void
test_query_and_cookie(void **state)
{
	char v[80], q[128];

	(void)state;
	assert_true(preview_query_get("a=1&aas_preview_exp=123&aas_preview_sig=ff",
	    "aas_preview_exp", v, sizeof(v)));
	assert_string_equal(v, "123");
	assert_false(preview_query_get("xaas_preview_exp=1", "aas_preview_exp", v, sizeof(v)));
	assert_false(preview_query_get(NULL, "a", v, sizeof(v)));
	preview_query_strip("a=1&aas_preview_exp=123&b=2&aas_preview_sig=ff", q, sizeof(q));
	assert_string_equal(q, "a=1&b=2");
	preview_query_strip("aas_preview_exp=1&aas_preview_sig=2", q, sizeof(q));
	assert_string_equal(q, "");
	assert_true(preview_cookie_get("x=1; aas_preview=12.ab; y=2", "aas_preview", v, sizeof(v)));
	assert_string_equal(v, "12.ab");
	assert_false(preview_cookie_get("aas_previewx=1", "aas_preview", v, sizeof(v)));
}

static void
test_cookie_names_and_values(void **state)
{
	char v[256];
	const char *pos = NULL;
	const char *hdr = "aas_preview=1.bad; x=2; aas_preview=2.good; aas_preview=toolong_value";

	(void)state;
	assert_string_equal(preview_cookie_name("https"), "__Host-aas_preview");
	assert_string_equal(preview_cookie_name("http"), "aas_preview");
	/* Every cookie of the name in turn, so one cannot shadow another. */
	assert_true(preview_cookie_next(hdr, "aas_preview", &pos, v, 8));
	assert_string_equal(v, "1.bad");
	assert_true(preview_cookie_next(hdr, "aas_preview", &pos, v, 8));
	assert_string_equal(v, "2.good");
	assert_false(preview_cookie_next(hdr, "aas_preview", &pos, v, 8));
	pos = NULL;
	assert_false(preview_cookie_next("aas_preview=1", "__Host-aas_preview", &pos, v, 8));

	assert_int_equal(preview_cookie_value("https", "123", "ab", 60, v, sizeof(v)), 0);
	assert_string_equal(v,
	    "__Host-aas_preview=123.ab; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure");
	assert_null(strstr(v, "Domain"));
	assert_int_equal(preview_cookie_value("http", "123", "ab", 60, v, sizeof(v)), 0);
	assert_string_equal(v, "aas_preview=123.ab; Path=/; Max-Age=60; HttpOnly; SameSite=Lax");
	assert_int_equal(preview_cookie_value("https", "123", "ab", 60, v, 20), -1);
}

static void
test_set_cookie_strip_domain(void **state)
{
	char v[256];

	(void)state;
	assert_int_equal(preview_set_cookie_strip_domain("x=1; Domain=preview.test; Path=/", v,
			     sizeof(v)),
	    0);
	assert_string_equal(v, "x=1; Path=/");
	assert_int_equal(preview_set_cookie_strip_domain("x=1;domain=.a.b;  DOMAIN = c ;HttpOnly",
			     v, sizeof(v)),
	    0);
	assert_string_equal(v, "x=1;HttpOnly");
	/* A bare Domain attribute goes too; other names and the value stay. */
	assert_int_equal(preview_set_cookie_strip_domain("domain=1; Domain; Domains=x", v,
			     sizeof(v)),
	    0);
	assert_string_equal(v, "domain=1; Domains=x");
	assert_int_equal(preview_set_cookie_strip_domain("x=1", v, sizeof(v)), 0);
	assert_string_equal(v, "x=1");
	assert_int_equal(preview_set_cookie_strip_domain("", v, sizeof(v)), 0);
	assert_string_equal(v, "");
	assert_int_equal(preview_set_cookie_strip_domain("x=1; Path=/", v, 5), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_names),
		cmocka_unit_test(test_urls_and_signatures),
		cmocka_unit_test(test_query_and_cookie),
		cmocka_unit_test(test_cookie_names_and_values),
		cmocka_unit_test(test_set_cookie_strip_domain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
