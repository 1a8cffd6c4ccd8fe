/* billing.h - what sandboxes cost (bill_): the charge at create, the
 * charge at extend, the settlement (refund of whole unused minutes) at the
 * end, and the usage report. Amounts are micro-USD. */
#ifndef AAS_BILLING_H
#define AAS_BILLING_H

#include <stdint.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"

/* Inside the create transaction (account row already locked): charges
 * minutes x price for the sandbox row `id` and records the price on it.
 * With too little credit: ERR_PAYMENT stating balance, price and what the
 * balance buys; nothing is written. */
int bill_charge_create(PGconn *c, const char *account, const char *id,
    const char *size, int minutes, int64_t price, struct err *e);

struct bill_settlement {
	int minutes_used;
	int64_t charged;
	int64_t refunded;
	int64_t balance;
	int already;        /* settled before this call */
};

/* Settles a sandbox once: refunds every whole paid minute not used (all of
 * them when `full_refund`: it never ran, or the service lost it). */
int bill_settle(struct db *db, const struct config *cfg, const char *id, int full_refund,
    struct bill_settlement *out, struct err *e);

/* extend_sandbox: charges `minutes` more and moves expires_at. */
json_t *bill_extend(struct db *db, const struct config *cfg, const char *account,
    const char *id, int minutes, struct err *e);

/* get_usage. */
json_t *bill_usage(struct db *db, const struct config *cfg, const char *account,
    const json_t *args, struct err *e);

#endif
