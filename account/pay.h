/* pay.h - buying credit through a payment provider (pay_). A provider
 * makes a checkout (a page of its own the user pays on) and later tells
 * aasd through a signed webhook that it was paid. Stripe Checkout is the
 * first provider (account/pay_stripe.c). Each event is recorded once by
 * its id, and each paid checkout credits the ledger once (idempotency key
 * "pay:<provider>:<checkout id>"), however often either is delivered. */
#ifndef AAS_PAY_H
#define AAS_PAY_H

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"
#include "account/accounts.h"

#define PAY_URL_MAX 1024
#define PAY_ID_MAX 255
#define PAY_TOLERANCE_S 300 /* how old a signed delivery may be */
#define PAY_MAX_USD 1000

struct pay_checkout {
	char id[PAY_ID_MAX + 1];
	char url[PAY_URL_MAX + 1]; /* where the user pays */
};

/* What an event asks of the ledger. */
enum pay_action {
	PAY_NONE,      /* recorded only */
	PAY_PAID,      /* a checkout was paid: credit it */
	PAY_REFUND,    /* its payment was refunded, `amount` in all so far */
	PAY_DISPUTE,   /* a dispute `ref` of `amount` opened (or its funds went) */
	PAY_REINSTATE, /* the funds of dispute `ref` came back */
};

struct pay_event {
	char id[PAY_ID_MAX + 1];
	char kind[101];
	char account[ACCT_ID_LEN + 1]; /* "" when the event names none */
	char checkout_id[PAY_ID_MAX + 1];
	char payment_intent[PAY_ID_MAX + 1]; /* the payment a refund or dispute names */
	char ref[PAY_ID_MAX + 1];            /* the charge or dispute id */
	long long amount;                    /* micro-USD */
	int paid;                            /* action is PAY_PAID */
	enum pay_action action;
};

struct pay_provider {
	const char *name;
	/* 1 when its settings are there. */
	int (*configured)(const struct config *cfg);
	/* A checkout of `usd` whole dollars for an account. */
	int (*checkout)(const struct config *cfg, const char *account, const char *email, int usd,
	    struct pay_checkout *out, struct err *e);
	/* Checks a webhook delivery's signature (and age, against `now`) and
	 * reads its event. ERR_UNAUTHORIZED for a bad or old signature,
	 * ERR_INVALID for a body that is not an event. */
	int (*parse)(const struct config *cfg, const char *signature, const char *body, size_t len,
	    long long now, struct pay_event *out, struct err *e);
};

extern const struct pay_provider pay_stripe;

/* 0 when the account may open another checkout: fewer than
 * AAS_CHECKOUTS_PER_HOUR made in the last hour (this one is counted) and
 * fewer than AAS_CHECKOUTS_OPEN unpaid in the last day; else ERR_LIMIT. */
int pay_checkout_allowed(struct db *db, const struct config *cfg, const char *account,
    struct err *e) AAS_MUST_CHECK;
/* Remembers a checkout made for an account, of `amount` micro-USD: only
 * such checkouts are ever credited. */
int pay_checkout_made(struct db *db, const struct pay_provider *p, const char *account,
    const struct pay_checkout *co, long long amount, struct err *e) AAS_MUST_CHECK;
/* Records the event and, when it says a checkout of this service was
 * paid (its account, its amount), credits that account once; *credited
 * is 1 when this delivery posted the credit. A refund or a dispute of a
 * paid checkout takes its amount back (at most what was credited), a
 * reinstated dispute gives it back (account/pay_back.c); a replayed
 * event changes nothing. Lock order: the account row, then the event
 * row, then the ledger. */
int pay_apply(struct db *db, const struct pay_provider *p, const struct pay_event *ev,
    int *credited, struct err *e) AAS_MUST_CHECK;

#endif
