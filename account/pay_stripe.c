/* pay_stripe.c - Stripe Checkout as a payment provider: a checkout
 * session through Stripe's API, and webhook deliveries checked by their
 * Stripe-Signature (HMAC-SHA256 of "<t>.<body>" with the endpoint's
 * secret, at most PAY_TOLERANCE_S old). */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/buf.h"
#include "base/fmt.h"
#include "base/num.h"
#include "account/pay.h"

#define STRIPE_REPLY_MAX (64 * 1024)
#define STRIPE_TIMEOUT_S 20
#define STRIPE_MAX_SIGS 8

static int
stripe_configured(const struct config *cfg)
{
	return cfg->stripe_secret_key[0] != '\0' && cfg->stripe_webhook_secret[0] != '\0';
}

/* Whether `sig` (the header) holds a v1 signature of t.body made with
 * `secret`, with t within the tolerance of now. */
static int
signature_ok(const char *secret, const char *sig, const char *body, size_t len, long long now,
    struct err *e)
{
	char want[65], tbuf[24];
	const char *v1[STRIPE_MAX_SIGS];
	size_t nv1 = 0;
	long long t = -1;
	unsigned char mac[32];
	unsigned int maclen = 0;
	struct buf msg;
	int ok = 0;

	for (const char *p = sig; p && *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n > 2 && strncmp(p, "t=", 2) == 0 && n - 2 < sizeof(tbuf)) {
			memcpy(tbuf, p + 2, n - 2);
			tbuf[n - 2] = '\0';
			if (num_parse_ll(tbuf, &t) < 0)
				t = -1;
		} else if (n == 3 + 64 && strncmp(p, "v1=", 3) == 0 && nv1 < STRIPE_MAX_SIGS) {
			v1[nv1++] = p + 3;
		}
		p = end ? end + 1 : NULL;
	}
	if (t < 0 || nv1 == 0) {
		err_set(e, ERR_UNAUTHORIZED, "Stripe-Signature: no timestamp or no v1 signature");
		return 0;
	}
	if (t < now - PAY_TOLERANCE_S || t > now + PAY_TOLERANCE_S) {
		err_set(e, ERR_UNAUTHORIZED, "Stripe-Signature: timestamp outside %d s of now",
		    PAY_TOLERANCE_S);
		return 0;
	}
	if (fmt_err(e, "timestamp", tbuf, sizeof(tbuf), "%lld.", t) < 0)
		return 0;
	buf_init(&msg, len + sizeof(tbuf));
	if (buf_append(&msg, tbuf, strlen(tbuf)) < 0 || buf_append(&msg, body, len) < 0 ||
	    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg.data,
		msg.len, mac, &maclen) == NULL) {
		buf_free(&msg);
		err_set(e, ERR_INTERNAL, "HMAC failed");
		return 0;
	}
	buf_free(&msg);
	for (unsigned i = 0; i < maclen; i++)
		if (fmt_err(e, "signature", want + 2 * i, 3, "%02x", mac[i]) < 0)
			return 0;
	for (size_t i = 0; i < nv1; i++)
		ok |= CRYPTO_memcmp(v1[i], want, 64) == 0;
	if (!ok)
		err_set(e, ERR_UNAUTHORIZED, "Stripe-Signature: no signature matches");
	return ok;
}

static void
copy_str(char *out, size_t n, const json_t *v)
{
	const char *s = json_string_value(v);

	/* A value that does not fit is none: the callers refuse an empty one. */
	if (s == NULL || fmt_buf(out, n, "%s", s) < 0)
		out[0] = '\0';
}

/* The amount in US cents when obj's currency is usd and `amount` is a
 * whole number of cents within PAY_MAX_USD; else -1. */
static long long
usd_cents(const json_t *obj, const json_t *amount)
{
	const char *currency = json_string_value(json_object_get(obj, "currency"));

	if (currency == NULL || strcmp(currency, "usd") != 0 || !json_is_integer(amount) ||
	    json_integer_value(amount) < 0 || json_integer_value(amount) > PAY_MAX_USD * 100)
		return -1;
	return (long long)json_integer_value(amount);
}

