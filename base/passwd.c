/* passwd.c - argon2id password hashes (libargon2) and the sign-up policy. */
#include "base/passwd.h"

#include <argon2.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "base/passwd_gate.h"
#include "base/utf8.h"

#define PW_PREFIX "$argon2id$v=19$"
/* Unpadded base64 of the salt and of the tag. */
#define PW_SALT_CHARS 22
#define PW_TAG_CHARS 43

static int
in_range(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v >= lo && v <= hi;
}

int
pw_params_check(const struct pw_params *p, struct err *e)
{
	if (!in_range(p->t_cost, PW_T_COST_MIN, PW_T_COST_MAX)) {
		err_set(e, ERR_INVALID, "argon2 t_cost %u is not in %d..%d", (unsigned)p->t_cost,
		    PW_T_COST_MIN, PW_T_COST_MAX);
		return -1;
	}
	if (!in_range(p->m_kib, PW_M_KIB_MIN, PW_M_KIB_MAX)) {
		err_set(e, ERR_INVALID, "argon2 m_kib %u is not in %d..%d", (unsigned)p->m_kib,
		    PW_M_KIB_MIN, PW_M_KIB_MAX);
		return -1;
	}
	if (!in_range(p->lanes, PW_LANES_MIN, PW_LANES_MAX)) {
		err_set(e, ERR_INVALID, "argon2 lanes %u is not in %d..%d", (unsigned)p->lanes,
		    PW_LANES_MIN, PW_LANES_MAX);
		return -1;
	}
	return 0;
}

static int
len_check(size_t len, struct err *e)
{
	if (len > PW_PASSWORD_MAX) {
		err_set_at(e, ERR_INVALID, "password", "password of %zu bytes, more than %d", len,
		    PW_PASSWORD_MAX);
		return -1;
	}
	return 0;
}

/* A decimal number without sign or leading zero that fits 32 bits, at
 * *s; moves *s past it. -1 when there is none. */
static int
parse_u32(const char **s, uint32_t *out)
{
	const char *p = *s;
	uint64_t v = 0;

	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return -1;
	}
	*out = (uint32_t)v;
	*s = p;
	return 0;
}

/* Moves *s past `lit` when the text starts with it; -1 otherwise. */
static int
skip(const char **s, const char *lit)
{
	size_t n = strlen(lit);

	if (strncmp(*s, lit, n) != 0)
		return -1;
	*s += n;
	return 0;
}

static int
is_b64(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '+' || c == '/';
}

/* Moves *s past exactly n base64 letters; -1 when there are fewer or more. */
static int
skip_b64(const char **s, size_t n)
{
	const char *p = *s;

	for (size_t i = 0; i < n; i++, p++)
		if (!is_b64(*p))
			return -1;
	if (is_b64(*p))
		return -1;
	*s = p;
	return 0;
}

/* The parameters of an encoded hash as pw_hash writes them: argon2id,
 * version 19, a 16-byte salt and a 32-byte tag. -1 when it is not one
 * (the salt and tag letters are decoded by libargon2 later). */
static int
parse_encoded(const char *s, struct pw_params *p)
{
	if (s == NULL || skip(&s, PW_PREFIX) < 0 || skip(&s, "m=") < 0 ||
	    parse_u32(&s, &p->m_kib) < 0 || skip(&s, ",t=") < 0 || parse_u32(&s, &p->t_cost) < 0 ||
	    skip(&s, ",p=") < 0 || parse_u32(&s, &p->lanes) < 0 || skip(&s, "$") < 0 ||
	    skip_b64(&s, PW_SALT_CHARS) < 0 || skip(&s, "$") < 0 || skip_b64(&s, PW_TAG_CHARS) < 0)
		return -1;
	return *s == '\0' ? 0 : -1;
}

int
pw_hash(const struct pw_params *p, const char *pw, size_t len, char *out, size_t n, struct err *e)
{
	return pw_hash_as(NULL, p, pw, len, out, n, e);
}

