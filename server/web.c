/* web.c - the dashboard's routes, sessions, CSRF and the pages of
 * signing up, logging in and e-mail links (web_). Handlers run on the
 * HTTP thread only to hand the request to a worker, queued under the
 * client's address so one client's slow password hashes never delay
 * another's. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/embed.h"
#include "base/fmt.h"
#include "base/keys.h"
#include "base/log.h"
#include "server/rest_query.h"
#include "server/web_int.h"
#include "account/accounts.h"
#include "account/mailq.h"
#include "account/users.h"

#define COOKIE_SESSION "aas_session"
#define COOKIE_FORM "aas_form"
#define WEB_OWNERS_MAX 10000 /* sessions whose account is remembered */
#define WEB_OWNERS_TTL_S 600

const char *
web_field(const struct web_ctx *c, const char *name)
{
	const char *v = c->form ? json_string_value(json_object_get(c->form, name)) : NULL;

	return v ? v : "";
}

const char *
web_qarg(const struct web_ctx *c, const char *name)
{
	const char *v = c->query ? json_string_value(json_object_get(c->query, name)) : NULL;

	return v ? v : "";
}

/* The value of cookie `name` (with the __Host- prefix under https) into
 * out; -1 when absent or too long. */
static int
cookie_get(const struct web_ctx *c, const char *name, char *out, size_t n)
{
	const char *h = http_header(c->req, "Cookie");
	char full[64];
	size_t fl;

	if (fmt_buf(full, sizeof(full), "%s%s", c->secure ? "__Host-" : "", name) < 0)
		return -1;
	fl = strlen(full);
	while (h && *h) {
		const char *end = strchr(h, ';');
		size_t len;

		while (*h == ' ')
			h++;
		len = end ? (size_t)(end - h) : strlen(h);
		if (len > fl && strncmp(h, full, fl) == 0 && h[fl] == '=') {
			len -= fl + 1;
			if (len >= n)
				return -1;
			memcpy(out, h + fl + 1, len);
			out[len] = '\0';
			return 0;
		}
		h = end ? end + 1 : NULL;
	}
	return -1;
}

static void
cookie_set(struct web_ctx *c, const char *name, const char *value, int max_age, const char *same)
{
	char v[256];

	/* A cookie that does not fit is not sent: the page goes on without it. */
	if (fmt_buf(v, sizeof(v), "%s%s=%s; Path=/; HttpOnly; SameSite=%s; Max-Age=%d%s",
		c->secure ? "__Host-" : "", name, value ? value : "", same, value ? max_age : 0,
		c->secure ? "; Secure" : "") < 0) {
		log_error("web: cookie %s too long; not set", name);
		return;
	}
	http_add_header(c->req, "Set-Cookie", v);
}

void
web_set_session_cookie(struct web_ctx *c, const char *id)
{
	/* Lax: a link from a mail or another site arrives logged in, but no
	 * other site's form posts with the cookie. */
	cookie_set(c, COOKIE_SESSION, id, c->cfg->web_absolute_s, "Lax");
}

void
web_redirect(struct web_ctx *c, const char *location)
{
	page_security_headers(c->req);
	http_add_header(c->req, "Location", location);
	http_reply_raw(c->req, 303, "text/plain; charset=utf-8", "See Other\n", 10);
}

static int
same_origin(const struct web_ctx *c, const char *origin)
{
	const char *host = http_header(c->req, "Host");
	const char *o = strstr(origin, "://");

	if (strcmp(origin, c->cfg->public_url) == 0)
		return 1;
	return o != NULL && host != NULL && strcasecmp(o + 3, host) == 0 &&
	    (strncmp(origin, "http://", 7) == 0 || strncmp(origin, "https://", 8) == 0);
}

