/* pty_ticket.h - the table of terminal tickets waiting to be used (ptk_):
 * nonce -> (account, sandbox, expiry), bounded in all, per account and
 * per sandbox, so one account minting tickets in a loop pushes out only
 * its own. Thread-safe (one mutex). */
#ifndef AAS_PTY_TICKET_H
#define AAS_PTY_TICKET_H

#include <stddef.h>

#include "base/err.h"

#define PTK_NONCE_LEN 32
#define PTK_ACCOUNT_MAX 36
#define PTK_SANDBOX_MAX 64

struct ptk_table;

/* At most `max` tickets, `per_account` of one account and `per_sandbox`
 * of one sandbox (each at least 1). NULL when out of memory. */
struct ptk_table *ptk_new(size_t max, size_t per_account, size_t per_sandbox);
/* NULL is fine. */
void ptk_free(struct ptk_table *t);

/* Keeps a ticket until `expires` (unix seconds; expired once now passes
 * it). Expired tickets go first; an account (or sandbox) at its share
 * loses its own oldest ticket; a table full of other accounts' live
 * tickets refuses with ERR_LIMIT, it never drops theirs. */
int ptk_put(struct ptk_table *t, const char *nonce, const char *account, const char *sandbox,
    long long expires, long long now, struct err *e) AAS_MUST_CHECK;
/* 1 and the account filled (an bytes) when a live ticket has `nonce`
 * and was issued for `sandbox`; 0 otherwise. ptk_take also removes it
 * (so only one caller gets 1). */
int ptk_peek(struct ptk_table *t, const char *nonce, const char *sandbox, long long now,
    char *account, size_t an);
int ptk_take(struct ptk_table *t, const char *nonce, const char *sandbox, long long now,
    char *account, size_t an);
/* Tickets held, and those of one account (for tests). */
size_t ptk_count(struct ptk_table *t, const char *account);

#endif
