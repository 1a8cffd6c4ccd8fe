/* pty_int.h - what the terminal route's files share (pty.c, its tickets,
 * routes and hub; pty_sess.c, a running session); not a public
 * interface. */
#ifndef AAS_PTY_INT_H
#define AAS_PTY_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "server/http.h"
#include "server/pty.h"
#include "server/pty_ticket.h"
#include "server/ws.h"
#include "account/accounts.h"

#define PTY_ID_MAX 64 /* longest sandbox id looked at */
#define PTY_SECRET_LEN 32

struct pty_sess {
	struct pty_hub *hub;
	struct pty_sess *next;
	char account[ACCT_ID_LEN + 1];
	char sandbox_id[PTY_ID_MAX + 1];
	unsigned rows, cols;
	struct guest_pty *g;
	int fd;
	struct http_upgrade *u;
	struct ws_rx *rx;
	atomic_int stop;
	_Atomic long long last_ms; /* last input or output (monotonic) */
	pthread_mutex_t wlock;     /* socket writes, and the end below */
	int end_code;              /* 0 until decided */
	char end_reason[WS_MAX_CONTROL - 1];
	int close_sent;
};

struct pty_hub {
	struct app *app;
	unsigned char secret[PTY_SECRET_LEN];
	pthread_mutex_t lock;
	pthread_cond_t gone;
	struct ptk_table *tickets; /* nonce -> account and sandbox, until used or expired */
	struct pty_sess *sessions;
	size_t n_open; /* sessions reserved or running */
	int stopping;
	struct http_route routes[2];
};

/* ---- pty_sess.c ---- */

/* Records why the session ends (the first reason wins) and stops it. */
void pty_sess_end(struct pty_sess *s, int code, const char *reason);
/* The upgrade's socket is the session's (an http_upgraded_fn, ctx the
 * session): starts its thread, or ends it at once. */
void pty_sess_upgraded(void *ctx, int fd, const char *extra, size_t extra_len,
    struct http_upgrade *u);
/* The upgrade never happened (ctx the session): its slot and its shell go. */
void pty_sess_drop(void *ctx);

#endif
