/* web_usage.c - the dashboard's usage page and ledger export (web_usage_):
 * balance, free credit left, spend per day as an inline SVG chart, the
 * ledger page by page, and the whole ledger as CSV. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "server/rest_query.h"
#include "server/web_int.h"
#include "sandbox/usage.h"
#include "base/fmt.h"

#define CHART_DAYS 30
#define LEDGER_PAGE 25
#define CSV_MAX_ROWS 100000
#define CSV_MAX_BYTES (32 * 1024 * 1024)

static void
chart(struct web_ctx *c, const json_t *days)
{
	long long top = 1;
	const json_t *d;
	size_t i, n = json_array_size(days);
	const int w = 600, h = 160, gap = 2;
	int bw = n ? w / (int)n - gap : w;

	json_array_foreach(days, i, d) {
		long long v = json_integer_value(json_object_get(d, "spent"));

		if (v > top)
			top = v;
	}
	page_f(c,
	    "<figure><svg id=\"spend-chart\" role=\"img\" aria-labelledby=\"chart-title\" "
	    "viewBox=\"0 0 %d %d\" width=\"100%%\" height=\"%d\">"
	    "<title id=\"chart-title\">Spend per day, last %d days; highest %M</title>",
	    w, h + 20, h + 20, CHART_DAYS, top == 1 ? 0LL : top);
	json_array_foreach(days, i, d) {
		long long v = json_integer_value(json_object_get(d, "spent"));
		int bh = v > 0 ? (int)(v * h / top) : 0;

		if (v > 0 && bh < 2)
			bh = 2;
		page_f(c,
		    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#0b57d0\">"
		    "<title>%s: %M</title></rect>",
		    (int)i * (bw + gap), h - bh, bw, bh,
		    json_string_value(json_object_get(d, "day")), v);
	}
	page_f(c,
	    "<line x1=\"0\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#767676\"/>"
	    "<text x=\"0\" y=\"%d\" font-size=\"12\" fill=\"#1a1a1a\">%s</text>"
	    "<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"#1a1a1a\" text-anchor=\"end\">%s"
	    "</text></svg><figcaption>Spend per day (charges less refunds), UTC.</figcaption>"
	    "</figure>",
	    h, w, h, h + 16,
	    n ? json_string_value(json_object_get(json_array_get(days, 0), "day")) : "", w, h + 16,
	    n ? json_string_value(json_object_get(json_array_get(days, n - 1), "day")) : "");
}

void
web_usage_page(struct web_ctx *c)
{
	const char *bs = web_qarg(c, "before");
	long long before = 0;
	int64_t next = 0;
	struct err e;
	json_t *usage = NULL, *days = NULL, *ledger = NULL, *en;
	size_t i;
	int status = 200;

	err_clear(&e);
	if (*bs && (rest_query_int(bs, &before) < 0 || before < 1)) {
		page_message(c, 400, "Usage", "That page of the ledger does not exist.",
		    "/dashboard/usage", "The newest entries");
		return;
	}
	usage = web_tool(c, "get_usage", json_pack("{s:i}", "limit", 1), &e);
	if (usage)
		days = usage_daily_json(c->w->app->db, c->sess.account_id, CHART_DAYS, &e);
	if (days)
		ledger = usage_ledger_json(c->w->app->db, c->sess.account_id, LEDGER_PAGE, before,
		    &next, &e);
	page_begin(c, "Usage");
	if (ledger == NULL) {
		page_alert(c, "error", e.msg);
		status = err_http_status(e.kind);
		goto out;
	}
	page_f(c,
	    "<dl class=\"figures\"><dt>Balance</dt><dd id=\"usage-balance\">%M</dd>"
	    "<dt>Free credit left</dt><dd id=\"usage-free\">%M</dd>"
	    "<dt>Spent today</dt><dd>%M</dd><dt>Spent this month</dt><dd>%M</dd></dl>",
	    (long long)json_integer_value(json_object_get(usage, "balance")),
	    (long long)json_integer_value(json_object_get(usage, "free_credit_remaining")),
	    (long long)json_integer_value(json_object_get(usage, "spend_today")),
	    (long long)json_integer_value(json_object_get(usage, "spend_month")));
	if (strcmp(web_qarg(c, "paid"), "1") == 0)
		page_alert(c, "notice",
		    "Thank you. The credit is added as soon as the payment is "
		    "confirmed; reload this page in a moment.");
	chart(c, days);
	web_pay_form(c);
	page_f(c,
	    "<h2>Ledger</h2><p><a href=\"/dashboard/usage.csv\" download>Download the whole "
	    "ledger as CSV</a></p>");
	if (json_array_size(ledger) == 0) {
		page_f(c, "<p>No entries%s.</p>", before ? " on this page" : "");
	} else {
		page_f(c,
		    "<table id=\"ledger\"><thead><tr><th scope=\"col\">When (UTC)</th>"
		    "<th scope=\"col\">Kind</th><th scope=\"col\">Amount</th>"
		    "<th scope=\"col\">Minutes</th><th scope=\"col\">Sandbox</th>"
		    "<th scope=\"col\">Reason</th></tr></thead><tbody>");
		json_array_foreach(ledger, i, en) {
			const json_t *m = json_object_get(en, "minutes");
			const char *sb = json_string_value(json_object_get(en, "sandbox_id"));
			char mins[24] = "";

			if (json_is_integer(m) &&
			    fmt_buf(mins, sizeof(mins), "%lld", (long long)json_integer_value(m)) <
				0)
				mins[0] = '\0';
			page_f(c,
			    "<tr class=\"entry-%s\"><td>%s</td><td>%s</td><td>%M</td><td>%s</td>"
			    "<td>%s</td><td>%s</td></tr>",
			    json_string_value(json_object_get(en, "kind")),
			    json_string_value(json_object_get(en, "created_at")),
			    json_string_value(json_object_get(en, "kind")),
			    (long long)json_integer_value(json_object_get(en, "amount")), mins,
			    sb ? sb : "", json_string_value(json_object_get(en, "reason")));
		}
		page_f(c, "</tbody></table>");
	}
	page_f(c, "<nav aria-label=\"Ledger pages\"><p>");
	if (before)
		page_f(c, "<a href=\"/dashboard/usage\">Newest entries</a> ");
	if (next > 0)
		page_f(c, "<a href=\"/dashboard/usage?before=%L\" id=\"older\">Older entries</a>",
		    (long long)next);
	page_f(c, "</p></nav>");
out:
	json_decref(usage);
	json_decref(days);
	json_decref(ledger);
	page_send(c, status);
}

/* A CSV field: quoted, quotes doubled, and a leading = + - @ tab or CR made
 * inert so a spreadsheet never runs it as a formula. */
