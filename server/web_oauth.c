/* web_oauth.c - the OAuth authorization endpoint and its consent page,
 * and "Connected apps" (web_oauth_). The consent page is a dashboard
 * page: a client never sees the password, only a code for its redirect
 * URI once the account's owner approves. */
#include <openssl/crypto.h>
#include <string.h>

#include "base/fmt.h"
#include "base/log.h"
#include "server/authsrv.h"
#include "server/web_int.h"
#include "account/attempts.h"
#include "account/oauth.h"

/* Percent-encodes `s` (RFC 3986 unreserved kept) onto b. */
static void
url_encode(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~')
			(void)buf_append(b, s, 1);
		else
			(void)buf_printf(b, "%%%c%c", hex[ch >> 4], hex[ch & 15]);
	}
}

/* The authorization request's parameters, from the query (GET) or the
 * consent form (POST). */
struct authz {
	const char *client_id, *redirect_uri, *state, *challenge, *method, *scope, *resource,
	    *response_type;
	struct oauth_client client;
	char resource_ours[CONFIG_STR_MAX + 16];
};

static const char *
param(const struct web_ctx *c, const char *name)
{
	return strcmp(c->method, "POST") == 0 ? web_field(c, name) : web_qarg(c, name);
}

/* Sends the browser back to the client with `code` or an OAuth error
 * (RFC 6749 4.1.2, with iss from RFC 9207). */
static void
back_to_client(struct web_ctx *c, const struct authz *a, const char *code, const char *error,
    const char *desc, int ask_first)
{
	struct buf loc;

	buf_init(&loc, 4096);
	(void)buf_printf(&loc, "%s%c", a->redirect_uri, strchr(a->redirect_uri, '?') ? '&' : '?');
	if (code) {
		(void)buf_printf(&loc, "code=%s", code);
	} else {
		(void)buf_printf(&loc, "error=%s&error_description=", error);
		url_encode(&loc, desc);
	}
	if (a->state[0]) {
		(void)buf_printf(&loc, "&state=");
		url_encode(&loc, a->state);
	}
	(void)buf_printf(&loc, "&iss=");
	url_encode(&loc, c->cfg->public_url);
	if (loc.failed) {
		page_message(c, 400, "Authorization failed", "The redirect address is too long.",
		    "/", "Home");
	} else if (ask_first) {
		/* Before the user chose anything, an error is shown, not followed:
		 * anyone can register a redirect URI, so an automatic redirect
		 * would make this an open redirector. */
		page_begin(c, "Authorization failed");
		page_alert(c, "error", desc);
		page_f(c,
		    "<p>The application <strong>%s</strong> sent an authorization request this "
		    "service cannot accept. Nothing was authorized.</p>"
		    "<p><a href=\"%s\" id=\"back\">Return to the application</a> "
		    "(<code>%s</code>) · <a href=\"/dashboard\">Dashboard</a></p>",
		    a->client.name, loc.data, a->redirect_uri);
		page_send(c, 400);
	} else {
		page_security_headers(c->req);
		http_add_header(c->req, "Location", loc.data);
		http_reply_raw(c->req, 303, "text/plain; charset=utf-8", "See Other\n", 10);
	}
	OPENSSL_cleanse(loc.data, loc.len);
	buf_free(&loc);
}

static void hidden(struct web_ctx *c, const char *name, const char *value);
static void authz_hidden(struct web_ctx *c, const struct authz *a);

/* The request's client. A GET (which any site can send with the
 * session's cookie) fetches a document on the client address's quota;
 * only this site's own POST (CSRF-checked) spends the account's. */
static int
client_find(struct web_ctx *c, struct authz *a, struct err *e)
{
	char quota[ATT_SUBJECT_MAX + 1];

	int post = strcmp(c->method, "POST") == 0;

	if (fmt_err(e, "quota subject", quota, sizeof(quota), "%s%s",
		post ? "" : "ip:", post ? c->sess.account_id : c->addr) < 0)
		return -1;
	return oauth_client_find(c->w->app->db, c->cfg, a->client_id, quota, &a->client, e);
}

