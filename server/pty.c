/* pty.c - terminals over WebSocket (see pty.h): the tickets, the two
 * routes, and the hub that counts and ends the sessions (a session
 * itself: pty_sess.c; what both share: server/pty_int.h).
 *
 * Tickets: "<expiry>.<nonce>.<mac>", the mac an HMAC-SHA256 of account,
 * sandbox, expiry and nonce under a secret drawn at random when the
 * process starts (so a restart voids them, and each aasd accepts only its
 * own). The nonce is also kept until it is used or expires, which makes a
 * ticket single use; at most PTY_TICKETS_MAX wait, PTY_TICKETS_PER_ACCOUNT
 * of one account and PTY_TICKETS_PER_SANDBOX of one sandbox (an account
 * over its share loses its own oldest, never another's: server/pty_ticket.h).
 * A ticket is never an API key: it opens this one route only. */
#include "server/pty.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "server/auth.h"
#include "server/pty_int.h"
#include "server/rest_query.h"
#include "service/app.h"
#include "sandbox/sandbox.h"
#include "vmm/guest.h"
#include "base/fmt.h"
#include "base/keys.h"

/* ---- tickets ---- */

/* The mac of a ticket in hex; -1 when the fields do not fit the text it
 * is made over. */
static int
ticket_mac(const struct pty_hub *p, const char *account, const char *sandbox_id, long long exp,
    const char *nonce, char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	char msg[256];

	if (fmt_buf(msg, sizeof(msg), "pty\n%s\n%s\n%lld\n%s", account, sandbox_id, exp, nonce) < 0)
		return -1;
	HMAC(EVP_sha256(), p->secret, PTY_SECRET_LEN, (const unsigned char *)msg, strlen(msg), mac,
	    &len);
	for (unsigned i = 0; i < 32; i++) {
		hex[2 * i] = digits[mac[i] >> 4];
		hex[2 * i + 1] = digits[mac[i] & 15];
	}
	hex[64] = '\0';
	return 0;
}

int
pty_ticket_issue(struct pty_hub *p, const char *account, const char *sandbox_id, long long now,
    char out[PTY_TICKET_MAX], struct err *e)
{
	char nonce[33], mac[65];
	long long exp = now + p->app->cfg.pty_ticket_ttl_s;

	if (key_random_hex(nonce, sizeof(nonce), 16) < 0) {
		err_set(e, ERR_INTERNAL, "no random bytes for a ticket");
		return -1;
	}
	if (ticket_mac(p, account, sandbox_id, exp, nonce, mac) < 0 ||
	    fmt_buf(out, PTY_TICKET_MAX, "%lld.%s.%s", exp, nonce, mac) < 0) {
		err_set(e, ERR_INTERNAL, "ticket fields too long");
		return -1;
	}
	return ptk_put(p->tickets, nonce, account, sandbox_id, exp, now, e);
}

int
pty_ticket_redeem(struct pty_hub *p, const char *ticket, const char *sandbox_id, long long now,
    char *account, size_t an, struct err *e)
{
	char nonce[33], mac[65], want[65], acct[ACCT_ID_LEN + 1], v[ACCT_ID_LEN + 1];
	const char *dot1, *dot2;
	long long exp;
	int live;

	dot1 = strchr(ticket, '.');
	dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	if (dot1 == NULL || dot2 == NULL || dot2 - dot1 - 1 != 32 || strlen(dot2 + 1) != 64 ||
	    dot1 - ticket > 19)
		goto refuse;
	{
		char num[20];
		if (fmt_buf(num, sizeof(num), "%.*s", (int)(dot1 - ticket), ticket) < 0 ||
		    rest_query_int(num, &exp) < 0)
			goto refuse;
	}
	if (fmt_buf(nonce, sizeof(nonce), "%.32s", dot1 + 1) < 0 ||
	    fmt_buf(mac, sizeof(mac), "%s", dot2 + 1) < 0 || exp < now)
		goto refuse;
	/* The account is not in the ticket: the nonce names the one it was
	 * issued to. */
	live = ptk_peek(p->tickets, nonce, sandbox_id, now, acct, sizeof(acct));
	if (!live)
		goto refuse;
	if (ticket_mac(p, acct, sandbox_id, exp, nonce, want) < 0 ||
	    CRYPTO_memcmp(want, mac, 64) != 0)
		goto refuse;
	live = ptk_take(p->tickets, nonce, sandbox_id, now, v, sizeof(v));
	if (!live)
		goto refuse; /* used meanwhile */
	if (fmt_buf(account, an, "%s", acct) < 0)
		goto refuse;
	return 0;
refuse:
	err_set(e, ERR_UNAUTHORIZED,
	    "ticket: not valid (forged, expired, used, or for another "
	    "sandbox)");
	return -1;
}