int
web_csrf_check(struct web_ctx *c)
{
	const char *origin = http_header(c->req, "Origin");
	const char *tok = web_field(c, "csrf");
	int ok;

	/* A browser sends Origin on a POST: only this service's own passes
	 * (AAS_PUBLIC_URL, or the host the request came to). */
	if (origin && !same_origin(c, origin))
		ok = 0;
	else if (c->logged_in)
		ok = wsess_csrf_ok(&c->sess, tok);
	else
		ok = strlen(tok) == WEB_TOKEN_LEN && key_hash_equal(tok, c->form_token) &&
		    !c->form_token_new;
	if (!ok)
		page_message(c, 403, "Form expired",
		    "This form was not sent from this site's current page (its security token is "
		    "missing or wrong). Go back, reload the page and send it again.",
		    NULL, NULL);
	return ok;
}

static void
signup_form(struct web_ctx *c, const struct err *e, int status)
{
	const char *ef = e && strcmp(e->field, "email") == 0 ? e->msg : NULL;
	const char *pf = e && strcmp(e->field, "password") == 0 ? e->msg : NULL;

	page_begin(c, "Create your account");
	page_f(c,
	    "<p>New accounts get %M of free credit once the e-mail address is verified. No "
	    "card needed.</p>",
	    c->cfg->free_credit);
	if (e && !ef && !pf)
		page_alert(c, "error", e->msg);
	page_f(c, "<form method=\"post\" action=\"/signup\" novalidate>");
	page_csrf(c);
	page_input(c, "email", "E-mail address", "email", "email", web_field(c, "email"), NULL, ef);
	page_input(c, "password", "Password", "password", "new-password", "",
	    "At least 10 characters; a few words make a good one.", pf);
	page_f(c,
	    "<button type=\"submit\">Sign up</button></form>"
	    "<p>Have an account? <a href=\"/login\">Log in</a>.</p>");
	page_send(c, status);
}

/* The one answer to a sign-up, whether or not the address had an
 * account: nobody is logged in, the mail tells the rest. */
static void
signup_sent(struct web_ctx *c)
{
	page_message(c, 200, "Check your mail",
	    "We sent a mail to the address you gave: open its link to verify the address (and "
	    "receive the free credit). Log in with your e-mail address and password meanwhile.",
	    "/login", "Log in");
}

static void
signup(struct web_ctx *c)
{
	char account[ACCT_ID_LEN + 1];
	struct err e;

	if (strcmp(c->method, "POST") != 0) {
		signup_form(c, NULL, 200);
		return;
	}
	if (!web_csrf_check(c))
		return;
	err_clear(&e);
	if (user_signup(c->w->app->db, c->cfg, web_field(c, "email"), web_field(c, "password"),
		c->addr, account, &e) < 0) {
		signup_form(c, &e, err_http_status(e.kind));
		return;
	}
	mailq_poke(c->w->mq);
	if (account[0])
		log_info("web: account %s signed up", account);
	signup_sent(c);
}

/* Where to go after logging in: an authorization request waiting for
 * it, else the dashboard. Only that one local path is followed. */
static const char *
login_next(const struct web_ctx *c)
{
	const char *next = strcmp(c->method, "POST") == 0 ? web_field(c, "next") :
							    web_qarg(c, "next");

	if (strncmp(next, "/oauth/authorize?", 17) != 0 || strlen(next) > 4096)
		return "";
	for (const char *p = next; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 127 || *p == '\\')
			return "";
	return next;
}

static void
login_form(struct web_ctx *c, const struct err *e, int status)
{
	page_begin(c, "Log in");
	if (*login_next(c))
		page_alert(c, "notice", "Log in to connect the application that sent you here.");
	if (e)
		page_alert(c, "error", e->msg);
	page_f(c, "<form method=\"post\" action=\"/login\" novalidate>");
	page_csrf(c);
	if (*login_next(c))
		page_f(c, "<input type=\"hidden\" name=\"next\" value=\"%s\">", login_next(c));
	page_input(c, "email", "E-mail address", "email", "username", web_field(c, "email"), NULL,
	    NULL);
	page_input(c, "password", "Password", "password", "current-password", "", NULL, NULL);
	page_f(c,
	    "<button type=\"submit\">Log in</button></form>"
	    "<p><a href=\"/reset\">Forgot your password?</a> · "
	    "<a href=\"/signup\">Create an account</a></p>");
	page_send(c, status);
}

