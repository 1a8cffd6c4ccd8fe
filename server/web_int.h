/* web_int.h - what the dashboard's files share (web_, page_). */
#ifndef AAS_WEB_INT_H
#define AAS_WEB_INT_H

#include <jansson.h>

#include "base/buf.h"
#include "base/ttlmap.h"
#include "server/http.h"
#include "service/app.h"
#include "account/websess.h"
#include "server/web.h"

#define WEB_PAGE_MAX (512 * 1024)
#define WEB_TOKEN_LEN 64 /* hex, the anonymous forms' token */

#define WEB_PAGES 26
#define WEB_STATIC_MAX 4

struct web_page;
struct web_route {
	struct web *w;
	const struct web_page *page;
};

struct web {
	struct app *app;
	struct mailq *mq;
	struct pty_hub *pty;
	struct web_route routes[WEB_PAGES];
	/* A session seen to resolve (hash of its id) -> its account, so its
	 * next pages take the account's turn on the worker pool. */
	struct ttl_map *owners;
	char static_paths[WEB_STATIC_MAX][64];
};

/* One request, on a worker thread. */
struct web_ctx {
	struct web *w;
	struct http_req *req;
	const struct config *cfg;
	char method[8];
	char addr[64]; /* the client, for limits */
	int secure;    /* https: cookies are __Host- and Secure */
	int logged_in;
	struct wsess sess;
	char sid[WSESS_ID_LEN + 1];         /* the session cookie, when logged in */
	char form_token[WEB_TOKEN_LEN + 1]; /* the anonymous forms' token */
	int form_token_new;                 /* set it as a cookie with the page */
	json_t *form;                       /* a POST's fields, or NULL */
	json_t *query;
	struct buf out;
	int page_open;
	char form_action[600]; /* another source forms may answer to (CSP) */
};

/* A client address as its limits count it: an IPv6 address becomes its
 * /64 ("2001:db8:1:2::/64"); IPv4 stays. */
void web_addr_group(char *addr, size_t n);
/* Fields of the POST form or the query; "" when absent. */
const char *web_field(const struct web_ctx *c, const char *name);
const char *web_qarg(const struct web_ctx *c, const char *name);
/* 1 when a POST carries the right CSRF token; else answers 403. */
int web_csrf_check(struct web_ctx *c);
/* Answers 303 to `location` (a path of this site). */
void web_redirect(struct web_ctx *c, const char *location);
/* Sets the session cookie (id) or clears it (NULL). */
void web_set_session_cookie(struct web_ctx *c, const char *id);
/* Dashboard pages; each answers. */
void web_dash_home(struct web_ctx *c);
void web_dash_keys(struct web_ctx *c);
void web_dash_revoke(struct web_ctx *c);
void web_dash_connect(struct web_ctx *c);
void web_dash_settings(struct web_ctx *c);
void web_dash_resend(struct web_ctx *c);
void web_dash_email(struct web_ctx *c);
void web_dash_delete(struct web_ctx *c);
void web_sbx_list(struct web_ctx *c);
void web_sbx_destroy(struct web_ctx *c);
void web_sbx_extend(struct web_ctx *c);
void web_sbx_terminal(struct web_ctx *c);
void web_usage_page(struct web_ctx *c);
void web_usage_csv(struct web_ctx *c);
/* The top-up form (or why there is none), inside a page. */
void web_pay_form(struct web_ctx *c);
void web_pay_checkout(struct web_ctx *c);
/* The provider's webhook route (ctx: the web). */
void web_pay_webhook(struct http_req *req, void *ctx);
/* OAuth: the authorization endpoint and consent page, connected apps. */
void web_oauth_authorize(struct web_ctx *c);
void web_oauth_apps(struct web_ctx *c);
void web_oauth_revoke(struct web_ctx *c);
/* Runs a tool as the session's account, as MCP and REST do; takes args. */
json_t *web_tool(struct web_ctx *c, const char *tool, json_t *args, struct err *e);

/* Pages: a buffer of HTML answered once whole. page_f formats like
 * printf with %s escaped for HTML, %S trusted HTML, %d int, %L long long,
 * %M micro-USD as dollars. */
void page_begin(struct web_ctx *c, const char *title);
void page_f(struct web_ctx *c, const char *fmt, ...);
/* The CSRF token of the page's forms, as a hidden input. */
void page_csrf(struct web_ctx *c);
/* A labelled input: name, label, type, autocomplete, value, hint (NULL),
 * error (NULL: none). */
void page_input(struct web_ctx *c, const char *name, const char *label, const char *type,
    const char *autocomplete, const char *value, const char *hint, const char *error);
void page_alert(struct web_ctx *c, const char *cls, const char *msg);
/* Ends the page and answers with `status`. */
void page_send(struct web_ctx *c, int status);
/* A whole page with one message and a link on. */
void page_message(struct web_ctx *c, int status, const char *title, const char *msg,
    const char *link, const char *link_text);
/* The headers every page has (CSP, framing, caching, referrer). */
void page_security_headers(struct http_req *req);
/* Lets the page's forms lead to `source` too (CSP form-action: a consent
 * form's answer redirects to the application); "" adds nothing. */
void page_form_action(struct web_ctx *c, const char *source);

#endif
