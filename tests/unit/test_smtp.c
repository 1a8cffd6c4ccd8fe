/* test_smtp.c - the mail text aasd hands to an SMTP server: headers,
 * CRLF line ends, and header values that would add headers refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/smtp.h"

static void
test_format(void **state)
{
	const struct smtp_msg m = { "aas <noreply@aas.test>", "user@example.com", "Hello",
		"line one\nline two\r\n.dot line\n", 7 };
	struct buf b;
	struct err e;

	(void)state;
	buf_init(&b, SMTP_MAX_MESSAGE);
	err_clear(&e);
	assert_int_equal(smtp_format(&m, 86400, &b, &e), 0);
	assert_non_null(strstr(b.data, "From: aas <noreply@aas.test>\r\n"));
	assert_non_null(strstr(b.data, "To: user@example.com\r\n"));
	assert_non_null(strstr(b.data, "Subject: Hello\r\n"));
	assert_non_null(strstr(b.data, "Date: Fri, 02 Jan 1970 00:00:00 +0000\r\n"));
	assert_non_null(strstr(b.data, "Message-ID: <86400.7@aas.test>\r\n"));
	assert_non_null(strstr(b.data, "\r\n\r\nline one\r\nline two\r\n.dot line\r\n"));
	/* Every line ends in CRLF: no bare LF or CR is left. */
	for (size_t i = 0; i < b.len; i++) {
		if (b.data[i] == '\n')
			assert_true(i > 0 && b.data[i - 1] == '\r');
		if (b.data[i] == '\r')
			assert_true(i + 1 < b.len && b.data[i + 1] == '\n');
	}
	buf_free(&b);
}

static void
test_header_injection_refused(void **state)
{
	const char *bad[] = { "Hi\r\nBcc: x@y.z", "Hi\nBcc: x@y.z", "caf\xc3\xa9", "tab\there" };
	struct buf b;
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct smtp_msg subj = { "a@b.c", "u@example.com", bad[i], "x", 1 };
		const struct smtp_msg to = { "a@b.c", bad[i], "s", "x", 1 };

		buf_init(&b, SMTP_MAX_MESSAGE);
		err_clear(&e);
		assert_int_equal(smtp_format(&subj, 0, &b, &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
		err_clear(&e);
		assert_int_equal(smtp_format(&to, 0, &b, &e), -1);
		buf_free(&b);
	}
}

static void
test_address(void **state)
{
	char a[64];

	(void)state;
	assert_int_equal(smtp_address("aas <noreply@x.y>", a, sizeof(a)), 0);
	assert_string_equal(a, "noreply@x.y");
	assert_int_equal(smtp_address("plain@x.y", a, sizeof(a)), 0);
	assert_string_equal(a, "plain@x.y");
	assert_int_equal(smtp_address("no address", a, sizeof(a)), -1);
	assert_int_equal(smtp_address("open <a@b", a, sizeof(a)), -1);
	assert_int_equal(
	    smtp_address("x <a@bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb>",
		a, sizeof(a)),
	    -1);
}

static void
test_loopback(void **state)
{
	(void)state;
	assert_true(smtp_url_loopback("smtp://127.0.0.1:2525"));
	assert_true(smtp_url_loopback("smtp://user:pw@127.0.0.1:25"));
	assert_true(smtp_url_loopback("smtp://localhost:25"));
	assert_true(smtp_url_loopback("smtp://[::1]:25"));
	assert_false(smtp_url_loopback("smtp://mail.example.com:587"));
	assert_false(smtp_url_loopback("smtp://127.0.0.1.example.com:587"));
	assert_false(smtp_url_loopback("smtp://localhost.example.com:25"));
	assert_false(smtp_url_loopback("smtp://user:127.0.0.1@mail.example.com"));
	assert_false(smtp_url_loopback("garbage"));
}

static void
test_too_large(void **state)
{
	static char body[SMTP_MAX_MESSAGE + 10];
	const struct smtp_msg m = { "a@b.c", "u@example.com", "s", body, 1 };
	struct buf b;
	struct err e;

	(void)state;
	memset(body, 'x', sizeof(body) - 1);
	buf_init(&b, SMTP_MAX_MESSAGE);
	err_clear(&e);
	assert_int_equal(smtp_format(&m, 0, &b, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	buf_free(&b);
}

/* A recipient too long for the envelope fails before any connection,
 * never sent on cut. */
static void
test_long_recipient_refused(void **state)
{
	static char to[300];
	const struct smtp_msg m = { "a@b.c", to, "s", "x", 1 };
	struct err e;

	(void)state;
	memset(to, 'u', sizeof(to) - 1);
	memcpy(to + sizeof(to) - 13, "@example.com", 12);
	err_clear(&e);
	assert_int_equal(smtp_send("smtp://127.0.0.1:1", &m, 1, &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.msg, "mail recipient too long");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_header_injection_refused),
		cmocka_unit_test(test_address),
		cmocka_unit_test(test_too_large),
		cmocka_unit_test(test_loopback),
		cmocka_unit_test(test_long_recipient_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
