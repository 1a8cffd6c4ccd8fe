/* users.h - self-service accounts (user_): sign-up with an e-mail and a
 * password, e-mail verification (which grants the free credit, once per
 * account), login with limits and a lockout, password reset and change.
 * Passwords are argon2id (base/passwd.h), hashed outside any transaction;
 * mail goes through the outbox (account/mailq.h) in the transaction that
 * makes its link.
 *
 * Lock order (the money paths' order, docs/billing.md): the account row
 * first, then the e-mail link row, then ledger inserts. */
#ifndef AAS_USERS_H
#define AAS_USERS_H

#include "base/config.h"
#include "base/db.h"
#include "base/err.h"
#include "account/accounts.h"

#define USER_LINK_LEN 64 /* hex of 32 random bytes, in the mailed URL */
#define USER_EMAIL_MAX 254
#define USER_ADDR_MAX 64 /* a client address as text */

/* Normalises an address typed by a person (surrounding blanks dropped,
 * lower case) into out; ERR_INVALID (field "email") when it is not one. */
int user_email_norm(const char *in, char *out, size_t n, struct err *e) AAS_MUST_CHECK;

/* Creates an unverified account with a password and mails its
 * verification link. When the address has an account, nothing is made
 * and its owner is mailed a notice instead, with the same answer in the
 * same time (account_id is "" then; callers show one page for both and
 * log nobody in). ERR_INVALID (field "email" or "password"), ERR_LIMIT
 * (too many sign-ups from `addr`; the message says when to retry). */
int user_signup(struct db *db, const struct config *cfg, const char *email, const char *password,
    const char *addr, char account_id[ACCT_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* Follows a verification link: marks the address verified and grants the
 * free credit, once per address (*granted: 1 when this call did).
 * ERR_NOT_FOUND (no such link), ERR_CONFLICT (used already), ERR_TIMEOUT
 * (expired). */
int user_verify(struct db *db, const struct config *cfg, const char *token,
    char account_id[ACCT_ID_LEN + 1], int *granted, struct err *e) AAS_MUST_CHECK;
/* Mails a new verification link to a logged-in, unverified account. */
int user_resend(struct db *db, const struct config *cfg, const char *account, const char *addr,
    struct err *e) AAS_MUST_CHECK;
/* Checks a login. ERR_UNAUTHORIZED for a wrong address or password (the
 * same answer, in the same time), ERR_LIMIT when the address or the
 * client is locked out (the message says when to retry), ERR_FORBIDDEN
 * for a disabled account. */
int user_login(struct db *db, const struct config *cfg, const char *email, const char *password,
    const char *addr, char account_id[ACCT_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* Mails a reset link when the address has an account; says nothing
 * either way (the caller shows one message). ERR_LIMIT when `addr` asked
 * too often. */
int user_reset_request(struct db *db, const struct config *cfg, const char *email, const char *addr,
    struct err *e) AAS_MUST_CHECK;
/* 0 when a reset link is live (the form may be shown), else as user_verify. */
int user_reset_check(struct db *db, const char *token, struct err *e) AAS_MUST_CHECK;
/* 0 when a link of `purpose` ("verify", "email", "reset") is live,
 * without using it (a page shows the button that does); else as
 * user_verify. */
int user_link_check(struct db *db, const char *token, const char *purpose,
    struct err *e) AAS_MUST_CHECK;
/* What a reset form sends. */
struct user_reset {
	const char *token, *password;
	const char *addr; /* the client, for the hash turns */
	int revoke_keys;  /* revoke every API key of the account too */
};
/* Sets a new password through a reset link: verifies the address (the
 * mail arrived) and ends every dashboard session and every OAuth grant
 * of the account, and its API keys when rs->revoke_keys (the caller then
 * drops them from this process's key cache). */
int user_reset_confirm(struct db *db, const struct config *cfg, const struct user_reset *rs,
    char account_id[ACCT_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* Changes the password of a logged-in account after checking the old
 * one (user_check_password's limits; ERR_LIMIT when locked out); ends
 * every dashboard session and every OAuth grant of it (the caller opens a
 * new session); API keys stay. */
int user_password_change(struct db *db, const struct config *cfg, const char *account,
    const char *old_password, const char *new_password, const char *addr,
    struct err *e) AAS_MUST_CHECK;

/* Asks to move a logged-in account to `new_email`, after checking its
 * password: a link goes to the new address (the change happens when it is
 * followed) and a notice to the old one. ERR_INVALID ("current",
 * "email"), ERR_CONFLICT (the address has an account), ERR_LIMIT. */
int user_email_change_request(struct db *db, const struct config *cfg, const char *account,
    const char *password, const char *new_email, const char *addr, struct err *e) AAS_MUST_CHECK;
/* Follows the link of an address change: the account's address becomes
 * the new one, verified. As user_verify for the link; ERR_CONFLICT when
 * another account took the address meanwhile. */
int user_email_change_confirm(struct db *db, const struct config *cfg, const char *token,
    char account_id[ACCT_ID_LEN + 1], struct err *e) AAS_MUST_CHECK;
/* Deletes a logged-in account after checking its password: disabled
 * first (keys revoked, MCP sessions ended, and every aasd's reaper stops
 * and settles its sandboxes), then its personal data replaced: the
 * address becomes deleted-<id>@deleted.invalid, the password, links,
 * waiting mail, limit events and dashboard sessions go. The ledger and
 * the sandbox rows stay (no personal data; the money must add up). */
int user_delete(struct db *db, const struct config *cfg, const char *account, const char *password,
    const char *addr, struct err *e) AAS_MUST_CHECK;

#endif