/* Past the address's fetches, a GET asks the user to go on: the button
 * posts the same request with the form's token. */
static void
continue_page(struct web_ctx *c, const struct authz *a, const char *why)
{
	page_begin(c, "Connect an application");
	page_alert(c, "notice", why);
	page_f(c,
	    "<p>An application asks to connect to your aas account (<code>%s</code>). Many such "
	    "requests came from your network lately, so this one waits for you: continue to see "
	    "what it asks for, or close this page.</p>"
	    "<form method=\"post\" action=\"/oauth/authorize\">",
	    a->client_id);
	page_csrf(c);
	authz_hidden(c, a);
	page_f(c,
	    "<p class=\"actions\"><button type=\"submit\" name=\"decision\" value=\"continue\" "
	    "id=\"continue\">Continue</button></p></form>");
	page_send(c, 429);
}

/* Checks the request. Problems with the client or its redirect URI are
 * shown here (never redirected: the URI is not trusted yet); the rest
 * go back to the client. Returns 0 when it may go on. */
static int
authz_check(struct web_ctx *c, struct authz *a)
{
	struct err e;

	a->client_id = param(c, "client_id");
	a->redirect_uri = param(c, "redirect_uri");
	a->state = param(c, "state");
	a->challenge = param(c, "code_challenge");
	a->method = param(c, "code_challenge_method");
	a->scope = param(c, "scope");
	a->resource = param(c, "resource");
	a->response_type = param(c, "response_type");
	err_clear(&e);
	if (authsrv_resource(c->cfg, a->resource_ours, sizeof(a->resource_ours), &e) < 0 ||
	    client_find(c, a, &e) < 0) {
		if (e.kind == ERR_LIMIT && strcmp(c->method, "POST") != 0)
			continue_page(c, a, e.msg);
		else
			page_message(c, e.kind == ERR_INVALID ? 400 : err_http_status(e.kind),
			    "Unknown application", e.msg, "/", "Home");
		return -1;
	}
	if (!oauth_redirect_registered(&a->client, a->redirect_uri)) {
		page_message(c, 400, "Unknown redirect address",
		    "The application asked to come back to an address it has not registered "
		    "(redirect_uri). Nothing was authorized.",
		    "/", "Home");
		return -1;
	}
	if (strcmp(a->response_type, "code") != 0) {
		back_to_client(c, a, NULL, "unsupported_response_type",
		    "response_type must be code", 1);
		return -1;
	}
	if (strcmp(a->method, "S256") != 0 || !oauth_challenge_valid(a->challenge)) {
		back_to_client(c, a, NULL, "invalid_request",
		    "PKCE is required: code_challenge_method S256 and a code_challenge", 1);
		return -1;
	}
	if (!oauth_scope_ok(a->scope)) {
		back_to_client(c, a, NULL, "invalid_scope", "the only scope is " OAUTH_SCOPE, 1);
		return -1;
	}
	if (strlen(a->state) > 512) {
		back_to_client(c, a, NULL, "invalid_request", "state is longer than 512 bytes", 1);
		return -1;
	}
	if (a->resource[0] && strcmp(a->resource, a->resource_ours) != 0) {
		back_to_client(c, a, NULL, "invalid_target",
		    "resource must be this service's /v1/mcp", 1);
		return -1;
	}
	return 0;
}

static void
hidden(struct web_ctx *c, const char *name, const char *value)
{
	page_f(c, "<input type=\"hidden\" name=\"%s\" value=\"%s\">", name, value);
}

/* The authorization request's parameters as a form's hidden fields. */
static void
authz_hidden(struct web_ctx *c, const struct authz *a)
{
	hidden(c, "client_id", a->client_id);
	hidden(c, "redirect_uri", a->redirect_uri);
	hidden(c, "state", a->state);
	hidden(c, "code_challenge", a->challenge);
	hidden(c, "code_challenge_method", a->method);
	hidden(c, "scope", a->scope);
	hidden(c, "resource", a->resource);
	hidden(c, "response_type", a->response_type);
}

