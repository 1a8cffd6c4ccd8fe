/* attempts.h - events counted against a limit in a sliding window
 * (att_): failed logins per e-mail and client address together, per
 * client address and per e-mail, sign-ups and mails per address and per
 * account, free credit grants per network and per domain, checkouts per
 * account. Rows live in auth_events; every aasd on the database counts
 * the same events. */
#ifndef AAS_ATTEMPTS_H
#define AAS_ATTEMPTS_H

#include <libpq-fe.h>

#include "base/db.h"
#include "base/err.h"

/* Subjects are "<kind>:<value>" and at most this long. */
#define ATT_SUBJECT_MAX 300

/* Serialises the transactions that count under `subject` until the
 * caller's transaction ends, so a check and the event it then records are
 * one step (two at once cannot both pass a limit). Subject locks come
 * before any row lock, and a login takes its e-mail's before its
 * client's; the one exception, grants' subjects, are only ever taken
 * with the account row locked first (account/users_grant.c). */
int att_lock(PGconn *c, const char *subject, struct err *e) AAS_MUST_CHECK;
/* Counts one event of `subject` now. */
int att_record(PGconn *c, const char *subject, struct err *e) AAS_MUST_CHECK;
/* 1 when `subject` had `max` or more events in the last `window_s`
 * seconds, with *retry_after_s the seconds until one of them leaves the
 * window; 0 when under the limit; -1 on a database error. */
int att_over(PGconn *c, const char *subject, int max, int window_s, long long *retry_after_s,
    struct err *e) AAS_MUST_CHECK;
/* Forgets the events of `subject` (a successful login clears its failures). */
int att_clear(PGconn *c, const char *subject, struct err *e) AAS_MUST_CHECK;
/* Takes back the newest event of `subject` (one counted ahead of time). */
int att_forget_one(PGconn *c, const char *subject, struct err *e) AAS_MUST_CHECK;
/* Fills `out` with "<kind>:<value>"; -1 when it does not fit. */
int att_subject(char *out, size_t n, const char *kind, const char *value);
/* A user-facing "in N minutes" / "in N seconds" for a retry delay. */
void att_retry_text(long long retry_after_s, char *out, size_t n);

#endif
