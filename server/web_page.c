/* web_page.c - the dashboard's HTML: layout, escaping formatter, form
 * fields (page_). Everything a user or the database wrote is escaped by
 * page_f's %s; only the page's own markup goes through %S. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/html.h"
#include "server/web_int.h"

/* The content security policy, before and after the form source. */
#define CSP_HEAD                                                                          \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
	"connect-src 'self'; form-action 'self'"
#define CSP_TAIL "; frame-ancestors 'none'; base-uri 'none'"

static void
security_headers(struct http_req *req, const char *form_source)
{
	char csp[800];

	/* No inline script or style anywhere: the CSP allows only our own
	 * files. A policy too long with the form source is sent without it
	 * (forms then go to this site alone), never cut. */
	if (fmt_buf(csp, sizeof(csp), CSP_HEAD "%s%s" CSP_TAIL, form_source[0] ? " " : "",
		form_source) < 0)
		http_add_header(req, "Content-Security-Policy", CSP_HEAD CSP_TAIL);
	else
		http_add_header(req, "Content-Security-Policy", csp);
	http_add_header(req, "X-Frame-Options", "DENY");
	http_add_header(req, "X-Content-Type-Options", "nosniff");
	/* Links with one-time codes never leave through Referer; same-origin
	 * (not no-referrer) keeps the real Origin on our own forms' POSTs. */
	http_add_header(req, "Referrer-Policy", "same-origin");
	http_add_header(req, "Cache-Control", "no-store");
}

void
page_security_headers(struct http_req *req)
{
	security_headers(req, "");
}

void
page_form_action(struct web_ctx *c, const char *source)
{
	/* A source too long is none: forms go to this site alone. */
	if (fmt_buf(c->form_action, sizeof(c->form_action), "%s", source) < 0)
		c->form_action[0] = '\0';
}

static void
money(struct buf *b, long long micro)
{
	const char *sign = micro < 0 ? "-" : "";

	if (micro < 0)
		micro = -micro;
	buf_printf(b, "%s$%lld.%02lld", sign, micro / 1000000, (micro % 1000000) / 10000);
}

static void
vformat(struct buf *b, const char *fmt, va_list ap)
{
	for (const char *p = fmt; *p; p++) {
		const char *s;

		if (*p != '%') {
			const char *q = strchr(p, '%');
			size_t n = q ? (size_t)(q - p) : strlen(p);

			buf_append(b, p, n);
			p += n - 1;
			continue;
		}
		switch (*++p) {
		case 's':
			s = va_arg(ap, const char *);
			html_escape(b, s ? s : "");
			break;
		case 'S':
			s = va_arg(ap, const char *);
			buf_append(b, s ? s : "", s ? strlen(s) : 0);
			break;
		case 'd':
			buf_printf(b, "%d", va_arg(ap, int));
			break;
		case 'L':
			buf_printf(b, "%lld", va_arg(ap, long long));
			break;
		case 'M':
			money(b, va_arg(ap, long long));
			break;
		case '%':
			buf_append(b, "%", 1);
			break;
		default: /* a mistake in our own format: show it, never guess */
			buf_append(b, "%?", 2);
			if (*p == '\0')
				return;
		}
	}
}

void
page_f(struct web_ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vformat(&c->out, fmt, ap);
	va_end(ap);
}

void
page_begin(struct web_ctx *c, const char *title)
{
	buf_init(&c->out, WEB_PAGE_MAX);
	c->page_open = 1;
	page_f(c,
	    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
	    "<title>%s · aas</title><link rel=\"stylesheet\" href=\"/static/app.css\">"
	    "<link rel=\"icon\" href=\"/static/icon.svg\" type=\"image/svg+xml\">"
	    "<script src=\"/static/app.js\" defer></script></head><body>"
	    "<a class=\"skip\" href=\"#main\">Skip to content</a>"
	    "<header><a class=\"brand\" href=\"/\">aas</a><nav aria-label=\"Main\"><ul>",
	    title);
	if (c->logged_in) {
		page_f(c,
		    "<li><a href=\"/dashboard\">Overview</a></li>"
		    "<li><a href=\"/dashboard/keys\">API keys</a></li>"
		    "<li><a href=\"/dashboard/sandboxes\">Sandboxes</a></li>"
		    "<li><a href=\"/dashboard/usage\">Usage</a></li>"
		    "<li><a href=\"/dashboard/connect\">Connect</a></li>"
		    "<li><a href=\"/dashboard/apps\">Connected apps</a></li>"
		    "<li><a href=\"/dashboard/settings\">Settings</a></li>"
		    "<li><form method=\"post\" action=\"/logout\" class=\"inline\">");
		page_csrf(c);
		page_f(c, "<button type=\"submit\" class=\"link\">Log out</button></form></li>");
	} else {
		page_f(c,
		    "<li><a href=\"/login\">Log in</a></li><li><a href=\"/signup\">Sign up</a></li>");
	}
	page_f(c, "</ul></nav></header><main id=\"main\"><h1>%s</h1>", title);
}

void
page_csrf(struct web_ctx *c)
{
	page_f(c, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">",
	    c->logged_in ? c->sess.csrf : c->form_token);
}

void
page_input(struct web_ctx *c, const char *name, const char *label, const char *type,
    const char *autocomplete, const char *value, const char *hint, const char *error)
{
	page_f(c, "<div class=\"field\"><label for=\"f-%s\">%s</label>", name, label);
	if (hint)
		page_f(c, "<p class=\"hint\" id=\"h-%s\">%s</p>", name, hint);
	if (error)
		page_f(c, "<p class=\"field-error\" id=\"e-%s\">%s</p>", name, error);
	page_f(c, "<input id=\"f-%s\" name=\"%s\" type=\"%s\" autocomplete=\"%s\" value=\"%s\"",
	    name, name, type, autocomplete, value ? value : "");
	if (hint && error)
		page_f(c, " aria-describedby=\"h-%s e-%s\"", name, name);
	else if (hint || error)
		page_f(c, " aria-describedby=\"%s-%s\"", hint ? "h" : "e", name);
	if (error)
		page_f(c, " aria-invalid=\"true\"");
	page_f(c, " required></div>");
}

void
page_alert(struct web_ctx *c, const char *cls, const char *msg)
{
	page_f(c, "<p class=\"%s\" role=\"%S\">%s</p>", cls,
	    strcmp(cls, "error") == 0 ? "alert" : "status", msg);
}

void
page_send(struct web_ctx *c, int status)
{
	size_t len = 0;
	char *html;

	page_f(c,
	    "</main><footer><p><a href=\"/v1/openapi.json\">REST API</a> · "
	    "MCP endpoint <code>/v1/mcp</code></p></footer></body></html>\n");
	if (c->out.failed) {
		buf_free(&c->out);
		c->page_open = 0;
		http_reply_error(c->req, 500, "internal", "the page did not fit");
		return;
	}
	html = buf_steal(&c->out, &len);
	c->page_open = 0;
	security_headers(c->req, c->form_action);
	http_reply_raw(c->req, status, "text/html; charset=utf-8", html ? html : "", len);
	free(html);
}

void
page_message(struct web_ctx *c, int status, const char *title, const char *msg, const char *link,
    const char *link_text)
{
	page_begin(c, title);
	page_alert(c, status >= 400 ? "error" : "notice", msg);
	if (link)
		page_f(c, "<p><a href=\"%s\">%s</a></p>", link, link_text);
	page_send(c, status);
}
