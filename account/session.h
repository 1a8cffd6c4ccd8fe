/* session.h - MCP sessions stored in PostgreSQL (sess_), so any aasd on
 * the database serves a session another one created. */
#ifndef AAS_SESSION_H
#define AAS_SESSION_H

#include "account/accounts.h"
#include "base/config.h"
#include "base/db.h"
#include "base/ttlmap.h"

#define SESS_ID_LEN 64
/* A credential's id: "k:" and 32 hex digits of an API key's SHA-256, or
 * "g:" and an OAuth grant's id (server/mcp_cred.h makes them). */
#define SESS_CRED_MAX 38

struct sess_info {
	char protocol_version[16];
	char account_id[ACCT_ID_LEN + 1];   /* empty when opened without a key */
	char credential[SESS_CRED_MAX + 1]; /* empty for an anonymous session, or
					       one older than the column */
};

/* 1 when `id` has the shape of a session id (so junk never hits the db). */
int sess_id_valid(const char *id);

/* How long sessions live and how many there may be (from configuration). */
struct sess_limits {
	int idle_s;          /* a session with a key */
	int anon_idle_s;     /* one without */
	int max_anon;        /* anonymous sessions kept at once */
	int max_per_account; /* open sessions of one account */
};

/* The limits configuration sets. */
void sess_limits_from(const struct config *cfg, struct sess_limits *out);

/* A new session. An anonymous one deletes expired anonymous sessions and
 * the least recently used beyond max_anon; one with a key is refused with
 * ERR_LIMIT naming AAS_MAX_SESSIONS_PER_ACCOUNT when the account has
 * max_per_account open already (ended and expired ones are deleted). */
int sess_create(struct db *db, const struct sess_limits *lim, const char *protocol_version,
    const char *account_id, const char *credential, const char *client_name,
    const char *client_version, char id[SESS_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* Binds an anonymous session to the first credential that uses it
 * (counted against that account's max_per_account like a new one) and
 * announces it ("s:<id>") so no cache keeps it anonymous. ERR_NOT_FOUND
 * when it is unknown, ended or bound already. */
int sess_adopt(struct db *db, const struct sess_limits *lim, const char *id, const char *account_id,
    const char *credential, struct err *e) AAS_MUST_CHECK;
/* ERR_NOT_FOUND when unknown, ended, or idle longer than its limit. */
int sess_lookup(struct db *db, const struct sess_limits *lim, const char *id, struct sess_info *out,
    struct err *e) AAS_MUST_CHECK;
/* sess_lookup through a cache of recent answers (cache may be NULL). A
 * cached answer is at most the cache's TTL old; ended sessions leave the
 * cache through database notifications. */
int sess_lookup_cached(struct db *db, struct ttl_map *cache, const struct sess_limits *lim,
    const char *id, struct sess_info *out, struct err *e) AAS_MUST_CHECK;
/* 1 when the cache holds the session (no database access). */
int sess_cache_peek(struct ttl_map *cache, const char *id, struct sess_info *out);

/* Ends a session and announces it to every aasd (notification
 * "s:<id>" on channel aas_invalidate); ERR_NOT_FOUND when unknown or already ended. */
int sess_end(struct db *db, const char *id, struct err *e) AAS_MUST_CHECK;

/* Inside the caller's transaction: ends every open session of `account`
 * and announces each ("s:<id>", sent at commit); *n is how many. */
int sess_end_account(PGconn *c, const char *account_id, long *n, struct err *e) AAS_MUST_CHECK;

#endif