static void
login(struct web_ctx *c)
{
	char account[ACCT_ID_LEN + 1], sid[WSESS_ID_LEN + 1];
	struct err e;

	if (strcmp(c->method, "POST") != 0) {
		if (c->logged_in) {
			web_redirect(c, *login_next(c) ? login_next(c) : "/dashboard");
			return;
		}
		login_form(c, NULL, 200);
		return;
	}
	if (!web_csrf_check(c))
		return;
	err_clear(&e);
	if (user_login(c->w->app->db, c->cfg, web_field(c, "email"), web_field(c, "password"),
		c->addr, account, &e) < 0) {
		login_form(c, &e, err_http_status(e.kind));
		return;
	}
	if (wsess_create(c->w->app->db, c->cfg, account, sid, &e) < 0) {
		page_message(c, 503, "Log in", "The service could not log you in now; try again.",
		    "/login", "Log in");
		return;
	}
	if (c->logged_in)
		err_ignore(wsess_end(c->w->app->db, c->sid, &e));
	web_set_session_cookie(c, sid);
	web_redirect(c, *login_next(c) ? login_next(c) : "/dashboard");
}

static void
logout(struct web_ctx *c)
{
	struct err e;

	if (strcmp(c->method, "POST") != 0) {
		web_redirect(c, c->logged_in ? "/dashboard" : "/login");
		return;
	}
	if (!c->logged_in) {
		web_redirect(c, "/login");
		return;
	}
	if (!web_csrf_check(c))
		return;
	err_clear(&e);
	err_ignore(wsess_end(c->w->app->db, c->sid, &e));
	web_set_session_cookie(c, NULL);
	c->logged_in = 0;
	page_message(c, 200, "Logged out", "You are logged out.", "/login", "Log in again");
}

static int
link_status(const struct err *e)
{
	switch (e->kind) {
	case ERR_NOT_FOUND:
		return 404;
	case ERR_CONFLICT:
		return 409;
	case ERR_TIMEOUT:
		return 410;
	default:
		return err_http_status(e->kind);
	}
}

/* The code of an e-mail link: the form's on a POST, the URL's on a GET. */
static const char *
link_code(const struct web_ctx *c)
{
	return strcmp(c->method, "POST") == 0 ? web_field(c, "code") : web_qarg(c, "code");
}

/* A GET of an e-mail link changes nothing (mail scanners fetch links):
 * when the link is live, a page with one button that POSTs it, with the
 * form token. 1 when the caller goes on (a POST with its token); 0 when
 * this answered. */
static int
link_button(struct web_ctx *c, const char *purpose, const char *title, const char *failed,
    const char *what, const char *button)
{
	const char *action = strcmp(purpose, "verify") == 0 ? "/verify" : "/email/confirm";
	struct err e;

	if (strcmp(c->method, "POST") == 0)
		return web_csrf_check(c);
	err_clear(&e);
	if (user_link_check(c->w->app->db, link_code(c), purpose, &e) < 0) {
		page_message(c, link_status(&e), failed, e.msg,
		    c->logged_in ? "/dashboard" : "/login",
		    c->logged_in ? "Go to your dashboard" : "Log in");
		return 0;
	}
	page_begin(c, title);
	page_f(c, "<p>%s</p><form method=\"post\" action=\"%s\">", what, action);
	page_csrf(c);
	page_f(c,
	    "<input type=\"hidden\" name=\"code\" value=\"%s\">"
	    "<button type=\"submit\">%s</button></form>",
	    link_code(c), button);
	page_send(c, 200);
	return 0;
}

