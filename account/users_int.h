/* users_int.h - what the account files share (user_): links, limits,
 * locks and password checks. */
#ifndef AAS_USERS_INT_H
#define AAS_USERS_INT_H

#include <libpq-fe.h>

#include "base/keys.h"
#include "base/passwd.h"
#include "account/users.h"

void user_params(const struct config *cfg, struct pw_params *p);
/* A new single-use link of `purpose` for the account (token into
 * `token`, its URL into `url`), valid ttl_s; `new_email` for "email". */
int user_link_new(PGconn *c, const struct config *cfg, const char *account, const char *purpose,
    int ttl_s, const char *new_email, char token[USER_LINK_LEN + 1], char *url, size_t un,
    struct err *e) AAS_MUST_CHECK;
void user_money_text(long long micro, char *out, size_t n);
/* ERR_LIMIT ("Too many <what>. Try again in ...") when `kind:value` had
 * `max` events in `window_s`; else counts one more. */
/* 1 and the id of the live account whose address is `email` (lower
 * case), 0 when there is none, -1 with `e` set. */
int user_account_of(PGconn *c, const char *email, char account[ACCT_ID_LEN + 1],
    struct err *e) AAS_MUST_CHECK;
int user_take_turn(PGconn *c, const char *kind, const char *value, int max, int window_s,
    const char *what, struct err *e) AAS_MUST_CHECK;
/* The account of a link of `purpose`, read without a lock. */
int user_link_account(PGconn *c, const char *hash, const char *purpose, char *account,
    struct err *e) AAS_MUST_CHECK;
/* With the account locked: locks the link, checks it is live; `use`
 * marks it used. */
int user_link_take(PGconn *c, const char *hash, int use, struct err *e) AAS_MUST_CHECK;
int user_lock_account(PGconn *c, const char *account, struct err *e) AAS_MUST_CHECK;
int user_token_hash(const char *token, char hash[KEY_HASH_HEX_LEN + 1],
    struct err *e) AAS_MUST_CHECK;
/* Checks a logged-in account's password from client `addr`, counted
 * and limited as a login (its address's failures and the client's):
 * ERR_INVALID on field "current" when wrong, ERR_LIMIT when locked out
 * (the right password too, until the window passes) or when the account
 * or client holds its share of the hash turns; its address into email. */
int user_check_password(struct db *db, const struct config *cfg, const char *account,
    const char *password, const char *addr, char *email, size_t n, struct err *e) AAS_MUST_CHECK;
/* Names the hash turns of `account` (may be NULL) and client `addr`
 * (pw_who), in the caller's buffers; -1 when a name does not fit them. */
int user_who(struct pw_who *who, char *acct, size_t an, char *client, size_t cn,
    const char *account, const char *addr, struct err *e) AAS_MUST_CHECK;

/* Grants the free credit once per mailbox (the account's address now,
 * normalised), inside the caller's transaction with the account locked;
 * *granted 1 when this call posted it, 0 when the mailbox had it, -1
 * when it is withheld: AAS_FREE_GRANTS_PER_NETWORK (the sign-up's) or
 * AAS_FREE_GRANTS_PER_DOMAIN (not for shared mail providers) were given
 * in the last day. */
int user_grant_free(PGconn *c, const struct config *cfg, const char *account, int *granted,
    struct err *e) AAS_MUST_CHECK;
/* The mailbox an address names, for counting grants: lower case, no
 * +tag, and for gmail no dots in the local part (googlemail is gmail);
 * -1 when it does not fit `n` bytes. */
int user_email_canon(const char *email, char *out, size_t n, struct err *e) AAS_MUST_CHECK;
/* The network a client address counts under for grants: IPv4 /24, IPv6
 * /48 (any other text as it is); -1 when it does not fit `n` bytes. */
int user_signup_net(const char *addr, char *out, size_t n, struct err *e) AAS_MUST_CHECK;
/* A sign-up with an address that has an account: mails its owner a
 * notice (quietly nothing over the account's mail allowance), in the
 * sign-up's transaction. */
int user_signup_taken(PGconn *c, const struct config *cfg, const char *email,
    struct err *e) AAS_MUST_CHECK;
/* Marks every unused reset and address-change link of the account used
 * (its password or address changed: they were asked for under the old). */
int user_links_void(PGconn *c, const char *account, struct err *e) AAS_MUST_CHECK;

/* Ends every live OAuth grant of the account (its access and refresh
 * tokens with it), in the caller's transaction. */
int user_grants_end(PGconn *c, const char *account, struct err *e) AAS_MUST_CHECK;
/* Revokes every live API key of the account (*n: how many; may be NULL),
 * notifying every aasd, in the caller's transaction. */
int user_keys_end(PGconn *c, const char *account, long *n, struct err *e) AAS_MUST_CHECK;

#endif
