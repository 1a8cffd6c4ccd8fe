/* settle.h - ending a sandbox's bill (settle_), once, by whoever gets
 * there first: destroy, expiry, a failed boot, a lost VM. */
#ifndef AAS_SETTLE_H
#define AAS_SETTLE_H

#include "base/db.h"
#include "base/err.h"
#include "billing/billing.h"
#include "sandbox/store.h"

/* In one transaction, taking the locks in the order every money path
 * takes them (account row, then sandbox row, then ledger): refunds the
 * whole paid minutes (of `minute_s` seconds) not used, all of them when
 * `full_refund`, and marks the row settled. A second call changes nothing
 * and reports the first settlement (out->already). */
int settle_sandbox(struct db *db, int minute_s, const char *id, int full_refund,
    struct bill_settlement *out, struct err *e) AAS_MUST_CHECK;

/* Ends a live row (store_conn_mark_ended: `state`, `end`, `reason`) and settles
 * it in the same transaction, so nobody sees it ended and unsettled. */
int settle_end(struct db *db, int minute_s, const char *id, const char *state, enum store_end end,
    const char *reason, int full_refund, struct bill_settlement *out, struct err *e) AAS_MUST_CHECK;

#endif
