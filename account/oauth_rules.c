/* oauth_rules.c - PKCE, redirect URIs and client metadata (oauth_). */
#include "account/oauth_rules.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <string.h>
#include <strings.h>

#include "base/fmt.h"

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int
unreserved(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	    ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

int
oauth_challenge_valid(const char *challenge)
{
	if (challenge == NULL || strlen(challenge) != 43)
		return 0;
	for (const char *p = challenge; *p; p++)
		if (strchr(b64url, *p) == NULL)
			return 0;
	return 1;
}

int
oauth_pkce_ok(const char *verifier, const char *challenge)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	char enc[44];
	size_t n = verifier ? strlen(verifier) : 0, o = 0;
	unsigned int acc = 0;
	int bits = 0, diff = 0;

	if (n < 43 || n > 128 || !oauth_challenge_valid(challenge))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!unreserved(verifier[i]))
			return 0;
	SHA256((const unsigned char *)verifier, n, md);
	/* 32 bytes are 43 base64url characters without padding. */
	for (size_t i = 0; i < sizeof(md); i++) {
		acc = (acc << 8) | md[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			enc[o++] = b64url[(acc >> bits) & 63];
		}
	}
	if (bits > 0)
		enc[o++] = b64url[(acc << (6 - bits)) & 63];
	enc[o] = '\0';
	for (size_t i = 0; i < 43; i++)
		diff |= enc[i] ^ challenge[i];
	OPENSSL_cleanse(md, sizeof(md));
	return diff == 0;
}

/* The host part of an http(s) URI into out ("[::1]" keeps its brackets),
 * with where the port (or path) starts; -1 when there is no authority or
 * it holds a user. */
static int
uri_host(const char *uri, const char *scheme, char *out, size_t n, const char **after)
{
	size_t sl = strlen(scheme), hl;
	const char *h, *end;

	if (strncasecmp(uri, scheme, sl) != 0 || strncmp(uri + sl, "://", 3) != 0)
		return -1;
	h = uri + sl + 3;
	end = h + strcspn(h, "/?#");
	if (memchr(h, '@', (size_t)(end - h)) != NULL)
		return -1;
	if (*h == '[') {
		const char *close = memchr(h, ']', (size_t)(end - h));

		if (close == NULL)
			return -1;
		hl = (size_t)(close - h) + 1;
	} else {
		hl = strcspn(h, ":/?#");
	}
	if (hl == 0 || hl >= n)
		return -1;
	memcpy(out, h, hl);
	out[hl] = '\0';
	*after = h + hl;
	return 0;
}

static int
loopback_host(const char *host)
{
	struct in_addr a4;

	if (strcmp(host, "[::1]") == 0 || strcasecmp(host, "localhost") == 0)
		return 1;
	return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* Printable ASCII without space: what a URI is made of here. */
static int
uri_chars_ok(const char *uri)
{
	size_t n = strlen(uri);

	if (n == 0 || n > OAUTH_URI_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)uri[i] <= ' ' || (unsigned char)uri[i] >= 127 || uri[i] == '"' ||
		    uri[i] == '<' || uri[i] == '>' || uri[i] == '\\')
			return 0;
	return strchr(uri, '#') == NULL;
}

int
oauth_redirect_valid(const char *uri)
{
	char host[300];
	const char *after, *colon;

	if (uri == NULL || !uri_chars_ok(uri))
		return 0;
	if (uri_host(uri, "https", host, sizeof(host), &after) == 0)
		return 1;
	if (uri_host(uri, "http", host, sizeof(host), &after) == 0)
		return loopback_host(host);
	/* A private-use scheme (RFC 8252 7.1): reverse domain, so a dot. */
	colon = strchr(uri, ':');
	if (colon == NULL || colon == uri || memchr(uri, '.', (size_t)(colon - uri)) == NULL)
		return 0;
	for (const char *p = uri; p < colon; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			(*p >= '0' && *p <= '9') || *p == '.' || *p == '+' || *p == '-'))
			return 0;
	return strncasecmp(uri, "javascript:", 11) != 0 && strncasecmp(uri, "data:", 5) != 0;
}

