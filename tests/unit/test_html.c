/* test_html.c - HTML escaping and href checks (base/html.h): each special
 * character, text that passes unchanged, the buffer's limit, and the URLs
 * an href may and may not take. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/html.h"

/* html_escape of `in` into a fresh buffer equals `want`. */
static void
escapes_to(const char *in, const char *want)
{
	struct buf b;

	buf_init(&b, 1024);
	assert_int_equal(html_escape(&b, in), 0);
	assert_non_null(b.data);
	assert_string_equal(b.data, want);
	assert_int_equal(b.len, strlen(want));
	buf_free(&b);
}

static void
test_each_special(void **state)
{
	(void)state;
	escapes_to("&", "&amp;");
	escapes_to("<", "&lt;");
	escapes_to(">", "&gt;");
	escapes_to("\"", "&quot;");
	escapes_to("'", "&#39;");
	escapes_to("<a href=\"x\" title='y'>Tom & Jerry</a>",
	    "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;Tom &amp; Jerry&lt;/a&gt;");
	/* An entity in the input is escaped again, not kept. */
	escapes_to("&amp;", "&amp;amp;");
	escapes_to("<<>>", "&lt;&lt;&gt;&gt;");
}

static void
test_plain_passes(void **state)
{
	(void)state;
	escapes_to("", "");
	escapes_to("plain text, 100% / ok; = ? #", "plain text, 100% / ok; = ? #");
	escapes_to("Grüße, 東京, 😀", "Grüße, 東京, 😀");
	escapes_to("é<é", "é&lt;é");
	/* Other bytes are not judged here. */
	escapes_to("\t\n\x7f\xff", "\t\n\x7f\xff");
}

static void
test_null_and_empty(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b, 64);
	assert_int_equal(html_escape(&b, NULL), 0);
	assert_int_equal(html_escape(&b, ""), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(html_escape_n(&b, "ab", 0), 0);
	assert_int_equal(b.len, 0);
	buf_free(&b);
}

static void
test_escape_n(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b, 64);
	/* The length decides: a NUL passes, and nothing past n is read. */
	assert_int_equal(html_escape_n(&b, "a<b\0c&d", 7), 0);
	assert_int_equal(b.len, 14);
	assert_memory_equal(b.data, "a&lt;b\0c&amp;d", 15);
	buf_free(&b);
	buf_init(&b, 64);
	assert_int_equal(html_escape_n(&b, "x>y>z", 2), 0);
	assert_string_equal(b.data, "x&gt;");
	/* Appends after what is there. */
	assert_int_equal(html_escape(&b, "'"), 0);
	assert_string_equal(b.data, "x&gt;&#39;");
	buf_free(&b);
}

static void
test_buffer_limit(void **state)
{
	struct buf b;

	(void)state;
	/* "&lt;" is 4 bytes: exactly the maximum, then one byte over. */
	buf_init(&b, 4);
	assert_int_equal(html_escape(&b, "<"), 0);
	assert_string_equal(b.data, "&lt;");
	assert_int_equal(html_escape(&b, "x"), -1);
	assert_true(b.failed);
	/* A failed buffer stays failed, even for nothing to append. */
	assert_int_equal(html_escape(&b, ""), -1);
	assert_int_equal(html_escape(&b, "<"), -1);
	buf_free(&b);
	/* The entity itself does not fit. */
	buf_init(&b, 3);
	assert_int_equal(html_escape(&b, "ab&"), -1);
	buf_free(&b);
}

static void
test_url_ok(void **state)
{
	static const char *const good[] = {
		"/",
		"/ok",
		"/account/keys?x=1&y=2#top",
		"/caf%C3%A9",
		"/café",
		"http://example.com",
		"https://example.com/a/b?c=d",
		"HTTPS://example.com/",
		"https://example.com:8443/x",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(html_attr_url_ok(good[i]), 1);
}

static void
test_url_refused(void **state)
{
	/* One case a line: each comment belongs to its own case. */
	/* clang-format off */
	static const char *const bad[] = {
		"",
		"javascript:alert(1)",
		"JavaScript:alert(1)",
		" javascript:alert(1)",   /* a leading space */
		"data:text/html,<b>x</b>",
		"vbscript:x",
		"//evil.example",          /* another host */
		"/\\evil.example",         /* the same to a browser */
		"ok",                      /* relative: not allowed */
		"./ok",
		"ftp://example.com",
		"http:/example.com",
		"https:example.com",
		"mailto:a@example.com",
		"/a b",                    /* space */
		"/a\"onmouseover=x",       /* quotes */
		"/a'x",
		"/a`x",
		"/a<x",
		"/a>x",
		"/a\\x",
		"/a\tx",                   /* controls */
		"/a\nx",
		"/a\rx",
		"/a\x7fx",
		"https://ex\x01mple.com",
		"http://example.com/\"><script>",
	};
	/* clang-format on */

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(html_attr_url_ok(bad[i]), 0);
	assert_int_equal(html_attr_url_ok(NULL), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_special),
		cmocka_unit_test(test_plain_passes),
		cmocka_unit_test(test_null_and_empty),
		cmocka_unit_test(test_escape_n),
		cmocka_unit_test(test_buffer_limit),
		cmocka_unit_test(test_url_ok),
		cmocka_unit_test(test_url_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
