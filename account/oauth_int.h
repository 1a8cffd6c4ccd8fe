/* oauth_int.h - what the pieces of the OAuth module (account/oauth*.c)
 * share inside it: the account's OAuth lock, its grant rows, and issuing
 * a grant's tokens. Each runs on a transaction's connection, in the lock
 * order of account/oauth.h. */
#ifndef AAS_OAUTH_INT_H
#define AAS_OAUTH_INT_H

#include <libpq-fe.h>

#include "account/oauth.h"

#define OAUTH_GRANT_ID_MAX 64 /* a grant id's buffer (a UUID, with room) */

/* Takes the account's advisory lock ("oauth:<account>"), held to the end
 * of the transaction, so its grants are counted and changed one at a time. */
int oauth_account_lock(PGconn *c, const char *account_id, struct err *e) AAS_MUST_CHECK;
/* How many live grants the account has for clients other than client_id. */
int oauth_grants_other(PGconn *c, const char *account_id, const char *client_id, long long *n,
    struct err *e) AAS_MUST_CHECK;

/* A grant about to be made: the account, the client, and what it may use. */
struct oauth_grant_req {
	const char *account_id, *client_id, *client_name, *resource, *scope;
};
/* Makes the grant in place of the account's live one with the client (one
 * grant per account and client): its id in `grant`. ERR_INVALID with
 * "invalid_grant" when the account is disabled or already has `max` grants
 * with other clients. */
int oauth_grant_new(PGconn *c, const struct oauth_grant_req *g, int max,
    char grant[OAUTH_GRANT_ID_MAX], struct err *e) AAS_MUST_CHECK;
/* Revokes a live grant for `reason` (revoke_reason); nothing when it is
 * not live. */
int oauth_grant_end(PGconn *c, const char *grant_id, const char *reason,
    struct err *e) AAS_MUST_CHECK;

/* A new access and refresh token under the grant into *out; the grant's
 * expired tokens, and those past what it keeps, go. */
int oauth_tokens_issue(PGconn *c, const struct config *cfg, const char *grant_id,
    const char *resource, const char *scope, struct oauth_tokens *out,
    struct err *e) AAS_MUST_CHECK;

#endif
