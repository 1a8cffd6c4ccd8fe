/* pty.h - terminals over WebSocket (pty_): GET /v1/sandboxes/{id}/pty
 * upgrades to a WebSocket (server/ws.h) relayed to a login shell on a
 * terminal in the sandbox, and POST /v1/sandboxes/{id}/pty/ticket issues
 * the single-use ticket a browser, which cannot set headers, opens it
 * with. Each session runs on two threads of its own (never an HTTP or
 * worker thread), bounded by AAS_MAX_PTY and AAS_MAX_PTY_PER_ACCOUNT. */
#ifndef AAS_PTY_H
#define AAS_PTY_H

#include <stddef.h>

#include "base/err.h"
#include "server/http.h"

#define PTY_TICKETS_MAX 4096        /* tickets issued and not yet used or expired */
#define PTY_TICKETS_PER_ACCOUNT 32  /* of those, one account's */
#define PTY_TICKETS_PER_SANDBOX 8   /* and one sandbox's */
#define PTY_MAX_FRAME (64u << 10)   /* largest client frame payload */
#define PTY_MAX_MESSAGE (64u << 10) /* largest client message */
#define PTY_DEFAULT_ROWS 24
#define PTY_DEFAULT_COLS 80
#define PTY_ROUTES 2 /* what pty_routes gives */

struct app;
struct pty_hub;

struct pty_hub *pty_new(struct app *app, struct err *e);
/* Closes every running session and waits for their threads; sessions
 * upgraded later close at once. Before the HTTP server stops (their
 * sockets are its). NULL is fine. */
void pty_stop(struct pty_hub *p);
/* After the HTTP server stopped (upgrades it never made drop their
 * slots then). NULL is fine. */
void pty_free(struct pty_hub *p);

/* The two routes (their ctx is the hub), for the front end's table;
 * they go before the REST routes. */
size_t pty_routes(struct pty_hub *p, struct http_route *out, size_t max);

/* Closes the sessions of a sandbox that ended, or of an account that was
 * disabled (from the app hooks; they do not wait). */
void pty_close_sandbox(struct pty_hub *p, const char *sandbox_id);
void pty_close_account(struct pty_hub *p, const char *account_id);

/* Tickets, exposed for unit tests: a ticket for (account, sandbox) valid
 * for ttl_s seconds from `now` (unix seconds), and its one redemption: 0
 * with the account filled, or -1 (ERR_UNAUTHORIZED) when it is forged,
 * expired, used, or for another sandbox. */
#define PTY_TICKET_MAX 160
int pty_ticket_issue(struct pty_hub *p, const char *account, const char *sandbox_id, long long now,
    char out[PTY_TICKET_MAX], struct err *e) AAS_MUST_CHECK;
int pty_ticket_redeem(struct pty_hub *p, const char *ticket, const char *sandbox_id, long long now,
    char *account, size_t an, struct err *e) AAS_MUST_CHECK;

#endif