/* ---- routes ---- */

struct open_job {
	struct pty_hub *hub;
	char account[ACCT_ID_LEN + 1];
	char sandbox_id[PTY_ID_MAX + 1];
	char accept[WS_ACCEPT_LEN + 1];
	int websocket; /* the request asked for the upgrade properly */
	unsigned rows, cols;
};

/* The REST error body; a malformed sandbox id names nothing of the
 * caller's: 404, as on the other routes. */
static void
reply_err(struct http_req *req, const struct err *e)
{
	enum err_kind kind = e->kind;
	json_t *body;

	if (kind == ERR_INVALID && strcmp(e->field, "sandbox_id") == 0)
		kind = ERR_NOT_FOUND;
	body = json_pack("{s:{s:s, s:s}}", "error", "code", err_kind_name(kind), "message", e->msg);
	if (body && e->field[0])
		json_object_set_new(json_object_get(body, "error"), "field", json_string(e->field));
	http_reply_json(req, err_http_status(kind), body);
}

/* Counts a session against both caps, or replies 429 naming the one
 * reached. */
static int
reserve(struct pty_hub *p, struct http_req *req, const char *account)
{
	const struct config *cfg = &p->app->cfg;
	size_t mine = 0;
	const char *over = NULL;
	char msg[200];

	pthread_mutex_lock(&p->lock);
	for (struct pty_sess *s = p->sessions; s; s = s->next)
		mine += strcmp(s->account, account) == 0;
	if (p->n_open >= (size_t)cfg->max_pty)
		over = "AAS_MAX_PTY";
	else if (mine >= (size_t)cfg->max_pty_per_account)
		over = "AAS_MAX_PTY_PER_ACCOUNT";
	else
		p->n_open++;
	pthread_mutex_unlock(&p->lock);
	if (over == NULL)
		return 0;
	fmt_cut(msg, sizeof(msg), "too many terminal sessions open (%s = %d); close one first",
	    over, strcmp(over, "AAS_MAX_PTY") == 0 ? cfg->max_pty : cfg->max_pty_per_account);
	http_add_header(req, "Retry-After", "5");
	http_reply_error(req, 429, "busy", msg);
	return -1;
}