/* The redirect URI's origin for the page's CSP form-action (a consent
 * form's answer is a redirect there); "" when it has odd characters. */
static void
redirect_source(const char *uri, char *out, size_t n)
{
	const char *s = strstr(uri, "://");
	size_t len = s ? (size_t)(s - uri) + 3 + strcspn(s + 3, "/?") : strcspn(uri, ":") + 1;

	out[0] = '\0';
	if (len >= n)
		return;
	for (size_t i = 0; i < len; i++) {
		char ch = uri[i];

		if (ch == '\0' ||
		    !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			(ch >= '0' && ch <= '9') || strchr(".:-+/[]", ch)))
			return;
	}
	memcpy(out, uri, len);
	out[len] = '\0';
}

static void
consent_page(struct web_ctx *c, const struct authz *a)
{
	char src[OAUTH_URI_MAX + 1];

	redirect_source(a->redirect_uri, src, sizeof(src));
	page_begin(c, "Connect an application");
	page_f(c,
	    "<p><strong>%s</strong> asks to use your aas account (%s).</p>"
	    "<p>It could then do what your API keys do: create sandboxes that are billed to your "
	    "balance, run commands in them and destroy them. It never sees your password, and you "
	    "can disconnect it at any time under <a href=\"/dashboard/apps\">Connected apps</a>.</p>"
	    "<dl class=\"facts\"><dt>Application</dt><dd><code>%s</code>%s</dd>"
	    "<dt>Returns to</dt><dd><code>%s</code></dd></dl>",
	    a->client.name, c->sess.email, a->client.id,
	    a->client.registered ? " (registered with this service; its name is its own claim)" :
				   "",
	    a->redirect_uri);
	page_f(c, "<form method=\"post\" action=\"/oauth/authorize\">");
	page_csrf(c);
	authz_hidden(c, a);
	page_f(c,
	    "<p class=\"actions\"><button type=\"submit\" name=\"decision\" value=\"approve\" "
	    "id=\"approve\">Allow</button> "
	    "<button type=\"submit\" name=\"decision\" value=\"deny\" class=\"secondary\" "
	    "id=\"deny\">Deny</button></p></form>");
	page_form_action(c, src);
	page_send(c, 200);
}

void
web_oauth_authorize(struct web_ctx *c)
{
	struct authz a;
	struct oauth_code_req r;
	char code[OAUTH_CODE_LEN + 1];
	struct err e;

	if (!c->cfg->oauth) {
		page_message(c, 404, "Not found", "This service does not use OAuth.", "/", "Home");
		return;
	}
	if (strcmp(c->method, "POST") == 0 && !web_csrf_check(c))
		return;
	if (!c->logged_in) {
		struct buf next;

		/* Log in first, then come back here with the same request. */
		buf_init(&next, 8192);
		(void)buf_printf(&next, "/login?next=");
		url_encode(&next, "/oauth/authorize?");
		url_encode(&next, http_query(c->req));
		if (next.failed)
			page_message(c, 400, "Bad link", "The authorization request is too long.",
			    "/", "Home");
		else
			web_redirect(c, next.data);
		buf_free(&next);
		return;
	}
	if (!c->sess.verified) {
		/* As for API keys: an address someone else signed up with must
		 * not connect applications that outlive a reset. */
		page_message(c, 403, "Verify your address first",
		    "Applications are connected once your e-mail address is verified: open the link "
		    "we sent you, or ask for a new one on the overview.",
		    "/dashboard", "Go to the overview");
		return;
	}
	memset(&a, 0, sizeof(a));
	if (authz_check(c, &a) < 0)
		return;
	if (strcmp(c->method, "POST") != 0 || strcmp(web_field(c, "decision"), "continue") == 0) {
		consent_page(c, &a);
		return;
	}
	if (strcmp(web_field(c, "decision"), "approve") != 0) {
		back_to_client(c, &a, NULL, "access_denied", "the user denied the request", 0);
		return;
	}
	r = (struct oauth_code_req){ .account_id = c->sess.account_id,
		.client = &a.client,
		.redirect_uri = a.redirect_uri,
		.challenge = a.challenge,
		.resource = a.resource_ours,
		.scope = a.scope[0] ? a.scope : OAUTH_SCOPE };
	err_clear(&e);
	if (oauth_code_issue(c->w->app->db, c->cfg, &r, code, &e) < 0) {
		if (e.kind == ERR_LIMIT || e.kind == ERR_INVALID)
			back_to_client(c, &a, NULL, e.field[0] ? e.field : "access_denied", e.msg,
			    0);
		else
			page_message(c, err_http_status(e.kind), "Not authorized", e.msg,
			    "/dashboard", "Dashboard");
		return;
	}
	log_info("web: account %s authorized client %s", c->sess.account_id, a.client.id);
	back_to_client(c, &a, code, NULL, NULL, 0);
	OPENSSL_cleanse(code, sizeof(code));
}

