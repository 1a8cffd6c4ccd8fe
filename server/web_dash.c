/* web_dash.c - the dashboard's pages for a logged-in account (web_dash_):
 * overview, API keys, connection snippets, settings. */
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/keys.h"
#include "base/log.h"
#include "server/web_int.h"
#include "account/accounts.h"
#include "account/mailq.h"
#include "account/users.h"

void
web_dash_home(struct web_ctx *c)
{
	page_begin(c, "Overview");
	if (!c->sess.verified) {
		page_f(c,
		    "<div class=\"banner\" role=\"status\"><p>We sent a link to <b>%s</b>. "
		    "Open it to verify your address%S.</p>"
		    "<form method=\"post\" action=\"/dashboard/resend\">",
		    c->sess.email, c->cfg->free_credit > 0 ? " and receive your free credit" : "");
		page_csrf(c);
		page_f(c,
		    "<button type=\"submit\" class=\"link\">Send the link again</button>"
		    "</form></div>");
	}
	page_f(c, "<h2>Balance</h2><p class=\"balance\" id=\"balance\">%M</p>", c->sess.balance);
	if (c->sess.verified && c->cfg->free_credit > 0)
		page_f(c,
		    "<p>Your account received %M of free credit when its address was "
		    "verified.</p>",
		    c->cfg->free_credit);
	page_f(c,
	    "<p><a href=\"/dashboard/usage\">Usage and credit</a></p>"
	    "<h2>Start</h2><ol><li><a href=\"/dashboard/keys\">Create an API key</a>.</li>"
	    "<li><a href=\"/dashboard/connect\">Connect your agent</a> with it.</li></ol>"
	    "<p>Signed in as %s.</p>",
	    c->sess.email);
	page_send(c, 200);
}

void
web_dash_resend(struct web_ctx *c)
{
	struct err e;

	if (strcmp(c->method, "POST") != 0) {
		web_redirect(c, "/dashboard");
		return;
	}
	if (!web_csrf_check(c))
		return;
	err_clear(&e);
	if (user_resend(c->w->app->db, c->cfg, c->sess.account_id, c->addr, &e) < 0) {
		page_message(c, e.kind == ERR_LIMIT ? 429 : 409, "Link not sent", e.msg,
		    "/dashboard", "Back to the overview");
		return;
	}
	mailq_poke(c->w->mq);
	page_message(c, 200, "Link sent", "A new verification link is on its way.", "/dashboard",
	    "Back to the overview");
}

/* The snippets of the Connect page, with `key` (or a placeholder). */
static void
snippets(struct web_ctx *c, const char *key)
{
	const char *url = c->cfg->public_url;

	page_f(c,
	    "<h2 id=\"claude-code\">Claude Code</h2>"
	    "<pre id=\"snip-cc\">claude mcp add --transport http aas %s/v1/mcp --header \"x-api-key: "
	    "%s\"</pre><button type=\"button\" data-copy=\"snip-cc\" aria-label=\"Copy the Claude Code command\">Copy</button> "
	    "<span id=\"snip-cc-status\" role=\"status\"></span>",
	    url, key);
	page_f(c,
	    "<h2 id=\"claude-desktop\">Claude Desktop (aas-mcp)</h2>"
	    "<p>In <code>claude_desktop_config.json</code>, with <code>aas-mcp</code> installed:</p>"
	    "<pre id=\"snip-cd\">{ \"mcpServers\": { \"aas\": { \"command\": \"aas-mcp\",\n"
	    "    \"env\": { \"AAS_API_KEY\": \"%s\", \"AAS_BASE_URL\": \"%s\" } } } }</pre>"
	    "<button type=\"button\" data-copy=\"snip-cd\" aria-label=\"Copy the Claude Desktop settings\">Copy</button> "
	    "<span id=\"snip-cd-status\" role=\"status\"></span>",
	    key, url);
	page_f(c,
	    "<h2 id=\"smithery\">Smithery and other registries</h2>"
	    "<p>They read the server card at <code>%s/.well-known/mcp/server-card.json</code>. Add the "
	    "URL below with the header <code>x-api-key</code>:</p>"
	    "<pre id=\"snip-sm\">URL: %s/v1/mcp\nHeader: x-api-key: %s</pre>"
	    "<button type=\"button\" data-copy=\"snip-sm\" aria-label=\"Copy the URL and header\">Copy</button> "
	    "<span id=\"snip-sm-status\" role=\"status\"></span>",
	    url, url, key);
	page_f(c,
	    "<h2 id=\"sdk\">The official MCP SDK (TypeScript)</h2>"
	    "<pre id=\"snip-sdk\">import { Client } from '@modelcontextprotocol/sdk/client/index.js';\n"
	    "import { StreamableHTTPClientTransport } from "
	    "'@modelcontextprotocol/sdk/client/streamableHttp.js';\n\n"
	    "const transport = new StreamableHTTPClientTransport(new URL('%s/v1/mcp'),\n"
	    "  { requestInit: { headers: { 'x-api-key': '%s' } } });\n"
	    "const client = new Client({ name: 'me', version: '1.0.0' });\n"
	    "await client.connect(transport);\n"
	    "console.log(await client.callTool({ name: 'create_sandbox', arguments: {} }));</pre>"
	    "<button type=\"button\" data-copy=\"snip-sdk\" aria-label=\"Copy the SDK example\">Copy</button> "
	    "<span id=\"snip-sdk-status\" role=\"status\"></span>",
	    url, key);
	page_f(c,
	    "<h2 id=\"curl\">curl</h2>"
	    "<pre id=\"snip-curl\">curl -s %s/v1/sandboxes -H 'x-api-key: %s' \\\n"
	    "  -H 'content-type: application/json' -d '{}'</pre>"
	    "<button type=\"button\" data-copy=\"snip-curl\" aria-label=\"Copy the curl command\">Copy</button> "
	    "<span id=\"snip-curl-status\" role=\"status\"></span>",
	    url, key);
}

