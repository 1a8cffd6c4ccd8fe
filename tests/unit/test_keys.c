/* test_keys.c - API key generation, shape checks, hashing and random hex
 * (server/keys.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/keys.h"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void
test_generate_format(void **state)
{
	char key[KEY_TEXT_LEN + 1];

	(void)state;
	assert_int_equal(KEY_TEXT_LEN, 50);
	for (int round = 0; round < 50; round++) {
		memset(key, 'X', sizeof(key));
		assert_int_equal(key_generate(key, sizeof(key)), 0);
		assert_int_equal(strlen(key), KEY_TEXT_LEN);
		assert_memory_equal(key, "aas_sk_", 7);
		for (size_t i = 7; i < KEY_TEXT_LEN; i++)
			if (key[i] == '\0' || strchr(b64url, key[i]) == NULL)
				fail_msg("character %zu of %s is not base64url", i, key);
		/* 32 bytes = 256 bits: the 43rd character carries 4 data bits
		 * and 2 zero padding bits, so its index is a multiple of 4. */
		size_t last = (size_t)(strchr(b64url, key[KEY_TEXT_LEN - 1]) - b64url);
		assert_int_equal(last % 4, 0);
		assert_true(key_well_formed(key, strlen(key)));
	}
}

static void
test_generate_distinct(void **state)
{
	enum { N = 64 };
	char keys[N][KEY_TEXT_LEN + 1];

	(void)state;
	for (int i = 0; i < N; i++)
		assert_int_equal(key_generate(keys[i], sizeof(keys[i])), 0);
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			assert_string_not_equal(keys[i], keys[j]);
}

static void
test_generate_small_buffer(void **state)
{
	char key[KEY_TEXT_LEN + 1];

	(void)state;
	memset(key, 'Q', sizeof(key));
	assert_int_equal(key_generate(key, KEY_TEXT_LEN), -1);
	assert_int_equal(key_generate(key, 0), -1);
	/* Nothing was written. */
	for (size_t i = 0; i < sizeof(key); i++)
		assert_int_equal(key[i], 'Q');
}

static void
test_well_formed(void **state)
{
	char good[KEY_TEXT_LEN + 1];
	char buf[KEY_TEXT_LEN + 2];

	(void)state;
	assert_int_equal(key_generate(good, sizeof(good)), 0);
	assert_true(key_well_formed(good, KEY_TEXT_LEN));
	/* A hand-written key of the right shape. */
	static const char hand[] = "aas_sk_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn-_0";
	assert_int_equal(strlen(hand), KEY_TEXT_LEN);
	assert_true(key_well_formed(hand, strlen(hand)));

	/* Wrong prefix. */
	static const char *const prefixes[] = { "aas_pk_", "AAS_SK_", "aas-sk_", "aas_sk-",
		"sk_aas_", "xas_sk_" };
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		memcpy(buf, good, sizeof(good));
		memcpy(buf, prefixes[i], 7);
		if (key_well_formed(buf, KEY_TEXT_LEN))
			fail_msg("prefix %s accepted", prefixes[i]);
	}

	/* Wrong length: the length argument is what counts. */
	assert_false(key_well_formed(good, KEY_TEXT_LEN - 1));
	memcpy(buf, good, KEY_TEXT_LEN);
	buf[KEY_TEXT_LEN] = 'A';
	buf[KEY_TEXT_LEN + 1] = '\0';
	assert_false(key_well_formed(buf, KEY_TEXT_LEN + 1));
	assert_false(key_well_formed("aas_sk_", 7));
	assert_false(key_well_formed("", 0));

	/* Wrong alphabet at the start, middle and end of the random part. */
	static const char badch[] = { '+', '/', '=', '.', ' ', '~', '\t', '\x80', '\xff', '\0' };
	static const size_t pos[] = { 7, 25, KEY_TEXT_LEN - 1 };
	for (size_t c = 0; c < sizeof(badch); c++) {
		for (size_t p = 0; p < sizeof(pos) / sizeof(pos[0]); p++) {
			memcpy(buf, good, sizeof(good));
			buf[pos[p]] = badch[c];
			if (key_well_formed(buf, KEY_TEXT_LEN))
				fail_msg("char 0x%02x at %zu accepted", (unsigned char)badch[c],
				    pos[p]);
		}
	}
}