int
pw_hash_as(const struct pw_who *who, const struct pw_params *p, const char *pw, size_t len,
    char *out, size_t n, struct err *e)
{
	int slot;
	unsigned char salt[PW_SALT_LEN];
	size_t need;
	int rc;

	if (pw_params_check(p, e) < 0 || len_check(len, e) < 0)
		return -1;
	need = argon2_encodedlen(p->t_cost, p->m_kib, p->lanes, PW_SALT_LEN, PW_TAG_LEN, Argon2_id);
	if (n < need) {
		err_set(e, ERR_INTERNAL, "password hash needs %zu bytes, the buffer has %zu", need,
		    n);
		return -1;
	}
	if (RAND_bytes(salt, sizeof(salt)) != 1) {
		err_set(e, ERR_INTERNAL, "no random bytes for a password salt");
		return -1;
	}
	slot = pwg_enter(who, e);
	if (slot < 0)
		return -1;
	rc = argon2id_hash_encoded(p->t_cost, p->m_kib, p->lanes, pw ? pw : "", len, salt,
	    sizeof(salt), PW_TAG_LEN, out, n);
	pwg_leave(slot);
	if (rc != ARGON2_OK) {
		err_set(e, ERR_INTERNAL, "argon2id hash failed: %s", argon2_error_message(rc));
		return -1;
	}
	return 0;
}

int
pw_verify(const char *encoded, const char *pw, size_t len, struct err *e)
{
	return pw_verify_as(NULL, encoded, pw, len, e);
}

int
pw_verify_as(const struct pw_who *who, const char *encoded, const char *pw, size_t len,
    struct err *e)
{
	struct pw_params p;
	int rc, slot;

	if (len_check(len, e) < 0)
		return -1;
	if (parse_encoded(encoded, &p) < 0) {
		err_set(e, ERR_INVALID, "stored password hash is not an argon2id hash");
		return -1;
	}
	/* Parameters from outside this process decide the memory taken. */
	if (pw_params_check(&p, e) < 0)
		return -1;
	slot = pwg_enter(who, e);
	if (slot < 0)
		return -1;
	rc = argon2id_verify(encoded, pw ? pw : "", len);
	pwg_leave(slot);
	if (rc == ARGON2_OK)
		return 1;
	if (rc == ARGON2_VERIFY_MISMATCH)
		return 0;
	if (rc == ARGON2_DECODING_FAIL) {
		err_set(e, ERR_INVALID, "stored password hash is not an argon2id hash");
		return -1;
	}
	err_set(e, ERR_INTERNAL, "argon2id verify failed: %s", argon2_error_message(rc));
	return -1;
}

int
pw_needs_rehash(const char *encoded, const struct pw_params *p)
{
	struct pw_params have;

	if (parse_encoded(encoded, &have) < 0)
		return 1;
	return have.t_cost != p->t_cost || have.m_kib != p->m_kib || have.lanes != p->lanes;
}

int
pw_burn(const struct pw_params *p, const char *pw, size_t len, struct err *e)
{
	return pw_burn_as(NULL, p, pw, len, e);
}

int
pw_burn_as(const struct pw_who *who, const struct pw_params *p, const char *pw, size_t len,
    struct err *e)
{
	int slot;
	static const unsigned char salt[PW_SALT_LEN]; /* throwaway: all zero */
	unsigned char tag[PW_TAG_LEN];

	/* pw_verify refuses these before any work, so a burn does too. */
	if (pw_params_check(p, NULL) < 0 || len > PW_PASSWORD_MAX)
		return 0;
	slot = pwg_enter(who, e);
	if (slot < 0)
		return -1;
	(void)argon2id_hash_raw(p->t_cost, p->m_kib, p->lanes, pw ? pw : "", len, salt,
	    sizeof(salt), tag, sizeof(tag));
	pwg_leave(slot);
	return 0;
}

/* Passwords refused whatever else they pass, compared in any case. Only
 * ones of PW_POLICY_MIN_LEN or more bytes: shorter ones fail anyway. */