void
web_dash_connect(struct web_ctx *c)
{
	page_begin(c, "Connect your agent");
	page_f(c,
	    "<p>Keys are shown once, when made: <a href=\"/dashboard/keys\">create a key</a> "
	    "and this page comes back with it filled in. Below, replace "
	    "<code>aas_sk_...</code> with your key.</p>");
	snippets(c, "aas_sk_...");
	if (c->cfg->oauth)
		page_f(c,
		    "<h2>With only the URL</h2><p>Clients that support OAuth (custom connectors in "
		    "chat apps, SDK clients with an OAuth provider) need no key: give them "
		    "<code>%s/v1/mcp</code>, and approve the client on the page it opens. "
		    "<a href=\"/dashboard/apps\">Connected apps</a> lists them and disconnects "
		    "any.</p>",
		    c->cfg->public_url);
	page_send(c, 200);
}

static void
keys_page(struct web_ctx *c, const struct err *e, int status)
{
	struct err le;
	json_t *keys, *k;
	size_t i;

	err_clear(&le);
	keys = acct_key_list(c->w->app->db, c->sess.account_id, &le);
	page_begin(c, "API keys");
	if (e)
		page_alert(c, "error", e->msg);
	page_f(c,
	    "<p>A key lets an agent or a program act for your account: send it as "
	    "<code>x-api-key</code> or <code>Authorization: Bearer</code>, never in a URL.</p>"
	    "<h2>Create a key</h2>");
	if (c->sess.verified) {
		page_f(c, "<form method=\"post\" action=\"/dashboard/keys\">");
		page_csrf(c);
		page_input(c, "name", "Name", "text", "off", "",
		    "What uses it, for example \"laptop\".", NULL);
		page_f(c, "<button type=\"submit\">Create key</button></form>");
	} else {
		page_f(c,
		    "<p id=\"verify-first\">Verify your e-mail address first: open the link we "
		    "sent you (<a href=\"/dashboard\">the overview</a> can send it again).</p>");
	}
	page_f(c, "<h2>Your keys</h2>");
	if (keys == NULL) {
		page_alert(c, "error", le.msg);
	} else if (json_array_size(keys) == 0) {
		page_f(c, "<p>No keys yet.</p>");
	} else {
		page_f(c,
		    "<table><caption class=\"hint\">Newest last</caption><thead><tr>"
		    "<th scope=\"col\">Name</th><th scope=\"col\">Key</th>"
		    "<th scope=\"col\">Created</th><th scope=\"col\">Last used</th>"
		    "<th scope=\"col\">State</th></tr></thead><tbody>");
		json_array_foreach(keys, i, k) {
			const char *id = json_string_value(json_object_get(k, "id"));
			const char *name = json_string_value(json_object_get(k, "name"));
			const char *used = json_string_value(json_object_get(k, "last_used_at"));
			int revoked = json_is_string(json_object_get(k, "revoked_at"));

			page_f(c,
			    "<tr><td>%s</td><td><code>%s…</code></td><td>%s</td><td>%s</td><td>",
			    name && *name ? name : "(no name)",
			    json_string_value(json_object_get(k, "prefix")),
			    json_string_value(json_object_get(k, "created_at")),
			    used ? used : "never");
			if (revoked) {
				page_f(c, "revoked");
			} else {
				page_f(c,
				    "live <form method=\"post\" action=\"/dashboard/keys/%s/revoke\" "
				    "class=\"inline\">",
				    id);
				page_csrf(c);
				page_f(c,
				    "<button type=\"submit\" class=\"danger\" aria-label=\"Revoke "
				    "%s\">Revoke</button></form>",
				    name && *name ? name : "this key");
			}
			page_f(c, "</td></tr>");
		}
		page_f(c, "</tbody></table>");
	}
	json_decref(keys);
	page_send(c, status);
}

