/* billing.h - what sandboxes cost (bill_): the charge at create, the
 * charge at extend and the settlement (refund of whole unused minutes) at
 * the end, each inside the caller's transaction. Amounts are micro-USD. */
#ifndef AAS_BILLING_H
#define AAS_BILLING_H

#include <stdint.h>

#include <libpq-fe.h>

#include "base/db.h"
#include "base/err.h"

/* Inside the create transaction (account row already locked): charges
 * minutes x price for the sandbox row `id` and records the price on it.
 * With too little credit: ERR_PAYMENT stating balance, price and what the
 * balance buys; nothing is written. */
int bill_charge_create(PGconn *c, const char *account, const char *id,
    const char *size, int minutes, int64_t price, struct err *e);

/* Inside the extend transaction, once the caller has locked the account
 * and then the sandbox row and allowed `minutes` more: charges minutes x
 * price (the price recorded at create) and adds them to the row's paid
 * minutes. *charged is the cost and *balance the balance after it. With
 * too little credit: ERR_PAYMENT stating balance, cost and what the
 * balance buys; nothing is written. */
int bill_charge_extend(PGconn *c, const char *account, const char *id, int minutes,
    int64_t price, int64_t *charged, int64_t *balance, struct err *e);

struct bill_settlement {
	int minutes_used;
	int64_t charged;
	int64_t refunded;
	int64_t balance;
	int already;           /* settled before this call */
	int64_t refund_posted; /* refund this call wrote to the ledger */
};

/* Inside the caller's transaction: settles sandbox `id` once, refunding
 * every whole paid minute (of `minute_s` seconds) not used, all of them
 * when `full_refund` (it never ran, or the service lost it). */
int bill_settle_tx(PGconn *c, int minute_s, const char *id, int full_refund,
    struct bill_settlement *out, struct err *e);

/* bill_settle_tx in a transaction of its own; counts the refund in the
 * metrics once it is committed. */
int bill_settle(struct db *db, int minute_s, const char *id, int full_refund,
    struct bill_settlement *out, struct err *e);

#endif
