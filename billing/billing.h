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
 * minutes x price for sandbox `id` to the ledger. With too little credit:
 * ERR_PAYMENT stating balance, price and what the balance buys; nothing
 * is written. The caller records the price on the sandbox's row. */
int bill_charge_create(PGconn *c, const char *account, const char *id, const char *size,
    int minutes, int64_t price, struct err *e) AAS_MUST_CHECK;

/* Inside the extend transaction, once the caller has locked the account
 * and then the sandbox row and allowed `minutes` more: charges minutes x
 * price (the price recorded at create) to the ledger; the caller adds
 * them to the row. *charged is the cost and *balance the balance after it. With
 * too little credit: ERR_PAYMENT stating balance, cost and what the
 * balance buys; nothing is written. */
int bill_charge_extend(PGconn *c, const char *account, const char *id, int minutes, int64_t price,
    int64_t *charged, int64_t *balance, struct err *e) AAS_MUST_CHECK;

struct bill_settlement {
	int minutes_used;
	int64_t charged;
	int64_t refunded;
	int64_t balance;
	int already;           /* settled before this call */
	int64_t refund_posted; /* refund this call wrote to the ledger */
};

/* What a sandbox paid for and how long it ran: what a refund needs. */
struct bill_use {
	int paid_minutes;
	int64_t price;   /* per minute, recorded at create */
	int64_t ran_ms;  /* from ready to its end (or now) */
	int full_refund; /* it never ran, or the service lost it */
};

/* Inside the caller's transaction (account row locked first, then the
 * sandbox row): the minutes used and the refund of every whole paid minute
 * (of `minute_s` seconds) not used, posted to the ledger once (its key is
 * the sandbox). `account` NULL or "": a warm VM, nothing to post. Fills
 * minutes_used, refunded and refund_posted. */
int bill_refund_tx(PGconn *c, const char *account, const char *id, const struct bill_use *u,
    int minute_s, struct bill_settlement *out, struct err *e) AAS_MUST_CHECK;

/* Pauses (docs/billing.md#pause-and-resume), inside the caller's
 * transaction, the account row locked first. */
/* Refunds `minutes` of compute at `price` when pause number `pause` begins. */
int bill_pause_refund(PGconn *c, const char *account, const char *id, int pause, int minutes,
    int64_t price, int64_t *refund, struct err *e) AAS_MUST_CHECK;
/* Charges `minutes` of storage at `price` (`tag` makes its key), at most
 * the balance: it pays for time past and is never refused. *cost: what
 * was charged. */
int bill_charge_storage(PGconn *c, const char *account, const char *id, const char *tag,
    int64_t minutes, int64_t price, int64_t *cost, struct err *e) AAS_MUST_CHECK;
/* Charges resume number `resume`: `minutes` of compute at `price`.
 * ERR_PAYMENT stating the balance when it does not cover them. */
int bill_charge_resume(PGconn *c, const char *account, const char *id, int resume, int minutes,
    int64_t price, int64_t *cost, int64_t *balance, struct err *e) AAS_MUST_CHECK;
/* Gives back what resume number `resume` paid when it failed. */
int bill_resume_refund(PGconn *c, const char *account, const char *id, int resume, int minutes,
    int64_t amount, struct err *e) AAS_MUST_CHECK;
/* Snapshots (docs/billing.md#snapshots): storage for `minutes` at `price`
 * charged when snapshot `snap` is taken (ERR_PAYMENT when the balance does
 * not cover it), and `amount` for the `minutes` not begun given back when
 * it ends early. The account row locked first. */
int bill_charge_snapshot(PGconn *c, const char *account, const char *snap, int minutes,
    int64_t price, int64_t *cost, int64_t *balance, struct err *e) AAS_MUST_CHECK;
int bill_snapshot_refund(PGconn *c, const char *account, const char *snap, int minutes,
    int64_t amount, struct err *e) AAS_MUST_CHECK;

#endif
