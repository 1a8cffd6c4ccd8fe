/* ledger.h - credit movements in PostgreSQL (bill_). Every movement is one
 * ledger row plus the cached balance, in the caller's transaction; a
 * movement's idempotency key makes a retried transaction a no-op. */
#ifndef AAS_LEDGER_H
#define AAS_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "base/db.h"
#include "base/err.h"

/* Locks the account row and reads its balance (inside a transaction). */
int bill_lock_balance(PGconn *c, const char *account, int64_t *balance,
    struct err *e) AAS_MUST_CHECK;

/* Posts `amount` (signed: grants and refunds positive, charges negative).
 * A key already used posts nothing and succeeds (*posted = 0). A charge
 * beyond the balance fails with ERR_PAYMENT and changes nothing. */
int bill_post(PGconn *c, const char *account, const char *sandbox, const char *kind, int64_t amount,
    int minutes, const char *reason, const char *key, int64_t *balance_after, int *posted,
    struct err *e) AAS_MUST_CHECK;

/* A grant in its own transaction (aasctl credit grant). */
int bill_grant(struct db *db, const char *account, int64_t amount, const char *reason,
    int64_t *balance_after, struct err *e) AAS_MUST_CHECK;

struct bill_entry {
	long long id;
	char kind[16];    /* grant, charge, refund, adjustment */
	long long amount; /* micro-USD, negative for charges */
	int has_minutes;
	long long minutes;
	char *reason;        /* malloc'd */
	char sandbox_id[24]; /* "" when none */
	char created_at[40];
};

/* Ledger entries of `account`, newest first, paged by entry id: up to
 * `limit` entries below `before_id` (0: from the newest) into *entries
 * (bill_entries_free them); *next_before is the next page's before_id, 0
 * when this is the last page. */
int bill_entries(struct db *db, const char *account, int limit, int64_t before_id,
    struct bill_entry **entries, size_t *count, int64_t *next_before, struct err *e) AAS_MUST_CHECK;
void bill_entries_free(struct bill_entry *v, size_t n);

#endif
