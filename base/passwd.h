/* passwd.h - account passwords (pw_): argon2id hashing in the standard
 * encoded form ("$argon2id$v=19$m=...,t=...,p=...$salt$tag", libargon2),
 * its verification, and the sign-up password policy.
 *
 * Every hash, verify and burn takes m_kib of memory while it runs, so at
 * most pw_set_concurrency() of them run at once in the process; the others
 * wait for a turn. The _as forms name whom the work is for (an account, a
 * client address): one name holds at most pw_set_share() of the turns at
 * once, so no single account or client takes them all. */
#ifndef AAS_PASSWD_H
#define AAS_PASSWD_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Room for any encoded string pw_hash writes, with its NUL (the longest,
 * at the largest parameters, is 101 bytes). */
#define PW_ENCODED_MAX 160
/* The longest password pw_hash and pw_verify take, in bytes. */
#define PW_PASSWORD_MAX 1024
/* Salt and tag sizes, in bytes. */
#define PW_SALT_LEN 16
#define PW_TAG_LEN 32
/* Parameter ranges pw_hash and pw_verify accept. */
#define PW_T_COST_MIN 1
#define PW_T_COST_MAX 10
#define PW_M_KIB_MIN 8192
#define PW_M_KIB_MAX 1048576
#define PW_LANES_MIN 1
#define PW_LANES_MAX 8
/* The sign-up policy's length bounds, in bytes. */
#define PW_POLICY_MIN_LEN 10
#define PW_POLICY_MAX_LEN 256
/* Hashes, verifies and burns that run at once unless set otherwise. */
#define PW_CONCURRENCY_DEFAULT 2
/* How long a caller waits for its turn before ERR_UNAVAILABLE (ms). */
#define PW_WAIT_MS_DEFAULT 500

/* Names a hash may be counted under; at most this many per call. */
#define PW_WHO_TAGS 2
/* Turns one name holds at once unless set otherwise. */
#define PW_SHARE_DEFAULT 1

/* Whom a hash is for: up to PW_WHO_TAGS names (NULL or "": unused). */
struct pw_who {
	const char *tag[PW_WHO_TAGS];
};

struct pw_params {
	uint32_t t_cost; /* passes over memory */
	uint32_t m_kib;  /* memory, KiB */
	uint32_t lanes;  /* parallelism */
};

/* 0 when every parameter is in range, else -1 with ERR_INVALID. */
int pw_params_check(const struct pw_params *p, struct err *e) AAS_MUST_CHECK;

/* Writes the encoded argon2id hash of the `len` bytes at `pw` (random
 * 16-byte salt, 32-byte tag) to `out`, which holds `n` bytes. 0, or -1
 * with ERR_INVALID (parameters out of range, password longer than
 * PW_PASSWORD_MAX) or ERR_INTERNAL (no randomness, library failure, `out` too
 * small). */
int pw_hash(const struct pw_params *p, const char *pw, size_t len, char *out, size_t n,
    struct err *e) AAS_MUST_CHECK;

/* 1 when the password matches `encoded`, 0 when it does not (the
 * comparison is libargon2's, in constant time), -1 with ERR_INVALID when
 * `encoded` is not an argon2id hash as pw_hash writes them (or its
 * parameters are out of range) or the password is longer than PW_PASSWORD_MAX,
 * ERR_INTERNAL on a library failure. */
int pw_verify(const char *encoded, const char *pw, size_t len, struct err *e) AAS_MUST_CHECK;

/* pw_hash, pw_verify and pw_burn counted under `who` (NULL: nobody): a
 * name already holding its share waits like a full gate, and fails with
 * ERR_LIMIT (not ERR_UNAVAILABLE) when its share stays full. */
int pw_hash_as(const struct pw_who *who, const struct pw_params *p, const char *pw, size_t len,
    char *out, size_t n, struct err *e) AAS_MUST_CHECK;
int pw_verify_as(const struct pw_who *who, const char *encoded, const char *pw, size_t len,
    struct err *e) AAS_MUST_CHECK;
int pw_burn_as(const struct pw_who *who, const struct pw_params *p, const char *pw, size_t len,
    struct err *e) AAS_MUST_CHECK;

/* 1 when `encoded` was made with other parameters than `p` (or cannot be
 * parsed), so the caller should hash the password again after a
 * successful login; 0 when it is current. */
int pw_needs_rehash(const char *encoded, const struct pw_params *p);

/* Spends the work of one pw_verify at `p` on a throwaway salt, so a login
 * for an unknown e-mail takes as long as one for a known one. Does nothing
 * when `p` is out of range. */
int pw_burn(const struct pw_params *p, const char *pw, size_t len, struct err *e) AAS_MUST_CHECK;

/* Sets how many hashes, verifies and burns may run at once (at least 1;
 * PW_CONCURRENCY_DEFAULT until called) and restarts pw_inflight_max. */
void pw_set_concurrency(int n);
/* Sets how many turns one name may hold at once (at least 1, and below
 * the concurrency when that is more than 1, so one turn is always left to
 * the others; PW_SHARE_DEFAULT until called). */
void pw_set_share(int n);
/* How long hash, verify and burn wait for their turn (ms), after which
 * they fail with ERR_UNAVAILABLE: workers are never held for long. */
void pw_set_wait_ms(int ms);

/* For tests: the most that ran at once since the last pw_set_concurrency
 * (or the start). */
int pw_inflight_max(void);

/* The sign-up policy: 0 when `pw` is acceptable for the account `email`
 * (may be NULL), else -1 with ERR_INVALID on the field "password" and a
 * message for the user. Between PW_POLICY_MIN_LEN and PW_POLICY_MAX_LEN
 * bytes, valid UTF-8 without control characters, not one character
 * repeated, not containing the e-mail's local part (when it has 4 or more
 * characters, in any case), not one of the most common passwords (in any
 * case). */
int pw_policy_check(const char *pw, size_t len, const char *email, struct err *e) AAS_MUST_CHECK;

#endif
