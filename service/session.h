/* session.h - MCP sessions stored in PostgreSQL (sess_), so any aasd on
 * the database serves a session another one created. */
#ifndef AAS_SESSION_H
#define AAS_SESSION_H

#include "service/accounts.h"
#include "base/db.h"
#include "base/ttlmap.h"

#define SESS_ID_LEN 64

struct sess_info {
	char protocol_version[16];
	char account_id[ACCT_ID_LEN + 1]; /* empty when opened without a key */
};

/* 1 when `id` has the shape of a session id (so junk never hits the db). */
int sess_id_valid(const char *id);

int sess_create(struct db *db, const char *protocol_version, const char *account_id,
    const char *client_name, const char *client_version, char id[SESS_ID_LEN + 1], struct err *e);
/* ERR_NOT_FOUND when unknown, ended, or idle longer than idle_s. */
int sess_lookup(struct db *db, const char *id, int idle_s, struct sess_info *out, struct err *e);
/* sess_lookup through a cache of recent answers (cache may be NULL). A
 * cached answer is at most the cache's TTL old; ended sessions leave the
 * cache through database notifications. */
int sess_lookup_cached(struct db *db, struct ttl_map *cache, const char *id, int idle_s,
    struct sess_info *out, struct err *e);
/* 1 when the cache holds the session (no database access). */
int sess_cache_peek(struct ttl_map *cache, const char *id, struct sess_info *out);

/* Ends a session and announces it to every aasd (notification
 * "s:<id>" on channel aas_invalidate); ERR_NOT_FOUND when unknown or already ended. */
int sess_end(struct db *db, const char *id, struct err *e);

#endif
