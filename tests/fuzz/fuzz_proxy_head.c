/* fuzz_proxy_head.c - what an upstream inside a sandbox and a client send
 * the preview proxy (server/proxy_parse.h). The first byte picks what the
 * rest is: a response head read as the proxy reads it (interim answers
 * skipped), a chunked body decoded in one piece and again split at a
 * point the second byte chooses (the two must agree), client request
 * headers ("name: value" lines) checked before they go upstream, or (the
 * second byte 'c') an upstream's Set-Cookie value through the cookie
 * filter (sandbox/preview_cookie.h). */
#include <string.h>
#include <strings.h>

#include "server/proxy_parse.h"
#include "sandbox/preview_cookie.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_HEAD_MAX (64 * 1024) /* as the proxy's PX_HEAD_MAX */

struct sink {
	const char *lo, *hi; /* where decoded bytes may come from */
	char *out;
	size_t len, cap;
};

static int
sink_put(void *cls, const char *data, size_t n)
{
	struct sink *s = cls;

	FUZZ_CHECK(n > 0 && data >= s->lo && data + n <= s->hi);
	FUZZ_CHECK(s->len + n <= s->cap);
	memcpy(s->out + s->len, data, n);
	s->len += n;
	return 0;
}

static void
heads(const uint8_t *data, size_t size, int flags)
{
	char *buf, *end;
	size_t len = size < FUZZ_HEAD_MAX ? size : FUZZ_HEAD_MAX;

	buf = fuzz_dup((const char *)data, len);
	if (buf == NULL)
		return;
	/* read_head: parse each complete head; a 1xx one is dropped. */
	end = strstr(buf, "\r\n\r\n");
	while (end) {
		size_t used = (size_t)(end - buf) + 4;
		struct pxp_resp r;

		if (pxp_parse_head(buf, used, flags & 1 ? "HEAD" : "GET", flags & 2, &r) < 0)
			break;
		FUZZ_CHECK(r.status >= 100 && r.status <= 599 && r.n_hdr <= PXP_MAX_HEADERS);
		for (size_t i = 0; i < r.n_hdr; i++) {
			FUZZ_CHECK(r.hname[i] >= buf && r.hname[i] < buf + used);
			FUZZ_CHECK(r.hval[i] >= buf && r.hval[i] < buf + used);
			/* Nothing that could split a header on its way out. */
			FUZZ_CHECK(r.hname[i][0] && strpbrk(r.hname[i], " \t\r\n:") == NULL);
			FUZZ_CHECK(strpbrk(r.hval[i], "\r\n") == NULL);
		}
		FUZZ_CHECK(r.framing != PXP_FRAME_LENGTH || r.length >= 0);
		FUZZ_CHECK(!r.upgrade || (r.status == 101 && (flags & 2)));
		if (r.status >= 200 || r.status == 101)
			break;
		memmove(buf, buf + used, len - used);
		len -= used;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	free(buf);
}

static void
chunked(const uint8_t *data, size_t size, size_t cut)
{
	const char *in = (const char *)data;
	struct pxp_dechunk d1 = { PXP_CH_SIZE, 0, 0 }, d2 = { PXP_CH_SIZE, 0, 0 };
	struct sink s1 = { in, in + size, malloc(size + 1), 0, size };
	struct sink s2 = { in, in + size, malloc(size + 1), 0, size };
	int r1, r2;

	if (s1.out == NULL || s2.out == NULL)
		goto out;
	if (cut > size)
		cut = size;
	r1 = pxp_dechunk(&d1, in, size, sink_put, &s1);
	r2 = pxp_dechunk(&d2, in, cut, sink_put, &s2);
	if (r2 == 0)
		r2 = pxp_dechunk(&d2, in + cut, size - cut, sink_put, &s2);
	FUZZ_CHECK(r1 >= -1 && r1 <= 1);
	/* Fed whole or in two pieces, the body decodes the same. */
	FUZZ_CHECK(r1 == r2);
	if (r1 >= 0)
		FUZZ_CHECK(s1.len == s2.len && memcmp(s1.out, s2.out, s1.len) == 0);
out:
	free(s1.out);
	free(s2.out);
}

static void
request_headers(const uint8_t *data, size_t size)
{
	struct fuzz_fields ff;

	if (fuzz_split(data, size, FUZZ_MAX_FIELDS, &ff) < 0)
		return;
	for (size_t k = 0; k < FUZZ_MAX_FIELDS; k++) {
		char *line = ff.f[k], *colon = strchr(line, ':');
		const char *value = colon ? colon + 1 : "";
		int v;

		if (colon)
			*colon = '\0';
		v = pxp_header_check(line, value);
		FUZZ_CHECK(v >= -1 && v <= 1);
		if (v >= 0)
			FUZZ_CHECK(strpbrk(line, "\r\n:") == NULL &&
			    strpbrk(value, "\r\n") == NULL);
		if (v == 1)
			FUZZ_CHECK(!pxp_hop_by_hop(line) ||
			    strcasecmp(line, "content-length") == 0);
	}
	free(ff.buf);
}

/* A kept cookie is no longer than it came and has no Domain attribute
 * left: filtered again, even for no host at all, it stays as it is. */
static void
set_cookie(const uint8_t *data, size_t size)
{
	static const char host[] = "8080-sbx-a.preview.test:8080";
	char *in = fuzz_dup((const char *)data, size < 8192 ? size : 8192);
	char *out = NULL, *again = NULL;
	size_t n;
	enum pvc_verdict v;

	if (in == NULL)
		return;
	n = strlen(in) + 1;
	out = malloc(n);
	again = malloc(n);
	if (out == NULL || again == NULL)
		goto done;
	v = pvc_filter(in, host, out, n);
	FUZZ_CHECK(v == PVC_KEEP || v == PVC_DROP);
	if (v == PVC_KEEP) {
		FUZZ_CHECK(strlen(out) < n);
		FUZZ_CHECK(pvc_filter(out, NULL, again, n) == PVC_KEEP);
		FUZZ_CHECK(strcmp(out, again) == 0);
	}
done:
	free(in);
	free(out);
	free(again);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	switch (data[0] % 3) {
	case 0:
		heads(data + 2, size - 2, data[1]);
		break;
	case 1:
		chunked(data + 2, size - 2, data[1]);
		break;
	default:
		if (data[1] == 'c')
			set_cookie(data + 2, size - 2);
		else
			request_headers(data + 2, size - 2);
		break;
	}
	return 0;
}
