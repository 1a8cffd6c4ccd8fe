/* websess.h - dashboard sessions (wsess_). A session id is 32 random
 * bytes shown once, as the browser's cookie, and stored as its SHA-256;
 * each session has a CSRF token every form of it must carry. A session
 * ends when unused for AAS_WEB_IDLE_S, AAS_WEB_ABSOLUTE_S after login, at
 * logout, on a password change or reset, and when its account is
 * disabled; an account keeps at most AAS_WEB_SESSIONS_PER_ACCOUNT. */
#ifndef AAS_WEBSESS_H
#define AAS_WEBSESS_H

#include <libpq-fe.h>

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"
#include "account/accounts.h"

#define WSESS_ID_LEN 64   /* hex of 32 random bytes */
#define WSESS_CSRF_LEN 64 /* hex of 32 random bytes */

struct wsess {
	char account_id[ACCT_ID_LEN + 1];
	char csrf[WSESS_CSRF_LEN + 1];
	char email[256];
	int verified;      /* the e-mail address is verified */
	long long balance; /* micro-USD */
};

/* Opens a session for an account that just proved its password (or its
 * e-mail link); ends the oldest beyond the per-account maximum. */
int wsess_create(struct db *db, const struct config *cfg, const char *account,
    char id[WSESS_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* The live session of a cookie value; ERR_UNAUTHORIZED when there is none
 * (unknown, ended, idle or too old, or its account disabled). Marks it
 * used (at most once a minute, to spare the database). */
int wsess_resolve(struct db *db, const struct config *cfg, const char *id, struct wsess *out,
    struct err *e) AAS_MUST_CHECK;
/* Ends one session (logout); no error when it is not live. */
int wsess_end(struct db *db, const char *id, struct err *e) AAS_MUST_CHECK;
/* Ends every session of an account, inside the caller's transaction
 * (password reset, account disabled). */
int wsess_end_account(PGconn *c, const char *account, struct err *e) AAS_MUST_CHECK;
/* 1 when the token a form carried is the session's (constant time). */
int wsess_csrf_ok(const struct wsess *s, const char *token);

#endif
