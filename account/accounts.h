/* accounts.h - accounts and API keys in PostgreSQL (acct_). */
#ifndef AAS_ACCOUNTS_H
#define AAS_ACCOUNTS_H

#include <jansson.h>

#include "base/db.h"
#include "base/keys.h"
#include "base/ttlmap.h"

#define ACCT_ID_LEN 36 /* uuid text */
#define ACCT_MAX_LIVE_KEYS 50

struct acct_new_key {
	char key_id[ACCT_ID_LEN + 1];
	char key[KEY_TEXT_LEN + 1]; /* shown once, never stored */
	char prefix[KEY_DISPLAY_PREFIX_LEN + 1];
};

/* Creates an account with its first key and `free_credit` micro-USD of
 * free credit (a ledger grant), in one transaction. */
int acct_create(struct db *db, const char *email, long long free_credit,
    char account_id[ACCT_ID_LEN + 1], struct acct_new_key *key, struct err *e) AAS_MUST_CHECK;
/* Looks an account up by e-mail; ERR_NOT_FOUND when there is none. */
int acct_find_by_email(struct db *db, const char *email, char account_id[ACCT_ID_LEN + 1],
    struct err *e) AAS_MUST_CHECK;
json_t *acct_list(struct db *db, struct err *e);

int acct_key_create(struct db *db, const char *account_id, const char *name,
    struct acct_new_key *key, struct err *e) AAS_MUST_CHECK;
/* Keys of an account, without secrets: id, prefix, name, times. */
json_t *acct_key_list(struct db *db, const char *account_id, struct err *e);
/* Revokes a key by id and announces it to every aasd (notification
 * "k:<key hash>" on channel aas_invalidate); ERR_NOT_FOUND if no live key has that id. */
int acct_key_revoke(struct db *db, const char *key_id, struct err *e) AAS_MUST_CHECK;
/* The same, only when the key belongs to `account_id` (NULL: any);
 * another account's key is ERR_NOT_FOUND, as a key that does not exist. */
int acct_key_revoke_owned(struct db *db, const char *account_id, const char *key_id,
    struct err *e) AAS_MUST_CHECK;

/* What disabling an account did. */
struct acct_disabled {
	long keys_revoked;
	long sessions_ended;
	int already; /* it was disabled before */
};

/* Disables an account in one transaction, its row locked first: marks it
 * disabled, revokes every live key ("k:<hash>"), ends every open MCP
 * session ("s:<id>") and announces the account ("a:<id>") to every aasd,
 * whose reaper then stops its running sandboxes (settled, end reason
 * account_disabled) and whose front end closes its streams and previews.
 * Disabling a disabled account does it all again (nothing is left to
 * revoke). ERR_NOT_FOUND when there is no such account. */
int acct_disable(struct db *db, const char *account_id, struct acct_disabled *out,
    struct err *e) AAS_MUST_CHECK;
/* acct_disable inside the caller's transaction (account deletion); the
 * account row is locked first. */
int acct_disable_in(PGconn *c, const char *account_id, struct acct_disabled *out,
    struct err *e) AAS_MUST_CHECK;
/* Lets a disabled account in again. Its keys stay revoked: a new one is
 * made with acct_key_create. ERR_NOT_FOUND when there is no such account. */
int acct_enable(struct db *db, const char *account_id, struct err *e) AAS_MUST_CHECK;
/* Inside the caller's transaction, with the account row locked: fails
 * with ERR_FORBIDDEN when the account is disabled. */
int acct_check_enabled(PGconn *c, const char *account_id, struct err *e) AAS_MUST_CHECK;

/* Resolves a presented key to its account. ERR_UNAUTHORIZED when the key
 * is unknown, revoked or its account disabled. */
int acct_resolve_key(struct db *db, const char *key, size_t keylen,
    char account_id[ACCT_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;

/* acct_resolve_key through a cache keyed by the key's hash (cache may be
 * NULL); revoked keys leave it through database notifications. */
int acct_resolve_key_cached(struct db *db, struct ttl_map *cache, const char *key, size_t keylen,
    char account_id[ACCT_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* 1 when the cache resolves the key (no database access). */
int acct_key_cache_peek(struct ttl_map *cache, const char *key, size_t keylen,
    char account_id[ACCT_ID_LEN + 1]);
/* Drops the account's keys from this process's cache (cache may be NULL):
 * a revocation made here counts here at once, not when its notification
 * comes back (other processes hear of it that way). */
void acct_key_cache_forget_account(struct ttl_map *cache, const char *account_id);

/* 1 when `s` is a canonical lower-case uuid. */
int acct_id_valid(const char *s);

#endif