static void
verify(struct web_ctx *c)
{
	char account[ACCT_ID_LEN + 1], msg[400];
	struct err e;
	int granted = 0;

	if (!link_button(c, "verify", "Verify your e-mail address", "E-mail not verified",
		"Confirm that this address is yours.", "Verify my address"))
		return;
	err_clear(&e);
	if (user_verify(c->w->app->db, c->cfg, link_code(c), account, &granted, &e) < 0) {
		page_message(c, link_status(&e), "E-mail not verified", e.msg,
		    c->logged_in ? "/dashboard" : "/login",
		    c->logged_in ? "Ask for a new link on the overview" : "Log in");
		return;
	}
	log_info("web: account %s verified its e-mail", account);
	fmt_cut(msg, sizeof(msg), "Your e-mail address is verified%s.",
	    granted > 0 ? " and your free credit is on your balance" :
		granted < 0 ?
			  ". The free credit is withheld: many new accounts from your network or "
			  "your e-mail domain had it today. Buy credit under Usage, or write to "
			  "the operator to ask for it" :
			  " (this address has had its free credit before)");
	page_message(c, 200, "E-mail verified", msg, "/dashboard", "Go to your dashboard");
}

static void
email_confirm(struct web_ctx *c)
{
	char account[ACCT_ID_LEN + 1];
	struct err e;

	if (!link_button(c, "email", "Confirm your new e-mail address",
		"E-mail address not changed", "Confirm that your account moves to this address.",
		"Use this address"))
		return;
	err_clear(&e);
	if (user_email_change_confirm(c->w->app->db, c->cfg, link_code(c), account, &e) < 0) {
		page_message(c, link_status(&e), "E-mail address not changed", e.msg,
		    c->logged_in ? "/dashboard/settings" : "/login",
		    c->logged_in ? "Back to settings" : "Log in");
		return;
	}
	log_info("web: account %s changed its e-mail address", account);
	page_message(c, 200, "E-mail address changed",
	    "Your account now uses this address; log in with it from now on.", "/dashboard",
	    "Go to your dashboard");
}

static void
reset_request(struct web_ctx *c)
{
	struct err e;

	if (strcmp(c->method, "POST") == 0) {
		if (!web_csrf_check(c))
			return;
		err_clear(&e);
		if (user_reset_request(c->w->app->db, c->cfg, web_field(c, "email"), c->addr, &e) ==
		    0) {
			mailq_poke(c->w->mq);
			page_message(c, 200, "Check your mail",
			    "If an account has this address, a link to choose a new password is on "
			    "its way. It works for one hour.",
			    "/login", "Back to log in");
			return;
		}
		page_begin(c, "Reset your password");
		page_alert(c, "error", e.msg);
	} else {
		page_begin(c, "Reset your password");
	}
	page_f(c,
	    "<p>We send a link to choose a new password to your e-mail address.</p>"
	    "<form method=\"post\" action=\"/reset\" novalidate>");
	page_csrf(c);
	page_input(c, "email", "E-mail address", "email", "email", web_field(c, "email"), NULL,
	    NULL);
	page_f(c, "<button type=\"submit\">Send the link</button></form>");
	page_send(c, strcmp(c->method, "POST") == 0 ? 400 : 200);
}

static void
reset_confirm(struct web_ctx *c)
{
	const char *code = strcmp(c->method, "POST") == 0 ? web_field(c, "code") :
							    web_qarg(c, "code");
	char account[ACCT_ID_LEN + 1], sid[WSESS_ID_LEN + 1];
	struct err e;
	int status = 200;

	err_clear(&e);
	if (strcmp(c->method, "POST") == 0) {
		if (!web_csrf_check(c))
			return;
		struct user_reset rs = { code, web_field(c, "password"), c->addr,
			strcmp(web_field(c, "revoke_keys"), "1") == 0 };

		if (user_reset_confirm(c->w->app->db, c->cfg, &rs, account, &e) == 0) {
			/* Revoked keys stop working in this aasd at once. */
			if (rs.revoke_keys)
				acct_key_cache_forget_account(c->w->app->keys, account);
			if (wsess_create(c->w->app->db, c->cfg, account, sid, &e) == 0) {
				web_set_session_cookie(c, sid);
				web_redirect(c, "/dashboard");
			} else {
				page_message(c, 200, "Password changed",
				    "Your new password is set. Log in with it.", "/login",
				    "Log in");
			}
			return;
		}
		if (strcmp(e.field, "password") != 0) {
			page_message(c, link_status(&e), "Password not changed", e.msg, "/reset",
			    "Ask for a new link");
			return;
		}
		status = 400;
	} else if (user_reset_check(c->w->app->db, code, &e) < 0) {
		page_message(c, link_status(&e), "Password not changed", e.msg, "/reset",
		    "Ask for a new link");
		return;
	}
	page_begin(c, "Choose a new password");
	page_f(c, "<form method=\"post\" action=\"/reset/confirm\" novalidate>");
	page_csrf(c);
	page_f(c, "<input type=\"hidden\" name=\"code\" value=\"%s\">", code);
	page_input(c, "password", "New password", "password", "new-password", "",
	    "At least 10 characters.", e.kind != ERR_NONE ? e.msg : NULL);
	/* Checked unless a form sent back without it unchecked it. */
	page_f(c,
	    "<p>Every other session, and every connected app, is logged out.</p>"
	    "<div class=\"field\"><label><input type=\"checkbox\" name=\"revoke_keys\" "
	    "value=\"1\" id=\"f-revoke-keys\"%S> Revoke my API keys</label>"
	    "<p class=\"hint\">Your API keys will be revoked; uncheck to keep them.</p></div>",
	    strcmp(c->method, "POST") == 0 && strcmp(web_field(c, "revoke_keys"), "1") != 0 ?
		"" :
		" checked");
	page_f(c, "<button type=\"submit\">Set the password</button></form>");
	page_send(c, status);
}

