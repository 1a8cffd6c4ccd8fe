/* fuzz_preview.c - what a preview request controls (sandbox/preview.h):
 * the Host header against the preview domain, the label in front of it,
 * the signed URL's query parameters and signature, and the Cookie header.
 * Fields are separated by newlines: host, domain, query, cookie, then one
 * byte sizing the output buffers (each an exact heap block, so writing
 * past one is caught). */
#include <string.h>

#include "sandbox/preview.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_TOKEN_HASH "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_fields ff;
	size_t n;
	char *label, *id, *val, *strip, *url;
	int port = 0;

	if (fuzz_split(data, size, 5, &ff) < 0)
		return 0;
	n = ff.len[4] > 0 ? (unsigned char)ff.f[4][0] % 300 + 1 : 64;
	label = malloc(n);
	id = malloc(n);
	val = malloc(n);
	strip = malloc(n);
	url = malloc(n);
	if (!label || !id || !val || !strip || !url)
		goto out;

	if (preview_under_domain(ff.f[0], ff.f[1], label, n)) {
		FUZZ_CHECK(strlen(label) < n);
		if (preview_parse_label(label, &port, id, n) == 0) {
			FUZZ_CHECK(port >= 1 && port <= 65535);
			FUZZ_CHECK(strlen(id) < n && strlen(id) <= PREVIEW_ID_MAX && id[0]);
			if (preview_url("https", ff.f[1], id, port, url, n) == 0)
				FUZZ_CHECK(strlen(url) < n);
			char exp[32] = "", sig[PREVIEW_SIG_HEX + 2] = "";
			if (preview_query_get(ff.f[2], PREVIEW_Q_EXP, exp, sizeof(exp)) &&
			    preview_query_get(ff.f[2], PREVIEW_Q_SIG, sig, sizeof(sig))) {
				/* Neither a forged signature nor the real one past its
				 * time passes; the real one in time does. */
				int ok = preview_sig_valid(FUZZ_TOKEN_HASH, id, port, exp, sig,
				    1700000000);
				char good[PREVIEW_SIG_HEX + 1], *end;
				long long when = strtoll(exp, &end, 10);
				if (ok) {
					FUZZ_CHECK(*end == '\0' && when >= 1700000000);
					FUZZ_CHECK(preview_sign(FUZZ_TOKEN_HASH, id, port, when,
						       good, sizeof(good)) == 0);
					FUZZ_CHECK(strcmp(good, sig) == 0);
				}
			}
		}
	}
	/* The parsers on their own, whatever the host was. */
	if (preview_parse_label(ff.f[0], &port, id, n) == 0)
		FUZZ_CHECK(strlen(id) < n && port >= 1 && port <= 65535);
	if (preview_query_get(ff.f[2], PREVIEW_Q_EXP, val, n))
		FUZZ_CHECK(strlen(val) < n);
	preview_query_strip(ff.f[2], strip, n);
	FUZZ_CHECK(strlen(strip) < n);
	FUZZ_CHECK(strncmp(strip, PREVIEW_Q_SIG "=", strlen(PREVIEW_Q_SIG "=")) != 0 &&
	    strstr(strip, "&" PREVIEW_Q_SIG "=") == NULL);
	if (preview_cookie_get(ff.f[3], PREVIEW_COOKIE, val, n))
		FUZZ_CHECK(strlen(val) < n);
	preview_sig_valid(FUZZ_TOKEN_HASH, ff.f[0], port, ff.f[2], ff.f[3], 1700000000);
out:
	free(label);
	free(id);
	free(val);
	free(strip);
	free(url);
	free(ff.buf);
	return 0;
}