void
web_dash_keys(struct web_ctx *c)
{
	struct acct_new_key nk;
	struct err e;

	if (strcmp(c->method, "POST") != 0) {
		keys_page(c, NULL, 200);
		return;
	}
	if (!web_csrf_check(c))
		return;
	/* A key before the address is verified would let whoever signed up
	 * with someone else's address keep access after its owner takes the
	 * account back through a reset. */
	if (!c->sess.verified) {
		page_message(c, 403, "Verify your address first",
		    "API keys are made once your e-mail address is verified: open the link we sent "
		    "you, or ask for a new one on the overview.",
		    "/dashboard", "Go to the overview");
		return;
	}
	err_clear(&e);
	if (acct_key_create(c->w->app->db, c->sess.account_id, web_field(c, "name"), &nk, &e) < 0) {
		keys_page(c, &e, e.kind == ERR_LIMIT ? 429 : 400);
		return;
	}
	log_info("web: account %s created key %s", c->sess.account_id, nk.key_id);
	page_begin(c, "Your new key");
	page_f(c,
	    "<p class=\"banner\" role=\"status\">Copy it now: it is shown once and never "
	    "again. Keep it like a password.</p>"
	    "<p><code class=\"secret\" id=\"new-key\">%s</code> "
	    "<button type=\"button\" data-copy=\"new-key\">Copy key</button> "
	    "<span id=\"new-key-status\" role=\"status\"></span></p>"
	    "<p><a href=\"/dashboard/keys\">Back to your keys</a></p>",
	    nk.key);
	snippets(c, nk.key);
	OPENSSL_cleanse(&nk, sizeof(nk));
	page_send(c, 201);
}

void
web_dash_revoke(struct web_ctx *c)
{
	char id[ACCT_ID_LEN + 2];
	struct err e;

	if (strcmp(c->method, "POST") != 0) {
		web_redirect(c, "/dashboard/keys");
		return;
	}
	if (!web_csrf_check(c))
		return;
	err_clear(&e);
	if (http_path_arg(c->req, 0, id, sizeof(id)) < 0 || !acct_id_valid(id) ||
	    acct_key_revoke_owned(c->w->app->db, c->sess.account_id, id, &e) < 0) {
		page_message(c, 404, "Key not found", "You have no live key with this id.",
		    "/dashboard/keys", "Back to your keys");
		return;
	}
	acct_key_cache_forget_account(c->w->app->keys, c->sess.account_id);
	log_info("web: account %s revoked key %s", c->sess.account_id, id);
	web_redirect(c, "/dashboard/keys");
}