static void
csv_field(struct buf *b, const char *s)
{
	buf_append(b, "\"", 1);
	if (s && (*s == '=' || *s == '+' || *s == '-' || *s == '@' || *s == '\t' || *s == '\r'))
		buf_append(b, "'", 1);
	for (; s && *s; s++) {
		if (*s == '"')
			buf_append(b, "\"", 1);
		buf_append(b, s, 1);
	}
	buf_append(b, "\"", 1);
}

void
web_usage_csv(struct web_ctx *c)
{
	struct buf b;
	int64_t before = 0, next = 0;
	long rows = 0;
	struct err e;
	char *text;
	size_t len = 0;

	buf_init(&b, CSV_MAX_BYTES);
	buf_printf(&b,
	    "id,created_at,kind,amount_usd,amount_microusd,minutes,sandbox_id,reason\r\n");
	err_clear(&e);
	do {
		json_t *page = usage_ledger_json(c->w->app->db, c->sess.account_id, 100, before,
		    &next, &e);
		json_t *en;
		size_t i;

		if (page == NULL) {
			buf_free(&b);
			http_reply_error(c->req, err_http_status(e.kind), "unavailable", e.msg);
			return;
		}
		json_array_foreach(page, i, en) {
			long long amount = json_integer_value(json_object_get(en, "amount"));
			const json_t *m = json_object_get(en, "minutes");
			long long a = amount < 0 ? -amount : amount;

			buf_printf(&b, "%lld,",
			    (long long)json_integer_value(json_object_get(en, "id")));
			csv_field(&b, json_string_value(json_object_get(en, "created_at")));
			buf_append(&b, ",", 1);
			csv_field(&b, json_string_value(json_object_get(en, "kind")));
			buf_printf(&b, ",%s%lld.%06lld,%lld,", amount < 0 ? "-" : "", a / 1000000,
			    a % 1000000, amount);
			if (json_is_integer(m))
				buf_printf(&b, "%lld", (long long)json_integer_value(m));
			buf_append(&b, ",", 1);
			csv_field(&b, json_string_value(json_object_get(en, "sandbox_id")));
			buf_append(&b, ",", 1);
			csv_field(&b, json_string_value(json_object_get(en, "reason")));
			buf_append(&b, "\r\n", 2);
			rows++;
		}
		json_decref(page);
		before = next;
	} while (next > 0 && rows < CSV_MAX_ROWS && !b.failed);
	if (b.failed) {
		http_reply_error(c->req, 413, "too_large", "the ledger is too long for one file");
		return;
	}
	text = buf_steal(&b, &len);
	page_security_headers(c->req);
	http_add_header(c->req, "Content-Disposition", "attachment; filename=\"aas-ledger.csv\"");
	http_reply_raw(c->req, 200, "text/csv; charset=utf-8", text ? text : "", len);
	free(text);
}
