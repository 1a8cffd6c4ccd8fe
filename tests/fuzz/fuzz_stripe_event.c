/* fuzz_stripe_event.c - a Stripe webhook delivery from bytes
 * (account/pay_stripe.c): the first line is the Stripe-Signature header,
 * the rest the body. When the first byte is even the header is replaced
 * by a valid signature of the body, so the event reader is reached too.
 * Checks: a paid event always names an account, a checkout and an amount
 * within the provider's maximum; a refund or dispute names its payment
 * and its id, with an amount within it. */
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/config.h"
#include "base/err.h"
#include "account/pay.h"
#include "tests/fuzz/fuzz.h"

#define SECRET "whsec_fuzz"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config cfg;
	struct fuzz_fields ff;
	struct pay_event ev;
	struct err e;
	char sig[256];
	const char *header;
	long long now = 1700000000;

	if (size < 1 || fuzz_split(data + 1, size - 1, 2, &ff) < 0)
		return 0;
	snprintf(cfg.stripe_webhook_secret, sizeof(cfg.stripe_webhook_secret), "%s", SECRET);
	snprintf(cfg.stripe_secret_key, sizeof(cfg.stripe_secret_key), "sk_fuzz");
	header = ff.f[0];
	if (data[0] % 2 == 0) {
		unsigned char mac[32], msg[65536 + 32];
		unsigned int ml = 0;
		int n = snprintf((char *)msg, sizeof(msg), "%lld.", now);
		size_t bl = ff.len[1] < sizeof(msg) - (size_t)n ? ff.len[1] : 0;

		memcpy(msg + n, ff.f[1], bl);
		HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), msg, (size_t)n + bl, mac, &ml);
		n = snprintf(sig, sizeof(sig), "t=%lld,v1=", now);
		for (unsigned i = 0; i < ml; i++)
			n += snprintf(sig + n, sizeof(sig) - (size_t)n, "%02x", mac[i]);
		header = sig;
		if (bl != ff.len[1])
			header = "t=0";
	}
	err_clear(&e);
	int rc = pay_stripe.parse(&cfg, header, ff.f[1], ff.len[1], now, &ev, &e);

	/* A header from the input cannot carry a valid HMAC of the body. */
	if (data[0] % 2 == 1 && strstr(header, "v1=") != NULL)
		FUZZ_CHECK(rc < 0);
	if (rc == 0 && ev.paid) {
		FUZZ_CHECK(ev.account[0] != '\0');
		FUZZ_CHECK(ev.checkout_id[0] != '\0');
		FUZZ_CHECK(ev.amount > 0 && ev.amount <= (long long)PAY_MAX_USD * 1000000);
	}
	/* Money taken back always names the payment and stays in bounds. */
	if (rc == 0 && ev.action != PAY_NONE && ev.action != PAY_PAID) {
		FUZZ_CHECK(ev.payment_intent[0] != '\0' && ev.ref[0] != '\0');
		FUZZ_CHECK(ev.amount >= 0 && ev.amount <= (long long)PAY_MAX_USD * 1000000);
	}
	FUZZ_CHECK(ev.paid == (rc == 0 && ev.action == PAY_PAID));
	free(ff.buf);
	return 0;
}
