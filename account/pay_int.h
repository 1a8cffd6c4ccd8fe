/* pay_int.h - what the payment files share (pay_). */
#ifndef AAS_PAY_INT_H
#define AAS_PAY_INT_H

#include <libpq-fe.h>

#include "account/pay.h"

/* Moves the money of a refund, dispute or reinstatement event `ev` of
 * the paid `checkout` (which credited `credited` micro-USD to
 * `account`), the first time the event is seen, inside the caller's
 * transaction with the account locked. A take-back never exceeds what
 * the checkout credited; what the balance cannot cover is owed
 * (accounts.payment_debt, a ledger row of 0 saying so) and the account
 * is disabled. */
int pay_back_apply(PGconn *c, const char *provider, const struct pay_event *ev, const char *account,
    const char *checkout, long long credited, struct err *e) AAS_MUST_CHECK;

#endif