static const char *const common[] = {
	"0123456789",
	"1234567890",
	"12345678910",
	"123456789a",
	"0987654321",
	"1q2w3e4r5t",
	"1q2w3e4r5t6y",
	"1qaz2wsx3edc",
	"qwertyuiop",
	"qwerty1234",
	"qwerty12345",
	"qwerty123456",
	"asdfghjkl1",
	"abcdefghij",
	"abc1234567",
	"password12",
	"password123",
	"password1234",
	"passw0rd123",
	"iloveyou12",
	"iloveyou123",
	"letmein123",
	"welcome123",
	"changeme123",
	"administrator",
	"football123",
	"baseball123",
	"superman123",
	"sunshine123",
	"princess123",
	"dragon1234",
	"monkey1234",
};

static char
ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* 1 when the n bytes at a and b are equal, ASCII letters in any case. */
static int
same_nocase(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ascii_lower(a[i]) != ascii_lower(b[i]))
			return 0;
	return 1;
}

/* 1 when the `len` bytes at s contain the `n` bytes at sub, in any case. */
static int
contains_nocase(const char *s, size_t len, const char *sub, size_t n)
{
	for (size_t i = 0; n <= len && i <= len - n; i++)
		if (same_nocase(s + i, sub, n))
			return 1;
	return 0;
}

/* 1 when valid UTF-8 text has a C0 control (NUL included), DEL or a C1
 * control (U+0080..U+009F, encoded C2 80..C2 9F). */
static int
has_control(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len; i++) {
		if (p[i] < 0x20 || p[i] == 0x7F)
			return 1;
		if (p[i] == 0xC2 && i + 1 < len && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F)
			return 1;
	}
	return 0;
}

/* 1 when valid UTF-8 text is one character written again and again. */
static int
one_repeated(const char *s, size_t len)
{
	unsigned char c = (unsigned char)s[0];
	size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;

	if (len % n != 0)
		return 0;
	for (size_t i = n; i < len; i += n)
		if (memcmp(s + i, s, n) != 0)
			return 0;
	return 1;
}

int
pw_policy_check(const char *pw, size_t len, const char *email, struct err *e)
{
	size_t bad = 0;
	char *clean;

	if (len < PW_POLICY_MIN_LEN) {
		err_set_field(e, "password",
		    "Your password is too short: use at least %d characters.", PW_POLICY_MIN_LEN);
		return -1;
	}
	if (len > PW_POLICY_MAX_LEN) {
		err_set_field(e, "password",
		    "Your password is too long: use at most %d bytes (letters outside plain ASCII "
		    "take 2 to 4 bytes each).",
		    PW_POLICY_MAX_LEN);
		return -1;
	}
	if ((clean = utf8_sanitize(pw, len, NULL, &bad)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory checking a password");
		return -1;
	}
	free(clean);
	/* utf8_sanitize counts NUL as a replacement too: a control. */
	if (has_control(pw, len)) {
		err_set_field(e, "password",
		    "Your password must not contain control characters such as tabs or line "
		    "breaks.");
		return -1;
	}
	if (bad > 0) {
		err_set_field(e, "password",
		    "Your password contains bytes that are not valid text "
		    "(UTF-8).");
		return -1;
	}
	if (one_repeated(pw, len)) {
		err_set_field(e, "password",
		    "Your password is one character repeated: choose something harder to guess.");
		return -1;
	}
	if (email != NULL) {
		const char *at = strrchr(email, '@');
		size_t local = at ? (size_t)(at - email) : strlen(email);

		if (utf8_chars(email, local) >= 4 && contains_nocase(pw, len, email, local)) {
			err_set_field(e, "password",
			    "Your password must not contain the name part of your e-mail address.");
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++) {
		if (strlen(common[i]) == len && same_nocase(pw, common[i], len)) {
			err_set_field(e, "password",
			    "Your password is one of the most common passwords: choose another.");
			return -1;
		}
	}
	return 0;
}
