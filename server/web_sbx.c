/* web_sbx.c - the dashboard's sandboxes (web_sbx_): the live list with
 * age, time to expiry and cost so far, extend and destroy. Every action
 * is the same tool call MCP and REST make, as the session's account, so
 * another account's sandbox id is "not found" here as there. */
#include <string.h>
#include <time.h>

#include "base/fmt.h"
#include "base/html.h"
#include "server/pty.h"
#include "server/rest_query.h"
#include "server/web_int.h"
#include "service/tools.h"

json_t *
web_tool(struct web_ctx *c, const char *tool, json_t *args, struct err *e)
{
	struct call_ctx cx = { .app = c->w->app,
		.account_id = c->sess.account_id,
		.request_id = http_request_id(c->req) };
	json_t *r = tools_invoke(&cx, tool, args, e);

	json_decref(args);
	return r;
}

/* "3 min", "2 h 5 min" between an ISO time and now (sign: 1 since, -1 until). */
static void
span(const char *iso, int sign, char *out, size_t n)
{
	struct tm tm;
	long long s;

	memset(&tm, 0, sizeof(tm));
	if (iso == NULL || strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm) == NULL) {
		fmt_cut(out, n, "-");
		return;
	}
	s = (long long)(time(NULL) - timegm(&tm)) * sign;
	if (s < 0)
		s = 0;
	if (s < 3600)
		fmt_cut(out, n, "%lld min", s / 60);
	else
		fmt_cut(out, n, "%lld h %lld min", s / 3600, (s % 3600) / 60);
}

/* Charged less refunded, per sandbox, from get_usage's recent list. */
static long long
cost_of(const json_t *usage, const char *id)
{
	const json_t *list = json_object_get(usage, "sandboxes"), *u;
	size_t i;

	json_array_foreach(list, i, u) {
		const char *uid = json_string_value(json_object_get(u, "sandbox_id"));

		if (uid == NULL)
			uid = json_string_value(json_object_get(u, "id"));
		if (uid && strcmp(uid, id) == 0)
			return json_integer_value(json_object_get(u, "charged")) -
			    json_integer_value(json_object_get(u, "refunded"));
	}
	return 0;
}

void
web_sbx_list(struct web_ctx *c)
{
	struct err e;
	json_t *list, *usage, *sb;
	size_t i;

	err_clear(&e);
	list = web_tool(c, "list_sandboxes", json_pack("{s:s,s:i}", "state", "live", "limit", 100),
	    &e);
	usage = list ? web_tool(c, "get_usage", json_pack("{s:i}", "limit", 100), &e) : NULL;
	page_begin(c, "Sandboxes");
	if (list == NULL || usage == NULL) {
		page_alert(c, "error", e.msg);
		goto out;
	}
	page_f(c,
	    "<p>Your live sandboxes. Each is billed per started minute until it ends; "
	    "destroying one early gives back the unused minutes.</p>");
	if (json_array_size(json_object_get(list, "sandboxes")) == 0) {
		page_f(c,
		    "<p id=\"no-sandboxes\">No live sandboxes. Create one from your agent "
		    "(<a href=\"/dashboard/connect\">connect it</a>).</p>");
		goto out;
	}
	page_f(c,
	    "<table id=\"sandboxes\"><thead><tr><th scope=\"col\">Sandbox</th>"
	    "<th scope=\"col\">State</th><th scope=\"col\">Size</th><th scope=\"col\">Age</th>"
	    "<th scope=\"col\">Expires in</th><th scope=\"col\">Cost so far</th>"
	    "<th scope=\"col\">Previews</th><th scope=\"col\">Actions</th></tr></thead><tbody>");
	json_array_foreach(json_object_get(list, "sandboxes"), i, sb) {
		const char *id = json_string_value(json_object_get(sb, "sandbox_id"));
		const json_t *ports = json_object_get(sb, "ports"), *pt;
		char age[32], left[32];
		size_t j;

		if (id == NULL)
			continue;
		span(json_string_value(json_object_get(sb, "created_at")), 1, age, sizeof(age));
		span(json_string_value(json_object_get(sb, "expires_at")), -1, left, sizeof(left));
		page_f(c,
		    "<tr data-sandbox=\"%s\"><td><code>%s</code></td><td>%s</td><td>%s</td>"
		    "<td>%s</td><td>%s</td><td>%M</td><td>",
		    id, id, json_string_value(json_object_get(sb, "state")),
		    json_string_value(json_object_get(sb, "size")), age, left, cost_of(usage, id));
		json_array_foreach(ports, j, pt) {
			const char *url = json_string_value(json_object_get(pt, "url"));

			if (url && html_attr_url_ok(url))
				page_f(c, "<a href=\"%s\" rel=\"noopener noreferrer\">port %L</a> ",
				    url,
				    (long long)json_integer_value(json_object_get(pt, "port")));
		}
		page_f(c,
		    "</td><td><a href=\"/dashboard/sandboxes/%s/terminal\">Terminal</a> "
		    "<form method=\"post\" action=\"/dashboard/sandboxes/%s/extend\" "
		    "class=\"inline\">",
		    id, id);
		page_csrf(c);
		page_f(c,
		    "<label class=\"inline-label\" for=\"m-%s\">Minutes</label> "
		    "<input id=\"m-%s\" name=\"minutes\" type=\"number\" min=\"1\" max=\"1440\" "
		    "value=\"10\" class=\"short\"> <button type=\"submit\">Extend</button></form> "
		    "<form method=\"post\" action=\"/dashboard/sandboxes/%s/destroy\" "
		    "class=\"inline\">",
		    id, id, id);
		page_csrf(c);
		page_f(c,
		    "<button type=\"submit\" class=\"danger\" aria-label=\"Destroy %s\">"
		    "Destroy</button></form></td></tr>",
		    id);
	}
	page_f(c, "</tbody></table>");
out:
	json_decref(list);
	json_decref(usage);
	page_send(c, list && usage ? 200 : err_http_status(e.kind));
}

