/* usage.h - an account's money as the tools see it (usage_): the usage
 * report and extending a sandbox's paid lifetime. The arithmetic, ledger
 * and charges are billing/'s; this file owns the queries and the answer. */
#ifndef AAS_USAGE_H
#define AAS_USAGE_H

#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "base/config.h"
#include "base/db.h"

/* get_usage. */
struct usage_req {
	int limit;          /* recent entries per list, 1..100 */
	const char *cursor; /* from a previous answer's next_cursor, or NULL */
};

/* extend_sandbox. */
struct usage_extend_req {
	const char *sandbox_id;
	int minutes; /* > 0, checked by the schema */
};

/* Ledger entries as JSON, newest first, paged by id (get_usage, aasctl). */
json_t *usage_ledger_json(struct db *db, const char *account, int limit, int64_t before_id,
    int64_t *next_before, struct err *e);
/* Net spend (charges less refunds) per UTC day for the last `days` days
 * (1..366), oldest first: [{"day": "YYYY-MM-DD", "spent": micro-USD}]. */
json_t *usage_daily_json(struct db *db, const char *account, int days, struct err *e);
json_t *usage_get(struct db *db, const char *account, const struct usage_req *req, struct err *e);
/* Charges `minutes` more and moves expires_at, in one transaction;
 * refused past the maximum lifetime or for a sandbox that is not running. */
json_t *usage_extend(struct db *db, const struct config *cfg, const char *account,
    const struct usage_extend_req *req, struct err *e);

#endif
