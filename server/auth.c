/* auth.c - header parsing for API keys. */
#include "server/auth.h"

#include <string.h>
#include <strings.h>

#include "base/fmt.h"
#include "base/keys.h"
#include "server/hlim.h"
#include "server/authsrv.h"
#include "account/accounts.h"
#include "service/app.h"
#include "account/oauth.h"

static const char *
trim(const char *s, size_t *len)
{
	size_t n = strlen(s);

	while (n > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	*len = n;
	return s;
}

enum auth_found
auth_extract(const char *authorization, const char *x_api_key, const char **key, size_t *keylen,
    const char **why)
{
	const char *bearer = NULL, *xkey = NULL;
	size_t blen = 0, xlen = 0;

	*key = NULL;
	*keylen = 0;
	*why = NULL;
	if (authorization != NULL) {
		size_t n;
		const char *a = trim(authorization, &n);

		if (n == 6 && strncasecmp(a, "bearer", 6) == 0) {
			*why = "the Authorization header has no key after 'Bearer'";
			return AUTH_MALFORMED;
		}
		if (n < 7 || strncasecmp(a, "bearer", 6) != 0 || (a[6] != ' ' && a[6] != '\t')) {
			*why = "the Authorization header must be 'Bearer <key>'";
			return AUTH_MALFORMED;
		}
		a += 6;
		n -= 6;
		while (n > 0 && (*a == ' ' || *a == '\t')) {
			a++;
			n--;
		}
		if (n == 0) {
			*why = "the Authorization header has no key after 'Bearer'";
			return AUTH_MALFORMED;
		}
		bearer = a;
		blen = n;
	}
	if (x_api_key != NULL) {
		xkey = trim(x_api_key, &xlen);
		if (xlen == 0) {
			*why = "the x-api-key header is empty";
			return AUTH_MALFORMED;
		}
	}
	if (bearer && xkey && (blen != xlen || memcmp(bearer, xkey, blen) != 0)) {
		*why = "Authorization and x-api-key carry different keys";
		return AUTH_MALFORMED;
	}
	if (bearer) {
		*key = bearer;
		*keylen = blen;
		return AUTH_KEY;
	}
	if (xkey) {
		*key = xkey;
		*keylen = xlen;
		return AUTH_KEY;
	}
	return AUTH_NO_KEY;
}

void
auth_work_key_addr(struct http_req *req, char *out, size_t n)
{
	const char *real = http_header(req, "X-Real-IP");
	char addr[HLIM_GROUP_MAX + 1], group[HLIM_GROUP_MAX + 1];

	/* "unknown": the label every client of no known address, or of an
	 * address too long to count, shares. */
	if (http_client_addr(req, addr, sizeof(addr)) < 0)
		fmt_cut(addr, sizeof(addr), "unknown");
	/* Behind a reverse proxy on this machine, the client it names. */
	if (real && http_config(req)->trust_x_real_ip &&
	    (strcmp(addr, "127.0.0.1") == 0 || strcmp(addr, "::1") == 0) &&
	    fmt_buf(addr, sizeof(addr), "%s", real) < 0)
		fmt_cut(addr, sizeof(addr), "unknown");
	hlim_group_text(addr, group, sizeof(group));
	if (fmt_buf(out, n, "ip:%s", group) < 0)
		fmt_cut(out, n, "ip:unknown");
}

void
auth_work_key(struct http_req *req, char *out, size_t n)
{
	const char *acct = http_account(req);

	if (acct == NULL)
		auth_work_key_addr(req, out, n);
	else if (fmt_buf(out, n, "a:%s", acct) < 0)
		fmt_cut(out, n, "a:unknown"); /* one label for every id too long */
}

void
auth_defer(struct http_req *req, http_deferred_fn fn, void *arg, void (*drop)(void *arg))
{
	char key[AUTH_WORK_KEY_LEN + 1];

	auth_work_key(req, key, sizeof(key));
	http_defer_as(req, key, fn, arg, drop);
}

void
auth_reply_unauthorized(struct http_req *req, enum auth_found found, const char *why,
    const char *dashboard_url)
{
	const char *dash = dashboard_url ? dashboard_url : "";
	char msg[CONFIG_STR_MAX + 300];

	if (found == AUTH_NO_KEY)
		fmt_cut(msg, sizeof(msg),
		    "this endpoint needs an API key. Send it on every "
		    "request in the header 'Authorization: Bearer <key>' or 'x-api-key: <key>' "
		    "(never in the URL). %s%s%s",
		    *dash ? "Get a key at " :
			    "Keys are issued by the operator of this service (aasctl key create).",
		    dash, *dash ? "." : "");
	else if (found == AUTH_MALFORMED && why)
		fmt_cut(msg, sizeof(msg), "%s", why);
	else
		fmt_cut(msg, sizeof(msg), "invalid or revoked API key.%s%s%s",
		    *dash ? " Get a new one at " : "", dash, *dash ? "." : "");
	http_add_header(req, "WWW-Authenticate",
	    found == AUTH_NO_KEY ?
		"Bearer" :
		"Bearer error=\"invalid_token\", error_description=\"the API key is invalid or revoked\"");
	http_reply_error(req, 401, "unauthorized", msg);
}

void
auth_reply_refused(struct http_req *req, const struct config *cfg, const struct err *e)
{
	const char *key, *why;
	size_t keylen;
	char challenge[CONFIG_STR_MAX + 800], meta[CONFIG_STR_MAX + 120];

	/* The OAuth challenge only where tokens are accepted: elsewhere a
	 * client that refreshed would only be refused again. */
	if (auth_extract(http_header(req, "Authorization"), http_header(req, "x-api-key"), &key,
		&keylen, &why) != AUTH_KEY ||
	    !oauth_access_shaped(key, keylen) || !cfg->oauth ||
	    strcmp(http_path(req), "/v1/mcp") != 0) {
		if (e->kind == ERR_UNAUTHORIZED && oauth_access_shaped(key, keylen)) {
			http_add_header(req, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
			http_reply_error(req, 401, "unauthorized", e->msg);
			return;
		}
		auth_reply_unauthorized(req, AUTH_KEY, NULL, cfg->dashboard_url);
		return;
	}
	/* The message is ours (never the token), quotes left out; a challenge
	 * that does not fit goes without the metadata. */
	if (authsrv_challenge(cfg, meta, sizeof(meta)) == 0 &&
	    fmt_buf(challenge, sizeof(challenge),
		"%s, error=\"invalid_token\", error_description=\"%s\"", meta,
		e->msg[0] && strchr(e->msg, '"') == NULL ? e->msg : "invalid access token") == 0)
		http_add_header(req, "WWW-Authenticate", challenge);
	else
		http_add_header(req, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
	http_reply_error(req, 401, "unauthorized", e->msg[0] ? e->msg : "invalid access token");
}

int
auth_resolve(struct app *app, const char *path, const char *key, size_t keylen, char *account,
    size_t n, struct err *e)
{
	char id[ACCT_ID_LEN + 1], resource[CONFIG_STR_MAX + 16];

	if (n < sizeof(id)) {
		err_set(e, ERR_INTERNAL, "account id buffer too small");
		return -1;
	}
	if (oauth_access_shaped(key, keylen)) {
		if (!app->cfg.oauth || path == NULL || strcmp(path, "/v1/mcp") != 0) {
			err_set(e, ERR_UNAUTHORIZED,
			    "an OAuth access token is for /v1/mcp only; use an API key here");
			return -1;
		}
		/* The audience: this service's /v1/mcp, checked on every call. */
		if (authsrv_resource(&app->cfg, resource, sizeof(resource), e) < 0 ||
		    oauth_resolve_access(app->db, key, keylen, resource, id, e) < 0)
			return -1;
	} else if (acct_resolve_key_cached(app->db, app->keys, key, keylen, id, e) < 0) {
		return -1;
	}
	memcpy(account, id, sizeof(id));
	return 0;
}

static int
hook_peek(void *ctx, const char *key, size_t keylen, char *account, size_t n)
{
	struct app *app = ctx;
	char id[ACCT_ID_LEN + 1];

	/* Tokens are not cached: expiry and revocation count at once. */
	if (n < sizeof(id) || !acct_key_cache_peek(app->keys, key, keylen, id))
		return 0;
	memcpy(account, id, sizeof(id));
	return 1;
}

static int
hook_resolve(void *ctx, const char *path, const char *key, size_t keylen, char *account, size_t n,
    struct err *e)
{
	return auth_resolve(ctx, path, key, keylen, account, n, e);
}

void
auth_hooks(struct app *app, struct http_auth *out)
{
	out->peek = hook_peek;
	out->resolve = hook_resolve;
	out->ctx = app;
}