/* Refunds (charge.refunded: a Charge, amount_refunded in all so far) and
 * disputes (charge.dispute.*: a Dispute, its amount): the payment they
 * name, and how much. Anything else, or odd values, moves nothing. */
static void
money_back(const char *type, const json_t *obj, struct pay_event *out)
{
	enum pay_action a = PAY_NONE;
	long long cents;

	if (strcmp(type, "charge.refunded") == 0) {
		a = PAY_REFUND;
		cents = usd_cents(obj, json_object_get(obj, "amount_refunded"));
	} else if (strcmp(type, "charge.dispute.created") == 0 ||
	    strcmp(type, "charge.dispute.funds_withdrawn") == 0) {
		a = PAY_DISPUTE;
		cents = usd_cents(obj, json_object_get(obj, "amount"));
	} else if (strcmp(type, "charge.dispute.funds_reinstated") == 0) {
		a = PAY_REINSTATE;
		cents = usd_cents(obj, json_object_get(obj, "amount"));
	} else {
		return;
	}
	copy_str(out->payment_intent, sizeof(out->payment_intent),
	    json_object_get(obj, "payment_intent"));
	copy_str(out->ref, sizeof(out->ref), json_object_get(obj, "id"));
	if (cents < 0 || out->payment_intent[0] == '\0' || out->ref[0] == '\0')
		return;
	out->amount = cents * 10000;
	out->action = a;
}

static int
stripe_parse(const struct config *cfg, const char *signature, const char *body, size_t len,
    long long now, struct pay_event *out, struct err *e)
{
	json_error_t je;
	json_t *ev, *obj, *amount;
	const char *type, *status, *acct;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (signature == NULL) {
		err_set(e, ERR_UNAUTHORIZED, "no Stripe-Signature header");
		return -1;
	}
	if (!signature_ok(cfg->stripe_webhook_secret, signature, body, len, now, e))
		return -1;
	ev = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(ev)) {
		json_decref(ev);
		err_set(e, ERR_INVALID, "the body is not a JSON event");
		return -1;
	}
	type = json_string_value(json_object_get(ev, "type"));
	copy_str(out->id, sizeof(out->id), json_object_get(ev, "id"));
	if (type == NULL || out->id[0] == '\0' ||
	    fmt_buf(out->kind, sizeof(out->kind), "%s", type) < 0) {
		err_set(e, ERR_INVALID, "an event has an id and a type");
		goto out;
	}
	obj = json_object_get(json_object_get(ev, "data"), "object");
	rc = 0;
	if (strncmp(type, "charge.", 7) == 0) {
		money_back(type, obj, out);
		goto out;
	}
	/* Only a paid checkout moves money; every other event is recorded. */
	if (strcmp(type, "checkout.session.completed") != 0 &&
	    strcmp(type, "checkout.session.async_payment_succeeded") != 0)
		goto out;
	copy_str(out->checkout_id, sizeof(out->checkout_id), json_object_get(obj, "id"));
	copy_str(out->payment_intent, sizeof(out->payment_intent),
	    json_object_get(obj, "payment_intent"));
	acct = json_string_value(json_object_get(json_object_get(obj, "metadata"), "account_id"));
	if (acct == NULL)
		acct = json_string_value(json_object_get(obj, "client_reference_id"));
	if (acct && acct_id_valid(acct) &&
	    fmt_err(e, "account id", out->account, sizeof(out->account), "%s", acct) < 0) {
		rc = -1;
		goto out;
	}
	status = json_string_value(json_object_get(obj, "payment_status"));
	amount = json_object_get(obj, "amount_total");
	if (status && strcmp(status, "paid") == 0 && usd_cents(obj, amount) > 0 &&
	    out->account[0] && out->checkout_id[0]) {
		out->amount = usd_cents(obj, amount) * 10000; /* cents to micro-USD */
		out->paid = 1;
		out->action = PAY_PAID;
	}
out:
	json_decref(ev);
	return rc;
}

static size_t
reply_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;

	return buf_append(b, p, size * nmemb) == 0 ? size * nmemb : 0;
}

