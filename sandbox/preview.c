/* preview.c - preview host names and signed URLs. */
#include "sandbox/preview.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/fmt.h"

int
preview_under_domain(const char *host, const char *domain, char *label, size_t n)
{
	size_t hl, dl;
	const char *dot;

	if (host == NULL || domain == NULL)
		return 0;
	hl = strlen(host);
	dl = strlen(domain);
	if (hl < dl + 2 || host[hl - dl - 1] != '.' || strcasecmp(host + hl - dl, domain) != 0)
		return 0;
	/* Exactly one label in front: a.b.<domain> is not a preview host. */
	dot = memchr(host, '.', hl - dl - 1);
	if (dot != NULL || hl - dl - 1 >= n) {
		label[0] = '\0'; /* under the domain, but names no port */
		return 1;
	}
	memcpy(label, host, hl - dl - 1);
	label[hl - dl - 1] = '\0';
	for (char *p = label; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return 1;
}

int
preview_parse_label(const char *label, int *port, char *id, size_t n)
{
	const char *dash = strchr(label, '-');
	long v = 0;
	size_t il;

	if (dash == NULL || dash == label || dash - label > 5)
		return -1;
	for (const char *p = label; p < dash; p++) {
		if (!isdigit((unsigned char)*p))
			return -1;
		v = v * 10 + (*p - '0');
	}
	if (label[0] == '0' || v < 1 || v > 65535)
		return -1;
	il = strlen(dash + 1);
	if (il == 0 || il >= n || il > PREVIEW_ID_MAX)
		return -1;
	for (const char *p = dash + 1; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-')
			return -1;
	*port = (int)v;
	memcpy(id, dash + 1, il + 1);
	return 0;
}

int
preview_url(const char *scheme, const char *domain, const char *id, int port, char *out, size_t n)
{
	return fmt_buf(out, n, "%s://%d-%s.%s/", scheme, port, id, domain);
}

int
preview_sign(const char *token_hash, const char *id, int port, long long exp, char *out, size_t n)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mlen = 0;
	char msg[128];

	if (fmt_buf(msg, sizeof(msg), "%s:%d:%lld", id, port, exp) < 0 || n < PREVIEW_SIG_HEX + 1)
		return -1;
	if (HMAC(EVP_sha256(), token_hash, (int)strlen(token_hash), (const unsigned char *)msg,
		strlen(msg), mac, &mlen) == NULL ||
	    mlen != 32)
		return -1;
	for (unsigned i = 0; i < mlen; i++)
		if (fmt_buf(out + 2 * i, 3, "%02x", mac[i]) < 0)
			return -1;
	return 0;
}

int
preview_sig_valid(const char *token_hash, const char *id, int port, const char *exp,
    const char *sig, time_t now)
{
	char want[PREVIEW_SIG_HEX + 1];
	long long e = 0;

	if (exp == NULL || sig == NULL || *exp == '\0' || strlen(exp) > 12 ||
	    strlen(sig) != PREVIEW_SIG_HEX)
		return 0;
	for (const char *p = exp; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return 0;
		e = e * 10 + (*p - '0');
	}
	if (e < (long long)now)
		return 0;
	if (preview_sign(token_hash, id, port, e, want, sizeof(want)) < 0)
		return 0;
	return CRYPTO_memcmp(want, sig, PREVIEW_SIG_HEX) == 0;
}

/* Finds name=value in a list of pairs separated by `sep` (spaces after a
 * separator are skipped, as in Cookie headers), from *pos on; *pos moves
 * past the pair found. 1 when found and it fits. */
static int
pair_next(const char *list, char sep, const char *name, const char **pos, char *out, size_t n)
{
	size_t nl = strlen(name);
	const char seps[2] = { sep, '\0' };

	for (const char *p = *pos ? *pos : list; p && *p;) {
		while (*p == ' ' || *p == sep)
			p++;
		size_t len = strcspn(p, seps);
		if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
			size_t vl = len - nl - 1;
			*pos = p + len;
			if (vl < n) {
				memcpy(out, p + nl + 1, vl);
				out[vl] = '\0';
				return 1;
			}
		}
		p += len;
	}
	return 0;
}

static int
pair_get(const char *list, char sep, const char *name, char *out, size_t n)
{
	const char *pos = NULL;

	return pair_next(list, sep, name, &pos, out, n);
}

int
preview_query_get(const char *query, const char *name, char *out, size_t n)
{
	return pair_get(query, '&', name, out, n);
}

static int
is_sig_param(const char *p, size_t len)
{
	static const char *const names[] = { PREVIEW_Q_EXP "=", PREVIEW_Q_SIG "=" };

	for (size_t i = 0; i < 2; i++)
		if (len >= strlen(names[i]) && strncmp(p, names[i], strlen(names[i])) == 0)
			return 1;
	return 0;
}

void
preview_query_strip(const char *query, char *out, size_t n)
{
	size_t j = 0;

	if (n == 0)
		return;
	out[0] = '\0';
	for (const char *p = query; p && *p;) {
		size_t len = strcspn(p, "&");
		if (len > 0 && !is_sig_param(p, len) && j + len + 2 < n) {
			if (j > 0)
				out[j++] = '&';
			memcpy(out + j, p, len);
			j += len;
			out[j] = '\0';
		}
		p += len;
		if (*p == '&')
			p++;
	}
}

int
preview_cookie_get(const char *header, const char *name, char *out, size_t n)
{
	return pair_get(header, ';', name, out, n);
}

int
preview_cookie_next(const char *header, const char *name, const char **pos, char *out, size_t n)
{
	return pair_next(header, ';', name, pos, out, n);
}

const char *
preview_cookie_name(const char *scheme)
{
	return scheme && strcmp(scheme, "https") == 0 ? PREVIEW_COOKIE_HOST : PREVIEW_COOKIE;
}

int
preview_cookie_value(const char *scheme, const char *exp, const char *sig, long long max_age,
    char *out, size_t n)
{
	int secure = scheme && strcmp(scheme, "https") == 0;

	return fmt_buf(out, n, "%s=%s.%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Lax%s",
	    preview_cookie_name(scheme), exp, sig, max_age, secure ? "; Secure" : "");
}

/* Whether the attribute at p (len bytes, spaces trimmed in front) is a
 * Domain attribute, with or without a value. */
static int
is_domain_attr(const char *p, size_t len)
{
	size_t i = 6;

	if (len < 6 || strncasecmp(p, "domain", 6) != 0)
		return 0;
	while (i < len && (p[i] == ' ' || p[i] == '\t'))
		i++;
	return i == len || p[i] == '=';
}

int
preview_set_cookie_strip_domain(const char *in, char *out, size_t n)
{
	size_t j = 0, len;
	int first = 1;

	if (n == 0)
		return -1;
	out[0] = '\0';
	for (const char *p = in; *p;) {
		len = strcspn(p, ";");
		const char *a = p;
		size_t al = len;
		while (al > 0 && (*a == ' ' || *a == '\t')) {
			a++;
			al--;
		}
		/* The first part is name=value; only attributes are dropped. */
		if (first || !is_domain_attr(a, al)) {
			if (j + len + 1 >= n)
				return -1;
			if (!first)
				out[j++] = ';';
			memcpy(out + j, p, len);
			j += len;
			out[j] = '\0';
		}
		first = 0;
		p += len;
		if (*p == ';')
			p++;
	}
	return 0;
}