static void
test_hash_vectors(void **state)
{
	char out[KEY_HASH_HEX_LEN + 1];

	(void)state;
	key_hash_hex("abc", 3, out, sizeof(out));
	assert_string_equal(out,
	    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	key_hash_hex("", 0, out, sizeof(out));
	assert_string_equal(out,
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	/* keylen, not the terminator, bounds the input. */
	key_hash_hex("abcdef", 3, out, sizeof(out));
	assert_string_equal(out,
	    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	key_hash_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, out,
	    sizeof(out));
	assert_string_equal(out,
	    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* Bytes after a NUL are hashed too when keylen says so. */
	char with_nul[KEY_HASH_HEX_LEN + 1];
	key_hash_hex("abc\0d", 5, with_nul, sizeof(with_nul));
	assert_string_not_equal(with_nul, out);
	assert_int_equal(strlen(with_nul), KEY_HASH_HEX_LEN);
}

static void
test_hash_small_buffer(void **state)
{
	char out[KEY_HASH_HEX_LEN + 1];

	(void)state;
	memset(out, 'Z', sizeof(out));
	key_hash_hex("abc", 3, out, KEY_HASH_HEX_LEN);
	assert_int_equal(out[0], '\0');
	assert_int_equal(out[1], 'Z');
	memset(out, 'Z', sizeof(out));
	key_hash_hex("abc", 3, out, 0);
	assert_int_equal(out[0], 'Z');
}

static void
test_hash_equal(void **state)
{
	char a[KEY_HASH_HEX_LEN + 1], b[KEY_HASH_HEX_LEN + 1];
	char longer[KEY_HASH_HEX_LEN + 2];

	(void)state;
	key_hash_hex("aas_sk_one", 10, a, sizeof(a));
	key_hash_hex("aas_sk_one", 10, b, sizeof(b));
	assert_true(key_hash_equal(a, b));
	assert_true(key_hash_equal(a, a));

	key_hash_hex("aas_sk_two", 10, b, sizeof(b));
	assert_false(key_hash_equal(a, b));

	/* Differing only in the first or the last character. */
	memcpy(b, a, sizeof(a));
	b[0] = b[0] == '0' ? '1' : '0';
	assert_false(key_hash_equal(a, b));
	memcpy(b, a, sizeof(a));
	b[KEY_HASH_HEX_LEN - 1] = b[KEY_HASH_HEX_LEN - 1] == '0' ? '1' : '0';
	assert_false(key_hash_equal(a, b));

	/* Wrong lengths are never equal, not even to themselves. */
	memcpy(b, a, sizeof(a));
	b[KEY_HASH_HEX_LEN - 1] = '\0';
	assert_false(key_hash_equal(a, b));
	assert_false(key_hash_equal(b, a));
	assert_false(key_hash_equal(b, b));
	memcpy(longer, a, KEY_HASH_HEX_LEN);
	longer[KEY_HASH_HEX_LEN] = '0';
	longer[KEY_HASH_HEX_LEN + 1] = '\0';
	assert_false(key_hash_equal(a, longer));
	assert_false(key_hash_equal(longer, longer));
	assert_false(key_hash_equal("", ""));
	assert_false(key_hash_equal("abc", "abc"));
}

static void
test_random_hex(void **state)
{
	char a[129], b[129];

	(void)state;
	memset(a, 'X', sizeof(a));
	assert_int_equal(key_random_hex(a, 33, 16), 0);
	assert_int_equal(strlen(a), 32);
	for (size_t i = 0; i < 32; i++)
		if (strchr("0123456789abcdef", a[i]) == NULL || a[i] == '\0')
			fail_msg("non-hex character 0x%02x at %zu", (unsigned char)a[i], i);
	assert_int_equal(a[33], 'X');

	assert_int_equal(key_random_hex(b, sizeof(b), 16), 0);
	assert_string_not_equal(a, b);

	/* The largest supported request: 64 bytes. */
	assert_int_equal(key_random_hex(a, sizeof(a), 64), 0);
	assert_int_equal(strlen(a), 128);
	assert_int_equal(key_random_hex(a, 1, 0), 0);
	assert_string_equal(a, "");
}

static void
test_random_hex_refuses(void **state)
{
	char a[200];

	(void)state;
	memset(a, 'X', sizeof(a));
	/* One byte short of nbytes*2+1. */
	assert_int_equal(key_random_hex(a, 32, 16), -1);
	assert_int_equal(key_random_hex(a, 0, 1), -1);
	assert_int_equal(key_random_hex(a, 2, 1), -1);
	/* More than the internal 64-byte limit, even with room. */
	assert_int_equal(key_random_hex(a, sizeof(a), 65), -1);
	for (size_t i = 0; i < sizeof(a); i++)
		assert_int_equal(a[i], 'X');
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_generate_format),
		cmocka_unit_test(test_generate_distinct),
		cmocka_unit_test(test_generate_small_buffer),
		cmocka_unit_test(test_well_formed),
		cmocka_unit_test(test_hash_vectors),
		cmocka_unit_test(test_hash_small_buffer),
		cmocka_unit_test(test_hash_equal),
		cmocka_unit_test(test_random_hex),
		cmocka_unit_test(test_random_hex_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
