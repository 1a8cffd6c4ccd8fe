/* test_passwd.c - passwords (base/passwd.h): hash and verify, the encoded
 * strings verify refuses, rehash, parameter ranges, the sign-up policy
 * rule by rule, and the bound on hashes running at once. Small argon2
 * parameters keep it fast. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/passwd.h"

static const struct pw_params fast = { .t_cost = 1, .m_kib = 8192, .lanes = 1 };

static void
hash(const struct pw_params *p, const char *pw, char *out)
{
	struct err e;

	err_clear(&e);
	assert_int_equal(pw_hash(p, pw, strlen(pw), out, PW_ENCODED_MAX, &e), 0);
	assert_int_equal(e.kind, ERR_NONE);
}

/* pw_verify of a NUL-terminated password; its result, with the error kind
 * in *kind. */
static int
verify(const char *encoded, const char *pw, enum err_kind *kind)
{
	struct err e;
	int rc;

	err_clear(&e);
	rc = pw_verify(encoded, pw, strlen(pw), &e);
	if (rc < 0)
		assert_true(e.msg[0] != '\0');
	else
		assert_int_equal(e.kind, ERR_NONE);
	*kind = e.kind;
	return rc;
}

static void
test_hash_then_verify(void **state)
{
	char enc[PW_ENCODED_MAX], again[PW_ENCODED_MAX];
	enum err_kind k;

	(void)state;
	hash(&fast, "correct horse battery", enc);
	assert_true(strncmp(enc, "$argon2id$v=19$m=8192,t=1,p=1$", 30) == 0);
	assert_int_equal(verify(enc, "correct horse battery", &k), 1);
	/* A fresh salt each time: the same password, another string. */
	hash(&fast, "correct horse battery", again);
	assert_string_not_equal(enc, again);
	assert_int_equal(verify(again, "correct horse battery", &k), 1);
	/* The empty password is a password. */
	hash(&fast, "", enc);
	assert_int_equal(verify(enc, "", &k), 1);
	assert_int_equal(verify(enc, "x", &k), 0);
}

static void
test_wrong_password(void **state)
{
	char enc[PW_ENCODED_MAX];
	enum err_kind k;

	(void)state;
	hash(&fast, "correct horse battery", enc);
	assert_int_equal(verify(enc, "correct horse batterY", &k), 0);
	assert_int_equal(verify(enc, "correct horse batter", &k), 0);
	assert_int_equal(verify(enc, "", &k), 0);
	/* Well formed, made from another password: a mismatch, not an error. */
	assert_int_equal(verify("$argon2id$v=19$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
				"u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
			     "pw", &k),
	    0);
}

/* Bytes after a NUL count: the length decides, not strlen. */
static void
test_length_counts(void **state)
{
	char enc[PW_ENCODED_MAX];
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(pw_hash(&fast, "ab\0cd", 5, enc, sizeof(enc), &e), 0);
	assert_int_equal(pw_verify(enc, "ab\0cd", 5, &e), 1);
	assert_int_equal(pw_verify(enc, "ab\0ce", 5, &e), 0);
	assert_int_equal(pw_verify(enc, "ab", 2, &e), 0);
}

