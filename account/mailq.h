/* mailq.h - the outbox of the service's mail (mailq_). A message is put
 * in the same transaction as what it announces (a verification link, a
 * reset link), so nothing is lost to a mail server outage; a thread in
 * each aasd sends what is due over SMTP (AAS_SMTP_URL), each message
 * claimed by one aasd at a time, and retries with a growing delay. */
#ifndef AAS_MAILQ_H
#define AAS_MAILQ_H

#include <jansson.h>
#include <libpq-fe.h>

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"

#define MAILQ_BODY_MAX 20000
#define MAILQ_SEND_TIMEOUT_S 20

/* Puts a message in the outbox (inside the caller's transaction).
 * `account` may be NULL. */
int mailq_put(PGconn *c, const char *account, const char *to, const char *subject, const char *body,
    struct err *e) AAS_MUST_CHECK;
/* Messages not sent yet, oldest first, bodies included (for an operator
 * without SMTP): [{id, to, subject, body, created_at, attempts, last_error}]. */
json_t *mailq_pending(struct db *db, int limit, struct err *e);
/* Sends due messages, at most `max`: *sent counts those the server took.
 * A message the server refused is tried again later. */
int mailq_send_due(struct db *db, const char *smtp_url, const char *from, int max, int *sent,
    struct err *e) AAS_MUST_CHECK;

/* The sending thread: every second it sends what is due (when
 * AAS_SMTP_URL is set) and, every ten minutes, deletes the rows whose
 * time is over (account/purge.h). */
struct mailq;
struct mailq *mailq_start(struct db *db, const struct config *cfg, struct err *e);
void mailq_stop(struct mailq *q);
/* Wakes the thread now (a message was just put). */
void mailq_poke(struct mailq *q);

#endif