static void
home(struct web_ctx *c)
{
	if (c->logged_in) {
		web_redirect(c, "/dashboard");
		return;
	}
	page_begin(c, "A real Linux machine for your agent");
	page_f(c,
	    "<p>aas gives AI agents disposable Linux virtual machines over the Model Context "
	    "Protocol: each sandbox is its own VM with its own kernel, billed by the minute and "
	    "destroyed when it expires.</p>"
	    "<p>New accounts get %M of free credit once their e-mail address is verified. No card "
	    "needed.</p>"
	    "<p class=\"actions\"><a class=\"button\" href=\"/signup\">Sign up</a> "
	    "<a href=\"/login\">Log in</a></p>",
	    c->cfg->free_credit);
	page_send(c, 200);
}

/* Page functions, by route; `session` 1: logged in only. */
struct web_page {
	const char *path;
	void (*fn)(struct web_ctx *c);
	int session;
};

static const struct web_page pages[] = {
	{ "/", home, 0 },
	{ "/signup", signup, 0 },
	{ "/login", login, 0 },
	{ "/logout", logout, 0 },
	{ "/verify", verify, 0 },
	{ "/reset", reset_request, 0 },
	{ "/reset/confirm", reset_confirm, 0 },
	{ "/dashboard", web_dash_home, 1 },
	{ "/dashboard/keys", web_dash_keys, 1 },
	{ "/dashboard/keys/{id}/revoke", web_dash_revoke, 1 },
	{ "/dashboard/connect", web_dash_connect, 1 },
	{ "/dashboard/settings", web_dash_settings, 1 },
	{ "/dashboard/resend", web_dash_resend, 1 },
	{ "/dashboard/sandboxes", web_sbx_list, 1 },
	{ "/dashboard/sandboxes/{id}/destroy", web_sbx_destroy, 1 },
	{ "/dashboard/sandboxes/{id}/extend", web_sbx_extend, 1 },
	{ "/dashboard/sandboxes/{id}/terminal", web_sbx_terminal, 1 },
	{ "/dashboard/usage", web_usage_page, 1 },
	{ "/dashboard/usage.csv", web_usage_csv, 1 },
	{ "/dashboard/billing/checkout", web_pay_checkout, 1 },
	{ "/dashboard/settings/email", web_dash_email, 1 },
	{ "/dashboard/settings/delete", web_dash_delete, 1 },
	{ "/email/confirm", email_confirm, 0 },
	{ "/oauth/authorize", web_oauth_authorize, 0 },
	{ "/dashboard/apps", web_oauth_apps, 1 },
	{ "/dashboard/apps/{id}/revoke", web_oauth_revoke, 1 },
};
#define N_PAGES (sizeof(pages) / sizeof(pages[0]))
_Static_assert(N_PAGES == WEB_PAGES, "WEB_PAGES counts the pages");