static void
test_password_length_limit(void **state)
{
	char pw[PW_PASSWORD_MAX + 1], enc[PW_ENCODED_MAX];
	struct err e;

	(void)state;
	memset(pw, 'k', sizeof(pw));
	err_clear(&e);
	assert_int_equal(pw_hash(&fast, pw, PW_PASSWORD_MAX, enc, sizeof(enc), &e), 0);
	assert_int_equal(pw_verify(enc, pw, PW_PASSWORD_MAX, &e), 1);
	assert_int_equal(pw_hash(&fast, pw, PW_PASSWORD_MAX + 1, enc, sizeof(enc), &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	err_clear(&e);
	assert_int_equal(pw_verify(enc, pw, PW_PASSWORD_MAX + 1, &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
}

static void
test_malformed_encoded(void **state)
{
	char enc[PW_ENCODED_MAX], cut[2 * PW_ENCODED_MAX];
	const char *sep;
	enum err_kind k;
	/* One case a line: each comment belongs to its own case. */
	/* clang-format off */
	static const char *const bad[] = {
		"",
		"garbage",
		"$argon2id$",
		"$argon2id$v=19$m=8192,t=1,p=1$",
		/* argon2i and argon2d: another variant */
		"$argon2i$v=19$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2d$v=19$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		/* version 16, or none */
		"$argon2id$v=16$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2id$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		/* parameters out of order, signed, with a leading zero, too big */
		"$argon2id$v=19$t=1,m=8192,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2id$v=19$m=+8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2id$v=19$m=08192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2id$v=19$m=4294967296,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		/* parameters out of range: memory is the caller's to bound */
		"$argon2id$v=19$m=4194304,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2id$v=19$m=8192,t=11,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2id$v=19$m=8192,t=1,p=9$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		/* a bad letter in the salt, padding, trailing text */
		"$argon2id$v=19$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2Fs-A$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2id$v=19$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA==$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
		"$argon2id$v=19$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo$",
		/* nonzero bits after the last whole byte of the salt */
		"$argon2id$v=19$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdB$"
		    "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
	};
	/* clang-format on */

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(verify(bad[i], "pw", &k), -1);
		assert_int_equal(k, ERR_INVALID);
	}
	/* A good hash cut short anywhere is refused, not a mismatch. */
	hash(&fast, "pw", enc);
	for (size_t n = 0; n < strlen(enc); n++) {
		memcpy(cut, enc, n);
		cut[n] = '\0';
		assert_int_equal(verify(cut, "pw", &k), -1);
		assert_int_equal(k, ERR_INVALID);
	}
	/* Salt or tag one letter longer. */
	sep = strchr(enc + 30, '$');
	assert_non_null(sep);
	snprintf(cut, sizeof(cut), "%.*sA%s", (int)(sep - enc), enc, sep);
	assert_int_equal(verify(cut, "pw", &k), -1);
	assert_int_equal(k, ERR_INVALID);
	snprintf(cut, sizeof(cut), "%sA", enc);
	assert_int_equal(verify(cut, "pw", &k), -1);
	assert_int_equal(k, ERR_INVALID);
	/* NULL is malformed too. */
	{
		struct err e;

		err_clear(&e);
		assert_int_equal(pw_verify(NULL, "pw", 2, &e), -1);
		assert_int_equal(e.kind, ERR_INVALID);
	}
}

static void
test_needs_rehash(void **state)
{
	char enc[PW_ENCODED_MAX];
	struct pw_params p = fast;

	(void)state;
	hash(&fast, "pw", enc);
	assert_int_equal(pw_needs_rehash(enc, &fast), 0);
	p.t_cost = 2;
	assert_int_equal(pw_needs_rehash(enc, &p), 1);
	p = fast;
	p.m_kib = 16384;
	assert_int_equal(pw_needs_rehash(enc, &p), 1);
	p = fast;
	p.lanes = 2;
	assert_int_equal(pw_needs_rehash(enc, &p), 1);
	/* Cannot be parsed: hash again. */
	assert_int_equal(pw_needs_rehash("", &fast), 1);
	assert_int_equal(pw_needs_rehash(NULL, &fast), 1);
	assert_int_equal(pw_needs_rehash("$argon2i$v=19$m=8192,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$"
					 "u8CHJDgk1fqUtdoMaGvJKxHW/+cd9sx4W/Lm0eKz3lo",
			     &fast),
	    1);
	/* Other parameters hash and verify too, and are current for themselves. */
	p.t_cost = 2;
	hash(&p, "pw", enc);
	assert_true(strncmp(enc, "$argon2id$v=19$m=8192,t=2,p=2$", 30) == 0);
	assert_int_equal(pw_needs_rehash(enc, &p), 0);
	assert_int_equal(pw_needs_rehash(enc, &fast), 1);
}

static void
refused(uint32_t t, uint32_t m, uint32_t lanes)
{
	struct pw_params p = { .t_cost = t, .m_kib = m, .lanes = lanes };
	char enc[PW_ENCODED_MAX];
	struct err e;

	err_clear(&e);
	assert_int_equal(pw_hash(&p, "pw", 2, enc, sizeof(enc), &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	err_clear(&e);
	assert_int_equal(pw_params_check(&p, &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
}

static void
test_params_range(void **state)
{
	struct pw_params hi = { .t_cost = 10, .m_kib = 1048576, .lanes = 8 };
	struct pw_params lo = { .t_cost = 1, .m_kib = 8192, .lanes = 1 };
	struct pw_params odd = { .t_cost = 1, .m_kib = 8193, .lanes = 3 };
	char enc[PW_ENCODED_MAX];
	struct err e;

	(void)state;
	refused(0, 8192, 1);
	refused(11, 8192, 1);
	refused(1, 8191, 1);
	refused(1, 1048577, 1);
	refused(1, 8192, 0);
	refused(1, 8192, 9);
	err_clear(&e);
	assert_int_equal(pw_params_check(&hi, &e), 0);
	assert_int_equal(pw_params_check(&lo, &e), 0);
	/* Not a power of two, odd lanes: accepted. */
	hash(&odd, "pw", enc);
	/* The largest parameters fit PW_ENCODED_MAX (no hash run: too slow). */
	assert_true(strlen("$argon2id$v=19$m=1048576,t=10,p=8$") + 22 + 1 + 43 < PW_ENCODED_MAX);
	/* A buffer too small is refused before any work. */
	assert_int_equal(pw_hash(&fast, "pw", 2, enc, 40, &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
}

static void
test_burn(void **state)
{
	struct pw_params bad = { .t_cost = 0, .m_kib = 8192, .lanes = 1 };

	(void)state;
	pw_set_concurrency(2);
	assert_int_equal(pw_burn(&fast, "whatever", 8, NULL), 0);
	assert_int_equal(pw_inflight_max(), 1);
	pw_set_concurrency(2);
	/* Nothing to spend for what pw_verify refuses first: done, no work. */
	assert_int_equal(pw_burn(&bad, "whatever", 8, NULL), 0);
	assert_int_equal(pw_burn(&fast, "x", PW_PASSWORD_MAX + 1, NULL), 0);
	assert_int_equal(pw_inflight_max(), 0);
}

#define THREADS 6

static void *
worker(void *arg)
{
	char enc[PW_ENCODED_MAX];
	struct err e;
	int *ok = arg;

	err_clear(&e);
	*ok = pw_hash(&fast, "pw", 2, enc, sizeof(enc), &e) == 0 &&
	    pw_verify(enc, "pw", 2, &e) == 1 && pw_burn(&fast, "pw", 2, NULL) == 0;
	return NULL;
}

static void *
slow_hash(void *arg)
{
	static const struct pw_params slow = { .t_cost = 4, .m_kib = 131072, .lanes = 1 };
	char enc[PW_ENCODED_MAX];
	struct err e;

	err_clear(&e);
	*(int *)arg = pw_hash(&slow, "pw", 2, enc, sizeof(enc), &e);
	return NULL;
}

/* A full gate answers ERR_UNAVAILABLE after the wait instead of holding
 * the caller: workers are shared with every other call. */
static void
test_full_gate_refuses(void **state)
{
	char enc[PW_ENCODED_MAX];
	struct err e;
	pthread_t t;
	int slow_rc = -1;

	(void)state;
	pw_set_concurrency(1);
	pw_set_wait_ms(0);
	assert_int_equal(pthread_create(&t, NULL, slow_hash, &slow_rc), 0);
	while (pw_inflight_max() < 1)
		usleep(1000);
	err_clear(&e);
	/* Still inside: the slow hash takes far longer than this check. */
	assert_int_equal(pw_hash(&fast, "pw", 2, enc, sizeof(enc), &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	err_clear(&e);
	assert_int_equal(pw_burn(&fast, "pw", 2, &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	pthread_join(t, NULL);
	assert_int_equal(slow_rc, 0);
	pw_set_wait_ms(60000);
	assert_int_equal(pw_hash(&fast, "pw", 2, enc, sizeof(enc), &e), 0);
	pw_set_wait_ms(PW_WAIT_MS_DEFAULT);
}

static void *
slow_hash_for_a(void *arg)
{
	static const struct pw_params slow = { .t_cost = 4, .m_kib = 131072, .lanes = 1 };
	static const struct pw_who who = { { "acct:a", "addr:y" } };
	char enc[PW_ENCODED_MAX];
	struct err e;

	err_clear(&e);
	*(int *)arg = pw_hash_as(&who, &slow, "pw", 2, enc, sizeof(enc), &e);
	return NULL;
}

/* One account or one client holds at most its share of the turns: while
 * account a from client y hashes, another call of a (from anywhere) or
 * of y (for anyone) is refused with ERR_LIMIT, not left waiting on a full
 * gate; anyone else gets the turn left over. */
static void
test_share_per_name(void **state)
{
	static const struct pw_who same_acct = { { "acct:a", "addr:z" } };
	static const struct pw_who same_addr = { { "acct:b", "addr:y" } };
	static const struct pw_who other = { { "acct:b", "addr:z" } };
	char enc[PW_ENCODED_MAX];
	struct err e;
	pthread_t t;
	int slow_rc = -1;

	(void)state;
	pw_set_concurrency(2);
	pw_set_share(1);
	pw_set_wait_ms(0);
	assert_int_equal(pthread_create(&t, NULL, slow_hash_for_a, &slow_rc), 0);
	while (pw_inflight_max() < 1)
		usleep(1000);
	err_clear(&e);
	assert_int_equal(pw_hash_as(&same_acct, &fast, "pw", 2, enc, sizeof(enc), &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	err_clear(&e);
	assert_int_equal(pw_verify_as(&same_addr, enc, "pw", 2, &e), -1);
	err_clear(&e);
	assert_int_equal(pw_burn_as(&same_addr, &fast, "pw", 2, &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	err_clear(&e);
	assert_int_equal(pw_hash_as(&other, &fast, "pw", 2, enc, sizeof(enc), &e), 0);
	assert_int_equal(pw_verify_as(&other, enc, "pw", 2, &e), 1);
	assert_int_equal(pw_hash(&fast, "pw", 2, enc, sizeof(enc), &e), 0);
	pthread_join(t, NULL);
	assert_int_equal(slow_rc, 0);
	/* Its turn given back, a's next call runs. */
	assert_int_equal(pw_hash_as(&same_acct, &fast, "pw", 2, enc, sizeof(enc), &e), 0);
	/* A share as large as the gate still leaves one turn to others. */
	pw_set_share(2);
	pw_set_concurrency(2); /* restarts pw_inflight_max */
	assert_int_equal(pthread_create(&t, NULL, slow_hash_for_a, &slow_rc), 0);
	while (pw_inflight_max() < 1)
		usleep(1000);
	err_clear(&e);
	assert_int_equal(pw_hash_as(&same_acct, &fast, "pw", 2, enc, sizeof(enc), &e), -1);
	assert_int_equal(e.kind, ERR_LIMIT);
	pthread_join(t, NULL);
	pw_set_share(PW_SHARE_DEFAULT);
	pw_set_wait_ms(PW_WAIT_MS_DEFAULT);
	pw_set_concurrency(PW_CONCURRENCY_DEFAULT);
}

static void
run_threads(void)
{
	pw_set_wait_ms(60000); /* here every caller must get its turn */
	pthread_t t[THREADS];
	int ok[THREADS];

	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, &ok[i]), 0);
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_true(ok[i]);
	}
}

static void
test_concurrency_bound(void **state)
{
	(void)state;
	pw_set_concurrency(1);
	run_threads();
	assert_int_equal(pw_inflight_max(), 1);
	pw_set_concurrency(3);
	run_threads();
	assert_true(pw_inflight_max() >= 1 && pw_inflight_max() <= 3);
	/* Below 1 means 1. */
	pw_set_concurrency(0);
	run_threads();
	assert_int_equal(pw_inflight_max(), 1);
	pw_set_concurrency(PW_CONCURRENCY_DEFAULT);
}

/* The policy's verdict on a NUL-terminated password. */
static int
policy(const char *pw, const char *email)
{
	struct err e;
	int rc;

	err_clear(&e);
	rc = pw_policy_check(pw, strlen(pw), email, &e);
	if (rc == 0) {
		assert_int_equal(e.kind, ERR_NONE);
	} else {
		assert_int_equal(rc, -1);
		assert_int_equal(e.kind, ERR_INVALID);
		assert_string_equal(e.field, "password");
		assert_true(e.msg[0] != '\0');
	}
	return rc;
}

static void
test_policy_good(void **state)
{
	(void)state;
	assert_int_equal(policy("plum-kettle-orbit", "ann.lee@example.com"), 0);
	assert_int_equal(policy("plum-kettle-orbit", NULL), 0);
	assert_int_equal(policy("Grüße aus Köln 7", "x@example.com"), 0);
	assert_int_equal(policy("パスワードは長い", NULL), 0);
	/* Exactly at both length bounds. */
	assert_int_equal(policy("abcdefgh1!", NULL), 0);
	{
		char pw[PW_POLICY_MAX_LEN + 2];

		for (int i = 0; i < PW_POLICY_MAX_LEN + 1; i++)
			pw[i] = (char)('a' + i % 26);
		pw[PW_POLICY_MAX_LEN] = '\0';
		assert_int_equal(policy(pw, NULL), 0);
		pw[PW_POLICY_MAX_LEN] = 'x';
		pw[PW_POLICY_MAX_LEN + 1] = '\0';
		assert_int_equal(policy(pw, NULL), -1);
	}
}

static void
test_policy_length(void **state)
{
	(void)state;
	assert_int_equal(policy("", NULL), -1);
	assert_int_equal(policy("abcdefgh1", NULL), -1);
}

static void
test_policy_text(void **state)
{
	struct err e;

	(void)state;
	/* Not UTF-8: a lone continuation byte, a cut sequence, an overlong. */
	assert_int_equal(policy("plum-kettle\x80orbit", NULL), -1);
	assert_int_equal(policy("plum-kettle-orbit\xE3\x81", NULL), -1);
	assert_int_equal(policy("plum-kettle\xC0\xAForbit", NULL), -1);
	/* Controls: tab, newline, DEL, a C1 control (U+0085), NUL inside. */
	assert_int_equal(policy("plum\tkettle-orbit", NULL), -1);
	assert_int_equal(policy("plum-kettle-orbit\n", NULL), -1);
	assert_int_equal(policy("plum-kettle\x7Forbit", NULL), -1);
	assert_int_equal(policy("plum-kettle\xC2\x85orbit", NULL), -1);
	err_clear(&e);
	assert_int_equal(pw_policy_check("plum\0kettle-orbit", 17, NULL, &e), -1);
	assert_string_equal(e.field, "password");
	/* U+00A0, right after the C1 controls, is text. */
	assert_int_equal(policy("plum-kettle\xC2\xA0orbit", NULL), 0);
}

static void
test_policy_repeated(void **state)
{
	(void)state;
	assert_int_equal(policy("aaaaaaaaaaaa", NULL), -1);
	assert_int_equal(policy("éééééééééé", NULL), -1);
	assert_int_equal(policy("😀😀😀😀", NULL), -1);
	/* Two characters in turn are not one repeated (nor common). */
	assert_int_equal(policy("abababababab", NULL), 0);
	assert_int_equal(policy("aaaaaaaaaaab", NULL), 0);
}

static void
test_policy_email(void **state)
{
	(void)state;
	assert_int_equal(policy("xx-annalee-2024", "annalee@example.com"), -1);
	assert_int_equal(policy("xx-AnnaLee-2024", "annalee@example.com"), -1);
	assert_int_equal(policy("xx-annalee-2024", "AnnaLee@Example.com"), -1);
	assert_int_equal(policy("bob.smith-rocks", "bob.smith@example.com"), -1);
	/* Four characters is enough; three is not. */
	assert_int_equal(policy("mybobsworld1", "bobs@example.com"), -1);
	assert_int_equal(policy("mybobsworld1", "bob@example.com"), 0);
	/* Four characters in more bytes. */
	assert_int_equal(policy("ich-jörg-bin", "jörg@example.com"), -1);
	assert_int_equal(policy("ich-jör-bin-x", "jör@example.com"), 0);
	/* The domain is not the local part. */
	assert_int_equal(policy("example-plum-orbit", "zed@example.com"), 0);
	/* Another local part. */
	assert_int_equal(policy("plum-kettle-orbit", "annalee@example.com"), 0);
}

static void
test_policy_common(void **state)
{
	(void)state;
	assert_int_equal(policy("password123", NULL), -1);
	assert_int_equal(policy("PassWord123", NULL), -1);
	assert_int_equal(policy("1234567890", NULL), -1);
	assert_int_equal(policy("qwertyuiop", NULL), -1);
	assert_int_equal(policy("QWERTYUIOP", NULL), -1);
	assert_int_equal(policy("iloveyou12", NULL), -1);
	/* Containing one is not being one. */
	assert_int_equal(policy("password123-plum", NULL), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_then_verify),
		cmocka_unit_test(test_wrong_password),
		cmocka_unit_test(test_length_counts),
		cmocka_unit_test(test_password_length_limit),
		cmocka_unit_test(test_malformed_encoded),
		cmocka_unit_test(test_needs_rehash),
		cmocka_unit_test(test_params_range),
		cmocka_unit_test(test_burn),
		cmocka_unit_test(test_concurrency_bound),
		cmocka_unit_test(test_policy_good),
		cmocka_unit_test(test_policy_length),
		cmocka_unit_test(test_policy_text),
		cmocka_unit_test(test_policy_repeated),
		cmocka_unit_test(test_policy_email),
		cmocka_unit_test(test_policy_common),
		cmocka_unit_test(test_full_gate_refuses),
		cmocka_unit_test(test_share_per_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