/* The settings page; `form` names the form an error `e` belongs to. */
static void
settings_page(struct web_ctx *c, const char *form, const struct err *e, int status,
    const char *done)
{
	const char *cur = NULL, *pw = NULL, *em = NULL, *del = NULL;

	if (e && strcmp(form, "password") == 0) {
		cur = strcmp(e->field, "current") == 0 ? e->msg : NULL;
		pw = strcmp(e->field, "password") == 0 ? e->msg : NULL;
	} else if (e && strcmp(form, "email") == 0) {
		cur = strcmp(e->field, "current") == 0 ? e->msg : NULL;
		em = cur ? NULL : e->msg;
	} else if (e) {
		del = e->msg;
	}
	page_begin(c, "Settings");
	if (done)
		page_alert(c, "notice", done);
	if (e && strcmp(form, "password") == 0 && !cur && !pw)
		page_alert(c, "error", e->msg);
	page_f(c,
	    "<h2>Password</h2><form method=\"post\" action=\"/dashboard/settings\" "
	    "novalidate>");
	page_csrf(c);
	page_input(c, "current", "Current password", "password", "current-password", "", NULL,
	    strcmp(form, "password") == 0 ? cur : NULL);
	page_input(c, "password", "New password", "password", "new-password", "",
	    "At least 10 characters.", pw);
	page_f(c,
	    "<button type=\"submit\">Change password</button></form>"
	    "<h2>E-mail address</h2><p>Now: <b id=\"email\">%s</b></p>"
	    "<form method=\"post\" action=\"/dashboard/settings/email\" novalidate>",
	    c->sess.email);
	page_csrf(c);
	page_f(c, "<div class=\"field\"><label for=\"f-new-email\">New e-mail address</label>");
	if (em)
		page_f(c, "<p class=\"field-error\" id=\"e-new-email\">%s</p>", em);
	page_f(c,
	    "<input id=\"f-new-email\" name=\"email\" type=\"email\" autocomplete=\"email\" "
	    "required%S></div>",
	    em ? " aria-invalid=\"true\" aria-describedby=\"e-new-email\"" : "");
	page_f(c, "<div class=\"field\"><label for=\"f-email-current\">Current password</label>");
	if (strcmp(form, "email") == 0 && cur)
		page_f(c, "<p class=\"field-error\" id=\"e-email-current\">%s</p>", cur);
	page_f(c,
	    "<input id=\"f-email-current\" name=\"current\" type=\"password\" "
	    "autocomplete=\"current-password\" required></div>"
	    "<button type=\"submit\">Change e-mail address</button></form>"
	    "<h2>Delete the account</h2><p>Your sandboxes are destroyed (and billed up to now), "
	    "your keys stop working, and your address and password are removed. Credit left "
	    "on the account is not paid out.</p>"
	    "<form method=\"post\" action=\"/dashboard/settings/delete\" novalidate>");
	page_csrf(c);
	page_f(c, "<div class=\"field\"><label for=\"f-delete-current\">Current password</label>");
	if (del)
		page_f(c, "<p class=\"field-error\" id=\"e-delete-current\">%s</p>", del);
	page_f(c,
	    "<input id=\"f-delete-current\" name=\"current\" type=\"password\" "
	    "autocomplete=\"current-password\" required></div>"
	    "<button type=\"submit\" class=\"danger\">Delete my account</button></form>");
	page_send(c, status);
}

static int
settings_post(struct web_ctx *c)
{
	if (strcmp(c->method, "POST") != 0) {
		web_redirect(c, "/dashboard/settings");
		return 0;
	}
	return web_csrf_check(c);
}

void
web_dash_email(struct web_ctx *c)
{
	struct err e;

	if (!settings_post(c))
		return;
	err_clear(&e);
	if (user_email_change_request(c->w->app->db, c->cfg, c->sess.account_id,
		web_field(c, "current"), web_field(c, "email"), c->addr, &e) < 0) {
		settings_page(c, "email", &e,
		    e.kind == ERR_LIMIT        ? 429 :
			e.kind == ERR_CONFLICT ? 409 :
						 400,
		    NULL);
		return;
	}
	mailq_poke(c->w->mq);
	settings_page(c, "email", NULL, 200,
	    "A link is on its way to the new address; the change happens when it is opened.");
}

void
web_dash_delete(struct web_ctx *c)
{
	struct err e;

	if (!settings_post(c))
		return;
	err_clear(&e);
	if (user_delete(c->w->app->db, c->cfg, c->sess.account_id, web_field(c, "current"), c->addr,
		&e) < 0) {
		settings_page(c, "delete", &e,
		    e.kind == ERR_INVALID ? 400 : err_http_status(e.kind), NULL);
		return;
	}
	acct_key_cache_forget_account(c->w->app->keys, c->sess.account_id);
	log_info("web: account %s deleted", c->sess.account_id);
	web_set_session_cookie(c, NULL);
	c->logged_in = 0;
	page_message(c, 200, "Account deleted",
	    "Your account is deleted: its sandboxes are being destroyed and its keys no longer "
	    "work.",
	    "/", "Home");
}

void
web_dash_settings(struct web_ctx *c)
{
	char sid[WSESS_ID_LEN + 1];
	struct err e;

	if (strcmp(c->method, "POST") != 0) {
		settings_page(c, "password", NULL, 200,
		    strcmp(web_qarg(c, "changed"), "1") == 0 ?
			"Your password is changed. Other sessions and connected apps are logged "
			"out; your API keys still work." :
			NULL);
		return;
	}
	if (!web_csrf_check(c))
		return;
	err_clear(&e);
	if (user_password_change(c->w->app->db, c->cfg, c->sess.account_id, web_field(c, "current"),
		web_field(c, "password"), c->addr, &e) < 0) {
		settings_page(c, "password", &e,
		    e.kind == ERR_INVALID ? 400 : err_http_status(e.kind), NULL);
		return;
	}
	/* Every session ended with the old password; this one goes on anew. */
	if (wsess_create(c->w->app->db, c->cfg, c->sess.account_id, sid, &e) < 0) {
		web_set_session_cookie(c, NULL);
		web_redirect(c, "/login");
		return;
	}
	web_set_session_cookie(c, sid);
	web_redirect(c, "/dashboard/settings?changed=1");
}