struct web_job {
	struct web *w;
	const struct web_page *page;
	char addr[64];
};

static void
web_work(struct http_req *req, void *arg)
{
	struct web_job *job = arg;
	struct web_ctx c;
	struct err e;
	const char *m = http_method(req);

	memset(&c, 0, sizeof(c));
	c.w = job->w;
	c.req = req;
	c.cfg = &job->w->app->cfg;
	c.secure = strncmp(c.cfg->public_url, "https://", 8) == 0;
	err_clear(&e);
	if ((strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0 && strcmp(m, "POST") != 0) ||
	    fmt_buf(c.method, sizeof(c.method), "%s", m) < 0) {
		http_add_header(req, "Allow", "GET, HEAD, POST");
		http_reply_error(req, 405, "method_not_allowed", "use GET or POST");
		goto out;
	}
	if (fmt_buf(c.addr, sizeof(c.addr), "%s", job->addr) < 0) {
		http_reply_error(req, 500, "internal", "client address too long");
		goto out;
	}
	c.query = rest_query_parse(http_query(req), &e);
	if (c.query == NULL) {
		page_message(&c, 400, "Bad link", e.msg, "/", "Home");
		goto out;
	}
	if (strcmp(m, "POST") == 0) {
		size_t len = 0;
		const char *body = http_body(req, &len);

		c.form = rest_query_parse_body(body, len, &e);
		if (c.form == NULL && e.kind == ERR_INTERNAL) {
			http_reply_error(req, 500, "internal", e.msg);
			goto out;
		}
		if (c.form == NULL) {
			page_message(&c, 400, "Bad form", e.msg, "/", "Home");
			goto out;
		}
	}
	if (cookie_get(&c, COOKIE_SESSION, c.sid, sizeof(c.sid)) == 0 &&
	    wsess_resolve(c.w->app->db, c.cfg, c.sid, &c.sess, &e) == 0) {
		char hash[KEY_HASH_HEX_LEN + 1];

		c.logged_in = 1;
		key_hash_hex(c.sid, strlen(c.sid), hash, sizeof(hash));
		ttl_put(c.w->owners, hash, c.sess.account_id);
	}
	err_clear(&e);
	if (cookie_get(&c, COOKIE_FORM, c.form_token, sizeof(c.form_token)) < 0 ||
	    strlen(c.form_token) != WEB_TOKEN_LEN) {
		if (key_random_hex(c.form_token, sizeof(c.form_token), WEB_TOKEN_LEN / 2) < 0) {
			http_reply_error(req, 500, "internal", "no randomness");
			goto out;
		}
		c.form_token_new = 1;
		/* Strict: only this site's own pages ever send it back. */
		cookie_set(&c, COOKIE_FORM, c.form_token, 86400, "Strict");
	}
	if (job->page->session && !c.logged_in) {
		web_redirect(&c, "/login");
		goto out;
	}
	job->page->fn(&c);
out:
	if (c.page_open)
		buf_free(&c.out);
	json_decref(c.query);
	json_decref(c.form);
	free(job);
}

void
web_addr_group(char *addr, size_t n)
{
	struct in6_addr a6;

	/* One IPv6 client holds a whole /64: its limits are counted there. */
	if (strchr(addr, ':') == NULL || inet_pton(AF_INET6, addr, &a6) != 1)
		return;
	memset(a6.s6_addr + 8, 0, 8);
	char net[INET6_ADDRSTRLEN];

	if (inet_ntop(AF_INET6, &a6, net, sizeof(net)) != NULL &&
	    fmt_buf(addr, n, "%s/64", net) < 0)
		fmt_cut(addr, n, "unknown");
}

void
web_client_addr(struct http_req *req, int trust_x_real_ip, char *out, size_t n)
{
	const char *real = http_header(req, "X-Real-IP");

	/* "unknown" is a label every client of no known address counts under;
	 * an X-Real-IP that does not fit counts there too. */
	if (http_client_addr(req, out, n) < 0)
		fmt_cut(out, n, "unknown");
	if (real && (strcmp(out, "127.0.0.1") == 0 || strcmp(out, "::1") == 0) && trust_x_real_ip &&
	    fmt_buf(out, n, "%s", real) < 0)
		fmt_cut(out, n, "unknown");
	web_addr_group(out, n);
}