/* Equal but for the port of a loopback http URI. */
static int
loopback_same(const char *reg, const char *uri)
{
	char h1[300], h2[300];
	const char *a1, *a2;

	if (uri_host(reg, "http", h1, sizeof(h1), &a1) < 0 ||
	    uri_host(uri, "http", h2, sizeof(h2), &a2) < 0 || !loopback_host(h1) ||
	    strcmp(h1, h2) != 0)
		return 0;
	if (*a1 == ':')
		a1 += strspn(a1 + 1, "0123456789") + 1;
	if (*a2 == ':')
		a2 += strspn(a2 + 1, "0123456789") + 1;
	return strcmp(a1, a2) == 0;
}

int
oauth_redirect_registered(const struct oauth_client *cl, const char *uri)
{
	if (uri == NULL || !oauth_redirect_valid(uri))
		return 0;
	for (int i = 0; i < cl->n_redirects; i++)
		if (strcmp(cl->redirects[i], uri) == 0 || loopback_same(cl->redirects[i], uri))
			return 1;
	return 0;
}

int
oauth_client_id_is_url(const char *id, int allow_http_loopback)
{
	char host[300];
	const char *after, *path;
	size_t pl;

	if (id == NULL || !uri_chars_ok(id) || strlen(id) > OAUTH_CLIENT_ID_MAX)
		return 0;
	if (uri_host(id, "https", host, sizeof(host), &after) < 0 &&
	    !(allow_http_loopback && uri_host(id, "http", host, sizeof(host), &after) == 0 &&
		loopback_host(host)))
		return 0;
	path = strchr(after, '/');
	if (path == NULL || path[1] == '\0' || strchr(after, '?') != NULL)
		return 0;
	pl = strlen(path);
	/* Dot segments, also percent-encoded ones, would name another path. */
	if (strcasestr(path, "%2e") != NULL)
		return 0;
	return strstr(path, "/./") == NULL && strstr(path, "/../") == NULL &&
	    strcmp(path + pl - 2, "/.") != 0 && (pl < 3 || strcmp(path + pl - 3, "/..") != 0);
}

/* 1 at a UTF-8 format character a name could hide behind: bidi
 * controls (U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), zero-width
 * ones (U+200B-U+200D, U+2060-U+2064) and U+FEFF. */
static int
format_char(const unsigned char *p)
{
	if (p[0] == 0xe2 && p[1] == 0x80)
		return (p[2] >= 0x8b && p[2] <= 0x8f) || (p[2] >= 0xaa && p[2] <= 0xae);
	if (p[0] == 0xe2 && p[1] == 0x81)
		return (p[2] >= 0xa0 && p[2] <= 0xa4) || (p[2] >= 0xa6 && p[2] <= 0xa9);
	return p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf;
}

/* A name shown on the consent page: 1 to max bytes, no control or
 * format characters (JSON text is valid UTF-8 already). */
static int
text_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < ' ' || s[i] == 127 ||
		    (i + 2 < n && format_char((const unsigned char *)s + i)))
			return 0;
	return 1;
}

/* 1 when the string array `v` (or absent) holds `must` and only `allowed`. */
static int
only_values(json_t *v, const char *must, const char *const *allowed)
{
	size_t i;
	json_t *x;
	int has = 0;

	if (v == NULL)
		return 1;
	if (!json_is_array(v) || json_array_size(v) > 8)
		return 0;
	json_array_foreach(v, i, x) {
		const char *s = json_string_value(x);
		int ok = 0;

		if (s == NULL)
			return 0;
		for (const char *const *a = allowed; *a; a++)
			ok |= strcmp(s, *a) == 0;
		if (!ok)
			return 0;
		has |= strcmp(s, must) == 0;
	}
	return has;
}

