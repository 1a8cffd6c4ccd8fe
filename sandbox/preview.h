/* preview.h - preview host names, URLs and private-preview credentials
 * (preview_). Pure functions: the proxy and expose_port share them and
 * they are unit-tested directly.
 *
 * A preview host is <port>-<sandbox_id>.<AAS_PREVIEW_DOMAIN>. A private
 * preview accepts the token (x-aas-preview-token header), or a signed URL
 * (?aas_preview_exp=<unix>&aas_preview_sig=<hex>), or the cookie a signed
 * URL sets; signatures are HMAC-SHA256 keyed by the token's hash, so only
 * the hash is stored. */
#ifndef AAS_PREVIEW_H
#define AAS_PREVIEW_H

#include <stddef.h>
#include <time.h>

#define PREVIEW_TOKEN_HEADER "x-aas-preview-token"
/* The private-preview cookie. Under https its name carries the __Host-
 * prefix, so the browser keeps it Secure, Path=/ and host-only: no other
 * preview host (another sandbox's page, its scripts or its Set-Cookie)
 * can set or shadow it. Plain-http previews (development) cannot use the
 * prefix, which needs Secure, and use the bare name. */
#define PREVIEW_COOKIE "aas_preview"
#define PREVIEW_COOKIE_HOST "__Host-aas_preview"
#define PREVIEW_Q_EXP "aas_preview_exp"
#define PREVIEW_Q_SIG "aas_preview_sig"
#define PREVIEW_ID_MAX 32
#define PREVIEW_SIG_HEX 64
#define PREVIEW_ACCOUNT_MAX 36 /* an account id (uuid text) */

/* Whether `host` (a Host header) lies under `domain`: 1 and the label in
 * front of it when so. Comparison ignores case. */
int preview_under_domain(const char *host, const char *domain, char *label, size_t n);
/* Splits a label "<port>-<sandbox_id>"; -1 when it is not one. */
int preview_parse_label(const char *label, int *port, char *id, size_t n);
int preview_url(const char *scheme, const char *domain, const char *id, int port, char *out,
    size_t n);
/* Hex HMAC-SHA256(token_hash, "<id>:<port>:<exp>") into out (65 bytes). */
int preview_sign(const char *token_hash, const char *id, int port, long long exp, char *out,
    size_t n);
/* 1 when sig is the signature for exp and exp is not past `now`. */
int preview_sig_valid(const char *token_hash, const char *id, int port, const char *exp,
    const char *sig, time_t now);
/* Finds name=value in a query string (no decoding: the values used here
 * are digits and hex). 1 when found. */
int preview_query_get(const char *query, const char *name, char *out, size_t n);
/* The query string without the signature parameters (for the upstream). */
void preview_query_strip(const char *query, char *out, size_t n);
/* Finds a cookie's value in a Cookie header. 1 when found. */
int preview_cookie_get(const char *header, const char *name, char *out, size_t n);
/* Like preview_cookie_get, from *pos on (NULL: the start); *pos moves past
 * the cookie found, so a caller can try every cookie of one name. */
int preview_cookie_next(const char *header, const char *name, const char **pos, char *out,
    size_t n);
/* The cookie's name for a preview scheme ("https" or "http"). */
const char *preview_cookie_name(const char *scheme);
/* The Set-Cookie value a signed URL answers with (exp and sig as in the
 * URL, max_age in seconds). -1 when it does not fit. */
int preview_cookie_value(const char *scheme, const char *exp, const char *sig, long long max_age,
    char *out, size_t n);
/* An upstream's Set-Cookie value without any Domain attribute: the cookie
 * stays on the one preview host that set it. -1 when it does not fit. */
int preview_set_cookie_strip_domain(const char *in, char *out, size_t n);

/* What the preview resolver decides for one proxied request. */
struct preview_route {
	int status;                /* 0: proxy to upstream_port; else answer it */
	char message[256];         /* shown on the error page */
	int upstream_port;         /* on upstream_address */
	int guest_port;            /* the port inside the sandbox */
	char upstream_address[64]; /* IPv4: the host's private address, or loopback */
	char set_cookie[320];      /* added to the proxied response when set */
	/* Whose preview it is, for the proxy's per-sandbox and per-account
	 * connection caps and for closing them (status 0 only). */
	char sandbox_id[PREVIEW_ID_MAX + 1];
	char account_id[PREVIEW_ACCOUNT_MAX + 1];
};

/* The parts of a request the resolver may look at. */
struct preview_ask {
	const char *host;   /* Host header */
	const char *token;  /* x-aas-preview-token, or NULL */
	const char *cookie; /* Cookie header, or NULL */
	const char *query;  /* raw query string, or NULL */
};

#endif