/* The start of an action on a sandbox: a POST with the session's token
 * (else answered here: 0), and the id from its path ("" when it is not
 * one). */
static int
action_start(struct web_ctx *c, char *id, size_t n)
{
	if (strcmp(c->method, "POST") != 0) {
		web_redirect(c, "/dashboard/sandboxes");
		return 0;
	}
	if (!web_csrf_check(c))
		return 0;
	if (http_path_arg(c->req, 0, id, n) < 0)
		id[0] = '\0';
	return 1;
}

/* An action's tool call failed: a malformed id is "no such sandbox"
 * (404), as another account's is; anything else says what went wrong. */
static void
action_failed(struct web_ctx *c, const char *title, const struct err *e)
{
	page_message(c, e->kind == ERR_INVALID ? 404 : err_http_status(e->kind), title,
	    e->kind == ERR_INVALID ? "There is no such sandbox." : e->msg, "/dashboard/sandboxes",
	    "Back to your sandboxes");
}

void
web_sbx_destroy(struct web_ctx *c)
{
	char id[64], msg[256];
	struct err e;
	json_t *r;

	if (!action_start(c, id, sizeof(id)))
		return;
	err_clear(&e);
	r = web_tool(c, "destroy_sandbox", json_pack("{s:s}", "sandbox_id", id), &e);
	if (r == NULL) {
		action_failed(c, "Sandbox not destroyed", &e);
		return;
	}
	fmt_cut(msg, sizeof(msg), "Sandbox %s is destroyed.", id);
	page_begin(c, "Sandbox destroyed");
	page_alert(c, "notice", msg);
	page_f(c,
	    "<p>Minutes used: %L. Refunded: %M. Balance: %M.</p>"
	    "<p><a href=\"/dashboard/sandboxes\">Back to your sandboxes</a></p>",
	    (long long)json_integer_value(json_object_get(r, "minutes_used")),
	    (long long)json_integer_value(json_object_get(r, "refunded")),
	    (long long)json_integer_value(json_object_get(r, "balance")));
	json_decref(r);
	page_send(c, 200);
}

void
web_sbx_extend(struct web_ctx *c)
{
	char id[64];
	long long minutes;
	struct err e;
	json_t *r;

	if (!action_start(c, id, sizeof(id)))
		return;
	err_clear(&e);
	if (rest_query_int(web_field(c, "minutes"), &minutes) < 0 || minutes < 1 ||
	    minutes > 1440) {
		page_message(c, 400, "Sandbox not extended",
		    "Minutes: a whole number from 1 to 1440.", "/dashboard/sandboxes",
		    "Back to your sandboxes");
		return;
	}
	r = web_tool(c, "extend_sandbox",
	    json_pack("{s:s,s:I}", "sandbox_id", id, "minutes", (json_int_t)minutes), &e);
	if (r == NULL) {
		action_failed(c, "Sandbox not extended", &e);
		return;
	}
	json_decref(r);
	web_redirect(c, "/dashboard/sandboxes");
}

void
web_sbx_terminal(struct web_ctx *c)
{
	char id[64], ticket[PTY_TICKET_MAX], url[PTY_TICKET_MAX + 128];
	struct err e;
	json_t *sb;

	if (http_path_arg(c->req, 0, id, sizeof(id)) < 0)
		id[0] = '\0';
	err_clear(&e);
	/* Only the session's own sandbox, running. */
	sb = web_tool(c, "get_sandbox", json_pack("{s:s}", "sandbox_id", id), &e);
	if (sb == NULL || !json_is_string(json_object_get(sb, "state")) ||
	    strcmp(json_string_value(json_object_get(sb, "state")), "running") != 0) {
		json_decref(sb);
		page_message(c, 404, "No terminal", "You have no running sandbox with this id.",
		    "/dashboard/sandboxes", "Back to your sandboxes");
		return;
	}
	json_decref(sb);
	if (c->w->pty == NULL ||
	    pty_ticket_issue(c->w->pty, c->sess.account_id, id, (long long)time(NULL), ticket, &e) <
		0 ||
	    fmt_buf(url, sizeof(url), "/v1/sandboxes/%s/pty?rows=30&cols=100&ticket=%s", id,
		ticket) < 0) {
		page_message(c, 503, "No terminal", "Terminals are not available now; try again.",
		    "/dashboard/sandboxes", "Back to your sandboxes");
		return;
	}
	/* The ticket opens this terminal once, within AAS_PTY_TICKET_TTL_S. */
	page_begin(c, "Terminal");
	page_f(c,
	    "<p>A login shell as the user <code>sandbox</code> in <code>%s</code>. Lines you "
	    "send run as typed; Ctrl-C stops what runs.</p>"
	    "<div id=\"terminal\" data-ws=\"%s\">"
	    "<p id=\"term-status\" role=\"status\">Connecting…</p>"
	    "<pre id=\"term-out\" tabindex=\"0\" role=\"log\" aria-label=\"Terminal output\">"
	    "</pre><form id=\"term-form\" class=\"term-form\"><label for=\"term-in\">Input"
	    "</label> <input id=\"term-in\" type=\"text\" autocomplete=\"off\" "
	    "spellcheck=\"false\"> <button type=\"submit\">Send</button> "
	    "<button type=\"button\" id=\"term-intr\">Ctrl-C</button></form></div>"
	    "<p><a href=\"/dashboard/sandboxes\">Back to your sandboxes</a></p>",
	    id, url);
	page_send(c, 200);
}