int
oauth_client_parse(const char *client_id, json_t *doc, struct oauth_client *out, struct err *e)
{
	static const char *const grants[] = { "authorization_code", "refresh_token", NULL };
	static const char *const responses[] = { "code", NULL };
	const char *name, *uri, *method;
	json_t *redirects, *r;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(doc)) {
		err_set_at(e, ERR_INVALID, "invalid_client_metadata",
		    "the metadata is not a JSON object");
		return -1;
	}
	if (client_id != NULL) {
		const char *id = json_string_value(json_object_get(doc, "client_id"));

		if (id == NULL || strcmp(id, client_id) != 0) {
			err_set_at(e, ERR_INVALID, "invalid_client_metadata",
			    "the document's client_id is not the URL it was fetched from");
			return -1;
		}
		if (fmt_err(e, "client_id", out->id, sizeof(out->id), "%s", client_id) < 0)
			return -1;
	}
	name = json_string_value(json_object_get(doc, "client_name"));
	if (json_object_get(doc, "client_name") != NULL &&
	    (name == NULL || !text_ok(name, OAUTH_NAME_MAX))) {
		err_set_at(e, ERR_INVALID, "invalid_client_metadata",
		    "client_name must be text of 1 to %d characters", OAUTH_NAME_MAX);
		return -1;
	}
	uri = json_string_value(json_object_get(doc, "client_uri"));
	if (json_object_get(doc, "client_uri") != NULL &&
	    (uri == NULL || !uri_chars_ok(uri) || strncmp(uri, "https://", 8) != 0)) {
		err_set_at(e, ERR_INVALID, "invalid_client_metadata",
		    "client_uri must be an https URL");
		return -1;
	}
	method = json_string_value(json_object_get(doc, "token_endpoint_auth_method"));
	if (client_id != NULL && method != NULL && strcmp(method, "none") != 0) {
		/* A document is public: it cannot carry a secret. */
		err_set_at(e, ERR_INVALID, "invalid_client_metadata",
		    "token_endpoint_auth_method must be \"none\"");
		return -1;
	}
	if (!only_values(json_object_get(doc, "grant_types"), "authorization_code", grants) ||
	    !only_values(json_object_get(doc, "response_types"), "code", responses)) {
		err_set_at(e, ERR_INVALID, "invalid_client_metadata",
		    "grant_types may hold authorization_code and refresh_token, response_types only code");
		return -1;
	}
	redirects = json_object_get(doc, "redirect_uris");
	if (!json_is_array(redirects) || json_array_size(redirects) == 0 ||
	    json_array_size(redirects) > OAUTH_REDIRECTS_MAX) {
		err_set_at(e, ERR_INVALID, "invalid_redirect_uri",
		    "redirect_uris must list 1 to %d URIs", OAUTH_REDIRECTS_MAX);
		return -1;
	}
	json_array_foreach(redirects, i, r) {
		const char *s = json_string_value(r);

		if (s == NULL || !oauth_redirect_valid(s)) {
			err_set_at(e, ERR_INVALID, "invalid_redirect_uri",
			    "redirect_uris[%zu] must be https, http on a loopback address, or an app's "
			    "own scheme, without a fragment",
			    i);
			return -1;
		}
		if (fmt_err(e, "redirect URI", out->redirects[out->n_redirects++],
			OAUTH_URI_MAX + 1, "%s", s) < 0)
			return -1;
	}
	if (fmt_err(e, "client_name", out->name, sizeof(out->name), "%s",
		name ? name : "an unnamed application") < 0)
		return -1;
	return fmt_err(e, "client_uri", out->uri, sizeof(out->uri), "%s", uri ? uri : "");
}

json_t *
oauth_client_redirects_json(const struct oauth_client *cl)
{
	json_t *a = json_array();

	for (int i = 0; a != NULL && i < cl->n_redirects; i++)
		if (json_array_append_new(a, json_string(cl->redirects[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

int
oauth_access_shaped(const char *s, size_t len)
{
	if (len != OAUTH_TOKEN_LEN || strncmp(s, OAUTH_ACCESS_PREFIX, 7) != 0)
		return 0;
	for (size_t i = 7; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int
oauth_scope_ok(const char *scope)
{
	const char *p = scope;

	if (strlen(scope) > OAUTH_SCOPE_MAX)
		return 0;
	while (*p) {
		size_t n = strcspn(p, " ");

		if (n > 0 && !(n == strlen(OAUTH_SCOPE) && strncmp(p, OAUTH_SCOPE, n) == 0))
			return 0;
		p += n;
		p += strspn(p, " ");
	}
	return 1;
}