static int
form_add(struct buf *b, CURL *h, const char *name, const char *value)
{
	char *v = curl_easy_escape(h, value, 0);
	int rc;

	if (v == NULL)
		return -1;
	rc = buf_printf(b, "%s%s=%s", b->len ? "&" : "", name, v);
	curl_free(v);
	return rc;
}

static int
stripe_checkout(const struct config *cfg, const char *account, const char *email, int usd,
    struct pay_checkout *out, struct err *e)
{
	char url[CONFIG_STR_MAX + 64], ok_url[CONFIG_STR_MAX + 64], cancel_url[CONFIG_STR_MAX + 64];
	char cents[16], auth[300];
	struct curl_slist *hdrs = NULL;
	struct buf form, reply;
	json_t *j = NULL;
	long code = 0;
	CURL *h;
	int rc = -1;

	if (usd < 1 || usd > PAY_MAX_USD) {
		err_set_field(e, "amount", "amount: 1 to %d US dollars", PAY_MAX_USD);
		return -1;
	}
	buf_init(&form, 8192);
	buf_init(&reply, STRIPE_REPLY_MAX);
	h = curl_easy_init();
	if (h == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (fmt_err(e, "Stripe API URL", url, sizeof(url), "%s/v1/checkout/sessions",
		cfg->stripe_api_url) < 0 ||
	    fmt_err(e, "public URL", ok_url, sizeof(ok_url), "%s/dashboard/usage?paid=1",
		cfg->public_url) < 0 ||
	    fmt_err(e, "public URL", cancel_url, sizeof(cancel_url), "%s/dashboard/usage",
		cfg->public_url) < 0 ||
	    fmt_err(e, "amount", cents, sizeof(cents), "%d", usd * 100) < 0 ||
	    fmt_err(e, "Stripe secret key", auth, sizeof(auth), "Authorization: Bearer %s",
		cfg->stripe_secret_key) < 0)
		goto out;
	if (form_add(&form, h, "mode", "payment") < 0 ||
	    form_add(&form, h, "success_url", ok_url) < 0 ||
	    form_add(&form, h, "cancel_url", cancel_url) < 0 ||
	    form_add(&form, h, "client_reference_id", account) < 0 ||
	    form_add(&form, h, "customer_email", email) < 0 ||
	    form_add(&form, h, "metadata[account_id]", account) < 0 ||
	    form_add(&form, h, "line_items[0][quantity]", "1") < 0 ||
	    form_add(&form, h, "line_items[0][price_data][currency]", "usd") < 0 ||
	    form_add(&form, h, "line_items[0][price_data][unit_amount]", cents) < 0 ||
	    form_add(&form, h, "line_items[0][price_data][product_data][name]", "aas credit") < 0) {
		err_set(e, ERR_INTERNAL, "checkout request too large");
		goto out;
	}
	hdrs = curl_slist_append(hdrs, auth);
	if (hdrs == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, form.data);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)form.len);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, reply_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)STRIPE_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (curl_easy_perform(h) != CURLE_OK) {
		err_set(e, ERR_UNAVAILABLE, "the payment provider did not answer; try again later");
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	j = reply.data ? json_loadb(reply.data, reply.len, 0, NULL) : NULL;
	if (code != 200 || j == NULL) {
		err_set(e, ERR_UNAVAILABLE, "the payment provider refused the checkout (HTTP %ld)",
		    code);
		goto out;
	}
	copy_str(out->id, sizeof(out->id), json_object_get(j, "id"));
	copy_str(out->url, sizeof(out->url), json_object_get(j, "url"));
	if (out->id[0] == '\0' ||
	    (strncmp(out->url, "https://", 8) != 0 && strncmp(out->url, "http://", 7) != 0) ||
	    strpbrk(out->url, "\r\n \"<>") != NULL) {
		err_set(e, ERR_UNAVAILABLE, "the payment provider gave no checkout page");
		goto out;
	}
	rc = 0;
out:
	OPENSSL_cleanse(auth, sizeof(auth));
	json_decref(j);
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	buf_free(&form);
	buf_free(&reply);
	return rc;
}

const struct pay_provider pay_stripe = {
	.name = "stripe",
	.configured = stripe_configured,
	.checkout = stripe_checkout,
	.parse = stripe_parse,
};
