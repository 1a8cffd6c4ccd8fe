/* web_pay.c - buying credit from the dashboard (web_pay_): the top-up
 * form, the redirect to the provider's checkout, and the provider's
 * webhook, which alone credits the account. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "server/rest_query.h"
#include "server/web_int.h"
#include "account/pay.h"

static const struct pay_provider *
provider(const struct config *cfg)
{
	return pay_stripe.configured(cfg) && cfg->n_topups > 0 ? &pay_stripe : NULL;
}

void
web_pay_form(struct web_ctx *c)
{
	if (provider(c->cfg) == NULL) {
		page_f(c,
		    "<h2>Buying credit</h2><p id=\"no-payments\">Credit comes from the operator "
		    "of this service; ask them for more.</p>");
		return;
	}
	page_f(c,
	    "<h2>Buy credit</h2><form method=\"post\" action=\"/dashboard/billing/checkout\">"
	    "<fieldset><legend>Amount</legend>");
	page_csrf(c);
	for (int i = 0; i < c->cfg->n_topups; i++)
		page_f(c,
		    "<label class=\"inline-label\"><input type=\"radio\" name=\"amount\" "
		    "value=\"%d\"%S> $%d</label> ",
		    c->cfg->topups[i], i == 0 ? " checked" : "", c->cfg->topups[i]);
	page_f(c,
	    "</fieldset><button type=\"submit\">Pay with Stripe</button></form>"
	    "<p class=\"hint\">You pay on Stripe's page; the credit is added when Stripe "
	    "confirms the payment.</p>");
}

void
web_pay_checkout(struct web_ctx *c)
{
	const struct pay_provider *p = provider(c->cfg);
	struct pay_checkout co;
	long long usd = 0;
	struct err e;
	int offered = 0;

	if (strcmp(c->method, "POST") != 0) {
		web_redirect(c, "/dashboard/usage");
		return;
	}
	if (!web_csrf_check(c))
		return;
	if (p == NULL) {
		page_message(c, 404, "No payments",
		    "Credit comes from the operator of this service.", "/dashboard/usage",
		    "Back to usage");
		return;
	}
	if (rest_query_int(web_field(c, "amount"), &usd) == 0)
		for (int i = 0; i < c->cfg->n_topups; i++)
			offered |= c->cfg->topups[i] == usd;
	if (!offered) {
		page_message(c, 400, "No checkout", "Choose one of the amounts offered.",
		    "/dashboard/usage", "Back to usage");
		return;
	}
	err_clear(&e);
	if (pay_checkout_allowed(c->w->app->db, c->cfg, c->sess.account_id, &e) < 0) {
		page_message(c, err_http_status(e.kind), "No checkout", e.msg, "/dashboard/usage",
		    "Back to usage");
		return;
	}
	if (p->checkout(c->cfg, c->sess.account_id, c->sess.email, (int)usd, &co, &e) < 0) {
		page_message(c, 502, "No checkout", e.msg, "/dashboard/usage", "Back to usage");
		return;
	}
	if (pay_checkout_made(c->w->app->db, p, c->sess.account_id, &co, usd * 1000000, &e) < 0) {
		page_message(c, 503, "No checkout",
		    "The checkout could not be recorded; try again.", "/dashboard/usage",
		    "Back to usage");
		return;
	}
	log_info("web: account %s checkout %s for %lld USD", c->sess.account_id, co.id, usd);
	page_security_headers(c->req);
	http_add_header(c->req, "Location", co.url);
	http_reply_raw(c->req, 303, "text/plain; charset=utf-8", "See Other\n", 10);
}

struct webhook_job {
	struct web *w;
	struct pay_event ev;
};

static void
webhook_work(struct http_req *req, void *arg)
{
	struct webhook_job *job = arg;
	struct err e;
	int credited = 0;

	err_clear(&e);
	if (pay_apply(job->w->app->db, &pay_stripe, &job->ev, &credited, &e) < 0) {
		/* The provider delivers again later. */
		http_reply_error(req, err_http_status(e.kind) >= 500 ? 503 : 400, "not_recorded",
		    e.msg);
	} else {
		if (credited)
			log_info("payment %s: account %s credited %lld micro-USD (checkout %s)",
			    job->ev.id, job->ev.account, job->ev.amount, job->ev.checkout_id);
		http_reply_json(req, 200,
		    json_pack("{s:b,s:b}", "received", 1, "credited", credited));
	}
	free(job);
}

/* The signature and the event are checked here, on the HTTP thread (an
 * HMAC and a small JSON parse): unsigned deliveries never take a turn in
 * the queue real ones wait in. */
void
web_pay_webhook(struct http_req *req, void *ctx)
{
	struct web *w = ctx;
	const struct pay_provider *p = provider(&w->app->cfg);
	struct webhook_job *job;
	size_t len = 0;
	const char *body;
	struct err e;

	if (strcmp(http_method(req), "POST") != 0) {
		http_add_header(req, "Allow", "POST");
		http_reply_error(req, 405, "method_not_allowed", "the webhook takes POST");
		return;
	}
	if (p == NULL) {
		http_reply_error(req, 404, "not_found", "payments are not configured");
		return;
	}
	job = calloc(1, sizeof(*job));
	if (job == NULL) {
		http_reply_error(req, 503, "unavailable", "out of memory");
		return;
	}
	job->w = w;
	body = http_body(req, &len);
	err_clear(&e);
	if (p->parse(&w->app->cfg, http_header(req, "Stripe-Signature"), body ? body : "", len,
		(long long)time(NULL), &job->ev, &e) < 0) {
		log_warn("payment webhook refused: %s", e.msg);
		http_reply_error(req, 400, e.kind == ERR_UNAUTHORIZED ? "bad_signature" : "invalid",
		    e.msg);
		free(job);
		return;
	}
	http_defer_as(req, "pay-webhook", webhook_work, job, free);
}