/* Whose turn a page takes: the account of a session seen before (its
 * cookie is checked again on the worker), else the client's address; -1
 * when it does not fit in out. */
static int
web_work_key(struct web *w, struct http_req *req, const char *addr, char *out, size_t n)
{
	struct web_ctx c = { .w = w, .req = req, .cfg = &w->app->cfg };
	char sid[WSESS_ID_LEN + 1], hash[KEY_HASH_HEX_LEN + 1], acct[ACCT_ID_LEN + 1];

	c.secure = strncmp(c.cfg->public_url, "https://", 8) == 0;
	if (cookie_get(&c, COOKIE_SESSION, sid, sizeof(sid)) == 0) {
		key_hash_hex(sid, strlen(sid), hash, sizeof(hash));
		if (ttl_get(w->owners, hash, acct, sizeof(acct)))
			return fmt_buf(out, n, "a:%s", acct);
	}
	key_hash_hex(addr, strlen(addr), hash, sizeof(hash));
	return fmt_buf(out, n, "w:%.32s", hash);
}

static void
web_entry(struct http_req *req, void *ctx)
{
	const struct web_route *rt = ctx;
	struct web_job *job = calloc(1, sizeof(*job));
	char key[64];

	if (job == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	job->w = rt->w;
	job->page = rt->page;
	web_client_addr(req, rt->w->app->cfg.trust_x_real_ip, job->addr, sizeof(job->addr));
	if (web_work_key(rt->w, req, job->addr, key, sizeof(key)) < 0) {
		free(job);
		http_reply_error(req, 500, "internal", "work key too long");
		return;
	}
	http_defer_as(req, key, web_work, job, free);
}

static void
static_file(struct http_req *req, void *ctx)
{
	const struct embed_file *f = ctx;
	const char *dot = strrchr(f->name, '.');
	const char *type = dot && strcmp(dot, ".svg") == 0 ? "image/svg+xml" :
	    dot && strcmp(dot, ".css") == 0                ? "text/css; charset=utf-8" :
	    dot && strcmp(dot, ".js") == 0                 ? "text/javascript; charset=utf-8" :
							     "application/octet-stream";

	http_add_header(req, "X-Content-Type-Options", "nosniff");
	http_add_header(req, "Cache-Control", "public, max-age=3600");
	http_reply_raw(req, 200, type, f->data, f->len);
}

struct web *
web_new(struct app *app, struct mailq *mq, struct pty_hub *pty)
{
	struct web *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return NULL;
	w->app = app;
	w->mq = mq;
	w->pty = pty;
	w->owners = ttl_new(WEB_OWNERS_MAX, WEB_OWNERS_TTL_S);
	if (w->owners == NULL) {
		free(w);
		return NULL;
	}
	for (size_t i = 0; i < N_PAGES; i++) {
		w->routes[i].w = w;
		w->routes[i].page = &pages[i];
	}
	return w;
}

void
web_free(struct web *w)
{
	if (w)
		ttl_free(w->owners);
	free(w);
}

size_t
web_routes(struct web *w, struct http_route *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < N_PAGES && n < max; i++)
		out[n++] = (struct http_route){ .path = pages[i].path,
			.handler = web_entry,
			.ctx = &w->routes[i] };
	if (n < max)
		out[n++] = (struct http_route){ .path = "/v1/billing/stripe/webhook",
			.handler = web_pay_webhook,
			.ctx = w };
	for (size_t i = 0; i < embed_web_count && i < WEB_STATIC_MAX && n < max; i++) {
		if (fmt_buf(w->static_paths[i], sizeof(w->static_paths[i]), "/static/%s",
			embed_web[i].name) < 0) {
			log_error("web: /static/%s: name too long; not served", embed_web[i].name);
			continue;
		}
		out[n++] = (struct http_route){ .path = w->static_paths[i],
			.handler = static_file,
			.ctx = (void *)&embed_web[i] };
	}
	return n;
}