static void
open_work(struct http_req *req, void *arg)
{
	struct open_job *j = arg;
	struct pty_hub *p = j->hub;
	struct pty_sess *s = NULL;
	struct err e;

	err_clear(&e);
	if (p->app->sbx == NULL) {
		err_set(&e, ERR_UNAVAILABLE, "sandboxes are not available on this server");
		reply_err(req, &e);
		goto out;
	}
	if (!j->websocket) {
		/* The sandbox is looked up all the same: 404 before 426. */
		json_t *sb = sbx_get(p->app->sbx, j->account, j->sandbox_id, &e);
		if (sb == NULL) {
			reply_err(req, &e);
			goto out;
		}
		json_decref(sb);
		http_add_header(req, "Sec-WebSocket-Version", "13");
		http_reply_error(req, 426, "upgrade_required",
		    "this route is a WebSocket (Upgrade: websocket, Sec-WebSocket-Version: 13)");
		goto out;
	}
	if (reserve(p, req, j->account) < 0)
		goto out;
	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->rx = ws_rx_new(PTY_MAX_FRAME, PTY_MAX_MESSAGE)) == NULL) {
		err_set(&e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	pthread_mutex_init(&s->wlock, NULL);
	s->hub = p;
	s->fd = -1;
	if (fmt_err(&e, "account", s->account, sizeof(s->account), "%s", j->account) < 0 ||
	    fmt_err(&e, "sandbox_id", s->sandbox_id, sizeof(s->sandbox_id), "%s", j->sandbox_id) <
		0)
		goto fail;
	s->g = sbx_pty_open(p->app->sbx, j->account, j->sandbox_id, j->rows, j->cols, &e);
	if (s->g == NULL)
		goto fail;
	http_add_header(req, "Upgrade", "websocket");
	http_add_header(req, "Sec-WebSocket-Accept", j->accept);
	http_reply_upgrade(req, pty_sess_upgraded, s, pty_sess_drop);
	goto out;
fail:
	if (s && s->rx)
		pty_sess_drop(s);
	else {
		free(s);
		pthread_mutex_lock(&p->lock);
		p->n_open--;
		pthread_mutex_unlock(&p->lock);
	}
	reply_err(req, &e);
out:
	free(j);
}

static int
query_dim(const json_t *q, const char *name, unsigned def, unsigned *out, struct err *e)
{
	const char *v = json_string_value(json_object_get(q, name));
	long long n;

	*out = def;
	if (v == NULL)
		return 0;
	if (rest_query_int(v, &n) < 0 || n < 1 || n > GUEST_PTY_MAX_DIM) {
		err_set_field(e, name, "%s: an integer from 1 to %d", name, GUEST_PTY_MAX_DIM);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

static int
sandbox_arg(struct http_req *req, char *out, size_t n, struct err *e)
{
	if (http_path_arg(req, 0, out, n) < 0) {
		err_set(e, ERR_NOT_FOUND, "sandbox_id: no such sandbox");
		return -1;
	}
	return 0;
}

/* GET /v1/sandboxes/{sandbox_id}/pty */
static void
handle_open(struct http_req *req, void *ctx)
{
	struct pty_hub *p = ctx;
	const char *up = http_header(req, "Upgrade");
	const char *ver = http_header(req, "Sec-WebSocket-Version");
	const char *ticket;
	struct open_job *j;
	json_t *q = NULL;
	struct err e;

	err_clear(&e);
	if (strcmp(http_method(req), "GET") != 0) {
		http_add_header(req, "Allow", "GET");
		http_reply_error(req, 405, "method_not_allowed", "use GET with Upgrade: websocket");
		return;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	j->hub = p;
	if (sandbox_arg(req, j->sandbox_id, sizeof(j->sandbox_id), &e) < 0)
		goto refuse;
	if ((q = rest_query_parse(http_query(req), &e)) == NULL)
		goto refuse;
	ticket = json_string_value(json_object_get(q, "ticket"));
	if (http_account(req) != NULL) {
		if (fmt_err(&e, "account", j->account, sizeof(j->account), "%s",
			http_account(req)) < 0)
			goto refuse;
	} else if (ticket == NULL) {
		auth_reply_unauthorized(req, AUTH_NO_KEY, NULL, p->app->cfg.dashboard_url);
		goto done;
	} else if (pty_ticket_redeem(p, ticket, j->sandbox_id, (long long)time(NULL), j->account,
		       sizeof(j->account), &e) < 0) {
		goto refuse;
	}
	if (query_dim(q, "rows", PTY_DEFAULT_ROWS, &j->rows, &e) < 0 ||
	    query_dim(q, "cols", PTY_DEFAULT_COLS, &j->cols, &e) < 0)
		goto refuse;
	j->websocket = up != NULL && strcasecmp(up, "websocket") == 0 && ver != NULL &&
	    strcmp(ver, "13") == 0;
	if (j->websocket && ws_accept(http_header(req, "Sec-WebSocket-Key"), j->accept) < 0) {
		err_set(&e, ERR_INVALID, "Sec-WebSocket-Key: 16 bytes in base64");
		goto refuse;
	}
	json_decref(q);
	auth_defer(req, open_work, j, free);
	return;
refuse:
	reply_err(req, &e);
done:
	json_decref(q);
	free(j);
}

struct ticket_job {
	struct pty_hub *hub;
	char account[ACCT_ID_LEN + 1];
	char sandbox_id[PTY_ID_MAX + 1];
};

static void
ticket_work(struct http_req *req, void *arg)
{
	struct ticket_job *j = arg;
	char ticket[PTY_TICKET_MAX];
	json_t *sb = NULL;
	struct err e;

	err_clear(&e);
	if (j->hub->app->sbx == NULL) {
		err_set(&e, ERR_UNAVAILABLE, "sandboxes are not available on this server");
		goto fail;
	}
	/* Only for the caller's own sandbox: 404 otherwise. */
	if ((sb = sbx_get(j->hub->app->sbx, j->account, j->sandbox_id, &e)) == NULL)
		goto fail;
	if (pty_ticket_issue(j->hub, j->account, j->sandbox_id, (long long)time(NULL), ticket, &e) <
	    0)
		goto fail;
	http_add_header(req, "Cache-Control", "no-store");
	http_reply_json(req, 201,
	    json_pack("{s:s, s:i}", "ticket", ticket, "expires_in",
		j->hub->app->cfg.pty_ticket_ttl_s));
	goto out;
fail:
	if (e.kind == ERR_INVALID)
		e.kind = ERR_NOT_FOUND; /* a malformed id names nothing of yours */
	reply_err(req, &e);
out:
	json_decref(sb);
	free(j);
}

/* POST /v1/sandboxes/{sandbox_id}/pty/ticket */
static void
handle_ticket(struct http_req *req, void *ctx)
{
	struct ticket_job *j;
	struct err e;

	err_clear(&e);
	if (strcmp(http_method(req), "POST") != 0) {
		http_add_header(req, "Allow", "POST");
		http_reply_error(req, 405, "method_not_allowed", "use POST");
		return;
	}
	if (http_account(req) == NULL) {
		auth_reply_unauthorized(req, AUTH_NO_KEY, NULL,
		    ((struct pty_hub *)ctx)->app->cfg.dashboard_url);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	j->hub = ctx;
	if (fmt_err(&e, "account", j->account, sizeof(j->account), "%s", http_account(req)) < 0 ||
	    sandbox_arg(req, j->sandbox_id, sizeof(j->sandbox_id), &e) < 0) {
		reply_err(req, &e);
		free(j);
		return;
	}
	auth_defer(req, ticket_work, j, free);
}

/* A key sent is checked before anything else; the terminal route also
 * takes a ticket instead. */
static enum http_key_need
head_open(struct http_req *req, void *ctx)
{
	(void)ctx;
	if (strcmp(http_method(req), "GET") != 0) {
		http_add_header(req, "Allow", "GET");
		http_reply_error(req, 405, "method_not_allowed", "use GET with Upgrade: websocket");
		return HTTP_KEY_REPLIED;
	}
	return HTTP_KEY_OPTIONAL;
}

static enum http_key_need
head_ticket(struct http_req *req, void *ctx)
{
	(void)ctx;
	if (strcmp(http_method(req), "POST") != 0) {
		http_add_header(req, "Allow", "POST");
		http_reply_error(req, 405, "method_not_allowed", "use POST");
		return HTTP_KEY_REPLIED;
	}
	return HTTP_KEY_REQUIRED;
}

size_t
pty_routes(struct pty_hub *p, struct http_route *out, size_t max)
{
	if (max < 2)
		return 0;
	out[0] = p->routes[0];
	out[1] = p->routes[1];
	return 2;
}

struct pty_hub *
pty_new(struct app *app, struct err *e)
{
	struct pty_hub *p = calloc(1, sizeof(*p));

	if (p == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	p->app = app;
	if (RAND_bytes(p->secret, sizeof(p->secret)) != 1 ||
	    (p->tickets = ptk_new(PTY_TICKETS_MAX, PTY_TICKETS_PER_ACCOUNT,
		 PTY_TICKETS_PER_SANDBOX)) == NULL) {
		err_set(e, ERR_INTERNAL, "pty: no ticket secret or table");
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->gone, NULL);
	p->routes[0] = (struct http_route){ .path = "/v1/sandboxes/{sandbox_id}/pty",
		.handler = handle_open,
		.ctx = p,
		.head = head_open };
	p->routes[1] = (struct http_route){ .path = "/v1/sandboxes/{sandbox_id}/pty/ticket",
		.handler = handle_ticket,
		.ctx = p,
		.head = head_ticket };
	return p;
}

void
pty_stop(struct pty_hub *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	for (struct pty_sess *s = p->sessions; s; s = s->next)
		pty_sess_end(s, WS_CLOSE_GOING_AWAY, "server stopping");
	while (p->sessions != NULL)
		pthread_cond_wait(&p->gone, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

void
pty_free(struct pty_hub *p)
{
	if (p == NULL)
		return;
	pty_stop(p);
	ptk_free(p->tickets);
	pthread_cond_destroy(&p->gone);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
