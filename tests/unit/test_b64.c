/* test_b64.c - base64 (base/b64.h): the RFC 4648 vectors both ways, every
 * byte value, and the texts the decoder must refuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/b64.h"

/* Decodes `text` with room for `cap` bytes; the error kind, or ERR_NONE. */
static enum err_kind
decode(const char *text, size_t cap, unsigned char *out, size_t *n)
{
	struct err e;

	err_clear(&e);
	if (b64_decode(text, strlen(text), out, cap, n, &e) == 0) {
		assert_int_equal(e.kind, ERR_NONE);
		return ERR_NONE;
	}
	assert_int_not_equal(e.kind, ERR_NONE);
	assert_true(e.msg[0] != '\0');
	return e.kind;
}

static void
round_trip(const char *raw, size_t n, const char *want)
{
	char *enc = b64_encode(raw, n);
	unsigned char out[64];
	size_t m = 99;

	assert_non_null(enc);
	assert_string_equal(enc, want);
	assert_int_equal(strlen(enc), B64_ENCODED_LEN(n));
	assert_int_equal(decode(enc, sizeof(out), out, &m), ERR_NONE);
	assert_int_equal(m, n);
	assert_memory_equal(out, raw, n);
	free(enc);
}

/* RFC 4648 section 10, and bytes outside ASCII. */
static void
test_rfc4648_vectors(void **state)
{
	(void)state;
	round_trip("", 0, "");
	round_trip("f", 1, "Zg==");
	round_trip("fo", 2, "Zm8=");
	round_trip("foo", 3, "Zm9v");
	round_trip("foob", 4, "Zm9vYg==");
	round_trip("fooba", 5, "Zm9vYmE=");
	round_trip("foobar", 6, "Zm9vYmFy");
	round_trip("\0\xff\x10z", 4, "AP8Qeg==");
	round_trip("\xfb\xff", 2, "+/8=");
}

static void
test_every_byte_value(void **state)
{
	unsigned char raw[256], back[256];
	size_t n;
	char *enc;

	(void)state;
	for (int i = 0; i < 256; i++)
		raw[i] = (unsigned char)i;
	/* Every length mod 3, so every padding, with every letter in it. */
	for (size_t len = 250; len <= 256; len++) {
		enc = b64_encode(raw, len);
		assert_non_null(enc);
		assert_int_equal(decode(enc, len, back, &n), ERR_NONE);
		assert_int_equal(n, len);
		assert_memory_equal(back, raw, len);
		free(enc);
	}
}

static void
test_bad_characters(void **state)
{
	unsigned char out[16];
	size_t n;
	struct err e;
	/* One case a line: each comment belongs to its own case. */
	/* clang-format off */
	static const char *const bad[] = {
		"Zm9-",          /* base64url letters are not this alphabet */
		"Zm9_",
		"Zm9v!!!!",
		"Zm\x80v",
		"Z\0g=",         /* NUL inside (strlen stops: length 1) */
	};
	/* clang-format on */

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(decode(bad[i], sizeof(out), out, &n), ERR_INVALID);
	/* An embedded NUL counted in the length is a bad character too. */
	err_clear(&e);
	assert_int_equal(b64_decode("Z\0g=", 4, out, sizeof(out), &n, &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
}

static void
test_bad_padding(void **state)
{
	unsigned char out[16];
	size_t n;
	/* One case a line: each comment belongs to its own case. */
	/* clang-format off */
	static const char *const bad[] = {
		"Zg=",           /* not a multiple of 4 */
		"Zg",            /* padding left out */
		"Z",
		"Z===",          /* three '=' */
		"====",
		"=Zg=",
		"Zg=a",          /* '=' before a letter */
		"Zg==Zg==",      /* padding in the middle */
		"Zh==",          /* nonzero bits under "==" */
		"Zm9=",          /* nonzero bits under "=" */
	};
	/* clang-format on */

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(decode(bad[i], sizeof(out), out, &n), ERR_INVALID);
}

/* Neither the guest agent nor a JSON client breaks lines: whitespace
 * anywhere is refused, whatever the length comes to. */
static void
test_whitespace_refused(void **state)
{
	unsigned char out[16];
	size_t n;
	static const char *const bad[] = {
		"Zm9v\n",
		"Zm9v\r\n",
		" Zm9",
		"Zm 9",
		"Zm9v\nYmFy",
		"Zm9v\tYmF",
		"Zm9v    ",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(decode(bad[i], sizeof(out), out, &n), ERR_INVALID);
}

static void
test_output_too_small(void **state)
{
	unsigned char out[8];
	size_t n = 99;

	(void)state;
	memset(out, 0xaa, sizeof(out));
	/* Exactly the room needed, counting the padding. */
	assert_int_equal(decode("Zm9vYg==", 4, out, &n), ERR_NONE);
	assert_int_equal(n, 4);
	assert_memory_equal(out, "foob", 4);
	assert_int_equal(out[4], 0xaa);
	/* One byte short: nothing written, nothing set. */
	memset(out, 0xaa, sizeof(out));
	n = 99;
	assert_int_equal(decode("Zm9vYg==", 3, out, &n), ERR_LIMIT);
	assert_int_equal(out[0], 0xaa);
	assert_int_equal(n, 99);
	assert_int_equal(decode("Zm9vYmFy", 5, out, &n), ERR_LIMIT);
	assert_int_equal(decode("Zg==", 0, out, &n), ERR_LIMIT);
	/* Nothing to decode needs no room. */
	assert_int_equal(decode("", 0, NULL, &n), ERR_NONE);
	assert_int_equal(n, 0);
}

static void
test_encode_limit(void **state)
{
	(void)state;
	assert_null(b64_encode("x", B64_MAX_RAW + 1));
	assert_int_equal(B64_DECODED_MAX(8), 6);
	assert_int_equal(B64_ENCODED_LEN(0), 0);
	assert_int_equal(B64_ENCODED_LEN(1), 4);
	assert_int_equal(B64_ENCODED_LEN(3), 4);
	assert_int_equal(B64_ENCODED_LEN(4), 8);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc4648_vectors),
		cmocka_unit_test(test_every_byte_value),
		cmocka_unit_test(test_bad_characters),
		cmocka_unit_test(test_bad_padding),
		cmocka_unit_test(test_whitespace_refused),
		cmocka_unit_test(test_output_too_small),
		cmocka_unit_test(test_encode_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