void
web_oauth_apps(struct web_ctx *c)
{
	json_t *grants, *g;
	struct err e;
	size_t i;

	err_clear(&e);
	grants = oauth_grants_list(c->w->app->db, c->sess.account_id, &e);
	if (grants == NULL) {
		page_message(c, 503, "Connected apps", e.msg, "/dashboard", "Dashboard");
		return;
	}
	page_begin(c, "Connected apps");
	page_f(c,
	    "<p>Applications you allowed to use your account through OAuth (MCP clients that "
	    "connect with only this service's URL). Disconnecting one ends its access at once.</p>");
	if (json_array_size(grants) == 0)
		page_f(c, "<p id=\"no-apps\">No application is connected.</p>");
	else
		page_f(c,
		    "<table id=\"apps\"><thead><tr><th scope=\"col\">Application</th>"
		    "<th scope=\"col\">Connected</th><th scope=\"col\">Last used</th>"
		    "<th scope=\"col\"><span class=\"visually-hidden\">Actions</span></th></tr>"
		    "</thead><tbody>");
	json_array_foreach(grants, i, g) {
		const char *id = json_string_value(json_object_get(g, "id"));
		const char *last = json_string_value(json_object_get(g, "last_used"));

		page_f(c,
		    "<tr><td>%s<br><code>%s</code></td><td>%s UTC</td><td>%s</td><td>"
		    "<form method=\"post\" action=\"/dashboard/apps/%s/revoke\">",
		    json_string_value(json_object_get(g, "client_name")),
		    json_string_value(json_object_get(g, "client_id")),
		    json_string_value(json_object_get(g, "created")), last[0] ? last : "never", id);
		page_csrf(c);
		page_f(c,
		    "<button type=\"submit\" class=\"danger\">Disconnect "
		    "<span class=\"visually-hidden\">%s</span></button></form></td></tr>",
		    json_string_value(json_object_get(g, "client_name")));
	}
	if (json_array_size(grants) > 0)
		page_f(c, "</tbody></table>");
	json_decref(grants);
	page_send(c, 200);
}

void
web_oauth_revoke(struct web_ctx *c)
{
	char id[ACCT_ID_LEN + 2];
	struct err e;

	if (strcmp(c->method, "POST") != 0) {
		web_redirect(c, "/dashboard/apps");
		return;
	}
	if (!web_csrf_check(c))
		return;
	err_clear(&e);
	if (http_path_arg(c->req, 0, id, sizeof(id)) < 0 ||
	    oauth_grant_revoke(c->w->app->db, c->sess.account_id, id, &e) < 0) {
		page_message(c, 404, "Not connected", "No connected application has this id.",
		    "/dashboard/apps", "Back to connected apps");
		return;
	}
	log_info("web: account %s disconnected grant %s", c->sess.account_id, id);
	web_redirect(c, "/dashboard/apps");
}
